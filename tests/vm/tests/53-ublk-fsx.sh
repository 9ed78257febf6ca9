#!/bin/bash
# Random operations against a model through /dev/ublkbN (issue 28, part 4):
# rblk_fsx in device mode - O_DIRECT reads and writes (1 in 8 with
# RWF_DSYNC), BLKDISCARD, BLKZEROOUT, fdatasync - of odd block counts,
# around 4 KiB and across the device's max_sectors_kb, one at a time, each
# read checked against an in-memory model and the whole device read back
# at the end. The target is kill -9'd and restarted on the same port
# twice, in the background while fsx goes on (so I/O is in flight or
# waiting at the kill); the map reconnects and nothing is lost.
# short form: 2000 operations (QD 1 in the TCG guest)
# soak-only (make check runs 51 for a file system and 96 for fsx: its
# 35 minutes have no room for this guest form)
# soak: 30,000 operations, 20 restarts (RBLK_SOAK=1; 20,000 took 697 s in
#   the TCG guest, 29 a second: 1M would take 9-10 hours and met fsx's
#   own limit of 50 minutes; RBLK_FSX_OPS=N for more)
# soak-timeout: 7200
# vm-timeout: 300
# shellcheck source=tests/vm/lib.sh disable=SC2119
source tests/vm/lib.sh
ublk_requires
ops=${RBLK_FSX_OPS:-2000} restarts=2
[ "${RBLK_SOAK:-0}" = 1 ] && ops=${RBLK_FSX_OPS:-30000} restarts=20

truncate -s 32M "$TEST_DIR/vol.img"
start_rdma_target --export "vol0=$TEST_DIR/vol.img"
port=${URL#rdma://*:}
port=${port%%/*}
echo "$TARGET_PID" >"$TEST_DIR/target.pid"
map_ublk
maxkb=$(cat "/sys/block/$DEV_NAME/queue/max_sectors_kb")

cat >"$TEST_DIR/restart.sh" <<EOS
#!/bin/bash
pid=\$(cat "$TEST_DIR/target.pid")
kill -KILL \$pid
while kill -0 \$pid 2>/dev/null; do sleep 0.05; done
n=\$(( \$(cat "$TEST_DIR/restarts" 2>/dev/null || echo 0) + 1 ))
echo \$n >"$TEST_DIR/restarts"
log="$TEST_DIR/target.r\$n.log"
setsid "$RBLK_TARGET_BIN" --listen "rdma://$ADDR:$port" --allow-any-host \
	--log-level info --export "vol0=$TEST_DIR/vol.img" >"\$log" 2>&1 </dev/null &
echo \$! >"$TEST_DIR/target.pid"
for i in \$(seq 600); do
	grep -qs "listening on" "\$log" && exit 0
	sleep 0.1
done
echo "restart \$n: no listener" >&2; exit 1
EOS
chmod +x "$TEST_DIR/restart.sh"
# the restarted targets are not this shell's children: stop the last one
cleanup_fn bash -c "kill \$(cat '$TEST_DIR/target.pid') 2>/dev/null; true"

t0=$(t_now)
# at least 5 operations a second (TCG gives about 29)
out=$(timeout $((ops / 5 > 3000 ? ops / 5 : 3000)) "$RBLK_BUILD/tests/rblk_fsx" fsx "$DEV" -n "$ops" -s 53 \
	-m $((maxkb * 1024)) -r "$restarts" -c "$TEST_DIR/restart.sh >>$TEST_DIR/restart.log 2>&1 &") ||
	fail "fsx on $DEV: $out"
echo "$out ($(t_since "$t0") s)"
grep -q "restarts $restarts, .* mismatches 0" <<<"$out" ||
	fail "fsx did not do its $restarts restarts cleanly"
[ "$(cat "$TEST_DIR/restarts")" = "$restarts" ] ||
	fail "$(cat "$TEST_DIR/restarts") restarts done, not $restarts: $(cat "$TEST_DIR/restart.log")"
[ "$(map_state "$DEV")" = running ] || fail "map state $(map_state "$DEV") after the restarts"
unmap_ublk
echo "ublk fsx: OK"
