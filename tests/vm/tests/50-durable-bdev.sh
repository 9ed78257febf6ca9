#!/bin/bash
# Flush-ordered replay under a block device export (issue 28, part 1a).
# dm-log-writes sits under what rblk-target exports (/dev/mapper/lw, a
# 16 MiB loop device; the log on another). The initiator runs one command
# at a time - WRITE (1 in 5 FUA), TRIM, WRITE_ZEROES (1 in 5 FUA), FLUSH -
# and journals what was acknowledged; after each FLUSH and FUA write it
# logs a mark in dm-log-writes. The log is then replayed (rblk_fsx replay)
# and checked at every mark (each block holds what it held when the mark
# was taken, a FUA mark allowing the writes since the last flush) and at
# every FLUSH/FUA entry (loosely: what the last mark had, or anything
# written before the next).
#   short form (100 operations each):
#   1. librblk over rdma, O_DIRECT export
#   2. /dev/ublkbN (rblk map --ublk), the device exported cache=buffered
#   3. RBLK_TARGET_UNSAFE_ACK=flush,fua (FLUSH answered without syncing,
#      FUA without RWF_DSYNC): the replay must find acknowledged data
#      missing
# soak: 5000 operations per case, and also /dev/ublkbN on the O_DIRECT
#   export, librblk on the cache=buffered one, and each lie alone
#   (RBLK_TARGET_UNSAFE_ACK=flush, =fua), each of which must fail
# soak-timeout: 7200
# vm-timeout: 400
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires dmsetup losetup blockdev
cases=("lib-odirect||lib|pass|" "ublk-buffered|,cache=buffered|ublk|pass|"
	"lib-unsafe||lib|fail|flush,fua")
LW_OPS=${RBLK_LW_OPS:-100}
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	LW_OPS=${RBLK_LW_OPS:-5000}
	cases+=("ublk-odirect||ublk|pass|" "lib-buffered|,cache=buffered|lib|pass|"
		"lib-unsafe-flush||lib|fail|flush" "lib-unsafe-fua||lib|fail|fua")
fi
for c in "${cases[@]}"; do
	IFS='|' read -r name opts init expect unsafe <<<"$c"
	say "== $name"
	lw_create 16M
	lw_run "$name" "$LW_DEV$opts" "$init" "$expect" "$unsafe"
done
echo "durable (block device): OK"
