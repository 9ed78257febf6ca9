# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for the end-to-end tests in tests/e2e/. Each test is a bash script
# that starts with
#
#	#!/usr/bin/env bash
#	set -euo pipefail
#	source "$(dirname "$0")/../functions.sh"
#
# and exits 0 (pass), 1 (fail) or 77 (skip). Tests run standalone from any
# directory (they cd to the repository root) or under tests/run.sh, which
# puts a timeout on each. Everything runs on loopback over the tcp
# transport; no RDMA device is needed. Scenarios that build their URLs
# from RBLK_TARGET_URL also run over rdma in the guest (tests/vm:
# run_host_scenario sets RBLK_TEST_SCHEME=rdma).
#
# What this file gives:
#
#   RBLK_ROOT, RBLK_BUILD     repository root, build directory (default
#                             $RBLK_ROOT/build; override with RBLK_BUILD)
#   RBLK_TARGET_BIN, RBLK_BIN build/rblk-target and build/rblk
#   TEST_DIR                  a fresh directory under ${TMPDIR:-/tmp},
#                             removed when the test exits
#   requires TOOL...          skip (exit 77) unless every TOOL is on PATH
#   requires_nbdsh            skip unless nbdsh and its python module work
#   requires_built            fail unless build/rblk-target and build/rblk
#                             exist (run `make` first)
#   requires_fio_engine       skip without fio; fail unless build/rblk-fio.so
#                             (RBLK_FIO_ENGINE) exists and this fio loads
#                             it; skip when make fio-engine-try recorded
#                             why it could not build it
#   cleanup_fn CMD [ARG...]   run CMD at exit; last registered runs first
#   fail MSG...               print "FAIL: test: MSG" and exit 1
#   skip MSG...               print "SKIP: test: MSG" and exit 77
#   wait_pid SECS PID         wait for child PID to exit and return its
#                             status; fail if it outlives SECS
#   tmo SECS CMD [ARG...]     run CMD under timeout(1); a hang becomes a
#                             failure naming the command (SECS times
#                             RBLK_TMO_SCALE, default 1). Wrap every client
#                             command that could block on a broken server.
#   free_port                 print a TCP port free on 127.0.0.1 right now
#   start_target ARGS...      start rblk-target on a free loopback port with
#                             ARGS (e.g. --export vol0=FILE), wait until it
#                             listens, stop it at exit; sets RBLK_PORT,
#                             RBLK_TARGET_PID, RBLK_TARGET_LOG and
#                             RBLK_TARGET_URL (SCHEME://ADDR:PORT; export
#                             URLs are $RBLK_TARGET_URL/NAME). The scheme is
#                             RBLK_TEST_SCHEME: tcp (default, 127.0.0.1) or
#                             rdma (RBLK_TEST_RDMA_ADDR, default 192.0.2.1:
#                             the guest, where tests/vm/tests run host
#                             scenarios over rdma). Extra
#                             arguments for every test's target may come
#                             from RBLK_TARGET_ARGS (e.g. "--engine libaio"); its control socket is
#                             $TEST_DIR/target.PORT.sock (RBLK_CTL_SOCKET),
#                             never the system-wide default. Exports are
#                             open to any host (--allow-any-host) unless
#                             RBLK_TARGET_OPEN is set (to "" for closed)
#   start_nbd URL SOCKET [ARGS...]
#                             start `rblk nbd URL --socket SOCKET ARGS`, wait
#                             for its "ready" line, stop it at exit; sets
#                             RBLK_NBD_PID, RBLK_NBD_LOG, NBD_URI
#                             (nbd+unix:///EXPORT?socket=SOCKET)
#   start_nbd_tcp URL [ARGS...]
#                             the same with --listen tcp://127.0.0.1:PORT on
#                             a free port; sets NBD_PORT and NBD_URI
#                             (nbd://127.0.0.1:PORT/EXPORT)
#   make_tmpfs_dir            set TMPFS_DIR to a fresh directory on a tmpfs
#                             (/dev/shm), removed at exit; skip without one
#                             (`direct` file exports need tmpfs, hugetlbfs
#                             or DAX: see rblk-target.conf(5))
#   stop_pid PID              SIGTERM, wait up to 10 s, then SIGKILL
#   keep_logs FILE...         copy FILEs (a failing phase's target log) out
#                             of TEST_DIR before it is removed: into
#                             $RBLK_VM_TEST_OUT in the guest, else
#                             $RBLK_BUILD/test-logs, named TEST-FILE
#   sha FILE                  the sha256 of FILE
#   make_random FILE MIB      FILE with MIB MiB of random data

RBLK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RBLK_BUILD=${RBLK_BUILD:-$RBLK_ROOT/build}
RBLK_TARGET_BIN=$RBLK_BUILD/rblk-target
RBLK_BIN=$RBLK_BUILD/rblk
RBLK_FIO_ENGINE=$RBLK_BUILD/rblk-fio.so
TEST_NAME=$(basename "$0")
cd "$RBLK_ROOT" || exit 1

fail()
{
	echo "FAIL: $TEST_NAME: $*" >&2
	exit 1
}

skip()
{
	echo "SKIP: $TEST_NAME: $*"
	exit 77
}

# ---- cleanup -------------------------------------------------------------

_cleanup_cmds=()

cleanup_fn()
{
	local q
	q=$(printf '%q ' "$@")
	_cleanup_cmds+=("$q")
}

_sanitizer_failed=0

_run_cleanup()
{
	local rc=$? i
	set +e
	for ((i = ${#_cleanup_cmds[@]} - 1; i >= 0; i--)); do
		eval "${_cleanup_cmds[i]}"
	done
	if [ $rc -eq 0 ] && [ $_sanitizer_failed -ne 0 ]; then
		echo "FAIL: $TEST_NAME: sanitizer errors (see above)" >&2
		rc=1
	fi
	exit $rc
}

# Daemons built with SANITIZE=1 report to their logs: once they have been
# stopped, show any report and fail the test.
_check_sanitizers()
{
	local f
	for f in "$TEST_DIR"/*.log; do
		[ -f "$f" ] || continue
		if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$f"; then
			echo "---- sanitizer report in $(basename "$f") ----" >&2
			grep -A 30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" \
				"$f" | head -60 >&2
			_sanitizer_failed=1
		fi
	done
}
trap _run_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A failing test's logs outlive its directory: its *.log, *.out and *.err
# files (under 8 MiB each) go to NAME.d in $RBLK_VM_TEST_OUT in the guest,
# else in build/test-logs (RBLK_TEST_LOGS), after its daemons are
# stopped, before the directory is removed. (keep_logs FILE... keeps
# chosen files of a test that goes on.)
_keep_logs()
{
	local dir f
	[ "${rc:-0}" -ne 0 ] && [ "${rc:-0}" -ne 77 ] || return 0
	dir=${RBLK_VM_TEST_OUT:-${RBLK_TEST_LOGS:-$RBLK_ROOT/build/test-logs}}/${TEST_NAME%.sh}.d
	rm -rf "$dir" && mkdir -p "$dir" || return 0
	while IFS= read -r -d '' f; do
		cp "$f" "$dir/$(echo "${f#"$TEST_DIR"/}" | tr / _)"
	done < <(find "$TEST_DIR" -type f \( -name '*.log' -o -name '*.out' -o -name '*.err' \) \
		-size -8M -print0 2>/dev/null)
	echo "$TEST_NAME: its logs are kept in $dir" >&2
}

TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rblk-${TEST_NAME%.sh}.XXXXXX")
cleanup_fn rm -rf "$TEST_DIR"
cleanup_fn _check_sanitizers
cleanup_fn _keep_logs

make_tmpfs_dir()
{
	[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] ||
		skip "no tmpfs on /dev/shm"
	TMPFS_DIR=$(mktemp -d "/dev/shm/rblk-${TEST_NAME%.sh}.XXXXXX")
	cleanup_fn rm -rf "$TMPFS_DIR"
}

# ---- requirements --------------------------------------------------------

requires()
{
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || skip "$t not found"
	done
}

requires_built()
{
	[ -x "$RBLK_TARGET_BIN" ] || fail "$RBLK_TARGET_BIN missing: run make"
	[ -x "$RBLK_BIN" ] || fail "$RBLK_BIN missing: run make"
}

requires_fio_engine()
{
	requires fio
	if [ ! -f "$RBLK_FIO_ENGINE" ]; then
		# make fio-engine-try records why it could not build the engine
		[ -s "$RBLK_BUILD/rblk-fio.skip" ] &&
			skip "fio engine not built: $(cat "$RBLK_BUILD/rblk-fio.skip")"
		fail "$RBLK_FIO_ENGINE missing: run make fio-engine (or make check)"
	fi
	fio --enghelp="$RBLK_FIO_ENGINE" 2>&1 | grep -q '^uri' ||
		fail "fio $(fio --version) cannot load $RBLK_FIO_ENGINE (built for another fio version? make clean fio-engine)"
}

# nbdsh is a shell script running `python3 -m nbd`; when the python3 first
# on PATH is not the system one (pyenv, venv) it lacks the module. Then a
# wrapper in $TEST_DIR/bin, first on PATH, runs it with the system python
# (a wrapper, not a shell function, so that `tmo 30 nbdsh ...` finds it).
requires_nbdsh()
{
	local real
	requires nbdsh
	nbdsh -c 'pass' >/dev/null 2>&1 && return 0
	real=$(command -v nbdsh)
	if PATH=/usr/bin:$PATH "$real" -c 'pass' >/dev/null 2>&1; then
		mkdir -p "$TEST_DIR/bin"
		# shellcheck disable=SC2016 # $PATH and $@ expand in the wrapper
		printf '#!/bin/sh\nPATH=/usr/bin:$PATH exec %s "$@"\n' \
			"$real" >"$TEST_DIR/bin/nbdsh"
		chmod +x "$TEST_DIR/bin/nbdsh"
		PATH=$TEST_DIR/bin:$PATH
		return 0
	fi
	skip "nbdsh cannot import the nbd python module (python3-libnbd)"
}

# ---- processes -----------------------------------------------------------

tmo()
{
	local secs=$(($1 * ${RBLK_TMO_SCALE:-1})) rc=0
	shift
	timeout -k 5 "$secs" "$@" || rc=$?
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		fail "timed out after ${secs}s: $*"
	fi
	return $rc
}

keep_logs()
{
	local f d=${RBLK_VM_TEST_OUT:-$RBLK_BUILD/test-logs}
	mkdir -p "$d" 2>/dev/null || return 0
	for f in "$@"; do
		[ -f "$f" ] || continue
		cp "$f" "$d/${TEST_NAME%.sh}-$(basename "$f")" 2>/dev/null &&
			echo "kept $f in $d/${TEST_NAME%.sh}-$(basename "$f")"
	done
	return 0
}

# Every process a test starts inherits RBLK_TEST_TAG. Cleanup signals a
# pid only while it still carries the tag: pid_max is 32768 here, and
# with tests running side by side a pid that ended long ago may be
# another test's by now (a cleanup once sent SIGTERM to the shell of
# the test beside it).
RBLK_TEST_TAG=${TEST_NAME%.sh}.$$.$RANDOM
export RBLK_TEST_TAG
_ours()
{
	{ tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null |
		grep -qx "RBLK_TEST_TAG=$RBLK_TEST_TAG"
}

stop_pid()
{
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	_ours "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "$TEST_NAME: pid $pid ignored SIGTERM; killing it" >&2
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	return 0
}

wait_pid()
{
	local i
	for ((i = 0; i < $1 * 20; i++)); do
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$2" 2>/dev/null && fail "pid $2 still running after $1 s"
	wait "$2"
}

free_port()
{
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
		return
	fi
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || {
			echo "$p"
			return
		}
	done
}

# Wait up to SECS for PATTERN (grep -E) in FILE while PID lives.
_wait_for_line()
{
	local file=$1 pattern=$2 pid=$3 secs=$4 i
	for ((i = 0; i < secs * 20; i++)); do
		grep -qE -- "$pattern" "$file" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 2
}

start_target()
{
	local attempt port log pid rc extra=() scheme=${RBLK_TEST_SCHEME:-tcp}
	local addr=127.0.0.1 wait=10
	requires_built
	case $scheme in
	tcp) ;;
	rdma) addr=${RBLK_TEST_RDMA_ADDR:-192.0.2.1} wait=60 ;;
	*) fail "RBLK_TEST_SCHEME: tcp or rdma, not '$scheme'" ;;
	esac
	# shellcheck disable=SC2206 # word splitting intended
	[ -n "${RBLK_TARGET_ARGS:-}" ] && extra=($RBLK_TARGET_ARGS)
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		log=$TEST_DIR/target.$port.log
		"$RBLK_TARGET_BIN" --listen "$scheme://$addr:$port" \
			${RBLK_TARGET_OPEN---allow-any-host} \
			--log-level info \
			--ctl-socket "$TEST_DIR/target.$port.sock" \
			${extra[@]+"${extra[@]}"} "$@" >"$log" 2>&1 &
		pid=$!
		rc=0
		_wait_for_line "$log" "listening on $scheme://$addr:$port" \
			"$pid" $wait || rc=$?
		if [ $rc -eq 0 ]; then
			RBLK_PORT=$port
			RBLK_TARGET_URL=$scheme://$addr:$port
			RBLK_TARGET_PID=$pid
			RBLK_TARGET_LOG=$log
			RBLK_CTL_SOCKET=$TEST_DIR/target.$port.sock
			export RBLK_PORT RBLK_TARGET_PID RBLK_TARGET_LOG \
				RBLK_CTL_SOCKET RBLK_TARGET_URL
			cleanup_fn stop_pid "$pid"
			return 0
		fi
		stop_pid "$pid"
		# lost a race for the port: try another one
		grep -qi "in use" "$log" && continue
		cat "$log" >&2
		fail "rblk-target $* did not start (see above)"
	done
	fail "rblk-target: no free port after 5 attempts"
}

start_nbd()
{
	local url=$1 sock=$2
	shift 2
	_start_nbd "$url" "$(basename "$sock")" --socket "$sock" "$@"
}

start_nbd_tcp()
{
	local url=$1 attempt
	shift
	for attempt in 1 2 3 4 5; do
		NBD_PORT=$(free_port)
		if _start_nbd "$url" "tcp-$NBD_PORT" --listen \
			"tcp://127.0.0.1:$NBD_PORT" "$@"; then
			export NBD_PORT
			return 0
		fi
		# lost a race for the port: try another one
	done
	fail "rblk nbd --listen: no free port after 5 attempts"
}

# _start_nbd URL TAG ARGS...: 0 when ready, 1 when it exited early with
# "in use" in its log, else fail.
_start_nbd()
{
	local url=$1 tag=$2 log out pid rc=0
	shift 2
	requires_built
	log=$TEST_DIR/nbd.$tag.log
	out=$TEST_DIR/nbd.$tag.out
	"$RBLK_BIN" nbd "$url" --log-level info "$@" >"$out" 2>"$log" &
	pid=$!
	_wait_for_line "$out" '^ready ' "$pid" 20 || rc=$?
	if [ $rc -ne 0 ]; then
		stop_pid "$pid"
		[ $rc -eq 1 ] && grep -qi "in use" "$log" && return 1
		cat "$log" >&2
		fail "rblk nbd $url did not become ready (see above)"
	fi
	RBLK_NBD_PID=$pid
	RBLK_NBD_LOG=$log
	NBD_URI=$(awk '/^ready /{ print $3; exit }' "$out")
	export RBLK_NBD_PID RBLK_NBD_LOG NBD_URI
	cleanup_fn stop_pid "$pid"
}

# ---- data ----------------------------------------------------------------

sha()
{
	sha256sum "$1" | cut -d' ' -f1
}

make_random()
{
	head -c "$(($2 * 1024 * 1024))" /dev/urandom >"$1"
}

# ---- a legitimate client verifying data while a test misbehaves ----------
#
#   start_verifier URL MIB [slot]  loop: write MIB MiB of random data
#                             to URL (rblk_libtest put, direct access;
#                             slot: through the target's slots; an
#                             nbd+unix:// URL: nbdcopy), read it back
#                             (get) and compare, until stop_verifier
#   stop_verifier             stop it; fail unless every round verified
#                             and at least one round ran; prints the count
#   proc_fds PID, proc_rss_kib PID
#                             open descriptors and resident KiB of PID
#   proc_baseline PID         remember PID's descriptors and RSS
#   proc_check PID KIB        fail if PID has more than 2 descriptors or
#                             KIB KiB of RSS more than at proc_baseline
#   expect_refusal SECS RC PATTERN CMD...
#                             CMD exits RC within SECS (a hang fails the
#                             test) and its output matches PATTERN
#                             (grep -E); prints the first line of it

start_verifier()
{
	local url=$1 mib=$2 t=$RBLK_BUILD/tests/rblk_libtest src back put get
	local slot=() # "slot": librblk through the target's slots, not direct
	[ "${3:-}" = slot ] && slot=(slot)
	_verify_dir=$TEST_DIR/verifier
	src=$_verify_dir/src back=$_verify_dir/back
	case $url in
	nbd+unix:*)
		put=(nbdcopy "$src" "$url")
		get=(nbdcopy "$url" "$back") ;;
	*)
		[ -x "$t" ] || fail "$t missing: run make check"
		put=("$t" put "$url" "$src" ${slot[@]+"${slot[@]}"})
		get=("$t" get "$url" "$back" ${slot[@]+"${slot[@]}"}) ;;
	esac
	mkdir -p "$_verify_dir"
	make_random "$_verify_dir/src" "$mib"
	(
		n=0
		while [ ! -e "$_verify_dir/stop" ] || [ $n -eq 0 ]; do
			rm -f "$_verify_dir/back"
			timeout 60 "${put[@]}" >/dev/null ||
				{ echo "put failed after $n rounds"; exit 1; }
			timeout 60 "${get[@]}" >/dev/null ||
				{ echo "get failed after $n rounds"; exit 1; }
			cmp -s -n "$((mib * 1048576))" "$_verify_dir/src" \
				"$_verify_dir/back" ||
				{ echo "MISMATCH after $n rounds"; exit 1; }
			n=$((n + 1))
			echo "$n" >"$_verify_dir/rounds"
		done
	) >"$_verify_dir/log" 2>&1 &
	_verify_pid=$!
	cleanup_fn _kill_quiet "$_verify_pid"
}

# _kill_quiet [-SIG] PID...: signal those of PIDs that are still ours
_kill_quiet()
{
	local a sig=()
	for a in "$@"; do
		case $a in
		-*) sig=("$a") ;;
		*) _ours "$a" && kill ${sig[@]+"${sig[@]}"} "$a" 2>/dev/null ;;
		esac
	done
	return 0
}

stop_verifier()
{
	local rc=0
	touch "$_verify_dir/stop"
	wait_pid 120 "$_verify_pid" || rc=$?
	[ $rc -eq 0 ] || fail "verifying client: $(cat "$_verify_dir/log")"
	echo "verifying client: $(cat "$_verify_dir/rounds") rounds verified"
}

proc_baseline()
{
	_base_fds=$(proc_fds "$1")
	_base_rss=$(proc_rss_kib "$1")
}

proc_check()
{
	local fds rss
	fds=$(proc_fds "$1")
	rss=$(proc_rss_kib "$1")
	echo "pid $1: fds $_base_fds -> $fds, RSS $_base_rss -> $rss KiB"
	[ "$fds" -le "$((_base_fds + 2))" ] ||
		fail "pid $1: descriptors grew from $_base_fds to $fds"
	[ "$rss" -le "$((_base_rss + $2))" ] ||
		fail "pid $1: RSS grew from $_base_rss to $rss KiB (allowed $2)"
}

proc_fds()
{
	find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l
}

proc_rss_kib()
{
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

expect_refusal()
{
	local secs=$1 want=$2 pattern=$3 rc=0 t0 t1
	shift 3
	t0=$(date +%s.%N)
	timeout -k 5 "$secs" "$@" >"$TEST_DIR/refusal.out" 2>&1 </dev/null || rc=$?
	t1=$(date +%s.%N)
	[ $rc -ne 124 ] && [ $rc -ne 137 ] ||
		fail "$*: still running after $secs s (killed)"
	[ $rc -eq "$want" ] ||
		fail "$*: exit $rc, wanted $want: $(head -c 400 "$TEST_DIR/refusal.out")"
	grep -Eq -- "$pattern" "$TEST_DIR/refusal.out" ||
		fail "$*: output does not match '$pattern': $(head -c 400 "$TEST_DIR/refusal.out")"
	echo "  refused in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s: $(grep -Em1 -- "$pattern" "$TEST_DIR/refusal.out" | cut -c1-160)"
}

# start_target_on PORT LOG ARGS...: rblk-target on tcp://127.0.0.1:PORT
# (a restart on the port its initiators know), logging to LOG, with the
# test's own control socket (start_target's for that port: never the
# default /run/rblk/target.sock, which a test running beside this one
# may hold; ARGS may name another, or none); sets RBLK_TARGET_PID and
# RBLK_CTL_SOCKET and stops it on exit. Fails unless it listens in 10 s
# and is still running once its control socket is up.
start_target_on()
{
	local port=$1 log=$2 i
	shift 2
	RBLK_CTL_SOCKET=$TEST_DIR/target.$port.sock
	export RBLK_CTL_SOCKET
	"$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:$port" --allow-any-host \
		--log-level info --ctl-socket "$RBLK_CTL_SOCKET" "$@" >"$log" 2>&1 &
	RBLK_TARGET_PID=$!
	cleanup_fn stop_pid "$RBLK_TARGET_PID"
	for ((i = 0; i < 200; i++)); do
		grep -q "listening on" "$log" && kill -0 "$RBLK_TARGET_PID" 2>/dev/null &&
			return 0
		kill -0 "$RBLK_TARGET_PID" 2>/dev/null || break
		sleep 0.05
	done
	cat "$log"
	fail "rblk-target did not start on port $port"
}
