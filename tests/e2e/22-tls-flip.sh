#!/usr/bin/env bash
# TLS integrity: a proxy between initiator and target flips one bit in
# the middle of one TLS record in each direction (initiator -> target
# while fio writes, target -> initiator while it reads back), once each.
# Each end that receives the altered record must log an integrity error
# and drop the connection; librblk reconnects and sends the unfinished
# commands again; fio's verify (crc32c of every block) passes, so no
# altered byte was written or returned; and the exported file holds what
# fio wrote (a second verify-only pass straight from the file).
# RBLK_TEST_KTLS=1 (tests/vm/tests/55-tls-ktls-flip.sh, with the tls
# module loaded): the target's sessions must be on kernel TLS.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3 truncate
requires_built
requires_fio_engine
engine=$RBLK_FIO_ENGINE

head -c 32 /dev/urandom | base64 >"$TEST_DIR/alpha.key"
chmod 600 "$TEST_DIR/alpha.key"
img=$TEST_DIR/vol.img
truncate -s 32M "$img"
start_target --host "alpha:secret-file=$TEST_DIR/alpha.key" \
	--export "vol=$img,allow=alpha,tls=required"

# The proxy: TLS records are parsed per direction (5-byte header, then
# the body); the first application-data record after FLIP_AFTER bytes in
# a direction gets the bit in the middle of its body flipped.
cat >"$TEST_DIR/flip.py" <<'PY'
import socket, sys, threading
lport, tport, after = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
total = {"c2s": 0, "s2c": 0}
flipped = {"c2s": False, "s2c": False}

def pump(src, dst, d):
    hdr, left, reclen, armed = b"", 0, 0, False
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            buf = bytearray(data)
            i = 0
            while i < len(buf):
                if left == 0:
                    take = bytes(buf[i:i + 5 - len(hdr)])
                    hdr += take
                    i += len(take)
                    if len(hdr) == 5:
                        left = reclen = hdr[3] << 8 | hdr[4]
                        with lock:
                            armed = (hdr[0] == 23 and not flipped[d]
                                     and total[d] >= after and reclen > 64)
                            if armed:
                                flipped[d] = True
                        hdr = b""
                    continue
                n = min(left, len(buf) - i)
                done = reclen - left
                mid = reclen // 2
                if armed and done <= mid < done + n:
                    buf[i + mid - done] ^= 0x01
                    armed = False
                    print("flipped a bit %s at stream byte %d" %
                          (d, total[d] + i + mid - done), flush=True)
                i += n
                left -= n
            with lock:
                total[d] += len(buf)
            dst.sendall(buf)
    except OSError:
        pass
    for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
        try:
            s.shutdown(how)
        except OSError:
            pass

ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", lport))
ls.listen(64)
print("proxy ready", flush=True)
while True:
    c, _ = ls.accept()
    t = socket.create_connection(("127.0.0.1", tport))
    for a, b, d in ((c, t, "c2s"), (t, c, "s2c")):
        threading.Thread(target=pump, args=(a, b, d), daemon=True).start()
PY
pport=$(free_port)
python3 "$TEST_DIR/flip.py" "$pport" "$RBLK_PORT" $((2 << 20)) \
	>"$TEST_DIR/proxy.log" 2>&1 &
proxy=$!
cleanup_fn _kill_quiet "$proxy"
for ((i = 0; i < 100; i++)); do
	grep -q "proxy ready" "$TEST_DIR/proxy.log" && break
	sleep 0.05
done
grep -q "proxy ready" "$TEST_DIR/proxy.log" || fail "proxy did not start"

tmo 120 fio --name=flip "--ioengine=external:$engine" \
	--uri="tcp://127.0.0.1:$pport/vol" --tls=1 --hostname=alpha \
	--keyfile="$TEST_DIR/alpha.key" --reconnect_delay=0.1 \
	--rw=write --bs=64k --size=8M --iodepth=16 --verify=crc32c \
	--verify_state_save=0 --randseed=77 \
	--output="$TEST_DIR/flip.fio" 2>"$TEST_DIR/flip.err" ||
	{ cat "$TEST_DIR/flip.fio" "$TEST_DIR/flip.err" "$TEST_DIR/proxy.log"; tail -n 30 "$RBLK_TARGET_LOG"; fail "fio through the flipping proxy failed"; }
grep -q "err= 0" "$TEST_DIR/flip.fio" ||
	{ cat "$TEST_DIR/flip.fio"; fail "fio reported errors"; }
cat "$TEST_DIR/proxy.log"
[ "$(grep -c "^flipped" "$TEST_DIR/proxy.log")" -eq 2 ] ||
	fail "the proxy did not flip a bit in both directions"
grep -q "TLS record failed its integrity check" "$RBLK_TARGET_LOG" ||
	fail "the target did not log the altered record"
grep -q "TLS record failed its integrity check" "$TEST_DIR/flip.err" ||
	{ cat "$TEST_DIR/flip.err"; fail "the initiator did not log the altered record"; }
grep -h "integrity\|connection failed" "$TEST_DIR/flip.err" "$RBLK_TARGET_LOG"
logins=$(grep -c "host 'alpha' authenticated" "$RBLK_TARGET_LOG" || true)
[ "$logins" -ge 3 ] ||
	fail "expected a login and two reconnects, the target saw $logins logins"
echo "both altered records caught; $logins logins; fio verify passed"
if [ -n "${RBLK_TEST_KTLS:-}" ]; then
	grep -q "TLS 1.3 by PSK, records in the kernel" "$RBLK_TARGET_LOG" ||
		fail "RBLK_TEST_KTLS: the target's sessions were not on kTLS"
	grep -q "records in user space" "$RBLK_TARGET_LOG" &&
		fail "RBLK_TEST_KTLS: a session fell back to user-space records"
	echo "kTLS on the target's sessions"
fi

# what the target stored is what fio wrote: verify straight from the file
tmo 60 fio --name=flip --ioengine=psync --filename="$img" --rw=write \
	--bs=64k --size=8M --verify=crc32c --verify_only --randseed=77 \
	--verify_state_save=0 --output="$TEST_DIR/file.fio" ||
	{ cat "$TEST_DIR/file.fio"; fail "the exported file does not verify"; }
grep -q "err= 0" "$TEST_DIR/file.fio" ||
	{ cat "$TEST_DIR/file.fio"; fail "the exported file does not verify"; }
echo "the exported file verifies"
