#!/usr/bin/env bash
# Smoke test of the fio ioengine (build/rblk-fio.so), tcp (rdma in guest
# test 11): two jobs =
# two rblk sessions of one queue each, QD16, random writes of 4k..64k with
# crc32c headers, then a verify-only pass; the same with read_mode=push,
# and verify-only passes with poll=busy and poll=event (the others use the
# default, adaptive); a queue depth
# of 2 under iodepth 16 (librblk's backlog, and FIO_Q_BUSY at max_queued). A
# verify-only pass with fio's own psync engine on the exported file itself
# proves the data landed at the right offsets, not only that the engine
# reads back what it wrote. The target polls 50 us before it sleeps
# (--poll-spin-us; every other test runs it sleeping at once), and a
# value past its range is refused.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires truncate
requires_built
requires_fio_engine # and that this fio loads it
engine=$RBLK_FIO_ENGINE

img=$TEST_DIR/export.img
truncate -s 64M "$img"
if "$RBLK_TARGET_BIN" --listen tcp://127.0.0.1:1 --poll-spin-us 1001 \
	--export "vol0=$img" >"$TEST_DIR/spin.out" 2>&1; then
	cat "$TEST_DIR/spin.out"; fail "rblk-target took --poll-spin-us 1001"
fi
grep -q "poll_spin_us: '1001' is not a number from 0 to 1000" \
	"$TEST_DIR/spin.out" || { cat "$TEST_DIR/spin.out"; fail "no clear error for --poll-spin-us 1001"; }
start_target --export "vol0=$img" --poll-spin-us 50
url=$RBLK_TARGET_URL/vol0

# each job owns its own 32 MiB region (offset_increment), so verification
# is exact whatever order the two sessions' writes land in
layout=(--rw=randwrite --bsrange=4k-64k --verify=crc32c --iodepth=16
	--size=32M --numjobs=2 --offset_increment=32M --group_reporting
	--verify_state_save=0)

# run NAME OUTFILE ARGS...: fio through the engine; must report no error
run()
{
	local name=$1 out=$2
	shift 2
	tmo 60 fio --name="$name" "--ioengine=external:$engine" "--uri=$url" \
		--hostname=fio-smoke "${layout[@]}" "$@" --output="$out" ||
		{ cat "$out"; fail "fio $name $*"; }
	grep -E "IOPS|err=" "$out"
	grep -q "ioengine=rblk" "$out" || { cat "$out"; fail "fio did not use the rblk engine"; }
	grep -q "err= 0" "$out" || { cat "$out"; fail "fio $name $* reported errors"; }
}

for mode in pull push; do
	[ "$mode" = pull ] && seed=4242 || seed=4343
	run "w$mode" "$TEST_DIR/$mode.write.out" --read_mode="$mode" \
		--randseed="$seed" --do_verify=0
	run "w$mode" "$TEST_DIR/$mode.verify.out" --read_mode="$mode" \
		--randseed="$seed" --verify_only
	# the same layout read straight from the exported file
	tmo 60 fio --name="w$mode" --ioengine=psync --filename="$img" \
		"${layout[@]/--iodepth=16/--iodepth=1}" --randseed="$seed" \
		--verify_only --output="$TEST_DIR/$mode.file.out" ||
		{ cat "$TEST_DIR/$mode.file.out"; fail "verify of $img after the $mode run"; }
	grep -q "err= 0" "$TEST_DIR/$mode.file.out" ||
		{ cat "$TEST_DIR/$mode.file.out"; fail "$img does not hold what the $mode run wrote"; }
done

# busy and event completion polling, a shorter spin, and fio's own
# batching (several commits' I/Os per post, several completions per
# getevents, instead of the engine holding its plug) read back what the
# pull run wrote
for poll in busy event spin20 batch8; do
	case $poll in
	spin20) opts=(--poll_spin_us=20) ;;
	batch8) opts=(--iodepth_batch_submit=8 --iodepth_batch_complete_max=8) ;;
	*) opts=(--poll="$poll") ;;
	esac
	run wpull "$TEST_DIR/poll-$poll.out" "${opts[@]}" --randseed=4242 \
		--verify_only
done
# librblk keeps the backlog: queue depth 2 under iodepth 16. Written with
# max_queued=4 (the engine answers FIO_Q_BUSY past it, fio reaps and
# retries), verified with the default (14 I/Os wait inside librblk), and
# read straight from the file
run wbl "$TEST_DIR/busy.write.out" --queue_depth=2 --max_queued=4 \
	--randseed=4444 --do_verify=0
run wbl "$TEST_DIR/backlog.verify.out" --queue_depth=2 --randseed=4444 \
	--verify_only
tmo 60 fio --name=wbl --ioengine=psync --filename="$img" \
	"${layout[@]/--iodepth=16/--iodepth=1}" --randseed=4444 \
	--verify_only --output="$TEST_DIR/backlog.file.out" ||
	{ cat "$TEST_DIR/backlog.file.out"; fail "verify of $img after the backlog run"; }
grep -q "err= 0" "$TEST_DIR/backlog.file.out" ||
	{ cat "$TEST_DIR/backlog.file.out"; fail "$img does not hold what the backlog run wrote"; }

# a polling mode fio does not know is refused
if fio --name=bad "--ioengine=external:$engine" "--uri=$url" --poll=spin \
	--rw=read --size=4k >"$TEST_DIR/bad.out" 2>&1; then
	cat "$TEST_DIR/bad.out"
	fail "fio accepted --poll=spin"
fi

# each job had its own session of one queue at the job's iodepth (8 runs x
# 2 jobs), besides the depth-1 sessions fio's main process opens to learn
# the size
n=$(grep -c "host 'fio-smoke' logged in to export vol0 (queue 0, depth 16," \
	"$RBLK_TARGET_LOG" || true)
[ "$n" -eq 16 ] || { cat "$RBLK_TARGET_LOG"; fail "expected 16 job sessions at depth 16, saw $n"; }
grep "host 'fio-smoke'" "$RBLK_TARGET_LOG" | grep -q "queue 1" &&
	fail "a job opened more than one queue"
echo "PASS: $TEST_NAME"
