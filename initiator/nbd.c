/* SPDX-License-Identifier: MIT */
/*
 * rblk nbd - the command line: the options (a table, one setter each),
 * their checks and the help text. nbd_serve() (nbd_server.c) does the
 * serving.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/url.h"
#include "common/util.h"
#include "initiator/cli.h"
#include "initiator/nbd_proto.h"
#include "initiator/nbd_server.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: rblk nbd URL (--socket PATH | --listen tcp://HOST[:PORT])\n"
	    "                [--path URL]... [--failback SEC]\n"
	    "                [--queues N] [--queue-depth N] [--read-only]\n"
	    "                [--direct | --no-direct]\n"
	    "                [--max-connections N] [--handshake-timeout SEC]\n"
	    "                [--idle-timeout SEC] [--max-client-buffer SIZE]\n"
	    "                [--poll-spin-us N] [--reconnect-delay SEC]\n"
	    "                [--ctrl-loss-timeout SEC] [--io-timeout SEC]\n"
	    "                [--io-retries N] [--log-level L] [--help]\n"
	    "\n"
	    "Serve the rblk volume URL (tcp://HOST[:PORT]/EXPORT,\n"
	    "rdma://HOST[:PORT]/EXPORT or unix:///EXPORT?socket=PATH) to NBD\n"
	    "clients: qemu-img, qemu-io, nbdcopy,\n"
	    "nbdinfo, nbdfuse, fio --ioengine=nbd, nbd-client.\n"
	    "\n"
	    "  --socket PATH         listen on a unix socket (created mode 0600; a stale\n"
	    "                        socket file is replaced; removed on exit).\n"
	    "                        Clients use nbd+unix:///EXPORT?socket=PATH\n"
	    "  --listen tcp://HOST[:PORT]\n"
	    "                        listen on TCP instead (port default %d)\n"
	    "  --queues N            rblk queues to open, default %d; each NBD connection\n"
	    "                        uses one queue for its lifetime, so N is also the\n"
	    "                        number of clients (or multi-conn connections) served\n"
	    "                        at once; further clients are refused\n"
	    "  --queue-depth N       requests in flight per queue (asked of the target;\n"
	    "                        default: the library's, 64)\n"
	    "  --read-only           log in read-only and advertise a read-only export;\n"
	    "                        writes fail with EPERM\n"
	    "  --direct              require direct volume access (RDMA straight to the\n"
	    "                        target's volume memory); default: use it if offered\n"
	    "  --no-direct           always use the target's slots\n"
	    "  --max-connections N   sockets open at once, in handshake or serving,\n"
	    "                        default %d; when full, the oldest socket still in\n"
	    "                        its handshake is dropped for a newcomer, which is\n"
	    "                        refused only if every socket is serving\n"
	    "  --handshake-timeout SEC\n"
	    "                        drop a client that has not finished the handshake\n"
	    "                        within SEC seconds, default %g\n"
	    "  --idle-timeout SEC    drop a client that moves no data for SEC seconds\n"
	    "                        while none of its requests is in flight; default 0:\n"
	    "                        never\n"
	    "  --max-client-buffer SIZE\n"
	    "                        request data one client may hold in memory beyond\n"
	    "                        its queue's buffer pool (requests larger than\n"
	    "                        128 KiB); past it the client's requests are read\n"
	    "                        only as its replies go out; default %lluM\n"
	    "  --poll-spin-us N      before a connection sleeps, poll its socket and\n"
	    "                        queue for up to N microseconds (no sleep and\n"
	    "                        wake-up when the reply or the next request comes\n"
	    "                        within it; backs off while spins find nothing);\n"
	    "                        0: sleep at once; default %u\n"
	    "  --reconnect-delay SEC first wait between reconnect attempts when a\n"
	    "                        queue's connection is lost (doubles up to 10 s),\n"
	    "                        default 1; clients' requests wait meanwhile\n"
	    "  --ctrl-loss-timeout SEC\n"
	    "                        give up reconnecting after SEC seconds and fail\n"
	    "                        requests with EIO; default 60, 0 at once, -1 never\n"
	    "  --log-level L         error, warn (default), info or debug, to stderr\n" CLI_IO_HELP
		CLI_PATH_HELP CLI_FAILBACK_HELP CLI_AUTH_HELP
	    "  -h, --help            this text\n"
	    "\n"
	    "The export is offered under its rblk export name and as the default\n"
	    "export (\"\"). Block sizes: minimum = the volume's block size, preferred =\n"
	    "max(4096, block size), maximum payload 32 MiB. Multi-conn is advertised.\n"
	    "\n"
	    "Once listening, one line goes to stdout for scripts to wait on:\n"
	    "  ready unix:PATH nbd+unix:///EXPORT?socket=PATH\n"
	    "  ready tcp://HOST:PORT nbd://HOST:PORT/EXPORT\n"
	    "SIGINT or SIGTERM: stop accepting, finish in-flight requests, close the\n"
	    "clients, close the volume, remove the socket, exit 0.\n"
	    "Exit status: 0 after a clean shutdown, 1 on errors, 2 on usage errors.\n",
	    NBD_DEFAULT_PORT, NBD_DEFAULT_QUEUES, NBD_DEFAULT_MAX_CONNS,
	    NBD_DEFAULT_HANDSHAKE_MS / 1000.0,
	    (unsigned long long)(NBD_DEFAULT_CLIENT_BUFFER >> 20),
	    NBD_DEFAULT_SPIN_US);
}

struct nbd_args {
	const char *url;
	const char *socket_path;
	const char *listen_url;
	unsigned long queues;
	unsigned long queue_depth; /* 0: library default */
	unsigned long max_conns;
	bool read_only;
	struct rblk_url vol, listen; /* url and listen_url, parsed */
	struct cli_auth auth;
	struct cli_paths paths;
	struct cli_io io;	/* --io-timeout, --io-retries */
	int direct;		/* enum rblk_direct */
	int reconnect_delay_ms; /* -2: library default */
	int ctrl_loss_ms;	/* -2: library default; -1: never */
	int handshake_ms;
	int idle_ms; /* 0: none */
	unsigned long spin_us;
	uint64_t max_client_buf;
};

/* 0, or 2 after the usage error: arg is not a number in min..max */
static int set_count(const char *opt, const char *arg, unsigned long min,
		     unsigned long max, unsigned long *v)
{
	if (parse_uint(arg, min, max, v))
		return cli_usage_error(
		    "nbd", "%s: '%s' is not a number from %lu to %lu", opt, arg,
		    min, max);
	return 0;
}

/* 0, or 2 after the usage error: arg is not what (seconds) */
static int set_seconds(const char *opt, const char *arg, bool allow_forever,
		       const char *what, int *ms)
{
	if (parse_seconds_ms(arg, allow_forever, ms))
		return cli_usage_error("nbd", "%s: '%s' is not %s", opt, arg,
				       what);
	return 0;
}

/*
 * One setter per option: it checks arg and stores it in a; it returns 0,
 * or the exit status after saying what is wrong (2).
 */
typedef int (*nbd_set_fn)(struct nbd_args *a, const char *arg);

static int set_socket(struct nbd_args *a, const char *arg)
{
	a->socket_path = arg;
	return 0;
}

static int set_listen(struct nbd_args *a, const char *arg)
{
	a->listen_url = arg;
	return 0;
}

static int set_queues(struct nbd_args *a, const char *arg)
{
	return set_count("--queues", arg, 1, NBD_MAX_QUEUES, &a->queues);
}

static int set_queue_depth(struct nbd_args *a, const char *arg)
{
	return set_count("--queue-depth", arg, 1, RBLK_MAX_QD, &a->queue_depth);
}

static int set_read_only(struct nbd_args *a, const char *arg)
{
	a->read_only = true;
	return 0;
}

static int set_direct(struct nbd_args *a, const char *arg)
{
	a->direct = RBLK_DIRECT_ON;
	return 0;
}

static int set_no_direct(struct nbd_args *a, const char *arg)
{
	a->direct = RBLK_DIRECT_OFF;
	return 0;
}

static int set_max_conns(struct nbd_args *a, const char *arg)
{
	return set_count("--max-connections", arg, 1, 65536, &a->max_conns);
}

static int set_log_level(struct nbd_args *a, const char *arg)
{
	return cli_parse_log_level("nbd", arg) ? 2 : 0;
}

static int set_reconnect_delay(struct nbd_args *a, const char *arg)
{
	return set_seconds("--reconnect-delay", arg, false,
			   "a number of seconds", &a->reconnect_delay_ms);
}

static int set_ctrl_loss(struct nbd_args *a, const char *arg)
{
	return set_seconds("--ctrl-loss-timeout", arg, true,
			   "a number of seconds (or -1)", &a->ctrl_loss_ms);
}

static int set_handshake_timeout(struct nbd_args *a, const char *arg)
{
	if (parse_seconds_ms(arg, false, &a->handshake_ms) ||
	    a->handshake_ms <= 0)
		return cli_usage_error("nbd",
				       "--handshake-timeout: '%s' is not a "
				       "positive number of seconds",
				       arg);
	return 0;
}

static int set_idle_timeout(struct nbd_args *a, const char *arg)
{
	return set_seconds("--idle-timeout", arg, false, "a number of seconds",
			   &a->idle_ms);
}

static int set_client_buffer(struct nbd_args *a, const char *arg)
{
	if (parse_size(arg, &a->max_client_buf) ||
	    a->max_client_buf < NBD_MAX_PAYLOAD ||
	    a->max_client_buf > (1ull << 40))
		return cli_usage_error(
		    "nbd",
		    "--max-client-buffer: '%s' is not a size "
		    "from 32M (the largest request) to 1T",
		    arg);
	return 0;
}

static int set_poll_spin(struct nbd_args *a, const char *arg)
{
	return set_count("--poll-spin-us", arg, 0, 1000000, &a->spin_us);
}

static const struct nbd_opt {
	const char *name;
	int has_arg;
	nbd_set_fn set;
} nbd_opts[] = {
    {"socket", required_argument, set_socket},
    {"listen", required_argument, set_listen},
    {"queues", required_argument, set_queues},
    {"queue-depth", required_argument, set_queue_depth},
    {"read-only", no_argument, set_read_only},
    {"direct", no_argument, set_direct},
    {"no-direct", no_argument, set_no_direct},
    {"max-connections", required_argument, set_max_conns},
    {"log-level", required_argument, set_log_level},
    {"reconnect-delay", required_argument, set_reconnect_delay},
    {"ctrl-loss-timeout", required_argument, set_ctrl_loss},
    {"handshake-timeout", required_argument, set_handshake_timeout},
    {"idle-timeout", required_argument, set_idle_timeout},
    {"max-client-buffer", required_argument, set_client_buffer},
    {"poll-spin-us", required_argument, set_poll_spin},
};
#define NR_NBD_OPTS ARRAY_SIZE(nbd_opts)
/* getopt_long() returns OPT_BASE + index for nbd_opts[index] */
#define OPT_BASE 256

/* The options cli.h shares with rblk info and rblk map, and --help. */
static const struct option shared_opts[] = {
    {"help", no_argument, NULL, 'h'},
    CLI_AUTH_LONGOPTS,
    CLI_PATH_LONGOPTS,
    CLI_FAILBACK_LONGOPT,
    CLI_IO_LONGOPTS,
};
#define NR_SHARED_OPTS ARRAY_SIZE(shared_opts)

/* the getopt_long() table: nbd_opts[], shared_opts[], the end */
static void build_getopt(struct option *lo)
{
	for (size_t i = 0; i < NR_NBD_OPTS; i++)
		lo[i] = (struct option){nbd_opts[i].name, nbd_opts[i].has_arg,
					NULL, OPT_BASE + (int)i};
	memcpy(lo + NR_NBD_OPTS, shared_opts, sizeof(shared_opts));
	lo[NR_NBD_OPTS + NR_SHARED_OPTS] = (struct option){0};
}

/*
 * One option getopt_long() returned (ch, arg; prev: the argument that
 * named it) into a. -1 to go on, or the exit status.
 */
static int take_opt(struct nbd_args *a, int ch, const char *arg,
		    const char *prev)
{
	int ret;

	if (cli_auth_opt(ch, arg, &a->auth))
		return -1;
	ret = cli_path_opt("nbd", ch, arg, &a->paths);
	if (!ret)
		ret = cli_io_opt("nbd", ch, arg, &a->io);
	if (ret)
		return ret < 0 ? 2 : -1;
	if (ch >= OPT_BASE && ch < OPT_BASE + (int)NR_NBD_OPTS) {
		ret = nbd_opts[ch - OPT_BASE].set(a, arg);
		return ret ? ret : -1;
	}
	if (ch == 'h') {
		usage(stdout);
		return 0;
	}
	if (ch == ':')
		return cli_usage_error("nbd", "option '%s' needs a value",
				       prev);
	return cli_usage_error("nbd", "unknown option '%s'", prev);
}

/* The URL and where to listen, once the options are in. -1 or 2. */
static int check_args(int argc, char **argv, struct nbd_args *a)
{
	char err[256];

	if (optind >= argc)
		return cli_usage_error("nbd", "missing the volume URL");
	if (optind + 1 < argc)
		return cli_usage_error("nbd", "unexpected argument '%s'",
				       argv[optind + 1]);
	a->url = argv[optind];
	if (!a->socket_path && !a->listen_url)
		return cli_usage_error(
		    "nbd", "one of --socket PATH or --listen URL is "
			   "required");
	if (a->socket_path && a->listen_url)
		return cli_usage_error("nbd",
				       "--socket and --listen are exclusive");
	if (a->socket_path && !*a->socket_path)
		return cli_usage_error("nbd", "--socket: empty path");
	if (rblk_url_parse(a->url, RBLK_DEFAULT_PORT, &a->vol, err,
			   sizeof(err)))
		return cli_usage_error("nbd", "%s", err);
	if (!a->vol.export_name[0])
		return cli_usage_error("nbd",
				       "'%s' names no export "
				       "(tcp://HOST[:PORT]/EXPORT)",
				       a->url);
	if (!a->listen_url)
		return -1;
	if (rblk_url_parse(a->listen_url, NBD_DEFAULT_PORT, &a->listen, err,
			   sizeof(err)))
		return cli_usage_error("nbd", "--listen: %s", err);
	if (strcmp(a->listen.scheme, "tcp"))
		return cli_usage_error(
		    "nbd",
		    "--listen: '%s': only tcp://HOST:PORT is "
		    "supported",
		    a->listen_url);
	if (a->listen.export_name[0])
		return cli_usage_error(
		    "nbd", "--listen: '%s': no export part expected",
		    a->listen_url);
	return -1;
}

/* Returns -1 to go on, or the exit code. */
static int parse_args(int argc, char **argv, struct nbd_args *a)
{
	struct option lo[NR_NBD_OPTS + NR_SHARED_OPTS + 1];
	int ch, ret;

	a->queues = NBD_DEFAULT_QUEUES;
	a->max_conns = NBD_DEFAULT_MAX_CONNS;
	a->reconnect_delay_ms = a->ctrl_loss_ms = -2;
	a->paths.failback_ms = -1;
	a->handshake_ms = NBD_DEFAULT_HANDSHAKE_MS;
	a->max_client_buf = NBD_DEFAULT_CLIENT_BUFFER;
	a->spin_us = NBD_DEFAULT_SPIN_US;
	build_getopt(lo);
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		ret = take_opt(a, ch, optarg, argv[optind - 1]);
		if (ret >= 0)
			return ret;
	}
	return check_args(argc, argv, a);
}

/* The library's options for a. */
static void open_opts(const struct nbd_args *a, struct rblk_opts *o)
{
	rblk_opts_init(o);
	o->queues = (unsigned int)a->queues;
	if (a->queue_depth)
		o->queue_depth = (unsigned int)a->queue_depth;
	if (a->read_only)
		o->flags |= RBLK_OPEN_READ_ONLY;
	cli_auth_apply(&a->auth, o);
	cli_paths_apply(&a->paths, o);
	cli_io_apply(&a->io, o);
	o->direct = a->direct;
	if (a->reconnect_delay_ms >= 0)
		o->reconnect_delay_ms = a->reconnect_delay_ms;
	if (a->ctrl_loss_ms != -2)
		o->ctrl_loss_timeout_s =
		    a->ctrl_loss_ms < 0 ? -1 : (a->ctrl_loss_ms + 999) / 1000;
}

int cmd_nbd(int argc, char **argv)
{
	struct nbd_args a = {0};
	struct rblk_opts ro;
	int ret;

	log_set_prefix("rblk nbd");
	ret = parse_args(argc, argv, &a);
	if (ret >= 0)
		return ret;
	open_opts(&a, &ro);
	return nbd_serve(&(struct nbd_serve_opts){
	    .url = a.url,
	    .export_name = a.vol.export_name,
	    .ropts = &ro,
	    .socket_path = a.socket_path,
	    .listen = a.listen_url ? &a.listen : NULL,
	    .read_only = a.read_only,
	    .max_conns = (unsigned int)a.max_conns,
	    .handshake_ms = (unsigned int)a.handshake_ms,
	    .idle_ms = (unsigned int)a.idle_ms,
	    .spin_us = (unsigned int)a.spin_us,
	    .max_client_buf = (size_t)a.max_client_buf,
	});
}
