#!/bin/bash
# tests/vm/run-test.sh - run guest tests (tests/vm/tests/NN-name.sh) in ONE
# throw-away QEMU guest (see run-vm.sh) and print a summary.
#
#   tests/vm/run-test.sh [options] [NAME...]
#
# NAME: a test file name with or without .sh (00-rxe), the part after the
# number (rxe), the number (00), or a path. No NAME: every test in
# tests/vm/tests/, in name order, less those marked "# soak-only" (their
# only form is long: make soak runs them).
#
# Options:
#   -v                    stream each test's output (else shown on failure)
#   --timeout-per-test S  default per-test timeout (300; a test can say
#                         "# vm-timeout: S" in a comment line)
#   --mem MB, --cpus N    guest size (2048, 2)
#   --out DIR             keep the logs in DIR (default: a temporary
#                         directory, removed when nothing failed)
#   --list                list the tests and exit
#
# Prints PASS/FAIL/SKIP per test with wall time and ends with the line
# "N passed, N failed, N skipped". Exit status 0 when none failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TDIR=$HERE/tests

verbose=0 pertest=${RBLK_VM_TEST_TIMEOUT:-300} mem=2048 cpus=2 out='' list=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-v) verbose=1; shift ;;
	--timeout-per-test) pertest=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--list) list=1; shift ;;
	-h | --help) usage ;;
	--) shift; break ;;
	-*) echo "run-test: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done

all=()
for f in "$TDIR"/[0-9]*.sh; do [ -e "$f" ] && all+=("$f"); done
if [ "$list" = 1 ]; then
	for f in "${all[@]}"; do basename "$f" .sh; done
	exit 0
fi

resolve() {
	local n=$1 f
	if [ -f "$n" ]; then (cd "$(dirname "$n")" && echo "$(pwd)/$(basename "$n")"); return; fi
	n=${n%.sh}
	for f in "$TDIR/$n.sh" "$TDIR"/[0-9]*-"$n".sh "$TDIR/$n"-*.sh; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
	return 1
}
tests=()
if [ $# -eq 0 ]; then
	# every test, less those whose only form is long ("# soak-only":
	# make soak runs them, named)
	for f in "${all[@]}"; do
		if [ "${RBLK_SOAK:-0}" = 1 ] || ! grep -q '^# soak-only' "$f"; then
			tests+=("$f")
		fi
	done
else
	for n in "$@"; do
		f=$(resolve "$n") || { echo "run-test: no guest test named '$n' (see --list)" >&2; exit 2; }
		tests+=("$f")
	done
fi
if [ ${#tests[@]} -eq 0 ]; then
	echo "run-test: no guest tests in $TDIR" >&2
	echo "0 passed, 0 failed"
	exit 0
fi

# whole-run limit: boot allowance + each test's own timeout (+ kill grace);
# under RBLK_SOAK=1 (make soak) a test's "# soak-timeout:" line counts instead
tkey=vm-timeout
[ "${RBLK_SOAK:-0}" = 1 ] && tkey=soak-timeout
total=180
for f in "${tests[@]}"; do
	tmo=$(grep -m1 -oE "^# *$tkey: *[0-9]+" "$f" | grep -oE '[0-9]+$' || true)
	total=$((total + ${tmo:-$pertest} + 15))
done

tmpout=0
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/rblk-vm-test.XXXXXX")
	tmpout=1
else
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	rm -rf "$out/tests" "$out/results"
fi

vmopts=(--timeout "$total" --mem "$mem" --cpus "$cpus" --out "$out"
	--env "RBLK_VM_TEST_TIMEOUT=$pertest" --env "RBLK_SOAK=${RBLK_SOAK:-0}")
runner=(bash "$HERE/guest-run-tests.sh" -t "$pertest")
[ "$verbose" = 1 ] && runner+=(-v)

echo "run-test: ${#tests[@]} test(s) in one guest, limit ${total}s, logs in $out"
t0=$(date +%s.%N)
vmrc=0
"$HERE/run-vm.sh" "${vmopts[@]}" -- "${runner[@]}" "${tests[@]}" || vmrc=$?
t1=$(date +%s.%N)

pass=0 fail=0 skip=0
declare -A seen=()
if [ -f "$out/results" ]; then
	while read -r name st _; do
		seen[$name]=1
		case $st in
		PASS) pass=$((pass + 1)) ;;
		SKIP) skip=$((skip + 1)) ;;
		*) fail=$((fail + 1)) ;;
		esac
	done <"$out/results"
fi
why="the guest ended early (run-vm exit $vmrc)"
[ "$vmrc" = 124 ] && why="the whole run hit its ${total}s limit"
first=1
for f in "${tests[@]}"; do
	name=$(basename "$f" .sh)
	if [ -z "${seen[$name]+x}" ]; then
		if [ "$first" = 1 ]; then
			first=0
			if [ -s "$out/tests/$name.log" ]; then
				echo "--- last lines of $name.log:"
				tail -n 40 "$out/tests/$name.log" | sed 's/^/    /'
			fi
			printf 'FAIL  %s - no result: %s while it ran\n' "$name" "$why"
		else
			printf 'FAIL  %s - not run: %s\n' "$name" "$why"
		fi
		fail=$((fail + 1))
	fi
done
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
echo "run-test: suite wall time ${wall}s"
if [ "$fail" -gt 0 ] || [ "$tmpout" = 0 ]; then
	echo "run-test: logs in $out (tests/NAME.log, console.log, dmesg.log)"
else
	rm -rf "$out"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
