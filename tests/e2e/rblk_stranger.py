#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a stranger learns at login (tests/e2e/83-stranger.sh, issue 25).

    rblk_stranger.py PORT HOST ROUNDS EXPORT...

For each EXPORT name, ROUNDS times: connect to 127.0.0.1:PORT, CONNECT,
send a HELLO as HOST without the AUTH flag and time the answer (a LOGIN
refusal); then once with the AUTH flag and note the first answer. Prints
one line per name:

    NAME plain=STATUS median_ms=MS auth=MESSAGE

(STATUS: the LOGIN status name; MESSAGE: AUTH_CHALLENGE, or LOGIN:STATUS.)
"""
import os
import socket
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get(
    "RBLK_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "..", "..", "build")), "gen"))
import rblk_const as C  # noqa: E402

S = {v: k[len("RBLK_S_"):] for k, v in vars(C).items()
     if k.startswith("RBLK_S_") and not k.endswith("_")}


def frame(ftype, payload, ident=0, aux=0):
    return struct.pack("<BBHIQQII", ftype, 0, C.TCP_MAGIC, len(payload),
                       ident, 0, 0, aux) + payload


def name(s):
    b = s.encode()
    return b + bytes(128 - len(b))


def hello(export, host, flags):
    return (struct.pack("<IBBH", C.RBLK_MAGIC, C.RBLK_PROTO_VERSION,
                        C.RBLK_MSG_HELLO, 280) +
            struct.pack("<HHIII", 4, 0, 1 << 20, flags, 0) + name(export) +
            name(host))


def read_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            d = s.recv(n - len(b))
            if not d:
                raise EOFError
            b += d
        return b
    h = exact(32)
    t, _, _, ln = struct.unpack("<BBHI", h[:8])
    return t, exact(ln)


def ask(port, export, host, flags):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(frame(C.TCP_F_CONNECT, struct.pack("<IBBHII", C.RBLK_MAGIC,
              C.RBLK_PROTO_VERSION, 0, 4, 0, 0), aux=C.TCP_VERSION))
    t, _ = read_frame(s)
    assert t == C.TCP_F_ACCEPT, "CONNECT answered with frame %d" % t
    t0 = time.monotonic()
    s.sendall(frame(C.TCP_F_SEND, hello(export, host, flags), ident=1))
    t, m = read_frame(s)
    el = (time.monotonic() - t0) * 1000
    s.close()
    assert t == C.TCP_F_SEND, "HELLO answered with frame %d" % t
    if m[5] == C.RBLK_MSG_LOGIN:
        return "LOGIN:" + S.get(struct.unpack("<I", m[8:12])[0], "?"), el
    if m[5] == C.RBLK_MSG_AUTH_CHALLENGE:
        return "AUTH_CHALLENGE", el
    return "type%d" % m[5], el


def main():
    port, host, rounds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for export in sys.argv[4:]:
        answers, times = set(), []
        for _ in range(rounds):
            a, el = ask(port, export, host, 0)
            answers.add(a)
            times.append(el)
        plain = ",".join(sorted(a.replace("LOGIN:", "") for a in answers))
        auth, _ = ask(port, export, host, C.RBLK_HELLO_F_AUTH)
        print("%s plain=%s median_ms=%.2f auth=%s"
              % (export, plain, statistics.median(times), auth), flush=True)


if __name__ == "__main__":
    main()
