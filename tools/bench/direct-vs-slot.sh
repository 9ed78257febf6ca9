#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): direct volume access against the slot path on
# the same RAM export of one rblk-target, through the rblk fio engine
# (direct_access=on vs direct_access=off), in one run. Workloads: 4k
# random reads at QD32, 128k sequential reads at QD16, 4k random writes at
# QD32. Prints IOPS, MB/s, p50/p99 completion latency, rblk-target's CPU
# time per I/O (user + system of the daemon process, from /proc, ramp
# included, so approximate; on rdma the HCA's work - rxe's, in the kernel -
# is not in it) and the ratio direct/slot, and with --md FILE appends the
# rows as a markdown table.
#
#   tools/bench/direct-vs-slot.sh [--transport tcp|rdma] [--addr ADDR]
#                                 [--size MiB] [--runtime S] [--md FILE]
#
# tcp (default) runs on loopback; rdma needs an RDMA device with ADDR on
# it (in the test guest: --transport rdma --addr 192.0.2.1 over rdma_rxe).
# On the slot path the target copies between the volume and the slot for
# every I/O and answers each command; on the direct path the initiator
# RDMA READs/WRITEs the registered volume and the target's CPU does
# nothing (rdma), or only the transport's copy (tcp, whose one-sided
# operations are served by the target's progress loop).
set -euo pipefail

BENCH_NAME=direct-vs-slot
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
transport=tcp addr='' size=256 runtime=5 md=''
bench_args "--transport=transport --addr=addr --size=size --runtime=runtime
	--md=md" "$@"
case $transport in
tcp) addr=${addr:-127.0.0.1} ;;
rdma) addr=${addr:-${RBLK_TEST_RDMA_ADDR:-192.0.2.1}} ;;
*) echo "direct-vs-slot: --transport tcp or rdma" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${RBLK_BUILD:-${BUILD:-$root/build}}
case $build in /*) ;; *) build=$root/$build ;; esac
engine=$build/rblk-fio.so
bench_need fio jq python3
bench_need_files "make all fio-engine" "$build/rblk-target" "$engine"

cache=1
bench_scratch

port=$(bench_free_port)
url=$transport://$addr:$port
"$build/rblk-target" --listen "$url" --allow-any-host --log-level warn \
	--export "mem=ram:${size}M" >"$dir/target.log" 2>&1 &
tpid=$!
pids+=("$tpid")
hz=$(getconf CLK_TCK)
# the target's user + system CPU time so far, in clock ticks
tcpu() { awk '{ print $14 + $15 }' "/proc/$tpid/stat"; }
vol_up() { "$build/rblk" info "$url/mem" >/dev/null 2>&1; }
bench_poll 10 vol_up || true

# fill the volume once, so reads return data on both paths
fio --name=fill "--ioengine=external:$engine" "--uri=$url/mem" \
	--rw=write --bs=1M --iodepth=4 --size="${size}M" \
	--output="$dir/fill.out" >/dev/null

# run_fio OUT RW BS QD MODE: prints "IOPS MB/s p50us p99us target-cpu-us/IO"
run_fio()
{
	local out=$1 rw=$2 bs=$3 qd=$4 mode=$5 dd=read c0 c1
	case $rw in *write) dd='write' ;; esac
	c0=$(tcpu)
	fio --name=bench "--ioengine=external:$engine" "--uri=$url/mem" \
		--direct_access="$mode" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--size="${size}M" --time_based --runtime="$runtime" \
		--ramp_time=1 --output-format=json --output="$out" >/dev/null
	c1=$(tcpu)
	jq -r --arg d "$dd" --argjson cpu "$(((c1 - c0) * 1000000 / hz))" \
		--argjson t "$((runtime + 1))" '.jobs[0][$d] |
		"\(.iops | floor) \(.bw_bytes / 1e6 | floor) \(.clat_ns.percentile["50.000000"] / 1000 | floor) \(.clat_ns.percentile["99.000000"] / 1000 | floor) \(if .iops > 0 then $cpu / (.iops * $t) * 10 | floor / 10 else 0 end)"' "$out"
}

echo "direct vs slot, $url/mem (ram:${size}M), fio $(fio --version | sed 's/^fio-//')," \
	"${runtime}s each, $(nproc) CPUs"
printf '%-22s %-7s %10s %8s %9s %9s %10s %8s\n' workload path IOPS MB/s "p50 us" "p99 us" "tgt us/IO" ratio
rows=()
for w in "randread 4k 32" "read 128k 16" "randwrite 4k 32"; do
	read -r rw bs qd <<<"$w"
	s=$(run_fio "$dir/slot.json" "$rw" "$bs" "$qd" off)
	d=$(run_fio "$dir/direct.json" "$rw" "$bs" "$qd" on)
	read -r si sm sp5 sp9 sc <<<"$s"
	read -r di dm dp5 dp9 dc <<<"$d"
	ratio=$(awk -v a="$di" -v b="$si" 'BEGIN { printf "%.2f", b ? a / b : 0 }')
	printf '%-22s %-7s %10d %8d %9d %9d %10s %8s\n' "$rw $bs QD$qd" slot "$si" "$sm" "$sp5" "$sp9" "$sc" ""
	printf '%-22s %-7s %10d %8d %9d %9d %10s %7sx\n' "" direct "$di" "$dm" "$dp5" "$dp9" "$dc" "$ratio"
	rows+=("| $transport | $rw $bs QD$qd | $si | $sm | $sp5 / $sp9 | $sc | $di | $dm | $dp5 / $dp9 | $dc | **${ratio}x** |")
done
if [ -n "$md" ]; then
	{
		echo "| transport | workload | slot IOPS | slot MB/s | slot p50/p99 us | slot target CPU us/IO | direct IOPS | direct MB/s | direct p50/p99 us | direct target CPU us/IO | direct / slot |"
		echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		printf '%s\n' "${rows[@]}"
	} >>"$md"
fi
