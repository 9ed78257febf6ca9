#!/bin/bash
# rblk over real verbs and rdma_cm (rdma_rxe): the host's data scenarios,
# the same files, run over rdma (run_host_scenario). 05-librblk: librblk
# mixed-size split I/O on file and RAM exports (io_uring and libaio
# engines), the backlog past the queue depth, a read-only export, an
# unknown export named in the error. 10-nbdcopy: `rblk nbd` with an
# nbdcopy round trip (sha256 of source, copy back and export file).
# 30-fio-verify: fio's nbd engine through `rblk nbd` with crc32c verify.
# 90-fio-engine: the fio ioengine with verify, pull and push reads, the
# polling modes, the engine's backlog.
# make check runs 05 and 90 (librblk and the fio engine over rdma); the
# two through `rblk nbd` run in make soak, the NBD server being the same
# code over either transport (guest 14 and 57 run it over rdma in check).
# soak: all four scenarios
# vm-timeout: 900
# soak-timeout: 900
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd nbdcopy fio sha256sum
need_file "$RBLK_BUILD/rblk-target" "$RBLK_BUILD/rblk" \
	"$RBLK_BUILD/tests/rblk_libtest" "$RBLK_BUILD/rblk-fio.so"
if [ "${RBLK_SOAK:-0}" = 1 ]; then
	run_host_scenario 05-librblk 10-nbdcopy 30-fio-verify 90-fio-engine
else
	run_host_scenario 05-librblk 90-fio-engine
fi
echo "PASS"
