#!/bin/bash
# Stable device names (issue 15): with tools/udev/60-rblk.rules installed
# and systemd-udevd running (here with that rule alone: tmpfs over the
# guest's rules directories), `rblk map` of export vol0 over rxe gives
# /dev/rblk/vol0, /dev/rblk/192.0.2.1:PORT/vol0 and
# /dev/disk/by-id/rblk-SERIAL pointing at the device, for ublk and for
# nbd; mkfs.ext4 and mount BY THE LINK (as an fstab line would), write
# files and verify them after a remount, unmap: the links are gone. A
# second export mapped beside it gets its own links. Without udevd in the
# guest the rule's effect is applied by hand: the namer is run as the rule
# would run it and its names are linked (the test says which).
# vm-timeout: 420
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_rdma
requires mkfs.ext4 mount umount sha256sum truncate jq
# udevd gets its own environment: the records live where rblk looks by
# default (the guest's /run is a tmpfs)
export RBLK_RUN_DIR=/run/rblk
mkdir -p "$RBLK_RUN_DIR"

PORT=7538
MNT=$TEST_DIR/mnt
mkdir -p "$MNT"
cleanup_fn umount_quiet "$MNT"

# the rule and its namer, as make install writes them
hdir=$TEST_DIR/udev
mkdir -p "$hdir/rules.d"
sed "s|@UDEVHELPERDIR@|$hdir|g" tools/udev/60-rblk.rules >"$hdir/rules.d/60-rblk.rules"
sed "s|@BINDIR@|$RBLK_BUILD|g" tools/udev/rblk-udev-name >"$hdir/rblk-udev-name"
chmod 755 "$hdir/rblk-udev-name"

udevd=
for u in /lib/systemd/systemd-udevd /usr/lib/systemd/systemd-udevd; do
	[ -x "$u" ] && udevd=$u && break
done
mode="by hand (no systemd-udevd in the guest)"
if [ -n "$udevd" ] && command -v udevadm >/dev/null; then
	# only our rule: tmpfs over every rules directory udevd reads
	for d in /etc/udev/rules.d /usr/lib/udev/rules.d /run/udev/rules.d; do
		mkdir -p "$d" 2>/dev/null || true
		mount -t tmpfs tmpfs "$d" && cleanup_fn umount -l "$d"
	done
	cp "$hdir/rules.d/60-rblk.rules" /run/udev/rules.d/
	"$udevd" --daemon --resolve-names=never 2>"$TEST_DIR/udevd.log" &&
		mode="systemd-udevd $(udevadm --version)"
	cleanup_fn udevadm control --exit
fi
say "names applied $mode"

# by hand: what the rule does for DEV (add/change) or its removal
apply_by_hand()
{
	local dev=$1 n
	case $mode in systemd-udevd*) udevadm settle -t 30; return ;; esac
	if names=$("$hdir/rblk-udev-name" "$dev" --wait 2) &&
		[ "$(cat "/sys/block/$dev/size" 2>/dev/null || echo 0)" != 0 ]; then
		for n in $names; do
			mkdir -p "/dev/$(dirname "$n")"
			ln -sfn "/dev/$dev" "/dev/$n"
		done
	fi
}
remove_by_hand()
{
	local dev=$1 l
	case $mode in systemd-udevd*) udevadm settle -t 30; return ;; esac
	for l in $(find /dev/rblk /dev/disk/by-id -type l 2>/dev/null); do
		[ "$(readlink "$l")" = "/dev/$dev" ] && rm -f "$l"
	done
	return 0
}

truncate -s 128M "$TEST_DIR/vol0.img"
truncate -s 64M "$TEST_DIR/vol1.img"
start_rdma_target "$PORT" --export "vol0=$TEST_DIR/vol0.img" \
	--export "vol1=$TEST_DIR/vol1.img"
# the serial is the volume id the target reports (rblk info), without dashes
serial0=$("$RBLK_BUILD/rblk" info -o json "rdma://$ADDR:$PORT/vol0" |
	jq -r .vol_id | tr -d -)
[[ $serial0 =~ ^[0-9a-f]{32}$ ]] || fail "rblk info gave no volume id: '$serial0'"

round=0
for fe in ublk nbd; do
	if [ $fe = ublk ] && [ ! -e /dev/ublk-control ]; then
		say "no ublk here: nbd only"
		continue
	fi
	round=$((round + 1))
	map_dev "rdma://$ADDR:$PORT/vol0" --$fe
	dev0=$DEV_NAME
	map_dev "rdma://$ADDR:$PORT/vol1" --$fe
	dev1=$DEV_NAME
	apply_by_hand "$dev0"
	apply_by_hand "$dev1"
	for l in /dev/rblk/vol0 "/dev/rblk/$ADDR:$PORT/vol0" "/dev/disk/by-id/rblk-$serial0"; do
		[ -L "$l" ] || fail "$fe: $l missing ($(ls -lR /dev/rblk 2>&1 | head -20))"
		[ "$(readlink -f "$l")" = "/dev/$dev0" ] ||
			fail "$fe: $l -> $(readlink -f "$l"), not /dev/$dev0"
	done
	[ "$(readlink -f /dev/rblk/vol1)" = "/dev/$dev1" ] ||
		fail "$fe: /dev/rblk/vol1 -> $(readlink -f /dev/rblk/vol1), not /dev/$dev1"
	say "$fe: /dev/rblk/vol0 -> $dev0, /dev/rblk/vol1 -> $dev1, by-id rblk-$serial0"

	# mount by the link, as fstab would
	[ $round = 1 ] && mkfs.ext4 -q -F /dev/rblk/vol0
	mount /dev/rblk/vol0 "$MNT"
	for i in 1 2 3 4; do
		head -c "$((i * 1048576))" /dev/urandom >"$MNT/$fe.$i"
	done
	(cd "$MNT" && sha256sum ./"$fe".* >"$TEST_DIR/sums.$fe")
	umount "$MNT"
	echo 3 >/proc/sys/vm/drop_caches
	mount "/dev/disk/by-id/rblk-$serial0" "$MNT"
	(cd "$MNT" && sha256sum -c --quiet "$TEST_DIR/sums.$fe") ||
		fail "$fe: files differ after a remount by id"
	umount "$MNT"
	say "$fe: mounted by /dev/rblk/vol0 and by id; $(wc -l <"$TEST_DIR/sums.$fe") files verified"

	for d in "$dev0" "$dev1"; do
		tmo 60 "$RBLK_BIN" unmap "/dev/$d" >/dev/null || fail "unmap /dev/$d"
		remove_by_hand "$d"
	done
	_mapped=()
	for l in /dev/rblk/vol0 /dev/rblk/vol1 "/dev/rblk/$ADDR:$PORT/vol0" \
		"/dev/disk/by-id/rblk-$serial0"; do
		[ ! -e "$l" ] && [ ! -L "$l" ] || fail "$fe: $l still there after unmap"
	done
	say "$fe: unmapped, links gone"
done
[ $round -gt 0 ] || fail "neither ublk nor nbd could be used"
MAP_TEST_OK=1
echo "PASS"
