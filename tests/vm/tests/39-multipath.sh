#!/bin/bash
# Multipath over rxe: `rblk map --ublk URL_A --path URL_B --failback 1`,
# two rblk-targets exporting the same file under one uuid (safe only
# because the initiator uses one path at a time). fio writes 8 MiB (long
# form 16) at random with crc32c-headed blocks, at 256 KiB/s so that it
# outlasts the failover and failback (about 15 s), while
#   1. target A is kill -9'd: I/O moves to B, `rblk list` shows B active;
#   2. A is restarted on its port: the daemon fails back between commands,
#      `rblk list` shows A active again.
# fio sees no error, a verify-only pass through the device and one on the
# file find every block: no acknowledged write lost.
# soak: 16 MiB written across the failover and failback
# vm-timeout: 400
# soak-timeout: 400
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires fio jq

img=$TEST_DIR/vol.img
truncate -s 64M "$img"
exp="vol0=$img,uuid=6d756c74-6970-4174-8800-000000000039"
start_rdma_target --export "$exp"
url_a=$URL pid_a=$TARGET_PID log_a=$TARGET_LOG
port_a=${URL#rdma://"$ADDR":}
port_a=${port_a%%/*}
start_rdma_target --export "$exp"
url_b=$URL

URL=$url_a # the preferred path (start_rdma_target left the last one here)
map_ublk --path "$url_b" --failback 1 --reconnect-delay 0.5
dlog=$(ls "$RBLK_RUN_DIR"/map-*.log | head -n1)

# the active path's URL as `rblk list -o json` has it
active_url()
{
	"$RBLK_BIN" list -o json |
		jq -r --arg d "$DEV" '.mappings[] | select(.dev == $d) | .paths[.active]'
}

wait_active()
{
	local i
	for ((i = 0; i < 120; i++)); do
		[ "$(active_url)" = "$1" ] && return 0
		sleep 0.5
	done
	"$RBLK_BIN" list
	tail -n 20 "$dlog"
	fail "rblk list does not show $1 as the active path"
}

wait_active "$url_a"
"$RBLK_BIN" list -o json | jq -e --arg a "$url_a" --arg b "$url_b" \
	--arg d "$DEV" '.mappings[] | select(.dev == $d) | .paths == [$a, $b]' \
	>/dev/null || { "$RBLK_BIN" list -o json; fail "rblk list: paths"; }

if [ "${RBLK_SOAK:-0}" = 1 ]; then MIB=16; else MIB=8; fi
FIO=(fio --filename="$DEV" --ioengine=libaio --direct=1 --iodepth=16
	--bsrange=4k-64k --rw=randwrite --verify=crc32c --size=${MIB}M
	--randseed=3939 --verify_state_save=0)
t0=$(t_now)
"${FIO[@]}" --name=mp --do_verify=0 --rate=256k >"$TEST_DIR/fio-write.log" 2>&1 &
fpid=$!
kill_at_exit "$fpid"

sleep 5
kill -0 "$fpid" 2>/dev/null || { cat "$TEST_DIR/fio-write.log"; fail "fio ended before the kill"; }
echo "[$(t_since "$t0") s] kill -9 of target A"
kill -KILL "$pid_a"
wait "$pid_a" 2>/dev/null
wait_active "$url_b"
echo "[$(t_since "$t0") s] rblk list: B active"
"$RBLK_BIN" list

sleep 3
start_rdma_target "$port_a" --export "$exp"
echo "[$(t_since "$t0") s] target A restarted"
wait_active "$url_a"
echo "[$(t_since "$t0") s] rblk list: A active again (failback)"
grep -q "answers again: failing back" "$dlog" || fail "no failback in the daemon's log"

timeout 300 tail --pid="$fpid" -f /dev/null || fail "fio still running 300 s on"
rc=0
wait "$fpid" || rc=$?
grep -E '^ *write:|err=' "$TEST_DIR/fio-write.log"
[ $rc -eq 0 ] && ! grep -q "err= *[1-9]" "$TEST_DIR/fio-write.log" ||
	{ cat "$TEST_DIR/fio-write.log"; fail "fio saw errors across failover and failback"; }
grep -E "now on path|answers again|moving from" "$dlog" | sed 's/^/  /'

timeout 300 "${FIO[@]}" --name=mp --verify_only >"$TEST_DIR/fio-verify.log" 2>&1 ||
	{ cat "$TEST_DIR/fio-verify.log"; fail "verify through $DEV failed"; }
unmap_ublk
timeout 300 fio --filename="$img" --ioengine=psync --bsrange=4k-64k \
	--rw=randwrite --verify=crc32c --size=${MIB}M --randseed=3939 \
	--verify_state_save=0 --name=mp --verify_only >"$TEST_DIR/fio-file.log" 2>&1 ||
	{ cat "$TEST_DIR/fio-file.log"; fail "verify of $img failed"; }
echo "$MIB MiB verified on $DEV and in $img"
echo "multipath over rxe: OK"
