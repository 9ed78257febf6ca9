#!/bin/bash
# tests/vm/setup.sh - prepare everything the rblk test guest needs.
#
# Idempotent. On a fresh Debian 12 machine it:
#   1. installs the host packages the guest uses (the guest runs the host's
#      binaries over a read-only 9p share of /), with apt-get, only if missing;
#   2. downloads (apt-get download, nothing else) the newest Debian
#      linux-image-6.12.*+deb12-amd64, unpacks it into the cache and runs
#      depmod on it;
#   3. builds a small busybox initramfs that loads the 9p modules, mounts the
#      host root read-only and switch_roots into tests/vm/guest-init.sh.
#
# Cache: ${RBLK_VM_CACHE:-$HOME/.cache/rblk-vm}/<kernel-version>/, and the file
# ${RBLK_VM_CACHE}/current naming the version run-vm.sh boots.
#
# Environment:
#   RBLK_VM_CACHE    cache directory (see above)
#   RBLK_VM_KERNEL     pin a kernel ABI name, e.g. 6.12.117+deb12-amd64
#   RBLK_VM_REFRESH=1  look for a newer kernel in the archive even though one
#                      is cached (by default a prepared kernel is kept, so
#                      only the first run downloads); older ones are removed
#   RBLK_VM_OFFLINE=1  never download: use what is cached (fail if nothing)
#
# Host change: creates the empty directory /lib/modules when it is missing
# (the guest mounts its module tree on it and the host root is read-only
# there, so the mount point must exist on the host).
set -euo pipefail

CACHE=${RBLK_VM_CACHE:-${HOME:-/root}/.cache/rblk-vm}
INITRD_NAME=initramfs-v2.cpio.gz   # bump when the /init below changes

say() { printf 'vm-setup: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get, module tree)"
[ "$(uname -m)" = x86_64 ] || die "x86_64 only"

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=600)
apt_updated=0
apt_update() {
	if [ "$apt_updated" = 0 ]; then
		say "apt-get update"
		apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
		apt_updated=1
	fi
}

# ---- 1. host packages -------------------------------------------------------
# qemu-system-x86: the VM; busybox-static: initramfs; kmod: modprobe/depmod
# (guest uses the host's); the rest are tools guest tests run.
PKGS=(qemu-system-x86 busybox-static kmod xz-utils cpio gzip iproute2
	rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest
	nvme-cli e2fsprogs xfsprogs fio libnbd-bin nbd-client coreutils
	util-linux procps)
missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing: ${missing[*]}"
	if ! apt-get install "${APT_OPTS[@]}" "${missing[@]}" >/dev/null; then
		apt_update
		apt-get install "${APT_OPTS[@]}" "${missing[@]}" >/dev/null ||
			die "apt-get install ${missing[*]} failed"
	fi
else
	say "host packages present"
fi

# ---- 2. kernel --------------------------------------------------------------
mkdir -p "$CACHE"
newest_kernel() {
	apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' 2>/dev/null |
		awk '{print $1}' | sed 's/^linux-image-//' | sort -V | tail -n1
}
kver=${RBLK_VM_KERNEL:-}
if [ -z "$kver" ] && [ "${RBLK_VM_REFRESH:-0}" != 1 ]; then
	cur=$(cat "$CACHE/current" 2>/dev/null || true)
	[ -n "$cur" ] && [ -e "$CACHE/$cur/.ready" ] && kver=$cur
fi
if [ -z "$kver" ] && [ "${RBLK_VM_OFFLINE:-0}" != 1 ]; then
	kver=$(newest_kernel)
	if [ -z "$kver" ]; then
		apt_update
		kver=$(newest_kernel)
	fi
fi
if [ -z "$kver" ]; then
	# offline, or the archive lists none: take the newest cached one
	kver=$(for d in "$CACHE"/6.12.*+deb12-amd64; do
		[ -e "$d/.ready" ] && basename "$d"
	done | sort -V | tail -n1 || true)
	[ -n "$kver" ] || die "no linux-image-6.12.*+deb12-amd64 in the archive or the cache"
fi
kdir=$CACHE/$kver
if [ -e "$kdir/.ready" ]; then
	say "kernel $kver cached in $kdir"
else
	[ "${RBLK_VM_OFFLINE:-0}" = 1 ] && die "kernel $kver not cached and RBLK_VM_OFFLINE=1"
	say "downloading linux-image-$kver (about 100 MB)"
	rm -rf "$kdir" "$kdir.tmp"
	mkdir -p "$kdir.tmp/dl"
	(cd "$kdir.tmp/dl" && apt-get -q -o APT::Sandbox::User=root download "linux-image-$kver" >/dev/null) || {
		apt_update
		(cd "$kdir.tmp/dl" && apt-get -q -o APT::Sandbox::User=root download "linux-image-$kver" >/dev/null) ||
			die "apt-get download linux-image-$kver failed"
	}
	say "unpacking"
	dpkg-deb -x "$kdir.tmp"/dl/linux-image-*.deb "$kdir.tmp/root"
	rm -rf "$kdir.tmp/dl"
	# the package ships lib/modules (or usr/lib/modules on a merged tree)
	mdir=
	for d in "$kdir.tmp/root/lib/modules/$kver" "$kdir.tmp/root/usr/lib/modules/$kver"; do
		[ -d "$d" ] && mdir=$d && break
	done
	[ -n "$mdir" ] || die "no module tree for $kver in the package"
	mkdir -p "$kdir.tmp/lib/modules"
	mv "$mdir" "$kdir.tmp/lib/modules/$kver"
	mv "$kdir.tmp/root/boot/vmlinuz-$kver" "$kdir.tmp/vmlinuz"
	cp "$kdir.tmp/root/boot/config-$kver" "$kdir.tmp/config" 2>/dev/null || true
	rm -rf "$kdir.tmp/root"
	# Drop module subtrees a headless test guest never loads (saves ~half
	# the disk); depmod below sees only what is left.
	for sub in drivers/gpu drivers/media drivers/net/wireless sound \
		drivers/infiniband/hw drivers/staging drivers/iio \
		drivers/bluetooth net/bluetooth net/wireless net/mac80211; do
		rm -rf "$kdir.tmp/lib/modules/$kver/kernel/$sub"
	done
	say "depmod"
	depmod -b "$kdir.tmp" "$kver"
	mv "$kdir.tmp" "$kdir"
	touch "$kdir/.ready"
fi

# Modules the guest loads on every boot (and their dependencies) are stored
# decompressed: xz in an emulated CPU costs about a second per boot.
HOT_MODS="rdma_rxe rdma_ucm ib_uverbs dummy nbd ublk_drv configfs brd null_blk
	nvme-rdma nvmet-rdma nvme-tcp nvmet-tcp nvme-loop"
if [ ! -e "$kdir/.hot-v1" ]; then
	say "decompressing the modules every boot loads"
	# shellcheck disable=SC2086
	modprobe -d "$kdir" -S "$kver" --show-depends -a $HOT_MODS |
		awk '$1 == "insmod" {print $2}' | sort -u |
		while read -r ko; do
			case $ko in
			*.xz) xz -df "$ko" ;;
			*.zst) zstd -qdf --rm "$ko" ;;
			esac
		done
	depmod -b "$kdir" "$kver"
	touch "$kdir/.hot-v1"
fi

# ---- 3. initramfs -----------------------------------------------------------
if [ ! -s "$kdir/$INITRD_NAME" ]; then
	rm -f "$kdir"/initramfs-*.cpio.gz
	say "building initramfs"
	bb=$(command -v busybox || echo /bin/busybox)
	[ -x "$bb" ] || die "busybox not found"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	ir=$work/ir
	mkdir -p "$ir"/{bin,dev,proc,sys,newroot,mods}
	cp "$bb" "$ir/bin/busybox"
	for a in sh mount umount insmod mkdir switch_root sleep cat echo poweroff ls; do
		ln -s busybox "$ir/bin/$a"
	done
	# 9p and its dependencies, in load order, decompressed (busybox insmod
	# takes plain .ko).
	n=0
	modprobe -d "$kdir" -S "$kver" --show-depends -a 9p 9pnet_virtio |
		awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++' |
		while read -r ko; do
			n=$((n + 1))
			base=$(basename "$ko"); base=${base%.xz}; base=${base%.zst}
			out=$(printf '%s/mods/%02d-%s' "$ir" "$n" "$base")
			case $ko in
			*.xz) xz -dc "$ko" >"$out" ;;
			*.zst) zstd -qdc "$ko" >"$out" ;;
			*) cp "$ko" "$out" ;;
			esac
		done
	for m in 9pnet 9pnet_virtio 9p; do
		compgen -G "$ir/mods/[0-9][0-9]-$m.ko" >/dev/null || die "module $m not found for $kver"
	done
	cat >"$ir/init" <<'EOF'
#!/bin/sh
# rblk test guest, stage 1: mount the host root read-only over 9p and hand
# over to the stage-2 script named by rblk.stage2= on the kernel command line.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
for m in /mods/*.ko; do insmod "$m" || echo "stage1: insmod $m failed"; done
stage2=
for a in $(cat /proc/cmdline); do
	case $a in rblk.stage2=*) stage2=${a#rblk.stage2=} ;; esac
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /newroot; then
	echo "stage1: cannot mount the host root"; sleep 1; poweroff -f
fi
if [ -z "$stage2" ] || [ ! -f "/newroot$stage2" ]; then
	echo "stage1: no stage 2 script ($stage2)"; sleep 1; poweroff -f
fi
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /bin/bash "$stage2"
EOF
	chmod 755 "$ir/init"
	(cd "$ir" && find . | cpio -o -H newc --quiet) | gzip -9 >"$work/initrd"
	mv "$work/initrd" "$kdir/$INITRD_NAME"
fi

# the guest's /lib/modules mount point (host root is read-only in the guest)
if [ ! -d /lib/modules ]; then
	say "creating empty /lib/modules on the host (guest mount point)"
	mkdir -p /lib/modules
fi

printf '%s\n' "$kver" >"$CACHE/current.tmp"
mv "$CACHE/current.tmp" "$CACHE/current"
# drop other prepared kernels (after a refresh or a pin)
for d in "$CACHE"/6.12.*+deb12-amd64 "$CACHE"/6.12.*+deb12-amd64.tmp; do
	[ -d "$d" ] && [ "$d" != "$kdir" ] && { say "removing $d"; rm -rf "$d"; }
done
say "ready: kernel $kver, cache $kdir"
