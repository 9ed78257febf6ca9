#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A misbehaving NBD client for tests/e2e/71-nbd-abuse.sh and 70-errors.sh
(60-garbage.sh imports its negotiate()).

  nbd_abuse.py bigreads SOCK N LEN
      Negotiate (fixed newstyle, NBD_OPT_GO on the default export), send N
      READs of LEN bytes at once and never read a reply. Prints "sent N",
      then holds the connection until stdin closes; prints "dropped" and
      exits 0 if the server closes it first.
  nbd_abuse.py idle SOCK N WAIT
      Open N connections and send nothing (not even the client flags).
      Prints "open N", then waits up to WAIT seconds for the server to
      close every one of them and prints "closed K of N in T s"; exit 0
      when K == N.
  nbd_abuse.py idleclient SOCK WAIT
      Negotiate like bigreads, then send nothing. Prints "connected"; exit
      0 with "dropped after T s" if the server closes the connection
      within WAIT seconds, 1 otherwise.
  nbd_abuse.py hold SOCK SECS
      Negotiate like bigreads, print "holding the queue", hold the
      connection SECS seconds without a request, close it; exit 0.

SOCK is a unix socket path, or HOST:PORT for TCP.
"""
import os
import select
import socket
import struct
import sys
import time

NBD_MAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
OPT_REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
OPT_GO = 7
REP_ACK = 1
REP_INFO = 3
CMD_READ = 0


def connect(addr):
    if ":" in addr and not os.path.exists(addr):
        host, port = addr.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
    return s


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("server closed the connection")
        b += c
    return b


def negotiate(s):
    """Fixed newstyle handshake, NBD_OPT_GO on the default export."""
    magic, opt, _flags = struct.unpack(">QQH", recv_exact(s, 18))
    if magic != NBD_MAGIC or opt != IHAVEOPT:
        raise RuntimeError("not a newstyle NBD server")
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    data = struct.pack(">IH", 0, 0)  # empty name, no info requests
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data)
    size = None
    while True:
        magic, _o, rtype, rlen = struct.unpack(">QIII", recv_exact(s, 20))
        if magic != OPT_REPLY_MAGIC:
            raise RuntimeError("bad option reply magic")
        body = recv_exact(s, rlen)
        if rtype == REP_INFO and rlen >= 12 and body[:2] == b"\0\0":
            size = struct.unpack(">Q", body[2:10])[0]
        elif rtype == REP_ACK:
            return size
        elif rtype & 0x80000000:
            raise RuntimeError("GO refused: %r" % body)


def cmd_bigreads(addr, n, length):
    s = connect(addr)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    size = negotiate(s)
    reqs = b"".join(
        struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, i,
                    (i * length) % max(size - length + 1, 1) // 4096 * 4096,
                    length)
        for i in range(n))
    s.sendall(reqs)
    print("sent %d" % n, flush=True)
    # hold on until stdin closes; the replies are never read. POLLRDHUP
    # says the server dropped us even while its replies sit unread.
    p = select.poll()
    p.register(sys.stdin, select.POLLIN)
    p.register(s, select.POLLRDHUP | select.POLLHUP)
    while True:
        for fd, ev in p.poll():
            if fd == s.fileno():
                print("dropped", flush=True)
                return 0
            if not sys.stdin.buffer.read1(4096):
                return 0


def cmd_idle(addr, n, wait):
    socks = [connect(addr) for _ in range(n)]
    print("open %d" % n, flush=True)
    t0 = time.monotonic()
    live = set(socks)
    while live and time.monotonic() - t0 < wait:
        r, _, _ = select.select(list(live), [], [], 0.5)
        for s in r:
            try:
                data = s.recv(65536)
            except ConnectionError:
                data = b""
            if not data:
                live.discard(s)
                s.close()
    k = n - len(live)
    print("closed %d of %d in %.1f s" % (k, n, time.monotonic() - t0),
          flush=True)
    return 0 if k == n else 1


def cmd_idleclient(addr, wait):
    s = connect(addr)
    negotiate(s)
    print("connected", flush=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < wait:
        r, _, _ = select.select([s], [], [], 0.5)
        if r:
            try:
                data = s.recv(65536)
            except ConnectionError:
                data = b""
            if not data:
                print("dropped after %.1f s" % (time.monotonic() - t0),
                      flush=True)
                return 0
    print("still connected after %d s" % wait, flush=True)
    return 1


def cmd_hold(addr, secs):
    s = connect(addr)
    negotiate(s)
    print("holding the queue", flush=True)
    time.sleep(secs)
    s.close()
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "bigreads":
        return cmd_bigreads(argv[2], int(argv[3]), int(argv[4]))
    if len(argv) == 5 and argv[1] == "idle":
        return cmd_idle(argv[2], int(argv[3]), float(argv[4]))
    if len(argv) == 4 and argv[1] == "hold":
        return cmd_hold(argv[2], float(argv[3]))
    if len(argv) == 4 and argv[1] == "idleclient":
        return cmd_idleclient(argv[2], float(argv[3]))
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
