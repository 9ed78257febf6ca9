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

size=256 runtime=10 jobs=1 cache=0 where=${TMPDIR:-/tmp}
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--cache) cache=1; shift ;;
	--dir) where=$2; shift 2 ;;
	-h | --help)
		awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print; next }
			NR > 3 { exit }' "$0"
		exit 0 ;;
	*) echo "fio-engine-vs-nbdkit: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${RBLK_BUILD:-$root/build}
engine=$build/rblk-fio.so
for t in fio nbdkit jq python3; do
	command -v $t >/dev/null ||
		{ echo "fio-engine-vs-nbdkit: $t not found" >&2; exit 1; }
done
[ -x "$build/rblk-target" ] ||
	{ echo "fio-engine-vs-nbdkit: build first (make)" >&2; exit 1; }
[ -f "$engine" ] ||
	{ echo "fio-engine-vs-nbdkit: $engine missing (make fio-engine)" >&2; exit 1; }
fio --enghelp=nbd >/dev/null 2>&1 ||
	{ echo "fio-engine-vs-nbdkit: this fio has no nbd engine" >&2; exit 1; }

BENCH_NAME=fio-engine-vs-nbdkit
BENCH_DIR_PARENT="$where"
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"

echo "preparing a ${size} MiB file in $where ($(stat -f -c %T "$where")) ..."
head -c "$((size * 1024 * 1024))" /dev/urandom >"$dir/vol.img"

port=$(python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/rblk-target" --listen "tcp://127.0.0.1:$port" --allow-any-host --log-level warn \
	--export "vol0=$dir/vol.img" >"$dir/target.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 200; i++)); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.05
done

nbdkit_cache=none
[ "$cache" = 1 ] && nbdkit_cache=default
nbdkit -f -U "$dir/nbdkit.sock" file "$dir/vol.img" cache=$nbdkit_cache \
	>"$dir/nbdkit.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do [ -S "$dir/nbdkit.sock" ] && break; sleep 0.05; done
[ -S "$dir/nbdkit.sock" ] || { cat "$dir/nbdkit.log" >&2; exit 1; }

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
