/* SPDX-License-Identifier: MIT */
/*
 * The daemon of `rblk map` and its side of the contract with the front
 * ends (map.h): map_ready(), map_stop_fd(), map_should_stop(),
 * map_set_error().
 *
 * The daemon (a child of `rblk map`, or that process with --foreground):
 * setsid, stdin/stdout on /dev/null, stderr appended to RUN_DIR/map-PID.log;
 * SIGINT/SIGTERM blocked in every thread and left to one signal thread,
 * which turns them into map_stop_fd(); it opens the session (rblk_open)
 * and calls frontend->serve(). It reports to the waiting `rblk map` on a
 * pipe, one status line: "OK <device path>" or "ERR <message>". Errors
 * the front end reports (map_set_error(), or any error line logged in
 * the daemon) go to its record, so `rblk list` shows them and a failure
 * before the device exists is explained without reading the log.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "initiator/cli.h"
#include "initiator/map_internal.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

sigset_t map_stop_sigs;

/* ---- the contract with the front ends (map.h) -------------------------- */

/* One status line to the waiting `rblk map`; closes the pipe. */
static void status_send(struct map_ctx *ctx, const char *kind, const char *msg)
{
	char line[MAP_STATUS_MAX];
	int n;

	if (ctx->status_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%s %s\n", kind, msg);
	if (n >= (int)sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	/* one write below PIPE_BUF: atomic; EPIPE if `rblk map` is gone */
	if (write(ctx->status_fd, line, (size_t)n) < 0)
		log_debug("status pipe: %s", strerror(errno));
	close(ctx->status_fd);
	ctx->status_fd = -1;
}

void map_ready(struct map_ctx *ctx, const char *dev_path, int dev_id)
{
	records_drop_stale(ctx->fe->name, dev_id);
	pthread_mutex_lock(&ctx->lock);
	snprintf(ctx->rec.dev, sizeof(ctx->rec.dev), "%s", dev_path);
	ctx->rec.dev_id = dev_id;
	if (!atomic_load(&ctx->stop))
		snprintf(ctx->rec.state, sizeof(ctx->rec.state), "running");
	record_write(&ctx->rec);
	pthread_mutex_unlock(&ctx->lock);
	atomic_store(&ctx->ready, true);
	log_info("%s is ready: %s (%s, %u queues x %u)", dev_path,
		 ctx->opts.url, ctx->fe->name, ctx->opts.queues,
		 ctx->opts.queue_depth);
	if (ctx->foreground) {
		printf("%s\n", dev_path);
		fflush(stdout);
	} else {
		status_send(ctx, "OK", dev_path);
	}
}

int map_stop_fd(struct map_ctx *ctx)
{
	return ctx->stop_fd;
}

int map_resize_fd(struct map_ctx *ctx)
{
	return ctx->resize_fd;
}

/* librblk's opts.on_resize: on a queue thread, so only a note (map.h). */
static void daemon_resized(struct rblk *r, uint64_t old_size, uint64_t new_size,
			   void *arg)
{
	struct map_ctx *ctx = arg;
	uint64_t one = 1;

	(void)r;
	(void)old_size;
	(void)new_size;
	if (write(ctx->resize_fd, &one, sizeof(one)) < 0)
		log_debug("resize eventfd: %s", strerror(errno));
}

bool map_should_stop(struct map_ctx *ctx)
{
	return atomic_load(&ctx->stop);
}

void map_set_error(struct map_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&ctx->lock);
	va_start(ap, fmt);
	vsnprintf(ctx->rec.error, sizeof(ctx->rec.error), fmt, ap);
	va_end(ap);
	/* before the first write (or after the last) the file is not ours */
	if (!ctx->rec_removed && ctx->rec.pid)
		record_write(&ctx->rec);
	pthread_mutex_unlock(&ctx->lock);
}

/*
 * Every error line the daemon logs (front end, librblk) is its latest
 * error. Runs on the logging thread, which may hold ctx->lock already
 * (record_write() logs its own failures): then the line is only logged.
 */
static void daemon_error_hook(const char *msg, void *arg)
{
	struct map_ctx *ctx = arg;

	if (pthread_mutex_trylock(&ctx->lock))
		return;
	pthread_mutex_unlock(&ctx->lock);
	map_set_error(ctx, "%s", msg);
}

static void map_request_stop(struct map_ctx *ctx)
{
	uint64_t one = 1;

	atomic_store(&ctx->stop, true);
	if (write(ctx->stop_fd, &one, sizeof(one)) < 0)
		log_debug("stop eventfd: %s", strerror(errno));
	pthread_mutex_lock(&ctx->lock);
	if (!ctx->rec_removed && strcmp(ctx->rec.state, "stopping")) {
		snprintf(ctx->rec.state, sizeof(ctx->rec.state), "stopping");
		record_write(&ctx->rec);
	}
	pthread_mutex_unlock(&ctx->lock);
}

/* ---- the daemon --------------------------------------------------------- */

/*
 * Put the session's active path (multipath) and its command timeouts and
 * failures (all queues, rblk_queue_stats()) into the record if they moved.
 */
static void record_refresh_path(struct map_ctx *ctx)
{
	unsigned long long to = 0, failed = 0;
	struct rblk_queue_stats st;
	unsigned int active;
	bool moved = false;

	pthread_mutex_lock(&ctx->lock);
	if (ctx->session && !ctx->rec_removed) {
		for (unsigned int i = 0; i < ctx->opts.queues; i++) {
			struct rblk_queue *q = rblk_get_queue(ctx->session, i);

			if (!q)
				break;
			rblk_queue_stats(q, &st);
			to += st.timeouts;
			failed += st.io_failed;
		}
		if (to != ctx->rec.timeouts || failed != ctx->rec.io_failed) {
			ctx->rec.timeouts = to;
			ctx->rec.io_failed = failed;
			moved = true;
		}
		active = rblk_path_active(ctx->session);
		if (ctx->rec.nr_paths && active != ctx->rec.active) {
			ctx->rec.active = active;
			moved = true;
		}
		if (moved)
			record_write(&ctx->rec);
	}
	pthread_mutex_unlock(&ctx->lock);
}

/*
 * Owns SIGINT/SIGTERM: every other thread has them blocked. Between
 * signals, once a second, it keeps the record's active path current.
 */
static void *signal_thread(void *arg)
{
	const struct timespec tick = {.tv_sec = 1};
	struct map_ctx *ctx = arg;
	int sig;

	for (;;) {
		sig = sigtimedwait(&map_stop_sigs, NULL, &tick);
		if (sig < 0) {
			record_refresh_path(ctx);
			continue;
		}
		log_info("%s: stopping", strsignal(sig));
		map_request_stop(ctx);
	}
	return NULL;
}

/*
 * Lessen the chance that serving a block device deadlocks on memory
 * reclaim that writes to the same device: ask for PF_IO_FLUSHER (our
 * allocations then avoid I/O) and lock pages as they are touched. Both are
 * best effort.
 */
static void daemon_harden(void)
{
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0))
		log_debug("prctl(PR_SET_IO_FLUSHER): %s", strerror(errno));
	/*
	 * Not without root: with MCL_FUTURE, RLIMIT_MEMLOCK would then make
	 * later large mappings fail instead of merely staying unlocked.
	 */
	if (geteuid() == 0 && mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		log_debug("mlockall: %s", strerror(errno));
}

/* stdin/stdout to /dev/null, stderr appended to the log, new session. */
static int daemon_detach(struct map_ctx *ctx)
{
	int fd;

	if (setsid() < 0)
		return -errno;
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	fd =
	    open(ctx->rec.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	dup2(fd, STDERR_FILENO);
	close(fd);
	return 0;
}

/*
 * Detach (unless in the foreground), write the first record and start the
 * signal thread. 0, or -1 with the reason in msg (the record, if written,
 * is then *rec_written).
 */
static int daemon_start(struct map_ctx *ctx, char *msg, size_t len,
			bool *rec_written)
{
	pthread_t sig_tid;
	int ret;

	*rec_written = false;
	if (!ctx->foreground) {
		ret = daemon_detach(ctx);
		if (ret) {
			snprintf(msg, len,
				 "cannot start the daemon: %.600s: %s",
				 ctx->rec.log, strerror(-ret));
			return -1;
		}
	}
	log_set_prefix("rblk map");
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	ctx->stop_fd = eventfd(0, EFD_CLOEXEC);
	ctx->resize_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->stop_fd < 0 || ctx->resize_fd < 0) {
		snprintf(msg, len, "eventfd: %s", strerror(errno));
		return -1;
	}
	if (record_write(&ctx->rec)) {
		snprintf(msg, len, "cannot write the record %.600s",
			 ctx->rec.file);
		return -1;
	}
	*rec_written = true;
	log_set_error_hook(daemon_error_hook, ctx);
	/* stop_fd stays open until exit: the signal thread may write it */
	ret = pthread_create(&sig_tid, NULL, signal_thread, ctx);
	if (ret) {
		snprintf(msg, len, "pthread_create: %s", strerror(ret));
		return -1;
	}
	pthread_detach(sig_tid);
	return 0;
}

/* Open the rblk session the mapping serves; NULL with msg set. */
static struct rblk *daemon_open(struct map_ctx *ctx, char *msg, size_t len)
{
	struct rblk_opts ro;
	struct rblk *r;

	rblk_opts_init(&ro);
	ro.queues = ctx->opts.queues;
	ro.queue_depth = ctx->opts.queue_depth;
	ro.reconnect_delay_ms = ctx->opts.reconnect_delay_ms;
	ro.ctrl_loss_timeout_s = ctx->opts.ctrl_loss_timeout_s;
	if (ctx->opts.read_only)
		ro.flags |= RBLK_OPEN_READ_ONLY;
	cli_auth_apply(&ctx->opts.auth, &ro);
	cli_paths_apply(&ctx->opts.paths, &ro);
	cli_io_apply(&ctx->opts.io, &ro);
	ro.direct = ctx->opts.direct;
	ro.on_resize = daemon_resized;
	ro.on_resize_arg = ctx;
	if (rblk_open(ctx->opts.url, &ro, &r) < 0) {
		snprintf(msg, len, "cannot open %s: %s", ctx->opts.url,
			 rblk_last_error());
		log_err("%s", msg);
		return NULL;
	}
	return r;
}

/*
 * Why serve() failed before the device existed: the error the front end
 * reported (or logged) when there is one. In the foreground the user saw
 * those lines already.
 */
static void serve_failure(struct map_ctx *ctx, int ret, char *msg, size_t len)
{
	char why[MAP_ERROR_MAX];

	pthread_mutex_lock(&ctx->lock);
	snprintf(why, sizeof(why), "%s", ctx->rec.error);
	pthread_mutex_unlock(&ctx->lock);
	if (ctx->foreground || !why[0])
		snprintf(why, sizeof(why), "%s",
			 strerror(ret < 0 ? -ret : EIO));
	snprintf(msg, len, "%s: %s", ctx->fe->name, why);
}

int map_daemon(struct map_ctx *ctx)
{
	char msg[MAP_STATUS_MAX - 8] = "";
	bool rec_written;
	struct rblk *r;
	int ret, rc = 1;

	if (daemon_start(ctx, msg, sizeof(msg), &rec_written)) {
		if (rec_written)
			goto out_remove_record;
		goto out_report;
	}
	log_info(
	    "pid %d: mapping %s with the %s front end (%u queues x %u, poll spin %u us)",
	    (int)getpid(), ctx->opts.url, ctx->fe->name, ctx->opts.queues,
	    ctx->opts.queue_depth, ctx->opts.poll_spin_us);
	r = daemon_open(ctx, msg, sizeof(msg));
	if (!r)
		goto out_remove_record;
	/* written with the device (map_ready): the udev namer's serial */
	pthread_mutex_lock(&ctx->lock);
	cli_format_vol_id(rblk_get_info(r)->vol_id, ctx->rec.vol_id);
	ctx->session = r;
	pthread_mutex_unlock(&ctx->lock);
	if (map_should_stop(ctx)) {
		snprintf(msg, sizeof(msg),
			 "stopped by a signal before the device was set up");
		goto out_close;
	}
	daemon_harden();

	ret = ctx->fe->serve(ctx, r, &ctx->opts);
	if (!atomic_load(&ctx->ready)) {
		serve_failure(ctx, ret, msg, sizeof(msg));
		goto out_close;
	}
	if (ret < 0) {
		log_err("%s: %s: %s", ctx->fe->name, ctx->rec.dev,
			strerror(-ret));
	} else {
		log_info("%s: unmapped", ctx->rec.dev);
		rc = 0;
	}

out_close:
	pthread_mutex_lock(&ctx->lock);
	ctx->session = NULL;
	pthread_mutex_unlock(&ctx->lock);
	rblk_close(r);
out_remove_record:
	/* the signal thread and the error hook must not write it back */
	pthread_mutex_lock(&ctx->lock);
	ctx->rec_removed = true;
	unlink(ctx->rec.file);
	pthread_mutex_unlock(&ctx->lock);
out_report:
	log_set_error_hook(NULL, NULL);
	if (msg[0] && ctx->foreground) {
		fprintf(stderr, "rblk map: %s\n", msg);
	} else if (msg[0]) {
		status_send(ctx, "ERR", msg);
		/* the user got the message: the log has nothing more */
		unlink(ctx->rec.log);
	} else if (!rc && !ctx->foreground) {
		unlink(ctx->rec.log); /* a clean unmap; kept after errors */
	}
	return rc;
}
