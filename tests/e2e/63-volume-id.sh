#!/usr/bin/env bash
# Volume identity (issue 25, point 5): the volume id comes from the backing
# store, never from the target and export names, so two volumes never share
# one and multipath (--path) cannot join them.
#
#  1. the repro: two targets on one host export "vol" from two different
#     files. Their ids differ, and `rblk info` and `rblk nbd` with --path
#     refuse the pair with an error naming both URLs (044a766 gave both the
#     same id, joined them, and a failover read the other file).
#  2. two targets exporting ONE file without uuid= report the same id (the
#     UUID stored with the file) and --path works: data written through A
#     reads back through B after kill -9 of A, and lands in the file.
#  3. ids are stable across target restarts, equal to the UUID stored with
#     the file (user.rblk.uuid, or the .NAME.rblk-uuid sidecar where the
#     file system has no user xattrs), and differ between files; RAM gets a
#     new id each run (its data does not survive a restart either).
#  4. a volume with no identity of its own (garbage where its id is
#     stored; a loop device where losetup works) is served, is marked
#     (identity false), and is refused with --path even where both paths
#     report the same stand-in id; a uuid= gives it an identity.
#  5. duplicate uuid= refused at load (--export and the configuration
#     file) and at ctl add-export --uuid (also a uuid equal to a file's
#     stored id); a fresh --uuid is reported.
#  6. one path: the target is killed and comes back on its port serving
#     another file under the same name; the session refuses the reconnect
#     ("another volume") instead of reading the other file.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
requires jq python3 truncate cmp
requires_nbdsh
requires_built

info_json()
{
	tmo 30 "$RBLK_BIN" info "$1" -o json
}

vol_id()
{
	info_json "$1" | jq -r .vol_id
}

# The id stored with file $1: its xattr, else its sidecar.
stored_id()
{
	python3 - "$1" <<'EOF'
import os, sys
p = sys.argv[1]
try:
    print(os.getxattr(p, "user.rblk.uuid").decode().strip())
except OSError:
    d, b = os.path.split(p)
    print(open(os.path.join(d, "." + b + ".rblk-uuid")).read().strip())
EOF
}

# ---- 1: two files, one export name, two targets on one host -------------
truncate -s 16M "$TEST_DIR/a.img" "$TEST_DIR/b.img"
mkdir "$TEST_DIR/ta" "$TEST_DIR/tb"
TEST_DIR=$TEST_DIR/ta start_target --export "vol=$TEST_DIR/a.img"
url_a=tcp://127.0.0.1:$RBLK_PORT/vol pid_a=$RBLK_TARGET_PID
TEST_DIR=$TEST_DIR/tb start_target --export "vol=$TEST_DIR/b.img"
url_b=tcp://127.0.0.1:$RBLK_PORT/vol

id_a=$(vol_id "$url_a")
id_b=$(vol_id "$url_b")
echo "a.img: $id_a, b.img: $id_b"
[[ $id_a =~ ^[0-9a-f-]{36}$ ]] || fail "no volume id for a.img: '$id_a'"
[ "$id_a" != "$id_b" ] ||
	fail "two different files exported as 'vol' on one host report one volume id $id_a"

if tmo 30 "$RBLK_BIN" info "$url_a" --path "$url_b" >"$TEST_DIR/info.out" 2>&1; then
	cat "$TEST_DIR/info.out"
	fail "rblk info --path joined two different volumes"
fi
grep -qF "path $url_b is not the same volume as $url_a" "$TEST_DIR/info.out" ||
	{ cat "$TEST_DIR/info.out"; fail "rblk info --path: no error naming both URLs"; }
echo "rblk info --path refused: $(grep -o 'path tcp.*' "$TEST_DIR/info.out" | cut -c1-160)"

rc=0
timeout -k 5 30 "$RBLK_BIN" nbd "$url_a" --path "$url_b" \
	--socket "$TEST_DIR/nbd1.sock" >"$TEST_DIR/nbd1.out" 2>&1 </dev/null || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] ||
	{ cat "$TEST_DIR/nbd1.out"; fail "rblk nbd --path to another volume: exit $rc"; }
grep -qF "path $url_b is not the same volume as $url_a" "$TEST_DIR/nbd1.out" ||
	{ cat "$TEST_DIR/nbd1.out"; fail "rblk nbd --path: no error naming both URLs"; }
echo "rblk nbd --path refused (exit $rc)"

# ---- 2: one file, two targets, no uuid=: one volume, failover works ------
truncate -s 16M "$TEST_DIR/shared.img"
mkdir "$TEST_DIR/tc" "$TEST_DIR/td"
TEST_DIR=$TEST_DIR/tc start_target --export "vol=$TEST_DIR/shared.img"
url_c=tcp://127.0.0.1:$RBLK_PORT/vol pid_c=$RBLK_TARGET_PID
TEST_DIR=$TEST_DIR/td start_target --export "vol=$TEST_DIR/shared.img"
url_d=tcp://127.0.0.1:$RBLK_PORT/vol
id_c=$(vol_id "$url_c")
[ "$id_c" = "$(vol_id "$url_d")" ] ||
	fail "one file exported by two targets: two volume ids"
[ "$id_c" = "$(stored_id "$TEST_DIR/shared.img")" ] ||
	fail "shared.img: id $id_c is not the one stored with the file"
start_nbd "$url_c" "$TEST_DIR/nbd2.sock" --path "$url_d" --failback 0
tmo 30 nbdsh -u "$NBD_URI" -c 'h.pwrite(b"P" * 65536, 1 << 20); h.flush()'
kill -9 "$pid_c"
wait "$pid_c" 2>/dev/null || true
tmo 30 nbdsh -u "$NBD_URI" -c '
assert h.pread(65536, 1 << 20) == b"P" * 65536
h.pwrite(b"Q" * 65536, 2 << 20)
h.flush()'
grep -q "now on path 1" "$RBLK_NBD_LOG" ||
	{ cat "$RBLK_NBD_LOG"; fail "rblk nbd did not move to the second path"; }
cmp <(dd if="$TEST_DIR/shared.img" bs=64k skip=16 count=1 status=none) \
	<(head -c 65536 /dev/zero | tr '\0' P) || fail "the write through A is not in the file"
cmp <(dd if="$TEST_DIR/shared.img" bs=64k skip=32 count=1 status=none) \
	<(head -c 65536 /dev/zero | tr '\0' Q) || fail "the write through B is not in the file"
echo "one file, two targets: same id $id_c; failover read back what A wrote"

# ---- 3: stable across restarts, per file; RAM per run --------------------
[ "$id_a" = "$(stored_id "$TEST_DIR/a.img")" ] ||
	fail "a.img: id $id_a is not the one stored with the file"
grep -E "export vol: volume id $id_a \((new, stored in|from) (its user.rblk.uuid xattr|the sidecar file)" \
	"$TEST_DIR"/ta/target.*.log >/dev/null ||
	{ cat "$TEST_DIR"/ta/target.*.log; fail "the target did not log where a.img's id comes from"; }
stop_pid "$pid_a"
mkdir "$TEST_DIR/ta2"
TEST_DIR=$TEST_DIR/ta2 start_target --export "vol=$TEST_DIR/a.img" \
	--export "r=ram:1M"
url_a2=tcp://127.0.0.1:$RBLK_PORT/vol pid_a2=$RBLK_TARGET_PID
[ "$(vol_id "$url_a2")" = "$id_a" ] || fail "a.img: another id after a restart"
ram1=$(vol_id "tcp://127.0.0.1:$RBLK_PORT/r")
stop_pid "$pid_a2"
mkdir "$TEST_DIR/ta3"
TEST_DIR=$TEST_DIR/ta3 start_target --export "vol=$TEST_DIR/a.img" \
	--export "r=ram:1M"
[ "$(vol_id "tcp://127.0.0.1:$RBLK_PORT/vol")" = "$id_a" ] ||
	fail "a.img: another id after a second restart"
ram2=$(vol_id "tcp://127.0.0.1:$RBLK_PORT/r")
[ "$ram1" != "$ram2" ] || fail "ram: the same id ($ram1) after a restart"
echo "a.img keeps $id_a across two restarts; ram: $ram1, then $ram2"

# ---- 4: no identity of its own -------------------------------------------
truncate -s 8M "$TEST_DIR/n.img"
python3 - "$TEST_DIR/n.img" <<'EOF'
import os, sys
p = sys.argv[1]
try:
    os.setxattr(p, "user.rblk.uuid", b"not a uuid")
except OSError:
    pass
d, b = os.path.split(p)
open(os.path.join(d, "." + b + ".rblk-uuid"), "w").write("not a uuid\n")
EOF
mkdir "$TEST_DIR/te" "$TEST_DIR/tf"
TEST_DIR=$TEST_DIR/te start_target --export "vol=$TEST_DIR/n.img" \
	--export "named=$TEST_DIR/n.img,uuid=6e6f6964-0000-4000-8000-000000000063"
url_e=tcp://127.0.0.1:$RBLK_PORT/vol
grep -q "export vol: WARNING: volume id .*NO IDENTITY" "$RBLK_TARGET_LOG" ||
	{ cat "$RBLK_TARGET_LOG"; fail "no warning for a volume without identity"; }
url_e_named=tcp://127.0.0.1:$RBLK_PORT/named
TEST_DIR=$TEST_DIR/tf start_target --export "vol=$TEST_DIR/n.img" \
	--export "named=$TEST_DIR/n.img,uuid=6e6f6964-0000-4000-8000-000000000063"
url_f=tcp://127.0.0.1:$RBLK_PORT/vol
url_f_named=tcp://127.0.0.1:$RBLK_PORT/named
info_json "$url_e" >"$TEST_DIR/e.json"
jq -e '.identity == false' "$TEST_DIR/e.json" >/dev/null ||
	{ cat "$TEST_DIR/e.json"; fail "rblk info: a volume without identity not marked"; }
# the same stand-in on both: only the flag keeps --path from joining them
[ "$(jq -r .vol_id "$TEST_DIR/e.json")" = "$(vol_id "$url_f")" ] ||
	fail "one file on one host: two stand-in ids"
# served on one path: its data reads back
tmo 30 "$RBLK_BIN" info "$url_e" | grep -q "a stand-in" ||
	fail "rblk info: no word that the id is a stand-in"
start_nbd "$url_e" "$TEST_DIR/nbd3.sock"
tmo 30 nbdsh -u "$NBD_URI" -c '
h.pwrite(b"N" * 4096, 8192); h.flush()
assert h.pread(4096, 8192) == b"N" * 4096'
if tmo 30 "$RBLK_BIN" info "$url_e" --path "$url_f" >"$TEST_DIR/none.out" 2>&1; then
	cat "$TEST_DIR/none.out"
	fail "rblk info --path accepted a volume without identity"
fi
grep -qF "$url_e has no volume identity of its own" "$TEST_DIR/none.out" ||
	{ cat "$TEST_DIR/none.out"; fail "--path on a volume without identity: no clear error"; }
echo "no identity: refused with --path: $(grep -o 'tcp.*' "$TEST_DIR/none.out" | cut -c1-120)"
# uuid= names it: --path accepted
jq -e '.identity == true and .vol_id == "6e6f6964-0000-4000-8000-000000000063"' \
	<(tmo 30 "$RBLK_BIN" info "$url_e_named" --path "$url_f_named" -o json) \
	>/dev/null || fail "uuid= on a volume without identity: --path refused"

# a loop device has no serial: no identity (root with losetup only)
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null &&
	loop=$(losetup -f --show "$TEST_DIR/a.img" 2>/dev/null); then
	cleanup_fn losetup -d "$loop"
	mkdir "$TEST_DIR/tl"
	TEST_DIR=$TEST_DIR/tl start_target --export "vol=$loop"
	jq -e '.identity == false' <(info_json "tcp://127.0.0.1:$RBLK_PORT/vol") \
		>/dev/null || fail "loop device $loop: marked as having an identity"
	echo "loop device $loop: no identity, marked"
else
	echo "loop device: not tried (not root, or no losetup)"
fi

# ---- 5: duplicate uuid= ---------------------------------------------------
u=12345678-1234-4234-8234-123456789063
rc=0
timeout 10 "$RBLK_TARGET_BIN" --listen "tcp://127.0.0.1:$(free_port)" \
	--allow-any-host --ctl-socket none --export "x=ram:1M,uuid=$u" \
	--export "y=ram:1M,uuid=$u" >"$TEST_DIR/dup.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] ||
	{ cat "$TEST_DIR/dup.out"; fail "two exports with one uuid: exit $rc"; }
grep -q "exports 'x' and 'y' have the same uuid" "$TEST_DIR/dup.out" ||
	{ cat "$TEST_DIR/dup.out"; fail "two exports with one uuid: no clear error"; }
echo "duplicate uuid refused at load: $(grep -o "exports 'x'.*identity" "$TEST_DIR/dup.out")"
cat >"$TEST_DIR/dup.conf" <<EOF
[target]
listen = tcp://127.0.0.1:$(free_port)
allow_any_host = yes
ctl_socket = none
[export x]
path = ram:1M
uuid = $u
[export y]
path = ram:1M
uuid = ${u^^}
EOF
rc=0
timeout 10 "$RBLK_TARGET_BIN" --config "$TEST_DIR/dup.conf" \
	>"$TEST_DIR/dup2.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "have the same uuid" "$TEST_DIR/dup2.out" ||
	{ cat "$TEST_DIR/dup2.out"; fail "configuration file: one uuid twice accepted (exit $rc)"; }

mkdir "$TEST_DIR/tg"
TEST_DIR=$TEST_DIR/tg start_target --export "x=ram:1M,uuid=$u" \
	--export "a=$TEST_DIR/a.img"
ctl()
{
	tmo 10 "$RBLK_TARGET_BIN" ctl --socket "$RBLK_CTL_SOCKET" "$@"
}
if ctl add-export z ram:1M --uuid "$u" >"$TEST_DIR/add.out" 2>&1; then
	fail "ctl add-export accepted a uuid another export has"
fi
grep -q "export 'x' has that volume id already" "$TEST_DIR/add.out" ||
	{ cat "$TEST_DIR/add.out"; fail "ctl add-export --uuid duplicate: no clear error"; }
if ctl add-export z ram:1M --uuid "$id_a" >"$TEST_DIR/add2.out" 2>&1; then
	fail "ctl add-export accepted the id stored with a.img"
fi
grep -q "export 'a' has that volume id already" "$TEST_DIR/add2.out" ||
	{ cat "$TEST_DIR/add2.out"; fail "ctl add-export --uuid = a file's id: no clear error"; }
ctl add-export z ram:1M --uuid 12345678-1234-4234-8234-000000000001 >/dev/null
[ "$(vol_id "tcp://127.0.0.1:$RBLK_PORT/z")" = 12345678-1234-4234-8234-000000000001 ] ||
	fail "ctl add-export --uuid: another id reported"
echo "ctl add-export: duplicate uuids refused, a fresh one reported"

# ---- 6: one path, the target comes back serving another file -------------
truncate -s 16M "$TEST_DIR/x.img" "$TEST_DIR/y.img"
port=$(free_port)
start_target_on "$port" "$TEST_DIR/tx.log" --ctl-socket none \
	--export "vol=$TEST_DIR/x.img"
pid_x=$RBLK_TARGET_PID
start_nbd "tcp://127.0.0.1:$port/vol" "$TEST_DIR/nbd6.sock" \
	--reconnect-delay 0.2 --ctrl-loss-timeout 8
tmo 30 nbdsh -u "$NBD_URI" -c 'h.pwrite(b"X" * 4096, 0); h.flush()'
kill -9 "$pid_x"
wait "$pid_x" 2>/dev/null || true
start_target_on "$port" "$TEST_DIR/ty.log" --ctl-socket none \
	--export "vol=$TEST_DIR/y.img"
rc=0
tmo 60 nbdsh -u "$NBD_URI" -c 'assert h.pread(4096, 0) == b"X" * 4096' \
	>"$TEST_DIR/nbd6.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "after the restart the session read y.img as if it were x.img"
grep -q "is another volume after the reconnect" "$RBLK_NBD_LOG" ||
	{ cat "$RBLK_NBD_LOG"; fail "no clear error for a reconnect to another volume"; }
echo "reconnect to another file refused: $(grep -o 'tcp://[^ ]* is another volume.*' "$RBLK_NBD_LOG" | head -1 | cut -c1-140)"
echo "PASS: $TEST_NAME"
