#!/bin/bash
# ublk: xfs on /dev/ublkbN over rdma (rxe). mkfs.xfs, mount, a file tree
# with a sha256 manifest, umount, xfs_repair -n clean, remount, verify.
# vm-timeout: 400
# shellcheck source=tests/vm/ublk-lib.sh disable=SC2119
source tests/vm/ublk-lib.sh
ublk_requires mkfs.xfs xfs_repair sha256sum

truncate -s 512M "$WORK/vol.img"
start_target --export "vol0=$WORK/vol.img"
map_ublk
MNT=$WORK/mnt
mkdir -p "$MNT" "$WORK/src"

t0=$(t_now)
timeout 120 mkfs.xfs -q -f "$DEV" || fail "mkfs.xfs $DEV"
echo "mkfs.xfs: $(t_since "$t0") s"
timeout 60 mount "$DEV" "$MNT" || fail "mount $DEV"
umount_at_exit "$MNT"

make_tree "$WORK/src" 60
manifest "$WORK/src" "$WORK/manifest"
t0=$(t_now)
timeout 120 cp -a "$WORK/src/." "$MNT/" || fail "copying the tree"
timeout 60 sync || fail "sync"
echo "tree: $(find "$WORK/src" -type f | wc -l) files written in $(t_since "$t0") s"
check_manifest "$MNT" "$WORK/manifest"
timeout 60 umount "$MNT" || fail "umount"

timeout 120 xfs_repair -n "$DEV" >"$WORK/repair.log" 2>&1 ||
	{ cat "$WORK/repair.log"; fail "xfs_repair -n found problems"; }
echo "xfs_repair -n: clean"

timeout 60 mount "$DEV" "$MNT" || fail "remount"
echo 3 >/proc/sys/vm/drop_caches
check_manifest "$MNT" "$WORK/manifest"
echo "remount: checksums OK"
timeout 60 umount "$MNT" || fail "umount"
queue_stats
unmap_ublk
echo "ublk xfs: OK"
