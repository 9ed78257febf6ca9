#!/bin/bash
# A mapped volume pins what it uses (issue 26): `rblk map --ublk --queues 4`
# and `rblk map --nbd --queues 4` of one volume each pin <= 64 MiB (VmPin
# of the map daemon, sampled every 0.2 s through the run: at main 044a766
# a queue registered depth x max I/O = 64 MiB of bounce slots plus as much
# again of the front end's own buffers) while fio writes and verifies with
# requests from 4 KiB to 1 MiB (the large ones split by the kernel at the
# device's 128 KiB limit), and `rblk list` shows what each daemon pins.
# vm-timeout: 900
set -euo pipefail
source tests/vm/lib.sh
need_rdma
requires fio jq
MAX_KIB=$((64 * 1024))

truncate -s 256M "$TEST_DIR/vol.img"
start_rdma_target 7530 --export "vol=$TEST_DIR/vol.img"
URL=rdma://$ADDR:7530/vol
pin() { awk '/^VmPin/ { print $2 }' "/proc/$1/status"; }

# one_frontend FE: map with 4 queues, fio verify, the daemon's VmPin peak
one_frontend()
{
	local fe=$1 pid peak=0 v sampler
	if [ "$fe" = ublk ] && [ ! -c /dev/ublk-control ]; then
		say "SKIP ublk: no /dev/ublk-control"
		return 0
	fi
	map_dev "$URL" "--$fe" --queues 4
	pid=$(map_daemon_pids | head -n1)
	[ -n "$pid" ] || fail "no map daemon for $DEV"
	rm -f "$TEST_DIR/stop" "$TEST_DIR/peak"
	( peak=0
	  while [ ! -e "$TEST_DIR/stop" ]; do
		v=$(pin "$pid") || break
		[ "$v" -gt "$peak" ] && { peak=$v; echo "$peak" >"$TEST_DIR/peak"; }
		sleep 0.2
	  done ) &
	sampler=$!
	timeout -k 10 400 fio --filename="$DEV" --ioengine=libaio --direct=1 \
		--iodepth=32 --numjobs=2 --size=64M --offset_increment=64M \
		--bsrange=4k-1m --rw=randwrite --verify=crc32c --verify_fatal=1 \
		--randrepeat=1 --group_reporting --name="$fe-verify" \
		>"$TEST_DIR/fio-$fe.log" 2>&1 ||
		{ cat "$TEST_DIR/fio-$fe.log"; fail "fio verify on $DEV ($fe) failed"; }
	grep -E '^ *(write|read):|err=' "$TEST_DIR/fio-$fe.log" || true
	"$RBLK_BIN" list | tee "$TEST_DIR/list-$fe.txt"
	grep -q "^$DEV .* $pid  *[0-9.]*M " "$TEST_DIR/list-$fe.txt" ||
		fail "rblk list does not show what $DEV's daemon pins"
	"$RBLK_BIN" list -o json | jq -e --arg d "$DEV" \
		'.mappings[] | select(.dev == $d) | .pinned_bytes > 0' >/dev/null ||
		fail "rblk list -o json has no pinned_bytes for $DEV"
	touch "$TEST_DIR/stop"
	wait "$sampler"
	peak=$(cat "$TEST_DIR/peak")
	say "rblk map --$fe --queues 4: daemon VmPin peak $peak kB (limit $MAX_KIB kB)"
	echo "$fe $peak" >>"$TEST_DIR/peaks"
	[ -n "${RBLK_VM_TEST_OUT:-}" ] && cp "$TEST_DIR/fio-$fe.log" "$RBLK_VM_TEST_OUT/" || true
	timeout 120 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap $DEV"
	[ "$peak" -le "$MAX_KIB" ] || fail "rblk map --$fe --queues 4 pinned $peak kB, over 64 MiB"
}

one_frontend ublk
one_frontend nbd
cat "$TEST_DIR/peaks"
echo "map memory: OK"
