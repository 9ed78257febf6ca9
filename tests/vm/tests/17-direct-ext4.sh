#!/bin/bash
# `direct` on a real file system over RDMA (issue 15, point 4). On Linux
# 6.5+ ibv_reg_mr of a MAP_SHARED mapping of an ext4 file fails (EFAULT: no
# long-term writable pins of file-backed pages; rxe has no ODP), which the
# user used to read as "target out of resources". Now: a file on ext4 (a
# brd RAM disk) exported `direct` makes the target say at start that
# direct access needs tmpfs, hugetlbfs or DAX, and serves the file through
# the slot path: rblk info over rxe reports direct=false, librblk mixed I/O
# verifies, 16 MiB put over rxe equals the file after FLUSH. A tmpfs file
# exported `direct` beside it keeps direct access. A client verifies data
# on a RAM export of the same target throughout.
# vm-timeout: 300
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd mkfs.ext4 jq cmp
need_file "$BUILD/rblk-target" "$BUILD/rblk" "$BUILD/tests/rblk_libtest"

t=$BUILD/tests/rblk_libtest
port=7447
url=rdma://$RDMA_ADDR:$port
dir=$TMPDIR/direct-ext4
mnt=$dir/ext4
mkdir -p "$mnt"
modprobe brd rd_nr=1 rd_size=65536 || skip "brd not available"
[ -b /dev/ram0 ] || skip "no /dev/ram0"
# registered before the daemons: cleanup_fn runs last-in first-out, so
# the target (bg) is stopped before its file system is unmounted
cleanup() {
	umount "$mnt" 2>/dev/null
	rmmod brd 2>/dev/null
	return 0
}
cleanup_fn cleanup
mkfs.ext4 -q -F /dev/ram0 || fail "mkfs.ext4 /dev/ram0"
mount -t ext4 /dev/ram0 "$mnt" || fail "mount ext4"
echo "# $mnt: $(stat -f -c %T "$mnt")"
truncate -s 16M "$mnt/vol.img" "$dir/tmpfs.img"
head -c 16M /dev/urandom >"$dir/src.bin"
head -c 8M /dev/urandom >"$dir/vsrc.bin"

bg "$BUILD/rblk-target" --listen "$url" --allow-any-host --log-level info \
	--export "mem=ram:8M" --export "ext=$mnt/vol.img,direct" \
	--export "shm=$dir/tmpfs.img,direct" 2>"$dir/target.log"
wait_until 30 grep -q "listening on" "$dir/target.log"

echo "# what the target says"
grep "export ext" "$dir/target.log"
grep -q "export ext: WARNING: 'direct' ignored: $mnt/vol.img is on ext2/ext3/ext4; direct access needs tmpfs, hugetlbfs or a DAX mount" \
	"$dir/target.log" || fail "no warning naming ext4 and the supported file systems"

# the legitimate client, verifying all along
(
	n=0
	while [ ! -e "$dir/stop" ] || [ $n -eq 0 ]; do
		rm -f "$dir/vback.bin"
		timeout 120 "$t" put "$url/mem" "$dir/vsrc.bin" >/dev/null || { echo "put failed"; exit 1; }
		timeout 120 "$t" get "$url/mem" "$dir/vback.bin" >/dev/null || { echo "get failed"; exit 1; }
		cmp -s "$dir/vsrc.bin" "$dir/vback.bin" || { echo "MISMATCH"; exit 1; }
		n=$((n + 1))
	done
	echo "$n rounds verified"
) >"$dir/verifier.log" 2>&1 &
vpid=$!

echo "# rblk info over rxe"
j=$(timeout 30 "$BUILD/rblk" info -o json "$url/ext") || fail "rblk info ext"
echo "$j"
[ "$(jq .direct <<<"$j")" = false ] || fail "ext4 file offers direct access"
[ "$(timeout 30 "$BUILD/rblk" info -o json "$url/shm" | jq .direct)" = true ] ||
	fail "tmpfs file lost direct access"

echo "# data through the slot path over rxe"
timeout 120 "$t" rw "$url/ext" slot || fail "librblk rw on the ext4 file"
out=$(timeout 30 "$BUILD/rblk" info --direct "$url/ext" 2>&1) && fail "--direct on the ext4 export succeeded: $out"
echo "--direct: $out"
grep -q "export 'ext' does not offer direct access" <<<"$out" || fail "--direct: unclear message"
echo "# 16 MiB over rxe with the nbd front end, compared with the ext4 file"
sock=$dir/ext.sock
bg "$BUILD/rblk" nbd "$url/ext" --socket "$sock" >"$dir/nbd.out" 2>"$dir/nbd.log"
wait_until 30 grep -q "^ready " "$dir/nbd.out"
timeout 120 nbdcopy "$dir/src.bin" "nbd+unix:///ext?socket=$sock" || fail "nbdcopy in"
rm -f "$dir/back.bin"
timeout 120 nbdcopy "nbd+unix:///ext?socket=$sock" "$dir/back.bin" || fail "nbdcopy out"
cmp "$dir/src.bin" "$dir/back.bin" || fail "ext4 export: read back differs"
sync
cmp "$dir/src.bin" "$mnt/vol.img" || fail "the ext4 file does not hold what was written"
echo "ext4 file: 16 MiB written over rxe, read back and in the file: equal"

touch "$dir/stop"
wait "$vpid" || fail "verifying client: $(cat "$dir/verifier.log")"
cat "$dir/verifier.log"
echo "PASS"
