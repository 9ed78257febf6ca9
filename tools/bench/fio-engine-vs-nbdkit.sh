#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): fio through the rblk ioengine (build/rblk-fio.so
# -> rblk-target over the tcp transport on loopback) against fio's nbd
# engine -> `nbdkit file` on a unix socket, serving the same file, in the
# same run. Two workloads: 4k random reads at QD32 and 128k sequential
# reads at QD16. Prints IOPS and MB/s for each path and the ratios
# rblk/nbdkit; the rblk engine runs in both read modes (pull and push).
#
#   tools/bench/fio-engine-vs-nbdkit.sh [--size MiB] [--runtime S]
#                                       [--jobs N] [--cache] [--dir DIR]
#
# --jobs N runs N fio jobs: N rblk sessions of one queue each, or N NBD
# connections. By default the page cache is dropped before each run where
# possible (root) and nbdkit uses cache=none, since rblk-target reads with
# O_DIRECT; --cache leaves both sides to the page cache instead.
# --dir DIR puts the file in DIR (default: $TMPDIR or /tmp). On tmpfs
# (--dir /dev/shm) both servers read memory (rblk-target falls back to
# buffered I/O there), which compares the software paths without the disk;
# on a disk, sequential reads favour nbdkit, which gets kernel readahead,
# where rblk-target's O_DIRECT reads do not.
#
# On one host both servers share the CPUs with fio, and the tcp transport
# stands in for RDMA: the numbers compare software paths, not wire speeds.
set -euo pipefail

BENCH_NAME=fio-engine-vs-nbdkit
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
size=256 runtime=10 jobs=1 cache=0 where=${TMPDIR:-/tmp}
bench_args "--size=size --runtime=runtime --jobs=jobs --cache!cache
	--dir=where" "$@"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${RBLK_BUILD:-$root/build}
engine=$build/rblk-fio.so
bench_need fio nbdkit jq python3
bench_need_files "make all fio-engine" "$build/rblk-target" "$engine"
fio --enghelp=nbd >/dev/null 2>&1 ||
	{ echo "fio-engine-vs-nbdkit: this fio has no nbd engine" >&2; exit 1; }

BENCH_DIR_PARENT="$where"
bench_scratch

echo "preparing a ${size} MiB file in $where ($(stat -f -c %T "$where")) ..."
head -c "$((size * 1024 * 1024))" /dev/urandom >"$dir/vol.img"

port=$(bench_free_port)
"$build/rblk-target" --listen "tcp://127.0.0.1:$port" --allow-any-host --log-level warn \
	--export "vol0=$dir/vol.img" >"$dir/target.log" 2>&1 &
pids+=($!)
bench_poll 10 bench_port_open "$port" || true

bench_nbdkit "$dir/vol.img" "$dir/nbdkit.sock" "$dir/nbdkit.log"

# run_fio OUT RW BS QD ENGINE-ARGS...: prints "IOPS MB/s"
run_fio()
{
	local out=$1 rw=$2 bs=$3 qd=$4
	shift 4
	drop_cache
	fio --name=bench "$@" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--numjobs="$jobs" --size="${size}M" --time_based \
		--runtime="$runtime" --ramp_time=2 --group_reporting \
		--output-format=json --output="$out" >/dev/null
	jq -r '[([.jobs[].read.iops] | add), ([.jobs[].read.bw_bytes] | add)]
		| "\(.[0] | floor) \(.[1] / 1e6 | floor)"' "$out"
}

rblk=("--ioengine=external:$engine" "--uri=tcp://127.0.0.1:$port/vol0")
nbd=(--ioengine=nbd "--uri=nbd+unix:///?socket=$dir/nbdkit.sock")

echo "fio $(fio --version | sed 's/^fio-//'), $jobs job(s), ${runtime}s each," \
	"$(nproc) CPUs, page cache $([ "$cache" = 1 ] && echo used || echo dropped)"
printf '%-34s %10s %10s %12s\n' "" IOPS MB/s "vs nbdkit"
for w in "randread 4k 32" "read 128k 16"; do
	read -r rw bs qd <<<"$w"
	r=$(run_fio "$dir/pull.json" "$rw" "$bs" "$qd" "${rblk[@]}" --read_mode=pull)
	p=$(run_fio "$dir/push.json" "$rw" "$bs" "$qd" "${rblk[@]}" --read_mode=push)
	n=$(run_fio "$dir/nbd.json" "$rw" "$bs" "$qd" "${nbd[@]}")
	echo "$rw $bs QD$qd:"
	for row in "rblk engine, pull reads|$r" "rblk engine, push reads|$p" \
		"nbd engine -> nbdkit file|$n"; do
		read -r iops mbs <<<"${row#*|}"
		read -r niops _ <<<"$n"
		awk -v name="${row%%|*}" -v i="$iops" -v m="$mbs" -v b="$niops" \
			'BEGIN { printf "  %-32s %10d %10d %11.2fx\n", name, i, m, b ? i / b : 0 }'
	done
done
