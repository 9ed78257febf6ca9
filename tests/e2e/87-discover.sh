#!/usr/bin/env bash
# `rblk discover`: a target with five exports (more than one
# DISCOVER_REPLY page of three) lists every one with its exact size, block
# size, read-only flag and features, in text and in JSON; rblk_discover()
# through the same path; an export added at run time is listed last; a
# port nobody listens on and a URL with an export name fail with a clear
# message and exit 1. Over tcp here; over rdma (rdma_rxe) in the guest,
# where tests/vm/tests/13-rdma-discover.sh runs this file with
# RBLK_TEST_SCHEME=rdma.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires jq truncate
requires_built

truncate -s 16M "$TEST_DIR/a.img"
truncate -s 12288 "$TEST_DIR/b.img"
start_target --export "alpha=$TEST_DIR/a.img" \
	--export "beta=$TEST_DIR/b.img,ro,bs=4096" \
	--export "gamma=ram:1M" --export "delta=ram:2M,bs=4096" \
	--export "eps=ram:64K,ro"
url=$RBLK_TARGET_URL

tmo 30 "$RBLK_BIN" discover -o json "$url" >"$TEST_DIR/d.json" ||
	fail "discover -o json failed"
jq -e . "$TEST_DIR/d.json" >/dev/null || fail "discover JSON does not parse"
got=$(jq -r '.exports[] | "\(.name) \(.size) \(.block_size) \(.read_only)"' \
	"$TEST_DIR/d.json")
want="alpha 16777216 512 false
beta 12288 4096 true
gamma 1048576 512 false
delta 2097152 4096 false
eps 65536 512 true"
[ "$got" = "$want" ] || fail "discover listed:
$got
expected:
$want"
[ "$(jq -r .url "$TEST_DIR/d.json")" = "$url" ] || fail "JSON url wrong"
jq -e '.exports[0].features | index("flush") and index("trim")' \
	"$TEST_DIR/d.json" >/dev/null || fail "alpha should offer flush and trim"

# text: a header and one line per export, with the same numbers
tmo 30 "$RBLK_BIN" discover "$url" >"$TEST_DIR/d.txt" ||
	fail "discover (text) failed"
[ "$(wc -l <"$TEST_DIR/d.txt")" -eq 6 ] || fail "text listing: $(cat "$TEST_DIR/d.txt")"
grep -Eq '^beta +12288 +4096 +yes ' "$TEST_DIR/d.txt" ||
	fail "text listing lacks beta: $(cat "$TEST_DIR/d.txt")"

# the listing agrees with what a login reports
tmo 30 "$RBLK_BIN" info -o json "$url/delta" >"$TEST_DIR/i.json"
[ "$(jq .size "$TEST_DIR/i.json")" = 2097152 ] || fail "info disagrees"

# discovery leaves no session behind and the target logged the pages
grep -q "discovered exports 3..5 of 5" "$RBLK_TARGET_LOG" ||
	fail "second page not served: $(grep discover "$RBLK_TARGET_LOG")"

# errors: nobody listening, an export name in the URL, a bad format
port=$(free_port)
dead=${url%:*}:$port
if tmo 30 "$RBLK_BIN" discover "$dead" >"$TEST_DIR/out" \
	2>"$TEST_DIR/err"; then
	fail "discover of a dead port succeeded"
fi
why=": Connection refused" # rdma_cm words it its own way
[ "${url%%:*}" = tcp ] || why=
grep -q "cannot connect to $dead$why" \
	"$TEST_DIR/err" || fail "unclear error: $(cat "$TEST_DIR/err")"
[ ! -s "$TEST_DIR/out" ] || fail "output on stdout for a failure"
rc=0
tmo 30 "$RBLK_BIN" discover "$url/alpha" 2>"$TEST_DIR/err" >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "discover URL/export: exit $rc"
grep -q "discovery takes no export name" "$TEST_DIR/err" ||
	fail "unclear error: $(cat "$TEST_DIR/err")"
rc=0
"$RBLK_BIN" discover -o yaml "$url" 2>/dev/null >/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "bad -o: exit $rc"

# an export added at run time comes last (earlier pages stay valid), and
# one removed leaves the list whole: 6 then 5 over 2 pages each
ctl()
{
	tmo 30 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@" >/dev/null
}
ctl add-export zeta ram:1M
tmo 30 "$RBLK_BIN" discover -o json "$url" >"$TEST_DIR/d.json"
[ "$(jq -r '[.exports[].name] | join(",")' "$TEST_DIR/d.json")" = \
	alpha,beta,gamma,delta,eps,zeta ] ||
	fail "after add-export: $(jq -c '[.exports[].name]' "$TEST_DIR/d.json")"
ctl remove-export beta
tmo 30 "$RBLK_BIN" discover -o json "$url" >"$TEST_DIR/d.json"
[ "$(jq -r '[.exports[].name] | join(",")' "$TEST_DIR/d.json")" = \
	alpha,gamma,delta,eps,zeta ] ||
	fail "after remove-export: $(jq -c '[.exports[].name]' "$TEST_DIR/d.json")"

# an older-style login on the same target still works afterwards
tmo 30 "$RBLK_BIN" info "$url/alpha" >/dev/null || fail "login after discovery"
echo "discover: 5 exports listed over 2 pages, errors clear"
