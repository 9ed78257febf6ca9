/* SPDX-License-Identifier: MIT */
/*
 * Connection and session limits (docs/RELIABILITY.md): connections not yet
 * logged in ("pending": accepted, no LOGIN granted yet) and live sessions,
 * each in all and per source address. The main thread admits connections,
 * workers turn them into sessions and every connection gives back what it
 * held when it is freed; one mutex, never on the command path.
 *
 * Half-open connections. A full pending table does not refuse the
 * newcomer: it evicts the oldest pending connection that has been here at
 * least LIM_EVICT_GRACE_MS, taking the least valuable first: one that has
 * sent nothing (SILENT), then one that has sent its HELLO and is, say,
 * authenticating (TALKING). Connections from a host that holds a session
 * or logged in within LIM_KNOWN_MS (KNOWN: reconnects, more queues of a
 * host already in) are evicted only for another known host's newcomer,
 * so a flood from addresses that never log in cannot keep them out. The
 * victim belongs to a worker: it is only marked here (evicted) and that
 * worker told through its mailbox (worker_kick_evicted()); the worker
 * closes it. Its pending count is given back at once, so the newcomer
 * takes its place. While the table is three quarters full ("pressure")
 * the workers close pending connections after LOGIN_PRESSURE_MS instead
 * of the full login limit.
 */
#include "limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../config/config.h"

#include "worker.h"

/* a pending connection younger than this is not evicted for a newcomer */
#define LIM_EVICT_GRACE_MS 250
/* a host that logged in this recently is "known" (reconnects) */
#define LIM_KNOWN_MS (10u * 60u * 1000u)

struct host_count {
	char addr[64];
	unsigned int pending, sessions;
	uint64_t last_login_ms; /* 0: never */
	struct host_count *next;
};

enum lim_class {
	LIM_SILENT,  /* nothing received yet, host not known */
	LIM_TALKING, /* sent a first message, host not known */
	LIM_KNOWN,   /* its host holds or held a session lately */
	LIM_NR_CLASSES,
};

/*
 * One connection's admission (limits_admit()), owned by the connection
 * and freed by limits_release(). Everything but evicted is under lock;
 * host is valid while pending or session is set.
 */
struct lim_conn {
	struct host_count *host;
	struct worker *w;	      /* told when this connection is evicted */
	struct lim_conn *prev, *next; /* on its class's list while pending */
	enum lim_class cls;
	bool pending, session;
	uint64_t since_ms;   /* admitted */
	atomic_bool evicted; /* marked for its worker to close */
};

struct lim_list {
	struct lim_conn *head, *tail; /* oldest first */
};

#define HOST_BUCKETS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_count *buckets[HOST_BUCKETS];
static unsigned int total_pending, total_sessions;
static struct lim_list classes[LIM_NR_CLASSES];
static atomic_bool pressure;
static atomic_uint_fast64_t nr_evicted;
static uint64_t last_prune_ms;

/*
 * "tcp 192.0.2.1:41234" -> "192.0.2.1" (the address, without the port);
 * a unix peer ("unix pid 7 uid 1000 path /x") -> "unix uid 1000": its
 * user, since a client picks its own bind path and any process is a new
 * pid.
 */
void limits_host_of(const char *peer, char *out, size_t len)
{
	const char *sp = strchr(peer, ' ');
	const char *colon;

	if (!strncmp(peer, "unix ", 5)) {
		const char *uid = strstr(peer, " uid ");

		snprintf(out, len, "unix uid %.*s",
			 uid ? (int)strspn(uid + 5, "0123456789") : 1,
			 uid ? uid + 5 : "?");
		return;
	}
	peer = sp ? sp + 1 : peer;
	colon = strrchr(peer, ':');
	snprintf(out, len, "%.*s",
		 (int)(colon ? (size_t)(colon - peer) : strlen(peer)), peer);
}

static unsigned int host_hash(const char *addr)
{
	unsigned int h = 5381;

	for (const char *p = addr; *p; p++)
		h = h * 33 + (unsigned char)*p;
	return h % HOST_BUCKETS;
}

/* The entry for peer's address, created when missing; under lock. */
static struct host_count *host_get(const char *peer)
{
	char addr[64];
	unsigned int h;
	struct host_count *e;

	limits_host_of(peer, addr, sizeof(addr));
	h = host_hash(addr);
	for (e = buckets[h]; e; e = e->next)
		if (!strcmp(e->addr, addr))
			return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	e->next = buckets[h];
	buckets[h] = e;
	return e;
}

static bool host_known(const struct host_count *e, uint64_t now)
{
	return e->sessions ||
	       (e->last_login_ms && now - e->last_login_ms < LIM_KNOWN_MS);
}

/*
 * Drop an entry that counts nothing and is not known any more; under
 * lock. Known entries stay (they are what lets a reconnect in) until
 * limits_prune() finds them stale.
 */
static void host_put(struct host_count *e, uint64_t now)
{
	struct host_count **pp;

	if (e->pending || host_known(e, now))
		return;
	for (pp = &buckets[host_hash(e->addr)]; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	free(e);
}

/* Once a minute: free entries of hosts that are no longer known. */
static void limits_prune(uint64_t now)
{
	if (now - last_prune_ms < 60000)
		return;
	last_prune_ms = now;
	for (unsigned int h = 0; h < HOST_BUCKETS; h++) {
		struct host_count **pp = &buckets[h], *e;

		while ((e = *pp)) {
			if (!e->pending && !host_known(e, now)) {
				*pp = e->next;
				free(e);
			} else {
				pp = &e->next;
			}
		}
	}
}

static void list_add(struct lim_conn *c, enum lim_class cls)
{
	struct lim_list *l = &classes[cls];

	c->cls = cls;
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
}

static void list_del(struct lim_conn *c)
{
	struct lim_list *l = &classes[c->cls];

	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
}

static void pending_sub(struct lim_conn *c)
{
	list_del(c);
	c->pending = false;
	c->host->pending--;
	total_pending--;
}

static void pressure_update(const struct cfg_target *cfg)
{
	atomic_store(&pressure, (uint64_t)total_pending * 4 >=
				    (uint64_t)cfg->max_pending * 3);
}

/*
 * The connection to evict for a newcomer (known: its host is known): the
 * oldest of the lowest class whose oldest is past the grace time. NULL
 * when there is none.
 */
static struct lim_conn *pick_victim(bool known, uint64_t now)
{
	int top = known ? LIM_KNOWN : LIM_TALKING;

	for (int cls = LIM_SILENT; cls <= top; cls++) {
		struct lim_conn *v = classes[cls].head;

		if (v && now - v->since_ms >= LIM_EVICT_GRACE_MS)
			return v;
	}
	return NULL;
}

/* Mark v for its worker to close and give back its pending count. */
static void evict(struct lim_conn *v, const struct host_count *keep,
		  uint64_t now)
{
	struct host_count *h = v->host;

	pending_sub(v);
	if (h != keep)
		host_put(h, now);
	atomic_store(&v->evicted, true);
	atomic_fetch_add(&nr_evicted, 1);
	worker_kick_evicted(v->w);
}

struct lim_conn *limits_admit(const struct cfg_target *cfg, const char *peer,
			      struct worker *w)
{
	uint64_t now = now_ms();
	struct lim_conn *c = NULL, *v = NULL;
	struct host_count *e;
	bool known;

	pthread_mutex_lock(&lock);
	limits_prune(now);
	e = host_get(peer);
	if (!e)
		goto out_unlock;
	known = host_known(e, now);
	if (e->pending >= cfg->max_pending_per_host) {
		log_ratelimited(
		    LOG_WARN,
		    "refusing %s: %u connections from it not logged in (limit %u per host)",
		    peer, e->pending, cfg->max_pending_per_host);
		goto out_put;
	}
	if (total_pending >= cfg->max_pending) {
		v = pick_victim(known, now);
		if (!v) {
			log_ratelimited(
			    LOG_WARN,
			    "refusing %s: %u connections not logged in (limit %u), none old enough to evict",
			    peer, total_pending, cfg->max_pending);
			goto out_put;
		}
		log_ratelimited(
		    LOG_WARN,
		    "%u connections not logged in (limit %u): evicting the oldest %s one, from %s, for %s",
		    total_pending, cfg->max_pending,
		    v->cls == LIM_SILENT    ? "silent"
		    : v->cls == LIM_TALKING ? "unauthenticated"
					    : "known host's",
		    v->host->addr, peer);
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto out_put;
	if (v)
		evict(v, e, now);
	c->host = e;
	c->w = w;
	c->pending = true;
	c->since_ms = now;
	atomic_init(&c->evicted, false);
	list_add(c, known ? LIM_KNOWN : LIM_SILENT);
	e->pending++;
	total_pending++;
	pressure_update(cfg);
	goto out_unlock;

out_put:
	host_put(e, now);
out_unlock:
	pthread_mutex_unlock(&lock);
	return c;
}

void limits_talking(struct lim_conn *c)
{
	pthread_mutex_lock(&lock);
	if (c->pending && c->cls == LIM_SILENT) {
		list_del(c);
		list_add(c, LIM_TALKING);
	}
	pthread_mutex_unlock(&lock);
}

bool limits_evicted(const struct lim_conn *c)
{
	return atomic_load(&c->evicted);
}

bool limits_pressure(void)
{
	return atomic_load(&pressure);
}

uint64_t limits_evictions(void)
{
	return atomic_load(&nr_evicted);
}

int limits_login(const struct cfg_target *cfg, struct lim_conn *c, char *why,
		 size_t whylen)
{
	struct host_count *e = c->host;
	int st = RBLK_S_OK;

	pthread_mutex_lock(&lock);
	if (!c->pending) { /* evicted (its worker closes it soon) */
		st = RBLK_S_BUSY;
		snprintf(why, whylen, "evicted from the pending table");
	} else if (total_sessions >= cfg->max_sessions ||
		   e->sessions >= cfg->max_sessions_per_host) {
		st = RBLK_S_BUSY;
		snprintf(
		    why, whylen,
		    "session limit: %u sessions, %u from %s (limits %u, %u per host)",
		    total_sessions, e->sessions, e->addr, cfg->max_sessions,
		    cfg->max_sessions_per_host);
	} else {
		pending_sub(c);
		c->session = true;
		e->sessions++;
		total_sessions++;
		e->last_login_ms = now_ms();
		pressure_update(cfg);
	}
	pthread_mutex_unlock(&lock);
	return st;
}

void limits_release(const struct cfg_target *cfg, struct lim_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&lock);
	if (c->pending || c->session) {
		struct host_count *e = c->host;

		if (c->pending)
			pending_sub(c);
		if (c->session) {
			e->sessions--;
			total_sessions--;
		}
		host_put(e, now_ms());
		pressure_update(cfg);
	}
	pthread_mutex_unlock(&lock);
	free(c);
}
