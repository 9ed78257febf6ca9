#!/usr/bin/env bash
# Documentation: the references stay references: docs/ARCHITECTURE.md's
# source map names every source file and nothing else, it and
# docs/BENCHMARKS.md stay within their lengths, and every section a file
# cites by name ("docs/X.md, "Section"") exists. Every man page renders
# without a groff/man warning; every program's --help and --version work
# (exit 0, on stdout, one version); every long option that a --help prints
# (for rblk: of every subcommand) appears in that program's man page.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires python3

# check_length FILE MAX: a reference, not a notebook (history goes to
# docs/bench-log/ and to commit messages)
check_length()
{
	local n
	n=$(wc -l <"$1")
	[ "$n" -le "$2" ] || fail "$1 has $n lines, more than $2: move history to docs/bench-log/"
}
check_length docs/ARCHITECTURE.md 400
check_length docs/BENCHMARKS.md 600

# The files the map must name: every C source and header, Python tool and
# linker map in the tree (tracked, or new and not ignored).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files --cached --others --exclude-standard
else
	find . -path ./build -prune -o -path './build-*' -prune -o -type f -print |
		sed 's|^\./||'
fi | grep -E '\.(c|h|py|map)$' | sort -u >"$TEST_DIR/sources"
[ -s "$TEST_DIR/sources" ] || fail "no source files found"

# docs/ARCHITECTURE.md, "Source map": its first ``` block. A line
# "dir/ ..." at the left margin opens a directory; "  name[, name]  what"
# (two spaces in, two or more before the description) names files in it,
# x.[ch] standing for x.c and x.h; deeper lines continue a description.
python3 - docs/ARCHITECTURE.md >"$TEST_DIR/mapped" 2>"$TEST_DIR/map.err" <<'PY' ||
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^## Source map\n.*?^```\n(.*?)^```", text, re.S | re.M)
if not m:
    sys.exit("no ``` block under '## Source map'")
d = ""
for line in m.group(1).splitlines():
    if re.match(r"^\S+/(\s|$)", line):
        d = line.split()[0]
    elif re.match(r"^  \S", line):
        for name in re.split(r"\s{2,}", line.strip())[0].split(", "):
            names = [name[:-5] + ".c", name[:-5] + ".h"] \
                if name.endswith(".[ch]") else [name]
            for n in names:
                print(d + n)
PY
	fail "docs/ARCHITECTURE.md: $(cat "$TEST_DIR/map.err")"
sort -u -o "$TEST_DIR/mapped" "$TEST_DIR/mapped"
missing=$(comm -23 "$TEST_DIR/sources" "$TEST_DIR/mapped" | tr '\n' ' ')
[ -z "$missing" ] ||
	fail "docs/ARCHITECTURE.md's source map lacks: $missing"
while read -r f; do
	[ -e "$f" ] || fail "docs/ARCHITECTURE.md's source map names $f, which does not exist"
done <"$TEST_DIR/mapped"

# Sections cited by name: 'docs/ARCHITECTURE.md, "Slot pool"' in code,
# scripts and docs (comment leaders and line breaks between the parts
# allowed) must name a heading of that file (a heading starting with the
# name, any case). The history in docs/bench-log/ cites what was.
git ls-files 2>/dev/null | grep -v '^docs/bench-log/' |
	grep -E '\.(c|h|sh|py|mk|md|[0-9])$|^Makefile$' >"$TEST_DIR/citing" || true
python3 - "$TEST_DIR/citing" >"$TEST_DIR/cites" <<'PY' ||
import os, re, sys
bad = 0
heads = {}
for f in open(sys.argv[1]).read().split():
    try:
        t = open(f, errors="replace").read()
    except OSError:
        continue
    flat = re.sub(r"\n[ \t]*(?:\*|#|//|\.\\\")?[ \t]*", " ", t)
    for doc, name in re.findall(r'((?:[\w.-]+/)*[A-Z][\w-]*\.md),?\s+"([^"]+)"', flat):
        path = next((p for p in (doc, os.path.join("docs", doc),
                                 os.path.join(os.path.dirname(f), doc))
                     if os.path.isfile(p)), None)
        if not path:
            continue
        if path not in heads:
            heads[path] = [h.lower() for h in re.findall(
                r"^#+ (.*)$", open(path).read(), re.M)]
        name = " ".join(name.split())
        if not any(h.startswith(name.lower()) for h in heads[path]):
            print(f'{f}: cites {doc}, "{name}": no such section')
            bad += 1
sys.exit(1 if bad else 0)
PY
	fail "sections cited that do not exist: $(cat "$TEST_DIR/cites")"
echo "docs: map of $(wc -l <"$TEST_DIR/sources") source files complete, lengths within bounds, cited sections exist"

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

# test numbers are unique within each suite (they name the run order and
# the logs; two tests with one number were easy to confuse)
for d in tests/e2e tests/vm/tests; do
	dup=$(ls "$d" | sed -n 's/^\([0-9][0-9]\)-.*\.sh$/\1/p' | sort | uniq -d | tr '\n' ' ')
	[ -z "$dup" ] || fail "$d: more than one test numbered $dup"
done

# every public function of librblk is documented in librblk.3
render docs/man/librblk.3 >"$TEST_DIR/lib.txt"
for fn in $(sed -n 's/^\t\t\(rblk_[a-z_]*\);$/\1/p' initiator/librblk.map); do
	grep -q "$fn" "$TEST_DIR/lib.txt" || fail "librblk.3 lacks $fn"
done
echo "docs: $(ls docs/man/*.[0-9] | wc -l) pages clean, options and versions consistent"
