#!/bin/bash
# Push reads over rxe trust no target (issue 31, point 3): the fio engine
# with read_mode=push, 64 KiB reads at iodepth 8, against
# build/tests/rblk-target-fault (RBLK_FAULT=MODE):
#  - control (no fault): fio writes the volume with crc32c-headed blocks,
#    then reads and verifies it, pushed;
#  - push-nodata: every push READ answered OK with no data written;
#  - push-wrongtag: every push READ's data written through the window of
#    another READ in flight (its address and key), then answered OK.
# Each must fail the reads with EIO (the data has to come as a WRITE WITH
# IMMEDIATE naming the READ's own window, with all its bytes, and the RESP
# must invalidate that window: RBLK_F_PUSH_IMM) and never let one pass
# with stale bytes, which fio's verify would report. INIT_BUILD (default:
# the build under test) picks the initiator's build, e.g. an older one to
# show that it fails this test.
# vm-timeout: 240
set -euo pipefail
source tests/vm/lib.sh
need_rdma
need_cmd fio
rogue=$RBLK_BUILD/tests/rblk-target-fault
engine=${INIT_BUILD:-$RBLK_BUILD}/rblk-fio.so
need_file "$rogue" "$engine"

img=$TEST_DIR/vol.img
truncate -s 4M "$img"

# one fault target: RBLK_FAULT=@FILE, FILE names the mode
mode=$TEST_DIR/fault
echo good >"$mode"
export RBLK_FAULT=@$mode
RBLK_TARGET_BIN=$rogue start_rdma_target --workers 1 --slot-pool 4M \
	--session-pool-share 100 --export "vol0=$img"
unset RBLK_FAULT

job()
{
	tmo 120 fio --name=push "--ioengine=external:$engine" "--uri=$URL" \
		--read_mode=push --rw=write --bs=64k --iodepth=8 --size=4M \
		--verify=crc32c --io_timeout=5 --io_retries=1 \
		--reconnect_delay=0.2 --verify_state_save=0 "$@"
}

job --do_verify=1 >"$TEST_DIR/fio.good" 2>&1 ||
	fail "control: $(cat "$TEST_DIR/fio.good")"
say "control: written and verified through push reads"

for m in push-nodata push-wrongtag; do
	echo "$m" >"$mode"
	out=$TEST_DIR/fio.$m
	if job --verify_only >"$out" 2>&1; then
		fail "$m: every read passed: $(cat "$out")"
	fi
	say "$m: $(grep -m1 'err=' "$out" || tail -n 3 "$out")"
	say "$m: $(grep -m1 -E 'push (READ|data)' "$out" || true)"
	if grep -Eq "^verify: |verify failed|bad magic" "$out"; then
		fail "$m: a read completed with bytes the target never placed: $(cat "$out")"
	fi
	grep -q "Input/output error" "$out" || fail "$m: no EIO: $(cat "$out")"
done
say "push reads against rogue targets over rxe OK"
