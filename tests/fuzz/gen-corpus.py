#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the seed corpora of the tests/fuzz harnesses.

    tests/fuzz/gen-corpus.py [OUTDIR]      (default: tests/fuzz/corpus)

OUTDIR/proto/*: single messages, valid and edge cases (fuzz_proto).
OUTDIR/login/*: [cm_qd u16][max_io sel u8] + [len u16][message]... sessions
(fuzz_login), auth-* with an AUTH_RESPONSE after the HELLO, MACs made with
fuzz_login's fixed secrets and challenge nonce. The layouts follow
common/proto.h (keep them in step); its constants come from there, through
$RBLK_BUILD/gen/rblk_const.py (make build/gen/rblk_const.py).
"""
import hashlib
import hmac
import os
import struct
import sys

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
_GEN = os.path.join(os.environ.get("RBLK_BUILD", os.path.join(_ROOT, "build")),
                    "gen")
if not os.path.exists(os.path.join(_GEN, "rblk_const.py")):
    sys.exit("gen-corpus.py: %s/rblk_const.py missing: run make "
             "build/gen/rblk_const.py (or set RBLK_BUILD)" % _GEN)
sys.path.insert(0, _GEN)
import rblk_const as C  # noqa: E402

MAGIC, VERSION = C.RBLK_MAGIC, C.RBLK_PROTO_VERSION
HELLO, LOGIN, CMD, RESP = (C.RBLK_MSG_HELLO, C.RBLK_MSG_LOGIN, C.RBLK_MSG_CMD,
                           C.RBLK_MSG_RESP)
AUTH_RESPONSE = C.RBLK_MSG_AUTH_RESPONSE
GRANT, READ_DONE, WRITE_DATA = (C.RBLK_MSG_GRANT, C.RBLK_MSG_READ_DONE,
                                C.RBLK_MSG_WRITE_DATA)
HELLO_RO, HELLO_AUTH = C.RBLK_HELLO_F_READ_ONLY, C.RBLK_HELLO_F_AUTH
READ, WRITE, FLUSH, TRIM = (C.RBLK_OP_READ, C.RBLK_OP_WRITE, C.RBLK_OP_FLUSH,
                            C.RBLK_OP_TRIM)
WZ, DISC, KA = C.RBLK_OP_WRITE_ZEROES, C.RBLK_OP_DISCONNECT, C.RBLK_OP_KEEPALIVE
FUA, PUSH, INLINE = C.RBLK_CMD_F_FUA, C.RBLK_CMD_F_PUSH, C.RBLK_CMD_F_INLINE
RESP_F_PULL = C.RBLK_RESP_F_PULL
CMD_SIZE = C.RBLK_CMD_SIZE


def hdr(typ, length, magic=MAGIC, version=VERSION):
    return struct.pack("<IBBH", magic, version, typ, length)


def name(s):
    b = s.encode() if isinstance(s, str) else s
    return b + bytes(128 - len(b))


def hello(export="vol0", host="fuzzhost", qd=64, qid=0, max_io=1 << 20,
          flags=0, reserved=0, **h):
    return (hdr(HELLO, 280, **h) + struct.pack("<HHIII", qd, qid, max_io,
            flags, reserved) + name(export) + name(host))


def login(status=0, qd=64, max_io=1 << 20, bs=4096, size=1 << 30,
          features=0x3e, rkey=0, addr=0, vol_len=0, sid=42,
          vol_id=bytes(range(16))):
    return (hdr(LOGIN, 80) + struct.pack("<IHHIIQIIQQQ", status, qd, 0,
                                         max_io, bs, size, features, rkey,
                                         addr, vol_len, sid) + vol_id)


def cmd(tag=0, op=READ, flags=0, length=4096, offset=0, addr=0, rkey=0,
        reserved=(0,) * 7, hlen=CMD_SIZE, **h):
    return (hdr(CMD, hlen, **h) + struct.pack("<HBBIQQI", tag, op, flags,
            length, offset, addr, rkey) + struct.pack("<7I", *reserved))


def resp(tag=0, status=0, length=4096, flags=0, rkey=0, addr=0):
    return hdr(RESP, 32) + struct.pack("<HHIIIQ", tag, flags, status, length,
                                       rkey, addr)


def grant(tag=0, rkey=0x1234, length=4096, addr=0x7F0000001000):
    return hdr(GRANT, 32) + struct.pack("<HHIIIQ", tag, 0, rkey, length, 0,
                                        addr)


def done(typ=READ_DONE, tag=0, rkey=0x1234):
    return hdr(typ, 16) + struct.pack("<HHI", tag, 0, rkey)


def auth_response(nonce, mac, flags=0):
    return hdr(AUTH_RESPONSE, 80) + struct.pack("<II", flags, 0) + nonce + mac


# fuzz_login's fixed authentication setup (tests/fuzz/fuzz_login.c)
FZ_TARGET = "fuzz-target"
FZ_NONCE = bytes([0x5A]) * 32
FZ_SECRETS = {"fuzzhost": b"fuzz-secret-0123456789",
              "rohost": b"ro-secret-abcdefghijkl",
              "outsider": b"outsider-secret-xyz0123"}


def auth_mac(secret, host, export, inonce, tnonce=FZ_NONCE, role="initiator",
             target=FZ_TARGET):
    """HMAC-SHA256 over the MAC input of common/auth.h."""
    msg = (b"rblk-auth-v1" + role.encode().ljust(16, b"\0") + tnonce +
           inonce + name(host) + name(export) + name(target))
    return hmac.new(secret, msg, hashlib.sha256).digest()


def auth_ok(host="fuzzhost", export="secure", inonce=bytes(range(1, 33))):
    return auth_response(inonce, auth_mac(FZ_SECRETS[host], host, export,
                                          inonce))


def cm_req(qd=64, version=VERSION):
    return struct.pack("<IBBHII", MAGIC, version, 0, qd, 0, 0)


def cm_rej(status=3):
    return struct.pack("<IBBHI", MAGIC, VERSION, 0, 0, status)


U64 = (1 << 64) - 1
proto = {
    "hello": hello(),
    "hello-ro": hello(flags=HELLO_RO, export="ro", host=""),
    "hello-qd-max": hello(qd=1024, max_io=8 << 20),
    "hello-qd-zero": hello(qd=0),
    "hello-maxio-odd": hello(max_io=12288),
    "hello-name-full": hello(export="x" * 127),
    "hello-name-nonul": hello()[:24] + b"y" * 128 + name("h"),
    "hello-badmagic": hello(magic=0x12345678),
    "hello-badversion": hello(version=1),
    "hello-short": hello()[:100],
    "login": login(),
    "login-refusal": login(status=3),
    "login-volwrap": login(features=0x7e, rkey=1, addr=U64 - 100,
                           vol_len=1 << 30),
    "resp-pull": resp(flags=RESP_F_PULL, rkey=0x1234, addr=0x7F0000001000),
    "grant": grant(),
    "read-done": done(READ_DONE),
    "write-data": done(WRITE_DATA),
    "cmd-read": cmd(),
    "cmd-write-fua": cmd(op=WRITE, flags=FUA, tag=7, offset=8192),
    "cmd-push": cmd(op=READ, flags=PUSH, addr=0x1000, rkey=5),
    "cmd-flush": cmd(op=FLUSH, length=0),
    "cmd-trim": cmd(op=TRIM, length=1 << 20),
    "cmd-wz": cmd(op=WZ, length=1 << 20),
    "cmd-disc": cmd(op=DISC, length=0),
    "cmd-ka": cmd(op=KA, length=0),
    "cmd-wrap": cmd(offset=U64 & ~4095, length=8192),
    "cmd-past-end": cmd(offset=1 << 30, length=4096),
    "cmd-zero-len": cmd(length=0),
    "cmd-huge-len": cmd(length=0xFFFFF000),
    "cmd-bad-op": cmd(op=99),
    "cmd-bad-tag": cmd(tag=0xFFFF),
    "cmd-reserved": cmd(reserved=(0, 0, 0, 1, 0, 0, 0)),
    "cmd-inline": cmd(op=WRITE, flags=INLINE, length=4096,
                      hlen=CMD_SIZE + 4096) + bytes(range(256)) * 16,
    "cmd-inline-short": cmd(op=WRITE, flags=INLINE, length=4096,
                            hlen=CMD_SIZE + 4096) + bytes(512),
    "resp": resp(),
    "resp-err": resp(tag=3, status=5, length=0),
    "cm-req": cm_req(),
    "cm-req-pad": cm_req() + bytes(40),
    "cm-rej": cm_rej(),
}
# fuzz_proto also reads limits from 24 bytes after a 64-byte command
proto["cmd-with-limits"] = cmd(op=WRITE, length=65536) + struct.pack(
    "<HBBIQ", 31, 3, 4, 0x3e, 1 << 40) + bytes(8)


def session(*msgs, cm_qd=64, sel=8):
    out = struct.pack("<HB", cm_qd - 1, sel)
    for m in msgs:
        out += struct.pack("<H", len(m)) + m
    return out


login_seeds = {
    "hello-only": session(hello()),
    "hello-io": session(hello(), cmd(), cmd(op=WRITE, tag=1, offset=4096),
                        cmd(op=FLUSH, length=0, tag=2), cmd(op=DISC, length=0)),
    "hello-ro-write": session(hello(export="ro", flags=HELLO_RO),
                              cmd(op=WRITE, length=512)),
    "hello-ram-edge": session(hello(export="ram", max_io=4096),
                              cmd(offset=0, length=4096),
                              cmd(offset=4096, length=4096)),
    "hello-big": session(hello(export="big", qd=1024, max_io=8 << 20),
                         cmd(offset=(U64 & ~0xffff) - 65536, length=65536),
                         cm_qd=1024, sel=11),
    "hello-small-maxio": session(hello(export="big", max_io=4096), sel=0),
    "hello-noexport": session(hello(export="nosuch")),
    "hello-twice": session(hello(), hello()),
    "cmd-first": session(cmd()),
    "hello-qd1": session(hello(qd=1), cmd(tag=0), cmd(tag=1), cm_qd=1),
    "hello-trunc": session(hello()[:279]),
    "hello-resp": session(hello(), resp()),
    "hello-push": session(hello(), cmd(flags=PUSH, addr=0x1000, rkey=1)),
    # authentication (fuzz_login's S_AUTH)
    "auth-ok": session(hello(export="secure", flags=HELLO_AUTH), auth_ok(),
                       cmd(op=WRITE, length=4096), cmd(tag=1)),
    "auth-ro": session(hello(export="secure", host="rohost", flags=HELLO_AUTH),
                       auth_ok(host="rohost"), cmd(op=WRITE, length=4096)),
    "auth-host-vol0": session(hello(flags=HELLO_AUTH),
                              auth_ok(export="vol0"), cmd()),
    "auth-reflected": session(hello(export="secure", flags=HELLO_AUTH),
                              auth_ok(inonce=FZ_NONCE)),
    "auth-zero-nonce": session(hello(export="secure", flags=HELLO_AUTH),
                               auth_ok(inonce=bytes(32))),
    "auth-wrong-mac": session(hello(export="secure", flags=HELLO_AUTH),
                              auth_response(bytes(range(1, 33)),
                                            bytes(32))),
    "auth-other-export": session(hello(export="secure", flags=HELLO_AUTH),
                                 auth_ok(export="vol0")),
    "auth-unknown-host": session(hello(export="secure", host="ghost",
                                       flags=HELLO_AUTH),
                                 auth_response(bytes(range(1, 33)),
                                               auth_mac(bytes(16), "ghost",
                                                        "secure",
                                                        bytes(range(1, 33))))),
    "auth-not-listed": session(hello(export="secure", host="outsider",
                                     flags=HELLO_AUTH),
                               auth_ok(host="outsider")),
    "auth-required": session(hello(export="secure"), auth_ok()),
    "auth-flags": session(hello(export="secure", flags=HELLO_AUTH),
                          auth_response(bytes(range(1, 33)), bytes(32),
                                        flags=1)),
    "auth-cmd-first": session(hello(export="secure", flags=HELLO_AUTH), cmd()),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus")
    for sub, seeds in (("proto", proto), ("login", login_seeds)):
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        for k, v in seeds.items():
            with open(os.path.join(d, k), "wb") as f:
                f.write(v)
    print("wrote %d + %d seeds under %s" % (len(proto), len(login_seeds), out))


if __name__ == "__main__":
    main()
