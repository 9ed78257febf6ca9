#!/usr/bin/env bash
# `rblk nbd` under abuse from NBD clients (tests/e2e/nbd_abuse.py), while
# nbdcopy copies a random image in and out and compares sha256 each time:
#
#   1. memory: one client sends 64 READs of 16 MiB and never reads a reply.
#      rblk nbd reads only as many as --max-client-buffer (32 MiB here)
#      allows; its RSS must stay within that bound plus slack (unbounded it
#      grew by 1 GiB), and the legitimate copy works meanwhile.
#   2. idle sockets: 64 connections (= --max-connections) that never
#      negotiate. A legitimate client is still served at once (the oldest
#      negotiating socket is dropped to make room), and the rest are
#      dropped by the handshake timeout (--handshake-timeout 3 here).
#   3. --idle-timeout: a client that negotiates and then sends nothing is
#      dropped; an active copy through the same server is not.
# After each attack rblk nbd's open descriptors return to their count
# before it.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy python3 sha256sum truncate
requires_built
abuse=$(dirname "$0")/nbd_abuse.py

# bad values are usage errors (exit 2)
for bad in "--max-client-buffer 1M" "--handshake-timeout 0" "--idle-timeout x"; do
	rc=0
	# shellcheck disable=SC2086
	tmo 10 "$RBLK_BIN" nbd tcp://127.0.0.1:1/x --socket "$TEST_DIR/u.sock" \
		$bad >/dev/null 2>"$TEST_DIR/usage.err" || rc=$?
	[ $rc -eq 2 ] || { cat "$TEST_DIR/usage.err"; fail "$bad: exit $rc, wanted 2"; }
done

make_random "$TEST_DIR/src.img" 32
truncate -s 32M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
sock=$TEST_DIR/nbd.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock" --queues 3 \
	--queue-depth 16 --max-client-buffer 32M --handshake-timeout 3
pid=$RBLK_NBD_PID
src=$(sha "$TEST_DIR/src.img")

nfds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# copy_verify SOCK [TAG]: the image in and back out through one connection
copy_verify()
{
	local back=$TEST_DIR/back${2:-}.img
	rm -f "$back"
	tmo 60 nbdcopy --connections=1 "$TEST_DIR/src.img" "nbd+unix:///?socket=$1"
	tmo 60 nbdcopy --connections=1 "nbd+unix:///?socket=$1" "$back"
	[ "$(sha "$back")" = "$src" ] || fail "copy through $1 differs"
}

# wait_fds PID N: up to 20 s for PID's descriptor count to fall to N
wait_fds()
{
	local i n
	for ((i = 0; i < 200; i++)); do
		n=$(nfds "$1")
		[ "$n" -le "$2" ] && return 0
		sleep 0.1
	done
	ls -l "/proc/$1/fd"
	fail "rblk nbd holds $n descriptors, $2 before the attack"
}

# warm up every queue's buffer pool, so later growth is the attack's
pids=()
for q in 1 2 3; do
	copy_verify "$sock" "$q" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "warm-up copy $p failed"; done
copy_verify "$sock"
fd0=$(nfds "$pid")
rss0=$(rss_kb "$pid")
echo "baseline: $fd0 fds, VmRSS $rss0 kB"

# ---- 1. 64 unread 16 MiB READs ---------------------------------------------
mkfifo "$TEST_DIR/hold"
python3 "$abuse" bigreads "$sock" 64 $((16 << 20)) <"$TEST_DIR/hold" \
	>"$TEST_DIR/big.out" 2>"$TEST_DIR/big.err" &
big=$!
cleanup_fn stop_pid "$big"
exec 7>"$TEST_DIR/hold"
_wait_for_line "$TEST_DIR/big.out" '^sent 64' "$big" 20 ||
	{ cat "$TEST_DIR/big.out" "$TEST_DIR/big.err"; fail "the big-read client did not send"; }
peak=0
for round in 1 2 3; do
	copy_verify "$sock"
	r=$(rss_kb "$pid")
	[ "$r" -gt "$peak" ] && peak=$r
done
# the bound: 32 MiB of request buffers, plus the attacked queue's librblk
# bounce slots (16 x 1 MiB, preallocated, touched by the first reads), plus
# 16 MiB of slack for allocator and stacks
grow=$(((peak - rss0) / 1024))
echo "case 1: 64 x 16 MiB unread READs: VmRSS grew by $grow MiB (bound 64 MiB); 3 copies verified meanwhile"
[ "$grow" -le 64 ] || fail "rblk nbd grew by $grow MiB with --max-client-buffer 32M"
grep -q dropped "$TEST_DIR/big.out" && fail "the big-read client was dropped (no idle timeout set)"
exec 7>&-
wait "$big" 2>/dev/null || true
wait_fds "$pid" "$fd0"

# ---- 2. 64 idle sockets against --max-connections 64 ------------------------
python3 "$abuse" idle "$sock" 64 30 >"$TEST_DIR/idle.out" 2>"$TEST_DIR/idle.err" &
idle=$!
cleanup_fn stop_pid "$idle"
_wait_for_line "$TEST_DIR/idle.out" '^open 64' "$idle" 20 ||
	{ cat "$TEST_DIR/idle.out" "$TEST_DIR/idle.err"; fail "could not open 64 sockets"; }
t0=$(date +%s%3N)
copy_verify "$sock"
echo "case 2: a legitimate client copied and verified 32 MiB twice in $(($(date +%s%3N) - t0)) ms with 64 idle sockets open"
grep -q "dropped while still in its handshake" "$RBLK_NBD_LOG" ||
	fail "no idle socket was dropped to make room"
rc=0
wait "$idle" || rc=$?
cat "$TEST_DIR/idle.out"
[ $rc -eq 0 ] || fail "rblk nbd did not drop every idle socket"
grep -q "handshake not finished within 3000 ms" "$RBLK_NBD_LOG" ||
	fail "no handshake timeout logged"
wait_fds "$pid" "$fd0"

# ---- 3. --idle-timeout --------------------------------------------------------
stop_pid "$pid"
sock=$TEST_DIR/nbd-idle.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock" --queues 2 --idle-timeout 2
pid=$RBLK_NBD_PID
fd0=$(nfds "$pid")
rc=0
tmo 30 python3 "$abuse" idleclient "$sock" 20 >"$TEST_DIR/ic.out" 2>&1 &
ic=$!
copy_verify "$sock"
wait "$ic" || rc=$?
cat "$TEST_DIR/ic.out"
[ $rc -eq 0 ] || fail "an idle client was not dropped with --idle-timeout 2"
grep -q "disconnecting (idle timeout)" "$RBLK_NBD_LOG" || fail "no idle timeout logged"
echo "case 3: idle client $(tail -1 "$TEST_DIR/ic.out"); the active copy verified"
wait_fds "$pid" "$fd0"
echo "PASS: $TEST_NAME"
