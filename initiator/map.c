/* SPDX-License-Identifier: MIT */
/*
 * rblk map: parse the options, pick a front end (probe() in table order,
 * or the one named by --nbd / --ublk), then fork BEFORE anything touches
 * verbs (resources opened by librblk must never be shared across fork)
 * and wait on a pipe for the daemon's status line (map_daemon.c):
 *   "OK <device path>"  -> print the path, exit 0
 *   "ERR <message>"     -> "rblk map: <message>", exit 1
 * EOF without a line means the daemon died; a daemon that says nothing
 * within MAP_READY_TIMEOUT_S is stopped. --foreground skips the fork: the
 * same daemon code runs in this process, which prints the device when it
 * is ready.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/url.h"
#include "common/util.h"
#include "initiator/cli.h"
#include "initiator/map_internal.h"

#define MAP_DEFAULT_DEPTH 64
#define MAP_MAX_DEFAULT_QUEUES 4
#define MAP_MAX_QUEUES 256
/* `rblk map` waits this long for the device */
#define MAP_READY_TIMEOUT_S 120
#define MAP_CHILD_EXIT_S 30 /* ... and this long for a failed daemon to go */

/*
 * Front ends, in the order auto-selection tries them: the first whose
 * probe() succeeds serves the mapping.
 */
const struct frontend_ops *const map_frontends[] = {
    &frontend_ublk_ops, /* first: the default where ublk_drv is loaded */
    &frontend_nbd_ops,
    NULL,
};

const struct frontend_ops *frontend_find(const char *name)
{
	for (size_t i = 0; map_frontends[i]; i++)
		if (!strcmp(map_frontends[i]->name, name))
			return map_frontends[i];
	return NULL;
}

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
	    "                    [--io-timeout SEC] [--io-retries N]\n"
	    "                    [--poll-spin-us N] [--path URL]... [--failback SEC]\n"
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
	    "  --recover N        take over device N, whose daemon died, with a new\n"
	    "                     session; its queued I/O resumes (ublk)\n"
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
	    "  --poll-spin-us N   while a queue has I/O at the target, poll for the\n"
	    "                     answers N microseconds before sleeping: no sleep\n"
	    "                     and wake-up for an answer that comes within it\n"
	    "                     (backs off where it finds nothing; 0 sleeps at\n"
	    "                     once; default %u)\n"
	    "  --foreground       do not detach: log to stderr, stop on SIGINT/SIGTERM\n"
	    "  --log-level L      error, warn, info (default) or debug\n" CLI_IO_HELP
		CLI_PATH_HELP CLI_FAILBACK_HELP CLI_AUTH_HELP
	    "  -h, --help         show this help\n\n"
	    "The daemon logs to %s/map-PID.log (directory: $RBLK_RUN_DIR).\n"
	    "Exit status: 0 with the device path on stdout; 1 on errors; 2 on usage\n"
	    "errors.\n",
	    MAP_MAX_QUEUES, MAP_MAX_DEFAULT_QUEUES, MAP_DEFAULT_DEPTH,
	    MAP_DEFAULT_SPIN_US, MAP_DEFAULT_RUN_DIR);
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
	for (size_t i = 0; map_frontends[i]; i++) {
		fe = map_frontends[i];
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

/* What the command line asks of `rblk map`. */
struct map_args {
	const char *want; /* --nbd / --ublk, or NULL: the first that works */
	bool queues_given;
};

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
	OPT_SPIN,
};

/*
 * A number option of `rblk map`: 0, or the usage error's exit code. what
 * names the number; NULL: "a number from MIN to MAX".
 */
static int num_opt(const char *name, const char *arg, unsigned long min,
		   unsigned long max, const char *what, unsigned long *v)
{
	if (!parse_uint(arg, min, max, v))
		return 0;
	if (what)
		return cli_usage_error("map", "--%s: '%s' is not %s", name, arg,
				       what);
	return cli_usage_error("map",
			       "--%s: '%s' is not a number from %lu to %lu",
			       name, arg, min, max);
}

/* One option (getopt's ch, optarg) into ctx and a. 0, 1 (--help) or 2. */
static int map_opt(struct map_ctx *ctx, struct map_args *a, int ch,
		   const char *arg, const char *argv_prev)
{
	struct map_opts *o = &ctx->opts;
	unsigned long v;
	int ms, ret = 0;

	switch (ch) {
	case OPT_NBD:
	case OPT_UBLK:
		if (a->want)
			return cli_usage_error(
			    "map", "--nbd and --ublk are exclusive");
		a->want = ch == OPT_NBD ? "nbd" : "ublk";
		break;
	case OPT_QUEUES:
		ret = num_opt("queues", arg, 1, MAP_MAX_QUEUES, NULL, &v);
		o->queues = (unsigned int)v;
		a->queues_given = true;
		break;
	case OPT_DEPTH:
		ret = num_opt("depth", arg, 1, RBLK_MAX_QD, NULL, &v);
		o->queue_depth = (unsigned int)v;
		break;
	case OPT_RO:
		o->read_only = true;
		break;
	case OPT_DIRECT:
	case OPT_NO_DIRECT:
		o->direct = ch == OPT_DIRECT ? RBLK_DIRECT_ON : RBLK_DIRECT_OFF;
		break;
	case OPT_DEVID:
	case OPT_RECOVER:
		if ((o->dev_id >= 0 && o->recover != (ch == OPT_RECOVER)))
			return cli_usage_error(
			    "map", "--recover and --device-id are exclusive");
		ret = num_opt(ch == OPT_DEVID ? "device-id" : "recover", arg, 0,
			      INT_MAX, "a device number", &v);
		o->dev_id = (int)v;
		o->recover = ch == OPT_RECOVER;
		break;
	case OPT_TIMEOUT:
		ret = num_opt("timeout", arg, 1, 86400,
			      "a number of seconds from 1 to 86400", &v);
		o->io_timeout_s = (unsigned int)v;
		break;
	case OPT_FG:
		ctx->foreground = true;
		break;
	case OPT_RECONNECT_DELAY:
		if (parse_seconds_ms(arg, false, &ms))
			return cli_usage_error(
			    "map",
			    "--reconnect-delay: '%s' is not a number of seconds",
			    arg);
		o->reconnect_delay_ms = ms;
		break;
	case OPT_CTRL_LOSS:
		if (parse_seconds_ms(arg, true, &ms))
			return cli_usage_error(
			    "map",
			    "--ctrl-loss-timeout: '%s' is not a number of seconds (or -1)",
			    arg);
		o->ctrl_loss_timeout_s = ms < 0 ? -1 : (ms + 999) / 1000;
		break;
	case OPT_SPIN:
		ret = num_opt("poll-spin-us", arg, 0, 1000000,
			      "a number of microseconds from 0 to 1000000", &v);
		o->poll_spin_us = (unsigned int)v;
		break;
	case OPT_LOGLEVEL:
		return cli_parse_log_level("map", arg) ? 2 : 0;
	case 'h':
		map_usage(stdout);
		return 1;
	case ':':
		return cli_usage_error("map", "option '%s' needs a value",
				       argv_prev);
	default:
		return cli_usage_error("map", "unknown option '%s'", argv_prev);
	}
	return ret;
}

/*
 * Parse argv into ctx->opts. 0 to go on, else the exit code (0 after
 * --help, 2 for usage errors).
 */
static int map_parse_args(int argc, char **argv, struct map_ctx *ctx,
			  struct map_args *a)
{
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
	    {"poll-spin-us", required_argument, NULL, OPT_SPIN},
	    {"help", no_argument, NULL, 'h'},
	    CLI_AUTH_LONGOPTS,
	    CLI_PATH_LONGOPTS,
	    CLI_FAILBACK_LONGOPT,
	    CLI_IO_LONGOPTS,
	    {NULL, 0, NULL, 0},
	};
	char err[256];
	struct rblk_url u;
	int ch, ret;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_auth_opt(ch, optarg, &ctx->opts.auth))
			continue;
		ret = cli_path_opt("map", ch, optarg, &ctx->opts.paths);
		if (!ret)
			ret = cli_io_opt("map", ch, optarg, &ctx->opts.io);
		if (ret < 0)
			return 2;
		if (ret)
			continue;
		ret = map_opt(ctx, a, ch, optarg, argv[optind - 1]);
		if (ret)
			return ret == 1 ? 0 : ret;
	}
	if (optind >= argc)
		return cli_usage_error("map", "missing the volume URL");
	if (optind + 1 < argc)
		return cli_usage_error("map", "unexpected argument '%s'",
				       argv[optind + 1]);
	ctx->opts.url = argv[optind];
	if (rblk_url_parse(ctx->opts.url, RBLK_DEFAULT_PORT, &u, err,
			   sizeof(err)))
		return cli_usage_error("map", "%s", err);
	if (!u.export_name[0])
		return cli_usage_error(
		    "map", "'%s' names no export (rdma://HOST[:PORT]/EXPORT)",
		    ctx->opts.url);
	return -1;
}

/*
 * --recover N: the front end must be able to take devices over, and the
 * session gets the queue count the device was made with (unless given).
 */
static int map_check_recover(struct map_ctx *ctx, const struct map_args *a)
{
	int hw;

	if (!ctx->opts.recover)
		return 0;
	if (!ctx->fe->recover_queues) {
		fprintf(
		    stderr,
		    "rblk map: the %s front end cannot take over a device (--recover); 'rblk unmap /dev/%s%d' and map again\n",
		    ctx->fe->name, ctx->fe->dev_prefix, ctx->opts.dev_id);
		return 1;
	}
	hw = ctx->fe->recover_queues(ctx->opts.dev_id);
	if (hw > 0 && !a->queues_given)
		ctx->opts.queues = (unsigned int)hw;
	return 0;
}

/* The record the daemon will write, before it exists. */
static void map_record_init(struct map_ctx *ctx)
{
	struct map_record *rec = &ctx->rec;

	pthread_mutex_init(&ctx->lock, NULL);
	snprintf(rec->url, sizeof(rec->url), "%s", ctx->opts.url);
	snprintf(rec->frontend, sizeof(rec->frontend), "%s", ctx->fe->name);
	snprintf(rec->state, sizeof(rec->state), "starting");
	rec->dev_id = -1;
	rec->queues = ctx->opts.queues;
	rec->depth = ctx->opts.queue_depth;
	if (ctx->opts.paths.n) {
		rec->nr_paths = 1 + ctx->opts.paths.n;
		snprintf(rec->paths[0], sizeof(rec->paths[0]), "%s",
			 ctx->opts.url);
		for (unsigned int i = 0; i < ctx->opts.paths.n; i++)
			snprintf(rec->paths[i + 1], sizeof(rec->paths[i + 1]),
				 "%s", ctx->opts.paths.v[i]);
	}
}

/* In the daemon's process: its pid, start time and file names. */
static void map_record_self(struct map_ctx *ctx, const char *dir)
{
	struct map_record *rec = &ctx->rec;
	bool zombie;

	rec->pid = getpid();
	proc_start(rec->pid, &rec->start, &zombie);
	snprintf(rec->file, sizeof(rec->file), "%s/map-%d.rec", dir,
		 (int)rec->pid);
	if (!ctx->foreground)
		snprintf(rec->log, sizeof(rec->log), "%s/map-%d.log", dir,
			 (int)rec->pid);
}

/* Fork the daemon and wait for its status line; the exit code. */
static int map_fork(struct map_ctx *ctx, const char *dir)
{
	char log_path[PATH_MAX];
	int ret, pfd[2], sfd;
	pid_t child;

	sfd = signalfd(-1, &map_stop_sigs, SFD_CLOEXEC);
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
		close(pfd[0]);
		close(sfd);
		ctx->status_fd = pfd[1];
		map_record_self(ctx, dir);
		_exit(map_daemon(ctx));
	}
	close(pfd[1]);
	snprintf(log_path, sizeof(log_path), "%s/map-%d.log", dir, (int)child);
	ret = map_wait_ready(child, pfd[0], sfd, log_path);
	close(pfd[0]);
	close(sfd);
	return ret;
}

int cmd_map(int argc, char **argv)
{
	static struct map_ctx
	    ctx; /* outlives cmd_map in the daemon's threads */
	struct map_args a = {0};
	struct rblk_opts ro;
	const char *dir;
	int ret;

	memset(&ctx, 0, sizeof(ctx));
	rblk_opts_init(&ro); /* the library's reconnect defaults */
	ctx.opts.reconnect_delay_ms = ro.reconnect_delay_ms;
	ctx.opts.ctrl_loss_timeout_s = ro.ctrl_loss_timeout_s;
	ctx.status_fd = -1;
	ctx.stop_fd = -1;
	ctx.resize_fd = -1;
	ctx.opts.queues = default_queues();
	ctx.opts.queue_depth = MAP_DEFAULT_DEPTH;
	ctx.opts.poll_spin_us = MAP_DEFAULT_SPIN_US;
	ctx.opts.dev_id = -1;
	ctx.opts.paths.failback_ms = -1;
	log_set_level(LOG_INFO);
	ret = map_parse_args(argc, argv, &ctx, &a);
	if (ret >= 0)
		return ret;
	ctx.fe = map_pick_frontend(a.want);
	if (!ctx.fe || map_check_recover(&ctx, &a))
		return 1;
	dir = run_dir();
	ret = mkdir_p(dir, 0755);
	if (ret) {
		fprintf(stderr, "rblk map: cannot create %s: %s\n", dir,
			strerror(-ret));
		return 1;
	}
	map_record_init(&ctx);
	/*
	 * SIGINT/SIGTERM are blocked from here on: in the daemon, in every
	 * thread it will have (librblk's and the front end's included, since
	 * threads inherit the mask), and taken by its signal thread alone; in
	 * the waiting parent, read from a signalfd and forwarded.
	 */
	sigemptyset(&map_stop_sigs);
	sigaddset(&map_stop_sigs, SIGINT);
	sigaddset(&map_stop_sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &map_stop_sigs, NULL);
	if (ctx.foreground) {
		map_record_self(&ctx, dir);
		return map_daemon(&ctx);
	}
	return map_fork(&ctx, dir);
}
