#!/bin/bash
# ublk: DISCARD and WRITE_ZEROES. When the device advertises discard
# (queue/discard_max_bytes), a discarded range reads back as zeroes and the
# data around it is untouched; the same for write-zeroes (blkdiscard -z).
# vm-timeout: 300
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires blkdiscard cmp

truncate -s 64M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk
Q=/sys/block/${DEV#/dev/}/queue
echo "discard_max_bytes=$(cat "$Q"/discard_max_bytes) discard_granularity=$(cat "$Q"/discard_granularity) write_zeroes_max_bytes=$(cat "$Q"/write_zeroes_max_bytes)"

MIB=1048576
head -c $((16 * MIB)) /dev/urandom >"$TEST_DIR/data"
timeout 60 dd if="$TEST_DIR/data" of="$DEV" bs=1M oflag=direct status=none ||
	fail "writing 16 MiB"

# read [off, off+len) MiB of the device with O_DIRECT
rd()
{
	timeout 60 dd if="$DEV" bs=1M skip="$1" count="$2" iflag=direct status=none
}
is_zero()
{
	rd "$1" "$2" | cmp -s -n $(($2 * MIB)) - /dev/zero ||
		fail "$3: [$1, $(($1 + $2))) MiB does not read back as zeroes"
}
# (no process substitution: the guest's devtmpfs has no /dev/fd)
is_data()
{
	dd if="$TEST_DIR/data" of="$TEST_DIR/expect" bs=1M skip="$1" count="$2" status=none
	rd "$1" "$2" >"$TEST_DIR/got"
	cmp -s "$TEST_DIR/got" "$TEST_DIR/expect" ||
		fail "$3: [$1, $(($1 + $2))) MiB lost its data"
}

if [ "$(cat "$Q"/discard_max_bytes)" -gt 0 ]; then
	timeout 60 blkdiscard -o $((4 * MIB)) -l $((4 * MIB)) "$DEV" || fail "blkdiscard"
	is_zero 4 4 discard
	is_data 0 4 discard
	is_data 8 2 discard
	echo "discard: 4 MiB read back as zeroes, neighbours intact"
else
	echo "discard not advertised: skipped that part"
fi
if [ "$(cat "$Q"/write_zeroes_max_bytes)" -gt 0 ]; then
	timeout 60 blkdiscard -z -o $((10 * MIB)) -l $((2 * MIB)) "$DEV" || fail "blkdiscard -z"
	is_zero 10 2 write-zeroes
	is_data 8 2 write-zeroes
	is_data 12 4 write-zeroes
	echo "write-zeroes: 2 MiB read back as zeroes, neighbours intact"
else
	echo "write-zeroes not advertised: skipped that part"
fi
unmap_ublk
echo "ublk discard: OK"
