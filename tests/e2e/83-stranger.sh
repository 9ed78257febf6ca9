#!/usr/bin/env bash
# What a stranger learns before authentication (issue 25 point 6,
# docs/PROTOCOL.md "What a stranger learns"), while a client verifies data
# on an open export beside it. Exports: open (allow=any), secret
# (allow=alpha, alpha has a secret), closed (no list). For the names
# secret, closed and nosuch:
#   - a HELLO without a secret gets the same answer, AUTH_REQUIRED, for
#     each (044a766: AUTH_REQUIRED, ACCESS_DENIED, NO_EXPORT), and one
#     with the AUTH flag an AUTH_CHALLENGE for each (044a766: only for
#     secret); `rblk info` says the same for all three, and the target's
#     log still says which is which;
#   - with a key for a host the target does not know: the same
#     "authentication failed" for all three;
#   - alpha, authenticated, is told the truth: secret works, closed is
#     not allowed, nosuch is not found;
#   - discovery claiming to be alpha lists only open (044a766: secret too);
#   - once every export is open, a wrong name is "not found" again.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3 jq
requires_built
umask 077
head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
head -c 32 /dev/urandom | base64 >"$TEST_DIR/mallory.key"
RBLK_TARGET_OPEN="" start_target --export "open=ram:16M,allow=any" \
	--export "secret=ram:8M,allow=alpha" --export "closed=ram:8M" \
	--host "alpha:secret-file=$TEST_DIR/alpha.key"
url=$RBLK_TARGET_URL
start_verifier "$url/open" 8

# ---- raw: one answer for all three names ------------------------------
python3 "$RBLK_ROOT/tests/e2e/rblk_stranger.py" "$RBLK_PORT" mallory 20 \
	secret closed nosuch open >"$TEST_DIR/raw" || { cat "$TEST_DIR/raw"; fail "raw client"; }
cat "$TEST_DIR/raw"
for n in secret closed nosuch; do
	grep -q "^$n plain=AUTH_REQUIRED median_ms=[0-9.]* auth=AUTH_CHALLENGE$" "$TEST_DIR/raw" ||
		fail "a stranger can tell '$n' apart: $(grep "^$n " "$TEST_DIR/raw")"
done
# the open export is public: a stranger logs in without a secret
grep -q "^open plain=.* auth=" "$TEST_DIR/raw" || fail "no answer for open"

# ---- the command line: the same error for all three --------------------
for n in secret closed nosuch; do
	expect_refusal 20 1 "^rblk info: target requires authentication for host 'mallory'; give --key-file$" \
		"$RBLK_BIN" info --host-name mallory "$url/$n"
	expect_refusal 20 1 "^rblk info: authentication failed: wrong secret or unknown host 'mallory'$" \
		"$RBLK_BIN" info --host-name mallory --key-file "$TEST_DIR/mallory.key" "$url/$n"
done
# ... while the target's log says which
grep -q "host 'mallory' offered no secret; no export named 'nosuch' (answered AUTH_REQUIRED" "$RBLK_TARGET_LOG" ||
	fail "the log does not say nosuch does not exist"
grep -q "host 'mallory' offered no secret; export closed has no allow list" "$RBLK_TARGET_LOG" ||
	fail "the log does not say closed is closed"
grep -q "host 'mallory' must authenticate for export secret and offered no secret" "$RBLK_TARGET_LOG" ||
	fail "the log does not say secret needs authentication"
grep -q "authentication failed: unknown host 'mallory'; and no export named 'nosuch'" "$RBLK_TARGET_LOG" ||
	fail "the log does not say why mallory's authenticated try at nosuch failed"

# ---- authenticated: the truth -------------------------------------------
alpha=(--host-name alpha --key-file "$TEST_DIR/alpha.key")
[ "$(tmo 20 "$RBLK_BIN" info -o json "${alpha[@]}" "$url/secret" | jq .size)" = 8388608 ] ||
	fail "alpha cannot log in to secret"
expect_refusal 20 1 "host 'alpha' is not allowed to use export 'closed'" \
	"$RBLK_BIN" info "${alpha[@]}" "$url/closed"
expect_refusal 20 1 "export 'nosuch' not found" \
	"$RBLK_BIN" info "${alpha[@]}" "$url/nosuch"

# ---- discovery trusts no claimed name ------------------------------------
names=$(tmo 20 "$RBLK_BIN" discover -o json --host-name alpha "$url" |
	jq -r '[.exports[].name] | sort | join(",")')
[ "$names" = open ] || fail "discovery claiming to be alpha shows '$names', want only 'open'"

# ---- a target whose exports are all open has nothing to hide ----------------
ctl=("$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET")
tmo 10 "${ctl[@]}" set-hosts closed --open >/dev/null
tmo 10 "${ctl[@]}" set-hosts secret --open >/dev/null
expect_refusal 20 1 "export 'nosuch' not found" \
	"$RBLK_BIN" info --host-name mallory "$url/nosuch"
stop_verifier
echo "PASS: $TEST_NAME"
