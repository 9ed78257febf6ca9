/* SPDX-License-Identifier: MIT */
/*
 * Connections of a worker: setup, login and authentication, teardown.
 * A connection's life:
 *
 *   main thread: worker_accept()  private data checked, admitted (limits),
 *                                 handed to the worker (its mailbox)
 *   worker:      tconn_new()      joined to the worker's poll group,
 *                                 message buffers registered, receives
 *                                 posted, transport accept
 *   worker:      TCONN_LOGIN      HELLO -> export lookup; when the host or
 *                                 export needs it, AUTH_CHALLENGE ->
 *                                 AUTH_RESPONSE verified -> AUTH_RESULT;
 *                                 only then windows allocated (and the
 *                                 volume window bound), LOGIN sent
 *                TCONN_LIVE       commands (io.c)
 *                TCONN_CLOSING    transport disconnected; wait for backend
 *                                 I/O on its slots to finish, then free
 */
#include "worker_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"

#include "backend.h"
#include "limits.h"
#include "login.h"
#include "target.h"

_Static_assert(RBLK_LOGIN_SIZE <= RBLK_MSG_MAX, "login fits its send buffer");
_Static_assert(RBLK_AUTH_CHALLENGE_SIZE <= AUTH_BUF_SIZE, "challenge fits");
_Static_assert(RBLK_AUTH_RESULT_SIZE <= AUTH_BUF_SIZE, "result fits");

/*
 * Sizes: at most qd commands are outstanding, and a READ_DONE or
 * WRITE_DATA per tag besides (it precedes the tag's next command), so
 * 2 * qd receives, plus two to absorb a KEEPALIVE racing a full queue.
 * The send queue holds at most two entries per tag (a bind or RDMA WRITE
 * + SEND) plus LOGIN and its volume bind. The initiator reads at most
 * one command's bytes (<= max_io) per tag from our windows at a time,
 * so on tcp that is all it may leave unread (issue 25: an initiator that
 * asks for a window's bytes again and again and never reads them made
 * the target copy each answer when the window went).
 */
void tconn_attr(uint16_t qd, uint32_t max_io, struct xp_conn_attr *attr)
{
	attr->max_recv_wr = 2u * qd + 2u;
	attr->max_send_wr = 2u * qd + 2u;
	attr->max_read_bytes = (uint64_t)qd * max_io;
}

static void tconn_free(struct tconn *c)
{
	limits_release(&c->worker->tgt->cfg, c->adm);
	xp_destroy(c->xc);
	/* the message region is on the worker's group, which outlives c */
	xp_dereg_mr(c->qp.msg_mr);
	if (c->exp)
		export_put(c->exp); /* after the last backend I/O on it */
	qp_fini(&c->qp);
	free(c->mw);
	free(c->reqs);
	free(c);
}

static bool recv_is_out(const struct tconn *c, unsigned int i)
{
	return c->recv_out[i / 64] & (1ull << (i % 64));
}

static void recv_mark(struct tconn *c, unsigned int i, bool out)
{
	if (out)
		c->recv_out[i / 64] |= 1ull << (i % 64);
	else
		c->recv_out[i / 64] &= ~(1ull << (i % 64));
}

struct tconn *tconn_new(struct worker *w, struct wgroup *wg, struct xp_conn *xc,
			uint16_t qd, struct lim_conn *lim)
{
	struct xp_conn_attr attr;
	struct tconn *c;
	int ret;

	tconn_attr(qd, w->tgt->cfg.max_io, &attr);
	/* struct iostats (in c->stats) is cache-line aligned: calloc is not */
	if (posix_memalign((void **)&c, _Alignof(struct tconn), sizeof(*c))) {
		c = NULL;
		goto out_reject;
	}
	memset(c, 0, sizeof(*c));
	c->xc = xc;
	xc->user = c;
	c->worker = w;
	c->wg = wg;
	c->adm = lim; /* worker_accept() admitted it; ours now */
	c->id = atomic_fetch_add(&w->tgt->next_conn_id, 1);
	c->cm_qd = qd;
	/* transports sanitize what they print; the table gets it so too */
	str_sanitize(c->peer, sizeof(c->peer), xp_peer_name(xc),
		     sizeof(c->peer));
	xp_conn_tls(xc, &c->tls);
	if (c->tls.mode != XP_TLS_OFF)
		log_info("conn %llu (%s): TLS 1.3 by %s, records in %s",
			 (unsigned long long)c->id, c->peer,
			 c->tls.psk ? "PSK" : "certificate",
			 c->tls.mode == XP_TLS_KTLS ? "the kernel"
						    : "user space");
	/*
	 * Receives hold a command with the most in-capsule data a login of
	 * this depth may be granted (HELLO has not come yet). The last send
	 * buffer (LOGIN, DISCOVER_REPLY) is a full message; the AUTH_*
	 * messages have their own after it.
	 */
	c->inline_cap = login_inline_cap(&w->tgt->cfg, attr.max_recv_wr,
					 wg->ops->reg_pins_memory);
	if (qp_init(&c->qp, xc, &attr, RBLK_CMD_SIZE + c->inline_cap,
		    (size_t)qd * RESP_BUF_SIZE + RBLK_MSG_MAX + AUTH_BUF_SIZE))
		goto out_reject;
	for (unsigned int i = 0; i < c->qp.nr_recv; i++) /* qp_init posted */
		recv_mark(c, i, true);
	c->auth_buf = (char *)send_buf(c, qd) + RBLK_MSG_MAX;
	c->state = TCONN_LOGIN;
	c->accepted_ms = now_ms();
	c->login_deadline_ms = c->accepted_ms + LOGIN_TIMEOUT_MS;
	ret = xp_accept(xc, NULL, 0);
	if (ret) {
		log_warn("conn %llu (%s): accept failed: %s",
			 (unsigned long long)c->id, c->peer, strerror(-ret));
		tconn_free(c);
		return NULL;
	}
	log_info("conn %llu: accepted %s, queue depth %u",
		 (unsigned long long)c->id, c->peer, qd);
	return c;

out_reject:
	/* reject() destroys xc before its memory is freed */
	{
		char rej[RBLK_CM_REJ_SIZE];
		size_t n = rblk_cm_rej_encode(rej, RBLK_S_NO_RESOURCES);

		log_warn("rejecting connection from %s: out of resources",
			 xp_peer_name(xc));
		limits_release(&w->tgt->cfg, lim);
		xp_reject(xc, rej, n);
	}
	if (c) {
		qp_fini(&c->qp);
		free(c);
	}
	return NULL;
}

bool tconn_login_expired(const struct tconn *c, uint64_t now)
{
	if (c->state != TCONN_LOGIN)
		return false;
	return now > c->login_deadline_ms ||
	       (limits_pressure() && now > c->accepted_ms + LOGIN_PRESSURE_MS);
}

/* ---- teardown --------------------------------------------------------------
 */

void tconn_fail(struct tconn *c, const char *why)
{
	if (c->state == TCONN_CLOSING)
		return;
	if (why) {
		log_warn("conn %llu (%s): %s; disconnecting",
			 (unsigned long long)c->id, c->peer, why);
	} else {
		/* the transport's word on what ended it, where it keeps one */
		const char *e = xp_conn_error(c->xc);

		log_info("conn %llu (%s): disconnected%s%s%s",
			 (unsigned long long)c->id, c->peer, e ? " (" : "",
			 e ? e : "", e ? ")" : "");
	}
	if (c->state == TCONN_LIVE)
		atomic_fetch_sub(&c->exp->sessions, 1);
	pthread_mutex_lock(&c->worker->conns_lock);
	c->state = TCONN_CLOSING;
	c->closing_ms = now_ms();
	pthread_mutex_unlock(&c->worker->conns_lock);
	c->wait_head = c->wait_tail = NULL;
	slot_wait_drop(c->worker, c);
	qos_wait_drop(c->worker, c);
	/* the QP goes to error: no key of it works any more */
	xp_disconnect(c->xc);
}

/*
 * Give receive buffer i back to the transport (after its message was
 * handled, or an inline WRITE that held it got its slot). A refusal
 * fails c, saying why: -ENOTCONN is a connection that failed before
 * (the transport's reason: it may have been noticed by no one yet, in
 * the same batch of completions), -ENOMEM one receive too many.
 */
void tconn_repost(struct tconn *c, unsigned int i)
{
	char why[320];
	const char *e;
	int ret;

	if (c->state == TCONN_CLOSING)
		return;
	if (recv_is_out(c, i)) {
		snprintf(why, sizeof(why),
			 "receive %u reposted while the transport still holds "
			 "it (an internal error)",
			 i);
		tconn_fail(c, why);
		return;
	}
	ret = qp_post_recv(&c->qp, i);
	if (!ret) {
		recv_mark(c, i, true);
		return;
	}
	if (ret == -ENOTCONN) {
		e = xp_conn_error(c->xc);
		snprintf(why, sizeof(why),
			 "reposting receive %u failed: connection already "
			 "failed: %s",
			 i, e ? e : "(the transport did not say why)");
	} else if (ret == -ENOMEM) {
		snprintf(why, sizeof(why),
			 "reposting receive %u failed: receive queue full (%u "
			 "outstanding: a receive posted twice?)",
			 i, c->qp.nr_recv);
	} else {
		snprintf(why, sizeof(why), "reposting receive %u failed: %s", i,
			 strerror(-ret));
	}
	tconn_fail(c, why);
}

/* Drop c's reference to its volume registration; the last deregisters. */
static void vol_put(struct worker *w, struct vol_reg *v)
{
	struct vol_reg **pp;

	if (!v || --v->refs)
		return;
	for (pp = &w->vols; *pp != v; pp = &(*pp)->next)
		;
	*pp = v->next;
	xp_dereg_mr(v->mr);
	free(v);
}

void tconn_destroy(struct worker *w, struct tconn *c)
{
	unsigned int qd = c->reqs ? c->lim.queue_depth : 0;

	/* windows first: then no key reaches a slot or the volume */
	if (c->mw)
		for (unsigned int i = 0; i < qd; i++)
			xp_dealloc_mw(c->mw[i]);
	xp_dealloc_mw(c->vol_mw);
	vol_put(w, c->vol);
	xp_destroy(c->xc); /* nothing of it reads or writes memory now */
	c->xc = NULL;
	for (unsigned int i = 0; i < qd; i++)
		slot_release(c, &c->reqs[i].slot);
	if (c->push_inflight)
		log_err("conn %llu: %u push slots never completed; leaked",
			(unsigned long long)c->id, c->push_inflight);
	slot_share_put(w, c);
	tconn_free(c);
}

/* ---- login --------------------------------------------------------------- */

/*
 * Send LOGIN l (its refusal, or the grant), with the volume window's bind
 * chained in front when c has one: one post.
 */
static int send_login(struct tconn *c, struct rblk_login *l)
{
	void *buf = send_buf(c, c->cm_qd);
	struct export *e = c->exp;
	bool bind = c->vol_mw && l->status == RBLK_S_OK;

	if (!qp_take(&c->qp, bind ? 2 : 1))
		return -EAGAIN;
	if (bind) {
		struct xp_send_wr *wr = qp_add(&c->qp);

		wr->opcode = XP_WR_BIND_MW;
		wr->bind.mw = c->vol_mw;
		wr->bind.mr = c->vol->mr;
		wr->bind.addr = (uint64_t)(uintptr_t)e->mem;
		wr->bind.length = c->vol->len;
		wr->bind.access = XP_ACCESS_REMOTE_READ;
		if (!(c->lim.features & RBLK_F_READ_ONLY))
			wr->bind.access |= XP_ACCESS_REMOTE_WRITE;
		wr->bind.rkey = xp_mw_next_rkey(c->vol_mw);
		l->vol_rkey = wr->bind.rkey;
		l->vol_addr = (uint64_t)(uintptr_t)e->mem;
		l->vol_len = c->vol->len; /* == lim.size, the LOGIN's size */
	}
	qp_add_send(&c->qp, qp_wrid(WRID_LOGIN, bind ? 2 : 1, 0), buf,
		    (uint32_t)rblk_login_encode(buf, l));
	return qp_flush(&c->qp);
}

static void login_grant(struct worker *w, struct tconn *c, bool force_ro);

static void login_refuse(struct tconn *c, int status, const char *why)
{
	struct rblk_login l = {.status = (uint32_t)status};

	log_warn("conn %llu (%s): login refused: %s", (unsigned long long)c->id,
		 c->peer, why);
	c->login_sent_close = true;
	if (send_login(c, &l))
		tconn_fail(c, "sending the login refusal failed");
}
static void handle_discover(struct worker *w, struct tconn *c,
			    const struct rblk_hello *h)
{
	struct rblk_disc_reply d = {.first = h->queue_id};
	void *buf = send_buf(c, c->cm_qd);
	unsigned int idx = 0;
	char why[256];
	int st;

	st = login_tls_decide(&w->tgt->cfg, NULL, h->host_name, &c->tls, why,
			      sizeof(why));
	if (st) {
		login_refuse(c, st, why);
		return;
	}

	pthread_mutex_lock(&w->tgt->exports_lock);
	for (const struct export *e = w->tgt->exports; e; e = e->next) {
		if (!export_visible_to(e, h->host_name))
			continue;
		if (idx >= d.first && d.count < RBLK_DISC_PER_REPLY) {
			struct rblk_disc_entry *de = &d.entry[d.count++];

			snprintf(de->name, sizeof(de->name), "%s", e->name);
			de->size = export_size(e);
			de->block_size = e->block_size;
			de->features = e->features | RBLK_F_PUSH;
		}
		idx++;
	}
	pthread_mutex_unlock(&w->tgt->exports_lock);
	d.total = (uint16_t)MIN(idx, 0xffffu);
	if (d.first > d.total)
		d.first = d.total; /* past the end: an empty page */
	log_info("conn %llu (%s): host '%s' discovered exports %u..%u of %u",
		 (unsigned long long)c->id, c->peer, h->host_name, d.first,
		 d.first + d.count, d.total);
	c->login_sent_close = true;
	if (qp_send_now(&c->qp, WRID_LOGIN, 0, buf,
			(uint32_t)rblk_disc_reply_encode(buf, &d)))
		tconn_fail(c, "sending DISCOVER_REPLY failed");
}
static struct export *lookup_export(void *ctx, const char *name)
{
	return export_lookup(ctx, name);
}
static int send_auth(struct tconn *c, size_t len)
{
	return qp_send_now(&c->qp, WRID_AUTH, 0, c->auth_buf, (uint32_t)len);
}
/*
 * Challenge the host of c->hello, or refuse AUTH_REQUIRED when it offered
 * no secret. c->exp is NULL for a hidden refusal (c->hidden_st): the same
 * messages, the same work, only the log says otherwise.
 */
static void auth_challenge(struct worker *w, struct tconn *c)
{
	struct rblk_auth_challenge ch = {0};
	char why[600];

	if (!(c->hello.flags & RBLK_HELLO_F_AUTH)) {
		if (c->hidden_st)
			snprintf(
			    why, sizeof(why),
			    "host '%s' offered no secret; %s (answered AUTH_REQUIRED: an unauthenticated host is not told)",
			    c->hello.host_name, c->hidden_why);
		else
			snprintf(
			    why, sizeof(why),
			    "host '%s' must authenticate for export %s and offered no secret",
			    c->hello.host_name, c->exp->name);
		login_refuse(c, RBLK_S_AUTH_REQUIRED, why);
		return;
	}
	rblk_auth_nonce(c->auth_nonce);
	memcpy(ch.nonce, c->auth_nonce, sizeof(ch.nonce));
	snprintf(ch.target_name, sizeof(ch.target_name), "%s",
		 w->tgt->cfg.name);
	if (send_auth(c, rblk_auth_challenge_encode(c->auth_buf, &ch))) {
		tconn_fail(c, "sending AUTH_CHALLENGE failed");
		return;
	}
	c->auth_wait = true;
	log_debug("conn %llu: challenged host '%s'", (unsigned long long)c->id,
		  c->hello.host_name);
}
static void handle_auth_response(struct worker *w, struct tconn *c,
				 const void *buf, uint32_t len)
{
	struct auth_plan a;
	struct rblk_auth_result res;
	int st;

	c->auth_wait = false;
	st = auth_decide(buf, len, &w->tgt->cfg, c->exp, &c->hello,
			 c->auth_nonce, &a);
	memset(c->auth_nonce, 0, sizeof(c->auth_nonce)); /* used once */
	if (st && c->hidden_st) {
		char why[700];

		snprintf(why, sizeof(why), "%s; and %s", a.why, c->hidden_why);
		login_refuse(c, st, why);
		return;
	}
	if (st) {
		login_refuse(c, st, a.why);
		return;
	}
	if (c->hidden_st) { /* proven: now it may know why */
		log_info("conn %llu (%s): host '%s' authenticated",
			 (unsigned long long)c->id, c->peer, a.ctx.host_name);
		login_refuse(c, c->hidden_st, c->hidden_why);
		return;
	}
	/* mutual: prove we hold the secret too, bound to both nonces */
	rblk_auth_mac(a.host->secret, a.host->secret_len, RBLK_AUTH_ROLE_TARGET,
		      &a.ctx, res.mac);
	if (send_auth(c, rblk_auth_result_encode(c->auth_buf, &res))) {
		tconn_fail(c, "sending AUTH_RESULT failed");
		return;
	}
	log_info("conn %llu (%s): host '%s' authenticated",
		 (unsigned long long)c->id, c->peer, a.ctx.host_name);
	login_grant(w, c, a.read_only);
}

/*
 * RBLK_F_DIRECT: the volume registered on c's group (MW bind only, one
 * registration per worker and group, shared by its connections) and a
 * window for c, bound in front of the LOGIN (send_login()) with remote
 * write only for a read-write login: a read-only login's RDMA WRITE fails
 * with a remote access error. 0 or -errno.
 */
static int tconn_volume_window(struct worker *w, struct tconn *c)
{
	struct export *e = c->exp;
	struct vol_reg *v;
	int access = XP_ACCESS_MW_BIND;
	int ret;

	if (!(c->lim.features & RBLK_F_DIRECT))
		return 0;
	/* a grown volume gets a registration of its new size beside it */
	for (v = w->vols; v; v = v->next)
		if (v->exp == e && v->wg == c->wg && v->len == c->lim.size)
			break;
	if (!v) {
		v = calloc(1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		/*
		 * Local write whenever the memory is writable, even for
		 * read-only logins: only then does registering pin real
		 * pages (untouched anonymous pages would stay the shared
		 * zero page), and remote write through a window needs it.
		 * It grants the peer nothing by itself.
		 */
		if ((e->ops->flags & BACKEND_F_MEM_WRITABLE) || !e->read_only)
			access |= XP_ACCESS_LOCAL_WRITE;
		ret = xp_group_reg_mr(c->wg->g, e->mem, c->lim.size, access,
				      &v->mr);
		if (ret) {
			free(v);
			return ret;
		}
		v->len = c->lim.size;
		v->exp = e;
		v->wg = c->wg;
		v->next = w->vols;
		w->vols = v;
	}
	v->refs++;
	c->vol = v;
	return xp_alloc_mw(c->wg->g, &c->vol_mw);
}

/*
 * Allocate the tag windows for the HELLO kept in c->hello, then send
 * LOGIN. Runs only after authentication succeeded (or was not needed):
 * nothing is allocated for a peer that has not proven itself.
 */
static void login_grant(struct worker *w, struct tconn *c, bool force_ro)
{
	const struct rblk_hello *h = &c->hello;
	struct export *e = c->exp;
	struct rblk_login l;
	uint16_t qd = c->lim.queue_depth; /* as login_decide() planned */
	char why[256];
	int ret;

	ret = login_tls_decide(&w->tgt->cfg, e, h->host_name, &c->tls, why,
			       sizeof(why));
	if (ret) {
		login_refuse(c, ret, why);
		return;
	}
	if (limits_login(&w->tgt->cfg, c->adm, why, sizeof(why))) {
		login_refuse(c, RBLK_S_BUSY, why);
		return;
	}
	c->reqs = calloc(qd, sizeof(*c->reqs));
	c->mw = calloc(qd, sizeof(*c->mw));
	if (!c->reqs || !c->mw) {
		login_refuse(c, RBLK_S_NO_RESOURCES, "out of memory");
		return;
	}
	for (unsigned int i = 0; i < qd; i++) {
		c->reqs[i].conn = c;
		c->reqs[i].resp_buf = send_buf(c, i);
		ret = xp_alloc_mw(c->wg->g, &c->mw[i]);
		if (ret) {
			login_refuse(c, RBLK_S_NO_RESOURCES,
				     "allocating memory windows failed");
			return;
		}
	}
	if (force_ro) /* an allow_ro grant */
		c->lim.features |= RBLK_F_READ_ONLY;
	login_reply(&c->lim, &l);
	(void)login_vol_id(e, l.vol_id);
	login_session_id(e, &l);
	ret = tconn_volume_window(w, c);
	if (ret) {
		/*
		 * E.g. a read-only mapping: window binding needs the pages
		 * pinned writable (the kernel counts MW_BIND as write access).
		 * The session goes through the slot path instead.
		 */
		log_warn(
		    "conn %llu (%s): export %s: no direct access (%s); serving it through the slot path",
		    (unsigned long long)c->id, c->peer, e->name,
		    strerror(-ret));
		xp_dealloc_mw(c->vol_mw);
		c->vol_mw = NULL;
		vol_put(w, c->vol);
		c->vol = NULL;
		c->lim.features &= ~RBLK_F_DIRECT;
		memset(&l, 0, sizeof(l));
		login_reply(&c->lim, &l);
		(void)login_vol_id(e, l.vol_id);
		login_session_id(e, &l);
	}
	if (target_fault("size0"))
		l.size = 0;
	if (target_fault("size63"))
		l.size = 1ull << 63;
	log_debug("conn %llu: %u windows allocated", (unsigned long long)c->id,
		  qd);
	c->told_size = c->lim.size;
	if (send_login(c, &l)) {
		tconn_fail(c, "sending LOGIN failed");
		return;
	}
	pthread_mutex_lock(&w->conns_lock);
	/* printable already (the HELLO decoder refuses anything else) */
	str_sanitize(c->host, sizeof(c->host), h->host_name, sizeof(c->host));
	c->queue_id = h->queue_id;
	c->login_ms = now_ms();
	c->last_rx_ms = c->login_ms;
	c->state = TCONN_LIVE;
	pthread_mutex_unlock(&w->conns_lock);
	qos_bind(c);
	if (e->pr) { /* what the reservations allow its host, read afresh */
		pr_reload(e);
		pr_refresh(c);
	}
	atomic_fetch_add(&e->sessions, 1);
	log_info(
	    "conn %llu (%s): host '%s' logged in to export %s (queue %u, depth %u, max I/O %u, inline %u%s%s)",
	    (unsigned long long)c->id, c->peer, h->host_name, e->name,
	    h->queue_id, qd, c->lim.max_io, c->lim.inline_max,
	    (c->lim.features & RBLK_F_READ_ONLY) ? ", read-only" : "",
	    c->vol_mw ? ", direct" : "");
}

static void handle_hello(struct worker *w, struct tconn *c, const void *buf,
			 uint32_t len)
{
	struct target *t = w->tgt;
	/* asked on every HELLO, so a hidden refusal takes no extra step */
	bool all_open = exports_all_open(t);
	struct login_plan p;
	int st;

	st = login_decide(buf, len, c->cm_qd, t->cfg.max_io, lookup_export, t,
			  &p);
	if (st && !p.discover &&
	    login_hidden_refusal(
		st, p.exp, all_open,
		p.exp &&
		    login_auth_needed(&t->cfg, p.exp, p.hello.host_name))) {
		/*
		 * A stranger is answered as for an export that needs
		 * authentication, whatever the reason (login_hidden_refusal()).
		 */
		if (p.exp)
			export_put(p.exp);
		c->hello = p.hello;
		c->hidden_st = st;
		snprintf(c->hidden_why, sizeof(c->hidden_why), "%s", p.why);
		auth_challenge(w, c);
		return;
	}
	if (st) {
		if (p.exp)
			export_put(p.exp); /* the lookup's reference */
		login_refuse(c, st, p.why);
		return;
	}
	if (p.discover) {
		handle_discover(w, c, &p.hello);
		return;
	}
	c->exp = p.exp; /* the lookup's reference, dropped in tconn_free() */
	c->hello = p.hello;
	c->lim = p.lim; /* granted once LOGIN is sent */
	if (!c->xc->ops->write_imm)
		c->lim.features &= ~RBLK_F_PUSH_IMM;
	c->lim.inline_max =
	    MIN(p.hello.inline_data, c->inline_cap) & ~(RBLK_INLINE_ALIGN - 1u);
	if (login_auth_needed(&t->cfg, c->exp, c->hello.host_name)) {
		auth_challenge(w, c);
		return;
	}
	login_grant(w, c, false);
}

static void tconn_login_recv(struct worker *w, struct tconn *c, const void *buf,
			     uint32_t len)
{
	int type = rblk_msg_type(buf, len);

	if (c->auth_wait) {
		if (type != RBLK_MSG_AUTH_RESPONSE)
			login_refuse(
			    c, type < 0 ? RBLK_S_INVALID : RBLK_S_BAD_STATE,
			    "expected AUTH_RESPONSE");
		else
			handle_auth_response(w, c, buf, len);
	} else if (type >= 0 && type != RBLK_MSG_HELLO) {
		/* an unreadable header goes to the HELLO decoder too, which
		 * tells a version mismatch (BAD_VERSION) from garbage */
		login_refuse(c, RBLK_S_BAD_STATE, "first message is not HELLO");
	} else {
		handle_hello(w, c, buf, len);
	}
}

static void handle_recv(struct worker *w, struct tconn *c,
			const struct xp_wc *wc)
{
	const void *buf = qp_recv_of(&c->qp, wc->wr_id);
	unsigned int i = qp_wrid_val(wc->wr_id);

	if (!buf || !recv_is_out(c, i)) {
		tconn_fail(c, "transport returned a bad receive id");
		return;
	}
	recv_mark(c, i, false);
	switch (c->state) {
	case TCONN_LOGIN:
		/*
		 * Refused already: ignore what follows, and do not repost
		 * the receive, so a peer that keeps sending runs out of them
		 * (RNR) instead of keeping us busy.
		 */
		if (c->login_sent_close)
			return;
		/* the deadline holds even while the peer keeps talking */
		if (tconn_login_expired(c, now_ms())) {
			tconn_fail(c, "no login within the login limit");
			return;
		}
		if (!c->talked) { /* no longer the first to evict */
			c->talked = true;
			limits_talking(c->adm);
		}
		tconn_login_recv(w, c, buf, wc->byte_len);
		break;
	case TCONN_LIVE:
		c->last_rx_ms = w->now_ms;
		if (treq_recv(c, buf, wc))
			/* an inline WRITE holds it until it has a slot */
			return;
		break;
	case TCONN_CLOSING:
		return;
	}
	tconn_repost(c, i);
}

void tconn_handle_wc(struct worker *w, struct tconn *c, const struct xp_wc *wc)
{
	if (wc->opcode != XP_WC_RECV)
		treq_send_done(c,
			       wc); /* push slots go back whatever happened */
	if (wc->status != XP_WC_SUCCESS) {
		if (wc->opcode == XP_WC_RECV &&
		    wc->status == XP_WC_REM_ACCESS_ERR) {
			/* the transport refused the peer's one-sided access */
			tconn_fail(
			    c,
			    "remote access refused (a key not valid on this connection, outside its range or without the right)");
		} else if (c->state == TCONN_CLOSING ||
			   wc->status == XP_WC_FLUSH_ERR) {
			tconn_fail(c, NULL);
		} else {
			char why[96];

			snprintf(why, sizeof(why), "work completion error: %s",
				 xp_wc_status_str(wc->status));
			tconn_fail(c, why);
		}
		return;
	}
	if (wc->opcode == XP_WC_RECV)
		handle_recv(w, c, wc);
	else if (qp_wrid_kind(wc->wr_id) == WRID_LOGIN && c->login_sent_close)
		tconn_fail(c, NULL);
}
