#!/bin/bash
# Many sessions over rxe in bounded pinned memory (issue 11): RBLK_VM_SESSIONS
# (default 256) sessions of QD 2 log in to one target with a 64 MiB slot
# pool; each writes 4 x 16 KiB to its own region, reads it back and
# compares, all at once. The target's VmPin is sampled throughout: its
# peak must stay within the pool plus 256 KiB per session; its fds grow
# by at most one per session (+ a few), its threads not at all; after the
# sessions leave, VmPin and fds come back to their idle values. Then, on
# another target, a session past the worker's CQ limit is refused as
# "target out of resources".
# At the default --max-queue-depth: each QP, and its share of the
# worker's CQ, is sized by the depth the session asks for (2 here), not by
# the target's cap (which held 63 sessions per worker under rxe's max_cqe).
# The pool on rxe is one region per buddy block, never overlapping (see
# docs/ARCHITECTURE.md "Slot pool"), so its pages are pinned once; the
# RAM export does no disk I/O, so io_uring never registers the pool again.
# vm-timeout: 900
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
MANY=$BUILD/tests/rblk_manysess
need_file "$BUILD/rblk-target" "$BUILD/tests/rblk_libtest" "$MANY"

N=${RBLK_VM_SESSIONS:-256}
POOL_MIB=64
PER_KIB=256
ulimit -l unlimited
ulimit -n $((8 * N + 256)) || fail "ulimit -n $((8 * N + 256))"

port=7448
url=rdma://$RDMA_ADDR:$port
dir=$TMPDIR/many
mkdir -p "$dir"
keep() # the logs land in the host's out directory
{
	[ -n "${RBLK_VM_TEST_OUT:-}" ] || return 0
	cp "$dir"/*.log "$dir"/*.out "$RBLK_VM_TEST_OUT/" 2>/dev/null
	dmesg >"$RBLK_VM_TEST_OUT/dmesg.txt" 2>/dev/null
	return 0
}
cleanup_fn keep # runs after the daemons are stopped (last in, first out)

bg "$BUILD/rblk-target" --listen "$url" --allow-any-host --log-level info \
	--workers 2 --slot-pool ${POOL_MIB}M \
	--export "many=ram:$((N * 64 / 1024 + 1))M" 2>"$dir/target.log"
tp=$!
wait_until 30 grep -q "listening on" "$dir/target.log"

pin() { awk '/^VmPin/ { print $2 }' "/proc/$tp/status"; }
fds() { find "/proc/$tp/fd" -mindepth 1 -maxdepth 1 | wc -l; }
threads() { find "/proc/$tp/task" -mindepth 1 -maxdepth 1 | wc -l; }

pin0=$(pin) fds0=$(fds) thr0=$(threads)
# a login first: the worker's group exists and its pool is registered
timeout 120 "$BUILD/tests/rblk_libtest" rw "$url/many" slot >/dev/null ||
	fail "warm-up client"
pin1=$(pin) fds1=$(fds) thr1=$(threads)
echo "target before any login: VmPin $pin0 kB, fds $fds0, threads $thr0"
echo "target idle after one session: VmPin $pin1 kB, fds $fds1, threads $thr1"

# the peak of VmPin, sampled every 0.2 s
( peak=0
  while [ ! -e "$dir/stop" ]; do
	v=$(pin) || break
	[ "$v" -gt "$peak" ] && { peak=$v; echo "$peak" >"$dir/peak"; }
	sleep 0.2
  done ) &
sampler=$!

start=$SECONDS
bg "$MANY" "$url/many" "$N" 2 16384 4 sig >"$dir/many.out" 2>&1
mp=$!
exec 3>&1 # wait_until silences its command; a failure shows here
wait_out()
{
	grep -q "^$1" "$dir/many.out" && return 0
	kill -0 "$mp" 2>/dev/null ||
		{ cat "$dir/many.out"; fail "rblk_manysess exited before '$1'"; } >&3
	return 1
}
wait_until 600 wait_out open
t_open=$((SECONDS - start))
sleep 1
pin2=$(pin) fds2=$(fds) thr2=$(threads)
echo "$N sessions logged in after ${t_open}s: VmPin $pin2 kB, fds $fds2, threads $thr2"
kill -USR1 "$mp"
wait_until 600 wait_out idle
t_io=$((SECONDS - start))
pin3=$(pin) fds3=$(fds) thr3=$(threads)
echo "after every session verified (${t_io}s): VmPin $pin3 kB, fds $fds3, threads $thr3"
kill -USR1 "$mp"
wait_until 300 wait_out done
cat "$dir/many.out"
grep -q "^verified 0: $N sessions" "$dir/many.out" || fail "no verified round"
grep -q "^done$" "$dir/many.out" || fail "rblk_manysess: data differs"
# the target tears connections down on its workers: let it settle
end=$((SECONDS + 60))
while [ "$SECONDS" -lt "$end" ]; do
	[ "$(fds)" -le "$fds1" ] && [ "$(pin)" -le "$pin1" ] && break
	sleep 0.2
done
pin4=$(pin) fds4=$(fds) thr4=$(threads)
touch "$dir/stop"
wait "$sampler"
peak=$(cat "$dir/peak")
echo "after they left: VmPin $pin4 kB, fds $fds4, threads $thr4 (total $((SECONDS - start))s)"

limit=$((POOL_MIB * 1024 + PER_KIB * N))
echo "VmPin peak $peak kB; limit pool + $PER_KIB KiB x $N = $limit kB;" \
	"per session over the idle target: $(((peak - pin1) / N)) kB"
kill -0 "$tp" || fail "target died"
grep -iE "error" "$dir/target.log" | head -5
# idle, the pool's pages are pinned once (one session's share on top)
[ "$pin1" -le $((POOL_MIB * 1024 + PER_KIB)) ] ||
	fail "idle target pins $pin1 kB: the ${POOL_MIB} MiB pool more than once"
[ "$peak" -le "$limit" ] || fail "VmPin peak $peak kB over $limit kB"
[ $((fds2 - fds1)) -le $((N + 4)) ] || fail "target gained $((fds2 - fds1)) fds for $N sessions"
[ "$thr2" -eq "$thr1" ] && [ "$thr3" -eq "$thr1" ] || fail "target threads $thr1 -> $thr2 -> $thr3"
[ "$fds4" -le "$fds1" ] || fail "target fds did not come back ($fds1 -> $fds4)"
[ "$pin4" -le "$pin1" ] || fail "target VmPin did not come back ($pin1 -> $pin4 kB)"

# A worker's CQ at the device's limit refuses a session, and the initiator
# is told why: at QD 1024 a session takes 2 x (2 x 1024 + 2) = 4100 CQ
# entries, so one worker holds 7 under rxe's max_cqe of 32767.
port2=7449
bg "$BUILD/rblk-target" --listen "rdma://$RDMA_ADDR:$port2" --allow-any-host \
	--workers 1 --max-queue-depth 1024 --export "cq=ram:16M" \
	2>"$dir/target-cq.log"
wait_until 30 grep -q "listening on" "$dir/target-cq.log"
if out=$(timeout 120 "$MANY" "rdma://$RDMA_ADDR:$port2/cq" 9 1024 4096 1 0 2>&1); then
	echo "$out"
	fail "9 sessions of QD 1024 fit one worker's CQ"
fi
echo "$out" | grep -m1 "manysess" || true
grep -q "target out of resources" <<<"$out" ||
	{ echo "$out"; fail "the refusal was not reported as 'target out of resources'"; }
grep -q "CQ is full" "$dir/target-cq.log" ||
	{ tail -5 "$dir/target-cq.log"; fail "the target did not log the full CQ"; }
echo "rdma many sessions: OK"
