#!/bin/bash
# Live resize and ublk on a kernel without UPDATE_SIZE (6.12; issue 29
# point 1): `ctl resize-export` grows the export under /dev/ublkbN; the
# daemon learns it and, GET_FEATURES lacking UBLK_F_UPDATE_SIZE, logs what
# the user does (the device keeps its size and keeps working); after
# unmap and map the device has the new size and the data written before.
# On a kernel with UPDATE_SIZE (6.16+) the device grows in place instead,
# which this test then checks.
# vm-timeout: 200
set -euo pipefail
source tests/vm/lib.sh
ublk_requires sha256sum truncate

CTL=$TEST_DIR/ctl.sock
img=$TEST_DIR/vol.img
truncate -s 64M "$img"
start_rdma_target --export "vol0=$img" --ctl-socket "$CTL"
map_ublk
[ "$(dev_size "$DEV_NAME")" = $((64 * 2048)) ] || fail "$DEV has $(dev_size "$DEV_NAME") sectors"
head -c 1M /dev/urandom >"$TEST_DIR/pat"
tmo 30 dd if="$TEST_DIR/pat" of="$DEV" bs=1M seek=63 oflag=direct status=none
tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$CTL" resize-export vol0 128M || fail "resize-export"
tmo 30 dd if="$DEV" of=/dev/null bs=4k count=1 iflag=direct status=none
dlog=$(ls "$RBLK_RUN_DIR"/map-*.log | head -n1)
# either the device grows (UPDATE_SIZE) or the daemon says it cannot
told() { grep -q "ublk: device $ID grown\|cannot resize a live device" "$dlog"; }
wait_until 30 told
if grep -q "ublk: device $ID grown" "$dlog"; then
	[ "$(dev_size "$DEV_NAME")" = $((128 * 2048)) ] || fail "$DEV grown, but has $(dev_size "$DEV_NAME") sectors"
	say "UPDATE_SIZE: $DEV grew in place"
else
	grep -q "cannot resize a live device (UPDATE_SIZE came in Linux 6.16)" "$dlog" || fail "no UPDATE_SIZE line"
	grep -q "'rblk unmap /dev/ublkb$ID' and map it again" "$dlog" || fail "the log does not say what to do"
	[ "$(dev_size "$DEV_NAME")" = $((64 * 2048)) ] || fail "$DEV changed size"
	tmo 30 dd if="$DEV" of=/dev/null bs=1M count=4 iflag=direct status=none || fail "$DEV stopped working"
	say "no UPDATE_SIZE: logged what to do; $DEV keeps 64 MiB and works"
	unmap_ublk
	map_ublk
	[ "$(dev_size "$DEV_NAME")" = $((128 * 2048)) ] || fail "mapped again: $(dev_size "$DEV_NAME") sectors"
fi
tmo 30 dd if="$DEV" of="$TEST_DIR/back" bs=1M skip=63 count=1 iflag=direct status=none
cmp "$TEST_DIR/pat" "$TEST_DIR/back" || fail "the data at 63 MiB differs"
tmo 30 dd if="$TEST_DIR/pat" of="$DEV" bs=1M seek=127 oflag=direct status=none
tmo 30 dd if="$DEV" of="$TEST_DIR/back" bs=1M skip=127 count=1 iflag=direct status=none
cmp "$TEST_DIR/pat" "$TEST_DIR/back" || fail "the data at 127 MiB differs"
unmap_ublk
echo "ublk resize: OK"
