/* SPDX-License-Identifier: MIT */
/*
 * librblk multipath, active/passive: several URLs (paths) to one volume.
 *
 * r->paths[0] is the preferred path. r->active is the path the session's
 * queues use; each queue still owns its connection and moves on its own
 * thread:
 *
 *   - a queue that loses its connection (lib_queue_lost(): transport
 *     error, keep-alive timeout) reconnects through lib_path_connect(),
 *     starting at r->active when another queue moved already, else at the
 *     path after the lost one (the lost one is tried last); the reissue
 *     of unfinished parts is the reconnect's own (lib_queue_attach()). The
 *     path it lands on becomes r->active.
 *   - a live queue whose path is not r->active moves between commands
 *     (lib_path_tick(), on its timer): it issues nothing new (draining),
 *     waits until every part in flight has completed, then drops the
 *     connection and reconnects on r->active with nothing to reissue. A
 *     path that does not finish its commands within timeout_ms is treated
 *     as lost (its parts are reissued on the new path).
 *   - failback: while r->active is not 0, one queue logs in to path 0
 *     every failback_ms (a throwaway login, checked like a reconnect:
 *     same volume id and geometry); when it succeeds r->active becomes 0
 *     and the queues follow as above.
 *
 * Every path must be the same volume: rblk_open() logs in to each other
 * path once and refuses a vol_id that is not the first path's, and every
 * reconnect checks it again (lib_queue_connect()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "lib_internal.h"
#include "lib_queue.h"

#define set_error lib_set_error

/* a failback probe may not stall the queue's thread longer than this */
#define PROBE_TIMEOUT_MS 2000

int lib_path_setup(struct rblk *r, const char *url, const struct rblk_opts *o)
{
	unsigned int n = 1 + (o->paths ? o->nr_paths : 0);
	char err[256];

	if (n > RBLK_MAX_PATHS)
		return set_error(-EINVAL, "at most %d paths (%u given)",
				 RBLK_MAX_PATHS, n);
	if (o->failback_ms < 0)
		return set_error(-EINVAL, "failback_ms must be >= 0");
	r->paths = calloc(n, sizeof(*r->paths));
	if (!r->paths)
		return set_error(-ENOMEM, "out of memory");
	r->nr_paths = n;
	for (unsigned int i = 0; i < n; i++) {
		struct rblk_path *p = &r->paths[i];
		const char *s = i ? o->paths[i - 1] : url;

		if (!s)
			return set_error(-EINVAL, "path %u: no URL", i);
		p->str = strdup(s);
		if (!p->str)
			return set_error(-ENOMEM, "out of memory");
		if (rblk_url_parse(s, RBLK_DEFAULT_PORT, &p->url, err,
				   sizeof(err)))
			return set_error(-EINVAL, "%s", err);
		if (!p->url.export_name[0])
			return set_error(-EINVAL,
					 "'%s': no export name (want %s)", s,
					 rblk_url_form(p->url.scheme, true));
		/* the queues' poll groups and regions are one transport's */
		if (strcmp(p->url.scheme, r->url.scheme))
			return set_error(
			    -EINVAL,
			    "path '%s' uses %s, the first path %s: every path must use one transport",
			    s, p->url.scheme, r->url.scheme);
	}
	atomic_init(&r->active, 0);
	atomic_init(&r->probe_at, 0);
	return 0;
}

void lib_path_free(struct rblk *r)
{
	for (unsigned int i = 0; r->paths && i < r->nr_paths; i++)
		free(r->paths[i].str);
	free(r->paths);
	r->paths = NULL;
	r->nr_paths = 0;
}

unsigned int rblk_path_count(const struct rblk *r)
{
	return r->nr_paths;
}

const char *rblk_path_url(const struct rblk *r, unsigned int i)
{
	return i < r->nr_paths ? r->paths[i].str : NULL;
}

unsigned int rblk_path_active(const struct rblk *r)
{
	return atomic_load_explicit(&((struct rblk *)r)->active,
				    memory_order_relaxed);
}

/* As a UUID, the way `rblk info` shows it. */
static void vol_id_str(const uint8_t id[RBLK_VOL_ID_LEN], char *out)
{
	for (unsigned int i = 0; i < RBLK_VOL_ID_LEN; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*out++ = '-';
		out += sprintf(out, "%02x", id[i]);
	}
}

int lib_path_vol_mismatch(const struct rblk_queue *q,
			  const uint8_t vol_id[RBLK_VOL_ID_LEN])
{
	struct rblk *r = q->r;
	unsigned int active = atomic_load(&r->active);
	char got[2 * RBLK_VOL_ID_LEN + 5], want[2 * RBLK_VOL_ID_LEN + 5];

	vol_id_str(vol_id, got);
	vol_id_str(q->vol_id, want);
	if (r->nr_paths < 2)
		return set_error(
		    -EPROTO,
		    "%s is another volume after the reconnect (volume id %s, was %s)",
		    r->paths[q->path].str, got, want);
	/* name a path that has the expected id: the session's */
	if (active == q->path)
		return set_error(
		    -EPROTO,
		    "path %s is another volume now (volume id %s, was %s): refusing to use it",
		    r->paths[q->path].str, got, want);
	return set_error(
	    -EPROTO,
	    "path %s is not the same volume as %s (volume id %s, expected %s): refusing to use it",
	    r->paths[q->path].str, r->paths[active].str, got, want);
}

/* Publish that a queue connected on path p. */
static void path_note_active(struct rblk *r, unsigned int p)
{
	unsigned int old = atomic_exchange(&r->active, p);

	if (old == p)
		return;
	if (p && r->opts.failback_ms)
		atomic_store(&r->probe_at,
			     now_ms() + (uint64_t)r->opts.failback_ms);
	log_warn("%s: now on path %u (%s)%s", r->paths[0].str, p,
		 r->paths[p].str, p ? "" : ", the preferred one");
}

int lib_path_open_queue(struct rblk_queue *q, const struct rblk_opts *o)
{
	struct rblk *r = q->r;
	unsigned int first = atomic_load(&r->active);
	int ret = 0;

	for (unsigned int i = 0; i < r->nr_paths; i++) {
		q->path = (first + i) % r->nr_paths;
		ret = lib_queue_connect(r, q, o);
		if (!ret) {
			if (r->nr_paths > 1)
				path_note_active(r, q->path);
			return 0;
		}
		lib_queue_drop_conn(q);
		/* queues after the first stay with the session's path */
		if (q->index || r->nr_paths < 2)
			return ret;
		log_warn("path %s: %s", r->paths[q->path].str,
			 rblk_last_error());
	}
	return ret;
}

/*
 * A throwaway login to path p, checked as a reconnect of queue 0 is (same
 * volume id, geometry and features): 0 or -errno with the error set.
 */
static int path_login(struct rblk *r, unsigned int p, int timeout_ms)
{
	const struct rblk_queue *q0 = &r->queues[0];
	struct rblk_queue t = {
	    .r = r,
	    .index = 0,
	    .timer_fd = -1,
	    .state = QUEUE_LOST, /* its login is checked as a reconnect */
	    .qd = q0->qd,
	    .max_io = q0->max_io,
	    .features = q0->features,
	    .path = p,
	};
	struct rblk_opts o = r->opts;
	int ret;

	memcpy(t.vol_id, q0->vol_id, sizeof(t.vol_id));
	o.timeout_ms = MIN(o.timeout_ms, timeout_ms);
	ret = xp_group_create(r->ops, &t.g);
	if (ret)
		return set_error(ret, "creating a poll group: %s",
				 strerror(-ret));
	ret = lib_queue_connect(r, &t, &o);
	lib_queue_drop_conn(&t);
	xp_group_destroy(t.g);
	return ret;
}

int lib_path_verify(struct rblk *r)
{
	unsigned int active = atomic_load(&r->active);
	char id[2 * RBLK_VOL_ID_LEN + 5];
	int ret;

	/*
	 * Without an identity of its own the volume id cannot tell this
	 * volume from another on another target (the stand-in of a device
	 * without serial, of a file without a stored id): joining paths on
	 * it could put the session on another volume at the first failover.
	 */
	if (r->nr_paths > 1 && (r->info.features & RBLK_FEAT_NO_IDENTITY)) {
		vol_id_str(r->info.vol_id, id);
		return set_error(
		    -EPROTO,
		    "%s has no volume identity of its own (volume id %s is a stand-in): refusing to use it with other paths, which could be another volume (give the export uuid= on every target that serves this one volume)",
		    r->paths[active].str, id);
	}
	for (unsigned int p = 0; p < r->nr_paths; p++) {
		if (p == active)
			continue;
		ret = path_login(r, p, r->opts.timeout_ms);
		if (ret == -EPROTO)
			return ret; /* another volume: the error names both */
		if (ret)
			log_warn(
			    "path %s is not available now (%s); it is used once it answers",
			    r->paths[p].str, rblk_last_error());
	}
	return 0;
}

void lib_path_lost(struct rblk_queue *q)
{
	struct rblk *r = q->r;
	unsigned int active = atomic_load(&r->active);

	if (r->nr_paths < 2)
		q->path_first = 0;
	else if (active != q->path)
		q->path_first = active; /* another queue moved already */
	else
		q->path_first = (q->path + 1) % r->nr_paths;
}

int lib_path_connect(struct rblk_queue *q, const struct rblk_opts *o, char *why,
		     size_t why_len)
{
	struct rblk *r = q->r;
	int ret = 0;

	for (unsigned int i = 0; i < r->nr_paths; i++) {
		q->path = (q->path_first + i) % r->nr_paths;
		ret = lib_queue_connect(r, q, o);
		if (!ret)
			ret = lib_queue_attach(q);
		if (!ret) {
			if (r->nr_paths > 1)
				path_note_active(r, q->path);
			return 0;
		}
		snprintf(why, why_len, "%s", rblk_last_error());
		lib_queue_drop_conn(q);
		if (r->nr_paths < 2)
			return ret;
		if (lib_refusal(ret))
			log_warn("queue %u: path %s refused: %s", q->index,
				 r->paths[q->path].str, why);
		else
			log_debug("queue %u: path %s: %s", q->index,
				  r->paths[q->path].str, why);
	}
	return lib_refusal(ret) ? -EAGAIN : ret;
}

/* Every path back? Probe path 0 when due; this queue claims the probe. */
static void path_probe(struct rblk_queue *q, uint64_t now)
{
	struct rblk *r = q->r;
	uint64_t at = atomic_load(&r->probe_at);

	if (!r->opts.failback_ms || !atomic_load(&r->active) || now < at)
		return;
	if (!atomic_compare_exchange_strong(
		&r->probe_at, &at, now + (uint64_t)r->opts.failback_ms))
		return; /* another queue probes */
	if (path_login(r, 0, PROBE_TIMEOUT_MS)) {
		log_debug("failback probe of %s: %s", r->paths[0].str,
			  rblk_last_error());
		return;
	}
	log_warn("%s answers again: failing back", r->paths[0].str);
	path_note_active(r, 0);
}

/* Parts on the wire (a KEEPALIVE does not count). */
static bool parts_busy(const struct rblk_queue *q)
{
	for (unsigned int t = 0; t < q->qd; t++)
		if (q->reqs[t].state != IREQ_FREE &&
		    q->reqs[t].state != IREQ_KA &&
		    q->reqs[t].state != IREQ_HELD)
			return true;
	return false;
}

bool lib_path_tick(struct rblk_queue *q, uint64_t now)
{
	struct rblk *r = q->r;
	unsigned int want;
	char why[160];

	if (r->nr_paths < 2)
		return false;
	if (q->state != QUEUE_DRAINING) {
		path_probe(q, now);
		want = atomic_load(&r->active);
		if (want == q->path)
			return false;
		if (!lib_queue_set_state(q, QUEUE_DRAINING))
			return false;
		q->drain_until = now + (uint64_t)r->opts.timeout_ms;
		log_info("queue %u: moving from %s to %s between commands",
			 q->index, r->paths[q->path].str, r->paths[want].str);
	}
	if (parts_busy(q) && now < q->drain_until) {
		lib_timer_set(q, now + 1); /* look again soon */
		return true;
	}
	snprintf(
	    why, sizeof(why), "%s to follow the session to path %u",
	    parts_busy(q)
		? "commands still in flight after the drain timeout; leaving"
		: "leaving",
	    atomic_load(&r->active));
	/* reconnects on r->active, reissuing whatever did not complete */
	lib_queue_lost(q, why);
	return true;
}
