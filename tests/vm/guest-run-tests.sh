#!/bin/bash
# tests/vm/guest-run-tests.sh - runs INSIDE the test guest (run-test.sh starts
# it through run-vm.sh): runs guest tests one after the other, each under its
# own timeout, and records the outcome of each as it ends.
#
#   guest-run-tests.sh [-v] [-t DEFAULT_TIMEOUT] TEST...
#
# A test is an executable script; exit 0 = pass, 77 = skip, anything else =
# fail. A line "# vm-timeout: SECONDS" in it overrides the default timeout
# (RBLK_VM_TEST_TIMEOUT, else 300 s); under RBLK_SOAK=1 a line
# "# soak-timeout: SECONDS" does. Each test runs with cwd = the repo
# root, in its own process group, which is killed when the test ends.
# Environment: RBLK_VM_TEST_NAME, RBLK_VM_TEST_OUT (a directory on the host
# for the test's artifacts, $RBLK_VM_OUT/tests/NAME.d).
# Output: $RBLK_VM_OUT/tests/NAME.log per test, and one line per finished
# test in $RBLK_VM_OUT/results: "NAME PASS|FAIL|SKIP SECONDS [note]".
set -u

verbose=0
deftmo=${RBLK_VM_TEST_TIMEOUT:-300}
while [ $# -gt 0 ]; do
	case $1 in
	-v) verbose=1; shift ;;
	-t) deftmo=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done

OUT=${RBLK_VM_OUT:-/tmp/rblk-vm-out}
mkdir -p "$OUT/tests"
results=$OUT/results
: >"$results"

now() { read -r u _ </proc/uptime; echo "$u"; }

for t in "$@"; do
	name=$(basename "$t" .sh)
	log=$OUT/tests/$name.log
	tkey=vm-timeout
	[ "${RBLK_SOAK:-0}" = 1 ] && tkey=soak-timeout
	tmo=$(grep -m1 -oE "^# *$tkey: *[0-9]+" "$t" 2>/dev/null | grep -oE '[0-9]+$')
	tmo=${tmo:-$deftmo}
	echo "=== RUN   $name (timeout ${tmo}s)"
	if [ -x "$t" ]; then cmd=("$t"); else cmd=(bash "$t"); fi
	t0=$(now)
	# timeout(1) puts itself and the test in a new process group: on
	# expiry it signals the whole group; afterwards we kill what is left.
	mkdir -p "$OUT/tests/$name.d"
	RBLK_VM_TEST_NAME=$name RBLK_VM_TEST_OUT=$OUT/tests/$name.d timeout -k 10 "$tmo" "${cmd[@]}" >"$log" 2>&1 </dev/null &
	pid=$!
	tpid=
	if [ "$verbose" = 1 ]; then
		tail -n +1 -s 0.2 -f --pid="$pid" "$log" | sed "s/^/    /" &
		tpid=$!
	fi
	wait "$pid"
	rc=$?
	kill -KILL -- "-$pid" 2>/dev/null
	[ -n "$tpid" ] && wait "$tpid" 2>/dev/null
	t1=$(now)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
	note=
	case $rc in
	0) st=PASS ;;
	77) st=SKIP; note=$(grep -v '^[[:space:]]*$' "$log" | tail -n1 | cut -c1-120) ;;
	124 | 137) st=FAIL; note="timed out after ${tmo}s" ;;
	*) st=FAIL; note="exit $rc" ;;
	esac
	echo "$name $st $secs $note" >>"$results"
	if [ "$st" = FAIL ] && [ "$verbose" = 0 ]; then
		echo "--- last lines of $name.log:"
		tail -n 40 "$log" | sed 's/^/    /'
	fi
	printf '%-5s %s (%ss)%s\n' "$st" "$name" "$secs" "${note:+ - $note}"
	rmdir "$OUT/tests/$name.d" 2>/dev/null
done
exit 0
