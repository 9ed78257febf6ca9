#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): fio 4k random reads at QD32 through `rblk nbd`
# (rblk-target over the tcp transport on loopback, then rblk nbd on a unix
# socket) against `nbdkit file` serving the same file on a unix socket, in
# the same run. Prints both IOPS and the ratio rblk/nbdkit.
#
#   tools/bench/nbd-vs-nbdkit.sh [--size MiB] [--runtime S] [--jobs N]
#                                [--iodepth N] [--cache]
#
# RBLK_TARGET_ARGS adds arguments to rblk-target (e.g. "--engine libaio");
# RBLK_BUILD names the build directory (default build/).
#
# --jobs N runs N fio jobs, i.e. N NBD connections (rblk nbd gets N queues).
# By default the page cache is dropped from the file before each run where
# possible (root) and nbdkit uses cache=none, since rblk-target reads with
# O_DIRECT; --cache leaves both sides to the page cache instead.
#
# The paths differ in what they do: rblk adds a hop (NBD client -> rblk nbd
# -> rblk-target), so on one host the ratio measures the overhead of that
# hop, not the RDMA data path.
set -euo pipefail

BENCH_NAME=nbd-vs-nbdkit
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
size=256 runtime=15 jobs=1 iodepth=32 cache=0
bench_args "--size=size --runtime=runtime --jobs=jobs --iodepth=iodepth
	--cache!cache" "$@"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${RBLK_BUILD:-$root/build}
bench_need fio nbdkit jq python3
bench_need_files "make" "$build/rblk-target" "$build/rblk"
bench_scratch

echo "preparing a ${size} MiB file ..."
head -c "$((size * 1024 * 1024))" /dev/urandom >"$dir/vol.img"

port=$(bench_free_port)
# shellcheck disable=SC2086 # word splitting of RBLK_TARGET_ARGS intended
"$build/rblk-target" --listen "tcp://127.0.0.1:$port" --allow-any-host --log-level info \
	${RBLK_TARGET_ARGS:-} --export "vol0=$dir/vol.img" >"$dir/target.log" 2>&1 &
pids+=($!)
wait_for "$dir/target.log" "listening on"
"$build/rblk" nbd "tcp://127.0.0.1:$port/vol0" --socket "$dir/rblk.sock" \
	--queues "$jobs" >"$dir/nbd.out" 2>"$dir/nbd.log" &
pids+=($!)
wait_for "$dir/nbd.out" "^ready "

bench_nbdkit "$dir/vol.img" "$dir/nbdkit.sock" "$dir/nbdkit.log"

run_fio()
{
	local sock=$1 out=$2
	drop_cache
	fio --name=randread --ioengine=nbd "--uri=nbd+unix:///?socket=$sock" \
		--rw=randread --bs=4k --iodepth="$iodepth" --numjobs="$jobs" \
		--size="${size}M" --time_based --runtime="$runtime" \
		--ramp_time=2 --group_reporting --output-format=json \
		--output="$out" >/dev/null
	jq '[.jobs[].read.iops] | add | floor' "$out"
}

echo "fio 4k randread, iodepth $iodepth, $jobs job(s), ${runtime}s each"
rblk_iops=$(run_fio "$dir/rblk.sock" "$dir/rblk.json")
nbdkit_iops=$(run_fio "$dir/nbdkit.sock" "$dir/nbdkit.json")
printf 'rblk nbd (via rblk-target, tcp): %10d IOPS\n' "$rblk_iops"
printf 'nbdkit file:                     %10d IOPS\n' "$nbdkit_iops"
awk -v a="$rblk_iops" -v b="$nbdkit_iops" \
	'BEGIN { printf "ratio rblk/nbdkit:               %10.2f\n", b ? a / b : 0 }'
