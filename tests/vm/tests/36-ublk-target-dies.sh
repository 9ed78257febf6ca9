#!/bin/bash
# ublk: the rblk session dies under load. rblk-target is killed while fio
# writes at QD32 on both queues: fio's I/O fails with errors (no hang),
# later I/O on the device fails at once, and unmap still works. The map
# runs with --ctrl-loss-timeout 0 (no reconnect): 37-reconnect.sh covers the
# default, where I/O waits for the target to come back.
# vm-timeout: 300
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires fio

truncate -s 128M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
map_ublk --ctrl-loss-timeout 0

start_write_load

kill -KILL "$TARGET_PID"
wait "$TARGET_PID" 2>/dev/null
t0=$(t_now)
timeout 60 tail --pid="$fpid" -f /dev/null ||
	fail "fio still running 60 s after the target died (hung I/O)"
rc=0
wait "$fpid" || rc=$?
echo "fio exited $(t_since "$t0") s after the target died, status $rc"
grep -E 'err=|error' "$TEST_DIR/fio.log" | head -n 5
[ "$rc" -ne 0 ] || fail "fio reported success although the target died"

# new I/O fails promptly with EIO
t0=$(t_now)
if timeout 30 dd if="$DEV" of=/dev/null bs=4k count=1 iflag=direct 2>"$TEST_DIR/dd.err"; then
	fail "a read succeeded with the target gone"
fi
grep -q "Input/output error" "$TEST_DIR/dd.err" || { cat "$TEST_DIR/dd.err"; fail "read did not fail with EIO"; }
echo "read after the target died: EIO in $(t_since "$t0") s"

unmap_ublk
[ -e "$DEV" ] && fail "$DEV still exists"
echo "ublk target dies: OK"
