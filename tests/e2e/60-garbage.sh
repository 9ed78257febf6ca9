#!/usr/bin/env bash
# Misbehaving clients are dropped one by one while good ones carry on:
#   - garbage to `rblk nbd` (before the handshake, after NBD_OPT_GO, an
#     oversized WRITE, a silent client) is disconnected while a concurrent
#     nbdcopy round trip through the same server still verifies;
#   - garbage straight to rblk-target's TCP port (random bytes, bad frames,
#     a bogus session after a valid CONNECT) is disconnected while a
#     concurrent verified copy through rblk nbd succeeds, and the target
#     keeps running.
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
    hello = b""
    while len(hello) < 18:
        hello += s.recv(18 - len(hello))
    assert hello[:8] == b"NBDMAGIC", hello
    s.sendall(struct.pack(">I", 3))
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) +
              struct.pack(">IH", 0, 0))
    while True:
        hdr = b""
        while len(hdr) < 20:
            hdr += s.recv(20 - len(hdr))
        _, _, typ, ln = struct.unpack(">QIII", hdr)
        while ln:
            ln -= len(s.recv(ln))
        if typ == 1:
            return s
        assert typ == 3, hex(typ)

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

def tcp_hdr(ftype, length, aux=0, ident=0, addr=0, rkey=0, magic=0x5854):
    return struct.pack("<BBHIQQII", ftype, 0, magic, length, ident, addr,
                       rkey, aux)

def target(port):
    def conn():
        return socket.create_connection(("127.0.0.1", port), timeout=5)

    s = conn()
    send(s, os.urandom(65536))
    expect_drop(s, "target: random bytes")

    s = conn()
    send(s, tcp_hdr(1, 0xFFFFFFFF, aux=1))
    expect_drop(s, "target: CONNECT with a 4 GiB payload")

    s = conn()
    send(s, tcp_hdr(1, 16, aux=1, magic=0x1234) + bytes(16))
    expect_drop(s, "target: bad frame magic")

    # a client that never sends CONNECT: the tcp listener drops it after
    # its 5 s handshake limit. (The listener sweeps on its next event, so
    # a second connection 6 s later makes sure there is one.)
    s = conn()
    time.sleep(6)
    conn().close()
    expect_drop(s, "target: silent client", timeout=15)

    # a well-formed CONNECT (rblk cm request: magic "RBLK", version 1,
    # queue depth 32), then nonsense where the HELLO should be
    cm = struct.pack("<IBBHII", 0x4b4c4252, 1, 0, 32, 0, 0)
    s = conn()
    send(s, tcp_hdr(1, len(cm), aux=1) + cm)
    send(s, tcp_hdr(4, 280, ident=1) + os.urandom(280))
    expect_drop(s, "target: garbage HELLO after CONNECT")

    s = conn()
    send(s, tcp_hdr(1, len(cm), aux=1) + cm)
    send(s, tcp_hdr(5, 4096, ident=1, addr=0x1000, rkey=0xdeadbeef) +
         os.urandom(4096))
    expect_drop(s, "target: RDMA WRITE with a bogus rkey")

    s = conn()
    send(s, tcp_hdr(1, len(cm), aux=1) + cm)
    send(s, tcp_hdr(6, 1 << 20, ident=1, addr=0, rkey=1))
    expect_drop(s, "target: RDMA READ of unregistered memory")

which = sys.argv[1]
if which == "nbd":
    nbd_garbage(sys.argv[2])
else:
    target(int(sys.argv[2]))
PY

# 1. garbage to rblk nbd during a round trip
roundtrip nbd &
rt=$!
tmo 120 python3 "$TEST_DIR/garbage.py" nbd "$sock" || fail "nbd garbage"
wait $rt || fail "round trip during nbd garbage failed"
kill -0 "$nbd_pid" || fail "rblk nbd died"

# 2. garbage to rblk-target during a round trip
roundtrip target &
rt=$!
tmo 120 python3 "$TEST_DIR/garbage.py" target "$RBLK_PORT" || fail "target garbage"
wait $rt || fail "round trip during target garbage failed"
kill -0 "$target_pid" || fail "rblk-target died"
kill -0 "$nbd_pid" || fail "rblk nbd died"

# both still serve new clients
roundtrip final || fail "round trip after the garbage failed"
[ "$(sha "$TEST_DIR/export.img")" = "$(sha "$TEST_DIR/src.img")" ] ||
	fail "export file differs"
grep -c "disconnecting\|closing" "$RBLK_NBD_LOG" || true
echo "PASS: $TEST_NAME"
