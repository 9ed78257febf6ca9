#!/bin/bash
# TLS 1.3 on tcp:// with the kernel's record layer (kTLS: modprobe tls;
# the host's kernel has none, so its tests cover the user-space records):
#   - `ctl list-sessions` says tls=ktls for the sessions of `rblk nbd
#     --tls` and of a kernel NBD device mapped with --tls;
#   - rblk nbd --tls: 8 MiB round trip (nbdcopy, sha256);
#   - /dev/nbdN from `rblk map --nbd --tls`: fio libaio O_DIRECT 4k random
#     writes with crc32c verify, then a verify-only pass;
#   - fio through the engine over kTLS with verify, where it is built;
#   - a plaintext login to the tls=required export is refused.
# vm-timeout: 600
set -euo pipefail
source tests/vm/lib.sh
need_guest
requires_built
need_cmd fio nbdcopy jq truncate
modprobe tls 2>/dev/null || skip "no tls module in this kernel"
modprobe nbd 2>/dev/null || true

head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
chmod 600 "$TEST_DIR/alpha.key"
truncate -s 128M "$TEST_DIR/vol.img"
PORT=7541
TARGET_LOG=$TEST_DIR/target.log
"$RBLK_TARGET_BIN" --listen "tcp://$ADDR:$PORT" --log-level info \
	--ctl-socket "$TEST_DIR/ctl.sock" \
	--host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--export "vol=$TEST_DIR/vol.img,allow=alpha,tls=required" \
	--log-level debug >"$TARGET_LOG" 2>&1 &
TARGET_PID=$!
_targets+=("$TARGET_PID")
show_target_log() { echo "--- target log (last lines)"; tail -n 25 "$TARGET_LOG"; }
cleanup_fn show_target_log
wait_until 60 grep -q "listening on tcp://$ADDR:$PORT" "$TARGET_LOG"
URL=tcp://$ADDR:$PORT/vol
auth=(--tls --host-name alpha --key-file "$TEST_DIR/alpha.key")
ctl() { tmo 20 "$RBLK_TARGET_BIN" ctl --socket "$TEST_DIR/ctl.sock" "$@"; }
ktls_sessions() {
	ctl list-sessions -o json | jq '[.sessions[] | select(.tls == "ktls")] | length'
}

# The first kTLS set-up of a boot loads the crypto modules (gcm, aesni):
# 10 s under TCG, on the target's main thread and past a 10 s connect
# timeout. One connection with time to spare pays for it.
tmo 120 "$RBLK_BIN" info "$URL" "${auth[@]}" --timeout 60000 >/dev/null ||
	fail "rblk info --tls (warm-up): $(tail -n 5 "$TARGET_LOG")"

# ---- rblk nbd --tls ---------------------------------------------------------
start_nbd "$URL" "$TEST_DIR/nbd.sock" "${auth[@]}" --log-level debug
[ "$(ktls_sessions)" -ge 1 ] ||
	fail "no kTLS session: $(ctl list-sessions)"
head -c 8M /dev/urandom >"$TEST_DIR/src"
tmo 120 nbdcopy "$TEST_DIR/src" "$NBD_URI"
tmo 120 nbdcopy "$NBD_URI" "$TEST_DIR/back"
cmp -n $((8 << 20)) "$TEST_DIR/src" "$TEST_DIR/back" ||
	fail "rblk nbd over kTLS: data differs"
cmp -n $((8 << 20)) "$TEST_DIR/src" "$TEST_DIR/vol.img" ||
	fail "rblk nbd over kTLS: the export does not hold the data"
say "rblk nbd --tls (kTLS): 8 MiB round trip verified"
stop_pid "$RBLK_NBD_PID"

# ---- kernel NBD over kTLS ---------------------------------------------------
map_dev "$URL" --nbd --queues 2 "${auth[@]}"
[ "$(ktls_sessions)" -ge 2 ] ||
	fail "the kernel NBD device's queues are not on kTLS: $(ctl list-sessions)"
FIO=(fio --filename="$DEV" --ioengine=libaio --direct=1 --iodepth=16
	--rw=randwrite --bs=4k --size=8M --verify=crc32c
	--verify_state_save=0 --output-format=json)
timeout -k 10 300 "${FIO[@]}" --name=ktls-write >"$TEST_DIR/w.json" ||
	fail "fio on $DEV over kTLS: $(tail -n 20 "$TEST_DIR/w.json")"
timeout -k 10 300 "${FIO[@]}" --name=ktls-write --verify_only \
	>"$TEST_DIR/v.json" ||
	fail "fio verify-only on $DEV over kTLS"
for f in w v; do
	jq -e '.jobs[0].error == 0' "$TEST_DIR/$f.json" >/dev/null ||
		fail "fio $f on $DEV reported an error"
done
say "kernel NBD over kTLS: $(jq -r '.jobs[0].write.iops | floor' "$TEST_DIR/w.json") write IOPS, verify passed"
tmo 60 "$RBLK_BIN" unmap "$DEV" || fail "rblk unmap $DEV"

# ---- the fio engine over kTLS ----------------------------------------------
if [ -f "$RBLK_FIO_ENGINE" ]; then
	timeout -k 10 300 fio --name=engine "--ioengine=external:$RBLK_FIO_ENGINE" \
		--uri="$URL" --tls=1 --hostname=alpha \
		--keyfile="$TEST_DIR/alpha.key" --rw=randwrite --bsrange=4k-128k \
		--size=8M --offset=64M --iodepth=16 --verify=crc32c \
		--verify_state_save=0 --output-format=json >"$TEST_DIR/e.json" ||
		fail "fio engine over kTLS: $(tail -n 20 "$TEST_DIR/e.json")"
	jq -e '.jobs[0].error == 0' "$TEST_DIR/e.json" >/dev/null ||
		fail "fio engine over kTLS reported an error"
	say "fio engine over kTLS: verify passed"
fi

# ---- plaintext is refused ---------------------------------------------------
expect_refusal 60 1 "export 'vol' requires TLS" \
	"$RBLK_BIN" info "$URL" --host-name alpha --key-file "$TEST_DIR/alpha.key"
grep -q "TLS record failed" "$TARGET_LOG" &&
	fail "the target logged a failure: $(grep "TLS record failed" "$TARGET_LOG")"
kill -0 "$TARGET_PID" || fail "rblk-target died"
echo "kTLS: OK"
