#!/bin/bash
# tests/vm/run-vm.sh - run one command as root inside a throw-away QEMU guest
# (TCG, Debian 6.12 kernel, no NIC) that sees the host root read-only over 9p
# and has RDMA over rdma_rxe (rxe0 on dummy d0, 192.0.2.1/24), nbd and ublk.
#
#   tests/vm/run-vm.sh [options] -- COMMAND [ARG...]
#   tests/vm/run-vm.sh --shell            interactive shell in the guest
#
# Options:
#   --timeout SEC   wall-clock limit for the whole run (default 600); on expiry
#                   qemu is killed and the exit status is 124
#   --mem MB        guest memory (default 2048)
#   --cpus N        guest CPUs (default 2)
#   --env VAR=VAL   set VAR in the guest (repeatable); --env VAR passes the
#                   host's value
#   --cwd DIR       working directory in the guest (default: the repo root)
#   --out DIR       host directory shared writable as /mnt/out in the guest
#                   (default: a new temporary one, removed after a run that
#                   exited 0 unless --keep)
#   --keep          keep the out directory
#   --shell         run an interactive bash on the serial console instead
#                   (Ctrl-D or 'exit' powers off; Ctrl-A x kills qemu)
#   -q, --quiet     do not stream the command's output (it is still in
#                   OUT/output.log)
#   --qemu-arg ARG  one more qemu argument (repeatable), e.g. a disk or a
#                   NIC for a harness that runs outside the guest
#                   (tests/e2e/98-power-cut.sh); a NIC must be user-mode
#                   with restrict=on or a socket netdev on 127.0.0.1
#   --pid-file F    write qemu's pid to F once it runs (to cut its power)
#
# The command runs with cwd = the repo root (same absolute path as on the
# host), as root, after the guest loaded rdma_rxe rdma_ucm ib_uverbs dummy nbd
# ublk_drv and set ulimit -l unlimited. Its exit status is this script's.
# The guest root is the host root read-only: write to /tmp, /run, /var/tmp
# (tmpfs) or $RBLK_VM_OUT (= /mnt/out, the out directory on the host).
#
# Guest environment: RBLK_VM=1, RBLK_VM_OUT=/mnt/out,
# RBLK_TEST_RDMA_ADDR=192.0.2.1, RBLK_TEST_RDMA_DEV=rxe0, plus the host's
# RBLK_* variables (other than RBLK_VM_* and RBLK_TEST_RDMA_*), BUILD, and
# those named in RBLK_VM_PASS_ENV, then --env.
#
# Exit status: the command's; 124 on timeout; 125 when the guest died or
# never ran the command (see OUT/console.log).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${RBLK_VM_CACHE:-${HOME:-/root}/.cache/rblk-vm}
INITRD_NAME=initramfs-v2.cpio.gz   # keep in step with setup.sh

timeout_s=600 mem=2048 cpus=2 cwd=$REPO out='' keep=0 shell=0 quiet=0
envs=() qargs=() pidfile=''
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) timeout_s=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--env)
		case $2 in *=*) envs+=("$2") ;; *) envs+=("$2=${!2-}") ;; esac
		shift 2 ;;
	--cwd) cwd=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--shell) shell=1; shift ;;
	-q | --quiet) quiet=1; shift ;;
	--qemu-arg) qargs+=("$2"); shift 2 ;;
	--pid-file) pidfile=$2; shift 2 ;;
	-h | --help) usage ;;
	--) shift; break ;;
	-*) echo "run-vm: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || [ "$shell" = 1 ] || usage
case $timeout_s in '' | *[!0-9]*) echo "run-vm: bad --timeout" >&2; exit 2 ;; esac

say() { printf 'run-vm: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 125; }

[ "$(id -u)" = 0 ] || die "must run as root"
case $HERE in *[[:space:],]*) die "the repo path must not contain white space or commas" ;; esac
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run tests/vm/setup.sh"

kver=$(cat "$CACHE/current" 2>/dev/null || true)
if [ -z "$kver" ] || [ ! -e "$CACHE/$kver/.ready" ] || [ ! -s "$CACHE/$kver/$INITRD_NAME" ]; then
	say "guest kernel not prepared; running setup.sh"
	"$HERE/setup.sh" >&2 || die "setup.sh failed"
	kver=$(cat "$CACHE/current")
fi
kdir=$CACHE/$kver
# Host change: the guest mounts its module tree on /lib/modules, which has to
# exist on the (read-only in the guest) host root. setup.sh creates it too.
[ -d /lib/modules ] || mkdir -p /lib/modules

autoout=0
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/rblk-vm.XXXXXX")
	autoout=1
else
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	rm -f "$out/rc" "$out/output.log" "$out/console.log" "$out/setup.log" \
		"$out/boot-uptime" "$out/dmesg.log"
fi

# ---- the command script the guest runs ----
{
	echo "# written by run-vm.sh"
	printf 'cd %q || exit 126\n' "$cwd"
	printf 'export RBLK_VM=1 RBLK_VM_OUT=/mnt/out RBLK_TEST_RDMA_ADDR=192.0.2.1 RBLK_TEST_RDMA_DEV=rxe0\n'
	passvars=$(compgen -e | grep -E '^RBLK_' | grep -vE '^RBLK_(VM_|TEST_RDMA_)' || true)
	for v in $passvars BUILD ${RBLK_VM_PASS_ENV:-}; do
		[ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
	done
	for e in "${envs[@]+"${envs[@]}"}"; do
		printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
	done
	if [ "$shell" = 1 ]; then
		printf 'export TERM=%q\n' "${TERM:-vt100}"
		if [ $# -gt 0 ]; then printf '%q ' "$@"; echo; fi
		echo 'exec bash -i'
	else
		printf 'exec'; printf ' %q' "$@"; echo
	fi
} >"$out/cmd"
: >"$out/output.log"

# no_timer_check: on a loaded host TCG starves the vCPUs and the kernel's
# IO-APIC timer check panics the boot ("IO-APIC + timer doesn't work", seen
# with load average 25)
append="console=ttyS0 rdinit=/init panic=-1 loglevel=4 mitigations=off no_timer_check"
append+=" rblk.stage2=$HERE/guest-init.sh rblk.repo=$REPO"
[ "$shell" = 1 ] && append+=" rblk.mode=shell"

# shellcheck disable=SC2054
qemu=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m "$mem" -smp "$cpus"
	-nodefaults -no-user-config -display none -nic none -no-reboot
	-kernel "$kdir/vmlinuz" -initrd "$kdir/$INITRD_NAME" -append "$append"
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$kdir/lib/modules,mount_tag=rblkmods,security_model=none,readonly=on"
	-virtfs "local,path=$out,mount_tag=rblkout,security_model=none"
	-virtfs "local,path=$REPO,mount_tag=rblkrepo,security_model=none,readonly=on,multidevs=remap")
qemu+=("${qargs[@]+"${qargs[@]}"}")
if [ "$shell" = 1 ]; then
	qemu+=(-serial mon:stdio)
else
	qemu+=(-serial "file:$out/console.log" -monitor none)
fi

# One guest at a time per host: TCG with 2 vCPUs takes both cores of a
# 2-core machine. Wait for a running guest (its own --timeout bounds the
# wait); qemu inherits the lock, so it is held until qemu is gone.
# RBLK_VM_PARALLEL=1 skips this.
if [ "${RBLK_VM_PARALLEL:-0}" != 1 ]; then
	lockdir=/run/lock
	[ -d "$lockdir" ] && [ -w "$lockdir" ] || lockdir=${TMPDIR:-/tmp}
	exec 9>"$lockdir/rblk-vm.lock"
	if ! flock -n 9; then
		say "another rblk guest is running; waiting for it (RBLK_VM_PARALLEL=1 to not wait)"
		flock 9
	fi
fi

qpid='' tpid='' tty_state=''
if [ "$shell" = 1 ] && [ -t 0 ]; then tty_state=$(stty -g); fi
cleanup() {
	set +e
	if [ -n "$qpid" ]; then kill -KILL "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null; fi
	if [ -n "$tpid" ]; then kill "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null; fi
	qpid='' tpid=''
	# a killed qemu leaves the terminal raw
	[ -n "$tty_state" ] && stty "$tty_state" 2>/dev/null
	return 0
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

start=$(date +%s.%N)
if [ "$shell" = 1 ]; then
	# an async command of a non-interactive shell gets /dev/null as stdin
	# unless it is redirected explicitly: hand qemu the terminal
	exec 3<&0
	"${qemu[@]}" <&3 3<&- &
else
	"${qemu[@]}" </dev/null &
fi
qpid=$!
[ -n "$pidfile" ] && echo "$qpid" >"$pidfile"
if [ "$quiet" = 0 ] && [ "$shell" = 0 ]; then
	tail -n +1 -s 0.2 -f --pid="$qpid" "$out/output.log" 2>/dev/null &
	tpid=$!
fi

timed_out=0
deadline=$((SECONDS + timeout_s))
while kill -0 "$qpid" 2>/dev/null; do
	if [ "$SECONDS" -ge "$deadline" ]; then
		timed_out=1
		say "timeout after ${timeout_s}s: killing qemu (pid $qpid)"
		kill -TERM "$qpid" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$qpid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$qpid" 2>/dev/null || true
		break
	fi
	sleep 0.2
done
qrc=0
wait "$qpid" 2>/dev/null || qrc=$?
qpid=''
if [ -n "$tpid" ]; then
	wait "$tpid" 2>/dev/null || true
	tpid=''
fi
end=$(date +%s.%N)
cleanup
trap - EXIT INT TERM

wall=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
boot=$(cat "$out/boot-uptime" 2>/dev/null || echo '?')

if [ -f "$out/setup.log" ] && grep -q 'warning:' "$out/setup.log"; then
	grep 'warning:' "$out/setup.log" | sed 's/^/run-vm: /' >&2
fi
if [ -f "$out/console.log" ] && grep -qE 'Call Trace|BUG:|Oops|Kernel panic' "$out/console.log"; then
	say "kernel reported a problem (see $out/console.log):"
	grep -m5 -E 'Call Trace|BUG:|Oops|Kernel panic|WARNING:' "$out/console.log" | sed 's/^/  /' >&2
	keep=1
fi

if [ "$timed_out" = 1 ]; then
	rc=124
elif [ -s "$out/rc" ]; then
	rc=$(cat "$out/rc")
else
	say "the guest ended without running the command to completion (qemu exit $qrc); console:"
	tail -n 20 "$out/console.log" 2>/dev/null | sed 's/^/  /' >&2
	rc=125
fi
say "rc=$rc wall=${wall}s guest-boot=${boot}s kernel=$kver"
if [ "$rc" = 0 ] && [ "$keep" = 0 ] && [ "$autoout" = 1 ]; then
	rm -rf "$out"
elif [ "$rc" != 0 ] || [ "$autoout" = 1 ]; then
	say "logs: $out"
fi
exit "$rc"
