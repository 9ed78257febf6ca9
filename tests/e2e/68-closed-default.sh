#!/usr/bin/env bash
# Closed by default (issue 15, point 11): an export without an allow list
# refuses every host unless it says allow=any or the target says
# --allow-any-host / allow_any_host = yes, and each open export is logged
# with a warning at start.
#   - no list, no opt-in: login refused, invisible to discovery, also for
#     a host with a secret: ACCESS_DENIED ("not allowed") once the host
#     has authenticated; before that AUTH_REQUIRED, as for any export a
#     stranger may not use (issue 25: a stranger is not told which exist)
#   - allow=any: served (a client verifies data on it throughout)
#   - ctl set-hosts --open opens a closed export; ctl add-export without
#     --allow adds a closed one
#   - allow_any_host = yes in the configuration file opens every export
#     without a list
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires jq
requires_built

umask 077
head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
RBLK_TARGET_OPEN="" start_target --export "closed=ram:8M" \
	--export "open=ram:16M,allow=any" --export "listed=ram:8M,allow=alpha" \
	--host "alpha:secret-file=$TEST_DIR/alpha.key"
url=tcp://127.0.0.1:$RBLK_PORT
ctl=("$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET")
start_verifier "$url/open" 16
proc_baseline "$RBLK_TARGET_PID"

# ---- the warning, once per open export, none for the others -------------
[ "$(grep -c "WARNING: open to ANY host" "$RBLK_TARGET_LOG")" -eq 1 ] &&
	grep -q "export open: WARNING: open to ANY host" "$RBLK_TARGET_LOG" ||
	fail "want exactly one open-export warning, for 'open': $(grep WARNING "$RBLK_TARGET_LOG")"
grep -q "export closed: no allow list: every host is refused" "$RBLK_TARGET_LOG" ||
	fail "no notice that 'closed' refuses every host"

# ---- refused, with a clear initiator error --------------------------------
expect_refusal 20 1 "target requires authentication for host 'h1'" \
	"$RBLK_BIN" info --host-name h1 "$url/closed"
expect_refusal 20 1 "host 'alpha' is not allowed to use export 'closed'" \
	"$RBLK_BIN" info --host-name alpha --key-file "$TEST_DIR/alpha.key" "$url/closed"
grep -q "export closed has no allow list (host 'h1' refused" "$RBLK_TARGET_LOG" ||
	fail "target log does not say why h1 was refused"
names=$(tmo 20 "$RBLK_BIN" discover -o json --host-name h1 "$url" | jq -r '[.exports[].name] | sort | join(",")')
[ "$names" = open ] || fail "discovery shows '$names' to h1, want only 'open'"
# the allow list still works as before
tmo 20 "$RBLK_BIN" info --host-name alpha --key-file "$TEST_DIR/alpha.key" "$url/listed" >/dev/null ||
	fail "alpha cannot log in to 'listed'"

# ---- served once opened explicitly --------------------------------------
tmo 10 "${ctl[@]}" set-hosts closed --open >/dev/null
[ "$(tmo 20 "$RBLK_BIN" info -o json --host-name h1 "$url/closed" | jq .size)" = 8388608 ] ||
	fail "'closed' not served after set-hosts --open"
tmo 10 "${ctl[@]}" add-export later ram:4M >/dev/null
expect_refusal 20 1 "target requires authentication for host 'h1'" \
	"$RBLK_BIN" info --host-name h1 "$url/later"
tmo 10 "${ctl[@]}" add-export later2 ram:4M --allow any >/dev/null
tmo 20 "$RBLK_BIN" info --host-name h1 "$url/later2" >/dev/null ||
	fail "add-export --allow any: not served"

# ---- allow_any_host = yes in the configuration file -----------------------
printf '[target]\nallow_any_host = yes\n[export cfgvol]\npath = ram:4M\n' >"$TEST_DIR/any.conf"
tpid=$RBLK_TARGET_PID
RBLK_TARGET_OPEN="" start_target -c "$TEST_DIR/any.conf"
grep -q "export cfgvol: WARNING: open to ANY host" "$RBLK_TARGET_LOG" ||
	fail "allow_any_host: no warning: $(cat "$RBLK_TARGET_LOG")"
tmo 20 "$RBLK_BIN" info --host-name h1 "tcp://127.0.0.1:$RBLK_PORT/cfgvol" >/dev/null ||
	fail "allow_any_host = yes: export not served"
stop_pid "$RBLK_TARGET_PID"
RBLK_TARGET_PID=$tpid

stop_verifier
proc_check "$RBLK_TARGET_PID" 32768
echo "PASS: $TEST_NAME"
