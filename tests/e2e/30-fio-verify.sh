#!/usr/bin/env bash
# fio's nbd engine through `rblk nbd`, two jobs = two NBD connections on two
# rblk queues (multi-conn), QD32 each: random writes of 4k..64k with crc32c
# headers, then a verify-only pass over the same layout.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires fio truncate
requires_built
fio --enghelp 2>/dev/null | grep -qw nbd || skip "fio lacks the nbd engine"

truncate -s 64M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
sock=$TEST_DIR/nbd.sock
start_nbd "$RBLK_TARGET_URL/vol0" "$sock" --queues 2

# each job owns its own 32 MiB region (offset_increment), so verification
# is exact whatever order the two connections' writes land in
common=(--ioengine=nbd "--uri=nbd+unix:///?socket=$sock" --rw=randwrite
	--bsrange=4k-64k --verify=crc32c --iodepth=32 --size=32M --numjobs=2
	--offset_increment=32M --group_reporting --verify_state_save=0
	--randseed=4242)

tmo 120 fio --name=write "${common[@]}" --do_verify=0 \
	--output="$TEST_DIR/write.out" || { cat "$TEST_DIR/write.out"; fail "fio write"; }
grep -E "IOPS|err=" "$TEST_DIR/write.out"
grep -q "err= 0" "$TEST_DIR/write.out" || fail "fio write reported errors"

tmo 120 fio --name=write "${common[@]}" --verify_only \
	--output="$TEST_DIR/verify.out" || { cat "$TEST_DIR/verify.out"; fail "fio verify"; }
grep -E "IOPS|err=|verify" "$TEST_DIR/verify.out"
grep -q "err= 0" "$TEST_DIR/verify.out" || fail "fio verify reported errors"

# both connections were served at once on distinct queues
grep -q "connected on queue 0" "$RBLK_NBD_LOG" || fail "no connection on queue 0"
grep -q "connected on queue 1" "$RBLK_NBD_LOG" || fail "no connection on queue 1"
echo "PASS: $TEST_NAME"
