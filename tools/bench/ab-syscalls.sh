#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): two builds of rblk side by side, A B A B ..., on
# one fio workload through the rblk fio engine (tcp on loopback), counting
# system calls per I/O of the initiator (fio) and of rblk-target with
# `perf stat`. For before/after comparisons of hot-path changes:
#
#   git archive OLD | tar -x -C /tmp/old && make -C /tmp/old BUILD=build-old \
#       all fio-engine
#   tools/bench/ab-syscalls.sh --a /tmp/old/build-old --b build [--rounds 3]
#       [--runtime 5] [--rw randread] [--bs 4k] [--qd 32] [--mode pull]
#       [--file /tmp/rblk-ab/vol.img]
#
# Prints one line per run and, at the end, the median of each column per
# build and the B/A ratios. Needs root (perf, drop_caches) and perf.
set -euo pipefail

BENCH_NAME=ab-syscalls
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
a='' b='' rounds=3 runtime=5 rw=randread bs=4k qd=32 mode=pull file=''
bench_args "--a=a --b=b --rounds=rounds --runtime=runtime --rw=rw --bs=bs
	--qd=qd --mode=mode --file=file" "$@"
if [ -z "$a" ] || [ -z "$b" ]; then
	echo "--a and --b are required" >&2
	exit 2
fi
dir=$(mktemp -d /tmp/rblk-ab.XXXXXX)
[ -n "$file" ] || file=$dir/vol.img
[ -s "$file" ] || dd if=/dev/urandom of="$file" bs=1M count=256 status=none
tpid=''
cleanup() {
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

events=syscalls:sys_enter_sendmsg,syscalls:sys_enter_readv,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_poll,syscalls:sys_enter_io_uring_enter,context-switches

# perf stat -x, output -> "sendmsg readv epoll_wait poll io_uring_enter cs"
counts() {
	awk -F, '{ split($3, e, ":"); n = e[2] != "" ? e[2] : $3;
		sub("sys_enter_", "", n); v[n] = $1 }
		END { printf "%s %s %s %s %s %s", v["sendmsg"], v["readv"],
			v["epoll_wait"], v["poll"], v["io_uring_enter"],
			v["context-switches"] }' "$1"
}

port=$((20000 + RANDOM % 20000))
results=$dir/results
: >"$results"
for ((r = 1; r <= rounds; r++)); do
	for side in A B; do
		build=$a
		[ $side = B ] && build=$b
		sync
		echo 3 >/proc/sys/vm/drop_caches
		"$build"/rblk-target --listen "tcp://127.0.0.1:$port" --allow-any-host \
			--export "v=$file" >"$dir/target.log" 2>&1 &
		tpid=$!
		wait_for "$dir/target.log" "listening"
		perf stat -x, -e "$events" -o "$dir/t.stat" -p "$tpid" &
		spid=$!
		perf stat -x, -e "$events" -o "$dir/f.stat" -- \
			fio --name=ab --ioengine=external:"$build"/rblk-fio.so \
			--uri="tcp://127.0.0.1:$port/v" --read_mode="$mode" \
			--rw="$rw" --bs="$bs" --iodepth="$qd" --time_based \
			--runtime="$runtime" --size=256M --norandommap \
			--output-format=json --output="$dir/fio.json" >/dev/null
		kill -INT "$spid"
		wait "$spid" || true
		kill "$tpid"
		wait "$tpid" || true
		tpid=''
		ios=$(jq '.jobs[0].read.total_ios + .jobs[0].write.total_ios' \
			"$dir/fio.json")
		iops=$(jq '(.jobs[0].read.iops + .jobs[0].write.iops) | floor' \
			"$dir/fio.json")
		echo "$side $ios $iops $(counts "$dir/f.stat") $(counts "$dir/t.stat")" |
			tee -a "$results" | awk '{ printf "%s run: %s I/Os, %s IOPS\n", $1, $2, $3 }'
		port=$((port + 1))
	done
done

awk -v a="$a" -v b="$b" '
function med(arr, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
	return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
{
	s = $1; k = ++cnt[s]; io = $2
	v[s, 1, k] = $3                       # IOPS
	# fio: $4 sendmsg $5 readv $6 epoll_wait $7 poll $8 io_uring $9 cs
	v[s, 2, k] = $4 / io; v[s, 3, k] = $5 / io; v[s, 4, k] = $7 / io
	v[s, 5, k] = $9 / io
	# rblk-target: $10 sendmsg $11 readv $12 epoll_wait $13 poll
	# $14 io_uring_enter $15 cs
	v[s, 6, k] = $10 / io; v[s, 7, k] = $11 / io; v[s, 8, k] = $12 / io
	v[s, 9, k] = $14 / io; v[s, 10, k] = $15 / io
}
END {
	split("IOPS fio_sendmsg fio_readv fio_poll fio_cs tgt_sendmsg tgt_readv tgt_epoll_wait tgt_io_uring_enter tgt_cs", name, " ")
	printf "%-20s %12s %12s %8s\n", "per I/O (median)", "A", "B", "B/A"
	for (c = 1; c <= 10; c++) {
		for (s = 0; s < 2; s++) {
			side = s ? "B" : "A"
			for (k = 1; k <= cnt[side]; k++) x[k] = v[side, c, k]
			m[side] = med(x, cnt[side])
		}
		printf "%-20s %12.3f %12.3f %8.2f\n", name[c], m["A"], m["B"],
			m["A"] ? m["B"] / m["A"] : 0
	}
	printf "A = %s, B = %s\n", a, b
}' "$results"
