#!/bin/bash
# Direct volume access over real verbs (rdma_rxe): the host's scenario
# tests/e2e/45-direct.sh, the same file, run over rdma (run_host_scenario):
# the initiator RDMA READs and WRITEs the target's registered volume with
# no command and no target CPU. librblk mixed-size I/O (direct and slot
# path on one volume); a whole-volume round trip with sha256 on a RAM
# export and on a file exported with `direct` (the file equals the source
# after FLUSH/msync); the fio engine with direct_access=on and crc32c
# verify; a read-only direct login whose RDMA WRITE fails with a remote
# access error on the HCA's own check while the target keeps serving; a
# read-only direct file served through the slot path with a warning; a
# read-only login made before anything was written sees what a writer
# writes afterwards (its registration pinned real pages, not the zero page).
# vm-timeout: 420
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd fio jq sha256sum nbdcopy
need_file "$RBLK_BUILD/tests/rblk_libtest" "$RBLK_BUILD/rblk-fio.so"
run_host_scenario 45-direct
echo "PASS"
