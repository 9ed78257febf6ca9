#!/bin/bash
# `rblk discover` over real verbs and rdma_cm (rdma_rxe): four exports (two
# DISCOVER_REPLY pages, so two discovery connections) listed with their
# sizes in JSON; a port without a listener fails with an error; a login
# still works after the discovery connections have come and gone.
# vm-timeout: 120
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd jq
need_file "$BUILD/rblk-target" "$BUILD/rblk"

port=7443
url=rdma://$RDMA_ADDR:$port
dir=$TMPDIR/discover
mkdir -p "$dir"
truncate -s 8M "$dir/a.img"

bg "$BUILD/rblk-target" --listen "$url" --allow-any-host --log-level info \
	--export "a=$dir/a.img" --export "b=ram:1M,bs=4096" \
	--export "c=ram:2M,ro" --export "d=ram:64K" 2>"$dir/target.log"
wait_until 30 grep -q "listening on" "$dir/target.log"

json=$(timeout 30 "$BUILD/rblk" discover -o json "$url") ||
	fail "rblk discover over rdma exited $?"
echo "$json"
got=$(jq -r '.exports[] | "\(.name) \(.size) \(.block_size) \(.read_only)"' <<<"$json")
want="a 8388608 512 false
b 1048576 4096 false
c 2097152 512 true
d 65536 512 false"
[ "$got" = "$want" ] || fail "discover over rdma listed: $got"
grep -q "discovered exports 3..4 of 4" "$dir/target.log" ||
	fail "second discovery page not served"

if out=$(timeout 30 "$BUILD/rblk" discover "rdma://$RDMA_ADDR:7499" 2>&1); then
	fail "discover of a port without a listener succeeded"
fi
echo "$out"
grep -q "cannot connect to rdma://$RDMA_ADDR:7499" <<<"$out" ||
	fail "unclear error: $out"

timeout 30 "$BUILD/rblk" info "$url/b" | grep -q "block size:  4096" ||
	fail "login after discovery over rdma"
echo "discover over rdma: OK"
