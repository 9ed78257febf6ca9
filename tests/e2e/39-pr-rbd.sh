#!/usr/bin/env bash
# Reservations on an RBD image exported by two gateways (issue 29): the
# state lives in the image's metadata (rblk.pr), so both agree.
#   - alpha registers and takes write-exclusive through gateway 1; gateway
#     2 reports the same state, and beta's writes through gateway 2 fail
#     with EBADE while its reads there succeed;
#   - `rbd image-meta get` shows the state;
#   - a change made through gateway 2 (beta unregistered) stops beta's
#     writer already live on gateway 1, without any reservation command
#     sent to gateway 1 (it re-reads the metadata every second);
#   - failover: gateway 1 is killed; alpha's writes go through gateway 2
#     (it still holds the reservation there) and beta stays fenced;
#   - twelve hosts registering at once through both gateways are all
#     kept (the store is a compare-and-set on the image header);
#   - both gateways restarted: the state is still there.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$RBLK_ROOT/tests/ceph/lib.sh"
requires_ceph
requires python3
requires_built
PT=$RBLK_BUILD/tests/rblk_prtest
[ -x "$PT" ] || fail "$PT missing: make $PT"

for h in alpha beta; do
	head -c 32 /dev/urandom | base64 >"$TEST_DIR/$h.key"
	chmod 600 "$TEST_DIR/$h.key"
done
start_ceph
rbd create rbd/shared --size 32M
conf=$TEST_DIR/target.conf
rbd_target_conf "$conf" rbd_timeout=10 rbd_takeover=yes
targs=(--config "$conf" --host "alpha:secret-file=$TEST_DIR/alpha.key"
	--host "beta:secret-file=$TEST_DIR/beta.key"
	--export "vol=rbd:rbd/shared,allow=any")

start_gw()
{
	mkdir -p "$TEST_DIR/gw$1"
	TEST_DIR=$TEST_DIR/gw$1 start_target "${targs[@]}"
	eval "G$1=\$RBLK_TARGET_URL/vol P$1=\$RBLK_TARGET_PID"
}
start_gw 1
start_gw 2
A=(--host-name alpha --key-file "$TEST_DIR/alpha.key")
B=(--host-name beta --key-file "$TEST_DIR/beta.key")
pr() { tmo 60 "$RBLK_BIN" pr "$@"; }
io() # MODE HOST URL OFF BYTE
{
	tmo 60 "$PT" "$1" "$3" "$2" "$TEST_DIR/$2.key" "$4" 65536 "$5" 2>/dev/null || true
}
state() # URL: type holder keys
{
	python3 -c '
import json, sys
j = json.loads(sys.argv[1])
print(j["type"], j["holder"], sorted(r["key"] for r in j["registrants"]))
' "$(pr report -o json "${A[@]}" "$1")"
}

pr register "${A[@]}" --key 0xa1 "$G1"
pr register "${B[@]}" --key 0xb2 "$G2"
pr reserve "${A[@]}" --key 0xa1 --type write-exclusive "$G1"
s1=$(state "$G1")
s2=$(state "$G2")
echo "gateway 1: $s1; gateway 2: $s2"
[ "$s1" = "write-exclusive alpha ['0xa1', '0xb2']" ] || fail "gateway 1: $s1"
[ "$s2" = "$s1" ] || fail "the gateways disagree: $s1 / $s2"
rbd image-meta get rbd/shared rblk.pr | tee "$TEST_DIR/meta.txt"
grep -q "^holder alpha$" "$TEST_DIR/meta.txt" || fail "image metadata rblk.pr lacks the holder"

[ "$(io write alpha "$G1" 0 65)" = ok ] || fail "alpha cannot write through gateway 1"
[ "$(io write beta "$G2" 0 98)" = EBADE ] || fail "beta's write through gateway 2 was not refused"
[ "$(io read beta "$G2" 0 65)" = ok ] || fail "beta cannot read alpha's data through gateway 2"
[ "$(io write beta "$G1" 0 98)" = EBADE ] || fail "beta's write through gateway 1 was not refused"

# a change made through gateway 2 reaches a session live on gateway 1
pr register "${B[@]}" --key 0xb2 --old-key 0xb2 "$G2" # a replace, same key
pr unregister "${B[@]}" --key 0xb2 "$G2"
pr release "${A[@]}" --key 0xa1 --type write-exclusive "$G2"
pr reserve "${A[@]}" --key 0xa1 --type we-ro "$G2"
pr register "${B[@]}" --key 0xb3 "$G2"
"$PT" writer "$G1" beta "$TEST_DIR/beta.key" $((2 << 20)) $((4 << 20)) 66 60 \
	>"$TEST_DIR/w.out" 2>&1 &
w=$!
for ((i = 0; i < 400; i++)); do
	grep -q ready "$TEST_DIR/w.out" && break
	kill -0 $w 2>/dev/null || break
	sleep 0.05
done
grep -q ready "$TEST_DIR/w.out" ||
	{ cat "$TEST_DIR/w.out"; fail "registered beta cannot write through gateway 1 under we-ro"; }
t0=$(date +%s%N)
pr unregister "${B[@]}" --key 0xb3 "$G2"
rc=0
wait_pid 20 $w || rc=$?
cat "$TEST_DIR/w.out"
[ $rc -eq 3 ] || fail "beta's writer on gateway 1 ended with $rc, want 3 (EBADE)"
echo "gateway 1 fenced beta's live session $((($(date +%s%N) - t0) / 1000000)) ms after gateway 2 unregistered it"

# two gateways changing it at once lose nothing (compare-and-set): 12
# hosts register at the same moment, half through each gateway
pids=()
for i in $(seq 1 12); do
	g=$G1
	[ $((i % 2)) = 0 ] && g=$G2
	tmo 60 "$RBLK_BIN" pr register --host-name "h$i" --key $((0x100 + i)) "$g" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent register failed"; done
n=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["registrants"]))' \
	"$(pr report -o json "${A[@]}" "$G2")")
[ "$n" = 13 ] || fail "after 12 concurrent registrations through two gateways: $n registrants, want 13"
! grep -h "not stored" "$TEST_DIR"/gw*/target.*.log || fail "a gateway gave up storing"
echo "12 concurrent registrations through two gateways: all kept"
for i in $(seq 1 12); do
	tmo 60 "$RBLK_BIN" pr unregister --host-name "h$i" --key $((0x100 + i)) "$G2"
done

# failover: gateway 1 dies
kill -KILL "$P1"
wait "$P1" 2>/dev/null || true
[ "$(io write alpha "$G2" 0 67)" = ok ] || fail "alpha cannot write through gateway 2 after the failover"
[ "$(io write beta "$G2" 0 99)" = EBADE ] || fail "beta writes through gateway 2 after the failover"
[ "$(io read beta "$G2" 0 67)" = ok ] || fail "beta does not read alpha's data after the failover"
echo "failover: alpha writes through gateway 2, beta fenced there"

# both restart
stop_pid "$P2"
start_gw 1
start_gw 2
s1=$(state "$G1")
s2=$(state "$G2")
[ "$s1" = "write-exclusive-reg-only alpha ['0xa1']" ] || fail "after restarting: $s1"
[ "$s2" = "$s1" ] || fail "after restarting the gateways disagree: $s1 / $s2"
[ "$(io write beta "$G2" 0 99)" = EBADE ] || fail "beta writes after the restart"
echo "reservations on RBD OK: $s1"
