#!/usr/bin/env bash
# Memory isolation between connections (docs/ARCHITECTURE.md): connection B
# uses connection A's slot address and rkey for an RDMA READ and, on a
# fresh connection, an RDMA WRITE; with direct access (RAM exports) also
# A's volume registration, and the volume rkey of a connection C that has
# closed (a dead key stays dead). All must fail with a remote access
# error, B's bytes must not reach A's slot, and A must go on writing and
# reading back data correctly. Run against an open export and an
# authenticated one.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires_built
RAW=$RBLK_BUILD/tests/rblk_rawclient
[ -x "$RAW" ] || fail "test helper missing: make $RAW"

head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
chmod 600 "$TEST_DIR/alpha.key"
start_target --host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--export open=ram:4M --export "locked=ram:4M,allow=alpha"

check()
{
	local out
	out=$(tmo 30 "$RAW" isolation "$@" 2>&1) || {
		echo "$out"
		fail "isolation $*"
	}
	echo "$out"
	grep -qx "RDMA READ with connection A's rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "$1: foreign RDMA READ not refused"
	grep -qx "RDMA WRITE with connection A's rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "$1: foreign RDMA WRITE not refused"
	grep -qx "direct RDMA READ with connection A's rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "$1: foreign RDMA READ of the volume registration not refused"
	grep -qx "direct RDMA READ (closed connection C) with C's rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "$1: a closed connection's volume rkey still worked"
	grep -qx "connection A still verifies data (4096 bytes at 8192)" <<<"$out" ||
		fail "$1: connection A did not verify its data"
}
check "tcp://127.0.0.1:$RBLK_PORT/open"
check "tcp://127.0.0.1:$RBLK_PORT/locked" alpha "$TEST_DIR/alpha.key"
n=$(grep -cE "remote (read|write) refused: rkey 0x[0-9a-f]+ is not valid" "$RBLK_TARGET_LOG" || true)
[ "$n" -eq 8 ] || fail "target logged $n refused remote accesses, want 8"
echo "PASS: $TEST_NAME"
