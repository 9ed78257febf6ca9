#!/bin/bash
# Many volumes mapped at once over rxe through ublk (issue 26): one target
# exports N volumes, each is mapped with `rblk map --ublk` (default
# options), and while all N are mapped each gets ext4 and a copied tree
# whose checksums are verified on the device; then every volume is
# checked again, cold, before any is unmapped, and the map daemons' VmPin
# is summed. make check maps 2 volumes of 64 MiB; the long form maps 32
# in a guest of 4 GiB (make soak gives it --mem 4096), where main 044a766
# pinned 64 MiB of bounce slots per queue besides each queue's own tag
# buffers, more than the guest holds.
# soak: 32 volumes mapped at once in a 4 GiB guest, ext4 and a verified copy on each
# vm-timeout: 420
# soak-timeout: 3600
set -euo pipefail
source tests/vm/lib.sh
ublk_requires mkfs.ext4
N=2 FILES=12
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	N=32 FILES=24
	mem=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)
	[ "$mem" -ge $((3500 * 1024)) ] ||
		fail "the long form wants a 4 GiB guest (MemTotal $mem kB; run-test.sh --mem 4096)"
fi
ulimit -l unlimited

exports=()
for ((i = 0; i < N; i++)); do
	truncate -s 64M "$TEST_DIR/v$i.img"
	exports+=(--export "v$i=$TEST_DIR/v$i.img")
done
start_rdma_target 7440 --slot-pool 64M "${exports[@]}"
pin() { awk '/^VmPin/ { print $2 }' "/proc/$1/status"; }

t0=$(t_now)
devs=()
for ((i = 0; i < N; i++)); do
	map_dev "rdma://$ADDR:7440/v$i" --ublk
	[[ $DEV == /dev/ublkb* ]] || fail "rblk map --ublk printed $DEV"
	devs+=("$DEV")
done
say "$N volumes mapped in $(t_since "$t0") s"
[ "$(ls -d /sys/block/ublkb* | wc -l)" -ge "$N" ] || fail "fewer than $N ublk devices"

make_tree "$TEST_DIR/src" "$FILES"
manifest "$TEST_DIR/src" "$TEST_DIR/manifest"
t0=$(t_now)
for ((i = 0; i < N; i++)); do
	d=${devs[$i]} m=$TEST_DIR/mnt$i
	mkdir -p "$m"
	t1=$(t_now)
	timeout 120 mkfs.ext4 -q -F "$d" || fail "mkfs.ext4 $d"
	timeout 60 mount "$d" "$m" || fail "mount $d"
	umount_at_exit "$m"
	t2=$(t_now)
	timeout 120 cp -a "$TEST_DIR/src/." "$m/" || fail "copying the tree to $d"
	check_manifest "$m" "$TEST_DIR/manifest"
	echo "$d: mkfs and mount $(t_since "$t1") s, copy and check $(t_since "$t2") s"
done
timeout 120 sync || fail "sync"
say "ext4 and a verified copy of $(du -sk "$TEST_DIR/src" | cut -f1) KiB on each of $N volumes in $(t_since "$t0") s"

# all still mapped: every tree again, from the devices (page cache dropped)
t0=$(t_now)
echo 3 >/proc/sys/vm/drop_caches
for ((i = 0; i < N; i++)); do
	check_manifest "$TEST_DIR/mnt$i" "$TEST_DIR/manifest"
done
total=0
for p in $(map_daemon_pids); do
	total=$((total + $(pin "$p")))
done
say "second pass verified on $N volumes in $(t_since "$t0") s; map daemons pin $total kB in all ($((total / N)) kB a volume), target $(pin "$TARGET_PID") kB"
"$RBLK_BIN" list | head -n 3
free -m | head -n 2
for ((i = 0; i < N; i++)); do
	timeout 60 umount "$TEST_DIR/mnt$i" || fail "umount ${devs[$i]}"
done
echo "many maps: OK"
