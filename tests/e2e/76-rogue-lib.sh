#!/usr/bin/env bash
# librblk trusts no target (issue 31): against tests/e2e/rblk_rogue.py, a
# target that logs in correctly and then misbehaves, one 64 KiB I/O each
# (rblk_libtest rogue):
#  - silent on I/O (keep-alives answered): the READ fails with ETIMEDOUT
#    within io-timeout x attempts + the reconnect delay + slack, the log
#    names the command and the timeout, the counters show the timeouts;
#  - breaks every connection right after login (a READ answered with a
#    GRANT): reconnects back off (a handful of connections, not
#    thousands), the READ fails with ENOTCONN once the ctrl-loss timeout
#    has passed (it runs across the short-lived connections), the log
#    stays short; with a retry limit and no loss timeout, EIO after
#    io_retries + 1 connections;
#  - a push READ answered without its data, or with the data aimed
#    elsewhere: EIO, never success (tcp: a window per command that
#    counts what arrived);
#  - a WRITE acknowledged with 0 bytes, or before its data was sent: EIO,
#    never success;
#  - a volume of 0 or 2^63 bytes: the open fails with EPROTO.
# The control (a well-behaved rogue) reads its pattern back and writes.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$(dirname "$0")/rogue-functions.bash"
requires_built
requires python3
t=$RBLK_BUILD/tests/rblk_libtest
[ -x "$t" ] || fail "$t missing: run make check"

# lib MODE OP TO RETRIES LOSS DELAY: run one I/O; OUT holds its line, ERR
# the library's log
lib()
{
	start_rogue "$1"
	ERR=$TEST_DIR/lib.$1.$2.err
	OUT=$(tmo 60 "$t" rogue "$ROGUE_URL" "$2" "$3" "$4" "$5" "$6" 2>"$ERR")
	stop_pid "$ROGUE_PID"
	echo "$1 $2: $OUT ($(rogue_conns) connections, $(wc -l <"$ERR") log lines)"
}

lib good read 2000 1 10 200
[ "$(field result "$OUT")" = 0 ] && [ "$(field data "$OUT")" = ok ] ||
	fail "control read: $OUT"
lib good write 2000 1 10 200
[ "$(field result "$OUT")" = 0 ] || fail "control write: $OUT"

# 1: silent target. 2 attempts of 1 s, the second after a 500 ms delay.
lib silent read 1000 1 30 500
[ "$(field result "$OUT")" = ETIMEDOUT ] || fail "silent target: $OUT"
ms=$(field ms "$OUT")
[ "$ms" -ge 2000 ] && [ "$ms" -le 6000 ] ||
	fail "silent target: failed after $ms ms, want 2000..6000"
[ "$(field timeouts "$OUT")" -ge 2 ] || fail "silent target: counters: $OUT"
grep -q "READ of 65536 bytes at 65536 (tag 0) unanswered after 1000 ms (io-timeout)" \
	"$ERR" || fail "silent target: the log does not name the command: $(cat "$ERR")"

# 2: every connection broken after login. ctrl-loss 6 s, delay 1 s.
lib break read 30000 -1 6 1000
[ "$(field result "$OUT")" = ENOTCONN ] || fail "breaking target: $OUT"
ms=$(field ms "$OUT")
[ "$ms" -ge 6000 ] && [ "$ms" -le 9000 ] ||
	fail "breaking target: failed after $ms ms, want 6000..9000"
# attempts at 0, 0, 1, 3 s (the delay doubles): never more than 6
n=$(rogue_conns)
[ "$n" -ge 3 ] && [ "$n" -le 6 ] || fail "breaking target: $n connections in 6 s"
n=$(grep -c "reconnect" "$ERR" || true)
[ "$n" -le 6 ] || fail "breaking target: $n reconnect lines: $(cat "$ERR")"
# failures counted per command: no loss timeout, 2 retries
lib break read 30000 2 -1 200
[ "$(field result "$OUT")" = EIO ] || fail "breaking target, retries: $OUT"
[ "$(rogue_conns)" -eq 3 ] || fail "breaking target: $(rogue_conns) connections for 3 attempts"

# 3: push READ answered without its data, or with it in another buffer
# (the previous READ's; the first READ's just past its own): never
# success, and the buffer's neighbour is untouched
for m in push-nodata push-wrongtag; do
	lib "$m" read 5000 1 10 200
	[ "$(field result "$OUT")" = EIO ] || fail "$m: $OUT"
done

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
echo "librblk against rogue targets OK"
