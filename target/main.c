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
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../common/sdnotify.h"
#include "../common/version.h"
#include "../transport/transport.h"

#include "backend.h"
#include "engine.h"
#include "target.h"
#include "worker.h"

struct listener {
	struct xp_listener *xl;
	char url[256];
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk-target [OPTIONS]\n"
	    "Export files, block devices and RAM volumes over RDMA or TCP.\n"
	    "\n"
	    "  -l, --listen URL          listen on tcp://HOST[:PORT] or rdma://HOST[:PORT]\n"
	    "                            (repeatable; default port %d)\n"
	    "  -e, --export NAME=PATH[,ro][,bs=N][,uuid=UUID][,allow=HOST|any][,allow_ro=HOST][,tls=required]\n"
	    "                            export a file, block device or ram:SIZE\n"
	    "                            (repeatable); allow/allow_ro: only these\n"
	    "                            hosts, authenticated (repeatable); no\n"
	    "                            allow list: no host, unless allow=any;\n"
	    "                            pr_file=PATH: where reservations are kept\n"
	    "      --allow-any-host      exports without an allow list serve any host\n"
	    "      --host NAME:secret-file=PATH[,tls=required]\n"
	    "                            a host that authenticates with the secret\n"
	    "                            in PATH (mode 0600; repeatable)\n"
	    "      --tls off|optional|required\n"
	    "                            TLS 1.3 on tcp listeners (default optional:\n"
	    "                            both; required: plaintext logins refused);\n"
	    "                            a host's PSK comes from its secret\n"
	    "      --tls-cert FILE, --tls-key FILE\n"
	    "                            the target's X.509 certificate and key (PEM)\n"
	    "      --tls-ca FILE         CA for client certificates (their CN: a host)\n"
	    "      --name NAME           this target's identity in authentication\n"
	    "                            (default: the system host name)\n"
	    "  -c, --config FILE         read an INI configuration (rblk-target.conf(5))\n"
	    "  -w, --workers N           worker threads (default: online CPUs)\n"
	    "      --engine NAME         io_uring (default) or libaio\n"
	    "      --max-queue-depth N   cap on the queue depth initiators get (default 128)\n"
	    "      --max-io SIZE         cap on the bytes per command (default 1M)\n"
	    "      --max-pending N       connections not yet logged in (default 1024;\n"
	    "                            when full, the oldest is evicted)\n"
	    "      --max-pending-per-host N  ... from one address (default 256)\n"
	    "      --max-sessions N      live sessions (default 4096)\n"
	    "      --max-sessions-per-host N ... from one address (default 1024)\n"
	    "      --idle-timeout SEC    drop a session silent this long (default 300,\n"
	    "                            0: never)\n"
	    "      --poll-spin-us N      a worker whose sessions went quiet polls\n"
	    "                            them N us (0..1000) before sleeping: lower\n"
	    "                            latency at low queue depth for CPU (default\n"
	    "                            0: sleep at once)\n"
	    "      --slot-pool SIZE      registered memory for command data, shared\n"
	    "                            by all sessions, split over the workers\n"
	    "                            (default 256M)\n"
	    "      --session-pool-share PCT  most of a worker's pool one session\n"
	    "                            may hold (1..100, default 25; one source\n"
	    "                            address: twice that)\n"
	    "      --window-timeout SEC  drop a session that holds a slot window\n"
	    "                            this long without returning it (1..3600,\n"
	    "                            default 5)\n"
	    "      --inline-data SIZE|auto  most WRITE bytes carried in the command\n"
	    "                            capsule, 0 (off) to 16K; auto (default):\n"
	    "                            4K, less at large queue depths\n"
	    "      --ctl-socket PATH     control socket, or none (default %s)\n"
	    "      --ctl-socket-mode MODE  its permissions (default 0600)\n"
	    "      --unix-socket-mode MODE  permissions of unix data sockets\n"
	    "                            (--listen unix:...; default 0660)\n"
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

/*
 * Command-line options. Each long option has one setter that checks its
 * argument and stores it in the configuration; it returns 0, or -EINVAL
 * with the message in err. The config keys of the limit options are the
 * options' names with '-' -> '_'.
 */
typedef int (*opt_set_fn)(struct cfg_target *cfg, const char *arg, char *err,
			  size_t errlen);

static int set_config(struct cfg_target *cfg, const char *arg, char *err,
		      size_t errlen)
{
	return 0; /* loaded before the other options: load_configs() */
}

static int set_allow_any(struct cfg_target *cfg, const char *arg, char *err,
			 size_t errlen)
{
	cfg->allow_any_host = true;
	return 0;
}

static int set_name(struct cfg_target *cfg, const char *arg, char *err,
		    size_t errlen)
{
	if (!*arg || strlen(arg) >= RBLK_NAME_MAX || strpbrk(arg, " \t,")) {
		snprintf(
		    err, errlen,
		    "--name: '%.64s' is not 1..%d characters without spaces or ','",
		    arg, RBLK_NAME_MAX - 1);
		return -EINVAL;
	}
	snprintf(cfg->name, sizeof(cfg->name), "%s", arg);
	return 0;
}

/* opt's argument: a number in 1..max into *dst */
static int set_count(const char *opt, const char *arg, unsigned long max,
		     unsigned int *dst, char *err, size_t errlen)
{
	unsigned long v;

	if (parse_uint(arg, 1, max, &v)) {
		snprintf(err, errlen, "%s: '%s' is not a number in 1..%lu", opt,
			 arg, max);
		return -EINVAL;
	}
	*dst = (unsigned int)v;
	return 0;
}

static int set_workers(struct cfg_target *cfg, const char *arg, char *err,
		       size_t errlen)
{
	return set_count("--workers", arg, 1024, &cfg->workers, err, errlen);
}

static int set_engine(struct cfg_target *cfg, const char *arg, char *err,
		      size_t errlen)
{
	if (!engine_find(arg)) {
		snprintf(err, errlen,
			 "--engine: unknown engine '%s' (io_uring, libaio)",
			 arg);
		return -EINVAL;
	}
	snprintf(cfg->engine, sizeof(cfg->engine), "%s", arg);
	return 0;
}

static int set_max_qd(struct cfg_target *cfg, const char *arg, char *err,
		      size_t errlen)
{
	return set_count("--max-queue-depth", arg, RBLK_MAX_QD,
			 &cfg->max_queue_depth, err, errlen);
}

static int set_max_io(struct cfg_target *cfg, const char *arg, char *err,
		      size_t errlen)
{
	uint64_t size;

	if (parse_size(arg, &size) || size < RBLK_MIN_MAX_IO ||
	    size > RBLK_MAX_MAX_IO || !IS_POW2(size)) {
		snprintf(err, errlen,
			 "--max-io: '%s' is not a power of two in 4K..8M", arg);
		return -EINVAL;
	}
	cfg->max_io = (uint32_t)size;
	return 0;
}

static int set_log_level(struct cfg_target *cfg, const char *arg, char *err,
			 size_t errlen)
{
	int level = log_parse_level(arg);

	if (level < 0) {
		snprintf(err, errlen,
			 "--log-level: '%s' is not error, warn, info or debug",
			 arg);
		return -EINVAL;
	}
	cfg->log_level = level;
	return 0;
}

static int set_tls(struct cfg_target *cfg, const char *arg, char *err,
		   size_t errlen)
{
	return cfg_set_tls_key(cfg, "tls", arg, err, errlen);
}

static int set_tls_cert(struct cfg_target *cfg, const char *arg, char *err,
			size_t errlen)
{
	return cfg_set_tls_key(cfg, "tls_cert", arg, err, errlen);
}

static int set_tls_key(struct cfg_target *cfg, const char *arg, char *err,
		       size_t errlen)
{
	return cfg_set_tls_key(cfg, "tls_key", arg, err, errlen);
}

static int set_tls_ca(struct cfg_target *cfg, const char *arg, char *err,
		      size_t errlen)
{
	return cfg_set_tls_key(cfg, "tls_ca", arg, err, errlen);
}

/* --help and --version have no setter: parse_args() answers them */
static const struct target_opt {
	const char *name;
	int has_arg;
	char short_name; /* 0: long only */
	opt_set_fn set;
	const char *limit; /* instead of set: cfg_set_limit() with this key */
} target_opts[] = {
    {"listen", required_argument, 'l', cfg_add_listen, NULL},
    {"export", required_argument, 'e', cfg_add_export_arg, NULL},
    {"config", required_argument, 'c', set_config, NULL},
    {"workers", required_argument, 'w', set_workers, NULL},
    {"engine", required_argument, 0, set_engine, NULL},
    {"max-queue-depth", required_argument, 0, set_max_qd, NULL},
    {"max-io", required_argument, 0, set_max_io, NULL},
    {"slot-pool", required_argument, 0, cfg_set_slot_pool, NULL},
    {"inline-data", required_argument, 0, cfg_set_inline_data, NULL},
    {"max-pending", required_argument, 0, NULL, "max_pending"},
    {"max-pending-per-host", required_argument, 0, NULL,
     "max_pending_per_host"},
    {"max-sessions", required_argument, 0, NULL, "max_sessions"},
    {"max-sessions-per-host", required_argument, 0, NULL,
     "max_sessions_per_host"},
    {"idle-timeout", required_argument, 0, NULL, "idle_timeout"},
    {"poll-spin-us", required_argument, 0, NULL, "poll_spin_us"},
    {"session-pool-share", required_argument, 0, NULL, "session_pool_share"},
    {"window-timeout", required_argument, 0, NULL, "window_timeout"},
    {"ctl-socket", required_argument, 0, cfg_set_ctl_socket, NULL},
    {"ctl-socket-mode", required_argument, 0, cfg_set_ctl_socket_mode, NULL},
    {"unix-socket-mode", required_argument, 0, cfg_set_unix_socket_mode, NULL},
    {"metrics", required_argument, 0, cfg_set_metrics, NULL},
    {"host", required_argument, 0, cfg_add_host_arg, NULL},
    {"name", required_argument, 0, set_name, NULL},
    {"allow-any-host", no_argument, 0, set_allow_any, NULL},
    {"tls", required_argument, 0, set_tls, NULL},
    {"tls-cert", required_argument, 0, set_tls_cert, NULL},
    {"tls-key", required_argument, 0, set_tls_key, NULL},
    {"tls-ca", required_argument, 0, set_tls_ca, NULL},
    {"log-level", required_argument, 'L', set_log_level, NULL},
    {"help", no_argument, 'h', NULL, NULL},
    {"version", no_argument, 'V', NULL, NULL},
};
#define NR_TARGET_OPTS ARRAY_SIZE(target_opts)
/* getopt_long() returns OPT_BASE + index for an option without short name */
#define OPT_BASE 256

/* the getopt_long() tables for target_opts[] */
static void build_getopt(struct option *lo, char *shorts)
{
	for (size_t i = 0; i < NR_TARGET_OPTS; i++) {
		const struct target_opt *o = &target_opts[i];

		lo[i] = (struct option){o->name, o->has_arg, NULL,
					o->short_name ? o->short_name
						      : OPT_BASE + (int)i};
		if (o->short_name) {
			*shorts++ = o->short_name;
			if (o->has_arg == required_argument)
				*shorts++ = ':';
		}
	}
	lo[NR_TARGET_OPTS] = (struct option){0};
	*shorts = '\0';
}

/* the target_opts[] entry getopt_long() returned c for, or NULL */
static const struct target_opt *find_opt(int c)
{
	if (c >= OPT_BASE && c < OPT_BASE + (int)NR_TARGET_OPTS)
		return &target_opts[c - OPT_BASE];
	for (size_t i = 0; i < NR_TARGET_OPTS; i++)
		if (c && target_opts[i].short_name == c)
			return &target_opts[i];
	return NULL;
}

/* command-line options apply on top of -c, wherever it appears */
static int load_configs(int argc, char **argv, struct cfg_target *cfg)
{
	char err[512];

	for (int i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) {
			if (cfg_load(cfg, argv[i + 1], err, sizeof(err))) {
				fprintf(stderr, "rblk-target: %s\n", err);
				return 1;
			}
		}
	}
	return 0;
}

/* 0: run; otherwise the exit status (1 config file, 2 usage) */
static int parse_args(int argc, char **argv, struct cfg_target *cfg)
{
	struct option lo[NR_TARGET_OPTS + 1];
	char shorts[2 * NR_TARGET_OPTS + 1];
	const struct target_opt *o;
	char err[512];
	int c, ret;

	if (load_configs(argc, argv, cfg))
		return 1;
	build_getopt(lo, shorts);
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		o = find_opt(c);
		if (!o) {
			usage(stderr);
			return 2;
		}
		if (o->short_name == 'h') {
			usage(stdout);
			exit(0);
		}
		if (o->short_name == 'V') {
			printf("rblk-target %s (protocol %d)\n", rblk_version(),
			       RBLK_PROTO_VERSION);
			exit(0);
		}
		ret = o->limit ? cfg_set_limit(cfg, o->limit, optarg, err,
					       sizeof(err))
			       : o->set(cfg, optarg, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "rblk-target: %s\n", err);
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
}

/*
 * Take every pending connection request on l, each for the next worker
 * (round robin): handed to it whole, it joins that worker's poll group
 * on the worker's thread.
 */
static void accept_requests(struct target *t, struct listener *l,
			    unsigned int *next_worker)
{
	for (;;) {
		struct worker *w = &t->workers[*next_worker];
		int ret = worker_accept(w, l->xl, l->url);

		if (ret == -EAGAIN)
			return;
		if (ret) /* logged; the request is gone or will come back */
			return;
		*next_worker = (*next_worker + 1) % t->nr_workers;
	}
}

/* The main thread's PSK lookup: a host's PSK from its secret. */
static int tls_psk_lookup(void *arg, const char *identity,
			  uint8_t key[XP_TLS_PSK_LEN])
{
	const struct cfg_target *cfg = arg; /* hosts do not change */
	const char *name = rblk_tls_identity_host(identity);
	const struct cfg_host *h = name ? cfg_find_host(cfg, name) : NULL;

	if (!h)
		return -ENOENT;
	rblk_tls_psk(h->secret, h->secret_len, h->name, key);
	return 0;
}

/* TLS server credentials, where the configuration takes TLS. */
static int open_tls(struct target *t)
{
	const struct cfg_target *cfg = &t->cfg;
	struct xp_tls_opts o = {
	    .server = true,
	    .psk_lookup = cfg->nr_hosts ? tls_psk_lookup : NULL,
	    .psk_arg = &t->cfg,
	    .cert_file = cfg->tls_cert[0] ? cfg->tls_cert : NULL,
	    .key_file = cfg->tls_key[0] ? cfg->tls_key : NULL,
	    .ca_file = cfg->tls_ca[0] ? cfg->tls_ca : NULL,
	    .no_ktls = getenv("RBLK_TLS_NO_KTLS") != NULL,
	};
	char err[512];
	int ret;

	if (!cfg_tls_accepted(cfg))
		return 0;
	ret = xp_tls_create(&o, &t->tls, err, sizeof(err));
	if (ret) {
		log_err("%s", err);
		return ret;
	}
	log_info("TLS 1.3 on tcp listeners (%s): PSK for %u host%s%s%s",
		 cfg->tls == CFG_TLS_REQUIRED ? "required" : "optional",
		 cfg->nr_hosts, cfg->nr_hosts == 1 ? "" : "s",
		 cfg->tls_cert[0] ? ", certificate " : "",
		 cfg->tls_cert[0] ? cfg->tls_cert : "");
	return 0;
}

static int open_listeners(struct target *t, struct listener *ls, int epfd)
{
	int tls_ret = open_tls(t);

	if (tls_ret)
		return tls_ret;
	for (unsigned int i = 0; i < t->cfg.nr_listen; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &ls[i]};
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
			log_err("%s: unknown transport '%s' (tcp, rdma, unix)",
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
		if (t->tls && !strcmp(u.scheme, "tcp")) {
			ret = xp_listener_tls(ls[i].xl, t->tls);
			if (ret) {
				log_err("%s: TLS: %s", ls[i].url,
					strerror(-ret));
				return ret;
			}
		}
		/* made owner-only by the transport; opened as configured */
		if (!strcmp(u.scheme, "unix") &&
		    chmod(u.host, t->cfg.unix_socket_mode)) {
			ret = -errno;
			log_err("%s: chmod %04o: %s", ls[i].url,
				t->cfg.unix_socket_mode, strerror(errno));
			return ret;
		}
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, ops->listener_fd(ls[i].xl),
			      &ev)) {
			log_err("epoll_ctl: %s", strerror(errno));
			return -errno;
		}
		/* scripts wait for this line */
		rblk_url_endpoint(&u, err, sizeof(err));
		log_msg(LOG_INFO, "listening on %s", err);
	}
	return 0;
}

static int serve(struct target *t, struct listener *ls)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
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

/*
 * Open the configured exports into t->exports. On failure the ones opened
 * stay on the list for the caller to put.
 */
static int open_exports(struct target *t, const sigset_t *mask)
{
	/* built back to front so that the list keeps the configured order */
	for (unsigned int i = t->cfg.nr_exports; i-- > 0;) {
		char err[512];
		struct export *e = export_create(
		    &t->cfg.exports[i], t->nr_workers, err, sizeof(err));

		const struct export *o;

		if (!e)
			return -EINVAL;
		o = export_id_clash(t->exports, e);
		if (o) {
			log_err(
			    "exports %s and %s have the same volume id (a configured uuid): two volumes must not share one identity (initiators would take one for the other)",
			    e->name, o->name);
			export_put(e);
			return -EINVAL;
		}
		e->next = t->exports;
		t->exports = e;
		t->nr_exports++;
		if (startup_interrupted(mask))
			return -EINTR;
	}
	return 0;
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
	if (export_unsafe_ack_init())
		return 2;
	if (rblk_auth_init()) {
		log_err("libsodium failed to initialise");
		return 1;
	}
	if (!t.cfg.name[0] && gethostname(t.cfg.name, sizeof(t.cfg.name) - 1))
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
	for (i = 0; i < t.cfg.nr_hosts; i++)
		qos_configure(&t.host_qos[i], &t.cfg.hosts[i].qos);
	if (open_exports(&t, &mask)) {
		ret = 1;
		goto out_close_exports;
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
	xp_tls_destroy(t.tls);
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
