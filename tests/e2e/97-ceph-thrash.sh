#!/usr/bin/env bash
# A thrashed Ceph under rblk (issue 28, part 3). A micro cluster of three
# memstore OSDs with a pool of size 2 (tests/ceph/micro-cluster.sh, failure
# detection in ~4 s); rblk-target exports rbd:rbd/vol (1 MiB objects, so the
# load touches every placement group); fio through the rblk engine writes
# with crc32c verify headers and reads them back (verify_backlog and a
# verify pass per round), round after round, while a thrasher kills one OSD
# with SIGKILL and revives it about every 10 s (a memstore OSD comes back
# empty: its peer backfills it, so the next kill waits for active+clean, as
# Ceph's own thrasher does) and restarts the monitor once half way.
#
# Checked: every fio round ends without an error (a verify error fails it);
# no I/O took longer than the reconnect limits (STALL_MAX_MS, below the
# target's rbd_timeout and librblk's io-timeout of 30 s); the last write of
# every region still verifies after the thrash (the data survived the
# later kills and backfills); rbd export of the image reads the same bytes
# as rblk; the target logged the stalls it saw (backend_rbd.c slow_note).
#
# Short form (make check): 30 s, 3 kills. Long form (RBLK_SOAK=1):
# soak: 150 s of thrash, an OSD killed and revived every ~10 s (~14 kills), 2 monitor restarts
# runs-alone: a Ceph cluster thrashed under fio, stalls measured against the reconnect limits
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$RBLK_ROOT/tests/ceph/lib.sh"
requires_ceph
requires fio python3 nbdcopy cmp
requires_built
requires_fio_engine

DUR=${RBLK_THRASH_SECS:-30}
MON_RESTARTS=1
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	DUR=${RBLK_THRASH_SECS:-150}
	MON_RESTARTS=2
fi
PERIOD=10        # one kill per PERIOD seconds
DOWN=4           # seconds an OSD stays dead
STALL_MAX_MS=20000
MC=$MICRO_CLUSTER

t0=$(date +%s.%N)
start_ceph "" --osds 3 --pool-size 2 --mem 1G
echo "micro cluster up: 3 OSDs, pool size 2 ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}') s)"
tmo 30 rbd create rbd/vol --size 64M --object-size 1M
conf=$TEST_DIR/target.conf
rbd_target_conf "$conf" rbd_timeout=30
start_target --config "$conf" --export vol=rbd:rbd/vol
url=$RBLK_TARGET_URL/vol
EV=$TEST_DIR/events

event() { echo "$(date +%s.%N) $*" >>"$EV"; echo "thrash: $*"; }

# all placement groups active+clean (the micro cluster has one pool)
wait_clean()
{
	local end=$((SECONDS + $1)) s
	while [ $SECONDS -lt $end ]; do
		s=$(timeout 10 ceph pg stat 2>/dev/null || true)
		case $s in *"8 pgs: 8 active+clean"*) return 0 ;; esac
		sleep 0.5
	done
	echo "not clean after $1 s: $s"
	return 1
}

# ---- the load: fio rounds over four 16 MiB regions until told to stop ------
# round N writes region N % 4 with seed N; its fio verifies what it wrote
layout()
{
	local r=$1
	echo --rw=randwrite --bsrange=4k-64k --iodepth=8 --size=16M \
		--offset=$(((r % 4) * 16))M --randseed=$r --verify=crc32c \
		--verify_state_save=0 --ctrl_loss_tmo=120
}
load()
{
	local r=0 rc
	while [ ! -e "$TEST_DIR/stop" ]; do
		r=$((r + 1))
		# shellcheck disable=SC2046 # layout() prints words
		rc=0
		fio --name="r$r" "--ioengine=external:$RBLK_FIO_ENGINE" \
			"--uri=$url" $(layout $r) --verify_backlog=64 \
			--output-format=json --output="$TEST_DIR/round.$r.json" \
			2>"$TEST_DIR/round.$r.err" || rc=$?
		echo "$r $rc" >>"$TEST_DIR/rounds"
		[ "$rc" = 0 ] || return 1
	done
}
: >"$TEST_DIR/rounds"
load &
load_pid=$!
cleanup_fn stop_pid "$load_pid"

# ---- the thrasher ----------------------------------------------------------
: >"$EV"
start=$SECONDS
kills=0 mons=0 clean_waits=0
next_mon=$((DUR / (MON_RESTARTS + 1)))
# at least MIN_KILLS kills however long recovery takes on a loaded host
# (a revived OSD took 21 s to be whole again at load 11: one kill in 30 s)
MIN_KILLS=$((DUR / PERIOD / 2 > 2 ? DUR / PERIOD / 2 : 2))
while [ $((SECONDS - start)) -lt "$DUR" ] || [ "$kills" -lt "$MIN_KILLS" ]; do
	kill -0 "$load_pid" 2>/dev/null || break
	t=$SECONDS
	if [ "$mons" -lt "$MON_RESTARTS" ] && [ $((t - start)) -ge "$next_mon" ]; then
		event "restart mon.a"
		"$MC" restart-mon "$CEPH_DIR"
		mons=$((mons + 1))
		next_mon=$((next_mon + DUR / (MON_RESTARTS + 1)))
		sleep 3
	fi
	osd=$((kills % 3))
	event "kill -9 osd.$osd"
	"$MC" kill-osd "$CEPH_DIR" "$osd"
	kills=$((kills + 1))
	sleep "$DOWN"
	event "start osd.$osd"
	"$MC" start-osd "$CEPH_DIR" "$osd"
	# the revived OSD is empty: the next kill waits until it is whole
	# again, else a second kill could take the only copy
	c0=$SECONDS
	wait_clean 90 || fail "the cluster did not recover after reviving osd.$osd"
	event "active+clean after $((SECONDS - c0)) s"
	clean_waits=$((clean_waits + SECONDS - c0))
	rest=$((PERIOD - (SECONDS - t)))
	[ "$rest" -gt 0 ] && sleep "$rest"
done
thrash_secs=$((SECONDS - start))
touch "$TEST_DIR/stop"
rc=0
wait_pid 300 "$load_pid" || rc=$?
rounds=$(wc -l <"$TEST_DIR/rounds")
if [ "$rc" != 0 ]; then
	last=$(tail -n1 "$TEST_DIR/rounds" | cut -d' ' -f1)
	tail -n 30 "$TEST_DIR/round.$last.err" "$TEST_DIR/round.$last.json" || true
	tail -n 30 "$RBLK_TARGET_LOG"
	fail "fio round $last failed during the thrash (rc $rc; events: $(tr '\n' ';' <"$EV"))"
fi
[ "$kills" -ge "$MIN_KILLS" ] || fail "only $kills OSD kills in ${thrash_secs}s"
[ "$rounds" -ge 2 ] || fail "only $rounds fio rounds ran"

# per-round figures from fio's JSON: errors, I/Os, bytes, the longest I/O
read -r ios bytes max_ms errs < <(python3 - "$TEST_DIR" "$rounds" <<'EOF'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
ios = byt = err = 0
mx = 0
for r in range(1, n + 1):
    txt = open(f"{d}/round.{r}.json").read()
    j = json.loads(txt[txt.index("{"):])
    for job in j["jobs"]:
        err += job["error"]
        for k in ("read", "write"):
            ios += job[k]["total_ios"]
            byt += job[k]["io_bytes"]
            mx = max(mx, job[k]["clat_ns"]["max"] / 1e6)
print(ios, byt, int(mx), err)
EOF
)
[ "$errs" = 0 ] || fail "fio reported $errs errors"
echo "load: $rounds fio rounds, $ios I/Os, $((bytes >> 20)) MiB written and read back, longest I/O $max_ms ms"
[ "$max_ms" -lt "$STALL_MAX_MS" ] ||
	fail "an I/O took $max_ms ms, more than $STALL_MAX_MS ms (the reconnect limits)"

# after the thrash: the last round of each region still verifies
wait_clean 90 || fail "the cluster did not settle after the thrash"
for ((r = rounds; r > rounds - 4 && r > 0; r--)); do
	# shellcheck disable=SC2046
	tmo 120 fio --name="v$r" "--ioengine=external:$RBLK_FIO_ENGINE" \
		"--uri=$url" $(layout $r) --verify_only \
		--output="$TEST_DIR/verify.$r.out" ||
		{ cat "$TEST_DIR/verify.$r.out"; fail "round $r's data no longer verifies after the thrash"; }
	grep -q "err= 0" "$TEST_DIR/verify.$r.out" ||
		{ cat "$TEST_DIR/verify.$r.out"; fail "round $r's data no longer verifies"; }
done
echo "after the thrash: the last write of each region verifies (rounds $((rounds > 4 ? rounds - 3 : 1))..$rounds)"

# the image straight from the cluster holds what rblk reads
tmo 60 rbd export --no-progress rbd/vol "$TEST_DIR/vol.img"
start_nbd "$url" "$TEST_DIR/nbd.sock"
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/via-rblk.img"
cmp "$TEST_DIR/vol.img" "$TEST_DIR/via-rblk.img" ||
	fail "rbd export differs from what rblk reads"
echo "rbd export matches what rblk reads"

kill -0 "$RBLK_TARGET_PID" || fail "rblk-target died"
notes=$(grep -c 'the cluster was slow to answer' "$RBLK_TARGET_LOG" || true)
grep 'the cluster was slow to answer' "$RBLK_TARGET_LOG" | head -n 3 | sed 's/^/target: /'
[ "$notes" -ge 1 ] || fail "the target logged no stall although $kills OSDs were killed under load"
echo "thrash: ${thrash_secs}s, $kills OSD kills and revivals, $mons monitor restart(s), ${clean_waits}s waiting for active+clean; target stall notes: $notes; lost = 0"
