#!/bin/bash
# librblk and a mapped device trust no target over rxe (issue 31; the tcp
# forms are tests/e2e/76-78). The rogue is build/tests/rblk-target-fault,
# rblk-target built with fault injection (RBLK_FAULT=MODE, the modes of
# tests/e2e/rblk_rogue.py), serving a file that holds the rogue's pattern.
# One 64 KiB I/O each (rblk_libtest rogue):
#  - silent on I/O (keep-alives answered): the READ fails with ETIMEDOUT
#    within io-timeout x attempts + the delay + slack, the log names the
#    command and the timeout; a READ of the mapped /dev/ublkbN fails
#    (ETIMEDOUT) within the same bound and the daemon's log names it;
#  - breaks every connection right after login: reconnects back off (a
#    handful of logins in 6 s, not thousands), the READ fails with
#    ENOTCONN once the ctrl-loss timeout passed; with a retry limit and
#    no loss timeout, EIO after io_retries + 1 connections;
#  - push READ answered without its data (one READ in flight, so no other
#    window to aim at either): EIO, never success (the data must come as
#    a WRITE WITH IMMEDIATE naming its window, RBLK_F_PUSH_IMM);
#  - a WRITE acknowledged with 0 bytes, or before its data: EIO;
#  - a volume of 0 or 2^63 bytes: the open fails with EPROTO.
# The controls (no fault) read the pattern back, pull and push, and write.
# INIT_BUILD (default: the build under test) picks the initiator's build
# (rblk_libtest, rblk), e.g. one without the fix to show it fails here.
# vm-timeout: 300
set -euo pipefail
source tests/vm/lib.sh
need_rdma
requires python3 dd
t=${INIT_BUILD:-$RBLK_BUILD}/tests/rblk_libtest
RBLK_BIN=${INIT_BUILD:-$RBLK_BUILD}/rblk
rogue=$RBLK_BUILD/tests/rblk-target-fault
need_file "$t" "$rogue" "$RBLK_BIN"

# the rogue's pattern: byte o is ((o >> 12) * 7 + (o & 0xff)) & 0xff
img=$TEST_DIR/vol.img
python3 - "$img" <<'EOF'
import sys
with open(sys.argv[1], "wb") as f:
    for b in range(1024):
        f.write(bytes(((b * 7 + j) & 0xff) for j in range(256)) * 16)
EOF

# one fault target for every case: RBLK_FAULT=@FILE, FILE names the mode
# (a small pool, quicker to register in the guest)
mode=$TEST_DIR/fault
echo good >"$mode"
export RBLK_FAULT=@$mode
RBLK_TARGET_BIN=$rogue start_rdma_target --workers 1 --slot-pool 4M \
	--session-pool-share 100 --export "vol0=$img"
unset RBLK_FAULT
logins() { grep -c "logged in to export" "$TARGET_LOG" || true; }

# lib MODE OP TO RETRIES LOSS DELAY: one I/O with the target in MODE; OUT
# its line, ERR the log, LOGINS the sessions it made
lib()
{
	local l0
	l0=$(logins)
	echo "$1" >"$mode"
	ERR=$TEST_DIR/lib.$1.$2.err
	OUT=$(tmo 60 "$t" rogue "$URL" "$2" "$3" "$4" "$5" "$6" 2>"$ERR")
	LOGINS=$(($(logins) - l0))
	say "$1 $2: $OUT ($LOGINS logins, $(wc -l <"$ERR") log lines)"
}

field()
{
	sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"
}

for op in read pushread write; do
	lib good "$op" 5000 1 10 200
	[ "$(field result "$OUT")" = 0 ] || fail "control $op: $OUT"
	[ "$op" = write ] || [ "$(field data "$OUT")" = ok ] ||
		fail "control $op: data $OUT"
done

# 1: silent target. 2 attempts of 1 s, the second after a 500 ms delay.
lib silent read 1000 1 30 500
[ "$(field result "$OUT")" = ETIMEDOUT ] || fail "silent target: $OUT"
ms=$(field ms "$OUT")
[ "$ms" -ge 2000 ] && [ "$ms" -le 7000 ] ||
	fail "silent target: failed after $ms ms, want 2000..7000"
grep -q "READ of 65536 bytes at 65536 (tag 0) unanswered after 1000 ms (io-timeout)" \
	"$ERR" || fail "silent target: the log does not name the command: $(cat "$ERR")"

# ... against a mapped device (mapped while the target behaves, so the
# kernel's partition scan is answered): one 4 KiB direct READ
echo good >"$mode"
map_dev "$URL" --ublk --queues 1 --io-timeout 1 --io-retries 1 --reconnect-delay 0.5
echo silent >"$mode"
t0=$(date +%s%N)
if dd if="$DEV" of=/dev/null bs=4k count=1 skip=100 iflag=direct 2>"$TEST_DIR/dd.err"; then
	fail "silent target: a READ of $DEV succeeded"
fi
ms=$((($(date +%s%N) - t0) / 1000000))
say "silent target, $DEV: $(head -n1 "$TEST_DIR/dd.err") after $ms ms"
# ublk hands the command's errno to the block layer: ETIMEDOUT
grep -Eq "Connection timed out|Input/output error" "$TEST_DIR/dd.err" ||
	fail "silent target: dd: $(cat "$TEST_DIR/dd.err")"
[ "$ms" -ge 2000 ] && [ "$ms" -le 8000 ] ||
	fail "silent target: $DEV's READ failed after $ms ms, want 2000..8000"
dlog=$(ls "$RBLK_RUN_DIR"/map-*.log | head -n1)
grep -q "READ of 4096 bytes at 409600 (tag [0-9]*) unanswered after 1000 ms (io-timeout)" "$dlog" ||
	fail "silent target: the daemon's log does not name the command: $(tail -n 20 "$dlog")"
echo good >"$mode"
unmap_ublk

# 2: every connection broken after login. ctrl-loss 6 s, delay 1 s.
lib break read 30000 -1 6 1000
[ "$(field result "$OUT")" = ENOTCONN ] || fail "breaking target: $OUT"
ms=$(field ms "$OUT")
[ "$ms" -ge 6000 ] && [ "$ms" -le 10000 ] ||
	fail "breaking target: failed after $ms ms, want 6000..10000"
[ "$LOGINS" -ge 3 ] && [ "$LOGINS" -le 6 ] ||
	fail "breaking target: $LOGINS logins in 6 s"
n=$(grep -c "reconnect" "$ERR" || true)
[ "$n" -le 6 ] || fail "breaking target: $n reconnect lines: $(cat "$ERR")"
lib break read 30000 2 -1 200
[ "$(field result "$OUT")" = EIO ] || fail "breaking target, retries: $OUT"
[ "$LOGINS" -eq 3 ] || fail "breaking target: $LOGINS logins for 3 attempts"

# 3: a push READ answered without its data
lib push-nodata pushread 5000 1 10 200
[ "$(field result "$OUT")" = EIO ] || fail "push-nodata: $OUT"
grep -q "answered with 0 bytes placed" "$ERR" || fail "push-nodata: log: $(cat "$ERR")"

# 4: WRITE acknowledged with no bytes, or before its data
for m in write-zero write-early; do
	lib "$m" write 5000 1 10 200
	[ "$(field result "$OUT")" = EIO ] || fail "$m: $OUT"
done

# 4: absurd volume sizes
for m in size0 size63; do
	lib "$m" read 5000 1 10 200
	grep -q "^open=EPROTO" <<<"$OUT" || fail "$m: $OUT"
done
say "librblk and ublk against rogue targets over rxe OK"
