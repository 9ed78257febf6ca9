# tools/bench/lib.sh - shared by the benchmark scripts. Source it first,
# after setting BENCH_NAME (for messages); sourcing only defines these:
#
#   bench_args SPEC "$@"   parse the command line: SPEC's words are
#                   --opt=var (takes a value into var) or --opt!var (a
#                   flag: var=1); -h/--help prints the script's header
#   bench_need TOOL...     exit unless every TOOL is on PATH
#   bench_need_files HINT FILE...  exit unless every FILE exists ("HINT":
#                   how to make them)
#   bench_free_port        print a free tcp port on 127.0.0.1
#   bench_scratch          make the scratch directory $dir (in
#                   BENCH_DIR_PARENT, default $TMPDIR or /tmp), removed at
#                   exit with the processes in pids+=(PID)
#   bench_nbdkit FILE SOCK LOG   start `nbdkit file FILE` on a unix socket
#                   (cache=none, or the page cache when cache=1), wait for
#                   it; its pid in nbdkit_pid
#   bench_workloads REGEX  WORKLOADS=("name|rw|bs|qd" ...): the fio
#                   workloads of host-bench and vm-bench whose name matches
#                   REGEX (grep -E; empty: all)
#   wait_for FILE REGEX [SECONDS [PID]]  wait (10 s, or SECONDS) for
#                   REGEX to appear in FILE; else, or once PID has exited
#                   without it, print FILE and exit 1 (in a subshell:
#                   `(wait_for ...) || ...` to go on after a failure)
#   bench_poll SECONDS CMD...  run CMD every 50 ms until it succeeds;
#                   non-zero when SECONDS pass first (every other poll of
#                   the scripts goes through it or wait_for)
#   bench_port_open PORT   whether 127.0.0.1:PORT accepts a tcp connection
#   bench_pid_gone PID     whether process PID has exited
#   bench_ticks PID...     CPU time (utime + stime, clock ticks) of the
#                   processes, summed (gone ones count 0)
#   BENCH_AWK_MEDIAN       awk functions sort(arr, n) and med(arr, n) (the
#                   median of arr[1..n]), to put before an awk program
#   drop_cache      drop the page cache (root), unless cache=1
#   bench_nvmet_up BACK ADDR NQN  the kernel's NVMe over RDMA on BACK (a
#                   block device, or a file: buffered_io): an nvmet-rdma
#                   subsystem NQN with BACK as namespace 1 on an rdma port
#                   ADDR:4420, and nvme-rdma connected to it; the
#                   namespace's block device in nvme_dev. Non-zero on a
#                   failure, which nvme_err says (what was set up stays:
#                   call bench_nvmet_down)
#   bench_nvmet_down NQN   disconnect and remove what bench_nvmet_up made
#                   (any part of it; nothing there is fine)
# shellcheck shell=bash

bench_help()
{
	awk 'NR > 1 && /^#/ { sub(/^# ?/, "")
			if (!/SPDX/ && ($0 != "" || n++)) print; next }
		NR > 1 { exit }' "$0"
}

bench_args()
{
	local spec=$1 w
	shift
	while [ $# -gt 0 ]; do
		case $1 in -h | --help) bench_help; exit 0 ;; esac
		for w in $spec; do
			case $w in
			"$1="*)
				[ $# -ge 2 ] || { echo "$BENCH_NAME: $1 needs a value" >&2; exit 2; }
				printf -v "${w#*=}" '%s' "$2"
				shift 2
				continue 2 ;;
			"$1!"*)
				printf -v "${w#*!}" 1
				shift
				continue 2 ;;
			esac
		done
		echo "$BENCH_NAME: unknown argument '$1' (--help)" >&2
		exit 2
	done
}

bench_need()
{
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null ||
			{ echo "$BENCH_NAME: $t not found" >&2; exit 1; }
	done
}

bench_need_files()
{
	local hint=$1 f
	shift
	for f in "$@"; do
		[ -e "$f" ] || { echo "$BENCH_NAME: $f missing ($hint)" >&2; exit 1; }
	done
}

bench_free_port()
{
	python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

bench_scratch()
{
	dir=$(mktemp -d "${BENCH_DIR_PARENT:-${TMPDIR:-/tmp}}/rblk-bench.XXXXXX")
	pids=()
	trap bench_cleanup EXIT
}

bench_cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}

bench_nbdkit()
{
	local file=$1 sock=$2 log=$3 mode=none i
	[ "${cache:-0}" = 1 ] && mode=default
	nbdkit -f -U "$sock" file "$file" cache=$mode >"$log" 2>&1 &
	# shellcheck disable=SC2034 # for the caller
	nbdkit_pid=$!
	pids+=($!)
	bench_poll 5 test -S "$sock" || { cat "$log" >&2; exit 1; }
}

bench_workloads()
{
	local only=$1 w keep=()
	WORKLOADS=("4k randread QD1|randread|4k|1"
		"4k randread QD32|randread|4k|32"
		"4k randwrite QD1|randwrite|4k|1"
		"4k randwrite QD32|randwrite|4k|32"
		"128k seq read QD16|read|128k|16"
		"128k seq write QD16|write|128k|16"
		"4k randrw 70/30 QD32|randrw|4k|32")
	[ -n "$only" ] || return 0
	for w in "${WORKLOADS[@]}"; do
		grep -qE -- "$only" <<<"${w%%|*}" && keep+=("$w")
	done
	[ ${#keep[@]} -gt 0 ] ||
		{ echo "$BENCH_NAME: no workload matches '$only'" >&2; exit 2; }
	WORKLOADS=("${keep[@]}")
}

bench_poll()
{
	local i n=$(($1 * 20))
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

bench_port_open()
{
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

bench_pid_gone()
{
	! kill -0 "$1" 2>/dev/null
}

# FILE holds REGEX, or PID (when not empty) is gone
bench_seen_or_gone()
{
	grep -qE "$2" "$1" 2>/dev/null || { [ -n "$3" ] && bench_pid_gone "$3"; }
}

wait_for()
{
	local file=$1 pattern=$2 pid=${4:-}
	bench_poll "${3:-10}" bench_seen_or_gone "$file" "$pattern" "$pid" || true
	grep -qE "$pattern" "$file" 2>/dev/null && return 0
	if [ -n "$pid" ] && bench_pid_gone "$pid"; then
		echo "$BENCH_NAME: process $pid exited before '$pattern' appeared in $file:" >&2
	else
		echo "$BENCH_NAME: timed out waiting for '$pattern' in $file:" >&2
	fi
	cat "$file" >&2
	exit 1
}

drop_cache()
{
	[ "${cache:-0}" = 1 ] && return 0
	if [ -w /proc/sys/vm/drop_caches ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	fi
}

bench_ticks()
{
	local p t=0 f
	for p in "$@"; do
		f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
		t=$((t + ${f% *} + ${f#* }))
	done
	echo "$t"
}

# shellcheck disable=SC2016,SC2034 # awk code, not shell; for the scripts
BENCH_AWK_MEDIAN='
function sort(arr, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
}
function med(arr, n) {
	sort(arr, n)
	return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
'

BENCH_NVMET=/sys/kernel/config/nvmet

# shellcheck disable=SC2034 # nvme_dev and nvme_err are the caller's
bench_nvmet_up()
{
	local back=$1 addr=$2 nqn=$3 S=$BENCH_NVMET/subsystems/$3 P=$BENCH_NVMET/ports/1 d hostnqn out
	nvme_dev='' nvme_err=''
	modprobe -a nvmet nvmet-rdma nvme-rdma ||
		{ nvme_err="modprobe nvmet nvmet-rdma nvme-rdma failed"; return 1; }
	[ -d "$BENCH_NVMET" ] || { nvme_err="no $BENCH_NVMET (configfs)"; return 1; }
	mkdir "$S" && echo 1 >"$S/attr_allow_any_host" &&
		mkdir "$S/namespaces/1" &&
		echo -n "$back" >"$S/namespaces/1/device_path" &&
		{ [ -b "$back" ] || echo 1 >"$S/namespaces/1/buffered_io"; } &&
		echo 1 >"$S/namespaces/1/enable" && mkdir "$P" &&
		echo rdma >"$P/addr_trtype" && echo ipv4 >"$P/addr_adrfam" &&
		echo "$addr" >"$P/addr_traddr" && echo 4420 >"$P/addr_trsvcid" &&
		ln -s "$S" "$P/subsystems/$nqn" ||
		{ nvme_err="nvmet configfs setup failed"; return 1; }
	hostnqn=nqn.2014-08.org.nvmexpress:uuid:$(cat /proc/sys/kernel/random/uuid)
	out=$(timeout 60 nvme connect -t rdma -a "$addr" -s 4420 -n "$nqn" \
		--hostnqn="$hostnqn" 2>&1) ||
		{ nvme_err="nvme connect failed: $out"; return 1; }
	for _ in $(seq 100); do
		for d in /dev/nvme[0-9]*n[0-9]*; do
			# nvmeXcYnZ: native multipath's path device, not the namespace
			case $d in *c[0-9]*) continue ;; esac
			[ -b "$d" ] && { nvme_dev=$d; return 0; }
		done
		sleep 0.1
	done
	nvme_err="no /dev/nvmeXnY after connect"
	return 1
}

bench_nvmet_down()
{
	local nqn=$1 S=$BENCH_NVMET/subsystems/$1 P=$BENCH_NVMET/ports/1
	[ -d "$S" ] || [ -d "$P" ] || return 0
	timeout 60 nvme disconnect -n "$nqn" >/dev/null 2>&1
	rm -f "$P/subsystems/$nqn" 2>/dev/null
	rmdir "$P" 2>/dev/null
	if [ -d "$S/namespaces/1" ]; then
		echo 0 >"$S/namespaces/1/enable" 2>/dev/null
		rmdir "$S/namespaces/1" 2>/dev/null
	fi
	rmdir "$S" 2>/dev/null
	return 0
}

# bench_ab_summary RESULTS: per workload of an interleaved A/B (lines
# "round R WORKLOAD A IOPS B IOPS cpuA US cpuB US", as ab-engine.sh and
# ab-ublk.sh write them): median IOPS of each side with min-max, the
# median, min and max of the per-round ratios B/A, and CPU us per I/O.
bench_ab_summary()
{
	awk "$BENCH_AWK_MEDIAN"'
	{
		k = ++n[$3]; ratio[$3, k] = $7 / $5; ia[$3, k] = $5; ib[$3, k] = $7
		ca[$3, k] = $9; cb[$3, k] = $11
	}
	END {
		for (w in n) {
			for (k = 1; k <= n[w]; k++) {
				x[k] = ratio[w, k]; y[k] = ia[w, k]; z[k] = ib[w, k]
				u[k] = ca[w, k]; v[k] = cb[w, k]
			}
			ma = med(y, n[w]); mb = med(z, n[w]); m = med(x, n[w])
			mu = med(u, n[w]); mv = med(v, n[w])
			printf "%-16s median IOPS A %d (%d-%d) B %d (%d-%d); B/A per round: median %.3f, min %.3f, max %.3f; CPU us/IO A %.2f (%.2f-%.2f) B %.2f (%.2f-%.2f) (%d rounds)\n",
				w, ma, y[1], y[n[w]], mb, z[1], z[n[w]], m, x[1], x[n[w]],
				mu, u[1], u[n[w]], mv, v[1], v[n[w]], n[w]
		}
	}' "$1"
}
