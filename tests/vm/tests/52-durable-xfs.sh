#!/bin/bash
# Flush-ordered replay under a file on xfs (issue 28, part 1b): as
# 50-durable-bdev.sh, with dm-log-writes under an xfs file system that
# holds the exported 16 MiB file. At every mark of the log the replayed
# file system must mount (recovering its journal), the file must hold
# what was acknowledged (rblk_fsx verify), and the file system must check
# clean (fsck without repairing).
#   short form: cache=buffered into a preallocated file, 6 operations
#   (a mount and an xfs_repair -n per mark cost about 40 s in TCG)
# soak-only (make check runs 51 for a file system and 96 for fsx: its
# 35 minutes have no room for this guest form)
# soak: all four of O_DIRECT/buffered x sparse/preallocated, 60 operations
#   each, checked at every FLUSH and FUA entry of the log too, and
#   RBLK_TARGET_UNSAFE_ACK=flush,fua on a sparse O_DIRECT file, which must
#   fail
# soak-timeout: 36000
# vm-timeout: 500
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
need_rdma
need_cmd dmsetup losetup blockdev fallocate mkfs.xfs xfs_repair

cases=("buffered-prealloc|,cache=buffered|prealloc|pass|")
LW_FILE_OPS=${RBLK_LW_FILE_OPS:-6} # xfs_repair takes ~40 s a mark in TCG
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	LW_FILE_OPS=${RBLK_LW_FILE_OPS:-60} LW_ALL=1
	cases+=("odirect-sparse||sparse|pass|" "odirect-prealloc||prealloc|pass|"
		"buffered-sparse|,cache=buffered|sparse|pass|"
		"unsafe-sparse||sparse|fail|flush,fua")
fi
for c in "${cases[@]}"; do
	IFS='|' read -r name opts alloc expect unsafe <<<"$c"
	say "== xfs $name"
	lw_file_case "xfs-$name" xfs "$opts" "$alloc" "$expect" "$unsafe"
done
echo "durable (xfs files): OK"
