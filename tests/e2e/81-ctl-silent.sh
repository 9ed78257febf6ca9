#!/usr/bin/env bash
# Silent clients of the control socket and the metrics endpoint delay
# nobody (issue 25 point 6), while a client verifies data beside them:
#
#   - ten control-socket clients that connect and never send a request
#     (reconnecting as soon as the target cuts them): every control
#     request is still answered within 0.5 s (on 044a766, one client at a
#     time for up to 2 s each: about 20 s);
#   - 200 metrics clients that connect and never send a request,
#     reconnecting as soon as they are cut: the median of five scrapes
#     takes under 0.4 s, none 2.5 s (on 044a766 0.8-3 s each:
#     libmicrohttpd's connection limit was full and the scrape waited in
#     the backlog for a silent client to be cut).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3 curl
requires_built
silent=$RBLK_ROOT/tests/e2e/rblk_silent.py
mport=$(free_port)
start_target --export v=ram:32M --metrics "tcp://127.0.0.1:$mport"
ctl=("$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET")
start_verifier "$RBLK_TARGET_URL/v" 8
now_ms() { date +%s%3N; }

# silent NAME KIND WHERE N: start N silent clients, wait until all are open
silent()
{
	local i
	python3 "$silent" "$2" "$3" "$4" "$TEST_DIR/stop.$1" >"$TEST_DIR/$1.out" 2>&1 &
	cleanup_fn touch "$TEST_DIR/stop.$1"
	for ((i = 0; i < 100; i++)); do
		grep -q "silent open=$4 " "$TEST_DIR/$1.out" && return 0
		sleep 0.1
	done
	cat "$TEST_DIR/$1.out"
	fail "$1: $4 silent clients did not open"
}

# ---- ten silent control clients -------------------------------------------
silent ctl unix "$RBLK_CTL_SOCKET" 10
sleep 0.5
# the round trip itself (connect, request, whole answer), without the
# start of a process that loads librbd: that alone takes 0.3-0.7 s here
ctl_rtt()
{
	python3 - "$RBLK_CTL_SOCKET" "$1" <<'PY'
import socket, sys, time
t0 = time.monotonic()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print("%d %s" % ((time.monotonic() - t0) * 1000, out.split(b"\n")[0].decode()))
PY
}
for cmd in list-sessions list-exports stats list-sessions stats; do
	read -r el status <<<"$(ctl_rtt "$cmd")"
	echo "ctl $cmd: $status in ${el} ms beside 10 silent control clients"
	[ "$status" = ok ] || fail "ctl $cmd: $status"
	[ "$el" -lt 500 ] || fail "ctl $cmd took $el ms beside 10 silent clients"
done
tmo 60 "${ctl[@]}" list-exports >"$TEST_DIR/ctl.list-exports" 2>&1 ||
	{ cat "$TEST_DIR/ctl.list-exports"; fail "ctl list-exports failed beside silent clients"; }
grep -q "^v " "$TEST_DIR/ctl.list-exports" || fail "list-exports does not list v"
sleep 2.5 # past their deadline: they were cut and came back
tail -1 "$TEST_DIR/ctl.out"
grep -q "reopened=[1-9]" "$TEST_DIR/ctl.out" || fail "the silent control clients were never cut"
touch "$TEST_DIR/stop.ctl"

# ---- 200 silent metrics clients --------------------------------------------
silent metrics tcp "$mport" 200
sleep 2.5
times=()
for i in 1 2 3 4 5; do
	out=$(tmo 30 curl -s -o "$TEST_DIR/m.$i" -w "%{http_code} %{time_total}" \
		"http://127.0.0.1:$mport/metrics") || fail "scrape $i failed"
	read -r code secs <<<"$out"
	echo "scrape $i: HTTP $code in $secs s beside 200 silent metrics clients"
	[ "$code" = 200 ] && grep -q '^rblk_ops_total{export="v"' "$TEST_DIR/m.$i" ||
		fail "scrape $i: HTTP $code, no metrics for v"
	ms=$(awk -v s="$secs" 'BEGIN { printf "%d", s * 1000 }')
	[ "$ms" -lt 2500 ] || fail "scrape $i took $ms ms"
	times+=("$ms")
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
echo "median scrape: $median ms"
[ "$median" -lt 400 ] || fail "the median scrape took $median ms"
tail -1 "$TEST_DIR/metrics.out"
touch "$TEST_DIR/stop.metrics"
stop_verifier
echo "PASS: $TEST_NAME"
