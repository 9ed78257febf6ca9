/* SPDX-License-Identifier: MIT */
/*
 * rblk map / unmap / list: the framework of initiator/map.h.
 *
 * Processes:
 *   `rblk map URL`  parses options, picks a front end (probe() in table
 *                   order, or the one named by --nbd / --ublk), then forks
 *                   BEFORE anything touches verbs (resources opened by
 *                   librblk must never be shared across fork). It waits on a
 *                   pipe for one status line from the daemon:
 *                     "OK <device path>"  -> prints the path, exits 0
 *                     "ERR <message>"     -> "rblk map: <message>", exit 1
 *                   EOF without a line means the daemon died; a daemon that
 *                   says nothing within MAP_READY_TIMEOUT_S is stopped.
 *   daemon (child)  setsid, stdin/stdout on /dev/null, stderr appended to
 *                   RUN_DIR/map-PID.log; blocks SIGINT/SIGTERM in every
 *                   thread and leaves them to one signal thread, which turns
 *                   them into map_stop_fd(); opens the session (rblk_open)
 *                   and calls frontend->serve(). --foreground skips the fork
 *                   and the redirections: the same code runs in the `rblk
 *                   map` process, which prints the device when it is ready.
 *
 * Records: RUN_DIR (${RBLK_RUN_DIR:-/run/rblk}) holds one file per mapping,
 * map-PID.rec, written only by its daemon (atomically: temp file + rename)
 * and removed by it on exit. Lines are key=value: url, frontend, dev,
 * dev_id, queues, depth, pid, start (the daemon's start time in clock
 * ticks since boot, /proc/PID/stat field 22, so a recycled pid is not
 * taken for the daemon), state (starting, running, stopping), log.
 * A record whose daemon died is removed by the next list/unmap when its
 * device is gone; when the device is still attached the record stays and
 * is shown with state "dead" (ublk keeps such a device for `rblk map
 * --recover`, whose new daemon drops the stale record at map_ready()), and
 * `rblk unmap` detaches it with frontend->detach().
 *
 * Unmap: SIGTERM to the daemon, then wait (bounded) for it to exit; the
 * daemon removes the device and its record itself. With --force, or when
 * the daemon is gone, the device is detached with frontend->detach().
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/url.h"
#include "common/util.h"
#include "initiator/cli.h"
#include "initiator/map.h"

#define MAP_DEFAULT_RUN_DIR "/run/rblk"
#define MAP_DEFAULT_DEPTH 64
#define MAP_MAX_DEFAULT_QUEUES 4
#define MAP_MAX_QUEUES 256
#define MAP_READY_TIMEOUT_S 120 /* `rblk map` waits this long for the device   \
				 */
#define MAP_CHILD_EXIT_S 30  /* ... and this long for a failed daemon to go */
#define UNMAP_WAIT_S 30	     /* `rblk unmap` waits this long for the daemon */
#define UNMAP_FORCE_WAIT_S 5 /* ... with --force, before SIGKILL */
#define MAP_STATUS_MAX 1024  /* one status line, daemon -> `rblk map` */

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

/*
 * Front ends, in the order auto-selection tries them: the first whose
 * probe() succeeds serves the mapping.
 */
static const struct frontend_ops *const frontends[] = {
    &frontend_ublk_ops, /* first: the default where ublk_drv is loaded */
    &frontend_nbd_ops,
};

/* Hardware queues of /dev/ublkbID (entries of its mq/ directory), or -errno. */
static int ublk_hw_queues(int id)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/block/ublkb%d/mq", id);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* One mapping as its record file describes it. */
struct map_record {
	char file[PATH_MAX]; /* the record's own path */
	char url[512];
	char frontend[16];
	char dev[128]; /* "" until the device exists */
	int dev_id;    /* -1 until the device exists */
	unsigned int queues;
	unsigned int depth;
	pid_t pid;
	unsigned long long start; /* /proc/PID/stat starttime */
	char state[16];
	char log[PATH_MAX];
	bool alive; /* not in the file: the daemon runs (records_load) */
};

struct map_ctx {
	const struct frontend_ops *fe;
	struct map_opts opts;
	bool foreground;
	int status_fd; /* pipe to `rblk map`; -1 once used, or in foreground */
	int stop_fd; /* eventfd; written once per stop request, never drained */
	atomic_bool stop;
	atomic_bool ready;
	bool rec_removed;     /* the record is gone for good; under lock */
	off_t log_start;      /* where this daemon's lines start in rec.log */
	pthread_mutex_t lock; /* rec and its file */
	struct map_record rec;
};

/* ---- small helpers ------------------------------------------------------ */

static const char *run_dir(void)
{
	const char *d = getenv("RBLK_RUN_DIR");

	return d && *d ? d : MAP_DEFAULT_RUN_DIR;
}

static int usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rblk %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'rblk %s --help'.\n", cmd);
	return 2;
}

static int set_log_level(const char *cmd, const char *s)
{
	int lvl = log_parse_level(s);

	if (lvl < 0)
		return usage_error(cmd,
				   "--log-level: '%s': expected error, "
				   "warn, info or debug",
				   s);
	log_set_level(lvl);
	return -1;
}

static const struct frontend_ops *frontend_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(frontends); i++)
		if (!strcmp(frontends[i]->name, name))
			return frontends[i];
	return NULL;
}

/* mkdir -p for the run directory (one or two levels in practice). */
static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * Start time (clock ticks after boot) of pid, and whether it is a zombie.
 * 0, or -ESRCH when there is no such process.
 */
static int proc_start(pid_t pid, unsigned long long *start, bool *zombie)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ESRCH;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	/* "pid (comm) S ppid ..."; comm may hold spaces and parentheses */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -ESRCH;
	p += 2;
	*zombie = *p == 'Z' || *p == 'X';
	/* p is at field 3 (state); starttime is field 22 */
	for (field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return -ESRCH;
	v = strtoull(p, NULL, 10);
	*start = v;
	return 0;
}

/* Is the daemon of rec still running (not a zombie, not a recycled pid)? */
static bool record_alive(const struct map_record *rec)
{
	unsigned long long start;
	bool zombie;

	if (rec->pid <= 0 || proc_start(rec->pid, &start, &zombie))
		return false;
	return !zombie && (!rec->start || start == rec->start);
}

/* ---- record files ------------------------------------------------------- */

/* Write rec to rec->file atomically. Caller holds ctx->lock if shared. */
static int record_write(const struct map_record *rec)
{
	char tmp[PATH_MAX + 8];
	FILE *f;
	int ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", rec->file);
	f = fopen(tmp, "we");
	if (!f) {
		ret = -errno;
		log_err("cannot write the record %s: %s", tmp, strerror(errno));
		return ret;
	}
	fprintf(f,
		"url=%s\nfrontend=%s\ndev=%s\ndev_id=%d\nqueues=%u\n"
		"depth=%u\npid=%d\nstart=%llu\nstate=%s\nlog=%s\n",
		rec->url, rec->frontend, rec->dev, rec->dev_id, rec->queues,
		rec->depth, (int)rec->pid, rec->start, rec->state, rec->log);
	if (fflush(f) || ferror(f))
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, rec->file))
		ret = -errno;
	if (ret) {
		log_err("cannot write the record %s: %s", rec->file,
			strerror(-ret));
		unlink(tmp);
	}
	return ret;
}

static void copy_field(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src);
}

/* Parse a record file. 0, or -EINVAL when it is not a record. */
static int record_read(const char *path, struct map_record *rec)
{
	char line[1024];
	bool have_pid = false;
	FILE *f;

	memset(rec, 0, sizeof(*rec));
	rec->dev_id = -1;
	copy_field(rec->file, sizeof(rec->file), path);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '='), *v;
		size_t n = strlen(line);

		if (n && line[n - 1] == '\n')
			line[n - 1] = 0;
		if (!eq)
			continue;
		*eq = 0;
		v = eq + 1;
		if (!strcmp(line, "url"))
			copy_field(rec->url, sizeof(rec->url), v);
		else if (!strcmp(line, "frontend"))
			copy_field(rec->frontend, sizeof(rec->frontend), v);
		else if (!strcmp(line, "dev"))
			copy_field(rec->dev, sizeof(rec->dev), v);
		else if (!strcmp(line, "dev_id"))
			rec->dev_id = atoi(v);
		else if (!strcmp(line, "queues"))
			rec->queues = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(line, "depth"))
			rec->depth = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(line, "pid"))
			have_pid = (rec->pid = (pid_t)atoi(v)) > 0;
		else if (!strcmp(line, "start"))
			rec->start = strtoull(v, NULL, 10);
		else if (!strcmp(line, "state"))
			copy_field(rec->state, sizeof(rec->state), v);
		else if (!strcmp(line, "log"))
			copy_field(rec->log, sizeof(rec->log), v);
	}
	fclose(f);
	return have_pid && rec->frontend[0] ? 0 : -EINVAL;
}

/* Is the device of rec still attached (present with a non-zero size)? */
static bool record_device_present(const struct map_record *rec)
{
	const char *base = strrchr(rec->dev, '/');
	char path[256], buf[32];
	ssize_t n;
	int fd;

	if (rec->dev_id < 0 || !base || !base[1])
		return false;
	snprintf(path, sizeof(path), "/sys/block/%s/size", base + 1);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return strtoull(buf, NULL, 10) > 0;
}

/*
 * The daemon of rec is gone and its device is still there: detach the
 * device with the front end and remove the record. 0, or -errno (the
 * record is then kept, so that `rblk unmap --force` can try again).
 */
static int record_detach_dead(const struct map_record *rec)
{
	const struct frontend_ops *fe = frontend_find(rec->frontend);
	int ret;

	if (!fe) {
		fprintf(stderr,
			"rblk: %s was made by the %s front end, which "
			"is not built into this rblk\n",
			rec->dev, rec->frontend);
		return -EOPNOTSUPP;
	}
	ret = fe->detach(rec->dev_id);
	if (ret == -ENODEV || ret == -ENOENT)
		ret = 0; /* no driver or no such device: nothing to detach */
	if (ret) {
		fprintf(stderr,
			"rblk: detaching %s (its daemon, pid %d, is "
			"gone) failed: %s\n",
			rec->dev, (int)rec->pid, strerror(-ret));
		return ret;
	}
	unlink(rec->file);
	return 0;
}

/*
 * Records of dead daemons: one whose device is gone (or never came) is
 * removed; one whose device is still attached stays, with state "dead",
 * until `rblk unmap` detaches it or `rblk map --recover` takes it over.
 * Leaves only such records and live ones in recs; returns the new count.
 */
static int records_prune(struct map_record *recs, int n)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		struct map_record *r = &recs[i];

		if (!r->alive && !record_device_present(r)) {
			fprintf(stderr,
				"rblk: the daemon (pid %d) of %s is "
				"gone; removed its record\n",
				(int)r->pid, r->dev[0] ? r->dev : r->url);
			unlink(r->file);
			continue;
		}
		if (!r->alive)
			copy_field(r->state, sizeof(r->state), "dead");
		if (k != i)
			recs[k] = *r;
		k++;
	}
	return k;
}

static int record_cmp(const void *a, const void *b)
{
	const struct map_record *x = a, *y = b;

	if (strcmp(x->frontend, y->frontend))
		return strcmp(x->frontend, y->frontend);
	if (x->dev_id != y->dev_id)
		return x->dev_id < y->dev_id ? -1 : 1;
	return (int)x->pid - (int)y->pid;
}

/*
 * Read every record in the run directory, sorted by front end and device
 * number, each with .alive set. *out is malloc'd (caller frees); returns
 * the count or -errno.
 */
static int records_load(struct map_record **out)
{
	struct map_record *recs = NULL, rec;
	const char *dir = run_dir();
	struct dirent *de;
	int n = 0, cap = 0;
	DIR *d;

	*out = NULL;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		size_t len = strlen(de->d_name);

		if (strncmp(de->d_name, "map-", 4) || len < 5 ||
		    strcmp(de->d_name + len - 4, ".rec"))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     de->d_name) >= sizeof(path))
			continue;
		if (record_read(path, &rec))
			continue;
		rec.alive = record_alive(&rec);
		if (n == cap) {
			struct map_record *p;

			cap = cap ? 2 * cap : 8;
			p = realloc(recs, (size_t)cap * sizeof(*recs));
			if (!p) {
				free(recs);
				closedir(d);
				return -ENOMEM;
			}
			recs = p;
		}
		recs[n++] = rec;
	}
	closedir(d);
	if (n > 1)
		qsort(recs, (size_t)n, sizeof(*recs), record_cmp);
	*out = recs;
	return n;
}

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

/*
 * The device now belongs to this daemon: records that dead daemons left
 * for it (before `rblk map --recover`) are stale.
 */
static void records_drop_stale(const struct map_ctx *ctx, int dev_id)
{
	struct map_record *recs;
	int n = records_load(&recs);

	for (int i = 0; i < n; i++)
		if (!recs[i].alive && recs[i].dev_id == dev_id &&
		    !strcmp(recs[i].frontend, ctx->fe->name))
			unlink(recs[i].file);
	free(recs);
}

void map_ready(struct map_ctx *ctx, const char *dev_path, int dev_id)
{
	records_drop_stale(ctx, dev_id);
	pthread_mutex_lock(&ctx->lock);
	copy_field(ctx->rec.dev, sizeof(ctx->rec.dev), dev_path);
	ctx->rec.dev_id = dev_id;
	if (!atomic_load(&ctx->stop))
		copy_field(ctx->rec.state, sizeof(ctx->rec.state), "running");
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

bool map_should_stop(struct map_ctx *ctx)
{
	return atomic_load(&ctx->stop);
}

static void map_request_stop(struct map_ctx *ctx)
{
	uint64_t one = 1;

	atomic_store(&ctx->stop, true);
	if (write(ctx->stop_fd, &one, sizeof(one)) < 0)
		log_debug("stop eventfd: %s", strerror(errno));
	pthread_mutex_lock(&ctx->lock);
	if (!ctx->rec_removed && strcmp(ctx->rec.state, "stopping")) {
		copy_field(ctx->rec.state, sizeof(ctx->rec.state), "stopping");
		record_write(&ctx->rec);
	}
	pthread_mutex_unlock(&ctx->lock);
}

/* ---- the daemon --------------------------------------------------------- */

static sigset_t stop_sigs;

/* Owns SIGINT/SIGTERM: every other thread has them blocked. */
static void *signal_thread(void *arg)
{
	struct map_ctx *ctx = arg;
	int sig;

	for (;;) {
		if (sigwait(&stop_sigs, &sig))
			continue;
		log_info("%s: stopping", strsignal(sig));
		map_request_stop(ctx);
	}
	return NULL;
}

/*
 * The last error line this daemon wrote to its log ("... error: TEXT"):
 * the best explanation of a failure before map_ready() for the user.
 */
static bool log_last_error(const struct map_ctx *ctx, char *out, size_t len)
{
	char line[1100];
	bool found = false;
	FILE *f;

	if (ctx->foreground || !ctx->rec.log[0])
		return false;
	f = fopen(ctx->rec.log, "re");
	if (!f)
		return false;
	if (fseeko(f, ctx->log_start, SEEK_SET)) {
		fclose(f);
		return false;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, ": error: ");
		size_t n;

		if (!p)
			continue;
		p += strlen(": error: ");
		n = strlen(p);
		if (n && p[n - 1] == '\n')
			p[--n] = 0;
		copy_field(out, len, p);
		found = true;
	}
	fclose(f);
	return found;
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
	ctx->log_start = lseek(STDERR_FILENO, 0, SEEK_END);
	if (ctx->log_start < 0)
		ctx->log_start = 0;
	return 0;
}

/*
 * Body of the daemon (the forked child, or `rblk map --foreground`), with
 * SIGINT/SIGTERM already blocked. Returns the exit code. Reports readiness
 * (map_ready) or the failure through ctx->status_fd, or on stdout/stderr
 * in the foreground.
 */
static int map_daemon(struct map_ctx *ctx)
{
	char msg[MAP_STATUS_MAX - 8] = "", why[900];
	pthread_t sig_tid;
	struct rblk_opts ro;
	struct rblk *r;
	int ret, rc = 1;

	if (!ctx->foreground) {
		ret = daemon_detach(ctx);
		if (ret) {
			snprintf(msg, sizeof(msg),
				 "cannot start the daemon: "
				 "%.600s: %s",
				 ctx->rec.log, strerror(-ret));
			goto out_report;
		}
	}
	log_set_prefix("rblk map");
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	ctx->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx->stop_fd < 0) {
		snprintf(msg, sizeof(msg), "eventfd: %s", strerror(errno));
		goto out_report;
	}
	if (record_write(&ctx->rec)) {
		snprintf(msg, sizeof(msg), "cannot write the record %.600s",
			 ctx->rec.file);
		goto out_report;
	}
	/* stop_fd stays open until exit: the signal thread may write it */
	ret = pthread_create(&sig_tid, NULL, signal_thread, ctx);
	if (ret) {
		snprintf(msg, sizeof(msg), "pthread_create: %s", strerror(ret));
		goto out_remove_record;
	}
	pthread_detach(sig_tid);
	log_info("pid %d: mapping %s with the %s front end (%u queues x %u)",
		 (int)getpid(), ctx->opts.url, ctx->fe->name, ctx->opts.queues,
		 ctx->opts.queue_depth);

	rblk_opts_init(&ro);
	ro.queues = ctx->opts.queues;
	ro.queue_depth = ctx->opts.queue_depth;
	ro.reconnect_delay_ms = ctx->opts.reconnect_delay_ms;
	ro.ctrl_loss_timeout_s = ctx->opts.ctrl_loss_timeout_s;
	if (ctx->opts.read_only)
		ro.flags |= RBLK_OPEN_READ_ONLY;
	cli_auth_apply(&ctx->opts.auth, &ro);
	ro.direct = ctx->opts.direct;
	ret = rblk_open(ctx->opts.url, &ro, &r);
	if (ret < 0) {
		snprintf(msg, sizeof(msg), "cannot open %s: %s", ctx->opts.url,
			 rblk_last_error());
		log_err("%s", msg);
		goto out_remove_record;
	}
	if (map_should_stop(ctx)) {
		snprintf(msg, sizeof(msg),
			 "stopped by a signal before the "
			 "device was set up");
		goto out_close;
	}
	daemon_harden();

	ret = ctx->fe->serve(ctx, r, &ctx->opts);
	if (!atomic_load(&ctx->ready)) {
		if (!log_last_error(ctx, why, sizeof(why)))
			snprintf(why, sizeof(why), "%s",
				 strerror(ret < 0 ? -ret : EIO));
		snprintf(msg, sizeof(msg), "%s: %s", ctx->fe->name, why);
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
	rblk_close(r);
out_remove_record:
	/* the signal thread must not write the record back */
	pthread_mutex_lock(&ctx->lock);
	ctx->rec_removed = true;
	unlink(ctx->rec.file);
	pthread_mutex_unlock(&ctx->lock);
out_report:
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

/* ---- rblk map ------------------------------------------------------------ */

/*
 * Parent side: wait for the daemon's status line, forwarding SIGINT and
 * SIGTERM (blocked here; read from sfd) to it as a request to stop.
 * Returns the exit code. On failure the daemon is waited for (and killed
 * after MAP_CHILD_EXIT_S), so that no daemon is left behind.
 */
static int map_wait_ready(pid_t child, int rfd, int sfd, const char *log_path)
{
	uint64_t deadline = now_ms() + MAP_READY_TIMEOUT_S * 1000ull;
	char buf[MAP_STATUS_MAX + 1];
	size_t have = 0;
	int status;
	char *nl;

	for (;;) {
		struct pollfd p[2] = {
		    {.fd = rfd, .events = POLLIN},
		    {.fd = sfd, .events = POLLIN},
		};
		struct signalfd_siginfo si;
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline) {
			fprintf(stderr,
				"rblk map: no device after %d s; "
				"stopping the daemon (pid %d); its log "
				"is %s\n",
				MAP_READY_TIMEOUT_S, (int)child, log_path);
			kill(child, SIGTERM);
			break;
		}
		if (poll(p, 2, (int)(deadline - now)) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "rblk map: poll: %s\n",
				strerror(errno));
			kill(child, SIGTERM);
			break;
		}
		if (p[1].revents) {
			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				si.ssi_signo = SIGTERM;
			fprintf(stderr,
				"rblk map: %s: stopping the daemon (pid "
				"%d)\n",
				strsignal((int)si.ssi_signo), (int)child);
			kill(child, SIGTERM);
			break;
		}
		if (!p[0].revents)
			continue;
		n = read(rfd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			have += (size_t)n;
			buf[have] = 0;
			nl = strchr(buf, '\n');
			if (!nl && have < sizeof(buf) - 1)
				continue;
			if (nl)
				*nl = 0;
			if (!strncmp(buf, "OK ", 3)) {
				printf("%s\n", buf + 3);
				return 0;
			}
			fprintf(stderr, "rblk map: %s\n",
				!strncmp(buf, "ERR ", 4) ? buf + 4 : buf);
			break;
		}
		/* EOF (or a read error) without a status line */
		fprintf(stderr,
			"rblk map: the daemon (pid %d) exited before "
			"the device was ready; see %s\n",
			(int)child, log_path);
		break;
	}
	for (int i = 0; i < MAP_CHILD_EXIT_S * 20; i++) {
		if (waitpid(child, &status, WNOHANG) == child)
			return 1;
		usleep(50 * 1000);
	}
	fprintf(stderr,
		"rblk map: the daemon (pid %d) did not exit within "
		"%d s; killing it\n",
		(int)child, MAP_CHILD_EXIT_S);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	return 1;
}

static void map_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk map URL [--nbd | --ublk] [--queues N] [--depth N] [--read-only]\n"
	    "                    [--direct | --no-direct]\n"
	    "                    [--device-id N | --recover N] [--timeout SEC]\n"
	    "                    [--reconnect-delay SEC] [--ctrl-loss-timeout SEC]\n"
	    "                    [--foreground] [--log-level L] [--help]\n"
	    "Present the rblk volume URL (rdma://HOST[:PORT]/EXPORT or\n"
	    "tcp://HOST[:PORT]/EXPORT) as a local block device and print its path.\n"
	    "A daemon keeps the session; 'rblk unmap DEV' removes the device.\n\n"
	    "  --ublk             use the ublk driver (/dev/ublkbN)\n"
	    "  --nbd              use the kernel NBD driver over netlink (/dev/nbdN)\n"
	    "                     (default: the first that works here, ublk before nbd)\n"
	    "  --queues N         rblk queues = hardware queues / NBD sockets, 1 to %d\n"
	    "                     (default: online CPUs, at most %d)\n"
	    "  --depth N          requests in flight per queue (default %d)\n"
	    "  --read-only        log in read-only; the device is read-only\n"
	    "  --direct           require direct volume access (RDMA straight to the\n"
	    "                     target's volume memory); default: use it if offered\n"
	    "  --no-direct        always use the target's slots\n"
	    "  --device-id N      use device number N (/dev/nbdN, /dev/ublkbN)\n"
	    "  --recover N        ublk: take over device N, whose daemon died, with a\n"
	    "                     new session; its queued I/O resumes\n"
	    "  --timeout SEC      kernel request timeout (default: the front end's;\n"
	    "                     nbd: 30, or the ctrl-loss timeout + 30 if longer,\n"
	    "                     none if that is -1)\n"
	    "  --reconnect-delay SEC\n"
	    "                     when the connection to the target is lost, wait SEC\n"
	    "                     between reconnect attempts (doubling up to 10 s;\n"
	    "                     default 1); the device stays and I/O waits\n"
	    "  --ctrl-loss-timeout SEC\n"
	    "                     give up after SEC seconds without a connection and\n"
	    "                     fail I/O with EIO (default 60; 0 at once; -1 never)\n"
	    "  --foreground       do not detach: log to stderr, stop on SIGINT/SIGTERM\n"
	    "  --log-level L      error, warn, info (default) or debug\n"
	    CLI_AUTH_HELP
	    "  -h, --help         show this help\n\n"
	    "The daemon logs to %s/map-PID.log (directory: $RBLK_RUN_DIR).\n"
	    "Exit status: 0 with the device path on stdout; 1 on errors; 2 on usage\n"
	    "errors.\n",
	    MAP_MAX_QUEUES, MAP_MAX_DEFAULT_QUEUES, MAP_DEFAULT_DEPTH,
	    MAP_DEFAULT_RUN_DIR);
}

static unsigned int default_queues(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	return (unsigned int)MIN(n, (long)MAP_MAX_DEFAULT_QUEUES);
}

/* Pick the front end: the named one, or the first whose probe works. */
static const struct frontend_ops *map_pick_frontend(const char *want)
{
	char why[256], all[1024] = "";
	size_t off = 0;
	const struct frontend_ops *fe;

	if (want) {
		fe = frontend_find(want);
		if (!fe) {
			fprintf(stderr,
				"rblk map: the %s front end is not "
				"built into this rblk\n",
				want);
			return NULL;
		}
		why[0] = 0;
		if (fe->probe(why, sizeof(why))) {
			fprintf(stderr, "rblk map: %s: %s\n", want,
				why[0] ? why : "not available");
			return NULL;
		}
		return fe;
	}
	for (size_t i = 0; i < ARRAY_SIZE(frontends); i++) {
		fe = frontends[i];
		why[0] = 0;
		if (!fe->probe(why, sizeof(why)))
			return fe;
		log_debug("front end %s: %s", fe->name, why);
		if (off < sizeof(all))
			off += (size_t)snprintf(all + off, sizeof(all) - off,
						"%s%s: %s", off ? "; " : "",
						fe->name,
						why[0] ? why : "not available");
	}
	fprintf(stderr, "rblk map: no block device front end works here (%s)\n",
		all);
	return NULL;
}

int cmd_map(int argc, char **argv)
{
	enum {
		OPT_NBD = 256,
		OPT_UBLK,
		OPT_QUEUES,
		OPT_DEPTH,
		OPT_RO,
		OPT_DEVID,
		OPT_RECOVER,
		OPT_TIMEOUT,
		OPT_FG,
		OPT_LOGLEVEL,
		OPT_DIRECT,
		OPT_NO_DIRECT,
		OPT_RECONNECT_DELAY,
		OPT_CTRL_LOSS,
	};
	static const struct option longopts[] = {
	    {"nbd", no_argument, NULL, OPT_NBD},
	    {"ublk", no_argument, NULL, OPT_UBLK},
	    {"queues", required_argument, NULL, OPT_QUEUES},
	    {"depth", required_argument, NULL, OPT_DEPTH},
	    {"queue-depth", required_argument, NULL, OPT_DEPTH},
	    {"read-only", no_argument, NULL, OPT_RO},
	    {"device-id", required_argument, NULL, OPT_DEVID},
	    {"recover", required_argument, NULL, OPT_RECOVER},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"foreground", no_argument, NULL, OPT_FG},
	    {"direct", no_argument, NULL, OPT_DIRECT},
	    {"no-direct", no_argument, NULL, OPT_NO_DIRECT},
	    {"log-level", required_argument, NULL, OPT_LOGLEVEL},
	    {"reconnect-delay", required_argument, NULL, OPT_RECONNECT_DELAY},
	    {"ctrl-loss-timeout", required_argument, NULL, OPT_CTRL_LOSS},
	    {"help", no_argument, NULL, 'h'},
	    CLI_AUTH_LONGOPTS,
	    {NULL, 0, NULL, 0},
	};
	static struct map_ctx
	    ctx; /* outlives cmd_map in the daemon's threads */
	const char *want = NULL, *dir;
	char err[256];
	struct rblk_url u;
	bool queues_given = false;
	struct rblk_opts ro;
	unsigned long v;
	int ch, ret, pfd[2], sfd, ms;
	pid_t child;

	memset(&ctx, 0, sizeof(ctx));
	rblk_opts_init(&ro); /* the library's reconnect defaults */
	ctx.opts.reconnect_delay_ms = ro.reconnect_delay_ms;
	ctx.opts.ctrl_loss_timeout_s = ro.ctrl_loss_timeout_s;
	ctx.status_fd = -1;
	ctx.stop_fd = -1;
	ctx.opts.queues = default_queues();
	ctx.opts.queue_depth = MAP_DEFAULT_DEPTH;
	ctx.opts.dev_id = -1;
	ctx.opts.recover_id = -1;
	log_set_level(LOG_INFO);
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_auth_opt(ch, optarg, &ctx.opts.auth))
			continue;
		switch (ch) {
		case OPT_NBD:
		case OPT_UBLK:
			if (want)
				return usage_error("map", "--nbd and --ublk "
							  "are exclusive");
			want = ch == OPT_NBD ? "nbd" : "ublk";
			break;
		case OPT_QUEUES:
			if (parse_uint(optarg, 1, MAP_MAX_QUEUES, &v))
				return usage_error("map",
						   "--queues: '%s' is "
						   "not a number from 1 to %d",
						   optarg, MAP_MAX_QUEUES);
			ctx.opts.queues = (unsigned int)v;
			queues_given = true;
			break;
		case OPT_DEPTH:
			if (parse_uint(optarg, 1, RBLK_MAX_QD, &v))
				return usage_error("map",
						   "--depth: '%s' is "
						   "not a number from 1 to %d",
						   optarg, RBLK_MAX_QD);
			ctx.opts.queue_depth = (unsigned int)v;
			break;
		case OPT_RO:
			ctx.opts.read_only = true;
			break;
		case OPT_DIRECT:
			ctx.opts.direct = RBLK_DIRECT_ON;
			break;
		case OPT_NO_DIRECT:
			ctx.opts.direct = RBLK_DIRECT_OFF;
			break;
		case OPT_DEVID:
			if (parse_uint(optarg, 0, INT_MAX, &v))
				return usage_error("map",
						   "--device-id: '%s' "
						   "is not a device number",
						   optarg);
			ctx.opts.dev_id = (int)v;
			break;
		case OPT_RECOVER:
			if (parse_uint(optarg, 0, INT_MAX, &v))
				return usage_error("map",
						   "--recover: '%s' is "
						   "not a device number",
						   optarg);
			ctx.opts.recover_id = (int)v;
			break;
		case OPT_TIMEOUT:
			if (parse_uint(optarg, 1, 86400, &v))
				return usage_error("map",
						   "--timeout: '%s' is "
						   "not a number of seconds "
						   "from 1 to 86400",
						   optarg);
			ctx.opts.io_timeout_s = (unsigned int)v;
			break;
		case OPT_FG:
			ctx.foreground = true;
			break;
		case OPT_RECONNECT_DELAY:
			if (parse_seconds_ms(optarg, false, &ms))
				return usage_error("map",
						   "--reconnect-delay: '%s' is "
						   "not a number of seconds",
						   optarg);
			ctx.opts.reconnect_delay_ms = ms;
			break;
		case OPT_CTRL_LOSS:
			if (parse_seconds_ms(optarg, true, &ms))
				return usage_error("map",
						   "--ctrl-loss-timeout: '%s' is "
						   "not a number of seconds "
						   "(or -1)",
						   optarg);
			ctx.opts.ctrl_loss_timeout_s = ms < 0 ? -1 :
							(ms + 999) / 1000;
			break;
		case OPT_LOGLEVEL:
			ret = set_log_level("map", optarg);
			if (ret >= 0)
				return ret;
			break;
		case 'h':
			map_usage(stdout);
			return 0;
		case ':':
			return usage_error("map", "option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("map", "unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("map", "missing the volume URL");
	if (optind + 1 < argc)
		return usage_error("map", "unexpected argument '%s'",
				   argv[optind + 1]);
	ctx.opts.url = argv[optind];
	if (ctx.opts.recover_id >= 0 && ctx.opts.dev_id >= 0)
		return usage_error("map", "--recover and --device-id are "
					  "exclusive");
	if (ctx.opts.recover_id >= 0 && !queues_given) {
		/* a recovered ublk device keeps its hardware queue count */
		int hw = ublk_hw_queues(ctx.opts.recover_id);

		if (hw > 0)
			ctx.opts.queues = (unsigned int)hw;
	}
	if (rblk_url_parse(ctx.opts.url, RBLK_DEFAULT_PORT, &u, err,
			   sizeof(err)))
		return usage_error("map", "%s", err);
	if (!u.export_name[0])
		return usage_error("map",
				   "'%s' names no export "
				   "(rdma://HOST[:PORT]/EXPORT)",
				   ctx.opts.url);

	ctx.fe = map_pick_frontend(want);
	if (!ctx.fe)
		return 1;

	dir = run_dir();
	ret = mkdir_p(dir, 0755);
	if (ret) {
		fprintf(stderr, "rblk map: cannot create %s: %s\n", dir,
			strerror(-ret));
		return 1;
	}
	pthread_mutex_init(&ctx.lock, NULL);
	copy_field(ctx.rec.url, sizeof(ctx.rec.url), ctx.opts.url);
	copy_field(ctx.rec.frontend, sizeof(ctx.rec.frontend), ctx.fe->name);
	copy_field(ctx.rec.state, sizeof(ctx.rec.state), "starting");
	ctx.rec.dev_id = -1;
	ctx.rec.queues = ctx.opts.queues;
	ctx.rec.depth = ctx.opts.queue_depth;

	/*
	 * SIGINT/SIGTERM are blocked from here on: in the daemon, in every
	 * thread it will have (librblk's and the front end's included, since
	 * threads inherit the mask), and taken by its signal thread alone; in
	 * the waiting parent, read from a signalfd and forwarded.
	 */
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);

	if (ctx.foreground) {
		bool zombie;

		ctx.rec.pid = getpid();
		proc_start(ctx.rec.pid, &ctx.rec.start, &zombie);
		snprintf(ctx.rec.file, sizeof(ctx.rec.file), "%s/map-%d.rec",
			 dir, (int)ctx.rec.pid);
		return map_daemon(&ctx);
	}

	sfd = signalfd(-1, &stop_sigs, SFD_CLOEXEC);
	if (sfd < 0) {
		fprintf(stderr, "rblk map: signalfd: %s\n", strerror(errno));
		return 1;
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		fprintf(stderr, "rblk map: pipe: %s\n", strerror(errno));
		close(sfd);
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "rblk map: fork: %s\n", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		close(sfd);
		return 1;
	}
	if (child == 0) {
		bool zombie;

		close(pfd[0]);
		close(sfd);
		ctx.status_fd = pfd[1];
		ctx.rec.pid = getpid();
		proc_start(ctx.rec.pid, &ctx.rec.start, &zombie);
		snprintf(ctx.rec.file, sizeof(ctx.rec.file), "%s/map-%d.rec",
			 dir, (int)ctx.rec.pid);
		snprintf(ctx.rec.log, sizeof(ctx.rec.log), "%s/map-%d.log", dir,
			 (int)ctx.rec.pid);
		_exit(map_daemon(&ctx));
	}
	close(pfd[1]);
	{
		char log_path[PATH_MAX];

		snprintf(log_path, sizeof(log_path), "%s/map-%d.log", dir,
			 (int)child);
		ret = map_wait_ready(child, pfd[0], sfd, log_path);
	}
	close(pfd[0]);
	close(sfd);
	return ret;
}

/* ---- rblk unmap -----------------------------------------------------------
 */

static void unmap_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk unmap DEV|ID [--force] [--help]\n"
	    "Remove a device made by 'rblk map': DEV is its path (/dev/nbd0) or name\n"
	    "(nbd0), ID its device number. The daemon is asked to stop (SIGTERM): it\n"
	    "flushes the device, removes it and closes the session; unmap waits up to\n"
	    "%d s for it.\n\n"
	    "  -f, --force    unmap even if the device is mounted or held open; if the\n"
	    "                 daemon has not gone after %d s, kill it and detach the\n"
	    "                 device directly. Also detaches an rblk device that has\n"
	    "                 no record.\n"
	    "  -h, --help     show this help\n",
	    UNMAP_WAIT_S, UNMAP_FORCE_WAIT_S);
}

/* Does rec name the device arg (path, name, or number)? */
static bool record_matches(const struct map_record *rec, const char *arg,
			   const char *real)
{
	const char *base;
	char *end;
	long id;

	if (!rec->dev[0])
		return false;
	id = strtol(arg, &end, 10);
	if (*arg && !*end)
		return id == rec->dev_id;
	if (!strcmp(arg, rec->dev) || (real[0] && !strcmp(real, rec->dev)))
		return true;
	base = strrchr(rec->dev, '/');
	return base && !strcmp(arg, base + 1);
}

/* Wait up to secs for rec's daemon to be gone. */
static bool wait_daemon_exit(const struct map_record *rec, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		if (!record_alive(rec))
			return true;
		usleep(50 * 1000);
	}
	return !record_alive(rec);
}

/* Is dev mounted or held open exclusively? */
static bool device_busy(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0) {
		close(fd);
		return false;
	}
	return errno == EBUSY;
}

/*
 * DEV without a record: which front end and number does its name say?
 * "/dev/nbd3" or "nbd3" -> nbd, 3; "/dev/ublkb2" or "ublkb2" -> ublk, 2.
 */
static const struct frontend_ops *dev_from_name(const char *arg, int *id)
{
	static const struct {
		const char *prefix, *fe;
	} names[] = {{"nbd", "nbd"}, {"ublkb", "ublk"}};
	const char *base = strrchr(arg, '/');
	char *end;
	long v;

	base = base ? base + 1 : arg;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		size_t n = strlen(names[i].prefix);

		if (strncmp(base, names[i].prefix, n) ||
		    !isdigit((unsigned char)base[n]))
			continue;
		v = strtol(base + n, &end, 10);
		if (*end || v < 0 || v > INT_MAX)
			return NULL;
		*id = (int)v;
		return frontend_find(names[i].fe);
	}
	return NULL;
}

int cmd_unmap(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct map_record *recs, *rec = NULL;
	const struct frontend_ops *fe;
	char real[PATH_MAX] = "";
	bool force = false;
	const char *arg;
	int ch, n, nmatch = 0, id, ret;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "fh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			force = true;
			break;
		case 'h':
			unmap_usage(stdout);
			return 0;
		default:
			return usage_error("unmap", "unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("unmap", "missing the device");
	if (optind + 1 < argc)
		return usage_error("unmap", "unexpected argument '%s'",
				   argv[optind + 1]);
	arg = argv[optind];
	if (!realpath(arg, real))
		real[0] = 0;

	n = records_load(&recs);
	if (n < 0) {
		fprintf(stderr, "rblk unmap: cannot read %s: %s\n", run_dir(),
			strerror(-n));
		return 1;
	}
	n = records_prune(recs, n);
	for (int i = 0; i < n; i++) {
		if (record_matches(&recs[i], arg, real)) {
			if (!rec)
				rec = &recs[i];
			nmatch++;
		}
	}
	if (nmatch > 1) {
		fprintf(stderr,
			"rblk unmap: '%s' names %d devices; give the "
			"device path\n",
			arg, nmatch);
		ret = 1;
		goto out_clean;
	}
	if (!rec) {
		ret = 1;
		fe = dev_from_name(real[0] ? real : arg, &id);
		if (!force || !fe) {
			fprintf(stderr,
				"rblk unmap: %s is not mapped by rblk "
				"(see 'rblk list')%s\n",
				arg, fe ? "; --force detaches it anyway" : "");
			goto out_clean;
		}
		ret = fe->detach(id);
		if (ret)
			fprintf(stderr,
				"rblk unmap: %s: detaching the %s device "
				"failed: %s\n",
				arg, fe->name, strerror(-ret));
		ret = ret ? 1 : 0;
		goto out_clean;
	}
	if (!rec->alive) {
		/* the daemon died and left the device: detach it */
		ret = record_detach_dead(rec) ? 1 : 0;
		goto out_clean;
	}

	ret = 1;
	if (!force && device_busy(rec->dev)) {
		fprintf(stderr,
			"rblk unmap: %s is in use (mounted or held "
			"open); unmount it first, or use --force\n",
			rec->dev);
		goto out_clean;
	}
	if (kill(rec->pid, SIGTERM) && errno != ESRCH) {
		fprintf(stderr,
			"rblk unmap: cannot signal the daemon (pid "
			"%d) of %s: %s\n",
			(int)rec->pid, rec->dev, strerror(errno));
		goto out_clean;
	}
	if (wait_daemon_exit(rec, force ? UNMAP_FORCE_WAIT_S : UNMAP_WAIT_S)) {
		/* the daemon removed the device and its record; make sure */
		unlink(rec->file);
		ret = 0;
		goto out_clean;
	}
	if (!force) {
		fprintf(stderr,
			"rblk unmap: the daemon (pid %d) of %s did not "
			"exit within %d s (see %s); 'rblk unmap --force "
			"%s' kills it and detaches the device\n",
			(int)rec->pid, rec->dev, UNMAP_WAIT_S,
			rec->log[0] ? rec->log : "its log", rec->dev);
		goto out_clean;
	}
	fprintf(stderr,
		"rblk unmap: the daemon (pid %d) of %s did not exit "
		"within %d s; killing it\n",
		(int)rec->pid, rec->dev, UNMAP_FORCE_WAIT_S);
	kill(rec->pid, SIGKILL);
	wait_daemon_exit(rec, 5);
	ret = 0;
	if (record_device_present(rec))
		ret = record_detach_dead(rec) ? 1 : 0;
	else
		unlink(rec->file);

out_clean:
	free(recs);
	return ret;
}

/* ---- rblk list ------------------------------------------------------------
 */

static void list_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk list [-o text|json] [--help]\n"
	    "Show the devices made by 'rblk map': device, front end, queues, depth,\n"
	    "state, daemon pid and volume URL. States: starting, running, stopping,\n"
	    "and dead: the daemon died and left the device, whose I/O fails (nbd) or\n"
	    "waits (ublk) until 'rblk unmap DEV' (or, ublk, 'rblk map --recover N').\n"
	    "Records of dead daemons whose device is gone are removed.\n\n"
	    "  -o, --output FORMAT  text (default; nothing when there are no mappings)\n"
	    "                       or json: {\"mappings\": [{\"dev\", \"dev_id\",\n"
	    "                       \"frontend\", \"url\", \"queues\", \"depth\",\n"
	    "                       \"state\", \"pid\"}, ...]}\n"
	    "  -h, --help           show this help\n");
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int cmd_list(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct map_record *recs;
	bool json = false;
	int ch, n;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			if (!strcmp(optarg, "json"))
				json = true;
			else if (strcmp(optarg, "text"))
				return usage_error("list",
						   "unknown output "
						   "format '%s' (text, json)",
						   optarg);
			break;
		case 'h':
			list_usage(stdout);
			return 0;
		case ':':
			return usage_error("list", "option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("list", "unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("list", "unexpected argument '%s'",
				   argv[optind]);
	n = records_load(&recs);
	if (n < 0) {
		fprintf(stderr, "rblk list: cannot read %s: %s\n", run_dir(),
			strerror(-n));
		return 1;
	}
	n = records_prune(recs, n);
	for (int i = 0; i < n; i++)
		if (!recs[i].alive)
			fprintf(stderr,
				"rblk list: the daemon of %s died; its "
				"I/O fails until 'rblk unmap %s'%s\n",
				recs[i].dev, recs[i].dev,
				strcmp(recs[i].frontend, "ublk")
				    ? ""
				    : " or 'rblk map --recover ID'");
	if (json) {
		printf("{\"mappings\":[");
		for (int i = 0; i < n; i++) {
			const struct map_record *r = &recs[i];

			printf("%s{\"dev\":", i ? "," : "");
			if (r->dev[0])
				json_string(stdout, r->dev);
			else
				printf("null");
			printf(",\"dev_id\":");
			if (r->dev_id >= 0)
				printf("%d", r->dev_id);
			else
				printf("null");
			printf(",\"frontend\":");
			json_string(stdout, r->frontend);
			printf(",\"url\":");
			json_string(stdout, r->url);
			printf(",\"queues\":%u,\"depth\":%u,\"state\":",
			       r->queues, r->depth);
			json_string(stdout, r->state);
			printf(",\"pid\":%d}", (int)r->pid);
		}
		printf("]}\n");
	} else if (n) {
		printf("%-14s %-8s %6s %5s %-9s %7s  %s\n", "DEVICE",
		       "FRONTEND", "QUEUES", "DEPTH", "STATE", "PID", "URL");
		for (int i = 0; i < n; i++) {
			const struct map_record *r = &recs[i];

			printf("%-14s %-8s %6u %5u %-9s %7d  %s\n",
			       r->dev[0] ? r->dev : "-", r->frontend, r->queues,
			       r->depth, r->state, (int)r->pid, r->url);
		}
	}
	free(recs);
	return 0;
}
