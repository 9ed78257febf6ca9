#!/bin/bash
# ublk: fio verify through /dev/ublkbN with 2 hardware queues: randwrite
# 4k at QD32 (one job per CPU, so both queues carry I/O) with crc32c verify,
# then unmap, map again and verify the same blocks in a separate pass. The
# first mapping spins before its queue threads sleep (the default), the
# second sleeps at once (--poll-spin-us 0): both loops carry data.
# vm-timeout: 500
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires fio

truncate -s 128M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk

FIO=(fio --filename="$DEV" --ioengine=libaio --direct=1 --iodepth=32
	--bs=4k --rw=randwrite --verify=crc32c --verify_fatal=1
	--numjobs=2 --size=32M --offset_increment=32M --cpus_allowed=0-1
	--cpus_allowed_policy=split --randrepeat=1 --group_reporting)

t0=$(t_now)
timeout 300 "${FIO[@]}" --name=write-verify >"$TEST_DIR/fio-write.log" 2>&1 ||
	{ cat "$TEST_DIR/fio-write.log"; fail "fio randwrite+verify failed"; }
echo "fio randwrite + verify: $(t_since "$t0") s"
grep -E '^ *(write|read):|err=' "$TEST_DIR/fio-write.log"
queue_stats
unmap_ublk

map_ublk --poll-spin-us 0
grep -q "poll spin 0 us" "$RBLK_RUN_DIR"/map-*.log ||
	fail "the second mapping does not say it sleeps at once"
t0=$(t_now)
timeout 300 "${FIO[@]}" --name=verify-only --verify_only=1 \
	>"$TEST_DIR/fio-verify.log" 2>&1 ||
	{ cat "$TEST_DIR/fio-verify.log"; fail "fio verify pass after remap failed"; }
echo "fio verify pass after remap: $(t_since "$t0") s"
grep -E '^ *(write|read):|err=' "$TEST_DIR/fio-verify.log"
unmap_ublk
echo "ublk fio verify: OK"
