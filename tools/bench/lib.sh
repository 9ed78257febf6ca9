# tools/bench/lib.sh - shared by the host benchmark scripts. Source it after
# setting BENCH_NAME (for messages), BENCH_DIR_PARENT (where the scratch
# directory goes) and cache (1: leave the page cache alone).
#
#   $dir            scratch directory, removed at exit
#   pids+=(PID)     background processes killed at exit
#   wait_for FILE REGEX   wait (10 s) for REGEX to appear in FILE
#   drop_cache      drop the page cache (root), unless cache=1
# shellcheck shell=bash

dir=$(mktemp -d "${BENCH_DIR_PARENT:-${TMPDIR:-/tmp}}/rblk-bench.XXXXXX")
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

wait_for()
{
	local file=$1 pattern=$2 i
	for ((i = 0; i < 200; i++)); do
		grep -qE "$pattern" "$file" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "$BENCH_NAME: timed out waiting for '$pattern' in $file:" >&2
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
