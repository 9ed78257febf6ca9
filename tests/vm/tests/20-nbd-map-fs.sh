#!/bin/bash
# Kernel NBD over rdma: `rblk map rdma://192.0.2.1:PORT/vol --nbd --queues 2`
# gives /dev/nbdN; mkfs.ext4, mount, a tree of 200 files of random sizes in
# nested directories with a sha256 manifest, umount, fsck.ext4 -fn clean,
# remount (caches dropped) and sha256sum -c; `rblk list` (text and JSON)
# shows the mapping; `rblk unmap` removes it: size 0, daemon gone, record
# gone, and the data is on the target (a second mapping sees it).
# vm-timeout: 600
set -euo pipefail
source tests/vm/lib.sh
need_rdma
requires mkfs.ext4 fsck.ext4 sha256sum mount umount truncate python3

PORT=7520
URL=rdma://$ADDR:$PORT/vol
MNT=$TEST_DIR/mnt
mkdir -p "$MNT"

truncate -s 256M "$TEST_DIR/vol.img"
start_rdma_target "$PORT" --export "vol=$TEST_DIR/vol.img"
say "target up"

map_dev "$URL" --nbd --queues 2
[ "$(dev_size "$DEV_NAME")" = $((256 * 2048)) ] ||
	fail "$DEV has $(dev_size "$DEV_NAME") sectors, not $((256 * 2048))"
[ "$(cat "/sys/block/$DEV_NAME/backend")" = "rblk:$URL" ] ||
	fail "backend of $DEV is '$(cat "/sys/block/$DEV_NAME/backend")'"
say "$DEV: $(cat "/sys/block/$DEV_NAME/size") sectors," \
	"max_sectors_kb $(cat "/sys/block/$DEV_NAME/queue/max_sectors_kb")," \
	"hw queues $(ls "/sys/block/$DEV_NAME/mq" | wc -l)"
[ "$(ls "/sys/block/$DEV_NAME/mq" | wc -l)" = 2 ] ||
	fail "$DEV does not have 2 hardware queues"
q=/sys/block/$DEV_NAME/queue
say "$DEV: write_cache $(cat "$q/write_cache"), fua $(cat "$q/fua")," \
	"discard_max_bytes $(cat "$q/discard_max_bytes")," \
	"write_zeroes_max_bytes $(cat "$q/write_zeroes_max_bytes")," \
	"logical_block_size $(cat "$q/logical_block_size")"
[ "$(cat "$q/write_cache")" = "write back" ] || fail "$DEV does not take FLUSH (write_cache)"
[ "$(cat "$q/discard_max_bytes")" != 0 ] || fail "$DEV does not take TRIM"

# rblk list: text and JSON
tmo 30 "$RBLK_BIN" list | tee "$TEST_DIR/list.txt"
grep -q "^$DEV .* nbd .* 2 .* 64 .*running.*$URL\$" "$TEST_DIR/list.txt" ||
	fail "rblk list does not show $DEV"
tmo 30 "$RBLK_BIN" list -o json >"$TEST_DIR/list.json"
jq -e --arg d "$DEV" --arg u "$URL" \
	'.mappings | length == 1 and .[0].dev == $d and .[0].url == $u and
	 .[0].frontend == "nbd" and .[0].queues == 2 and .[0].depth == 64 and
	 .[0].state == "running" and (.[0].pid | type) == "number"' \
	"$TEST_DIR/list.json" >/dev/null || { cat "$TEST_DIR/list.json"; fail "rblk list -o json"; }
say "rblk list OK"

# a mapped device may not be unmapped while mounted
tmo 120 mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4 $DEV"
say "mkfs.ext4 done"
tmo 60 mount "$DEV" "$MNT" || fail "mount $DEV"
cleanup_fn umount_quiet "$MNT"
if tmo 60 "$RBLK_BIN" unmap "$DEV" 2>"$TEST_DIR/busy.err"; then
	fail "rblk unmap succeeded on a mounted device"
fi
grep -q "in use" "$TEST_DIR/busy.err" || fail "unmap of a mounted device: $(cat "$TEST_DIR/busy.err")"

# the tree: 200 files, 0..256 KiB, three levels of directories
write_tree "$MNT/tree" "$TEST_DIR/manifest" 200 20
say "tree written: $(du -sk "$MNT/tree" | cut -f1) KiB"
(cd "$MNT/tree" && tmo 120 sha256sum --quiet -c "$TEST_DIR/manifest") || fail "checksums before umount"
tmo 120 umount "$MNT" || fail "umount"
say "unmounted"

tmo 180 fsck.ext4 -fn "$DEV" >"$TEST_DIR/fsck.log" 2>&1 || {
	cat "$TEST_DIR/fsck.log"
	fail "fsck.ext4 -fn found problems"
}
say "fsck.ext4 -fn clean"

echo 3 >/proc/sys/vm/drop_caches
tmo 60 mount "$DEV" "$MNT" || fail "remount"
(cd "$MNT/tree" && tmo 120 sha256sum --quiet -c "$TEST_DIR/manifest") || fail "checksums after remount"
say "remount: checksums OK"
tmo 60 umount "$MNT" || fail "umount"

pids=$(map_daemon_pids)
[ -n "$pids" ] || fail "no daemon pid in the records"
t0=$SECONDS
tmo 60 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap $DEV"
say "unmapped in $((SECONDS - t0)) s"
[ "$(dev_size "$DEV_NAME")" = 0 ] || fail "$DEV still has $(dev_size "$DEV_NAME") sectors"
[ ! -e "/sys/block/$DEV_NAME/pid" ] || fail "$DEV is still connected"
for p in $pids; do
	kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" &&
		fail "daemon pid $p still runs"
done
[ -z "$(ls "$RBLK_RUN_DIR"/map-*.rec 2>/dev/null)" ] || fail "a record is left: $(ls "$RBLK_RUN_DIR")"
[ -z "$(tmo 30 "$RBLK_BIN" list)" ] || fail "rblk list still shows something"
tmo 30 "$RBLK_BIN" list -o json | jq -e '.mappings == []' >/dev/null || fail "rblk list -o json not empty"
if tmo 30 "$RBLK_BIN" unmap "$DEV" 2>/dev/null; then
	fail "a second unmap of $DEV succeeded"
fi

# the data lives on the target: map again (read-only, as nbd3) and check
map_dev "$URL" --nbd --queues 1 --read-only --device-id 3
[ "$DEV" = /dev/nbd3 ] || fail "--device-id 3 gave $DEV"
[ "$(cat "/sys/block/$DEV_NAME/ro")" = 1 ] || fail "--read-only device is writable"
tmo 60 mount -o ro,noload "$DEV" "$MNT" || fail "mount of the second mapping"
(cd "$MNT/tree" && tmo 120 sha256sum --quiet -c "$TEST_DIR/manifest") || fail "checksums on the second mapping"
tmo 60 umount "$MNT" || fail "umount"
# the device number is taken: a second map on it fails cleanly
rc=0
timeout -k 5 60 "$RBLK_BIN" map "$URL" --nbd --device-id 3 >/dev/null 2>"$TEST_DIR/busy.err" || rc=$?
[ $rc = 1 ] && grep -q "nbd3 is already in use" "$TEST_DIR/busy.err" ||
	fail "map on a busy --device-id: exit $rc: $(cat "$TEST_DIR/busy.err")"
tmo 60 "$RBLK_BIN" unmap nbd3 || fail "rblk unmap nbd3"
[ "$(dev_size nbd3)" = 0 ] || fail "nbd3 still has a size"
say "second mapping: checksums OK"

# --foreground: the device on stdout, SIGTERM unmaps, exit 0
"$RBLK_BIN" map "$URL" --nbd --foreground >"$TEST_DIR/fg.out" 2>"$TEST_DIR/fg.err" &
fg=$!
cleanup_fn kill_quiet "$fg"
for ((i = 0; i < 600; i++)); do
	[ -s "$TEST_DIR/fg.out" ] && break
	kill -0 "$fg" 2>/dev/null || break
	sleep 0.1
done
DEV=$(cat "$TEST_DIR/fg.out")
[ -b "$DEV" ] || { cat "$TEST_DIR/fg.err"; fail "rblk map --foreground printed '$DEV'"; }
DEV_NAME=$(basename "$DEV")
tmo 30 "$RBLK_BIN" list | grep -q "^$DEV .* $fg " || fail "rblk list does not show the foreground daemon"
tmo 30 dd if="$DEV" of=/dev/null bs=1M count=4 iflag=direct status=none || fail "read from $DEV"
kill -TERM "$fg"
rc=0
timeout 60 tail --pid="$fg" -f /dev/null || fail "rblk map --foreground did not stop within 60 s"
wait "$fg" || rc=$?
[ $rc = 0 ] || { cat "$TEST_DIR/fg.err"; fail "rblk map --foreground exit $rc after SIGTERM"; }
[ "$(dev_size "$DEV_NAME")" = 0 ] || fail "$DEV still has a size after SIGTERM"
[ -z "$(tmo 30 "$RBLK_BIN" list)" ] || fail "rblk list still shows the foreground mapping"
say "--foreground: OK"
kill -0 "$TARGET_PID" || fail "rblk-target died"
echo "nbd map fs: OK"
