#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): `rblk nbd` of two builds side by side with
# `nbdkit file` as the yardstick, one fio workload through the fio nbd
# engine over unix sockets, rounds interleaved (A B nbdkit A B nbdkit ...).
# For before/after comparisons of the NBD server's hot path:
#
#   git archive OLD | tar -x -C /tmp/old && make -C /tmp/old all
#   tools/bench/ab-nbd.sh --a /tmp/old/build --b build [--rounds 5]
#       [--runtime 3] [--rw randread] [--bs 4k] [--qd 1] [--dir /dev/shm]
#       [--count 1] [--own-targets]
#
# One rblk-target (build B's) serves both `rblk nbd` processes; with
# --own-targets each side has its own build's target instead (for a
# change in the target: B/A then compares whole server paths). Per round
# and path: IOPS and CPU us per I/O (fio's usr+sys plus the servers'
# utime+stime from /proc, per completed I/O). With --count 1 every cell
# also runs the rblk nbd process under `perf stat` (syscalls and context
# switches per I/O; needs root; perturbs the timing a little, so IOPS are
# then for relative use only). At the end: medians with min-max, and the
# medians of the per-round ratios A/nbdkit and B/nbdkit.
set -euo pipefail

BENCH_NAME=ab-nbd
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
a='' b='' rounds=5 runtime=3 rw=randread bs=4k qd=1 where=${TMPDIR:-/tmp}
count=0 own=0
bench_args "--a=a --b=b --rounds=rounds --runtime=runtime --rw=rw --bs=bs
	--qd=qd --dir=where --count=count --own-targets!own" "$@"
if [ -z "$a" ] || [ -z "$b" ]; then
	echo "--a and --b are required" >&2
	exit 2
fi
bench_need fio nbdkit jq
[ "$count" = 0 ] || bench_need perf
BENCH_DIR_PARENT=$where
bench_scratch
head -c $((256 * 1024 * 1024)) /dev/urandom >"$dir/vol.img"

start_target() # BUILD NAME: sets tpid and port
{
	port=$(bench_free_port)
	"$1/rblk-target" --listen "tcp://127.0.0.1:$port" --allow-any-host \
		--ctl-socket none --export "vol0=$dir/vol.img" >"$dir/$2.log" 2>&1 &
	tpid=$!
	pids+=("$tpid")
	wait_for "$dir/$2.log" "listening on"
}

start_target "$b" target
declare -A npid tpids
for side in A B; do
	build=$a
	[ $side = B ] && build=$b
	[ "$own" = 1 ] && start_target "$build" "target-$side"
	tpids[$side]=$tpid
	"$build/rblk" nbd "tcp://127.0.0.1:$port/vol0" --socket "$dir/$side.sock" \
		--queues 1 >"$dir/$side.out" 2>"$dir/$side.log" &
	pids+=($!)
	npid[$side]=$!
	wait_for "$dir/$side.out" "^ready "
done
bench_nbdkit "$dir/vol.img" "$dir/K.sock" "$dir/nbdkit.log"
npid[K]=$nbdkit_pid

hz=$(getconf CLK_TCK)
ev=syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_readv,syscalls:sys_enter_poll,syscalls:sys_enter_epoll_wait,context-switches

res=$dir/results
: >"$res"
for ((r = 1; r <= rounds; r++)); do
	for side in A B K; do
		servers=${npid[$side]}
		[ $side = K ] || servers="$servers ${tpids[$side]}"
		# shellcheck disable=SC2086
		s0=$(bench_ticks $servers)
		spid=''
		if [ "$count" != 0 ] && [ $side != K ]; then
			perf stat -x, -e "$ev" -p "${npid[$side]}" -o "$dir/stat" &
			spid=$!
			sleep 0.2
		fi
		fio --name=ab --ioengine=nbd \
			--uri="nbd+unix:///?socket=$dir/$side.sock" --rw="$rw" \
			--bs="$bs" --iodepth="$qd" --size=256M --time_based \
			--runtime="$runtime" --norandommap --randrepeat=0 \
			--output-format=json --output="$dir/fio.json" >/dev/null
		if [ -n "$spid" ]; then
			kill -INT "$spid"
			wait "$spid" || true
		fi
		# shellcheck disable=SC2086
		s1=$(bench_ticks $servers)
		j=$dir/fio.json
		ios=$(jq '.jobs[0].read.total_ios + .jobs[0].write.total_ios' "$j")
		iops=$(jq '(.jobs[0].read.iops + .jobs[0].write.iops) | floor' "$j")
		fcpu=$(jq '(.jobs[0].usr_cpu + .jobs[0].sys_cpu) / 100 * .jobs[0].job_runtime * 1000' "$j")
		cpu=$(awk -v f="$fcpu" -v s=$((s1 - s0)) -v hz="$hz" -v io="$ios" \
			'BEGIN { printf "%.2f", (f + s / hz * 1e6) / io }')
		sc="- - - - - -"
		[ -z "$spid" ] || sc=$(awk -F, -v io="$ios" '{ n = $3
			sub("syscalls:sys_enter_", "", n); v[n] = $1 / io }
			END { printf "%.2f %.2f %.2f %.2f %.2f %.2f", v["recvfrom"],
				v["sendmsg"], v["readv"], v["poll"], v["epoll_wait"],
				v["context-switches"] }' "$dir/stat")
		echo "$side $r $iops $cpu $sc" | tee -a "$res"
	done
done

echo "side round IOPS cpu_us/io | rblk nbd per I/O: recvfrom sendmsg readv poll epoll_wait cs"
awk -v a="$a" -v b="$b" -v own="$own" -v w="$rw $bs QD$qd" "$BENCH_AWK_MEDIAN"'
{ s = $1; k = ++cnt[s]; for (c = 3; c <= 10; c++) v[s, c, k] = $c }
END {
	printf "%s, medians (min-max) of %d rounds\n", w, cnt["K"]
	split("A B K", sides, " ")
	for (i = 1; i <= 3; i++) {
		s = sides[i]; n = cnt[s]
		for (k = 1; k <= n; k++) x[k] = v[s, 3, k]
		m = med(x, n)
		printf "%s: %.0f IOPS (%.0f-%.0f)", s, m, x[1], x[n]
		for (k = 1; k <= n; k++) x[k] = v[s, 4, k]
		m = med(x, n)
		printf ", CPU %.1f us/IO (%.1f-%.1f)", m, x[1], x[n]
		if (s != "K") {
			for (k = 1; k <= n; k++) x[k] = v[s, 3, k] / v["K", 3, k]
			m = med(x, n)
			printf ", vs nbdkit %.2fx (%.2f-%.2f)", m, x[1], x[n]
			if (v[s, 5, 1] != "-") {
				printf "\n   per I/O:"
				split("recvfrom sendmsg readv poll epoll_wait cs", nm, " ")
				for (c = 5; c <= 10; c++) {
					for (k = 1; k <= n; k++) x[k] = v[s, c, k]
					printf " %s %.2f", nm[c - 4], med(x, n)
				}
			}
		}
		printf "\n"
	}
	printf "A = %s, B = %s, K = nbdkit file cache=none%s\n", a, b, own ? "; each with its own build'"'"'s rblk-target" : ""
}' "$res"
