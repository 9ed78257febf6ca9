# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for the ublk guest tests (tests/vm/tests/3N-ublk-*.sh). Sourced
# INSIDE the test guest (see tests/vm/README.md), with cwd = repo root:
#
#	source tests/vm/ublk-lib.sh
#
# The guest root is the host's, read-only; everything is written under
# $WORK (tmpfs). The target listens on rdma://$RBLK_TEST_RDMA_ADDR (rxe0 on
# the dummy netdev d0).
#
#   RBLK, RBLK_TARGET       build/rblk and build/rblk-target (override with
#                           RBLK_BIN / RBLK_TARGET_BIN, BUILD)
#   WORK                    a fresh directory, removed at exit
#   RBLK_RUN_DIR            $WORK/run: this test's map records and daemon
#                           logs (shown when the test fails)
#   fail MSG / skip MSG     exit 1 / exit 77 with a message
#   at_exit CMD...          run CMD at exit (last registered runs first)
#   umount_at_exit DIR      umount DIR at exit if it is still mounted
#   kill_at_exit PID        SIGKILL PID at exit if it still runs
#   ublk_requires TOOL...   skip unless in the guest with ublk_drv and TOOLs
#   start_target ARGS...    rblk-target with ARGS (--export vol0=FILE) on a
#                           fresh port; sets URL=rdma://ADDR:PORT/vol0
#                           and TARGET_PID
#   map_ublk ARGS...        `rblk map $URL --ublk --queues 2 ARGS`; sets DEV
#                           (/dev/ublkbN) and ID (N); unmapped at exit
#   unmap_ublk              `rblk unmap $DEV`, bounded
#   daemon_pid ID           pid of the process holding /dev/ublkcID
#   map_state DEV           DEV's state in `rblk list` (running, dead, ...)
#   make_tree DIR N         N files of random content and size in DIR
#   manifest DIR OUT        sha256 of every file under DIR into OUT
#   check_manifest DIR IN   verify DIR against IN
#   t_now / t_since T0      seconds (guest uptime) for timing lines

set -u

ADDR=${RBLK_TEST_RDMA_ADDR:-192.0.2.1}
BUILD_DIR=${BUILD:-build}
RBLK=${RBLK_BIN:-$BUILD_DIR/rblk}
RBLK_TARGET=${RBLK_TARGET_BIN:-$BUILD_DIR/rblk-target}
TEST=${RBLK_VM_TEST_NAME:-$(basename "$0" .sh)}

fail()
{
	echo "FAIL: $TEST: $*"
	exit 1
}

skip()
{
	echo "SKIP: $TEST: $*"
	exit 77
}

_at_exit=()
at_exit()
{
	_at_exit+=("$(printf '%q ' "$@")")
}

_run_at_exit()
{
	local rc=$? i f
	set +e
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		for f in "$RBLK_RUN_DIR"/map-*.log "$WORK/target.log"; do
			[ -s "$f" ] || continue
			echo "--- last lines of $f"
			tail -n 30 "$f"
		done
	fi
	for ((i = ${#_at_exit[@]} - 1; i >= 0; i--)); do
		eval "${_at_exit[i]}"
	done
	exit $rc
}
trap _run_at_exit EXIT

umount_at_exit()
{
	at_exit _umount_if "$1"
}

_umount_if()
{
	mountpoint -q "$1" && umount "$1"
}

kill_at_exit()
{
	at_exit _kill_if "$1"
}

_kill_if()
{
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

t_now()
{
	local u
	read -r u _ </proc/uptime
	echo "$u"
}

t_since()
{
	awk -v a="$1" -v b="$(t_now)" 'BEGIN { printf "%.1f", b - a }'
}

ublk_requires()
{
	local t
	[ "${RBLK_VM:-0}" = 1 ] || skip "not in the rblk test guest"
	[ -c /dev/ublk-control ] || skip "no /dev/ublk-control (ublk_drv)"
	[ -x "$RBLK" ] || fail "$RBLK missing: run make"
	[ -x "$RBLK_TARGET" ] || fail "$RBLK_TARGET missing: run make"
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || skip "$t not found"
	done
}

WORK=$(mktemp -d "/tmp/$TEST.XXXXXX")
at_exit rm -rf "$WORK"
# this test's `rblk map` records and daemon logs
export RBLK_RUN_DIR=$WORK/run

start_target()
{
	local port pid i
	port=$((20000 + ($$ + RANDOM) % 20000))
	"$RBLK_TARGET" --listen "rdma://$ADDR:$port" --allow-any-host --log-level info "$@" \
		>"$WORK/target.log" 2>&1 &
	pid=$!
	at_exit _stop_pid "$pid"
	for ((i = 0; i < 400; i++)); do
		grep -q "listening on rdma://$ADDR:$port" "$WORK/target.log" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if ! grep -q "listening on rdma://$ADDR:$port" "$WORK/target.log"; then
		cat "$WORK/target.log"
		fail "rblk-target did not start"
	fi
	# shellcheck disable=SC2034 # for the tests
	TARGET_PID=$pid
	URL=rdma://$ADDR:$port/vol0
}

_stop_pid()
{
	local i
	kill -0 "$1" 2>/dev/null || return 0
	kill -TERM "$1" 2>/dev/null
	for ((i = 0; i < 200; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -KILL "$1" 2>/dev/null
}

# Best effort at exit: unmap, else force (kills the daemon, detaches).
_unmap_at_exit()
{
	[ -b "$1" ] || return 0
	timeout 60 "$RBLK" unmap "$1" >/dev/null 2>&1 && return 0
	timeout 60 "$RBLK" unmap --force "$1" >/dev/null 2>&1 && return 0
	echo "$TEST: unmap $1 failed at exit"
}

map_ublk()
{
	local out t0
	t0=$(t_now)
	out=$(timeout 120 "$RBLK" map "$URL" --ublk --queues 2 "$@" 2>"$WORK/map.err") ||
		{ cat "$WORK/map.err"; fail "rblk map $URL --ublk --queues 2 $* failed"; }
	DEV=$(grep -o '/dev/ublkb[0-9]*' <<<"$out" | head -n1)
	[ -n "$DEV" ] || { echo "$out"; cat "$WORK/map.err"; fail "rblk map printed no /dev/ublkbN"; }
	[ -b "$DEV" ] || fail "$DEV is not a block device"
	# shellcheck disable=SC2034 # ID is for the tests
	ID=${DEV#/dev/ublkb}
	at_exit _unmap_at_exit "$DEV"
	echo "mapped $URL as $DEV in $(t_since "$t0") s"
}

unmap_ublk()
{
	local t0
	t0=$(t_now)
	timeout 120 "$RBLK" unmap "$DEV" || fail "rblk unmap $DEV failed or hung"
	echo "unmapped $DEV in $(t_since "$t0") s"
}

# State of DEV in `rblk list -o json` (starting, running, stopping, dead).
map_state()
{
	"$RBLK" list -o json 2>/dev/null |
		grep -o "\"dev\":\"$1\"[^}]*\"state\":\"[a-z]*\"" |
		sed 's/.*"state":"//; s/"$//'
}

daemon_pid()
{
	find /proc/[0-9]*/fd -lname "/dev/ublkc$1" 2>/dev/null | head -n1 | cut -d/ -f3
}

make_tree()
{
	local dir=$1 n=$2 i sub size
	for ((i = 0; i < n; i++)); do
		sub=$dir/d$((i % 4))/s$((i % 3))
		mkdir -p "$sub"
		size=$(((RANDOM % 256 + 1) * 4096 + RANDOM % 4096))
		head -c "$size" /dev/urandom >"$sub/f$i"
	done
}

manifest()
{
	(cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$2"
}

check_manifest()
{
	(cd "$1" && sha256sum --quiet -c "$2") || fail "checksums differ under $1"
}

# Per-hardware-queue request counts (debugfs), to show both queues work.
queue_stats()
{
	local h
	for h in /sys/kernel/debug/block/"${DEV#/dev/}"/hctx*; do
		[ -r "$h/queued" ] || continue
		echo "$(basename "$h"): $(cat "$h/queued") requests queued"
	done
}

# fs_fill_and_check NAME MKFS...: make a file system on $DEV with MKFS,
# mount it on $MNT, copy a 60-file tree there with a sha256 manifest
# ($WORK/manifest), sync, verify, umount. Prints timings.
fs_fill_and_check()
{
	local name=$1 t0
	shift
	MNT=$WORK/mnt
	mkdir -p "$MNT" "$WORK/src"
	t0=$(t_now)
	timeout 120 "$@" "$DEV" || fail "$name $DEV"
	echo "$name: $(t_since "$t0") s"
	timeout 60 mount "$DEV" "$MNT" || fail "mount $DEV"
	umount_at_exit "$MNT"
	make_tree "$WORK/src" 60
	manifest "$WORK/src" "$WORK/manifest"
	t0=$(t_now)
	timeout 120 cp -a "$WORK/src/." "$MNT/" || fail "copying the tree"
	timeout 60 sync || fail "sync"
	echo "tree: $(find "$WORK/src" -type f | wc -l) files, $(du -sk "$WORK/src" | cut -f1) KiB written in $(t_since "$t0") s"
	check_manifest "$MNT" "$WORK/manifest"
	timeout 60 umount "$MNT" || fail "umount"
}

# start_write_load: fio 4k randwrite at QD32 on both queues of $DEV in the
# background (pid in $fpid, log $WORK/fio.log, killed at exit); returns
# once 2000 writes have reached the device (in $w).
start_write_load()
{
	local i
	fio --name=load --filename="$DEV" --ioengine=libaio --direct=1 \
		--iodepth=32 --bs=4k --rw=randwrite --numjobs=2 --cpus_allowed=0-1 \
		--cpus_allowed_policy=split --time_based --runtime=200 \
		>"$WORK/fio.log" 2>&1 &
	fpid=$!
	kill_at_exit "$fpid"
	for ((i = 0; i < 100; i++)); do
		w=$(awk '{ print $5 }' "/sys/block/${DEV#/dev/}/stat" 2>/dev/null)
		[ "${w:-0}" -gt 2000 ] && break
		kill -0 "$fpid" 2>/dev/null || { cat "$WORK/fio.log"; fail "fio ended early"; }
		sleep 0.2
	done
}
