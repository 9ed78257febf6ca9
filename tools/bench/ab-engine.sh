#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): two builds of rblk side by side through the fio
# engine, over tcp on loopback (default) or over rdma, the volume a file on
# tmpfs, rounds interleaved (A B, B A, A B, ...) so drift on a shared
# machine hits both:
#
#   git archive OLD | tar -x -C /tmp/old && make -C /tmp/old BUILD=build-old \
#       all fio-engine
#   tools/bench/ab-engine.sh --a /tmp/old/build-old --b build [--rounds 5]
#       [--runtime 5] [--ramp 0] [--workers 2] [--workloads "randwrite 4k 32,randread 4k 1"]
#       [--scheme tcp|unix|rdma] [--addr IP] [--dir TMPFS] [--cpu procs|system]
#       [--results FILE] [--export-opts ,cache=buffered] [--drop-caches]
#       [--fio-opts "--read_mode=pull"] [--a-opts OPTS] [--b-opts OPTS]
#       [--target-opts OPTS]
#
# One build, two settings: --a and --b the same build, --a-opts / --b-opts
# the fio options of one side only, e.g. the engine's default polling
# against --poll=event at two depths:
#
#   tools/bench/ab-engine.sh --a build --b build --b-opts --poll=event \
#       --workloads "randread 4k 8,randread 4k 32" --rounds 7 --ramp 1 --runtime 4
#
# Over rxe in the test guest (both builds under a path the guest sees, e.g.
# /work/old, since the guest mounts the host root read-only):
#
#   BUILD=build tests/vm/run-vm.sh --out /tmp/ab --timeout 1200 -- \
#       tools/bench/ab-engine.sh --a /work/old/build-old --b build \
#       --scheme rdma --addr 192.0.2.1 --cpu system \
#       --results /tmp/ab-results.txt   (RBLK_VM_OUT is the guest's out dir)
#
# --dir puts the volume elsewhere (a disk's file system: add --drop-caches
# to drop the page cache before every run, as root). --export-opts is
# appended to the export's path (e.g. ",cache=buffered"; both builds must
# know it). --fio-opts adds options to every fio run (the engine's own,
# e.g. --read_mode=pull; both builds must know them). --target-opts adds
# options to every rblk-target (e.g. a host for TLS: TLS against
# plaintext is --target-opts "--host h:secret-file=K" --a-opts
# "--hostname=h --keyfile=K" --b-opts "--hostname=h --keyfile=K --tls=1").
#
# --ramp S runs each job S seconds before fio starts counting (fio's
# ramp_time): what a fresh target does once, at its first commands, stays
# out of the IOPS; the CPU time (counted from fio's start to its end, the
# target's start-up excluded) includes it, for both builds alike.
#
# --cpu system charges the whole machine's busy time (/proc/stat: user,
# nice, system, irq, softirq) instead of fio + target: on rxe the data
# movement runs in the kernel's softirqs and kworkers, which belong to
# neither process.
#
# Workloads (--workloads: "RW BS QD" separated by commas): by default 4k
# randread QD32 and 128k sequential read QD16 (issue 11's "not slower"
# pair). Prints each run's IOPS and CPU microseconds per I/O (fio's own
# user+system time plus the target's utime+stime from /proc, over the
# I/Os done) and, per workload, the medians and the per-round B/A ratios
# (median, min, max).
set -euo pipefail

BENCH_NAME=ab-engine
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
a='' b='' rounds=5 runtime=5 ramp=0 workers=2 scheme=tcp addr=127.0.0.1 tmp=/dev/shm
cpu=procs results_out='' eopts='' drop='' fopts='' aopts='' bopts='' topts=''
workloads='randread 4k 32,read 128k 16'
bench_args "--a=a --b=b --rounds=rounds --runtime=runtime --ramp=ramp --workers=workers --workloads=workloads
	--scheme=scheme --addr=addr --dir=tmp --cpu=cpu --results=results_out
	--export-opts=eopts --drop-caches!drop --fio-opts=fopts --a-opts=aopts --b-opts=bopts
	--target-opts=topts" "$@"
[ -n "$a" ] && [ -n "$b" ] || { echo "--a and --b are required" >&2; exit 2; }
case $scheme in tcp | unix | rdma) ;; *) echo "--scheme: tcp, unix or rdma" >&2; exit 2 ;; esac
case $cpu in procs | system) ;; *) echo "--cpu: procs or system" >&2; exit 2 ;; esac
dir=$(mktemp -d "$tmp/rblk-ab.XXXXXX")
file=$dir/vol.img
dd if=/dev/urandom of="$file" bs=1M count=256 status=none
tpid=''
cleanup() {
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

# utime + stime of PID in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# the whole machine's busy clock ticks (user nice system irq softirq)
sys_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

run() # BUILD SIDE-OPTS RW BS QD -> "IOPS CPU_US_PER_IO"
{
	local build=$1 sopts=$2 port=$((20000 + RANDOM % 20000)) open=() s0=0 fcpu=1
	local listen=$scheme://$addr:$port uri=$scheme://$addr:$port/v
	if [ "$scheme" = unix ]; then
		listen="unix:///?socket=$dir/t.sock" uri="unix:///v?socket=$dir/t.sock"
		rm -f "$dir/t.sock"
	fi
	# builds since exports became closed by default need the opt-in
	"$build"/rblk-target --help 2>&1 | grep -q -- --allow-any-host &&
		open=(--allow-any-host)
	# shellcheck disable=SC2086 # $topts: split on purpose
	"$build"/rblk-target --listen "$listen" \
		--workers "$workers" --ctl-socket none "${open[@]}" $topts \
		--export "v=$file$eopts" >"$dir/target.log" 2>&1 &
	tpid=$!
	wait_for "$dir/target.log" "listening"
	if [ -n "$drop" ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches
	fi
	# from here: the target's start-up is not charged to the I/Os
	if [ "$cpu" = procs ]; then
		s0=$(cpu_ticks "$tpid")
	else
		s0=$(sys_ticks)
		fcpu=0
	fi
	# shellcheck disable=SC2086 # $fopts, $sopts: split on purpose
	fio --name=ab --ioengine=external:"$build"/rblk-fio.so \
		--uri="$uri" --rw="$3" --bs="$4" \
		--iodepth="$5" --time_based --runtime="$runtime" --size=256M \
		--ramp_time="$ramp" \
		--norandommap --output-format=json --output="$dir/fio.json" \
		$fopts $sopts >/dev/null
	local tticks hz
	if [ "$cpu" = procs ]; then
		tticks=$(($(cpu_ticks "$tpid") - s0))
	else
		tticks=$(($(sys_ticks) - s0))
	fi
	hz=$(getconf CLK_TCK)
	kill "$tpid"
	wait "$tpid" || true
	tpid=''
	jq -r --argjson tt "$tticks" --argjson hz "$hz" --argjson f "$fcpu" '.jobs[0] |
		(.read.total_ios + .write.total_ios) as $n |
		((.usr_cpu + .sys_cpu) / 100 * .job_runtime / 1000 * $f) as $fcpu |
		"\((.read.iops + .write.iops) | floor) \(($fcpu + $tt / $hz) / $n * 1e6 * 100 | floor / 100)"' \
		"$dir/fio.json"
}

results=$dir/results
: >"$results"
for ((r = 1; r <= rounds; r++)); do
	IFS=, read -r -a wl <<<"$workloads"
	for w in "${wl[@]}"; do
		# A B in odd rounds, B A in even ones: whatever the first run
		# of a pair pays (a cold cache, a neighbour's burst) hits both
		# shellcheck disable=SC2086 # split on purpose
		if ((r % 2)); then
			read -r ia ca <<<"$(run "$a" "$aopts" $w)"
			read -r ib cb <<<"$(run "$b" "$bopts" $w)"
		else
			read -r ib cb <<<"$(run "$b" "$bopts" $w)"
			read -r ia ca <<<"$(run "$a" "$aopts" $w)"
		fi
		echo "round $r ${w// /_} A $ia B $ib cpuA $ca cpuB $cb" |
			tee -a "$results"
	done
done
bench_ab_summary "$results"
echo "A = $a${aopts:+ $aopts}, B = $b${bopts:+ $bopts}, $scheme://$addr, CPU: $cpu"
[ -z "$results_out" ] || cp "$results" "$results_out"
