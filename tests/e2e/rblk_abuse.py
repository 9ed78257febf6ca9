#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Transport-level abuse against rblk-target's tcp port (issue 15).

    rblk_abuse.py PORT EXPORT CASE [ARG]

Speaks the tcp transport's frames with the helpers of rblk_raw.py. CASE:
  reset N      N sessions log in, send a KEEPALIVE and close with a reset
               (SO_LINGER 0); the shell then checks they are gone
  zeroread     a never-login connection sends a zero-length READ_REQ with
               a made-up rkey: it must get an ERROR frame (remote access
               error) and be dropped
  ackflood     a logged-in client streams zero-length signaled WRITEs into
               its WRITE window and never reads: the target must drop it
               once its queued WRITE_ACKs pass the bound, not grow
  hold N S     N clients send their CONNECT, get ACCEPT and hold the
               connection S seconds without logging in (fd pressure)
  flood S      for S seconds, open sockets that never send anything, as
               fast as possible (at most 400 open at a time)
Prints one line per check and exits 1 if one failed.
"""
import os
import socket
import struct
import sys
import time

sys.argv = [sys.argv[0], sys.argv[1], sys.argv[2], sys.argv[2], "0"] + \
    sys.argv[3:]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rblk_raw as R  # noqa: E402

CASE = sys.argv[5]
ARGS = sys.argv[6:]


def reset(n):
    conns = [R.Conn().connect().login(host="abuse") for _ in range(n)]
    for c in conns:
        c.send(R.cmd(tag=1, op=R.KA, length=0))
    # at once: the target's response meets the reset
    for c in conns:
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                       struct.pack("ii", 1, 0))
        c.s.close()
    print("reset: %d sessions logged in, sent a KEEPALIVE, reset" % n)
    return True


def zeroread():
    c = R.Conn().connect()
    c.raw(R.frame(R.F_READ_REQ, length=0, ident=1, addr=0x1000,
                  rkey=0x12345678))
    dropped = c.expect_drop(10)
    ok = dropped and c.error == R.WC_REM_ACCESS_ERR
    print("zeroread: dropped %s, ERROR status %s" % (dropped, c.error))
    return ok


def ackflood():
    c = R.Conn().connect().login(host="abuse")
    c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    addr, rkey = R.grant(c)  # a WRITE's window: valid until WRITE_DATA
    w = R.frame(R.F_WRITE, length=0, addr=addr, rkey=rkey, flags=R.FL_ACK)
    batch = w * 4096
    sent = 0
    end = time.time() + 60
    c.s.settimeout(5)
    try:
        while time.time() < end:
            c.s.sendall(batch)
            sent += len(batch)
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        pass
    # the target stopped reading us or dropped us; it must be a drop
    dropped = False
    try:
        c.s.settimeout(10)
        c.s.shutdown(socket.SHUT_WR)
        while True:
            d = c.s.recv(1 << 20)
            if not d:
                dropped = True
                break
    except socket.timeout:
        pass
    except OSError:  # reset, not connected: dropped
        dropped = True
    print("ackflood: %d WRITE frames sent unread, dropped %s" %
          (sent // 32, dropped))
    return dropped


def hold(n, secs):
    conns = []
    for _ in range(n):
        try:
            conns.append(R.Conn().connect())
        except Exception:
            break
    print("hold: %d connections accepted of %d" % (len(conns), n))
    time.sleep(secs)
    for c in conns:
        c.close()
    return True


def flood(secs):
    open_socks = []
    n = 0
    end = time.time() + secs
    while time.time() < end:
        try:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", R.PORT))
            open_socks.append(s)
            n += 1
        except OSError:
            time.sleep(0.01)
        if len(open_socks) > 400:
            open_socks.pop(0).close()
    for s in open_socks:
        s.close()
    print("flood: %d silent connections opened" % n)
    return True


def main():
    if CASE == "reset":
        ok = reset(int(ARGS[0]))
    elif CASE == "zeroread":
        ok = zeroread()
    elif CASE == "ackflood":
        ok = ackflood()
    elif CASE == "hold":
        ok = hold(int(ARGS[0]), float(ARGS[1]))
    elif CASE == "flood":
        ok = flood(float(ARGS[0]))
    else:
        print("unknown case %s" % CASE)
        ok = False
    sys.exit(0 if ok else 1)


main()
