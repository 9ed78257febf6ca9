#!/usr/bin/env bash
# Run libFuzzer harnesses, each for SECONDS, and print one line per
# harness with its execution count:
#
#   tests/fuzz/run.sh SECONDS HARNESS...     (make fuzz calls this)
#
# Each harness $BUILD/fuzz/HARNESS starts from the committed seeds in
# tests/fuzz/corpus/<name> (HARNESS without "fuzz_") and grows a working
# corpus in $BUILD/fuzz/corpus/<name>; crashes and property violations
# leave a reproducer in $BUILD/fuzz/artifacts/ (rerun it with
# `$BUILD/fuzz/HARNESS FILE`). Exit status: 0 when no harness found
# anything.
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
secs=${1:?usage: run.sh SECONDS HARNESS...}
shift
rc=0
for h in "$@"; do
	bin=$build/fuzz/$h
	name=${h#fuzz_}
	work=$build/fuzz/corpus/$name
	art=$build/fuzz/artifacts/
	log=$build/fuzz/$h.log
	mkdir -p "$work" "$art"
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-dict=tests/fuzz/rblk.dict -artifact_prefix="$art" \
		-print_final_stats=1 "$work" "tests/fuzz/corpus/$name" \
		>"$log" 2>&1
	r=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1)
	units=$(find "$work" -type f | wc -l)
	if [ $r -eq 0 ]; then
		printf '%s: %s execs in %s s, %s, corpus %s files, no findings\n' \
			"$h" "${execs:-?}" "$secs" "${cov:-cov: ?}" "$units"
	else
		rc=1
		printf '%s: FAILED (exit %d) after %s execs; log %s:\n' \
			"$h" $r "${execs:-?}" "$log"
		grep -E -A 25 'ERROR|property violated|runtime error|Test unit written' \
			"$log" | head -60
	fi
done
exit $rc
