#!/usr/bin/env bash
# Memory isolation between connections and commands (docs/PROTOCOL.md,
# "What each key covers"): target memory is lent one command at a time
# through a window bound to that command's connection.
#   - connection B uses A's in-flight READ window (lent by A's RESP) and
#     A's in-flight WRITE window (A's GRANT): remote access errors, and
#     B's bytes never reach A's data;
#   - A's own READ key after its READ_DONE invalidated it: remote access
#     error (a key dies with its command); the same when the tag's next
#     command returned the window (RBLK_CMD_F_DONE), and a DONE that
#     invalidates nothing, or names a tag without a window, fails the
#     connection;
#   - with direct access (RAM exports) B uses A's volume window, and the
#     volume key of a connection C that has closed: remote access errors;
#   - a sweep of 10,000 guessed keys (every key byte of the lowest key
#     indexes: the pool's own region key and the first windows among
#     them) against a slot A holds open: all refused, while a librblk
#     client writes and verifies data on another export throughout;
#   - A finishes every command and verifies its data; over tcp the
#     target logs the refusals (over rdma the HCA refuses them: nothing
#     reaches the target's CPU to log).
# Run against an open export and an authenticated one. The same scenario
# runs over tcp here and over rdma (rdma_rxe) in the guest:
# tests/vm/tests/14-rdma-auth.sh (RBLK_TEST_SCHEME=rdma).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
RAW=$RBLK_BUILD/tests/rblk_rawclient
LIBTEST=$RBLK_BUILD/tests/rblk_libtest
[ -x "$RAW" ] || fail "test helper missing: make $RAW"
[ -x "$LIBTEST" ] || fail "test helper missing: make $LIBTEST"
SWEEP=${RBLK_SWEEP_KEYS:-10000}

head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
chmod 600 "$TEST_DIR/alpha.key"
# the sweep holds A's READ window open far longer than window_timeout's
# default 5 s (a peer that does so is dropped): give it room
start_target --host "alpha:secret-file=$TEST_DIR/alpha.key" --window-timeout 900 \
	--export open=ram:4M --export "locked=ram:4M,allow=alpha" \
	--export bg=ram:16M

want()
{
	grep -qx "$1" <<<"$out" || fail "$2"
}

check()
{
	out=$(tmo 60 "$RAW" isolation "$@" 2>"$TEST_DIR/isolation.err") || {
		echo "$out"
		cat "$TEST_DIR/isolation.err"
		fail "isolation $*"
	}
	echo "$out"
	want "B: RDMA READ of A's in-flight READ window with rkey 0x[0-9a-f]*: remote access error" \
		"$1: another connection's in-flight READ window worked"
	want "B: RDMA WRITE into A's in-flight WRITE window with rkey 0x[0-9a-f]*: remote access error" \
		"$1: another connection's in-flight WRITE window worked"
	want "connection A verifies its data (after B's write into its window)" \
		"$1: B's write reached A's data"
	want "A: RDMA READ with its own key after READ_DONE with rkey 0x[0-9a-f]*: remote access error" \
		"$1: a key outlived its command"
	# the tag's next command returning the window (RBLK_CMD_F_DONE)
	want "A: RDMA READ with its own key after its tag's next command with rkey 0x[0-9a-f]*: remote access error" \
		"$1: a key outlived the command that returned it"
	want "A: DONE without invalidating the window: connection failed (.*)" \
		"$1: a DONE that killed no key was taken"
	want "A: DONE on a tag that holds no window: connection failed (.*)" \
		"$1: a DONE naming no window was taken"
	want "connection A verifies its data (at the end)" \
		"$1: connection A did not verify its data"
}
check "$RBLK_TARGET_URL/open"
want "direct RDMA READ with rkey 0x[0-9a-f]*: remote access error" \
	"open: another connection's volume window worked"
want "direct RDMA READ (closed connection C) with rkey 0x[0-9a-f]*: remote access error" \
	"open: a closed connection's volume key still worked"
check "$RBLK_TARGET_URL/locked" alpha "$TEST_DIR/alpha.key"
scheme=${RBLK_TARGET_URL%%:*}
if [ "$scheme" = tcp ]; then
	n=$(grep -cE "remote (read|write) refused: rkey 0x[0-9a-f]+ is not valid" "$RBLK_TARGET_LOG" || true)
	[ "$n" -eq 10 ] || fail "target logged $n refused remote accesses, want 10"
fi

# the sweep, with a verifying client beside it
stop=$TEST_DIR/stop
(
	rounds=0
	while [ ! -e "$stop" ]; do
		tmo 60 "$LIBTEST" rw "$RBLK_TARGET_URL/bg" slot \
			>/dev/null || exit 1
		rounds=$((rounds + 1))
	done
	echo "$rounds" >"$TEST_DIR/rounds"
) &
bg=$!
out=$(tmo 300 "$RAW" sweep "$RBLK_TARGET_URL/open" "$SWEEP" 2>"$TEST_DIR/sweep.err") || {
	echo "$out"
	tail -20 "$TEST_DIR/sweep.err"
	touch "$stop"
	wait "$bg" || true
	fail "sweep"
}
touch "$stop"
wait "$bg" || fail "the verifying client failed during the sweep"
echo "$out"
want "sweep: $SWEEP of $SWEEP guessed keys refused (remote access error)" \
	"a guessed key worked"
want "connection A verifies its data after the sweep" \
	"connection A did not verify after the sweep"
echo "verifying client: $(cat "$TEST_DIR/rounds") rounds of 8 MiB written and verified during the sweep"
# over tcp each refusal is logged: by the transport (rate-limited:
# printed lines plus those it folded) and, per connection, by the target
# when it closes the connection the refusal failed
[ "$scheme" = tcp ] || { echo "PASS: $TEST_NAME ($scheme)"; exit 0; }
lines=$(grep -cE "remote (read|write) refused: rkey" "$RBLK_TARGET_LOG" || true)
folded=$(sed -n 's/.*(\([0-9]*\) similar lines suppressed).*/\1/p' "$RBLK_TARGET_LOG" |
	awk '{ s += $1 } END { print s + 0 }')
closed=$(grep -cE "conn [0-9]+ \(tcp [^)]*\): (remote access refused.*; disconnecting|disconnected( \(.*\))?)$" "$RBLK_TARGET_LOG" || true)
echo "target: $lines refusals logged, $folded more folded by the rate limit; $closed connections closed"
[ "$lines" -ge 10 ] || fail "the transport logged $lines refusals"
[ "$closed" -ge "$SWEEP" ] ||
	fail "target closed $closed connections, want at least $SWEEP"
echo "PASS: $TEST_NAME"
