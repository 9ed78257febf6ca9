# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# tests/vm/lib.sh - the one helper library of the guest tests
# (tests/vm/tests/NN-name.sh). Source it first, with cwd = the repo root:
#
#	source tests/vm/lib.sh
#
# It builds on the host tests' tests/functions.sh, which gives fail, skip,
# cleanup_fn (run at exit, last registered first), tmo, stop_pid,
# requires, requires_built, TEST_DIR (a fresh directory, removed at exit),
# RBLK_BIN and RBLK_TARGET_BIN, and adds what the guest needs. Tests run
# as root; the host root is read-only, so scratch files go to TEST_DIR (on
# a tmpfs) and artifacts worth keeping to $RBLK_VM_TEST_OUT (on the host).
#
# Guest and checks
#   RDMA_ADDR (ADDR), RDMA_DEV   192.0.2.1 and rxe0
#   BUILD                  the build directory, relative (default build)
#   need_guest             skip unless inside the rblk test guest
#   need_rdma              need_guest, the RDMA device, the built programs
#   need_cmd CMD...        skip unless every CMD is on PATH
#   need_file PATH...      fail unless every PATH exists
#   ublk_requires TOOL...  need_rdma, ublk_drv and every TOOL
# Processes
#   bg CMD...              CMD in the background, in its own process group,
#                          killed at exit; $! is its pid
#   wait_until SEC CMD...  run CMD every 0.2 s until it succeeds; fail after SEC
#   kill_quiet PID..., kill_at_exit PID, umount_quiet DIR, umount_at_exit DIR
#   say MSG / t_now / t_since T0   lines and timings with the guest uptime
# Data
#   sha256 FILE            the hex digest alone
#   nbd_round_trip IN SOCK EXPORT OUT FILE WHAT
#                          nbdcopy IN to nbd+unix:///EXPORT?socket=SOCK and
#                          back into OUT; IN, OUT and FILE must hash the same
#   make_tree DIR N, manifest DIR OUT, check_manifest DIR IN
# Target and mappings (records and daemon logs in RBLK_RUN_DIR, under
# TEST_DIR; on failure the last lines of every daemon and target log are
# shown; at exit every mapping is unmapped, then forced, stray daemons
# killed, and targets stopped after that)
#   start_rdma_target [PORT] ARGS...
#                          rblk-target on rdma://ADDR:PORT (PORT: a free
#                          one) with ARGS; sets TARGET_PID, TARGET_LOG and,
#                          when it picked the port, URL (rdma://ADDR:PORT/vol0)
#   map_dev URL ARGS...    `rblk map URL ARGS`; sets DEV, DEV_NAME
#   map_ublk ARGS...       map_dev "$URL" --ublk --queues 2 ARGS; sets ID
#   unmap_ublk             `rblk unmap $DEV`, bounded
#   map_state DEV          DEV's state in `rblk list` (running, dead, ...)
#   map_daemon_pids        pids of every live daemon in RBLK_RUN_DIR
#   daemon_pid ID          pid of the process holding /dev/ublkcID
#   dev_size DEV_NAME      /sys/block/DEV_NAME/size in 512-byte sectors
#   queue_stats, fs_fill_and_check NAME MKFS..., start_write_load (ublk)
# Host scenarios over rdma
#   run_host_scenario NAME...  tests/e2e/NAME.sh with RBLK_TEST_SCHEME=rdma
# Durability (issue 28: dm-log-writes under what the target exports)
#   lw_create SIZE         /dev/mapper/lw: dm-log-writes over a zeroed SIZE
#                          loop device, its log on another (LW_LOG); LW_DEV
#   lw_mark MARK, lw_remove   log a mark; remove it (the log gets what is
#                          still unflushed, then its end mark)
#   lw_run NAME EXPORT INITIATOR EXPECT [UNSAFE]   the durable workload
#                          through librblk ("lib") or /dev/ublkbN ("ublk")
#                          on a target exporting EXPORT (RBLK_TARGET_UNSAFE_ACK
#                          = UNSAFE), marks after each FLUSH and FUA write,
#                          then the replay and checks (lw_check, or
#                          rblk_fsx replay's own for a block device): EXPECT
#                          pass or fail
#   lw_file_case NAME FS OPTS ALLOC EXPECT [UNSAFE]   lw_run on a 16 MiB file
#                          (ALLOC sparse or prealloc) of an FS (ext4, xfs)
#                          made on lw, exported with OPTS (e.g.
#                          ,cache=buffered): at each mark the replayed file
#                          system must mount, hold the file's acknowledged
#                          data and fsck clean (lw_check); LW_FILE_OPS ops

RDMA_ADDR=${RBLK_TEST_RDMA_ADDR:-192.0.2.1}
RDMA_DEV=${RBLK_TEST_RDMA_DEV:-rxe0}
ADDR=$RDMA_ADDR
BUILD=${BUILD:-build}
export TMPDIR=${TMPDIR:-/tmp}
export RDMA_ADDR RDMA_DEV BUILD
RBLK_BUILD=${RBLK_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/$BUILD}
# shellcheck source=tests/functions.sh
source "$(dirname "${BASH_SOURCE[0]}")/../functions.sh"
export RBLK_RUN_DIR=$TEST_DIR/run

# ---- checks -----------------------------------------------------------------

need_guest()
{
	[ "${RBLK_VM:-0}" = 1 ] || skip "not inside the rblk test guest (use tests/vm/run-test.sh)"
}

need_cmd()
{
	requires "$@"
}

need_file()
{
	local f
	for f in "$@"; do [ -e "$f" ] || fail "$f missing (build first: make)"; done
}

need_rdma()
{
	need_guest
	[ -e "/sys/class/infiniband/$RDMA_DEV" ] || skip "no RDMA device $RDMA_DEV"
	requires_built
	requires jq timeout
}

ublk_requires()
{
	need_rdma
	[ -c /dev/ublk-control ] || skip "no /dev/ublk-control (ublk_drv)"
	requires "$@"
}

# ---- processes --------------------------------------------------------------

_kill_group()
{
	kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null
	sleep 0.2
	kill -KILL -- "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null
	return 0
}

# setsid: its own process group, so cleanup gets its children too
bg()
{
	setsid "$@" &
	cleanup_fn _kill_group "$!"
}

wait_until()
{
	local sec=$1 end
	shift
	end=$((SECONDS + sec))
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || fail "timed out after ${sec}s waiting for: $*"
		sleep 0.2
	done
}

kill_quiet()
{
	kill -KILL "$@" 2>/dev/null
	return 0
}

_kill_wait()
{
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

kill_at_exit()
{
	cleanup_fn _kill_wait "$1"
}

umount_quiet()
{
	mountpoint -q "$1" && umount -l "$1"
	return 0
}

_umount_if()
{
	mountpoint -q "$1" && umount "$1"
	return 0
}

umount_at_exit()
{
	cleanup_fn _umount_if "$1"
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

say()
{
	echo "[$(t_now)] $*"
}

# ---- data -------------------------------------------------------------------

sha256()
{
	sha256sum <"$1" | cut -d' ' -f1
}

nbd_round_trip()
{
	local in=$1 uri="nbd+unix:///$3?socket=$2" out=$4 file=$5 what=$6 a b c
	timeout 180 nbdcopy "$in" "$uri" || fail "nbdcopy in"
	timeout 180 nbdcopy "$uri" "$out" || fail "nbdcopy out"
	a=$(sha256 "$in")
	b=$(sha256 "$out")
	c=$(sha256 "$file")
	echo "in $a"
	echo "out $b"
	echo "file $c"
	[ "$a" = "$b" ] && [ "$a" = "$c" ] || fail "$what: checksums differ"
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

# write_tree DIR MANIFEST N SEED: N files of 0, 1, 511, 4096, 4097 or
# random 1..256 KiB bytes (sizes drawn from SEED), three levels of
# directories; MANIFEST gets "sha256  path" lines relative to DIR
# (sha256sum -c in DIR checks them)
write_tree()
{
	python3 - "$@" <<'EOF'
import hashlib, os, random, sys
root, manifest, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
lines = []
for i in range(n):
    d = os.path.join(root, "d%d" % (i % 7), "e%d" % (i % 5), "f%d" % (i % 3))
    os.makedirs(d, exist_ok=True)
    size = rnd.choice([0, 1, 511, 4096, 4097, rnd.randrange(1, 262144)])
    data = os.urandom(size)
    p = os.path.join(d, "file%03d" % i)
    with open(p, "wb") as f:
        f.write(data)
    lines.append("%s  %s\n" % (hashlib.sha256(data).hexdigest(), os.path.relpath(p, root)))
with open(manifest, "w") as f:
    f.writelines(lines)
EOF
}

check_manifest()
{
	(cd "$1" && sha256sum --quiet -c "$2") || fail "checksums differ under $1"
}

# run_host_scenario NAME...: the host's tests/e2e/NAME.sh, the same files,
# over rdma: RBLK_TEST_SCHEME=rdma makes their start_target listen on
# rdma://RDMA_ADDR:PORT and RBLK_TARGET_URL name it. Fails with the first
# that fails; one that skips (77) skips the test.
run_host_scenario()
{
	local t rc
	need_rdma
	# the guest (TCG) runs about 10x slower: tmo limits stretch 4x
	export RBLK_TEST_SCHEME=rdma RBLK_TEST_RDMA_ADDR=$RDMA_ADDR RBLK_BUILD
	export RBLK_TMO_SCALE=${RBLK_TMO_SCALE:-4}
	for t in "$@"; do
		say "# tests/e2e/$t.sh over rdma"
		rc=0
		"tests/e2e/$t.sh" || rc=$?
		[ $rc -eq 77 ] && skip "tests/e2e/$t.sh skipped"
		[ $rc -eq 0 ] || fail "tests/e2e/$t.sh over rdma (exit $rc)"
	done
}

# ---- target and mappings ----------------------------------------------------

_mapped=()
_targets=()

start_rdma_target()
{
	local port i picked=0
	if [[ ${1:-} =~ ^[0-9]+$ ]]; then
		port=$1
		shift
	else
		port=$((20000 + ($$ + RANDOM) % 20000))
		picked=1
	fi
	TARGET_LOG=$TEST_DIR/target.$port.log
	"$RBLK_TARGET_BIN" --listen "rdma://$ADDR:$port" --allow-any-host --log-level info \
		"$@" >>"$TARGET_LOG" 2>&1 &
	TARGET_PID=$!
	_targets+=("$TARGET_PID") # stopped by _vm_cleanup, after the unmaps
	for ((i = 0; i < 600; i++)); do
		grep -q "listening on rdma://$ADDR:$port" "$TARGET_LOG" && break
		kill -0 "$TARGET_PID" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "listening on rdma://$ADDR:$port" "$TARGET_LOG"; then
		cat "$TARGET_LOG" >&2
		fail "rblk-target on rdma://$ADDR:$port did not start"
	fi
	# a test that gave the port has its URL already
	# shellcheck disable=SC2034 # for the tests
	[ $picked = 0 ] || URL=rdma://$ADDR:$port/vol0
}

map_daemon_pids()
{
	local f
	for f in "$RBLK_RUN_DIR"/map-*.rec; do
		[ -e "$f" ] || continue
		jq -r .pid "$f" 2>/dev/null
	done
}

map_dev()
{
	local url=$1 rc=0 f t0
	shift
	t0=$(t_now)
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
	say "mapped $url on $DEV in $(t_since "$t0") s"
}

map_ublk()
{
	map_dev "$URL" --ublk --queues 2 "$@"
	[[ $DEV == /dev/ublkb* ]] || fail "rblk map --ublk printed $DEV"
	# shellcheck disable=SC2034 # ID is for the tests
	ID=${DEV#/dev/ublkb}
}

unmap_ublk()
{
	local t0
	t0=$(t_now)
	timeout 120 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap $DEV failed or hung"
	echo "unmapped $DEV in $(t_since "$t0") s"
}

# State of DEV in `rblk list -o json` (starting, running, stopping, dead).
map_state()
{
	"$RBLK_BIN" list -o json 2>/dev/null |
		jq -r --arg d "$1" '.mappings[] | select(.dev == $d) | .state'
}

daemon_pid()
{
	find /proc/[0-9]*/fd -lname "/dev/ublkc$1" 2>/dev/null | head -n1 | cut -d/ -f3
}

dev_size()
{
	cat "/sys/block/$1/size"
}

# Exit: on failure show the daemon and target logs; unmap what is left,
# then force, then kill stray daemons; then stop the targets.
_vm_cleanup()
{
	local rc=$1 d p f
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		for f in "$RBLK_RUN_DIR"/map-*.log "$TEST_DIR"/target.*.log; do
			[ -s "$f" ] || continue
			echo "--- last lines of $f"
			tail -n 30 "$f"
		done
	fi
	for d in "${_mapped[@]+"${_mapped[@]}"}"; do
		[ -b "$d" ] || continue
		timeout -k 5 60 "$RBLK_BIN" unmap "$d" >/dev/null 2>&1 ||
			timeout -k 5 60 "$RBLK_BIN" unmap --force "$d" >/dev/null 2>&1
	done
	for p in $(map_daemon_pids); do
		kill -KILL "$p" 2>/dev/null
	done
	for d in "${_mapped[@]+"${_mapped[@]}"}"; do
		[ -b "$d" ] || continue
		timeout -k 5 30 "$RBLK_BIN" unmap --force "$d" >/dev/null 2>&1
	done
	for p in "${_targets[@]+"${_targets[@]}"}"; do
		stop_pid "$p"
	done
	return 0
}
# Registered after TEST_DIR's removal, so it runs before it. rc is the
# exit status, a local of functions.sh's _run_cleanup, which calls us.
_vm_exit_status()
{
	_vm_cleanup "${rc:-1}"
}
cleanup_fn _vm_exit_status

# ---- ublk -------------------------------------------------------------------

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
# ($TEST_DIR/manifest), sync, verify, umount. Prints timings.
fs_fill_and_check()
{
	local name=$1 t0
	shift
	MNT=$TEST_DIR/mnt
	mkdir -p "$MNT" "$TEST_DIR/src"
	t0=$(t_now)
	timeout 120 "$@" "$DEV" || fail "$name $DEV"
	echo "$name: $(t_since "$t0") s"
	timeout 60 mount "$DEV" "$MNT" || fail "mount $DEV"
	umount_at_exit "$MNT"
	make_tree "$TEST_DIR/src" 60
	manifest "$TEST_DIR/src" "$TEST_DIR/manifest"
	t0=$(t_now)
	timeout 120 cp -a "$TEST_DIR/src/." "$MNT/" || fail "copying the tree"
	timeout 60 sync || fail "sync"
	echo "tree: $(find "$TEST_DIR/src" -type f | wc -l) files, $(du -sk "$TEST_DIR/src" | cut -f1) KiB written in $(t_since "$t0") s"
	check_manifest "$MNT" "$TEST_DIR/manifest"
	timeout 60 umount "$MNT" || fail "umount"
}

# remount_check: mount $DEV on $MNT again, cold (page cache dropped), check
# the files of fs_fill_and_check against its manifest, umount
remount_check()
{
	timeout 60 mount "$DEV" "$MNT" || fail "remount"
	echo 3 >/proc/sys/vm/drop_caches
	check_manifest "$MNT" "$TEST_DIR/manifest"
	echo "remount: checksums OK"
	timeout 60 umount "$MNT" || fail "umount"
}

# start_write_load: fio 4k randwrite at QD32 on both queues of $DEV in the
# background (pid in $fpid, log $TEST_DIR/fio.log, killed at exit); returns
# once 2000 writes have reached the device (in $w).
start_write_load()
{
	local i
	fio --name=load --filename="$DEV" --ioengine=libaio --direct=1 \
		--iodepth=32 --bs=4k --rw=randwrite --numjobs=2 --cpus_allowed=0-1 \
		--cpus_allowed_policy=split --time_based --runtime=200 \
		>"$TEST_DIR/fio.log" 2>&1 &
	fpid=$!
	kill_at_exit "$fpid"
	for ((i = 0; i < 100; i++)); do
		w=$(awk '{ print $5 }' "/sys/block/${DEV#/dev/}/stat" 2>/dev/null)
		[ "${w:-0}" -gt 2000 ] && break
		kill -0 "$fpid" 2>/dev/null || { cat "$TEST_DIR/fio.log"; fail "fio ended early"; }
		sleep 0.2
	done
}

# ---- durability: dm-log-writes ----------------------------------------------

LW_OPS=${RBLK_LW_OPS:-200}
FSX=$RBLK_BUILD/tests/rblk_fsx

lw_create()
{
	local size=$1 d l
	modprobe loop 2>/dev/null || true # not loaded at boot
	modprobe dm-log-writes 2>/dev/null || skip "no dm-log-writes module"
	need_cmd dmsetup losetup
	rm -f "$TEST_DIR/lw.data" "$TEST_DIR/lw.log"
	truncate -s "$size" "$TEST_DIR/lw.data"
	truncate -s 1G "$TEST_DIR/lw.log" # sparse: only what is logged is used
	d=$(losetup -f --show "$TEST_DIR/lw.data") || fail "losetup data"
	l=$(losetup -f --show "$TEST_DIR/lw.log") || fail "losetup log"
	LW_LOOPS="$d $l"
	dmsetup create lw --noudevsync --table \
		"0 $(blockdev --getsz "$d") log-writes $d $l" || fail "dmsetup create"
	dmsetup mknodes lw 2>/dev/null || true
	LW_DEV=/dev/mapper/lw
	LW_LOG=$TEST_DIR/lw.log
	[ -b "$LW_DEV" ] || fail "$LW_DEV missing"
	cleanup_fn lw_remove
}

lw_mark()
{
	dmsetup message lw 0 mark "$1" || fail "dmsetup message lw mark $1"
}

lw_remove()
{
	local l
	[ -n "${LW_LOOPS:-}" ] || return 0
	dmsetup remove --noudevsync lw 2>/dev/null ||
		{ sleep 1; dmsetup remove --noudevsync lw; } || return 1
	for l in $LW_LOOPS; do losetup -d "$l"; done
	LW_LOOPS=
}

# lw_check: run by rblk_fsx replay at a checkpoint of a file case, with
# IMG (the replayed file system), MARK, LOOSE; LW_FS the fs type, LW_FILE
# the exported file's name in it, LW_JOURNAL. Mounts (recovering the
# journal), checks the file against the journal, umounts, fscks.
lw_check()
{
	local m=$TEST_DIR/chk rc=0 loose=()
	mkdir -p "$m"
	[ "$LOOSE" = 1 ] && loose=(-L)
	mount -o loop "$IMG" "$m" || { echo "mark $MARK entry $ENTRY: $LW_FS does not mount"; return 1; }
	"$FSX" verify "$m/$LW_FILE" -j "$LW_JOURNAL" -M "$MARK" "${loose[@]}" || rc=1
	umount "$m" || rc=1
	case $LW_FS in
	ext4) e2fsck -fn "$IMG" >"$TEST_DIR/fsck.out" 2>&1 ;;
	xfs) xfs_repair -n -f "$IMG" >"$TEST_DIR/fsck.out" 2>&1 ;;
	esac || { echo "mark $MARK entry $ENTRY: $LW_FS check failed:"; tail -n 20 "$TEST_DIR/fsck.out"; rc=1; }
	return $rc
}

lw_run()
{
	local name=$1 export=$2 init=$3 expect=$4 unsafe=${5:-} tgt rc=0 j t0
	j=$TEST_DIR/$name.journal
	rm -f "$TEST_DIR"/target.*.log
	lw_mark rblk-0 # what the caller made durable: the start of the checks
	RBLK_TARGET_UNSAFE_ACK=$unsafe start_rdma_target --export "vol0=$export"
	[ -z "$unsafe" ] || grep -q "THIS TARGET LIES" "$TARGET_LOG" ||
		fail "$name: the target did not warn about RBLK_TARGET_UNSAFE_ACK"
	tgt=$URL
	if [ "$init" = ublk ]; then
		map_ublk
		tgt=$DEV
	fi
	t0=$(t_now)
	timeout 600 "$FSX" durable "$tgt" -n "$LW_OPS" -s "${#name}" -j "$j" \
		-d lw || fail "$name: workload"
	say "workload: $(t_since "$t0") s"
	[ "$init" = ublk ] && unmap_ublk
	kill -TERM "$TARGET_PID"
	wait "$TARGET_PID" 2>/dev/null || true
	[ -n "${LW_FS:-}" ] && { umount "$LW_MNT" || fail "umount $LW_MNT"; }
	lw_remove || fail "dmsetup remove lw"
	t0=$(t_now)
	if [ -n "${LW_FS:-}" ]; then
		LW_JOURNAL=$j
		export LW_FS LW_FILE LW_JOURNAL FSX TEST_DIR
		# rblk_fsx runs it through sh: a script of its own
		{ echo '#!/bin/bash'; declare -f lw_check; echo lw_check; } \
			>"$TEST_DIR/lw-check.sh"
		chmod +x "$TEST_DIR/lw-check.sh"
		timeout 900 "$FSX" replay "$LW_LOG" -j "$j" \
			-z "$(stat -c %s "$TEST_DIR/lw.data")" -o "$TEST_DIR/img" \
			-x "$TEST_DIR/lw-check.sh" ${LW_ALL:+-a} >"$TEST_DIR/$name.replay" 2>&1 || rc=$?
	else
		timeout 600 "$FSX" replay "$LW_LOG" -j "$j" \
			>"$TEST_DIR/$name.replay" 2>&1 || rc=$?
	fi
	say "replay: $(t_since "$t0") s"
	grep -v '^LOST at' "$TEST_DIR/$name.replay" | tail -n 3
	grep -m 3 '^LOST' "$TEST_DIR/$name.replay" || true
	[ $rc = 0 ] || [ "$expect" = fail ] ||
		grep -v '^LOST' "$TEST_DIR/$name.replay" | head -n 40
	case $expect in
	pass) [ $rc = 0 ] || fail "$name: acknowledged data lost (replay exit $rc)" ;;
	fail)
		[ $rc = 1 ] || fail "$name: the dishonest target (RBLK_TARGET_UNSAFE_ACK=$unsafe) was not caught (replay exit $rc)"
		grep -q '^LOST' "$TEST_DIR/$name.replay" ||
			fail "$name: replay failed without saying what was lost"
		echo "$name: RBLK_TARGET_UNSAFE_ACK=$unsafe caught: $(grep -c '^LOST' "$TEST_DIR/$name.replay") LOST lines"
		;;
	esac
	echo "$name: $expect as expected"
}

LW_FILE_OPS=${RBLK_LW_FILE_OPS:-30}

lw_file_case()
{
	local name=$1 fs=$2 opts=$3 alloc=$4 expect=$5 unsafe=${6:-} ops=$LW_OPS
	lw_create 64M
	case $fs in
	ext4) mkfs.ext4 -q -F "$LW_DEV" ;;
	# below xfsprogs' 300 MB floor, allowed for test rigs (as fstests)
	xfs) TEST_DIR=$TEST_DIR TEST_DEV=$LW_DEV QA_CHECK_FS=xfs \
		mkfs.xfs -q -f "$LW_DEV" ;;
	esac || fail "mkfs.$fs"
	LW_MNT=$TEST_DIR/mnt
	mkdir -p "$LW_MNT"
	mount "$LW_DEV" "$LW_MNT" || fail "mount $fs"
	umount_at_exit "$LW_MNT"
	LW_FS=$fs LW_FILE=vol.img
	case $alloc in
	sparse) truncate -s 16M "$LW_MNT/$LW_FILE" ;;
	prealloc) fallocate -l 16M "$LW_MNT/$LW_FILE" ;;
	esac || fail "creating the $alloc file"
	sync
	LW_OPS=$LW_FILE_OPS
	lw_run "$name" "$LW_MNT/$LW_FILE$opts" lib "$expect" "$unsafe"
	LW_OPS=$ops LW_FS=
}
