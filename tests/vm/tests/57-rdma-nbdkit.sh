#!/bin/bash
# The nbdkit plugin over real verbs and rdma_cm (rdma_rxe): the host's
# scenario tests/e2e/28-nbdkit-plugin.sh, the same file, run over rdma
# (run_host_scenario): nbdkit --tls=require, daemonised (the session is
# opened after nbdkit's fork), serving rdma://ADDR/vol0 to nbdcopy over
# TLS with sha256 of the source, the copy back and the target's file;
# plaintext and wrong-key clients refused; the keeper against the
# target's idle_timeout. (What clients are offered and the blocksize
# filter do not depend on the transport: the host run checks them.)
# soak: the whole test (make soak only: the plugin is librblk, which make
# check runs over rdma in guest 11, and the plugin itself over tcp and
# TLS in tests/e2e/28-nbdkit-plugin.sh)
# soak-only
# vm-timeout: 300
# soak-timeout: 300
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd nbdkit nbdcopy nbdinfo psktool
need_file "$RBLK_BUILD/nbdkit-rblk-plugin.so"
run_host_scenario 28-nbdkit-plugin
echo "PASS"
