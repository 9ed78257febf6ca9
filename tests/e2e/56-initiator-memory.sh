#!/usr/bin/env bash
# The initiator pins what it uses (issue 26), over tcp (where registering
# pins nothing, rblk_pinned_bytes() still counts what would be pinned on
# rdma; tests/vm/tests/42-fleet-memory.sh measures VmPin over rxe):
#   1. 16 handles x 4 queues with default options (depth 64, max I/O
#      1 MiB, which used to register 64 MiB of bounce slots per queue at
#      open) each verify 4 KiB from buffers they never registered; the
#      handles register at most 1 MiB per session at open and, after the
#      I/O, at most 1 MiB + 8 KiB.
#   2. Bounce memory is capped process-wide and waits, never fails: 4
#      threads, each with its own handle, put 16 x 1 MiB unregistered
#      writes (then reads) in flight at once under RBLK_BOUNCE_LIMIT=4M
#      (64 MiB asked for at once); every byte verifies and no handle's
#      bounce memory passes the cap plus one part.
#   3. `rblk info` reports the target's maxima (queue depth and max I/O it
#      grants a queue: here --max-queue-depth 200 --max-io 2M), not its
#      probe's own depth, and what its session pins, in text and JSON.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
requires jq
FLEET=$RBLK_BUILD/tests/rblk_fleet
[ -x "$FLEET" ] || fail "test helper missing: make $FLEET"
H=16 Q=4
S=$((H * Q))
need=$((8 * S + 256))
[ "$(ulimit -Hn)" -ge "$need" ] || skip "needs ulimit -n $need"
ulimit -n "$need"

truncate -s 64M "$TEST_DIR/vol.img"
# fleet (ram) is served by direct access, vol (a file) through the slots:
# bounce buffers stand in on both paths
start_target --workers 2 --max-queue-depth 200 --max-io 2M \
	--export "fleet=ram:64M" --export "vol=$TEST_DIR/vol.img"
url=$RBLK_TARGET_URL/fleet

# ---- 1. many handles, default options, unregistered 4 KiB ------------------
tmo 120 "$FLEET" open "$url" $H $Q >"$TEST_DIR/open.out" 2>&1 ||
	{ cat "$TEST_DIR/open.out"; fail "rblk_fleet open"; }
cat "$TEST_DIR/open.out"
grep -q "^verified $S sessions" "$TEST_DIR/open.out" || fail "not every session verified"
grep -q "^done$" "$TEST_DIR/open.out" || fail "rblk_fleet did not finish"
p_open=$(awk '/^open/ { print $NF }' "$TEST_DIR/open.out")
p_io=$(awk '/^verified/ { print $NF }' "$TEST_DIR/open.out")
echo "registered: $((p_open / S)) bytes a session at open, $((p_io / S)) after the I/O"
[ "$p_open" -le $((S << 20)) ] || fail "open registers $p_open bytes for $S sessions (over 1 MiB each)"
[ "$p_io" -le $((S * ((1 << 20) + 8192))) ] ||
	fail "after 4 KiB each, $p_io bytes registered for $S sessions"

# ---- 2. the bounce cap: I/O waits across threads, never fails ---------------
for u in "$url" "$RBLK_TARGET_URL/vol"; do
	RBLK_BOUNCE_LIMIT=4M tmo 300 "$FLEET" burst "$u" 4 16 $((1 << 20)) \
		>"$TEST_DIR/burst.out" 2>&1 ||
		{ cat "$TEST_DIR/burst.out"; fail "rblk_fleet burst on $u under RBLK_BOUNCE_LIMIT=4M"; }
	echo "$u: $(cat "$TEST_DIR/burst.out")"
	grep -q "^done$" "$TEST_DIR/burst.out" || fail "burst on $u did not verify"
	mb=$(awk '/^burst: max bounce/ { print $NF }' "$TEST_DIR/burst.out")
	[ "$mb" -gt 0 ] || fail "burst used no bounce memory (registered buffers?)"
	[ "$mb" -le $((5 << 20)) ] || fail "a handle held $mb bytes of bounce memory, cap 4 MiB"
done

# ---- 3. rblk info: the target's maxima, and what it pins --------------------
tmo 30 "$RBLK_BIN" info "$url" | tee "$TEST_DIR/info.txt"
grep -q "^queue depth: 200 " "$TEST_DIR/info.txt" || fail "rblk info does not report the granted depth 200"
grep -q "^max I/O: *2097152 " "$TEST_DIR/info.txt" || fail "rblk info does not report max I/O 2M"
grep -q "^pinned: *[0-9]* bytes" "$TEST_DIR/info.txt" || fail "rblk info does not say what it pins"
tmo 30 "$RBLK_BIN" info -o json "$url" >"$TEST_DIR/info.json"
jq -e '.queue_depth == 200 and .max_io == 2097152 and
       (.pinned_bytes | type) == "number" and .pinned_bytes > 0' \
	"$TEST_DIR/info.json" >/dev/null || { cat "$TEST_DIR/info.json"; fail "rblk info -o json"; }
echo "initiator memory: OK"
