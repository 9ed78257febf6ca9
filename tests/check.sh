#!/usr/bin/env bash
# make check: the host tests (unit + e2e over tcp), then the guest suite
# (real kernel: rdma_rxe, nbd, ublk) in one QEMU guest, then one closing
# line with the totals of both: "N passed, N failed, N skipped".
#
#   tests/check.sh HOST_TEST...        (the Makefile passes the list)
#   RBLK_VM_SKIP=1 tests/check.sh ...  host tests only (says so)
#   RBLK_TEST_JOBS=N                   host tests run N at a time (default
#                                      2; tests/run.sh -j, "# runs-alone")
set -u
cd "$(dirname "$0")/.."

total_pass=0 total_fail=0 total_skip=0
add_summary() {
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		echo "check: $2 printed no summary line; counting it as one failure"
		total_fail=$((total_fail + 1))
		return
	fi
	set -- $line
	total_pass=$((total_pass + $1))
	total_fail=$((total_fail + $3))
	case $line in *skipped*) total_skip=$((total_skip + $5)) ;; esac
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# a test whose only form is long ("# soak-only") is make soak's
host=()
for t in "$@"; do
	case $t in *.sh) grep -q '^# soak-only' "$t" && continue ;; esac
	host+=("$t")
done
echo "== host tests (unit, e2e over the tcp transport)"
tests/run.sh -j "${RBLK_TEST_JOBS:-2}" "${host[@]}" | tee "$log"
add_summary "$log" "host tests"

if [ "${RBLK_VM_SKIP:-0}" = 1 ]; then
	echo "== guest tests: skipped (RBLK_VM_SKIP=1)"
else
	echo "== guest tests (QEMU, Debian 6.12 kernel: rdma_rxe, nbd, ublk)"
	start=$(date +%s)
	if tests/vm/setup.sh >"$log.setup" 2>&1; then
		BUILD=${BUILD:-build} tests/vm/run-test.sh | tee "$log"
		add_summary "$log" "guest tests"
	else
		tail -n 30 "$log.setup"
		echo "check: guest setup failed (tests/vm/setup.sh); counting it as one failure"
		total_fail=$((total_fail + 1))
	fi
	rm -f "$log.setup"
	echo "guest suite wall time: $(($(date +%s) - start)) s"
fi

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
