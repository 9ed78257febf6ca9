/* SPDX-License-Identifier: MIT */
/*
 * Connection and session limits (docs/RELIABILITY.md): connections not yet
 * logged in ("pending": accepted, no LOGIN granted yet) and live sessions,
 * each in all and per source address. The main thread admits connections,
 * workers turn them into sessions and every connection gives back what it
 * held when it is freed; one mutex, never on the command path.
 */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

struct host_count {
	char addr[64];
	unsigned int pending, sessions;
	struct host_count *next;
};

#define HOST_BUCKETS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_count *buckets[HOST_BUCKETS];
static unsigned int total_pending, total_sessions;

/* "tcp 192.0.2.1:41234" -> "192.0.2.1" (the address, without the port) */
void limits_host_of(const char *peer, char *out, size_t len)
{
	const char *sp = strchr(peer, ' ');
	const char *colon;

	peer = sp ? sp + 1 : peer;
	colon = strrchr(peer, ':');
	snprintf(out, len, "%.*s",
		 (int)(colon ? (size_t)(colon - peer) : strlen(peer)), peer);
}

/* The entry for peer's address, created when create; under lock. */
static struct host_count *host_get(const char *peer, bool create)
{
	char addr[64];
	unsigned int h = 5381;
	struct host_count *e;

	limits_host_of(peer, addr, sizeof(addr));
	for (const char *p = addr; *p; p++)
		h = h * 33 + (unsigned char)*p;
	for (e = buckets[h % HOST_BUCKETS]; e; e = e->next)
		if (!strcmp(e->addr, addr))
			return e;
	if (!create)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	e->next = buckets[h % HOST_BUCKETS];
	buckets[h % HOST_BUCKETS] = e;
	return e;
}

/* Drop an entry that counts nothing any more; under lock. */
static void host_put(struct host_count *e)
{
	struct host_count **pp;
	unsigned int h = 5381;

	if (e->pending || e->sessions)
		return;
	for (const char *p = e->addr; *p; p++)
		h = h * 33 + (unsigned char)*p;
	for (pp = &buckets[h % HOST_BUCKETS]; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	free(e);
}

int limits_admit(const struct cfg_target *cfg, const char *peer)
{
	struct host_count *e;
	int st = RBLK_S_OK;

	pthread_mutex_lock(&lock);
	e = host_get(peer, true);
	if (!e || total_pending >= cfg->max_pending ||
	    e->pending >= cfg->max_pending_per_host) {
		st = RBLK_S_BUSY;
		log_ratelimited(LOG_WARN,
				"refusing %s: %u connections not logged in (%u from it; limits %u, %u per host)",
				peer, total_pending, e ? e->pending : 0,
				cfg->max_pending, cfg->max_pending_per_host);
	} else {
		e->pending++;
		total_pending++;
	}
	pthread_mutex_unlock(&lock);
	return st;
}

int limits_login(const struct cfg_target *cfg, const char *peer, char *why,
		 size_t whylen)
{
	struct host_count *e;
	int st = RBLK_S_OK;

	pthread_mutex_lock(&lock);
	e = host_get(peer, false);
	if (!e) { /* cannot happen: admitted connections have one */
		st = RBLK_S_BUSY;
		snprintf(why, whylen, "no admission record");
	} else if (total_sessions >= cfg->max_sessions ||
		   e->sessions >= cfg->max_sessions_per_host) {
		st = RBLK_S_BUSY;
		snprintf(why, whylen,
			 "session limit: %u sessions, %u from %s (limits %u, %u per host)",
			 total_sessions, e->sessions, e->addr,
			 cfg->max_sessions, cfg->max_sessions_per_host);
	} else {
		e->pending--;
		total_pending--;
		e->sessions++;
		total_sessions++;
	}
	pthread_mutex_unlock(&lock);
	return st;
}

void limits_release(const char *peer, bool pending, bool session)
{
	struct host_count *e;

	if (!pending && !session)
		return;
	pthread_mutex_lock(&lock);
	e = host_get(peer, false);
	if (e) {
		if (pending) {
			e->pending--;
			total_pending--;
		}
		if (session) {
			e->sessions--;
			total_sessions--;
		}
		host_put(e);
	}
	pthread_mutex_unlock(&lock);
}
