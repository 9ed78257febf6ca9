#!/usr/bin/env bash
# make soak: the long forms of the tests that have one, then `make stress`'s
# load and leak check. A test with a long form carries a comment line
#
#   # soak: what the long form does (e.g. "100M operations, 40 power cuts")
#
# (with "# soak-only" as well when the test has no short form for make
# check: tests/check.sh and tests/vm/run-test.sh leave it out there)
# and reads RBLK_SOAK (1 under make soak, unset under make check) to choose
# it. Each takes its limit from a "# soak-timeout: SECONDS" line; host e2e
# tests without one run under RBLK_SOAK_TIMEOUT (default 7200 s each).
# Guest tests run in one guest of RBLK_SOAK_VM_MEM MiB (default 4096:
# 44-many-maps).
#
#   tests/soak.sh                 every host and guest test with a long form
#   RBLK_VM_SKIP=1 tests/soak.sh  host tests only
set -u
cd "$(dirname "$0")/.."

marked() { grep -l '^# soak:' "$@" 2>/dev/null; }
rc=0

host=$(marked tests/e2e/*.sh)
echo "== soak: host tests${host:+: $(echo $host | xargs -n1 basename | tr '\n' ' ')}"
for t in $host; do
	# a host test's own "# soak-timeout: SECONDS" line wins
	limit=$(sed -n 's/^# soak-timeout: *\([0-9]*\).*/\1/p' "$t" | head -n 1)
	RBLK_SOAK=1 RBLK_TEST_TIMEOUT=${limit:-${RBLK_SOAK_TIMEOUT:-7200}} \
		tests/run.sh "$t" || rc=1
done

guest=$(marked tests/vm/tests/*.sh)
if [ "${RBLK_VM_SKIP:-0}" = 1 ]; then
	echo "== soak: guest tests skipped (RBLK_VM_SKIP=1)"
elif [ -n "$guest" ]; then
	echo "== soak: guest tests: $(echo $guest | xargs -n1 basename | tr '\n' ' ')"
	tests/vm/setup.sh >/dev/null && RBLK_SOAK=1 tests/vm/run-test.sh \
		--mem "${RBLK_SOAK_VM_MEM:-4096}" $guest || rc=1
fi

echo "== soak: load and leak check (tests/stress/load.sh)"
RBLK_BUILD=$(pwd)/${BUILD:-build} tests/stress/load.sh || rc=1
exit $rc
