#!/bin/bash
# Kernel NBD over rdma under fio: /dev/nbdN from `rblk map --nbd --queues 2`;
# fio libaio O_DIRECT at QD32: 4k random writes with crc32c verification
# (write, then read back and verify), a separate verify-only pass, 1 MiB
# sequential writes with verification, and (long form only) 4k random
# writes and reads for numbers.
# No I/O error may reach the kernel log. Prints IOPS and bandwidth.
# soak: adds 15 s of 4k random writes and reads for numbers
# vm-timeout: 600
# soak-timeout: 600
set -euo pipefail
source tests/vm/lib.sh
need_rdma
requires fio truncate blkdiscard cmp

PORT=7521
URL=rdma://$ADDR:$PORT/vol
truncate -s 256M "$TEST_DIR/vol.img"
start_rdma_target "$PORT" --export "vol=$TEST_DIR/vol.img"
map_dev "$URL" --nbd --queues 2
dmesg_start=$(dmesg | wc -l)

FIO=(fio --filename="$DEV" --ioengine=libaio --direct=1 --iodepth=32
	--output-format=json --group_reporting)

# run_fio NAME FIO-ARGS...: run, fail on errors, print a summary line
run_fio()
{
	local name=$1 out=$TEST_DIR/fio-$1.json rc=0
	shift
	timeout -k 10 300 "${FIO[@]}" --name="$name" "$@" >"$out" 2>"$TEST_DIR/fio-$name.err" || rc=$?
	if [ $rc -ne 0 ] || ! jq -e '.jobs[0].error == 0' "$out" >/dev/null 2>&1; then
		cat "$TEST_DIR/fio-$name.err" "$out" | tail -n 40
		fail "fio $name: exit $rc"
	fi
	jq -r --arg n "$name" '.jobs[0] | "fio \($n):" +
		([["read", .read], ["write", .write]] | map(select(.[1].iops >= 1) |
		 " \(.[0]) \(.[1].iops | floor) IOPS \(.[1].bw / 1024 | floor) MiB/s" +
		 " clat \(.[1].clat_ns.mean / 1000 | floor) us") | join(","))' "$out"
}

run_fio randwrite-verify --rw=randwrite --bs=4k --size=64M \
	--verify=crc32c --do_verify=1
run_fio verify-only --rw=randwrite --bs=4k --size=64M \
	--verify=crc32c --verify_only
run_fio seqwrite-1m-verify --rw=write --bs=1M --size=128M --offset=128M \
	--verify=crc32c --do_verify=1
# numbers (not a check: tools/bench measures): the long form only
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	run_fio randwrite --rw=randwrite --bs=4k --size=64M --time_based --runtime=15
	run_fio randread --rw=randread --bs=4k --size=64M --time_based --runtime=15
fi

# TRIM and WRITE_ZEROES (BLKZEROOUT): the range reads back as zeroes
head -c 8M /dev/urandom | tmo 60 dd of="$DEV" bs=1M seek=200 oflag=direct status=none
tmo 60 blkdiscard -o $((200 << 20)) -l $((4 << 20)) "$DEV" || fail "blkdiscard"
tmo 60 blkdiscard -z -o $((204 << 20)) -l $((4 << 20)) "$DEV" || fail "blkdiscard -z"
tmo 60 dd if="$DEV" of="$TEST_DIR/zeroes" bs=1M skip=200 count=8 iflag=direct status=none ||
	fail "reading the discarded / zeroed range"
cmp -n $((8 << 20)) "$TEST_DIR/zeroes" /dev/zero ||
	fail "discarded / zeroed range does not read back as zeroes"
say "trim + write zeroes: read back as zeroes"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E "I/O error|Other side returned error|timed out|Connection timed out"; then
	fail "the kernel logged I/O errors"
fi
tmo 60 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap $DEV"
[ "$(dev_size "$DEV_NAME")" = 0 ] || fail "$DEV still has a size after unmap"
kill -0 "$TARGET_PID" || fail "rblk-target died"
echo "nbd map fio: OK"
