#!/bin/bash
# Guest smoke test: soft-RoCE (rdma_rxe) on the dummy netdev works end to
# end: the verbs device is listed and ACTIVE, rdma_cm resolves 192.0.2.1 and
# rping moves data, and ib_read_bw (perftest) runs RDMA READs over rdma_cm.
# vm-timeout: 180
set -u
ADDR=${RBLK_TEST_RDMA_ADDR:-192.0.2.1}
DEV=${RBLK_TEST_RDMA_DEV:-rxe0}
fail() { echo "FAIL: $*"; exit 1; }
pids=()
cleanup() { for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

[ "${RBLK_VM:-0}" = 1 ] || { echo "not in the rblk test guest"; exit 77; }

echo "# ibv_devices"
ibv_devices | tee /tmp/ibv_devices.txt
grep -qw "$DEV" /tmp/ibv_devices.txt || fail "ibv_devices does not list $DEV"

echo "# rdma link"
rdma link show | tee /tmp/rdma_link.txt
grep -E "^link $DEV/1 " /tmp/rdma_link.txt | grep -q 'state ACTIVE' ||
	fail "$DEV/1 is not ACTIVE"

echo "# ibv_devinfo -d $DEV"
ibv_devinfo -d "$DEV" | grep -E 'hca_id|transport|state|link_layer' || fail "ibv_devinfo failed"

# rping: server (one connection, then exits) + client, 10 pings verified.
echo "# rping"
rping -s -a "$ADDR" -C 10 -v >/tmp/rping-s.log 2>&1 &
spid=$!
pids+=("$spid")
ok=0
for try in 1 2 3 4 5 6 7 8 9 10; do
	sleep 0.5
	if timeout 60 rping -c -a "$ADDR" -C 10 -v >/tmp/rping-c.log 2>&1; then
		ok=1
		break
	fi
	echo "rping client try $try failed: $(tail -n1 /tmp/rping-c.log)"
done
cat /tmp/rping-c.log
[ "$ok" = 1 ] || fail "rping client failed"
n=$(grep -c 'ping data: rdma-ping-' /tmp/rping-c.log)
[ "$n" -eq 10 ] || fail "rping client got $n of 10 pings"
timeout 30 tail --pid="$spid" -f /dev/null
wait "$spid" || { cat /tmp/rping-s.log; fail "rping server failed"; }

# ib_read_bw over rdma_cm (-R), a few hundred small READs.
echo "# ib_read_bw -R"
port=18515
ib_read_bw -d "$DEV" -R -p $port -s 4096 -n 200 >/tmp/rbw-s.log 2>&1 &
spid=$!
pids+=("$spid")
ok=0
for try in 1 2 3 4 5 6 7 8 9 10; do
	sleep 0.5
	if timeout 60 ib_read_bw -d "$DEV" -R -p $port -s 4096 -n 200 "$ADDR" >/tmp/rbw-c.log 2>&1; then
		ok=1
		break
	fi
	echo "ib_read_bw client try $try failed: $(tail -n1 /tmp/rbw-c.log)"
done
cat /tmp/rbw-c.log
[ "$ok" = 1 ] || fail "ib_read_bw client failed"
timeout 30 tail --pid="$spid" -f /dev/null
wait "$spid" || { cat /tmp/rbw-s.log; fail "ib_read_bw server failed"; }
grep -qE '^ *4096 +200 ' /tmp/rbw-c.log || fail "no ib_read_bw result line"
echo "rxe: OK"
