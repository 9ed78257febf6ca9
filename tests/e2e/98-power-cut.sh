#!/usr/bin/env bash
# Power cuts of the target's machine (issue 28, part 2). rblk-target runs in
# a QEMU guest (tests/vm/run-vm.sh, tests/vm/power-cut-target.sh); the
# initiator (`rblk nbd`, kept running across the cuts so it reconnects) and
# the workload (tests/e2e/powercut.py: writes, FUA writes, FLUSHes, each
# event journaled as it happens) run on the host over tcp, through a
# user-mode NIC with restrict=on whose only opening is one forwarded
# loopback port.
#
# What a power cut loses: the guest's disk is an NBD disk served by nbdkit
# on the host with its cache filter in writeback mode: a write stays in
# nbdkit's cache (an unlinked temporary file) until the guest flushes,
# exactly a disk with a volatile write cache. The cut is kill -9 of qemu
# and nbdkit at once: the guest's page cache and the disk's cache are
# gone, what was flushed is in the host file. (QEMU's cache modes alone
# cannot model this: whatever qemu handed to the host kernel survives a
# kill of qemu, with cache=writeback in the host page cache and with
# cache=none|directsync on the host disk, so an unflushed write outlives
# the "power" and a target that never flushes passes.)
#
# After each cut: nbdkit and the guest start again, the initiator
# reconnects, the workload goes on for a moment and stops, and the checker
# reads every block: each holds its newest durable generation (a FUA write
# once acknowledged; a write acknowledged before a completed FLUSH was
# sent) or a newer one that was sent, never an older one, never anything
# else. For ext4 the guest mounts (journal replay), and e2fsck -fn must be
# clean on every boot after a cut.
#
# Check form (4 guest boots): /dev/vda exported, 1 cut; then a dishonest
# target (RBLK_TARGET_UNSAFE_ACK=flush: FLUSH acknowledged without a sync)
# must be caught losing acknowledged data, 1 cut. The long form adds a
# sparse file on ext4 (O_DIRECT, and cache=buffered) and a target that
# acknowledges FUA without RWF_DSYNC, and ext4 on /dev/ublkbN in a second
# guest (the initiator's; run_ublk_case). RBLK_PC_CUTS=N cuts N times per
# honest case; RBLK_PC_CASES picks cases (bdev ext4 ext4-buffered
# unsafe-fua unsafe-flush ublk-ext4).
# soak: 8 cuts each of /dev/vda, ext4 (O_DIRECT), ext4 cache=buffered (e2fsck -fn clean after each) and ext4 on the initiator's /dev/ublkbN, and the dishonest targets (flush, fua) caught
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
[ "${RBLK_VM_SKIP:-0}" = 1 ] && skip "guest tests skipped (RBLK_VM_SKIP=1)"
[ "$(id -u)" = 0 ] || skip "needs root (QEMU guests)"
requires qemu-system-x86_64 nbdkit
requires_built
PY=/usr/bin/python3
$PY -c 'import nbd' 2>/dev/null || skip "no python3 nbd module (python3-libnbd)"
nbdkit --filter=cache null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit has no cache filter"
"$RBLK_ROOT/tests/vm/setup.sh" >"$TEST_DIR/vm-setup.log" 2>&1 ||
	{ tail -n 20 "$TEST_DIR/vm-setup.log"; fail "tests/vm/setup.sh failed"; }

CUTS_BDEV=${RBLK_PC_CUTS:-1} CUTS_EXT4=${RBLK_PC_CUTS:-1} MODES_SOAK=
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	CUTS_BDEV=${RBLK_PC_CUTS:-8} CUTS_EXT4=${RBLK_PC_CUTS:-8} MODES_SOAK=1
fi
VOL=16M
GPORT=7441
cuts=0 checks=0 claims=0 lost_total=0 boot_fails=0

# One guest at a time on this host: hold run-vm.sh's lock for the whole
# test (a cut releases nothing, so no other guest slips in between a cut
# and the reboot) and boot each guest with RBLK_VM_PARALLEL=1; as for
# run-vm.sh, RBLK_VM_PARALLEL=1 skips the lock.
if [ "${RBLK_VM_PARALLEL:-0}" != 1 ]; then
	lockdir=/run/lock
	[ -d "$lockdir" ] && [ -w "$lockdir" ] || lockdir=${TMPDIR:-/tmp}
	exec 8>"$lockdir/rblk-vm.lock"
	flock -n 8 || { echo "waiting for the guest lock"; flock 8; }
fi

# ---- the machine: nbdkit (disk with a volatile cache) + the guest ----------
# boot_once MODE [VAR=VAL...]: nbdkit and the guest; 0 once the target
# listens (sets QPID, VMPID, NBDKIT_PID), 1 when the guest died first
boot_once()
{
	local mode=$1 i
	shift
	rm -f "$OUTD/ready"
	mkdir -p "$TEST_DIR/nbdkit-tmp"
	TMPDIR=$TEST_DIR/nbdkit-tmp nbdkit -f -U "$DISK_SOCK" --filter=cache \
		file "file=$DISK" cache=writeback >>"$TEST_DIR/nbdkit.log" 2>&1 &
	NBDKIT_PID=$!
	for ((i = 0; i < 100; i++)); do
		[ -S "$DISK_SOCK" ] && break
		sleep 0.05
	done
	local envs=()
	for kv in "$@"; do envs+=(--env "$kv"); done
	RBLK_VM_PARALLEL=1 "$RBLK_ROOT/tests/vm/run-vm.sh" -q --timeout 900 \
		--out "$OUTD" --pid-file "$OUTD/qemu.pid" "${envs[@]}" \
		--qemu-arg -drive \
		--qemu-arg "file=nbd:unix:$DISK_SOCK,format=raw,if=virtio,cache=writeback" \
		--qemu-arg -netdev --qemu-arg "${TNETDEV:-$(user_nic)}" \
		--qemu-arg -device --qemu-arg virtio-net-pci,netdev=pc \
		-- tests/vm/power-cut-target.sh "$mode" "$GPORT" "$VOL" \
		>>"$TEST_DIR/run-vm.log" 2>&1 &
	VMPID=$!
	for ((i = 0; i < 1200; i++)); do
		[ -e "$OUTD/ready" ] && break
		kill -0 "$VMPID" 2>/dev/null || break
		sleep 0.2
	done
	[ -e "$OUTD/ready" ] || return 1
	QPID=$(cat "$OUTD/qemu.pid")
}

# the target guest's NIC: user-mode, restrict=on, its only opening one
# forwarded loopback port (the ublk case uses a dgram link instead)
user_nic()
{
	echo "user,id=pc,restrict=on,net=192.0.2.128/25,host=192.0.2.129,hostfwd=tcp:127.0.0.1:$HPORT-192.0.2.150:$GPORT"
}

# start_machine MODE [VAR=VAL...]: boot, up to 3 tries: a TCG guest on a
# loaded host can die in early boot; what it wrote dies with it (a cut
# while booting, which is one more power cut)
start_machine()
{
	local try
	for try in 1 2 3; do
		boot_once "$@" && return 0
		tail -n 5 "$OUTD/console.log" 2>/dev/null
		echo "the target's guest died while booting (try $try)"
		kill -KILL "$NBDKIT_PID" 2>/dev/null || true
		wait "$VMPID" 2>/dev/null || true
		wait "$NBDKIT_PID" 2>/dev/null || true
		rm -f "$DISK_SOCK"
		boot_fails=$((boot_fails + 1))
	done
	tail -n 20 "$TEST_DIR/run-vm.log" "$OUTD/output.log" 2>/dev/null
	fail "the target's guest did not come up ($1)"
}

# the power cut: qemu and the disk's cache die at once, no shutdown
power_cut()
{
	kill -KILL "$QPID" "$NBDKIT_PID" 2>/dev/null || true
	wait "$VMPID" 2>/dev/null || true
	wait "$NBDKIT_PID" 2>/dev/null || true
	rm -f "$DISK_SOCK"
	cuts=$((cuts + 1))
}

stop_machine()
{
	if [ -n "${QPID:-}" ]; then kill -KILL "$QPID" 2>/dev/null || true; fi
	if [ -n "${NBDKIT_PID:-}" ]; then kill -TERM "$NBDKIT_PID" 2>/dev/null || true; fi
	if [ -n "${VMPID:-}" ]; then wait "$VMPID" 2>/dev/null || true; fi
	if [ -n "${NBDKIT_PID:-}" ]; then wait "$NBDKIT_PID" 2>/dev/null || true; fi
	QPID='' VMPID='' NBDKIT_PID=''
	return 0
}
cleanup_fn stop_machine

# writes acknowledged at the end of journal $1 since the last FLUSH or FUA
# write was sent or completed
unsynced()
{
	[ -e "$1" ] || { echo 0; return; }
	awk '$1 == "FS" || $1 == "FD" || $1 == "FE" || $1 == "AF" ||
		($1 == "S" && $5 == 1) { n = 0; next }
		$1 == "A" { n++ } END { print n + 0 }' "$1"
}

# ---- one case: a disk, a mode, N cuts --------------------------------------
# run_case NAME MODE CUTS EXPECT [VAR=VAL...]: EXPECT ok (lost = 0 at every
# check) or loss (the last cut must show lost writes); the VAR=VALs go to the
# target's guest on the last boot before the last cut
run_case()
{
	local name=$1 mode=$2 ncuts=$3 expect=$4 c gen=0 rc out
	shift 4
	OUTD=$TEST_DIR/$name
	DISK=$TEST_DIR/$name.disk
	DISK_SOCK=$TEST_DIR/$name.disk.sock
	mkdir -p "$OUTD"
	case $mode in
	bdev) truncate -s "$VOL" "$DISK" ;;
	ext4*) truncate -s 64M "$DISK" && mkfs.ext4 -q -F "$DISK" ;;
	esac
	HPORT=$(free_port)
	local envs=()
	[ "$ncuts" = 1 ] && envs=("$@")
	start_machine "$mode" "${envs[@]+"${envs[@]}"}"
	local nsock=$TEST_DIR/$name.nbd.sock
	"$RBLK_BIN" nbd "tcp://127.0.0.1:$HPORT/vol" --socket "$nsock" \
		--queues 2 --reconnect-delay 1 --ctrl-loss-timeout 600 \
		--io-retries -1 --log-level info >"$TEST_DIR/$name.nbd.log" 2>&1 &
	local npid=$!
	cleanup_fn stop_pid "$npid"
	for ((c = 0; c < 100; c++)); do
		[ -S "$nsock" ] && break
		sleep 0.1
	done
	[ -S "$nsock" ] || { cat "$TEST_DIR/$name.nbd.log"; fail "rblk nbd did not start"; }
	for ((c = 1; c <= ncuts; c++)); do
		local j=$OUTD/journal.$c
		gen=$((c * 100000000))
		PC_FUA=${PC_FUA:-0.05} PC_FLUSH_EVERY=${PC_FLUSH_EVERY:-24} \
			$PY "$RBLK_ROOT/tests/e2e/powercut.py" run "$nsock" "$j" "$gen" "$RANDOM" \
			>"$OUTD/run.$c.log" 2>&1 &
		local wpid=$!
		# a random point of the workload, 2.0 .. 6.0 s in, and then the
		# first moment with writes acknowledged since the last sync (a
		# FLUSH or FUA write sent or done; here a FUA write flushes the
		# whole disk cache), so the cut has something to lose (8 s at most)
		sleep "$((2 + RANDOM % 4)).$((RANDOM % 10))"
		local w
		for ((w = 0; w < 80; w++)); do
			[ "$(unsynced "$j")" -ge 3 ] && break
			sleep 0.1
		done
		kill -0 "$wpid" 2>/dev/null || { cat "$OUTD/run.$c.log"; fail "$name: the workload ended before cut $c"; }
		local fd
		fd=$(grep -c '^FD' "$j" || true)
		power_cut
		envs=()
		[ "$c" = $((ncuts - 1)) ] && envs=("$@")
		start_machine "$mode" "${envs[@]+"${envs[@]}"}"
		# the initiator reconnects; the workload drains and goes on a bit
		sleep 2
		kill -TERM "$wpid"
		rc=0
		wait_pid 320 "$wpid" || rc=$?
		[ "$rc" = 0 ] || { cat "$OUTD/run.$c.log"; fail "$name: the workload failed after cut $c (rc $rc)"; }
		if [ "$mode" != bdev ]; then
			local boot
			boot=$(cat "$OUTD/boots")
			grep -q '^rc=0$' "$OUTD/fsck.$boot" ||
				{ cat "$OUTD/fsck.$boot"; fail "$name: e2fsck -fn after cut $c is not clean"; }
		fi
		rc=0
		out=$($PY "$RBLK_ROOT/tests/e2e/powercut.py" check "$nsock" "$j" "$OUTD/state") || rc=$?
		checks=$((checks + 1))
		echo "$name cut $c ($fd flushes done before it): $out" | tail -n 12
		local last=${out##*$'\n'}
		local cl lo
		cl=$(echo "$last" | sed -n 's/.*durable-claims \([0-9]*\).*/\1/p')
		lo=$(echo "$last" | sed -n 's/.* lost \([0-9]*\).*/\1/p')
		claims=$((claims + ${cl:-0}))
		if [ "$expect" = ok ]; then
			[ "$rc" = 0 ] || { tail -n 20 "$TEST_DIR/$name.nbd.log"; fail "$name: acknowledged data lost or corrupt after cut $c"; }
			lost_total=$((lost_total + ${lo:-0}))
		elif [ "$c" = "$ncuts" ]; then
			[ "$rc" = 1 ] && [ "${lo:-0}" -gt 0 ] ||
				fail "$name: the dishonest target ($*) was not caught (rc $rc)"
			echo "$name: the dishonest target ($*) is caught: $lo durable blocks lost"
		fi
	done
	stop_pid "$npid"
	stop_machine
	grep -h 'reconnected\|lost' "$TEST_DIR/$name.nbd.log" | tail -n 3 || true
}

# ---- ext4 on /dev/ublkbN in a second guest ----------------------------------
# run_ublk_case CUTS: the initiator runs in a guest of its own (this host's
# kernel has no ublk), joined to the target's guest by a QEMU dgram network
# on 127.0.0.1 (UDP: nothing to reconnect when the target's qemu dies);
# tests/vm/power-cut-initiator.sh writes fsync'd files to ext4 on the
# mapped device while the target's machine loses power CUTS times, then
# checks them and e2fsck -fn
run_ublk_case()
{
	local ncuts=$1 name=ublk-ext4 c w tport iport ipid rc n
	OUTD=$TEST_DIR/$name
	DISK=$TEST_DIR/$name.disk
	DISK_SOCK=$TEST_DIR/$name.disk.sock
	local iout=$TEST_DIR/$name-init link='dgram,id=pc,local.type=inet,local.host=127.0.0.1,remote.type=inet,remote.host=127.0.0.1'
	mkdir -p "$OUTD" "$iout"
	truncate -s 256M "$DISK"
	tport=$(free_port) iport=$(free_port)
	TNETDEV="$link,local.port=$tport,remote.port=$iport"
	start_machine bdev
	RBLK_VM_PARALLEL=1 "$RBLK_ROOT/tests/vm/run-vm.sh" -q --timeout 900 \
		--out "$iout" \
		--qemu-arg -netdev --qemu-arg "$link,local.port=$iport,remote.port=$tport" \
		--qemu-arg -device --qemu-arg virtio-net-pci,netdev=pc,mac=52:54:00:12:34:57 \
		-- tests/vm/power-cut-initiator.sh 192.0.2.150 "$GPORT" \
		>>"$TEST_DIR/run-vm-init.log" 2>&1 &
	ipid=$!
	cleanup_fn stop_pid "$ipid"
	for ((w = 0; w < 1500; w++)); do
		[ -e "$iout/mapped" ] && break
		kill -0 "$ipid" 2>/dev/null || break
		sleep 0.2
	done
	[ -e "$iout/mapped" ] || { tail -n 20 "$TEST_DIR/run-vm-init.log" "$iout/output.log" 2>/dev/null; fail "$name: the initiator's guest did not map the volume"; }
	# files fsync'd plus writes that failed: grows while the initiator works
	progress() { echo $(($(wc -l <"$iout/fsynced") + $(grep -c 'failed' "$iout/output.log" 2>/dev/null))); }
	for ((c = 1; c <= ncuts; c++)); do
		# a random point, 2.0 .. 6.0 s on, once 2 more files are in
		n=$(progress)
		sleep "$((2 + RANDOM % 4)).$((RANDOM % 10))"
		for ((w = 0; w < 600; w++)); do
			[ "$(progress)" -ge $((n + 2)) ] && break
			sleep 0.2
		done
		n=$(wc -l <"$iout/fsynced")
		power_cut
		echo "$name cut $c: $n files fsync'd before it"
		start_machine bdev
		# the initiator reconnects and goes on (or its file system
		# fails a write: a loss was seen) before the next cut
		n=$(progress)
		for ((w = 0; w < 600; w++)); do
			[ "$(progress)" -gt "$n" ] && break
			sleep 0.2
		done
	done
	touch "$iout/stop"
	rc=0
	wait_pid 600 "$ipid" || rc=$?
	stop_machine
	checks=$((checks + 1))
	[ "$rc" = 0 ] || { tail -n 30 "$iout/output.log" 2>/dev/null; cat "$iout/fsck" 2>/dev/null; fail "$name: fsync'd files lost or e2fsck not clean (rc $rc)"; }
	echo "$name: $(cat "$iout/result"); $(grep -c 'aborted\|failed' "$iout/output.log" || true) failed writes after a loss"
}

# RBLK_PC_CASES picks some (e.g. "bdev" to try an older build's initiator)
CASES=${RBLK_PC_CASES:-bdev ${MODES_SOAK:+ext4 ext4-buffered unsafe-fua ublk-ext4} unsafe-flush}
for k in $CASES; do
	case $k in
	bdev) run_case bdev bdev "$CUTS_BDEV" ok ;;
	ext4) run_case ext4 ext4 "$CUTS_EXT4" ok ;;
	ext4-buffered) run_case ext4-buffered ext4-buffered "$CUTS_EXT4" ok ;;
	# the lie must be the only sync: FUA writes alone, FLUSHes alone
	unsafe-fua) PC_FUA=0.2 PC_FLUSH_EVERY=0 run_case unsafe-fua bdev 1 loss RBLK_TARGET_UNSAFE_ACK=fua ;;
	unsafe-flush) PC_FUA=0 run_case unsafe-flush bdev 1 loss RBLK_TARGET_UNSAFE_ACK=flush ;;
	ublk-ext4) run_ublk_case "$CUTS_EXT4" ;;
	*) fail "unknown case $k" ;;
	esac
done
echo "power cuts: $cuts, checks: $checks, durable claims checked: $claims, lost = $lost_total (honest target); guests that died booting: $boot_fails"
