/* SPDX-License-Identifier: MIT */
/*
 * rdma.c - the verbs transport (rdma_cm): its ops table, the contract of
 * transport.h bound to rdma_cm.c (listener, setup, CM events),
 * rdma_group.c (poll groups) and rdma_post.c (regions, windows, posting).
 * See rdma_internal.h.
 */
#include "rdma_internal.h"

const struct xp_ops xp_rdma_ops = {
    .name = "rdma",
    .reg_pins_memory = true,
    .write_imm = true,
    .group_create = xr_group_create,
    .group_destroy = xr_group_destroy,
    .group_arm = xr_group_arm,
    .group_poll = xr_group_poll,
    .listen = xr_listen,
    .listener_destroy = xr_listener_destroy,
    .listener_fd = xr_listener_fd,
    .take_request = xr_take_request_op,
    .request_peer_name = xr_request_peer_name,
    .request_join = xr_request_join,
    .request_reject = xr_request_reject,
    .setup_queue = xr_setup_queue_op,
    .accept = xr_accept,
    .reject = xr_reject,
    .group_connect = xr_group_connect,
    .destroy = xr_destroy,
    .disconnect = xr_disconnect,
    .state = xr_state,
    .conn_error = xr_conn_error,
    .peer_name = xr_peer_name,
    .conn_group = xr_conn_group,
    .reg_mr = xr_reg_mr,
    .dereg_mr = xr_dereg_mr,
    .alloc_mw = xr_alloc_mw,
    .dealloc_mw = xr_dealloc_mw,
    .post_send = xr_post_send,
    .post_recv = xr_post_recv,
};
