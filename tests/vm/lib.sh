# tests/vm/lib.sh - helpers for guest tests (tests/vm/tests/NN-name.sh).
# Source it:   . "$(dirname "$0")/../lib.sh"
#
#   fail MSG...          print "FAIL: MSG" and exit 1
#   skip MSG...          print "SKIP: MSG" and exit 77
#   need_guest           skip unless running inside the rblk test guest
#   need_cmd CMD...      skip unless every CMD is on PATH
#   need_file PATH...    fail unless every PATH exists (e.g. $BUILD/rblk)
#   bg CMD...            start CMD in the background; it is killed (with its
#                        process group) when the test exits; $! is its pid
#   wait_until SEC CMD...  run CMD every 0.2 s until it succeeds; fail after SEC
#   sha256 FILE          print FILE's sha256 (the hex digest alone)
#   nbd_round_trip IN SOCK EXPORT OUT FILE WHAT
#                        nbdcopy IN to nbd+unix:///EXPORT?socket=SOCK, then
#                        back into OUT; fail "WHAT: checksums differ" unless
#                        IN, OUT and FILE (the exported file) hash the same
#   addr, dev            $RDMA_ADDR (192.0.2.1) and $RDMA_DEV (rxe0)
#
# Tests run as root with cwd = the repo root; the host root is read-only, so
# scratch files go to $TMPDIR (a tmpfs) and artifacts worth keeping to
# $RBLK_VM_TEST_OUT (on the host, in the run's out directory).
# shellcheck shell=bash

RDMA_ADDR=${RBLK_TEST_RDMA_ADDR:-192.0.2.1}
RDMA_DEV=${RBLK_TEST_RDMA_DEV:-rxe0}
BUILD=${BUILD:-build}
export TMPDIR=${TMPDIR:-/tmp}
export RDMA_ADDR RDMA_DEV BUILD

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need_guest() { [ "${RBLK_VM:-0}" = 1 ] || skip "not inside the rblk test guest (use tests/vm/run-test.sh)"; }
need_cmd() {
	local c
	for c in "$@"; do command -v "$c" >/dev/null || skip "$c not installed"; done
}
need_file() {
	local f
	for f in "$@"; do [ -e "$f" ] || fail "$f missing (build first: make)"; done
}

_vm_bg_pids=()
_vm_bg_cleanup() {
	local p
	for p in "${_vm_bg_pids[@]+"${_vm_bg_pids[@]}"}"; do
		kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
	done
	sleep 0.2
	for p in "${_vm_bg_pids[@]+"${_vm_bg_pids[@]}"}"; do
		kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
	done
	return 0
}
trap _vm_bg_cleanup EXIT
# setsid: its own process group, so cleanup gets its children too
bg() {
	setsid "$@" &
	_vm_bg_pids+=("$!")
}
wait_until() {
	local sec=$1 end
	shift
	end=$((SECONDS + sec))
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || fail "timed out after ${sec}s waiting for: $*"
		sleep 0.2
	done
}
sha256() { sha256sum <"$1" | cut -d' ' -f1; }
nbd_round_trip() {
	local in=$1 uri="nbd+unix:///$3?socket=$2" out=$4 file=$5 what=$6 a b c
	timeout 180 nbdcopy "$in" "$uri" || fail "nbdcopy in"
	timeout 180 nbdcopy "$uri" "$out" || fail "nbdcopy out"
	a=$(sha256 "$in")
	b=$(sha256 "$out")
	c=$(sha256 "$file")
	echo "in $a"; echo "out $b"; echo "file $c"
	[ "$a" = "$b" ] && [ "$a" = "$c" ] || fail "$what: checksums differ"
}
