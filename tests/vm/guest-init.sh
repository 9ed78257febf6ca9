#!/bin/bash
# tests/vm/guest-init.sh - stage 2 of the rblk test guest. Runs INSIDE the
# guest as PID 1, from the host root that stage 1 (the initramfs built by
# setup.sh) mounted read-only over 9p. Never run it on the host.
#
# It prepares the guest (tmpfs, module tree, RDMA over rxe on a dummy netdev),
# runs /mnt/out/cmd (written by run-vm.sh) and powers off. Everything it and
# the command write goes to tmpfs or to the writable out share /mnt/out:
#   /mnt/out/setup.log    this script's log (also on the serial console)
#   /mnt/out/output.log   the command's stdout+stderr (run-vm.sh streams it)
#   /mnt/out/rc           the command's exit status
#   /mnt/out/boot-uptime  guest uptime (s) when the command started
#   /mnt/out/dmesg.log    kernel log at the end

if [ "$$" != 1 ]; then
	echo "guest-init.sh: this runs as PID 1 inside the rblk test guest" >&2
	exit 2
fi

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp/home LANG=C.UTF-8
exec </dev/null >/dev/console 2>&1

OUT=/mnt/out
SETUPLOG=/dev/null
up() { read -r u _ </proc/uptime; echo "$u"; }
log() { echo "guest: [$(up)] $*" | tee -a "$SETUPLOG"; }
warn() { echo "guest: [$(up)] warning: $*" | tee -a "$SETUPLOG"; }

poweroff_now() {
	dmesg >"$OUT/dmesg.log" 2>/dev/null
	# a device whose server died (a failed ublk/nbd test) can hold dirty
	# pages forever and a plain sync with them: give it 20 s, then go
	sync &
	for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		kill -0 $! 2>/dev/null || break
		sleep 1
	done
	echo o >/proc/sysrq-trigger
	sleep 10
	busybox poweroff -f 2>/dev/null
	while :; do sleep 1; done # never let PID 1 exit
}

log "stage 2 started"
mode=run repo=
read -r -a cmdline </proc/cmdline
for a in "${cmdline[@]}"; do
	case $a in
	rblk.mode=*) mode=${a#rblk.mode=} ;;
	rblk.repo=*) repo=${a#rblk.repo=} ;;
	esac
done

# ---- file systems ----
# busybox (static) execs ~10x faster than util-linux mount under TCG
if command -v busybox >/dev/null; then mount() { busybox mount "$@"; }; fi
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
mount -t tmpfs -o mode=755 tmpfs /mnt # hides the host's /mnt, guest only
mkdir -p /mnt/out /run/lock /tmp/home /dev/pts /dev/shm
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none rblkout "$OUT"; then
	echo "guest: cannot mount the out share"
	poweroff_now
fi
SETUPLOG=$OUT/setup.log
: >"$SETUPLOG"
log "out share mounted"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro rblkmods /lib/modules ||
	warn "cannot mount the module share on /lib/modules"
# A checkout under a directory the tmpfs mounts above just hid (/tmp, /run,
# /var/tmp, /mnt; e.g. a CI clone in /tmp) comes back from its own share.
if [ -n "$repo" ] && [ ! -e "$repo/tests/vm/guest-init.sh" ]; then
	{ mkdir -p "$repo" &&
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro rblkrepo "$repo"; } ||
		warn "cannot mount the repo share on $repo"
fi
mount -t devpts -o mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
modprobe configfs 2>/dev/null
mount -t configfs configfs /sys/kernel/config || warn "configfs not mounted"
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
echo rblk-vm >/proc/sys/kernel/hostname
read -r _ _ krel _ </proc/version
read -r _ memkb _ </proc/meminfo
log "kernel $krel, memory $((memkb / 1024)) MB"

# ---- modules ----
unset -f mount
log "file systems mounted"
MODS="rdma_rxe rdma_ucm ib_uverbs dummy nbd ublk_drv"
# shellcheck disable=SC2086
if ! modprobe -a $MODS; then
	for m in $MODS; do modprobe "$m" || warn "modprobe $m failed"; done
fi
log "modules loaded"

# ---- network + RDMA: rxe0 on dummy d0, 192.0.2.1/24 (documentation range) ----
if ip -batch - <<'END'
link set lo up
link add d0 type dummy
address add 192.0.2.1/24 dev d0
link set d0 up
END
then
	rdma link add rxe0 type rxe netdev d0 || warn "rdma link add rxe0 failed"
else
	warn "dummy netdev d0 not created"
fi
state=
for _ in $(seq 50); do
	read -r state </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
	case $state in *ACTIVE*) break ;; esac
	sleep 0.1
done
case $state in
*ACTIVE*) log "rxe0 port 1: $state, on d0 192.0.2.1/24" ;;
*) warn "rxe0 port 1 not ACTIVE (${state:-absent})" ;;
esac

ulimit -l unlimited
ulimit -n 65536 2>/dev/null
ulimit -c 0

# ---- the command ----
up >"$OUT/boot-uptime"
log "boot done in $(cat "$OUT/boot-uptime") s (guest uptime); running the command"
if [ "$mode" = shell ]; then
	echo "guest: interactive shell; 'exit' or Ctrl-D powers the guest off"
	setsid -c bash "$OUT/cmd" </dev/ttyS0 >/dev/ttyS0 2>&1
	rc=$?
else
	bash "$OUT/cmd" >"$OUT/output.log" 2>&1 </dev/null
	rc=$?
fi
echo "$rc" >"$OUT/rc.tmp" && mv "$OUT/rc.tmp" "$OUT/rc"
log "command exited with $rc; powering off"
poweroff_now
