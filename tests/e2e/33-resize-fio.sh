#!/usr/bin/env bash
# Live resize and the fio engine (issue 29 point 1): a job running against
# a 64 MiB file export sees `ctl resize-export vol0 128M` and logs it (fio
# keeps the size it sized the job with, and the job ends without error);
# the next job sees 128 MiB and writes and verifies the new half.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
requires truncate
requires_fio_engine
engine=$RBLK_FIO_ENGINE

img=$TEST_DIR/vol.img
truncate -s 64M "$img"
start_target --export "vol0=$img"
url=$RBLK_TARGET_URL/vol0
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"; }

fio --name=live "--ioengine=external:$engine" "--uri=$url" --rw=randrw \
	--bs=4k --iodepth=4 --time_based --runtime=4 --rate_iops=400 \
	--keepalive=0.2 >"$TEST_DIR/live.out" 2>"$TEST_DIR/live.err" &
fpid=$!
cleanup_fn stop_pid "$fpid"
_wait_for_line "$RBLK_TARGET_LOG" "logged in to export vol0 \(queue 0, depth 4," \
	"$fpid" 30 || { cat "$TEST_DIR/live.out" "$TEST_DIR/live.err"; fail "fio did not log in"; }
sleep 0.5
ctl resize-export vol0 128M >/dev/null
wait_pid 30 "$fpid" || { cat "$TEST_DIR/live.out" "$TEST_DIR/live.err"; fail "fio failed across the resize"; }
grep -q "rblk: live: the volume grew from 67108864 to 134217728 bytes" \
	"$TEST_DIR/live.out" "$TEST_DIR/live.err" ||
	{ cat "$TEST_DIR/live.out" "$TEST_DIR/live.err"; fail "the engine did not see the resize live"; }
grep -q "err= 0" "$TEST_DIR/live.out" || fail "fio reported errors: $(cat "$TEST_DIR/live.out")"
echo "live job: $(grep -ho 'the volume grew from [0-9]* to [0-9]* bytes' \
	"$TEST_DIR/live.out" "$TEST_DIR/live.err" | head -1)"

# a new job sizes itself at 128 MiB: the new half writes and verifies
fio --name=new "--ioengine=external:$engine" "--uri=$url" --rw=write \
	--bs=64k --iodepth=8 --offset=64M --size=64M --verify=crc32c \
	--verify_state_save=0 --output="$TEST_DIR/new.out" ||
	{ cat "$TEST_DIR/new.out"; fail "fio could not write and verify the new half"; }
grep -q "err= 0" "$TEST_DIR/new.out" || fail "fio: $(cat "$TEST_DIR/new.out")"
echo "new job: 64 MiB past the old end written and verified"
echo "resize fio OK"
