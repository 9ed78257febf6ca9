#!/usr/bin/env bash
# The fio engine trusts no target (issue 31), against
# tests/e2e/rblk_rogue.py:
#  - control: a well-behaved rogue serves a whole-volume read;
#  - silent on I/O, io_timeout=1 io_retries=1: the job fails with
#    "Connection timed out" within a few seconds and the engine reports
#    the command timeouts;
#  - silent on I/O with the default 30 s deadline: fio exits within 5 s
#    of SIGTERM although every I/O is stuck;
#  - breaks every connection after login: the job fails once ctrl_loss_tmo
#    has passed, after a handful of connections.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$(dirname "$0")/rogue-functions.bash"
requires_built
requires python3
requires_fio_engine

# start MODE: a rogue in MODE; JOB: a randread fio job of iodepth 8 on it
start()
{
	start_rogue "$1"
	JOB=(fio --name=rogue "--ioengine=external:$RBLK_FIO_ENGINE"
		"--uri=$ROGUE_URL" --rw=randread --bs=4k --iodepth=8 --size=4M)
}

start good
tmo 60 "${JOB[@]}" --rw=read --bs=64k >"$TEST_DIR/fio.good" 2>&1 ||
	fail "control: $(cat "$TEST_DIR/fio.good")"
stop_pid "$ROGUE_PID"

start silent
start=$(date +%s%N)
if tmo 60 "${JOB[@]}" --io_timeout=1 --io_retries=1 --reconnect_delay=0.2 \
	>"$TEST_DIR/fio.silent" 2>&1; then
	fail "silent target: fio succeeded: $(cat "$TEST_DIR/fio.silent")"
fi
ms=$((($(date +%s%N) - start) / 1000000))
echo "silent target: fio failed after $ms ms"
[ "$ms" -le 8000 ] || fail "silent target: fio took $ms ms, want <= 8000"
grep -q "Connection timed out" "$TEST_DIR/fio.silent" ||
	fail "silent target: no ETIMEDOUT: $(cat "$TEST_DIR/fio.silent")"
grep -q "command timeouts" "$TEST_DIR/fio.silent" ||
	fail "silent target: timeouts not reported: $(cat "$TEST_DIR/fio.silent")"

# SIGTERM with every I/O stuck and the deadline far away
"${JOB[@]}" --time_based --runtime=60 >"$TEST_DIR/fio.term" 2>&1 &
fpid=$!
cleanup_fn stop_pid "$fpid"
sleep 2
start=$(date +%s%N)
kill -TERM "$fpid"
for ((i = 0; i < 100; i++)); do
	kill -0 "$fpid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$fpid" 2>/dev/null && fail "fio still runs 10 s after SIGTERM"
ms=$((($(date +%s%N) - start) / 1000000))
echo "silent target: fio exited $ms ms after SIGTERM"
[ "$ms" -le 5000 ] || fail "fio took $ms ms to exit after SIGTERM"
wait "$fpid" || true
stop_pid "$ROGUE_PID"

start break
start=$(date +%s%N)
if tmo 60 "${JOB[@]}" --ctrl_loss_tmo=4 --reconnect_delay=1 --io_retries=-1 \
	>"$TEST_DIR/fio.break" 2>&1; then
	fail "breaking target: fio succeeded: $(cat "$TEST_DIR/fio.break")"
fi
ms=$((($(date +%s%N) - start) / 1000000))
n=$(rogue_conns)
echo "breaking target: fio failed after $ms ms, $n connections"
[ "$ms" -ge 3000 ] && [ "$ms" -le 9000 ] ||
	fail "breaking target: fio failed after $ms ms, want 3000..9000"
[ "$n" -le 7 ] || fail "breaking target: $n connections"
stop_pid "$ROGUE_PID"
echo "fio engine against rogue targets OK"
