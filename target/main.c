/* SPDX-License-Identifier: MIT */
/*
 * rblk-target: export files, block devices and RAM volumes over RDMA (and
 * over TCP for hosts without an RDMA device).
 *
 * The main thread parses the configuration, opens the exports, starts the
 * workers, then listens: it takes connection requests, checks the private
 * data (protocol version, queue depth), accepts and hands each connection to
 * a worker, round robin. SIGINT/SIGTERM end it cleanly.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/url.h"
#include "../common/util.h"
#include "target.h"

#include "../common/sdnotify.h"
#include "../common/version.h"

struct listener {
	struct xp_listener *xl;
	char url[256];
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rblk-target [OPTIONS]\n"
		"Export files, block devices and RAM volumes over RDMA or TCP.\n"
		"\n"
		"  -l, --listen URL          listen on tcp://HOST[:PORT] or rdma://HOST[:PORT]\n"
		"                            (repeatable; default port %d)\n"
		"  -e, --export NAME=PATH[,ro][,bs=N][,uuid=UUID][,allow=HOST|any][,allow_ro=HOST]\n"
		"                            export a file, block device or ram:SIZE\n"
		"                            (repeatable); allow/allow_ro: only these\n"
		"                            hosts, authenticated (repeatable); no\n"
		"                            allow list: no host, unless allow=any\n"
		"      --allow-any-host      exports without an allow list serve any host\n"
		"      --host NAME:secret-file=PATH\n"
		"                            a host that authenticates with the secret\n"
		"                            in PATH (mode 0600; repeatable)\n"
		"      --name NAME           this target's identity in authentication\n"
		"                            (default: the system host name)\n"
		"  -c, --config FILE         read an INI configuration (rblk-target.conf(5))\n"
		"  -w, --workers N           worker threads (default: online CPUs)\n"
		"      --engine NAME         io_uring (default) or libaio\n"
		"      --max-queue-depth N   cap on the queue depth initiators get (default 128)\n"
		"      --max-io SIZE         cap on the bytes per command (default 1M)\n"
		"      --max-pending N       connections not yet logged in (default 1024)\n"
		"      --max-pending-per-host N  ... from one address (default 256)\n"
		"      --max-sessions N      live sessions (default 4096)\n"
		"      --max-sessions-per-host N ... from one address (default 2048)\n"
		"      --idle-timeout SEC    drop a session silent this long (default 300,\n"
		"                            0: never)\n"
		"      --slot-pool SIZE      registered memory for command data, shared\n"
		"                            by all sessions, split over the workers\n"
		"                            (default 256M)\n"
		"      --inline-data SIZE|auto  most WRITE bytes carried in the command\n"
		"                            capsule, 0 (off) to 16K; auto (default):\n"
		"                            4K, less at large queue depths\n"
		"      --ctl-socket PATH     control socket, or none (default %s)\n"
		"      --ctl-socket-mode MODE  its permissions (default 0600)\n"
		"      --metrics tcp://HOST:PORT|PORT\n"
		"                            serve Prometheus text on GET /metrics\n"
		"                            (a bare PORT: 127.0.0.1)\n"
		"  -L, --log-level LEVEL     error, warn, info (default) or debug\n"
		"  -h, --help                show this help\n"
		"  -V, --version             show the version\n"
		"\n"
		"  rblk-target ctl [--socket PATH] COMMAND ...\n"
		"                            talk to a running target ('ctl --help')\n"
		"\n"
		"Example:\n"
		"  rblk-target --listen tcp://127.0.0.1:7441 --export vol0=/srv/vol0.img,allow=any\n"
		"  rblk-target --listen rdma://192.0.2.1 --export scratch=ram:1G,allow=any\n",
		RBLK_DEFAULT_PORT, CFG_DEFAULT_CTL_SOCKET);
}

static int parse_args(int argc, char **argv, struct cfg_target *cfg)
{
	enum { OPT_ENGINE = 256, OPT_MAXQD, OPT_MAXIO, OPT_CTL, OPT_CTL_MODE,
	       OPT_METRICS, OPT_HOST, OPT_NAME, OPT_SLOT_POOL, OPT_LIMIT,
	       OPT_ALLOW_ANY, OPT_INLINE };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "export", required_argument, NULL, 'e' },
		{ "config", required_argument, NULL, 'c' },
		{ "workers", required_argument, NULL, 'w' },
		{ "engine", required_argument, NULL, OPT_ENGINE },
		{ "max-queue-depth", required_argument, NULL, OPT_MAXQD },
		{ "max-io", required_argument, NULL, OPT_MAXIO },
		{ "slot-pool", required_argument, NULL, OPT_SLOT_POOL },
		{ "inline-data", required_argument, NULL, OPT_INLINE },
		{ "max-pending", required_argument, NULL, OPT_LIMIT },
		{ "max-pending-per-host", required_argument, NULL, OPT_LIMIT },
		{ "max-sessions", required_argument, NULL, OPT_LIMIT },
		{ "max-sessions-per-host", required_argument, NULL, OPT_LIMIT },
		{ "idle-timeout", required_argument, NULL, OPT_LIMIT },
		{ "ctl-socket", required_argument, NULL, OPT_CTL },
		{ "ctl-socket-mode", required_argument, NULL, OPT_CTL_MODE },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "host", required_argument, NULL, OPT_HOST },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "allow-any-host", no_argument, NULL, OPT_ALLOW_ANY },
		{ "log-level", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	char err[512];
	unsigned long v;
	uint64_t size;
	int c, level, idx = 0;

	/* command-line options apply on top of -c, wherever it appears */
	for (int i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) {
			if (cfg_load(cfg, argv[i + 1], err, sizeof(err))) {
				fprintf(stderr, "rblk-target: %s\n", err);
				return 1;
			}
		}
	}
	while ((c = getopt_long(argc, argv, "l:e:c:w:L:hV", opts, &idx)) != -1) {
		switch (c) {
		case 'l':
			if (cfg_add_listen(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case 'e':
			if (cfg_add_export_arg(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case 'c':
			break; /* loaded above */
		case OPT_HOST:
			if (cfg_add_host_arg(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case OPT_ALLOW_ANY:
			cfg->allow_any_host = true;
			break;
		case OPT_NAME:
			if (!*optarg || strlen(optarg) >= RBLK_NAME_MAX ||
			    strpbrk(optarg, " \t,")) {
				snprintf(err, sizeof(err),
					 "--name: '%.64s' is not 1..%d characters without spaces or ','",
					 optarg, RBLK_NAME_MAX - 1);
				goto bad;
			}
			snprintf(cfg->name, sizeof(cfg->name), "%s", optarg);
			break;
		case 'w':
			if (parse_uint(optarg, 1, 1024, &v)) {
				snprintf(err, sizeof(err),
					 "--workers: '%s' is not a number in 1..1024",
					 optarg);
				goto bad;
			}
			cfg->workers = (unsigned int)v;
			break;
		case OPT_ENGINE:
			if (!engine_find(optarg)) {
				snprintf(err, sizeof(err),
					 "--engine: unknown engine '%s' (io_uring, libaio)",
					 optarg);
				goto bad;
			}
			snprintf(cfg->engine, sizeof(cfg->engine), "%s", optarg);
			break;
		case OPT_MAXQD:
			if (parse_uint(optarg, 1, RBLK_MAX_QD, &v)) {
				snprintf(err, sizeof(err),
					 "--max-queue-depth: '%s' is not a number in 1..%d",
					 optarg, RBLK_MAX_QD);
				goto bad;
			}
			cfg->max_queue_depth = (unsigned int)v;
			break;
		case OPT_MAXIO:
			if (parse_size(optarg, &size) || size < RBLK_MIN_MAX_IO ||
			    size > RBLK_MAX_MAX_IO || !IS_POW2(size)) {
				snprintf(err, sizeof(err),
					 "--max-io: '%s' is not a power of two in 4K..8M",
					 optarg);
				goto bad;
			}
			cfg->max_io = (uint32_t)size;
			break;
		case OPT_LIMIT: {
			/* the config key is the option's name, '-' -> '_' */
			char key[32];

			snprintf(key, sizeof(key), "%s", opts[idx].name);
			for (char *p = key; *p; p++)
				if (*p == '-')
					*p = '_';
			if (cfg_set_limit(cfg, key, optarg, err, sizeof(err)))
				goto bad;
			break;
		}
		case OPT_SLOT_POOL:
			if (cfg_set_slot_pool(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case OPT_INLINE:
			if (cfg_set_inline_data(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case OPT_CTL:
			if (cfg_set_ctl_socket(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case OPT_CTL_MODE:
			if (cfg_set_ctl_socket_mode(cfg, optarg, err,
						    sizeof(err)))
				goto bad;
			break;
		case OPT_METRICS:
			if (cfg_set_metrics(cfg, optarg, err, sizeof(err)))
				goto bad;
			break;
		case 'L':
			level = log_parse_level(optarg);
			if (level < 0) {
				snprintf(err, sizeof(err),
					 "--log-level: '%s' is not error, warn, info or debug",
					 optarg);
				goto bad;
			}
			cfg->log_level = level;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("rblk-target %s (protocol %d)\n",
			       rblk_version(), RBLK_PROTO_VERSION);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rblk-target: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	if (cfg_validate(cfg, err, sizeof(err))) {
		fprintf(stderr, "rblk-target: %s\n", err);
		fprintf(stderr, "Try 'rblk-target --help'.\n");
		return 2;
	}
	return 0;
bad:
	fprintf(stderr, "rblk-target: %s\n", err);
	return 2;
}

/*
 * Take every pending connection request on l, each into the next worker
 * (round robin): it is created in that worker's poll group.
 */
static void accept_requests(struct target *t, struct listener *l,
			    unsigned int *next_worker)
{
	const struct xp_ops *ops = l->xl->ops;

	for (;;) {
		struct worker *w = &t->workers[*next_worker];
		int ret = worker_accept(w, ops, l->xl, l->url);

		if (ret == -EAGAIN)
			return;
		if (ret) /* logged; the request is gone or will come back */
			return;
		*next_worker = (*next_worker + 1) % t->nr_workers;
	}
}

static int open_listeners(struct target *t, struct listener *ls, int epfd)
{
	for (unsigned int i = 0; i < t->cfg.nr_listen; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ls[i] };
		const struct xp_ops *ops;
		struct rblk_url u;
		char err[256];
		const char *host;
		int ret;

		snprintf(ls[i].url, sizeof(ls[i].url), "%s", t->cfg.listen[i]);
		if (rblk_url_parse(ls[i].url, RBLK_DEFAULT_PORT, &u, err,
				   sizeof(err))) {
			log_err("%s", err);
			return -EINVAL;
		}
		ops = xp_find(u.scheme);
		if (!ops) {
			log_err("%s: unknown transport '%s' (tcp, rdma)",
				ls[i].url, u.scheme);
			return -EINVAL;
		}
		host = strcmp(u.host, "*") ? u.host : NULL;
		ret = ops->listen(host, u.port, &ls[i].xl);
		if (ret) {
			log_err("cannot listen on %s: %s", ls[i].url,
				strerror(-ret));
			return ret;
		}
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, ops->listener_fd(ls[i].xl),
			      &ev)) {
			log_err("epoll_ctl: %s", strerror(errno));
			return -errno;
		}
		/* scripts wait for this line */
		log_msg(LOG_INFO, "listening on %s://%s:%u", u.scheme, u.host,
			u.port);
	}
	return 0;
}

static int serve(struct target *t, struct listener *ls)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	unsigned int next_worker = 0;
	struct ctl *ctl = NULL;
	int epfd, sfd, ret = 0;
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || epfd < 0) {
		log_err("signalfd/epoll_create1: %s", strerror(errno));
		ret = -errno;
		goto out_close;
	}
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev)) {
		ret = -errno;
		log_err("epoll_ctl: %s", strerror(errno));
		goto out_close;
	}
	ret = ctl_open(t, &ctl);
	if (ret)
		goto out_close;
	ret = open_listeners(t, ls, epfd);
	if (ret)
		goto out_close;
	sd_notify_send("READY=1"); /* Type=notify in rblk-target.service */
	for (;;) {
		struct epoll_event evs[16];
		int n = epoll_wait(epfd, evs, 16, -1);

		if (n < 0 && errno != EINTR) {
			ret = -errno;
			log_err("epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			if (!evs[i].data.ptr) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) > 0)
					log_msg(LOG_INFO,
						"%s received; shutting down",
						strsignal((int)si.ssi_signo));
				sd_notify_send("STOPPING=1");
				goto out_close;
			}
			accept_requests(t, evs[i].data.ptr, &next_worker);
		}
	}
out_close:
	ctl_close(ctl);
	if (epfd >= 0)
		close(epfd);
	if (sfd >= 0)
		close(sfd);
	return ret;
}

/*
 * SIGINT/SIGTERM are blocked from before the exports open (threads inherit
 * the mask); one that arrived meanwhile ends the start-up here.
 */
static bool startup_interrupted(const sigset_t *mask)
{
	sigset_t pending;

	if (sigpending(&pending))
		return false;
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(mask, sig) == 1 &&
		    sigismember(&pending, sig) == 1) {
			log_msg(LOG_INFO, "%s received while starting; exiting",
				strsignal(sig));
			return true;
		}
	return false;
}

int main(int argc, char **argv)
{
	static struct target t; /* large (config): keep it off the stack */
	struct listener *ls = NULL;
	sigset_t mask;
	unsigned int i;
	int ret;

	if (argc > 1 && !strcmp(argv[1], "ctl"))
		return ctl_client_main(argc - 1, argv + 1);
	log_set_prefix("rblk-target");
	log_set_level(LOG_INFO);
	cfg_init(&t.cfg);
	ret = parse_args(argc, argv, &t.cfg);
	if (ret)
		return ret;
	if (t.cfg.log_level >= 0)
		log_set_level(t.cfg.log_level);
	if (rblk_auth_init()) {
		log_err("libsodium failed to initialise");
		return 1;
	}
	if (!t.cfg.name[0] &&
	    gethostname(t.cfg.name, sizeof(t.cfg.name) - 1))
		snprintf(t.cfg.name, sizeof(t.cfg.name), "rblk-target");
	t.engine = engine_find(t.cfg.engine);
	if (!t.engine) {
		log_err("unknown engine '%s'", t.cfg.engine);
		return 2;
	}
	/* block the signals in every thread; the main thread reads signalfd */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);

	pthread_mutex_init(&t.exports_lock, NULL);
	ls = calloc(t.cfg.nr_listen, sizeof(*ls));
	if (!ls) {
		log_err("out of memory");
		ret = 1;
		goto out_free;
	}
	t.nr_workers = t.cfg.workers;
	if (!t.nr_workers) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		t.nr_workers = n > 0 ? (unsigned int)n : 1;
	}
	backend_rbd_setup(&t.cfg.ceph);
	/* built back to front so that the list keeps the configured order */
	for (i = t.cfg.nr_exports; i-- > 0;) {
		char err[512];
		struct export *e = export_create(&t.cfg.exports[i],
						 t.nr_workers, err,
						 sizeof(err));

		if (!e) {
			ret = 1;
			goto out_close_exports;
		}
		e->next = t.exports;
		t.exports = e;
		t.nr_exports++;
		if (startup_interrupted(&mask)) {
			ret = 1;
			goto out_close_exports;
		}
	}
	t.workers = calloc(t.nr_workers, sizeof(*t.workers));
	if (!t.workers) {
		ret = 1;
		goto out_close_exports;
	}
	for (i = 0; i < t.nr_workers; i++) {
		if (worker_start(&t.workers[i], &t, i)) {
			t.nr_workers = i;
			ret = 1;
			goto out_stop_workers;
		}
	}
	log_info("%u worker%s, %s engine", t.nr_workers,
		 t.nr_workers == 1 ? "" : "s", t.engine->name);
	ret = serve(&t, ls) ? 1 : 0;

out_stop_workers:
	for (i = 0; i < t.nr_workers; i++)
		worker_stop(&t.workers[i]);
	free(t.workers);
	for (i = 0; i < t.cfg.nr_listen; i++)
		if (ls[i].xl)
			ls[i].xl->ops->listener_destroy(ls[i].xl);
out_close_exports:
	while (t.exports) {
		struct export *e = t.exports;

		t.exports = e->next;
		export_put(e);
	}
out_free:
	free(ls);
	if (!ret)
		log_info("stopped");
	return ret;
}
