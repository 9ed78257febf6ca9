/* SPDX-License-Identifier: MIT */
/*
 * librblk keep-alive and reconnect: the queue's timer (a timerfd watched
 * in its poll group), KEEPALIVE probes, losing a connection, reconnect
 * attempts with back-off, and giving up (ctrl-loss timeout). All of it
 * runs in the queue owner's rblk_poll()/rblk_queue_arm() calls.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "../common/freelist.h"
#include "../common/log.h"
#include "../common/util.h"
#include "lib_internal.h"
#include "lib_queue.h"

#define set_error lib_set_error

/* reconnect: the delay between attempts doubles up to this (or the delay) */
#define RECONNECT_DELAY_CAP_MS 10000u
/* loss/reconnect lines: a burst of LOG_BURST, then one per LOG_REFILL_MS */
#define LOG_BURST 5u
#define LOG_REFILL_MS 15000u

/*
 * Whether a loss or reconnect line may be logged now: a token bucket per
 * queue, so a target that breaks every connection costs a few lines a
 * minute, not thousands. *quiet: the lines left out since the last one.
 */
static bool loss_log_ok(struct rblk_queue *q, char *quiet, size_t len)
{
	uint64_t now = now_ms();

	if (!q->log_at) {
		q->log_tokens = LOG_BURST;
		q->log_at = now;
	}
	while (now - q->log_at >= LOG_REFILL_MS) {
		q->log_at += LOG_REFILL_MS;
		if (q->log_tokens < LOG_BURST)
			q->log_tokens++;
	}
	if (!q->log_tokens) {
		q->log_quiet++;
		return false;
	}
	q->log_tokens--;
	quiet[0] = 0;
	if (q->log_quiet)
		snprintf(quiet, len, " (%u such lines left out before)",
			 q->log_quiet);
	q->log_quiet = 0;
	return true;
}

/* ---- the queue's state ---------------------------------------------------
 */

/* bit t of queue_state_next[f]: f -> t is legal (enum queue_state) */
#define QS(s) (1u << (s))
static const unsigned int queue_state_next[] = {
    [QUEUE_CONNECTING] = QS(QUEUE_LIVE),
    [QUEUE_LIVE] = QS(QUEUE_DRAINING) | QS(QUEUE_LOST) | QS(QUEUE_FAILED),
    [QUEUE_DRAINING] = QS(QUEUE_LOST) | QS(QUEUE_FAILED),
    [QUEUE_LOST] = QS(QUEUE_LIVE) | QS(QUEUE_FAILED),
    [QUEUE_FAILED] = 0,
};
#undef QS

const char *lib_queue_state_str(enum queue_state s)
{
	static const char *const names[] = {
	    [QUEUE_CONNECTING] = "connecting", [QUEUE_LIVE] = "live",
	    [QUEUE_DRAINING] = "draining",     [QUEUE_LOST] = "lost",
	    [QUEUE_FAILED] = "failed",
	};

	return (unsigned int)s < ARRAY_SIZE(names) ? names[s] : "?";
}

bool lib_queue_state_legal(enum queue_state from, enum queue_state to)
{
	return (unsigned int)from < ARRAY_SIZE(queue_state_next) &&
	       (unsigned int)to < ARRAY_SIZE(queue_state_next) &&
	       (queue_state_next[from] & (1u << to));
}

/*
 * The one place a queue's state changes. An illegal change is a bug in
 * librblk (a loss handled twice, an attach without a connection): it is
 * logged and refused, and the caller leaves the queue as it is.
 */
bool lib_queue_set_state(struct rblk_queue *q, enum queue_state to)
{
	if (!lib_queue_state_legal(q->state, to)) {
		log_err("queue %u: refusing state change %s -> %s", q->index,
			lib_queue_state_str(q->state), lib_queue_state_str(to));
		return false;
	}
	log_debug("queue %u: %s -> %s", q->index, lib_queue_state_str(q->state),
		  lib_queue_state_str(to));
	q->state = to;
	return true;
}

void rblk_queue_stats(const struct rblk_queue *q, struct rblk_queue_stats *s)
{
	*s = q->stats;
}

void lib_timer_set(struct rblk_queue *q, uint64_t at_ms)
{
	struct itimerspec its = {0};

	q->timer_at = at_ms;
	if (at_ms) {
		/* absolute, on the clock now_ms() reads: fires when due */
		its.it_value.tv_sec = (time_t)(at_ms / 1000);
		its.it_value.tv_nsec = (long)(at_ms % 1000) * 1000000L;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	if (timerfd_settime(q->timer_fd, TFD_TIMER_ABSTIME, &its, NULL))
		log_warn("queue %u: timerfd_settime: %s", q->index,
			 strerror(errno));
}

/* Clear the timer fd's readiness; lib_queue_tick() runs the duty when due. */
void lib_timer_drain(struct rblk_queue *q)
{
	uint64_t buf;

	while (read(q->timer_fd, &buf, sizeof(buf)) > 0)
		;
}

void lib_ka_free(struct rblk_queue *q)
{
	struct ireq *rq = q->ka;

	if (!rq)
		return;
	q->ka = NULL;
	rq->state = IREQ_FREE;
	FREELIST_PUSH(q->free_tags, rq, next);
}

/* Give up for good: fail everything in flight and pending. */
void lib_queue_fail(struct rblk_queue *q, const char *why)
{
	struct io *io;

	if (q->state == QUEUE_FAILED || !lib_queue_set_state(q, QUEUE_FAILED))
		return;
	qp_drop(&q->qp);
	for (unsigned int t = 0; t < q->qd; t++)
		if (q->reqs[t].state != IREQ_FREE &&
		    q->reqs[t].state != IREQ_HELD && &q->reqs[t] != q->ka)
			q->stats.io_failed++;
	log_warn("queue %u (%s): %s", q->index, q->r->paths[q->path].str, why);
	if (q->xc)
		xp_disconnect(q->xc);
	if (q->timer_fd >= 0)
		lib_timer_set(q, 0);
	lib_ka_free(q);
	lib_tags_unhold(q);
	for (unsigned int t = 0; t < q->qd; t++)
		if (q->reqs[t].state != IREQ_FREE)
			lib_part_done(q, &q->reqs[t], -ENOTCONN);
	q->wait_head = q->wait_tail = NULL;
	while ((io = q->pend_head)) {
		q->pend_head = io->next;
		io->next_off = io->end;
		if (!io->result)
			io->result = -ENOTCONN;
		if (!io->parts_inflight)
			lib_io_complete(q, io);
	}
	q->pend_tail = NULL;
}

/*
 * The connection failed (transport error, protocol error, keep-alive
 * timeout, a command's deadline). Unless reconnecting is off
 * (ctrl_loss_timeout_s 0), drop it, keep every part that has not
 * completed for reissue on the next connection (a part is complete only
 * once its response - and for pull reads its RDMA READ - is in: an
 * unacknowledged write is sent again, an acknowledged one is on the
 * target already), except those that failed too often (io_retries):
 * they complete with -ETIMEDOUT or -EIO. Then schedule an attempt: at
 * once when the connection had proved stable (a new outage), else after
 * the back-off delay, the outage (and its loss timeout) going on.
 */
void lib_queue_lost(struct rblk_queue *q, const char *why)
{
	const struct rblk_opts *o = &q->r->opts;
	uint64_t now = now_ms(), next;
	unsigned int failed = 0, kept = 0;
	char quiet[64];

	if (lib_queue_down(q))
		return;
	if (!o->ctrl_loss_timeout_s && q->r->nr_paths < 2) {
		lib_queue_fail(q, why);
		return;
	}
	if (!lib_queue_set_state(q, QUEUE_LOST))
		return;
	if (q->unstable && now - q->live_at >= RBLK_STABLE_MS)
		lib_conn_proved(q); /* it lived long enough */
	q->stats.conn_lost++;
	if (loss_log_ok(q, quiet, sizeof(quiet)))
		log_warn("queue %u (%s): %s; reconnecting%s%s", q->index,
			 xp_peer_name(q->xc), why,
			 q->unstable ? "; the connection was not stable" : "",
			 quiet);
	lib_queue_drop_conn(q);
	lib_ka_free(q);
	lib_tags_unhold(q);
	for (unsigned int t = 0; t < q->qd; t++) {
		struct ireq *rq = &q->reqs[t];

		if (rq->state == IREQ_FREE)
			continue;
		if (o->io_retries >= 0 && ++rq->failures > o->io_retries) {
			/* rq->mr is on the group: kept */
			q->stats.io_failed++;
			failed++;
			lib_part_done(q, rq, rq->timed_out ? -ETIMEDOUT : -EIO);
			continue;
		}
		rq->state = IREQ_REISSUE; /* rq->mr is on the group: kept */
		rq->timed_out = false;
		kept++;
	}
	if (failed)
		log_warn(
		    "queue %u: %u command(s) failed after %d attempts each",
		    q->index, failed, o->io_retries + 1);
	q->stats.retries += kept;
	q->wait_head = q->wait_tail = NULL;
	lib_path_lost(q);
	if (!q->unstable) {
		/* a new outage: first attempt now, then the back-off */
		q->unstable = true;
		q->lost_at = now;
		q->attempts = 0;
		q->retry_delay_ms = o->reconnect_delay_ms > 0
					? (unsigned int)o->reconnect_delay_ms
					: 0;
		lib_timer_set(q, now);
		return;
	}
	/*
	 * The outage goes on: wait the next delay, as after a failed
	 * attempt, or until the loss timeout, which fails the queue then.
	 */
	next = now + MAX(q->retry_delay_ms, 1u);
	if (o->ctrl_loss_timeout_s > 0)
		next = MIN(next, q->lost_at +
				     (uint64_t)o->ctrl_loss_timeout_s * 1000u);
	lib_timer_set(q, next);
	q->retry_delay_ms =
	    MIN(MAX(q->retry_delay_ms * 2u, 1u),
		MAX(RECONNECT_DELAY_CAP_MS,
		    (unsigned int)MAX(o->reconnect_delay_ms, 0)));
}

/*
 * Deadlines: every command on the wire whose deadline passed is marked,
 * logged (the first, and how many) and the connection is dropped; the
 * marked ones fail with -ETIMEDOUT once out of retries (lib_queue_lost()).
 * true when it dropped the connection.
 */
static bool deadline_check(struct rblk_queue *q, uint64_t now)
{
	int to = q->r->opts.io_timeout_ms;
	struct ireq *first = NULL;
	unsigned int late = 0;
	char why[256];

	if (to <= 0 || now < q->to_at)
		return false;
	q->to_at = 0; /* lib_tick_next() sets the next one */
	for (unsigned int t = 0; t < q->qd; t++) {
		struct ireq *rq = &q->reqs[t];

		if (rq->state == IREQ_FREE || rq->state == IREQ_HELD ||
		    rq->state == IREQ_REISSUE || rq == q->ka ||
		    now < rq->deadline)
			continue;
		rq->timed_out = true;
		late++;
		if (!first || rq->deadline < first->deadline)
			first = rq;
	}
	if (!late)
		return false;
	q->stats.timeouts += late;
	snprintf(
	    why, sizeof(why),
	    "%s of %u bytes at %llu (tag %u) unanswered after %d ms (io-timeout), attempt %u of %d%s",
	    rblk_opcode_str(first->op), first->len,
	    (unsigned long long)first->offset, first->tag, to,
	    first->failures + 1u, q->r->opts.io_retries + 1,
	    late > 1 ? ", and more commands" : "");
	lib_queue_lost(q, why);
	return true;
}

/* ---- timer duties ----------------------------------------------------------
 */

bool lib_ka_send(struct rblk_queue *q)
{
	struct rblk_cmd cmd = {0};
	struct ireq *rq;

	if (q->ka || !(q->free_tags || q->held_tags) || !qp_take(&q->qp, 1))
		return false;
	rq = lib_tag_get(q);
	rq->io = NULL;
	q->ka = rq;
	cmd.tag = rq->tag;
	cmd.opcode = RBLK_OP_KEEPALIVE;
	lib_add_cmd(q, rq, &cmd, qp_wrid(WRID_CMD, 1, rq->tag));
	rq->state = IREQ_KA;
	lib_batch_flush(q); /* now, even if plugged: it is a probe */
	return true;
}

int64_t rblk_queue_refresh_size(struct rblk_queue *q, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)MAX(timeout_ms, 0);
	struct rblk_completion c;
	bool sent = false;

	if (q->inflight)
		return lib_set_error(
		    -EBUSY, "queue %u: refresh_size with %u I/Os not reaped",
		    q->index, q->inflight);
	for (;;) {
		struct pollfd pfd = {.fd = rblk_queue_fd(q), .events = POLLIN};
		uint64_t now;
		int n = rblk_poll(q, &c, 1, 0);

		if (n < 0)
			return n;
		/* a KEEPALIVE of the timer's may be out: ours goes after it */
		if (!lib_queue_down(q) && !q->ka) {
			if (sent || !(q->features & RBLK_F_RESIZE))
				return (int64_t)rblk_get_size(q->r);
			sent = lib_ka_send(q);
			continue;
		}
		now = now_ms();
		if (now >= deadline)
			return lib_set_error(
			    -ETIMEDOUT,
			    "queue %u: no answer about the size within %d ms",
			    q->index, timeout_ms);
		if (rblk_queue_arm(q))
			continue;
		if (poll(&pfd, 1, (int)MIN(deadline - now, 1000u)) < 0 &&
		    errno != EINTR)
			return lib_set_error(-errno, "poll: %s",
					     strerror(errno));
	}
}

/*
 * Every keepalive_ms while live: a queue that heard nothing since the last
 * tick sends a KEEPALIVE; one whose KEEPALIVE is still unanswered at the
 * next tick is dead. So a silent target is noticed within 3 * keepalive_ms.
 * With every tag busy no KEEPALIVE can go out; two silent ticks in a row
 * then count as dead (the target answers KEEPALIVE even while its disks
 * are busy, but not without a tag).
 */
static void keepalive_tick(struct rblk_queue *q, uint64_t now)
{
	int ka_ms = q->r->opts.keepalive_ms;
	char why[128];

	if (!ka_ms || now < q->ka_at) {
		/* not a keep-alive tick: one for the paths (lib_path_tick) */
	} else if (q->rx_seen) {
		q->rx_seen = false;
		q->stalled_ticks = 0;
	} else if (q->ka) {
		snprintf(why, sizeof(why),
			 "no answer to KEEPALIVE within %d ms", ka_ms);
		lib_queue_lost(q, why);
		return;
	} else if (lib_ka_send(q)) {
		if (lib_queue_down(q))
			return;
	} else if (++q->stalled_ticks >= 2) {
		snprintf(why, sizeof(why),
			 "every tag busy and nothing heard for %d ms",
			 2 * ka_ms);
		lib_queue_lost(q, why);
		return;
	}
	lib_timer_set(q, lib_tick_next(q, now));
}

/*
 * The next tick of a live queue: the keep-alive tick (ka_at, every
 * keepalive_ms), or sooner, every failback_ms, while the session is off
 * its preferred path (lib_path_tick() probes it and follows moves; with
 * failback off it follows every keepalive_ms, or every second without).
 */
uint64_t lib_tick_next(struct rblk_queue *q, uint64_t now)
{
	const struct rblk_opts *o = &q->r->opts;
	uint64_t next = 0;

	if (o->keepalive_ms > 0) {
		if (q->ka_at <= now)
			q->ka_at = now + (uint64_t)o->keepalive_ms;
		next = q->ka_at;
	}
	if (o->io_timeout_ms > 0) {
		/* deadlines are checked every quarter timeout, at most 1 s */
		if (q->to_at <= now)
			q->to_at = now + MAX(MIN((uint64_t)o->io_timeout_ms / 4,
						 1000u),
					     10u);
		if (!next || q->to_at < next)
			next = q->to_at;
	}
	if (q->r->nr_paths > 1) {
		uint64_t p =
		    now + (o->failback_ms ? (uint64_t)o->failback_ms : 1000u);

		if (!next || (p < next && (o->failback_ms || !o->keepalive_ms)))
			next = p;
	}
	return next;
}

/*
 * Answers after which trying again cannot help: the target is up and says
 * no. -ENOENT is NO_EXPORT: the export was removed (rblk-target ctl
 * remove-export --force closes its sessions this way) or the target came
 * back without it; -EACCES/-ENOKEY: authentication or the allow list.
 * With several paths only that path is skipped (lib_path_connect()).
 */
bool lib_refusal(int err)
{
	return err == -EPROTO || err == -EPROTONOSUPPORT || err == -EACCES ||
	       err == -EPERM || err == -EROFS || err == -ENOMEM ||
	       err == -ENOENT || err == -ENOKEY;
}

static void reconnect_attempt(struct rblk_queue *q, uint64_t now)
{
	struct rblk *r = q->r;
	struct rblk_opts o = r->opts;
	uint64_t give_up = 0, next;
	char why[600];
	int ret;

	if (o.ctrl_loss_timeout_s > 0) {
		give_up = q->lost_at + (uint64_t)o.ctrl_loss_timeout_s * 1000u;
		if (now >= give_up) {
			snprintf(
			    why, sizeof(why),
			    "no connection for %d s (ctrl-loss-timeout) after %u attempts; failing I/O",
			    o.ctrl_loss_timeout_s, q->attempts);
			lib_queue_fail(q, why);
			return;
		}
		/* an attempt may not outlast the loss timeout by much */
		if ((uint64_t)o.timeout_ms > give_up - now)
			o.timeout_ms = (int)MAX(give_up - now, 100u);
	}
	q->attempts++;
	ret = lib_path_connect(q, &o, why, sizeof(why));
	if (!ret) {
		char quiet[64];

		q->stats.reconnects++;
		if (loss_log_ok(q, quiet, sizeof(quiet)))
			log_warn(
			    "queue %u: reconnected to %s after %llu ms (%u attempts)%s",
			    q->index, r->paths[q->path].str,
			    (unsigned long long)(now_ms() - q->lost_at),
			    q->attempts, quiet);
		return;
	}
	/* several paths and ctrl-loss-timeout 0: one round, then give up */
	if (lib_refusal(ret) || !o.ctrl_loss_timeout_s) {
		lib_queue_fail(q, why);
		return;
	}
	log_debug("queue %u: reconnect attempt %u: %s", q->index, q->attempts,
		  why);
	next = now_ms() + q->retry_delay_ms;
	q->retry_delay_ms =
	    MIN(MAX(q->retry_delay_ms * 2u, 1u),
		MAX(RECONNECT_DELAY_CAP_MS,
		    (unsigned int)MAX(o.reconnect_delay_ms, 0)));
	lib_timer_set(q, give_up && give_up < next ? give_up : next);
}

/* Timer duties that are due: a keep-alive tick, or a reconnect attempt. */
void lib_queue_tick(struct rblk_queue *q)
{
	uint64_t now = now_ms();

	if (!q->timer_at || now < q->timer_at)
		return;
	lib_timer_drain(q);
	q->timer_at = 0;
	if (q->state == QUEUE_FAILED)
		return;
	if (q->state == QUEUE_LOST) {
		reconnect_attempt(q, now);
		return;
	}
	if (q->unstable && now - q->live_at >= RBLK_STABLE_MS)
		lib_conn_proved(q);
	if (deadline_check(q, now))
		return;
	if (!lib_path_tick(q, now))
		keepalive_tick(q, now);
}
