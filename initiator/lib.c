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
#include "../common/log.h"
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

/* ---- options
 * ----------------------------------------------------------------- */

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
	o->io_timeout_ms = RBLK_DEFAULT_IO_TIMEOUT_MS;
	o->io_retries = RBLK_DEFAULT_IO_RETRIES;
}

/* ---- sessions ------------------------------------------------------------ */

static void queue_destroy(struct rblk_queue *q)
{
	lib_queue_drop_conn(q);
	for (unsigned int t = 0; q->reqs && t < q->qd; t++)
		xp_dealloc_mw(q->reqs[t].mw);
	lib_bounce_destroy(q);
	xp_group_destroy(q->g); /* deregisters the user regions */
	if (q->timer_fd >= 0)
		close(q->timer_fd);
	free(q->reqs);
	free(q->mw_tag);
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
	q->timer_fd =
	    timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
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
			return set_error(
			    -EINVAL, "mutual authentication needs a key file");
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

/*
 * Fill o from rblk_opts_init() and the caller's user_opts (NULL: the
 * defaults) and check it: 0, or -EINVAL with the error set.
 */
static int open_opts(const struct rblk_opts *user_opts, struct rblk_opts *o)
{
	rblk_opts_init(o);
	if (user_opts) {
		if (user_opts->opts_size < offsetof(struct rblk_opts, flags) ||
		    user_opts->opts_size > sizeof(*o))
			return set_error(
			    -EINVAL,
			    "rblk_opts: bad opts_size (use rblk_opts_init)");
		memcpy(o, user_opts, user_opts->opts_size);
	}
	if (!o->queues || o->queues > 256)
		return set_error(-EINVAL, "queues must be 1..256");
	if ((o->flags & RBLK_OPEN_PUSH_READS) &&
	    (o->flags & RBLK_OPEN_PULL_READS))
		return set_error(
		    -EINVAL,
		    "RBLK_OPEN_PUSH_READS and RBLK_OPEN_PULL_READS exclude each other");
	if (!o->queue_depth || o->queue_depth > RBLK_MAX_QD)
		return set_error(-EINVAL, "queue depth must be 1..%d",
				 RBLK_MAX_QD);
	if (o->max_io < RBLK_MIN_MAX_IO || o->max_io > RBLK_MAX_MAX_IO ||
	    !IS_POW2(o->max_io))
		return set_error(-EINVAL,
				 "max I/O must be a power of two in 4K..8M");
	if (o->timeout_ms <= 0)
		o->timeout_ms = 10000;
	if (o->direct < RBLK_DIRECT_AUTO || o->direct > RBLK_DIRECT_OFF)
		return set_error(
		    -EINVAL, "direct must be RBLK_DIRECT_AUTO, _ON or _OFF");
	if (o->max_queued > RBLK_MAX_QUEUED)
		return set_error(-EINVAL, "max_queued must be 0..%d",
				 RBLK_MAX_QUEUED);
	if (o->reconnect_delay_ms < 0 || o->ctrl_loss_timeout_s < -1 ||
	    o->keepalive_ms < 0)
		return set_error(
		    -EINVAL,
		    "reconnect delay and keep-alive must be >= 0, ctrl-loss timeout >= -1");
	if (o->io_timeout_ms < 0 || o->io_retries < -1 || o->io_retries > 1000)
		return set_error(
		    -EINVAL, "I/O timeout must be >= 0, I/O retries -1..1000");
	return 0;
}

/* Parse url into r->url and find its transport: 0, or -errno, set. */
static int open_url(struct rblk *r, const char *url)
{
	char err[256];

	if (rblk_url_parse(url, RBLK_DEFAULT_PORT, &r->url, err, sizeof(err)))
		return set_error(-EINVAL, "%s", err);
	if (!r->url.export_name[0])
		return set_error(-EINVAL, "'%s': no export name (want %s)", url,
				 rblk_url_form(r->url.scheme, true));
	r->ops = xp_find(r->url.scheme);
	if (!r->ops)
		return set_error(
		    -EPROTONOSUPPORT,
		    "'%s': unknown transport '%s' (tcp, rdma, unix)", url,
		    r->url.scheme);
	return 0;
}

/*
 * The session, before any queue connects: URL, paths, host name, secret,
 * the queue array, the info that does not come from the target, and the
 * options kept for reconnects (o's strings are r's from then on). On
 * failure the caller frees r's paths and r.
 */
static int open_session(struct rblk *r, const char *url, struct rblk_opts *o)
{
	int ret;

	ret = open_url(r, url);
	if (ret)
		return ret;
	ret = lib_path_setup(r, url, o);
	if (ret)
		return ret;
	if (o->host_name)
		snprintf(r->host_name, sizeof(r->host_name), "%s",
			 o->host_name);
	else if (gethostname(r->host_name, sizeof(r->host_name) - 1))
		snprintf(r->host_name, sizeof(r->host_name), "unknown");
	ret = open_secret(r, o);
	if (ret)
		return ret;
	ret = lib_tls_open(o, &r->url, r->host_name, r->secret, r->secret_len,
			   &r->tls);
	if (ret)
		return ret;
	r->poll_spin_us = o->poll_spin_us;
	r->queues = calloc(o->queues, sizeof(*r->queues));
	if (!r->queues)
		return set_error(-ENOMEM, "out of memory");
	r->info.transport =
	    strcmp(r->url.scheme, "unix") ? r->ops->name : "unix";
	r->info.export_name = r->url.export_name;
	r->info.host = r->url.host;
	r->info.port = r->url.port;
	r->info.queues = o->queues;
	o->host_name = NULL; /* r->host_name holds it */
	o->key_file = NULL;  /* r->secret holds it */
	o->paths = NULL;     /* r->paths holds them */
	o->tls_ca_file = o->tls_cert_file = o->tls_key_file = NULL; /* r->tls */
	r->opts = *o;
	return 0;
}

/*
 * Open every queue in turn: its poll group and timer, its first
 * connection, its data path; then check the paths agree. On failure the
 * caller closes r (nr_queues counts those to destroy).
 */
static int open_queues(struct rblk *r, const struct rblk_opts *o)
{
	int ret;

	for (unsigned int i = 0; i < o->queues; i++) {
		r->queues[i].r = r;
		r->queues[i].index = i;
		r->queues[i].timer_fd = -1;
		r->nr_queues = i + 1;
		ret = queue_init(&r->queues[i]);
		if (!ret)
			ret = lib_path_open_queue(&r->queues[i], o);
		if (!ret)
			ret = lib_queue_setup(&r->queues[i]);
		if (ret)
			return ret;
	}
	return lib_path_verify(r);
}

int rblk_open(const char *url, const struct rblk_opts *user_opts,
	      struct rblk **out)
{
	struct rblk_opts o;
	struct rblk *r;
	int ret;

	last_error[0] = 0;
	ret = open_opts(user_opts, &o);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return set_error(-ENOMEM, "out of memory");
	ret = open_session(r, url, &o);
	if (ret) {
		lib_path_free(r);
		xp_tls_destroy(r->tls);
		memset(r->secret, 0, sizeof(r->secret));
		free(r);
		return ret;
	}
	ret = open_queues(r, &o);
	if (ret) {
		rblk_close(r);
		return ret;
	}
	*out = r;
	return 0;
}

void rblk_close(struct rblk *r)
{
	if (!r)
		return;
	for (unsigned int i = 0; i < r->nr_queues; i++)
		queue_destroy(&r->queues[i]);
	free(r->queues);
	lib_path_free(r);
	xp_tls_destroy(r->tls);
	memset(r->secret, 0, sizeof(r->secret));
	free(r);
}

const struct rblk_info *rblk_get_info(const struct rblk *r)
{
	return &r->info;
}

uint64_t rblk_get_size(const struct rblk *r)
{
	return __atomic_load_n(&r->info.size, __ATOMIC_ACQUIRE);
}

bool lib_size_learned(struct rblk_queue *q, uint64_t size, const char *how)
{
	struct rblk *r = q->r;
	uint64_t cur = rblk_get_size(r);

	if (size % r->info.block_size)
		return false;
	while (size > cur)
		if (__atomic_compare_exchange_n(&r->info.size, &cur, size,
						false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			log_info("queue %u: export %s grew from %llu to %llu "
				 "bytes (%s)",
				 q->index, r->info.export_name,
				 (unsigned long long)cur,
				 (unsigned long long)size, how);
			if (r->opts.on_resize)
				r->opts.on_resize(r, cur, size,
						  r->opts.on_resize_arg);
			return true;
		}
	if (size < cur && size != q->shrink_told) {
		q->shrink_told = size;
		log_err("queue %u: the target says export %s shrank from %llu "
			"to %llu bytes (%s): the volume keeps its size here, "
			"and I/O past %llu fails (ERANGE)",
			q->index, r->info.export_name, (unsigned long long)cur,
			(unsigned long long)size, how,
			(unsigned long long)size);
	}
	return true;
}

struct rblk_queue *rblk_get_queue(struct rblk *r, unsigned int index)
{
	return index < r->nr_queues ? &r->queues[index] : NULL;
}
