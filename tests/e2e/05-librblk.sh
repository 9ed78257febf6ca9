#!/usr/bin/env bash
# librblk against a live target ($RBLK_TARGET_URL: tcp here, rdma in guest
# test 11): async mixed-size writes split at max_io (zero-copy and bounce
# buffers), read back on a second queue and
# compared; TRIM/WRITE_ZEROES read back as zeroes; bad arguments refused;
# a read-only export refuses writes; an unknown export is named in the
# error. Also checks the target file itself holds what was written.
# Backlog: 16 x the queue depth of writes (mixed sizes, split) and then of
# reads submitted at once are all verified; -EAGAIN past max_queued.
# Each queue holds one epoll set (its poll group's), not a nested pair.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
t=$RBLK_BUILD/tests/rblk_libtest
[ -x "$t" ] || fail "$t missing: run make check"

truncate -s 64M "$TEST_DIR/vol.img"
head -c 1M /dev/urandom >"$TEST_DIR/ro.img"
for engine in io_uring libaio; do
	start_target --engine "$engine" --export "vol=$TEST_DIR/vol.img" \
		--export "rovol=$TEST_DIR/ro.img,ro" --export "mem=ram:64M"
	url=$RBLK_TARGET_URL
	tmo 60 "$t" rw "$url/vol" || fail "rw on a file export ($engine)"
	tmo 60 "$t" rw "$url/mem" || fail "rw on a RAM export ($engine)"
	tmo 60 "$t" backlog "$url/vol" || fail "backlog on a file export ($engine)"
	tmo 60 "$t" backlog "$url/mem" || fail "backlog on a RAM export ($engine)"
	tmo 30 "$t" ro "$url/rovol" || fail "read-only export ($engine)"
	before=$(sha "$TEST_DIR/ro.img")
	out=$(tmo 30 "$t" open "$url/nosuch" || true)
	echo "$out"
	grep -q "export 'nosuch' not found" <<<"$out" ||
		fail "unknown export: unexpected message '$out'"
	[ "$(sha "$TEST_DIR/ro.img")" = "$before" ] || fail "read-only file changed"
	stop_pid "$RBLK_TARGET_PID"
done
echo "librblk e2e OK (io_uring and libaio)"
