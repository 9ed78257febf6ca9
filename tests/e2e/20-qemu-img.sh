#!/usr/bin/env bash
# qemu-img convert into the export through `rblk nbd` and back out (both the
# URI form and --image-opts), then cmp; qemu-io checks a pattern write;
# the export is read back over TCP (rblk nbd --listen) too.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires qemu-img qemu-io cmp truncate
requires_built

make_random "$TEST_DIR/src.img" 32
truncate -s 32M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
sock=$TEST_DIR/nbd.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock"

tmo 60 qemu-img convert -n -f raw -O raw "$TEST_DIR/src.img" \
	"nbd+unix:///vol0?socket=$sock"
tmo 60 qemu-img convert -f raw -O raw "nbd+unix:///vol0?socket=$sock" \
	"$TEST_DIR/back.img"
cmp "$TEST_DIR/src.img" "$TEST_DIR/back.img" || fail "qemu-img copy back differs"
cmp "$TEST_DIR/src.img" "$TEST_DIR/export.img" || fail "export file differs"

rm -f "$TEST_DIR/back2.img"
tmo 60 qemu-img convert --image-opts -O raw \
	"driver=nbd,server.type=unix,server.path=$sock,export=vol0" \
	"$TEST_DIR/back2.img"
cmp "$TEST_DIR/src.img" "$TEST_DIR/back2.img" || fail "--image-opts copy differs"

tmo 30 qemu-img info -f raw "nbd+unix:///vol0?socket=$sock" | tee "$TEST_DIR/info"
grep -q "virtual size: 32 MiB" "$TEST_DIR/info" || fail "qemu-img info: wrong size"

# qemu-io: a FUA pattern write, a flush, read it back with the pattern check
tmo 30 qemu-io -f raw -c "write -P 0x5a -f 1M 256k" -c flush \
	-c "read -P 0x5a 1M 256k" "nbd+unix:///vol0?socket=$sock" |
	tee "$TEST_DIR/qemu-io.out"
grep -q "Pattern verification failed" "$TEST_DIR/qemu-io.out" &&
	fail "qemu-io pattern verification failed"
grep -q "^read 262144/262144 bytes" "$TEST_DIR/qemu-io.out" ||
	fail "qemu-io read failed"
# the same server over TCP (--listen), qemu-img reading it back
start_nbd_tcp "tcp://127.0.0.1:$RBLK_PORT/vol0"
[ "$NBD_URI" = "nbd://127.0.0.1:$NBD_PORT/vol0" ] || fail "ready line: $NBD_URI"
rm -f "$TEST_DIR/back3.img"
tmo 60 qemu-img convert -f raw -O raw "$NBD_URI" "$TEST_DIR/back3.img"
cmp "$TEST_DIR/export.img" "$TEST_DIR/back3.img" || fail "copy over TCP differs"
echo "PASS: $TEST_NAME"
