#!/bin/bash
# TLS integrity with the kernel's record layer: tests/e2e/22-tls-flip.sh
# (a proxy flips a bit in one record each way while fio writes and
# verifies through the engine) with the tls module loaded, so both ends
# run kTLS and the kernel's EBADMSG is what ends the connection; the
# target must have put its sessions on kTLS (RBLK_TEST_KTLS).
# vm-timeout: 600
set -euo pipefail
source tests/vm/lib.sh
need_guest
requires_built
modprobe tls 2>/dev/null || skip "no tls module in this kernel"
ip link set lo up 2>/dev/null || true
export RBLK_TMO_SCALE=${RBLK_TMO_SCALE:-4} RBLK_TEST_KTLS=1 RBLK_BUILD
rc=0
tests/e2e/22-tls-flip.sh || rc=$?
[ $rc -eq 77 ] && skip "tests/e2e/22-tls-flip.sh skipped"
[ $rc -eq 0 ] || fail "tests/e2e/22-tls-flip.sh under kTLS (exit $rc)"
echo "kTLS flip: OK"
