#!/usr/bin/env bash
# Random operations against a model (issue 28, part 4), over tcp through
# librblk (tests/e2e/rblk_fsx.c): READ, WRITE (1 in 8 FUA), TRIM,
# WRITE_ZEROES (1 in 8 FUA) and FLUSH of odd block counts, sizes around
# the 4 KiB inline limit and across max I/O (128 KiB asked: 128 KiB +- a
# block and twice that, which librblk splits), up to 32 in flight and
# never two overlapping. Every READ must return the model's bytes and the
# whole volume is read back at the end.
#
#   1. 1M operations on a 64 MiB tmpfs file; the target is restarted 6
#      times at evenly spaced points with commands in flight (kill -9 and
#      SIGTERM alternately, on the same port): every in-flight command is
#      retried after the reconnect and nothing acknowledged is lost.
#   2. 5000 operations on a file of the test directory's file system,
#      block size 4096, cache=buffered (the engine path, not tmpfs's
#      inline copy), with 2 restarts.
#   3. the checker can fail: the exported file is overwritten behind the
#      initiator's back while fsx runs, and fsx must report a mismatch.
#
# soak: 100M operations with 50 target restarts (RBLK_SOAK=1; about 5 h at
#   5500 operations/s on the 2-core host under load)
# soak-timeout: 43200
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires truncate
requires_built
fsx=$RBLK_BUILD/tests/rblk_fsx
[ -x "$fsx" ] || fail "$fsx missing: run make check"

ops=${RBLK_FSX_OPS:-1000000} restarts=6
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	ops=${RBLK_FSX_OPS:-100000000} restarts=50
fi

make_tmpfs_dir
port=$(free_port)
pidf=$TEST_DIR/target.pid

# restart.sh: kill the target (kill -9 on odd runs, SIGTERM on even ones)
# and start it again on the same port with the same export, detached; fsx
# runs it with commands in flight
cat >"$TEST_DIR/restart.sh" <<EOF
#!/usr/bin/env bash
set -u
n=\$(cat "$TEST_DIR/restarts" 2>/dev/null || echo 0); n=\$((n + 1))
echo \$n >"$TEST_DIR/restarts"
pid=\$(cat "$pidf")
if [ \$((n % 2)) = 1 ]; then kill -KILL \$pid; else kill -TERM \$pid; fi
while kill -0 \$pid 2>/dev/null; do sleep 0.05; done
log="$TEST_DIR/target.r\$n.log"
setsid "$RBLK_TARGET_BIN" --listen tcp://127.0.0.1:$port --allow-any-host \\
	--ctl-socket none --log-level info --export "\$(cat "$TEST_DIR/export")" \\
	>"\$log" 2>&1 </dev/null &
echo \$! >"$pidf"
for i in \$(seq 200); do
	grep -qs "listening on" "\$log" && exit 0
	sleep 0.05
done
echo "restart \$n: the target did not listen" >&2; cat "\$log" >&2; exit 1
EOF
chmod +x "$TEST_DIR/restart.sh"

# start EXPORT: the first target of a run
start()
{
	echo "$1" >"$TEST_DIR/export"
	rm -f "$TEST_DIR/restarts"
	start_target_on "$port" "$TEST_DIR/target.log" --ctl-socket none \
		--export "$1"
	echo "$RBLK_TARGET_PID" >"$pidf"
}
stop()
{
	local pid
	pid=$(cat "$pidf")
	kill -TERM "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}
cleanup_fn stop

# ---- 1. 1M operations, restarts ------------------------------------------
truncate -s 64M "$TMPFS_DIR/vol"
start "vol=$TMPFS_DIR/vol"
out=$(nice "$fsx" fsx "tcp://127.0.0.1:$port/vol" -n "$ops" -q 32 \
	-m 131072 -s 28 -r "$restarts" -c "$TEST_DIR/restart.sh") ||
	fail "fsx: $out"
echo "$out"
grep -q "restarts $restarts, .* mismatches 0" <<<"$out" ||
	fail "fsx did not do its $restarts restarts cleanly"
[ "$(cat "$TEST_DIR/restarts")" = "$restarts" ] ||
	fail "restart.sh ran $(cat "$TEST_DIR/restarts") times, not $restarts"
stop

# ---- 2. the engine path: bs 4096, cache=buffered ---------------------------
truncate -s 32M "$TEST_DIR/vol4k"
start "v4=$TEST_DIR/vol4k,bs=4096,cache=buffered"
out=$(nice "$fsx" fsx "tcp://127.0.0.1:$port/v4" -n 5000 -q 32 -m 131072 \
	-s 29 -r 2 -c "$TEST_DIR/restart.sh") || fail "fsx (bs 4096): $out"
echo "$out"
grep -q "bs 4096 .*restarts 2, .* mismatches 0" <<<"$out" ||
	fail "fsx (bs 4096) did not run as asked"
stop

# ---- 3. the checker catches a change it did not make ----------------------
truncate -s 16M "$TMPFS_DIR/lie"
start "lie=$TMPFS_DIR/lie"
# the "restart" here scribbles over the whole file instead: every block
# read after it differs from the model
cat >"$TEST_DIR/scribble.sh" <<EOF
#!/bin/sh
head -c 16777216 /dev/urandom >"$TMPFS_DIR/lie.new" && \
	dd if="$TMPFS_DIR/lie.new" of="$TMPFS_DIR/lie" conv=notrunc status=none
EOF
chmod +x "$TEST_DIR/scribble.sh"
if out=$("$fsx" fsx "tcp://127.0.0.1:$port/lie" -n 20000 -q 8 -m 131072 \
	-r 1 -c "$TEST_DIR/scribble.sh" 2>&1); then
	fail "fsx passed although the volume changed behind it: $out"
fi
grep -q MISMATCH <<<"$out" || fail "fsx failed without a MISMATCH: $out"
echo "a change behind the initiator: caught ($(grep -c MISMATCH <<<"$out") mismatch lines)"
echo "fsx: OK"
