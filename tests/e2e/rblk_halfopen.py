#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Half-open flood for tests/e2e/69-halfopen.sh (issue 25 point 4).

    rblk_halfopen.py PORT ADDRS PER_ADDR RATE STOPFILE

Keeps PER_ADDR connections open from each source address in ADDRS (a
comma-separated list, or FIRST-LAST of 127.x.y.z addresses, which Linux
has on lo), each completing the tcp transport's CONNECT and never sending
a HELLO: the target holds it as "not logged in" until its login limit or
an eviction. A connection the target closes (or refuses BUSY) is opened
again, at most RATE new connections a second in all, so the flood is
renewed for as long as it runs. Runs until STOPFILE exists (or the
target is gone for good); prints a line of counts every second:

    flood t=SECS open=N held=N accepted=N closed=N refused=N

(held: accepted and open now; the others count since the start.)
"""
import errno
import ipaddress
import os
import selectors
import socket
import struct
import sys
import time

MAGIC = 0x4B4C4252
CM_REQ = struct.pack("<IBBHII", MAGIC, 2, 0, 4, 0, 0)
# the tcp transport's frame header: type 1 CONNECT, version, len, ...
CONNECT = struct.pack("<BBHIQQII", 1, 0, 0x5854, len(CM_REQ), 0, 0, 0, 1) + CM_REQ
HDR_LEN = 32


def addr_list(spec):
    if "-" in spec and "," not in spec:
        a, b = (int(ipaddress.IPv4Address(x)) for x in spec.split("-"))
        return [str(ipaddress.IPv4Address(i)) for i in range(a, b + 1)]
    return spec.split(",")


class Conn:
    __slots__ = ("sock", "addr", "state", "got")


def main():
    port, addrs = int(sys.argv[1]), addr_list(sys.argv[2])
    per, rate, stopfile = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    sel = selectors.DefaultSelector()
    want = [(a, i) for i in range(per) for a in addrs]  # round robin
    todo = list(want)
    live = held = 0
    stats = {"accepted": 0, "closed": 0, "refused": 0}
    t0 = last = time.monotonic()
    budget = 0.0

    def drop(c, how):
        nonlocal live, held
        held -= c.state == "accepted"
        sel.unregister(c.sock)
        c.sock.close()
        live -= 1
        stats[how] += 1
        todo.append((c.addr, 0))

    while not os.path.exists(stopfile):
        now = time.monotonic()
        budget = min(budget + (now - last) * rate, rate / 10 + 1)
        if now - t0 >= 1 and int(now - t0) != int(last - t0):
            print("flood t=%d open=%d held=%d accepted=%d closed=%d refused=%d"
                  % (now - t0, live, held, stats["accepted"], stats["closed"],
                     stats["refused"]), flush=True)
        last = now
        while todo and budget >= 1:
            addr, _ = todo.pop(0)
            budget -= 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.bind((addr, 0))
                s.connect_ex(("127.0.0.1", port))
            except OSError:
                s.close()
                todo.append((addr, 0))
                break
            c = Conn()
            c.sock, c.addr, c.state, c.got = s, addr, "connecting", b""
            sel.register(s, selectors.EVENT_WRITE, c)
            live += 1
        for key, ev in sel.select(timeout=0.01):
            c = key.data
            if c.state == "connecting":
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    drop(c, "closed")
                    continue
                try:
                    c.sock.send(CONNECT)
                except OSError:
                    drop(c, "closed")
                    continue
                c.state = "connected"
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            try:
                data = c.sock.recv(4096)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    continue
                data = b""
            if not data:
                drop(c, "closed")
                continue
            if c.state == "connected":
                c.got += data
                if len(c.got) >= HDR_LEN:
                    if c.got[0] == 2:  # ACCEPT: now "not logged in"
                        stats["accepted"] += 1
                        held += 1
                        c.state = "accepted"
                    else:  # REJECT (BUSY)
                        drop(c, "refused")
    for key in list(sel.get_map().values()):
        key.fileobj.close()


if __name__ == "__main__":
    main()
