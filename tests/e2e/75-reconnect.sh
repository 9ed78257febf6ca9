#!/usr/bin/env bash
# The initiator survives target restarts and notices a dead or hung one
# (librblk reconnect and keep-alive, over tcp, through the fio engine):
#
#   1. fio writes 40 MiB at random (crc32c-headed blocks, QD16, rate-limited
#      so it takes seconds) while rblk-target is kill -9'd and restarted on
#      the same port three times; fio must see no error, and a verify-only
#      pass - through the engine and straight from the exported file - must
#      find every block it wrote: no acknowledged write is lost, and every
#      write in flight at a kill was reissued.
#   2. the target is killed and not restarted: with ctrl_loss_tmo=3 fio's
#      I/O fails with ENOTCONN 3 s later and fio exits (no hang).
#   3. the target comes back with a smaller volume: the session fails
#      with a message that says so (a grown one is taken: 32-resize).
#   4. keep-alive: an idle session (keepalive 500 ms) stays up while the
#      target answers, and fails within 3 x 500 ms (+ slack) after the
#      target is SIGSTOPped.
#   5. rblk nbd (2 queues) with fio's nbd engine writing: the target is
#      restarted; fio sees no error and a verify pass reads it all back.
#   6. the same through direct access (a file exported with direct): parts
#      in flight are reissued against the new connection's volume
#      registration; the file holds every acknowledged write.
#   7. librblk's own backlog (16 x the queue depth submitted at once, most
#      waiting in the library for a tag) survives a kill and restart of
#      the target; every write lands and reads back.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires truncate
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE

make_tmpfs_dir # case 6 exports it `direct`: tmpfs, hugetlbfs or DAX
img=$TMPFS_DIR/export.img
truncate -s 64M "$img"
start_target --export "vol0=$img"
port=$RBLK_PORT
tpid=$RBLK_TARGET_PID
url=tcp://127.0.0.1:$port/vol0
nstart=0
tlog=$RBLK_TARGET_LOG # the running target's log

# (re)start the target on the same port with export vol0=$1
restart_target()
{
	nstart=$((nstart + 1))
	tlog=$TEST_DIR/target.r$nstart.log
	start_target_on "$port" "$tlog" --export "vol0=$1${2:+,$2}"
	tpid=$RBLK_TARGET_PID
}

now_ms() { date +%s%3N; }

# wait_login DEPTH PID: up to 30 s for a session of queue depth DEPTH (a fio
# job's own; its size probe logs in at depth 1) in the running target's
# log while PID lives. A kill before it would fail rblk_open, which does
# not retry, instead of testing the reconnect.
wait_login()
{
	_wait_for_line "$tlog" "logged in to export vol0 \(queue 0, depth $1," "$2" 30 ||
		fail "no session of depth $1 logged in"
}

# wait_line WORD FILE PID: up to 10 s for WORD in FILE while PID lives
wait_line()
{
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q "$1" "$2" && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "$1" "$2"
}

# ---- 1. three kill -9 / restart cycles under a write load ------------------
layout=(--rw=randwrite --bsrange=4k-64k --verify=crc32c --iodepth=16
	--size=40M --randseed=7575 --verify_state_save=0)
fio --name=rc "--ioengine=external:$engine" "--uri=$url" "${layout[@]}" \
	--do_verify=0 --rate=4m --reconnect_delay=0.2 --ctrl_loss_tmo=20 \
	--output="$TEST_DIR/w.out" 2>"$TEST_DIR/w.err" &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
wait_login 16 "$fio_pid"
for round in 1 2 3; do
	sleep 1.2
	kill -0 "$fio_pid" 2>/dev/null || { cat "$TEST_DIR/w.out" "$TEST_DIR/w.err"; fail "fio ended before kill $round"; }
	kill -KILL "$tpid"
	wait "$tpid" 2>/dev/null || true
	sleep 0.3
	restart_target "$img"
	# the next kill must meet a live session, not one still backing off
	# from this one (a slow restart on a loaded host): one reconnect each
	for ((i = 0; i < 300; i++)); do
		[ "$(grep -c "reconnected to" "$TEST_DIR/w.err" || true)" -ge "$round" ] && break
		kill -0 "$fio_pid" 2>/dev/null || break
		sleep 0.1
	done
done
rc=0
wait_pid 60 "$fio_pid" || rc=$?
[ $rc -eq 0 ] && grep -q "err= 0" "$TEST_DIR/w.out" ||
	{ cat "$TEST_DIR/w.out" "$TEST_DIR/w.err"; fail "fio write pass across restarts failed (rc $rc)"; }
n=$(grep -c "reconnected to" "$TEST_DIR/w.err" || true)
[ "$n" -ge 3 ] || { cat "$TEST_DIR/w.err"; fail "expected 3 reconnects, saw $n"; }
echo "reconnect times:"
grep -o "after [0-9]* ms ([0-9]* attempts)" "$TEST_DIR/w.err" | sed 's/^/  /'

tmo 60 fio --name=rc "--ioengine=external:$engine" "--uri=$url" \
	"${layout[@]}" --verify_only --output="$TEST_DIR/v.out" ||
	{ cat "$TEST_DIR/v.out"; fail "verify through the engine"; }
grep -q "err= 0" "$TEST_DIR/v.out" || { cat "$TEST_DIR/v.out"; fail "verify through the engine reported errors"; }
tmo 60 fio --name=rc --ioengine=psync --filename="$img" \
	"${layout[@]/--iodepth=16/--iodepth=1}" --verify_only \
	--output="$TEST_DIR/f.out" ||
	{ cat "$TEST_DIR/f.out"; fail "verify of $img"; }
grep -q "err= 0" "$TEST_DIR/f.out" || { cat "$TEST_DIR/f.out"; fail "$img does not hold every acknowledged write"; }
grep -E "READ: bw" "$TEST_DIR/f.out" | head -1
echo "case 1: 40 MiB written across 3 target kills verified"

# ---- 2. the target never comes back: EIO/ENOTCONN after ctrl_loss_tmo ------
fio --name=loss "--ioengine=external:$engine" "--uri=$url" --rw=randwrite \
	--bs=4k --iodepth=8 --size=16M --rate=1m --reconnect_delay=0.2 \
	--ctrl_loss_tmo=3 --output="$TEST_DIR/l.out" 2>"$TEST_DIR/l.err" &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
wait_login 8 "$fio_pid"
sleep 1
kill -0 "$fio_pid" 2>/dev/null || { cat "$TEST_DIR/l.out" "$TEST_DIR/l.err"; fail "fio (loss) ended early"; }
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
t0=$(now_ms)
rc=0
wait_pid 30 "$fio_pid" || rc=$?
el=$(($(now_ms) - t0))
[ $rc -ne 0 ] || { cat "$TEST_DIR/l.out"; fail "fio succeeded with the target gone"; }
[ $rc -lt 128 ] || fail "fio died of signal $((rc - 128))"
grep -qE "err=(107|5)\b|Transport endpoint is not connected|Input/output error" \
	"$TEST_DIR/l.out" "$TEST_DIR/l.err" ||
	{ cat "$TEST_DIR/l.out" "$TEST_DIR/l.err"; fail "fio did not report ENOTCONN/EIO"; }
grep -q "ctrl-loss-timeout" "$TEST_DIR/l.err" || { cat "$TEST_DIR/l.err"; fail "no ctrl-loss-timeout message"; }
[ "$el" -ge 2900 ] && [ "$el" -le 8000 ] || fail "I/O failed $el ms after the kill, expected ~3000"
echo "case 2: I/O failed ${el} ms after the target died (ctrl_loss_tmo=3)"

# ---- 3. the target comes back with another volume: a clear error ------------
# one uuid on both files, so the id matches and the geometry check speaks
# (without it the ids differ: "is another volume after the reconnect")
restart_target "$img" uuid=72656363-6f6e-4e65-8374-000000000075
fio --name=geo "--ioengine=external:$engine" "--uri=$url" --rw=randwrite \
	--bs=4k --iodepth=4 --size=16M --rate=1m --reconnect_delay=0.2 \
	--ctrl_loss_tmo=20 --output="$TEST_DIR/g.out" 2>"$TEST_DIR/g.err" &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
wait_login 4 "$fio_pid"
sleep 1
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
truncate -s 32M "$TEST_DIR/small.img"
restart_target "$TEST_DIR/small.img" uuid=72656363-6f6e-4e65-8374-000000000075
rc=0
wait_pid 20 "$fio_pid" || rc=$?
[ $rc -ne 0 ] || fail "fio succeeded against a volume that changed size"
grep -q "shrank across the reconnect from 67108864 to 33554432 bytes" "$TEST_DIR/g.err" ||
	{ cat "$TEST_DIR/g.err"; fail "no clear message about the changed volume"; }
echo "case 3: $(grep -o "shrank across the reconnect from [0-9]* to [0-9]*" "$TEST_DIR/g.err" | head -1) ... refused"

# ---- 4. keep-alive finds a hung (SIGSTOPped) target --------------------------
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
restart_target "$img"
"$RBLK_BUILD/tests/rblk_libtest" idle "$url" 500 >"$TEST_DIR/ka.out" 2>"$TEST_DIR/ka.err" &
ka_pid=$!
cleanup_fn _kill_quiet "$ka_pid"
wait_line alive "$TEST_DIR/ka.out" "$ka_pid" || { cat "$TEST_DIR/ka.out" "$TEST_DIR/ka.err"; fail "idle session did not stay up for 2 s"; }
kill -STOP "$tpid"
cleanup_fn _kill_quiet -CONT "$tpid"
t0=$(now_ms)
rc=0
wait_pid 10 "$ka_pid" || rc=$?
el=$(($(now_ms) - t0))
kill -CONT "$tpid"
[ $rc -eq 0 ] && grep -q lost "$TEST_DIR/ka.out" ||
	{ cat "$TEST_DIR/ka.out" "$TEST_DIR/ka.err"; fail "keep-alive test failed (rc $rc)"; }
grep -q "no answer to KEEPALIVE within 500 ms" "$TEST_DIR/ka.err" ||
	{ cat "$TEST_DIR/ka.err"; fail "the loss was not put down to keep-alive"; }
[ "$el" -le 3500 ] || fail "a hung target was noticed after $el ms (keepalive 500 ms: at most 1500 + slack)"
echo "case 4: SIGSTOPped target noticed after ${el} ms (keepalive 500 ms)"

# ---- 5. rblk nbd: fio's nbd engine writes while the target restarts --------
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
restart_target "$img"
start_nbd "$url" "$TEST_DIR/nbd.sock" --queues 2 --reconnect-delay 0.2
nlayout=(--ioengine=nbd "--uri=$NBD_URI" --rw=randwrite --bsrange=4k-64k
	--verify=crc32c --iodepth=8 --size=8M --offset=32M --randseed=7676
	--verify_state_save=0)
fio --name=nbd "${nlayout[@]}" --do_verify=0 --rate=2m \
	--output="$TEST_DIR/n.out" 2>"$TEST_DIR/n.err" &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
sleep 1.5
kill -0 "$fio_pid" 2>/dev/null || { cat "$TEST_DIR/n.out"; fail "fio (nbd) ended before the kill"; }
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
sleep 0.3
restart_target "$img"
rc=0
wait_pid 60 "$fio_pid" || rc=$?
[ $rc -eq 0 ] && grep -q "err= 0" "$TEST_DIR/n.out" ||
	{ cat "$TEST_DIR/n.out" "$TEST_DIR/n.err" "$RBLK_NBD_LOG"; fail "fio through rblk nbd across a restart failed"; }
grep -q "reconnected to" "$RBLK_NBD_LOG" || { cat "$RBLK_NBD_LOG"; fail "rblk nbd did not reconnect"; }
tmo 60 fio --name=nbd "${nlayout[@]}" --verify_only --output="$TEST_DIR/nv.out" ||
	{ cat "$TEST_DIR/nv.out"; fail "verify through rblk nbd"; }
grep -q "err= 0" "$TEST_DIR/nv.out" || { cat "$TEST_DIR/nv.out"; fail "verify through rblk nbd reported errors"; }
echo "case 5: 8 MiB through rblk nbd across a target restart verified"

# ---- 6. direct access: parts in flight are reissued against the new --------
# connection's volume registration (a file exported with direct)
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
restart_target "$img,direct"
dlayout=(--rw=randwrite --bsrange=4k-64k --verify=crc32c --iodepth=16
	--size=8M --offset=48M --randseed=7777 --verify_state_save=0)
fio --name=dr "--ioengine=external:$engine" "--uri=$url" "${dlayout[@]}" \
	--direct_access=on --do_verify=0 --rate=2m --reconnect_delay=0.2 \
	--ctrl_loss_tmo=20 --output="$TEST_DIR/d.out" 2>"$TEST_DIR/d.err" &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
wait_login 16 "$fio_pid"
sleep 1.5
kill -0 "$fio_pid" 2>/dev/null || { cat "$TEST_DIR/d.out" "$TEST_DIR/d.err"; fail "fio (direct) ended before the kill"; }
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
sleep 0.3
restart_target "$img,direct"
rc=0
wait_pid 60 "$fio_pid" || rc=$?
[ $rc -eq 0 ] && grep -q "err= 0" "$TEST_DIR/d.out" ||
	{ cat "$TEST_DIR/d.out" "$TEST_DIR/d.err"; fail "fio (direct access) across a restart failed (rc $rc)"; }
grep -q "reconnected to" "$TEST_DIR/d.err" || { cat "$TEST_DIR/d.err"; fail "direct session did not reconnect"; }
tmo 60 fio --name=dr --ioengine=psync --filename="$img" \
	"${dlayout[@]/--iodepth=16/--iodepth=1}" --verify_only \
	--output="$TEST_DIR/dv.out" ||
	{ cat "$TEST_DIR/dv.out"; fail "verify of $img after direct writes"; }
grep -q "err= 0" "$TEST_DIR/dv.out" || { cat "$TEST_DIR/dv.out"; fail "$img does not hold every acknowledged direct write"; }
echo "case 6: 8 MiB written by direct access across a target kill verified in the file"

# ---- 7. librblk's backlog survives a restart: 16 x QD writes queued at once
# (QD 4 on the wire, 60 waiting in the library), the target killed and
# restarted before any is reaped; all complete, then read back and compared
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
restart_target "$img"
gate=$TEST_DIR/backlog.gate
"$RBLK_BUILD/tests/rblk_libtest" backlog "$url" "$gate" >"$TEST_DIR/bl.out" 2>"$TEST_DIR/bl.err" &
bl_pid=$!
cleanup_fn _kill_quiet "$bl_pid"
wait_line queued "$TEST_DIR/bl.out" "$bl_pid" || { cat "$TEST_DIR/bl.out" "$TEST_DIR/bl.err"; fail "backlog test did not queue its writes"; }
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
restart_target "$img"
touch "$gate"
rc=0
wait_pid 60 "$bl_pid" || rc=$?
[ $rc -eq 0 ] || { cat "$TEST_DIR/bl.out" "$TEST_DIR/bl.err"; fail "backlog across a restart failed (rc $rc)"; }
grep -q "reconnected to" "$TEST_DIR/bl.err" || { cat "$TEST_DIR/bl.err"; fail "the backlog session did not reconnect"; }
echo "case 7: $(tail -1 "$TEST_DIR/bl.out")"
echo "PASS: $TEST_NAME"
