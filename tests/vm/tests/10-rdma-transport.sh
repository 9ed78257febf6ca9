#!/bin/bash
# The rdma transport's unit tests (tests/unit/test_rdma.c) over rdma_rxe:
# connect/accept/reject with private data, SEND/RECV, chained RDMA WRITE +
# SEND ordering, RDMA READ, foreign rkeys and out-of-bounds access failing
# only the offending connection.
# vm-timeout: 240
set -u
. "$(dirname "$0")/../lib.sh"
need_guest
need_file "$BUILD/tests/test_rdma"
RBLK_TEST_RDMA_ADDR=$RDMA_ADDR "$BUILD/tests/test_rdma" || fail "test_rdma failed"
echo "rdma transport: OK"
