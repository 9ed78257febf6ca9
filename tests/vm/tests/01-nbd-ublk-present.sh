#!/bin/bash
# Guest smoke test: the guest loaded nbd and ublk_drv, so the initiator can
# present real /dev/nbdN and /dev/ublkbN devices.
# vm-timeout: 60
set -u
. "$(dirname "$0")/../lib.sh"
need_guest

for m in nbd ublk_drv; do
	grep -q "^$m " /proc/modules || fail "module $m not loaded"
	echo "module $m loaded"
done
[ -b /dev/nbd0 ] || fail "/dev/nbd0 is not a block device"
[ -c /dev/ublk-control ] || fail "/dev/ublk-control is not a character device"
ls -l /dev/nbd0 /dev/ublk-control
nbds=(/dev/nbd[0-9]*)
echo "nbd devices: ${#nbds[@]}"
# a fresh nbd device has no backend: size 0
[ "$(cat /sys/block/nbd0/size)" = 0 ] || fail "nbd0 unexpectedly has a size"
echo "nbd/ublk: OK"
