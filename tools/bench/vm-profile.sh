#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Where the guest's CPU per I/O goes (not a test): run INSIDE the rblk test
# guest (tests/vm, TCG, rdma_rxe on d0 = 192.0.2.1). For each path, one
# fio job runs under `perf record -a` (cpu-clock on every vCPU, a sample
# per 250 us); the busy samples times 250 us over fio's I/Os give
# microseconds of CPU per I/O, by thread group and kernel/user (the
# connect and the first I/Os are in it; a run of 10 s makes them small):
#
#   pull     fio's rblk ioengine, pull reads (rdma's default)
#   push     the same with --read_mode=push
#   ublk     /dev/ublkbN from `rblk map --ublk` (default queues), libaio
#   nvme     the kernel's nvme-rdma -> nvmet-rdma (configfs), libaio
#
# From the host:
#
#   BUILD=build tests/vm/run-vm.sh --out /tmp/vmprof --timeout 900 -- \
#       tools/bench/vm-profile.sh [--paths "pull push ublk nvme"]
#       [--rw randread] [--bs 4k] [--qd 32] [--seconds 10]
#
# Output: a table per path on stdout and in $RBLK_VM_OUT/vm-profile.txt,
# each path's `perf report` by symbol in $RBLK_VM_OUT/vm-profile/. Under
# TCG, cpu-clock samples land where interrupts are enabled again
# (_raw_spin_unlock_irqrestore, finish_task_switch), so read symbols with
# care; the split by thread is sound. "kernel workers" is rxe's packet
# processing (its requester, responder and completer run on workqueues)
# and the kernel's own CQ work (nvme-rdma's, nvmet's).
set -uo pipefail

BENCH_NAME=vm-profile
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
OUT=${RBLK_VM_OUT:-/tmp}
paths="pull push ublk nvme" rw=randread bs=4k qd=32 secs=10
ADDR=192.0.2.1 PORT=7460 NQN=nqn.2026-11.io.rblk:vmprofile
bench_args "--paths=paths --rw=rw --bs=bs --qd=qd --seconds=secs" "$@"
[ "${RBLK_VM:-}" = 1 ] || { echo "vm-profile: run me inside the test guest (tests/vm/run-vm.sh)" >&2; exit 2; }
bench_need fio perf jq nvme python3

W=$(mktemp -d) target='' ublk=''
mkdir -p "$OUT/vm-profile"
cleanup()
{
	set +e
	[ -n "$ublk" ] && timeout 60 "$BUILD/rblk" unmap "$ublk" >/dev/null 2>&1
	bench_nvmet_down "$NQN"
	[ -n "$target" ] && kill "$target" 2>/dev/null && wait "$target" 2>/dev/null
	rmmod brd 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

modprobe brd rd_nr=1 rd_size=$((512 * 1024)) max_part=0 || exit 1
dd if=/dev/zero of=/dev/ram0 bs=1M count=512 oflag=direct status=none || exit 1
"$BUILD/rblk-target" --listen "rdma://$ADDR:$PORT" --allow-any-host \
	--export vol=/dev/ram0 --ctl-socket none >"$W/target.log" 2>&1 &
target=$!
wait_for "$W/target.log" "listening on"

declare -A ARGS
ARGS[pull]="--ioengine=external:$BUILD/rblk-fio.so --uri=rdma://$ADDR:$PORT/vol"
ARGS[push]="${ARGS[pull]} --read_mode=push"
for p in $paths; do
	case $p in
	pull | push) ;;
	ublk)
		ublk=$("$BUILD/rblk" map "rdma://$ADDR:$PORT/vol" --ublk |
			grep -o '/dev/ublkb[0-9]*' | head -n 1)
		[ -b "$ublk" ] || { echo "vm-profile: rblk map --ublk failed" >&2; exit 1; }
		ARGS[ublk]="--ioengine=libaio --direct=1 --filename=$ublk" ;;
	nvme)
		bench_nvmet_up /dev/ram0 "$ADDR" "$NQN" ||
			{ echo "vm-profile: $nvme_err" >&2; exit 1; }
		ARGS[nvme]="--ioengine=libaio --direct=1 --filename=$nvme_dev" ;;
	*) echo "vm-profile: unknown path '$p'" >&2; exit 2 ;;
	esac
done

echo "vm-profile: $rw $bs QD$qd, ${secs} s per path under perf record -a, $(nproc) vCPUs, $(uname -r)" |
	tee "$OUT/vm-profile.txt"
for p in $paths; do
	# perf wraps the fio run: every sample of both CPUs while it runs
	# shellcheck disable=SC2086
	perf record -a -e cpu-clock -c 250000 -o "$W/$p.data" -- \
		fio --name=p ${ARGS[$p]} --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--size=512M --time_based --runtime="$secs" --norandommap \
		--randrepeat=0 --output-format=json --output="$W/$p.json" \
		>"$W/fio.err" 2>&1 || { cat "$W/fio.err" >&2; exit 1; }
	perf report -i "$W/$p.data" --sort comm,dso -n --stdio 2>/dev/null >"$W/$p.dso"
	perf report -i "$W/$p.data" --sort comm,sym --stdio 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -n 200 >"$OUT/vm-profile/$p.sym"
	python3 - "$p" "$W/$p.json" "$W/$p.dso" <<'EOF' | tee -a "$OUT/vm-profile.txt"
import json, re, sys
path, js, dso = sys.argv[1], sys.argv[2], sys.argv[3]
job = json.load(open(js))['jobs'][0]
ios = job['read']['total_ios'] + job['write']['total_ios']
iops = job['read']['iops'] + job['write']['iops']
period_us = 250
samples = {}   # (group, kernel|user) -> samples
for line in open(dso):
    m = re.match(r'\s*[\d.]+%\s+(\d+)\s+(\S+)\s+(.*\S)', line)
    if not m:
        continue
    n, comm, where = int(m.group(1)), m.group(2), m.group(3)
    if comm == 'swapper':
        continue
    # rxe's packet work and the kernel's CQ work (nvme-rdma's, nvmet's)
    # run on workqueues whose threads rename themselves per work item
    if comm.startswith(('kworker', 'kthreadd', 'ksoftirqd')):
        g = 'kernel workers'
    elif comm.startswith('rblk-worker'):
        g = 'rblk-target workers'
    elif comm.startswith('rblk-ublk'):
        g = 'rblk ublk queues'
    elif comm == 'fio':
        g = 'fio'
    else:
        g = 'other'
    k = (g, 'kernel' if 'kernel' in where else 'user')
    samples[k] = samples.get(k, 0) + n
us = lambda n: n * period_us / ios
print(f"{path}: {iops:,.0f} IOPS; CPU us per I/O (busy samples x 250 us / {ios:,} I/Os)")
for (g, k), n in sorted(samples.items(), key=lambda x: -x[1]):
    if us(n) < 0.05:
        continue
    print(f"  {g:22} {k:6} {us(n):7.1f}")
print(f"  {'busy, all':22} {'':6} {us(sum(samples.values())):7.1f}")
EOF
done
