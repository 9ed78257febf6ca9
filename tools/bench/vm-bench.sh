#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test), run INSIDE the rblk test guest (tests/vm, TCG,
# rdma_rxe on d0 = 192.0.2.1): fio on the same backing store through
#
#   engine           fio's rblk ioengine ($BUILD/rblk-fio.so) -> rblk-target
#                    (pull reads, adaptive polling: spin 50 us, then sleep)
#   engine-push      the same with --read_mode=push (target RDMA WRITEs)
#   engine-busy      the same with --poll=busy (never sleeps)
#   engine-event     the same with --poll=event (sleep at once; the default
#                    before 2026-11-27)
#   ublk     /dev/ublkbN from `rblk map --ublk --queues 2`, libaio, direct
#   nbd      /dev/nbdN   from `rblk map --nbd --queues 2`, libaio, direct
#   ublk-nospin, nbd-nospin  the same with `--poll-spin-us 0` (the queue
#            threads sleep at once; the default before 2026-11-27; not in
#            the default list)
#   nvme     the kernel's nvme-rdma -> nvmet-rdma (configfs), libaio, direct
#   wire     ib_read_bw -R and ib_write_bw -R (128 KiB), ib_read_lat -R
#            (4 KiB) on rxe0
#
# for the host benchmark's workloads (tools/bench/host-bench.sh): 4k
# randread and randwrite at QD1 and QD32, 128k sequential read and write at
# QD16, 70/30 4k randrw at QD32; one fio job each, time_based (push reads
# skip the write-only workloads). Results go line by line to
# $RBLK_VM_OUT/vm-bench-results.txt as they come (tools/bench/report.py
# makes the table from it, also from a run cut short); the markdown table
# with each path's ratio to its peer goes to $RBLK_VM_OUT/vm-bench.md, the
# fio JSON to $RBLK_VM_OUT/vm-bench/. From the host:
#
#   make bench-vm                       (tools/bench/bench.mk; also the chart
#                                        docs/bench-vm.png and the block in
#                                        docs/BENCHMARKS.md)
#   BUILD=build tests/vm/run-vm.sh --out /tmp/vmbench --timeout 1500 -- \
#       tools/bench/vm-bench.sh [--runtime S] [--ramp S] [--size MiB]
#       [--paths "engine engine-push engine-busy engine-event ublk nbd
#       ublk-nospin nbd-nospin nvme wire"] [--backing brd|file] [--rounds N] [--only REGEX]
#
#   tools/bench/vm-bench.sh --dry-run   on the host: check tools, print plan
#
# Rounds: every workload runs through all paths in turn, --rounds N times
# (default 5; A B C A B C ...); each line of the results file carries its
# round, a cell is the median of its rounds and a ratio the median of the
# per-round ratios (tools/bench/report.py). --only REGEX keeps the
# workloads whose name matches (grep -E), e.g. --only 'randread'.
# CPU us/IO is the whole guest's busy time (/proc/stat: user, nice,
# system, irq, softirq) during the run, per I/O: fio, the servers, rxe's
# and nvme-rdma's kernel work alike, so paths served in the kernel are
# charged too. The guest runs nothing else meanwhile.
#
# Backing: a brd ramdisk /dev/ram0 of --size MiB (default 512), zero-filled
# so every page exists; --backing file uses a file in the guest's /tmp
# (tmpfs: rblk-target falls back to buffered I/O, nvmet uses buffered_io).
# rblk-target and nvmet serve the same store side by side (both idle but
# for the path being measured).
#
# Everything is TCG-emulated, with rxe in software on the same 2 vCPUs that
# also run fio and the servers: the numbers compare the software paths
# against each other and against the kernel's nvme-rdma, not wire speeds.
set -uo pipefail

BENCH_NAME=vm-bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
runtime=${VMB_RUNTIME:-4} ramp=${VMB_RAMP:-1} size=${VMB_SIZE:-512}
paths=${VMB_PATHS:-"engine engine-push engine-busy engine-event ublk nbd nvme wire"}
rounds=${VMB_ROUNDS:-5} only=
backing=${VMB_BACKING:-brd}
dry=0 report='' chart='' doc=''
bench_args "--runtime=runtime --ramp=ramp --size=size --paths=paths
	--backing=backing --rounds=rounds --only=only --dry-run!dry
	--report=report --chart=chart --doc=doc" "$@"

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
ADDR=${RBLK_TEST_RDMA_ADDR:-192.0.2.1}
RDEV=${RBLK_TEST_RDMA_DEV:-rxe0}
PORT=7460
NQN=nqn.2026-11.io.rblk:vmbench
bench_workloads "$only"
# report.py: path:label:peer (label '~' = space), and the issue's targets
VMB_REPORT_PATHS="engine:rblk~fio~engine:nvme engine-push:engine,~push~reads:engine
	engine-busy:engine,~busy~poll:engine
	engine-event:engine,~event~poll~(no~spin):engine
	ublk:rblk~ublk:nvme nbd:rblk~nbd:nvme nvme:nvme-rdma~(kernel):
	ublk-nospin:ublk,~no~spin:ublk nbd-nospin:nbd,~no~spin:nbd
	wire-read-bw:wire~ib_read_bw~-R~128~KiB: wire-write-bw:wire~ib_write_bw~-R~128~KiB:
	wire-read-lat:wire~ib_read_lat~-R~4~KiB~(typical):"
VMB_REPORT_TARGETS=(
	--target "engine vs nvme-rdma, 4k randread QD32|engine|4k randread QD32|nvme|4k randread QD32|iops|1.2"
	--target "ublk vs nvme-rdma, 4k randread QD32|ublk|4k randread QD32|nvme|4k randread QD32|iops|1.0"
	--target "engine vs nvme-rdma, 4k randread QD1|engine|4k randread QD1|nvme|4k randread QD1|iops|0.9"
	--target "engine, push reads vs nvme-rdma, 4k randread QD1|engine-push|4k randread QD1|nvme|4k randread QD1|iops|0.9"
	--target "ublk vs nvme-rdma, 4k randread QD1|ublk|4k randread QD1|nvme|4k randread QD1|iops|0.8"
	--target "engine 128k seq read vs ib_read_bw 128 KiB (MB/s)|engine|128k seq read QD16|wire-read-bw|128k seq read QD16|mbs|0.8")

log()
{
	local u
	read -r u _ </proc/uptime
	printf '[%7.1f] %s\n' "$u" "$*"
}

# --report DIR [--chart PNG] [--doc FILE] (on the host, after a run): the
# table from DIR/vm-bench-results.txt again, with the chart, and the block
# between the vm-bench markers in FILE replaced (every round: FILE's
# bench-log/rounds.md)
if [ -n "$report" ]; then
	args=(--results "$report/vm-bench-results.txt" --md "$report/vm-bench.md"
		--paths "$VMB_REPORT_PATHS" "${VMB_REPORT_TARGETS[@]}" --raw)
	[ -s "$report/vm-bench-header.md" ] && args+=(--header "$report/vm-bench-header.md")
	[ -n "$chart" ] && args+=(--chart "$chart" --chart-title "rblk vs nvme-rdma, guest (rxe, TCG): IOPS")
	[ -n "$doc" ] && args+=(--doc "$doc" --begin "<!-- vm-bench:begin -->" --end "<!-- vm-bench:end -->"
		--rounds-doc "$(dirname "$doc")/bench-log/rounds.md")
	exec python3 "$root/tools/bench/report.py" "${args[@]}"
fi

missing=()
for t in fio jq awk python3 ib_read_bw ib_write_bw ib_read_lat nvme modprobe; do
	command -v $t >/dev/null 2>&1 || missing+=("$t")
done
for f in "$BUILD/rblk" "$BUILD/rblk-target" "$BUILD/rblk-fio.so"; do
	[ -e "$f" ] || missing+=("$f")
done

if [ "$dry" = 1 ]; then
	echo "vm-bench dry run: BUILD=$BUILD runtime=${runtime}s ramp=${ramp}s" \
		"size=${size}MiB backing=$backing paths='$paths'"
	[ ${#missing[@]} = 0 ] && echo "tools: all found" ||
		echo "missing: ${missing[*]}"
	for w in "${WORKLOADS[@]}"; do
		IFS='|' read -r name rw bs qd <<<"$w"
		echo "  workload: $name (fio --rw=$rw --bs=$bs --iodepth=$qd)"
	done
	n=0
	for p in $paths; do [ "$p" != wire ] && n=$((n + 1)); done
	# (push reads skip the two write-only workloads)
	echo "  fio runs: $((n * ${#WORKLOADS[@]} * rounds)) ($rounds rounds), about" \
		"$((n * ${#WORKLOADS[@]} * rounds * (runtime + ramp + 4) / 60)) min of fio"
	exit 0
fi

[ "${RBLK_VM:-0}" = 1 ] || { echo "vm-bench: run inside the guest (tests/vm/run-vm.sh)" >&2; exit 2; }
[ ${#missing[@]} = 0 ] || { echo "vm-bench: missing: ${missing[*]}" >&2; exit 1; }

OUT=${RBLK_VM_OUT:-/tmp}
JDIR=$OUT/vm-bench
mkdir -p "$JDIR"
W=$(mktemp -d /tmp/vm-bench.XXXXXX)
export RBLK_RUN_DIR=$W/run
# lines: path|workload|iops|MB/s|p50us|p99us|cpu us per I/O (guest)|round
RES=$OUT/vm-bench-results.txt
: >"$RES"
target_pid='' mapped=() bgpids=()

# ---- cleanup -----------------------------------------------------------
stop_pid()
{
	kill -0 "$1" 2>/dev/null || return 0
	kill -TERM "$1" 2>/dev/null
	bench_poll 10 bench_pid_gone "$1" || kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

cleanup()
{
	local d p
	set +e
	for d in "${mapped[@]+"${mapped[@]}"}"; do
		[ -n "$d" ] || continue
		timeout -k 5 60 "$BUILD/rblk" unmap "$d" >/dev/null 2>&1 ||
			timeout -k 5 30 "$BUILD/rblk" unmap --force "$d" >/dev/null 2>&1
	done
	bench_nvmet_down "$NQN"
	for p in "${bgpids[@]+"${bgpids[@]}"}"; do stop_pid "$p"; done
	[ -n "$target_pid" ] && stop_pid "$target_pid"
	cp "$W"/*.log "$JDIR/" 2>/dev/null
	cp "$RBLK_RUN_DIR"/*.log "$JDIR/" 2>/dev/null
	rm -rf "$W"
	[ "$backing" = brd ] && rmmod brd 2>/dev/null
}
trap cleanup EXIT

# ---- backing store -------------------------------------------------------
t_start=$(awk '{print $1}' /proc/uptime)
log "vm-bench: $(uname -r), $(nproc) vCPUs, $(fio --version), runtime ${runtime}s + ramp ${ramp}s per run"
if [ "$backing" = brd ]; then
	modprobe brd rd_nr=1 rd_size=$((size * 1024)) max_part=0 ||
		{ echo "vm-bench: modprobe brd failed" >&2; exit 1; }
	BACK=/dev/ram0
	bench_poll 5 test -b $BACK
	[ "$(blockdev --getsize64 $BACK)" = $((size * 1048576)) ] ||
		{ echo "vm-bench: $BACK is $(blockdev --getsize64 $BACK) bytes" >&2; exit 1; }
	log "backing: brd $BACK, ${size} MiB; zero-filling (allocates every page)"
	dd if=/dev/zero of=$BACK bs=1M count="$size" oflag=direct status=none ||
		{ echo "vm-bench: filling $BACK failed" >&2; exit 1; }
else
	BACK=$W/vol.img
	log "backing: file $BACK on $(stat -f -c %T /tmp), ${size} MiB"
	dd if=/dev/zero of="$BACK" bs=1M count="$size" status=none
fi
log "backing ready"

# ---- fio -------------------------------------------------------------------
# busy jiffies of the whole guest (user nice system irq softirq steal)
busy_ticks()
{
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}
hz=$(getconf CLK_TCK)

# run_fio PATH WORKLOAD-SPEC FIO-ARGS...: one run (round $round), JSON
# kept, result line added
run_fio()
{
	local path=$1 spec=$2 name rw bs qd json line t0 t1 w0 w1 cpu
	shift 2
	IFS='|' read -r name rw bs qd <<<"$spec"
	json=$JDIR/$path-$rw-$bs-qd$qd-r$round.json
	t0=$(busy_ticks) w0=$(awk '{ print $1 }' /proc/uptime)
	timeout -k 10 $((runtime + ramp + 120)) fio --name=b "$@" --rw="$rw" \
		--rwmixread=70 --bs="$bs" --iodepth="$qd" --numjobs=1 \
		--size="${size}M" --time_based --runtime="$runtime" \
		--ramp_time="$ramp" --norandommap --randrepeat=0 \
		--group_reporting --output-format=json --output="$json" \
		>"$W/fio.err" 2>&1
	if ! line=$(jq -r -f "$root/tools/bench/fio-row.jq" "$json" 2>/dev/null) ||
		[ -z "$line" ]; then
		log "  $path $name: FAILED: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
		echo "$path|$name|-|-|-|-|-|$round" >>"$RES"
		return 1
	fi
	t1=$(busy_ticks) w1=$(awk '{ print $1 }' /proc/uptime)
	IFS='|' read -r a b c d e <<<"$line"
	# the guest's busy time over the whole fio run, per I/O of the
	# measured part (IOPS x wall time of the run)
	cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v i="$a" -v w0="$w0" \
		-v w1="$w1" 'BEGIN { if (i == "-" || i <= 0 || w1 <= w0) { print "-"; exit }
			printf "%.1f", t / hz * 1e6 / (i * (w1 - w0)) }')
	echo "$path|$name|$a|$b|$c|$d|$cpu|$round" >>"$RES"
	log "  [$((++cell))] round $round $path $name: $a IOPS, $b MB/s, clat p50 $c us, p99 $d us, $cpu us guest CPU/IO (fio's own $e)"
}
cell=0

# push changes how reads move: the write-only workloads would be the same
skip_cell()
{
	[ "$1" = engine-push ] && [[ $2 == *"|write|"* || $2 == *"|randwrite|"* ]]
}

failed_all()
{
	local w
	for w in "${WORKLOADS[@]}"; do echo "$1|${w%%|*}|-|-|-|-|-|1" >>"$RES"; done
	log "$1: skipped: $2"
}

start_target()
{
	[ -n "$target_pid" ] && return 0
	"$BUILD/rblk-target" --listen "rdma://$ADDR:$PORT" --allow-any-host --log-level info \
		--export "vol=$BACK" >"$W/target.log" 2>&1 &
	target_pid=$!
	(wait_for "$W/target.log" "listening on" 30 "$target_pid") ||
		{ target_pid=''; return 1; }
	log "rblk-target up: $(grep -E 'export|O_DIRECT|buffered' "$W/target.log" | head -n 2 | tr '\n' ' ')"
}

stop_target()
{
	[ -n "$target_pid" ] && stop_pid "$target_pid"
	target_pid=''
}

map()
{
	local kind=$1 out
	shift
	out=$(timeout -k 5 180 "$BUILD/rblk" map "rdma://$ADDR:$PORT/vol" --"$kind" --queues 2 "$@" 2>"$W/map.err") ||
		{ cat "$W/map.err"; return 1; }
	DEV=$(grep -o '/dev/[a-z]*[0-9]*' <<<"$out" | head -n 1)
	[ -b "$DEV" ] || { echo "map printed '$out'"; cat "$W/map.err"; return 1; }
	mapped+=("$DEV")
	log "$kind: mapped as $DEV ($(cat "/sys/block/${DEV#/dev/}/queue/max_sectors_kb") KiB max, $(ls "/sys/block/${DEV#/dev/}/mq" | wc -l) hw queues)"
}

unmap()
{
	timeout -k 5 120 "$BUILD/rblk" unmap "$DEV" || log "unmap $DEV failed"
	mapped=("${mapped[@]/$DEV/}")
}

# The setup_* functions make a path ready and put its fio arguments in
# PARGS[path] (no spaces inside an argument); a path that cannot be set up
# gets failure rows instead.
declare -A PARGS
setup_engine()
{
	local path=$1 extra=''
	case $path in
	engine-push) extra=' --read_mode=push' ;;
	engine-busy) extra=' --poll=busy' ;;
	engine-event) extra=' --poll=event' ;;
	esac
	log "path $path: fio ioengine external:rblk-fio.so$extra -> rdma://$ADDR:$PORT/vol"
	start_target || { failed_all "$path" "rblk-target did not start"; return; }
	PARGS[$path]="--ioengine=external:$BUILD/rblk-fio.so --uri=rdma://$ADDR:$PORT/vol$extra"
}

setup_dev()
{
	local path=$1 kind=${1%-nospin} extra=()
	[ "$path" != "$kind" ] && extra=(--poll-spin-us 0)
	log "path $path: rblk map --$kind --queues 2${extra[*]:+ ${extra[*]}}, fio libaio direct"
	start_target || { failed_all "$path" "rblk-target did not start"; return; }
	[ "$kind" = ublk ] && [ ! -c /dev/ublk-control ] && { failed_all "$path" "no /dev/ublk-control"; return; }
	map "$kind" "${extra[@]}" || { failed_all "$path" "rblk map --$kind failed"; return; }
	PARGS[$path]="--ioengine=libaio --direct=1 --filename=$DEV"
}

setup_nvme()
{
	local mq
	log "path nvme: nvme-rdma -> nvmet-rdma, namespace $BACK"
	bench_nvmet_up "$BACK" "$ADDR" "$NQN" ||
		{ bench_nvmet_down "$NQN"; failed_all nvme "$nvme_err"; return; }
	# native multipath: the hardware queues are on the path nvmeXcYnZ
	mq=$(ls -d "/sys/block/${nvme_dev#/dev/}/mq" /sys/block/nvme*c*n*/mq 2>/dev/null | head -n 1)
	log "nvme: connected as $nvme_dev ($(cat "/sys/block/${nvme_dev#/dev/}/queue/max_sectors_kb") KiB max, $( [ -n "$mq" ] && ls "$mq" | wc -l || echo '?') hw queues)"
	PARGS[nvme]="--ioengine=libaio --direct=1 --filename=$nvme_dev"
}

# perftest_pair TOOL PORT LOG ARGS...: server in the background, client
# against it (retried while the server comes up); client output in LOG
perftest_pair()
{
	local tool=$1 port=$2 out=$3 p c
	shift 3
	"$tool" -d "$RDEV" -R -p "$port" "$@" -F >"$W/$tool-s.log" 2>&1 &
	p=$!
	bgpids+=("$p")
	for c in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.5
		timeout $((runtime + 90)) "$tool" -d "$RDEV" -R -p "$port" "$@" -F "$ADDR" \
			>"$out" 2>&1 && break
	done
	stop_pid "$p"
	cp "$out" "$JDIR/$tool.txt"
}

bench_wire()
{
	local bw
	stop_target
	for t in read write; do
		log "wire: ib_${t}_bw -R -s 131072 -D $runtime on $RDEV"
		perftest_pair "ib_${t}_bw" $((18530 + ${#t})) "$W/ib${t}bw-c.log" \
			-s 131072 -D "$runtime"
		# #bytes #iterations BW peak BW average MsgRate
		bw=$(awk '$1 == 131072 { print $4 }' "$W/ib${t}bw-c.log" | tail -n 1)
		log "  ib_${t}_bw 128 KiB: ${bw:-?} MB/s"
		[ "$t" = read ] && w="128k seq read QD16" || w="128k seq write QD16"
		echo "wire-$t-bw|$w|-|${bw:--}|-|-|-" >>"$RES"
	done
	log "wire: ib_read_lat -R -s 4096 -n 2000"
	perftest_pair ib_read_lat 18540 "$W/iblat-c.log" -s 4096 -n 2000
	# #bytes #iter t_min t_max t_typical t_avg t_stdev p99 p99.9
	lat=$(awk '$1 == 4096 { print $5 "|" $8 }' "$W/iblat-c.log" | tail -n 1)
	log "  ib_read_lat 4 KiB: typical|p99 = ${lat:-?} us"
	echo "wire-read-lat|4k randread QD1|-|-|${lat:--|-}|-" >>"$RES"
}

# Set every path up first, then run each workload through all of them in
# turn: drift on the host (TCG shares its CPUs) hits the paths of one
# workload alike. Idle servers (rblk-target, the rblk map daemons, nvmet)
# cost next to nothing while another path runs.
for p in $paths; do
	case $p in
	engine | engine-*) setup_engine "$p" ;;
	ublk | nbd | ublk-nospin | nbd-nospin) setup_dev "$p" ;;
	nvme) setup_nvme ;;
	wire) ;;
	*) log "unknown path '$p' skipped" ;;
	esac
done
for w in "${WORKLOADS[@]}"; do
	for ((round = 1; round <= rounds; round++)); do
		log "workload ${w%%|*}, round $round of $rounds"
		for p in $paths; do
			[ -n "${PARGS[$p]:-}" ] || continue
			skip_cell "$p" "$w" && continue
			# shellcheck disable=SC2086 # PARGS holds several arguments
			run_fio "$p" "$w" ${PARGS[$p]}
		done
	done
done
round=1
# the wire's ceiling alone on the link
for d in "${mapped[@]+"${mapped[@]}"}"; do [ -n "$d" ] && DEV=$d && unmap; done
bench_nvmet_down "$NQN"
stop_target
[[ " $paths " == *" wire "* ]] && bench_wire

# ---- table ---------------------------------------------------------------
t_end=$(awk '{print $1}' /proc/uptime)
md=$OUT/vm-bench.md
{
	echo "$(uname -r), $(nproc) vCPUs (TCG), $(fio --version), backing:" \
		"$([ "$backing" = brd ] && echo "brd /dev/ram0" || echo "file in tmpfs"), ${size} MiB;" \
		"one fio job per cell, ${runtime} s + ${ramp} s ramp, time_based, norandommap;" \
		"each workload through every path in turn, $rounds rounds (A B C A B C ...): a cell is the median of its rounds, a ratio the median of per-round ratios (min-max);" \
		"CPU us/IO is the whole guest's busy time during the run per I/O (fio, servers, rxe and nvme-rdma kernel work alike)." \
		"Guest wall time: $(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.0f", b - a }') s."
	echo
	echo "Every cell: \`fio --name=b PATH-ARGS --rw=RW --rwmixread=70 --bs=BS --iodepth=QD" \
		"--numjobs=1 --size=${size}M --time_based --runtime=$runtime --ramp_time=$ramp" \
		"--norandommap --randrepeat=0 --group_reporting --output-format=json\` with PATH-ARGS" \
		"\`--ioengine=external:build/rblk-fio.so --uri=rdma://$ADDR:$PORT/vol\`" \
		"(engine; plus \`--read_mode=push\`, \`--poll=busy\`, \`--poll=event\`)" \
		"or \`--ioengine=libaio --direct=1 --filename=/dev/ublkbN|/dev/nbdN|/dev/nvmeXnY\`." \
		"Servers: \`rblk-target --listen rdma://$ADDR:$PORT --export vol=$BACK\`;" \
		"\`rblk map rdma://$ADDR:$PORT/vol --ublk|--nbd --queues 2\`;" \
		"nvmet: a configfs subsystem with namespace $BACK on an rdma port $ADDR:4420," \
		"\`nvme connect -t rdma -a $ADDR -s 4420 -n $NQN\`." \
		"Wire: \`ib_read_bw -d $RDEV -R -s 131072 -D $runtime -F [$ADDR]\`, the same with ib_write_bw," \
		"\`ib_read_lat -d $RDEV -R -s 4096 -n 2000 -F [$ADDR]\`." \
		"All paths are set up at once and each workload runs through them in turn."
} >"$OUT/vm-bench-header.md"
python3 "$root/tools/bench/report.py" --results "$RES" \
	--header "$OUT/vm-bench-header.md" --md "$md" --raw \
	--paths "$VMB_REPORT_PATHS" "${VMB_REPORT_TARGETS[@]}"
cat "$md"
log "vm-bench: done; table in $md"
if grep -qE '\|-\|-\|-\|-\|-\|[0-9]+$' "$RES"; then
	log "vm-bench: some runs failed (see above)"
	exit 1
fi
exit 0
