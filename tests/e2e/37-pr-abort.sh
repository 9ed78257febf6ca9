#!/usr/bin/env bash
# Preempt-and-abort fences a writer in flight (issue 29). beta holds
# write-exclusive and keeps 16 writes of its pattern in flight over 8 MiB,
# through a session it opened before any of this; alpha registers and
# preempts beta's key with --abort. Then:
#   - beta's writer stops on its own with EBADE, its later writes (queued
#     in the library, or sent and not yet started on the target) failing
#     too, within a few seconds of the preempt;
#   - alpha holds the reservation and beta's key is gone (report);
#   - alpha overwrites the range and, a second later, reads back only its
#     own bytes: no write of beta's landed after the preempt answered;
#   - beta still reads (write-exclusive), and its new writes conflict.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3
requires_built
PT=$RBLK_BUILD/tests/rblk_prtest
[ -x "$PT" ] || fail "$PT missing: make $PT"

for h in alpha beta; do
	head -c 32 /dev/urandom | base64 >"$TEST_DIR/$h.key"
	chmod 600 "$TEST_DIR/$h.key"
done
truncate -s 16M "$TEST_DIR/vol.img"
start_target --host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--host "beta:secret-file=$TEST_DIR/beta.key" \
	--export "vol=$TEST_DIR/vol.img,allow=alpha,allow=beta"
URL=$RBLK_TARGET_URL/vol
A=(--host-name alpha --key-file "$TEST_DIR/alpha.key")
B=(--host-name beta --key-file "$TEST_DIR/beta.key")
pr() { tmo 30 "$RBLK_BIN" pr "$@"; }
M8=$((8 << 20))

pr register "${B[@]}" --key 0xb2 "$URL"
pr reserve "${B[@]}" --key 0xb2 --type write-exclusive "$URL"
pr register "${A[@]}" --key 0xa1 "$URL"

# beta's writer: byte 66 over [0, 8M), for up to 60 s
: >"$TEST_DIR/writer.out"
"$PT" writer "$URL" beta "$TEST_DIR/beta.key" 0 $M8 66 60 \
	>"$TEST_DIR/writer.out" 2>&1 &
writer=$!
for ((i = 0; i < 600; i++)); do
	grep -q ready "$TEST_DIR/writer.out" && break
	kill -0 $writer 2>/dev/null || break
	sleep 0.05
done
grep -q ready "$TEST_DIR/writer.out" || { cat "$TEST_DIR/writer.out"; fail "beta's writer did not start"; }
sleep 1 # writing for a while: its queue is full of writes
t0=$(date +%s%N)
pr preempt "${A[@]}" --key 0xa1 --victim-key 0xb2 --type write-exclusive \
	--abort "$URL"
echo "preempt-and-abort answered in $((($(date +%s%N) - t0) / 1000000)) ms"

# alpha's bytes over the whole range, while beta's writer is still
# draining what it had in flight
tmo 30 "$PT" write "$URL" alpha "$TEST_DIR/alpha.key" 0 $M8 65 >/dev/null ||
	fail "alpha (now the holder) could not write"
rc=0
wait_pid 60 $writer || rc=$?
cat "$TEST_DIR/writer.out"
[ $rc -eq 3 ] || fail "beta's writer ended with $rc, want 3 (its writes failed with EBADE only)"
grep -Eq "writes [1-9][0-9]* ok, first failure EBADE, [1-9][0-9]* failed" "$TEST_DIR/writer.out" ||
	fail "beta's writer: no successful writes before, or no EBADE after"
echo "beta's writer fenced in $((($(date +%s%N) - t0) / 1000000)) ms of the preempt"

sleep 1
out=$(tmo 30 "$PT" read "$URL" alpha "$TEST_DIR/alpha.key" 0 $M8 65 || true)
[ "$out" = ok ] || fail "the range is not all alpha's a second later: $out"
echo "no write of beta's landed after the preempt answered"

j=$(pr report -o json "${A[@]}" "$URL")
echo "$j"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["holder"] == "alpha" and j["type"] == "write-exclusive", j
assert [r["host"] for r in j["registrants"]] == ["alpha"], j
' "$j" || fail "report after the preempt: $j"

out=$(tmo 30 "$PT" read "$URL" beta "$TEST_DIR/beta.key" 0 65536 65 || true)
[ "$out" = ok ] || fail "beta cannot read after being preempted: $out"
out=$(tmo 30 "$PT" write "$URL" beta "$TEST_DIR/beta.key" 0 4096 66 || true)
[ "$out" = EBADE ] || fail "beta's new write after the preempt: $out, want EBADE"
echo "preempt-and-abort OK"
