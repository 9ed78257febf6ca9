#!/usr/bin/env bash
# QoS limits (issue 29 point 2; docs/ARCHITECTURE.md "Quality of service"):
# per-export and per-host token buckets in the worker, measured with fio
# through the engine on one worker, over tcp (guest test 23 runs it over
# rdma: RBLK_TEST_SCHEME=rdma).
#   - bad limits are refused with a clear error (value, key, direct);
#   - iops=500: fio 4k randread QD16 measures 500 +-10%, and a verified
#     write pass through the limit has no error (throttled I/O waits,
#     never fails);
#   - bps=8M: 128k reads measure 8 MiB/s +-10%;
#   (limits well below what a busy 2-core host moves; the figures at
#   1,000 IOPS and 50 MB/s are in docs/BENCHMARKS.md, "QoS")
#   - read_iops apart from writes: writes are not held by a read limit;
#   - a host entry's limit ([host] iops=) holds for its sessions;
#   - another export on the same worker keeps its rate beside a limited
#     one (the ratio is printed; asserted only against starvation);
#   - `ctl set-qos` raises a limit live: fio's per-250 ms log reaches the
#     new rate within 1 s; `ctl stats` and /metrics show the limits and
#     the time spent throttled.
# runs-alone: measures rates against limits and a neighbour against its rate alone
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE

# ---- bad input: clear errors, nothing started ---------------------------
refused()
{
	local want=$1
	shift
	if "$RBLK_TARGET_BIN" --listen tcp://127.0.0.1:1 "$@" \
		>"$TEST_DIR/bad.out" 2>&1; then
		fail "rblk-target accepted $*"
	fi
	grep -qF "$want" "$TEST_DIR/bad.out" ||
		{ cat "$TEST_DIR/bad.out"; fail "no clear error for $* (want: $want)"; }
}
refused "iops 'many' is not a number of I/Os per second" --export "v=ram:1M,iops=many"
refused "bps '5X' is not bytes per second" --export "v=ram:1M,bps=5X"
refused "QoS limits need commands, and direct access has none" \
	--export "v=ram:1M,direct,iops=100"
refused "burst_ms '0' is not 1..60000" --export "v=ram:1M,iops=10,burst_ms=0"
printf '[export v]\npath = ram:1M\nwrite_iopz = 5\n' >"$TEST_DIR/bad.conf"
refused "unknown key 'write_iopz' in [export v]" --config "$TEST_DIR/bad.conf"
echo "bad limits refused with clear errors"

# ---- a target on one worker: limited exports beside a free one ----------
head -c 32 /dev/urandom | base64 >"$TEST_DIR/h1.key"
chmod 600 "$TEST_DIR/h1.key"
cat >"$TEST_DIR/qos.conf" <<EOF
[export lim]
path = ram:64M
iops = 500
[export bw]
path = ram:64M
bps = 8M
[export rd]
path = ram:64M
read_iops = 250
[export live]
path = ram:64M
iops = 500
[export free]
path = ram:64M
direct = no
[export hostvol]
path = ram:64M
direct = no
allow = h1
[host h1]
secret_file = $TEST_DIR/h1.key
iops = 400
EOF
mport=$(free_port)
start_target --workers 1 --config "$TEST_DIR/qos.conf" \
	--metrics "tcp://127.0.0.1:$mport"
ctl() { "$RBLK_TARGET_BIN" ctl -s "$RBLK_CTL_SOCKET" "$@"; }

# fio_json NAME EXPORT ARGS...: fio through the engine, JSON in
# $TEST_DIR/NAME.json; fails on any I/O error
fio_json()
{
	local name=$1 exp=$2
	shift 2
	tmo 90 fio --name="$name" "--ioengine=external:$engine" \
		"--uri=$RBLK_TARGET_URL/$exp" --size=64M --output-format=json \
		--output="$TEST_DIR/$name.json" "$@" ||
		{ cat "$TEST_DIR/$name.json"; fail "fio $name on $exp"; }
	python3 - "$TEST_DIR/$name.json" <<'EOF' || fail "fio $name reported errors"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
sys.exit(1 if j["error"] else 0)
EOF
}
# jq-like: VALUE of the job's read/write FIELD (iops, bw_bytes)
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]][sys.argv[3]])' "$TEST_DIR/$1.json" "$2" "$3"; }
# within VALUE WANT PCT: |VALUE - WANT| <= PCT% of WANT
within() { python3 -c 'import sys; v,w,p=map(float,sys.argv[1:]); sys.exit(0 if abs(v-w) <= w*p/100 else 1)' "$@"; }

rr=(--rw=randread --bs=4k --iodepth=16 --time_based --runtime=4 --ramp_time=2)

fio_json lim lim "${rr[@]}"
v=$(field lim read iops)
echo "lim (iops=500): $v IOPS"
within "$v" 500 10 || fail "iops=500 measured $v IOPS"

fio_json bw bw --rw=read --bs=128k --iodepth=8 --time_based --runtime=4 \
	--ramp_time=2
v=$(field bw read bw_bytes)
echo "bw (bps=8M): $v B/s"
within "$v" 8388608 10 || fail "bps=8M measured $v B/s"

# a read limit holds reads and leaves writes alone
fio_json rd rd "${rr[@]}"
r=$(field rd read iops)
fio_json rdw rd "${rr[@]}" --rw=randwrite
w=$(field rdw write iops)
echo "rd (read_iops=250): reads $r IOPS, writes $w IOPS"
within "$r" 250 10 || fail "read_iops=250 measured $r read IOPS"
python3 -c "import sys; sys.exit(0 if $w > 2 * 250 else 1)" ||
	fail "read_iops=250 held writes too ($w IOPS)"

# the host entry's limit, for an authenticated session
fio_json host hostvol "${rr[@]}" --hostname=h1 "--keyfile=$TEST_DIR/h1.key"
v=$(field host read iops)
echo "host h1 (iops=400): $v IOPS"
within "$v" 400 10 || fail "host iops=400 measured $v IOPS"

# throttled I/O waits and never fails: verified writes through the limit
fio_json verify lim --rw=randwrite --bs=4k --iodepth=16 --size=4M \
	--verify=crc32c --verify_state_save=0
echo "verified writes through iops=500: no error"

# ---- a neighbour on the same worker -------------------------------------
ratios=()
rounds=${RBLK_QOS_ROUNDS:-3}
for round in $(seq "$rounds"); do
	fio_json free_alone free "${rr[@]}" --runtime=3
	alone=$(field free_alone read iops)
	# in the background without fio_json: a failing subshell would run
	# the test's cleanup (and stop the target) under the foreground fio
	# the throttled job waits on events (--poll=event): its spin would
	# take CPU from the neighbour's fio on a 2-CPU machine (the TCG
	# guest measured 0.478 with it), which is not what QoS does to it
	timeout 60 fio --name=lim_bg "--ioengine=external:$engine" \
		"--uri=$RBLK_TARGET_URL/lim" --size=64M "${rr[@]}" --runtime=5 \
		--poll=event --output="$TEST_DIR/lim_bg.out" &
	bg=$!
	sleep 1
	fio_json free_beside free "${rr[@]}" --runtime=3
	wait "$bg" || { cat "$TEST_DIR/lim_bg.out"; fail "limited fio beside the free one failed"; }
	beside=$(field free_beside read iops)
	ratios+=("$(python3 -c "print(round($beside / $alone, 3))")")
done
med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
echo "free export beside a limited one: ${ratios[*]} of its rate alone (median $med)"
python3 -c "import sys; sys.exit(0 if $med >= 0.5 else 1)" ||
	fail "a limited export starved its neighbour (median ratio $med)"

# ---- a live change -------------------------------------------------------
t0=$(date +%s%N)
tmo 60 fio --name=live "--ioengine=external:$engine" \
	"--uri=$RBLK_TARGET_URL/live" --size=64M "${rr[@]}" --ramp_time=0 \
	--runtime=5 --write_iops_log="$TEST_DIR/live" --log_avg_msec=250 \
	--log_unix_epoch=1 \
	--output="$TEST_DIR/live.out" &
fpid=$!
# fio may take seconds to start (rdma in a TCG guest): change the limit
# 1.5 s after its session is logged in, so windows before it exist
for _ in $(seq 200); do
	ctl list-sessions --export live -o json | grep -q '"state": *"live"' && break
	sleep 0.1
done
sleep 1.5
tpre=$(date +%s%N)
out=$(ctl set-qos live iops=1500)
t1=$(date +%s%N)
echo "$out"
grep -q "export live: iops=1500 burst_ms=100" <<<"$out" || fail "set-qos said: $out"
wait_pid 60 "$fpid" || { cat "$TEST_DIR/live.out"; fail "fio across the live change"; }
python3 - "$TEST_DIR"/live_iops*.log "$((t1 / 1000000))" \
	"$((tpre / 1000000))" <<'EOF' || fail "the live change did not take effect within 1 s"
import sys
rows = [l.split(",") for l in open(sys.argv[1]) if l.strip()]
# the change is in force from some moment between asking (pre) and the
# answer (change): windows wholly before pre are held to the old limit,
# the new rate must show within 1 s of the answer
change, pre = int(sys.argv[2]), int(sys.argv[3])
# (Unix time in ms, IOPS of a 250 ms window): the stamp is taken as the
# window's start for "before" and as its end for "after", the stricter
pts = [(int(r[0]), int(r[1])) for r in rows]
# (a 250 ms window may also hold the bucket's burst, 50 I/Os, saved while
# the client was slow: 500 IOPS + 50 / 0.25 s)
before = [v for t, v in pts if pts[0][0] + 500 <= t and t + 250 <= pre]
after = [t for t, v in pts if t > change and v >= 1350]
print("before the change: %s IOPS; first 250 ms at >= 1350 IOPS %s ms after the answer"
      % (before, after[0] - change if after else None))
ok = before and after and after[0] - change <= 1000 and all(v <= 500 * 1.1 + 50 / 0.25 for v in before)
sys.exit(0 if ok else 1)
EOF

# ---- stats and /metrics ---------------------------------------------------
ctl stats live | tee "$TEST_DIR/stats.txt" | grep -q "qos: iops=1500 burst_ms=100; throttled [1-9][0-9]* commands" ||
	{ cat "$TEST_DIR/stats.txt"; fail "ctl stats shows no QoS"; }
ctl stats -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
e = {x["name"]: x for x in d["exports"]}
assert e["live"]["qos"]["limits"]["iops"] == 1500, e["live"]["qos"]
assert e["lim"]["qos"]["throttled_seconds"] > 0, e["lim"]["qos"]
assert e["free"]["qos"]["limits"]["iops"] == 0
h = {x["host"]: x for x in d["hosts"]}
assert h["h1"]["limits"]["iops"] == 400 and h["h1"]["throttled_commands"] > 0, h
' || fail "ctl -o json stats lacks the QoS limits or throttled time"
curl -sf "http://127.0.0.1:$mport/metrics" >"$TEST_DIR/metrics.txt" ||
	fail "GET /metrics failed"
grep -q '^rblk_qos_limit{export="live",kind="iops"} 1500$' "$TEST_DIR/metrics.txt" &&
	grep -q '^rblk_qos_limit{host="h1",kind="iops"} 400$' "$TEST_DIR/metrics.txt" &&
	grep -Eq '^rblk_qos_throttled_seconds_total\{export="lim"\} [0-9.]*[1-9]' "$TEST_DIR/metrics.txt" ||
	{ grep qos "$TEST_DIR/metrics.txt"; fail "/metrics lacks the QoS series"; }
# refused with a clear error (and exit 1)
out=$(ctl set-qos nosuch iops=1 2>&1) && fail "set-qos on a missing export succeeded"
grep -q "no export named 'nosuch'" <<<"$out" ||
	fail "set-qos on a missing export gave no clear error: $out"
out=$(ctl set-qos lim iopz=1 2>&1) && fail "set-qos with a bad key succeeded"
grep -q "unknown key 'iopz'" <<<"$out" ||
	fail "set-qos with a bad key gave no clear error: $out"
ctl set-qos lim off | grep -q "export lim: none" || fail "set-qos off"
echo "ctl stats, /metrics and set-qos show and change the limits"
