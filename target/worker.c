/* SPDX-License-Identifier: MIT */
/*
 * Workers: each owns a set of connections and one I/O engine and runs them
 * to completion. A connection's life:
 *
 *   main thread: tconn_accept()  message buffers registered, receives
 *                                posted, transport accept
 *   worker:      TCONN_LOGIN     HELLO -> export lookup; when the host or
 *                                export needs it, AUTH_CHALLENGE ->
 *                                AUTH_RESPONSE verified -> AUTH_RESULT;
 *                                only then slot region allocated and
 *                                registered, LOGIN sent
 *                TCONN_LIVE      commands
 *                TCONN_CLOSING   transport disconnected; wait for backend
 *                                I/O on the slots to finish, then free
 *
 * Per command (struct treq, one per tag) the state machine in
 * treq_process() runs until the state stops changing.
 */
#include "target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define LOGIN_TIMEOUT_MS 10000
#define POLL_BATCH 32
#define RESP_BUF_SIZE 64 /* per tag; a response is RBLK_RESP_SIZE */

_Static_assert(RBLK_RESP_SIZE <= RESP_BUF_SIZE, "response fits its buffer");
_Static_assert(RBLK_LOGIN_SIZE <= RBLK_MSG_MAX, "login fits its send buffer");
/* The last send buffer: AUTH_CHALLENGE, then AUTH_RESULT (sent right
 * before LOGIN, so it cannot share LOGIN's buffer). */
#define AUTH_BUF_SIZE 256
_Static_assert(RBLK_AUTH_CHALLENGE_SIZE <= AUTH_BUF_SIZE, "challenge fits");
_Static_assert(RBLK_AUTH_RESULT_SIZE <= AUTH_BUF_SIZE, "result fits");

/*
 * Work request ids: kind in the top byte, a value below. RECV carries the
 * receive buffer index, RESP the number of send-queue entries the post used.
 */
enum wrid_kind {
	WRID_RECV = 1,
	WRID_RESP = 2,
	WRID_LOGIN = 3,
	WRID_AUTH = 4, /* AUTH_CHALLENGE or AUTH_RESULT */
};

static inline uint64_t wrid_make(enum wrid_kind kind, uint32_t val)
{
	return (uint64_t)kind << 56 | val;
}

static inline enum wrid_kind wrid_kind(uint64_t wrid)
{
	return (enum wrid_kind)(wrid >> 56);
}

static inline uint32_t wrid_val(uint64_t wrid)
{
	return (uint32_t)wrid;
}

static void *recv_buf(struct tconn *c, unsigned int i)
{
	return (char *)c->msg_mem + (size_t)i * RBLK_MSG_MAX;
}

/*
 * Send buffers follow the receive buffers: one per tag, then LOGIN's
 * (RBLK_MSG_MAX bytes: it also carries DISCOVER_REPLY).
 */
static void *send_buf(struct tconn *c, unsigned int i)
{
	return (char *)c->msg_mem + (size_t)c->nr_recv * RBLK_MSG_MAX +
	       (size_t)i * RESP_BUF_SIZE;
}

static int post_recv_buf(struct tconn *c, unsigned int i)
{
	struct xp_sge sge = {
		.addr = recv_buf(c, i),
		.length = RBLK_MSG_MAX,
		.mr = c->msg_mr,
	};

	return xp_post_recv(c->xc, wrid_make(WRID_RECV, i), &sge);
}

/* ---- connection setup (main thread) ------------------------------------ */

/*
 * Sizes: at most qd commands are outstanding, so qd receives suffice; two
 * more absorb a KEEPALIVE racing a full queue. The send queue holds at most
 * two entries per tag (RDMA WRITE + SEND for push reads) plus LOGIN.
 */
void tconn_attr(uint16_t qd, struct xp_conn_attr *attr)
{
	attr->max_recv_wr = qd + 2u;
	attr->max_send_wr = 2u * qd + 2u;
}

static void tconn_free(struct tconn *c)
{
	xp_destroy(c->xc); /* deregisters every MR of the connection */
	if (c->exp)
		export_put(c->exp); /* after the last backend I/O on it */
	free(c->slots);
	free(c->msg_mem);
	free(c->reqs);
	free(c->batch);
	free(c);
}

struct tconn *tconn_accept(struct target *t, struct xp_conn *xc, uint16_t qd)
{
	struct xp_conn_attr attr;
	struct tconn *c;
	size_t len;
	int ret;

	tconn_attr(qd, &attr);
	/* struct iostats (in c->stats) is cache-line aligned: calloc is not */
	if (posix_memalign((void **)&c, _Alignof(struct tconn), sizeof(*c))) {
		c = NULL;
		goto out_reject;
	}
	memset(c, 0, sizeof(*c));
	c->xc = xc;
	xc->user = c;
	c->id = atomic_fetch_add(&t->next_conn_id, 1);
	c->cm_qd = qd;
	c->nr_recv = attr.max_recv_wr;
	c->buf_index = -1;
	c->batch = calloc(attr.max_send_wr, sizeof(*c->batch));
	if (!c->batch)
		goto out_reject;
	snprintf(c->peer, sizeof(c->peer), "%s", xp_peer_name(xc));
	/* the last send buffer (LOGIN, DISCOVER_REPLY) is a full message;
	 * the AUTH_* messages have their own after it */
	len = (size_t)c->nr_recv * RBLK_MSG_MAX + (size_t)qd * RESP_BUF_SIZE +
	      RBLK_MSG_MAX + AUTH_BUF_SIZE;
	if (posix_memalign(&c->msg_mem, 4096, len)) {
		c->msg_mem = NULL;
		goto out_reject;
	}
	memset(c->msg_mem, 0, len);
	/* the last AUTH_BUF_SIZE bytes, whatever the buffers before them */
	c->auth_buf = (char *)c->msg_mem + len - AUTH_BUF_SIZE;
	if (xp_reg_mr(xc, c->msg_mem, len, XP_ACCESS_LOCAL_WRITE, &c->msg_mr))
		goto out_reject;
	for (unsigned int i = 0; i < c->nr_recv; i++)
		if (post_recv_buf(c, i))
			goto out_reject;
	c->sq_free = attr.max_send_wr;
	c->state = TCONN_LOGIN;
	ret = xc->ops->accept(xc, NULL, 0);
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
	/* reject() destroys xc and its registrations before memory is freed */
	{
		char rej[RBLK_CM_REJ_SIZE];
		size_t n = rblk_cm_rej_encode(rej, RBLK_S_NO_RESOURCES);

		log_warn("rejecting connection from %s: out of resources",
			 xp_peer_name(xc));
		xc->ops->reject(xc, rej, n);
	}
	if (c) {
		free(c->batch);
		free(c->msg_mem);
		free(c);
	}
	return NULL;
}

/* ---- connection teardown ----------------------------------------------- */

static void tconn_fail(struct tconn *c, const char *why)
{
	if (c->state == TCONN_CLOSING)
		return;
	if (why)
		log_warn("conn %llu (%s): %s; disconnecting",
			 (unsigned long long)c->id, c->peer, why);
	else
		log_info("conn %llu (%s): disconnected",
			 (unsigned long long)c->id, c->peer);
	if (c->state == TCONN_LIVE)
		atomic_fetch_sub(&c->exp->sessions, 1);
	pthread_mutex_lock(&c->worker->conns_lock);
	c->state = TCONN_CLOSING;
	pthread_mutex_unlock(&c->worker->conns_lock);
	c->wait_head = c->wait_tail = NULL;
	xp_disconnect(c->xc);
	/* no target work uses it: the volume's rkey dies with the link */
	xp_dereg_mr(c->vol_mr);
	c->vol_mr = NULL;
}

static void tconn_destroy(struct worker *w, struct tconn *c)
{
	if (c->buf_index >= 0)
		w->engine->unregister_buf(w, c->buf_index);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, xp_fd(c->xc), NULL);
	tconn_free(c);
}

/* ---- requests ---------------------------------------------------------- */

static void treq_process(struct treq *r);

/* Count r's command in its session's and its export's statistics. */
static void treq_account(struct worker *w, struct treq *r)
{
	struct tconn *c = r->conn;
	enum stat_op op;
	uint64_t lat_us;
	bool ok = r->status == RBLK_S_OK;

	switch (r->cmd.opcode) {
	case RBLK_OP_READ:
		op = STAT_READ;
		break;
	case RBLK_OP_WRITE:
		op = STAT_WRITE;
		break;
	case RBLK_OP_FLUSH:
		op = STAT_FLUSH;
		break;
	case RBLK_OP_TRIM:
		op = STAT_TRIM;
		break;
	case RBLK_OP_WRITE_ZEROES:
		op = STAT_WRITE_ZEROES;
		break;
	default:
		return; /* KEEPALIVE, DISCONNECT, undecodable */
	}
	lat_us = (now_ns() - r->t_recv_ns) / 1000u;
	stats_account(&c->stats, op, r->cmd.length, ok, lat_us);
	stats_account(&c->exp->wstats[w->index], op, r->cmd.length, ok,
		      lat_us);
}

/*
 * Add r's response (after its RDMA WRITE for a push read) to the
 * connection's batch, taking its send credits; tconn_flush_sends() posts
 * it. 0, or -EAGAIN without credits.
 */
static int treq_post_response(struct treq *r)
{
	struct tconn *c = r->conn;
	struct rblk_resp resp = {
		.tag = r->cmd.tag,
		.status = (uint32_t)r->status,
		.length = r->status ? 0 : r->cmd.length,
	};
	bool push = !r->status && r->cmd.opcode == RBLK_OP_READ &&
		    (r->cmd.flags & RBLK_CMD_F_PUSH);
	unsigned int need = push ? 2 : 1;
	struct xp_send_wr *wr;

	if (c->sq_free < need)
		return -EAGAIN;
	c->sq_free -= need;
	if (!c->nr_batch) {
		c->next_flush = c->worker->flush_head;
		c->worker->flush_head = c;
	}
	r->resp_batch = c->flushes + 1;
	wr = &c->batch[c->nr_batch];
	c->nr_batch += need;
	memset(wr, 0, need * sizeof(*wr));
	if (push) {
		/* RC ordering places the data before the response arrives */
		wr->opcode = XP_WR_RDMA_WRITE;
		wr->sge.addr = r->slot;
		wr->sge.length = r->cmd.length;
		wr->sge.mr = c->slot_mr;
		wr->remote_addr = r->cmd.addr;
		wr->rkey = r->cmd.rkey;
		wr++;
	}
	wr->wr_id = wrid_make(WRID_RESP, need);
	wr->opcode = XP_WR_SEND;
	wr->flags = XP_SEND_SIGNALED;
	wr->sge.addr = r->resp_buf;
	wr->sge.length = (uint32_t)rblk_resp_encode(r->resp_buf, &resp);
	wr->sge.mr = c->msg_mr;
	return 0;
}

/*
 * Post c's batch as one chain: one doorbell on rdma, one sendmsg() on
 * tcp. A closing connection's batch is dropped (its credits no longer
 * matter). Runs on the worker thread, before it sleeps.
 */
static void tconn_flush_sends(struct tconn *c)
{
	unsigned int n = c->nr_batch;
	struct xp_send_wr *bad;

	c->nr_batch = 0;
	c->flushes++;
	if (!n || c->state == TCONN_CLOSING)
		return;
	for (unsigned int i = 0; i + 1 < n; i++)
		c->batch[i].next = &c->batch[i + 1];
	c->batch[n - 1].next = NULL;
	if (xp_post_send(c->xc, c->batch, &bad))
		tconn_fail(c, "posting responses failed");
}

/* Post every connection's batch; none is left on the flush list. */
static void worker_flush_sends(struct worker *w)
{
	struct tconn *c;

	while ((c = w->flush_head)) {
		w->flush_head = c->next_flush;
		c->next_flush = NULL;
		tconn_flush_sends(c);
	}
}

/*
 * The per-command state machine. Runs until the state stops changing; the
 * states that wait (BACKEND, RESPOND without credits) are resumed by
 * treq_backend_done() and by send completions.
 */
static void treq_process(struct treq *r)
{
	struct tconn *c = r->conn;
	struct worker *w = c->worker;
	enum treq_state prev;
	int ret;

	do {
		prev = r->state;
		switch (r->state) {
		case TREQ_FREE:
		case TREQ_BACKEND:
			break;
		case TREQ_EXEC:
			if (c->state == TCONN_CLOSING) {
				r->state = TREQ_FREE;
				break;
			}
			r->result = 0;
			ret = c->exp->ops->submit(w, r);
			if (ret == 0) {
				c->backend_inflight++;
				r->state = TREQ_BACKEND;
			} else if (ret == 1) {
				r->status = rblk_errno_to_status(r->result);
				r->state = TREQ_RESPOND;
			} else {
				/*
				 * Engine full: park until completions free
				 * room. Counted as backend I/O so the
				 * connection outlives the parked request.
				 */
				c->backend_inflight++;
				r->next_wait = NULL;
				if (w->busy_tail)
					w->busy_tail->next_wait = r;
				else
					w->busy_head = r;
				w->busy_tail = r;
				return;
			}
			break;
		case TREQ_RESPOND:
			if (c->state == TCONN_CLOSING) {
				r->state = TREQ_FREE;
				break;
			}
			if (treq_post_response(r)) { /* -EAGAIN */
				r->next_wait = NULL;
				if (c->wait_tail)
					c->wait_tail->next_wait = r;
				else
					c->wait_head = r;
				c->wait_tail = r;
				return;
			}
			treq_account(w, r);
			/*
			 * The tag is the initiator's again: it sends the next
			 * command on it only after reading this response, so
			 * the slot and response buffer are not reused early
			 * (r->resp_batch catches one that does not wait).
			 */
			r->state = TREQ_FREE;
			break;
		}
	} while (r->state != prev);
}

void treq_backend_done(struct treq *r, int res)
{
	struct tconn *c = r->conn;

	c->backend_inflight--;
	if (res == -EINVAL && r->odirect) {
		/* the file system refused this O_DIRECT I/O: go buffered */
		if (!atomic_exchange(&c->exp->odirect_failed, true))
			log_warn("export %s: O_DIRECT I/O refused; switching to buffered I/O",
				 c->exp->name);
		r->state = TREQ_EXEC;
		treq_process(r);
		return;
	}
	if (res >= 0 && (r->cmd.opcode == RBLK_OP_READ ||
			 r->cmd.opcode == RBLK_OP_WRITE) &&
	    (uint32_t)res != r->cmd.length) {
		log_warn("export %s: short %s at %llu: %d of %u bytes",
			 c->exp->name, rblk_opcode_str(r->cmd.opcode),
			 (unsigned long long)r->cmd.offset, res, r->cmd.length);
		res = -EIO;
	}
	r->result = res < 0 ? res : 0;
	r->status = rblk_errno_to_status(r->result);
	if (r->result)
		log_warn("export %s: %s at %llu+%u failed: %s", c->exp->name,
			 rblk_opcode_str(r->cmd.opcode),
			 (unsigned long long)r->cmd.offset, r->cmd.length,
			 strerror(-r->result));
	r->state = TREQ_RESPOND;
	treq_process(r);
}

/* ---- login --------------------------------------------------------------- */

static int send_login(struct tconn *c, const struct rblk_login *l)
{
	struct xp_send_wr wr = { 0 }, *bad;
	void *buf = send_buf(c, c->cm_qd);
	int ret;

	wr.wr_id = wrid_make(WRID_LOGIN, 1);
	wr.opcode = XP_WR_SEND;
	wr.flags = XP_SEND_SIGNALED;
	wr.sge.addr = buf;
	wr.sge.length = (uint32_t)rblk_login_encode(buf, l);
	wr.sge.mr = c->msg_mr;
	ret = xp_post_send(c->xc, &wr, &bad);
	if (!ret)
		c->sq_free--;
	return ret;
}

static void login_refuse(struct tconn *c, int status, const char *why)
{
	struct rblk_login l = { .status = (uint32_t)status };

	log_warn("conn %llu (%s): login refused: %s",
		 (unsigned long long)c->id, c->peer, why);
	c->login_sent_close = true;
	if (send_login(c, &l))
		tconn_fail(c, "sending the login refusal failed");
}

/*
 * Discovery: one DISCOVER_REPLY with the exports visible to the host,
 * starting at index h->queue_id, then disconnect (as after a refusal).
 * Nothing is registered or counted for the connection.
 */
static void handle_discover(struct worker *w, struct tconn *c,
			    const struct rblk_hello *h)
{
	struct rblk_disc_reply d = { .first = h->queue_id };
	struct xp_send_wr wr = { 0 }, *bad;
	void *buf = send_buf(c, c->cm_qd);
	unsigned int idx = 0;

	pthread_mutex_lock(&w->tgt->exports_lock);
	for (const struct export *e = w->tgt->exports; e; e = e->next) {
		if (!export_visible_to(e, h->host_name))
			continue;
		if (idx >= d.first && d.count < RBLK_DISC_PER_REPLY) {
			struct rblk_disc_entry *de = &d.entry[d.count++];

			snprintf(de->name, sizeof(de->name), "%s", e->name);
			de->size = e->size;
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
	wr.wr_id = wrid_make(WRID_LOGIN, 1);
	wr.opcode = XP_WR_SEND;
	wr.flags = XP_SEND_SIGNALED;
	wr.sge.addr = buf;
	wr.sge.length = (uint32_t)rblk_disc_reply_encode(buf, &d);
	wr.sge.mr = c->msg_mr;
	if (xp_post_send(c->xc, &wr, &bad))
		tconn_fail(c, "sending DISCOVER_REPLY failed");
	else
		c->sq_free--;
}

static struct export *lookup_export(void *ctx, const char *name)
{
	return export_lookup(ctx, name);
}

/*
 * RBLK_F_DIRECT: register the volume memory itself for this connection,
 * so the initiator RDMA READs and WRITEs it in place. Called only once the
 * login is accepted (like the slot region), with remote write only for a
 * read-write login: a read-only login's RDMA WRITE then fails with a
 * remote access error. The registration lives in the connection's own
 * protection domain and goes with it at tconn_free() (xp_destroy).
 * Fills the volume fields of l; returns 0 or -errno.
 */
static int tconn_reg_volume(struct tconn *c, struct rblk_login *l)
{
	struct export *e = c->exp;
	int access = XP_ACCESS_REMOTE_READ;
	int ret;

	if (!(c->lim.features & RBLK_F_DIRECT))
		return 0;
	/*
	 * Local write whenever the memory is writable, even for a read-only
	 * login: only then does registering pin real pages. Pinned for read
	 * only, untouched anonymous (RAM) pages would stay the shared zero
	 * page, and this connection would never see what others write there.
	 * It grants the peer nothing.
	 */
	if (e->kind == EXPORT_RAM || !e->read_only)
		access |= XP_ACCESS_LOCAL_WRITE;
	if (!(c->lim.features & RBLK_F_READ_ONLY))
		access |= XP_ACCESS_REMOTE_WRITE;
	ret = xp_reg_mr(c->xc, e->map, e->size, access, &c->vol_mr);
	if (ret)
		return ret;
	l->vol_rkey = c->vol_mr->rkey;
	l->vol_addr = (uint64_t)(uintptr_t)e->map;
	l->vol_len = e->size;
	return 0;
}

/* ---- authentication ------------------------------------------------------- */

static void login_grant(struct worker *w, struct tconn *c, bool force_ro);

static int send_auth(struct tconn *c, size_t len)
{
	struct xp_send_wr wr = { 0 }, *bad;
	int ret;

	wr.wr_id = wrid_make(WRID_AUTH, 1);
	wr.opcode = XP_WR_SEND;
	wr.flags = XP_SEND_SIGNALED;
	wr.sge.addr = c->auth_buf;
	wr.sge.length = (uint32_t)len;
	wr.sge.mr = c->msg_mr;
	ret = xp_post_send(c->xc, &wr, &bad);
	if (!ret)
		c->sq_free--;
	return ret;
}

static void auth_challenge(struct worker *w, struct tconn *c)
{
	struct rblk_auth_challenge ch = { 0 };
	char why[320];

	if (!(c->hello.flags & RBLK_HELLO_F_AUTH)) {
		snprintf(why, sizeof(why),
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

/* AUTH_RESPONSE: auth_decide() (target/login.c) judges it; we answer. */
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
	if (st) {
		login_refuse(c, st, a.why);
		return;
	}
	/* mutual: prove we hold the secret too, bound to both nonces */
	rblk_auth_mac(a.host->secret, a.host->secret_len,
		      RBLK_AUTH_ROLE_TARGET, &a.ctx, res.mac);
	if (send_auth(c, rblk_auth_result_encode(c->auth_buf, &res))) {
		tconn_fail(c, "sending AUTH_RESULT failed");
		return;
	}
	log_info("conn %llu (%s): host '%s' authenticated",
		 (unsigned long long)c->id, c->peer, a.ctx.host_name);
	login_grant(w, c, a.read_only);
}

/*
 * Allocate and register the slot region for the HELLO kept in c->hello,
 * then send LOGIN. Runs only after authentication succeeded (or was not
 * needed): nothing is registered for a peer that has not proven itself.
 */
static void login_grant(struct worker *w, struct tconn *c, bool force_ro)
{
	const struct rblk_hello *h = &c->hello;
	struct export *e = c->exp;
	struct rblk_login l;
	uint16_t qd = c->lim.queue_depth; /* as login_decide() planned */
	uint32_t max_io = c->lim.max_io;
	int ret;

	c->slots_len = (size_t)qd * max_io;
	if (posix_memalign(&c->slots, 4096, c->slots_len)) {
		c->slots = NULL;
		login_refuse(c, RBLK_S_NO_RESOURCES, "out of memory for slots");
		return;
	}
	memset(c->slots, 0, c->slots_len);
	/* one region, for this connection only: its rkey is useless elsewhere */
	ret = xp_reg_mr(c->xc, c->slots, c->slots_len,
			XP_ACCESS_LOCAL_WRITE | XP_ACCESS_REMOTE_READ |
				XP_ACCESS_REMOTE_WRITE,
			&c->slot_mr);
	if (ret) {
		login_refuse(c, RBLK_S_NO_RESOURCES,
			     "registering the slot region failed");
		return;
	}
	log_debug("conn %llu: slot region registered (%zu bytes, rkey 0x%x)",
		  (unsigned long long)c->id, c->slots_len, c->slot_mr->rkey);
	c->reqs = calloc(qd, sizeof(*c->reqs));
	if (!c->reqs) {
		login_refuse(c, RBLK_S_NO_RESOURCES, "out of memory");
		return;
	}
	for (unsigned int i = 0; i < qd; i++) {
		c->reqs[i].conn = c;
		c->reqs[i].slot = (char *)c->slots + (size_t)i * max_io;
		c->reqs[i].resp_buf = send_buf(c, i);
	}
	c->buf_index = w->engine->register_buf(w, c->slots, c->slots_len);
	if (c->buf_index < 0)
		c->buf_index = -1;

	if (force_ro) /* an allow_ro grant */
		c->lim.features |= RBLK_F_READ_ONLY;

	login_reply(&c->lim, (uint64_t)(uintptr_t)c->slots, c->slot_mr->rkey,
		    &l);
	random_bytes(&l.session_id, sizeof(l.session_id));
	if (tconn_reg_volume(c, &l)) {
		login_refuse(c, RBLK_S_NO_RESOURCES,
			     "registering the volume for direct access failed");
		return;
	}
	if (send_login(c, &l)) {
		tconn_fail(c, "sending LOGIN failed");
		return;
	}
	pthread_mutex_lock(&w->conns_lock);
	snprintf(c->host, sizeof(c->host), "%s", h->host_name);
	c->queue_id = h->queue_id;
	c->login_ms = now_ms();
	c->state = TCONN_LIVE;
	pthread_mutex_unlock(&w->conns_lock);
	atomic_fetch_add(&e->sessions, 1);
	log_info("conn %llu (%s): host '%s' logged in to export %s (queue %u, depth %u, max I/O %u%s%s)",
		 (unsigned long long)c->id, c->peer, h->host_name, e->name,
		 h->queue_id, qd, max_io,
		 (c->lim.features & RBLK_F_READ_ONLY) ? ", read-only" : "",
		 c->vol_mr ? ", direct" : "");
}

static void handle_hello(struct worker *w, struct tconn *c, const void *buf,
			 uint32_t len)
{
	struct target *t = w->tgt;
	struct login_plan p;
	int st;

	st = login_decide(buf, len, c->cm_qd, t->cfg.max_io, lookup_export, t,
			  &p);
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
	if (login_auth_needed(&t->cfg, c->exp, c->hello.host_name)) {
		auth_challenge(w, c);
		return;
	}
	login_grant(w, c, false);
}

/* ---- completions ---------------------------------------------------------- */

static void handle_command(struct tconn *c, const void *buf, uint32_t len)
{
	struct treq *r;
	int tag, st;

	tag = rblk_cmd_peek_tag(buf, len, c->lim.queue_depth);
	if (tag < 0) {
		tconn_fail(c, rblk_msg_type(buf, len) == RBLK_MSG_CMD ?
				      "command with a tag out of range" :
				      "malformed message");
		return;
	}
	r = &c->reqs[tag];
	if (r->state != TREQ_FREE || r->resp_batch > c->flushes) {
		tconn_fail(c, "command on a tag still in use");
		return;
	}
	r->t_recv_ns = now_ns();
	st = rblk_cmd_decode(buf, len, &c->lim, &r->cmd);
	r->cmd.tag = (uint16_t)tag;
	if (st) {
		log_debug("conn %llu: tag %d: %s rejected: %s",
			  (unsigned long long)c->id, tag,
			  rblk_opcode_str(r->cmd.opcode), rblk_status_str(st));
		r->status = st;
		r->cmd.flags = 0; /* never push data for a refused command */
		r->state = TREQ_RESPOND;
	} else if (r->cmd.opcode == RBLK_OP_KEEPALIVE ||
		   r->cmd.opcode == RBLK_OP_DISCONNECT) {
		/* DISCONNECT: answer; the initiator then closes its side */
		r->status = RBLK_S_OK;
		r->state = TREQ_RESPOND;
	} else {
		r->state = TREQ_EXEC;
	}
	treq_process(r);
}

static void handle_recv(struct worker *w, struct tconn *c,
			const struct xp_wc *wc)
{
	unsigned int i = wrid_val(wc->wr_id);
	const void *buf;
	int type;

	if (i >= c->nr_recv) {
		tconn_fail(c, "transport returned a bad receive id");
		return;
	}
	buf = recv_buf(c, i);
	type = rblk_msg_type(buf, wc->byte_len);
	switch (c->state) {
	case TCONN_LOGIN:
		if (c->login_sent_close)
			break; /* refused already; ignore what follows */
		if (c->auth_wait) {
			if (type != RBLK_MSG_AUTH_RESPONSE)
				login_refuse(c, type < 0 ? RBLK_S_INVALID :
							   RBLK_S_BAD_STATE,
					     "expected AUTH_RESPONSE");
			else
				handle_auth_response(w, c, buf, wc->byte_len);
		} else if (type >= 0 && type != RBLK_MSG_HELLO)
			/* an unreadable header goes to the HELLO decoder too,
			 * which tells a version mismatch (BAD_VERSION) from
			 * garbage */
			login_refuse(c, RBLK_S_BAD_STATE,
				     "first message is not HELLO");
		else
			handle_hello(w, c, buf, wc->byte_len);
		break;
	case TCONN_LIVE:
		if (type != RBLK_MSG_CMD) {
			tconn_fail(c, type < 0 ? "malformed message" :
						 "unexpected message type");
			return;
		}
		handle_command(c, buf, wc->byte_len);
		break;
	case TCONN_CLOSING:
		return;
	}
	if (c->state != TCONN_CLOSING && post_recv_buf(c, i))
		tconn_fail(c, "reposting a receive failed");
}

static void handle_send_done(struct tconn *c, const struct xp_wc *wc)
{
	struct treq *r;

	c->sq_free += wrid_val(wc->wr_id);
	if (wrid_kind(wc->wr_id) == WRID_LOGIN && c->login_sent_close) {
		tconn_fail(c, NULL);
		return;
	}
	while ((r = c->wait_head) && c->state != TCONN_CLOSING) {
		c->wait_head = r->next_wait;
		if (!c->wait_head)
			c->wait_tail = NULL;
		treq_process(r);
		if (r->state == TREQ_RESPOND)
			break; /* went back on the wait list */
	}
}

static void handle_wc(struct worker *w, struct tconn *c, const struct xp_wc *wc)
{
	if (wc->status != XP_WC_SUCCESS) {
		if (c->state == TCONN_CLOSING || wc->status == XP_WC_FLUSH_ERR) {
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
	else
		handle_send_done(c, wc);
}

/* Reap everything, then arm and reap once more (see transport.h). */
static void conn_progress(struct worker *w, struct tconn *c)
{
	struct xp_wc wc[POLL_BATCH];
	bool armed = false;
	int n;

	for (;;) {
		n = xp_poll(c->xc, wc, POLL_BATCH);
		if (n < 0) {
			tconn_fail(c, "transport poll failed");
			return;
		}
		for (int i = 0; i < n; i++)
			handle_wc(w, c, &wc[i]);
		if (n > 0) {
			armed = false;
			continue;
		}
		if (armed)
			return;
		if (xp_arm(c->xc) > 0)
			continue;
		armed = true;
	}
}

/* ---- the worker thread ----------------------------------------------------- */

#define EPOLL_MAILBOX ((void *)1)
#define EPOLL_ENGINE ((void *)2)

/*
 * Fail the sessions of exports the control socket removed. Their backend
 * I/O in flight completes before the connection is freed (TCONN_CLOSING);
 * the initiator sees the disconnect and fails its outstanding commands.
 */
static void close_removed(struct worker *w)
{
	for (struct tconn *c = w->conns; c; c = c->next) {
		char why[RBLK_NAME_MAX + 32];

		if (!c->exp || c->state == TCONN_CLOSING ||
		    !atomic_load(&c->exp->removed))
			continue;
		snprintf(why, sizeof(why), "export %s removed", c->exp->name);
		tconn_fail(c, why);
	}
}

static void adopt_mailbox(struct worker *w)
{
	struct tconn *list, *c;
	uint64_t cnt;

	if (read(w->mailbox_fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		log_warn("worker %u: read mailbox: %s", w->index,
			 strerror(errno));
	pthread_mutex_lock(&w->mailbox_lock);
	list = w->mailbox;
	w->mailbox = NULL;
	pthread_mutex_unlock(&w->mailbox_lock);
	if (atomic_exchange(&w->check_removed, false))
		close_removed(w);
	while ((c = list)) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

		list = c->next;
		c->worker = w;
		pthread_mutex_lock(&w->conns_lock);
		c->next = w->conns;
		w->conns = c;
		w->nr_conns++;
		pthread_mutex_unlock(&w->conns_lock);
		c->login_deadline_ms = now_ms() + LOGIN_TIMEOUT_MS;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, xp_fd(c->xc), &ev)) {
			log_err("worker %u: epoll_ctl: %s", w->index,
				strerror(errno));
			tconn_fail(c, "cannot watch the connection");
			continue;
		}
		conn_progress(w, c);
	}
}

/* Free connections that are closed and have no backend I/O left. */
static void reap_closed(struct worker *w, bool check_login_timeouts)
{
	struct tconn **pp = &w->conns, *c;
	uint64_t now = check_login_timeouts ? now_ms() : 0;

	worker_flush_sends(w); /* nothing freed stays on the flush list */
	while ((c = *pp)) {
		if (check_login_timeouts && c->state == TCONN_LOGIN &&
		    now > c->login_deadline_ms)
			tconn_fail(c, "no login within 10 s");
		if (c->state == TCONN_CLOSING && !c->backend_inflight) {
			pthread_mutex_lock(&w->conns_lock);
			*pp = c->next;
			w->nr_conns--;
			pthread_mutex_unlock(&w->conns_lock);
			tconn_destroy(w, c);
			continue;
		}
		pp = &c->next;
	}
}

/* Retry requests parked because the engine was full. */
static void retry_busy(struct worker *w)
{
	struct treq *r, *list = w->busy_head;

	w->busy_head = w->busy_tail = NULL;
	while ((r = list)) {
		list = r->next_wait;
		r->conn->backend_inflight--;
		treq_process(r);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[64];
	uint64_t last_sweep = now_ms();
	char name[16];

	snprintf(name, sizeof(name), "rblk-worker%u", w->index);
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load(&w->stop)) {
		int n = epoll_wait(w->epfd, evs, 64, 1000);
		bool closing = false, sweep;

		if (n < 0 && errno != EINTR) {
			log_err("worker %u: epoll_wait: %s", w->index,
				strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == EPOLL_MAILBOX) {
				/* may close connections (removed exports,
				 * ones that failed at once): reap below */
				adopt_mailbox(w);
				closing = true;
			} else if (p == EPOLL_ENGINE) {
				w->engine->reap(w);
				retry_busy(w);
			} else {
				struct tconn *c = p;

				conn_progress(w, c);
				closing |= c->state == TCONN_CLOSING;
			}
		}
		w->engine->submit(w);
		/* every response of this iteration, one post per connection */
		worker_flush_sends(w);
		sweep = now_ms() - last_sweep >= 1000;
		if (closing || sweep)
			reap_closed(w, sweep);
		if (sweep)
			last_sweep = now_ms();
	}

	/* shutdown: disconnect everyone, let backend I/O drain, free */
	for (struct tconn *c = w->conns; c; c = c->next)
		tconn_fail(c, NULL);
	while (w->conns) {
		bool busy = false;

		for (struct tconn *c = w->conns; c; c = c->next)
			busy |= c->backend_inflight > 0;
		if (busy) {
			struct epoll_event ev;

			w->engine->submit(w);
			epoll_wait(w->epfd, &ev, 1, 100);
			w->engine->reap(w);
			retry_busy(w);
		}
		reap_closed(w, false);
	}
	return NULL;
}

int worker_start(struct worker *w, struct target *t, unsigned int index)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	memset(w, 0, sizeof(*w));
	w->tgt = t;
	w->index = index;
	w->engine = t->engine;
	pthread_mutex_init(&w->mailbox_lock, NULL);
	pthread_mutex_init(&w->conns_lock, NULL);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0) {
		ret = -errno;
		log_err("worker %u: epoll_create1: %s", index, strerror(errno));
		return ret;
	}
	w->mailbox_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->mailbox_fd < 0) {
		ret = -errno;
		log_err("worker %u: eventfd: %s", index, strerror(errno));
		goto out_close_epoll;
	}
	ret = w->engine->init(w, 1024);
	if (ret)
		goto out_close_mailbox;
	ev.data.ptr = EPOLL_MAILBOX;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->mailbox_fd, &ev))
		goto out_epoll_ctl;
	ev.data.ptr = EPOLL_ENGINE;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->engine->fd(w), &ev))
		goto out_epoll_ctl;
	ret = -pthread_create(&w->thread, NULL, worker_main, w);
	if (ret) {
		log_err("worker %u: pthread_create: %s", index, strerror(-ret));
		goto out_fini_engine;
	}
	return 0;

out_epoll_ctl:
	ret = -errno;
	log_err("worker %u: epoll_ctl: %s", index, strerror(errno));
out_fini_engine:
	w->engine->fini(w);
out_close_mailbox:
	close(w->mailbox_fd);
out_close_epoll:
	close(w->epfd);
	return ret;
}

void worker_stop(struct worker *w)
{
	uint64_t one = 1;

	atomic_store(&w->stop, true);
	if (write(w->mailbox_fd, &one, sizeof(one)) < 0)
		log_warn("worker %u: write mailbox: %s", w->index,
			 strerror(errno));
	pthread_join(w->thread, NULL);
	/* connections still in the mailbox were never started */
	while (w->mailbox) {
		struct tconn *c = w->mailbox;

		w->mailbox = c->next;
		tconn_free(c);
	}
	w->engine->fini(w);
	close(w->mailbox_fd);
	close(w->epfd);
	pthread_mutex_destroy(&w->mailbox_lock);
	pthread_mutex_destroy(&w->conns_lock);
}

void workers_check_removed(struct target *t)
{
	uint64_t one = 1;

	for (unsigned int i = 0; i < t->nr_workers; i++) {
		struct worker *w = &t->workers[i];

		atomic_store(&w->check_removed, true);
		if (write(w->mailbox_fd, &one, sizeof(one)) < 0)
			log_warn("worker %u: write mailbox: %s", w->index,
				 strerror(errno));
	}
}

void worker_adopt(struct worker *w, struct tconn *c)
{
	uint64_t one = 1;

	pthread_mutex_lock(&w->mailbox_lock);
	c->next = w->mailbox;
	w->mailbox = c;
	pthread_mutex_unlock(&w->mailbox_lock);
	if (write(w->mailbox_fd, &one, sizeof(one)) < 0)
		log_warn("worker %u: write mailbox: %s", w->index,
			 strerror(errno));
}
