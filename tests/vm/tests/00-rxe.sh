#!/bin/bash
# Guest smoke test: soft-RoCE (rdma_rxe) on the dummy netdev works end to
# end: the verbs device is listed and ACTIVE, rdma_cm resolves 192.0.2.1 and
# rping moves data, and ib_read_bw (perftest) does RDMA READs over rdma_cm.
# vm-timeout: 180
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd ibv_devices ibv_devinfo rdma rping ib_read_bw

echo "# ibv_devices"
ibv_devices | tee "$TMPDIR/ibv_devices.txt"
grep -qw "$RDMA_DEV" "$TMPDIR/ibv_devices.txt" || fail "ibv_devices does not list $RDMA_DEV"

echo "# rdma link"
rdma link show | tee "$TMPDIR/rdma_link.txt"
grep -E "^link $RDMA_DEV/1 " "$TMPDIR/rdma_link.txt" | grep -q 'state ACTIVE' ||
	fail "$RDMA_DEV/1 is not ACTIVE"

echo "# ibv_devinfo -d $RDMA_DEV"
ibv_devinfo -d "$RDMA_DEV" | grep -E 'hca_id|transport|state|link_layer' ||
	fail "ibv_devinfo failed"

# Start a one-shot server, then retry the client until the server listens.
# usage: client_server NAME "SERVER CMD" "CLIENT CMD"
client_server() {
	local name=$1 scmd=$2 ccmd=$3 spid try
	# shellcheck disable=SC2086
	bg $scmd >"$TMPDIR/$name-s.log" 2>&1
	spid=$!
	for try in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.5
		# shellcheck disable=SC2086
		timeout 60 $ccmd >"$TMPDIR/$name-c.log" 2>&1 && break
		echo "$name client try $try failed: $(tail -n1 "$TMPDIR/$name-c.log")"
		[ "$try" = 10 ] && { cat "$TMPDIR/$name-c.log"; fail "$name client failed"; }
	done
	cat "$TMPDIR/$name-c.log"
	timeout 30 tail --pid="$spid" -f /dev/null
	wait "$spid" || { cat "$TMPDIR/$name-s.log"; fail "$name server failed"; }
}

echo "# rping, 10 pings"
client_server rping "rping -s -a $RDMA_ADDR -C 10 -v" "rping -c -a $RDMA_ADDR -C 10 -v"
n=$(grep -c 'ping data: rdma-ping-' "$TMPDIR/rping-c.log")
[ "$n" -eq 10 ] || fail "rping client got $n of 10 pings"

echo "# ib_read_bw -R (rdma_cm), 200 x 4 KiB"
opts="-d $RDMA_DEV -R -p 18515 -s 4096 -n 200"
client_server ib_read_bw "ib_read_bw $opts" "ib_read_bw $opts $RDMA_ADDR"
grep -qE '^ *4096 +200 ' "$TMPDIR/ib_read_bw-c.log" || fail "no ib_read_bw result line"
echo "rxe: OK"
