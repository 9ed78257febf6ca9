#!/usr/bin/env bash
# Malformed input straight to rblk-target's TCP port, in raw transport
# frames (tests/e2e/rblk_raw.py: one line per case, "case, expected
# outcome, result"): bad frame and message headers, bad versions, zero and
# oversize lengths, offsets past the end and offset + length wrapping 2^64
# (in commands and in one-sided READ/WRITE), unknown opcodes and types,
# duplicate tags, commands before login, truncated messages, a second
# HELLO, slow-loris clients that must hit the handshake and login limits,
# and floods of clients that never log in. Every case must get its error
# status or a clean disconnect. Meanwhile a verified client (rblk nbd +
# nbdcopy + cmp) keeps copying through the same target, and at the end
# the target is alive, its descriptors are back where they were, and it
# serves a new login. Under RBLK_BUILD=build-asan the sanitizer log check
# of functions.sh fails the test on any report, leaks included.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy python3 cmp truncate
requires_built

truncate -s 16M "$TEST_DIR/export.img"
truncate -s 32M "$TEST_DIR/raw.img" "$TEST_DIR/ro.img"
start_target --export "vol0=$TEST_DIR/export.img" \
	--export "raw=$TEST_DIR/raw.img,bs=4096" \
	--export "ro=$TEST_DIR/ro.img,ro"
target_pid=$RBLK_TARGET_PID
sock=$TEST_DIR/nbd.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock" --queues 4

start_verifier "nbd+unix:///?socket=$sock" 16
rc=0
[ -f "$RBLK_BUILD/gen/rblk_const.py" ] ||
	fail "$RBLK_BUILD/gen/rblk_const.py missing: run make check-e2e"
RBLK_BUILD=$RBLK_BUILD tmo 120 python3 tests/e2e/rblk_raw.py "$RBLK_PORT" raw ro "$target_pid" \
	>"$TEST_DIR/cases.txt" || rc=$?
stop_verifier
column -t -s $'\t' "$TEST_DIR/cases.txt" 2>/dev/null || cat "$TEST_DIR/cases.txt"
[ $rc -eq 0 ] || fail "malformed-input cases failed (see above)"

kill -0 "$target_pid" || fail "rblk-target died"
# a brand-new login after all of it
"$RBLK_BIN" info "tcp://127.0.0.1:$RBLK_PORT/vol0" >"$TEST_DIR/info" 2>&1 ||
	{ cat "$TEST_DIR/info"; fail "new login after the cases failed"; }
echo "PASS: $TEST_NAME"
