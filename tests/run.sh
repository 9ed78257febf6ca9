#!/usr/bin/env bash
# Run tests (executables: unit test binaries or e2e scripts), each under a
# timeout, and print one line per test and a closing line
# "N passed, N failed, N skipped". Exit code 0 when nothing failed.
#
#   tests/run.sh [-j N] build/tests/test_proto tests/e2e/10-nbdcopy.sh ...
#
# -j N runs up to N tests at once (default 1; make check gives
# RBLK_TEST_JOBS, default 2): every test has its own directory, ports
# from the kernel and its own target, and most wait more than they
# compute. A script with a line "# runs-alone: WHY" (it measures rates or
# times against a budget, or loads the whole machine) runs after the
# others, with nothing beside it. (A test that only takes CPU, such as
# the time-boxed fuzzers, fsx or the power cuts' guests, shares: it slows
# its neighbour, which then has no budget to miss.) Lines print as tests
# finish.
#
# Exit codes of a test: 0 pass, 77 skip, anything else fail (124: timeout).
# RBLK_TEST_TIMEOUT (seconds, default 300) bounds each test. A failing
# test's output is printed; passing tests' output goes to build/test-logs/.
set -u

jobs=1
if [ "${1:-}" = -j ]; then
	jobs=$2
	shift 2
fi
case $jobs in '' | *[!0-9]* | 0) echo "run.sh: -j wants a positive number" >&2; exit 2 ;; esac
timeout_s=${RBLK_TEST_TIMEOUT:-300}
logdir=${RBLK_TEST_LOGS:-build/test-logs}
mkdir -p "$logdir"
pass=0 fail=0 skip=0
failed=()
declare -A name_of=() start_of=()

# start T: run test T in the background under its timeout
start()
{
	local t=$1 name
	name=$(basename "$t")
	timeout -k 10 "$timeout_s" "$t" >"$logdir/$name.log" 2>&1 </dev/null &
	name_of[$!]=$name
	start_of[$!]=$(date +%s.%N)
}

# finished PID RC: one line for the test PID ran, and the counts
finished()
{
	local pid=$1 rc=$2 name secs log why
	name=${name_of[$pid]}
	log=$logdir/$name.log
	secs=$(awk -v s="${start_of[$pid]}" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	unset "name_of[$pid]" "start_of[$pid]"
	case $rc in
	0)
		pass=$((pass + 1))
		printf 'PASS  %-40s %6ss\n' "$name" "$secs"
		;;
	77)
		skip=$((skip + 1))
		printf 'SKIP  %-40s %6ss  (%s)\n' "$name" "$secs" \
			"$(grep -m1 -i 'skip' "$log" | cut -c1-80)"
		;;
	*)
		fail=$((fail + 1))
		failed+=("$name")
		[ "$rc" -eq 124 ] && why="timed out after ${timeout_s}s" || why="exit $rc"
		printf 'FAIL  %-40s %6ss  (%s)\n' "$name" "$secs" "$why"
		echo "---- output of $name (last 60 lines; full log: $log) ----"
		tail -n 60 "$log"
		echo "---- end of $name ----"
		;;
	esac
}

# reap_one: wait for any running test to end and report it
reap_one()
{
	local pid rc=0
	wait -n -p pid || rc=$?
	finished "$pid" "$rc"
}

shared=() alone=()
for t in "$@"; do
	if [ "$jobs" -gt 1 ] && [ -f "$t" ] && grep -q '^# runs-alone' "$t" 2>/dev/null; then
		alone+=("$t")
	else
		shared+=("$t")
	fi
done
for t in "${shared[@]}"; do
	while [ "${#name_of[@]}" -ge "$jobs" ]; do reap_one; done
	start "$t"
done
while [ "${#name_of[@]}" -gt 0 ]; do reap_one; done
for t in "${alone[@]}"; do
	start "$t"
	reap_one
done

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
