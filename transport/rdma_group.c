/* SPDX-License-Identifier: MIT */
/*
 * rdma_group.c - the verbs transport: poll groups (PD, CQ, channels, the
 * epoll set), queue pairs in them, and polling (see rdma_internal.h).
 */
#include "../common/dlist.h"
#include "rdma_internal.h"

/* epoll data of the group's own fds (even: see XP_WATCH_TAG) */
#define XR_EP_CM 2ull
#define XR_EP_CQ 4ull

static int xr_epoll_add(int epfd, int fd, uint64_t data)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = data};

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int ret = neg_errno();

		log_err("rdma: epoll_ctl(ADD): %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* The device-independent half: cm event channel and epoll set. */
int xr_group_alloc(struct xr_group **out)
{
	struct xr_group *g = calloc(1, sizeof(*g));
	int ret;

	if (!g)
		return -ENOMEM;
	g->base.ops = &xp_rdma_ops;
	g->base.epfd = -1;
	g->ch = xr_channel_create();
	if (!g->ch) {
		ret = neg_errno();
		goto out_free;
	}
	g->base.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g->base.epfd < 0) {
		ret = neg_errno();
		log_err("rdma: epoll_create1: %s", strerror(-ret));
		goto out_destroy_channel;
	}
	ret = xr_epoll_add(g->base.epfd, g->ch->fd, XR_EP_CM);
	if (ret)
		goto out_close_epoll;
	*out = g;
	return 0;

out_close_epoll:
	close(g->base.epfd);
out_destroy_channel:
	rdma_destroy_event_channel(g->ch);
out_free:
	free(g);
	return ret;
}

/*
 * The device half: PD, completion channel, CQ (cqe entries at least, so a
 * private group's CQ fits its connection without a resize). A group bound
 * already takes connections of its own device only (-EXDEV otherwise).
 */
int xr_group_bind_device(struct xr_group *g, struct ibv_context *verbs,
			 uint32_t cqe)
{
	static unsigned int next_vector;
	int vector, ret, size;

	if (!verbs) {
		log_err("rdma: no device bound to the cm id");
		return -ENODEV;
	}
	if (g->verbs) {
		if (g->verbs == verbs)
			return 0;
		log_err("rdma: connection on %s, its group is on %s",
			ibv_get_device_name(verbs->device),
			ibv_get_device_name(g->verbs->device));
		return -EXDEV;
	}
	ret = verbs_ret(ibv_query_device(verbs, &g->da));
	if (ret) {
		log_err("rdma: ibv_query_device: %s", strerror(-ret));
		return ret;
	}
	g->iwarp = verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	/* rxe (vendor id RXE_VENDOR_ID) checks window accesses against the
	 * MR's range (rxe_resp.c check_rkey -> mr_check_range(mw->mr)) */
	g->base.mw_reaches_region = g->da.vendor_id == XR_RXE_VENDOR_ID;
	g->pd = ibv_alloc_pd(verbs);
	if (!g->pd) {
		ret = neg_errno();
		log_err("rdma: ibv_alloc_pd: %s", strerror(-ret));
		return ret;
	}
	g->cc = ibv_create_comp_channel(verbs);
	if (!g->cc) {
		ret = neg_errno();
		log_err("rdma: ibv_create_comp_channel: %s", strerror(-ret));
		goto out_dealloc_pd;
	}
	ret = xr_set_nonblock(g->cc->fd);
	if (ret)
		goto out_destroy_comp_channel;
	/* spread groups over the device's interrupt vectors */
	vector =
	    verbs->num_comp_vectors > 0
		? (int)(__atomic_fetch_add(&next_vector, 1, __ATOMIC_RELAXED) %
			(unsigned int)verbs->num_comp_vectors)
		: 0;
	size = (int)MIN(MAX(cqe, (uint32_t)XR_CQ_INIT),
			(uint32_t)MAX(g->da.max_cqe, 1));
	g->cq = ibv_create_cq(verbs, size, g, g->cc, vector);
	if (!g->cq) {
		ret = neg_errno();
		log_err("rdma: ibv_create_cq(%d): %s", size, strerror(-ret));
		goto out_destroy_comp_channel;
	}
	g->cq_size = g->cq->cqe;
	ret = verbs_ret(ibv_req_notify_cq(g->cq, 0));
	if (ret) {
		log_err("rdma: ibv_req_notify_cq: %s", strerror(-ret));
		goto out_destroy_cq;
	}
	ret = xr_epoll_add(g->base.epfd, g->cc->fd, XR_EP_CQ);
	if (ret)
		goto out_destroy_cq;
	g->verbs = verbs;
	return 0;

out_destroy_cq:
	ibv_destroy_cq(g->cq);
	g->cq = NULL;
out_destroy_comp_channel:
	ibv_destroy_comp_channel(g->cc);
	g->cc = NULL;
out_dealloc_pd:
	ibv_dealloc_pd(g->pd);
	g->pd = NULL;
	return ret;
}

/* A shared group, on the first RDMA device (see rdma_internal.h). */
int xr_group_create(struct xp_group **out)
{
	struct ibv_context **list;
	struct xr_group *g;
	int n = 0, ret;

	ret = xr_check_devices();
	if (ret)
		return ret;
	ret = xr_group_alloc(&g);
	if (ret)
		return ret;
	list = rdma_get_devices(&n);
	if (!list || n < 1) {
		ret = -ENODEV;
		log_err("rdma: rdma_get_devices: no device");
	} else {
		ret = xr_group_bind_device(g, list[0], XR_CQ_INIT);
	}
	if (list)
		rdma_free_devices(list);
	if (ret) {
		xr_group_destroy(&g->base);
		return ret;
	}
	*out = &g->base;
	return 0;
}

/* Connections first (their QPs), then windows, regions, the rest. */
void xr_group_destroy(struct xp_group *xg)
{
	struct xr_group *g;
	int ret;

	if (!xg)
		return;
	g = to_xr_group(xg);
	g->dying = true;
	while (g->conns) {
		g->private_conn = NULL; /* destroy() must not recurse here */
		xr_destroy(&g->conns->base);
	}
	while (g->mws)
		xr_mw_free(g, g->mws);
	while (g->mrs)
		xr_mr_free(g, g->mrs);
	if (g->cq) {
		if (g->cq_unacked)
			ibv_ack_cq_events(g->cq, g->cq_unacked);
		ret = verbs_ret(ibv_destroy_cq(g->cq));
		if (ret)
			log_warn("rdma: ibv_destroy_cq: %s", strerror(-ret));
	}
	if (g->cc) {
		ret = verbs_ret(ibv_destroy_comp_channel(g->cc));
		if (ret)
			log_warn("rdma: ibv_destroy_comp_channel: %s",
				 strerror(-ret));
	}
	if (g->pd) {
		ret = verbs_ret(ibv_dealloc_pd(g->pd));
		if (ret)
			log_warn("rdma: ibv_dealloc_pd: %s", strerror(-ret));
	}
	xp_watch_free_all(&g->base.watches);
	close(g->base.epfd);
	rdma_destroy_event_channel(g->ch);
	free(g->ctab);
	free(g);
}

/* An index (and generation) in the group's table, and the list. */
int xr_conn_join(struct xr_group *g, struct xr_conn *c)
{
	uint32_t idx;

	if (g->ctab_free) {
		idx = g->ctab_free - 1;
		g->ctab_free = g->ctab[idx].next_free;
	} else {
		if (g->ctab_len == g->ctab_cap) {
			uint32_t cap = g->ctab_cap ? 2 * g->ctab_cap : 16;
			struct xr_slot *n;

			if (cap > XR_IDX_MAX)
				return -ENOSPC;
			n = realloc(g->ctab, sizeof(*n) * cap);
			if (!n)
				return -ENOMEM;
			memset(n + g->ctab_cap, 0,
			       sizeof(*n) * (cap - g->ctab_cap));
			g->ctab = n;
			g->ctab_cap = cap;
		}
		idx = g->ctab_len++;
	}
	g->ctab[idx].conn = c;
	g->ctab[idx].gen++;
	c->idx = idx;
	c->gen = g->ctab[idx].gen;
	c->g = g;
	DLIST_PUSH(g->conns, c, gprev, gnext);
	return 0;
}

void xr_conn_leave(struct xr_conn *c)
{
	struct xr_group *g = c->g;

	g->ctab[c->idx].conn = NULL;
	g->ctab[c->idx].next_free = g->ctab_free;
	g->ctab_free = c->idx + 1;
	DLIST_UNLINK(g->conns, c, gprev, gnext);
}

/* Room in the shared CQ for need more entries (resized as needed). */
static int xr_cq_reserve(struct xr_group *g, uint32_t need, const char *who)
{
	uint32_t want = g->cq_need + need;
	int ret, size;

	if (want <= (uint32_t)g->cq_size)
		return 0;
	if (want > (uint32_t)g->da.max_cqe) {
		log_err("%s: the group's CQ would need %u entries (device "
			"max_cqe %d)",
			who, want, g->da.max_cqe);
		return -ENOSPC;
	}
	size = (int)MIN(MAX(want, 2 * (uint32_t)g->cq_size),
			(uint32_t)g->da.max_cqe);
	ret = verbs_ret(ibv_resize_cq(g->cq, size));
	if (ret) {
		log_err("%s: ibv_resize_cq(%d): %s", who, size, strerror(-ret));
		return ret;
	}
	g->cq_size = g->cq->cqe;
	return 0;
}

/*
 * Create the QP of c->id (route resolved, or from a request) in c's
 * group, whose device is bound. All or nothing.
 */
int xr_setup_queue(struct xr_conn *c, const struct xp_conn_attr *attr)
{
	struct xr_group *g = c->g;
	const struct ibv_device_attr *da = &g->da;
	uint32_t cqe = attr->max_send_wr + attr->max_recv_wr;
	struct ibv_qp_init_attr qa;
	int ret;

	if (attr->max_send_wr > (uint32_t)da->max_qp_wr ||
	    attr->max_recv_wr > (uint32_t)da->max_qp_wr) {
		log_err("%s: queue depth %u/%u exceeds device %s limits "
			"(max_qp_wr %d)",
			c->name, attr->max_send_wr, attr->max_recv_wr,
			ibv_get_device_name(g->verbs->device), da->max_qp_wr);
		return -EINVAL;
	}
	ret = xr_cq_reserve(g, cqe, c->name);
	if (ret)
		return ret;
	c->rd_atom = (uint8_t)MIN(MAX(da->max_qp_rd_atom, 0), XR_RD_ATOM_CAP);
	c->init_depth =
	    (uint8_t)MIN(MAX(da->max_qp_init_rd_atom, 0), XR_RD_ATOM_CAP);

	memset(&qa, 0, sizeof(qa));
	qa.qp_context = c;
	qa.send_cq = g->cq;
	qa.recv_cq = g->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = attr->max_send_wr;
	qa.cap.max_recv_wr = attr->max_recv_wr;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = XR_INLINE_WANT;
	if (rdma_create_qp(c->id, g->pd, &qa)) {
		log_debug("%s: rdma_create_qp with %u bytes inline: %s; "
			  "retrying without",
			  c->name, XR_INLINE_WANT, strerror(errno));
		qa.cap.max_send_wr = attr->max_send_wr;
		qa.cap.max_recv_wr = attr->max_recv_wr;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(c->id, g->pd, &qa)) {
			ret = neg_errno();
			log_err("%s: rdma_create_qp(%u/%u): %s", c->name,
				attr->max_send_wr, attr->max_recv_wr,
				strerror(-ret));
			return ret;
		}
	}
	c->qp = c->id->qp;
	c->max_inline = qa.cap.max_inline_data;
	c->cq_share = cqe;
	g->cq_need += cqe;
	return 0;
}

/* Undo xr_setup_queue(): the HCA stops touching memory for this QP. */
void xr_teardown_queue(struct xr_conn *c)
{
	if (!c->qp)
		return;
	rdma_destroy_qp(c->id);
	c->qp = NULL;
	c->g->cq_need -= c->cq_share;
	c->cq_share = 0;
}

/* Drain the group's rdma_cm events to their connections; never blocks. */
void xr_cm_drain(struct xr_group *g)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(g->ch, &ev)) {
		enum rdma_cm_event_type type = ev->event;
		struct xr_conn *c = ev->id->context;
		int status = ev->status;

		rdma_ack_cm_event(ev);
		if (c)
			xr_cm_event(c, type, status);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		log_err("rdma: rdma_get_cm_event: %s", strerror(errno));
}

/* Read and ack CQ notifications; never blocks. */
static void xr_cq_events(struct xr_group *g)
{
	struct ibv_cq *cq;
	void *ctx;

	while (!ibv_get_cq_event(g->cc, &cq, &ctx)) {
		if (++g->cq_unacked >= XR_CQ_ACK_BATCH) {
			ibv_ack_cq_events(g->cq, g->cq_unacked);
			g->cq_unacked = 0;
		}
	}
}

/*
 * Service whatever the epoll fd says is pending: cm events first (a
 * DISCONNECTED flushes the QP, and the flushes are then polled), then CQ
 * notifications; readable watched fds become FD_READY completions (at
 * most max). One non-blocking epoll_wait. Returns the completions made.
 */
static int xr_service(struct xr_group *g, struct xp_wc *wc, int max)
{
	struct epoll_event ev[XR_EP_EVENTS];
	bool cm = false, cq = false;
	int n, k = 0;

	n = epoll_wait(g->base.epfd, ev, XR_EP_EVENTS, 0);
	for (int i = 0; i < n; i++) {
		uint64_t d = ev[i].data.u64;

		if (d == XR_EP_CM) {
			cm = true;
		} else if (d == XR_EP_CQ) {
			cq = true;
		} else if (k < max) {
			/* level-triggered: one left out shows again */
			wc[k++] = xp_watch_wc(d);
		}
	}
	if (cm)
		xr_cm_drain(g);
	if (cq)
		xr_cq_events(g);
	return k;
}

static enum xp_wc_status xr_wc_status(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return XP_WC_SUCCESS;
	case IBV_WC_WR_FLUSH_ERR:
		return XP_WC_FLUSH_ERR;
	case IBV_WC_REM_ACCESS_ERR:
		return XP_WC_REM_ACCESS_ERR;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_LOC_QP_OP_ERR:
	case IBV_WC_LOC_EEC_OP_ERR:
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_LOC_RDD_VIOL_ERR:
	case IBV_WC_MW_BIND_ERR:
		return XP_WC_LOC_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return XP_WC_RNR_ERR;
	default:
		return XP_WC_FATAL;
	}
}

static const char *xr_qp_state_str(enum ibv_qp_state st)
{
	switch (st) {
	case IBV_QPS_RESET:
		return "RESET";
	case IBV_QPS_INIT:
		return "INIT";
	case IBV_QPS_RTR:
		return "RTR";
	case IBV_QPS_RTS:
		return "RTS";
	case IBV_QPS_SQD:
		return "SQD";
	case IBV_QPS_SQE:
		return "SQE";
	case IBV_QPS_ERR:
		return "ERR";
	default:
		return "?";
	}
}

/*
 * A flush that comes first: nothing of ours moved the QP to error (no
 * xr_shutdown(), no failed completion before it), so the device did: a
 * responder-side error (the peer's RDMA READ or WRITE refused, a
 * malformed request) reports nothing here, only a NAK to the peer; and
 * rxe ends a QP whose requester failed a request (a local error, a
 * window bind refused) with flushes only, that request's own status
 * lost. What was outstanding on the send queue then (oldest first) is
 * what there is to go on. Written into c->why.
 */
static void xr_flushed_first(struct xr_conn *c, const struct xp_wc *w)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	const char *st = "unknown";
	/* a send's flush retired its own slot already (sq_head moved) */
	uint64_t from = w->opcode == XP_WC_RECV ? c->sq_head : c->sq_head - 1;
	uint64_t nr = c->sq_tail - from;
	char sq[80] = "";
	size_t n = 0;

	if (c->qp && !ibv_query_qp(c->qp, &qa, IBV_QP_STATE, &qia))
		st = xr_qp_state_str(qa.qp_state);
	for (uint64_t i = 0; i < nr && i < 6; i++)
		n += (size_t)snprintf(
		    sq + n, sizeof(sq) - n, " %s",
		    xp_wc_opcode_str(
			c->sq_slot[(from + i) % c->max_send_wr].opcode));
	snprintf(c->why, sizeof(c->why),
		 "the device moved the QP to error by itself (state %s; a %s "
		 "flushed first; %llu sends outstanding%s%s)",
		 st, xp_wc_opcode_str(w->opcode), (unsigned long long)nr,
		 nr ? ":" : "", nr > 6 ? strcat(sq, " ...") : sq);
}

/*
 * The first failed completion says why the connection failed, once, at
 * warning level: a flush too when it comes first (the device's doing).
 * After a shutdown of ours (c->shut) its flushes are expected: the
 * reason was given then.
 */
static void xr_wc_failed(struct xr_conn *c, const struct ibv_wc *iw,
			 const struct xp_wc *w)
{
	if (!c->err_logged && c->state != XP_CONN_ERROR) {
		c->err_logged = true;
		if (iw->status == IBV_WC_WR_FLUSH_ERR) {
			xr_flushed_first(c, w);
			log_warn("%s: connection failed: %s", c->name, c->why);
		} else {
			log_ratelimited(LOG_WARN,
					"%s: %s failed: %s (vendor error "
					"0x%x)",
					c->name, xp_wc_opcode_str(w->opcode),
					ibv_wc_status_str(iw->status),
					iw->vendor_err);
			snprintf(c->why, sizeof(c->why),
				 "%s failed: %s (vendor error 0x%x)",
				 xp_wc_opcode_str(w->opcode),
				 ibv_wc_status_str(iw->status), iw->vendor_err);
		}
	}
	xr_shutdown(c);
}

/* The full sequence number nearest to head with these low 32 bits. */
static inline uint64_t xr_seq(uint64_t head, uint64_t low)
{
	return head + (uint32_t)((uint32_t)low - (uint32_t)head);
}

/* false: a completion of a connection destroyed meanwhile (dropped). */
static bool xr_translate(struct xr_group *g, const struct ibv_wc *iw,
			 struct xp_wc *w)
{
	uint32_t idx = (uint32_t)(iw->wr_id >> XR_IDX_SHIFT) & (XR_IDX_MAX - 1);
	uint8_t gen = (uint8_t)(iw->wr_id >> XR_GEN_SHIFT);
	struct xr_conn *c;
	uint64_t seq;

	if (idx >= g->ctab_len || !g->ctab[idx].conn || g->ctab[idx].gen != gen)
		return false;
	c = g->ctab[idx].conn;
	*w = (struct xp_wc){.conn = &c->base};
	if (iw->wr_id & XR_RECV_BIT) {
		seq = xr_seq(c->rq_head, iw->wr_id & XR_SEQ_MASK);
		w->wr_id = c->rq_wr_id[seq % c->max_recv_wr];
		w->opcode = XP_WC_RECV;
		c->rq_head = seq + 1;
		/*
		 * rxe reports the kernel's IB_WC_WITH_INVALIDATE (1 << 2),
		 * which libibverbs calls IBV_WC_IP_CSUM_OK; on an RC
		 * receive that bit has no other meaning.
		 */
		if (iw->status == IBV_WC_SUCCESS &&
		    (iw->wc_flags & (IBV_WC_WITH_INV | IBV_WC_IP_CSUM_OK))) {
			w->flags = XP_WC_F_WITH_INV;
			w->invalidated_rkey = iw->invalidated_rkey;
		}
		if (iw->status == IBV_WC_SUCCESS &&
		    iw->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			w->flags = XP_WC_F_WITH_IMM;
			w->imm = be32toh(iw->imm_data);
		}
	} else {
		const struct xr_sq_slot *s;

		seq = xr_seq(c->sq_head, iw->wr_id & XR_SEQ_MASK);
		s = &c->sq_slot[seq % c->max_send_wr];
		w->wr_id = s->wr_id;
		w->opcode = s->opcode;
		/* RC: this retires every earlier (unsignaled) request too */
		c->sq_head = seq + 1;
	}
	w->status = xr_wc_status(iw->status);
	w->byte_len = iw->status == IBV_WC_SUCCESS ? iw->byte_len : 0;
	if (unlikely(iw->status != IBV_WC_SUCCESS))
		xr_wc_failed(c, iw, w);
	return true;
}

static int xr_poll_cq(struct xr_group *g, struct xp_wc *wc, int max)
{
	struct ibv_wc iw[XR_POLL_BATCH];
	int done = 0;

	if (!g->cq)
		return 0;
	while (done < max) {
		int want = MIN(max - done, XR_POLL_BATCH);
		int n = ibv_poll_cq(g->cq, want, iw);

		if (unlikely(n < 0)) {
			log_err("rdma: ibv_poll_cq failed");
			return done ? done : -EIO;
		}
		for (int i = 0; i < n; i++)
			if (xr_translate(g, &iw[i], &wc[done]))
				done++;
		if (n < want)
			break;
	}
	return done;
}

int xr_group_arm(struct xp_group *xg)
{
	struct xr_group *g = to_xr_group(xg);
	int ret;

	if (!g->cq)
		return 0;
	ret = verbs_ret(ibv_req_notify_cq(g->cq, 0));
	if (ret)
		log_err("rdma: ibv_req_notify_cq: %s", strerror(-ret));
	return ret;
}

/*
 * Completions first: a busy group polls the CQ without a system call.
 * When it is empty, and on every XR_SERVICE_EVERY-th busy call so that a
 * watched fd (a worker's io_uring) is not starved by a busy CQ, the
 * channels and watched fds are serviced, and the CQ polled again for what
 * that produced (flushes after a disconnect, completions that raced with
 * arm()).
 */
int xr_group_poll(struct xp_group *xg, struct xp_wc *wc, int max)
{
	struct xr_group *g = to_xr_group(xg);
	bool due;
	int n;

	if (max <= 0)
		return max < 0 ? -EINVAL : 0;
	due = ++g->busy_polls >= XR_SERVICE_EVERY;
	/* when due, leave room for a watched fd's completion */
	n = xr_poll_cq(g, wc, due && max > 1 ? max - 1 : max);
	if (n < 0)
		return n;
	if (n && !due)
		return n;
	g->busy_polls = 0;
	n += xr_service(g, wc + n, max - n);
	if (n < max) {
		int k = xr_poll_cq(g, wc + n, max - n);

		if (k < 0)
			return n ? n : k;
		n += k;
	}
	return n;
}
