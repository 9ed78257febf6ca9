#!/usr/bin/env bash
# Multipath failover (librblk paths, the fio engine's path= option): two
# rblk-targets export the same file under one uuid, so both report the same
# volume id. Sharing a file between two targets is only safe here because
# the initiator uses one path at a time (active/passive) and waits for the
# old path's commands to finish before it fails back; two initiators, or
# two active paths, would need a shared-storage backend with fencing (RBD,
# 49-rbd-multipath.sh).
#
#  1. fio verify writes through path A with B as second path (failback
#     off); 5 cycles each kill -9 the active target (A, B, A, ...), I/O
#     moves to the other (the pause each time is measured from fio's
#     per-I/O latency log and must stay <= 5 s), the killed one is
#     restarted on its port. fio's verify passes, and a second fio run
#     re-reads everything the first one wrote (verify_only): no
#     acknowledged write lost.
#  2. failback: with failback=1, A is killed and restarted; the session
#     moves to B and back to A, data verified.
#  3. a path to another volume is refused with an error naming both URLs.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires fio
requires_built
requires_fio_engine

img=$TEST_DIR/vol.img
truncate -s 48M "$img"
uuid=6d756c74-6970-4174-8800-000000000049
exp="vol0=$img,uuid=$uuid"

declare -A port pid dir
start_target --export "$exp"
port[a]=$RBLK_PORT pid[a]=$RBLK_TARGET_PID dir[a]=$TEST_DIR
mkdir "$TEST_DIR/b"
TEST_DIR=$TEST_DIR/b start_target --export "$exp"
port[b]=$RBLK_PORT pid[b]=$RBLK_TARGET_PID dir[b]=$TEST_DIR/b
url_a=tcp://127.0.0.1:${port[a]}/vol0
url_b=tcp://127.0.0.1:${port[b]}/vol0

# Start target $1 again on its own port (SO_REUSEADDR: the port is free
# again at once after kill -9).
restart_target()
{
	local t=$1 log=${dir[$1]}/restart.$RANDOM.log
	"$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:${port[$t]}" \
		--allow-any-host --log-level info \
		--ctl-socket "${dir[$t]}/restart.sock" --export "$exp" \
		>"$log" 2>&1 &
	pid[$t]=$!
	cleanup_fn stop_pid "${pid[$t]}"
	_wait_for_line "$log" "listening on" "${pid[$t]}" 10 ||
		{ cat "$log"; fail "target $t did not restart"; }
}

# Wait until the fio log $1 holds $2 lines saying the session moved.
wait_moves()
{
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(grep -c ': now on path' "$1" || true)" -ge "$2" ] && return 0
		sleep 0.05
	done
	cat "$1"
	fail "the session did not move to another path (want $2 moves)"
}

fio_job=(--name=mp --ioengine=external:"$RBLK_FIO_ENGINE"
	--uri="$url_a" --path="$url_b" --rw=randwrite --bs=4k --size=28M
	--iodepth=8 --verify=crc32c --verify_fatal=1 --randrepeat=1)

# ---- 1: five kill -9 cycles, alternating targets --------------------------
fio "${fio_job[@]}" --failback=0 --verify_backlog=256 --rate_iops=250 \
	--write_lat_log="$TEST_DIR/lat" --log_unix_epoch=1 >"$TEST_DIR/fio1.out" 2>&1 &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
sleep 2
active=a
kills=()
for ((c = 1; c <= 5; c++)); do
	kill -0 "$fio_pid" 2>/dev/null || { cat "$TEST_DIR/fio1.out"; fail "fio ended before cycle $c"; }
	kill -9 "${pid[$active]}"
	wait "${pid[$active]}" 2>/dev/null || true
	kills+=("$(date +%s%3N)")
	wait_moves "$TEST_DIR/fio1.out" "$c"
	restart_target "$active"
	echo "cycle $c: killed $active, I/O moved on"
	[ $active = a ] && active=b || active=a
	sleep 1.5
done
wait_pid 120 "$fio_pid" || { cat "$TEST_DIR/fio1.out"; fail "fio verify failed"; }
grep -q "err= 0" "$TEST_DIR/fio1.out" || { cat "$TEST_DIR/fio1.out"; fail "fio reported an error"; }

# The pause of each cycle: the longest latency of an I/O completing between
# that kill and the next (fio logs each I/O: unix time ms, latency ns, ...).
lat=$(ls "$TEST_DIR"/lat_lat.*.log)
pauses=$(awk -F', *' -v kills="${kills[*]}" '
	BEGIN { n = split(kills, k, " "); k[n + 1] = 1e15 }
	{ for (i = 1; i <= n; i++)
		if ($1 >= k[i] && $1 < k[i + 1]) {
			c[i]++
			if ($2 / 1e6 > m[i])
				m[i] = $2 / 1e6
		} }
	# a cycle after which no I/O completed did not continue: -1
	END { for (i = 1; i <= n; i++) printf "%d ", c[i] ? m[i] : -1 }' "$lat")
echo "failover pause per cycle (ms): $pauses"
for p in $pauses; do
	[ "$p" -ge 0 ] || fail "no I/O completed after a kill (pauses: $pauses)"
	[ "$p" -le 5000 ] || fail "a failover paused I/O for $p ms (> 5 s)"
done

# every acknowledged write is on the volume: read it all back, by path B
# first this time
fio --name=mp --ioengine=external:"$RBLK_FIO_ENGINE" --uri="$url_b" \
	--path="$url_a" --rw=randwrite --bs=4k --size=28M --iodepth=8 \
	--verify=crc32c --verify_fatal=1 --randrepeat=1 --verify_only \
	>"$TEST_DIR/verify1.out" 2>&1 ||
	{ cat "$TEST_DIR/verify1.out"; fail "verify_only after the cycles failed"; }
echo "verify_only after 5 cycles: OK"

# ---- 2: failback --------------------------------------------------------------
fio "${fio_job[@]}" --offset=32M --size=4M --failback=1 --rate_iops=200 \
	>"$TEST_DIR/fio2.out" 2>&1 &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
sleep 1.5
kill -9 "${pid[a]}"
wait "${pid[a]}" 2>/dev/null || true
wait_moves "$TEST_DIR/fio2.out" 1
restart_target a
wait_moves "$TEST_DIR/fio2.out" 2
grep -q "answers again: failing back" "$TEST_DIR/fio2.out" ||
	{ cat "$TEST_DIR/fio2.out"; fail "no failback to path A"; }
grep ': now on path' "$TEST_DIR/fio2.out" | tail -1 | grep -q "now on path 0" ||
	{ cat "$TEST_DIR/fio2.out"; fail "the session did not end on path A"; }
echo "failed back to A"
wait_pid 60 "$fio_pid" || { cat "$TEST_DIR/fio2.out"; fail "fio verify (failback) failed"; }

# ---- 3: a path to another volume ------------------------------------------
truncate -s 32M "$TEST_DIR/other.img"
mkdir "$TEST_DIR/c"
TEST_DIR=$TEST_DIR/c start_target --export "vol0=$TEST_DIR/other.img"
url_c=tcp://127.0.0.1:$RBLK_PORT/vol0
if fio --name=bad --ioengine=external:"$RBLK_FIO_ENGINE" --uri="$url_a" \
	--path="$url_c" --rw=read --bs=4k --size=1M >"$TEST_DIR/bad.out" 2>&1; then
	fail "fio accepted a path to another volume"
fi
grep -q "path $url_c is not the same volume as $url_a" "$TEST_DIR/bad.out" ||
	{ cat "$TEST_DIR/bad.out"; fail "no clear error for a path to another volume"; }
echo "a path to another volume is refused: $(grep -o 'path tcp.*refusing to use it' "$TEST_DIR/bad.out" | head -1)"
echo "PASS: $TEST_NAME"
