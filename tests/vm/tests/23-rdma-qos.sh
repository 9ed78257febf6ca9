#!/bin/bash
# QoS limits over real verbs and rdma_cm (rdma_rxe): the host's scenario
# tests/e2e/88-qos.sh, the same file, run over rdma (run_host_scenario):
# bad limits refused; IOPS, bytes per second, a read limit and a host
# entry's limit each measured by fio within 10%; verified writes through
# a limit; a neighbour export on the same worker (one round here); a live
# `ctl set-qos` taking effect within 1 s; ctl stats and /metrics.
# soak: the whole scenario over rdma (make soak only: the limiter lives in
# the worker, below the transport, and make check runs the same file over
# tcp as tests/e2e/88-qos.sh; a TCG guest measures rates loosely)
# soak-only
# vm-timeout: 420
# soak-timeout: 420
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd fio curl
export RBLK_QOS_ROUNDS=1
run_host_scenario 88-qos
echo "PASS"
