#!/usr/bin/env bash
# Ceph RBD exports (rbd:POOL/IMAGE) against a micro cluster on 127.0.0.1:
#  - data written through rblk (rblk nbd + nbdcopy) is what `rbd export`
#    reads from the image, and an image filled by `rbd import` reads back
#    through rblk (an image in a namespace, exported at run time with
#    ctl add-export);
#  - a snapshot (rbd:POOL/IMAGE@SNAP) exports read-only with its data;
#  - fio's rbd engine writes, the rblk fio engine verifies, and the other
#    way round;
#  - FUA, FLUSH, TRIM and WRITE_ZEROES: zeroes read back through rblk and
#    straight from the image;
#  - a resize (rbd resize, or ctl resize-export through librbd) shows in
#    ctl list-exports, reaches a running fio engine job and the next rblk
#    nbd client, and data written past the old end is in the image;
#  - a missing image or pool, a bad spec, a wrong key and a stopped
#    cluster (after ctl remove-export of the RBD exports) are refused with a clear error within 30 s while a RAM export
#    of the same target keeps passing fio verify runs.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$RBLK_ROOT/tests/ceph/lib.sh"
requires_ceph
requires nbdcopy fio cmp
requires_nbdsh
requires_built
requires_fio_engine
fio --enghelp=rbd >/dev/null 2>&1 || skip "fio has no rbd engine"

start_ceph
rbd create rbd/vol0 --size 64M
rbd create rbd/vol1 --size 32M
conf=$TEST_DIR/target.conf
rbd_target_conf "$conf" rbd_timeout=5
start_target --config "$conf" --export vol0=rbd:rbd/vol0 \
	--export vol1=rbd:rbd/vol1 --export ram0=ram:32M
url=tcp://127.0.0.1:$RBLK_PORT
ctl()
{
	tmo 30 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"
}

# ---- rblk -> image, image -> rblk -------------------------------------------
make_random "$TEST_DIR/src.img" 32
start_nbd "$url/vol0" "$TEST_DIR/vol0.sock"
vol0=$NBD_URI
tmo 60 nbdcopy "$TEST_DIR/src.img" "$vol0"
tmo 30 rbd export --no-progress rbd/vol0 "$TEST_DIR/vol0.img"
cmp -n $((32 << 20)) "$TEST_DIR/src.img" "$TEST_DIR/vol0.img" ||
	fail "rbd export differs from what was written through rblk"
echo "rblk -> rbd: rbd export matches"

make_random "$TEST_DIR/imp.img" 16
# into a namespace: rbd:POOL/NAMESPACE/IMAGE
tmo 30 rbd namespace create rbd/ns1
tmo 30 rbd import --no-progress "$TEST_DIR/imp.img" rbd/ns1/imp
ctl add-export imp rbd:rbd/ns1/imp
start_nbd "$url/imp" "$TEST_DIR/imp.sock"
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/imp.back"
cmp "$TEST_DIR/imp.img" "$TEST_DIR/imp.back" ||
	fail "reading an rbd-imported image through rblk differs"
echo "rbd -> rblk: rbd import (in a namespace) reads back"

# a snapshot exports read-only and holds the data of its moment
tmo 30 rbd snap create --no-progress rbd/vol0@s1
ctl add-export snap rbd:rbd/vol0@s1
start_nbd "$url/snap" "$TEST_DIR/snap.sock"
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/snap.back"
cmp -n $((32 << 20)) "$TEST_DIR/src.img" "$TEST_DIR/snap.back" ||
	fail "the snapshot export differs"
tmo 30 nbdsh -u "$NBD_URI" -c 'assert h.is_read_only()'
echo "rbd:rbd/vol0@s1: read-only, holds the data"

# ---- fio: rbd engine <-> rblk engine ------------------------------------------
layout=(--bs=4k --iodepth=16 --size=16M --verify=crc32c
	--verify_state_save=0 --randrepeat=1)
fio_rbd()
{
	tmo 60 fio --name=rbd --ioengine=rbd --clientname=admin --pool=rbd \
		--rbdname=vol1 "${layout[@]}" "$@" \
		--output="$TEST_DIR/fio.out" ||
		{ cat "$TEST_DIR/fio.out"; fail "fio rbd engine $*"; }
	grep -q "err= 0" "$TEST_DIR/fio.out" || { cat "$TEST_DIR/fio.out"; fail "fio rbd $*"; }
}
fio_rblk()
{
	tmo 60 fio --name=rblk "--ioengine=external:$RBLK_FIO_ENGINE" \
		"--uri=$url/${EXPORT:-vol1}" "${layout[@]}" "$@" \
		--output="$TEST_DIR/fio.out" ||
		{ cat "$TEST_DIR/fio.out"; fail "fio rblk engine $*"; }
	grep -q "err= 0" "$TEST_DIR/fio.out" || { cat "$TEST_DIR/fio.out"; fail "fio rblk $*"; }
}
# librbd (fio) writes first: the target takes the lock only once it writes
fio_rbd --rw=randwrite --do_verify=0 --verify_pattern=0x1badcafe
fio_rblk --rw=randwrite --verify_only --verify_pattern=0x1badcafe
echo "fio rbd engine wrote, rblk engine verified"
fio_rblk --rw=randwrite --do_verify=0 --verify_pattern=0x5eed5eed
fio_rbd --rw=randwrite --verify_only --verify_pattern=0x5eed5eed
echo "rblk engine wrote, fio rbd engine verified"

# ---- FUA, FLUSH, TRIM, WRITE_ZEROES ----------------------------------------------
tmo 60 nbdsh -u "$vol0" -c '
M = 1 << 20
assert h.can_trim() and h.can_zero() and h.can_flush() and h.can_fua()
h.pwrite(b"\xab" * (8 * M), 40 * M, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(8 * M, 40 * M) == b"\xab" * (8 * M)
h.trim(M, 40 * M)                        # part of one 4 MiB object
h.zero(64 << 10, 42 * M + 4096)          # unaligned, inside an object
h.zero(4 * M, 44 * M, nbd.CMD_FLAG_FUA)  # one whole object
h.flush()
d = h.pread(8 * M, 40 * M)
assert d[:M] == bytes(M), "TRIM"
assert d[M:2 * M + 4096] == b"\xab" * (M + 4096), "TRIM zeroed too much"
assert d[2 * M + 4096:2 * M + 4096 + (64 << 10)] == bytes(64 << 10), "ZERO"
assert d[2 * M + 4096 + (64 << 10):4 * M] == b"\xab" * (2 * M - 4096 - (64 << 10))
assert d[4 * M:] == bytes(4 * M), "ZERO of a whole object"
print("trim/zero read back through rblk")
'
rm -f "$TEST_DIR/vol0.img"
tmo 30 rbd export --no-progress rbd/vol0 "$TEST_DIR/vol0.img"
python3 - "$TEST_DIR/vol0.img" "$TEST_DIR/src.img" <<'EOF'
import sys
M = 1 << 20
img = open(sys.argv[1], "rb").read()
src = open(sys.argv[2], "rb").read()
assert img[:32 * M] == src, "data outside the trimmed range changed"
d = img[40 * M:48 * M]
assert d[:M] == bytes(M), "TRIM not zero in the image"
assert d[M:2 * M + 4096] == b"\xab" * (M + 4096)
assert d[2 * M + 4096:2 * M + 4096 + (64 << 10)] == bytes(64 << 10)
assert d[4 * M:] == bytes(4 * M)
print("trim/zero read back from the image")
EOF

# ---- resize (live: issue 29 point 1) ---------------------------------------------
# `rbd resize` elsewhere reaches a running fio engine job and the next
# `rblk nbd` client; `ctl resize-export` resizes the image through librbd
start_nbd "$url/vol1" "$TEST_DIR/vol1.sock"
vol1=$NBD_URI
nbd_size() { tmo 30 nbdsh -u "$vol1" -c 'print(h.get_size())'; }
[ "$(nbd_size)" = $((32 << 20)) ] || fail "vol1's first NBD client was told $(nbd_size) bytes"
fio --name=live "--ioengine=external:$RBLK_FIO_ENGINE" "--uri=$url/vol1" \
	--rw=randrw --bs=4k --iodepth=4 --time_based --runtime=3 --rate_iops=200 \
	>"$TEST_DIR/live.out" 2>"$TEST_DIR/live.err" &
fpid=$!
cleanup_fn stop_pid "$fpid"
_wait_for_line "$RBLK_TARGET_LOG" "logged in to export vol1 \(queue 0, depth 4," \
	"$fpid" 30 || { cat "$TEST_DIR/live.out" "$TEST_DIR/live.err"; fail "fio did not log in"; }
rbd resize --no-progress rbd/vol1 --size 48M
wait_pid 30 "$fpid" || { cat "$TEST_DIR/live.out" "$TEST_DIR/live.err"; fail "fio failed across rbd resize"; }
grep -q "rblk: live: the volume grew from 33554432 to 50331648 bytes" "$TEST_DIR/live.out" ||
	{ cat "$TEST_DIR/live.out" "$TEST_DIR/live.err"; fail "the engine did not see rbd resize live"; }
grep -q "err= 0" "$TEST_DIR/live.out" || fail "fio: $(cat "$TEST_DIR/live.out")"
ctl list-exports | grep -E "^vol1 "
ctl list-exports | grep -qE "^vol1 .* 50331648 " ||
	fail "resize to 48 MiB not shown by list-exports"
[ "$(nbd_size)" = $((48 << 20)) ] || fail "an NBD client after rbd resize was told $(nbd_size) bytes"
echo "rbd resize: a live fio job saw it, a new NBD client is told 48 MiB"
if ctl resize-export vol1 16M 2>"$TEST_DIR/shrink.err"; then
	fail "resize-export shrank an image without --force"
fi
ctl resize-export vol1 64M >/dev/null
tmo 30 rbd info rbd/vol1 | grep -q "size 64 MiB" || fail "rbd info: $(rbd info rbd/vol1)"
[ "$(nbd_size)" = $((64 << 20)) ] || fail "an NBD client after resize-export was told $(nbd_size) bytes"
tmo 60 env TEST_DIR="$TEST_DIR" nbdsh -u "$vol1" -c '
import os
d = os.urandom(1 << 20)
h.pwrite(d, 60 << 20)
h.flush()
open(os.environ["TEST_DIR"] + "/pattern", "wb").write(d)
' || fail "I/O past the old end of vol1"
tmo 60 rbd export --no-progress rbd/vol1 "$TEST_DIR/vol1.img"
cmp -n $((1 << 20)) "$TEST_DIR/pattern" \
	<(dd if="$TEST_DIR/vol1.img" bs=1M skip=60 count=1 status=none) ||
	fail "rbd export of vol1 differs at 60 MiB"
echo "ctl resize-export: the image is 64 MiB, data past the old end is in it"

# ---- the Objecter budget gate ---------------------------------------------------
# librados' op budget is a blocking throttle, and librbd submits in the
# worker (rbd_non_blocking_aio off), so the target keeps each worker within
# its share of the budget. A second target whose ceph.conf allows 4 ops and
# 256 KiB in flight (1 worker: 2 ops, 128 KiB) takes QD32 of mixed sizes
# up to 512 KiB with verify: ops wait at the gate (the target logs that
# they did), big ones go alone, and the data is right.
cp "$CEPH_CONF" "$TEST_DIR/small.ceph.conf"
printf '[client]\nobjecter_inflight_ops = 4\nobjecter_inflight_op_bytes = 262144\n' \
	>>"$TEST_DIR/small.ceph.conf"
rbd create rbd/gate --size 32M
rbd_target_conf "$TEST_DIR/gate.conf" workers=1 rbd_takeover=no rbd_timeout=5
sed -i "s|^ceph_conf = .*|ceph_conf = $TEST_DIR/small.ceph.conf|" "$TEST_DIR/gate.conf"
gport=$(free_port)
"$RBLK_TARGET_BIN" --config "$TEST_DIR/gate.conf" --ctl-socket none \
	--allow-any-host --listen "tcp://127.0.0.1:$gport" \
	--export gate=rbd:rbd/gate --export gram=ram:16M >"$TEST_DIR/gate.log" 2>&1 &
gate_pid=$!
cleanup_fn stop_pid "$gate_pid"
_wait_for_line "$TEST_DIR/gate.log" "listening on" "$gate_pid" 30 ||
	{ cat "$TEST_DIR/gate.log"; fail "the gate target did not start"; }
grep -q "op budget 4 ops, 262144 bytes" "$TEST_DIR/gate.log" ||
	{ cat "$TEST_DIR/gate.log"; fail "the gate target did not read its op budget"; }
# the RAM export of the same worker keeps serving beside it
tmo 120 fio --name=ram "--ioengine=external:$RBLK_FIO_ENGINE" \
	"--uri=tcp://127.0.0.1:$gport/gram" --rw=randrw --bs=4k --iodepth=4 \
	--size=8M --verify=crc32c --verify_state_save=0 --time_based \
	--runtime=10 --output="$TEST_DIR/gram.out" &
ram_fio=$!
# writes reach the target one grant at a time; the verify pass's reads
# come 32 at once, so they are what queues at the gate
for phase in --do_verify=0 --verify_only; do
	tmo 120 fio --name=gate "--ioengine=external:$RBLK_FIO_ENGINE" \
		"--uri=tcp://127.0.0.1:$gport/gate" --rw=randwrite \
		--bsrange=4k-512k --iodepth=32 --size=32M --randrepeat=1 \
		--verify=crc32c --verify_state_save=0 --verify_fatal=1 "$phase" \
		--output="$TEST_DIR/gate.out" ||
		{ cat "$TEST_DIR/gate.out"; fail "fio $phase through the gate"; }
	grep -q "err= 0" "$TEST_DIR/gate.out" ||
		{ cat "$TEST_DIR/gate.out"; fail "fio $phase through the gate"; }
done
grep -q "waited for the worker's share of the cluster connection's op budget (2 ops, 131072 bytes" \
	"$TEST_DIR/gate.log" || { cat "$TEST_DIR/gate.log"; fail "no op waited at the gate"; }
wait "$ram_fio" || { cat "$TEST_DIR/gram.out"; fail "the RAM export beside the gate"; }
grep -q "err= 0" "$TEST_DIR/gram.out" || { cat "$TEST_DIR/gram.out"; fail "the RAM export beside the gate"; }
stop_pid "$gate_pid"
echo "op budget gate: QD32 up to 512 KiB verified with 2 ops / 128 KiB per worker; the RAM export beside it verified"

# ---- bad input while the RAM export keeps serving ---------------------------------
touch "$TEST_DIR/serving"
(
	n=0
	while [ -e "$TEST_DIR/serving" ]; do
		EXPORT=ram0 fio_rblk --rw=randwrite --verify_pattern=0x$((RANDOM + 4096))0 \
			--size=8M >/dev/null 2>"$TEST_DIR/verify.err" || exit 1
		n=$((n + 1))
		echo $n >"$TEST_DIR/verify.count"
	done
) &
verifier=$!

# refused (ctl add-export NAME SPEC), with this text, within 30 s
refused()
{
	local name=$1 spec=$2 want=$3 t0=$SECONDS
	if ctl add-export "$name" "$spec" 2>"$TEST_DIR/err"; then
		fail "add-export $spec succeeded"
	fi
	grep -q "$want" "$TEST_DIR/err" ||
		{ cat "$TEST_DIR/err"; fail "add-export $spec: no '$want' in the error"; }
	echo "add-export $spec: refused in $((SECONDS - t0)) s: $(cat "$TEST_DIR/err")"
}
refused bad1 rbd:rbd/missing "no such image"
refused bad2 rbd:nopool/vol0 "no such pool"
refused bad3 rbd:just-a-name "bad rbd spec"

# a wrong key: the target says so and exits
cp "$CEPH_KEYRING" "$TEST_DIR/bad.keyring"
ceph-authtool "$TEST_DIR/bad.keyring" -n client.admin --gen-key >/dev/null
rbd_target_conf "$TEST_DIR/bad.conf" "ceph_keyring=$TEST_DIR/bad.keyring" \
	rbd_timeout=5
t0=$SECONDS
if tmo 30 "$RBLK_TARGET_BIN" --config "$TEST_DIR/bad.conf" --ctl-socket none \
	--listen tcp://127.0.0.1:$(free_port) --export x=rbd:rbd/vol0 \
	>"$TEST_DIR/bad.log" 2>&1; then
	fail "a target with a wrong key started"
fi
grep -qi "permission denied\|wrong key" "$TEST_DIR/bad.log" ||
	{ cat "$TEST_DIR/bad.log"; fail "wrong key: no clear error"; }
echo "wrong key: refused in $((SECONDS - t0)) s: $(grep -i denied "$TEST_DIR/bad.log" | head -1)"

# the cluster stops: adding an export fails within the timeout. The RBD
# exports go first (which closes their images and the cluster connection),
# so the target's own shutdown need not wait on a dead cluster.
for x in vol0 vol1 imp snap; do
	ctl remove-export "$x" --force --wait >/dev/null
done
stop_ceph
refused bad4 rbd:rbd/vol1 "timed out"

rm -f "$TEST_DIR/serving"
wait "$verifier" || { cat "$TEST_DIR/verify.err"; fail "the RAM export's verify failed during the bad input"; }
[ "$(cat "$TEST_DIR/verify.count")" -ge 1 ] || fail "no verify pass finished"
echo "RAM export: $(cat "$TEST_DIR/verify.count") fio verify passes during the bad input"
kill -0 "$RBLK_TARGET_PID" || fail "the target died"
echo "PASS: $TEST_NAME"
