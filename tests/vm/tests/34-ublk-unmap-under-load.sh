#!/bin/bash
# ublk: unmapping while fio writes at QD32 on both queues. The unmap
# finishes, fio's outstanding and later I/O fails (it exits with an error
# instead of hanging), and the device is gone. Every wait is bounded.
# vm-timeout: 300
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires fio

truncate -s 128M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk

start_write_load
echo "fio running: ${w:-0} writes completed before unmap"

unmap_ublk
t0=$(t_now)
timeout 60 tail --pid="$fpid" -f /dev/null ||
	fail "fio still running 60 s after unmap (hung I/O)"
rc=0
wait "$fpid" || rc=$?
echo "fio exited $(t_since "$t0") s after unmap with status $rc"
grep -E 'err=|error' "$TEST_DIR/fio.log" | head -n 5
[ "$rc" -ne 0 ] || fail "fio reported success although its device went away"
[ -e "$DEV" ] && fail "$DEV still exists"
echo "ublk unmap under load: OK"
