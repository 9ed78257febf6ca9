#!/usr/bin/env bash
# nbdcopy round trip through `rblk nbd`: random 64 MiB image -> export file
# (via rblk nbd, multi-conn) -> new file. The source, the copy back and the
# export file on disk must all have the same sha256.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy sha256sum truncate
requires_built

make_random "$TEST_DIR/src.img" 64
truncate -s 64M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
sock=$TEST_DIR/nbd.sock
start_nbd "$RBLK_TARGET_URL/vol0" "$sock"

# the default export ("") and the named one both work
tmo 60 nbdcopy "$TEST_DIR/src.img" "nbd+unix:///?socket=$sock"
tmo 60 nbdcopy "nbd+unix:///vol0?socket=$sock" "$TEST_DIR/back.img"

src=$(sha "$TEST_DIR/src.img")
back=$(sha "$TEST_DIR/back.img")
disk=$(sha "$TEST_DIR/export.img")
echo "src  $src"
echo "back $back"
echo "disk $disk"
[ "$src" = "$back" ] || fail "copy back differs from the source"
[ "$src" = "$disk" ] || fail "export file differs from the source"

# single connection, small requests: many in flight, out-of-order replies
rm -f "$TEST_DIR/back.img"
tmo 60 nbdcopy --connections=1 --requests=64 --request-size=65536 \
	"nbd+unix:///?socket=$sock" "$TEST_DIR/back.img"
[ "$(sha "$TEST_DIR/back.img")" = "$src" ] || fail "single-connection copy differs"
echo "PASS: $TEST_NAME"
