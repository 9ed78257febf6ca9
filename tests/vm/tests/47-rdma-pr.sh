#!/bin/bash
# Persistent reservations over real verbs and rdma_cm (rdma_rxe):
#  - the host's scenario tests/e2e/37-pr-abort.sh, the same file, over rdma
#    (run_host_scenario): beta holds write-exclusive and keeps 16 writes in
#    flight; alpha's preempt-and-abort stops the writer with EBADE (RESP
#    status RESV_CONFLICT over rdma); no write of beta's lands after the
#    preempt answered (alpha reads back only its own bytes); alpha holds
#    the reservation; beta reads and its new writes conflict. The REPORT
#    moves by the pull READ path (an RDMA READ of a window) here;
#  - through ublk (/dev/ublkbN mapped as beta while alpha holds
#    write-exclusive): beta's O_DIRECT write fails with EBADE ("Invalid
#    exchange": ublk_drv's BLK_STS_RESV_CONFLICT, as an NVMe disk's
#    conflict reads), its O_DIRECT read works.
# vm-timeout: 420
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd python3
run_host_scenario 37-pr-abort

ublk_requires dd
for h in alpha beta; do
	head -c 32 /dev/urandom | base64 >"$TEST_DIR/$h.key"
	chmod 600 "$TEST_DIR/$h.key"
done
truncate -s 16M "$TEST_DIR/u.img"
start_rdma_target --host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--host "beta:secret-file=$TEST_DIR/beta.key" \
	--export "vol0=$TEST_DIR/u.img,allow=alpha,allow=beta"
A=(--host-name alpha --key-file "$TEST_DIR/alpha.key")
timeout 120 "$RBLK_BIN" pr register "${A[@]}" --key 0xa1 "$URL" || fail "alpha register"
timeout 120 "$RBLK_BIN" pr reserve "${A[@]}" --key 0xa1 --type we "$URL" || fail "alpha reserve"
map_ublk --host-name beta --key-file "$TEST_DIR/beta.key"
rc=0
out=$(dd if=/dev/zero of="$DEV" bs=4096 count=1 oflag=direct 2>&1) || rc=$?
echo "beta's write through $DEV: $out"
[ $rc -ne 0 ] || fail "beta's write through $DEV succeeded under alpha's write-exclusive"
grep -q "Invalid exchange" <<<"$out" || fail "beta's write through $DEV failed, but not with EBADE: $out"
dd if="$DEV" of=/dev/null bs=4096 count=16 iflag=direct ||
	fail "beta cannot read through $DEV under write-exclusive"
unmap_ublk
say "ublk: a conflict is EBADE at the block device"
echo "PASS"
