#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Workload and checker for tests/e2e/98-power-cut.sh (issue 28, part 2).

  powercut.py run SOCK JOURNAL GEN_BASE SEED
      Through the NBD server SOCK (`rblk nbd --socket`), write 4 KiB blocks
      (1-4 per request, 8 requests in flight, never two at once on one
      block), one in twenty FUA, and a FLUSH after about every 24 writes
      (one at a time, concurrent with the writes). Every event goes to
      JOURNAL as it happens: "S GEN BLOCK COUNT FUA" before a write is sent,
      "A GEN" / "AF GEN" (FUA) when it is acknowledged, "E GEN" when it
      failed, "FS ID" before a FLUSH is sent, "FD ID" / "FE ID" when it
      completed / failed. Block b of a write of generation g holds a header
      (magic, b, g) and bytes derived from (b, g). Runs until SIGTERM, then
      stops sending, waits (up to 300 s) for what is in flight and sends
      one last FLUSH, as an application that syncs before it exits: after
      a power cut the writes acknowledged before it and never flushed were
      lost, and that FLUSH must not claim them durable.
  powercut.py check SOCK JOURNAL STATE
      Read every block back and judge it against STATE (each block's
      generation when the cycle began, durable: the previous check flushed
      it; absent: all blocks generation 0, zeroes) and JOURNAL. A write is
      durable once acknowledged with FUA, or acknowledged before a FLUSH
      that completed was sent (a failed FLUSH voids the claims of the writes
      it would have covered). Each block must hold its newest durable
      generation, or a newer one that was sent; anything else is LOST
      (an older generation) or CORRUPT (not a whole block of one write).
      Then FLUSH, and write the generations read to STATE. Prints
      "blocks N durable-claims D newer K lost L corrupt C"; exit 1 when
      L or C.
"""
import hashlib
import os
import random
import signal
import struct
import sys
import time

import nbd

BS = 4096
MAGIC = 0x7262_6C6B_7063_7574  # "rblkpcut"
HDR = struct.Struct("<QQQ")


def block_bytes(b, g):
    if g == 0:
        return bytes(BS)
    seed = hashlib.sha256(b"%d:%d" % (b, g)).digest()
    body = (seed * (BS // len(seed) + 1))[: BS - HDR.size]
    return HDR.pack(MAGIC, b, g) + body


def connect(sock):
    h = nbd.NBD()
    h.connect_unix(sock)
    return h


def run(sock, journal, gen_base, seed):
    h = connect(sock)
    nblocks = h.get_size() // BS
    rnd = random.Random(seed)
    # PC_FUA (share of FUA writes) and PC_FLUSH_EVERY (0: no FLUSH but the
    # last): a dishonest target is caught for sure only where its lie is
    # the only sync (a FUA write flushes the whole disk cache here)
    fua_ratio = float(os.environ.get("PC_FUA", "0.05"))
    flush_every = int(os.environ.get("PC_FLUSH_EVERY", "24"))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    j = open(journal, "a", buffering=1)
    gen = gen_base
    busy = set()
    inflight = {}  # cookie -> (kind, gen or flush id, blocks, fua)
    flush_inflight = False
    fid = 0
    since_flush = 0
    final_sent = False
    deadline = None
    while True:
        if stop and deadline is None:
            deadline = time.monotonic() + 300
        while not stop and len(inflight) < 8:
            if not flush_inflight and flush_every and since_flush >= flush_every:
                fid += 1
                j.write("FS %d\n" % fid)
                c = h.aio_flush()
                inflight[c] = ("F", fid, (), False)
                flush_inflight = True
                since_flush = 0
                continue
            n = rnd.randint(1, 4)
            b0 = rnd.randrange(0, nblocks - n + 1)
            blocks = range(b0, b0 + n)
            if any(b in busy for b in blocks):
                break
            gen += 1
            fua = rnd.random() < fua_ratio
            buf = b"".join(block_bytes(b, gen) for b in blocks)
            j.write("S %d %d %d %d\n" % (gen, b0, n, fua))
            c = h.aio_pwrite(buf, b0 * BS, flags=nbd.CMD_FLAG_FUA if fua else 0)
            inflight[c] = ("W", gen, blocks, fua)
            busy.update(blocks)
            since_flush += 1
        if not inflight:
            if stop and not final_sent:
                final_sent = True
                fid += 1
                j.write("FS %d\n" % fid)
                c = h.aio_flush()
                inflight[c] = ("F", fid, (), False)
                continue
            if stop:
                break
            continue
        if deadline is not None and time.monotonic() > deadline:
            print("powercut: %d requests still in flight after 300 s" % len(inflight))
            return 2
        h.poll(100)
        for c in list(inflight):
            kind, g, blocks, fua = inflight[c]
            try:
                if not h.aio_command_completed(c):
                    continue
                ok = True
            except nbd.Error as e:
                ok = False
                err = e
            del inflight[c]
            if kind == "F":
                j.write("%s %d\n" % ("FD" if ok else "FE", g))
                flush_inflight = False
            else:
                j.write(("AF %d\n" if fua else "A %d\n") % g if ok else "E %d\n" % g)
                busy.difference_update(blocks)
            if not ok:
                print("powercut: %s %d failed: %s" % (kind, g, err))
    j.close()
    return 0


def load_state(path, nblocks):
    if not os.path.exists(path):
        return [0] * nblocks
    with open(path) as f:
        st = [int(x) for x in f.read().split()]
    assert len(st) == nblocks, "state has %d blocks, volume %d" % (len(st), nblocks)
    return st


def check(sock, journal, state):
    h = connect(sock)
    nblocks = h.get_size() // BS
    base = load_state(state, nblocks)
    durable = list(base)
    sent = [set() for _ in range(nblocks)]
    writes = {}  # gen -> blocks
    acked = []  # gens acknowledged (without FUA), in order, not yet claimed
    flush_mark = {}  # flush id -> len(acked) when it was sent
    claims = 0
    voided = 0

    def claim(g):
        for b in writes[g]:
            durable[b] = max(durable[b], g)

    for line in open(journal):
        f = line.split()
        if not f:
            continue
        if f[0] == "S":
            g, b0, n = int(f[1]), int(f[2]), int(f[3])
            writes[g] = range(b0, b0 + n)
            for b in writes[g]:
                sent[b].add(g)
        elif f[0] == "A":
            acked.append(int(f[1]))
        elif f[0] == "AF":
            claim(int(f[1]))
            claims += 1
        elif f[0] == "FS":
            flush_mark[int(f[1])] = len(acked)
        elif f[0] == "FD":
            m = flush_mark[int(f[1])]
            for g in acked[:m]:
                if g is not None:
                    claim(g)
                    claims += 1
            acked[:m] = [None] * m
        elif f[0] == "FE":
            m = flush_mark[int(f[1])]
            voided += sum(1 for g in acked[:m] if g is not None)
            acked[:m] = [None] * m
    lost = corrupt = newer = 0
    got = [0] * nblocks
    step = 256
    for b0 in range(0, nblocks, step):
        n = min(step, nblocks - b0)
        data = h.pread(n * BS, b0 * BS)
        for i in range(n):
            b = b0 + i
            blk = data[i * BS : (i + 1) * BS]
            magic, hb, g = HDR.unpack_from(blk)
            if blk == bytes(BS):
                g = 0
            elif magic != MAGIC or hb != b or blk != block_bytes(b, g):
                corrupt += 1
                if corrupt <= 5:
                    print("CORRUPT block %d: header %x/%d/%d" % (b, magic, hb, g))
                continue
            got[b] = g
            if g == durable[b]:
                continue
            if g > durable[b] and g in sent[b]:
                newer += 1
                continue
            lost += 1
            if lost <= 10:
                print(
                    "LOST block %d: holds generation %d, durable was %d (base %d)"
                    % (b, g, durable[b], base[b])
                )
    h.flush()
    with open(state + ".tmp", "w") as f:
        f.write(" ".join(map(str, got)) + "\n")
    os.rename(state + ".tmp", state)
    claimed = sum(1 for b in range(nblocks) if durable[b] != base[b])
    print(
        "blocks %d durable-claims %d blocks-claimed %d newer %d voided %d lost %d corrupt %d"
        % (nblocks, claims, claimed, newer, voided, lost, corrupt)
    )
    return 1 if lost or corrupt else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
    if len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4]))
    print(__doc__)
    sys.exit(2)
