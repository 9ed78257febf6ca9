#!/bin/bash
# Authentication and rkey isolation over real verbs and rdma_cm (rdma_rxe):
# the host's 65-auth and 66-rkey-isolation checks on an RC QP. The right
# secret moves data (nbdcopy, sha256); wrong secret, unknown host, no
# secret, a host not on the allow list, a reflected challenge and a
# replayed response are refused with their exact errors and get no
# windows allocated; an allow_ro grant is read-only at the target; another
# connection using a connection's in-flight READ and WRITE windows, and a
# connection using its own key after its command completed, get remote
# access errors from the HCA; a sweep of guessed keys is refused; the
# first connection still verifies its data.
# vm-timeout: 300
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_cmd nbdcopy sha256sum
need_file "$BUILD/rblk-target" "$BUILD/rblk" "$BUILD/tests/rblk_libtest" \
	"$BUILD/tests/rblk_rawclient"

port=7441
dir=$TMPDIR/auth
mkdir -p "$dir"
for k in alpha beta delta wrong; do
	head -c 32 /dev/urandom | base64 >"$dir/$k.key"
	chmod 600 "$dir/$k.key"
done
truncate -s 32M "$dir/vol.img"
bg "$BUILD/rblk-target" --listen "rdma://$RDMA_ADDR:$port" --allow-any-host --log-level debug \
	--host "alpha:secret-file=$dir/alpha.key" \
	--host "beta:secret-file=$dir/beta.key" \
	--host "delta:secret-file=$dir/delta.key" \
	--export "vol=$dir/vol.img,allow=alpha,allow_ro=beta" \
	--export "open=ram:8M" --export "locked=ram:8M,allow=alpha" \
	2>"$dir/target.log"
wait_until 30 grep -q "listening on" "$dir/target.log"
url=rdma://$RDMA_ADDR:$port/vol
regs() { grep -c "windows allocated" "$dir/target.log" || true; }

echo "# right secret: rblk nbd over rdma + nbdcopy round trip"
sock=$dir/nbd.sock
bg "$BUILD/rblk" nbd "$url" --socket "$sock" --host-name alpha \
	--key-file "$dir/alpha.key" --mutual-auth 2>"$dir/nbd.log"
wait_until 60 test -S "$sock"
head -c 32M /dev/urandom >"$dir/in.bin"
nbd_round_trip "$dir/in.bin" "$sock" vol "$dir/out.bin" "$dir/vol.img" \
	"authenticated round trip"

echo "# refusals"
before=$(regs)
refused() {
	local want=$1 out
	shift
	if out=$(timeout 60 "$BUILD/rblk" info "$url" "$@" 2>&1); then
		fail "login with $* succeeded"
	fi
	echo "$out"
	[ "$out" = "rblk info: $want" ] || fail "with $*: got '$out', want '$want'"
}
refused "authentication failed: wrong secret or unknown host 'alpha'" \
	--host-name alpha --key-file "$dir/wrong.key"
refused "authentication failed: wrong secret or unknown host 'gamma'" \
	--host-name gamma --key-file "$dir/alpha.key"
refused "target requires authentication for host 'alpha'; give --key-file" \
	--host-name alpha
refused "host 'delta' is not allowed to use export 'vol'" \
	--host-name delta --key-file "$dir/delta.key"
out=$(timeout 60 "$BUILD/tests/rblk_rawclient" reflect "$url" alpha "$dir/alpha.key") ||
	fail "reflect: $out"
echo "$out"
[ "$out" = "reflected challenge refused: authentication failed" ] || fail "reflect: '$out'"
[ "$(regs)" = "$before" ] || fail "windows allocated for a refused login"
out=$(timeout 60 "$BUILD/tests/rblk_rawclient" replay "$url" alpha "$dir/alpha.key") ||
	fail "replay: $out"
echo "$out"
grep -qx "replayed response refused: authentication failed" <<<"$out" || fail "replay: '$out'"
[ "$(regs)" = $((before + 1)) ] || fail "replayed response got windows allocated"

echo "# allow_ro grant"
RBLK_HOST_NAME=beta RBLK_KEY_FILE=$dir/beta.key \
	timeout 60 "$BUILD/tests/rblk_libtest" ro "$url" || fail "read-only grant (librblk)"
out=$(timeout 60 "$BUILD/tests/rblk_rawclient" rowrite "$url" beta "$dir/beta.key") ||
	fail "rowrite: $out"
echo "$out"
grep -qx "WRITE on a read-only grant refused: volume is read-only" <<<"$out" ||
	fail "rowrite: '$out'"

echo "# rkey isolation"
# (on their own exports: connection A writes a block)
for args in "rdma://$RDMA_ADDR:$port/open" \
	"rdma://$RDMA_ADDR:$port/locked alpha $dir/alpha.key"; do
	# shellcheck disable=SC2086 # split on purpose
	out=$(timeout 60 "$BUILD/tests/rblk_rawclient" isolation $args 2>&1) ||
		{ echo "$out"; fail "isolation $args"; }
	echo "$out"
	grep -qx "B: RDMA READ of A's in-flight READ window with rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "another connection's READ window worked"
	grep -qx "B: RDMA WRITE into A's in-flight WRITE window with rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "another connection's WRITE window worked"
	grep -qx "connection A verifies its data (after B's write into its window)" <<<"$out" ||
		fail "B's write reached A's data"
	grep -qx "A: RDMA READ with its own key after READ_DONE with rkey 0x[0-9a-f]*: remote access error" <<<"$out" ||
		fail "a key outlived its command"
	grep -qx "connection A verifies its data (at the end)" <<<"$out" ||
		fail "connection A did not verify its data"
done
echo "# a sweep of guessed keys (${RBLK_SWEEP_KEYS:-1000}) against a slot held open"
out=$(timeout 240 "$BUILD/tests/rblk_rawclient" sweep "rdma://$RDMA_ADDR:$port/open" \
	"${RBLK_SWEEP_KEYS:-1000}" 2>/dev/null) || { echo "$out"; fail "sweep"; }
echo "$out"
grep -qx "sweep: ${RBLK_SWEEP_KEYS:-1000} of ${RBLK_SWEEP_KEYS:-1000} guessed keys refused (remote access error)" <<<"$out" ||
	fail "a guessed key worked"

echo "# the authenticated session still works"
timeout 180 nbdcopy "nbd+unix:///vol?socket=$sock" "$dir/out2.bin" || fail "nbdcopy out again"
[ "$(sha256 "$dir/out2.bin")" = "$(sha256 "$dir/in.bin")" ] || fail "data changed"
echo "PASS"
