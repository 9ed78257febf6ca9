#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): 4k random reads and random writes at QD32 to one
# RBD image of a micro Ceph cluster (tests/ceph/micro-cluster.sh, memstore
# OSD on 127.0.0.1), two ways in the same run:
#   rblk    fio's rblk engine (build/rblk-fio.so) -> rblk-target over the
#           tcp transport -> librbd -> OSD
#   librbd  fio's rbd engine -> librbd -> OSD (the path a gateway adds to)
# in interleaved rounds (rblk, librbd, rblk, librbd, ...). Prints, per
# workload, the median IOPS of each path, the median of the per-round
# ratios rblk/librbd with their min and max, and CPU time per I/O: fio,
# rblk-target and ceph-osd utime+stime from /proc over each run, divided
# by the I/Os done.
#
#   tools/bench/rbd-bench.sh [--rounds N] [--runtime S] [--size MiB]
#                            [--workers N] [--compare BUILD_DIR]
#
# --compare BUILD_DIR adds path "rblk-b": the same fio engine against a
# second rblk-target, BUILD_DIR/rblk-target (another commit's build), on
# the same image, in the same rounds (rblk, rblk-b, librbd, ...); the
# summary gives rblk-b/rblk per round too. Both targets then run with
# rbd_takeover = no, so each waits for the other to release the image's
# lock instead of blocklisting it.
#
# Defaults: 5 rounds, 8 s per run, a 256 MiB image (written in full first,
# so reads reach data), 1 target worker. The target takes the image's
# exclusive lock while it writes and gives it back 2 s after its session
# ends; fio's librbd takes it in turn, so runs are 3 s apart.
set -euo pipefail

BENCH_NAME=rbd-bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
rounds=5 runtime=8 size=256 workers=1 compare=
bench_args "--rounds=rounds --runtime=runtime --size=size --workers=workers
	--compare=compare" "$@"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
engine=$build/rblk-fio.so
bench_need_files "make all fio-engine" "$build/rblk-target" "$engine"
paths=(rblk librbd)
if [ -n "$compare" ]; then
	compare=$(cd "$compare" && pwd)
	bench_need_files "a build directory with rblk-target" "$compare/rblk-target"
	paths=(rblk rblk-b librbd)
fi
bench_scratch
fio --enghelp=rbd >/dev/null 2>&1 || { echo "rbd-bench: fio has no rbd engine" >&2; exit 1; }

mc=$root/tests/ceph/micro-cluster.sh
"$mc" start "$dir/ceph" --mem $((size * 3))M >/dev/null
trap '"$mc" stop "$dir/ceph"; bench_cleanup' EXIT
eval "$("$mc" env "$dir/ceph")"
osd_pid=$(cat "$dir/ceph/run/osd.0.pid")
rbd create rbd/bench --size "${size}M"
fio --name=fill --ioengine=rbd --clientname=admin --pool=rbd --rbdname=bench \
	--rw=write --bs=1M --iodepth=8 --size="${size}M" --output=/dev/null

printf '[target]\nceph_conf = %s\nworkers = %s\n' "$CEPH_CONF" "$workers" \
	>"$dir/target.conf"
[ -z "$compare" ] || echo "rbd_takeover = no" >>"$dir/target.conf"

# start_target NAME BUILD_DIR: rblk-target on a free port; sets
# port_NAME and tgt_NAME
start_target()
{
	local p
	p=$(bench_free_port)
	"$2/rblk-target" --config "$dir/target.conf" --ctl-socket none \
		--allow-any-host --listen "tcp://127.0.0.1:$p" \
		--export vol0=rbd:rbd/bench >"$dir/target-$1.log" 2>&1 &
	pids+=($!)
	printf -v "tgt_$1" '%s' $!
	printf -v "port_$1" '%s' "$p"
	wait_for "$dir/target-$1.log" "listening on"
}
start_target a "$build"
[ -z "$compare" ] || start_target b "$compare"

# run PATH RW: one fio run; prints "iops fio_ticks target_ticks osd_ticks ios"
run()
{
	local path=$1 rw=$2 out=$dir/fio.json t0 o0 t1 o1 tgt=0 port
	local args=(--name=bench --rw="$rw" --bs=4k --iodepth=32 --direct=1
		--size="${size}M" --time_based --runtime="$runtime"
		--ramp_time=1 --randrepeat=0 --output-format=json --output="$out")
	case $path in
	rblk) tgt=$tgt_a port=$port_a ;;
	rblk-b) tgt=$tgt_b port=$port_b ;;
	esac
	t0=$(bench_ticks "$tgt") o0=$(bench_ticks "$osd_pid")
	if [ "$tgt" != 0 ]; then
		/usr/bin/time -f '%U %S' -o "$dir/time" fio "${args[@]}" \
			"--ioengine=external:$engine" \
			"--uri=tcp://127.0.0.1:$port/vol0" >/dev/null
	else
		/usr/bin/time -f '%U %S' -o "$dir/time" fio "${args[@]}" \
			--ioengine=rbd --clientname=admin --pool=rbd \
			--rbdname=bench >/dev/null
	fi
	t1=$(bench_ticks "$tgt") o1=$(bench_ticks "$osd_pid")
	python3 - "$out" "$dir/time" $((t1 - t0)) $((o1 - o0)) "$path" <<'EOF'
import json, sys, os
j = json.load(open(sys.argv[1]))["jobs"][0]
io = j["read"]["iops"] + j["write"]["iops"]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
hz = os.sysconf("SC_CLK_TCK")
tgt = int(sys.argv[3]) / hz
print(io, u + s, tgt, int(sys.argv[4]) / hz, ios)
EOF
	sleep 3 # the lock changes hands: the target releases it 2 s after
}

: >"$dir/results"
for ((r = 1; r <= rounds; r++)); do
	for rw in randread randwrite; do
		for path in "${paths[@]}"; do
			echo "$rw $path $r $(run "$path" "$rw")" >>"$dir/results"
			tail -n 1 "$dir/results" >&2
		done
	done
done

python3 - "$dir/results" "$rounds" "$runtime" "$workers" "$compare" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
runtime = float(sys.argv[3])
print("\nrbd-bench: %s rounds x %s s, 4k QD32, 1 fio job, target workers %s"
      % (sys.argv[2], sys.argv[3], sys.argv[4]))
if sys.argv[5]:
    print("rblk-b: rblk-target of %s" % sys.argv[5])
print("| workload | path | IOPS (median) | /librbd median [min, max] | CPU us/IO (fio/target/osd) |")
print("|---|---|---|---|---|")
for rw in ("randread", "randwrite"):
    by = {}
    for w, path, r, iops, fio_s, tgt_s, osd_s, ios in rows:
        if w == rw:
            by.setdefault(path, {})[int(r)] = (float(iops), float(fio_s),
                float(tgt_s), float(osd_s), int(ios))
    def ratios(a, b):
        return [by[a][r][0] / by[b][r][0] for r in by[a] if r in by[b]]
    def cpu(path):
        # fio's time includes the 1 s ramp; the I/Os counted exclude it, so
        # scale the I/O count by (runtime + ramp) / runtime
        v = [[1e6 * x / (i * (runtime + 1) / runtime) for x in (f, t, o)]
             for _, f, t, o, i in by[path].values()]
        return "%.0f (%s)" % (st.median(sum(x) for x in v),
                              "/".join("%.0f" % st.median(x) for x in zip(*v)))
    for path in ("rblk", "rblk-b", "librbd"):
        if path not in by:
            continue
        rr = ratios(path, "librbd")
        rs = "%.2f [%.2f, %.2f]" % (st.median(rr), min(rr), max(rr)) \
            if path != "librbd" else "-"
        print("| %s | %s | %.0f | %s | %s |" % (rw, path,
              st.median(v[0] for v in by[path].values()), rs, cpu(path)))
    if "rblk-b" in by:
        rr = ratios("rblk-b", "rblk")
        print("| %s | rblk-b/rblk | | %.3f [%.3f, %.3f] | |" % (
            rw, st.median(rr), min(rr), max(rr)))
EOF
