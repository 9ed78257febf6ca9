#!/usr/bin/env bash
# Unix data sockets and what their peers supply (issue 25 point 6), while
# a client verifies data over tcp beside it:
#   - under umask 000 the data socket is made 0660 (unix_socket_mode's
#     default), and a user outside its group cannot connect (044a766:
#     0777, anyone could); --unix-socket-mode sets another mode;
#   - a client bound to a path with a newline in it logs in: neither the
#     target's log nor `ctl list-sessions` gets a line it wrote (the path
#     shows as \x0a...);
#   - limits count unix peers by uid: with --max-pending-per-host 3, three
#     silent connections bound to three paths keep a fourth out (044a766:
#     every path, and every unbound pid, was a host of its own).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3 setpriv stat
[ -x /usr/bin/python3 ] || skip "needs /usr/bin/python3 (run as another user)"
requires_built
chmod 711 "$TEST_DIR" # others may reach the socket directory, not list it
sd=$TEST_DIR/socks
mkdir -m 755 "$sd"
sock=$sd/data.sock
umask 000
start_target --export v=ram:32M --listen "unix:///?socket=$sock" \
	--max-pending-per-host 3
umask 077
start_verifier "$RBLK_TARGET_URL/v" 8
ctl=("$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET")

# ---- the socket's mode ---------------------------------------------------------
mode=$(stat -c %a "$sock")
echo "data socket made under umask 000: mode $mode"
[ "$mode" = 660 ] || fail "data socket mode $mode under umask 000, want 660"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print("refused:", e.strerror)
' "$sock")
echo "uid 65534: $out"
[ "$out" = "refused: Permission denied" ] || fail "another user reached the data socket: $out"

# ---- peer-supplied names: a bind path with a newline -----------------------
python3 - "$sock" "$sd" >"$TEST_DIR/nl.out" 2>&1 <<'PY' &
import os, socket, struct, sys, time
sys.path.insert(0, os.path.join(os.environ.get("RBLK_BUILD", "build"), "gen"))
import rblk_const as C
sock, sd = sys.argv[1], sys.argv[2]
def frame(t, p, ident=0, aux=0):
    return struct.pack("<BBHIQQII", t, 0, C.TCP_MAGIC, len(p), ident, 0, 0, aux) + p
def name(x):
    return x.encode() + bytes(128 - len(x))
s = socket.socket(socket.AF_UNIX)
s.bind(sd + "/c\nFAKE-LINE: root logged in")
s.connect(sock)
s.sendall(frame(C.TCP_F_CONNECT, struct.pack("<IBBHII", C.RBLK_MAGIC,
          C.RBLK_PROTO_VERSION, 0, 4, 0, 0), aux=C.TCP_VERSION))
hello = (struct.pack("<IBBH", C.RBLK_MAGIC, C.RBLK_PROTO_VERSION,
         C.RBLK_MSG_HELLO, 280) + struct.pack("<HHIII", 4, 0, 1 << 20, 0, 0) +
         name("v") + name("nl-host"))
s.sendall(frame(C.TCP_F_SEND, hello, ident=1))
got = b""
while b"\x02" not in got[32 + 32 + 5:32 + 32 + 6] and len(got) < 4096:
    d = s.recv(4096)
    if not d:
        break
    got += d
print("logged in", flush=True)
time.sleep(30)
PY
nlpid=$!
cleanup_fn _kill_quiet "$nlpid"
for ((i = 0; i < 100; i++)); do
	tmo 10 "${ctl[@]}" list-sessions >"$TEST_DIR/sessions" 2>&1
	grep -q "nl-host" "$TEST_DIR/sessions" && break
	sleep 0.1
done
cat "$TEST_DIR/sessions"
grep -q "nl-host" "$TEST_DIR/sessions" || { cat "$TEST_DIR/nl.out"; fail "the client with a newline in its path did not log in"; }
grep -q "^FAKE-LINE" "$TEST_DIR/sessions" && fail "ctl list-sessions printed a line the peer wrote"
grep -qF 'c\x0aFAKE-LINE' "$TEST_DIR/sessions" || fail "list-sessions does not show the path escaped"
grep -q "^FAKE-LINE" "$RBLK_TARGET_LOG" && fail "the target's log has a line the peer wrote"
grep -qF "path $sd/c\\x0aFAKE-LINE: root logged in" "$RBLK_TARGET_LOG" ||
	fail "the target's log does not show the path escaped"
tmo 10 "${ctl[@]}" list-sessions -o json | python3 -c '
import json, sys
peers = [s["peer"] for s in json.load(sys.stdin)["sessions"]]
assert any("\\x0aFAKE-LINE" in p for p in peers), peers
assert not any("\n" in p for p in peers), peers
' || fail "list-sessions -o json carries the raw path"
_kill_quiet "$nlpid"

# ---- limits count unix peers by uid -------------------------------------------
python3 - "$sock" "$sd" <<'PY' || fail "unix limits by uid"
import os, socket, struct, sys, time
sys.path.insert(0, os.path.join(os.environ.get("RBLK_BUILD", "build"), "gen"))
import rblk_const as C
sock, sd = sys.argv[1], sys.argv[2]
cm = struct.pack("<IBBHII", C.RBLK_MAGIC, C.RBLK_PROTO_VERSION, 0, 4, 0, 0)
f = struct.pack("<BBHIQQII", C.TCP_F_CONNECT, 0, C.TCP_MAGIC, len(cm), 0, 0,
                0, C.TCP_VERSION) + cm
def conn(i):
    s = socket.socket(socket.AF_UNIX)
    s.bind("%s/p%d" % (sd, i))
    s.settimeout(10)
    s.connect(sock)
    s.sendall(f)
    h = s.recv(32)
    return s, h[0]
socks = []
for i in range(3):
    s, t = conn(i)
    assert t == C.TCP_F_ACCEPT, "connection %d answered %d" % (i, t)
    socks.append(s)
s, t = conn(3)
print("a fourth silent connection of this uid, on a path of its own:",
      "refused" if t == C.TCP_F_REJECT else "accepted")
if t != C.TCP_F_REJECT:
    sys.exit("unix peers of one uid are not counted together")
PY
grep -q "refusing unix pid [0-9]* uid $(id -u) path .*: 3 connections from it not logged in" "$RBLK_TARGET_LOG" ||
	fail "the target does not say it refused the uid's fourth connection"
stop_verifier
echo "PASS: $TEST_NAME"
