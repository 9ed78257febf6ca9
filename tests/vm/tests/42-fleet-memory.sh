#!/bin/bash
# The initiator at fleet scale over rxe (issue 26): one process opens 256
# sessions (64 handles x 4 queues, default options: depth 64, max I/O 1
# MiB) to one target and each verifies 4 KiB written from and read into
# buffers it never registered. Every session verifies; the initiator's
# VmPin stays <= 256 MiB, in fact <= the bounce cap + 128 KiB a session
# (at main 044a766 each queue registered depth x max I/O = 64 MiB of
# bounce slots at open: 16 GiB for these, which the guest cannot hold).
# The target's VmPin stays <= its pool plus 256 KiB a session: a depth-64
# session pins its message buffers, 144 KiB (130 receives of 64 + 1024
# bytes, 64-byte response buffers; its windows and the QP's rings are not
# pinned memory). The export is a RAM volume without direct access, so the
# I/O goes through the pool: a direct one is registered once per worker
# (16 MiB x 4 here), which is the volume's cost, not a session's, and is
# what made this target look like 400-530 KiB a session before. Then a
# non-root user under a small RLIMIT_MEMLOCK gets an error naming the
# limit and the bytes needed, and under the common default (8 MiB) opens
# and verifies a 4-queue session.
# Four target workers: a session at depth 64 takes 2 x (2 x 64 + 2) of its
# worker's CQ entries, so one worker holds 126 under rxe's max_cqe.
# vm-timeout: 900
set -u
. "$(dirname "$0")/../lib.sh"
need_rdma
FLEET=$BUILD/tests/rblk_fleet
need_file "$FLEET"

H=${RBLK_VM_HANDLES:-64} Q=4
S=$((H * Q))
POOL_MIB=64
PER_KIB=256
# the issue's bound is 256 MiB; what librblk pins is each queue's message
# buffers (about 104 KiB at depth 64 over rdma) plus bounce buffers under
# RBLK_BOUNCE_LIMIT (32 MiB): at e28b00f 300 KiB a queue (76.8 MB here)
INIT_MAX_KIB=$((32 * 1024 + 128 * S))
ulimit -l unlimited
ulimit -n $((8 * S + 256)) || fail "ulimit -n $((8 * S + 256))"

port=7450
url=rdma://$RDMA_ADDR:$port
dir=$TEST_DIR/fleet
mkdir -p "$dir"
bg "$BUILD/rblk-target" --listen "$url" --allow-any-host --log-level info \
	--workers 4 --slot-pool ${POOL_MIB}M --export "fleet=ram:16M,nodirect" \
	2>"$dir/target.log"
tp=$!
wait_until 30 grep -q "listening on" "$dir/target.log"
pin() { awk '/^VmPin/ { print $2 }' "/proc/$1/status"; }
# one session first: the workers' pools are registered
timeout 120 "$FLEET" open "$url/fleet" 1 1 >/dev/null || fail "warm-up session"
tpin0=$(pin "$tp")
say "target idle after one session: VmPin $tpin0 kB"

( peak=0
  while [ ! -e "$dir/stop" ]; do
	v=$(pin "$tp") && [ -n "$v" ] || break
	[ "$v" -gt "$peak" ] && { peak=$v; echo "$peak" >"$dir/peak"; }
	sleep 0.2
  done ) &
sampler=$!

bg "$FLEET" open "$url/fleet" "$H" "$Q" sig >"$dir/fleet.out" 2>&1
fp=$!
exec 3>&1
wait_out()
{
	grep -q "^$1" "$dir/fleet.out" && return 0
	kill -0 "$fp" 2>/dev/null ||
		{ cat "$dir/fleet.out"; fail "rblk_fleet exited before '$1'"; } >&3
	return 1
}
t0=$(t_now)
wait_until 600 wait_out open
ipin1=$(pin "$fp") tpin1=$(pin "$tp")
say "$S sessions open after $(t_since "$t0") s: initiator VmPin $ipin1 kB, target $tpin1 kB"
kill -USR1 "$fp"
wait_until 600 wait_out verified
ipin2=$(pin "$fp") tpin2=$(pin "$tp")
say "every session verified 4 KiB after $(t_since "$t0") s: initiator VmPin $ipin2 kB, target $tpin2 kB"
kill -USR1 "$fp"
wait_until 300 wait_out done
touch "$dir/stop"
wait "$sampler"
peak=$(cat "$dir/peak")
cat "$dir/fleet.out"
grep -q "^verified $S sessions" "$dir/fleet.out" || fail "not all $S sessions verified"
grep -q "^done$" "$dir/fleet.out" || fail "rblk_fleet did not finish"
limit=$((POOL_MIB * 1024 + PER_KIB * S))
say "initiator: $((ipin2 / S)) kB a session (limit $INIT_MAX_KIB kB in all); target VmPin peak $peak kB (limit $limit kB), $(((peak - POOL_MIB * 1024) / S)) kB a session over the pool"
[ "$ipin1" -le "$INIT_MAX_KIB" ] && [ "$ipin2" -le "$INIT_MAX_KIB" ] ||
	fail "initiator VmPin $ipin1 / $ipin2 kB over $INIT_MAX_KIB kB"
[ "$peak" -le "$limit" ] || fail "target VmPin peak $peak kB over $limit kB"

# ---- RLIMIT_MEMLOCK for a user without CAP_IPC_LOCK -------------------------
need_cmd setpriv
as_nobody() # LIMIT_KIB CMD...
{
	local l=$1
	shift
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		bash -c 'ulimit -l "$0" && exec "$@"' "$l" "$@"
}
out=$(as_nobody 64 "$FLEET" open "$url/fleet" 1 4 2>&1) &&
	{ echo "$out"; fail "a 4-queue session fit in RLIMIT_MEMLOCK 64 KiB?"; }
echo "$out" | tail -2
if grep -qi "permission denied\|no rdma device\|No such device" <<<"$out" &&
	! grep -q RLIMIT_MEMLOCK <<<"$out"; then
	say "SKIP memlock check: user nobody cannot use the RDMA device here"
else
	grep -q "RLIMIT_MEMLOCK is 65536 bytes.*needs at least [0-9]" <<<"$out" ||
		fail "the refusal does not name RLIMIT_MEMLOCK and the bytes needed"
	out=$(as_nobody 8192 "$FLEET" open "$url/fleet" 1 4 2>&1) ||
		{ echo "$out"; fail "a 4-queue session did not work under RLIMIT_MEMLOCK 8 MiB"; }
	grep -q "^verified 4 sessions" <<<"$out" || { echo "$out"; fail "no verify under 8 MiB"; }
	say "user nobody, RLIMIT_MEMLOCK 8 MiB: $(grep '^verified' <<<"$out")"
fi
echo "fleet memory: OK"
