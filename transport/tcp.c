/* SPDX-License-Identifier: MIT */
/*
 * tcp.c - the tcp transport (TCP and unix sockets): its ops table, the
 * contract of transport.h bound to tcp_listen.c (listener, handshake,
 * connect), tcp_conn.c (queues, posting), tcp_group.c (poll groups) and
 * tcp_mem.c (regions, windows). See tcp_internal.h.
 */
#include "tcp_internal.h"

const struct xp_ops xp_tcp_ops = {
    .name = "tcp",
    .read_costs_peer_cpu = true,
    .listen = tcp_listen,
    .listener_destroy = tcp_listener_destroy,
    .listener_fd = tcp_listener_fd,
    .accept = tcp_accept,
    .reject = tcp_reject,
    .destroy = tcp_destroy,
    .disconnect = tcp_disconnect,
    .state = tcp_state,
    .conn_error = tcp_conn_error,
    .peer_name = tcp_peer_name,
    .conn_group = tcp_conn_group,
    .group_create = tcp_group_create,
    .group_destroy = tcp_group_destroy,
    .group_arm = tcp_group_arm,
    .group_poll = tcp_group_poll,
    .take_request = tcp_take_request,
    .request_peer_name = tcp_request_peer_name,
    .request_join = tcp_request_join,
    .request_reject = tcp_request_reject,
    .setup_queue = tcp_setup_queue,
    .group_connect = tcp_group_connect,
    .alloc_mw = tcp_alloc_mw,
    .dealloc_mw = tcp_dealloc_mw,
    .mw_placed = tcp_mw_placed,
    .mw_inv_now = tcp_mw_inv_now,
    .listener_tls = tcp_listener_tls,
    .conn_tls = tcp_conn_tls,
    .reg_mr = tcp_reg_mr,
    .dereg_mr = tcp_dereg_mr,
    .post_send = tcp_post_send,
    .post_recv = tcp_post_recv,
};
