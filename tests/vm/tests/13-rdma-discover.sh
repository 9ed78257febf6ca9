#!/bin/bash
# `rblk discover` over real verbs and rdma_cm (rdma_rxe): the host's
# scenario tests/e2e/87-discover.sh, the same file, run over rdma
# (run_host_scenario): five exports over two DISCOVER_REPLY pages (two
# discovery connections) listed with their sizes in text and JSON, an
# export added and one removed at run time, a port without a listener
# and a URL with an export name failing with clear errors, and logins
# that still work after the discovery connections came and went.
# vm-timeout: 180
# shellcheck source=tests/vm/lib.sh
source tests/vm/lib.sh
need_cmd jq
run_host_scenario 87-discover
echo "PASS"
