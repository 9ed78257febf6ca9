#!/usr/bin/env bash
# TLS 1.3 on tcp:// with a PSK derived from the host's secret (user-space
# records: this host's kernel has no kTLS; tests/vm/tests/54-tls-ktls.sh
# runs the kernel's):
#   - tcpdump of loopback while fio writes a known pattern through the
#     engine over TLS shows none of it; the same capture of a plaintext
#     session shows it (so the check can fail);
#   - fio verify through the engine over TLS; `rblk nbd --tls` moves data
#     both ways (nbdcopy, sha256 compared); `rblk info` and `rblk
#     discover` with --tls;
#   - `ctl list-sessions` says tls=user for a TLS session, off for a
#     plaintext one;
#   - a plaintext login to an export with tls=required is refused with
#     a message on both sides that says TLS is required.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires tcpdump truncate nbdcopy sha256sum
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE

head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
chmod 600 "$TEST_DIR/alpha.key"
truncate -s 32M "$TEST_DIR/sec.img" "$TEST_DIR/open.img"
start_target --host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--export "sec=$TEST_DIR/sec.img,allow=alpha,tls=required" \
	--export "open=$TEST_DIR/open.img,allow=any"
grep -q "TLS 1.3 on tcp listeners" "$RBLK_TARGET_LOG" ||
	fail "target did not say it takes TLS"
auth=(--host-name alpha --key-file "$TEST_DIR/alpha.key")
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"; }

# capture NAME FIO-ARGS...: fio writes 4 MiB of the canary pattern while
# tcpdump records loopback traffic of the target's port into NAME.pcap
canary=rblk-tls-canary-7f3e
capture()
{
	local name=$1 i
	shift
	# a 32 MiB buffer: loopback bursts of 64 KiB packets overflow the
	# default 2 MiB one, and a dropped packet is a byte not checked
	tcpdump -i lo -s 0 -B 32768 -U -w "$TEST_DIR/$name.pcap" \
		"tcp port $RBLK_PORT" >"$TEST_DIR/$name.tcpdump" 2>&1 &
	local tpid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q "listening on" "$TEST_DIR/$name.tcpdump" && break
		sleep 0.05
	done
	grep -q "listening on" "$TEST_DIR/$name.tcpdump" ||
		fail "tcpdump did not start: $(cat "$TEST_DIR/$name.tcpdump")"
	tmo 60 fio --name="$name" "--ioengine=external:$engine" \
		--rw=write --bs=64k --size=4M --iodepth=8 \
		--buffer_pattern="\"$canary\"" "$@" \
		--output="$TEST_DIR/$name.fio" ||
		{ cat "$TEST_DIR/$name.fio"; fail "fio $name"; }
	grep -q "err= 0" "$TEST_DIR/$name.fio" ||
		{ cat "$TEST_DIR/$name.fio"; fail "fio $name reported errors"; }
	sleep 0.5 # -U: packets are written as they come; let the last land
	kill "$tpid"
	wait "$tpid" 2>/dev/null || true
	[ -s "$TEST_DIR/$name.pcap" ] || fail "tcpdump captured nothing"
}

capture tls --uri="$RBLK_TARGET_URL/sec" --tls=1 --hostname=alpha \
	--keyfile="$TEST_DIR/alpha.key"
n=$(grep -c -a -- "$canary" "$TEST_DIR/tls.pcap" || true)
[ "$n" -eq 0 ] || fail "the canary shows $n times in the TLS capture"
bytes=$(stat -c %s "$TEST_DIR/tls.pcap")
# most of fio's 4 MiB must have been captured for the canary's absence to
# mean anything (tcpdump may still drop a few packets on a busy host: its
# count is in tls.tcpdump)
[ "$bytes" -gt $((3 << 20)) ] ||
	fail "the TLS capture holds $bytes bytes: fio's 4 MiB did not pass ($(grep dropped "$TEST_DIR/tls.tcpdump"))"
echo "TLS: $bytes bytes captured, canary absent"
capture plain --uri="$RBLK_TARGET_URL/open" --hostname=plain-host
n=$(grep -c -a -- "$canary" "$TEST_DIR/plain.pcap" || true)
[ "$n" -gt 0 ] || fail "the canary is missing from the plaintext capture"
echo "plaintext: canary found in $n packets (the check can fail)"
cmp -s -n 4096 "$TEST_DIR/sec.img" "$TEST_DIR/open.img" ||
	fail "the TLS session did not write the pattern that plaintext did"

# ---- fio verify through the engine over TLS --------------------------------
tmo 90 fio --name=tlsverify "--ioengine=external:$engine" \
	--uri="$RBLK_TARGET_URL/sec" --tls=1 --hostname=alpha \
	--keyfile="$TEST_DIR/alpha.key" --rw=randwrite --bsrange=4k-128k \
	--size=8M --iodepth=16 --verify=crc32c --verify_state_save=0 \
	--output="$TEST_DIR/verify.fio" ||
	{ cat "$TEST_DIR/verify.fio"; fail "fio verify over TLS"; }
grep -q "err= 0" "$TEST_DIR/verify.fio" ||
	{ cat "$TEST_DIR/verify.fio"; fail "fio verify over TLS: errors"; }
echo "fio verify over TLS: passed"

# ---- rblk nbd --tls, and what list-sessions says ---------------------------
start_nbd "$RBLK_TARGET_URL/sec" "$TEST_DIR/sec.sock" --tls "${auth[@]}"
make_random "$TEST_DIR/src.img" 8
tmo 60 nbdcopy "$TEST_DIR/src.img" "$NBD_URI"
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/back.img"
cmp -s -n $((8 << 20)) "$TEST_DIR/src.img" "$TEST_DIR/back.img" ||
	fail "data read back through rblk nbd --tls differs"
cmp -s -n $((8 << 20)) "$TEST_DIR/src.img" "$TEST_DIR/sec.img" ||
	fail "the exported file does not hold what rblk nbd --tls wrote"
echo "rblk nbd --tls: 8 MiB round trip verified"
ctl list-sessions -o json >"$TEST_DIR/sessions.json"
jq -e '[.sessions[] | select(.export == "sec" and .tls == "user")] | length > 0' \
	"$TEST_DIR/sessions.json" >/dev/null ||
	fail "list-sessions does not show tls=user: $(cat "$TEST_DIR/sessions.json")"
ctl list-sessions | grep -E " sec .* user$" >/dev/null ||
	fail "list-sessions text has no TLS column: $(ctl list-sessions)"

# ---- info and discover over TLS -------------------------------------------
tmo 20 "$RBLK_BIN" info "$RBLK_TARGET_URL/sec" --tls "${auth[@]}" \
	>"$TEST_DIR/info.out" || fail "rblk info --tls: $(cat "$TEST_DIR/info.out")"
grep -q 33554432 "$TEST_DIR/info.out" || fail "rblk info --tls: no size"
tls_conns() { grep -c "TLS 1.3 by PSK, records in user space" "$RBLK_TARGET_LOG" || true; }
before=$(tls_conns)
tmo 20 "$RBLK_BIN" discover "$RBLK_TARGET_URL" --tls --host-name alpha \
	--key-file "$TEST_DIR/alpha.key" >"$TEST_DIR/disc.out" ||
	fail "rblk discover --tls: $(cat "$TEST_DIR/disc.out")"
# discovery is not authenticated: it lists the exports open to any host
grep -q "^open " "$TEST_DIR/disc.out" ||
	fail "rblk discover --tls does not list open: $(cat "$TEST_DIR/disc.out")"
[ "$(tls_conns)" -gt "$before" ] || fail "rblk discover --tls did not use TLS"

# ---- plaintext against tls=required ---------------------------------------
expect_refusal 20 1 "export 'sec' requires TLS" \
	"$RBLK_BIN" info "$RBLK_TARGET_URL/sec" "${auth[@]}"
grep -q "login refused: export sec requires TLS; host 'alpha' logged in without it" \
	"$RBLK_TARGET_LOG" || fail "the target did not log the plaintext refusal"
# the TLS session served on meanwhile
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/back2.img"
cmp -s -n $((8 << 20)) "$TEST_DIR/src.img" "$TEST_DIR/back2.img" ||
	fail "the TLS session lost its data"
echo "plaintext login to tls=required: refused on both sides"
