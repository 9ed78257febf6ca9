#!/usr/bin/env bash
# Persistent reservations (issue 29), NVMe's rules, two hosts with secrets:
#   - alpha and beta register; alpha takes write-exclusive: beta's writes
#     fail with EBADE (rblk_prtest prints the errno's name) on every queue
#     of its session and leave the file as alpha wrote it, while beta's
#     reads succeed and see alpha's data; alpha writes;
#   - `rblk pr report -o json` names the holder, type and both keys;
#   - the wrong key, a second reservation and beta's release of alpha's
#     reservation change nothing;
#   - exclusive-access also refuses beta's reads; write-exclusive
#     registrants-only lets a registered beta write, an unregistered one not;
#   - the state survives a target restart (SIGKILL: nothing flushed at
#     exit), kept in the sidecar .vol.img.rblk-pr (mode 0600), and a second
#     export's pr_file= puts it where it says;
#   - `rblk-target ctl list-reservations` shows the same;
#   - clear ends it: beta writes again.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3
requires_built
PT=$RBLK_BUILD/tests/rblk_prtest
[ -x "$PT" ] || fail "$PT missing: make $PT"

mk_key()
{
	head -c 32 /dev/urandom | base64 >"$TEST_DIR/$1.key"
	chmod 600 "$TEST_DIR/$1.key"
}
mk_key alpha
mk_key beta
truncate -s 16M "$TEST_DIR/vol.img"
truncate -s 4M "$TEST_DIR/side.img"
args=(--host "alpha:secret-file=$TEST_DIR/alpha.key"
	--host "beta:secret-file=$TEST_DIR/beta.key"
	--export "vol=$TEST_DIR/vol.img,allow=alpha,allow=beta"
	--export "side=$TEST_DIR/side.img,allow=alpha,pr_file=$TEST_DIR/state/side.pr")
start_target "${args[@]}"
URL=$RBLK_TARGET_URL/vol
A=(--host-name alpha --key-file "$TEST_DIR/alpha.key")
B=(--host-name beta --key-file "$TEST_DIR/beta.key")

pr() { tmo 30 "$RBLK_BIN" pr "$@"; }
# io MODE HOST OFF LEN BYTE: rblk_prtest as HOST; prints its verdict
io()
{
	local mode=$1 host=$2
	shift 2
	RBLK_PRTEST_QUEUES=${QUEUES:-1} tmo 30 "$PT" "$mode" "$URL" "$host" \
		"$TEST_DIR/$host.key" "$@" 2>"$TEST_DIR/io.err" || true
}
expect()
{
	local want=$1 what=$2 got
	shift 2
	got=$("$@")
	[ "$got" = "$want" ] || { cat "$TEST_DIR/io.err" >&2; fail "$what: got '$got', want '$want'"; }
	echo "$what: $got"
}
# the first LEN bytes of the file at OFF all BYTE?
file_is()
{
	python3 - "$TEST_DIR/vol.img" "$1" "$2" "$3" <<'EOF'
import sys
f, off, n, b = sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3], 0), int(sys.argv[4])
d = open(f, "rb").read()[off:off + n]
sys.exit(0 if d == bytes([b]) * n else 1)
EOF
}
report() { pr report -o json "${A[@]}" "$URL"; }
# jget JSON EXPR: a python expression over the report j
jget() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print($2)" "$1"; }

# ---- no reservation: both write --------------------------------------------
expect ok "alpha writes, nothing reserved" io write alpha 0 $((64 << 10)) 65
expect ok "beta writes, nothing reserved" io write beta $((64 << 10)) $((64 << 10)) 66
"$RBLK_BIN" info -o json "${A[@]}" "$URL" | grep -q '"reservations":true' ||
	fail "rblk info does not show the reservations feature"

# ---- alpha holds write-exclusive -------------------------------------------
pr register "${A[@]}" --key 0xa1 "$URL"
pr register "${B[@]}" --key 0xb2 "$URL"
pr reserve "${A[@]}" --key 0xa1 --type write-exclusive "$URL"
j=$(report)
echo "$j"
[ "$(jget "$j" 'j["type"], j["holder"], sorted((r["host"], r["key"]) for r in j["registrants"])')" = \
	"write-exclusive alpha [('alpha', '0xa1'), ('beta', '0xb2')]" ] ||
	fail "report: unexpected $j"

QUEUES=4 expect EBADE "beta's write on each of 4 queues, alpha holding write-exclusive" \
	io write beta 0 $((64 << 10)) 98
file_is 0 $((64 << 10)) 65 || fail "beta's refused write reached the file"
QUEUES=4 expect ok "beta reads alpha's data under write-exclusive, on each of 4 queues" io read beta 0 $((64 << 10)) 65
expect ok "alpha (the holder) writes" io write alpha $((128 << 10)) $((64 << 10)) 67
file_is $((128 << 10)) $((64 << 10)) 67 || fail "alpha's write is not in the file"
expect ok "beta reads its own earlier write" io read beta $((64 << 10)) $((64 << 10)) 66

rc=0
pr reserve "${B[@]}" --key 0xbad --type write-exclusive "$URL" || rc=$?
[ $rc -eq 3 ] || fail "reserve with the wrong key: exit $rc, want 3 (conflict)"
rc=0
pr reserve "${B[@]}" --key 0xb2 --type exclusive-access "$URL" || rc=$?
[ $rc -eq 3 ] || fail "a second reservation: exit $rc, want 3 (conflict)"
pr release "${B[@]}" --key 0xb2 --type write-exclusive "$URL" # not the holder: no-op
[ "$(jget "$(report)" 'j["holder"]')" = alpha ] ||
	fail "beta's release ended alpha's reservation"
echo "wrong key, second reservation, non-holder release: refused or no-op"

# ---- exclusive-access: beta may not even read ------------------------------
pr release "${A[@]}" --key 0xa1 --type write-exclusive "$URL"
expect ok "beta writes once alpha released" io write beta $((64 << 10)) $((64 << 10)) 66
pr reserve "${A[@]}" --key 0xa1 --type ea "$URL"
expect EBADE "beta's read under exclusive-access" io read beta 0 $((64 << 10)) -1
pr release "${A[@]}" --key 0xa1 --type ea "$URL"

# ---- registrants-only: registration is what counts --------------------------
pr reserve "${A[@]}" --key 0xa1 --type we-ro "$URL"
expect ok "registered beta writes under write-exclusive-reg-only" \
	io write beta $((64 << 10)) $((64 << 10)) 66
pr unregister "${B[@]}" --key 0xb2 "$URL"
expect EBADE "unregistered beta's write under write-exclusive-reg-only" \
	io write beta $((64 << 10)) $((64 << 10)) 99
expect ok "unregistered beta reads under write-exclusive-reg-only" \
	io read beta $((64 << 10)) $((64 << 10)) 66
pr register "${B[@]}" --key 0xb2 "$URL"

# ---- a restart keeps it -----------------------------------------------------
side=$TEST_DIR/.vol.img.rblk-pr
[ -f "$side" ] || fail "no sidecar $side"
[ "$(stat -c %a "$side")" = 600 ] || fail "sidecar mode $(stat -c %a "$side"), want 600"
cat "$side"
before=$(report)
kill -KILL "$RBLK_TARGET_PID"
wait "$RBLK_TARGET_PID" 2>/dev/null || true
start_target "${args[@]}"
URL=$RBLK_TARGET_URL/vol
after=$(report)
[ "$(jget "$before" 'j["generation"], j["type"], j["holder"], j["registrants"]')" = \
	"$(jget "$after" 'j["generation"], j["type"], j["holder"], j["registrants"]')" ] ||
	fail "state changed across the restart: $before -> $after"
grep -q "reservations restored: 2 registrant(s), write-exclusive-reg-only held by alpha" \
	"$RBLK_TARGET_LOG" || fail "the target did not log the restored state"
c=$(tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" list-reservations vol -o json)
echo "$c"
[ "$(jget "$c" 'j["reservations"][0]["type"], [(r["host"], r["key"], r["holder"]) for r in j["reservations"][0]["registrants"]]')" = \
	"write-exclusive-reg-only [('alpha', '0xa1', True), ('beta', '0xb2', False)]" ] ||
	fail "ctl list-reservations after the restart: $c"
pr unregister "${B[@]}" --key 0xb2 "$URL"
expect EBADE "unregistered beta's write after the restart" io write beta 0 4096 99
echo "state survived a restart: $after"

# pr_file= of the second export
pr register "${A[@]}" --key 0x5 "$RBLK_TARGET_URL/side"
grep -q "^reg 0x5 alpha$" "$TEST_DIR/state/side.pr" ||
	fail "pr_file= of export side not written"

# ---- clear ------------------------------------------------------------------
pr clear "${A[@]}" --key 0xa1 "$URL"
[ "$(jget "$(report)" 'j["type"], len(j["registrants"])')" = "none 0" ] ||
	fail "clear left state: $(report)"
expect ok "beta writes after clear" io write beta 0 4096 66
echo "reservations OK"
