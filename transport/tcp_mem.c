/* SPDX-License-Identifier: MIT */
/*
 * tcp_mem.c - tcp transport: regions, windows and the key checks
 * (see tcp_internal.h for the frame format and the progress engine).
 */
#include "tcp_internal.h"

/* ---- memory regions ---------------------------------------------------- */

_Static_assert(TCP_MR_BUCKETS == 64, "tcp_mr_bucket() makes 6 bits");

static struct tcp_mr *tcp_mr_find(struct tcp_conn *c, uint32_t rkey)
{
	struct tcp_mr *m = c->mr_hash[tcp_mr_bucket(rkey)];

	while (m && m->mr.rkey != rkey)
		m = m->hnext;
	return m;
}

/*
 * The check an HCA makes on an incoming one-sided request: rkey known on
 * this connection, [addr, addr + len) inside the region (no overflow),
 * access right present. Returns the destination/source or NULL.
 */
char *tcp_mr_check(struct tcp_conn *c, const struct tcp_hdr *h,
			  int access, struct xp_mr **mrp)
{
	struct tcp_mr *m = tcp_mr_find(c, h->rkey);
	uint64_t base, off;

	if (!m) {
		log_warn("%s: remote access with unknown rkey 0x%x", c->peer,
			 h->rkey);
		return NULL;
	}
	if (!(m->mr.access & access)) {
		log_warn("%s: remote %s on rkey 0x%x without the access right",
			 c->peer,
			 access == XP_ACCESS_REMOTE_READ ? "read" : "write",
			 h->rkey);
		return NULL;
	}
	base = (uint64_t)(uintptr_t)m->mr.addr;
	off = h->addr - base;
	if (h->addr < base || off > m->mr.length ||
	    h->len > m->mr.length - off) {
		log_warn("%s: remote access [0x%llx, +%u) outside region "
			 "rkey 0x%x [%p, +%zu)",
			 c->peer, (unsigned long long)h->addr, h->len, h->rkey,
			 m->mr.addr, m->mr.length);
		return NULL;
	}
	*mrp = &m->mr;
	return (char *)m->mr.addr + off;
}

int tcp_reg_mr(struct xp_group *g, void *addr, size_t len, int access,
		      struct xp_mr **out)
{
	struct tcp_conn *c = grp_to_tcp(g);
	const int all = XP_ACCESS_LOCAL_WRITE | XP_ACCESS_REMOTE_READ |
			XP_ACCESS_REMOTE_WRITE;
	struct tcp_mr *m;
	uint32_t rkey;
	unsigned int b;

	/* as ibv_reg_mr: remote write needs local write */
	if (!addr || !len || (access & ~all) ||
	    ((access & XP_ACCESS_REMOTE_WRITE) &&
	     !(access & XP_ACCESS_LOCAL_WRITE)) ||
	    (uintptr_t)addr + len < (uintptr_t)addr) {
		log_err("%s: reg_mr(%p, %zu, 0x%x): invalid argument", c->peer,
			addr, len, access);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		log_err("%s: reg_mr: calloc: %s", c->peer, strerror(errno));
		return -ENOMEM;
	}
	do
		random_bytes(&rkey, sizeof(rkey));
	while (rkey == 0 || tcp_mr_find(c, rkey));
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = rkey;
	m->mr.rkey = rkey;
	m->mr.access = access;
	m->mr.group = g;
	b = tcp_mr_bucket(rkey);
	m->hnext = c->mr_hash[b];
	c->mr_hash[b] = m;
	*out = &m->mr;
	return 0;
}

static void tcp_mr_unlink(struct tcp_conn *c, struct tcp_mr *m)
{
	struct tcp_mr **pp = &c->mr_hash[tcp_mr_bucket(m->mr.rkey)];

	while (*pp && *pp != m)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = m->hnext;
}

/*
 * Unsent bytes still pointing into the region (READ_RESP payloads, or a
 * posted SEND/WRITE the user deregistered early) are copied out first so
 * the peer still gets them. Posted receives, RDMA READ destinations and a
 * payload being received into it are local work the region is pulled
 * from under: the connection fails first (as an HCA's protection fault
 * would). A WRITE from the peer landing in it is discarded from here on.
 */
void tcp_dereg_mr(struct xp_mr *mr)
{
	struct tcp_mr *m = container_of(mr, struct tcp_mr, mr);
	struct tcp_conn *c = grp_to_tcp(mr->group);
	bool busy = false;
	uint64_t seq;
	uint32_t i;

	for (i = 0; i < c->oq_count; i++) {
		struct tcp_oseg *s = tcp_oseg(c, i);
		char *copy;

		if (s->mr != mr || !s->ptr || s->owned)
			continue;
		copy = malloc(s->len);
		if (!copy) {
			log_err("%s: dereg_mr: malloc(%zu): %s", c->peer,
				s->len, strerror(errno));
			tcp_fail(c, 0, 0);
			break;
		}
		log_debug("%s: dereg_mr: copying %zu unsent bytes out of "
			  "region %p",
			  c->peer, s->len, mr->addr);
		memcpy(copy, s->ptr, s->len);
		s->ptr = copy;
		s->owned = copy;
		s->mr = NULL;
	}
	if (c->state != XP_CONN_ERROR) {
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

			if (s->opcode == XP_WR_RDMA_READ && !s->done &&
			    s->mr == mr)
				busy = true;
		}
		if (busy) {
			log_warn(
			    "%s: region %p deregistered under posted work; "
			    "failing the connection",
			    c->peer, mr->addr);
			tcp_fail(c, 0, 0);
		}
	}
	tcp_mr_unlink(c, m);
	free(m);
}

/* A local sge: inside its region, registered on this connection. */
int tcp_sge_check(struct tcp_conn *c, const struct xp_sge *sge,
			 int access)
{
	uintptr_t a = (uintptr_t)sge->addr, base;

	if (!sge->length)
		return 0;
	if (!sge->mr || sge->mr->group != &c->grp ||
	    (sge->mr->access & access) != access)
		goto out_invalid;
	base = (uintptr_t)sge->mr->addr;
	if (a < base || a - base > sge->mr->length ||
	    sge->length > sge->mr->length - (a - base))
		goto out_invalid;
	return 0;

out_invalid:
	log_err("%s: sge %p+%u not inside a suitable region of this "
		"connection",
		c->peer, sge->addr, sge->length);
	return -EINVAL;
}

