#!/bin/bash
# ublk: initiator crash recovery. A mounted ext4 on /dev/ublkbN, its rblk
# daemon killed with SIGKILL in the middle of a write: the device stays,
# I/O waits instead of failing, `rblk map --recover ID` re-attaches a new
# daemon, the writer finishes, synced files keep their checksums, and after
# umount e2fsck -fn is clean.
# soak: writes 80 MiB across the crash (make check: 40 MiB)
# vm-timeout: 400
# soak-timeout: 400
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires mkfs.ext4 e2fsck sha256sum

truncate -s 256M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk
MNT=$TEST_DIR/mnt
mkdir -p "$MNT" "$TEST_DIR/src"
timeout 120 mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4 $DEV"
timeout 60 mount "$DEV" "$MNT" || fail "mount $DEV"
umount_at_exit "$MNT"

make_tree "$TEST_DIR/src" 40
manifest "$TEST_DIR/src" "$TEST_DIR/manifest"
timeout 120 cp -a "$TEST_DIR/src/." "$MNT/" || fail "copying the tree"
timeout 60 sync || fail "sync"

pid=$(daemon_pid "$ID")
[ -n "$pid" ] || fail "no process holds /dev/ublkc$ID"
echo "daemon of $DEV: pid $pid"

# a writer in flight while the daemon dies: O_DIRECT, so it cannot finish
# into the page cache before the kill however fast the guest runs; the
# kill comes once 2 MiB of its 80 MiB are on the device
if [ "${RBLK_SOAK:-0}" = 1 ]; then BLOCKS=1280; else BLOCKS=640; fi
(dd if=/dev/urandom of="$MNT/during" bs=64k count=$BLOCKS oflag=direct \
	conv=fsync status=none
	echo $? >"$TEST_DIR/writer.rc") &
wpid=$!
for ((i = 0; i < 600; i++)); do
	[ "$(stat -c %s "$MNT/during" 2>/dev/null || echo 0)" -ge $((2 << 20)) ] && break
	sleep 0.05
done
kill -0 "$wpid" 2>/dev/null ||
	fail "the writer ended before the daemon could be killed (rc $(cat "$TEST_DIR/writer.rc" 2>/dev/null))"
kill -KILL "$pid"
timeout 30 tail --pid="$pid" -f /dev/null || fail "daemon $pid survived SIGKILL"
t0=$(t_now)
echo "daemon killed"
[ -b "$DEV" ] || fail "$DEV disappeared with its daemon"
sleep 2
[ -s "$TEST_DIR/writer.rc" ] && fail "the writer ended (rc $(cat "$TEST_DIR/writer.rc")) while no daemon served $DEV"
st=$(map_state "$DEV")
[ "$st" = dead ] || fail "rblk list shows $DEV as '$st', not dead"

old=$DEV
map_ublk --recover "$ID"
[ "$DEV" = "$old" ] || fail "recovery mapped $DEV, not $old"
echo "recovered $DEV $(t_since "$t0") s after the kill"
st=$(map_state "$DEV")
[ "$st" = running ] || fail "rblk list shows the recovered $DEV as '$st'"
timeout 120 tail --pid="$wpid" -f /dev/null || fail "writer still blocked after recovery"
[ "$(cat "$TEST_DIR/writer.rc" 2>/dev/null)" = 0 ] || fail "writer failed: rc $(cat "$TEST_DIR/writer.rc" 2>/dev/null)"
timeout 60 sync || fail "sync after recovery"
check_manifest "$MNT" "$TEST_DIR/manifest"
during=$(sha256sum "$MNT/during" | cut -d' ' -f1)
[ "$(stat -c %s "$MNT/during")" = $((BLOCKS * 65536)) ] || fail "file written across the crash has the wrong size"
timeout 60 umount "$MNT" || fail "umount"
timeout 120 e2fsck -fn "$DEV" || fail "e2fsck -fn after recovery found problems"
echo "e2fsck -fn after recovery: clean"
timeout 60 mount "$DEV" "$MNT" || fail "remount"
check_manifest "$MNT" "$TEST_DIR/manifest"
[ "$(sha256sum "$MNT/during" | cut -d' ' -f1)" = "$during" ] ||
	fail "file written across the crash changed after remount"
timeout 60 umount "$MNT" || fail "umount"
unmap_ublk
echo "ublk recovery: OK"
