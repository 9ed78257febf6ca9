/* SPDX-License-Identifier: MIT */
/*
 * librblk: sessions. rblk_open() (its options, URL, paths, host name and
 * secret, then each queue: poll group and timer, first connection, data
 * path setup), rblk_close(), the session's accessors, and the thread's
 * last error. See include/rblk/rblk.h. Queues log in in lib_login.c, the
 * data path is lib_io.c's, keep-alive and reconnect are lib_reconnect.c's,
 * multipath is lib_path.c's; the structures are in lib_queue.h.
 */
#include <rblk/rblk.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "../common/auth.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"
#include "lib_queue.h"

/* ---- errors -------------------------------------------------------------- */

static __thread char last_error[512];

const char *rblk_last_error(void)
{
	return last_error[0] ? last_error : "no error";
}

/* lib.c's short name for it */
#define set_error lib_set_error

int lib_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

void lib_clear_error(void)
{
	last_error[0] = 0;
}

/* ---- options ----------------------------------------------------------------- */

void rblk_opts_init(struct rblk_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->opts_size = sizeof(*o);
	o->queues = 1;
	o->queue_depth = RBLK_DEFAULT_QD;
	o->max_io = RBLK_DEFAULT_MAX_IO;
	o->timeout_ms = 10000;
	o->reconnect_delay_ms = 1000;
	o->ctrl_loss_timeout_s = 60;
	o->keepalive_ms = 5000;
	o->failback_ms = 5000;
}

static void queue_destroy(struct rblk_queue *q)
{
	lib_queue_drop_conn(q);
	xp_group_destroy(q->g); /* deregisters the bounce and user regions */
	if (q->timer_fd >= 0)
		close(q->timer_fd);
	free(q->bounce);
	free(q->reqs);
	free(q->ios);
	free(q->done);
	free(q->umrs);
}

/*
 * Once per queue, before its first connection: the poll group and the
 * timer watched in it.
 */
static int queue_init(struct rblk_queue *q)
{
	int ret;

	ret = xp_group_create(q->r->ops, &q->g);
	if (ret)
		return set_error(ret, "creating a poll group: %s",
				 strerror(-ret));
	q->timer_fd = timerfd_create(CLOCK_MONOTONIC,
				     TFD_NONBLOCK | TFD_CLOEXEC);
	if (q->timer_fd < 0)
		return set_error(-errno, "timerfd_create: %s", strerror(errno));
	ret = xp_group_watch(q->g, q->timer_fd, TIMER_COOKIE);
	if (ret)
		return set_error(ret, "watching the timer: %s", strerror(-ret));
	return 0;
}

/* Load opts.key_file into r (the secret stays in r until rblk_close). */
static int open_secret(struct rblk *r, const struct rblk_opts *o)
{
	char err[320];

	r->mutual = o->flags & RBLK_OPEN_MUTUAL_AUTH;
	if (o->opts_size <= offsetof(struct rblk_opts, key_file) ||
	    !o->key_file) {
		if (r->mutual)
			return set_error(-EINVAL,
					 "mutual authentication needs a key file");
		return 0;
	}
	if (rblk_auth_init())
		return set_error(-EIO, "libsodium failed to initialise");
	if (rblk_auth_load_secret(o->key_file, r->secret, &r->secret_len, err,
				  sizeof(err))) {
		r->secret_len = 0;
		return set_error(-EINVAL, "%s", err);
	}
	return 0;
}

int rblk_open(const char *url, const struct rblk_opts *user_opts,
	      struct rblk **out)
{
	struct rblk_opts o;
	struct rblk *r;
	char err[256];
	unsigned int i;
	int ret;

	last_error[0] = 0;
	rblk_opts_init(&o);
	if (user_opts) {
		if (user_opts->opts_size < offsetof(struct rblk_opts, flags) ||
		    user_opts->opts_size > sizeof(o))
			return set_error(-EINVAL,
					 "rblk_opts: bad opts_size (use rblk_opts_init)");
		memcpy(&o, user_opts, user_opts->opts_size);
	}
	if (!o.queues || o.queues > 256)
		return set_error(-EINVAL, "queues must be 1..256");
	if ((o.flags & RBLK_OPEN_PUSH_READS) && (o.flags & RBLK_OPEN_PULL_READS))
		return set_error(-EINVAL,
				 "RBLK_OPEN_PUSH_READS and RBLK_OPEN_PULL_READS exclude each other");
	if (!o.queue_depth || o.queue_depth > RBLK_MAX_QD)
		return set_error(-EINVAL, "queue depth must be 1..%d",
				 RBLK_MAX_QD);
	if (o.max_io < RBLK_MIN_MAX_IO || o.max_io > RBLK_MAX_MAX_IO ||
	    !IS_POW2(o.max_io))
		return set_error(-EINVAL,
				 "max I/O must be a power of two in 4K..8M");
	if (o.timeout_ms <= 0)
		o.timeout_ms = 10000;
	if (o.direct < RBLK_DIRECT_AUTO || o.direct > RBLK_DIRECT_OFF)
		return set_error(-EINVAL, "direct must be RBLK_DIRECT_AUTO, _ON or _OFF");
	if (o.max_queued > RBLK_MAX_QUEUED)
		return set_error(-EINVAL, "max_queued must be 0..%d",
				 RBLK_MAX_QUEUED);
	if (o.reconnect_delay_ms < 0 || o.ctrl_loss_timeout_s < -1 ||
	    o.keepalive_ms < 0)
		return set_error(-EINVAL,
				 "reconnect delay and keep-alive must be >= 0, ctrl-loss timeout >= -1");

	r = calloc(1, sizeof(*r));
	if (!r)
		return set_error(-ENOMEM, "out of memory");
	if (rblk_url_parse(url, RBLK_DEFAULT_PORT, &r->url, err, sizeof(err))) {
		ret = set_error(-EINVAL, "%s", err);
		goto out_free;
	}
	if (!r->url.export_name[0]) {
		ret = set_error(-EINVAL, "'%s': no export name (want %s://HOST[:PORT]/EXPORT)",
				url, r->url.scheme);
		goto out_free;
	}
	r->ops = xp_find(r->url.scheme);
	if (!r->ops) {
		ret = set_error(-EPROTONOSUPPORT,
				"'%s': unknown transport '%s' (tcp, rdma)", url,
				r->url.scheme);
		goto out_free;
	}
	ret = lib_path_setup(r, url, &o);
	if (ret)
		goto out_free;
	if (o.host_name)
		snprintf(r->host_name, sizeof(r->host_name), "%s", o.host_name);
	else if (gethostname(r->host_name, sizeof(r->host_name) - 1))
		snprintf(r->host_name, sizeof(r->host_name), "unknown");
	ret = open_secret(r, &o);
	if (ret)
		goto out_free;
	r->poll_spin_us = o.poll_spin_us;
	r->queues = calloc(o.queues, sizeof(*r->queues));
	if (!r->queues) {
		ret = set_error(-ENOMEM, "out of memory");
		goto out_free;
	}
	r->info.transport = r->ops->name;
	r->info.export_name = r->url.export_name;
	r->info.host = r->url.host;
	r->info.port = r->url.port;
	r->info.queues = o.queues;
	o.host_name = NULL; /* r->host_name holds it */
	o.key_file = NULL; /* r->secret holds it */
	o.paths = NULL; /* r->paths holds them */
	r->opts = o;
	for (i = 0; i < o.queues; i++) {
		r->queues[i].r = r;
		r->queues[i].index = i;
		r->queues[i].timer_fd = -1;
		r->nr_queues = i + 1;
		ret = queue_init(&r->queues[i]);
		if (!ret)
			ret = lib_path_open_queue(&r->queues[i], &o);
		if (!ret)
			ret = lib_queue_setup(&r->queues[i]);
		if (ret)
			goto out_close;
	}
	ret = lib_path_verify(r);
	if (ret)
		goto out_close;
	*out = r;
	return 0;

out_close:
	rblk_close(r);
	return ret;
out_free:
	lib_path_free(r);
	free(r);
	return ret;
}

void rblk_close(struct rblk *r)
{
	if (!r)
		return;
	for (unsigned int i = 0; i < r->nr_queues; i++)
		queue_destroy(&r->queues[i]);
	free(r->queues);
	lib_path_free(r);
	memset(r->secret, 0, sizeof(r->secret));
	free(r);
}

const struct rblk_info *rblk_get_info(const struct rblk *r)
{
	return &r->info;
}

struct rblk_queue *rblk_get_queue(struct rblk *r, unsigned int index)
{
	return index < r->nr_queues ? &r->queues[index] : NULL;
}
