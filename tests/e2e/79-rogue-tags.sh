#!/usr/bin/env bash
# Tag generations (issue 31, point 4): an answer naming a tag must be the
# answer to the command now on that tag. Against tests/e2e/rblk_rogue.py
# (rblk_libtest rogue), over push and pull reads:
#  - stale-tag: each READ on a tag after the first is answered with the
#    tag's previous RESP again (its old generation; a pull one names the
#    old READ's window, full of the old READ's data);
#  - other-tag: two READs in flight are answered each with the other's
#    tag index (their generations differ: the first tag was used before).
# librblk must never complete a READ with such an answer: the connection
# is recovered, the READ sent again and completed with its own bytes
# (checked against the rogue's pattern), and the log names the
# generations. Before tag generations (e28b00f) the pull READs completed
# as success with another READ's bytes.
# Mixes: a target that predates the HELLO flag refuses it as malformed
# (rogue mode old): librblk connects again without it and works; with
# RBLK_OLD_BUILD (a build of an older rblk, e.g. /work/base-e28b00f/build)
# also a real old rblk-target with this librblk, and that build's fio
# engine against this target, each verifying its data.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
source "$(dirname "$0")/rogue-functions.bash"
requires_built
requires python3
t=$RBLK_BUILD/tests/rblk_libtest
[ -x "$t" ] || fail "$t missing: run make check"

# lib MODE OP PULL: run rblk_libtest rogue; OUT holds its line, ERR the log
lib()
{
	start_rogue "$1" $((1 << 20))
	ERR=$TEST_DIR/lib.$1.$2.$3.err
	OUT=$(RBLK_TEST_PULL=$3 tmo 60 "$t" rogue "$ROGUE_URL" "$2" 5000 2 10 \
		200 2>"$ERR")
	stop_pid "$ROGUE_PID"
	echo "$1 $2 $([ -n "$3" ] && echo pull || echo push): $OUT ($(rogue_conns) connections)"
}

for pull in 1 ''; do
	for c in "stale-tag reads" "other-tag pair"; do
		set -- $c
		lib "$1" "$2" "$pull"
		[ "$(field result "$OUT")" = 0 ] && [ "$(field data "$OUT")" = ok ] ||
			fail "$1 ${pull:+pull}: a READ completed wrong: $OUT; $(cat "$ERR")"
		[ "$(field lost "$OUT")" -ge 1 ] && [ "$(rogue_conns)" -ge 2 ] ||
			fail "$1 ${pull:+pull}: the misdirected answer went unnoticed: $OUT"
		grep -q "for tag [0-9]* of generation [0-9]*; the tag's command is of generation" \
			"$ERR" || fail "$1 ${pull:+pull}: the log does not name the generations: $(cat "$ERR")"
	done
done

# a target that predates TAG_GEN (and EPOCH, RESIZE, PR): four refused
# HELLOs, then plain tags
for pull in '' 1; do
	lib old reads "$pull"
	[ "$(field result "$OUT")" = 0 ] && [ "$(field data "$OUT")" = ok ] &&
		[ "$(field lost "$OUT")" = 0 ] || fail "old target: $OUT; $(cat "$ERR")"
	# refused with PR, RESIZE, EPOCH and TAG_GEN, then with RESIZE, EPOCH
	# and TAG_GEN, then with EPOCH and TAG_GEN,
	# then with TAG_GEN: each refusal drops the newest flag (PUSH_IMM is
	# never asked over tcp)
	[ "$(rogue_conns)" -eq 5 ] || fail "old target: $(rogue_conns) connections, want 5"
done

old=${RBLK_OLD_BUILD:-}
if [ -z "$old" ]; then
	echo "RBLK_OLD_BUILD not set: mixes with a real older build skipped"
	echo "tag generations OK"
	exit 0
fi
[ -x "$old/rblk-target" ] || fail "RBLK_OLD_BUILD=$old has no rblk-target"
truncate -s 64M "$TEST_DIR/vol.img"
# this librblk against the old target
new_bin=$RBLK_TARGET_BIN
RBLK_TARGET_BIN=$old/rblk-target
start_target --export "vol=$TEST_DIR/vol.img"
RBLK_TARGET_BIN=$new_bin
tmo 60 "$t" rw "$RBLK_TARGET_URL/vol" >"$TEST_DIR/rw.out" 2>&1 ||
	fail "librblk against the old target: $(cat "$TEST_DIR/rw.out")"
stop_pid "$RBLK_TARGET_PID"
echo "this librblk against $old/rblk-target: rw OK"
# the old fio engine against this target, verifying what it wrote
if [ -f "$old/rblk-fio.so" ] && command -v fio >/dev/null; then
	start_target --export "vol=$TEST_DIR/vol.img"
	tmo 120 fio --name=mix "--ioengine=external:$old/rblk-fio.so" \
		"--uri=$RBLK_TARGET_URL/vol" --hostname=fio-mix --rw=randwrite \
		--bs=4k --iodepth=16 --size=16m --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --output="$TEST_DIR/fio.out" ||
		{ cat "$TEST_DIR/fio.out"; fail "old fio engine against this target"; }
	grep -q "err= 0" "$TEST_DIR/fio.out" ||
		{ cat "$TEST_DIR/fio.out"; fail "old fio engine: errors"; }
	echo "$old/rblk-fio.so against this target: verified OK"
fi
echo "tag generations OK"
