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
#                            [--workers N]
#
# Defaults: 5 rounds, 8 s per run, a 256 MiB image (written in full first,
# so reads reach data), 1 target worker. The target takes the image's
# exclusive lock while it writes and gives it back 2 s after its session
# ends; fio's librbd takes it in turn, so runs are 3 s apart.
set -euo pipefail

BENCH_NAME=rbd-bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
rounds=5 runtime=8 size=256 workers=1
bench_args "--rounds=rounds --runtime=runtime --size=size --workers=workers" \
	"$@"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
engine=$build/rblk-fio.so
bench_need_files "make all fio-engine" "$build/rblk-target" "$engine"
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
port=$(bench_free_port)
"$build/rblk-target" --config "$dir/target.conf" --ctl-socket none --allow-any-host \
	--listen "tcp://127.0.0.1:$port" --export vol0=rbd:rbd/bench \
	>"$dir/target.log" 2>&1 &
tgt=$!
pids+=("$tgt")
wait_for "$dir/target.log" "listening on"

# utime+stime of a pid, in clock ticks
ticks()
{
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# run PATH RW: one fio run; prints "iops fio_ticks target_ticks osd_ticks ios"
run()
{
	local path=$1 rw=$2 out=$dir/fio.json t0 o0 t1 o1
	local args=(--name=bench --rw="$rw" --bs=4k --iodepth=32 --direct=1
		--size="${size}M" --time_based --runtime="$runtime"
		--ramp_time=1 --randrepeat=0 --output-format=json --output="$out")
	t0=$(ticks "$tgt") o0=$(ticks "$osd_pid")
	if [ "$path" = rblk ]; then
		/usr/bin/time -f '%U %S' -o "$dir/time" fio "${args[@]}" \
			"--ioengine=external:$engine" \
			"--uri=tcp://127.0.0.1:$port/vol0" >/dev/null
	else
		/usr/bin/time -f '%U %S' -o "$dir/time" fio "${args[@]}" \
			--ioengine=rbd --clientname=admin --pool=rbd \
			--rbdname=bench >/dev/null
	fi
	t1=$(ticks "$tgt") o1=$(ticks "$osd_pid")
	python3 - "$out" "$dir/time" $((t1 - t0)) $((o1 - o0)) "$path" <<'EOF'
import json, sys, os
j = json.load(open(sys.argv[1]))["jobs"][0]
io = j["read"]["iops"] + j["write"]["iops"]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
hz = os.sysconf("SC_CLK_TCK")
tgt = int(sys.argv[3]) / hz if sys.argv[5] == "rblk" else 0.0
print(io, u + s, tgt, int(sys.argv[4]) / hz, ios)
EOF
	sleep 3 # the lock changes hands: the target releases it 2 s after
}

: >"$dir/results"
for ((r = 1; r <= rounds; r++)); do
	for rw in randread randwrite; do
		for path in rblk librbd; do
			echo "$rw $path $r $(run "$path" "$rw")" >>"$dir/results"
			tail -n 1 "$dir/results" >&2
		done
	done
done

python3 - "$dir/results" "$rounds" "$runtime" "$workers" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
print("\nrbd-bench: %s rounds x %s s, 4k QD32, 1 fio job, target workers %s"
      % (sys.argv[2], sys.argv[3], sys.argv[4]))
print("| workload | rblk IOPS (median) | librbd IOPS (median) | rblk/librbd median [min, max] | CPU us/IO rblk (fio+target+osd) | CPU us/IO librbd (fio+osd) |")
print("|---|---|---|---|---|---|")
for rw in ("randread", "randwrite"):
    by = {}
    for w, path, r, iops, fio_s, tgt_s, osd_s, ios in rows:
        if w == rw:
            by.setdefault(path, {})[int(r)] = (float(iops), float(fio_s),
                float(tgt_s), float(osd_s), int(ios))
    ratios = [by["rblk"][r][0] / by["librbd"][r][0] for r in by["rblk"]
              if r in by["librbd"]]
    def cpu(path):
        # fio's time includes the 1 s ramp; I/Os counted exclude it, so
        # scale the I/O count by runtime+ramp / runtime
        vals = []
        for iops, fio_s, tgt_s, osd_s, ios in by[path].values():
            n = ios * (float(sys.argv[3]) + 1) / float(sys.argv[3])
            vals.append(1e6 * (fio_s + tgt_s + osd_s) / n)
        return st.median(vals)
    def parts(path):
        v = [(1e6 * f / (i * (float(sys.argv[3]) + 1) / float(sys.argv[3])),
              1e6 * t / (i * (float(sys.argv[3]) + 1) / float(sys.argv[3])),
              1e6 * o / (i * (float(sys.argv[3]) + 1) / float(sys.argv[3])))
             for _, f, t, o, i in by[path].values()]
        return "/".join("%.0f" % st.median(x) for x in zip(*v))
    print("| %s | %.0f | %.0f | %.2f [%.2f, %.2f] | %.0f (%s) | %.0f (%s) |" % (
        rw, st.median(v[0] for v in by["rblk"].values()),
        st.median(v[0] for v in by["librbd"].values()),
        st.median(ratios), min(ratios), max(ratios),
        cpu("rblk"), parts("rblk"), cpu("librbd"), parts("librbd")))
EOF
