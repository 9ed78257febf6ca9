/* SPDX-License-Identifier: MIT */
/*
 * tcp_conn.c - tcp transport: queues, completions, connection lifecycle,
 * posting (see tcp_internal.h for the frame format and the progress
 * engine).
 */
#include "tcp_internal.h"

/* ---- connection: queues and completions -------------------------------- */

/*
 * Queue a completion. The connection goes on its group's ready list, so
 * group_poll() delivers it even when the socket has nothing to say (a
 * failed connection's flushes above all).
 */
struct xp_wc *tcp_cq_push(struct tcp_conn *c, bool recv, uint64_t seq,
			  uint64_t wr_id, enum xp_wc_status status,
			  enum xp_wc_opcode op, uint32_t byte_len)
{
	struct tcp_cqe *e;

	/* Each outstanding WR owns at most one entry until delivered. */
	if (unlikely(c->cq_count == c->cq_size)) {
		log_err("%s: completion ring overflow (bug)", c->peer);
		return NULL;
	}
	e = &c->cq[(c->cq_head + c->cq_count) % c->cq_size];
	e->wc = (struct xp_wc){
	    .wr_id = wr_id,
	    .status = status,
	    .opcode = op,
	    .byte_len = byte_len,
	    .conn = &c->base,
	};
	e->seq = seq;
	e->recv = recv;
	c->cq_count++;
	tcp_ready(c);
	return &e->wc;
}

/*
 * Hand queued completions to the user; their slots are free from now on.
 * A failed connection whose last completion went out leaves the epoll set
 * (until then its shut-down socket keeps the group fd readable).
 */
int tcp_cq_drain(struct tcp_conn *c, struct xp_wc *wc, int max)
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
	if (!c->cq_count && c->state == XP_CONN_ERROR)
		tcp_epoll_del(c);
	return n;
}

void tcp_swr_complete(struct tcp_conn *c, uint64_t seq,
		      enum xp_wc_status status)
{
	struct tcp_swr *s = tcp_swr(c, seq);

	tcp_cq_push(c, false, seq, s->wr_id, status, xp_wr_wc_opcode(s->opcode),
		    s->opcode == XP_WR_RDMA_READ ? s->len : 0);
}

/* Generate completions for the done prefix of the send queue, in order. */
void tcp_sq_emit(struct tcp_conn *c)
{
	while (c->sq_emit < c->sq_start) {
		struct tcp_swr *s = tcp_swr(c, c->sq_emit);

		if (!s->done || s->status)
			break;
		if (s->signaled)
			tcp_swr_complete(c, c->sq_emit, XP_WC_SUCCESS);
		c->sq_emit++;
	}
}

/* Completion ring to sq_size + rq_size entries, which it never exceeds. */
static int tcp_cq_fit(struct tcp_conn *c)
{
	uint32_t nsize = c->sq_size + c->rq_size;
	struct tcp_cqe *n;

	if (nsize <= c->cq_size)
		return 0;
	n = calloc(nsize, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->cq_count; i++)
		n[i] = c->cq[(c->cq_head + i) % c->cq_size];
	free(c->cq);
	c->cq = n;
	c->cq_size = nsize;
	c->cq_head = 0;
	return 0;
}

/*
 * A post found the send or receive ring (*ring, *size slots of esz bytes)
 * full below its maximum: double it, up to max, moving the slots of
 * sequence numbers [head, tail), and fit the completion ring. 0, or
 * -ENOMEM (the post fails as on a full queue).
 */
static int tcp_ring_grow(struct tcp_conn *c, void **ring, uint32_t *size,
			 size_t esz, uint32_t max, uint64_t head, uint64_t tail)
{
	uint32_t nsize = MIN(*size * 2, max);
	char *n = calloc(nsize, esz);

	if (!n)
		goto fail;
	for (uint64_t q = head; q != tail; q++)
		memcpy(n + (q % nsize) * esz, (char *)*ring + (q % *size) * esz,
		       esz);
	free(*ring);
	*ring = n;
	*size = nsize;
	if (tcp_cq_fit(c))
		goto fail;
	return 0;
fail:
	log_err("%s: growing a queue to %u WRs: %s", c->peer, nsize,
		strerror(ENOMEM));
	return -ENOMEM;
}

/* ---- connection lifecycle ---------------------------------------------- */

static void tcp_conn_free(struct tcp_conn *c)
{
	if (c->oq)
		tcp_oq_drop(c);
	free(c->sbuf);
	free(c->ob);
	free(c->oq);
	free(c->cq);
	free(c->rq);
	free(c->sq);
	tcp_tls_free(c->tls);
	free(c);
}

void tcp_conn_set_tls(struct tcp_conn *c, struct tcp_tls *tls)
{
	c->tls = tls;
	c->tls_user = tls && tcp_tls_peer(tls)->mode == XP_TLS_USER;
}

void tcp_conn_tls(struct xp_conn *xc, struct xp_tls_peer *out)
{
	struct tcp_conn *c = to_tcp(xc);

	if (c->tls)
		*out = *tcp_tls_peer(c->tls);
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

const struct xp_conn_attr tcp_attr_max = {
    .max_send_wr = TCP_MAX_WR,
    .max_recv_wr = TCP_MAX_WR,
};

/* The queues grow on demand: only their limits change. */
int tcp_setup_queue(struct xp_conn *xc, const struct xp_conn_attr *attr)
{
	struct tcp_conn *c = to_tcp(xc);
	int ret = tcp_attr_check(attr);

	if (ret)
		return ret;
	if (c->state != XP_CONN_REQUESTED || c->sq_tail != c->sq_head ||
	    c->rq_tail != c->rq_head)
		return -EINVAL;
	c->sq_max = attr->max_send_wr;
	c->rq_max = attr->max_recv_wr;
	c->rd_max = attr->max_read_bytes ? attr->max_read_bytes : UINT64_MAX;
	return 0;
}

/*
 * Wrap a connected socket; it joins group g (NULL: a private group made
 * here). On success the connection owns sock; on failure the caller
 * still does.
 */
int tcp_conn_create(int sock, struct xp_group *xg,
		    const struct xp_conn_attr *attr, enum xp_conn_state state,
		    struct tcp_conn **out)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = sizeof(ss);
	struct xp_group *own = NULL;
	struct tcp_conn *c;
	int one = 1, ret;

	ret = tcp_attr_check(attr);
	if (ret)
		return ret;
	if (!xg) {
		ret = tcp_group_create(&own);
		if (ret)
			return ret;
		xg = own;
	}
	ret = -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c) {
		log_err("tcp: calloc(connection): %s", strerror(errno));
		goto out_destroy_group;
	}
	c->base.ops = &xp_tcp_ops;
	c->g = to_tcp_group(xg);
	c->sock = sock;
	c->state = state;
	c->sq_max = attr->max_send_wr;
	c->rq_max = attr->max_recv_wr;
	c->rd_max = attr->max_read_bytes ? attr->max_read_bytes : UINT64_MAX;
	c->sq_size = MIN(MAX(attr->max_send_wr, 1u), TCP_Q_INIT);
	c->rq_size = MIN(MAX(attr->max_recv_wr, 1u), TCP_Q_INIT);
	c->cq_size = c->sq_size + c->rq_size;
	c->oq_cap = 2 * c->sq_size + 16;
	c->sq = calloc(c->sq_size, sizeof(*c->sq));
	c->rq = calloc(c->rq_size, sizeof(*c->rq));
	c->cq = calloc(c->cq_size, sizeof(*c->cq));
	c->oq = calloc(c->oq_cap, sizeof(*c->oq));
	if (!c->sq || !c->rq || !c->cq || !c->oq) {
		log_err("tcp: allocating queues for %u/%u WRs: %s", c->sq_size,
			c->rq_size, strerror(ENOMEM));
		goto out_free_conn;
	}
	if (getpeername(sock, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_addr(sock, &ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "tcp ?");
	if (ss.ss_family != AF_UNIX &&
	    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		log_warn("%s: setsockopt(TCP_NODELAY): %s", c->peer,
			 strerror(errno));
	ret = tcp_group_add(c->g, c);
	if (ret)
		goto out_free_conn;
	if (own)
		c->g->private_conn = c;
	*out = c;
	return 0;

out_free_conn:
	tcp_conn_free(c);
out_destroy_group:
	if (own)
		tcp_group_destroy(own);
	return ret;
}

/* Its windows are invalidated; a private group goes with it. */
void tcp_sock_close(int sock)
{
	/*
	 * Read what the peer already sent so close() ends with a FIN, not
	 * an RST that could discard our last frames (bounded).
	 */
	shutdown(sock, SHUT_WR);
	for (int i = 0; i < 16; i++)
		if (recv(sock, NULL, TCP_SBUF_SIZE, MSG_DONTWAIT | MSG_TRUNC) <=
		    0)
			break;
	close(sock);
}

void tcp_destroy(struct xp_conn *xc)
{
	struct tcp_group *g;
	struct tcp_conn *c;

	if (!xc)
		return;
	c = to_tcp(xc);
	g = c->g;
	tcp_conn_mws_drop(c);
	tcp_group_remove(g, c);
	tcp_sock_close(c->sock);
	tcp_conn_free(c);
	if (g->private_conn == c) {
		g->private_conn = NULL;
		tcp_group_destroy(&g->base);
	}
}

void tcp_disconnect(struct xp_conn *xc)
{
	struct tcp_conn *c = to_tcp(xc);

	if (c->state != XP_CONN_ERROR)
		log_debug("%s: disconnect", c->peer);
	tcp_why(c, "disconnected by its owner");
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

struct xp_group *tcp_conn_group(struct xp_conn *xc)
{
	return &to_tcp(xc)->g->base;
}

/*
 * Private-group path (see "fd() contract"): nothing to arm. If the socket
 * was found empty by the last read, the poll that follows skips reading
 * once more: the caller sleeps on the level-triggered epoll fd next,
 * which wakes at once for anything that arrived since.
 */
int tcp_conn_arm(struct tcp_conn *c)
{
	if (c->rx_arm_skip) {
		c->rx_arm_skip = false;
		c->rx_skip = true;
	}
	return 0;
}

/*
 * Progress one connection and reap up to max of its completions. Reads
 * only when may_read (the socket was readable, or the private-group path
 * whose rx_skip decides); a failed connection still delivers its flushes.
 */
int tcp_conn_poll(struct tcp_conn *c, struct xp_wc *wc, int max)
{
	int n, ret;

	n = tcp_cq_drain(c, wc, max);
	if (n == max || c->state != XP_CONN_CONNECTED)
		return n;
	if (tcp_out_queued(c)) {
		ret = tcp_flush(c);
		if (ret)
			tcp_fail_io(c, ret);
		tcp_sq_emit(c);
	}
	if (c->state == XP_CONN_CONNECTED)
		tcp_rx_progress(c, (uint32_t)(max - n));
	if (c->state == XP_CONN_CONNECTED && tcp_out_queued(c)) {
		ret = tcp_flush(c);
		if (ret)
			tcp_fail_io(c, ret);
		tcp_sq_emit(c);
	}
	return n + tcp_cq_drain(c, wc + n, max - n);
}

int tcp_post_recv(struct xp_conn *xc, uint64_t wr_id, const struct xp_sge *sge)
{
	struct tcp_conn *c = to_tcp(xc);
	struct tcp_rwr *r;
	int ret;

	if (c->state == XP_CONN_ERROR)
		return -ENOTCONN;
	if (c->rq_tail - c->rq_head >= c->rq_max)
		return -ENOMEM;
	if (c->rq_tail - c->rq_head >= c->rq_size &&
	    tcp_ring_grow(c, (void **)&c->rq, &c->rq_size, sizeof(*c->rq),
			  c->rq_max, c->rq_head, c->rq_tail))
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

/* Post-time checks of one request. 0 or -EINVAL (logged). */
static int tcp_wr_check(struct tcp_conn *c, const struct xp_send_wr *wr)
{
	switch (wr->opcode) {
	case XP_WR_SEND:
	case XP_WR_SEND_WITH_INV:
	case XP_WR_RDMA_WRITE:
		return tcp_sge_check(c, &wr->sge, 0);
	case XP_WR_RDMA_READ:
		return tcp_sge_check(c, &wr->sge, XP_ACCESS_LOCAL_WRITE);
	case XP_WR_BIND_MW:
		return tcp_bind_check(c, &wr->bind);
	case XP_WR_LOCAL_INV:
		return 0;
	case XP_WR_RDMA_WRITE_WITH_IMM: /* not carried: no write_imm */
		break;
	}
	log_err("%s: post_send: bad opcode %d", c->peer, wr->opcode);
	return -EINVAL;
}

/* Fill sq slot seq from wr; tcp_sq_start() carries it out. */
static void tcp_slot_fill(struct tcp_conn *c, const struct xp_send_wr *wr,
			  uint64_t seq)
{
	struct tcp_swr *s = tcp_swr(c, seq);

	*s = (struct tcp_swr){
	    .wr_id = wr->wr_id,
	    .opcode = (uint8_t)wr->opcode,
	    .signaled = wr->flags & XP_SEND_SIGNALED,
	    .fence = wr->flags & XP_SEND_FENCE,
	    .dst = wr->sge.addr,
	    .mr = wr->sge.mr,
	    .len = wr->sge.length,
	    .rkey = wr->rkey,
	    .raddr = wr->remote_addr,
	};
	switch (wr->opcode) {
	case XP_WR_BIND_MW:
		s->mw = container_of(wr->bind.mw, struct tcp_mw, mw);
		s->mr = wr->bind.mr;
		s->rkey = wr->bind.rkey;
		s->raddr = wr->bind.addr;
		s->blen = wr->bind.length;
		s->access = (uint8_t)wr->bind.access;
		s->len = 0;
		/* the key the caller puts in later requests: valid now */
		wr->bind.mw->rkey = wr->bind.rkey;
		break;
	case XP_WR_LOCAL_INV:
	case XP_WR_SEND_WITH_INV:
		s->rkey = wr->invalidate_rkey;
		break;
	default:
		break;
	}
}

/* Build the frame of a started SEND/WRITE/READ slot. */
static void tcp_build(struct tcp_conn *c, uint64_t seq, struct tcp_frame *f)
{
	struct tcp_swr *s = tcp_swr(c, seq);
	uint8_t type = TCP_F_SEND;
	uint64_t addr = 0;
	uint32_t rkey = 0;

	f->payload = s->dst;
	f->len = s->len;
	f->mr = s->mr;
	f->seq = seq;
	f->copy = false;
	switch (s->opcode) {
	case XP_WR_RDMA_WRITE:
		type = TCP_F_WRITE;
		addr = s->raddr;
		rkey = s->rkey;
		/* signaled: done on the peer's WRITE_ACK, not when sent */
		if (s->signaled)
			f->seq = TCP_NO_SEQ;
		break;
	case XP_WR_RDMA_READ:
		type = TCP_F_READ_REQ;
		addr = s->raddr;
		rkey = s->rkey;
		f->len = 0; /* no payload; done when READ_RESP is placed */
		f->seq = TCP_NO_SEQ;
		c->reads_out++;
		break;
	case XP_WR_SEND_WITH_INV:
		type = TCP_F_SEND_INV;
		rkey = s->rkey;
		break;
	default:
		break;
	}
	tcp_hdr_encode(f->hdr, type, s->len, seq, addr, rkey, 0);
	if (type == TCP_F_WRITE && s->signaled)
		f->hdr[1] = TCP_FL_ACK;
}

/* Carry out a local slot (BIND_MW, LOCAL_INV). false: it failed. */
static bool tcp_local_op(struct tcp_conn *c, struct tcp_swr *s)
{
	int ret;

	if (s->opcode == XP_WR_BIND_MW) {
		ret = tcp_mw_bind(c, s);
	} else {
		ret = tcp_mw_inv(c, s->rkey);
		if (ret)
			log_warn("%s: local_inv: 0x%x is not a window bound "
				 "on this connection",
				 c->peer, s->rkey);
	}
	if (ret) {
		s->status = XP_WC_LOC_ERR;
		tcp_fail(c, 0, 0);
		return false;
	}
	s->done = true;
	return true;
}

/*
 * Start posted slots in order: local ones are carried out, the others
 * framed and sent in batches. A fenced slot waits until the RDMA READs
 * started before it have their responses placed (tcp_rx_finish() calls
 * this again), and everything behind it waits with it.
 */
void tcp_sq_start(struct tcp_conn *c)
{
	struct tcp_frame f[TCP_BATCH];
	int nf = 0, err;

	while (c->sq_start != c->sq_tail && c->state == XP_CONN_CONNECTED) {
		struct tcp_swr *s = tcp_swr(c, c->sq_start);

		if (s->fence && c->reads_out)
			break;
		if (s->opcode == XP_WR_BIND_MW ||
		    s->opcode == XP_WR_LOCAL_INV) {
			/*
			 * An invalidation must not take effect before the
			 * frames ahead of it leave (the peer may still need
			 * the key to serve them): those go first. A bind may
			 * take effect early: only a later frame tells the
			 * peer its key, so a batch of commands, each behind
			 * its window's bind, still leaves in one sendmsg().
			 */
			if (nf && s->opcode == XP_WR_LOCAL_INV) {
				err = tcp_send_frames(c, f, nf);
				nf = 0;
				if (err) {
					tcp_fail_io(c, err);
					break;
				}
			}
			c->sq_start++;
			if (!tcp_local_op(c, s))
				break;
			continue;
		}
		tcp_build(c, c->sq_start++, &f[nf++]);
		if (nf == TCP_BATCH) {
			err = tcp_send_frames(c, f, nf);
			nf = 0;
			if (err)
				tcp_fail_io(c, err);
		}
	}
	if (nf && c->state == XP_CONN_CONNECTED) {
		err = tcp_send_frames(c, f, nf);
		if (err)
			tcp_fail_io(c, err);
	}
	tcp_sq_emit(c);
}

int tcp_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
		  struct xp_send_wr **bad)
{
	struct tcp_conn *c = to_tcp(xc);
	int ret = 0;

	for (; wr; wr = wr->next) {
		if (c->state != XP_CONN_CONNECTED) {
			ret = -ENOTCONN;
			break;
		}
		if (c->sq_tail - c->sq_head >= c->sq_max ||
		    (c->sq_tail - c->sq_head >= c->sq_size &&
		     tcp_ring_grow(c, (void **)&c->sq, &c->sq_size,
				   sizeof(*c->sq), c->sq_max, c->sq_head,
				   c->sq_tail))) {
			ret = -ENOMEM;
			break;
		}
		ret = tcp_wr_check(c, wr);
		if (ret)
			break;
		tcp_slot_fill(c, wr, c->sq_tail++);
	}
	tcp_sq_start(c);
	if (ret && bad)
		*bad = wr;
	return ret;
}
