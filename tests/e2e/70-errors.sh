#!/usr/bin/env bash
# Failures are reported, not hung on: a missing export (rblk info, rblk nbd)
# exits non-zero naming the export; a port nobody listens on fails quickly
# with a clear error; `rblk nbd` rejects bad usage with exit 2, refuses a
# path that is not a socket, exits 0 on SIGTERM removing its socket, and
# refuses a client when all its queues are taken.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires truncate nbdinfo
requires_built

truncate -s 16M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
url=tcp://127.0.0.1:$RBLK_PORT

# expect_fail WHAT PATTERN CMD...: CMD exits non-zero within 20 s and its
# stderr matches PATTERN (grep -Ei)
expect_fail()
{
	local what=$1 pattern=$2 rc=0
	shift 2
	timeout -k 5 20 "$@" >"$TEST_DIR/out" 2>"$TEST_DIR/err" || rc=$?
	echo "$what: exit $rc: $(head -c 300 "$TEST_DIR/err")"
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		fail "$what: hung (killed after 20 s)"
	fi
	[ $rc -ne 0 ] || fail "$what: succeeded"
	grep -Eqi -- "$pattern" "$TEST_DIR/err" ||
		fail "$what: message does not match '$pattern'"
	LAST_RC=$rc
}

# the good case, for contrast
tmo 20 "$RBLK_BIN" info "$url/vol0" | tee "$TEST_DIR/info"
grep -q 16777216 "$TEST_DIR/info" || grep -qi "16 *MiB" "$TEST_DIR/info" ||
	fail "rblk info does not show the size"

expect_fail "rblk info, missing export" "nosuchvol" \
	"$RBLK_BIN" info "$url/nosuchvol"
expect_fail "rblk nbd, missing export" "nosuchvol" \
	"$RBLK_BIN" nbd "$url/nosuchvol" --socket "$TEST_DIR/missing.sock"
[ ! -e "$TEST_DIR/missing.sock" ] || fail "rblk nbd left a socket behind"

port=$(free_port)
expect_fail "rblk info, wrong port" "refused|connect" \
	"$RBLK_BIN" info "tcp://127.0.0.1:$port/vol0"
expect_fail "rblk nbd, wrong port" "refused|connect" \
	"$RBLK_BIN" nbd "tcp://127.0.0.1:$port/vol0" --socket "$TEST_DIR/p.sock"

# usage errors: exit 2
expect_fail "rblk nbd without --socket" "--socket" "$RBLK_BIN" nbd "$url/vol0"
[ "$LAST_RC" -eq 2 ] || fail "usage error exit $LAST_RC, wanted 2"
expect_fail "rblk nbd --queues 0" "--queues" \
	"$RBLK_BIN" nbd "$url/vol0" --socket "$TEST_DIR/q.sock" --queues 0
[ "$LAST_RC" -eq 2 ] || fail "usage error exit $LAST_RC, wanted 2"
expect_fail "rblk nbd --listen with an export" "export" \
	"$RBLK_BIN" nbd "$url/vol0" --listen tcp://127.0.0.1:1/x
expect_fail "rblk nbd, URL without export" "export" \
	"$RBLK_BIN" nbd "$url" --socket "$TEST_DIR/q.sock"

# --help documents every option
tmo 10 "$RBLK_BIN" nbd --help >"$TEST_DIR/help"
for o in --socket --listen --queues --queue-depth --read-only \
	--max-connections --log-level --help; do
	grep -q -- "$o" "$TEST_DIR/help" || fail "--help does not mention $o"
done

# a regular file where the socket should go is left alone
echo keep >"$TEST_DIR/file"
expect_fail "rblk nbd on a regular file" "not a socket" \
	"$RBLK_BIN" nbd "$url/vol0" --socket "$TEST_DIR/file"
[ "$(cat "$TEST_DIR/file")" = keep ] || fail "regular file was clobbered"

# a stale socket file is replaced; SIGTERM exits 0 and removes the socket
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$TEST_DIR/stale.sock" ||
	skip "python3 cannot make a unix socket"
start_nbd "$url/vol0" "$TEST_DIR/stale.sock"
[ "$(stat -c %a "$TEST_DIR/stale.sock")" = 600 ] || fail "socket mode is not 0600"
tmo 20 nbdinfo --size "$NBD_URI" | grep -qx 16777216 || fail "nbdinfo --size"
# a second server on the same live socket is refused
expect_fail "rblk nbd on a live socket" "listening" \
	"$RBLK_BIN" nbd "$url/vol0" --socket "$TEST_DIR/stale.sock"
# unknown export names are refused by the NBD server
if tmo 20 nbdinfo "nbd+unix:///other?socket=$TEST_DIR/stale.sock" \
	>/dev/null 2>"$TEST_DIR/err"; then
	fail "nbdinfo on an unknown export name succeeded"
fi
kill -TERM "$RBLK_NBD_PID"
rc=0
wait "$RBLK_NBD_PID" || rc=$?
[ $rc -eq 0 ] || fail "rblk nbd exit $rc after SIGTERM"
[ ! -e "$TEST_DIR/stale.sock" ] || fail "socket not removed on exit"
grep -q "shutting down" "$RBLK_NBD_LOG" || fail "no shutdown log line"

# one queue = one client at a time: a second client is refused with a log
# line while the first holds the queue, and served once it has left
start_nbd "$url/vol0" "$TEST_DIR/one.sock" --queues 1
python3 tests/e2e/nbd_abuse.py hold "$TEST_DIR/one.sock" 4 &
holder=$!
for ((i = 0; i < 50; i++)); do
	grep -q "connected on queue 0" "$RBLK_NBD_LOG" && break
	sleep 0.1
done
expect_fail "second client with --queues 1" "." nbdinfo "$NBD_URI"
grep -q "all 1 queues are in use" "$RBLK_NBD_LOG" || fail "no refusal log line"
wait $holder
tmo 20 nbdinfo --size "$NBD_URI" | grep -qx 16777216 ||
	fail "queue not reusable after the first client left"

kill -0 "$RBLK_TARGET_PID" || fail "rblk-target died"
echo "PASS: $TEST_NAME"
