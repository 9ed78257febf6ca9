#!/usr/bin/env bash
# In-capsule WRITE data (docs/PROTOCOL.md, "In-capsule data") through the
# fio engine over tcp, each pass verified through the engine and straight
# from the exported file with fio's psync engine:
#
#   1. default target (auto: 4 KiB granted at depth 16): random writes of
#      4k..16k, so 4k writes carry their data in the capsule and larger
#      ones take the GRANT; verified with inline=off (reads do not care).
#   2. the same layout written with inline=off (every write granted) and
#      verified with inline on.
#   3. a target with --inline-data 0 grants none: a session that asks
#      still writes (all granted) and the LOGIN says inline 0.
#   4. 4k writes only (all inline) while the target is killed and
#      restarted: every unacknowledged inline write is resent on the new
#      connection, and the file holds every block.
#   5. inline writes that keep their receive buffer while they wait: a
#      QoS limit holds them (TREQ_THROTTLE) and a 1 MiB slot pool that
#      large reads beside them keep full makes them wait for a slot
#      (TREQ_SLOT); each buffer goes back once, by whichever path
#      finishes it. Verified, no session lost (the target fails one
#      whose receive is posted twice, or refused: "reposting receive").
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires fio truncate
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE

img=$TEST_DIR/export.img
truncate -s 64M "$img"

# run NAME OUT ARGS...: fio through the engine against $url, no errors
run()
{
	local name=$1 out=$2
	shift 2
	tmo 120 fio --name="$name" "--ioengine=external:$engine" "--uri=$url" \
		--hostname=inline "$@" --output="$out" ||
		{ cat "$out"; fail "fio $name $*"; }
	grep -q "err= 0" "$out" || { cat "$out"; fail "fio $name $* reported errors"; }
}

# file_verify NAME ARGS...: the layout read back from the file itself
file_verify()
{
	local name=$1
	shift
	tmo 120 fio --name="$name" --ioengine=psync --filename="$img" "$@" \
		--iodepth=1 --verify_only --output="$TEST_DIR/$name.file.out" ||
		{ cat "$TEST_DIR/$name.file.out"; fail "verify of $img after $name"; }
	grep -q "err= 0" "$TEST_DIR/$name.file.out" ||
		{ cat "$TEST_DIR/$name.file.out"; fail "$img does not hold what $name wrote"; }
}

layout=(--rw=randwrite --bsrange=4k-16k --verify=crc32c --size=32M
	--verify_state_save=0)

# ---- 1 and 2: inline and granted writes, cross-verified -----------------------
start_target --export "vol0=$img"
url=tcp://127.0.0.1:$RBLK_PORT/vol0
run w1 "$TEST_DIR/1.w.out" "${layout[@]}" --iodepth=16 --randseed=3101 \
	--inline=auto --do_verify=0
grep -q "depth 16, max I/O [0-9]*, inline 4096" "$RBLK_TARGET_LOG" ||
	{ cat "$RBLK_TARGET_LOG"; fail "the target did not grant 4096 in-capsule bytes"; }
run w1 "$TEST_DIR/1.v.out" "${layout[@]}" --iodepth=16 --randseed=3101 \
	--inline=off --verify_only
file_verify w1 "${layout[@]}" --randseed=3101
echo "case 1: inline (4k) and granted (8k, 16k) writes verified"

run w2 "$TEST_DIR/2.w.out" "${layout[@]}" --iodepth=16 --randseed=3102 \
	--offset=32M --inline=off --do_verify=0
grep -q "inline 0" "$RBLK_TARGET_LOG" ||
	fail "inline=off did not log in asking for none"
run w2 "$TEST_DIR/2.v.out" "${layout[@]}" --iodepth=16 --randseed=3102 \
	--offset=32M --inline=auto --verify_only
file_verify w2 "${layout[@]}" --randseed=3102 --offset=32M
stop_pid "$RBLK_TARGET_PID"
echo "case 2: granted writes verified"

# ---- 3: a target that grants none ---------------------------------------------
start_target --inline-data 0 --export "vol0=$img"
url=tcp://127.0.0.1:$RBLK_PORT/vol0
run w3 "$TEST_DIR/3.w.out" "${layout[@]}" --iodepth=16 --randseed=3103 \
	--bs=4k --do_verify=0
grep -q "depth 16, max I/O [0-9]*, inline 0" "$RBLK_TARGET_LOG" ||
	{ cat "$RBLK_TARGET_LOG"; fail "--inline-data 0 still granted in-capsule data"; }
file_verify w3 "${layout[@]}" --randseed=3103 --bs=4k
port=$RBLK_PORT
stop_pid "$RBLK_TARGET_PID"
echo "case 3: --inline-data 0: 4k writes granted and verified"

# ---- 4: inline writes reissued across a target restart -------------------------
tlog=$TEST_DIR/target.r1.log
url=tcp://127.0.0.1:$port/vol0
start_target_on "$port" "$tlog" --export "vol0=$img"
tpid=$RBLK_TARGET_PID
rlayout=(--rw=randwrite --bs=4k --verify=crc32c --size=12M --iodepth=16
	--randseed=3104 --verify_state_save=0)
fio --name=w4 "--ioengine=external:$engine" "--uri=$url" "${rlayout[@]}" \
	--do_verify=0 --rate=3m --reconnect_delay=0.2 --ctrl_loss_tmo=20 \
	--output="$TEST_DIR/4.w.out" 2>"$TEST_DIR/4.w.err" &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
_wait_for_line "$tlog" "depth 16, max I/O [0-9]*, inline 4096" "$fio_pid" 30 ||
	fail "no inline session logged in"
sleep 1.5
kill -KILL "$tpid"
wait "$tpid" 2>/dev/null || true
sleep 0.3
tlog=$TEST_DIR/target.r2.log
start_target_on "$port" "$tlog" --export "vol0=$img"
rc=0
wait_pid 60 "$fio_pid" || rc=$?
[ $rc -eq 0 ] && grep -q "err= 0" "$TEST_DIR/4.w.out" ||
	{ cat "$TEST_DIR/4.w.out" "$TEST_DIR/4.w.err"; fail "inline writes across a restart failed (rc $rc)"; }
grep -q "reconnected to" "$TEST_DIR/4.w.err" ||
	{ cat "$TEST_DIR/4.w.err"; fail "fio never reconnected"; }
grep -q "inline 4096" "$tlog" || fail "the new session was not granted inline data"
file_verify w4 "${rlayout[@]/--iodepth=16/--iodepth=1}"
echo "case 4: 12 MiB of inline 4k writes across a target kill verified"
stop_pid "$RBLK_TARGET_PID"

# ---- 5: inline writes held for QoS and for slots ------------------------------
start_target --workers 1 --slot-pool 1M --export "vol0=$img"
url=tcp://127.0.0.1:$RBLK_PORT/vol0
"$RBLK_TARGET_BIN" ctl -s "$RBLK_CTL_SOCKET" set-qos vol0 iops=1500 >/dev/null ||
	fail "set-qos failed"
hlayout=(--rw=randwrite --bs=4k --verify=crc32c --size=3M --iodepth=16
	--numjobs=2 --offset_increment=3M --randseed=3105 --verify_state_save=0
	--group_reporting)
# the large reads keep the pool full (16 x 512k-1M at depth 8 each)
fio --name=hog "--ioengine=external:$engine" "--uri=$url" --rw=randread \
	--bsrange=512k-1m --iodepth=8 --numjobs=2 --offset=32M --size=32M \
	--time_based --runtime=60 --output="$TEST_DIR/5.hog.out" \
	2>"$TEST_DIR/5.hog.err" &
hog_pid=$!
cleanup_fn _kill_quiet "$hog_pid"
_wait_for_line "$RBLK_TARGET_LOG" "depth 8, max I/O" "$hog_pid" 30 ||
	fail "the reading sessions did not log in"
run w5 "$TEST_DIR/5.w.out" "${hlayout[@]}" 2>"$TEST_DIR/5.w.err"
_kill_quiet "$hog_pid"
wait "$hog_pid" 2>/dev/null || true
if grep -E "disconnecting|reposting receive|reposted" "$RBLK_TARGET_LOG"; then
	fail "the target failed a session holding receives"
fi
if grep -q "reconnecting" "$TEST_DIR/5.w.err"; then
	cat "$TEST_DIR/5.w.err"; fail "a writing session was lost"
fi
held=$("$RBLK_TARGET_BIN" ctl -s "$RBLK_CTL_SOCKET" stats vol0 |
	sed -n 's/.*throttled \([0-9]*\) commands.*/\1/p')
[ "${held:-0}" -gt 0 ] || fail "QoS held no command (throttled ${held:-none})"
file_verify w5 "${hlayout[@]/--iodepth=16/--iodepth=1}"
echo "case 5: 6 MiB of inline 4k writes held by QoS ($held commands) and by a full slot pool verified"
echo "PASS: $TEST_NAME"
