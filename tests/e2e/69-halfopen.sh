#!/usr/bin/env bash
# Half-open connections must not lock other hosts out (issue 25 point 4,
# docs/RELIABILITY.md "Half-open connections"). A flood of connections
# that complete the transport's CONNECT and never log in, renewed as the
# target drops them, fills the pending table (1,024 by default):
#
#   A. from 4 source addresses, 256 each (each at its per-host limit);
#   B. from 1,000 source addresses (127.1.0.1 - 127.1.3.232, on lo).
#
# During each, from 127.0.0.1: at least 19 of 20 logins (`rblk info`)
# succeed; an `rblk nbd` (2 queues) writes 8 MiB of random data and reads
# it back identical; the target is killed (-9) and restarted on the same
# port under the flood, and both nbd queues reconnect and read the data
# back again. The target says it evicted pending connections.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3 nbdcopy truncate cmp
requires_built
ulimit -n 16384 2>/dev/null || ulimit -n 8192 2>/dev/null || true
[ "$(ulimit -n)" -ge 4096 ] || skip "needs 4096 file descriptors (ulimit -n $(ulimit -n))"

flood=$RBLK_ROOT/tests/e2e/rblk_halfopen.py
img=$TEST_DIR/v.img
truncate -s 64M "$img"
start_target --export "v=$img"
port=$RBLK_PORT
url=tcp://127.0.0.1:$port/v
tlog=$RBLK_TARGET_LOG
nstart=0
start_nbd "$url" "$TEST_DIR/nbd.sock" --queues 2 --reconnect-delay 0.2 \
	--ctrl-loss-timeout 60
make_random "$TEST_DIR/in" 8

# flood NAME ADDRS PER_ADDR: start one in the background (stops at exit)
flood()
{
	python3 "$flood" "$port" "$2" "$3" 1200 "$TEST_DIR/stop.$1" \
		>"$TEST_DIR/flood.$1.out" 2>&1 &
	cleanup_fn touch "$TEST_DIR/stop.$1"
}

# wait_held NAME N: up to 20 s for the flood to hold N connections
wait_held()
{
	local i held
	for ((i = 0; i < 200; i++)); do
		# the flood's output may not exist yet (a slow start): under
		# set -e and pipefail a failed tail here ended the test silently
		held=$(tail -1 "$TEST_DIR/flood.$1.out" 2>/dev/null |
			sed -n 's/.* held=\([0-9]*\).*/\1/p' || true)
		[ "${held:-0}" -ge "$2" ] && return 0
		sleep 0.1
	done
	cat "$TEST_DIR/flood.$1.out"
	fail "flood $1 holds ${held:-0} connections, not $2"
}

# logins NAME: 20 logins from 127.0.0.1, five at a time; at least 19
# must work
logins()
{
	local i j ok=0 pids
	for ((i = 0; i < 20; i += 5)); do
		pids=()
		for ((j = i; j < i + 5; j++)); do
			tmo 15 "$RBLK_BIN" info "$url" >"$TEST_DIR/login.$j" 2>&1 &
			pids+=($!)
		done
		for j in "${pids[@]}"; do
			wait "$j" || true
		done
	done
	for ((j = 0; j < 20; j++)); do
		if grep -q "^size: *67108864 bytes" "$TEST_DIR/login.$j"; then
			ok=$((ok + 1))
		else
			echo "login $j: $(head -c 300 "$TEST_DIR/login.$j")"
		fi
	done
	echo "$1: $ok of 20 logins during the flood; $(tail -1 "$TEST_DIR/flood.$1.out")"
	[ "$ok" -ge 19 ] || fail "$1: only $ok of 20 logins during the flood"
}

# verify NAME: the data read back through rblk nbd is what was written
verify()
{
	tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/out.$1" || fail "$1: reading through rblk nbd failed"
	cmp -n $((8 << 20)) "$TEST_DIR/in" "$TEST_DIR/out.$1" ||
		fail "$1: the data read back differs"
}

# restart NAME: kill -9 the target and start it again on the same port
# under the flood; reading the data back through rblk nbd (both queues)
# makes them reconnect, and both must have
restart()
{
	local before n
	before=$(grep -c "reconnected to" "$RBLK_NBD_LOG" || true)
	kill -KILL "$RBLK_TARGET_PID"
	wait "$RBLK_TARGET_PID" 2>/dev/null || true
	nstart=$((nstart + 1))
	tlog=$TEST_DIR/target.r$nstart.log
	start_target_on "$port" "$tlog" --export "v=$img"
	wait_held "$1" 1000
	verify "$1.r"
	n=$(grep -c "reconnected to" "$RBLK_NBD_LOG" || true)
	[ "$((n - before))" -ge 2 ] || { tail -20 "$RBLK_NBD_LOG"; fail "$1: $((n - before)) of 2 queues reconnected under the flood"; }
	echo "$1: both queues reconnected: $(grep "reconnected to" "$RBLK_NBD_LOG" | tail -2 | grep -o "after .*" | tr '\n' ' ')"
}

# one flood: fill, log in, write + verify, restart + reconnect + verify
run_case()
{
	local name=$1 t0=$SECONDS
	flood "$name" "$2" "$3"
	wait_held "$name" 1000
	sleep 0.5
	logins "$name"
	echo "$name: +$((SECONDS - t0)) s: logins done"
	tmo 60 nbdcopy "$TEST_DIR/in" "$NBD_URI" || fail "$name: writing through rblk nbd failed"
	verify "$name"
	echo "$name: +$((SECONDS - t0)) s: 8 MiB written and verified"
	# before the restart, which starts a new log
	grep -q "evicting the oldest" "$tlog" ||
		fail "$name: the target did not say it evicted pending connections"
	restart "$name"
	echo "$name: +$((SECONDS - t0)) s: restarted, reconnected, verified"
	echo "$name: +$((SECONDS - t0)) s: done"
	touch "$TEST_DIR/stop.$name"
	make_random "$TEST_DIR/in" 8 # new data for the next case
}

run_case A 127.0.1.1-127.0.1.4 256
run_case B 127.1.0.1-127.1.3.232 2
echo "PASS: $TEST_NAME"
