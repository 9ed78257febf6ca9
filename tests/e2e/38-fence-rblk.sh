#!/usr/bin/env bash
# The Pacemaker fence agent tools/fence_rblk (issue 29), two nodes and two
# volumes (devices: URLs of two targets). Node A and node B each unfence
# themselves ("on", key=value lines on stdin as stonithd sends them): both
# keys registered on both volumes, one write-exclusive registrants-only
# reservation, both write. `fence_rblk -o off` run as A for B's key
# removes B's key everywhere: B's writes fail with EBADE on both volumes
# while its reads succeed; status says OFF for B, ON for A; `-o on` as B
# registers B again and its writes work. metadata is XML naming the
# actions; list shows the keys; monitor succeeds. The key comes as key= or,
# as stonithd sends it with pcmk_host_map, as the plug.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3
requires_built
PT=$RBLK_BUILD/tests/rblk_prtest
FA=$RBLK_ROOT/tools/fence_rblk
[ -x "$PT" ] || fail "$PT missing: make $PT"

for h in alpha beta; do
	head -c 32 /dev/urandom | base64 >"$TEST_DIR/$h.key"
	chmod 600 "$TEST_DIR/$h.key"
done
hosts=(--host "alpha:secret-file=$TEST_DIR/alpha.key"
	--host "beta:secret-file=$TEST_DIR/beta.key")
truncate -s 8M "$TEST_DIR/v1.img" "$TEST_DIR/v2.img"
start_target "${hosts[@]}" --export "v1=$TEST_DIR/v1.img,allow=alpha,allow=beta"
U1=$RBLK_TARGET_URL/v1
mkdir "$TEST_DIR/t2"
# its log and socket in t2; the volume where the first one's is
# shellcheck disable=SC2097,SC2098
TEST_DIR=$TEST_DIR/t2 start_target "${hosts[@]}" \
	--export "v2=$TEST_DIR/v2.img,allow=alpha,allow=beta"
U2=$RBLK_TARGET_URL/v2
DEVS=$U1,$U2

# agent NODE ARGS...: run the agent as NODE (its rblk identity and store)
agent()
{
	local node=$1
	shift
	tmo 120 "$FA" --host-name "$node" --key-file "$TEST_DIR/$node.key" \
		--store "$TEST_DIR/$node.store" --rblk-path "$RBLK_BIN" \
		--devices "$DEVS" "$@"
}
# io MODE NODE URL BYTE: one 64 KiB I/O at 0; prints ok / EBADE / ...
io()
{
	tmo 30 "$PT" "$1" "$3" "$2" "$TEST_DIR/$2.key" 0 65536 "$4" 2>/dev/null || true
}

out=$("$FA" -o metadata)
python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.fromstring(sys.argv[1])
acts = {a.get("name") for a in r.iter("action")}
need = {"on", "off", "status", "monitor", "list", "metadata"}
assert need <= acts, acts
assert {p.get("name") for p in r.iter("parameter")} >= {"devices", "key", "action"}
' "$out" || fail "metadata is not the XML expected"

# unfence both nodes, the stdin way for A
printf 'action=on\ndevices=%s\nplug=a1\nnodename=nodeA\nhost_name=alpha\nkey_file=%s\nstore=%s\nrblk_path=%s\n' \
	"$DEVS" "$TEST_DIR/alpha.key" "$TEST_DIR/alpha.store" "$RBLK_BIN" |
	tmo 120 "$FA" || fail "on (stdin) for A failed"
agent beta -o on -k b2 || fail "on for B failed"
for u in $U1 $U2; do
	j=$(tmo 30 "$RBLK_BIN" pr report -o json --host-name alpha \
		--key-file "$TEST_DIR/alpha.key" "$u")
	echo "$j"
	python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["type"] == "write-exclusive-reg-only", j
assert sorted(r["key"] for r in j["registrants"]) == ["0xa1", "0xb2"], j
' "$j" || fail "after unfencing both: $j"
	[ "$(io write beta "$u" 66)" = ok ] || fail "B cannot write $u while unfenced"
	[ "$(io write alpha "$u" 65)" = ok ] || fail "A cannot write $u"
done
agent alpha -o monitor || fail "monitor failed"
l=$(agent alpha -o list) || fail "list failed"
echo "$l"
grep -q "^b2,beta" <<<"$l" || fail "list does not show B's key"
agent alpha -o status -n b2 || fail "status of B (key as the plug) is not ON"

# A fences B
agent alpha -o off -k b2 || fail "off for B failed"
rc=0
agent alpha -o status -k b2 || rc=$?
[ $rc -eq 2 ] || fail "status of B after off: $rc, want 2 (OFF)"
agent alpha -o status -k a1 || fail "status of A after fencing B is not ON"
for u in $U1 $U2; do
	[ "$(io write beta "$u" 98)" = EBADE ] || fail "fenced B's write to $u was not refused with EBADE"
	[ "$(io read beta "$u" 65)" = ok ] || fail "fenced B cannot read $u (or read other data)"
	[ "$(io write alpha "$u" 67)" = ok ] || fail "A cannot write $u after fencing B"
done
echo "B fenced: its writes fail with EBADE, its reads work, A writes"

# refusing to fence ourselves
agent alpha -o off -k a1 2>/dev/null && fail "A fenced its own key"

# B unfences itself
agent beta -o on -k b2 || fail "on for B after fencing failed"
for u in $U1 $U2; do
	[ "$(io write beta "$u" 66)" = ok ] || fail "B cannot write $u after unfencing"
done
agent alpha -o status -k b2 || fail "status of B after on is not ON"
echo "fence_rblk OK"
