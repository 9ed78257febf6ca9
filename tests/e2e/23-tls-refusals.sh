#!/usr/bin/env bash
# TLS credentials, right and wrong, while a TLS client verifies data
# beside them (rblk nbd --tls, nbdcopy write/read/compare in a loop):
#   - X.509: a client that trusts the target's CA moves data (fio verify
#     through the engine), anonymously and with a client certificate
#     (CN alpha) that the target maps to host alpha;
#   - refused, each with a clear message from the client and a line in
#     the target's log: a wrong PSK (another secret), an unknown PSK
#     identity, a target certificate from another CA, an expired target
#     certificate, a client certificate from another CA, a client
#     certificate naming another host than the login;
#   - a target without TLS (--tls off) refuses a TLS client at once.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires certtool nbdcopy truncate
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE
cd "$TEST_DIR"

for k in alpha wrong ghost; do
	head -c 32 /dev/urandom | base64 >$k.key
	chmod 600 $k.key
done

# ---- certificates: CA, CA2; target (127.0.0.1), expired target; clients
key() { certtool --generate-privkey --key-type=ecdsa --outfile "$1.key" 2>/dev/null; }
selfsign()
{
	key "$1"
	printf 'cn = "%s"\nca\ncert_signing_key\nexpiration_days = 30\n' "$1" >"$1.tpl"
	certtool --generate-self-signed --load-privkey "$1.key" \
		--template "$1.tpl" --outfile "$1.pem" 2>/dev/null
}
# sign NAME CA TEMPLATE-LINES
sign()
{
	key "$1"
	printf '%b' "$3" >"$1.tpl"
	certtool --generate-certificate --load-privkey "$1.key" \
		--load-ca-certificate "$2.pem" --load-ca-privkey "$2.key" \
		--template "$1.tpl" --outfile "$1.pem" 2>/dev/null
}
selfsign ca
selfsign ca2
srv='cn = "target"\nip_address = "127.0.0.1"\ntls_www_server\nsigning_key\n'
sign srv ca "${srv}expiration_days = 30\n"
sign old ca "${srv}activation_date = \"2020-01-01 00:00:00 UTC\"\nexpiration_date = \"2020-02-01 00:00:00 UTC\"\n"
sign alpha-cert ca 'cn = "alpha"\ntls_www_client\nsigning_key\nexpiration_days = 30\n'
sign rogue-cert ca2 'cn = "alpha"\ntls_www_client\nsigning_key\nexpiration_days = 30\n'
for f in ca srv old alpha-cert rogue-cert; do
	[ -s $f.pem ] || fail "certtool did not make $f.pem"
done

truncate -s 32M vol.img open.img
start_target --host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--tls-cert "$TEST_DIR/srv.pem" --tls-key "$TEST_DIR/srv.key" \
	--tls-ca "$TEST_DIR/ca.pem" \
	--export "vol=$TEST_DIR/vol.img,allow=alpha,tls=required" \
	--export "open=$TEST_DIR/open.img,allow=any,tls=required"
URL=$RBLK_TARGET_URL
auth=(--host-name alpha --key-file "$TEST_DIR/alpha.key")

# ---- a verified client beside everything (PSK) ----------------------------
start_nbd "$URL/vol" "$TEST_DIR/vol.sock" --tls "${auth[@]}"
start_verifier "$NBD_URI" 2

# fio verify through the engine over X.509
xfio()
{
	local name=$1
	shift
	tmo 90 fio --name="$name" "--ioengine=external:$engine" "$@" \
		--tls_ca="$TEST_DIR/ca.pem" --rw=randwrite --bs=16k --size=4M \
		--iodepth=8 --verify=crc32c --verify_state_save=0 \
		--output="$TEST_DIR/$name.fio" ||
		{ cat "$TEST_DIR/$name.fio"; tail -n 20 "$RBLK_TARGET_LOG"; fail "fio $name over X.509"; }
	grep -q "err= 0" "$TEST_DIR/$name.fio" ||
		{ cat "$TEST_DIR/$name.fio"; fail "fio $name: errors"; }
	echo "fio verify over X.509 ($name): passed"
}
xfio anon --uri="$URL/open" --hostname=anyhost
# past the verifier's 2 MiB at the start of vol
xfio certified --uri="$URL/vol" --offset=16M --hostname=alpha \
	--keyfile="$TEST_DIR/alpha.key" --tls_cert="$TEST_DIR/alpha-cert.pem" \
	--tls_key="$TEST_DIR/alpha-cert.key"

# refused CLIENT-PATTERN TARGET-PATTERN ARGS...: rblk info exits 1 saying
# CLIENT-PATTERN, and a new target log line says TARGET-PATTERN
refused()
{
	local cpat=$1 tpat=$2 log=${TLOG:-$RBLK_TARGET_LOG} before
	shift 2
	before=$(wc -l <"$log")
	expect_refusal 20 1 "$cpat" "$RBLK_BIN" info "$@"
	for ((i = 0; i < 40; i++)); do
		tail -n +"$((before + 1))" "$log" | grep -qE -- "$tpat" && return 0
		sleep 0.05
	done
	fail "target log has no '$tpat' after: $*"
}

refused "TLS handshake with .* failed: the target refused our pre-shared key" \
	"TLS handshake failed: PSK identity 'rblk1 alpha'" \
	"$URL/vol" --tls --host-name alpha --key-file "$TEST_DIR/wrong.key"
refused "TLS handshake with .* failed" \
	"TLS handshake failed: unknown PSK identity 'rblk1 ghost'" \
	"$URL/vol" --tls --host-name ghost --key-file "$TEST_DIR/ghost.key"
refused "TLS handshake with .* failed: the peer's certificate is not trusted" \
	"TLS handshake failed: the peer refused it" \
	"$URL/open" --tls-ca "$TEST_DIR/ca2.pem" --host-name anyhost
refused "TLS handshake with .* failed: the peer refused it \(alert" \
	"TLS handshake failed" \
	"$URL/open" --tls-ca "$TEST_DIR/ca.pem" --host-name anyhost \
	--tls-cert "$TEST_DIR/rogue-cert.pem" --tls-key "$TEST_DIR/rogue-cert.key"
refused "host 'beta' .*not allowed|authentication failed" \
	"host 'beta' logged in over a TLS session proven by certificate 'alpha'" \
	"$URL/open" --tls-ca "$TEST_DIR/ca.pem" --host-name beta \
	--tls-cert "$TEST_DIR/alpha-cert.pem" --tls-key "$TEST_DIR/alpha-cert.key"

# an expired target certificate, and a target that takes no TLS
main_log=$RBLK_TARGET_LOG
start_target --tls-cert "$TEST_DIR/old.pem" --tls-key "$TEST_DIR/old.key" \
	--export "open=$TEST_DIR/open.img,allow=any"
TLOG=$RBLK_TARGET_LOG refused "TLS handshake with .* failed: the peer's certificate is not trusted: .*expired" \
	"TLS handshake failed: the peer refused it" \
	"$RBLK_TARGET_URL/open" --tls-ca "$TEST_DIR/ca.pem" --host-name anyhost
start_target --tls off --export "open=$TEST_DIR/open.img,allow=any"
TLOG=$RBLK_TARGET_LOG refused "TLS handshake with .* failed: the peer closed the connection" \
	"refusing a TLS handshake: this target does not take TLS" \
	"$RBLK_TARGET_URL/open" --tls-ca "$TEST_DIR/ca.pem" --host-name anyhost

stop_verifier
grep -q "connection failed\|login refused" "$main_log" &&
	grep "connection failed\|login refused" "$main_log" | head -5
true
