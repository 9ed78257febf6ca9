#!/usr/bin/env bash
# Live resize through librblk (issue 29 point 1; docs/PROTOCOL.md "Live
# resize"), over tcp, driven by `rblk_libtest resize`:
#   - `ctl resize-export vol0 96M` grows the 64 MiB file while a session of
#     two idle queues runs: the session learns the size without a reconnect
#     (keep-alive answers carry it), on_resize runs once, I/O across the
#     old end and up to the new one is written, read back and compared,
#     and the file holds it;
#   - bad sizes and a shrink without --force are refused, the file kept;
#   - the target is killed and restarted on the file grown to 128 MiB: the
#     queues reconnect and take the larger volume (044a766 refused it:
#     "changed across the reconnect"), the data written before is there;
#   - `resize-export vol0 64M --force`: the session is told and says so,
#     keeps 128 MiB (never shrinks under its user), I/O past 64 MiB fails
#     with ERANGE;
#   - a RAM export grows the same way (direct access below the old end,
#     commands above it).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
requires truncate cmp
t=$RBLK_BUILD/tests/rblk_libtest

img=$TEST_DIR/vol.img
truncate -s 64M "$img"
start_target --export "vol0=$img"
port=$RBLK_PORT
url=tcp://127.0.0.1:$port/vol0
sock=$RBLK_CTL_SOCKET
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$sock" "$@"; }
gate=$TEST_DIR/gate
out=$TEST_DIR/lib.out
err=$TEST_DIR/lib.err

"$t" resize "$url" "$gate" >"$out" 2>"$err" &
lib=$!
cleanup_fn stop_pid "$lib"
# wait_out LINE: up to 30 s for LINE from rblk_libtest while it runs
wait_out()
{
	_wait_for_line "$out" "$1" "$lib" 30 ||
		{ cat "$out" "$err"; fail "rblk_libtest did not reach '$1'"; }
}

wait_out "^phase1 size=67108864"
for bad in 0 12345 1x; do
	if ctl resize-export vol0 "$bad" 2>"$TEST_DIR/bad.err"; then
		fail "resize-export vol0 $bad was accepted"
	fi
done
grep -q "multiple of export vol0's block size" "$TEST_DIR/bad.err" ||
	grep -q "bad size" "$TEST_DIR/bad.err" || fail "bad size: $(cat "$TEST_DIR/bad.err")"
if ctl resize-export vol0 32M 2>"$TEST_DIR/shrink.err"; then
	fail "a shrink without --force was accepted"
fi
grep -q "give --force" "$TEST_DIR/shrink.err" || fail "shrink: $(cat "$TEST_DIR/shrink.err")"
[ "$(stat -c %s "$img")" = $((64 << 20)) ] || fail "a refused resize changed the file"

ctl resize-export vol0 96M -o json >"$TEST_DIR/resize.json"
python3 - "$TEST_DIR/resize.json" <<'PY' || fail "resize-export answer: $(cat "$TEST_DIR/resize.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j == {"resized": "vol0", "old_size": 64 << 20, "size": 96 << 20,
             "sessions": 2}, j
PY
[ "$(stat -c %s "$img")" = $((96 << 20)) ] || fail "the file is $(stat -c %s "$img") bytes, not 96 MiB"
ctl list-exports -o json | grep -q "\"size\": *$((96 << 20))" || fail "list-exports does not show 96 MiB"
touch "$gate.1"
wait_out "^phase2 ok"
echo "grown live: $(grep -o 'learned_ms=[0-9]*' "$out") (keep-alive 1 s)"
grep -q "resized from 67108864 to 100663296 bytes (2 live session(s) are told)" \
	"$RBLK_TARGET_LOG" || fail "the target did not log the resize"

# the target restarts on the file grown to 128 MiB
kill -KILL "$RBLK_TARGET_PID"
wait "$RBLK_TARGET_PID" 2>/dev/null || true
truncate -s 128M "$img"
start_target_on "$port" "$TEST_DIR/target.r1.log" --export "vol0=$img" \
	--ctl-socket "$sock"
touch "$gate.2"
wait_out "^phase3 ok"
grep -q "^on_resize 100663296 -> 134217728" "$out" ||
	{ cat "$out" "$err"; fail "the reconnect did not take the grown volume"; }
echo "restart on a grown file: taken at login"

ctl resize-export vol0 64M --force >"$TEST_DIR/force.out"
grep -q "keep their size" "$TEST_DIR/force.out" || fail "forced shrink: $(cat "$TEST_DIR/force.out")"
touch "$gate.3"
wait_out "^phase4 ok"
wait_pid 30 "$lib" || { cat "$out" "$err"; fail "rblk_libtest resize failed"; }
grep -q "shrank from 134217728 to 67108864 bytes (told by the target)" "$err" ||
	{ cat "$err"; fail "the session did not report the shrink"; }
grep -q "shrunk from 134217728 to 67108864 bytes under 2 live session(s)" \
	"$TEST_DIR/target.r1.log" || fail "the target did not warn of the shrink"
echo "forced shrink: reported on both sides, the session keeps 128 MiB"

stop_pid "$RBLK_TARGET_PID"

# a RAM export (direct access) grows too
start_target --export "ram0=ram:64M"
url=tcp://127.0.0.1:$RBLK_PORT/ram0
sock=$RBLK_CTL_SOCKET
rm -f "$gate".*
"$t" resize "$url" "$gate" live >"$out" 2>"$err" &
lib=$!
cleanup_fn stop_pid "$lib"
wait_out "^phase1 size=67108864 direct"
if ctl resize-export ram0 32M --force 2>"$TEST_DIR/ram.err"; then
	fail "a RAM export shrank"
fi
grep -q "does not shrink" "$TEST_DIR/ram.err" || fail "ram shrink: $(cat "$TEST_DIR/ram.err")"
if ctl resize-export ram0 1G 2>"$TEST_DIR/ram.err"; then
	fail "a RAM export grew past its reservation"
fi
grep -q "grows in multiples of 4 KiB up to 268435456 bytes" "$TEST_DIR/ram.err" ||
	fail "ram too large: $(cat "$TEST_DIR/ram.err")"
ctl resize-export ram0 96M >/dev/null
touch "$gate.1"
wait_out "^phase2 ok"
wait_pid 30 "$lib" || { cat "$out" "$err"; fail "rblk_libtest resize (ram) failed"; }
echo "ram export grown live: $(grep -o 'learned_ms=[0-9]*' "$out")"
echo "resize OK"
