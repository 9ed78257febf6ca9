// SPDX-License-Identifier: MIT
/*
 * Commands over their QoS limits (qos.h): each waits in TREQ_THROTTLE on
 * its connection's FIFO, so a session's commands start in the order they
 * came; connections with waiters are on worker->qos_conns, and each turn
 * qos_serve() lets through what the buckets allow, one command of each
 * connection in turn. The worker sleeps no longer than the earliest
 * moment a bucket holds a token again (qos_sleep_ms()). A waiting
 * command holds no slot and never fails for waiting.
 */
#include "worker_int.h"

#include <string.h>

#include "../common/fifo.h"
#include "../common/util.h"

#include "export.h"
#include "qos.h"
#include "target.h"

void qos_bind(struct tconn *c)
{
	struct target *t = c->worker->tgt;

	c->qos[0] = c->exp ? &c->exp->qos : NULL;
	c->qos[1] = NULL;
	for (unsigned int i = 0; i < t->cfg.nr_hosts; i++)
		if (c->host[0] && !strcmp(t->cfg.hosts[i].name, c->host))
			c->qos[1] = &t->host_qos[i];
}

/* c starts or stops waiting: its limits' refills look at it (qos.h) */
static void count_waiting(struct tconn *c, int delta)
{
	for (int i = 0; i < 2; i++)
		if (c->qos[i])
			atomic_fetch_add(&c->qos[i]->waiting, delta);
}

static bool limited(const struct tconn *c)
{
	return (c->qos[0] && atomic_load(&c->qos[0]->on)) ||
	       (c->qos[1] && atomic_load(&c->qos[1]->on));
}

/*
 * Look again at when, or in QOS_RECHECK_NS at the latest: a limit raised
 * live (ctl set-qos) must not leave a command waiting out the old one.
 */
#define QOS_RECHECK_NS 100000000ull

static void wake_at(struct worker *w, uint64_t now, uint64_t wait)
{
	uint64_t when = now + (wait < QOS_RECHECK_NS ? wait : QOS_RECHECK_NS);

	if (!w->qos_wake_ns || when < w->qos_wake_ns)
		w->qos_wake_ns = when;
}

bool qos_hold(struct tconn *c, struct treq *r)
{
	struct worker *w = c->worker;
	uint64_t now, wait;

	if (!c->qos_head) {
		if (!limited(c))
			return false;
		now = now_ns();
		wait = qos_admit(c->qos, 2, r->cmd.opcode, r->cmd.length, now);
		if (!wait)
			return false;
		wake_at(w, now, wait);
	}
	r->state = TREQ_THROTTLE;
	r->next_qos = NULL;
	FIFO_PUSH(c->qos_head, c->qos_tail, r, next_qos);
	if (!c->qos_listed) {
		c->qos_listed = true;
		c->next_qos_conn = w->qos_conns;
		w->qos_conns = c;
		count_waiting(c, 1);
	}
	return true;
}

/* Let c's first waiting command go if its limits allow: true if it went. */
static bool serve_one(struct worker *w, struct tconn *c, uint64_t now)
{
	struct treq *r = c->qos_head;
	uint64_t wait;

	wait = qos_admit(c->qos, 2, r->cmd.opcode, r->cmd.length, now);
	if (wait) {
		wake_at(w, now, wait);
		return false;
	}
	(void)FIFO_POP(c->qos_head, c->qos_tail, next_qos);
	for (int i = 0; i < 2; i++) {
		if (!c->qos[i])
			continue;
		atomic_fetch_add(&c->qos[i]->throttled_cmds, 1);
		atomic_fetch_add(&c->qos[i]->throttled_ns, now - r->t_recv_ns);
	}
	treq_start(r);
	return true;
}

void qos_serve(struct worker *w)
{
	struct tconn **pp, *c;
	uint64_t now;
	bool went = true;

	if (!w->qos_conns)
		return;
	now = now_ns();
	if (w->qos_wake_ns > now)
		return;
	w->qos_wake_ns = 0;
	/* one command of each waiting connection per pass, in turn */
	while (went) {
		went = false;
		for (pp = &w->qos_conns; (c = *pp);) {
			if (c->qos_head && serve_one(w, c, now))
				went = true;
			if (c->qos_head) {
				pp = &c->next_qos_conn;
				continue;
			}
			*pp = c->next_qos_conn;
			c->qos_listed = false;
			count_waiting(c, -1);
		}
	}
}

int qos_sleep_ms(const struct worker *w, int max)
{
	uint64_t now, ms;

	if (!w->qos_conns)
		return max;
	now = now_ns();
	if (w->qos_wake_ns <= now)
		return 0;
	ms = (w->qos_wake_ns - now + 999999) / 1000000;
	return ms < (uint64_t)max ? (int)ms : max;
}

void qos_wait_drop(struct worker *w, struct tconn *c)
{
	struct tconn **pp;
	struct treq *r;

	while ((r = FIFO_POP(c->qos_head, c->qos_tail, next_qos)))
		r->state = TREQ_FREE;
	if (!c->qos_listed)
		return;
	for (pp = &w->qos_conns; *pp != c; pp = &(*pp)->next_qos_conn)
		;
	*pp = c->next_qos_conn;
	c->qos_listed = false;
	count_waiting(c, -1);
}
