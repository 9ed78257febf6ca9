/* SPDX-License-Identifier: MIT */
/*
 * tcp_io.c - tcp transport: frame output and input (framing, progress)
 * (see tcp_internal.h for the frame format and the progress engine).
 */
#include "tcp_internal.h"

#include <stdarg.h>

/* ---- frame header ------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

void tcp_hdr_encode(uint8_t *p, uint8_t type, uint32_t len, uint64_t id,
		    uint64_t addr, uint32_t rkey, uint32_t aux)
{
	p[0] = type;
	p[1] = 0;
	put16(p + 2, TCP_MAGIC);
	put32(p + 4, len);
	put64(p + 8, id);
	put64(p + 16, addr);
	put32(p + 24, rkey);
	put32(p + 28, aux);
}

/* The one place a received header is checked. 0 or -EPROTO. */
int tcp_hdr_decode(const uint8_t *p, struct tcp_hdr *h)
{
	h->type = p[0];
	h->flags = p[1];
	h->len = get32(p + 4);
	h->id = get64(p + 8);
	h->addr = get64(p + 16);
	h->rkey = get32(p + 24);
	h->aux = get32(p + 28);
	if (get16(p + 2) != TCP_MAGIC ||
	    (h->flags & ~(h->type == TCP_F_WRITE ? TCP_FL_ACK : 0)))
		return -EPROTO;
	switch (h->type) {
	case TCP_F_CONNECT:
	case TCP_F_ACCEPT:
		if (h->aux != TCP_VERSION)
			return -EPROTO;
		/* fall through */
	case TCP_F_REJECT:
		return h->len <= XP_PRIV_MAX ? 0 : -EPROTO;
	case TCP_F_SEND:
	case TCP_F_SEND_INV:
	case TCP_F_WRITE:
	case TCP_F_READ_REQ:
	case TCP_F_READ_RESP:
		return 0;
	case TCP_F_ERROR:
	case TCP_F_WRITE_ACK:
		return h->len == 0 ? 0 : -EPROTO;
	}
	return -EPROTO;
}

/* ---- output ------------------------------------------------------------ */

static void tcp_set_epollout(struct tcp_conn *c, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0),
				 .data.u64 = (uintptr_t)c};

	if (c->epollout == on || !c->in_epoll || c->state == XP_CONN_ERROR)
		return;
	if (epoll_ctl(c->g->base.epfd, EPOLL_CTL_MOD, c->sock, &ev) < 0) {
		log_err("%s: epoll_ctl(MOD): %s", c->peer, strerror(errno));
		return;
	}
	c->epollout = on;
}

/* Make room for one more segment. 0 or -ENOMEM. */
static int tcp_oq_reserve(struct tcp_conn *c)
{
	struct tcp_oseg *n;
	uint32_t cap, i;

	if (c->oq_count < c->oq_cap)
		return 0;
	cap = c->oq_cap * 2;
	n = malloc(sizeof(*n) * cap);
	if (!n) {
		log_err("%s: malloc(output queue of %u): %s", c->peer, cap,
			strerror(errno));
		return -ENOMEM;
	}
	for (i = 0; i < c->oq_count; i++)
		n[i] = *tcp_oseg(c, i);
	free(c->oq);
	c->oq = n;
	c->oq_cap = cap;
	c->oq_head = 0;
	return 0;
}

/*
 * Take the group's spare buffer of `size` bytes (or make one) into *buf.
 * 0 or -ENOMEM.
 */
static int tcp_buf_get(char **spare, char **buf, size_t size)
{
	*buf = *spare ? *spare : malloc(size);
	*spare = NULL;
	return *buf ? 0 : -ENOMEM;
}

/*
 * A connection is done with *buf: it becomes the group's spare when there
 * is none and keep says it has the standard size, else it is freed.
 */
static void tcp_buf_put(char **spare, char **buf, bool keep)
{
	if (!*spare && keep)
		*spare = *buf;
	else
		free(*buf);
	*buf = NULL;
}

/* The output queue drained: the output buffer goes back. */
static void tcp_ob_release(struct tcp_conn *c)
{
	c->ob_head = c->ob_tail = 0;
	if (c->ob)
		tcp_buf_put(&c->g->ob, &c->ob, c->ob_cap == TCP_OB_INIT);
	c->ob_cap = 0;
}

/* Copy bytes to the end of the output queue. 0 or -ENOMEM. */
static int tcp_ob_append(struct tcp_conn *c, const void *data, size_t len)
{
	size_t used = c->ob_tail - c->ob_head;
	struct tcp_oseg *last;

	if (!c->ob) {
		if (tcp_buf_get(&c->g->ob, &c->ob, TCP_OB_INIT)) {
			log_err("%s: malloc(output buffer): %s", c->peer,
				strerror(ENOMEM));
			return -ENOMEM;
		}
		c->ob_cap = TCP_OB_INIT;
	}

	if (c->ob_tail + len > c->ob_cap && c->ob_head) {
		memmove(c->ob, c->ob + c->ob_head, used);
		c->ob_head = 0;
		c->ob_tail = used;
	}
	if (c->ob_tail + len > c->ob_cap) {
		size_t cap = MAX(c->ob_cap * 2, used + len);
		char *n = realloc(c->ob, cap);

		if (!n) {
			log_err("%s: realloc(output buffer of %zu): %s",
				c->peer, cap, strerror(errno));
			return -ENOMEM;
		}
		c->ob = n;
		c->ob_cap = cap;
	}
	last = c->oq_count ? tcp_oseg(c, c->oq_count - 1) : NULL;
	if (!last || last->ptr) {
		if (tcp_oq_reserve(c))
			return -ENOMEM;
		last = tcp_oseg(c, c->oq_count++);
		*last = (struct tcp_oseg){.seq = TCP_NO_SEQ};
	}
	memcpy(c->ob + c->ob_tail, data, len);
	c->ob_tail += len;
	last->len += len;
	return 0;
}

/*
 * Queue a reference to bytes that stay valid until the segment drains.
 * No seq: a READ_RESP payload, counted in rd_queued until it is sent.
 */
static int tcp_oq_ref(struct tcp_conn *c, const char *ptr, size_t len,
		      struct xp_mr *mr, uint64_t seq)
{
	if (tcp_oq_reserve(c))
		return -ENOMEM;
	*tcp_oseg(c, c->oq_count++) = (struct tcp_oseg){
	    .ptr = ptr,
	    .len = len,
	    .mr = mr,
	    .seq = seq,
	    .rd = seq == TCP_NO_SEQ,
	};
	if (seq == TCP_NO_SEQ)
		c->rd_queued += len;
	return 0;
}

/* A copy made by tcp_oq_copy_out(): its own mapping (see tcp_oseg). */
void *tcp_copy_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void tcp_oseg_unown(struct tcp_oseg *s)
{
	if (s->owned)
		munmap(s->owned, s->owned_len);
	s->owned = NULL;
}

/*
 * Queue what is left of frame f after hoff header and poff payload bytes
 * went out. A SEND/WRITE whose remainder is copied is done now; one whose
 * payload stays referenced is done when that segment drains.
 */
static int tcp_queue_frame(struct tcp_conn *c, const struct tcp_frame *f,
			   size_t hoff, size_t poff)
{
	size_t rest = f->len - poff;
	bool ref;

	if (hoff < TCP_HDR_LEN &&
	    tcp_ob_append(c, f->hdr + hoff, TCP_HDR_LEN - hoff))
		return -ENOMEM;
	if (!rest)
		goto done;
	/* no seq and no copy: a READ_RESP, referenced in its region */
	ref = !f->copy && (f->seq == TCP_NO_SEQ || rest > TCP_COPY_MAX ||
			   c->ob_tail - c->ob_head + rest > TCP_COPY_BUDGET);
	if (ref)
		return tcp_oq_ref(c, f->payload + poff, rest, f->mr, f->seq);
	if (tcp_ob_append(c, f->payload + poff, rest))
		return -ENOMEM;
done:
	if (f->seq != TCP_NO_SEQ)
		tcp_swr(c, f->seq)->done = true;
	return 0;
}

static void tcp_oseg_drained(struct tcp_conn *c, struct tcp_oseg *s)
{
	if (s->seq != TCP_NO_SEQ)
		tcp_swr(c, s->seq)->done = true;
	tcp_oseg_unown(s);
	c->oq_head = (c->oq_head + 1) % c->oq_cap;
	c->oq_count--;
}

/* Drop all queued output (connection failed or destroyed). */
void tcp_oq_drop(struct tcp_conn *c)
{
	while (c->oq_count) {
		struct tcp_oseg *s = tcp_oseg(c, 0);

		tcp_oseg_unown(s);
		c->oq_head = (c->oq_head + 1) % c->oq_cap;
		c->oq_count--;
	}
	c->oq_head = 0;
	c->rd_queued = 0;
	tcp_ob_release(c);
}

/*
 * Write queued output until it is gone or the socket is full. Marks WRs
 * done as their bytes leave; the caller runs tcp_sq_emit(). 0 or -errno
 * (socket error: the caller fails the connection).
 */
int tcp_flush(struct tcp_conn *c)
{
	if (c->tls_user && !c->oq_count) {
		/* records made earlier still wait for the socket */
		int ret = tcp_tls_out_flush(c->tls);

		if (ret && ret != -EAGAIN)
			return ret;
	}
	while (c->oq_count) {
		struct iovec iov[TCP_IOV];
		struct msghdr msg = {.msg_iov = iov};
		size_t off = c->ob_head, total = 0;
		uint32_t i, n = MIN(c->oq_count, (uint32_t)TCP_IOV);
		ssize_t r;

		for (i = 0; i < n; i++) {
			struct tcp_oseg *s = tcp_oseg(c, i);

			if (s->ptr) {
				iov[i].iov_base = (void *)s->ptr;
			} else {
				iov[i].iov_base = c->ob + off;
				off += s->len;
			}
			iov[i].iov_len = s->len;
			total += s->len;
		}
		msg.msg_iovlen = n;
		r = tcp_sock_sendmsg(c, &msg);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			log_debug("%s: sendmsg: %s", c->peer, strerror(errno));
			return -errno;
		}
		for (size_t left = (size_t)r; left;) {
			struct tcp_oseg *s = tcp_oseg(c, 0);
			size_t k = MIN(left, s->len);

			if (s->ptr)
				s->ptr += k;
			else
				c->ob_head += k;
			if (s->rd)
				c->rd_queued -= k;
			s->len -= k;
			left -= k;
			if (!s->len)
				tcp_oseg_drained(c, s);
		}
		if ((size_t)r < total)
			break; /* socket full */
	}
	if (!c->oq_count)
		tcp_ob_release(c);
	tcp_set_epollout(c, tcp_out_queued(c));
	return 0;
}

/*
 * Send frames in order: straight from their buffers with one sendmsg()
 * when nothing is queued, queueing the unsent rest. 0 or -errno (socket
 * error or out of memory: the caller fails the connection).
 */
int tcp_send_frames(struct tcp_conn *c, struct tcp_frame *f, int nf)
{
	struct iovec iov[2 * TCP_BATCH];
	struct msghdr msg = {.msg_iov = iov};
	size_t sent = 0;
	ssize_t r;
	int i, n = 0;

	if (c->oq_count) {
		for (i = 0; i < nf; i++)
			if (tcp_queue_frame(c, &f[i], 0, 0))
				return -ENOMEM;
		return tcp_flush(c);
	}
	for (i = 0; i < nf; i++) {
		iov[n].iov_base = f[i].hdr;
		iov[n++].iov_len = TCP_HDR_LEN;
		if (f[i].len) {
			iov[n].iov_base = (void *)f[i].payload;
			iov[n++].iov_len = f[i].len;
		}
	}
	msg.msg_iovlen = (size_t)n;
	do {
		r = tcp_sock_sendmsg(c, &msg);
	} while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			log_debug("%s: sendmsg: %s", c->peer, strerror(errno));
			return -errno;
		}
		r = 0;
	}
	sent = (size_t)r;
	for (i = 0; i < nf; i++) {
		size_t hoff = MIN(sent, (size_t)TCP_HDR_LEN), poff;

		sent -= hoff;
		poff = MIN(sent, (size_t)f[i].len);
		sent -= poff;
		if (hoff == TCP_HDR_LEN && poff == f[i].len) {
			if (f[i].seq != TCP_NO_SEQ)
				tcp_swr(c, f[i].seq)->done = true;
			continue;
		}
		if (tcp_queue_frame(c, &f[i], hoff, poff))
			return -ENOMEM;
	}
	tcp_set_epollout(c, tcp_out_queued(c));
	return 0;
}

/* ---- connection failure ------------------------------------------------ */

/* Best effort: ERROR can only follow complete frames. */
static void tcp_send_error(struct tcp_conn *c, uint8_t status, uint64_t id)
{
	uint8_t hdr[TCP_HDR_LEN];
	struct iovec iov = {.iov_base = hdr, .iov_len = sizeof(hdr)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (tcp_out_queued(c) && tcp_flush(c) < 0)
		return;
	if (tcp_out_queued(c)) {
		log_debug("%s: output backed up, ERROR frame not sent",
			  c->peer);
		return;
	}
	tcp_hdr_encode(hdr, TCP_F_ERROR, 0, id, 0, 0, status);
	if (tcp_sock_sendmsg(c, &msg) != (ssize_t)sizeof(hdr) ||
	    tcp_out_queued(c))
		log_debug("%s: send(ERROR) incomplete", c->peer);
}

void tcp_why(struct tcp_conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0] || c->state == XP_CONN_ERROR)
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

const char *tcp_conn_error(struct xp_conn *xc)
{
	struct tcp_conn *c = to_tcp(xc);

	return c->why[0] ? c->why : NULL;
}

/*
 * Move to XP_CONN_ERROR: statuses pinned on WRs stay, everything else
 * outstanding flushes. peer_status != 0: we found the peer's request
 * peer_id bad, tell it with an ERROR frame. Idempotent.
 */
void tcp_fail(struct tcp_conn *c, uint8_t peer_status, uint64_t peer_id)
{
	if (c->state == XP_CONN_ERROR)
		return;
	if (peer_status)
		tcp_why(c, "refused a request of the peer's (%s)",
			xp_wc_status_str((enum xp_wc_status)peer_status));
	else
		tcp_why(c, "failed (a local error; see the log)");
	if (peer_status && c->state == XP_CONN_CONNECTED)
		tcp_send_error(c, peer_status, peer_id);
	c->state = XP_CONN_ERROR;

	tcp_sq_emit(c); /* what finished before the failure */
	for (; c->sq_emit != c->sq_tail; c->sq_emit++) {
		struct tcp_swr *s = tcp_swr(c, c->sq_emit);

		tcp_swr_complete(c, c->sq_emit,
				 s->status ? s->status : XP_WC_FLUSH_ERR);
	}
	for (; c->rq_cons != c->rq_tail; c->rq_cons++) {
		struct tcp_rwr *r = tcp_rwr(c, c->rq_cons);

		tcp_cq_push(c, true, c->rq_cons, r->wr_id,
			    r->status ? r->status : XP_WC_FLUSH_ERR, XP_WC_RECV,
			    0);
	}
	c->sq_start = c->sq_tail;
	c->reads_out = 0;
	tcp_oq_drop(c);
	c->rx.in_payload = false;
	c->s_head = c->s_tail = 0;
	/* FIN after anything already in the kernel (ERROR included). */
	shutdown(c->sock, SHUT_WR);
	/*
	 * The flushes just queued must reach the owner even if it sleeps
	 * on the fd next: a write-shut socket is always EPOLLOUT-ready, so
	 * it stays in the set, for output only, until they are delivered
	 * (tcp_cq_drain() takes it out).
	 */
	if (!c->cq_count) {
		tcp_epoll_del(c);
	} else if (c->in_epoll) {
		struct epoll_event ev = {.events = EPOLLOUT,
					 .data.u64 = (uintptr_t)c};

		if (epoll_ctl(c->g->base.epfd, EPOLL_CTL_MOD, c->sock, &ev) < 0)
			log_err("%s: epoll_ctl(MOD): %s", c->peer,
				strerror(errno));
		c->epollout = true;
	}
}

/* The socket leaves the group's epoll set (failed and drained, destroyed). */
void tcp_epoll_del(struct tcp_conn *c)
{
	if (!c->in_epoll)
		return;
	if (epoll_ctl(c->g->base.epfd, EPOLL_CTL_DEL, c->sock, NULL) < 0)
		log_err("%s: epoll_ctl(DEL): %s", c->peer, strerror(errno));
	c->in_epoll = false;
	c->epollout = false;
}

/* Socket error or EOF: an RDMA READ whose response was arriving is FATAL. */
void tcp_fail_io(struct tcp_conn *c, int err)
{
	if (c->state == XP_CONN_ERROR)
		return;
	if (err == -EBADMSG && c->tls)
		/* kTLS and GnuTLS alike: a record's tag did not verify */
		log_ratelimited(
		    LOG_ERR,
		    "%s: connection failed: a TLS record failed its integrity check (data altered on the way)",
		    c->peer);
	else if (err)
		log_ratelimited(LOG_WARN, "%s: connection failed: %s", c->peer,
				strerror(-err));
	else
		log_debug("%s: peer closed the connection", c->peer);
	if (err)
		tcp_why(c, "connection failed: %s",
			err == -EBADMSG && c->tls ? "a TLS record failed its "
						    "integrity check"
						  : strerror(-err));
	else
		tcp_why(c, "the peer closed the connection");
	if (c->rx.in_payload && c->rx.hdr.type == TCP_F_READ_RESP)
		tcp_swr(c, c->rx.hdr.id)->status = XP_WC_FATAL;
	tcp_fail(c, 0, 0);
}

/* A malformed or unexpected frame: the stream cannot be trusted further. */
static void tcp_fail_proto(struct tcp_conn *c, const struct tcp_hdr *h,
			   const char *why)
{
	log_ratelimited(LOG_WARN,
			"%s: protocol error: %s (frame type %u, len %u, "
			"id %llu)",
			c->peer, why, h->type, h->len,
			(unsigned long long)h->id);
	tcp_why(c, "protocol error: %s", why);
	tcp_fail(c, 0, 0); /* no ERROR: its id could not be trusted */
}

/* ---- input ------------------------------------------------------------- */

static void tcp_rx_payload(struct tcp_conn *c, char *dst, struct xp_mr *mr)
{
	if (c->rx.hdr.len >= TCP_LARGE_PAYLOAD)
		c->rx_large = TCP_LARGE_DECAY;
	else if (c->rx_large)
		c->rx_large--;
	c->rx.in_payload = true;
	c->rx.dst = dst;
	c->rx.mr = mr;
	c->rx.kidx = 0;
	c->rx.left = c->rx.hdr.len;
}

/* Queue WRITE_ACK for a placed WRITE; poll() flushes it with the rest. */
static void tcp_queue_write_ack(struct tcp_conn *c, const struct tcp_hdr *h)
{
	struct tcp_frame f = {.seq = TCP_NO_SEQ};

	if (c->oq_count >= TCP_OQ_LIMIT ||
	    c->ob_tail - c->ob_head >= TCP_OB_LIMIT) {
		tcp_fail_proto(c, h, "peer does not read its WRITE acks");
		return;
	}
	tcp_hdr_encode(f.hdr, TCP_F_WRITE_ACK, 0, h->id, 0, 0, 0);
	if (tcp_queue_frame(c, &f, 0, 0))
		tcp_fail_io(c, -ENOMEM);
}

/* The payload of the current frame has been placed. */
void tcp_rx_finish(struct tcp_conn *c)
{
	const struct tcp_hdr *h = &c->rx.hdr;

	c->rx.in_payload = false;
	switch (h->type) {
	case TCP_F_SEND:
	case TCP_F_SEND_INV: {
		struct tcp_rwr *r = tcp_rwr(c, c->rq_cons);
		struct xp_wc *wc;

		wc = tcp_cq_push(c, true, c->rq_cons, r->wr_id, XP_WC_SUCCESS,
				 XP_WC_RECV, h->len);
		if (wc && h->type == TCP_F_SEND_INV) {
			wc->flags = XP_WC_F_WITH_INV;
			wc->invalidated_rkey = h->rkey;
		}
		c->rq_cons++;
		break;
	}
	case TCP_F_READ_RESP:
		tcp_swr(c, h->id)->done = true;
		c->reads_out--;
		if (!c->reads_out && c->sq_start != c->sq_tail)
			tcp_sq_start(c); /* a fenced request waited */
		else
			tcp_sq_emit(c);
		break;
	case TCP_F_WRITE:
		/* placed (unless discarded); nothing to report on this side */
		if (h->flags & TCP_FL_ACK)
			tcp_queue_write_ack(c, h);
		break;
	default:
		break;
	}
}

/* Serve a READ_REQ: queue READ_RESP with the region's bytes, by reference. */
static void tcp_rx_read_req(struct tcp_conn *c, const struct tcp_hdr *h)
{
	struct tcp_frame f = {.seq = TCP_NO_SEQ, .len = h->len};
	struct xp_mr *mr = NULL;
	uint32_t kidx;

	/* zero-length requests are checked too (key and right) */
	f.payload = tcp_mr_check(c, h, XP_ACCESS_REMOTE_READ, &mr, &kidx);
	if (!f.payload) {
		tcp_fail(c, XP_WC_REM_ACCESS_ERR, h->id);
		return;
	}
	if (c->oq_count >= TCP_OQ_LIMIT ||
	    c->ob_tail - c->ob_head >= TCP_OB_LIMIT) {
		tcp_fail_proto(c, h, "peer does not read its READ responses");
		return;
	}
	/*
	 * What a peer that does not read may make us hold: a legitimate
	 * one has at most its outstanding READs unanswered.
	 */
	if (h->len > c->rd_max - c->rd_queued) {
		log_ratelimited(LOG_WARN,
				"%s: peer leaves %llu bytes of READ responses "
				"unread and asks for %u more, over its limit "
				"of %llu; failing the connection",
				c->peer, (unsigned long long)c->rd_queued,
				h->len, (unsigned long long)c->rd_max);
		tcp_fail(c, 0, 0);
		return;
	}
	f.mr = mr;
	tcp_hdr_encode(f.hdr, TCP_F_READ_RESP, h->len, h->id, 0, 0, 0);
	/* queued, not written: poll() flushes all responses in one go */
	if (tcp_queue_frame(c, &f, 0, 0))
		tcp_fail_io(c, -ENOMEM);
}

/*
 * A SEND (or SEND_WITH_INV) header: invalidate its window, then the
 * receive it lands in. NULL when the connection failed (the window was
 * not ours, no receive posted, or one too small).
 */
static struct tcp_rwr *tcp_rx_recv_wr(struct tcp_conn *c,
				      const struct tcp_hdr *h)
{
	struct tcp_rwr *r;

	/* the window goes before the receive completes */
	if (h->type == TCP_F_SEND_INV && tcp_mw_inv(c, h->rkey)) {
		log_ratelimited(LOG_WARN,
				"%s: SEND_WITH_INV refused: 0x%x is not a "
				"window bound on this connection",
				c->peer, h->rkey);
		tcp_fail(c, XP_WC_REM_ACCESS_ERR, h->id);
		return NULL;
	}
	if (c->rq_cons == c->rq_tail) {
		log_ratelimited(LOG_WARN,
				"%s: SEND of %u bytes with no receive posted "
				"(RNR)",
				c->peer, h->len);
		tcp_fail(c, XP_WC_RNR_ERR, h->id);
		return NULL;
	}
	r = tcp_rwr(c, c->rq_cons);
	if (h->len > r->len) {
		log_ratelimited(LOG_WARN,
				"%s: SEND of %u bytes into a %u-byte receive",
				c->peer, h->len, r->len);
		r->status = XP_WC_LOC_ERR;
		tcp_fail(c, XP_WC_FATAL, h->id);
		return NULL;
	}
	return r;
}

/* A complete header has arrived: decide where its payload goes. */
static void tcp_rx_header(struct tcp_conn *c, const uint8_t *p)
{
	struct tcp_hdr *h = &c->rx.hdr;
	struct xp_mr *mr = NULL;
	struct tcp_swr *s;
	struct tcp_rwr *r;
	uint32_t kidx = 0;
	char *dst;

	if (tcp_hdr_decode(p, h)) {
		tcp_fail_proto(c, h, "bad frame header");
		return;
	}
	switch (h->type) {
	case TCP_F_SEND_INV:
	case TCP_F_SEND:
		r = tcp_rx_recv_wr(c, h);
		if (!r)
			return;
		tcp_rx_payload(c, r->addr, r->mr);
		break;
	case TCP_F_WRITE:
		/* zero-length requests are checked too (key and right) */
		dst = tcp_mr_check(c, h, XP_ACCESS_REMOTE_WRITE, &mr, &kidx);
		if (!dst) {
			tcp_fail(c, XP_WC_REM_ACCESS_ERR, h->id);
			return;
		}
		tcp_mw_count(c, kidx, h);
		tcp_rx_payload(c, dst, mr);
		c->rx.kidx = kidx;
		break;
	case TCP_F_READ_REQ:
		tcp_rx_read_req(c, h);
		return;
	case TCP_F_READ_RESP:
		if (h->id < c->sq_emit || h->id >= c->sq_start) {
			tcp_fail_proto(c, h, "READ response for no request");
			return;
		}
		s = tcp_swr(c, h->id);
		if (s->opcode != XP_WR_RDMA_READ || s->done ||
		    s->len != h->len) {
			tcp_fail_proto(c, h, "READ response does not match");
			return;
		}
		tcp_rx_payload(c, s->dst, s->mr);
		break;
	case TCP_F_WRITE_ACK:
		if (h->id < c->sq_emit || h->id >= c->sq_start) {
			tcp_fail_proto(c, h, "WRITE ack for no request");
			return;
		}
		s = tcp_swr(c, h->id);
		if (s->opcode != XP_WR_RDMA_WRITE || !s->signaled || s->done) {
			tcp_fail_proto(c, h, "WRITE ack does not match");
			return;
		}
		s->done = true;
		tcp_sq_emit(c);
		return;
	case TCP_F_ERROR:
		if (h->aux != XP_WC_REM_ACCESS_ERR && h->aux != XP_WC_RNR_ERR)
			h->aux = XP_WC_FATAL;
		log_warn("%s: peer failed request %llu: %s", c->peer,
			 (unsigned long long)h->id,
			 xp_wc_status_str((enum xp_wc_status)h->aux));
		tcp_why(c, "the peer failed request %llu: %s",
			(unsigned long long)h->id,
			xp_wc_status_str((enum xp_wc_status)h->aux));
		/* pin the error unless that WR already completed */
		if (h->id >= c->sq_emit && h->id < c->sq_start)
			tcp_swr(c, h->id)->status = (uint8_t)h->aux;
		tcp_fail(c, 0, 0);
		return;
	default:
		tcp_fail_proto(c, h, "handshake frame on a live connection");
		return;
	}
	if (!h->len)
		tcp_rx_finish(c);
}

/*
 * Parse what is staged in c->sbuf: payload to its destination, headers
 * to tcp_rx_header(). False when the run must stop (the connection
 * failed, or cq_limit completions are waiting to be reaped).
 */
static inline bool tcp_rx_parse(struct tcp_conn *c, uint32_t cq_limit)
{
	while (c->s_head < c->s_tail) {
		size_t avail = c->s_tail - c->s_head;

		if (c->cq_count >= cq_limit)
			return false;
		if (c->rx.in_payload) {
			size_t k = MIN(avail, (size_t)c->rx.left);

			if (c->rx.dst) {
				memcpy(c->rx.dst, c->sbuf + c->s_head, k);
				c->rx.dst += k;
			}
			c->s_head += k;
			c->rx.left -= (uint32_t)k;
			if (!c->rx.left)
				tcp_rx_finish(c);
			continue;
		}
		if (avail < TCP_HDR_LEN)
			break;
		c->s_head += TCP_HDR_LEN;
		tcp_rx_header(c, (uint8_t *)c->sbuf + c->s_head - TCP_HDR_LEN);
		if (c->state != XP_CONN_CONNECTED)
			return false;
	}
	if (c->s_head == c->s_tail)
		c->s_head = c->s_tail = 0;
	return true;
}

/*
 * Where the next read goes: straight to the destination of a payload
 * that nothing staged precedes (direct, what follows it staged), else
 * the staging buffer's free end (its unparsed bytes moved to the front).
 * Returns the iovec count.
 */
static inline int tcp_rx_iov(struct tcp_conn *c, struct iovec iov[2],
			     bool direct)
{
	if (direct) {
		iov[0].iov_base = c->rx.dst;
		iov[0].iov_len = c->rx.left;
		iov[1].iov_base = c->sbuf;
		iov[1].iov_len = c->rx_large ? TCP_SMALL_READ : TCP_SBUF_SIZE;
		return 2;
	}
	if (c->s_head) {
		memmove(c->sbuf, c->sbuf + c->s_head, c->s_tail - c->s_head);
		c->s_tail -= c->s_head;
		c->s_head = 0;
	}
	iov[0].iov_base = c->sbuf + c->s_tail;
	iov[0].iov_len = TCP_SBUF_SIZE - c->s_tail;
	if (c->rx_large)
		iov[0].iov_len = MIN(iov[0].iov_len, (size_t)TCP_SMALL_READ);
	return 1;
}

/*
 * Read and parse until the socket is drained, the byte budget is spent or
 * cq_limit completions are queued. Everything read is parsed before
 * returning unless cq_limit stopped it (then poll() returns > 0).
 */
static void tcp_rx_run(struct tcp_conn *c, uint32_t cq_limit)
{
	size_t budget = TCP_RX_BUDGET;
	/* found empty just before: parse only (what GnuTLS holds aside) */
	bool drained =
	    c->rx_skip && !(c->tls_user && tcp_tls_rx_pending(c->tls));

	c->rx_skip = false;

	for (;;) {
		struct iovec iov[2];
		size_t want;
		ssize_t r;
		int n;
		bool direct;

		/* a finished frame may have failed it (a send, a limit) */
		if (c->state != XP_CONN_CONNECTED)
			return;
		if (!tcp_rx_parse(c, cq_limit))
			return;
		if (drained || !budget || c->cq_count >= cq_limit)
			return;

		direct =
		    c->rx.in_payload && c->rx.dst && c->s_head == c->s_tail;
		n = tcp_rx_iov(c, iov, direct);
		want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
		r = tcp_sock_readv(c, iov, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->rx_skip = c->rx_arm_skip = true;
				return;
			}
			tcp_fail_io(c, -errno);
			return;
		}
		if (r == 0) {
			tcp_fail_io(c, 0);
			return;
		}
		budget -= MIN((size_t)r, budget);
		/* a short read almost always means the socket is empty */
		drained = (size_t)r < want;
		c->rx_skip = c->rx_arm_skip = drained;
		if (direct) {
			size_t k = MIN((size_t)r, (size_t)c->rx.left);

			c->rx.dst += k;
			c->rx.left -= (uint32_t)k;
			c->s_tail = (size_t)r - k;
			if (!c->rx.left)
				tcp_rx_finish(c);
		} else {
			c->s_tail += (size_t)r;
		}
	}
}

/*
 * The staging buffer is the group's while the connection parses input and
 * stays with the connection only while it holds unparsed bytes.
 */
void tcp_rx_progress(struct tcp_conn *c, uint32_t cq_limit)
{
	if (!c->sbuf && tcp_buf_get(&c->g->sbuf, &c->sbuf, TCP_SBUF_SIZE)) {
		log_err("%s: malloc(staging buffer): %s", c->peer,
			strerror(ENOMEM));
		tcp_fail_io(c, -ENOMEM);
		return;
	}
	tcp_rx_run(c, cq_limit);
	if (c->s_head == c->s_tail) {
		c->s_head = c->s_tail = 0;
		tcp_buf_put(&c->g->sbuf, &c->sbuf, true);
	}
}
