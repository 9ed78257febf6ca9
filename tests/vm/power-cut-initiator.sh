#!/bin/bash
# tests/vm/power-cut-initiator.sh - runs INSIDE the initiator's guest that
# tests/e2e/98-power-cut.sh boots beside the target's guest for its
# ublk-ext4 case. Never run it on the host.
#
#   power-cut-initiator.sh TARGET_IP PORT
#
# The two guests share a QEMU dgram (UDP on 127.0.0.1) network, so the
# link outlives the target's power cuts; this guest is 192.0.2.151/25 on
# eth0. It maps tcp://TARGET_IP:PORT/vol through ublk (reconnecting for as
# long as the target is down), makes ext4 on /dev/ublkbN and writes files,
# each fsync'd, recording "name sha256" in $RBLK_VM_OUT/fsynced once its
# fsync returned, until the host creates $RBLK_VM_OUT/stop (after the cuts
# and the reconnect). Then it checks what the issue promises: the file
# system, unmounted and mounted again (the journal replays), is clean to
# e2fsck -fn, and every file recorded as fsync'd holds its recorded
# content. A write lost in the cut shows as the first FLUSH after the
# reconnect failing (the durability epoch, docs/RELIABILITY.md), which
# makes ext4 abort its journal: that is expected, and logged.
# $RBLK_VM_OUT/result: "files N intact M fsck RC" and exit 0 when all hold.
set -u
tip=$1 port=$2
OUT=${RBLK_VM_OUT:-/mnt/out}
BUILD=${BUILD:-build}
RBLK=$BUILD/rblk
log() { echo "power-cut-initiator: $*"; }

modprobe -a virtio_net ublk_drv || exit 1
for _ in $(seq 100); do
	[ -e /sys/class/net/eth0 ] && break
	sleep 0.1
done
ip addr add 192.0.2.151/25 dev eth0 && ip link set eth0 up || exit 1
touch "$OUT/init-up"

# the target's guest may still be booting: map once it answers
dev=''
for _ in $(seq 300); do
	dev=$("$RBLK" map "tcp://$tip:$port/vol" --ublk --queues 2 \
		--reconnect-delay 1 --ctrl-loss-timeout 600 --io-retries -1 \
		2>>"$OUT/map.err") && break
	sleep 1
done
[[ $dev == /dev/ublkb* ]] || { log "rblk map failed"; cat "$OUT/map.err"; exit 1; }
log "mapped $dev"
mkfs.ext4 -q -F "$dev" || exit 1
mkdir -p /mnt/fs
mount -t ext4 "$dev" /mnt/fs || exit 1
touch "$OUT/mapped"

# one file: random content, fsync'd; recorded only once fsync returned
n=0
: >"$OUT/fsynced"
while [ ! -e "$OUT/stop" ]; do
	n=$((n + 1))
	f=/mnt/fs/f$n
	kb=$((16 + RANDOM % 240))
	if head -c "$((kb * 1024))" /dev/urandom >/tmp/data &&
		dd if=/tmp/data of="$f" bs=64k conv=fsync status=none 2>>"$OUT/write.err"; then
		echo "f$n $(sha256sum </tmp/data | cut -d' ' -f1)" >>"$OUT/fsynced"
	else
		log "write or fsync of f$n failed (after the cut, an aborted journal is expected)"
		sleep 1
	fi
done
dmesg | grep -iE 'ext4|jbd2|I/O error' | tail -n 5
log "stop: $(wc -l <"$OUT/fsynced") files fsync'd"

umount /mnt/fs || { log "umount failed"; exit 1; }
mount -t ext4 "$dev" /mnt/fs || { log "mount after the cut failed"; exit 1; }
umount /mnt/fs
e2fsck -fn "$dev" >"$OUT/fsck" 2>&1
fsck=$?
mount -t ext4 -o ro "$dev" /mnt/fs || exit 1
files=0 intact=0
while read -r name sum; do
	files=$((files + 1))
	if [ "$(sha256sum <"/mnt/fs/$name" 2>/dev/null | cut -d' ' -f1)" = "$sum" ]; then
		intact=$((intact + 1))
	else
		log "$name: not what was fsync'd"
	fi
done <"$OUT/fsynced"
umount /mnt/fs
"$RBLK" unmap "$dev" || log "unmap failed"
echo "files $files intact $intact fsck $fsck" | tee "$OUT/result"
[ "$files" -gt 0 ] && [ "$intact" = "$files" ] && [ "$fsck" = 0 ]
