#!/usr/bin/env bash
# Bad local input (issue 15, point 10): paths a user names that are not
# what they should be are refused at once with a message saying so, and a
# running target keeps serving while a client verifies data on it:
#   - ctl add-export of a FIFO (read-only or not), a character device, a
#     socket, a directory: refused without waiting for a FIFO writer
#   - at start: a FIFO export, a FIFO secret file (--host and secret_file),
#     -c FIFO, -c /dev/zero, a configuration file over 1 MiB, a line
#     over the line limit (error names the line)
#   - rblk --key-file FIFO
#   - ram:SIZE beyond MemAvailable refused; with ,overcommit accepted
#   - SIGTERM while the exports open ends the start-up
#   - the target's descriptors and memory are what they were
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires mkfifo python3
requires_built

fifo=$TEST_DIR/fifo
mkfifo "$fifo"
sock=$TEST_DIR/a.sock
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$sock"
start_target --export "mem=ram:16M"
url=tcp://127.0.0.1:$RBLK_PORT
ctl=("$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET")
start_verifier "$url/mem" 16
proc_baseline "$RBLK_TARGET_PID"

# ---- a running target: ctl add-export ----------------------------------
echo "ctl add-export:"
expect_refusal 10 1 "$fifo is a FIFO, not a regular file or a block device" \
	"${ctl[@]}" add-export f1 "$fifo" --read-only
expect_refusal 10 1 "$fifo is a FIFO, not a regular file or a block device" \
	"${ctl[@]}" add-export f2 "$fifo"
expect_refusal 10 1 "/dev/null is a character device, not a regular file" \
	"${ctl[@]}" add-export f3 /dev/null
expect_refusal 10 1 "$sock: No such device or address|$sock is a socket" \
	"${ctl[@]}" add-export f4 "$sock"
expect_refusal 10 1 "open $TEST_DIR: Is a directory|$TEST_DIR is a directory" \
	"${ctl[@]}" add-export f5 "$TEST_DIR"
# the control thread answers at once afterwards
tmo 5 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" list-exports >/dev/null ||
	fail "control socket does not answer after the refusals"
big=$(awk '/^MemTotal:/ { printf "%dG", $2 / 1048576 * 2 + 2 }' /proc/meminfo)
expect_refusal 10 1 "ram:$big is more than the [0-9]+ MiB of memory available; .*overcommit" \
	"${ctl[@]}" add-export huge "ram:$big"

# ---- starting a target: each refused at once ----------------------------
echo "rblk-target at start:"
tgt=("$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:$(free_port)"
	--ctl-socket none --allow-any-host)
expect_refusal 10 1 "export x: $fifo is a FIFO" "${tgt[@]}" --export "x=$fifo"
expect_refusal 10 1 "export x: $fifo is a FIFO" "${tgt[@]}" --export "x=$fifo,ro"
expect_refusal 10 2 "secret file $fifo is not a regular file" \
	"${tgt[@]}" --export x=ram:1M --host "h:secret-file=$fifo"
expect_refusal 10 1 "$fifo: not a regular file" "${tgt[@]}" -c "$fifo" --export x=ram:1M
expect_refusal 10 1 "/dev/zero: not a regular file" "${tgt[@]}" -c /dev/zero --export x=ram:1M
head -c 2M /dev/zero | tr '\0' ';' >"$TEST_DIR/big.conf"
expect_refusal 10 1 "big.conf: 2097152 bytes, more than the 1048576 a configuration file may have" \
	"${tgt[@]}" -c "$TEST_DIR/big.conf" --export x=ram:1M
{ echo "[target]"; printf 'name = %*s\n' 70000 x | tr ' ' y; } >"$TEST_DIR/long.conf"
expect_refusal 10 1 "long.conf:2: line too long" "${tgt[@]}" -c "$TEST_DIR/long.conf" --export x=ram:1M
{ echo "[host h]"; echo "secret_file = $fifo"; } >"$TEST_DIR/fifo-secret.conf"
expect_refusal 10 1 "fifo-secret.conf:2: host 'h': secret file $fifo is not a regular file" \
	"${tgt[@]}" -c "$TEST_DIR/fifo-secret.conf" --export x=ram:1M
expect_refusal 10 1 "export x: ram:$big is more than the [0-9]+ MiB of memory available" \
	"${tgt[@]}" --export "x=ram:$big"
# with overcommit it is the operator's call: the target starts and serves
tpid=$RBLK_TARGET_PID
start_target --export "x=ram:$big,overcommit"
stop_pid "$RBLK_TARGET_PID"
RBLK_TARGET_PID=$tpid
echo "  ram:$big,overcommit: started"

# SIGTERM while the exports open (a 1 GiB direct file being allocated):
# the start-up ends there (or, sent before the signals are blocked, the
# default action ends it); never a target that runs on or hangs
make_tmpfs_dir
truncate -s 1G "$TMPFS_DIR/slow.img"
"${tgt[@]}" --export "slow=$TMPFS_DIR/slow.img,direct" >"$TEST_DIR/slow.log" 2>&1 &
spid=$!
sleep 0.2
kill -TERM "$spid"
rc=0
wait_pid 30 "$spid" || rc=$?
case $rc in
1) grep -q "Terminated received while starting; exiting" "$TEST_DIR/slow.log" ||
	fail "SIGTERM while starting: exit 1 without saying why: $(cat "$TEST_DIR/slow.log")" ;;
143) ;;
*) fail "SIGTERM while starting: exit $rc: $(cat "$TEST_DIR/slow.log")" ;;
esac
! grep -q "listening on" "$TEST_DIR/slow.log" || fail "SIGTERM while starting: it started serving"
echo "  SIGTERM while starting: exit $rc"
rm -f "$TMPFS_DIR/slow.img"

# ---- the initiator ------------------------------------------------------
echo "rblk:"
expect_refusal 10 1 "secret file $fifo is not a regular file" \
	"$RBLK_BIN" info --key-file "$fifo" "$url/mem"

stop_verifier
proc_check "$RBLK_TARGET_PID" 32768
echo "PASS: $TEST_NAME"
