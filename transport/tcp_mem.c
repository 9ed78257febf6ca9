/* SPDX-License-Identifier: MIT */
/*
 * tcp_mem.c - tcp transport: regions, windows and the key checks
 * (see tcp_internal.h for the frame format and the progress engine).
 *
 * A group's key table does what an HCA's key tables do. An rkey is
 * index << 8 | key byte; lookup is one array access and a compare of the
 * whole key, so binding and invalidating a window is a store, no system
 * call, and a window's old key (an older key byte) finds nothing. A
 * region's entry grants its remote rights to every connection of the
 * group; a window's entry grants the bind's rights over the bind's range
 * to the one connection it is bound on, and nothing once invalidated.
 */
#include "tcp_internal.h"

static void tcp_mw_invalidate(struct tcp_group *g, struct tcp_mw *w);

/* ---- key table ---------------------------------------------------------- */

/* A free entry's index, the table grown as needed. 0 when full. */
static uint32_t tcp_key_alloc(struct tcp_group *g)
{
	uint32_t idx;

	if (g->free_head) {
		idx = g->free_head;
		g->free_head = g->keys[idx].next_free;
		return idx;
	}
	if (g->nkeys == g->kcap) {
		uint32_t cap = g->kcap ? g->kcap * 2 : TCP_KEY_INIT;
		struct tcp_key *n;

		if (g->kcap >= TCP_KEY_MAX)
			return 0;
		n = realloc(g->keys, sizeof(*n) * cap);
		if (!n)
			return 0;
		memset(n + g->kcap, 0, sizeof(*n) * (cap - g->kcap));
		g->keys = n;
		g->kcap = cap;
		if (!g->nkeys)
			g->nkeys = 1; /* index 0 is never handed out */
	}
	return g->nkeys++;
}

static void tcp_key_free(struct tcp_group *g, uint32_t idx)
{
	struct tcp_key *k = &g->keys[idx];

	/* keep the key byte: the next user of the index steps past it */
	*k = (struct tcp_key){.key = k->key, .next_free = g->free_head};
	g->free_head = idx;
}

/* A fresh key for index idx, never the one it had last. */
static uint32_t tcp_key_make(struct tcp_group *g, uint32_t idx)
{
	uint8_t b;

	random_bytes(&b, sizeof(b));
	if (b == (uint8_t)g->keys[idx].key)
		b++;
	return idx << 8 | b;
}

static struct tcp_key *tcp_key_find(struct tcp_group *g, uint32_t rkey)
{
	uint32_t idx = rkey >> 8;

	if (!idx || idx >= g->nkeys || g->keys[idx].key != rkey ||
	    g->keys[idx].kind == TCP_KEY_FREE)
		return NULL;
	return &g->keys[idx];
}

/*
 * The check an HCA makes on an incoming one-sided request, zero-length
 * ones included: the key is a region of the group or a window bound on
 * this connection, [addr, addr + len) lies inside what it grants (no
 * overflow), and it grants the access. Returns the destination/source or
 * NULL (logged, rate-limited); *mrp the region, *kidx the key's index.
 */
char *tcp_mr_check(struct tcp_conn *c, const struct tcp_hdr *h, int access,
		   struct xp_mr **mrp, uint32_t *kidx)
{
	struct tcp_key *k = tcp_key_find(c->g, h->rkey);
	const char *what = access == XP_ACCESS_REMOTE_READ ? "read" : "write";
	uint64_t base, off;

	if (!k || (k->kind == TCP_KEY_MW && k->conn != c)) {
		log_ratelimited(LOG_WARN,
				"%s: remote %s refused: rkey 0x%x is not valid "
				"on this connection",
				c->peer, what, h->rkey);
		return NULL;
	}
	if (!(k->access & access)) {
		log_ratelimited(LOG_WARN,
				"%s: remote %s refused: rkey 0x%x lacks the "
				"access right",
				c->peer, what, h->rkey);
		return NULL;
	}
	base = (uint64_t)(uintptr_t)k->addr;
	off = h->addr - base;
	if (h->addr < base || off > k->len || h->len > k->len - off) {
		log_ratelimited(LOG_WARN,
				"%s: remote %s refused: [0x%llx, +%u) outside "
				"rkey 0x%x [%p, +%llu)",
				c->peer, what, (unsigned long long)h->addr,
				h->len, h->rkey, (void *)k->addr,
				(unsigned long long)k->len);
		return NULL;
	}
	*mrp = &k->mr->mr;
	*kidx = h->rkey >> 8;
	return k->addr + off;
}

/* ---- regions ----------------------------------------------------------- */

int tcp_reg_mr(struct xp_group *xg, void *addr, size_t len, int access,
	       struct xp_mr **out)
{
	struct tcp_group *g = to_tcp_group(xg);
	const int all = XP_ACCESS_LOCAL_WRITE | XP_ACCESS_REMOTE_READ |
			XP_ACCESS_REMOTE_WRITE | XP_ACCESS_MW_BIND;
	struct tcp_key *k;
	struct tcp_mr *m;
	uint32_t idx;

	/* as ibv_reg_mr: remote write needs local write */
	if (!addr || !len || (access & ~all) ||
	    ((access & XP_ACCESS_REMOTE_WRITE) &&
	     !(access & XP_ACCESS_LOCAL_WRITE)) ||
	    (uintptr_t)addr + len < (uintptr_t)addr) {
		log_err("tcp: reg_mr(%p, %zu, 0x%x): invalid argument", addr,
			len, access);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		log_err("tcp: reg_mr: calloc: %s", strerror(errno));
		return -ENOMEM;
	}
	idx = tcp_key_alloc(g);
	if (!idx) {
		log_err("tcp: reg_mr: key table full or out of memory");
		free(m);
		return -ENOMEM;
	}
	k = &g->keys[idx];
	k->key = tcp_key_make(g, idx);
	k->kind = TCP_KEY_MR;
	k->access = (uint8_t)(access &
			      (XP_ACCESS_REMOTE_READ | XP_ACCESS_REMOTE_WRITE));
	k->addr = addr;
	k->len = len;
	k->mr = m;
	m->idx = idx;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = k->key;
	m->mr.rkey = k->key;
	m->mr.access = access;
	m->mr.group = xg;
	*out = &m->mr;
	return 0;
}

/*
 * Queued output still pointing into [lo, hi) of region mr (READ_RESP
 * payloads served before an invalidate or dereg, or a posted SEND/WRITE
 * the user deregistered early) is copied out so the peer gets the bytes
 * as they were when it asked, and the memory is free for reuse now.
 * Fails the connection when out of memory. READ_RESP bytes a peer can
 * make us copy are bounded by its rd_max (tcp_rx_read_req()).
 */
static void tcp_oq_copy_out(struct tcp_conn *c, struct xp_mr *mr,
			    const char *lo, const char *hi)
{
	for (uint32_t i = 0; i < c->oq_count; i++) {
		struct tcp_oseg *s = tcp_oseg(c, i);
		char *copy;

		if (s->mr != mr || !s->ptr || s->owned || s->ptr >= hi ||
		    s->ptr + s->len <= lo)
			continue;
		copy = tcp_copy_alloc(s->len);
		if (!copy) {
			log_err("%s: mmap(%zu) copying unsent bytes: %s",
				c->peer, s->len, strerror(errno));
			tcp_fail(c, 0, 0);
			return;
		}
		memcpy(copy, s->ptr, s->len);
		s->ptr = copy;
		s->owned = copy;
		s->owned_len = s->len;
		s->mr = NULL;
	}
}

/*
 * Posted receives, RDMA READ destinations and a payload being received
 * into the region are local work it is pulled from under: that
 * connection fails (as an HCA's protection fault would). A WRITE from the
 * peer landing in it is discarded from here on.
 */
static void tcp_mr_release(struct tcp_conn *c, struct xp_mr *mr)
{
	bool busy = false;
	uint64_t seq;

	tcp_oq_copy_out(c, mr, mr->addr, (char *)mr->addr + mr->length);
	if (c->state == XP_CONN_ERROR)
		return;
	if (c->rx.in_payload && c->rx.mr == mr) {
		if (c->rx.hdr.type == TCP_F_WRITE)
			c->rx.dst = NULL;
		else
			busy = true;
	}
	for (seq = c->rq_cons; seq != c->rq_tail; seq++)
		if (tcp_rwr(c, seq)->mr == mr)
			busy = true;
	for (seq = c->sq_emit; seq != c->sq_tail; seq++) {
		struct tcp_swr *s = tcp_swr(c, seq);

		if (s->mr == mr && !s->done &&
		    (s->opcode == XP_WR_RDMA_READ || seq >= c->sq_start))
			busy = true;
	}
	if (busy) {
		log_warn("%s: region %p deregistered under posted work; "
			 "failing the connection",
			 c->peer, mr->addr);
		tcp_fail(c, 0, 0);
	}
}

/* Windows bound on the region are invalidated with it. */
void tcp_dereg_mr(struct xp_mr *mr)
{
	struct tcp_mr *m = container_of(mr, struct tcp_mr, mr);
	struct tcp_group *g = to_tcp_group(mr->group);
	struct tcp_conn *c;

	for (c = g->conns; c; c = c->gnext)
		tcp_mr_release(c, mr);
	for (uint32_t i = 1; i < g->nkeys; i++)
		if (g->keys[i].kind == TCP_KEY_MW && g->keys[i].mr == m)
			tcp_mw_invalidate(g, g->keys[i].mw);
	tcp_key_free(g, m->idx);
	free(m);
}

/* A local sge: inside its region, registered on this connection's group. */
int tcp_sge_check(struct tcp_conn *c, const struct xp_sge *sge, int access)
{
	uintptr_t a = (uintptr_t)sge->addr, base;

	if (!sge->length)
		return 0;
	if (!sge->mr || sge->mr->group != &c->g->base ||
	    (sge->mr->access & access) != access)
		goto out_invalid;
	base = (uintptr_t)sge->mr->addr;
	if (a < base || a - base > sge->mr->length ||
	    sge->length > sge->mr->length - (a - base))
		goto out_invalid;
	return 0;

out_invalid:
	log_err("%s: sge %p+%u not inside a suitable region of this "
		"connection's group",
		c->peer, sge->addr, sge->length);
	return -EINVAL;
}

/* ---- windows ------------------------------------------------------------ */

int tcp_alloc_mw(struct xp_group *xg, struct xp_mw **out)
{
	struct tcp_group *g = to_tcp_group(xg);
	struct tcp_mw *w;
	uint32_t idx;

	w = calloc(1, sizeof(*w));
	if (!w) {
		log_err("tcp: alloc_mw: calloc: %s", strerror(errno));
		return -ENOMEM;
	}
	idx = tcp_key_alloc(g);
	if (!idx) {
		log_err("tcp: alloc_mw: key table full or out of memory");
		free(w);
		return -ENOMEM;
	}
	g->keys[idx].key = tcp_key_make(g, idx);
	g->keys[idx].kind = TCP_KEY_MW;
	g->keys[idx].mw = w;
	w->idx = idx;
	w->mw.rkey = g->keys[idx].key;
	w->mw.group = xg;
	*out = &w->mw;
	return 0;
}

/*
 * Grant nothing from now on. Output still referencing the range is copied
 * out and an incoming WRITE being placed through the window is discarded,
 * so the memory may be reused once this returns.
 */
static void tcp_mw_invalidate(struct tcp_group *g, struct tcp_mw *w)
{
	struct tcp_key *k = &g->keys[w->idx];
	struct tcp_conn *c = k->conn;

	if (!c)
		return;
	if (k->len)
		tcp_oq_copy_out(c, &k->mr->mr, k->addr, k->addr + k->len);
	if (c->rx.in_payload && c->rx.hdr.type == TCP_F_WRITE &&
	    c->rx.kidx == w->idx)
		c->rx.dst = NULL;
	if (w->cprev)
		w->cprev->cnext = w->cnext;
	else
		c->mws = w->cnext;
	if (w->cnext)
		w->cnext->cprev = w->cprev;
	w->cprev = w->cnext = NULL;
	k->conn = NULL;
	k->access = 0;
	k->addr = NULL;
	k->len = 0;
}

void tcp_dealloc_mw(struct xp_mw *mw)
{
	struct tcp_mw *w = container_of(mw, struct tcp_mw, mw);
	struct tcp_group *g = to_tcp_group(mw->group);

	tcp_mw_invalidate(g, w);
	tcp_key_free(g, w->idx);
	free(w);
}

/* Post-time checks of a BIND_MW request. 0 or -EINVAL (logged). */
int tcp_bind_check(struct tcp_conn *c, const struct xp_mw_bind *b)
{
	const struct xp_mr *mr = b->mr;
	uint64_t base;

	if (!b->mw || !mr || b->mw->group != &c->g->base ||
	    mr->group != &c->g->base)
		goto out_invalid;
	base = (uint64_t)(uintptr_t)mr->addr;
	if (!(mr->access & XP_ACCESS_MW_BIND) ||
	    (b->access & ~(XP_ACCESS_REMOTE_READ | XP_ACCESS_REMOTE_WRITE)) ||
	    ((b->access & XP_ACCESS_REMOTE_WRITE) &&
	     !(mr->access & XP_ACCESS_LOCAL_WRITE)) ||
	    b->addr < base || b->addr - base > mr->length ||
	    b->length > mr->length - (b->addr - base) ||
	    (b->rkey >> 8) != (b->mw->rkey >> 8))
		goto out_invalid;
	return 0;

out_invalid:
	log_err("%s: bind_mw: window, region, range, access or key invalid",
		c->peer);
	return -EINVAL;
}

/*
 * Execute a BIND_MW slot (in order, when the send queue reaches it). A
 * window still bound (type 2: it must be invalidated first) fails it.
 * 0 or -EINVAL.
 */
int tcp_mw_bind(struct tcp_conn *c, const struct tcp_swr *s)
{
	struct tcp_group *g = c->g;
	struct tcp_mw *w = s->mw;
	struct tcp_key *k = &g->keys[w->idx];
	/* live: dereg_mr() fails the connection under a posted bind */
	struct tcp_mr *m = container_of(s->mr, struct tcp_mr, mr);

	if (k->conn) {
		log_warn("%s: bind_mw: window 0x%x is still bound", c->peer,
			 k->key);
		return -EINVAL;
	}
	k->key = s->rkey;
	k->access = s->access;
	k->addr = (char *)(uintptr_t)s->raddr;
	k->len = s->blen;
	k->mr = m;
	k->conn = c;
	w->placed = 0;
	w->cnext = c->mws;
	w->cprev = NULL;
	if (c->mws)
		c->mws->cprev = w;
	c->mws = w;
	return 0;
}

/*
 * Invalidate rkey, a window bound on c (LOCAL_INV; the peer's
 * SEND_WITH_INV). 0, or -EINVAL when rkey is no such window.
 */
int tcp_mw_inv(struct tcp_conn *c, uint32_t rkey)
{
	struct tcp_key *k = tcp_key_find(c->g, rkey);

	if (!k || k->kind != TCP_KEY_MW || k->conn != c)
		return -EINVAL;
	tcp_mw_invalidate(c->g, k->mw);
	return 0;
}

/*
 * xp_ops.mw_inv_now: as LOCAL_INV, but at once. Every frame the peer sent
 * through the key before this is placed (frames are placed in order, on
 * this thread), one still arriving is discarded (tcp_mw_invalidate()).
 */
int tcp_mw_inv_now(struct xp_conn *xc, struct xp_mw *mw)
{
	struct tcp_conn *c = to_tcp(xc);

	if (mw->group != &c->g->base)
		return -EINVAL;
	return tcp_mw_inv(c, mw->rkey);
}

/*
 * A WRITE through key kidx was accepted (tcp_mr_check()): a window's
 * written prefix grows when the WRITE starts inside it (an initiator
 * writes a window in one WRITE, or in order; one that starts past the
 * prefix leaves a gap the prefix never crosses).
 */
void tcp_mw_count(struct tcp_conn *c, uint32_t kidx, const struct tcp_hdr *h)
{
	struct tcp_key *k = &c->g->keys[kidx];
	struct tcp_mw *w;
	uint64_t off;

	if (k->kind != TCP_KEY_MW)
		return;
	w = k->mw;
	off = h->addr - (uint64_t)(uintptr_t)k->addr;
	if (off <= w->placed && off + h->len > w->placed)
		w->placed = off + h->len;
}

int64_t tcp_mw_placed(const struct xp_mw *mw)
{
	const struct tcp_mw *w = container_of(mw, struct tcp_mw, mw);

	return (int64_t)w->placed;
}

/* Connection destroyed: its windows grant nothing any more. */
void tcp_conn_mws_drop(struct tcp_conn *c)
{
	while (c->mws)
		tcp_mw_invalidate(c->g, c->mws);
}

/* Group destroyed: free every region and window object left. */
void tcp_keys_free(struct tcp_group *g)
{
	for (uint32_t i = 1; i < g->nkeys; i++) {
		if (g->keys[i].kind == TCP_KEY_MR)
			free(g->keys[i].mr);
		else if (g->keys[i].kind == TCP_KEY_MW)
			free(g->keys[i].mw);
	}
	free(g->keys);
	g->keys = NULL;
	g->nkeys = g->kcap = g->free_head = 0;
}
