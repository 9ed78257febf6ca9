/* SPDX-License-Identifier: MIT */
/* The shared queue-pair layer: see qp.h. */
#include "qp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/proto.h"
#include "../common/util.h"

_Static_assert(QP_RECV_SIZE >= RBLK_MSG_MAX, "every message fits a receive");
_Static_assert(RBLK_MAX_QD * 2ull + 8 < (1ull << QP_WRID_VAL_BITS),
	       "tags and buffer indexes fit the value field");

int qp_init(struct qp *qp, struct xp_conn *xc, const struct xp_conn_attr *attr,
	    size_t recv_size, size_t send_len)
{
	size_t recv_len;
	int ret;

	memset(qp, 0, sizeof(*qp));
	if (recv_size > UINT32_MAX)
		return -EINVAL;
	qp->xc = xc;
	qp->nr_recv = attr->max_recv_wr;
	qp->recv_size =
	    (uint32_t)ALIGN_UP(MAX(recv_size, (size_t)QP_RECV_SIZE), 64);
	qp->sq_size = qp->sq_free = attr->max_send_wr;
	recv_len = (size_t)qp->nr_recv * qp->recv_size;
	qp->msg_len = recv_len + send_len;
	qp->batch = calloc(qp->sq_size, sizeof(*qp->batch));
	if (!qp->batch)
		return -ENOMEM;
	if (posix_memalign(&qp->msg_mem, 4096, qp->msg_len)) {
		qp->msg_mem = NULL;
		ret = -ENOMEM;
		goto out_free_batch;
	}
	memset((char *)qp->msg_mem + recv_len, 0, send_len);
	ret = xp_reg_mr(xc, qp->msg_mem, qp->msg_len, XP_ACCESS_LOCAL_WRITE,
			&qp->msg_mr);
	if (ret)
		goto out_free_mem;
	for (unsigned int i = 0; i < qp->nr_recv; i++) {
		ret = qp_post_recv(qp, i);
		if (ret)
			goto out_dereg_mr;
	}
	return 0;

out_dereg_mr:
	xp_dereg_mr(qp->msg_mr);
	qp->msg_mr = NULL;
out_free_mem:
	free(qp->msg_mem);
	qp->msg_mem = NULL;
out_free_batch:
	free(qp->batch);
	qp->batch = NULL;
	return ret;
}

void qp_fini(struct qp *qp)
{
	free(qp->msg_mem);
	free(qp->batch);
	memset(qp, 0, sizeof(*qp));
}

int qp_post_recv(struct qp *qp, unsigned int i)
{
	struct xp_sge sge = {
	    .addr = qp_recv_buf(qp, i),
	    .length = qp->recv_size,
	    .mr = qp->msg_mr,
	};

	return xp_post_recv(qp->xc, qp_wrid(QP_WRID_RECV, 0, i), &sge);
}

void *qp_recv_of(const struct qp *qp, uint64_t wr_id)
{
	uint32_t i = qp_wrid_val(wr_id);

	if (qp_wrid_kind(wr_id) != QP_WRID_RECV || i >= qp->nr_recv)
		return NULL;
	return qp_recv_buf(qp, i);
}

struct xp_send_wr *qp_add(struct qp *qp)
{
	struct xp_send_wr *wr = &qp->batch[qp->nr_batch++];

	memset(wr, 0, sizeof(*wr));
	return wr;
}

void qp_add_rdma(struct qp *qp, enum xp_wr_opcode op, uint64_t wr_id,
		 unsigned int flags, void *buf, uint32_t len, struct xp_mr *mr,
		 uint64_t remote_addr, uint32_t rkey)
{
	struct xp_send_wr *wr = qp_add(qp);

	wr->wr_id = wr_id;
	wr->opcode = op;
	wr->flags = flags;
	wr->sge.addr = buf;
	wr->sge.length = len;
	wr->sge.mr = mr;
	wr->remote_addr = remote_addr;
	wr->rkey = rkey;
}

void qp_add_send(struct qp *qp, uint64_t wr_id, void *buf, uint32_t len)
{
	qp_add_rdma(qp, XP_WR_SEND, wr_id, XP_SEND_SIGNALED, buf, len,
		    qp->msg_mr, 0, 0);
}

int qp_flush(struct qp *qp)
{
	unsigned int n = qp->nr_batch;
	struct xp_send_wr *bad;

	if (!n)
		return 0;
	for (unsigned int i = 0; i + 1 < n; i++)
		qp->batch[i].next = &qp->batch[i + 1];
	qp->batch[n - 1].next = NULL;
	qp->nr_batch = 0;
	return xp_post_send(qp->xc, qp->batch, &bad);
}

int qp_send_now(struct qp *qp, unsigned int kind, uint32_t val, void *buf,
		uint32_t len)
{
	if (qp->nr_batch || !qp_take(qp, 1))
		return -EAGAIN; /* (never with a batch pending: login time) */
	qp_add_send(qp, qp_wrid(kind, 1, val), buf, len);
	return qp_flush(qp);
}
