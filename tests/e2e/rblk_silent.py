#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Silent clients for tests/e2e/81-ctl-silent.sh (issue 25 point 6).

    rblk_silent.py unix PATH N STOPFILE
    rblk_silent.py tcp PORT N STOPFILE

Keeps N connections open to the unix socket PATH (the control socket) or
to 127.0.0.1:PORT (the metrics endpoint), never sending a byte; each one
the server closes is opened again at once. Runs until STOPFILE exists;
prints "silent open=N reopened=N" once all N are open and every second.
"""
import os
import selectors
import socket
import sys
import time


def main():
    kind, where, n, stopfile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    sel = selectors.DefaultSelector()
    reopened = 0

    def open_one():
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            addr = where
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            addr = ("127.0.0.1", int(where))
        s.setblocking(False)
        s.connect_ex(addr)
        sel.register(s, selectors.EVENT_READ)

    for _ in range(n):
        open_one()
    last = 0
    while not os.path.exists(stopfile):
        for key, _ in sel.select(timeout=0.05):
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # closed by the server: come back at once
                sel.unregister(key.fileobj)
                key.fileobj.close()
                reopened += 1
                open_one()
        if time.monotonic() - last >= 1:
            last = time.monotonic()
            print("silent open=%d reopened=%d" % (len(sel.get_map()), reopened),
                  flush=True)


if __name__ == "__main__":
    main()
