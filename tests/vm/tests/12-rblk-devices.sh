#!/bin/bash
# rblk-devices lists the soft-RoCE device with its port state, link layer,
# GID (RoCE v2 for 192.0.2.1) and netdev, in text and JSON.
# vm-timeout: 120
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd jq
need_file "$BUILD/rblk-devices"

out=$(timeout 30 "$BUILD/rblk-devices") || fail "rblk-devices exited $?"
echo "$out"
grep -q "$RDMA_DEV" <<<"$out" || fail "no $RDMA_DEV in the listing"
grep -qi "active" <<<"$out" || fail "port state not shown as ACTIVE"
grep -qi "ethernet" <<<"$out" || fail "link layer not Ethernet"
grep -q "192.0.2.1" <<<"$out" || fail "GID for 192.0.2.1 missing"
grep -q "d0" <<<"$out" || fail "netdev d0 missing"

json=$(timeout 30 "$BUILD/rblk-devices" -o json) || fail "rblk-devices -o json exited $?"
jq -e . >/dev/null <<<"$json" || fail "JSON does not parse"
jq -e --arg d "$RDMA_DEV" '.devices[] | select(.name == $d)' >/dev/null <<<"$json" ||
	fail "JSON has no device $RDMA_DEV"
jq -c '.devices[0].ports[0] | del(.gids)' <<<"$json"
echo "rblk-devices: OK"
