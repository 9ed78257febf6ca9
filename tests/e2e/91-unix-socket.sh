#!/usr/bin/env bash
# The socket transport over a unix stream socket on this host
# (unix:///EXPORT?socket=PATH), beside tcp on the same target:
#   - fio's rblk engine writes 4k..64k blocks with crc32c headers over the
#     unix socket and verifies them over tcp, and the other way round, so
#     both listeners serve the same export;
#   - `rblk nbd` connects over the unix socket and fio's nbd engine
#     verifies the same data through it;
#   - the target names the peer by its credentials (ctl sessions);
#   - a second target refuses the path a live target serves, and leaves
#     it alone; a path that is not a socket is refused and kept; a socket
#     file left by a killed target is replaced at the
#     next start; a stopped target removes its socket file.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires truncate
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE

img=$TEST_DIR/export.img
truncate -s 64M "$img"
sock=$TEST_DIR/data.sock
start_target --export "vol0=$img" --listen "unix:///?socket=$sock"
grep -q "listening on unix:///?socket=$sock" "$RBLK_TARGET_LOG" ||
	fail "no unix listener in the target's log"
[ -S "$sock" ] || fail "$sock is not a socket"
uurl="unix:///vol0?socket=$sock"
turl=$RBLK_TARGET_URL/vol0

layout=(--bsrange=4k-64k --verify=crc32c --iodepth=16 --size=32M
	--group_reporting --verify_state_save=0 --randseed=9191)

# fio_ok NAME URL OUT ARGS...: fio through the engine, no error allowed
fio_ok()
{
	local name=$1 url=$2 out=$3
	shift 3
	tmo 60 fio --name="$name" "--ioengine=external:$engine" "--uri=$url" \
		"${layout[@]}" "$@" --output="$out" ||
		{ cat "$out"; fail "fio $name over $url"; }
	grep -q "err= 0" "$out" || { cat "$out"; fail "fio $name over $url reported errors"; }
}

# written over unix, verified over tcp; then the other half the other way
fio_ok unix-write "$uurl" "$TEST_DIR/w1.out" --rw=randwrite --do_verify=0
fio_ok tcp-verify "$turl" "$TEST_DIR/v1.out" --rw=randwrite --verify_only
fio_ok tcp-write "$turl" "$TEST_DIR/w2.out" --rw=randwrite --offset=32M \
	--do_verify=0
fio_ok unix-verify "$uurl" "$TEST_DIR/v2.out" --rw=randwrite --offset=32M \
	--verify_only
fio_ok unix-push "$uurl" "$TEST_DIR/v3.out" --rw=randwrite --offset=32M \
	--verify_only --read_mode=push
echo "fio engine: written and verified across the unix and tcp listeners"

# a session over the unix socket, as the target's control socket shows it
tmo 60 fio --name=hold "--ioengine=external:$engine" "--uri=$uurl" \
	--rw=randread --bs=4k --iodepth=2 --size=32M --time_based \
	--runtime=4 --output="$TEST_DIR/hold.out" &
hold=$!
# (the listing that shows a session is the one checked: fio's main process
# opens a short session of its own to learn the size before the job's,
# and a second listing may fall between the two)
for ((i = 0; i < 100; i++)); do
	tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" list-sessions \
		>"$TEST_DIR/sessions" 2>/dev/null || true
	grep -q "unix pid" "$TEST_DIR/sessions" && break
	sleep 0.05
done
cat "$TEST_DIR/sessions"
grep -q "unix pid [0-9]* uid $(id -u)" "$TEST_DIR/sessions" ||
	fail "the target does not name the unix peer by its credentials"
wait "$hold" || { cat "$TEST_DIR/hold.out"; fail "fio hold"; }

# rblk nbd over the unix socket; fio's nbd engine verifies through it
if fio --enghelp 2>/dev/null | grep -qw nbd; then
	nsock=$TEST_DIR/nbd.sock
	start_nbd "$uurl" "$nsock" --queues 1
	tmo 60 fio --name=unix-write --ioengine=nbd \
		"--uri=nbd+unix:///?socket=$nsock" "${layout[@]}" \
		--rw=randwrite --verify_only --output="$TEST_DIR/nbd.out" ||
		{ cat "$TEST_DIR/nbd.out"; fail "fio nbd verify through rblk nbd over unix"; }
	grep -q "err= 0" "$TEST_DIR/nbd.out" || fail "fio nbd verify reported errors"
	echo "rblk nbd over the unix socket: verified"
else
	echo "fio lacks the nbd engine: rblk nbd part skipped"
fi

# a second target must not take the live socket over
"$RBLK_TARGET_BIN" --listen "unix:///?socket=$sock" --allow-any-host \
	--ctl-socket none --export "vol0=$img" >"$TEST_DIR/second.log" 2>&1 &&
	fail "a second target started on a live unix socket"
grep -q "in use by another process" "$TEST_DIR/second.log" ||
	{ cat "$TEST_DIR/second.log"; fail "no clear error for a live socket"; }
[ -S "$sock" ] || fail "the second target removed the live socket"
fio_ok still "$uurl" "$TEST_DIR/v4.out" --rw=randwrite --verify_only
echo "a live unix socket is refused to a second target, and keeps serving"

# a path that is not a socket is refused and left alone
echo precious >"$TEST_DIR/not-a-socket"
"$RBLK_TARGET_BIN" --listen "unix:///?socket=$TEST_DIR/not-a-socket" \
	--allow-any-host --ctl-socket none --export "vol0=$img" \
	>"$TEST_DIR/notsock.log" 2>&1 && fail "a target listened on a regular file"
grep -q "exists and is not a socket" "$TEST_DIR/notsock.log" ||
	{ cat "$TEST_DIR/notsock.log"; fail "no clear error for a non-socket path"; }
[ "$(cat "$TEST_DIR/not-a-socket")" = precious ] || fail "the file was touched"

# killed: the file stays; the next target replaces it; a stop removes it
kill -9 "$RBLK_TARGET_PID"
wait "$RBLK_TARGET_PID" 2>/dev/null || true
[ -S "$sock" ] || fail "expected a stale socket file after kill -9"
log=$TEST_DIR/third.log
"$RBLK_TARGET_BIN" --listen "unix:///?socket=$sock" --allow-any-host \
	--ctl-socket none --export "vol0=$img" >"$log" 2>&1 &
pid=$!
cleanup_fn stop_pid "$pid"
_wait_for_line "$log" "listening on unix:///\?socket=" "$pid" 10 ||
	{ cat "$log"; fail "the target did not replace a stale socket"; }
grep -q "replacing stale unix socket" "$log" || fail "no note of the stale socket"
fio_ok after-restart "$uurl" "$TEST_DIR/v5.out" --rw=randwrite --verify_only
kill "$pid"
wait "$pid" 2>/dev/null || true
[ -e "$sock" ] && fail "a stopped target left its socket file"
echo "PASS: $TEST_NAME"
