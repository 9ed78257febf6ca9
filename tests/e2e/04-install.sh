#!/usr/bin/env bash
# `make install DESTDIR=... PREFIX=/usr` puts every file in place (the
# nbdkit plugin, where built, in nbdkit's plugin directory); the
# installed pkg-config file gives flags with which a small program builds
# against the installed header and shared librblk, and that program lists
# and uses a live target's exports; the systemd units verify
# (systemd-analyze, when present) and rblk-target speaks the sd_notify
# protocol the unit's Type=notify relies on.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires make pkg-config cc python3 readelf nm
requires_built

dest=$TEST_DIR/dest
tmo 300 make -s BUILD="$RBLK_BUILD" install DESTDIR="$dest" PREFIX=/usr \
	>"$TEST_DIR/install.log" 2>&1 || { cat "$TEST_DIR/install.log"; fail "make install failed"; }

for f in sbin/rblk-target sbin/fence_rblk bin/rblk bin/rblk-devices lib/librblk.so.0 \
	lib/librblk.so lib/librblk.a include/rblk/rblk.h \
	lib/pkgconfig/rblk.pc share/man/man3/librblk.3 \
	share/man/man5/rblk-target.conf.5 share/man/man8/rblk-target.8 \
	share/man/man8/rblk.8 share/man/man8/rblk-devices.8 \
	share/doc/rblk/rblk-target.conf.example share/doc/rblk/map-example.conf \
	lib/systemd/system/rblk-target.service \
	lib/systemd/system/rblk-map@.service; do
	[ -e "$dest/usr/$f" ] || fail "make install did not install /usr/$f"
done
# the nbdkit plugin, where it was built, in nbdkit's plugin directory
if [ -f "$RBLK_BUILD/nbdkit-rblk-plugin.so" ]; then
	pdir=$(pkg-config --variable=plugindir nbdkit)
	[ -x "$dest$pdir/nbdkit-rblk-plugin.so" ] ||
		fail "make install did not install $pdir/nbdkit-rblk-plugin.so"
fi
for f in docs/man/*.[0-9]; do
	s=${f##*.}
	cmp -s "$f" "$dest/usr/share/man/man$s/$(basename "$f")" ||
		fail "man page $f not installed"
done
[ -x "$dest/usr/sbin/rblk-target" ] && [ -x "$dest/usr/bin/rblk" ] &&
	[ -x "$dest/usr/sbin/fence_rblk" ] || fail "programs not executable"
grep -q '"rblk_path", "/usr/bin/rblk"' "$dest/usr/sbin/fence_rblk" ||
	fail "the installed fence_rblk does not run /usr/bin/rblk by default"
# units name the installed programs, nothing is left to substitute
grep -q '^ExecStart=/usr/sbin/rblk-target -c /etc/rblk/rblk-target.conf$' \
	"$dest/usr/lib/systemd/system/rblk-target.service" ||
	fail "rblk-target.service ExecStart wrong"
grep -q '^ExecStart=/usr/bin/rblk map ' \
	"$dest/usr/lib/systemd/system/rblk-map@.service" ||
	fail "rblk-map@.service ExecStart wrong"
! grep -rq '@[A-Z]*DIR@' "$dest/usr/lib/systemd/system" ||
	fail "unsubstituted @...@ in the units"
# the udev rule names the installed namer, which names the installed rblk
rules=$dest/usr/lib/udev/rules.d/60-rblk.rules
namer=$dest/usr/lib/udev/rblk-udev-name
[ -f "$rules" ] || fail "make install did not install /usr/lib/udev/rules.d/60-rblk.rules"
[ -x "$namer" ] || fail "make install did not install /usr/lib/udev/rblk-udev-name"
grep -q '^PROGRAM="/usr/lib/udev/rblk-udev-name %k", SYMLINK+="%c"$' "$rules" ||
	fail "60-rblk.rules does not run the installed namer"
grep -q '^KERNEL!="ublkb\[0-9\]\*|nbd\[0-9\]\*", GOTO="rblk_end"$' "$rules" ||
	fail "60-rblk.rules does not match ublkbN and nbdN"
grep -q '^rblk=${RBLK:-/usr/bin/rblk}$' "$namer" || fail "namer does not name /usr/bin/rblk"
! grep -q '@[A-Z]*DIR@' "$rules" "$namer" || fail "unsubstituted @...@ in the udev files"
if command -v udevadm >/dev/null; then
	udevadm verify "$rules" >"$TEST_DIR/verify.log" 2>&1 ||
		grep -q "Unknown command\|unknown command\|invalid option" "$TEST_DIR/verify.log" ||
		{ cat "$TEST_DIR/verify.log"; fail "udevadm verify 60-rblk.rules"; }
fi
# the namer: a device nobody mapped gets no name, at once
rc=0
RBLK_RUN_DIR=$TEST_DIR/run RBLK=$RBLK_BIN "$namer" nbd15 --wait 0 >"$TEST_DIR/name.out" || rc=$?
[ $rc -eq 1 ] && [ ! -s "$TEST_DIR/name.out" ] || fail "namer on an unmapped device: rc $rc, '$(cat "$TEST_DIR/name.out")'"
"$dest/usr/bin/rblk" --version | grep -q "^rblk $(sed -n \
	's/^#define RBLK_VERSION_STRING "\(.*\)"/\1/p' include/rblk/rblk.h)" ||
	fail "installed rblk --version"

# pkg-config against the staged tree
export PKG_CONFIG_LIBDIR=$dest/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
cflags=$(pkg-config --cflags rblk | xargs)
libs=$(pkg-config --libs rblk | xargs)
[ "$cflags" = "-I$dest/usr/include" ] || fail "pkg-config --cflags: $cflags"
[ "$libs" = "-L$dest/usr/lib -lrblk" ] || fail "pkg-config --libs: $libs"
[ "$(pkg-config --modversion rblk)" = "$(sed -n \
	's/^#define RBLK_VERSION_STRING "\(.*\)"/\1/p' include/rblk/rblk.h)" ] ||
	fail "pkg-config --modversion"

cat >"$TEST_DIR/tiny.c" <<'C'
#include <rblk/rblk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct rblk_export_entry *list;
	static char out[8192], in[8192];
	struct rblk *r;
	char url[256];
	int n;

	n = rblk_discover(argv[1], NULL, &list);
	if (n < 0) {
		fprintf(stderr, "discover: %s\n", rblk_last_error());
		return 1;
	}
	for (int i = 0; i < n; i++)
		printf("%s %llu\n", list[i].name,
		       (unsigned long long)list[i].size);
	snprintf(url, sizeof(url), "%s/%s", argv[1], list[0].name);
	free(list);
	if (rblk_open(url, NULL, &r)) {
		fprintf(stderr, "open: %s\n", rblk_last_error());
		return 1;
	}
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 7 + 3);
	if (rblk_pwrite(r, out, sizeof(out), 4096, 0) ||
	    rblk_pread(r, in, sizeof(in), 4096) || memcmp(in, out, sizeof(in))) {
		fprintf(stderr, "I/O: %s\n", rblk_last_error());
		return 1;
	}
	printf("roundtrip ok\n");
	rblk_close(r);
	return argc == 2 ? 0 : 1;
}
C
# shellcheck disable=SC2086 # pkg-config output is a word list
cc -Wall -Werror $cflags -o "$TEST_DIR/tiny" "$TEST_DIR/tiny.c" $libs ||
	fail "a program does not build against the installed librblk"
readelf -d "$TEST_DIR/tiny" | grep -q 'NEEDED.*\[librblk.so.0\]' ||
	fail "tiny does not link the shared librblk.so.0"

# librblk exports its ABI and nothing else, shared and static: a program
# may define names the library uses inside (log_msg, now_ns, read_full)
abi=$(sed -n 's/^[[:space:]]*\(rblk_[a-z0-9_]*\);.*/\1/p' initiator/librblk.map | sort)
for l in librblk.so.0 librblk.a; do
	got=$(nm -g --defined-only "$dest/usr/lib/$l" 2>/dev/null |
		awk 'NF == 3 && $2 != "A" { print $3 }' | sort)
	[ "$got" = "$abi" ] || fail "$l exports more or less than librblk.map: $(
		comm -3 <(echo "$abi") <(echo "$got") | xargs)"
done
cat >"$TEST_DIR/clash.c" <<'C'
int log_msg(void);
int now_ns(void);
int read_full(void);
int log_msg(void) { return 1; }
int now_ns(void) { return 2; }
int read_full(void) { return 3; }
C
# shellcheck disable=SC2046 # pkg-config output is a word list
cc -Wall -Werror $cflags -o "$TEST_DIR/tiny-static" "$TEST_DIR/tiny.c" \
	"$TEST_DIR/clash.c" "$dest/usr/lib/librblk.a" \
	$(pkg-config --static --libs-only-l rblk | sed 's/-lrblk//') ||
	fail "a program defining log_msg/now_ns/read_full does not link librblk.a"

# sd_notify: READY=1 once listening (rblk-target.service is Type=notify)
sock=$TEST_DIR/notify.sock
python3 - "$sock" >"$TEST_DIR/notify.out" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
print(s.recv(256).decode(), flush=True)
PY
npid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
truncate -s 1M "$TEST_DIR/v.img"
NOTIFY_SOCKET=$sock start_target --export "v=$TEST_DIR/v.img"
wait "$npid" || fail "no sd_notify message from rblk-target"
[ "$(cat "$TEST_DIR/notify.out")" = "READY=1" ] ||
	fail "sd_notify sent '$(cat "$TEST_DIR/notify.out")'"

# (a SANITIZE=1 librblk pulls in libasan after tiny's own libraries)
ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0 \
	LD_LIBRARY_PATH=$dest/usr/lib tmo 30 "$TEST_DIR/tiny" \
	"tcp://127.0.0.1:$RBLK_PORT" >"$TEST_DIR/tiny.out" ||
	fail "tiny failed: $(cat "$TEST_DIR/tiny.out")"
[ "$(cat "$TEST_DIR/tiny.out")" = "v 1048576
roundtrip ok" ] || fail "tiny printed: $(cat "$TEST_DIR/tiny.out")"
tmo 30 "$TEST_DIR/tiny-static" "tcp://127.0.0.1:$RBLK_PORT" \
	>"$TEST_DIR/tiny-static.out" ||
	fail "tiny-static failed: $(cat "$TEST_DIR/tiny-static.out")"
cmp -s "$TEST_DIR/tiny.out" "$TEST_DIR/tiny-static.out" ||
	fail "tiny-static printed: $(cat "$TEST_DIR/tiny-static.out")"

# the units, installed where their ExecStart programs really are
if command -v systemd-analyze >/dev/null; then
	root=$TEST_DIR/root
	tmo 300 make -s BUILD="$RBLK_BUILD" install PREFIX="$root" \
		>"$TEST_DIR/install2.log" 2>&1 || fail "make install PREFIX=$root"
	cp "$root/lib/systemd/system/rblk-map@.service" "$TEST_DIR/rblk-map@vol0.service"
	for u in "$root/lib/systemd/system/rblk-target.service" \
		"$TEST_DIR/rblk-map@vol0.service"; do
		systemd-analyze verify --man=no "$u" >"$TEST_DIR/verify.out" 2>&1 ||
			fail "systemd-analyze verify $(basename "$u"): $(cat "$TEST_DIR/verify.out")"
		[ ! -s "$TEST_DIR/verify.out" ] ||
			fail "systemd-analyze verify $(basename "$u") warns: $(cat "$TEST_DIR/verify.out")"
	done
	echo "systemd units verified"
else
	echo "systemd-analyze absent: units not verified"
fi
echo "install: files in place, pkg-config and the shared library work"
