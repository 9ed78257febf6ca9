#!/usr/bin/env bash
# `rblk map` on a host without the kernel NBD driver: --nbd fails at once
# (exit 1) with a message about the missing nbd driver, prints nothing on
# stdout and leaves no daemon and no record behind; without --nbd/--ublk it
# fails the same way when no front end works. `rblk list` works (nothing in
# text, {"mappings": []} in JSON, which jq parses); records of dead daemons
# are cleaned by list; unmap of an unknown device fails cleanly; usage
# errors exit 2. The real thing runs in the VM suite (tests/vm/tests/2x-nbd-*).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires jq truncate
requires_built
if [ -e /sys/module/nbd ] || [ -e /dev/nbd0 ]; then
	skip "the kernel NBD driver is loaded here; this test is for hosts without it"
fi

export RBLK_RUN_DIR=$TEST_DIR/run
truncate -s 16M "$TEST_DIR/export.img"
start_target --export "vol0=$TEST_DIR/export.img"
url=tcp://127.0.0.1:$RBLK_PORT/vol0

# no rblk map process of ours (of this target) may outlive the command
no_daemon()
{
	local p
	p=$(pgrep -f "$RBLK_BIN map $url" || true)
	[ -z "$p" ] || fail "$1: rblk map processes left: $p"
	[ -z "$(ls "$RBLK_RUN_DIR"/map-* 2>/dev/null)" ] ||
		fail "$1: files left in $RBLK_RUN_DIR: $(ls "$RBLK_RUN_DIR")"
}

# expect_exit RC WHAT PATTERN CMD...: CMD exits RC within 20 s, nothing on
# stdout, stderr matches PATTERN (grep -Ei)
expect_exit()
{
	local want=$1 what=$2 pattern=$3 rc=0
	shift 3
	timeout -k 5 20 "$@" >"$TEST_DIR/out" 2>"$TEST_DIR/err" || rc=$?
	echo "$what: exit $rc: $(head -c 300 "$TEST_DIR/err")"
	[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$what: hung (killed after 20 s)"
	[ $rc -eq "$want" ] || fail "$what: exit $rc, wanted $want"
	[ ! -s "$TEST_DIR/out" ] || fail "$what: printed '$(cat "$TEST_DIR/out")' on stdout"
	grep -Eqi -- "$pattern" "$TEST_DIR/err" ||
		fail "$what: message does not match '$pattern'"
}

expect_exit 1 "rblk map --nbd" "^rblk map: nbd: .*nbd (driver|module).*not loaded" \
	"$RBLK_BIN" map "$url" --nbd
grep -q "modprobe nbd" "$TEST_DIR/err" || fail "the message does not say how to load nbd"
no_daemon "rblk map --nbd"

if [ ! -e /dev/ublk-control ]; then
	expect_exit 1 "rblk map (auto)" "^rblk map: no block device front end works here.*nbd" \
		"$RBLK_BIN" map "$url"
	no_daemon "rblk map (auto)"
fi

# rblk list: nothing to show; the JSON form parses
tmo 20 "$RBLK_BIN" list >"$TEST_DIR/list"
[ ! -s "$TEST_DIR/list" ] || fail "rblk list printed '$(cat "$TEST_DIR/list")'"
tmo 20 "$RBLK_BIN" list -o json | tee "$TEST_DIR/list.json"
jq -e '.mappings == []' "$TEST_DIR/list.json" >/dev/null || fail "rblk list -o json"

# a record whose daemon is dead is cleaned (and skipped) by list (this one
# in the key=value lines older daemons wrote, still read)
mkdir -p "$RBLK_RUN_DIR"
dead=$(sh -c 'echo $$') # a pid that has just exited
cat >"$RBLK_RUN_DIR/map-$dead.rec" <<EOF
url=$url
frontend=nbd
dev=/dev/nbd7
dev_id=7
queues=2
depth=64
pid=$dead
start=1
state=running
log=
EOF
tmo 20 "$RBLK_BIN" list -o json >"$TEST_DIR/list.json" 2>"$TEST_DIR/list.err"
cat "$TEST_DIR/list.err"
jq -e '.mappings == []' "$TEST_DIR/list.json" >/dev/null || fail "list shows a dead mapping"
[ ! -e "$RBLK_RUN_DIR/map-$dead.rec" ] || fail "list did not remove the dead record"
grep -q "is gone" "$TEST_DIR/list.err" || fail "list did not say it cleaned a record"

# a live one is shown (this shell stands in for a daemon), in text and
# JSON, with the error its daemon recorded (a JSON record, as written now)
jq -n --arg u "$url" --argjson p $$ '{url: $u, frontend: "nbd",
	dev: "/dev/nbd3", dev_id: 3, queues: 2, depth: 64, pid: $p, start: 0,
	state: "running", log: "", error: "queue 1: connection lost \u00e9\u0001"}' \
	>"$RBLK_RUN_DIR/map-$$.rec"
tmo 20 "$RBLK_BIN" list | tee "$TEST_DIR/list"
grep -Eq "^/dev/nbd3 +nbd +2 +64 +running +$$ +[0-9.]+[KMG]? +$url\$" "$TEST_DIR/list" ||
	fail "rblk list text does not show the mapping"
tmo 20 "$RBLK_BIN" list -o json | jq -e --arg u "$url" --argjson p $$ \
	'(.mappings | map(del(.pinned_bytes, .timeouts, .io_failed))) ==
	 [{"dev": "/dev/nbd3", "dev_id": 3, "frontend": "nbd",
	  "url": $u, "vol_id": null, "queues": 2, "depth": 64, "state": "running", "pid": $p,
	  "error": "queue 1: connection lost \u00e9\u0001"}]' \
	>/dev/null || fail "rblk list -o json does not show the mapping"
# one device's fields, as the udev namer asks for them
[ "$(tmo 20 "$RBLK_BIN" list -o url /dev/nbd3)" = "$url" ] ||
	fail "rblk list -o url /dev/nbd3"
[ "$(tmo 20 "$RBLK_BIN" list -o vol_id nbd3)" = - ] ||
	fail "rblk list -o vol_id nbd3: a record without a volume id"
! tmo 20 "$RBLK_BIN" list -o url nbd9 >"$TEST_DIR/none" ||
	fail "rblk list nbd9 found a mapping"
[ ! -s "$TEST_DIR/none" ] || fail "rblk list nbd9 printed $(cat "$TEST_DIR/none")"
rm -f "$RBLK_RUN_DIR/map-$$.rec"

# unmap: unknown devices, usage
expect_exit 1 "rblk unmap of an unknown device" "not mapped by rblk" \
	"$RBLK_BIN" unmap /dev/nbd9
expect_exit 1 "rblk unmap --force without the driver" "nbd.*(No such device|failed)" \
	"$RBLK_BIN" unmap --force nbd9
expect_exit 2 "rblk unmap without a device" "missing the device" "$RBLK_BIN" unmap
expect_exit 2 "rblk map without a URL" "missing the volume URL" "$RBLK_BIN" map --nbd
expect_exit 2 "rblk map --queues 0" "--queues" "$RBLK_BIN" map "$url" --queues 0
expect_exit 2 "rblk map --nbd --ublk" "exclusive" "$RBLK_BIN" map "$url" --nbd --ublk
expect_exit 2 "rblk map --poll-spin-us -1" "not a number of microseconds" \
	"$RBLK_BIN" map "$url" --poll-spin-us -1
expect_exit 2 "rblk map --poll-spin-us 1000001" "from 0 to 1000000" \
	"$RBLK_BIN" map "$url" --poll-spin-us 1000001
expect_exit 2 "rblk map, URL without export" "export" \
	"$RBLK_BIN" map "tcp://127.0.0.1:$RBLK_PORT" --nbd
expect_exit 2 "rblk list -o yaml" "unknown output format" "$RBLK_BIN" list -o yaml

# --help documents every option
tmo 10 "$RBLK_BIN" map --help >"$TEST_DIR/help"
for o in --nbd --ublk --queues --depth --read-only --device-id --timeout \
	--foreground --log-level --help; do
	grep -q -- "$o" "$TEST_DIR/help" || fail "rblk map --help does not mention $o"
done
tmo 10 "$RBLK_BIN" unmap --help | grep -q -- --force || fail "rblk unmap --help"
tmo 10 "$RBLK_BIN" list --help | grep -q -- json || fail "rblk list --help"

kill -0 "$RBLK_TARGET_PID" || fail "rblk-target died"
no_daemon "the end"
echo "PASS: $TEST_NAME"
