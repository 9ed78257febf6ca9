#!/usr/bin/env bash
# Transport-level abuse of the tcp listener and connections (issue 15,
# points 1, 5, 6 and 7), each while a verified client (rblk nbd + nbdcopy
# + cmp) keeps copying through the same target, with the target's fds
# and RSS compared before and after:
#   - 20 sessions that send a command and then reset their connection
#     (SO_LINGER 0) are all gone from `ctl list-sessions` (none stranded);
#   - a never-login connection's zero-length READ with a made-up rkey is
#     refused like any other (ERROR frame, dropped);
#   - a client streaming signaled WRITEs without reading its acks is
#     dropped once the bounded output queue is full (the target does not
#     grow by what it would have queued);
#   - a CONNECT flood of silent sockets does not keep clients that send
#     their CONNECT from logging in;
#   - with its fd limit at 64, a burst of connections makes accept4 fail
#     with EMFILE: the listener backs off instead of spinning (CPU time
#     and log lines bounded) and serves logins again afterwards.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy python3 cmp truncate jq prlimit
requires_built

make_random "$TEST_DIR/src.img" 8
truncate -s 8M "$TEST_DIR/export.img"
truncate -s 32M "$TEST_DIR/raw.img"
start_target --export "vol0=$TEST_DIR/export.img" \
	--export "raw=$TEST_DIR/raw.img,bs=4096"
tpid=$RBLK_TARGET_PID
sock=$TEST_DIR/nbd.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock" --queues 2
abuse() { tmo 120 python3 tests/e2e/rblk_abuse.py "$RBLK_PORT" raw "$@"; }
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"; }
fds() { ls "/proc/$tpid/fd" | wc -l; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$tpid/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$tpid/stat"; }
# ASan keeps freed memory in quarantine: RSS is shown, not judged, there
asan=0
grep -q __asan_init "$RBLK_TARGET_BIN" && asan=1

# one verified round first so the steady state is in the baseline
nbdcopy "$TEST_DIR/src.img" "nbd+unix:///?socket=$sock"
fd0=$(fds)
rss0=$(rss_kb)
start_verifier "nbd+unix:///?socket=$sock" 8

# ---- 15.1: resets after a command strand no session ---------------------
abuse reset 20
for ((i = 0; i < 100; i++)); do
	n=$(ctl list-sessions -o json |
		jq '[.sessions[] | select(.host == "abuse")] | length')
	[ "$n" -eq 0 ] && break
	sleep 0.1
done
[ "$n" -eq 0 ] || fail "$n reset sessions still listed after 10 s"
echo "reset: all 20 sessions gone"

# ---- 15.6: zero-length READ checked; unread acks bounded ----------------
abuse zeroread || fail "zero-length READ with a made-up rkey not refused"
rss1=$(rss_kb)
abuse ackflood || fail "a client not reading its WRITE acks was not dropped"
rss2=$(rss_kb)
echo "ackflood: target RSS ${rss1} kB -> ${rss2} kB"
[ $asan -eq 1 ] || [ $((rss2 - rss1)) -lt 16384 ] ||
	fail "target grew by $((rss2 - rss1)) kB under an unread ack flood"

# ---- 15.7: clients that send CONNECT get through a silent flood ----------
abuse flood 8 &
fpid=$!
cleanup_fn stop_pid "$fpid"
sleep 1
ok=0
for ((i = 0; i < 10; i++)); do
	if tmo 20 "$RBLK_BIN" info "tcp://127.0.0.1:$RBLK_PORT/vol0" \
		>"$TEST_DIR/info" 2>&1; then
		ok=$((ok + 1))
	else
		cat "$TEST_DIR/info"
	fi
done
wait "$fpid" || fail "the flood client failed"
[ "$ok" -eq 10 ] || fail "only $ok of 10 logins got through the flood"
echo "flood: 10 of 10 logins got through"

stop_verifier

# ---- fds and RSS back ----------------------------------------------------
for ((i = 0; i < 50; i++)); do
	[ "$(fds)" -le $((fd0 + 2)) ] && break
	sleep 0.1
done
fd1=$(fds)
rss3=$(rss_kb)
echo "target fds $fd0 -> $fd1, RSS $rss0 kB -> $rss3 kB"
[ "$fd1" -le $((fd0 + 2)) ] || fail "target fds grew from $fd0 to $fd1"
[ $asan -eq 1 ] || [ $((rss3 - rss0)) -lt 32768 ] ||
	fail "target RSS grew by $((rss3 - rss0)) kB"

# ---- 15.5: EMFILE backs off ----------------------------------------------
read -r soft hard < <(prlimit --pid "$tpid" --nofile --noheadings \
	--output SOFT,HARD)
prlimit --pid "$tpid" --nofile="64:$hard"
t0=$(cpu_ticks)
abuse hold 120 3 || fail "the fd-pressure client failed"
t1=$(cpu_ticks)
prlimit --pid "$tpid" --nofile="$soft:$hard"
lines=$(grep -c "accept4" "$RBLK_TARGET_LOG" || true)
echo "EMFILE: $((t1 - t0)) ticks of CPU in 3 s, $lines accept4 log lines"
grep -q "accept4: Too many open files; not accepting" "$RBLK_TARGET_LOG" ||
	fail "the fd limit was never hit (test did not test anything)"
[ "$((t1 - t0))" -lt 100 ] ||
	fail "the listener spun under EMFILE ($((t1 - t0)) ticks in 3 s)"
[ "$lines" -lt 40 ] || fail "$lines accept4 lines: not rate-limited"
sleep 1.2
tmo 20 "$RBLK_BIN" info "tcp://127.0.0.1:$RBLK_PORT/vol0" >"$TEST_DIR/info" 2>&1 ||
	{ cat "$TEST_DIR/info"; fail "no login after the fd pressure"; }
kill -0 "$tpid" || fail "rblk-target died"
echo "PASS: $TEST_NAME"
