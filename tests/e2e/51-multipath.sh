#!/usr/bin/env bash
# Multipath failover (librblk paths, the fio engine's path= option): two
# rblk-targets export the same file under one uuid, so both report the same
# volume id. Sharing a file between two targets is only safe here because
# the initiator uses one path at a time (active/passive) and waits for the
# old path's commands to finish before it fails back; two initiators, or
# two active paths, would need a shared-storage backend with fencing (RBD,
# 52-rbd-multipath.sh).
#
#  1. fio verify writes through path A with B as second path (failback
#     off); 5 cycles each kill -9 the active target (A, B, A, ...), I/O
#     moves to the other (the pause each time is measured from fio's
#     per-I/O latency log and must stay <= 5 s), the killed one is
#     restarted on its port. fio's verify passes, and a second fio run
#     re-reads everything the first one wrote (verify_only): no
#     acknowledged write lost.
#  2. failback: with failback=1, A is killed and restarted; the session
#     moves to B and back to A, data verified.
#  3. a path to another volume is refused with an error naming both URLs
#     (fio, rblk info); rblk info -o json lists the paths.
#  4. rblk nbd --path: after kill -9 of A an NBD client reads and writes
#     through B.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$RBLK_ROOT/tests/multipath-lib.sh"
requires fio jq
requires_nbdsh
requires_built
requires_fio_engine

img=$TEST_DIR/vol.img
truncate -s 48M "$img"
mp_start_targets --export "vol0=$img,uuid=6d756c74-6970-4174-8800-000000000049"

fio_job=(--name=mp --ioengine=external:"$RBLK_FIO_ENGINE"
	--uri="$URL_A" --path="$URL_B" --rw=randwrite --bs=4k --size=28M
	--iodepth=8 --verify=crc32c --verify_fatal=1 --randrepeat=1
	--verify_state_save=0)

# ---- 1: five kill -9 cycles, alternating targets --------------------------
mp_fio_start "$TEST_DIR/fio1.out" "${fio_job[@]}" --failback=0 --rate_iops=250
sleep 2
mp_cycles "$MP_FIO_PID" "$TEST_DIR/fio1.out" 5
mp_fio_wait "$TEST_DIR/fio1.out"
# shellcheck disable=SC2046 # one word per cycle
mp_check_pauses $(mp_pauses "$TEST_DIR"/lat_lat.1.log)

# every acknowledged write is on the volume: read it all back, by path B
# first this time
fio "${fio_job[@]}" --uri="$URL_B" --path="$URL_A" --verify_only \
	>"$TEST_DIR/verify1.out" 2>&1 ||
	{ cat "$TEST_DIR/verify1.out"; fail "verify_only after the cycles failed"; }
echo "verify_only after 5 cycles: OK"

# ---- 2: failback --------------------------------------------------------------
fio "${fio_job[@]}" --offset=32M --size=4M --failback=1 --rate_iops=200 \
	>"$TEST_DIR/fio2.out" 2>&1 &
fio_pid=$!
cleanup_fn _kill_quiet "$fio_pid"
sleep 1.5
kill -9 "${MP_PID[a]}"
wait "${MP_PID[a]}" 2>/dev/null || true
mp_wait_moves "$TEST_DIR/fio2.out" 1
mp_restart a
mp_wait_moves "$TEST_DIR/fio2.out" 2
grep -q "answers again: failing back" "$TEST_DIR/fio2.out" ||
	{ cat "$TEST_DIR/fio2.out"; fail "no failback to path A"; }
grep ': now on path' "$TEST_DIR/fio2.out" | tail -1 | grep -q "now on path 0" ||
	{ cat "$TEST_DIR/fio2.out"; fail "the session did not end on path A"; }
echo "failed back to A"
wait_pid 60 "$fio_pid" || { cat "$TEST_DIR/fio2.out"; fail "fio verify (failback) failed"; }

# ---- 3: a path to another volume ------------------------------------------
truncate -s 32M "$TEST_DIR/other.img"
mkdir "$TEST_DIR/c"
TEST_DIR=$TEST_DIR/c start_target --export "vol0=$TEST_DIR/other.img"
url_c=tcp://127.0.0.1:$RBLK_PORT/vol0
if fio --name=bad --ioengine=external:"$RBLK_FIO_ENGINE" --uri="$URL_A" \
	--path="$url_c" --rw=read --bs=4k --size=1M >"$TEST_DIR/bad.out" 2>&1; then
	fail "fio accepted a path to another volume"
fi
grep -q "path $url_c is not the same volume as $URL_A" "$TEST_DIR/bad.out" ||
	{ cat "$TEST_DIR/bad.out"; fail "no clear error for a path to another volume"; }
echo "a path to another volume is refused: $(grep -o 'path tcp.*refusing to use it' "$TEST_DIR/bad.out" | head -1)"
if "$RBLK_BIN" info "$URL_A" --path "$url_c" >"$TEST_DIR/info.out" 2>&1; then
	fail "rblk info accepted a path to another volume"
fi
grep -q "path $url_c is not the same volume as $URL_A" "$TEST_DIR/info.out" ||
	{ cat "$TEST_DIR/info.out"; fail "rblk info: no clear error for another volume"; }
tmo 30 "$RBLK_BIN" info "$URL_A" --path "$URL_B" -o json >"$TEST_DIR/info.json"
jq -e --arg a "$URL_A" --arg b "$URL_B" \
	'.paths == [{"url": $a, "active": true}, {"url": $b, "active": false}]' \
	"$TEST_DIR/info.json" >/dev/null ||
	{ cat "$TEST_DIR/info.json"; fail "rblk info -o json: paths"; }

# ---- 4: rblk nbd --path: A dies, the NBD client's I/O goes on through B ----
start_nbd "$URL_A" "$TEST_DIR/nbd.sock" --path "$URL_B" --failback 0
tmo 30 nbdsh -u "$NBD_URI" -c 'h.pwrite(b"M" * 65536, 40 << 20); h.flush()'
kill -9 "${MP_PID[a]}"
wait "${MP_PID[a]}" 2>/dev/null || true
tmo 30 nbdsh -u "$NBD_URI" -c '
assert h.pread(65536, 40 << 20) == b"M" * 65536
h.pwrite(b"N" * 65536, 41 << 20)
h.flush()
assert h.pread(65536, 41 << 20) == b"N" * 65536'
grep -q "now on path 1" "$RBLK_NBD_LOG" ||
	{ cat "$RBLK_NBD_LOG"; fail "rblk nbd did not move to path B"; }
cmp <(dd if="$img" bs=64k skip=656 count=1 status=none) \
	<(head -c 65536 /dev/zero | tr '\0' N) ||
	fail "the write through B is not in the volume"
echo "rblk nbd --path: I/O continued through B"
echo "PASS: $TEST_NAME"
