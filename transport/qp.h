/* SPDX-License-Identifier: MIT */
/*
 * The queue-pair layer both ends share, on top of the transport contract
 * (transport.h): work request ids, message buffers and their receives,
 * SEND builders, a send batch posted as one chain (one doorbell on rdma,
 * one sendmsg on tcp), and send-queue credits. The target's connections
 * (target/conn.c, io.c) and librblk's queues (initiator/lib_login.c,
 * lib_io.c, lib_reconnect.c) keep only what their messages mean.
 *
 * Threads: a struct qp is used by the thread that owns its connection.
 */
#ifndef RBLK_TRANSPORT_QP_H
#define RBLK_TRANSPORT_QP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"

/*
 * wr_id layout: kind in the top QP_WRID_KIND_BITS, the number of send-queue
 * credits the post used below it, a 32-bit value (a receive buffer index,
 * a tag) at the bottom. Kinds are the user's, except QP_WRID_RECV.
 */
#define QP_WRID_KIND_BITS 8
#define QP_WRID_CREDIT_BITS 8
#define QP_WRID_VAL_BITS 32
#define QP_WRID_KIND_SHIFT (64 - QP_WRID_KIND_BITS)
#define QP_WRID_CREDIT_SHIFT QP_WRID_VAL_BITS
_Static_assert(QP_WRID_KIND_BITS + QP_WRID_CREDIT_BITS + QP_WRID_VAL_BITS <= 64,
	       "wr_id fields fit 64 bits");

enum {
	QP_WRID_RECV = 1, /* a receive; value: the buffer index */
	QP_WRID_USER = 2, /* first kind free for the user */
};

static inline uint64_t qp_wrid(unsigned int kind, unsigned int credits,
			       uint32_t val)
{
	return (uint64_t)(kind & ((1u << QP_WRID_KIND_BITS) - 1))
		   << QP_WRID_KIND_SHIFT |
	       (uint64_t)(credits & ((1u << QP_WRID_CREDIT_BITS) - 1))
		   << QP_WRID_CREDIT_SHIFT |
	       val;
}

static inline unsigned int qp_wrid_kind(uint64_t wrid)
{
	return (unsigned int)(wrid >> QP_WRID_KIND_SHIFT);
}

static inline unsigned int qp_wrid_credits(uint64_t wrid)
{
	return (unsigned int)(wrid >> QP_WRID_CREDIT_SHIFT) &
	       ((1u << QP_WRID_CREDIT_BITS) - 1);
}

static inline uint32_t qp_wrid_val(uint64_t wrid)
{
	return (uint32_t)wrid;
}

/*
 * One connection's message plumbing. msg_mem holds nr_recv receive
 * buffers of recv_size bytes (at least QP_RECV_SIZE: every fixed-size
 * message fits; more where in-capsule WRITE data may arrive), then
 * send_len bytes the user carves into its send buffers (qp_send_area());
 * all of it is one registration, local write only.
 */
struct qp {
	struct xp_conn *xc;
	void *msg_mem;
	size_t msg_len;
	struct xp_mr *msg_mr;
	unsigned int nr_recv;
	uint32_t recv_size;   /* bytes per receive buffer, a multiple of 64 */
	unsigned int sq_free; /* send-queue credits */
	unsigned int sq_size; /* attr.max_send_wr */
	/*
	 * Work requests added since the last qp_flush(), in order; their
	 * credits were taken when they were added, so the batch never holds
	 * more than the send queue.
	 */
	struct xp_send_wr *batch; /* [sq_size] */
	unsigned int nr_batch;
};

#define QP_RECV_SIZE 512 /* RBLK_MSG_MAX: every message fits */

/*
 * Set qp up on xc (sized by attr): allocate and register the message
 * memory with attr->max_recv_wr receives of recv_size bytes (raised to
 * QP_RECV_SIZE, rounded up to 64) and send_len bytes of send buffers,
 * post every receive. The receive buffers are not cleared (a receive is
 * read only as far as its completion's byte_len), so on tcp an idle
 * connection does not touch them. On failure returns -errno with what is
 * done undone (xc is the caller's).
 */
int qp_init(struct qp *qp, struct xp_conn *xc, const struct xp_conn_attr *attr,
	    size_t recv_size, size_t send_len);
/* Free the memory; call after xp_destroy() (which drops the MR). */
void qp_fini(struct qp *qp);

static inline void *qp_recv_buf(const struct qp *qp, unsigned int i)
{
	return (char *)qp->msg_mem + (size_t)i * qp->recv_size;
}

static inline void *qp_send_area(const struct qp *qp)
{
	return qp_recv_buf(qp, qp->nr_recv);
}

/* (Re)post receive buffer i. */
int qp_post_recv(struct qp *qp, unsigned int i);

/*
 * A receive completion's buffer, or NULL when its wr_id names none
 * (a transport bug: the caller fails the connection).
 */
void *qp_recv_of(const struct qp *qp, uint64_t wr_id);

/* Take n send credits; false (nothing taken) when fewer are free. */
static inline bool qp_take(struct qp *qp, unsigned int n)
{
	if (qp->sq_free < n)
		return false;
	qp->sq_free -= n;
	return true;
}

/* A signaled send completed: return the credits its wr_id carries. */
static inline void qp_send_done(struct qp *qp, uint64_t wr_id)
{
	qp->sq_free += qp_wrid_credits(wr_id);
}

/* Append a zeroed work request to the batch (credits already taken). */
struct xp_send_wr *qp_add(struct qp *qp);
/* Append a signaled SEND of len bytes at buf (in the message memory). */
void qp_add_send(struct qp *qp, uint64_t wr_id, void *buf, uint32_t len);
/* Append a one-sided RDMA READ or WRITE, unsignaled unless flags say. */
void qp_add_rdma(struct qp *qp, enum xp_wr_opcode op, uint64_t wr_id,
		 unsigned int flags, void *buf, uint32_t len, struct xp_mr *mr,
		 uint64_t remote_addr, uint32_t rkey);
/*
 * Post the batch as one chain; an empty batch posts nothing. The batch is
 * empty afterwards either way; -errno when the post failed (the
 * connection is then in error: the caller fails it).
 */
int qp_flush(struct qp *qp);
/* Drop the batch unposted (a failing connection). */
static inline void qp_drop(struct qp *qp)
{
	qp->nr_batch = 0;
}

/*
 * Post one signaled SEND now (login-time messages, when no batch is
 * pending): takes one credit, carried back by its completion. -EAGAIN
 * without a credit or with a batch pending, else what posting returned.
 */
int qp_send_now(struct qp *qp, unsigned int kind, uint32_t val, void *buf,
		uint32_t len);

#endif
