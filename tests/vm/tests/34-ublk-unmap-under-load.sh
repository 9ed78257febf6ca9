#!/bin/bash
# ublk: unmapping while fio writes at QD32 on both queues. The unmap
# finishes, fio's outstanding and later I/O fails (it exits with an error
# instead of hanging), and the device is gone. Every wait is bounded.
# vm-timeout: 300
# shellcheck source=tests/vm/ublk-lib.sh disable=SC2119
source tests/vm/ublk-lib.sh
ublk_requires fio

truncate -s 128M "$WORK/vol.img"
start_target --export "vol0=$WORK/vol.img"
map_ublk

fio --name=load --filename="$DEV" --ioengine=libaio --direct=1 \
	--iodepth=32 --bs=4k --rw=randwrite --numjobs=2 --cpus_allowed=0-1 \
	--cpus_allowed_policy=split --time_based --runtime=200 \
	>"$WORK/fio.log" 2>&1 &
fpid=$!
kill_at_exit "$fpid"

# let fio get going: wait for writes to reach the device
for ((i = 0; i < 100; i++)); do
	w=$(awk '{ print $5 }' "/sys/block/${DEV#/dev/}/stat" 2>/dev/null)
	[ "${w:-0}" -gt 2000 ] && break
	kill -0 "$fpid" 2>/dev/null || { cat "$WORK/fio.log"; fail "fio ended early"; }
	sleep 0.2
done
echo "fio running: ${w:-0} writes completed before unmap"

unmap_ublk
t0=$(t_now)
timeout 60 tail --pid="$fpid" -f /dev/null ||
	fail "fio still running 60 s after unmap (hung I/O)"
rc=0
wait "$fpid" || rc=$?
echo "fio exited $(t_since "$t0") s after unmap with status $rc"
grep -E 'err=|error' "$WORK/fio.log" | head -n 5
[ "$rc" -ne 0 ] || fail "fio reported success although its device went away"
[ -e "$DEV" ] && fail "$DEV still exists"
echo "ublk unmap under load: OK"
