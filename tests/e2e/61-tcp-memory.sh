#!/usr/bin/env bash
# What a peer that does not read its socket can make the target hold over
# tcp (issue 25, point 3), while a legitimate client writes, reads back and
# compares data through the same target. The attacker takes a 1 MiB pull
# READ window, asks for it N times (1 MiB READ_REQs, 32 bytes each) without
# reading a byte, then returns the window: the target used to copy every
# unsent response (N x 1 MiB) when the window went, and keep the memory
# after the disconnect. Now:
#   - within its bound (N <= queue depth), the responses are copied and
#     cost at most queue depth x max I/O, given back at disconnect;
#   - beyond it, the connection fails with a logged reason and the target
#     does not grow;
#   - two sessions x 2,000 requests leave the target's RSS within 10% of
#     where it started.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy python3 cmp truncate jq
requires_built

truncate -s 16M "$TEST_DIR/vol0.img"
truncate -s 32M "$TEST_DIR/raw.img"
start_target --export "vol0=$TEST_DIR/vol0.img" \
	--export "raw=$TEST_DIR/raw.img,bs=4096"
tpid=$RBLK_TARGET_PID
sock=$TEST_DIR/nbd.sock
start_nbd "$RBLK_TARGET_URL/vol0" "$sock" --queues 2
mib=1024 # KiB
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"; }
rss() { proc_rss_kib "$tpid"; }
# ASan keeps freed memory in quarantine: RSS is shown, not judged, there
asan=0
grep -q __asan_init "$RBLK_TARGET_BIN" && asan=1

# attack N QD NAME...: one attacker per NAME (readhold N QD, holding 6 s),
# started together; returns once all have sent everything ("armed") and
# the target had a second to act on it
attack()
{
	local n=$1 qd=$2 name i
	shift 2
	for name in "$@"; do
		tmo 60 python3 tests/e2e/rblk_abuse.py "$RBLK_PORT" raw \
			readhold "$n" "$qd" 6 >"$TEST_DIR/$name.out" 2>&1 &
		echo $! >"$TEST_DIR/$name.pid"
	done
	for name in "$@"; do
		for ((i = 0; i < 300; i++)); do
			grep -q armed "$TEST_DIR/$name.out" && break
			kill -0 "$(cat "$TEST_DIR/$name.pid")" 2>/dev/null ||
				fail "$name: $(cat "$TEST_DIR/$name.out")"
			sleep 0.1
		done
		grep -q armed "$TEST_DIR/$name.out" ||
			fail "$name never sent its requests"
	done
	sleep 1
}

# settle: every attacker exited and its session left the target
settle()
{
	local name i n
	for name in "$@"; do
		wait_pid 60 "$(cat "$TEST_DIR/$name.pid")" ||
			fail "$name: $(cat "$TEST_DIR/$name.out")"
	done
	for ((i = 0; i < 100; i++)); do
		n=$(ctl list-sessions -o json |
			jq '[.sessions[] | select(.host == "readhold")] | length')
		[ "$n" -eq 0 ] && break
		sleep 0.1
	done
	[ "$n" -eq 0 ] || fail "$n attacking sessions still listed"
	sleep 1
}

# judge WHAT GROWN_KIB ALLOWED_KIB
judge()
{
	echo "$1: target RSS +$2 KiB (allowed $3 KiB)"
	[ $asan -eq 1 ] || [ "$2" -le "$3" ] ||
		fail "$1: target RSS grew by $2 KiB, more than $3 KiB"
}

# the legitimate client (through pull READ windows and WRITE grants from
# the same pool): a verified round first so that its steady state is in
# the baseline, then rounds all through the attacks
start_verifier "nbd+unix:///?socket=$sock" 8
for ((i = 0; i < 300; i++)); do
	[ -s "$TEST_DIR/verifier/rounds" ] && break
	sleep 0.1
done
[ -s "$TEST_DIR/verifier/rounds" ] || fail "the verifying client made no round"
rss0=$(rss)
echo "target RSS at the start: $rss0 KiB"
# slack for what the verifier's own traffic moves meanwhile
slack=$((4 * mib))

# ---- within the bound: copied, at most qd x max_io, given back ----------
base=$(rss)
attack 30 32 a1
held=$(rss)
judge "30 unread 1 MiB READs at queue depth 32, held" \
	$((held - base)) $((32 * mib + slack))
settle a1
judge "after that session left" $(($(rss) - base)) "$slack"
grep -q "over its limit" "$RBLK_TARGET_LOG" &&
	fail "a session within its bound was failed"

# ---- beyond it: the connection fails, the target does not grow ---------
base=$(rss)
attack 2000 8 a2
held=$(rss)
judge "2,000 unread 1 MiB READs at queue depth 8, held" \
	$((held - base)) $((8 * mib + slack))
settle a2
grep -q "over its limit of 8388608; failing the connection" \
	"$RBLK_TARGET_LOG" || fail "the attacker was not failed with a reason"

# ---- two sessions x 2,000 at queue depth 32 -------------------------------
base=$(rss)
attack 2000 32 a3 a4
held=$(rss)
judge "two sessions x 2,000 unread READs at queue depth 32, held" \
	$((held - base)) $((2 * 32 * mib + slack))
settle a3 a4
n=$(grep -c "over its limit of 33554432; failing the connection" \
	"$RBLK_TARGET_LOG" || true)
[ "$n" -eq 2 ] || fail "$n of the 2 attackers failed with a reason"

stop_verifier
rss1=$(rss)
echo "target RSS: $rss0 KiB at the start, $rss1 KiB at the end"
judge "at the end (within 10% of the start)" $((rss1 - rss0)) $((rss0 / 10))
# the target still serves: a fresh session reads back what was verified
tmo 60 "$RBLK_BIN" info "$RBLK_TARGET_URL/vol0" >/dev/null ||
	fail "no new session after the attacks"
tmo 60 nbdcopy "nbd+unix:///?socket=$sock" "$TEST_DIR/back" ||
	fail "reading the volume back failed"
cmp -n $((8 * 1048576)) "$TEST_DIR/verifier/src" "$TEST_DIR/back" ||
	fail "the volume does not hold what the verifier wrote last"
echo "PASS: $TEST_NAME"
