#!/usr/bin/env bash
# `direct` file exports and the file system under them (issue 15, points
# 3 and 4), while a client verifies data on another export of the target:
#   - a 32 MiB sparse file on an 8 MiB tmpfs exported `direct` is refused
#     at start with "cannot allocate all ..." (a store into a hole the
#     file system cannot fill was a SIGBUS that killed the target)
#   - the same file on a tmpfs with room is allocated at start; the tmpfs
#     is then filled by someone else, and 32 MiB written through direct
#     access still all land (sha256 of what is read back and of the file)
#   - a `direct` file on a file system RDMA cannot pin (the host's /tmp,
#     not tmpfs) is served through the slot path with a warning naming the
#     file system; data written reads back
#   - an allocated tmpfs file without `direct` is read and written inline
#     (mixed sizes verified by rblk_libtest rw)
#   - the sparse file on the full 8 MiB tmpfs exported without `direct`
#     (the slot path, which reads and writes a tmpfs file inline on the
#     worker): writing 32 MiB fails with "No space left on device" for
#     the commands that do not fit, and the target serves on
#   - the target keeps its descriptors and memory
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires mount umount truncate fallocate cmp jq
requires_built
[ "$(id -u)" = 0 ] || skip "needs root to mount a tmpfs"
t=$RBLK_BUILD/tests/rblk_libtest
[ -x "$t" ] || fail "$t missing: run make check"

small=$TEST_DIR/small
roomy=$TEST_DIR/roomy
mkdir "$small" "$roomy"
mount -t tmpfs -o size=8M tmpfs "$small" || skip "cannot mount a tmpfs"
cleanup_fn umount -l "$small"
mount -t tmpfs -o size=56M tmpfs "$roomy" || skip "cannot mount a tmpfs"
cleanup_fn umount -l "$roomy"
truncate -s 32M "$small/sparse.img" "$roomy/vol.img"
fallocate -l 16M "$roomy/slot.img"

# ---- 1. refused at start, in bounded time, with the reason -------------
expect_refusal 20 1 "direct: cannot allocate all 33554432 bytes of $small/sparse.img \(No space left on device\)" \
	"$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:$(free_port)" \
	--ctl-socket none --allow-any-host --export "full=$small/sparse.img,direct"
[ "$(du -k "$small/sparse.img" | cut -f1)" -lt 1024 ] ||
	fail "the refused allocation was left behind on the small tmpfs"

# ---- 2. allocated at start; a full file system cannot hurt it ----------
ext=$TEST_DIR/ext.img
truncate -s 16M "$ext"
fs=$(stat -f -c %T "$TEST_DIR")
start_target --export "mem=ram:16M" --export "vol=$roomy/vol.img,direct" \
	--export "ext=$ext,direct" --export "tiny=$small/sparse.img" \
	--export "slotmem=$roomy/slot.img"
url=tcp://127.0.0.1:$RBLK_PORT
start_verifier "$url/mem" 16
proc_baseline "$RBLK_TARGET_PID"
[ "$(du -k "$roomy/vol.img" | cut -f1)" -ge 32768 ] ||
	fail "direct file not fully allocated at start: $(du -k "$roomy/vol.img")"
# someone else fills the file system
dd if=/dev/zero of="$roomy/filler" bs=1M 2>/dev/null || true
[ "$(df --output=avail "$roomy" | tail -1)" -lt 1024 ] || fail "tmpfs not full"
make_random "$TEST_DIR/src.bin" 32
tmo 60 "$t" put "$url/vol" "$TEST_DIR/src.bin" || fail "put through direct access"
rm -f "$TEST_DIR/back.bin"
tmo 60 "$t" get "$url/vol" "$TEST_DIR/back.bin" || fail "get through direct access"
cmp "$TEST_DIR/src.bin" "$TEST_DIR/back.bin" || fail "direct export: read back differs"
cmp "$TEST_DIR/src.bin" "$roomy/vol.img" || fail "the file does not hold what was written"
kill -0 "$RBLK_TARGET_PID" || fail "target died"
echo "32 MiB written by direct access into a preallocated file on a full tmpfs, verified"

# ---- 3. the slot path on tmpfs: inline; ENOSPC, nobody else harmed ------
tmo 60 "$t" rw "$url/slotmem" slot || fail "librblk rw on a tmpfs file, slot path"
! tmo 60 "$t" put "$url/tiny" "$TEST_DIR/src.bin" slot >"$TEST_DIR/tiny.out" 2>&1 ||
	fail "32 MiB written into an 8 MiB tmpfs without an error"
grep -q "export tiny: WRITE at .* failed: No space left on device" "$RBLK_TARGET_LOG" ||
	fail "no ENOSPC for the full tmpfs: $(cat "$TEST_DIR/tiny.out")"
kill -0 "$RBLK_TARGET_PID" || fail "target died on a full tmpfs"
echo "slot path on a full tmpfs: ENOSPC for the client, the target serves on"

# ---- 4. direct on a file system RDMA cannot pin: slot path + warning ----
if [ "$fs" != tmpfs ] && [ "$fs" != hugetlbfs ]; then
	grep -q "export ext: WARNING: 'direct' ignored: $ext is on .*direct access needs tmpfs, hugetlbfs or a DAX mount" \
		"$RBLK_TARGET_LOG" || fail "no warning for direct on $fs: $(grep 'export ext' "$RBLK_TARGET_LOG")"
	[ "$(tmo 20 "$RBLK_BIN" info -o json "$url/ext" | jq .direct)" = false ] ||
		fail "direct offered for a file on $fs"
	tmo 60 "$t" rw "$url/ext" slot || fail "librblk rw on the $fs file"
	echo "direct file on $fs: warned, served through the slot path"
else
	echo "TEST_DIR is on $fs: the slot-path fallback is not exercised here"
fi

stop_verifier
proc_check "$RBLK_TARGET_PID" 65536
echo "PASS: $TEST_NAME"
