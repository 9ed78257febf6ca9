#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Make DIR a configured fio source tree (DIR/config-host.h exists) for
# building external fio engines against the fio installed on this host.
#
#   tools/fio/get-fio-src.sh DIR
#
# Debian ships no fio headers, so this fetches the source package of the
# installed fio version with `apt-get source --download-only` (into the
# download cache ${RBLK_CACHE:-$HOME/.cache/rblk}/fio-dl), unpacks it with
# dpkg-source (Debian patches applied, as in the installed binary) and runs
# ./configure. When no deb-src entry is configured it adds deb-src twins of
# the host's Debian-archive entries in files of its own,
# /etc/apt/sources.list.d/rblk-deb-src.{sources,list} (nothing else is
# edited; delete them to undo), and runs apt-get update. It installs fio and
# dpkg-dev when missing. Running it again does nothing once
# DIR/config-host.h exists.
#
# Needs root (or sudo) only to install packages, add deb-src entries and
# run apt-get update.
# Exits non-zero with a one-line reason on stderr when the source cannot be
# had (no fio installed, archive unreachable, ...); with GET_FIO_SRC_ERROR=FILE
# set, the reason is also written to FILE.
set -euo pipefail

prog=get-fio-src
say() { echo "$prog: $*" >&2; }
die()
{
	say "error: $*"
	[ -z "${GET_FIO_SRC_ERROR:-}" ] || echo "$*" >"$GET_FIO_SRC_ERROR"
	exit 1
}

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dest=$1
if [ -f "$dest/config-host.h" ]; then
	exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)

# Root, or sudo for what needs root (installing packages, deb-src, update).
as_root()
{
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo -n "$@"
	else
		die "need root for '$*': run as root, or pass FIO_SRC=DIR"
	fi
}

command -v apt-get >/dev/null ||
	die "apt-get not found (not Debian?): pass FIO_SRC=DIR, a configured fio source tree"
if ! command -v dpkg-source >/dev/null || ! command -v fio >/dev/null; then
	say "installing fio and dpkg-dev ..."
	as_root "$here/../apt-install.sh" fio dpkg-dev >&2 ||
		die "cannot install fio and dpkg-dev (offline?)"
fi
ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null) || ver=
[ -n "$ver" ] || die "fio is not installed from a Debian package: pass FIO_SRC=DIR"

have_src_index()
{
	apt-cache showsrc fio 2>/dev/null | grep -q '^Package: fio'
}

# Print deb-src stanzas for the Debian-archive stanzas of the deb822 files
# given, skipping any that already list deb-src. Fields other than Types
# (URIs, Suites, Components, Signed-By, ...) are copied as they are.
deb822_src_stanzas()
{
	awk '
	function flush() {
		if (types ~ /(^| )deb( |$)/ && types !~ /deb-src/ &&
		    uris ~ /debian/ && enabled !~ /^[Nn]o/)
			printf "Types: deb-src\n%s\n", body
		types = uris = body = enabled = ""
	}
	/^[ \t]*#/ { next }
	/^[ \t]*$/ { flush(); next }
	{
		if ($1 == "Types:") { types = substr($0, 8); next }
		if ($1 == "URIs:") uris = $0
		if ($1 == "Enabled:") enabled = $2
		body = body $0 "\n"
	}
	END { flush() }' "$@"
}

# Write NAME in /etc/apt/sources.list.d from CONTENT unless CONTENT is empty.
write_list()
{
	local name=$1 content=$2
	[ -n "$content" ] || return 0
	say "adding deb-src entries: /etc/apt/sources.list.d/$name"
	printf '# Added by rblk tools/fio/get-fio-src.sh to fetch the fio source.\n# Safe to delete.\n\n%s\n' \
		"$content" | as_root tee "/etc/apt/sources.list.d/$name" >/dev/null ||
		die "cannot write /etc/apt/sources.list.d/$name"
}

# Add deb-src twins of the host's Debian-archive entries, in files of our
# own: deb822 stanzas to rblk-deb-src.sources, one-line entries (options
# such as [signed-by=...] kept) to rblk-deb-src.list.
add_deb_src()
{
	local d822=() d1=() f s822="" s1=""
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && d822+=("$f")
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && d1+=("$f")
	done
	[ ${#d822[@]} -eq 0 ] || s822=$(deb822_src_stanzas "${d822[@]}")
	[ ${#d1[@]} -eq 0 ] ||
		s1=$(awk '$1 == "deb" && /debian/ { $1 = "deb-src"; print }' "${d1[@]}")
	[ -n "$s822$s1" ] ||
		die "no Debian archive entry in /etc/apt/sources*: cannot add deb-src; pass FIO_SRC=DIR"
	write_list rblk-deb-src.sources "$s822"
	write_list rblk-deb-src.list "$s1"
}

if ! have_src_index; then
	if ! grep -rqsE '^[[:space:]]*(deb-src|Types:.*deb-src)' \
		/etc/apt/sources.list /etc/apt/sources.list.d/; then
		add_deb_src
	fi
	say "apt-get update (to fetch the source package indexes) ..."
	# waits for the apt/dpkg locks if another apt-get (make -j) holds them
	as_root apt-get -o DPkg::Lock::Timeout=300 update -q >&2 ||
		die "apt-get update failed (offline?): pass FIO_SRC=DIR, a configured fio $ver source tree"
	have_src_index ||
		die "no source package for fio in the configured archives; pass FIO_SRC=DIR"
fi

# Downloads are cached by exact version: make clean does not refetch.
cache=${RBLK_CACHE:-$HOME/.cache/rblk}/fio-dl
mkdir -p "$cache"
# as root, apt's download sandbox user cannot write a cache under /root
src_opts=(-q --download-only)
[ "$(id -u)" -ne 0 ] || src_opts+=(-o APT::Sandbox::User=root)
dsc=$cache/fio_${ver#*:}.dsc
if [ ! -f "$dsc" ]; then
	say "downloading the fio $ver source package into $cache ..."
	if ! (cd "$cache" && apt-get source "${src_opts[@]}" "fio=$ver" >&2); then
		say "fio $ver is not in the archive; trying its newest fio source"
		say "(fio refuses to load the engine if its engine ABI differs)"
		(cd "$cache" && apt-get source "${src_opts[@]}" fio >&2) ||
			die "apt-get source fio failed (offline?): pass FIO_SRC=DIR"
		dsc=
		for f in "$cache"/fio_*.dsc; do
			[ -f "$f" ] && dsc=$f
		done
		[ -n "$dsc" ] || die "apt-get source left no .dsc in $cache"
	fi
fi

# Debian's patches are applied, as in the installed binary. apt checked the
# download against the signed archive index; dpkg-source's own OpenPGP check
# needs debian-keyring, so its output goes to a log shown only on failure.
say "unpacking $(basename "$dsc") into $dest ..."
rm -rf "$dest" "$dest.tmp"
mkdir -p "$(dirname "$dest")"
dpkg-source --no-copy -x "$dsc" "$dest.tmp" >"$dest.unpack.log" 2>&1 ||
	{ cat "$dest.unpack.log" >&2; die "dpkg-source -x $dsc failed"; }
rm -f "$dest.unpack.log"

say "configuring fio (config-host.h) ..."
(cd "$dest.tmp" && ./configure >configure.out 2>&1) ||
	{ tail -n 20 "$dest.tmp/configure.out" >&2; die "fio ./configure failed"; }
mv "$dest.tmp" "$dest"
say "fio source ready: $dest"
