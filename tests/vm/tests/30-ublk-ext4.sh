#!/bin/bash
# ublk: ext4 on /dev/ublkbN over rdma (rxe). mkfs.ext4, mount, a file tree
# with a sha256 manifest, umount, fsck -fn clean, remount, verify; then
# the same after unmapping and mapping the volume again (the data lives on
# the target, not in the initiator).
# vm-timeout: 400
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires mkfs.ext4 e2fsck sha256sum

truncate -s 256M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk
fs_fill_and_check mkfs.ext4 mkfs.ext4 -q -F

timeout 120 e2fsck -fn "$DEV" || fail "e2fsck -fn found problems"
echo "e2fsck -fn: clean"

remount_check
queue_stats

unmap_ublk
map_ublk
timeout 60 mount "$DEV" "$MNT" || fail "mount after remap"
check_manifest "$MNT" "$TEST_DIR/manifest"
timeout 60 umount "$MNT" || fail "umount"
timeout 120 e2fsck -fn "$DEV" || fail "e2fsck -fn after remap"
unmap_ublk
[ -e "$DEV" ] && fail "$DEV still exists after unmap"
echo "ublk ext4: OK"
