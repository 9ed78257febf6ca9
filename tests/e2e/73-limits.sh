#!/usr/bin/env bash
# Connection and session limits and the idle timeout (issue 15 point 6,
# docs/RELIABILITY.md): with --max-sessions-per-host 3, a fourth session
# from the same address is refused with a clear error while three verify
# data, and logs in once they leave; with --max-pending-per-host 4, four
# connections that never log in make a fifth wait (refused BUSY) until they
# go; with --idle-timeout 2 a session that sends nothing is dropped and the
# target says why. fds come back afterwards.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
requires python3
MANY=$RBLK_BUILD/tests/rblk_manysess
[ -x "$MANY" ] || fail "test helper missing: make $MANY"

start_target --max-sessions-per-host 3 --max-pending-per-host 4 \
	--idle-timeout 2 --export v=ram:16M
url=tcp://127.0.0.1:$RBLK_PORT/v
fds0=$(find "/proc/$RBLK_TARGET_PID/fd" -mindepth 1 | wc -l)

# --- sessions: three hold and verify, the fourth is refused ---------------
"$MANY" "$url" 3 2 4096 2 1500 >"$TEST_DIR/m.out" 2>&1 &
mp=$!
cleanup_fn stop_pid "$mp"
for ((i = 0; i < 200; i++)); do
	grep -q "^open" "$TEST_DIR/m.out" && break
	sleep 0.05
done
out=$(tmo 10 "$RBLK_BIN" info "$url" 2>&1) && fail "a fourth session logged in: $out"
echo "fourth session: $out"
grep -q "connection or session limit reached" <<<"$out" ||
	fail "the refusal does not say why: $out"
wait "$mp" || { cat "$TEST_DIR/m.out"; fail "the three sessions did not verify"; }
grep -q "^verified 0: 3 sessions" "$TEST_DIR/m.out" || fail "no verified round"
tmo 10 "$RBLK_BIN" info "$url" >/dev/null || fail "no login after the sessions left"
grep -q "session limit: 3 sessions, 3 from 127.0.0.1" "$RBLK_TARGET_LOG" ||
	fail "the target did not log the session limit"

# --- pending: four silent connections fill the per-host allowance ---------
python3 - "$RBLK_PORT" "$RBLK_BIN" "$url" <<'PY' || fail "pending limit"
import socket, struct, subprocess, sys, time
port, rblk, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cm = struct.pack("<IBBHII", 0x4B4C4252, 2, 0, 4, 0, 0)
frame = struct.pack("<BBHIQQII", 1, 0, 0x5854, len(cm), 0, 0, 0, 1) + cm
socks = []
for _ in range(4):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(frame)
    socks.append(s)
time.sleep(0.5)
r = subprocess.run([rblk, "info", url], capture_output=True, text=True)
print("fifth connection:", (r.stdout + r.stderr).strip())
if r.returncode == 0 or "limit" not in r.stderr:
    sys.exit("a fifth pending connection was let in")
for s in socks:
    s.close()
time.sleep(0.5)
r = subprocess.run([rblk, "info", url], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("no login after the silent connections left: " + r.stderr)
print("login works again once they left")
PY

# --- idle timeout ----------------------------------------------------------
out=$(tmo 30 "$MANY" "$url" 1 1 4096 1 3500 2>&1) && fail "an idle session survived: $out"
echo "idle session: $(tail -1 <<<"$out")"
grep -q "idle for 2 s (idle_timeout); disconnecting" "$RBLK_TARGET_LOG" ||
	fail "the target did not say it dropped an idle session"

for ((i = 0; i < 50; i++)); do
	[ "$(find "/proc/$RBLK_TARGET_PID/fd" -mindepth 1 | wc -l)" -le $((fds0 + 2)) ] && break
	sleep 0.1
done
fds1=$(find "/proc/$RBLK_TARGET_PID/fd" -mindepth 1 | wc -l)
[ "$fds1" -le $((fds0 + 2)) ] || fail "target fds $fds0 -> $fds1"
echo "PASS: $TEST_NAME"
