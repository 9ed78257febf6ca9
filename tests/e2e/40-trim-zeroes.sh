#!/usr/bin/env bash
# TRIM and WRITE_ZEROES read back as zeroes; FUA writes and FLUSH succeed;
# invalid requests get the NBD errors the protocol asks for and leave the
# connection usable.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires truncate
requires_nbdsh
requires_built

truncate -s 64M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
sock=$TEST_DIR/nbd.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock"

tmo 60 nbdsh -u "nbd+unix:///vol0?socket=$sock" -c '
import errno

M = 1 << 20
assert h.can_trim() and h.can_zero() and h.can_flush() and h.can_fua()
assert h.can_multi_conn()
assert not h.is_read_only()
bs = h.get_block_size(nbd.SIZE_MINIMUM)
print("size", h.get_size(), "block sizes", bs,
      h.get_block_size(nbd.SIZE_PREFERRED), h.get_block_size(nbd.SIZE_MAXIMUM))

# FUA write, FLUSH, read back
h.pwrite(b"\xcd" * (256 << 10), 4 * M, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(256 << 10, 4 * M) == b"\xcd" * (256 << 10)

# TRIM reads back as zeroes (the target punches a hole)
h.pwrite(b"\xab" * M, 0)
assert h.pread(M, 0) == b"\xab" * M
h.trim(M, 0)
assert h.pread(M, 0) == bytes(M), "TRIM did not read back as zeroes"

# WRITE_ZEROES, plain, FUA and NO_HOLE, inside a written range
h.pwrite(b"\xef" * (8 * M), 8 * M)
h.zero(M, 8 * M)
h.zero(64 << 10, 10 * M, nbd.CMD_FLAG_FUA)
h.zero(64 << 10, 12 * M, nbd.CMD_FLAG_NO_HOLE)
data = h.pread(8 * M, 8 * M)
assert data[:M] == bytes(M), "WRITE_ZEROES"
assert data[M:2 * M] == b"\xef" * M, "WRITE_ZEROES zeroed too much"
assert data[2 * M:2 * M + (64 << 10)] == bytes(64 << 10), "WRITE_ZEROES FUA"
assert data[4 * M:4 * M + (64 << 10)] == bytes(64 << 10), "WRITE_ZEROES NO_HOLE"
assert data[4 * M + (64 << 10):] == b"\xef" * (4 * M - (64 << 10))

# a zero longer than the 32 MiB payload limit (no payload: allowed)
h.zero(48 * M, 16 * M)
assert h.pread(M, 63 * M) == bytes(M)

# errors: the request fails, the connection stays usable
h.set_strict_mode(0)
def expect(errnum, what, fn):
    try:
        fn()
    except nbd.Error as e:
        if e.errnum != errnum:
            raise AssertionError("%s: errno %s, wanted %s" %
                                 (what, e.errnum, errnum))
        print("%-20s -> %s" % (what, errno.errorcode[errnum]))
        return
    raise AssertionError(what + " unexpectedly succeeded")

size = h.get_size()
if bs > 1:
    expect(errno.EINVAL, "misaligned read", lambda: h.pread(bs, 1))
    expect(errno.EINVAL, "misaligned write", lambda: h.pwrite(b"x" * (bs + 1), 0))
expect(errno.EINVAL, "read past the end", lambda: h.pread(4096, size))
expect(errno.ENOSPC, "write past the end", lambda: h.pwrite(bytes(4096), size))
expect(errno.ENOSPC, "zero past the end", lambda: h.zero(4096, size))
expect(errno.EINVAL, "read over 32 MiB", lambda: h.pread(33 * M, 0))
expect(errno.EINVAL, "fast zero", lambda: h.zero(4096, 0, nbd.CMD_FLAG_FAST_ZERO))
assert h.pread(4096, 4 * M) == b"\xcd" * 4096
print("OK")
'
echo "PASS: $TEST_NAME"
