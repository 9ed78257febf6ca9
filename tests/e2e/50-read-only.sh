#!/usr/bin/env bash
# A read-only export (--export vol=FILE,ro) and `rblk nbd --read-only` on a
# writable one: reads work, NBD writes fail with EPERM, the file is
# unchanged.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy nbdinfo qemu-img sha256sum
requires_nbdsh
requires_built

make_random "$TEST_DIR/ro.img" 16
make_random "$TEST_DIR/rw.img" 16
before_ro=$(sha "$TEST_DIR/ro.img")
before_rw=$(sha "$TEST_DIR/rw.img")
start_target --export "vol=$TEST_DIR/ro.img,ro" --export "rw=$TEST_DIR/rw.img"

check_ro()
{
	local sock=$1 file=$2
	tmo 30 nbdinfo --json "nbd+unix:///?socket=$sock" >"$TEST_DIR/info.json"
	grep -q '"is_read_only": true' "$TEST_DIR/info.json" ||
		fail "export not advertised read-only"
	rm -f "$TEST_DIR/back.img"
	tmo 60 nbdcopy "nbd+unix:///?socket=$sock" "$TEST_DIR/back.img"
	[ "$(sha "$TEST_DIR/back.img")" = "$(sha "$file")" ] ||
		fail "read through a read-only export differs"
	tmo 30 nbdsh -u "nbd+unix:///?socket=$sock" -c '
import errno
assert h.is_read_only()
h.set_strict_mode(0)
for what, fn in [("write", lambda: h.pwrite(bytes(4096), 0)),
                 ("fua write", lambda: h.pwrite(bytes(4096), 0, nbd.CMD_FLAG_FUA)),
                 ("trim", lambda: h.trim(4096, 0)),
                 ("zero", lambda: h.zero(4096, 0))]:
    try:
        fn()
    except nbd.Error as e:
        assert e.errnum == errno.EPERM, "%s: errno %d" % (what, e.errnum)
        print(what, "-> EPERM")
        continue
    raise AssertionError(what + " succeeded on a read-only export")
assert len(h.pread(4096, 0)) == 4096
'
	# a client that ignores the flag: qemu-img writing must fail
	if tmo 60 qemu-img convert -n -f raw -O raw "$TEST_DIR/rw.img" \
		"nbd+unix:///?socket=$sock" 2>"$TEST_DIR/qemu.err"; then
		fail "qemu-img wrote to a read-only export"
	fi
	cat "$TEST_DIR/qemu.err"
}

start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol" "$TEST_DIR/ro.sock"
check_ro "$TEST_DIR/ro.sock" "$TEST_DIR/ro.img"
start_nbd "tcp://127.0.0.1:$RBLK_PORT/rw" "$TEST_DIR/rw.sock" --read-only
check_ro "$TEST_DIR/rw.sock" "$TEST_DIR/rw.img"

[ "$(sha "$TEST_DIR/ro.img")" = "$before_ro" ] || fail "read-only export file changed"
[ "$(sha "$TEST_DIR/rw.img")" = "$before_rw" ] || fail "--read-only export file changed"
echo "PASS: $TEST_NAME"
