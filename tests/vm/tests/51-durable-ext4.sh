#!/bin/bash
# Flush-ordered replay under a file on ext4 (issue 28, part 1b): as
# 50-durable-bdev.sh, with dm-log-writes under an ext4 file system that
# holds the exported 16 MiB file. At every mark of the log the replayed
# file system must mount (recovering its journal), the file must hold
# what was acknowledged (rblk_fsx verify), and the file system must check
# clean (fsck without repairing).
#   short form: O_DIRECT into a sparse file, 12 operations (a mount and
#   an fsck per mark cost about 10 s in the TCG guest)
# soak: all four of O_DIRECT/buffered x sparse/preallocated, 150 operations
#   each, checked at every FLUSH and FUA entry of the log too, and
#   RBLK_TARGET_UNSAFE_ACK=flush,fua on a sparse O_DIRECT file, which must
#   fail
# soak-timeout: 36000
# vm-timeout: 400
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
need_rdma
need_cmd dmsetup losetup blockdev fallocate mkfs.ext4 e2fsck

cases=("odirect-sparse||sparse|pass|")
LW_FILE_OPS=${RBLK_LW_FILE_OPS:-12}
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	LW_FILE_OPS=${RBLK_LW_FILE_OPS:-150} LW_ALL=1
	cases+=("buffered-prealloc|,cache=buffered|prealloc|pass|" "odirect-prealloc||prealloc|pass|"
		"buffered-sparse|,cache=buffered|sparse|pass|"
		"unsafe-sparse||sparse|fail|flush,fua")
fi
for c in "${cases[@]}"; do
	IFS='|' read -r name opts alloc expect unsafe <<<"$c"
	say "== ext4 $name"
	lw_file_case "ext4-$name" ext4 "$opts" "$alloc" "$expect" "$unsafe"
done
echo "durable (ext4 files): OK"
