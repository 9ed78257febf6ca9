#!/usr/bin/env bash
# A WRITE whose granted window is not written in full before WRITE_DATA
# (issue 25, point 1, over tcp): the target used to write whatever its
# pool slot held before, another session's data, into the writer's
# volume, where reading it back disclosed it. Over tcp the transport
# knows which bytes of the window arrived, so such a WRITE now fails
# with an error status and writes nothing. One worker, so every session
# draws on one pool; a victim session writes a marker through that pool
# and reads it back (compared) just before each attempt, and a verified
# nbd client copies data beside it all the time. Checked: every short
# write fails, reading the attacker's range back gives zeroes and never
# a marker byte, and full writes (one WRITE, or in order in two) still
# work.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy python3 cmp truncate
requires_built

truncate -s 16M "$TEST_DIR/vol0.img" "$TEST_DIR/victim.img" \
	"$TEST_DIR/raw.img"
start_target --workers 1 --export "vol0=$TEST_DIR/vol0.img" \
	--export "victim=$TEST_DIR/victim.img,bs=4096" \
	--export "raw=$TEST_DIR/raw.img,bs=4096"
sock=$TEST_DIR/nbd.sock
start_nbd "$RBLK_TARGET_URL/vol0" "$sock" --queues 2
start_verifier "nbd+unix:///?socket=$sock" 8

tmo 120 python3 tests/e2e/rblk_abuse.py "$RBLK_PORT" raw shortwrite \
	victim 4 | tee "$TEST_DIR/out" || fail "a short write was not refused"
grep -q "WRITE_DATA before its window was written in full" \
	"$RBLK_TARGET_LOG" || fail "the refusal was not logged"
stop_verifier
kill -0 "$RBLK_TARGET_PID" || fail "rblk-target died"
echo "PASS: $TEST_NAME"
