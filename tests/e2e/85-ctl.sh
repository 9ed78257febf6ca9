#!/usr/bin/env bash
# The control socket (rblk-target ctl) and the statistics, live:
#  - the socket is mode 0600; list outputs parse with jq;
#  - an export added at run time serves the data of its file (read and
#    written through rblk nbd + nbdcopy, compared with cmp), while a fio
#    verify job (rblk fio engine) runs on another export;
#  - removing an export in use is refused; --force --wait fails that
#    export's session (its fio reports an error), answers once the file is
#    closed, and leaves the verify job alone, which still verifies every
#    block; --force alone answers "closing 1 session" and the export is
#    closed (logged) when its session is gone;
#  - stats after a fixed-size fio job match fio's issued counts and bytes
#    exactly, and the Prometheus endpoint says the same; 431 for headers
#    over 4 KiB;
#  - add-export says why a path cannot be exported;
#  - idle and trickling ctl/metrics clients delay neither a login with
#    I/O (under 5 s) nor, beyond their deadlines, the control socket.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires fio jq curl nbdcopy truncate cmp python3
requires_built

requires_fio_engine
engine=$RBLK_FIO_ENGINE

mport=$(free_port)
vol0=$TEST_DIR/vol0.img
vol1=$TEST_DIR/vol1.img
truncate -s 32M "$vol0"
make_random "$vol1" 8
start_target --export "vol0=$vol0" --workers 2 \
	--metrics "$mport" # a bare port: loopback
sock=$RBLK_CTL_SOCKET
base=tcp://127.0.0.1:$RBLK_PORT

ctl()
{
	tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$sock" "$@"
}

# fio through the rblk engine on export $1, the rest fio options
fio_rblk()
{
	local exp=$1
	shift
	fio --name="$exp" "--ioengine=external:$engine" "--uri=$base/$exp" \
		--hostname="fio-$exp" "$@"
}

[ "$(stat -c %a "$sock")" = 600 ] || fail "control socket mode is $(stat -c %a "$sock"), not 600"
# a second target never takes over a live control socket given explicitly
rc=0
tmo 10 "$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:$(free_port)" \
	--export x=ram:1M --ctl-socket "$sock" >"$TEST_DIR/second.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "another rblk-target is serving it" "$TEST_DIR/second.log" ||
	fail "second target on the same socket: rc $rc, $(cat "$TEST_DIR/second.log")"
[ -S "$sock" ] || fail "the second target removed the first one's socket"

# ---- a verify job on vol0 for the whole test --------------------------------
# (it runs until the test interrupts it: a fixed runtime was shorter than
# the test on a loaded host; verify_backlog checks as it goes)
# (fio itself in the background, not a subshell: it gets the SIGINT)
fio --name=vol0 "--ioengine=external:$engine" "--uri=$base/vol0" \
	--hostname=fio-vol0 --rw=randwrite --bsrange=4k-64k --iodepth=8 --size=32M \
	--verify=crc32c --verify_backlog=64 --verify_fatal=1 --time_based \
	--runtime=600 --verify_state_save=0 --output-format=json \
	--output="$TEST_DIR/verify.json" &
verify_pid=$!
cleanup_fn stop_pid "$verify_pid"

# ---- add an export live and move data through it ---------------------------
ctl list-exports -o json >"$TEST_DIR/ex.json"
[ "$(jq -r '.exports | map(.name) | join(",")' "$TEST_DIR/ex.json")" = vol0 ] ||
	fail "list-exports before add: $(cat "$TEST_DIR/ex.json")"
ctl add-export vol1 "$vol1" --block-size 4096 >/dev/null
ctl list-exports -o json >"$TEST_DIR/ex.json"
jq -e '.exports[] | select(.name == "vol1") |
	.size == 8388608 and .block_size == 4096 and .read_only == false' \
	"$TEST_DIR/ex.json" >/dev/null || fail "vol1 after add: $(cat "$TEST_DIR/ex.json")"
# the same name twice: refused, with the reason on stderr
if ctl add-export vol1 "$vol1" 2>"$TEST_DIR/err"; then
	fail "adding vol1 twice succeeded"
fi
grep -q "export 'vol1' exists" "$TEST_DIR/err" || fail "add twice: $(cat "$TEST_DIR/err")"
if ctl add-export bad ram:1000 2>"$TEST_DIR/err"; then
	fail "add-export ram:1000 succeeded"
fi
grep -q "multiple of 4096" "$TEST_DIR/err" || fail "bad ram size: $(cat "$TEST_DIR/err")"

start_nbd "$base/vol1" "$TEST_DIR/nbd1.sock"
tmo 30 nbdcopy "$NBD_URI" "$TEST_DIR/vol1.read"
cmp "$vol1" "$TEST_DIR/vol1.read" || fail "vol1 read through rblk differs from its file"
make_random "$TEST_DIR/vol1.new" 8
tmo 30 nbdcopy "$TEST_DIR/vol1.new" "$NBD_URI"
stop_pid "$RBLK_NBD_PID"
cmp "$vol1" "$TEST_DIR/vol1.new" || fail "vol1's file does not hold what was written through rblk"

# ---- a session on vol1, then remove-export -----------------------------------
fio_rblk vol1 --rw=randread --bs=4k --iodepth=4 --time_based --runtime=30 \
	--output="$TEST_DIR/victim.out" &
victim_pid=$!
cleanup_fn stop_pid "$victim_pid"
for ((i = 0; i < 100; i++)); do
	ctl list-sessions -o json >"$TEST_DIR/sess.json"
	jq -e '[.sessions[] | select(.export == "vol1" and .state == "live" and
		.host == "fio-vol1" and .queue_depth == 4)] | length >= 1' \
		"$TEST_DIR/sess.json" >/dev/null && break
	sleep 0.1
done
[ $i -lt 100 ] || fail "no live fio session on vol1: $(cat "$TEST_DIR/sess.json")"
jq -e '[.sessions[] | select(.export == "vol0" and .host == "fio-vol0")] |
	length >= 1' "$TEST_DIR/sess.json" >/dev/null ||
	fail "no session of the verify job on vol0: $(cat "$TEST_DIR/sess.json")"
ctl list-sessions >/dev/null
ctl list-exports -o json | jq -e '.exports[] | select(.name == "vol1") |
	.sessions >= 1' >/dev/null || fail "vol1 shows no session"

if ctl remove-export vol1 2>"$TEST_DIR/err"; then
	fail "remove-export of an export in use succeeded"
fi
grep -q "export 'vol1' is in use by" "$TEST_DIR/err" ||
	fail "refusal says: $(cat "$TEST_DIR/err")"
kill -0 "$victim_pid" || fail "the vol1 session died on a refused removal"

ctl remove-export vol1 --force --wait -o json >"$TEST_DIR/rm.json"
jq -e '.removed == "vol1" and .sessions >= 1 and .released' "$TEST_DIR/rm.json" \
	>/dev/null || fail "forced removal said $(cat "$TEST_DIR/rm.json")"
# --wait answered after the file was closed
grep -q "export vol1: closed, its backing store released" "$RBLK_TARGET_LOG" ||
	fail "remove-export --wait answered before vol1 was closed"
rc=0
wait_pid 20 "$victim_pid" || rc=$?
[ $rc -ne 0 ] || { cat "$TEST_DIR/victim.out"; fail "fio on the removed export exited 0"; }
grep -q "conn .*export vol1 removed; disconnecting" "$RBLK_TARGET_LOG" ||
	fail "the target did not close vol1's session"
kill -0 "$verify_pid" 2>/dev/null ||
	fail "the verify job on vol0 ended before the forced removal was over (test too slow?)"
ctl list-exports -o json | jq -e '[.exports[].name] == ["vol0"]' >/dev/null ||
	fail "vol1 still listed after removal"
# its connection drains its in-flight I/O, then goes away
for ((i = 0; i < 50; i++)); do
	ctl list-sessions -o json >"$TEST_DIR/sess.json"
	jq -e '[.sessions[] | select(.export == "vol1")] | length == 0' \
		"$TEST_DIR/sess.json" >/dev/null && break
	sleep 0.1
done
[ $i -lt 50 ] || fail "vol1 sessions left after removal: $(cat "$TEST_DIR/sess.json")"
if ctl remove-export vol1 2>"$TEST_DIR/err"; then
	fail "removing vol1 twice succeeded"
fi
grep -q "no export named 'vol1'" "$TEST_DIR/err" || fail "remove twice: $(cat "$TEST_DIR/err")"

# fio ends an interrupted job cleanly (exit 128 for the signal, after a
# line saying so, then its JSON): a verification error ends it earlier
# with exit 1 and the error in the JSON
kill -0 "$verify_pid" 2>/dev/null ||
	{ cat "$TEST_DIR/verify.json"; fail "the verify job on vol0 ended by itself"; }
kill -INT "$verify_pid"
rc=0
wait_pid 60 "$verify_pid" || rc=$?
sed -n '/^{/,$p' "$TEST_DIR/verify.json" >"$TEST_DIR/verify.clean.json"
[ $rc -eq 0 ] || [ $rc -eq 128 ] ||
	{ cat "$TEST_DIR/verify.json"; fail "the verify job on vol0 failed (rc $rc)"; }
# verify reads happened (verify_backlog) and nothing failed
jq -e '.jobs[0] | .error == 0 and .read.total_ios > 0 and .write.total_ios > 0' \
	"$TEST_DIR/verify.clean.json" >/dev/null ||
	{ cat "$TEST_DIR/verify.json"; fail "verify job reported errors or verified nothing"; }
jq -c '.jobs[0] | {error, reads: .read.total_ios, writes: .write.total_ios}' "$TEST_DIR/verify.clean.json"

# ---- statistics against fio's own counts --------------------------------------
# the slot path: direct access (the default for RAM) never reaches the
# target's CPU, so the target cannot count it
ctl add-export st ram:16M >/dev/null
fio_rblk st --direct_access=off --rw=write --bs=64k --iodepth=8 --size=16M \
	--output-format=json --output="$TEST_DIR/w.json"
fio_rblk st --direct_access=off --rw=randread --bs=4k --iodepth=8 --size=16M --io_size=4M \
	--output-format=json --output="$TEST_DIR/r.json"
wr=$(jq '.jobs[0].write.total_ios' "$TEST_DIR/w.json")
wb=$(jq '.jobs[0].write.io_bytes' "$TEST_DIR/w.json")
rd=$(jq '.jobs[0].read.total_ios' "$TEST_DIR/r.json")
rb=$(jq '.jobs[0].read.io_bytes' "$TEST_DIR/r.json")
[ "$wb" -eq 16777216 ] && [ "$rb" -eq 4194304 ] ||
	fail "fio moved $wb/$rb bytes, expected 16M/4M"
ctl stats st -o json >"$TEST_DIR/stats.json"
jq -c '.exports[0].stats | del(.latency_us.buckets)' "$TEST_DIR/stats.json"
jq -e --argjson wr "$wr" --argjson wb "$wb" --argjson rd "$rd" --argjson rb "$rb" '
	.exports | length == 1 and .[0].name == "st" and
	(.[0].stats | .ops.write == $wr and .bytes_written == $wb and
	 .ops.read == $rd and .bytes_read == $rb and .errors == 0 and
	 .ops.trim == 0 and .ops.write_zeroes == 0 and
	 .latency_us.count == (.ops | add) and
	 .latency_us.p50 >= 1 and .latency_us.p99 >= .latency_us.p50)' \
	"$TEST_DIR/stats.json" >/dev/null ||
	fail "stats do not match fio ($wr writes/$wb bytes, $rd reads/$rb bytes): $(cat "$TEST_DIR/stats.json")"
ctl stats st | grep -q "bytes: read $rb written $wb" || fail "text stats: $(ctl stats st)"
if ctl stats nosuch 2>"$TEST_DIR/err"; then
	fail "stats of a missing export succeeded"
fi

# ---- Prometheus ---------------------------------------------------------------
tmo 10 curl -sf "http://127.0.0.1:$mport/metrics" >"$TEST_DIR/metrics"
metric()
{
	awk -v k="$1" '$1 == k { print $2 }' "$TEST_DIR/metrics"
}
[ "$(metric 'rblk_ops_total{export="st",op="write"}')" = "$wr" ] ||
	fail "metrics writes: $(grep 'export="st"' "$TEST_DIR/metrics")"
[ "$(metric 'rblk_ops_total{export="st",op="read"}')" = "$rd" ] || fail "metrics reads"
[ "$(metric 'rblk_bytes_total{export="st",direction="write"}')" = "$wb" ] || fail "metrics write bytes"
[ "$(metric 'rblk_bytes_total{export="st",direction="read"}')" = "$rb" ] || fail "metrics read bytes"
[ "$(metric 'rblk_latency_us_count{export="st"}')" = "$((wr + rd))" ] || fail "metrics latency count"
[ "$(metric 'rblk_latency_us_bucket{export="st",le="+Inf"}')" = "$((wr + rd))" ] || fail "metrics +Inf bucket"
# every sample line is NAME{LABELS} VALUE (an integer; seconds may be
# fractional), buckets never decrease
awk '!/^#/ && !/^[a-z_]+\{[^}]*\} [0-9]+(\.[0-9]+)?$/ { bad = 1; print "bad line: " $0 }
	END { exit bad }' "$TEST_DIR/metrics" || fail "unparseable metrics"
grep '^rblk_latency_us_bucket{export="vol0"' "$TEST_DIR/metrics" |
	awk '{ if ($2 < prev) exit 1; prev = $2 }' || fail "histogram not cumulative"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/other")
[ "$code" = 404 ] || fail "GET /other gave $code"
# overlong request headers: 431, not a silent close
code=$(curl -s -o /dev/null -w '%{http_code}' \
	-H "X-Big: $(head -c 5000 /dev/zero | tr '\0' a)" \
	"http://127.0.0.1:$mport/metrics")
[ "$code" = 431 ] || fail "5000-byte header gave $code, not 431"

# ---- add-export says why it cannot open ---------------------------------------
: >"$TEST_DIR/empty.img"
add_fails()
{
	if ctl add-export "$1" "$2" 2>"$TEST_DIR/err"; then
		fail "add-export $1 $2 succeeded"
	fi
	grep -qF "$3" "$TEST_DIR/err" || fail "add-export $2 said: $(cat "$TEST_DIR/err")"
}
add_fails nofile "$TEST_DIR/nosuch.img" "open $TEST_DIR/nosuch.img: No such file or directory"
add_fails dir "$TEST_DIR" "open $TEST_DIR: Is a directory"
add_fails empty "$TEST_DIR/empty.img" "$TEST_DIR/empty.img is empty"

# ---- remove-export --force without --wait: answers at once, the control
# thread closes the export when the worker drops the last reference -------
ctl add-export gone ram:4M >/dev/null
fio_rblk gone --rw=randread --bs=4k --iodepth=2 --time_based --runtime=30 \
	--output="$TEST_DIR/gone.out" &
gone_pid=$!
cleanup_fn stop_pid "$gone_pid"
for ((i = 0; i < 100; i++)); do
	# the job's own session (queue depth 2), not the queue-depth-1 session
	# fio's setup opens to learn the size and closes again
	ctl list-sessions --export gone -o json |
		jq -e '.sessions | length == 1 and .[0].queue_depth == 2' \
		>/dev/null && break
	sleep 0.1
done
[ $i -lt 100 ] || fail "no session on gone"
out=$(ctl remove-export gone --force)
# "closed" only when the worker was quicker than the reply
case $out in
"removed export gone (closing 1 session; --wait waits for them)") ;;
"removed export gone (1 session closed)") ;;
*) fail "remove-export --force said: $out" ;;
esac
for ((i = 0; i < 100; i++)); do
	grep -q "export gone: closed, its backing store released" \
		"$RBLK_TARGET_LOG" && break
	sleep 0.1
done
[ $i -lt 100 ] || fail "gone was not closed after its session ended"
wait_pid 20 "$gone_pid" || true

# ---- idle and trickling ctl/metrics clients never delay logins ------------------
# 2 idle metrics, 2 idle ctl connections and one metrics client sending a
# byte every 0.2 s; a login with a data round trip must not wait for them.
python3 - "$mport" "$sock" "$TEST_DIR" <<'EOF' &
import select, socket, sys, time
port, path, d = int(sys.argv[1]), sys.argv[2], sys.argv[3]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
for _ in range(2):
	u = socket.socket(socket.AF_UNIX)
	u.connect(path)
	held.append(u)
t = socket.create_connection(("127.0.0.1", port))
open(d + "/held", "w").close()
start = time.time()
while time.time() - start < 60:
	try:
		t.send(b"G")
	except OSError:
		break
	if select.select([t], [], [], 0.2)[0]:
		break # closed (or answered) by the target
open(d + "/trickle", "w").write("%.1f" % (time.time() - start))
time.sleep(30)
EOF
hold_pid=$!
cleanup_fn stop_pid "$hold_pid"
for ((i = 0; i < 100; i++)); do [ -e "$TEST_DIR/held" ] && break; sleep 0.1; done
[ -e "$TEST_DIR/held" ] || fail "could not open the idle connections"
t0=$(date +%s%N)
tmo 5 "$RBLK_BUILD/tests/rblk_libtest" rw "$base/st" >/dev/null ||
	fail "login and I/O while ctl/metrics clients stall"
echo "login + I/O with 5 stalled ctl/metrics clients: $((($(date +%s%N) - t0) / 1000000)) ms"
# the control thread serves them one by one, each cut at its deadline
t0=$(date +%s%N)
tmo 30 "$RBLK_TARGET_BIN" ctl --socket "$sock" list-exports >/dev/null ||
	fail "ctl does not answer after the stalled clients"
echo "ctl answered after $((($(date +%s%N) - t0) / 1000000)) ms behind them"
for ((i = 0; i < 200; i++)); do [ -e "$TEST_DIR/trickle" ] && break; sleep 0.1; done
[ -e "$TEST_DIR/trickle" ] || fail "a trickling metrics client was not cut off in 20 s"
echo "trickling metrics client cut off after $(cat "$TEST_DIR/trickle") s"
echo "PASS: $TEST_NAME"
