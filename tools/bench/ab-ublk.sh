#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): two builds of rblk side by side through a mapped
# block device, run INSIDE the test guest (ublk_drv or nbd loaded, rxe0 on
# 192.0.2.1): each run starts the build's rblk-target on a file on tmpfs,
# maps it with the build's `rblk map --ublk` (or --nbd), runs fio (libaio,
# O_DIRECT) on the device, unmaps and stops the target. Rounds interleave
# (A B, B A, ...) as in ab-engine.sh, which has the same output:
#
#   BUILD=build tests/vm/run-vm.sh --out /tmp/ab --timeout 1200 -- \
#       tools/bench/ab-ublk.sh --a /work/old/build --b build [--rounds 5]
#       [--runtime 5] [--ramp 1] [--queues 2] [--frontend ublk|nbd]
#       [--workloads "randread 4k 32,randread 4k 1,read 128k 16"]
#       [--addr 192.0.2.1] [--results FILE]
#
# CPU microseconds per I/O are the whole machine's busy time
# (/proc/stat: user, nice, system, irq, softirq) over the I/Os: the queue
# threads, the target, rxe's softirqs and fio, from fio's start to its end.
set -euo pipefail

BENCH_NAME=ab-ublk
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
a='' b='' rounds=5 runtime=5 ramp=1 queues=2 fe=ublk addr=192.0.2.1
results_out='' workloads='randread 4k 32,randread 4k 1,read 128k 16'
bench_args "--a=a --b=b --rounds=rounds --runtime=runtime --ramp=ramp --queues=queues
	--frontend=fe --workloads=workloads --addr=addr --results=results_out" "$@"
[ -n "$a" ] && [ -n "$b" ] || { echo "--a and --b are required" >&2; exit 2; }
case $fe in ublk | nbd) ;; *) echo "--frontend: ublk or nbd" >&2; exit 2 ;; esac
dir=$(mktemp -d /dev/shm/rblk-abu.XXXXXX)
file=$dir/vol.img
dd if=/dev/urandom of="$file" bs=1M count=256 status=none
export RBLK_RUN_DIR=$dir/run
mkdir -p "$RBLK_RUN_DIR"
tpid='' dev='' mapped_by=''
cleanup() {
	[ -z "$dev" ] || "$mapped_by"/rblk unmap "$dev" >/dev/null 2>&1 || true
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

sys_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

run() # BUILD RW BS QD -> "IOPS CPU_US_PER_IO"
{
	local build=$1 port=$((20000 + RANDOM % 20000)) open=() s0 tticks hz
	"$build"/rblk-target --help 2>&1 | grep -q -- --allow-any-host &&
		open=(--allow-any-host)
	"$build"/rblk-target --listen "rdma://$addr:$port" --ctl-socket none \
		"${open[@]}" --export "v=$file" >"$dir/target.log" 2>&1 &
	tpid=$!
	wait_for "$dir/target.log" "listening"
	dev=$("$build"/rblk map "rdma://$addr:$port/v" "--$fe" \
		--queues "$queues" 2>"$dir/map.err") ||
		{ cat "$dir/map.err" >&2; exit 1; }
	mapped_by=$build
	s0=$(sys_ticks)
	fio --name=ab --filename="$dev" --ioengine=libaio --direct=1 \
		--rw="$2" --bs="$3" --iodepth="$4" --time_based \
		--runtime="$runtime" --ramp_time="$ramp" --size=256M \
		--norandommap --output-format=json --output="$dir/fio.json" \
		>/dev/null
	tticks=$(($(sys_ticks) - s0))
	hz=$(getconf CLK_TCK)
	"$build"/rblk unmap "$dev" >/dev/null
	dev=''
	kill "$tpid"
	wait "$tpid" || true
	tpid=''
	jq -r --argjson tt "$tticks" --argjson hz "$hz" '.jobs[0] |
		(.read.total_ios + .write.total_ios) as $n |
		"\((.read.iops + .write.iops) | floor) \(($tt / $hz) / $n * 1e6 * 100 | floor / 100)"' \
		"$dir/fio.json"
}

results=$dir/results
: >"$results"
# --results gets each round as it ends: a run cut short keeps what it did
[ -z "$results_out" ] || : >"$results_out"
for ((r = 1; r <= rounds; r++)); do
	IFS=, read -r -a wl <<<"$workloads"
	for w in "${wl[@]}"; do
		# shellcheck disable=SC2086 # split on purpose
		if ((r % 2)); then
			read -r ia ca <<<"$(run "$a" $w)"
			read -r ib cb <<<"$(run "$b" $w)"
		else
			read -r ib cb <<<"$(run "$b" $w)"
			read -r ia ca <<<"$(run "$a" $w)"
		fi
		echo "round $r ${w// /_} A $ia B $ib cpuA $ca cpuB $cb" |
			tee -a "$results" ${results_out:+"$results_out"}
	done
done
bench_ab_summary "$results"
echo "A = $a, B = $b, $fe over rdma://$addr, --queues $queues, CPU: system"
