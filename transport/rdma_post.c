/* SPDX-License-Identifier: MIT */
/*
 * rdma_post.c - the verbs transport: regions, windows, posting (see
 * rdma_internal.h; its ops table is in rdma.c).
 */
#include "rdma_internal.h"

int xr_reg_mr(struct xp_group *xg, void *addr, size_t len, int access,
	      struct xp_mr **out)
{
	struct xr_group *g = to_xr_group(xg);
	int flags = 0, ret;
	struct xr_mr *m;

	if (access & XP_ACCESS_LOCAL_WRITE)
		flags |= IBV_ACCESS_LOCAL_WRITE;
	/* verbs: remote write requires local write */
	if (access & XP_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	if (access & XP_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & XP_ACCESS_MW_BIND)
		flags |= IBV_ACCESS_MW_BIND;
	/*
	 * iWARP places RDMA READ responses as tagged writes: a READ sink
	 * must be remotely writable. In a private group the rkey is valid
	 * on that one connection only, so this widens nothing beyond its
	 * peer; in a shared group it would reach every peer of the group,
	 * so there READ sinks must be registered remotely writable by the
	 * caller (or reached through windows).
	 */
	if (g->iwarp && g->private_conn && (flags & IBV_ACCESS_LOCAL_WRITE))
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (!g->pd) {
		log_err("rdma: reg_mr: group has no device yet");
		return -ENODEV;
	}

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->mr = ibv_reg_mr(g->pd, addr, len, flags);
	if (!m->mr) {
		ret = neg_errno();
		log_err("rdma: ibv_reg_mr(%zu bytes, access 0x%x): %s", len,
			flags, strerror(-ret));
		free(m);
		return ret;
	}
	m->base.addr = addr;
	m->base.length = len;
	m->base.lkey = m->mr->lkey;
	m->base.rkey = m->mr->rkey;
	m->base.access = access;
	m->base.group = xg;
	m->next = g->mrs;
	if (g->mrs)
		g->mrs->prev = m;
	g->mrs = m;
	*out = &m->base;
	return 0;
}

/* Windows bound on it must be invalidated first (verbs refuses). */
void xr_mr_free(struct xr_group *g, struct xr_mr *m)
{
	int ret;

	if (m->prev)
		m->prev->next = m->next;
	else
		g->mrs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	ret = verbs_ret(ibv_dereg_mr(m->mr));
	if (ret)
		log_warn("rdma: ibv_dereg_mr: %s", strerror(-ret));
	free(m);
}

void xr_dereg_mr(struct xp_mr *xm)
{
	xr_mr_free(to_xr_group(xm->group),
		   container_of(xm, struct xr_mr, base));
}

int xr_alloc_mw(struct xp_group *xg, struct xp_mw **out)
{
	struct xr_group *g = to_xr_group(xg);
	struct xr_mw *w;
	int ret;

	if (!g->pd) {
		log_err("rdma: alloc_mw: group has no device yet");
		return -ENODEV;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->mw = ibv_alloc_mw(g->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		ret = neg_errno();
		log_err("rdma: ibv_alloc_mw(type 2): %s", strerror(-ret));
		free(w);
		return ret;
	}
	w->base.rkey = w->mw->rkey;
	w->base.group = xg;
	w->next = g->mws;
	if (g->mws)
		g->mws->prev = w;
	g->mws = w;
	*out = &w->base;
	return 0;
}

static void xr_mw_unlink_conn(struct xr_mw *w)
{
	if (!w->conn)
		return;
	if (w->cprev)
		w->cprev->cnext = w->cnext;
	else
		w->conn->mws = w->cnext;
	if (w->cnext)
		w->cnext->cprev = w->cprev;
	w->cprev = w->cnext = NULL;
	w->conn = NULL;
}

static void xr_mw_link_conn(struct xr_mw *w, struct xr_conn *c)
{
	if (w->conn == c)
		return;
	xr_mw_unlink_conn(w);
	w->conn = c;
	w->cnext = c->mws;
	if (c->mws)
		c->mws->cprev = w;
	c->mws = w;
}

/*
 * Connection c is being destroyed (its QP is gone). A type-2 window bound
 * on it stays bound in rxe, and cannot be bound again, so every window
 * last bound on it is re-created: same xp_mw, new ibv_mw (its rkey index
 * changes; xp_mw_next_rkey() follows).
 */
void xr_conn_mws_reset(struct xr_conn *c)
{
	struct xr_group *g = c->g;

	while (c->mws) {
		struct xr_mw *w = c->mws;
		int ret;

		xr_mw_unlink_conn(w);
		if (g->dying)
			continue;
		ret = verbs_ret(ibv_dealloc_mw(w->mw));
		if (ret)
			log_warn("rdma: ibv_dealloc_mw: %s", strerror(-ret));
		w->mw = ibv_alloc_mw(g->pd, IBV_MW_TYPE_2);
		if (!w->mw) {
			log_err("rdma: ibv_alloc_mw(type 2) re-creating a "
				"window: %s",
				strerror(errno));
			continue; /* its binds fail from now on */
		}
		w->base.rkey = w->mw->rkey;
	}
}

void xr_mw_free(struct xr_group *g, struct xr_mw *w)
{
	int ret;

	xr_mw_unlink_conn(w);

	if (w->prev)
		w->prev->next = w->next;
	else
		g->mws = w->next;
	if (w->next)
		w->next->prev = w->prev;
	if (w->mw) {
		ret = verbs_ret(ibv_dealloc_mw(w->mw));
		if (ret)
			log_warn("rdma: ibv_dealloc_mw: %s", strerror(-ret));
	}
	free(w);
}

void xr_dealloc_mw(struct xp_mw *xw)
{
	xr_mw_free(to_xr_group(xw->group),
		   container_of(xw, struct xr_mw, base));
}

static int xr_mw_access(int access)
{
	return (access & XP_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0) |
	       (access & XP_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
}

/* wr_id given to the HCA: see rdma_internal.h. */
static inline uint64_t xr_wr_id(const struct xr_conn *c, uint64_t seq)
{
	return (uint64_t)c->idx << XR_IDX_SHIFT |
	       (uint64_t)c->gen << XR_GEN_SHIFT | (seq & XR_SEQ_MASK);
}

static struct xp_send_wr *nth_wr(struct xp_send_wr *wr, size_t n)
{
	while (n--)
		wr = wr->next;
	return wr;
}

/* Translate one request into iw (and its sge). 0 or -EINVAL. */
static int xr_build(struct xr_conn *c, struct xp_send_wr *w,
		    struct ibv_send_wr *iw, union xr_wr_aux *aux)
{
	struct ibv_sge *sg = &aux->sge;

	memset(iw, 0, sizeof(*iw));
	switch (w->opcode) {
	case XP_WR_SEND:
		iw->opcode = IBV_WR_SEND;
		break;
	case XP_WR_SEND_WITH_INV:
		iw->opcode = IBV_WR_SEND_WITH_INV;
		iw->invalidate_rkey = w->invalidate_rkey;
		break;
	case XP_WR_RDMA_WRITE:
		iw->opcode = IBV_WR_RDMA_WRITE;
		iw->wr.rdma.remote_addr = w->remote_addr;
		iw->wr.rdma.rkey = w->rkey;
		break;
	case XP_WR_RDMA_WRITE_WITH_IMM:
		iw->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		iw->wr.rdma.remote_addr = w->remote_addr;
		iw->wr.rdma.rkey = w->rkey;
		iw->imm_data = htobe32(w->imm);
		break;
	case XP_WR_RDMA_READ:
		iw->opcode = IBV_WR_RDMA_READ;
		iw->wr.rdma.remote_addr = w->remote_addr;
		iw->wr.rdma.rkey = w->rkey;
		break;
	case XP_WR_LOCAL_INV:
		iw->opcode = IBV_WR_LOCAL_INV;
		iw->invalidate_rkey = w->invalidate_rkey;
		break;
	case XP_WR_BIND_MW: {
		const struct xp_mw_bind *b = &w->bind;
		struct ibv_mw *mw;

		if (!b->mw || !b->mr || b->mw->group != &c->g->base ||
		    !container_of(b->mw, struct xr_mw, base)->mw ||
		    b->mr->group != &c->g->base ||
		    !(b->mr->access & XP_ACCESS_MW_BIND) ||
		    (b->access &
		     ~(XP_ACCESS_REMOTE_READ | XP_ACCESS_REMOTE_WRITE)))
			return -EINVAL;
		mw = container_of(b->mw, struct xr_mw, base)->mw;
		iw->opcode = IBV_WR_BIND_MW;
		/* the key it has when this bind runs; then the new one */
		aux->mw = *mw;
		mw->rkey = b->rkey;
		iw->bind_mw.mw = &aux->mw;
		iw->bind_mw.rkey = b->rkey;
		iw->bind_mw.bind_info.mr =
		    container_of(b->mr, struct xr_mr, base)->mr;
		iw->bind_mw.bind_info.addr = b->addr;
		iw->bind_mw.bind_info.length = b->length;
		iw->bind_mw.bind_info.mw_access_flags = xr_mw_access(b->access);
		break;
	}
	default:
		return -EINVAL;
	}
	if (w->sge.length && w->opcode != XP_WR_BIND_MW &&
	    w->opcode != XP_WR_LOCAL_INV) {
		if (!w->sge.mr)
			return -EINVAL;
		sg->addr = (uintptr_t)w->sge.addr;
		sg->length = w->sge.length;
		sg->lkey = w->sge.mr->lkey;
		iw->sg_list = sg;
		iw->num_sge = 1;
		/* the payload is copied at post time; no lkey needed */
		if (w->opcode != XP_WR_RDMA_READ &&
		    w->sge.length <= c->max_inline)
			iw->send_flags |= IBV_SEND_INLINE;
	}
	if (w->flags & XP_SEND_SIGNALED)
		iw->send_flags |= IBV_SEND_SIGNALED;
	if (w->flags & XP_SEND_FENCE)
		iw->send_flags |= IBV_SEND_FENCE;
	return 0;
}

/*
 * The whole chain goes to the HCA in one ibv_post_send (one doorbell),
 * built in the per-connection array: no allocation per call. Requests
 * that do not fit the send queue, or are malformed, end the chain there
 * with *bad pointing at them; those before are posted, as verbs does.
 * A BIND_MW sets mw->rkey to the bind's key here (ibv_bind_mw() would;
 * ibv_post_send does not).
 */
int xr_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
		 struct xp_send_wr **bad)
{
	struct xr_conn *c = to_conn(xc);
	uint64_t seq0 = c->sq_tail;
	struct xp_send_wr *w;
	struct ibv_send_wr *ibad;
	uint32_t n = 0;
	int ret = 0;

	if (unlikely(c->state != XP_CONN_CONNECTED)) {
		*bad = wr;
		return -ENOTCONN;
	}
	for (w = wr; w; w = w->next) {
		struct ibv_send_wr *iw = &c->swr[n];
		struct xr_sq_slot *s;

		if (unlikely(c->sq_tail - c->sq_head >= c->max_send_wr)) {
			ret = -ENOMEM;
			break;
		}
		ret = xr_build(c, w, iw, &c->aux[n]);
		if (unlikely(ret))
			break;
		s = &c->sq_slot[c->sq_tail % c->max_send_wr];
		s->wr_id = w->wr_id;
		s->opcode = xp_wr_wc_opcode(w->opcode);
		iw->wr_id = xr_wr_id(c, c->sq_tail++);
		if (n)
			c->swr[n - 1].next = iw;
		n++;
	}
	if (n) {
		int rc;

		c->swr[n - 1].next = NULL;
		rc = ibv_post_send(c->qp, c->swr, &ibad);
		if (unlikely(rc)) {
			size_t idx = (size_t)(ibad - c->swr);

			if (idx >= n)
				idx = 0;
			c->sq_tail = seq0 + idx;
			ret = verbs_ret(rc);
			log_err("%s: ibv_post_send: %s", c->name,
				strerror(-ret));
			*bad = nth_wr(wr, idx);
			/* binds not posted: their windows keep the old key */
			for (uint32_t i = n; i-- > idx;)
				if (c->swr[i].opcode == IBV_WR_BIND_MW)
					container_of(nth_wr(wr, i)->bind.mw,
						     struct xr_mw, base)
					    ->mw->rkey = c->aux[i].mw.rkey;
			n = (uint32_t)idx;
		}
		/* the keys the caller put in later requests are live now */
		w = wr;
		for (uint32_t i = 0; i < n; i++, w = w->next) {
			struct xr_mw *m;

			if (w->opcode != XP_WR_BIND_MW)
				continue;
			m = container_of(w->bind.mw, struct xr_mw, base);
			m->base.rkey = w->bind.rkey;
			xr_mw_link_conn(m, c);
		}
		if (unlikely(rc))
			return ret;
	}
	if (unlikely(ret)) {
		/* a full queue is the caller's flow control, not an error */
		if (ret == -ENOMEM)
			log_debug("%s: send queue full (%u outstanding)",
				  c->name, c->max_send_wr);
		else
			log_err("%s: malformed send request", c->name);
		*bad = w;
	}
	return ret;
}

/* Allowed from XP_CONN_REQUESTED on: receives go in before accept(). */
int xr_post_recv(struct xp_conn *xc, uint64_t wr_id, const struct xp_sge *sge)
{
	struct xr_conn *c = to_conn(xc);
	struct ibv_recv_wr rw, *rbad;
	struct ibv_sge sg;
	int ret;

	if (unlikely(c->state == XP_CONN_ERROR))
		return -ENOTCONN;
	if (unlikely(c->rq_tail - c->rq_head >= c->max_recv_wr)) {
		log_debug("%s: receive queue full (%u outstanding)", c->name,
			  c->max_recv_wr);
		return -ENOMEM;
	}
	if (unlikely(!sge || (sge->length && !sge->mr)))
		return -EINVAL;
	memset(&rw, 0, sizeof(rw));
	if (sge->length) {
		sg.addr = (uintptr_t)sge->addr;
		sg.length = sge->length;
		sg.lkey = sge->mr->lkey;
		rw.sg_list = &sg;
		rw.num_sge = 1;
	}
	rw.wr_id = xr_wr_id(c, c->rq_tail) | XR_RECV_BIT;
	c->rq_wr_id[c->rq_tail % c->max_recv_wr] = wr_id;
	ret = ibv_post_recv(c->qp, &rw, &rbad);
	if (unlikely(ret)) {
		ret = verbs_ret(ret);
		log_err("%s: ibv_post_recv: %s", c->name, strerror(-ret));
		return ret;
	}
	c->rq_tail++;
	return 0;
}
