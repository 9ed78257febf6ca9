#!/usr/bin/env bash
# Live resize and `rblk nbd` (issue 29 point 1): the server's session is
# idle when `ctl resize-export vol0 128M` grows the 64 MiB export; the next
# NBD client is told 128 MiB (the server asks the target on that client's
# queue) and writes and reads past the old end; after a target restart the
# server's session carries on at 128 MiB (044a766 refused the reconnect:
# "changed across the reconnect") and the data is there.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
requires truncate
requires_nbdsh

img=$TEST_DIR/vol.img
truncate -s 64M "$img"
start_target --export "vol0=$img"
port=$RBLK_PORT
sock=$RBLK_CTL_SOCKET
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$sock" "$@"; }
start_nbd "$RBLK_TARGET_URL/vol0" "$TEST_DIR/nbd.sock" --queues 2 \
	--reconnect-delay 0.1
size() { tmo 30 nbdsh -u "$NBD_URI" -c 'print(h.get_size())'; }

[ "$(size)" = $((64 << 20)) ] || fail "the first client was told $(size) bytes"
ctl resize-export vol0 128M >/dev/null
got=$(size)
[ "$got" = $((128 << 20)) ] || fail "a client after the resize was told $got bytes, not 128 MiB"
echo "new client after the resize: $got bytes"
tmo 60 env TEST_DIR="$TEST_DIR" nbdsh -u "$NBD_URI" -c '
import os
d = os.urandom(1 << 20)
h.pwrite(d, 100 << 20)
h.pwrite(d, (128 << 20) - len(d))
assert h.pread(len(d), 100 << 20) == d
open(os.environ["TEST_DIR"] + "/pattern", "wb").write(d)
' || fail "I/O past the old end through rblk nbd"
cmp -n $((1 << 20)) "$TEST_DIR/pattern" <(dd if="$img" bs=1M skip=100 count=1 status=none) ||
	fail "the file does not hold what the client wrote at 100 MiB"

# the target restarts: the server's session reconnects to the 128 MiB volume
kill -KILL "$RBLK_TARGET_PID"
wait "$RBLK_TARGET_PID" 2>/dev/null || true
start_target_on "$port" "$TEST_DIR/target.r1.log" --export "vol0=$img" \
	--ctl-socket "$sock"
got=$(size)
[ "$got" = $((128 << 20)) ] || fail "after the restart a client was told $got bytes"
tmo 60 env TEST_DIR="$TEST_DIR" nbdsh -u "$NBD_URI" -c '
import os
d = open(os.environ["TEST_DIR"] + "/pattern", "rb").read()
assert h.pread(len(d), 100 << 20) == d
assert h.pread(len(d), (128 << 20) - len(d)) == d
' || { cat "$RBLK_NBD_LOG"; fail "reads after the restart"; }
grep -q "changed across the reconnect\|shrank across" "$RBLK_NBD_LOG" &&
	fail "the session refused the restarted target: $(grep across "$RBLK_NBD_LOG")"
kill -0 "$RBLK_NBD_PID" || fail "rblk nbd died"
echo "after a target restart: 128 MiB, data read back"
echo "resize nbd OK"
