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
  readhold N QD S
               (issue 25.3) a client logged in at queue depth QD takes a
               1 MiB READ window, asks for it N times (READ_REQs of 1 MiB)
               without reading its socket, returns the window, prints
               "armed", holds S seconds, then closes. The target may hold
               at most QD x max_io of those responses and must drop the
               client beyond that (the shell checks its log and RSS)
  shortwrite VICTIM ROUNDS
               (issue 25.1, tcp) a victim session on export VICTIM writes
               1 MiB of a marker through a WRITE grant and reads it back
               (compared) so that the worker's pool holds it; then the
               attacker on EXPORT takes a 1 MiB WRITE grant, RDMA WRITEs
               only part of it (nothing; the first 4 KiB; all but the
               first 4 KiB; two halves in reverse order) and sends
               WRITE_DATA: each must be answered with an error status,
               and reading EXPORT back must give zeroes, never a byte the
               attacker did not write (marker scan). Writing the window in
               full (one WRITE; two halves in order) must still work and
               read back as written. ROUNDS rounds of all of it
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


def readhold(n, qd, secs):
    c = R.Conn()
    # read nothing: what the target cannot send stays queued there
    c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.connect(qd=qd).login(host="readhold", qd=qd)
    c.send(R.cmd(tag=0, op=R.READ, length=1 << 20, offset=0))
    tag, addr, rkey, ln = c.window()
    reqs = b"".join(R.frame(R.F_READ_REQ, length=ln, ident=c.seq + 1 + i,
                            addr=addr, rkey=rkey) for i in range(n))
    c.seq += n
    c.s.settimeout(10)
    try:
        c.s.sendall(reqs)
        c.send_inv(R.done(R.READ_DONE, tag, rkey), rkey)
    except (OSError, socket.timeout) as e:
        print("readhold: send stopped: %s" % e)
    print("armed", flush=True)
    time.sleep(secs)
    c.close()
    print("readhold: %d READs of %d bytes asked for (qd %d, max_io %d)"
          % (n, ln, c.lim["qd"], c.lim["max_io"]), flush=True)
    return True


MIB = 1 << 20


def write_granted(c, tag, off, pieces, length=MIB):
    """WRITE length bytes at off on tag; RDMA WRITE only pieces (a list
    of (window offset, bytes)) into the GRANT's window, then WRITE_DATA.
    Returns the RESP status."""
    c.send(R.cmd(tag=tag, op=R.WRITE, length=length, offset=off))
    t, addr, rkey, ln = c.window()
    assert (t, ln) == (tag, length), "GRANT for tag %d, %d bytes" % (t, ln)
    for woff, data in pieces:
        c.seq += 1
        c.raw(R.frame(R.F_WRITE, data, ident=c.seq, addr=addr + woff,
                      rkey=rkey))
    c.send_inv(R.done(R.WRITE_DATA, tag, rkey), rkey)
    t, st, _ = c.resp()
    assert t == tag, "RESP for tag %d" % t
    return st


def read_pulled(c, tag, off, length=MIB):
    """READ length bytes at off through the RESP's window, returned."""
    c.send(R.cmd(tag=tag, op=R.READ, length=length, offset=off))
    t, addr, rkey, ln = c.window()
    assert (t, ln) == (tag, length), "RESP for tag %d, %d bytes" % (t, ln)
    c.seq += 1
    ident = c.seq
    c.raw(R.frame(R.F_READ_REQ, length=ln, ident=ident, addr=addr,
                  rkey=rkey))
    ft, fid, _, _, _, p = c.frame()
    assert ft == R.F_READ_RESP and fid == ident, "no READ_RESP"
    c.send_inv(R.done(R.READ_DONE, tag, rkey), rkey)
    return p


def shortwrite(victim, rounds):
    marker = (b"VICTIM-DATA-MARK" * (MIB // 16))
    v = R.Conn().connect().login(export=victim, host="victim")
    a = R.Conn().connect().login(host="shortwrite")
    bad = 0
    mine = os.urandom(MIB)
    half = MIB // 2
    # what the attacker's window gets, and whether WRITE_DATA may succeed
    partial = [
        ("nothing written", [], False),
        ("first 4 KiB only", [(0, mine[:4096])], False),
        ("all but the first 4 KiB", [(4096, mine[4096:])], False),
        ("halves in reverse order",
         [(half, mine[half:]), (0, mine[:half])], False),
        ("one WRITE of it all", [(0, mine)], True),
        ("halves in order", [(0, mine[:half]), (half, mine[half:])], True),
    ]
    for rnd in range(rounds):
        for i, (what, pieces, ok) in enumerate(partial):
            # the victim's bytes pass through the pool just before
            st = write_granted(v, 0, 0, [(0, marker)])
            assert st == 0, "victim WRITE failed: %d" % st
            assert read_pulled(v, 1, 0) == marker, "victim read back differs"
            off = MIB * (i + len(partial) * (rnd % 2))
            st = write_granted(a, 2, off, pieces)
            back = read_pulled(a, 3, off)
            if ok:
                good = st == 0 and back == mine
            else:
                good = st != 0 and back == bytes(MIB)
            stale = b"VICTIM" in back or b"MARK" in back
            print("shortwrite round %d: %s: status %s, read back %s%s" %
                  (rnd, what, R.SNAME.get(st, st),
                   "as written" if back == mine else
                   "zeroes" if back == bytes(MIB) else "OTHER BYTES",
                   ", VICTIM'S BYTES" if stale else ""))
            if not good or stale:
                bad += 1
            # zero the range again for the next round
            if ok:
                assert write_granted(a, 2, off, [(0, bytes(MIB))]) == 0
    v.close()
    a.close()
    print("shortwrite: %d rounds, %d bad" % (rounds, bad))
    return bad == 0


def main():
    if CASE == "reset":
        ok = reset(int(ARGS[0]))
    elif CASE == "zeroread":
        ok = zeroread()
    elif CASE == "ackflood":
        ok = ackflood()
    elif CASE == "hold":
        ok = hold(int(ARGS[0]), float(ARGS[1]))
    elif CASE == "readhold":
        ok = readhold(int(ARGS[0]), int(ARGS[1]), float(ARGS[2]))
    elif CASE == "shortwrite":
        ok = shortwrite(ARGS[0], int(ARGS[1]))
    elif CASE == "flood":
        ok = flood(float(ARGS[0]))
    else:
        print("unknown case %s" % CASE)
        ok = False
    sys.exit(0 if ok else 1)


main()
