#!/bin/bash
# Kernel NBD over rdma, failure cases; each must end with a clear error on
# the initiator and within a stated bound, never a hang:
#   1. map of a missing export: exit 1 within 30 s, the message names the
#      export; no daemon, record or connected device left behind
#   2. map to a port nobody listens on: exit 1 within 30 s, clear message
#   3. kill -9 of the target while fio writes to /dev/nbdN: fio gets I/O
#      errors and exits within 60 s; later I/O fails at once (EIO within
#      10 s); `rblk unmap` still cleans up within 60 s; nothing left
#   4. kill -9 of the map daemon: I/O fails within 10 s; `rblk list` shows
#      the mapping as dead (text and JSON); `rblk unmap` detaches the
#      orphaned device and removes the record
# vm-timeout: 600
set -euo pipefail
source tests/vm/lib.sh
need_rdma
requires fio truncate dd

PORT=7522
truncate -s 256M "$TEST_DIR/vol.img"
start_rdma_target "$PORT" --export "vol=$TEST_DIR/vol.img"

# no rblk map daemon, record, or connected nbd device may be left
nothing_left()
{
	local what=$1 d p
	p=$(pgrep -f "$RBLK_BIN map" || true)
	[ -z "$p" ] || fail "$what: rblk map processes left: $p"
	[ -z "$(ls "$RBLK_RUN_DIR"/map-*.rec 2>/dev/null)" ] ||
		fail "$what: records left: $(ls "$RBLK_RUN_DIR")"
	for d in /sys/block/nbd*; do
		[ -e "$d/pid" ] && fail "$what: $(basename "$d") is connected"
	done
	return 0
}

# expect_map_fail WHAT PATTERN URL: rblk map fails in 30 s, stderr ~ PATTERN
expect_map_fail()
{
	local what=$1 pattern=$2 url=$3 rc=0 t0=$SECONDS
	timeout -k 5 30 "$RBLK_BIN" map "$url" --nbd >"$TEST_DIR/out" 2>"$TEST_DIR/err" || rc=$?
	say "$what: exit $rc after $((SECONDS - t0)) s: $(cat "$TEST_DIR/err")"
	[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$what: rblk map hung (killed after 30 s)"
	[ $rc -eq 1 ] || fail "$what: exit $rc, wanted 1"
	[ ! -s "$TEST_DIR/out" ] || fail "$what: printed '$(cat "$TEST_DIR/out")' on stdout"
	grep -q '^rblk map: ' "$TEST_DIR/err" || fail "$what: no 'rblk map:' error line"
	grep -Eqi -- "$pattern" "$TEST_DIR/err" || fail "$what: message does not match '$pattern'"
	nothing_left "$what"
}

# ---- 1, 2: connection errors -------------------------------------------------
expect_map_fail "missing export" "nosuchvol" "rdma://$ADDR:$PORT/nosuchvol"
expect_map_fail "wrong port" "refused|reject|unreachable|connect" \
	"rdma://$ADDR:$((PORT + 100))/vol"

# ---- 3: the target dies under I/O --------------------------------------------
# no reconnect here (the default waits up to 60 s): 37-reconnect.sh has that
map_dev "rdma://$ADDR:$PORT/vol" --nbd --queues 2 --ctrl-loss-timeout 0
fio --name=kill --filename="$DEV" --ioengine=libaio --direct=1 --iodepth=32 \
	--rw=randwrite --bs=4k --size=64M --verify=crc32c --time_based \
	--runtime=300 >"$TEST_DIR/fio.out" 2>&1 &
fio_pid=$!
cleanup_fn kill_quiet "$fio_pid"
sleep 8
kill -0 "$fio_pid" 2>/dev/null || { cat "$TEST_DIR/fio.out"; fail "fio ended before the target was killed"; }
say "killing the target (pid $TARGET_PID) under fio"
kill -KILL "$TARGET_PID"
t0=$SECONDS
wait "$TARGET_PID" 2>/dev/null || true
for ((i = 0; i < 600; i++)); do
	kill -0 "$fio_pid" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$fio_pid" 2>/dev/null; then
	fail "fio still runs 60 s after the target died"
fi
rc=0
wait "$fio_pid" || rc=$?
say "fio exited $rc, $((SECONDS - t0)) s after the target died"
tail -n 5 "$TEST_DIR/fio.out"
[ $rc -ne 0 ] || fail "fio succeeded although the target died"
grep -Eqi "input/output error|error=5|EIO" "$TEST_DIR/fio.out" || fail "fio did not report I/O errors"

# later I/O fails at once
t0=$SECONDS
if timeout -k 5 10 dd if="$DEV" of=/dev/null bs=4k count=1 skip=12345 iflag=direct 2>"$TEST_DIR/dd.err"; then
	fail "a read succeeded after the target died"
fi
say "read after the target died: $(grep -m1 error "$TEST_DIR/dd.err") ($((SECONDS - t0)) s)"
[ $((SECONDS - t0)) -lt 10 ] || fail "a read took $((SECONDS - t0)) s to fail"
grep -q "Input/output error" "$TEST_DIR/dd.err" || fail "the read did not fail with EIO"
tmo 30 "$RBLK_BIN" list | grep -q "^$DEV " || fail "rblk list lost $DEV"
grep -q "lost its connection" "$RBLK_RUN_DIR"/map-*.log || fail "the daemon log does not say the connection was lost"

t0=$SECONDS
tmo 60 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap after the target died"
say "unmapped in $((SECONDS - t0)) s"
[ "$(dev_size "$DEV_NAME")" = 0 ] || fail "$DEV still has a size"
nothing_left "after the target died"

# ---- 4: the daemon dies -----------------------------------------------------
start_rdma_target "$((PORT + 1))" --export "vol=$TEST_DIR/vol.img"
map_dev "rdma://$ADDR:$((PORT + 1))/vol" --nbd --queues 2
dpid=$(map_daemon_pids)
say "killing the map daemon (pid $dpid)"
kill -KILL "$dpid"
t0=$SECONDS
if timeout -k 5 10 dd if="$DEV" of=/dev/null bs=4k count=1 iflag=direct 2>"$TEST_DIR/dd.err"; then
	fail "a read succeeded after the daemon died"
fi
say "read after the daemon died: $(grep -m1 error "$TEST_DIR/dd.err") ($((SECONDS - t0)) s)"
[ $((SECONDS - t0)) -lt 10 ] || fail "a read took $((SECONDS - t0)) s to fail"
tmo 30 "$RBLK_BIN" list >"$TEST_DIR/list" 2>"$TEST_DIR/list.err"
cat "$TEST_DIR/list" "$TEST_DIR/list.err"
grep -q "^$DEV .* dead " "$TEST_DIR/list" || fail "rblk list does not show $DEV as dead"
grep -q "rblk unmap $DEV" "$TEST_DIR/list.err" || fail "rblk list does not say how to remove $DEV"
tmo 30 "$RBLK_BIN" list -o json 2>/dev/null | jq -e --arg d "$DEV" \
	'.mappings | length == 1 and .[0].dev == $d and .[0].state == "dead"' >/dev/null ||
	fail "rblk list -o json does not show $DEV as dead"
[ "$(dev_size "$DEV_NAME")" != 0 ] || fail "$DEV lost its size before unmap"
t0=$SECONDS
tmo 60 "$RBLK_BIN" unmap "$DEV_NAME" || fail "rblk unmap $DEV_NAME of a dead daemon"
say "unmapped the orphaned $DEV in $((SECONDS - t0)) s"
[ "$(dev_size "$DEV_NAME")" = 0 ] || fail "$DEV still has a size"
nothing_left "after the daemon died"
kill -0 "$TARGET_PID" || fail "the second rblk-target died"
echo "nbd negative: OK"
