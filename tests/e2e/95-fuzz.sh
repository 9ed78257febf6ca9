#!/usr/bin/env bash
# A bounded libFuzzer run of every harness in tests/fuzz (RBLK_FUZZ_TIME s
# each, default 20): the wire decoders (fuzz_proto) and the target's login
# path (fuzz_login), under ASan + UBSan, with the properties the harnesses
# check. Skips when clang or its libFuzzer runtime is missing. The long run
# is `make fuzz` (FUZZ_TIME=600 per harness).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3
build=${RBLK_BUILD}
# the committed seeds are what gen-corpus.py writes (with the constants
# generated from the C headers), with or without a fuzzer to run them
[ -f "$build/gen/rblk_const.py" ] ||
	fail "$build/gen/rblk_const.py missing: run make check-e2e"
RBLK_BUILD=$build python3 tests/fuzz/gen-corpus.py "$TEST_DIR/corpus" \
	>/dev/null || fail "gen-corpus.py failed"
for d in proto login; do
	diff -r "$TEST_DIR/corpus/$d" "tests/fuzz/corpus/$d" ||
		fail "tests/fuzz/corpus/$d is stale: run tests/fuzz/gen-corpus.py"
done
cc=$(command -v clang || command -v clang-14 || true)
[ -n "$cc" ] || skip "clang not found"
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' \
	>"$TEST_DIR/probe.c"
"$cc" -fsanitize=fuzzer,address,undefined -o "$TEST_DIR/probe" \
	"$TEST_DIR/probe.c" >/dev/null 2>&1 || skip "no libFuzzer runtime ($cc)"

secs=${RBLK_FUZZ_TIME:-20}
tmo 300 make -s --no-print-directory BUILD="$build" FUZZ_CC="$cc" fuzz-build ||
	fail "building the harnesses failed"
tmo $((secs * 2 + 120)) env BUILD="$build" tests/fuzz/run.sh "$secs" \
	fuzz_proto fuzz_login | tee "$TEST_DIR/out" || fail "a harness found something"
[ "$(grep -c ' execs in .*no findings$' "$TEST_DIR/out")" -eq 2 ] ||
	fail "expected two clean harness runs"
echo "PASS: $TEST_NAME"
