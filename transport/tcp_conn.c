/* SPDX-License-Identifier: MIT */
/*
 * tcp_conn.c - tcp transport: queues, completions, connection lifecycle, posting
 * (see tcp_internal.h for the frame format and the progress engine).
 */
#include "tcp_internal.h"

/* ---- connection: queues and completions -------------------------------- */

void tcp_cq_push(struct tcp_conn *c, bool recv, uint64_t seq,
			uint64_t wr_id, enum xp_wc_status status,
			enum xp_wc_opcode op, uint32_t byte_len)
{
	struct tcp_cqe *e;

	/* Each outstanding WR owns at most one entry until delivered. */
	if (unlikely(c->cq_count == c->cq_size)) {
		log_err("%s: completion ring overflow (bug)", c->peer);
		return;
	}
	e = &c->cq[(c->cq_head + c->cq_count) % c->cq_size];
	e->wc.wr_id = wr_id;
	e->wc.status = status;
	e->wc.opcode = op;
	e->wc.byte_len = byte_len;
	e->seq = seq;
	e->recv = recv;
	c->cq_count++;
}

/* Hand queued completions to the user; their slots are free from now on. */
static int tcp_cq_drain(struct tcp_conn *c, struct xp_wc *wc, int max)
{
	int n = 0;

	while (n < max && c->cq_count) {
		struct tcp_cqe *e = &c->cq[c->cq_head];

		wc[n++] = e->wc;
		if (e->recv)
			c->rq_head = e->seq + 1;
		else
			c->sq_head = e->seq + 1; /* retires unsignaled ones */
		c->cq_head = (c->cq_head + 1) % c->cq_size;
		c->cq_count--;
	}
	return n;
}

static enum xp_wc_opcode tcp_wc_opcode(uint8_t wr_opcode)
{
	switch (wr_opcode) {
	case XP_WR_RDMA_WRITE:
		return XP_WC_RDMA_WRITE;
	case XP_WR_RDMA_READ:
		return XP_WC_RDMA_READ;
	default:
		return XP_WC_SEND;
	}
}

void tcp_swr_complete(struct tcp_conn *c, uint64_t seq,
			     enum xp_wc_status status)
{
	struct tcp_swr *s = tcp_swr(c, seq);

	tcp_cq_push(c, false, seq, s->wr_id, status, tcp_wc_opcode(s->opcode),
		    s->opcode == XP_WR_RDMA_READ ? s->len : 0);
}

/* Generate completions for the done prefix of the send queue, in order. */
void tcp_sq_emit(struct tcp_conn *c)
{
	while (c->sq_emit != c->sq_tail) {
		struct tcp_swr *s = tcp_swr(c, c->sq_emit);

		if (!s->done || s->status)
			break;
		if (s->signaled)
			tcp_swr_complete(c, c->sq_emit, XP_WC_SUCCESS);
		c->sq_emit++;
	}
}

/* ---- connection lifecycle ---------------------------------------------- */

static void tcp_conn_free(struct tcp_conn *c)
{
	for (unsigned int b = 0; b < TCP_MR_BUCKETS; b++) {
		while (c->mr_hash[b]) {
			struct tcp_mr *m = c->mr_hash[b];

			c->mr_hash[b] = m->hnext;
			free(m);
		}
	}
	if (c->oq)
		tcp_oq_drop(c);
	free(c->sbuf);
	free(c->ob);
	free(c->oq);
	free(c->cq);
	free(c->rq);
	free(c->sq);
	if (c->epfd >= 0)
		close(c->epfd);
	free(c);
}

int tcp_attr_check(const struct xp_conn_attr *attr)
{
	if (attr && attr->max_send_wr <= TCP_MAX_WR &&
	    attr->max_recv_wr <= TCP_MAX_WR)
		return 0;
	log_err("tcp: connection attributes out of range (max %u WRs)",
		TCP_MAX_WR);
	return -EINVAL;
}

/*
 * Wrap a connected socket. On success the connection owns sock; on
 * failure the caller still does.
 */
int tcp_conn_create(int sock, const struct xp_conn_attr *attr,
			   enum xp_conn_state state, struct tcp_conn **out)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tcp_conn *c;
	int one = 1, ret = -ENOMEM;

	ret = tcp_attr_check(attr);
	if (ret)
		return ret;
	ret = -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c) {
		log_err("tcp: calloc(connection): %s", strerror(errno));
		return -ENOMEM;
	}
	c->base.ops = &xp_tcp_ops;
	c->grp.ops = &xp_tcp_ops;
	c->sock = sock;
	c->epfd = -1;
	c->state = state;
	c->sq_max = attr->max_send_wr;
	c->rq_max = attr->max_recv_wr;
	c->sq_size = MAX(attr->max_send_wr, 1u);
	c->rq_size = MAX(attr->max_recv_wr, 1u);
	c->cq_size = c->sq_size + c->rq_size;
	c->oq_cap = 2 * c->sq_size + 16;
	c->ob_cap = TCP_OB_INIT;
	c->sq = calloc(c->sq_size, sizeof(*c->sq));
	c->rq = calloc(c->rq_size, sizeof(*c->rq));
	c->cq = calloc(c->cq_size, sizeof(*c->cq));
	c->oq = calloc(c->oq_cap, sizeof(*c->oq));
	c->ob = malloc(c->ob_cap);
	c->sbuf = malloc(TCP_SBUF_SIZE);
	if (!c->sq || !c->rq || !c->cq || !c->oq || !c->ob || !c->sbuf) {
		log_err("tcp: allocating queues for %u/%u WRs: %s", c->sq_size,
			c->rq_size, strerror(ENOMEM));
		goto out_free_conn;
	}
	if (getpeername(sock, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_addr(&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "tcp ?");
	if (setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		log_warn("%s: setsockopt(TCP_NODELAY): %s", c->peer,
			 strerror(errno));
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0) {
		ret = -errno;
		log_err("%s: epoll_create1: %s", c->peer, strerror(errno));
		goto out_free_conn;
	}
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, sock, &ev) < 0) {
		ret = -errno;
		log_err("%s: epoll_ctl(ADD): %s", c->peer, strerror(errno));
		goto out_free_conn;
	}
	c->in_epoll = true;
	*out = c;
	return 0;

out_free_conn:
	tcp_conn_free(c);
	return ret;
}

void tcp_destroy(struct xp_conn *xc)
{
	struct tcp_conn *c;

	if (!xc)
		return;
	c = to_tcp(xc);
	/*
	 * Read what the peer already sent so close() ends with a FIN, not
	 * an RST that could discard our last frames (bounded).
	 */
	shutdown(c->sock, SHUT_WR);
	for (int i = 0; i < 16; i++)
		if (recv(c->sock, c->sbuf, TCP_SBUF_SIZE, MSG_DONTWAIT) <= 0)
			break;
	close(c->sock);
	tcp_conn_free(c);
}

void tcp_disconnect(struct xp_conn *xc)
{
	struct tcp_conn *c = to_tcp(xc);

	if (c->state != XP_CONN_ERROR)
		log_debug("%s: disconnect", c->peer);
	tcp_fail(c, 0, 0);
}

enum xp_conn_state tcp_state(struct xp_conn *xc)
{
	return to_tcp(xc)->state;
}

const char *tcp_peer_name(struct xp_conn *xc)
{
	return to_tcp(xc)->peer;
}

int tcp_fd(struct xp_conn *xc)
{
	return to_tcp(xc)->epfd;
}

/*
 * See "fd() contract" at the top: nothing to arm. If the socket was found
 * empty by the last read, the poll() that follows skips reading once more:
 * the caller sleeps on the level-triggered epoll fd next, which wakes at
 * once for anything that arrived since.
 */
int tcp_arm(struct xp_conn *xc)
{
	struct tcp_conn *c = to_tcp(xc);

	if (c->rx_arm_skip) {
		c->rx_arm_skip = false;
		c->rx_skip = true;
	}
	return 0;
}

int tcp_poll(struct xp_conn *xc, struct xp_wc *wc, int max)
{
	struct tcp_conn *c = to_tcp(xc);
	int n, ret;

	if (max < 0)
		return -EINVAL;
	n = tcp_cq_drain(c, wc, max);
	if (n == max || c->state != XP_CONN_CONNECTED)
		return n;
	if (c->oq_count) {
		ret = tcp_flush(c);
		if (ret)
			tcp_fail_io(c, ret);
		tcp_sq_emit(c);
	}
	if (c->state == XP_CONN_CONNECTED)
		tcp_rx_progress(c, (uint32_t)(max - n));
	if (c->state == XP_CONN_CONNECTED && c->oq_count) {
		ret = tcp_flush(c);
		if (ret)
			tcp_fail_io(c, ret);
		tcp_sq_emit(c);
	}
	return n + tcp_cq_drain(c, wc + n, max - n);
}

int tcp_post_recv(struct xp_conn *xc, uint64_t wr_id,
			 const struct xp_sge *sge)
{
	struct tcp_conn *c = to_tcp(xc);
	struct tcp_rwr *r;
	int ret;

	if (c->state == XP_CONN_ERROR)
		return -ENOTCONN;
	if (c->rq_tail - c->rq_head >= c->rq_max)
		return -ENOMEM;
	ret = tcp_sge_check(c, sge, XP_ACCESS_LOCAL_WRITE);
	if (ret)
		return ret;
	r = tcp_rwr(c, c->rq_tail++);
	r->wr_id = wr_id;
	r->addr = sge->addr;
	r->len = sge->length;
	r->mr = sge->mr;
	r->status = 0;
	return 0;
}

/* Fill sq slot seq from wr and build its frame. */
static void tcp_build(struct tcp_conn *c, const struct xp_send_wr *wr,
		      uint64_t seq, struct tcp_frame *f)
{
	struct tcp_swr *s = tcp_swr(c, seq);
	uint8_t type = TCP_F_SEND;

	s->wr_id = wr->wr_id;
	s->opcode = (uint8_t)wr->opcode;
	s->signaled = wr->flags & XP_SEND_SIGNALED;
	s->done = false;
	s->status = 0;
	s->dst = wr->sge.addr;
	s->mr = wr->sge.mr;
	s->len = wr->sge.length;
	f->payload = wr->sge.addr;
	f->len = wr->sge.length;
	f->mr = wr->sge.mr;
	f->seq = seq;
	f->copy = false;
	if (wr->opcode == XP_WR_RDMA_WRITE) {
		type = TCP_F_WRITE;
		/* signaled: done on the peer's WRITE_ACK, not when sent */
		if (s->signaled)
			f->seq = TCP_NO_SEQ;
	} else if (wr->opcode == XP_WR_RDMA_READ) {
		type = TCP_F_READ_REQ;
		f->len = 0; /* no payload; done when READ_RESP is placed */
		f->seq = TCP_NO_SEQ;
	}
	tcp_hdr_encode(f->hdr, type, wr->sge.length, seq, wr->remote_addr,
		       wr->rkey, 0);
	if (type == TCP_F_WRITE && s->signaled)
		f->hdr[1] = TCP_FL_ACK;
}

int tcp_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
			 struct xp_send_wr **bad)
{
	struct tcp_conn *c = to_tcp(xc);
	struct tcp_frame f[TCP_BATCH];
	int nf = 0, ret = 0;

	for (; wr; wr = wr->next) {
		if (c->state != XP_CONN_CONNECTED) {
			ret = -ENOTCONN;
			break;
		}
		if (c->sq_tail - c->sq_head >= c->sq_max) {
			ret = -ENOMEM;
			break;
		}
		if (wr->opcode != XP_WR_SEND &&
		    wr->opcode != XP_WR_RDMA_WRITE &&
		    wr->opcode != XP_WR_RDMA_READ) {
			log_err("%s: post_send: bad opcode %d", c->peer,
				wr->opcode);
			ret = -EINVAL;
			break;
		}
		ret = tcp_sge_check(
		    c, &wr->sge,
		    wr->opcode == XP_WR_RDMA_READ ? XP_ACCESS_LOCAL_WRITE : 0);
		if (ret)
			break;
		tcp_build(c, wr, c->sq_tail++, &f[nf++]);
		if (nf == TCP_BATCH) {
			ret = tcp_send_frames(c, f, nf);
			nf = 0;
			if (ret) {
				tcp_fail_io(c, ret);
				ret = 0; /* posted; they complete flushed */
			}
		}
	}
	if (nf && c->state == XP_CONN_CONNECTED) {
		int err = tcp_send_frames(c, f, nf);

		if (err)
			tcp_fail_io(c, err);
	}
	tcp_sq_emit(c);
	if (ret && bad)
		*bad = wr;
	return ret;
}

