#!/usr/bin/env bash
# cache=buffered exports (issue 12): a file exported through the page cache
#   - ram:, rbd: and direct exports refuse cache=buffered, an unknown cache
#     mode is refused, each with the reason (command line and config file)
#   - a file exported cache=buffered is opened without O_DIRECT (the log
#     says so), and 32 MiB written through it read back and land in the
#     file (cmp after the target flushed and exited)
#   - ctl add-export --cache buffered does the same live; --cache bogus and
#     --cache buffered on ram: are refused with the reason
#   - a cache=direct export of the same kind beside it still uses O_DIRECT
#     where the file system allows it
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires cmp truncate
requires_built
t=$RBLK_BUILD/tests/rblk_libtest
[ -x "$t" ] || fail "$t missing: run make check"
tgt=("$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:$(free_port)"
	--ctl-socket none --allow-any-host)

# ---- refusals ------------------------------------------------------------
expect_refusal 20 1 "cache=buffered applies to files and block devices" \
	"${tgt[@]}" --export "m=ram:16M,cache=buffered"
expect_refusal 20 1 "cache=buffered applies to files and block devices" \
	"${tgt[@]}" --export "m=$TEST_DIR/x.img,direct,cache=buffered"
expect_refusal 20 2 "bad cache 'sometimes' \(direct or buffered\)" \
	"${tgt[@]}" --export "m=$TEST_DIR/x.img,cache=sometimes"
cfg=$TEST_DIR/bad.conf
printf '[export m]\npath = %s/x.img\ncache = maybe\n' "$TEST_DIR" >"$cfg"
expect_refusal 20 1 "cache: 'maybe' is not direct or buffered" "${tgt[@]}" -c "$cfg"

# ---- a buffered file export ---------------------------------------------
truncate -s 32M "$TEST_DIR/buf.img" "$TEST_DIR/dir.img"
printf '[export conf]\npath = %s/dir.img\ncache = buffered\n' "$TEST_DIR" \
	>"$TEST_DIR/ok.conf"
start_target --export "buf=$TEST_DIR/buf.img,cache=buffered" \
	--export "dir=$TEST_DIR/dir.img" -c "$TEST_DIR/ok.conf"
url=tcp://127.0.0.1:$RBLK_PORT
grep -q "export buf: cache=buffered: I/O through the page cache" \
	"$RBLK_TARGET_LOG" || fail "no cache=buffered line for buf"
grep -q "export conf: cache=buffered" "$RBLK_TARGET_LOG" ||
	fail "the config file's cache = buffered was not applied"
! grep "export buf: file .*O_DIRECT" "$RBLK_TARGET_LOG" ||
	fail "the buffered export still uses O_DIRECT"
if grep -q "export dir: file .*O_DIRECT" "$RBLK_TARGET_LOG"; then
	echo "the direct export beside it uses O_DIRECT"
else
	echo "this file system refuses O_DIRECT: the direct export is buffered too"
fi
make_random "$TEST_DIR/src.bin" 32
tmo 60 "$t" put "$url/buf" "$TEST_DIR/src.bin" slot || fail "put through cache=buffered"
tmo 60 "$t" get "$url/buf" "$TEST_DIR/back.bin" slot || fail "get through cache=buffered"
cmp "$TEST_DIR/src.bin" "$TEST_DIR/back.bin" || fail "cache=buffered: read back differs"
tmo 60 "$t" rw "$url/conf" || fail "librblk rw on the config file's buffered export"

ctl() { tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"; }
truncate -s 16M "$TEST_DIR/live.img"
ctl add-export live "$TEST_DIR/live.img" --cache buffered >/dev/null ||
	fail "ctl add-export --cache buffered"
grep -q "export live: cache=buffered" "$RBLK_TARGET_LOG" ||
	fail "ctl add-export --cache buffered did not apply"
tmo 60 "$t" rw "$url/live" || fail "librblk rw on the live buffered export"
! ctl add-export l2 "$TEST_DIR/live.img" --cache bogus 2>"$TEST_DIR/err" ||
	fail "--cache bogus accepted"
grep -q "bad cache 'bogus' (direct or buffered)" "$TEST_DIR/err" ||
	fail "--cache bogus: $(cat "$TEST_DIR/err")"
! ctl add-export l3 ram:16M --cache buffered 2>"$TEST_DIR/err" ||
	fail "--cache buffered accepted for ram:"
grep -q "cache=buffered applies to files" "$TEST_DIR/err" ||
	fail "--cache buffered on ram: $(cat "$TEST_DIR/err")"
stop_pid "$RBLK_TARGET_PID"
cmp "$TEST_DIR/src.bin" "$TEST_DIR/buf.img" ||
	fail "the file does not hold what was written through the page cache"
echo "PASS: $TEST_NAME"
