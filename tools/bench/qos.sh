#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): QoS limits through the fio engine, one worker,
# RAM volumes (docs/BENCHMARKS.md, "QoS"). Per round, interleaved:
#   lim   iops=IOPS, fio 4k randread QD16     -> IOPS measured / limit
#   bw    bps=BPS, fio 128k read QD8          -> bytes/s measured / limit
#   free  no limit, 4k randread QD16, alone   -> IOPS
#   free  the same while lim and bw run beside it on the same worker
#                                             -> IOPS / alone
#   free  the same beside two jobs that fio itself holds to the same
#         rates (--rate_iops, --rate) on unlimited exports of the same
#         worker: the load the limited jobs add, without the limiter
#                                             -> beside QoS / beside this
# and prints each ratio's median, min and max over the rounds. The last
# ratio tells what the limiter costs the neighbour from what the two
# extra jobs cost it on this machine (on 2 CPUs every thread competes).
# The control volumes are nodirect, as a limited one always is, so both
# jobs take the same command path. Before the rounds every job runs once
# uncounted: a RAM volume's first read of a page faults inside the
# worker's copy, which in a VM costs more than the I/O (a 256 MiB volume
# read at 50 MB/s faulted 12k pages a second and took the neighbour from
# 20k to 0.5k IOPS), and would be charged to whichever round came first.
#
#   tools/bench/qos.sh [--build DIR] [--rounds 5] [--runtime 4]
#       [--iops 1000] [--bps 50M] [--scheme tcp|rdma] [--addr IP]
#       [--poll MODE]   the neighbour's fio engine poll mode (busy, event,
#                       adaptive; default the engine's own)
#
# Over rxe in the test guest: BUILD=build tests/vm/run-vm.sh -- \
#   tools/bench/qos.sh --scheme rdma --addr 192.0.2.1
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_NAME=qos.sh
# shellcheck source=tools/bench/lib.sh
source tools/bench/lib.sh

build=build rounds=5 runtime=4 iops=1000 bps=50M scheme=tcp addr=127.0.0.1
npoll=
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--iops) iops=$2; shift 2 ;;
	--bps) bps=$2; shift 2 ;;
	--scheme) scheme=$2; shift 2 ;;
	--addr) addr=$2; shift 2 ;;
	--poll) npoll=--poll=$2; shift 2 ;;
	-h | --help) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "qos.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
engine=$build/rblk-fio.so
[ -x "$build/rblk-target" ] && [ -f "$engine" ] ||
	{ echo "qos.sh: need $build/rblk-target and $engine (make all fio-engine)" >&2; exit 2; }
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
"$build/rblk-target" --listen "$scheme://$addr:$port" --workers 1 \
	--ctl-socket none --allow-any-host \
	--export "lim=ram:64M,iops=$iops" --export "bw=ram:256M,bps=$bps" \
	--export "free=ram:64M,nodirect" --export "ctl1=ram:64M,nodirect" \
	--export "ctl2=ram:256M,nodirect" >"$tmp/target.log" 2>&1 &
tpid=$!
trap 'kill $tpid 2>/dev/null; wait $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
wait_for "$tmp/target.log" "listening on" 10 "$tpid"
bps_bytes=$(python3 -c "
s='$bps'; m={'K':1<<10,'M':1<<20,'G':1<<30}
print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))")

# run NAME EXPORT ARGS...: fio JSON into $tmp/NAME.json
run()
{
	local name=$1 exp=$2
	shift 2
	fio --name="$name" "--ioengine=external:$engine" \
		"--uri=$scheme://$addr:$port/$exp" --time_based \
		--runtime="$runtime" --ramp_time=1 --output-format=json \
		--output="$tmp/$name.json" "$@"
}
val() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"][sys.argv[2]])' "$tmp/$1.json" "$2"; }
rr=(--rw=randread --bs=4k --iodepth=16 --size=64M)
nb=("${rr[@]}" ${npoll:+"$npoll"}) # the neighbour's
# the limited jobs and their controls read 16 MiB and 128 MiB of their
# volumes, which the warm-up (at the limits: 4096 4k reads, 128 MiB at
# 50 MB/s) reads whole in 5 s
lr=(--rw=randread --bs=4k --iodepth=16 --size=16M)
sq=(--rw=read --bs=128k --iodepth=8 --size=128M)

# the uncounted warm-up
run wfree free "${rr[@]}" --runtime=1 --ramp_time=0
run wctl1 ctl1 "${lr[@]}" --runtime=1 --ramp_time=0
run wctl2 ctl2 "${sq[@]}" --runtime=1 --ramp_time=0
run wlim lim "${lr[@]}" --runtime=5 --ramp_time=0 --poll=event &
p1=$!
run wbw bw "${sq[@]}" --runtime=5 --ramp_time=0 --poll=event
wait $p1

: >"$tmp/rows"
for r in $(seq "$rounds"); do
	run alone free "${nb[@]}"
	# the limited jobs wait on events, not a poll loop: a throttled job
	# spinning 50 us per completion would take CPU from the neighbour's
	# fio on this 2-core host, which is not what the worker does to it
	run lim lim "${lr[@]}" --runtime=$((runtime + 2)) --poll=event &
	p1=$!
	run bw bw "${sq[@]}" --runtime=$((runtime + 2)) --poll=event &
	p2=$!
	sleep 1
	run beside free "${nb[@]}"
	wait $p1 $p2
	# the control: the same rates held by fio, no limiter in the target
	run ctl1 ctl1 "${lr[@]}" --runtime=$((runtime + 2)) --poll=event \
		--rate_iops="$iops" &
	p1=$!
	run ctl2 ctl2 "${sq[@]}" --runtime=$((runtime + 2)) --poll=event \
		--rate="$bps_bytes" &
	p2=$!
	sleep 1
	run control free "${nb[@]}"
	wait $p1 $p2
	echo "$(val lim iops) $(val bw bw_bytes) $(val alone iops) $(val beside iops) $(val control iops)" >>"$tmp/rows"
	echo "round $r: $(tail -n1 "$tmp/rows")" >&2
done
python3 - "$tmp/rows" "$iops" "$bps_bytes" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
iops, bps = float(sys.argv[2]), float(sys.argv[3])
cols = {
    "limited IOPS / limit": [r[0] / iops for r in rows],
    "limited bytes/s / limit": [r[1] / bps for r in rows],
    "neighbour IOPS, beside / alone": [r[3] / r[2] for r in rows],
    "neighbour IOPS, beside fio-held jobs / alone": [r[4] / r[2] for r in rows],
    "neighbour IOPS, beside QoS / beside fio-held jobs": [r[3] / r[4] for r in rows],
}
print("| measure | median | min | max |")
print("|---|---|---|---|")
for k, v in cols.items():
    print("| %s | %.3f | %.3f | %.3f |" % (k, statistics.median(v), min(v), max(v)))
print("rounds: %d; neighbour alone: median %.0f IOPS" % (len(rows), statistics.median(r[2] for r in rows)))
EOF
