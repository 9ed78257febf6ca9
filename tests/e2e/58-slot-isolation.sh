#!/usr/bin/env bash
# Isolation in the shared slot pool (docs/PROTOCOL.md, "What a session
# may hold"): one session can neither read another's bytes nor starve it.
#   - stale bytes: an attacker on its own export answers WRITE GRANTs with
#     WRITE_DATA without writing the window (or after writing only 512
#     bytes), then reads the block back, many rounds on 4 connections
#     (both workers), while a librblk client writes and verifies random
#     data on another export: no byte the attacker did not write (0 or
#     0xA5) may ever come back, and the client keeps its data;
#   - held windows: 4 sessions take every WRITE and pull READ window they
#     can of a small pool and never use or return them, sending a
#     KEEPALIVE every second: each is dropped within window_timeout (plus
#     the worker's 1 s sweep) with a log line naming it, ctl stats and
#     /metrics count the drops, and a fio job with verification on another
#     export beside them never waits longer than window_timeout + 1 s for
#     an I/O.
# The same file runs over rdma (rdma_rxe) in the guest:
# tests/vm/tests/19-rdma-slot-isolation.sh (RBLK_TEST_SCHEME=rdma).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
requires jq curl
RAW=$RBLK_BUILD/tests/rblk_rawclient
[ -x "$RAW" ] || fail "test helper missing: make $RAW"
ROUNDS=${RBLK_STALE_ROUNDS:-400}
WT=3 # window_timeout for the holders' part, seconds

# ---- stale slot bytes ---------------------------------------------------
truncate -s 64M "$TEST_DIR/victim.img"
truncate -s 4M "$TEST_DIR/attacker.img"
# debug: a failure's log says what each connection's transport saw
start_target --workers 2 --log-level debug \
	--export "victim=$TEST_DIR/victim.img" \
	--export "attacker=$TEST_DIR/attacker.img"
start_verifier "$RBLK_TARGET_URL/victim" 16 slot
# the verifier has written before the attacker starts
for _ in $(seq 100); do
	[ -s "$TEST_DIR/verifier/rounds" ] && break
	sleep 0.2
done
out=$(tmo 300 "$RAW" stale "$RBLK_TARGET_URL/attacker" "$ROUNDS" 2>&1) || {
	echo "$out" | tail -n 40
	keep_logs "$RBLK_TARGET_LOG" "$TEST_DIR/verifier/log"
	tail -n 40 "$RBLK_TARGET_LOG"
	fail "the attacker read bytes it never wrote (another session's)"
}
echo "$out" | tail -1
echo "$out" | grep -q " 0 reads wrong" || fail "wrong reads: $out"
stop_verifier
stop_pid "$RBLK_TARGET_PID"

# ---- windows held without progress --------------------------------------
mport=$(free_port)
truncate -s 64M "$TEST_DIR/bg.img"
# one worker, a pool of 8 MiB of which one session may hold half: two
# holders fill it, so the fio job's I/O waits until they are dropped
start_target --workers 1 --slot-pool 8M --session-pool-share 50 \
	--window-timeout "$WT" --metrics "$mport" \
	--export "hog=$TEST_DIR/attacker.img" --export "bg=$TEST_DIR/bg.img"
"$RAW" hold "$RBLK_TARGET_URL/hog" 4 $((WT * 4 + 4)) >"$TEST_DIR/hold.out" 2>&1 &
hold_pid=$!
cleanup_fn _kill_quiet "$hold_pid"
for _ in $(seq 100); do
	grep -q "connections asked" "$TEST_DIR/hold.out" && break
	sleep 0.1
done
sleep 0.5
if [ -x "$RBLK_FIO_ENGINE" ] && command -v fio >/dev/null; then
	tmo $((WT * 6 + 60)) fio --name=bg --ioengine="external:$RBLK_FIO_ENGINE" \
		--uri="$RBLK_TARGET_URL/bg" --rw=randwrite --bs=64k --iodepth=4 \
		--size=32M --time_based --runtime=$((WT * 3 + 4)) \
		--verify=crc32c --verify_backlog=16 --verify_fatal=1 --verify_state_save=0 \
		--output-format=json --output="$TEST_DIR/fio.json" ||
		fail "fio beside the holders failed (verification or I/O)"
	maxms=$(jq '[.jobs[0].read.clat_ns.max, .jobs[0].write.clat_ns.max] | max / 1000000 | floor' \
		"$TEST_DIR/fio.json")
	ios=$(jq '.jobs[0].write.total_ios' "$TEST_DIR/fio.json")
	echo "fio beside the holders: $ios writes verified, longest I/O $maxms ms"
	[ "$ios" -gt 0 ] || fail "fio moved no data beside the holders"
	[ "$maxms" -le $((WT * 1000 + 1000)) ] ||
		fail "an I/O waited $maxms ms beside the holders (window_timeout $WT s)"
else
	# without the fio engine: a librblk client writes and verifies
	start_verifier "$RBLK_TARGET_URL/bg" 4 slot
	sleep $((WT * 3 + 4))
	stop_verifier
fi
wait_pid $((WT * 4 + 30)) "$hold_pid" || {
	cat "$TEST_DIR/hold.out"
	fail "a holder was not dropped"
}
cat "$TEST_DIR/hold.out"
n=$(grep -c "window timeout" "$RBLK_TARGET_LOG" || true)
[ "$n" -ge 4 ] || fail "$n window timeouts logged, want 4"
grep -m1 "window timeout" "$RBLK_TARGET_LOG"
grep -m1 "held .* slot window(s)" "$RBLK_TARGET_LOG" ||
	fail "the log does not say what the holder held"
st=$(tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" stats hog -o json |
	jq '.exports[0].stats.window_timeouts')
[ "$st" -ge 4 ] || fail "ctl stats counts $st window timeouts, want 4"
curl -sf "http://127.0.0.1:$mport/metrics" >"$TEST_DIR/metrics.txt" ||
	fail "no metrics"
grep -q '^rblk_window_timeouts_total{export="hog"} [4-9]' "$TEST_DIR/metrics.txt" ||
	fail "/metrics does not count the window timeouts: $(grep window "$TEST_DIR/metrics.txt")"
echo "PASS"
