#!/usr/bin/env bash
# Sessions are cheap and the slot pool is bounded (issue 11):
#   1. RBLK_MANY_SESSIONS (default 1000) sessions of QD 2 log in to one
#      target and each writes, reads back and compares its own region, all
#      at once, while a librblk client verifies 8 MiB rounds on another
#      export throughout. The target gains one fd per session (its
#      socket) and no thread; its RSS growth per idle session is printed
#      and must stay under RBLK_MAX_KIB_PER_SESSION (default 64, issue
#      11's goal); its fds come back when the sessions leave.
#   2. Pool exhaustion: 16 sessions x QD16 x 1 MiB writes against a 4 MiB
#      pool (2 MiB per worker, 128 times less than they ask for at once)
#      complete and verify: commands wait for slots, none fails.
#      (The full-size run, 64 sessions x QD64 x 1 MiB against 64M, is the
#      same tool: docs/BENCHMARKS.md, "Many sessions".)
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
MANY=$RBLK_BUILD/tests/rblk_manysess
LIBTEST=$RBLK_BUILD/tests/rblk_libtest
[ -x "$MANY" ] || fail "test helper missing: make $MANY"
[ -x "$LIBTEST" ] || fail "test helper missing: make $LIBTEST"
N=${RBLK_MANY_SESSIONS:-1000}
MAX_KIB=${RBLK_MAX_KIB_PER_SESSION:-64}
# the client holds 4 fds per session (socket, its group, the queue fd,
# the timer), the target 1
need=$((5 * N + 256))
[ "$(ulimit -Hn)" -ge "$need" ] || skip "needs ulimit -n $need (hard limit $(ulimit -Hn))"
ulimit -n "$need"

rss() { awk '/^VmRSS/ { print $2 }' "/proc/$RBLK_TARGET_PID/status"; }
fds() { find "/proc/$RBLK_TARGET_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
threads() { find "/proc/$RBLK_TARGET_PID/task" -mindepth 1 -maxdepth 1 | wc -l; }
wait_out() # LINE FILE PID
{
	local i
	for ((i = 0; i < 2400; i++)); do
		grep -q "^$1" "$2" && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# ---- 1. many sessions ------------------------------------------------------
start_target --workers 2 --export "many=ram:$((N * 64 / 1024 + 1))M" \
	--export bg=ram:16M
url=tcp://127.0.0.1:$RBLK_PORT
# a login first: the worker groups exist, the pool is touched
tmo 30 "$LIBTEST" rw "$url/bg" slot >/dev/null || fail "warm-up client"
rss0=$(rss) fds0=$(fds) thr0=$(threads)

stop=$TEST_DIR/stop
(
	rounds=0
	while [ ! -e "$stop" ]; do
		tmo 60 "$LIBTEST" rw "$url/bg" slot >/dev/null || exit 1
		rounds=$((rounds + 1))
	done
	echo "$rounds" >"$TEST_DIR/rounds"
) &
bg=$!
cleanup_fn touch "$stop"

"$MANY" "$url/many" "$N" 2 32768 2 3000 >"$TEST_DIR/many.out" 2>&1 &
mp=$!
cleanup_fn stop_pid "$mp"
wait_out open "$TEST_DIR/many.out" "$mp" || {
	cat "$TEST_DIR/many.out"
	fail "$N sessions did not open"
}
sleep 1
rss1=$(rss) fds1=$(fds) thr1=$(threads)
wait_out idle "$TEST_DIR/many.out" "$mp" || {
	cat "$TEST_DIR/many.out"
	fail "$N sessions did not verify"
}
rss2=$(rss)
rc=0
wait "$mp" || rc=$?
cat "$TEST_DIR/many.out"
[ $rc -eq 0 ] || fail "rblk_manysess failed (rc $rc)"
grep -q "^verified 0: $N sessions" "$TEST_DIR/many.out" || fail "no verified round"
for ((i = 0; i < 100; i++)); do
	[ "$(fds)" -le $((fds0 + 2)) ] && break
	sleep 0.1
done
fds3=$(fds)
touch "$stop"
wait "$bg" || fail "the verifying client failed while $N sessions ran"

per=$(((rss1 - rss0) / N))
echo "target with $N idle sessions: RSS $rss0 -> $rss1 KiB ($per KiB per session), after their I/O $rss2 KiB"
echo "target fds $fds0 -> $fds1 with $N sessions -> $fds3 after; threads $thr0 -> $thr1"
echo "verifying client: $(cat "$TEST_DIR/rounds") rounds of 8 MiB verified meanwhile"
[ $((fds1 - fds0)) -le $((N + 4)) ] ||
	fail "target gained $((fds1 - fds0)) fds for $N sessions"
[ "$fds3" -le $((fds0 + 2)) ] || fail "target fds did not come back ($fds0 -> $fds3)"
[ "$thr1" -eq "$thr0" ] || fail "target threads $thr0 -> $thr1"
[ "$per" -le "$MAX_KIB" ] ||
	fail "target RSS grew $per KiB per idle session (limit $MAX_KIB)"
stop_pid "$RBLK_TARGET_PID"

# ---- 2. pool exhaustion ----------------------------------------------------
start_target --workers 2 --slot-pool 4M --export "pool=ram:256M"
out=$(tmo 300 "$MANY" "tcp://127.0.0.1:$RBLK_PORT/pool" 16 16 1048576 16 0 2 2>&1) || {
	echo "$out"
	fail "16 sessions x QD16 x 1 MiB against a 4 MiB pool"
}
echo "$out"
grep -q "^verified 1: 16 sessions x 16 I/Os of 1048576 bytes" <<<"$out" ||
	fail "pool exhaustion: not verified"
if grep -qiE "error|refus" "$RBLK_TARGET_LOG"; then
	cat "$RBLK_TARGET_LOG"
	fail "the target reported errors while its pool was exhausted"
fi
echo "PASS: $TEST_NAME"
