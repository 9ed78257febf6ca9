#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): two builds of rblk side by side through the fio
# engine over tcp on loopback, the volume a file on tmpfs, rounds
# interleaved (A B, A B, ...) so drift on a shared machine hits both:
#
#   git archive OLD | tar -x -C /tmp/old && make -C /tmp/old BUILD=build-old \
#       all fio-engine
#   tools/bench/ab-engine.sh --a /tmp/old/build-old --b build [--rounds 5]
#       [--runtime 5] [--workers 2]
#
# Workloads: 4k randread QD32 and 128k sequential read QD16 (issue 11's
# "not slower" pair). Prints each run's IOPS and, per workload, the median
# of the per-round B/A ratios with their min and max.
set -euo pipefail

BENCH_NAME=ab-engine
# shellcheck source=tools/bench/lib.sh
source "$(dirname "$0")/lib.sh"
a='' b='' rounds=5 runtime=5 workers=2
bench_args "--a=a --b=b --rounds=rounds --runtime=runtime --workers=workers" \
	"$@"
[ -n "$a" ] && [ -n "$b" ] || { echo "--a and --b are required" >&2; exit 2; }
dir=$(mktemp -d /dev/shm/rblk-ab.XXXXXX)
file=$dir/vol.img
dd if=/dev/urandom of="$file" bs=1M count=256 status=none
tpid=''
cleanup() {
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

run() # BUILD RW BS QD -> IOPS
{
	local build=$1 port=$((20000 + RANDOM % 20000)) open=()
	# builds since exports became closed by default need the opt-in
	"$build"/rblk-target --help 2>&1 | grep -q -- --allow-any-host &&
		open=(--allow-any-host)
	"$build"/rblk-target --listen "tcp://127.0.0.1:$port" \
		--workers "$workers" --ctl-socket none "${open[@]}" \
		--export "v=$file" >"$dir/target.log" 2>&1 &
	tpid=$!
	for _ in $(seq 100); do
		grep -q "listening" "$dir/target.log" 2>/dev/null && break
		sleep 0.1
	done
	fio --name=ab --ioengine=external:"$build"/rblk-fio.so \
		--uri="tcp://127.0.0.1:$port/v" --rw="$2" --bs="$3" \
		--iodepth="$4" --time_based --runtime="$runtime" --size=256M \
		--norandommap --output-format=json --output="$dir/fio.json" \
		>/dev/null
	kill "$tpid"
	wait "$tpid" || true
	tpid=''
	jq '.jobs[0].read.iops | floor' "$dir/fio.json"
}

results=$dir/results
: >"$results"
for ((r = 1; r <= rounds; r++)); do
	for w in "randread 4k 32" "read 128k 16"; do
		# shellcheck disable=SC2086 # split on purpose
		ia=$(run "$a" $w)
		# shellcheck disable=SC2086
		ib=$(run "$b" $w)
		echo "round $r ${w// /_} A $ia B $ib" | tee -a "$results"
	done
done
awk '
function sort(arr, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
}
{ k = ++n[$3]; ratio[$3, k] = $7 / $5; ia[$3, k] = $5; ib[$3, k] = $7 }
END {
	for (w in n) {
		for (k = 1; k <= n[w]; k++) { x[k] = ratio[w, k]; y[k] = ia[w, k]; z[k] = ib[w, k] }
		sort(x, n[w]); sort(y, n[w]); sort(z, n[w])
		m = n[w] % 2 ? x[(n[w] + 1) / 2] : (x[n[w] / 2] + x[n[w] / 2 + 1]) / 2
		ma = n[w] % 2 ? y[(n[w] + 1) / 2] : (y[n[w] / 2] + y[n[w] / 2 + 1]) / 2
		mb = n[w] % 2 ? z[(n[w] + 1) / 2] : (z[n[w] / 2] + z[n[w] / 2 + 1]) / 2
		printf "%-16s median IOPS A %d B %d; B/A per round: median %.3f, min %.3f, max %.3f (%d rounds)\n",
			w, ma, mb, m, x[1], x[n[w]], n[w]
	}
}' "$results"
echo "A = $a, B = $b"
