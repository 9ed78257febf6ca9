/* SPDX-License-Identifier: MIT */
/*
 * Workers: each owns a poll group per transport (one PD, one CQ, one fd;
 * every connection of that transport on this worker is in it), a slot
 * pool registered in those groups with local write and MW bind only, and
 * one I/O engine, and runs its connections to completion (conn.c for
 * their login and teardown, io.c for their commands).
 *
 * One place to sleep: the worker's epoll set holds its group fds, the
 * engine's eventfd and the mailbox eventfd - a handful of fds, none per
 * connection. A turn reaps each group (at most TURN_BUDGET completions
 * per group, so a flooding peer cannot hold the worker), the engine,
 * serves the slot FIFO as slots come back, posts every connection's
 * batch and only then sleeps, after arming the groups.
 */
#include "worker_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#include "backend.h"
#include "engine.h"
#include "limits.h"
#include "target.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * Completions taken from one group per turn. The group delivers them in
 * arrival order, so a connection that floods gets no more than its share
 * of each turn; the rest waits for the next turn, taken at once (no sleep),
 * and the login deadlines and timers are checked between turns.
 *
 * Small on purpose: a turn's responses leave together at its end, and I/O
 * that the kernel finishes inside submit (the page cache, tmpfs, brd)
 * makes a turn that took a whole queue depth of commands answer none of
 * them before the last is done, while the initiator, and whatever sits
 * behind it (`rblk nbd`'s client), waits with nothing to do. Taking 16 at
 * a time lets the first responses go while the target works on the rest,
 * for one more sendmsg and io_uring_enter per 16 (docs/BENCHMARKS.md,
 * "The turn budget").
 */
#define TURN_BUDGET 16
#define POLL_BATCH TURN_BUDGET
/* A connection whose flushed sends never complete is freed after this. */
#define CLOSE_DRAIN_MS 10000
/*
 * How often a worker whose pool lends anything looks for sessions that
 * hold windows past window_timeout: a session waiting behind them waits
 * at most window_timeout + this.
 */
#define HOLD_SWEEP_MS 250

/* Time a turn may spend joining new connections (join_handoffs()). */
#define JOIN_TURN_NS 2000000ull

#define EPOLL_MAILBOX ((void *)1)
#define EPOLL_ENGINE ((void *)2)

/* ---- groups ----------------------------------------------------------------
 */

/*
 * Keep-mode hooks of w's pool (common/slot_pool.h), set once a group's
 * windows reach their whole region: each block of the pool is its own
 * region in every such group, registered while the block exists and
 * deregistered when it is split or merged, so the regions never overlap
 * and each page is pinned once per group. A registration that fails
 * leaves NULL: block_region() in io.c tries again when the block is lent.
 */
static void pool_block_regions(struct worker *w, void *addr, unsigned int o,
			       bool form)
{
	for (unsigned int g = 0; g < w->nr_groups; g++) {
		struct wgroup *wg = &w->groups[g];
		struct xp_mr **mrp;

		if (!wg->block_mr[o])
			continue;
		mrp = block_mr_of(w, wg, addr, o);
		if (!form) { /* free: no window is bound on it */
			xp_dereg_mr(*mrp);
			*mrp = NULL;
		} else if (!*mrp &&
			   xp_group_reg_mr(wg->g, addr, (size_t)SLOT_PAGE << o,
					   XP_ACCESS_LOCAL_WRITE |
					       XP_ACCESS_MW_BIND,
					   mrp)) {
			*mrp = NULL;
		}
	}
}

static void pool_block_form(void *arg, void *addr, unsigned int o)
{
	pool_block_regions(arg, addr, o, true);
}

static void pool_block_drop(void *arg, void *addr, unsigned int o)
{
	pool_block_regions(arg, addr, o, false);
}

/*
 * The pool's regions in wg: one region over the whole pool, or, where a
 * window reaches its whole region (rxe), one region per buddy block and
 * none over the pool (docs/ARCHITECTURE.md "Slot pool"). Local write and
 * MW bind only: no remote access by the pool's own keys, windows only.
 */
static int group_reg_pool(struct worker *w, struct wgroup *wg)
{
	int ret;

	if (!wg->g->mw_reaches_region) {
		ret = xp_group_reg_mr(wg->g, w->pool_mem, w->pool_len,
				      XP_ACCESS_LOCAL_WRITE | XP_ACCESS_MW_BIND,
				      &wg->pool_mr);
		if (ret)
			log_err(
			    "worker %u: registering the slot pool (%zu bytes) on %s: %s",
			    w->index, w->pool_len, wg->ops->name,
			    strerror(-ret));
		return ret;
	}
	for (unsigned int o = 0; o <= SLOT_MAX_ORDER; o++) {
		size_t n = (w->pool.pages >> o) + 1;

		wg->block_mr[o] = calloc(n, sizeof(*wg->block_mr[o]));
		if (!wg->block_mr[o])
			return -ENOMEM;
	}
	return 0;
}

/* w's group for transport ops, created on first use. NULL on failure. */
static struct wgroup *group_for(struct worker *w, const struct xp_ops *ops)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct wgroup *wg;
	int ret;

	for (unsigned int i = 0; i < w->nr_groups; i++)
		if (w->groups[i].ops == ops)
			return &w->groups[i];
	if (w->nr_groups == WORKER_MAX_GROUPS)
		return NULL;
	wg = &w->groups[w->nr_groups];
	memset(wg, 0, sizeof(*wg));
	wg->ops = ops;
	ret = xp_group_create(ops, &wg->g);
	if (ret) {
		log_err("worker %u: creating a %s poll group: %s", w->index,
			ops->name, strerror(-ret));
		return NULL;
	}
	if (group_reg_pool(w, wg))
		goto out_destroy_group;
	ev.data.ptr = wg;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, xp_group_fd(wg->g), &ev)) {
		log_err("worker %u: epoll_ctl: %s", w->index, strerror(errno));
		goto out_destroy_group;
	}
	w->nr_groups++;
	if (wg->g->mw_reaches_region) { /* register the blocks there are */
		if (w->pool.keep)
			slot_pool_form_free(&w->pool);
		else
			slot_pool_keep_blocks(&w->pool, pool_block_form,
					      pool_block_drop, w);
	}
	log_debug("worker %u: %s poll group, slot pool of %zu bytes%s",
		  w->index, ops->name, w->pool_len,
		  wg->g->mw_reaches_region ? ", a region per block" : "");
	return wg;

out_destroy_group:
	xp_group_destroy(wg->g); /* its regions go with it */
	wg->g = NULL;
	for (unsigned int o = 0; o <= SLOT_MAX_ORDER; o++) {
		free(wg->block_mr[o]);
		wg->block_mr[o] = NULL;
	}
	return NULL;
}

/* ---- new connections: the main thread hands them over -------------------- */

/*
 * A connection request on its way from the main thread to a worker, in
 * no poll group yet: the main thread checked its private data and
 * admitted it (limits); the worker joins it to its own group and sets it
 * up, as SPDK hands a new qpair to its poll group's thread.
 */
struct conn_handoff {
	struct conn_handoff *next;
	struct xp_request *req;
	struct lim_conn *lim; /* its admission, the worker's from now on */
	const char *url;      /* the listener's, for messages */
	uint16_t qd;	      /* asked for, capped at max_queue_depth */
};

static void mailbox_kick(struct worker *w)
{
	uint64_t one = 1;

	if (write(w->mailbox_fd, &one, sizeof(one)) < 0)
		log_ratelimited(LOG_WARN, "worker %u: write mailbox: %s",
				w->index, strerror(errno));
}

/* Main thread: h onto w's inbox (lock-free), then wake w. */
static void mailbox_post(struct worker *w, struct conn_handoff *h)
{
	h->next = atomic_load_explicit(&w->inbox, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(
	    &w->inbox, &h->next, h, memory_order_release, memory_order_relaxed))
		;
	mailbox_kick(w);
}

static void handoff_reject(struct worker *w, struct conn_handoff *h, int st)
{
	char rej[RBLK_CM_REJ_SIZE];

	xp_request_reject(h->req, rej, rblk_cm_rej_encode(rej, st));
	limits_release(&w->tgt->cfg, h->lim);
}

int worker_accept(struct worker *w, struct xp_listener *l, const char *url)
{
	struct target *t = w->tgt;
	char priv[XP_PRIV_MAX], rej[RBLK_CM_REJ_SIZE];
	size_t priv_len = sizeof(priv);
	struct conn_handoff *h;
	struct xp_request *r;
	uint16_t qd;
	int st, ret;

	ret = xp_take_request(l, &r, priv, &priv_len);
	if (ret) {
		if (ret != -EAGAIN)
			log_warn("%s: taking a connection request failed: %s",
				 url, strerror(-ret));
		return ret;
	}
	st = rblk_cm_req_decode(priv, priv_len, &qd);
	if (st) {
		log_warn("%s: rejecting %s: %s", url, xp_request_peer_name(r),
			 rblk_status_str(st));
		xp_request_reject(r, rej, rblk_cm_rej_encode(rej, st));
		return 0; /* take the next one */
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		xp_request_reject(r, rej,
				  rblk_cm_rej_encode(rej, RBLK_S_NO_RESOURCES));
		return 0;
	}
	h->lim = limits_admit(&t->cfg, xp_request_peer_name(r), w);
	if (!h->lim) {
		xp_request_reject(r, rej, rblk_cm_rej_encode(rej, RBLK_S_BUSY));
		free(h);
		return 0;
	}
	h->req = r;
	h->url = url;
	h->qd = (uint16_t)MIN(qd, t->cfg.max_queue_depth);
	mailbox_post(w, h);
	return 0;
}

/* Worker thread: h's request becomes a connection of w's group. */
static void handoff_join(struct worker *w, struct conn_handoff *h)
{
	struct target *t = w->tgt;
	char rej[RBLK_CM_REJ_SIZE];
	struct xp_conn_attr attr;
	struct xp_conn *xc;
	struct wgroup *wg;
	struct tconn *c;
	int ret;

	/*
	 * Evicted from the pending table for a newcomer while it waited
	 * here (the table gave its count back, and close_evicted() has not
	 * seen it): refused as the table would have refused it.
	 */
	if (limits_evicted(h->lim)) {
		log_debug("%s: %s evicted from the pending table before its "
			  "accept",
			  h->url, xp_request_peer_name(h->req));
		handoff_reject(w, h, RBLK_S_BUSY);
		return;
	}
	wg = group_for(w, h->req->ops);
	if (!wg) {
		handoff_reject(w, h, RBLK_S_NO_RESOURCES);
		return;
	}
	/* no queue yet: the request's queue depth sizes it (below) */
	ret = xp_request_join(h->req, wg->g, NULL, &xc);
	if (ret) { /* refused by the transport */
		log_warn("%s: taking a connection request failed: %s", h->url,
			 strerror(-ret));
		limits_release(&t->cfg, h->lim);
		return;
	}
	/*
	 * The queue and its share of the group's CQ for the depth this
	 * session asked for (the login settles on no more): a CQ at the
	 * device's limit refuses the session, telling the initiator why.
	 */
	tconn_attr(h->qd, t->cfg.max_io, &attr);
	ret = xp_setup_queue(xc, &attr);
	if (ret) {
		log_warn("%s: rejecting %s (queue depth %u): %s", h->url,
			 xp_peer_name(xc), h->qd,
			 ret == -ENOSPC ? "its poll group's CQ is full"
					: strerror(-ret));
		xp_reject(xc, rej,
			  rblk_cm_rej_encode(rej, RBLK_S_NO_RESOURCES));
		limits_release(&t->cfg, h->lim);
		return;
	}
	c = tconn_new(w, wg, xc, h->qd, h->lim);
	if (c) {
		pthread_mutex_lock(&w->conns_lock);
		c->next = w->conns;
		w->conns = c;
		w->nr_conns++;
		pthread_mutex_unlock(&w->conns_lock);
	}
}

/* The requests on w's inbox, oldest first; NULL when it is empty. */
static struct conn_handoff *inbox_take(struct worker *w)
{
	struct conn_handoff *h, *next, *list = NULL;

	if (!atomic_load_explicit(&w->inbox, memory_order_relaxed))
		return NULL;
	h = atomic_exchange_explicit(&w->inbox, NULL, memory_order_acquire);
	for (; h; h = next) { /* pushed newest first */
		next = h->next;
		h->next = list;
		list = h;
	}
	return list;
}

/*
 * Worker thread, every turn (a busy worker does not sleep to see the
 * mailbox fd), after the mailbox fd was read: a request posted after
 * this look wakes the next sleep.
 *
 * The inbox joins the worker's backlog, oldest first, and a turn joins
 * requests from it for at most JOIN_TURN_NS (one at least); the rest wait
 * for the next turn, which comes at once (*more). A join costs a QP, a
 * registration and a queue depth of receives: about 0.1 ms on a host, but
 * 0.1-0.5 s in a TCG guest over rxe. Joining a whole burst in one turn
 * (every queue of 32 mapped volumes reconnecting after a stall) kept the
 * connections already accepted from their ESTABLISHED and LOGIN for
 * longer than the initiators wait, so all of them timed out, tried
 * again, and the target then set up requests their initiators had given
 * up (rdma_create_qp: Invalid argument): a storm that needed three rounds
 * to settle, or failed I/O after the ctrl-loss timeout.
 */
static void join_handoffs(struct worker *w, bool *more)
{
	struct conn_handoff *h, *list = inbox_take(w);
	uint64_t t0;

	if (list) {
		if (w->joins_tail)
			w->joins_tail->next = list;
		else
			w->joins = list;
		for (h = list; h->next; h = h->next)
			;
		w->joins_tail = h;
	}
	if (!w->joins)
		return;
	t0 = now_ns();
	do {
		h = w->joins;
		w->joins = h->next;
		if (!w->joins)
			w->joins_tail = NULL;
		handoff_join(w, h);
		free(h);
	} while (w->joins && now_ns() - t0 < JOIN_TURN_NS);
	if (w->joins)
		*more = true;
}

/*
 * A live session that sent nothing for idle_timeout seconds goes; one
 * whose commands wait on us (for a slot, QoS, the backend) is not idle,
 * whatever it sends. One that holds pool memory meanwhile is bounded by
 * window_timeout instead, keep-alives or not (slot_held_too_long()).
 */
static bool idle_too_long(const struct worker *w, const struct tconn *c,
			  uint64_t now)
{
	unsigned int s = w->tgt->cfg.idle_timeout;

	return s && c->state == TCONN_LIVE && !c->slot_head && !c->qos_head &&
	       !c->backend_inflight &&
	       now - c->last_rx_ms > (uint64_t)s * 1000u;
}

/*
 * A session that holds slot windows without returning them is dropped,
 * naming it, so the pool it holds serves everyone else again; counted
 * in its export's stats (ctl stats, /metrics).
 */
static void drop_holder(struct worker *w, struct tconn *c, uint64_t now)
{
	char why[256];

	if (!slot_held_too_long(c, now, why, sizeof(why)))
		return;
	stat_inc(&c->exp->wstats[w->index].window_timeouts, 1);
	log_warn("conn %llu (%s, host %s, export %s): window timeout",
		 (unsigned long long)c->id, c->peer, c->host, c->exp->name);
	tconn_fail(c, why);
}

static bool pool_lent(const struct worker *w)
{
	return w->pool.free_pages < w->pool.pages;
}

/* Every HOLD_SWEEP_MS while the pool lends anything: drop_holder(). */
static void sweep_holders(struct worker *w)
{
	uint64_t now = now_ms();

	for (struct tconn *c = w->conns; c; c = c->next)
		drop_holder(w, c, now);
}

/* ---- the worker thread ------------------------------------------------------
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

/*
 * Close the pending connections the limits evicted for newcomers (only
 * marked there: they are ours). One line for all of them: a flood
 * evicts thousands.
 */
static void close_evicted(struct worker *w)
{
	unsigned int n = 0;

	for (struct tconn *c = w->conns; c; c = c->next) {
		if (c->state != TCONN_LOGIN || !limits_evicted(c->adm))
			continue;
		log_debug("conn %llu (%s): evicted from the pending table",
			  (unsigned long long)c->id, c->peer);
		tconn_fail(c, NULL);
		n++;
	}
	if (n)
		log_ratelimited(
		    LOG_INFO,
		    "worker %u: closed %u connections evicted from the pending table (%llu in all)",
		    w->index, n, (unsigned long long)limits_evictions());
}

void worker_kick_evicted(struct worker *w)
{
	atomic_store(&w->check_evicted, true);
	mailbox_kick(w);
}

static void read_mailbox(struct worker *w)
{
	uint64_t cnt;

	if (read(w->mailbox_fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		log_warn("worker %u: read mailbox: %s", w->index,
			 strerror(errno));
	if (atomic_exchange(&w->check_removed, false))
		close_removed(w);
	if (atomic_exchange(&w->check_evicted, false))
		close_evicted(w);
}

/* Closed, no backend I/O left, push slots back (or CLOSE_DRAIN_MS gone). */
static bool reapable(const struct tconn *c, uint64_t now)
{
	return c->state == TCONN_CLOSING && !c->backend_inflight &&
	       (!c->push_inflight || now - c->closing_ms > CLOSE_DRAIN_MS);
}

/*
 * Free the connections that are reapable(). With budget, like joins, for
 * at most JOIN_TURN_NS a turn (a teardown is a QP, an id, regions and
 * windows): the rest next turn, at once (w->reap_more).
 */
static void reap_closed(struct worker *w, bool check_login_timeouts,
			bool budget)
{
	struct tconn **pp = &w->conns, *c;
	uint64_t now = now_ms(), t0 = now_ns();

	w->reap_more = false;
	worker_flush_sends(w); /* nothing freed stays on the flush list */
	while ((c = *pp)) {
		if (check_login_timeouts && tconn_login_expired(c, now))
			tconn_fail(
			    c,
			    limits_pressure()
				? "no login within 2 s (pending table under pressure)"
				: "no login within 10 s");
		if (check_login_timeouts && idle_too_long(w, c, now)) {
			char why[64];

			snprintf(why, sizeof(why),
				 "idle for %u s (idle_timeout)",
				 w->tgt->cfg.idle_timeout);
			tconn_fail(c, why);
		}
		if (reapable(c, now) && budget &&
		    now_ns() - t0 >= JOIN_TURN_NS) {
			w->reap_more = true;
		} else if (reapable(c, now)) {
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

/*
 * Reap up to TURN_BUDGET completions of wg. Returns how many it handled
 * (TURN_BUDGET: more may be waiting, do not sleep), and sets *closing
 * when a connection closed.
 */
static unsigned int group_progress(struct worker *w, struct wgroup *wg,
				   bool *closing)
{
	struct xp_wc wc[POLL_BATCH];
	unsigned int budget = TURN_BUDGET;
	int n;

	while (budget) {
		n = xp_group_poll(wg->g, wc, (int)MIN(budget, POLL_BATCH));
		if (n < 0) {
			log_err("worker %u: %s group poll: %s", w->index,
				wg->ops->name, strerror(-n));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct tconn *c;

			if (!wc[i].conn) /* a watched fd: we watch none */
				continue;
			c = wc[i].conn->user;
			tconn_handle_wc(w, c, &wc[i]);
			*closing |= c->state == TCONN_CLOSING;
		}
		if (n == 0)
			break;
		budget -= (unsigned int)n;
	}
	return TURN_BUDGET - budget;
}

/*
 * The sleep protocol (transport.h): arm every group, reap once more.
 * True when all is quiet; anything reaped here (new commands for the
 * engine, responses to post) means another turn first.
 */
static bool groups_armed(struct worker *w, bool *closing)
{
	bool quiet = true;

	for (unsigned int i = 0; i < w->nr_groups; i++) {
		if (xp_group_arm(w->groups[i].g) > 0)
			quiet = false;
		if (group_progress(w, &w->groups[i], closing))
			quiet = false;
	}
	return quiet;
}

static void worker_turn(struct worker *w, struct epoll_event *evs, int n,
			bool *more, bool *closing)
{
	for (int i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;

		if (p == EPOLL_MAILBOX) {
			/* may close connections (removed exports) */
			read_mailbox(w);
			*closing = true;
		} else if (p == EPOLL_ENGINE) {
			w->engine->reap(w);
			retry_busy(w);
		}
	}
	join_handoffs(w, more);
	/* every group, every turn: a wake-up for one may serve all */
	for (unsigned int i = 0; i < w->nr_groups; i++)
		if (group_progress(w, &w->groups[i], closing) == TURN_BUDGET)
			*more = true;
	/* an engine that can tell (no system call) is reaped only with work */
	if (!w->engine->ready || w->engine->ready(w)) {
		w->engine->reap(w);
		retry_busy(w);
	}
}

/*
 * --poll-spin-us: before sleeping, poll the groups, the engine and the
 * inbox for up to w->spin_us, unless the back-off (common/spin.h) says to
 * skip it. True when something came: take a turn instead of sleeping. At QD1
 * the next command comes a few microseconds after the response left, and
 * catching it here saves a sleep and a cross-CPU wake-up (docs/BENCHMARKS.md,
 * "Polling before sleeping").
 */
struct worker_spin_arg {
	struct worker *w;
	bool *closing;
};

static int worker_spin_once(void *arg)
{
	struct worker_spin_arg *a = arg;
	struct worker *w = a->w;
	bool found = false;

	for (unsigned int i = 0; i < w->nr_groups; i++)
		if (group_progress(w, &w->groups[i], a->closing))
			found = true;
	if (w->engine->ready && w->engine->ready(w))
		found = true;
	if (w->joins || atomic_load_explicit(&w->inbox, memory_order_relaxed))
		found = true; /* a new connection */
	return found ? 1 : 0;
}

static bool worker_spin(struct worker *w, bool *closing)
{
	struct worker_spin_arg a = {.w = w, .closing = closing};

	if (!w->spin_us || !w->nr_conns)
		return false;
	return spin_run(&w->spin, w->spin_us, worker_spin_once, &a);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[WORKER_MAX_GROUPS + 2];
	uint64_t last_sweep = now_ms(), last_hold = last_sweep;
	bool more = true;
	char name[16];

	snprintf(name, sizeof(name), "rblk-worker%u", w->index);
	pthread_setname_np(pthread_self(), name);
	/* the engine's first use by its only issuer */
	if (w->engine->enable(w))
		log_err("worker %u: the %s engine cannot start: disk I/O fails",
			w->index, w->engine->name);
	while (!atomic_load(&w->stop)) {
		bool closing = false, sweep;
		int n = 0;

		/* sleep only when every group is armed and empty */
		if (!more && groups_armed(w, &closing) && !closing &&
		    !worker_spin(w, &closing))
			n = epoll_wait(w->epfd, evs, ARRAY_SIZE(evs),
				       qos_sleep_ms(w, pool_lent(w)
							   ? HOLD_SWEEP_MS
							   : 1000));
		if (n < 0 && errno != EINTR) {
			log_err("worker %u: epoll_wait: %s", w->index,
				strerror(errno));
			break;
		}
		more = false;
		w->now_ms = now_ms();
		worker_turn(w, evs, n > 0 ? n : 0, &more, &closing);
		qos_serve(w);
		w->engine->submit(w);
		/*
		 * I/O the kernel finished inside submit (the page cache, tmpfs)
		 * completes in this turn: its response leaves with the others
		 * instead of after a sleep and a wake-up on the engine's fd.
		 */
		if (w->engine->ready && w->engine->ready(w)) {
			w->engine->reap(w);
			retry_busy(w);
			w->engine->submit(w);
		}
		/* every response of this turn, one post per connection */
		worker_flush_sends(w);
		if (pool_lent(w) && now_ms() - last_hold >= HOLD_SWEEP_MS) {
			sweep_holders(w);
			last_hold = now_ms();
			closing = true;
		}
		sweep = now_ms() - last_sweep >= 1000;
		if (closing || sweep || w->reap_more)
			reap_closed(w, sweep, true);
		if (w->reap_more)
			more = true;
		if (sweep)
			last_sweep = now_ms();
	}

	/* shutdown: disconnect everyone, let backend I/O drain, free */
	for (struct tconn *c = w->conns; c; c = c->next)
		tconn_fail(c, NULL);
	while (w->conns) {
		bool busy = false, closing = false;

		for (struct tconn *c = w->conns; c; c = c->next)
			busy |= c->backend_inflight > 0;
		if (busy) {
			struct epoll_event ev;

			w->engine->submit(w);
			epoll_wait(w->epfd, &ev, 1, 100);
			w->engine->reap(w);
			retry_busy(w);
		}
		for (unsigned int i = 0; i < w->nr_groups; i++)
			group_progress(w, &w->groups[i], &closing);
		reap_closed(w, false, false);
		if (w->conns && !busy)
			usleep(10000); /* flushed sends still to come */
	}
	/* registrations are the ring's issuer's to change (engine_uring.c) */
	if (w->pool_buf_index >= 0)
		w->engine->unregister_buf(w, w->pool_buf_index);
	w->pool_buf_index = -1;
	return NULL;
}

/*
 * Whether no export at start does I/O through the engine (and there is
 * one: RAM, rbd, mmap): such a target does no engine I/O until an export
 * is added, so its workers make the engine's fixed buffer then, not at
 * start (worker_pool_buf()).
 */
static bool no_engine_io(const struct target *t)
{
	for (const struct export *e = t->exports; e; e = e->next)
		if (e->ops->flags & BACKEND_F_ENGINE)
			return false;
	return t->exports;
}

/*
 * Fault the pool in without pinning it: a RAM-only target's memory is
 * then the same at start as where the engine's fixed buffer brings the
 * pages in, and a session's first commands do not fault.
 */
static void pool_populate(struct worker *w)
{
	if (madvise(w->pool_mem, w->pool_len, MADV_POPULATE_WRITE))
		memset(w->pool_mem, 0, w->pool_len); /* before Linux 5.14 */
}

/* The pool of worker index: the target's total, split evenly, at least max_io.
 */
static size_t pool_share(const struct target *t)
{
	size_t share = (size_t)(t->cfg.slot_pool / t->nr_workers);

	share = (share + t->cfg.max_io - 1) / t->cfg.max_io * t->cfg.max_io;
	return MAX(share, (size_t)t->cfg.max_io);
}

/*
 * What one session, and the sessions of one source address, may hold of
 * w's pool (session_pool_share percent, twice that for a host), never
 * less than one command of max_io; how long a peer may keep a window.
 */
static void pool_shares(struct worker *w, const struct target *t)
{
	uint64_t one = slot_pool_run_bytes(t->cfg.max_io);
	uint64_t pct = t->cfg.session_pool_share;

	w->share_session = MAX(w->pool_len * pct / 100, one);
	w->share_host =
	    MAX(w->pool_len * MIN(2 * pct, 100) / 100, w->share_session);
	w->window_timeout_ms = (uint64_t)t->cfg.window_timeout * 1000u;
}

int worker_start(struct worker *w, struct target *t, unsigned int index)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ret;

	memset(w, 0, sizeof(*w));
	w->tgt = t;
	w->index = index;
	w->spin_us = t->cfg.poll_spin_us;
	w->engine = t->engine;
	w->pool_buf_index = POOL_BUF_UNTRIED;
	pthread_mutex_init(&w->conns_lock, NULL);
	w->pool_len = pool_share(t);
	if (posix_memalign(&w->pool_mem, SLOT_PAGE, w->pool_len)) {
		w->pool_mem = NULL;
		log_err("worker %u: no memory for a slot pool of %zu bytes",
			index, w->pool_len);
		return -ENOMEM;
	}
	/*
	 * Not touched here: faulting in a large pool at start takes seconds
	 * on a loaded virtual machine. Pages come in as slots are used
	 * (rdma's registrations pin them all, io_uring's fixed buffer too:
	 * worker_pool_buf()).
	 */
	ret = slot_pool_init(&w->pool, w->pool_mem, w->pool_len);
	if (ret)
		goto out_free_pool;
	w->page_owner = calloc(w->pool.pages, sizeof(*w->page_owner));
	if (!w->page_owner) {
		ret = -ENOMEM;
		goto out_fini_pool;
	}
	pool_shares(w, t);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0) {
		ret = -errno;
		log_err("worker %u: epoll_create1: %s", index, strerror(errno));
		goto out_fini_pool;
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
	/* the pool's pages in memory now, as the fixed buffer brings them */
	if (no_engine_io(t))
		pool_populate(w);
	else
		worker_pool_buf(w);
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
	if (w->pool_buf_index >= 0)
		w->engine->unregister_buf(w, w->pool_buf_index);
	w->engine->fini(w);
out_close_mailbox:
	close(w->mailbox_fd);
out_close_epoll:
	close(w->epfd);
out_fini_pool:
	free(w->page_owner);
	slot_pool_fini(&w->pool);
out_free_pool:
	free(w->pool_mem);
	return ret;
}

int worker_pool_buf(struct worker *w)
{
	int ret;

	if (w->pool_buf_index != POOL_BUF_UNTRIED)
		return w->pool_buf_index;
	ret = w->engine->register_buf(w, w->pool_mem, w->pool_len);
	w->pool_buf_index = ret >= 0 ? ret : -1;
	return w->pool_buf_index;
}

void worker_stop(struct worker *w)
{
	struct conn_handoff *h, *list;

	atomic_store(&w->stop, true);
	mailbox_kick(w);
	pthread_join(w->thread, NULL);
	/* handed over too late: refused before the listener goes */
	for (list = w->joins; (h = list); free(h)) {
		list = h->next;
		handoff_reject(w, h, RBLK_S_SHUTDOWN);
	}
	w->joins = w->joins_tail = NULL;
	for (list = inbox_take(w); (h = list); free(h)) {
		list = h->next;
		handoff_reject(w, h, RBLK_S_SHUTDOWN);
	}
	for (unsigned int i = 0; i < w->nr_groups; i++) {
		xp_group_destroy(w->groups[i].g); /* the pool's MRs with it */
		for (unsigned int o = 0; o <= SLOT_MAX_ORDER; o++)
			free(w->groups[i].block_mr[o]);
	}
	w->engine->fini(w); /* the pool's registration went on the thread */
	close(w->mailbox_fd);
	close(w->epfd);
	slot_pool_fini(&w->pool);
	free(w->page_owner);
	free(w->pool_mem);
	pthread_mutex_destroy(&w->conns_lock);
}

void workers_check_removed(struct target *t)
{
	for (unsigned int i = 0; i < t->nr_workers; i++) {
		struct worker *w = &t->workers[i];

		atomic_store(&w->check_removed, true);
		mailbox_kick(w);
	}
}
