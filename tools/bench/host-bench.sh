#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): `make bench`. Fixed fio workloads, each run on the
# same backing file through every path, side by side (one path after the
# other for each workload, so the machine's drift hits them alike):
#
#   engine           fio rblk ioengine (build/rblk-fio.so) -> rblk-target,
#                    tcp transport on loopback; default settings (push
#                    reads, the tcp transport's preference; adaptive polling,
#                    50 us)
#   engine-unix      the same over a unix socket (unix:///vol0?socket=...),
#                    the socket family nbdkit-unix is measured on
#   engine-pull      the same, --read_mode=pull
#   engine-buffered  the same against the file exported cache=buffered
#                    (page cache and read-ahead instead of O_DIRECT)
#   engine-busy      the same, --poll=busy (getevents never sleeps)
#   engine-event     the same, --poll=event (getevents sleeps at once; the
#                    default before 2026-11-27)
#   rblk-nbd         fio nbd engine -> `rblk nbd` (unix socket) -> rblk-target
#   rblk-nbd-unix    the same, `rblk nbd` connected to the target's unix
#                    socket (not in the default list)
#   rblk-nbd-nospin  the same, `rblk nbd --poll-spin-us 0` (sleeps at once;
#                    the default before 2026-11-27; not in the default list)
#   engine-tspin     engine-unix to a second rblk-target that spins before
#                    it sleeps (--poll-spin-us 50; not in the default list)
#   rblk-nbd-tspin   rblk-nbd-unix to that spinning target (not in the
#                    default list)
#   nbdkit-unix      fio nbd engine -> `nbdkit file cache=none`, unix socket
#   nbdkit-tcp       fio nbd engine -> `nbdkit file cache=none`, TCP loopback
#   io_uring         fio io_uring engine, O_DIRECT, on the file itself (the
#                    ceiling: no server, no protocol)
#
# Workloads: 4k randread and randwrite at QD1 and QD32, 128k sequential read
# and write at QD16, 70/30 4k randrw at QD32 (pull reads skip the write-only
# ones). The page cache is dropped before every cell (root). Prints a
# progress line per cell and, at the end, a markdown table (IOPS, MB/s,
# p50/p99 completion latency, CPU per I/O, ratio to the path's peer).
#
#   tools/bench/host-bench.sh [--runtime S] [--ramp S] [--size MiB]
#       [--jobs N] [--paths "engine ... io_uring"] [--only REGEX] [--dir DIR]
#       [--rounds N]
#       [--doc docs/BENCHMARKS.md] [--marker host-bench]
#       [--chart docs/bench-host.png]
#
# BENCH_RUNTIME (default 5) / BENCH_RAMP (1) / BENCH_SIZE (256) /
# BENCH_JOBS (1) set the defaults; BUILD the build directory (build).
# --rounds N (default 5; BENCH_ROUNDS) runs the paths of each workload N
# times in turn (A B C A B C ...): each cell is the median of its rounds
# (min and max shown), and a path's ratio to its peer is the median of the
# per-round ratios, so the machine's drift between rounds cancels out. The
# results file (kept as $BUILD/host-bench-results.txt) has every round;
# the doc gets them too, collapsed. --repeat is the old name of --rounds.
# --only keeps the workloads whose name matches REGEX (grep -E), e.g.
# --only 'randread QD32|seq read'. --dir DIR puts the file in DIR (default
# $TMPDIR or /tmp); on tmpfs (--dir /dev/shm) every server reads memory
# (rblk-target falls back to buffered I/O), which compares the software
# paths without the disk.
# Page cache: before every cell (every path, every round) it is dropped
# (root), so each path starts cold on a disk file; nbdkit (cache=none)
# still reads through the page cache, rblk-target and io_uring use
# O_DIRECT. On tmpfs there is nothing to drop: every path reads memory.
# --doc replaces the block between <!-- MARKER:begin --> and
# <!-- MARKER:end --> in that file (--marker, default host-bench), and the
# same block of bench-log/rounds.md beside it with every round; --chart
# writes a gnuplot PNG.
#
# CPU us/IO = fio's own usr+sys for the job, plus the CPU time the server
# processes (rblk-target, rblk nbd, nbdkit) used during the cell, both per
# completed I/O (the servers' share is spread over runtime + ramp I/Os).
# On one host the servers share the CPUs with fio and tcp stands in for
# RDMA: the numbers compare software paths, not wire speeds.
set -euo pipefail

BENCH_NAME=host-bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
runtime=${BENCH_RUNTIME:-5} ramp=${BENCH_RAMP:-1} size=${BENCH_SIZE:-256}
jobs=${BENCH_JOBS:-1} where=${TMPDIR:-/tmp} doc='' chart='' only=''
marker=host-bench repeat=${BENCH_ROUNDS:-5}
paths="engine engine-unix engine-pull engine-buffered engine-busy engine-event rblk-nbd nbdkit-unix nbdkit-tcp io_uring"
[ -n "$runtime" ] || runtime=5
bench_args "--runtime=runtime --ramp=ramp --size=size --jobs=jobs
	--paths=paths --dir=where --only=only --doc=doc --chart=chart
	--marker=marker --rounds=repeat --repeat=repeat" "$@"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
engine=$build/rblk-fio.so
bench_need fio nbdkit jq python3
bench_need_files "make all fio-engine" "$build/rblk-target" "$build/rblk" \
	"$engine"
fio --enghelp=nbd >/dev/null 2>&1 || { echo "host-bench: this fio has no nbd engine" >&2; exit 1; }

bench_workloads "$only"
# report.py: path:label:peer ('~' = space)
REPORT_PATHS="engine:rblk~fio~engine:nbdkit-unix
	engine-unix:engine,~unix~socket:nbdkit-unix
	engine-pull:engine,~pull~reads:engine
	engine-buffered:engine,~cache=buffered~export:nbdkit-unix
	engine-busy:engine,~busy~poll:engine
	engine-event:engine,~event~poll~(no~spin):engine
	rblk-nbd:rblk~nbd~(fio~nbd~engine):nbdkit-unix
	rblk-nbd-unix:rblk~nbd~to~a~unix~socket:nbdkit-unix
	rblk-nbd-nospin:rblk~nbd~--poll-spin-us~0:rblk-nbd
	engine-tspin:engine,~unix,~target~--poll-spin-us~50:engine-unix
	rblk-nbd-tspin:rblk~nbd~unix,~target~--poll-spin-us~50:rblk-nbd-unix
	nbdkit-unix:nbdkit~file,~unix~socket:io_uring
	nbdkit-tcp:nbdkit~file,~TCP:nbdkit-unix
	io_uring:fio~io_uring~on~the~file~(ceiling):"
# the speed targets of issue 12 (ratios: medians of per-round ratios)
REPORT_TARGETS=()
target()
{
	REPORT_TARGETS+=(--target "$1|$2|$3|$4|$3|$5|$6")
}
target "rblk fio engine vs nbdkit unix, 4k randread QD32" engine "4k randread QD32" nbdkit-unix iops 1.5
target "rblk fio engine vs nbdkit unix, 4k randread QD32, CPU us per I/O" engine "4k randread QD32" nbdkit-unix cpu 0.67
target "rblk fio engine vs nbdkit unix, 4k randwrite QD32" engine "4k randwrite QD32" nbdkit-unix iops 1.3
target "rblk fio engine vs nbdkit unix, 4k randread QD1" engine "4k randread QD1" nbdkit-unix iops 1.0
target "rblk nbd vs nbdkit unix, 4k randread QD1" rblk-nbd "4k randread QD1" nbdkit-unix iops 0.8
target "rblk nbd vs nbdkit unix, 4k randread QD32" rblk-nbd "4k randread QD32" nbdkit-unix iops 1.0
target "rblk fio engine vs nbdkit unix, 128k seq read QD16" engine "128k seq read QD16" nbdkit-unix mbs 1.0
# the same cells with rblk on a unix socket too, the socket family of nbdkit-unix
target "engine over a unix socket vs nbdkit unix, 4k randread QD32" engine-unix "4k randread QD32" nbdkit-unix iops 1.5
target "engine over a unix socket vs nbdkit unix, 4k randread QD32, CPU us per I/O" engine-unix "4k randread QD32" nbdkit-unix cpu 0.67
target "engine over a unix socket vs nbdkit unix, 4k randwrite QD32" engine-unix "4k randwrite QD32" nbdkit-unix iops 1.3
target "engine over a unix socket vs nbdkit unix, 4k randread QD1" engine-unix "4k randread QD1" nbdkit-unix iops 1.0
target "rblk nbd to a unix socket vs nbdkit unix, 4k randread QD1" rblk-nbd-unix "4k randread QD1" nbdkit-unix iops 0.8
target "rblk nbd to a unix socket vs nbdkit unix, 4k randread QD32" rblk-nbd-unix "4k randread QD32" nbdkit-unix iops 1.0
target "rblk fio engine, cache=buffered export, vs nbdkit unix, 128k seq read QD16" engine-buffered "128k seq read QD16" nbdkit-unix mbs 1.0

BENCH_DIR_PARENT="$where"
cache=0
bench_scratch

log() { printf '%s %s\n' "$(date +%T)" "$*"; }

log "host-bench: preparing a ${size} MiB file in $where ($(stat -f -c %T "$where"))"
head -c "$((size * 1024 * 1024))" /dev/urandom >"$dir/vol.img"
[ -w /proc/sys/vm/drop_caches ] ||
	log "host-bench: not root: the page cache cannot be dropped between cells"

declare -A spid # path -> server pids (for CPU time)
needs() { [[ " $paths " == *" $1 "* ]]; }

if needs engine || needs engine-pull || needs engine-buffered || needs engine-busy ||
	needs engine-event || needs rblk-nbd || needs rblk-nbd-nospin ||
	needs engine-unix || needs rblk-nbd-unix; then
	port=$(bench_free_port)
	"$build/rblk-target" --listen "tcp://127.0.0.1:$port" --allow-any-host --log-level info \
		--listen "unix:///?socket=$dir/target.sock" --ctl-socket none \
		--export "vol0=$dir/vol.img" --export "vol1=$dir/vol.img,cache=buffered" \
		>"$dir/target.log" 2>&1 &
	tpid=$!
	pids+=("$tpid")
	wait_for "$dir/target.log" "listening on unix"
	for p in engine engine-pull engine-buffered engine-busy engine-event engine-unix; do
		spid[$p]=$tpid
	done
fi
if needs rblk-nbd-unix; then
	"$build/rblk" nbd "unix:///vol0?socket=$dir/target.sock" --socket "$dir/rblk-unix.sock" \
		--queues "$jobs" >"$dir/nbd-unix.out" 2>"$dir/nbd-unix.log" &
	pids+=($!)
	spid[rblk-nbd-unix]="$tpid $!"
	wait_for "$dir/nbd-unix.out" "^ready "
fi
if needs rblk-nbd; then
	"$build/rblk" nbd "tcp://127.0.0.1:$port/vol0" --socket "$dir/rblk.sock" \
		--queues "$jobs" >"$dir/nbd.out" 2>"$dir/nbd.log" &
	pids+=($!)
	spid[rblk-nbd]="$tpid $!"
	wait_for "$dir/nbd.out" "^ready "
fi
if needs rblk-nbd-nospin; then
	"$build/rblk" nbd "tcp://127.0.0.1:$port/vol0" --socket "$dir/rblk-nospin.sock" \
		--queues "$jobs" --poll-spin-us 0 >"$dir/nbd-nospin.out" 2>"$dir/nbd-nospin.log" &
	pids+=($!)
	spid[rblk-nbd-nospin]="$tpid $!"
	wait_for "$dir/nbd-nospin.out" "^ready "
fi
if needs engine-tspin || needs rblk-nbd-tspin; then
	"$build/rblk-target" --listen "unix:///?socket=$dir/target-spin.sock" \
		--poll-spin-us 50 --allow-any-host --log-level info --ctl-socket none \
		--export "vol0=$dir/vol.img" >"$dir/target-spin.log" 2>&1 &
	t2pid=$!
	pids+=("$t2pid")
	wait_for "$dir/target-spin.log" "listening on unix"
	spid[engine-tspin]=$t2pid
fi
if needs rblk-nbd-tspin; then
	"$build/rblk" nbd "unix:///vol0?socket=$dir/target-spin.sock" \
		--socket "$dir/rblk-tspin.sock" --queues "$jobs" \
		>"$dir/nbd-tspin.out" 2>"$dir/nbd-tspin.log" &
	pids+=($!)
	spid[rblk-nbd-tspin]="$t2pid $!"
	wait_for "$dir/nbd-tspin.out" "^ready "
fi
if needs nbdkit-unix; then
	bench_nbdkit "$dir/vol.img" "$dir/nbdkit.sock" "$dir/nbdkit-unix.log"
	spid[nbdkit-unix]=$nbdkit_pid
fi
if needs nbdkit-tcp; then
	nport=$(bench_free_port)
	nbdkit -f -i 127.0.0.1 -p "$nport" file "$dir/vol.img" cache=none \
		>"$dir/nbdkit-tcp.log" 2>&1 &
	pids+=($!)
	spid[nbdkit-tcp]=$!
	bench_poll 5 bench_port_open "$nport" || true
fi

# fio arguments of each path
declare -A pargs
e="--ioengine=external:$engine --uri=tcp://127.0.0.1:${port:-0}/vol0"
pargs[engine]="$e"
pargs[engine-unix]="--ioengine=external:$engine --uri=unix:///vol0?socket=$dir/target.sock"
pargs[engine-pull]="$e --read_mode=pull"
pargs[engine-buffered]="${e%/vol0}/vol1"
pargs[engine-busy]="$e --poll=busy"
pargs[engine-event]="$e --poll=event"
pargs[rblk-nbd]="--ioengine=nbd --uri=nbd+unix:///?socket=$dir/rblk.sock"
pargs[rblk-nbd-unix]="--ioengine=nbd --uri=nbd+unix:///?socket=$dir/rblk-unix.sock"
pargs[rblk-nbd-nospin]="--ioengine=nbd --uri=nbd+unix:///?socket=$dir/rblk-nospin.sock"
pargs[engine-tspin]="--ioengine=external:$engine --uri=unix:///vol0?socket=$dir/target-spin.sock"
pargs[rblk-nbd-tspin]="--ioengine=nbd --uri=nbd+unix:///?socket=$dir/rblk-tspin.sock"
pargs[nbdkit-unix]="--ioengine=nbd --uri=nbd+unix:///?socket=$dir/nbdkit.sock"
pargs[nbdkit-tcp]="--ioengine=nbd --uri=nbd://127.0.0.1:${nport:-0}/"
pargs[io_uring]="--ioengine=io_uring --direct=1 --filename=$dir/vol.img"
common="--numjobs=$jobs --size=${size}M --time_based --runtime=$runtime
	--ramp_time=$ramp --norandommap --randrepeat=0 --rwmixread=70
	--group_reporting --output-format=json"

hz=$(getconf CLK_TCK)

RES=$dir/results
: >"$RES"
total=0
for w in "${WORKLOADS[@]}"; do
	for p in $paths; do
		[ "$p" = engine-pull ] && [[ $w == *"|write|"* || $w == *"|randwrite|"* ]] && continue
		total=$((total + repeat))
	done
done

cell=0 failed=0 t0=$(date +%s)
log "host-bench: $total cells, ${runtime} s + ${ramp} s ramp each, fio $(fio --version | sed 's/^fio-//'), $jobs job(s), $(nproc) CPUs"
for w in "${WORKLOADS[@]}"; do
	IFS='|' read -r name rw bs qd <<<"$w"
	for ((rep = 0; rep < repeat; rep++)); do
	for p in $paths; do
		[ "$p" = engine-pull ] && [[ $rw == write || $rw == randwrite ]] && continue
		cell=$((cell + 1))
		json=$dir/$p-$rw-$bs-qd$qd.json
		drop_cache
		# shellcheck disable=SC2086 # split the argument strings
		s0=$(bench_ticks ${spid[$p]:-})
		# shellcheck disable=SC2086
		if ! timeout -k 5 $((runtime + ramp + 60)) fio --name=bench ${pargs[$p]} \
			--rw="$rw" --bs="$bs" --iodepth="$qd" $common \
			--output="$json" >"$dir/fio.err" 2>&1 ||
			! row=$(jq -r -f "$root/tools/bench/fio-row.jq" "$json" 2>/dev/null) ||
			[ -z "$row" ]; then
			log "[$cell/$total] $p $name ... FAILED: $(tail -n 2 "$dir/fio.err" | tr '\n' ' ')"
			echo "$p|$name|-|-|-|-|-|$((rep + 1))" >>"$RES"
			failed=$((failed + 1))
			continue
		fi
		# shellcheck disable=SC2086
		s1=$(bench_ticks ${spid[$p]:-})
		IFS='|' read -r iops mbs p50 p99 ccpu <<<"$row"
		cpu=$(awk -v c="$ccpu" -v s=$((s1 - s0)) -v hz="$hz" -v i="$iops" \
			-v t=$((runtime + ramp)) 'BEGIN {
				if (c == "-" || i <= 0) { print "-"; exit }
				printf "%.2f", c + s / hz * 1e6 / (i * t) }')
		echo "$p|$name|$iops|$mbs|$p50|$p99|$cpu|$((rep + 1))" >>"$RES"
		log "[$cell/$total] round $((rep + 1)) $p $name ... $iops IOPS, $mbs MB/s, p50 $p50 us, p99 $p99 us, $cpu us CPU/IO"
	done
	done
done
elapsed=$(($(date +%s) - t0))

hdr=$dir/header.md
fstype=$(stat -f -c %T "$where")
{
	echo "\`tools/bench/host-bench.sh --runtime $runtime --ramp $ramp --size $size --jobs $jobs --rounds $repeat${only:+ --only '$only'}$([ "$where" = "${TMPDIR:-/tmp}" ] || echo " --dir $where")\` (\`make bench\` runs it with --doc and --chart)," \
		"$(date -u '+%Y-%m-%d %H:%M UTC'): $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1))," \
		"kernel $(uname -r), fio $(fio --version | sed 's/^fio-//'), $(nbdkit --version | head -n 1)," \
		"backing: a ${size} MiB file on $fstype, $([ "$fstype" = tmpfs ] &&
			echo "in memory (rblk-target falls back to buffered I/O; nothing for drop_caches)" ||
			echo "page cache dropped before each cell, rblk-target O_DIRECT"), nbdkit cache=none. $cell cells in $elapsed s; each workload runs through every path in turn, $repeat rounds (A B C A B C ...); a cell is the median of its rounds (IOPS min-max beside it), a ratio the median of the per-round ratios (min-max)."
	echo
	# shellcheck disable=SC2086 # $common on one line
	flat=$(echo $common)
	echo "Every cell is \`fio --name=bench PATH-ARGS --rw=RW --bs=BS --iodepth=QD ${flat% --output-format=json}\` with PATH-ARGS:"
	echo
	for p in $paths; do
		a=${pargs[$p]//$dir/\$DIR}
		a=${a//$engine/build/rblk-fio.so}
		a=${a//127.0.0.1:${port:-0}\//127.0.0.1:PORT/}
		a=${a//127.0.0.1:${nport:-0}\//127.0.0.1:NPORT/}
		echo "- $p: \`$a\`"
	done
	echo
	echo "Servers: \`rblk-target --listen tcp://127.0.0.1:PORT --listen unix:///?socket=\$DIR/target.sock --export vol0=\$DIR/vol.img --export vol1=\$DIR/vol.img,cache=buffered\`;" \
		"\`rblk nbd tcp://127.0.0.1:PORT/vol0 --socket \$DIR/rblk.sock --queues $jobs\`" \
		"$(needs rblk-nbd-unix && echo "(and \`rblk nbd unix:///vol0?socket=\$DIR/target.sock --socket \$DIR/rblk-unix.sock\`)")$(needs rblk-nbd-nospin && echo " (and the same with --socket \$DIR/rblk-nospin.sock --poll-spin-us 0)")$(needs engine-tspin && echo " (and a second target, \`rblk-target --listen unix:///?socket=\$DIR/target-spin.sock --poll-spin-us 50 --export vol0=\$DIR/vol.img\`, with \`rblk nbd\` to it on \$DIR/rblk-tspin.sock)");" \
		"\`nbdkit -f -U \$DIR/nbdkit.sock file \$DIR/vol.img cache=none\` and" \
		"\`nbdkit -f -i 127.0.0.1 -p NPORT file \$DIR/vol.img cache=none\`."
	echo "CPU us/IO: fio's usr+sys plus the servers' CPU time during the cell, per I/O." \
		"The 70/30 row's latencies are the reads'. Ratio: IOPS over the peer's." \
		"nbdkit reads through the page cache (cache=none only evicts afterwards), so it gets" \
		"kernel readahead on sequential reads, which O_DIRECT (rblk-target, io_uring) does not."
} >"$hdr"

args=(--results "$RES" --header "$hdr" --paths "$REPORT_PATHS" "${REPORT_TARGETS[@]}" --raw)
[ -n "$chart" ] && args+=(--chart "$chart" --chart-title "rblk vs nbdkit vs io_uring, host (tcp loopback): IOPS")
# the doc gets the tables, bench-log/rounds.md beside it every round
[ -n "$doc" ] && args+=(--doc "$doc" --begin "<!-- $marker:begin -->" --end "<!-- $marker:end -->"
	--rounds-doc "$(dirname "$doc")/bench-log/rounds.md")
python3 "$root/tools/bench/report.py" "${args[@]}"
[ -z "$doc" ] || log "host-bench: table written to $doc${chart:+, chart to $chart}"
cp "$RES" "${build}/host-bench-results.txt"
[ "$failed" = 0 ] || { log "host-bench: $failed cell(s) failed"; exit 1; }
