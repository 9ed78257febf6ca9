#!/usr/bin/env bash
# The Prometheus endpoint (libmicrohttpd) against the requests that broke
# the hand-written server (issue 15, point 9), while a client moves data
# through the target and checks it:
#  - 20 idle connections are open: a scrape still answers (the old server
#    served one connection at a time, 2 s each: 40 s), and so does a
#    login with a verified round trip;
#  - "GET /metrics" followed by stray bytes (blank lines, NULs, garbage)
#    answers 200 with the metrics, then closes; a request line without a version
#    ("GET /metrics" + "\n\n") gets 400; a NUL inside the request line
#    400; a NUL in a header value is harmless;
#  - what Prometheus sends (Accept with openmetrics, Accept-Encoding gzip,
#    its scrape-timeout header) and curl's keep-alive (two scrapes on one
#    connection) get the metrics; HEAD gets the headers; POST 405;
#  - a client sending nothing after a NUL is cut at its deadline.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires curl python3 cmp
requires_built

mport=$(free_port)
start_target --export "vol0=ram:16M" --metrics "$mport"
base=tcp://127.0.0.1:$RBLK_PORT

python3 - "$mport" "$TEST_DIR" <<'EOF_PY' &
import socket, sys, time
port, d = int(sys.argv[1]), sys.argv[2]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
open(d + "/held", "w").close()
time.sleep(60)
EOF_PY
hold_pid=$!
cleanup_fn stop_pid "$hold_pid"
for ((i = 0; i < 100; i++)); do [ -e "$TEST_DIR/held" ] && break; sleep 0.1; done
[ -e "$TEST_DIR/held" ] || fail "could not open the idle connections"
tmo 10 curl -sf "http://127.0.0.1:$mport/metrics" >"$TEST_DIR/m1" ||
	fail "no scrape while 20 idle connections are open"
grep -q '^rblk_sessions{export="vol0"} 0$' "$TEST_DIR/m1" ||
	fail "scrape without the vol0 gauge: $(head -c 300 "$TEST_DIR/m1")"
tmo 10 "$RBLK_BUILD/tests/rblk_libtest" rw "$base/vol0" >/dev/null ||
	fail "login and verified I/O while 20 metrics connections idle"

# raw requests: first line of each answer
python3 - "$mport" >"$TEST_DIR/raw.txt" <<'EOF_PY'
import socket, sys
port = int(sys.argv[1])

def answers(data, wait=8):
    """Every status line the server sends before it closes."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        out += b"\nTIMEOUT"
    except ConnectionResetError:
        out += b"\nRESET"
    lines = [l.split(b" ", 2)[1].decode() for l in out.split(b"\r\n")
             if l.startswith(b"HTTP/1.")]
    body_ok = b"\nrblk_sessions{" in out
    tail = "timeout" if out.endswith(b"TIMEOUT") else "closed"
    return ",".join(lines) or "none", "metrics" if body_ok else "-", tail

prom = (b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"User-Agent: Prometheus/2.45.0\r\n"
        b"Accept: application/openmetrics-text;version=1.0.0,"
        b"application/openmetrics-text;version=0.0.1;q=0.75,"
        b"text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
        b"Accept-Encoding: gzip\r\n"
        b"X-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
        b"Connection: close\r\n\r\n")
cases = [
    ("stray-newlines", b"GET /metrics HTTP/1.0\r\n\r\n\n\n"),
    ("stray-nuls", b"GET /metrics HTTP/1.0\r\n\r\n\0\0\0"),
    ("stray-garbage", b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nxyz\0\r\n\r\n"),
    ("no-version", b"GET /metrics\n\n"),
    ("nul-request-line", b"GET /metrics HTTP/1.1\0\r\nHost: a\r\n\r\n"),
    ("nul-header", b"GET /metrics HTTP/1.0\r\nX-A: \0b\r\n\r\n"),
    ("prometheus", prom),
    ("head", b"HEAD /metrics HTTP/1.0\r\n\r\n"),
    ("post", b"POST /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\nab"),
    ("other-path", b"GET /other HTTP/1.0\r\n\r\n"),
    ("leading-nul", b"\0GET /metrics HTTP/1.0\r\n\r\n"),
]
for name, data in cases:
    print(name, *answers(data))
EOF_PY
cat "$TEST_DIR/raw.txt"
expect()
{
	grep -qx "$1" "$TEST_DIR/raw.txt" || fail "expected '$1', got '$(grep "^${1%% *} " "$TEST_DIR/raw.txt")'"
}
expect "stray-newlines 200 metrics closed"
expect "stray-nuls 200 metrics closed"
expect "stray-garbage 200 metrics closed"
expect "no-version 400 - closed"
expect "nul-request-line 400 - closed"
expect "nul-header 200 metrics closed"
expect "prometheus 200 metrics closed"
expect "head 200 - closed"
expect "post 405 - closed"
expect "other-path 404 - closed"
# libmicrohttpd finds no request line after a leading NUL: cut at the
# deadline (2 s), well before the client's 8 s
expect "leading-nul none - closed"

# curl: two scrapes on one keep-alive connection
tmo 10 curl -sf -o "$TEST_DIR/k1" -o "$TEST_DIR/k2" \
	"http://127.0.0.1:$mport/metrics" "http://127.0.0.1:$mport/metrics" \
	-w '%{num_connects}\n' >"$TEST_DIR/conns" || fail "two scrapes with curl"
[ "$(sed -n 2p "$TEST_DIR/conns")" = 0 ] ||
	fail "curl's second scrape did not reuse the connection: $(xargs <"$TEST_DIR/conns")"
grep -q '^rblk_ops_total{export="vol0",op="write"} [1-9]' "$TEST_DIR/k2" ||
	fail "second scrape does not count the verified writes"

# the data written while all this happened reads back
tmo 10 "$RBLK_BUILD/tests/rblk_libtest" rw "$base/vol0" >/dev/null ||
	fail "verified I/O after the malformed requests"
kill -0 "$RBLK_TARGET_PID" || fail "rblk-target died"
echo "PASS: $TEST_NAME"
