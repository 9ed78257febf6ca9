#!/bin/bash
# An RBD-backed export over real RDMA (rdma_rxe): a micro Ceph cluster in
# the guest on 127.0.0.1 (tests/ceph/micro-cluster.sh, memstore OSD),
# rblk-target exporting rbd:rbd/vol on rdma://192.0.2.1, `rblk map` of it
# as a kernel NBD device; mkfs.ext4, a tree of files with a sha256
# manifest, umount, fsck.ext4 -fn clean, remount and checksums; then the
# image itself, read with `rbd export`, holds the bytes the device read
# and passes fsck (the data is in Ceph, not in a cache).
# soak: the whole scenario (make soak only: the micro cluster alone costs
# a minute of TCG time; the backend sits below the transport-independent
# engine, and make check covers RBD over tcp in tests/e2e/47, 48, 52, 97)
# soak-only
# vm-timeout: 600
# soak-timeout: 600
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_rdma
source "$RBLK_ROOT/tests/ceph/lib.sh"
requires_ceph
requires mkfs.ext4 fsck.ext4 sha256sum mount umount python3

PORT=7530
MNT=$TEST_DIR/mnt
mkdir -p "$MNT"

start_ceph
say "micro cluster up"
tmo 60 rbd create rbd/vol --size 128M
rbd_target_conf "$TEST_DIR/target.conf" rbd_timeout=30
start_rdma_target "$PORT" --config "$TEST_DIR/target.conf" \
	--ctl-socket none --export vol=rbd:rbd/vol
say "target up"
URL=rdma://$ADDR:$PORT/vol

map_dev "$URL" --nbd --queues 2
[ "$(dev_size "$DEV_NAME")" = $((128 * 2048)) ] ||
	fail "$DEV has $(dev_size "$DEV_NAME") sectors, not $((128 * 2048))"
tmo 180 mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4 $DEV"
say "mkfs.ext4 done"
tmo 60 mount "$DEV" "$MNT" || fail "mount $DEV"
cleanup_fn umount_quiet "$MNT"

write_tree "$MNT/tree" "$TEST_DIR/manifest" 100 16
say "tree written: $(du -sk "$MNT/tree" | cut -f1) KiB"
tmo 120 umount "$MNT" || fail "umount"
tmo 180 fsck.ext4 -fn "$DEV" >"$TEST_DIR/fsck.log" 2>&1 ||
	{ cat "$TEST_DIR/fsck.log"; fail "fsck.ext4 -fn found problems"; }
say "fsck.ext4 -fn clean"
echo 3 >/proc/sys/vm/drop_caches
tmo 60 mount "$DEV" "$MNT" || fail "remount"
(cd "$MNT/tree" && tmo 120 sha256sum --quiet -c "$TEST_DIR/manifest") ||
	fail "checksums after remount"
tmo 60 umount "$MNT" || fail "umount"
say "remount through rblk: checksums OK"
dev_sha=$(tmo 120 sha256sum <"$DEV" | cut -d' ' -f1)
tmo 60 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap $DEV"

# the image itself, straight from the cluster: the same bytes, fsck clean
tmo 120 rbd export --no-progress rbd/vol "$TEST_DIR/vol.img"
[ "$(sha256sum <"$TEST_DIR/vol.img" | cut -d' ' -f1)" = "$dev_sha" ] ||
	fail "rbd export of the image differs from what the device read"
tmo 180 fsck.ext4 -fn "$TEST_DIR/vol.img" >"$TEST_DIR/fsck2.log" 2>&1 ||
	{ cat "$TEST_DIR/fsck2.log"; fail "fsck.ext4 -fn of the exported image"; }
say "rbd export: same bytes as the device, fsck clean"
kill -0 "$TARGET_PID" || fail "rblk-target died"
MAP_TEST_OK=1
echo "rbd over rdma: OK"
