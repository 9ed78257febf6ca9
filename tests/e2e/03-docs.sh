#!/usr/bin/env bash
# Documentation: every man page renders without a groff/man warning; every
# program's --help and --version work (exit 0, on stdout, one version);
# every long option that a --help prints (for rblk: of every subcommand)
# appears in that program's man page.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires groff
requires_built

version=$(sed -n 's/^#define RBLK_VERSION_STRING "\(.*\)"/\1/p' include/rblk/rblk.h)
[ -n "$version" ] || fail "no RBLK_VERSION_STRING in include/rblk/rblk.h"

for page in docs/man/*.[0-9]; do
	groff -man -ww -z "$page" 2>"$TEST_DIR/warn" ||
		fail "groff failed on $page: $(cat "$TEST_DIR/warn")"
	[ ! -s "$TEST_DIR/warn" ] || fail "$page: $(cat "$TEST_DIR/warn")"
	if command -v man >/dev/null; then
		MANWIDTH=80 man --warnings -l "$page" >/dev/null 2>"$TEST_DIR/warn" ||
			fail "man -l $page failed: $(cat "$TEST_DIR/warn")"
		[ ! -s "$TEST_DIR/warn" ] || fail "man -l $page: $(cat "$TEST_DIR/warn")"
	fi
	grep -q "^\.TH .*\"rblk $version\"" "$page" ||
		fail "$page: .TH does not name rblk $version"
done

# the page as text, one long line per paragraph, no hyphenation
render()
{
	groff -man -Tascii -rLL=2000n -rHY=0 -P -c -P -b -P -u "$1" 2>/dev/null
}

# check_options PAGE CMD...: every --option that `CMD --help` prints is in PAGE
check_options()
{
	local page=$1 opt missing=()
	shift
	"$@" --help >"$TEST_DIR/help" 2>"$TEST_DIR/help.err" ||
		fail "$* --help exited $?"
	[ -s "$TEST_DIR/help" ] && [ ! -s "$TEST_DIR/help.err" ] ||
		fail "$* --help: nothing on stdout, or output on stderr"
	render "$page" >"$TEST_DIR/page.txt"
	# the options a help describes: lines "  -x, --name ..." or "  --name ..."
	for opt in $(sed -nE 's/^ +(-[A-Za-z0-9], )?(--[a-z][a-z0-9-]*[a-z0-9]).*/\2/p' \
		"$TEST_DIR/help" | sort -u); do
		grep -qF -- "$opt" "$TEST_DIR/page.txt" || missing+=("$opt")
	done
	[ ${#missing[@]} -eq 0 ] ||
		fail "$page lacks options that '$* --help' prints: ${missing[*]}"
}

check_version()
{
	local out
	out=$("$@" --version) || fail "$* --version exited $?"
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] ||
		fail "$* --version: more than one line"
	case $out in
	"$(basename "$1") $version"*) ;;
	*) fail "$* --version printed '$out', want '$(basename "$1") $version...'" ;;
	esac
}

check_options docs/man/rblk-target.8 "$RBLK_TARGET_BIN"
check_options docs/man/rblk-devices.8 "$RBLK_BUILD/rblk-devices"
check_options docs/man/rblk.8 "$RBLK_BIN"
cmds=$("$RBLK_BIN" --help | awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}')
[ -n "$cmds" ] || fail "rblk --help lists no commands"
for c in $cmds; do
	check_options docs/man/rblk.8 "$RBLK_BIN" "$c"
	render docs/man/rblk.8 | grep -q "rblk $c" ||
		fail "rblk.8 does not describe 'rblk $c'"
done

check_version "$RBLK_TARGET_BIN"
check_version "$RBLK_BIN"
check_version "$RBLK_BUILD/rblk-devices"
[ "$("$RBLK_BIN" version)" = "$("$RBLK_BIN" --version)" ] ||
	fail "'rblk version' and 'rblk --version' differ"

# every public function of librblk is documented in librblk.3
render docs/man/librblk.3 >"$TEST_DIR/lib.txt"
for fn in $(sed -n 's/^\t\t\(rblk_[a-z_]*\);$/\1/p' initiator/librblk.map); do
	grep -q "$fn" "$TEST_DIR/lib.txt" || fail "librblk.3 lacks $fn"
done
echo "docs: $(ls docs/man/*.[0-9] | wc -l) pages clean, options and versions consistent"
