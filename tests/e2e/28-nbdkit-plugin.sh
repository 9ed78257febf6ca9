#!/usr/bin/env bash
# The nbdkit plugin (build/nbdkit-rblk-plugin.so) on a file export over tcp:
# nbdkit's own checks (--dump-plugin, nbdinfo of what is offered), then
# nbdkit --tls=require --tls-psk: a random 32 MiB image (8 over rdma)
# copied in and out with nbdcopy over TLS (multi-conn), the source, the
# copy back and the target's file compared by sha256; a plaintext client
# and a client with the wrong key are refused while the TLS client goes
# on. A filter (blocksize) serves a misaligned write that the plugin alone
# refuses.
# The keeper: with the target's idle_timeout at 2 s and keepalive=0.5, an
# idle nbdkit keeps its session (no "idle_timeout" drop, data still read).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdkit nbdinfo nbdcopy psktool sha256sum truncate python3
requires_built
# Over rdma (guest test 57, where time is dear) only what depends on the
# transport: start-up, the daemonised TLS round trip, the refusals and
# the keeper. What clients are offered and the filter are nbdkit's
# business, the same on every transport: checked here on the host.
full=1 mib=32
[ "${RBLK_TEST_SCHEME:-tcp}" = rdma ] && full=0 mib=8
[ $full = 0 ] || requires_nbdsh
plugin=$RBLK_BUILD/nbdkit-rblk-plugin.so
if [ ! -f "$plugin" ]; then
	pkg-config --exists nbdkit 2>/dev/null ||
		skip "nbdkit plugin not built (no nbdkit-plugin-dev)"
	fail "$plugin missing: run make"
fi

truncate -s "${mib}M" "$TEST_DIR/export.img"
make_random "$TEST_DIR/src.img" "$mib"
start_target --idle-timeout 2 --export "vol0=$TEST_DIR/export.img"
url=$RBLK_TARGET_URL/vol0

# ---- nbdkit's checks -------------------------------------------------------
nbdkit --dump-plugin "$plugin" >"$TEST_DIR/dump" 2>&1 ||
	{ cat "$TEST_DIR/dump"; fail "nbdkit --dump-plugin"; }
for want in '^name=rblk$' '^thread_model=parallel$' '^rblk_version=' \
	'^has_block_size=1$' '^has_can_multi_conn=1$' '^has_zero=1$' \
	'^has_after_fork=1$'; do
	grep -q "$want" "$TEST_DIR/dump" ||
		fail "--dump-plugin lacks $want: $(tr '\n' ' ' <"$TEST_DIR/dump")"
done
echo "dump-plugin: $(grep -E '^(name|version|thread_model|rblk_version)=' "$TEST_DIR/dump" | tr '\n' ' ')"

# A bad URL stops nbdkit at start-up with librblk's reason.
expect_refusal 30 1 "export 'nosuch' not found" \
	nbdkit -f -U "$TEST_DIR/bad.sock" "$plugin" "url=$RBLK_TARGET_URL/nosuch"

if [ $full = 1 ]; then
	# nbdinfo through a captive nbdkit: what a client is offered
	# shellcheck disable=SC2016 # $uri is nbdkit's, for the --run command
	tmo 60 nbdkit -U - "$plugin" "$url" queues=2 keepalive=0.5 \
		--run 'nbdinfo --json "$uri"' >"$TEST_DIR/info.json" ||
		fail "nbdinfo through the plugin"
	python3 - "$TEST_DIR/info.json" <<-'PY' || fail "nbdinfo: $(cat "$TEST_DIR/info.json")"
	import json, sys
	e = json.load(open(sys.argv[1]))["exports"][0]
	want = {"export-size": 32 << 20, "is_read_only": False, "can_flush": True,
	        "can_fua": True, "can_trim": True, "can_zero": True,
	        "can_multi_conn": True, "block_size_minimum": 512,
	        "block_size_preferred": 4096, "block_size_maximum": 32 << 20}
	bad = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
	if bad:
	    sys.exit(f"nbdinfo: (got, want): {bad}")
	print("nbdinfo:", {k: e[k] for k in want})
	PY
fi

# ---- TLS round trip ---------------------------------------------------------
psk=$TEST_DIR/keys.psk
tmo 10 psktool -u alice -p "$psk" >/dev/null
tmo 10 psktool -u alice -p "$TEST_DIR/other.psk" >/dev/null
# Daemonised (no -f): the session must be opened after nbdkit's fork
# (.after_fork), as verbs resources do not survive one; -v keeps stderr.
for _ in 1 2 3 4 5; do
	port=$(free_port)
	rm -f "$TEST_DIR/nbdkit.pid"
	rc=0
	tmo 60 nbdkit -v --log=stderr --tls=require --tls-psk="$psk" \
		-i 127.0.0.1 -p "$port" --pidfile "$TEST_DIR/nbdkit.pid" \
		"$plugin" "$url" queues=4 keepalive=0.5 \
		>"$TEST_DIR/nbdkit.log" 2>&1 || rc=$?
	# (the pidfile comes from the child, once it listens)
	for ((i = 0; rc == 0 && i < 100; i++)); do
		[ -s "$TEST_DIR/nbdkit.pid" ] && break
		sleep 0.05
	done
	[ $rc -eq 0 ] && [ -s "$TEST_DIR/nbdkit.pid" ] && break
	grep -qi "in use" "$TEST_DIR/nbdkit.log" && continue
	cat "$TEST_DIR/nbdkit.log"
	fail "nbdkit --tls=require did not start (exit $rc)"
done
[ -s "$TEST_DIR/nbdkit.pid" ] || fail "nbdkit: no free port after 5 attempts"
nbdkit_pid=$(cat "$TEST_DIR/nbdkit.pid")
cleanup_fn stop_pid "$nbdkit_pid"
tls_uri="nbds://alice@127.0.0.1:$port/?tls-psk-file=$psk"

tmo 120 nbdcopy --connections=4 "$TEST_DIR/src.img" "$tls_uri"
tmo 120 nbdcopy --connections=4 "$tls_uri" "$TEST_DIR/back.img"
src=$(sha "$TEST_DIR/src.img")
back=$(sha "$TEST_DIR/back.img")
disk=$(sha "$TEST_DIR/export.img")
echo "src  $src"
echo "back $back"
echo "disk $disk"
[ "$src" = "$back" ] || fail "copy back over TLS differs from the source"
[ "$src" = "$disk" ] || fail "the target's file differs from the source"

# A plaintext client and one with the wrong key are refused; TLS goes on.
# (libnbd words nbdkit's NBD_REP_ERR_TLS_REQD as "Operation not supported";
# nbdkit -v names it)
expect_refusal 30 1 "opt_go request: Operation not supported" \
	nbdinfo "nbd://127.0.0.1:$port/"
grep -q "replying to NBD_OPT_GO with NBD_REP_ERR_TLS_REQD" "$TEST_DIR/nbdkit.log" ||
	fail "nbdkit did not refuse the plaintext client for want of TLS"
expect_refusal 30 1 "gnutls_handshake" \
	nbdinfo "nbds://alice@127.0.0.1:$port/?tls-psk-file=$TEST_DIR/other.psk"
grep -q "error: gnutls_handshake" "$TEST_DIR/nbdkit.log" ||
	fail "nbdkit logged no failed handshake for the wrong key"
out=$(tmo 30 nbdinfo --size "$tls_uri")
[ "$out" = $((mib << 20)) ] || fail "nbdinfo --size over TLS: '$out'"

# ---- the keeper: an idle server keeps its session ------------------------------
sleep 4.5
rm -f "$TEST_DIR/back.img"
tmo 60 nbdcopy "$tls_uri" "$TEST_DIR/back.img"
[ "$(sha "$TEST_DIR/back.img")" = "$src" ] || fail "copy after 4.5 s idle differs"
! grep -q "idle_timeout" "$RBLK_TARGET_LOG" ||
	fail "the target dropped an idle session of the plugin: $(grep -m1 idle_timeout "$RBLK_TARGET_LOG")"
echo "idle 4.5 s (target idle_timeout 2 s): no session dropped"

if [ $full = 0 ]; then
	echo "PASS: $TEST_NAME (rdma: no nbdinfo flags, no filter)"
	exit 0
fi
# ---- a filter: blocksize turns a misaligned write into aligned ones ------------
# (libnbd's own alignment check off, so the request reaches the server)
prog='h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
try:
    h.pwrite(b"abc", 1000001)
    print("accepted")
except nbd.Error as e:
    print("refused:", e.string)'
out=$(tmo 60 nbdkit -U - "$plugin" "$url" keepalive=0.5 --run "nbdsh -u \"\$uri\" -c '$prog'")
echo "plugin alone: $out"
grep -q "^refused:" <<<"$out" || fail "misaligned write not refused: $out"
out=$(tmo 60 nbdkit -U - --filter=blocksize "$plugin" "$url" minblock=512 \
	keepalive=0.5 --run "nbdsh -u \"\$uri\" -c '$prog'")
[ "$out" = accepted ] || fail "through the blocksize filter: $out"
[ "$(dd if="$TEST_DIR/export.img" bs=1 skip=1000001 count=3 2>/dev/null)" = abc ] ||
	fail "the filtered misaligned write is not in the target's file"
echo "blocksize filter: misaligned write landed in the target's file"
echo "PASS: $TEST_NAME"
