#!/usr/bin/env bash
# Fencing with RBD's exclusive lock: two rblk-targets export one image.
# Target A serves writes (and so holds the lock) and is then stopped
# (SIGSTOP) with a write of its initiator still on the way to it. Target
# B takes the lock over (breaking A's lock blocklists A at the OSDs) and
# serves writes, verified. A resumes (SIGCONT): its late write is refused
# (the initiator gets EIO), and so is every later one; the image holds B's
# data (read with rbd export). Once B's last session ends B releases the
# lock, so a later takeover need not blocklist it. Then a third target, C,
# fenced while it had no write in flight, must refuse the next write and
# log that it is fenced (the lock thread's path to the fence).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"

# write_refused URI OFFSET WHAT: a 4 KiB write at OFFSET through URI fails
write_refused()
{
	tmo 30 nbdsh -u "$1" -c "
try:
    h.pwrite(b'x' * 4096, $2)
except nbd.Error as e:
    print('$3 refused:', e)
else:
    raise SystemExit('$3 succeeded')
"
}
source "$RBLK_ROOT/tests/ceph/lib.sh"
requires_ceph
requires_nbdsh
requires_built

start_ceph
rbd create rbd/shared --size 32M
conf=$TEST_DIR/target.conf
rbd_target_conf "$conf" rbd_timeout=10 rbd_takeover=yes

start_target --config "$conf" --export vol0=rbd:rbd/shared
a_pid=$RBLK_TARGET_PID a_log=$RBLK_TARGET_LOG a_port=$RBLK_PORT
# its own directory: start_target names its log and socket after the attempt
mkdir "$TEST_DIR/b"
TEST_DIR=$TEST_DIR/b start_target --config "$conf" --export vol0=rbd:rbd/shared
b_pid=$RBLK_TARGET_PID b_log=$RBLK_TARGET_LOG b_port=$RBLK_PORT

start_nbd "tcp://127.0.0.1:$a_port/vol0" "$TEST_DIR/a.sock"
a_uri=$NBD_URI
M=$((1 << 20))

# A serves writes: it takes the lock
tmo 30 nbdsh -u "$a_uri" -c '
h.pwrite(b"A" * (4 << 20), 0)
h.flush()
assert h.pread(4 << 20, 0) == b"A" * (4 << 20)
'
grep -q "exclusive lock held" "$a_log" || fail "A does not hold the lock"
echo "A wrote and holds the lock"

# A stalls with a write of its initiator on the way: issued now, it sits
# in A's socket until A resumes
kill -STOP "$a_pid"
cleanup_fn _kill_quiet -CONT "$a_pid"
tmo 60 nbdsh -u "$a_uri" -c '
import errno
try:
    h.pwrite(b"a" * (4 << 20), 0)
except nbd.Error as e:
    print("late write refused:", e.errnum, errno.errorcode.get(e.errnum))
    sys.exit(0)
print("late write SUCCEEDED")
sys.exit(1)
' >"$TEST_DIR/late.out" 2>&1 &
late=$!
sleep 1

# B takes over and serves writes
t0=$(date +%s%N)
start_nbd "tcp://127.0.0.1:$b_port/vol0" "$TEST_DIR/b.sock"
b_uri=$NBD_URI
tmo 30 nbdsh -u "$b_uri" -c '
h.pwrite(b"B" * (4 << 20), 0)
h.pwrite(b"b" * (1 << 20), 8 << 20)
h.flush()
assert h.pread(4 << 20, 0) == b"B" * (4 << 20)
'
echo "B took over and wrote in $((($(date +%s%N) - t0) / 1000000)) ms"
grep -q "taking the exclusive lock over" "$b_log" || fail "B did not break A's lock"

# A resumes: its late write and a new one are refused
kill -CONT "$a_pid"
wait_pid 60 "$late" || { cat "$TEST_DIR/late.out"; fail "A's late write was not refused"; }
cat "$TEST_DIR/late.out"
write_refused "$a_uri" $((8 << 20)) "a new write to A"
grep -q "refuses this target's writes" "$a_log" ||
	fail "A did not log that it was fenced"
# the late write reached A and the cluster refused it (not the initiator
# giving up on a stalled target)
grep -q "WRITE at 0+.* failed" "$a_log" ||
	fail "A's log shows no refused write at offset 0"

# the image holds B's data
tmo 30 rbd export --no-progress rbd/shared "$TEST_DIR/img"
python3 - "$TEST_DIR/img" <<'EOF'
import sys
M = 1 << 20
d = open(sys.argv[1], "rb").read()
assert d[:4 * M] == b"B" * (4 * M), "the first 4 MiB are not B's"
assert d[8 * M:9 * M] == b"b" * M, "B's second write is not there"
print("image holds B's data")
EOF

# B keeps serving; its lock goes once its last session ends
tmo 30 nbdsh -u "$b_uri" -c 'h.pwrite(b"C" * 4096, 0); assert h.pread(4096, 0) == b"C" * 4096'
stop_pid "$RBLK_NBD_PID"
for ((i = 0; i < 100; i++)); do
	grep -q "exclusive lock released" "$b_log" && break
	sleep 0.1
done
grep -q "exclusive lock released" "$b_log" ||
	fail "B kept the lock after its last session ended"
echo "B released the lock once idle"

# A fence met by the lock thread: target C holds the lock with a session
# open and is stopped; B takes the lock over (blocklisting C); C's session
# ends while C is stopped, so C, resumed, releases the lock idle (which
# fails: C is blocklisted) and a new write through C parks for the lock
# thread, whose rbd_lock_acquire() is refused: C must fail the write and
# say that it is fenced (it once went FENCED without a word)
mkdir "$TEST_DIR/c"
TEST_DIR=$TEST_DIR/c start_target --config "$conf" --export vol0=rbd:rbd/shared
c_pid=$RBLK_TARGET_PID c_log=$RBLK_TARGET_LOG c_port=$RBLK_PORT
start_nbd "tcp://127.0.0.1:$c_port/vol0" "$TEST_DIR/c.sock"
c_uri=$NBD_URI c_nbd=$RBLK_NBD_PID
tmo 30 nbdsh -u "$c_uri" -c 'h.pwrite(b"c" * 4096, 12 << 20); h.flush()'
grep -q "exclusive lock held" "$c_log" || fail "C does not hold the lock"
kill -STOP "$c_pid"
cleanup_fn _kill_quiet -CONT "$c_pid"
start_nbd "tcp://127.0.0.1:$b_port/vol0" "$TEST_DIR/b2.sock"
tmo 30 nbdsh -u "$NBD_URI" -c 'h.pwrite(b"D" * 4096, 12 << 20); h.flush()'
grep -c "taking the exclusive lock over" "$b_log" | grep -qx 2 ||
	fail "B did not break C's lock"
stop_pid "$c_nbd"
kill -CONT "$c_pid"
for ((i = 0; i < 200; i++)); do
	grep -q "exclusive lock released\|releasing the exclusive lock" "$c_log" && break
	sleep 0.1
done
grep -q "exclusive lock released\|releasing the exclusive lock" "$c_log" ||
	{ tail -n 20 "$c_log"; fail "C did not release the lock once its session ended"; }
start_nbd "tcp://127.0.0.1:$c_port/vol0" "$TEST_DIR/c2.sock"
write_refused "$NBD_URI" $((12 << 20)) "a write to the idle, blocklisted C"
grep -q "refuses this target's writes" "$c_log" ||
	{ tail -n 20 "$c_log"; fail "C failed the write without saying it is fenced"; }
tmo 30 rbd export --no-progress rbd/shared "$TEST_DIR/img2"
python3 - "$TEST_DIR/img2" <<'EOF'
import sys
d = open(sys.argv[1], "rb").read()
assert d[12 << 20:(12 << 20) + 4096] == b"D" * 4096, "B's write at 12 MiB is not there"
print("C fenced and said so; the image holds B's write")
EOF

kill -0 "$a_pid" && kill -0 "$b_pid" && kill -0 "$c_pid" || fail "a target died"
echo "PASS: $TEST_NAME"
