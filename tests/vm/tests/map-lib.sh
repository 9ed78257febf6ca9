# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for the guest tests of `rblk map` (20-nbd-*.sh, ...): sourced, not
# run (the runner takes only tests/vm/tests/[0-9]*.sh). Builds on
# tests/functions.sh (fail, skip, tmo, cleanup_fn, stop_pid, TEST_DIR) and
# adds:
#
#   ADDR, RDMA_DEV           192.0.2.1 and rxe0 (the guest's RDMA setup)
#   RBLK_RUN_DIR             a private record directory under TEST_DIR
#   start_rdma_target PORT ARGS...
#                            rblk-target on rdma://ADDR:PORT with ARGS;
#                            sets TARGET_PID, TARGET_LOG; stopped at exit,
#                            after the devices are unmapped
#   map_dev URL ARGS...      `rblk map URL ARGS` (under timeout); sets DEV
#                            and DEV_NAME (nbd0); unmapped at exit
#   dev_size DEV_NAME        /sys/block/DEV_NAME/size in 512-byte sectors
#   umount_quiet DIR         lazy umount of DIR if it is a mount point
#   kill_quiet PID...        SIGKILL, no complaint if gone
#   map_daemon_pids          pids of every live daemon in RBLK_RUN_DIR
#
# Exit handling: every mapping this test made is unmapped (then forced),
# and any daemon left is killed, so no process outlives the test. A test
# sets MAP_TEST_OK=1 when it passed; otherwise the daemon and target logs
# are shown.

source "$(dirname "${BASH_SOURCE[0]}")/../../functions.sh"

[ "${RBLK_VM:-0}" = 1 ] || skip "not in the rblk test guest"
ADDR=${RBLK_TEST_RDMA_ADDR:-192.0.2.1}
RDMA_DEV=${RBLK_TEST_RDMA_DEV:-rxe0}
[ -e "/sys/class/infiniband/$RDMA_DEV" ] || skip "no RDMA device $RDMA_DEV"
requires_built
requires jq timeout
export RBLK_RUN_DIR=$TEST_DIR/run

# print a line with the guest uptime: the logs then show where time went
say()
{
	local u
	read -r u _ </proc/uptime
	echo "[$u] $*"
}

start_rdma_target()
{
	local port=$1 i
	shift
	TARGET_LOG=$TEST_DIR/target.$port.log
	"$RBLK_TARGET_BIN" --listen "rdma://$ADDR:$port" --log-level info \
		"$@" >"$TARGET_LOG" 2>&1 &
	TARGET_PID=$!
	_targets+=("$TARGET_PID") # stopped by _map_cleanup, after the unmaps
	for ((i = 0; i < 600; i++)); do
		grep -q "listening on rdma://" "$TARGET_LOG" && return 0
		kill -0 "$TARGET_PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$TARGET_LOG" >&2
	fail "rblk-target on rdma://$ADDR:$port did not start"
}

map_daemon_pids()
{
	local f
	for f in "$RBLK_RUN_DIR"/map-*.rec; do
		[ -e "$f" ] || continue
		jq -r .pid "$f" 2>/dev/null
	done
}

# Exit: on failure (MAP_TEST_OK unset) show the daemon and target logs;
# unmap what is left, then force, then kill stray daemons.
_map_cleanup()
{
	local d p f
	if [ -z "${MAP_TEST_OK:-}" ]; then
		for f in "$RBLK_RUN_DIR"/map-*.log "$TEST_DIR"/target.*.log; do
			[ -e "$f" ] || continue
			echo "--- last lines of $f"
			tail -n 30 "$f"
		done
	fi
	for d in "${_mapped[@]+"${_mapped[@]}"}"; do
		[ -e "$RBLK_RUN_DIR" ] || break
		timeout -k 5 60 "$RBLK_BIN" unmap "$d" >/dev/null 2>&1 ||
			timeout -k 5 60 "$RBLK_BIN" unmap --force "$d" >/dev/null 2>&1
	done
	for p in $(map_daemon_pids); do
		kill -KILL "$p" 2>/dev/null
	done
	for d in "${_mapped[@]+"${_mapped[@]}"}"; do
		timeout -k 5 30 "$RBLK_BIN" unmap --force "$d" >/dev/null 2>&1
	done
	for p in "${_targets[@]+"${_targets[@]}"}"; do
		stop_pid "$p"
	done
	return 0
}
_mapped=()
_targets=()
cleanup_fn _map_cleanup

map_dev()
{
	local url=$1 rc=0
	shift
	DEV=$(timeout -k 5 180 "$RBLK_BIN" map "$url" "$@" 2>"$TEST_DIR/map.err") || rc=$?
	if [ $rc -ne 0 ]; then
		cat "$TEST_DIR/map.err" >&2
		for f in "$RBLK_RUN_DIR"/map-*.log; do
			[ -e "$f" ] && { echo "--- $f"; cat "$f"; } >&2
		done
		fail "rblk map $url $* failed (exit $rc)"
	fi
	[ -b "$DEV" ] || fail "rblk map printed '$DEV', not a block device"
	DEV_NAME=$(basename "$DEV")
	_mapped+=("$DEV")
	say "mapped $url on $DEV"
}

kill_quiet()
{
	kill -KILL "$@" 2>/dev/null
	return 0
}

umount_quiet()
{
	mountpoint -q "$1" && umount -l "$1"
	return 0
}

dev_size()
{
	cat "/sys/block/$1/size"
}
