#!/usr/bin/env bash
# Run tests (executables: unit test binaries or e2e scripts), each under a
# timeout, and print one line per test and a closing line
# "N passed, N failed, N skipped". Exit code 0 when nothing failed.
#
#   tests/run.sh build/tests/test_proto tests/e2e/10-nbdcopy.sh ...
#
# Exit codes of a test: 0 pass, 77 skip, anything else fail (124: timeout).
# RBLK_TEST_TIMEOUT (seconds, default 300) bounds each test. A failing
# test's output is printed; passing tests' output goes to build/test-logs/.
set -u

timeout_s=${RBLK_TEST_TIMEOUT:-300}
logdir=${RBLK_TEST_LOGS:-build/test-logs}
mkdir -p "$logdir"
pass=0 fail=0 skip=0
failed=()

for t in "$@"; do
	name=$(basename "$t")
	log="$logdir/$name.log"
	start=$(date +%s.%N)
	timeout -k 10 "$timeout_s" "$t" >"$log" 2>&1 </dev/null
	rc=$?
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
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
		[ $rc -eq 124 ] && why="timed out after ${timeout_s}s" || why="exit $rc"
		printf 'FAIL  %-40s %6ss  (%s)\n' "$name" "$secs" "$why"
		echo "---- output of $name (last 60 lines; full log: $log) ----"
		tail -n 60 "$log"
		echo "---- end of $name ----"
		;;
	esac
done

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
