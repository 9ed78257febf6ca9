#!/bin/bash
# Persistent reservations over real verbs and rdma_cm (rdma_rxe): the
# host's scenario tests/e2e/37-pr-abort.sh, the same file, run over rdma
# (run_host_scenario): beta holds write-exclusive and keeps 16 writes in
# flight; alpha's preempt-and-abort stops the writer with EBADE (RESP
# status RESV_CONFLICT over rdma), no write of beta's lands after the
# preempt answered (alpha reads back only its own bytes), alpha holds the
# reservation, beta reads and its new writes conflict. The REPORT moves
# by the pull READ path (RDMA READ of a window) here, by push on tcp.
# vm-timeout: 300
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd python3
run_host_scenario 37-pr-abort
echo "PASS"
