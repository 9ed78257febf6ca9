#!/usr/bin/env bash
# Authentication and per-export allow lists, over tcp here and over rdma
# (rdma_rxe) in the guest (tests/vm/tests/14-rdma-auth.sh runs this file
# with RBLK_TEST_SCHEME=rdma):
#   - the right secret logs in and moves data (nbdcopy, sha256 compared);
#   - wrong secret, unknown host, no secret, a host not in the allow list,
#     a command sent instead of the response, a reflected challenge and a
#     replayed response are each refused with
#     their exact error, and the target allocates no windows for any
#     of them (its debug line "windows allocated" does not appear);
#   - meanwhile the target keeps serving the verified client;
#   - an allow_ro grant logs in read-only: librblk refuses writes with
#     EROFS, and a raw WRITE command is answered READ_ONLY by the target;
#   - a key file readable by others is refused before connecting;
#   - a client that takes the challenge and never answers is dropped at
#     the 10 s login deadline (runs alongside the rest: the test takes
#     about 11 s).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires nbdcopy sha256sum
requires_built
RAW=$RBLK_BUILD/tests/rblk_rawclient
LIBTEST=$RBLK_BUILD/tests/rblk_libtest
[ -x "$RAW" ] && [ -x "$LIBTEST" ] ||
	fail "test helpers missing: make $RAW $LIBTEST"

mk_key()
{
	head -c 32 /dev/urandom | base64 >"$TEST_DIR/$1.key"
	chmod 600 "$TEST_DIR/$1.key"
}
for k in alpha beta delta wrong; do mk_key $k; done

make_random "$TEST_DIR/vol.img" 16
start_target --log-level debug --name tgt-e2e \
	--host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--host "beta:secret-file=$TEST_DIR/beta.key" \
	--host "delta:secret-file=$TEST_DIR/delta.key" \
	--export "vol=$TEST_DIR/vol.img,allow=alpha,allow_ro=beta"
URL=$RBLK_TARGET_URL/vol

registrations() { grep -c "windows allocated" "$RBLK_TARGET_LOG" || true; }

# a stalled handshake, timed in the background
"$RAW" stall "$URL" alpha "$TEST_DIR/alpha.key" >"$TEST_DIR/stall.out" 2>&1 &
stall_pid=$!

# ---- the right secret: a verified client that stays connected ----------
start_nbd "$URL" "$TEST_DIR/alpha.sock" --host-name alpha \
	--key-file "$TEST_DIR/alpha.key" --mutual-auth
grep -q "host 'alpha' authenticated" "$RBLK_TARGET_LOG" ||
	fail "target did not log alpha's authentication"
make_random "$TEST_DIR/src1.img" 16
tmo 60 nbdcopy "$TEST_DIR/src1.img" "$NBD_URI"
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/back1.img"
[ "$(sha "$TEST_DIR/back1.img")" = "$(sha "$TEST_DIR/src1.img")" ] ||
	fail "data read back through the authenticated session differs"
echo "right secret: 16 MiB round trip verified"

# ---- refusals, while the verified client writes in the background ------
make_random "$TEST_DIR/src2.img" 16
tmo 120 nbdcopy "$TEST_DIR/src2.img" "$NBD_URI" &
copy_pid=$!

before=$(registrations)
refused()
{
	local want=$1 out
	shift
	if out=$(tmo 30 "$RBLK_BIN" info "$URL" "$@" 2>&1); then
		fail "login with $* succeeded: $out"
	fi
	[ "$out" = "rblk info: $want" ] ||
		fail "with $*: got '$out', want 'rblk info: $want'"
	echo "refused as expected: $out"
}
refused "authentication failed: wrong secret or unknown host 'alpha'" \
	--host-name alpha --key-file "$TEST_DIR/wrong.key"
refused "authentication failed: wrong secret or unknown host 'gamma'" \
	--host-name gamma --key-file "$TEST_DIR/alpha.key"
refused "target requires authentication for host 'alpha'; give --key-file" \
	--host-name alpha
refused "target requires authentication for host 'nobody'; give --key-file" \
	--host-name nobody
refused "host 'delta' is not allowed to use export 'vol'" \
	--host-name delta --key-file "$TEST_DIR/delta.key"
out=$(tmo 30 "$RAW" reflect "$URL" alpha "$TEST_DIR/alpha.key") ||
	fail "reflected challenge: $out"
echo "$out"
[ "$out" = "reflected challenge refused: authentication failed" ] ||
	fail "reflected challenge: unexpected '$out'"
out=$(tmo 30 "$RAW" skip "$URL" alpha "$TEST_DIR/alpha.key") ||
	fail "skipping authentication: $out"
echo "$out"
[ "$out" = "command instead of AUTH_RESPONSE refused: message not valid in this state" ] ||
	fail "skipping authentication: unexpected '$out'"

wait "$copy_pid" || fail "the verified client's write failed during the refusals"
after=$(registrations)
[ "$after" = "$before" ] ||
	fail "windows allocated for refused logins ($before -> $after)"
grep -q "reflected or empty nonce" "$RBLK_TARGET_LOG" ||
	fail "target did not log the reflection"
grep -q "is not in export vol's allow list" "$RBLK_TARGET_LOG" ||
	fail "target did not log the allow-list refusal"

tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/back2.img"
[ "$(sha "$TEST_DIR/back2.img")" = "$(sha "$TEST_DIR/src2.img")" ] ||
	fail "data written during the refusals reads back differently"
echo "verified client kept working: second 16 MiB round trip verified"

# replay: the raw client logs in (one registration), then replays
out=$(tmo 30 "$RAW" replay "$URL" alpha "$TEST_DIR/alpha.key") ||
	fail "replay: $out"
echo "$out"
grep -qx "replayed response refused: authentication failed" <<<"$out" ||
	fail "replay: unexpected '$out'"
[ "$(registrations)" = $((after + 1)) ] ||
	fail "replayed response got windows allocated"

# ---- read-only grant ----------------------------------------------------
RBLK_HOST_NAME=beta RBLK_KEY_FILE=$TEST_DIR/beta.key \
	tmo 30 "$LIBTEST" ro "$URL" || fail "read-only grant through librblk"
out=$(tmo 30 "$RAW" rowrite "$URL" beta "$TEST_DIR/beta.key") ||
	fail "rowrite: $out"
echo "$out"
grep -qx "WRITE on a read-only grant refused: volume is read-only" <<<"$out" ||
	fail "rowrite: unexpected '$out'"

# ---- key file hygiene ----------------------------------------------------
chmod 644 "$TEST_DIR/wrong.key"
refused "secret file $TEST_DIR/wrong.key is accessible by group or others (mode 0644); chmod 600 it" \
	--host-name alpha --key-file "$TEST_DIR/wrong.key"

# ---- the fio engine (when built): keyfile= and mutual_auth= -------------
engine=$RBLK_FIO_ENGINE
if command -v fio >/dev/null && [ -f "$engine" ]; then
	tmo 60 fio --name=auth "--ioengine=external:$engine" "--uri=$URL" \
		--hostname=alpha "--keyfile=$TEST_DIR/alpha.key" --mutual_auth=1 \
		--rw=randwrite --bs=4k --size=4M --iodepth=8 --verify=crc32c \
		--verify_state_save=0 --output="$TEST_DIR/fio.out" ||
		{ cat "$TEST_DIR/fio.out"; fail "fio with the right key failed"; }
	grep -q "err= 0" "$TEST_DIR/fio.out" || fail "fio reported an error"
	if tmo 60 fio --name=auth "--ioengine=external:$engine" "--uri=$URL" \
		--hostname=alpha "--keyfile=$TEST_DIR/delta.key" --rw=read \
		--bs=4k --size=4M >"$TEST_DIR/fio.bad" 2>&1; then
		fail "fio with the wrong key succeeded"
	fi
	grep -qx "rblk: authentication failed: wrong secret or unknown host 'alpha'" \
		"$TEST_DIR/fio.bad" || { cat "$TEST_DIR/fio.bad"; fail "fio: wrong error"; }
	echo "fio engine: right key verified 4 MiB, wrong key refused"
	# put back what the last nbdcopy wrote, for the final comparison
	tmo 60 nbdcopy "$TEST_DIR/src2.img" "$NBD_URI"
else
	echo "fio engine not built: its authentication case skipped"
fi

wait "$stall_pid" || { cat "$TEST_DIR/stall.out"; fail "stalled handshake not dropped at the deadline"; }
cat "$TEST_DIR/stall.out"
grep -q "no login within 10 s" "$RBLK_TARGET_LOG" ||
	fail "target did not log the login deadline"

# ---- access lists changed live (rblk-target ctl set-hosts) --------------
ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"; }
ctl add-export open2 ram:1M >/dev/null
RBLK_URL_OPEN2=$RBLK_TARGET_URL/open2
tmo 30 "$RBLK_BIN" info "$RBLK_URL_OPEN2" --host-name nobody >/dev/null ||
	fail "open export refused an unknown host before set-hosts"
out=$(ctl set-hosts open2 --allow gamma 2>&1) &&
	fail "set-hosts accepted a host without a secret: $out"
echo "set-hosts refused: $out"
ctl set-hosts open2 --allow alpha
URL=$RBLK_URL_OPEN2 refused "target requires authentication for host 'nobody'; give --key-file" \
	--host-name nobody
tmo 30 "$RBLK_BIN" info "$RBLK_URL_OPEN2" --host-name alpha \
	--key-file "$TEST_DIR/alpha.key" >/dev/null ||
	fail "alpha refused after set-hosts --allow alpha"
URL=$RBLK_URL_OPEN2 refused "host 'delta' is not allowed to use export 'open2'" \
	--host-name delta --key-file "$TEST_DIR/delta.key"
ctl set-hosts open2 --open -o json | jq -e '.restricted == false' >/dev/null ||
	fail "set-hosts --open did not open the export"
tmo 30 "$RBLK_BIN" info "$RBLK_URL_OPEN2" --host-name nobody >/dev/null ||
	fail "open export refused an unknown host after set-hosts --open"
echo "set-hosts: access list replaced and cleared live"

# the volume holds exactly what the verified client wrote last
[ "$(sha "$TEST_DIR/vol.img")" = "$(sha "$TEST_DIR/src2.img")" ] ||
	fail "volume content differs from the last verified write"
echo "PASS: $TEST_NAME"
