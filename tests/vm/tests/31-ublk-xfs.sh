#!/bin/bash
# ublk: xfs on /dev/ublkbN over rdma (rxe). mkfs.xfs, mount, a file tree
# with a sha256 manifest, umount, xfs_repair -n clean, remount, verify.
# soak: the whole test (make soak only: make check puts ext4 on ublk in
# guest 30 and 35; xfs adds its own I/O pattern, not another rblk path)
# soak-only
# vm-timeout: 400
# soak-timeout: 400
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires mkfs.xfs xfs_repair sha256sum

truncate -s 512M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk
fs_fill_and_check mkfs.xfs mkfs.xfs -q -f

timeout 120 xfs_repair -n "$DEV" >"$TEST_DIR/repair.log" 2>&1 ||
	{ cat "$TEST_DIR/repair.log"; fail "xfs_repair -n found problems"; }
echo "xfs_repair -n: clean"

remount_check
queue_stats
unmap_ublk
echo "ublk xfs: OK"
