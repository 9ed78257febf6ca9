#!/bin/bash
# rblk over real verbs and rdma_cm (rdma_rxe): the same data checks as on
# the host. librblk with mixed-size split I/O, file and RAM exports, a
# read-only export, an unknown export; `rblk nbd` over rdma with an nbdcopy
# round trip (sha256) and fio's nbd engine with crc32c verify; the fio
# ioengine over rdma with verify, pull and push reads.
# vm-timeout: 420
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd nbdcopy fio sha256sum
need_file "$BUILD/rblk-target" "$BUILD/rblk" "$BUILD/tests/rblk_libtest"

port=7441
url=rdma://$RDMA_ADDR:$port
dir=$TMPDIR/e2e
mkdir -p "$dir"
truncate -s 128M "$dir/vol.img"
head -c 1M /dev/urandom >"$dir/ro.img"

bg "$BUILD/rblk-target" --listen "$url" --allow-any-host --log-level info \
	--export "vol=$dir/vol.img" --export "mem=ram:64M" \
	--export "rovol=$dir/ro.img,ro" 2>"$dir/target.log"
target_pid=$!
wait_until 30 grep -q "listening on" "$dir/target.log"

echo "# rblk info $url/vol"
timeout 30 "$BUILD/rblk" info "$url/vol" || fail "rblk info over rdma"

echo "# librblk: split mixed-size I/O, zero-copy and bounce buffers"
timeout 120 "$BUILD/tests/rblk_libtest" rw "$url/vol" || fail "librblk rw (file) over rdma"
timeout 120 "$BUILD/tests/rblk_libtest" rw "$url/mem" || fail "librblk rw (ram) over rdma"
timeout 60 "$BUILD/tests/rblk_libtest" ro "$url/rovol" || fail "read-only export over rdma"
out=$(timeout 30 "$BUILD/tests/rblk_libtest" open "$url/nosuch" || true)
echo "$out"
grep -q "export 'nosuch' not found" <<<"$out" || fail "unknown export over rdma: '$out'"

echo "# rblk nbd over rdma + nbdcopy round trip"
sock=$dir/nbd.sock
bg "$BUILD/rblk" nbd "$url/vol" --socket "$sock" --queues 4 >"$dir/nbd.out" 2>"$dir/nbd.log"
wait_until 30 test -S "$sock"
head -c 64M /dev/urandom >"$dir/in.bin"
truncate -s 128M "$dir/in.bin"
nbd_round_trip "$dir/in.bin" "$sock" vol "$dir/out.bin" "$dir/vol.img" \
	"nbdcopy over rdma"
rm -f "$dir/in.bin" "$dir/out.bin"

echo "# fio nbd engine, randwrite + crc32c verify, through rblk nbd over rdma"
timeout 240 fio --name=nbdv --ioengine=nbd --uri="nbd+unix:///vol?socket=$sock" \
	--rw=randwrite --bsrange=4k-64k --size=32M --iodepth=16 --numjobs=2 \
	--offset_increment=48M --verify=crc32c --verify_fatal=1 \
	--verify_state_save=0 --output="$dir/fio-nbd.txt" ||
	{ cat "$dir/fio-nbd.txt"; fail "fio nbd verify over rdma"; }
grep -E "IOPS=" "$dir/fio-nbd.txt" | head -4

if [ -e "$BUILD/rblk-fio.so" ]; then
	for mode in pull push; do
		echo "# fio rblk engine over rdma, read_mode=$mode"
		timeout 240 fio --name=eng --ioengine="external:$BUILD/rblk-fio.so" \
			--uri="$url/vol" --read_mode=$mode --rw=randwrite \
			--bsrange=4k-128k --size=32M --iodepth=16 --numjobs=2 \
			--offset_increment=48M --verify=crc32c --verify_fatal=1 \
			--verify_state_save=0 --output="$dir/fio-eng.txt" ||
			{ cat "$dir/fio-eng.txt"; fail "fio rblk engine ($mode) over rdma"; }
		grep -E "IOPS=" "$dir/fio-eng.txt" | head -4
	done
else
	echo "rblk-fio.so not built: engine part skipped"
fi

kill -0 "$target_pid" || fail "target died"
grep -E "ERROR: AddressSanitizer|runtime error" "$dir/target.log" && fail "sanitizer report in target log"
echo "rdma e2e: OK"
