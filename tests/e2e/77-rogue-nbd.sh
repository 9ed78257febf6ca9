#!/usr/bin/env bash
# rblk nbd trusts no target (issue 31): nbdcopy through `rblk nbd` from
# tests/e2e/rblk_rogue.py, a target that logs in correctly and then
# misbehaves:
#  - control: a well-behaved rogue; nbdcopy's copy is its pattern;
#  - silent on I/O: nbdcopy fails (EIO/ETIMEDOUT from rblk nbd) within
#    io-timeout x attempts + delays + slack, and rblk nbd's log names the
#    command and the timeout;
#  - breaks every connection after login: nbdcopy fails once the
#    ctrl-loss timeout has passed, after a handful of connections, and
#    rblk nbd's log stays short;
#  - push READs answered without data, or with data in another
#    command's buffer: nbdcopy fails instead of copying wrong bytes;
#  - acknowledges WRITEs with 0 bytes: copying into it fails.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$(dirname "$0")/rogue-functions.bash"
requires_built
requires python3 nbdcopy

expected=$TEST_DIR/expected.img
python3 -c '
import sys
with open(sys.argv[1], "wb") as f:
    for b in range(1024):
        base = (b * 7) & 0xff
        f.write(bytes(((base + j) & 0xff) for j in range(256)) * 16)
' "$expected"

# nbd MODE ARGS...: rblk nbd in front of a rogue in MODE
nbd()
{
	local m=$1
	shift
	start_rogue "$m"
	start_nbd "$ROGUE_URL" "$TEST_DIR/nbd.$m.sock" --queues 1 "$@"
}

nbd good
tmo 60 nbdcopy -C 1 "$NBD_URI" "$TEST_DIR/copy.img"
cmp "$expected" "$TEST_DIR/copy.img" || fail "control: copy differs"
stop_pid "$RBLK_NBD_PID"
stop_pid "$ROGUE_PID"

# 1: silent. 2 attempts of 1 s each, 200 ms apart.
nbd silent --io-timeout 1 --io-retries 1 --reconnect-delay 0.2
start=$(date +%s%N)
if tmo 60 nbdcopy -C 1 "$NBD_URI" "$TEST_DIR/copy.img"; then
	fail "silent target: nbdcopy succeeded"
fi
ms=$((($(date +%s%N) - start) / 1000000))
echo "silent target: nbdcopy failed after $ms ms"
[ "$ms" -le 8000 ] || fail "silent target: nbdcopy took $ms ms, want <= 8000"
grep -q "unanswered after 1000 ms (io-timeout)" "$RBLK_NBD_LOG" ||
	fail "silent target: rblk nbd's log does not name the timeout: $(cat "$RBLK_NBD_LOG")"
stop_pid "$RBLK_NBD_PID"
stop_pid "$ROGUE_PID"

# 2: every connection broken after login; ctrl-loss 4 s, delay 1 s
nbd break --ctrl-loss-timeout 4 --reconnect-delay 1 --io-retries -1
start=$(date +%s%N)
if tmo 60 nbdcopy -C 1 "$NBD_URI" "$TEST_DIR/copy.img"; then
	fail "breaking target: nbdcopy succeeded"
fi
ms=$((($(date +%s%N) - start) / 1000000))
n=$(rogue_conns)
lines=$(grep -c "reconnect" "$RBLK_NBD_LOG" || true)
echo "breaking target: nbdcopy failed after $ms ms, $n connections, $lines log lines"
[ "$ms" -ge 3000 ] && [ "$ms" -le 9000 ] ||
	fail "breaking target: nbdcopy failed after $ms ms, want 3000..9000"
[ "$n" -le 7 ] || fail "breaking target: $n connections in $ms ms"
[ "$lines" -le 8 ] || fail "breaking target: $lines reconnect lines: $(cat "$RBLK_NBD_LOG")"
stop_pid "$RBLK_NBD_PID"
stop_pid "$ROGUE_PID"

# 3: push READs answered without data, or with the data in the buffer of
# the READ before: nbdcopy must not succeed (on 044a766 it exits 0 with
# wrong bytes)
for m in push-nodata push-wrongtag; do
	nbd "$m" --io-retries 1
	if tmo 60 nbdcopy -C 1 "$NBD_URI" "$TEST_DIR/copy.img"; then
		cmp -s "$expected" "$TEST_DIR/copy.img" &&
			fail "$m: the copy is right?"
		fail "$m: nbdcopy exited 0 with wrong data"
	fi
	stop_pid "$RBLK_NBD_PID"
	stop_pid "$ROGUE_PID"
done

# 4: WRITEs acknowledged with no bytes
nbd write-zero --io-retries 1
head -c 1M /dev/urandom >"$TEST_DIR/src.img"
if tmo 60 nbdcopy -C 1 "$TEST_DIR/src.img" "$NBD_URI"; then
	fail "write-zero target: nbdcopy into it succeeded"
fi
stop_pid "$RBLK_NBD_PID"
stop_pid "$ROGUE_PID"
echo "rblk nbd against rogue targets OK"
