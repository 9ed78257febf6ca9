#!/bin/bash
# Live resize over rxe through kernel NBD (issue 29 point 1): ext4 on a
# 64 MiB mapped device (`rblk map --nbd`), a tree and a 24 MiB file with a
# sha256 manifest; `rblk-target ctl resize-export vol 128M` grows the file
# export: the session is told (a read's answer flags it, a KEEPALIVE
# brings the size), the daemon grows /dev/nbdN with NBD_CMD_RECONFIGURE,
# resize2fs grows the mounted ext4 online, and 60 MiB more fit (more
# than the old device held) and read back; the target is killed and
# restarted on the grown file: the mapping reconnects (a grown volume is
# taken; 044a766 refused it) and every checksum still holds after the
# caches are dropped; fsck.ext4 -fn clean.
# vm-timeout: 300
set -euo pipefail
source tests/vm/lib.sh
need_rdma
requires mkfs.ext4 fsck.ext4 resize2fs sha256sum mount umount truncate python3

PORT=7545
URL=rdma://$ADDR:$PORT/vol
MNT=$TEST_DIR/mnt
CTL=$TEST_DIR/ctl.sock
img=$TEST_DIR/vol.img
mkdir -p "$MNT"
truncate -s 64M "$img"
start_rdma_target "$PORT" --export "vol=$img" --ctl-socket "$CTL"
map_dev "$URL" --nbd --queues 2 --reconnect-delay 0.5
[ "$(dev_size "$DEV_NAME")" = $((64 * 2048)) ] || fail "$DEV has $(dev_size "$DEV_NAME") sectors"

tmo 60 mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4"
tmo 60 mount "$DEV" "$MNT" || fail "mount"
cleanup_fn umount_quiet "$MNT"
write_tree "$MNT/tree" "$TEST_DIR/manifest" 60 45
head -c 24M /dev/urandom >"$MNT/big1"
(cd "$MNT" && sha256sum big1 >"$TEST_DIR/big.sha")
sync
blocks0=$(df -k --output=size "$MNT" | tail -1)
say "ext4 of ${blocks0} KiB, tree and 24 MiB written"

t0=$(t_now)
tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$CTL" resize-export vol 128M || fail "resize-export"
# a direct read: its answer flags the change, a KEEPALIVE brings the size
tmo 30 dd if="$DEV" of=/dev/null bs=4k count=1 iflag=direct status=none
wait_until 30 test "$(dev_size "$DEV_NAME")" = $((128 * 2048))
say "$DEV grown to 128 MiB $(t_since "$t0") s after resize-export"
grep -q "grown from 67108864 to 134217728 bytes" "$RBLK_RUN_DIR"/map-*.log ||
	fail "the daemon did not log the growth"
tmo 120 resize2fs "$DEV" >"$TEST_DIR/resize2fs.log" 2>&1 ||
	{ cat "$TEST_DIR/resize2fs.log"; fail "resize2fs (online)"; }
blocks1=$(df -k --output=size "$MNT" | tail -1)
[ "$blocks1" -gt $((blocks0 * 3 / 2)) ] || fail "ext4 is $blocks1 KiB after resize2fs (was $blocks0)"
say "online resize2fs: ${blocks0} -> ${blocks1} KiB"
# more than the old device held: the new blocks are in use
head -c 60M /dev/urandom >"$MNT/big2"
(cd "$MNT" && sha256sum big2 >>"$TEST_DIR/big.sha")
sync

# the target restarts on the grown file; the mapping carries on
kill -KILL "$TARGET_PID"
wait "$TARGET_PID" 2>/dev/null || true
"$RBLK_TARGET_BIN" --listen "rdma://$ADDR:$PORT" --allow-any-host --log-level info \
	--export "vol=$img" --ctl-socket "$CTL" >>"$TARGET_LOG" 2>&1 &
TARGET_PID=$!
cleanup_fn stop_pid "$TARGET_PID"
restarted() { [ "$(grep -c "listening on rdma://$ADDR:$PORT" "$TARGET_LOG")" -ge 2 ]; }
wait_until 60 restarted
echo 3 >/proc/sys/vm/drop_caches
(cd "$MNT/tree" && tmo 120 sha256sum --quiet -c "$TEST_DIR/manifest") || fail "tree after the restart"
(cd "$MNT" && tmo 120 sha256sum --quiet -c "$TEST_DIR/big.sha") || fail "big files after the restart"
grep -q "changed across\|shrank across" "$RBLK_RUN_DIR"/map-*.log &&
	fail "the mapping refused the restarted target"
[ "$(dev_size "$DEV_NAME")" = $((128 * 2048)) ] || fail "$DEV changed size across the restart"
say "after the restart: checksums OK at 128 MiB"
tmo 60 umount "$MNT" || fail "umount"
tmo 120 fsck.ext4 -fn "$DEV" >"$TEST_DIR/fsck.log" 2>&1 ||
	{ cat "$TEST_DIR/fsck.log"; fail "fsck.ext4 -fn"; }
tmo 60 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap"
echo "nbd resize: OK"
