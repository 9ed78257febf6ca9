#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A rogue rblk target over the tcp transport, for initiator tests.

    rblk_rogue.py PORT MODE [SIZE]

Listens on 127.0.0.1:PORT (0: any free port; it prints "listening PORT"
once it accepts) and serves one RAM volume of SIZE bytes
(default 4 MiB, block size 4096, every export name accepted) whose byte
at offset o is pattern(o) below, so a reader can check what it got. It
logs in correctly (CONNECT/ACCEPT, HELLO/LOGIN, in-capsule data, GRANT
windows, push and pull reads, keep-alive) and then misbehaves as MODE
says, as a broken, overloaded or compromised server would:

  good          no misbehaviour (the control case)
  silent        answers KEEPALIVE, never answers a READ or WRITE
  break         answers every READ with a GRANT (a protocol error the
                initiator detects, so every connection fails right after
                the first READ)
  push-nodata   a push READ's RESP says OK, but no data was written
  push-wrongtag a push READ's data goes to the buffer of the READ before
                it (another command's), then the RESP says OK
  write-zero    a WRITE's RESP says OK with 0 bytes transferred
  write-early   a granted WRITE is answered OK at once: no GRANT, no data
  size0         LOGIN with a volume of 0 bytes
  size63        LOGIN with a volume of 2^63 bytes
  stale-tag     on its first connection, answers a READ on a tag whose
                previous READ it answered by sending that previous RESP
                again (the tag's old generation; a pull READ's names the
                old READ's window, with its data), and nothing else
  other-tag     on its first connection, holds its second READ until a
                third is outstanding, then answers each of the two with
                the other's tag index (keeping each one's generation
                bits) and data: two busy tags swapped

  old           a target that predates tag generations: a HELLO with
                the TAG_GEN flag is refused as malformed (LOGIN status
                INVALID), as every unknown HELLO flag was; otherwise good

Tag generations (RBLK_F_TAG_GEN) are granted when the HELLO asks (but
in mode old), and tags are echoed verbatim, as a current target does.

One line per accepted connection goes to stdout: "conn N T" (T: seconds
since start, monotonic), flushed, so a test can count and time the
initiator's attempts. Runs until killed.
"""
import os
import signal
import socket
import struct
import sys
import threading
import time

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(os.environ.get("RBLK_BUILD",
                                os.path.join(_ROOT, "build")), "gen"))
import rblk_const as C  # noqa: E402

PORT = int(sys.argv[1])
MODE = sys.argv[2]
SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 4 << 20
BS = 4096
MAX_IO = 128 << 10
HDR = "<BBHIQQII"
T0 = time.monotonic()
lock = threading.Lock()
nconn = 0


def pattern_block(b):
    """Bytes of 4 KiB block b: byte o of the volume is
    ((o >> 12) * 7 + (o & 0xff)) & 0xff."""
    base = (b * 7) & 0xff
    row = bytes(((base + j) & 0xff) for j in range(256))
    return row * (BS // 256)


vol = bytearray(b"".join(pattern_block(b) for b in range(SIZE // BS))
                if SIZE <= 64 << 20 else bytes(0))


def hdr(typ, length):
    return struct.pack("<IBBH", C.RBLK_MAGIC, C.RBLK_PROTO_VERSION, typ,
                       length)


def frame(ftype, payload=b"", length=None, ident=0, addr=0, rkey=0, aux=0,
          flags=0):
    if length is None:
        length = len(payload)
    return struct.pack(HDR, ftype, flags, C.TCP_MAGIC, length, ident, addr,
                       rkey, aux) + payload


def resp(tag, status=0, length=0, flags=0, rkey=0, addr=0):
    return hdr(C.RBLK_MSG_RESP, 32) + struct.pack("<HHIIIQ", tag, flags,
                                                  status, length, rkey, addr)


def grant(tag, rkey, length, addr):
    return hdr(C.RBLK_MSG_GRANT, 32) + struct.pack("<HHIIIQ", tag, 0, rkey,
                                                   length, 0, addr)


class Conn:
    WIN_BASE = 0x100000000

    def __init__(self, s, n):
        self.s = s
        self.buf = b""
        self.seq = 0
        self.max_io = MAX_IO
        self.wdata = {}  # tag -> bytearray of a granted WRITE's window
        self.wcmd = {}  # tag -> (offset, length) of a granted WRITE
        self.last_push = None  # (addr, rkey) of the previous push READ
        self.first = n == 1  # stale-tag, other-tag: misbehave here only
        self.nreads = 0
        self.last_resp = {}  # stale-tag: tag index -> its last RESP
        self.held = None  # other-tag: the READ held back
        self.pull = {}  # pull window address -> its data

    def read(self, n):
        while len(self.buf) < n:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def out(self, data):
        self.s.sendall(data)

    def send(self, payload):
        self.seq += 1
        self.out(frame(C.TCP_F_SEND, payload, ident=self.seq))

    def push(self, addr, rkey, data):
        self.seq += 1
        self.out(frame(C.TCP_F_WRITE, data, ident=self.seq, addr=addr,
                       rkey=rkey))

    def login(self, hello):
        qd, _qid, max_io, hfl, inl = struct.unpack("<HHIII", hello[8:24])
        # "old": a target of e28b00f's time, which knows none of the HELLO
        # flags that came after it and refuses a HELLO with any as malformed
        newer = C.RBLK_HELLO_F_TAG_GEN | C.RBLK_HELLO_F_PUSH_IMM | \
            C.RBLK_HELLO_F_EPOCH | C.RBLK_HELLO_F_RESIZE | C.RBLK_HELLO_F_PR
        if MODE == "old" and hfl & newer:
            self.send(hdr(C.RBLK_MSG_LOGIN, 80) +
                      struct.pack("<I", C.RBLK_S_INVALID) + bytes(68))
            return
        self.qd = min(qd, 64)
        self.max_io = min(max_io, MAX_IO)
        self.inline = min(inl, 4096) // 512 * 512
        size = SIZE
        if MODE == "size0":
            size = 0
        elif MODE == "size63":
            size = 1 << 63
        feat = C.RBLK_F_FLUSH | C.RBLK_F_PUSH | C.RBLK_F_TRIM | \
            C.RBLK_F_ZEROES
        if hfl & C.RBLK_HELLO_F_TAG_GEN:
            feat |= C.RBLK_F_TAG_GEN
        body = struct.pack("<IHHIIQIIQQQ", 0, self.qd, self.inline,
                           self.max_io, BS, size, feat, 0, 0, 0,
                           0x1234) + bytes(range(16))
        self.send(hdr(C.RBLK_MSG_LOGIN, 80) + body)

    def cmd(self, m):
        tag, op, fl, ln, off, addr, rkey = struct.unpack("<HBBIQQI",
                                                         m[8:36])
        if op == C.RBLK_OP_KEEPALIVE or op == C.RBLK_OP_DISCONNECT:
            self.send(resp(tag))
            return
        if op == C.RBLK_OP_FLUSH:
            self.send(resp(tag))
            return
        if op in (C.RBLK_OP_TRIM, C.RBLK_OP_WRITE_ZEROES):
            vol[off:off + ln] = bytes(ln)
            self.send(resp(tag, length=ln))
            return
        if MODE == "silent":
            return
        if op == C.RBLK_OP_READ:
            self.read_cmd(tag, fl, ln, off, addr, rkey)
        elif op == C.RBLK_OP_WRITE:
            self.write_cmd(tag, fl, ln, off, m)

    def answer_read(self, tag, fl, ln, data, addr, rkey):
        """A READ's answer (its data, pushed or lent) in the name of tag:
        returns the RESP, to be sent again."""
        if not fl & C.RBLK_CMD_F_PUSH:
            # pull: lend a "window"; its READ_REQ is served in serve()
            self.nreads += 1
            a = self.WIN_BASE + self.nreads * self.max_io
            self.pull[a] = data
            r = resp(tag, length=ln, flags=C.RBLK_RESP_F_PULL,
                     rkey=0x200 + (tag & 0x3ff), addr=a)
            self.send(r)
            return r
        self.push(addr, rkey, data)
        r = resp(tag, length=ln)
        self.send(r)
        return r

    def read_misdirect(self, tag, fl, ln, off, addr, rkey):
        """stale-tag, other-tag: True when the READ was dealt with."""
        data = bytes(vol[off:off + ln])
        if MODE == "stale-tag":
            old = self.last_resp.get(tag & 0x3ff)
            if old:
                # the stale answer alone (a push READ's data again
                # would meet a dead key; the right answer behind it
                # would give the READ away as answered twice)
                self.send(old)
                return True
            self.last_resp[tag & 0x3ff] = self.answer_read(
                tag, fl, ln, data, addr, rkey)
            return True
        self.nreads += 1
        if self.nreads == 1:
            return False
        if not self.held:
            self.held = (tag, fl, ln, data, addr, rkey)
            return True
        t1, fl1, ln1, d1, a1, k1 = self.held
        self.held = None
        swap = (tag & ~0x3ff) | (t1 & 0x3ff), (t1 & ~0x3ff) | (tag & 0x3ff)
        self.answer_read(swap[0], fl, ln, data, addr, rkey)
        self.answer_read(swap[1], fl1, ln1, d1, a1, k1)
        return True

    def read_cmd(self, tag, fl, ln, off, addr, rkey):
        data = bytes(vol[off:off + ln])
        if MODE == "break":
            self.send(grant(tag, 0x1234, ln, self.WIN_BASE))
            return
        if (MODE in ("stale-tag", "other-tag") and self.first and
                self.read_misdirect(tag, fl, ln, off, addr, rkey)):
            return
        if not fl & C.RBLK_CMD_F_PUSH:
            self.answer_read(tag, fl, ln, data, addr, rkey)
            return
        if MODE == "push-nodata":
            pass
        elif MODE == "push-wrongtag":
            if self.last_push:
                self.push(self.last_push[0], self.last_push[1], data)
            else:
                self.push(addr + ln, rkey, data)
        else:
            self.push(addr, rkey, data)
        self.last_push = (addr, rkey)
        self.send(resp(tag, length=ln))

    def write_cmd(self, tag, fl, ln, off, m):
        if fl & C.RBLK_CMD_F_INLINE:
            vol[off:off + ln] = m[64:64 + ln]
            self.send(resp(tag, length=0 if MODE == "write-zero" else ln))
            return
        if MODE == "write-early":
            self.send(resp(tag, length=ln))
            return
        self.wdata[tag] = bytearray(ln)
        self.wcmd[tag] = (off, ln)
        self.send(grant(tag, 0x300 + tag, ln,
                        self.WIN_BASE + tag * self.max_io))

    def write_in(self, addr, payload):
        tag = (addr - self.WIN_BASE) // self.max_io
        o = addr - self.WIN_BASE - tag * self.max_io
        self.wdata[tag][o:o + len(payload)] = payload

    def write_data(self, m):
        tag = struct.unpack("<H", m[8:10])[0]
        off, ln = self.wcmd.pop(tag)
        vol[off:off + ln] = self.wdata.pop(tag)
        self.send(resp(tag, length=0 if MODE == "write-zero" else ln))

    def serve(self):
        h = struct.unpack(HDR, self.read(32))
        self.read(h[3])
        assert h[0] == C.TCP_F_CONNECT
        self.out(frame(C.TCP_F_ACCEPT, aux=C.TCP_VERSION))
        while True:
            t, fl, _mg, ln, ident, addr, rkey, _aux = struct.unpack(
                HDR, self.read(32))
            if t == C.TCP_F_READ_REQ:
                data = self.pull.get(addr, bytes(ln))[:ln]
                self.out(frame(C.TCP_F_READ_RESP, data, ident=ident))
                continue
            p = self.read(ln)
            if t == C.TCP_F_WRITE:
                self.write_in(addr, p)
                if fl & C.TCP_FL_ACK:
                    self.out(frame(C.TCP_F_WRITE_ACK, ident=ident))
                continue
            if t not in (C.TCP_F_SEND, C.TCP_F_SEND_INV):
                continue
            typ = p[5]
            if typ == C.RBLK_MSG_HELLO:
                self.login(p)
            elif typ == C.RBLK_MSG_CMD:
                self.cmd(p)
            elif typ == C.RBLK_MSG_WRITE_DATA:
                self.write_data(p)


def handle(s, n):
    try:
        Conn(s, n).serve()
    except (EOFError, OSError, AssertionError, KeyError, struct.error):
        pass
    finally:
        s.close()


def main():
    global nconn
    # stop_pid's TERM is the normal end: exit 0, so `wait` is quiet
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", PORT))
    ls.listen(64)
    print("listening %d" % ls.getsockname()[1], flush=True)
    while True:
        s, _ = ls.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            nconn += 1
            print("conn %d %.3f" % (nconn, time.monotonic() - T0),
                  flush=True)
            n = nconn
        threading.Thread(target=handle, args=(s, n), daemon=True).start()


main()
