#!/bin/bash
# tests/vm/power-cut-target.sh - runs INSIDE a guest that
# tests/e2e/98-power-cut.sh boots (through run-vm.sh) and later kills
# without a shutdown. Never run it on the host.
#
#   power-cut-target.sh MODE PORT SIZE
#
# The guest has a virtio disk (/dev/vda: an NBD disk on the host whose
# write cache is nbdkit's cache filter, lost with the "power") and a
# user-mode NIC (restrict=on, 192.0.2.128/25, the host forwards a
# loopback port to 192.0.2.150:PORT). MODE says what rblk-target exports
# as "vol" over tcp://192.0.2.150:PORT:
#   bdev           /dev/vda itself (O_DIRECT)
#   ext4           a sparse file of SIZE on ext4 on /dev/vda (O_DIRECT)
#   ext4-buffered  the same file with cache=buffered (page cache)
# For the ext4 modes the file system is mounted (its journal replays),
# unmounted, checked with e2fsck -fn (result in $RBLK_VM_OUT/fsck.N, the
# output of every boot kept) and mounted again; the export file is created
# (truncate, sync) on the first boot only. RBLK_TARGET_UNSAFE_ACK (the
# test-only dishonest target) comes from the host's environment.
# $RBLK_VM_OUT/ready appears when the target listens; the target's log is
# $RBLK_VM_OUT/target.log (appended across boots).
set -u
mode=$1 port=$2 size=$3
OUT=${RBLK_VM_OUT:-/mnt/out}
BUILD=${BUILD:-build}
log() { echo "power-cut-target: $*"; }

modprobe -a virtio_blk virtio_net || exit 1
for _ in $(seq 100); do
	[ -b /dev/vda ] && [ -e /sys/class/net/eth0 ] && break
	sleep 0.1
done
[ -b /dev/vda ] || { log "no /dev/vda"; exit 1; }
ip addr add 192.0.2.150/25 dev eth0 && ip link set eth0 up || exit 1

boot=$(cat "$OUT/boots" 2>/dev/null || echo 0)
boot=$((boot + 1))
echo "$boot" >"$OUT/boots"
case $mode in
bdev) path=/dev/vda ;;
ext4 | ext4-buffered)
	mkdir -p /mnt/d
	mount -t ext4 /dev/vda /mnt/d || { log "mount (journal replay) failed"; exit 1; }
	umount /mnt/d
	e2fsck -fn /dev/vda >"$OUT/fsck.$boot" 2>&1
	echo "rc=$?" >>"$OUT/fsck.$boot"
	mount -t ext4 /dev/vda /mnt/d || exit 1
	if [ ! -e /mnt/d/vol.img ]; then
		truncate -s "$size" /mnt/d/vol.img && sync
	fi
	path=/mnt/d/vol.img
	[ "$mode" = ext4-buffered ] && path+=,cache=buffered
	;;
*) log "unknown mode $mode"; exit 2 ;;
esac
log "boot $boot: exporting $path"
"$BUILD/rblk-target" --listen "tcp://192.0.2.150:$port" --ctl-socket none \
	--workers 1 --export "vol=$path,allow=any" >>"$OUT/target.log" 2>&1 &
tpid=$!
for _ in $(seq 200); do
	grep -q "listening on tcp://192.0.2.150:$port" "$OUT/target.log" 2>/dev/null && break
	kill -0 "$tpid" 2>/dev/null || { log "rblk-target died"; exit 1; }
	sleep 0.1
done
touch "$OUT/ready"
log "target listens"
wait "$tpid"
log "rblk-target exited with $?"
exit 1
