#!/bin/bash
# Isolation in the shared slot pool over real verbs and rdma_cm
# (rdma_rxe): the host's scenario tests/e2e/58-slot-isolation.sh, the same
# file, run over rdma (run_host_scenario). An attacker answers WRITE
# GRANTs without writing the window (or after 512 bytes) and reads the
# block back on 4 connections while a librblk client verifies data on
# another export: it never reads a byte it did not write (over rxe a
# window reaches its slot block's whole region, so this also shows the
# whole run is cleared). Four sessions that hold every window they can
# of a small pool, with keep-alives, are dropped at window_timeout; a fio
# job with verification beside them never waits longer than
# window_timeout + 1 s.
# vm-timeout: 600
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd fio jq curl
export RBLK_STALE_ROUNDS=${RBLK_STALE_ROUNDS:-40}
run_host_scenario 58-slot-isolation
echo "PASS"
