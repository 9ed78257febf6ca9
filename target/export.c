/* SPDX-License-Identifier: MIT */
/*
 * Exports: opening one with its backend (backend.c), lookup, references
 * and the reaper that closes removed ones off the workers.
 */
#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"

#include "backend.h"
#include "pr.h"
#include "stats.h"
#include "target.h"

/* ---- exports ------------------------------------------------------------ */

int export_open(struct export *e, const struct cfg_export *cfg, char *err,
		size_t errlen)
{
	int ret;

	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", cfg->name);
	snprintf(e->path, sizeof(e->path), "%s", cfg->path);
	e->read_only = cfg->read_only;
	e->fd = e->fd_odirect = -1;
	ret = backend_open(e, cfg, err, errlen);
	if (ret)
		return ret;
	if (e->read_only)
		e->features |= RBLK_F_READ_ONLY;
	if (e->direct)
		e->features |= RBLK_F_DIRECT;
	qos_configure(&e->qos, &cfg->qos);
	ret = pr_open(e, cfg, err, errlen);
	if (ret) {
		e->ops->close(e);
		e->ops = NULL;
		return ret;
	}
	volid_identify(e, cfg);
	log_info("export %s: %s %s, %llu bytes, block size %u%s%s%s", e->name,
		 e->ops->name, e->path, (unsigned long long)e->size,
		 e->block_size, e->read_only ? ", read-only" : "",
		 e->fd_odirect >= 0 ? ", O_DIRECT" : "",
		 e->direct ? ", direct access" : "");
	return 0;
}

int export_resize(struct export *e, uint64_t size, bool force,
		  uint64_t *old_size, uint64_t *new_size, char *err,
		  size_t errlen)
{
	uint64_t old = export_size(e);
	unsigned int live = atomic_load(&e->sessions);
	int ret;

	if (!e->ops->resize)
		return open_fail(
		    err, errlen, -EOPNOTSUPP,
		    "export %s cannot change size while it runs%s", e->name,
		    e->direct && !(e->ops->flags & BACKEND_F_VOLATILE)
			? " (a file exported direct is mapped and registered at its size; export it without direct to resize it live)"
			: "");
	if (size % e->block_size)
		return open_fail(
		    err, errlen, -EINVAL,
		    "%llu bytes is not a multiple of export %s's block size %u",
		    (unsigned long long)size, e->name, e->block_size);
	if (size && size < old && !force)
		return open_fail(
		    err, errlen, -EINVAL,
		    "shrinking export %s from %llu to %llu bytes drops the data past the new end%s; give --force to do it",
		    e->name, (unsigned long long)old, (unsigned long long)size,
		    live ? " and fails the I/O of live sessions there" : "");
	ret = e->ops->resize(e, &size, err, errlen);
	if (ret)
		return ret;
	if (!size)
		return open_fail(err, errlen, -EINVAL,
				 "export %s: its backing store is empty",
				 e->name);
	if (size < old && !force)
		return open_fail(
		    err, errlen, -EINVAL,
		    "export %s's backing store is %llu bytes, less than the %llu sessions were told: give --force to take the smaller size",
		    e->name, (unsigned long long)size, (unsigned long long)old);
	export_size_set(e, size);
	*old_size = old;
	*new_size = size;
	if (size < old && live)
		log_warn(
		    "export %s: shrunk from %llu to %llu bytes under %u live session(s): their I/O past the new end fails (OUT_OF_RANGE), and their devices keep the old size",
		    e->name, (unsigned long long)old, (unsigned long long)size,
		    live);
	else
		log_info(
		    "export %s: resized from %llu to %llu bytes (%u live session(s) are told)",
		    e->name, (unsigned long long)old, (unsigned long long)size,
		    live);
	return 0;
}

void export_close(struct export *e)
{
	pr_close(e);
	if (e->ops)
		e->ops->close(e);
	e->ops = NULL;
}

bool export_vol_id(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN])
{
	if (!e->ops || !e->ops->vol_id) {
		memset(id, 0, EXPORT_VOL_ID_LEN);
		return false;
	}
	return e->ops->vol_id(e, id);
}

const struct export *export_id_clash(const struct export *list,
				     const struct export *e)
{
	for (const struct export *o = list; o; o = o->next)
		if (o != e &&
		    !memcmp(o->vol_id, e->vol_id, sizeof(e->vol_id)) &&
		    (o->ident == VOL_IDENT_CONFIG ||
		     e->ident == VOL_IDENT_CONFIG))
			return o;
	return NULL;
}

bool export_visible_to(const struct export *e, const char *host)
{
	const struct cfg_export *c = e->cfg;

	(void)host;
	/*
	 * Discovery is not authenticated, so the host name it claims proves
	 * nothing: only exports open to any host (allow=any, or the
	 * target's allow_any_host) are listed. One with an allow list needs
	 * authentication and is listed to nobody (a host on the list logs in
	 * by name); one without either is closed to everyone.
	 */
	if (!c)
		return true;
	return !c->restricted && c->allow_any;
}

/* Open to any host without authentication: nothing about it to hide. */
static bool export_open_to_all(const struct export *e)
{
	const struct cfg_export *c = e->cfg;

	return !c || (!c->restricted && c->allow_any);
}

bool exports_all_open(struct target *t)
{
	bool open = true;

	pthread_mutex_lock(&t->exports_lock);
	for (const struct export *e = t->exports; e && open; e = e->next)
		open = export_open_to_all(e);
	pthread_mutex_unlock(&t->exports_lock);
	return open;
}

struct export *export_create(const struct cfg_export *cfg,
			     unsigned int nr_workers, char *err, size_t errlen)
{
	struct export *e = calloc(1, sizeof(*e));
	struct cfg_export *copy = NULL;

	if (!e) {
		open_fail(err, errlen, -ENOMEM, "out of memory");
		goto out_log;
	}
	/*
	 * A copy that lives as long as e: the caller's may be on its stack
	 * (add-export), and whatever keeps a pointer to its definition must
	 * not see it go away.
	 */
	copy = malloc(sizeof(*copy));
	if (!copy) {
		open_fail(err, errlen, -ENOMEM, "out of memory");
		goto out_free;
	}
	memcpy(copy, cfg, sizeof(*cfg));
	if (export_open(e, copy, err, errlen)) /* clears e first */
		goto out_free;
	e->cfg = copy;
	if (!copy->restricted && copy->allow_any)
		log_warn(
		    "export %s: WARNING: open to ANY host that reaches the target, without authentication (allow=any or allow_any_host); give allow=HOST to restrict it",
		    e->name);
	else if (!copy->restricted)
		log_warn(
		    "export %s: no allow list: every host is refused (give allow=HOST, or allow=any to open it)",
		    e->name);
	e->wstats = aligned_alloc(_Alignof(struct iostats),
				  (size_t)nr_workers * sizeof(*e->wstats));
	if (!e->wstats) {
		open_fail(err, errlen, -ENOMEM, "out of memory");
		goto out_close;
	}
	memset(e->wstats, 0, (size_t)nr_workers * sizeof(*e->wstats));
	e->nr_wstats = nr_workers;
	atomic_init(&e->refs, 1);
	return e;

out_close:
	export_close(e);
out_free:
	free(copy);
	free(e);
out_log:
	log_err("export %s: %s", cfg->name, err);
	return NULL;
}

void export_get(struct export *e)
{
	atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

/* The export called name with a reference taken, or NULL (any thread). */
struct export *export_lookup(struct target *t, const char *name)
{
	struct export *e;

	pthread_mutex_lock(&t->exports_lock);
	for (e = t->exports; e; e = e->next)
		if (!strcmp(e->name, name))
			break;
	if (e)
		export_get(e);
	pthread_mutex_unlock(&t->exports_lock);
	return e;
}

static void export_destroy(struct export *e)
{
	bool removed = atomic_load(&e->removed);
	char name[RBLK_NAME_MAX];

	snprintf(name, sizeof(name), "%s", e->name);
	export_close(e);
	free(e->wstats);
	free(e->cfg);
	while (e->retired) {
		struct cfg_retired *old = e->retired;

		e->retired = old->next;
		free(old->cfg);
		free(old);
	}
	free(e);
	if (removed)
		log_info(
		    "export %s: closed, its backing store released (removed, no session left)",
		    name);
}

/*
 * Closing an export can take long (munmap of a big RAM volume, the last
 * close() of a block device flushing its page cache), so a removed one is
 * not closed on the worker that happens to drop the last reference: it is
 * queued for the reaper thread (the control thread, ctl.c), woken through
 * its eventfd. Without a reaper (none registered, or shutting down) the
 * putting thread closes it.
 */
static struct {
	pthread_mutex_t lock;
	struct export *queue; /* linked through next */
	int efd;	      /* -1: no reaper */
	pthread_t thread;
} reaper = {.lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1};

void export_reaper_set(int efd)
{
	pthread_mutex_lock(&reaper.lock);
	reaper.efd = efd;
	reaper.thread = pthread_self();
	pthread_mutex_unlock(&reaper.lock);
}

void export_reap(void)
{
	struct export *e, *next;

	pthread_mutex_lock(&reaper.lock);
	e = reaper.queue;
	reaper.queue = NULL;
	pthread_mutex_unlock(&reaper.lock);
	for (; e; e = next) {
		next = e->next;
		export_destroy(e);
	}
}

void export_put(struct export *e)
{
	uint64_t one = 1;

	if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (atomic_load(&e->removed)) {
		pthread_mutex_lock(&reaper.lock);
		if (reaper.efd >= 0 &&
		    !pthread_equal(reaper.thread, pthread_self())) {
			/* unlinked from the target's list: next is free */
			e->next = reaper.queue;
			reaper.queue = e;
			if (write(reaper.efd, &one, sizeof(one)) < 0)
				log_warn("export %s: waking the reaper: %s",
					 e->name, strerror(errno));
			pthread_mutex_unlock(&reaper.lock);
			return;
		}
		pthread_mutex_unlock(&reaper.lock);
	}
	export_destroy(e);
}
