#!/usr/bin/env bash
# Direct volume access (RBLK_F_DIRECT): the initiator RDMA READs and
# WRITEs the target's registered volume in place. Over tcp here and over
# rdma (rdma_rxe, where the HCA does the work and its own checks) in the
# guest: tests/vm/tests/15-rdma-direct.sh runs this file with
# RBLK_TEST_SCHEME=rdma.
#   - librblk mixed-size writes (registered and bounce buffers, split at
#     max_io, FUA), read back on a second queue, TRIM/WRITE_ZEROES, on a
#     RAM export and on a file exported with `direct`; the same with
#     --no-direct (slot path) so both paths serve one volume
#   - whole-volume round trip: random data in, sha256 out; for the file
#     export, after FLUSH the file itself equals the source (cmp)
#   - fio engine, direct_access=on: crc32c verify, and psync verify of the
#     exported file itself (the data landed at the right offsets)
#   - read-only: a read-only direct login is registered without remote
#     write (a raw RDMA WRITE fails with a remote access error, librblk
#     refuses with EROFS) and the target keeps serving the others; a
#     read-only direct file on rdma, whose mapping cannot carry windows,
#     is served through the slot path with a warning
#   - a read-only direct session opened before anything was written sees
#     what a writer writes afterwards (its registration pinned the real
#     pages, not the zero page)
#   - direct required where not offered, and `rblk info` reporting it
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires jq cmp truncate nbdcopy
requires_built
t=$RBLK_BUILD/tests/rblk_libtest
[ -x "$t" ] || fail "$t missing: run make check"

# direct file exports need a memory file system (tmpfs, hugetlbfs, DAX)
make_tmpfs_dir
file=$TMPFS_DIR/direct.img
plain=$TEST_DIR/plain.img
src=$TMPFS_DIR/src.bin
truncate -s 32M "$file" "$plain"
make_random "$src" 32
start_target --export "mem=ram:32M" --export "file=$file,direct" \
	--export "plain=$plain" --export "romem=ram:8M,ro" \
	--export "rofile=$src,ro,direct" --export "fresh=ram:16M"
url=$RBLK_TARGET_URL
scheme=${url%%:*}

# --- features as `rblk info` reports them --------------------------------
info() { tmo 20 "$RBLK_BIN" info -o json "$@"; }
[ "$(info "$url/mem" | jq .direct)" = true ] || fail "RAM export: direct not in use"
[ "$(info "$url/file" | jq -c '[.direct,.flush,.fua]')" = '[true,true,true]' ] ||
	fail "direct file export: want direct, flush, fua"
[ "$(info --no-direct "$url/mem" | jq .direct)" = false ] ||
	fail "--no-direct still reports direct"
[ "$(info "$url/plain" | jq .direct)" = false ] || fail "plain file export offers direct"
out=$(info --direct "$url/plain" 2>&1) && fail "--direct on a plain export succeeded: $out"
grep -q "export 'plain' does not offer direct access" <<<"$out" ||
	fail "--direct on a plain export: unexpected message '$out'"

# --- librblk, both paths, both exports ----------------------------------
for vol in mem file; do
	tmo 60 "$t" rw "$url/$vol" direct || fail "librblk rw, direct, $vol"
	tmo 60 "$t" rw "$url/$vol" slot || fail "librblk rw, slot path, $vol"
done

# --- whole-volume round trip -------------------------------------------
for vol in mem file; do
	tmo 60 "$t" put "$url/$vol" "$src" || fail "put $vol"
	rm -f "$TEST_DIR/back.bin"
	tmo 60 "$t" get "$url/$vol" "$TEST_DIR/back.bin" || fail "get $vol"
	[ "$(sha "$TEST_DIR/back.bin")" = "$(sha "$src")" ] ||
		fail "$vol: sha256 of what was read back differs from the source"
done
# put ended with FLUSH (msync): the file itself holds the data
cmp "$src" "$file" || fail "direct file export: $file differs from the source after FLUSH"
grep -q "host '.*' logged in to export file (.*, direct)" "$RBLK_TARGET_LOG" ||
	fail "the target log shows no direct login to 'file'"

# --- fio engine, direct_access=on --------------------------------------
engine=$RBLK_BUILD/rblk-fio.so
if [ -f "$engine" ] && command -v fio >/dev/null; then
	layout=(--rw=randwrite --bsrange=4k-128k --verify=crc32c --iodepth=16
		--size=16M --verify_state_save=0 --randseed=4545)
	for vol in mem file; do
		for pass in "--do_verify=0" "--verify_only"; do
			o=$TEST_DIR/fio-$vol.out
			tmo 60 fio --name=direct "--ioengine=external:$engine" \
				"--uri=$url/$vol" --direct_access=on "${layout[@]}" \
				"$pass" --output="$o" || { cat "$o"; fail "fio $vol $pass"; }
			grep -q "err= 0" "$o" || { cat "$o"; fail "fio $vol $pass reported errors"; }
		done
	done
	o=$TEST_DIR/fio-file-psync.out
	tmo 60 fio --name=direct --ioengine=psync "--filename=$file" \
		"${layout[@]/--iodepth=16/--iodepth=1}" --verify_only --output="$o" ||
		{ cat "$o"; fail "psync verify of $file"; }
	grep -q "err= 0" "$o" || { cat "$o"; fail "$file does not hold what fio wrote"; }
	out=$(tmo 30 fio --name=x "--ioengine=external:$engine" "--uri=$url/plain" \
		--direct_access=on --rw=read --size=1M 2>&1) &&
		fail "fio direct_access=on on a plain export ran"
	grep -q "does not offer direct access" <<<"$out" ||
		fail "fio direct_access=on on a plain export: '$out'"
else
	echo "fio engine not built or fio missing: skipping the fio part"
fi

# --- read-only direct logins ----------------------------------------------
before=$(sha "$src")
tmo 30 "$t" rawro "$url/romem" || fail "read-only direct login to romem"
tmo 30 "$t" ro "$url/romem" || fail "librblk on read-only romem"
if [ "$scheme" = rdma ]; then
	# a read-only mapping cannot carry memory windows (binding pins the
	# pages writable): the target serves it through the slot path
	tmo 30 "$t" ro "$url/rofile" || fail "librblk on read-only rofile"
	grep -q "export rofile: no direct access" "$RBLK_TARGET_LOG" ||
		fail "no warning for the read-only direct file on the slot path"
else
	tmo 30 "$t" rawro "$url/rofile" ||
		fail "read-only direct login to rofile"
	tmo 30 "$t" ro "$url/rofile" || fail "librblk on read-only rofile"
	# (over rdma the HCA refuses it: nothing reaches the target to log)
	grep -qE "remote write refused: rkey 0x[0-9a-f]+ lacks the access right" \
		"$RBLK_TARGET_LOG" ||
		fail "the target did not log the refused remote write"
fi
[ "$(sha "$src")" = "$before" ] || fail "read-only direct file changed"

# a read-only direct session from before the writes sees them
start_nbd "$url/fresh" "$TEST_DIR/ro.sock" --read-only --direct
head -c 16M "$src" >"$TEST_DIR/src16.bin"
tmo 60 "$t" put "$url/fresh" "$TEST_DIR/src16.bin" || fail "put fresh"
tmo 60 nbdcopy "$NBD_URI" "$TEST_DIR/ro16.bin" ||
	fail "nbdcopy from the read-only session"
cmp "$TEST_DIR/src16.bin" "$TEST_DIR/ro16.bin" ||
	fail "the read-only session does not see the later writes"
# the target keeps serving everyone else
kill -0 "$RBLK_TARGET_PID" || fail "the target died"
rm -f "$TEST_DIR/back.bin"
tmo 60 "$t" get "$url/file" "$TEST_DIR/back.bin" || fail "get after the refusals"
cmp "$file" "$TEST_DIR/back.bin" || fail "file export reads back other than its file"
echo "direct volume access OK (RAM and file exports, fio, read-only)"
