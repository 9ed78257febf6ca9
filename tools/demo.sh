#!/usr/bin/env bash
# make demo: export a volume from rblk-target over the tcp transport on
# loopback, connect the initiator, move 64 MiB through it both ways with an
# NBD client, and show that what came back is what went in.
set -euo pipefail
cd "$(dirname "$0")/.."

B=build
dir=$(mktemp -d "${TMPDIR:-/tmp}/rblk-demo.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))
url="tcp://127.0.0.1:$port/demo"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. a 256 MiB volume file, exported as 'demo' on tcp://127.0.0.1:$port"
truncate -s 256M "$dir/demo.img"
$B/rblk-target --listen "tcp://127.0.0.1:$port" --export "demo=$dir/demo.img,allow=any" \
	--log-level info 2>"$dir/target.log" &
pids+=($!)
for _ in $(seq 100); do
	grep -q "listening on" "$dir/target.log" 2>/dev/null && break
	sleep 0.1
done
grep "listening on" "$dir/target.log"

step "2. rblk info $url"
$B/rblk info "$url"

step "3. rblk nbd: serve the volume to NBD clients on a unix socket"
sock="$dir/nbd.sock"
$B/rblk nbd "$url" --socket "$sock" --queues 2 >"$dir/nbd.out" 2>"$dir/nbd.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
echo "NBD URI: nbd+unix:///demo?socket=$sock"

step "4. copy 64 MiB of random data in, and back out (nbdcopy)"
head -c 64M /dev/urandom >"$dir/in.bin"
truncate -s 256M "$dir/in.bin"
t0=$(date +%s.%N)
nbdcopy "$dir/in.bin" "nbd+unix:///demo?socket=$sock"
nbdcopy "nbd+unix:///demo?socket=$sock" "$dir/out.bin"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "a 256 MiB image (64 MiB of random data; nbdcopy sends the zero tail as WRITE_ZEROES) copied in and back out in %.2f s\n", b - a }'

step "5. compare"
a=$(sha256sum <"$dir/in.bin" | cut -d' ' -f1)
b=$(sha256sum <"$dir/out.bin" | cut -d' ' -f1)
c=$(sha256sum <"$dir/demo.img" | cut -d' ' -f1)
echo "sha256 written:        $a"
echo "sha256 read back:      $b"
echo "sha256 of target file: $c"
if [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
	printf '\n\033[1;32mdemo OK:\033[0m the data went through rblk-target and came back intact.\n'
else
	printf '\n\033[1;31mdemo FAILED:\033[0m checksums differ\n'
	exit 1
fi
