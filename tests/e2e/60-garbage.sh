#!/usr/bin/env bash
# Misbehaving NBD clients are dropped one by one while good ones carry on:
# garbage to `rblk nbd` (before the handshake, after NBD_OPT_GO, an
# oversized WRITE, a huge option) is disconnected while a concurrent
# nbdcopy round trip through the same server still verifies. Garbage
# straight to rblk-target's own port is tests/e2e/62-malformed.sh.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy python3 sha256sum truncate
requires_built

make_random "$TEST_DIR/src.img" 32
truncate -s 32M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
target_pid=$RBLK_TARGET_PID
sock=$TEST_DIR/nbd.sock
start_nbd "tcp://127.0.0.1:$RBLK_PORT/vol0" "$sock" --queues 8
nbd_pid=$RBLK_NBD_PID

# A verified round trip, run in the background while garbage flies.
roundtrip()
{
	local tag=$1
	rm -f "$TEST_DIR/back.$tag.img"
	timeout 90 nbdcopy --connections=2 "$TEST_DIR/src.img" \
		"nbd+unix:///?socket=$sock" &&
	timeout 90 nbdcopy --connections=2 "nbd+unix:///?socket=$sock" \
		"$TEST_DIR/back.$tag.img" &&
	[ "$(sha "$TEST_DIR/back.$tag.img")" = "$(sha "$TEST_DIR/src.img")" ]
}

cat >"$TEST_DIR/garbage.py" <<'PY'
import os, socket, struct, sys, time
from nbd_abuse import negotiate

def expect_drop(sock, what, timeout=15):
    """Read until EOF or reset; fail if the peer keeps us past timeout."""
    sock.settimeout(1)
    end = time.time() + timeout
    while time.time() < end:
        try:
            if not sock.recv(65536):
                break
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            break
    else:
        sys.exit("FAIL: %s: still connected after %d s" % (what, timeout))
    sock.close()
    print("dropped:", what)

def send(sock, data):
    try:
        sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass

def nbd(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s

def nbd_go(path):
    """Fixed newstyle handshake up to transmission (simple replies)."""
    s = nbd(path)
    negotiate(s)
    return s

def nbd_garbage(path):
    s = nbd(path)
    send(s, os.urandom(4096))
    expect_drop(s, "nbd: random bytes instead of the handshake")

    s = nbd_go(path)
    send(s, os.urandom(1024))
    expect_drop(s, "nbd: random bytes after NBD_OPT_GO")

    s = nbd_go(path)
    # a good READ, then a request with a bad magic
    send(s, struct.pack(">IHHQQI", 0x25609513, 0, 0, 1, 0, 4096))
    send(s, struct.pack(">IHHQQI", 0x12345678, 0, 0, 2, 0, 4096))
    expect_drop(s, "nbd: bad request magic")

    s = nbd_go(path)
    # WRITE announcing a 1 GiB payload: no server should swallow that
    send(s, struct.pack(">IHHQQI", 0x25609513, 0, 1, 3, 0, 1 << 30))
    send(s, os.urandom(65536))
    expect_drop(s, "nbd: oversized WRITE")

    s = nbd(path)
    # an option with a huge length
    s.recv(18)
    send(s, struct.pack(">I", 3) +
         struct.pack(">QII", 0x49484156454F5054, 7, 0x7fffffff))
    expect_drop(s, "nbd: huge option length")

nbd_garbage(sys.argv[1])
PY

# garbage to rblk nbd during a round trip
roundtrip nbd &
rt=$!
PYTHONPATH=tests/e2e tmo 120 python3 "$TEST_DIR/garbage.py" "$sock" || fail "nbd garbage"
wait $rt || fail "round trip during nbd garbage failed"
kill -0 "$nbd_pid" || fail "rblk nbd died"

# it still serves new clients, and the target is unharmed
kill -0 "$target_pid" || fail "rblk-target died"
roundtrip final || fail "round trip after the garbage failed"
[ "$(sha "$TEST_DIR/export.img")" = "$(sha "$TEST_DIR/src.img")" ] ||
	fail "export file differs"
grep -c "disconnecting\|closing" "$RBLK_NBD_LOG" || true
echo "PASS: $TEST_NAME"
