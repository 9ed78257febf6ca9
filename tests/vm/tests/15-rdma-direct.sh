#!/bin/bash
# Direct volume access over real verbs (rdma_rxe): the initiator RDMA READs
# and WRITEs the target's registered volume with no command and no target
# CPU. librblk mixed-size I/O (direct and slot path on one volume); a
# whole-volume round trip with sha256 on a RAM export and on a file
# exported with `direct` (the file equals the source after FLUSH/msync);
# the fio engine with direct_access=on and crc32c verify; a read-only
# direct login whose RDMA WRITE fails with a remote access error on the
# HCA's own check while the target keeps serving; a read-only login made
# before anything was written sees what a writer writes afterwards (its
# registration pinned real pages, not the zero page).
# vm-timeout: 420
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd fio jq sha256sum nbdcopy
need_file "$BUILD/rblk-target" "$BUILD/rblk" "$BUILD/tests/rblk_libtest" \
	"$BUILD/rblk-fio.so"

t=$BUILD/tests/rblk_libtest
port=7443
url=rdma://$RDMA_ADDR:$port
dir=$TMPDIR/direct
mkdir -p "$dir"
truncate -s 32M "$dir/direct.img"
head -c 32M /dev/urandom >"$dir/src.bin"

bg "$BUILD/rblk-target" --listen "$url" --allow-any-host --log-level info \
	--export "mem=ram:32M" --export "file=$dir/direct.img,direct" \
	--export "romem=ram:8M,ro" --export "fresh=ram:16M" \
	--export "rofile=$dir/src.bin,ro,direct" 2>"$dir/target.log"
target_pid=$!
wait_until 30 grep -q "listening on" "$dir/target.log"

echo "# rblk info"
j=$(timeout 30 "$BUILD/rblk" info -o json "$url/file") || fail "rblk info over rdma"
echo "$j"
[ "$(jq -c '[.direct,.flush]' <<<"$j")" = '[true,true]' ] || fail "file export: want direct and flush"
[ "$(timeout 30 "$BUILD/rblk" info -o json --no-direct "$url/mem" | jq .direct)" = false ] ||
	fail "--no-direct still reports direct"

echo "# librblk: direct and slot path on one volume"
for vol in mem file; do
	timeout 120 "$t" rw "$url/$vol" direct || fail "librblk rw direct ($vol) over rdma"
done
timeout 120 "$t" rw "$url/mem" slot || fail "librblk rw slot path over rdma"

echo "# whole-volume round trip"
for vol in mem file; do
	timeout 120 "$t" put "$url/$vol" "$dir/src.bin" || fail "put $vol"
	rm -f "$dir/back.bin"
	timeout 120 "$t" get "$url/$vol" "$dir/back.bin" || fail "get $vol"
	a=$(sha256sum <"$dir/src.bin" | cut -d' ' -f1)
	b=$(sha256sum <"$dir/back.bin" | cut -d' ' -f1)
	echo "$vol: in $a back $b"
	[ "$a" = "$b" ] || fail "$vol: read back differs from the source"
done
cmp "$dir/src.bin" "$dir/direct.img" || fail "the direct file differs from the source after FLUSH"

echo "# fio engine, direct_access=on, crc32c verify"
for vol in mem file; do
	for pass in --do_verify=0 --verify_only; do
		timeout 180 fio --name=direct "--ioengine=external:$BUILD/rblk-fio.so" \
			"--uri=$url/$vol" --direct_access=on --rw=randwrite \
			--bsrange=4k-128k --iodepth=16 --size=16M --verify=crc32c \
			--verify_fatal=1 --verify_state_save=0 --randseed=4646 \
			"$pass" --output="$dir/fio-$vol.txt" ||
			{ cat "$dir/fio-$vol.txt"; fail "fio direct $vol $pass over rdma"; }
		grep -q "err= 0" "$dir/fio-$vol.txt" ||
			{ cat "$dir/fio-$vol.txt"; fail "fio direct $vol $pass: errors"; }
		grep -E "IOPS=" "$dir/fio-$vol.txt" | head -2
	done
done

echo "# read-only direct login"
timeout 60 "$t" rawro "$url/romem" || fail "read-only direct login over rdma"
timeout 60 "$t" ro "$url/romem" || fail "librblk on a read-only direct export"
# a read-only mapping cannot carry memory windows (binding pins the pages
# writable): the target serves it through the slot path and says so
timeout 60 "$t" ro "$url/rofile" || fail "librblk on a read-only direct file"
grep -q "export rofile: no direct access" "$dir/target.log" ||
	fail "no warning for the read-only direct file served by the slot path"

echo "# a read-only login made before the writes sees them"
sock=$dir/ro.sock
bg "$BUILD/rblk" nbd "$url/fresh" --read-only --direct --socket "$sock" 2>"$dir/nbd.log"
wait_until 30 test -S "$sock"
head -c 16M "$dir/src.bin" >"$dir/src16.bin"
timeout 120 "$t" put "$url/fresh" "$dir/src16.bin" || fail "put fresh"
timeout 120 nbdcopy "nbd+unix:///fresh?socket=$sock" "$dir/ro16.bin" || fail "nbdcopy from the read-only session"
cmp "$dir/src16.bin" "$dir/ro16.bin" || fail "the read-only session does not see the later writes"
kill -0 "$target_pid" || fail "the target died"
rm -f "$dir/back.bin"
timeout 120 "$t" get "$url/file" "$dir/back.bin" || fail "get after the refused write"
cmp "$dir/direct.img" "$dir/back.bin" || fail "file export reads back other than its file"
grep -q "logged in to export file (.*, direct)" "$dir/target.log" ||
	fail "no direct login in the target log"
echo "direct volume access over rdma: OK"
