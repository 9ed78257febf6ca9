/* SPDX-License-Identifier: MIT */
/*
 * nbdkit-rblk-plugin.so: serve an rblk volume through nbdkit, so that NBD
 * clients on other hosts get nbdkit's TLS (--tls, PSK or X.509), its
 * filters and multi-conn on top of librblk:
 *
 *   nbdkit rblk url=tcp://HOST[:PORT]/EXPORT [queues=N] [key-file=PATH] ...
 *
 * `rblk nbd` stays the fast local path (a queue per connection, registered
 * buffers, pipelined replies); this plugin trades some speed for nbdkit's
 * features (docs/man/nbdkit-rblk-plugin.1).
 *
 * One session for the whole server. nbdkit runs the plugin in its
 * PARALLEL thread model: up to --threads requests of every connection at
 * once, each on its own worker thread, and a connection's threads come
 * and go with it. A librblk queue is used by one thread at a time and
 * takes no locks, so the session's queues form a pool: a request takes a
 * free queue, runs one synchronous I/O on it (rblk_queue_io(): librblk
 * splits it at max_io and bounces nbdkit's unregistered buffer) and gives
 * it back; with every queue busy it waits. queues= thus bounds the
 * requests in flight to the target, all connections together. Opening
 * the session once (in .after_fork, after nbdkit has daemonised: RDMA
 * resources must not cross fork()) means a bad URL or refused login stops
 * nbdkit at start-up instead of failing each client, and every connection
 * sees the same session (see can_multi_conn()).
 *
 * Keep-alive: a queue polls its timers only inside librblk calls. A
 * keeper thread takes the idle queues every keepalive/2 and polls each
 * once without waiting, so an idle server keeps its sessions (the target
 * drops one silent for its idle_timeout) and notices a lost target before
 * the next client does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <rblk/rblk.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

#define PLUGIN_MAX_QUEUES 64
#define PLUGIN_DEFAULT_QUEUES 4
/* the largest READ or WRITE offered to clients, as `rblk nbd` offers */
#define PLUGIN_MAX_PAYLOAD (32u << 20)

/* config= keys, kept until the session is opened */
static struct {
	const char *url;
	const char *paths[RBLK_MAX_PATHS - 1];
	unsigned int nr_paths;
	const char *host_name;
	const char *key_file;
	bool mutual_auth;
	bool read_only;
	int direct; /* enum rblk_direct */
	unsigned int queues;
	unsigned int queue_depth; /* 0: librblk's default */
	/* milliseconds; < -1: not given, librblk's default */
	int timeout_ms, reconnect_delay_ms, keepalive_ms, failback_ms;
	int io_timeout_ms;
	int ctrl_loss_s; /* -2: not given */
	int io_retries;	 /* -2: not given */
} cfg = {
    .queues = PLUGIN_DEFAULT_QUEUES,
    .timeout_ms = -2,
    .reconnect_delay_ms = -2,
    .keepalive_ms = -2,
    .failback_ms = -2,
    .io_timeout_ms = -2,
    .ctrl_loss_s = -2,
    .io_retries = -2,
};

/* The session and its pool of idle queues; lock guards the pool. */
static struct {
	struct rblk *r;
	const struct rblk_info *info;
	int keepalive_ms; /* in force (librblk's default or keepalive=) */
	pthread_mutex_t lock;
	pthread_cond_t freed; /* a queue went back to the pool */
	struct rblk_queue *idle[PLUGIN_MAX_QUEUES];
	unsigned int nr_idle;
	pthread_t keeper;
	bool keeper_running;
	bool stopping; /* .cleanup: the keeper exits */
	pthread_cond_t wake_keeper;
} g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .freed = PTHREAD_COND_INITIALIZER,
    .wake_keeper = PTHREAD_COND_INITIALIZER,
};

/* ---- configuration ------------------------------------------------------ */

/* SEC (fractions allowed) in [min_s, 86400] into milliseconds. */
static int parse_seconds(const char *key, const char *value, double min_s,
			 int *out_ms)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(value, &end);
	if (errno || *end || end == value || !(v >= min_s && v <= 86400)) {
		nbdkit_error("%s: '%s' is not a number of seconds (%g..86400)",
			     key, value, min_s);
		return -1;
	}
	if (v < 0) {
		*out_ms = -1;
		return 0;
	}
	*out_ms = (int)(v * 1000 + 0.5);
	if (v > 0 && !*out_ms)
		*out_ms = 1;
	return 0;
}

static int parse_count(const char *key, const char *value, unsigned int min,
		       unsigned int max, unsigned int *out)
{
	if (nbdkit_parse_unsigned(key, value, out) < 0)
		return -1;
	if (*out < min || *out > max) {
		nbdkit_error("%s: %u is not in %u..%u", key, *out, min, max);
		return -1;
	}
	return 0;
}

static int parse_flag(const char *key, const char *value, bool *out)
{
	int b = nbdkit_parse_bool(value);

	if (b < 0)
		return -1;
	*out = b;
	return 0;
}

static int parse_direct(const char *value)
{
	if (!strcmp(value, "auto"))
		cfg.direct = RBLK_DIRECT_AUTO;
	else if (!strcmp(value, "on"))
		cfg.direct = RBLK_DIRECT_ON;
	else if (!strcmp(value, "off"))
		cfg.direct = RBLK_DIRECT_OFF;
	else {
		nbdkit_error("direct: '%s' is not auto, on or off", value);
		return -1;
	}
	return 0;
}

static int parse_retries(const char *value)
{
	if (nbdkit_parse_int("io-retries", value, &cfg.io_retries) < 0)
		return -1;
	if (cfg.io_retries < -1 || cfg.io_retries > 1000) {
		nbdkit_error("io-retries: %d is not in -1..1000",
			     cfg.io_retries);
		return -1;
	}
	return 0;
}

static int plug_config(const char *key, const char *value)
{
	int s;

	if (!strcmp(key, "url")) {
		cfg.url = value;
	} else if (!strcmp(key, "path")) {
		if (cfg.nr_paths == RBLK_MAX_PATHS - 1) {
			nbdkit_error("path: at most %d", RBLK_MAX_PATHS - 1);
			return -1;
		}
		cfg.paths[cfg.nr_paths++] = value;
	} else if (!strcmp(key, "host-name")) {
		cfg.host_name = value;
	} else if (!strcmp(key, "key-file")) {
		cfg.key_file = value;
	} else if (!strcmp(key, "mutual-auth")) {
		return parse_flag(key, value, &cfg.mutual_auth);
	} else if (!strcmp(key, "read-only")) {
		return parse_flag(key, value, &cfg.read_only);
	} else if (!strcmp(key, "direct")) {
		return parse_direct(value);
	} else if (!strcmp(key, "queues")) {
		return parse_count(key, value, 1, PLUGIN_MAX_QUEUES,
				   &cfg.queues);
	} else if (!strcmp(key, "queue-depth")) {
		return parse_count(key, value, 1, 65535, &cfg.queue_depth);
	} else if (!strcmp(key, "connect-timeout")) {
		return parse_seconds(key, value, 0.001, &cfg.timeout_ms);
	} else if (!strcmp(key, "reconnect-delay")) {
		return parse_seconds(key, value, 0, &cfg.reconnect_delay_ms);
	} else if (!strcmp(key, "keepalive")) {
		return parse_seconds(key, value, 0, &cfg.keepalive_ms);
	} else if (!strcmp(key, "failback")) {
		return parse_seconds(key, value, 0, &cfg.failback_ms);
	} else if (!strcmp(key, "io-timeout")) {
		return parse_seconds(key, value, 0, &cfg.io_timeout_ms);
	} else if (!strcmp(key, "ctrl-loss-timeout")) {
		if (parse_seconds(key, value, -1, &s) < 0)
			return -1;
		cfg.ctrl_loss_s = s < 0 ? -1 : (s + 999) / 1000;
	} else if (!strcmp(key, "io-retries")) {
		return parse_retries(value);
	} else {
		nbdkit_error("unknown parameter '%s'", key);
		return -1;
	}
	return 0;
}

static int plug_config_complete(void)
{
	if (!cfg.url) {
		nbdkit_error("the url parameter is required "
			     "(url=tcp://HOST[:PORT]/EXPORT or rdma://...)");
		return -1;
	}
	return 0;
}

#define rblk_config_help                                                       \
	"url=URL               (required) tcp://HOST[:PORT]/EXPORT,\n"         \
	"                      rdma://HOST[:PORT]/EXPORT or\n"                 \
	"                      unix:///EXPORT?socket=PATH\n"                   \
	"path=URL              another path to the volume (repeatable)\n"      \
	"host-name=NAME        who we are to the target (default: hostname)\n" \
	"key-file=PATH         this host's shared secret (mode 0600)\n"        \
	"mutual-auth=BOOL      refuse a target that does not prove it\n"       \
	"read-only=BOOL        log in read-only\n"                             \
	"direct=auto|on|off    direct volume access (default auto)\n"          \
	"queues=N              rblk queues: requests in flight (default 4)\n"  \
	"queue-depth=N         commands per queue asked of the target\n"       \
	"connect-timeout=SEC   connect and login timeout (default 10)\n"       \
	"reconnect-delay=SEC   first wait between reconnects (default 1)\n"    \
	"ctrl-loss-timeout=SEC give up reconnecting (default 60, -1 never)\n"  \
	"keepalive=SEC         probe an idle connection (default 5, 0 off)\n"  \
	"failback=SEC          probe the first path (default 5, 0 never)\n"    \
	"io-timeout=SEC        command deadline (default 30, 0 none)\n"        \
	"io-retries=N          resends before an I/O fails (default 3)"

static void plug_dump_plugin(void)
{
	printf("rblk_version=%s\n", RBLK_VERSION_STRING);
	printf("rblk_transports=tcp,rdma,unix\n");
}

/* ---- the session ------------------------------------------------------ */

static void fill_opts(struct rblk_opts *o)
{
	rblk_opts_init(o);
	o->queues = cfg.queues;
	if (cfg.queue_depth)
		o->queue_depth = cfg.queue_depth;
	if (cfg.host_name)
		o->host_name = cfg.host_name;
	o->key_file = cfg.key_file;
	if (cfg.mutual_auth)
		o->flags |= RBLK_OPEN_MUTUAL_AUTH;
	if (cfg.read_only)
		o->flags |= RBLK_OPEN_READ_ONLY;
	o->direct = cfg.direct;
	o->paths = cfg.nr_paths ? cfg.paths : NULL;
	o->nr_paths = cfg.nr_paths;
	if (cfg.timeout_ms >= 0)
		o->timeout_ms = cfg.timeout_ms;
	if (cfg.reconnect_delay_ms >= 0)
		o->reconnect_delay_ms = cfg.reconnect_delay_ms;
	if (cfg.keepalive_ms >= 0)
		o->keepalive_ms = cfg.keepalive_ms;
	if (cfg.failback_ms >= 0)
		o->failback_ms = cfg.failback_ms;
	if (cfg.io_timeout_ms >= 0)
		o->io_timeout_ms = cfg.io_timeout_ms;
	if (cfg.ctrl_loss_s >= -1)
		o->ctrl_loss_timeout_s = cfg.ctrl_loss_s;
	if (cfg.io_retries >= -1)
		o->io_retries = cfg.io_retries;
}

/* Take an idle queue, waiting for one; give it back with queue_put(). */
static struct rblk_queue *queue_get(void)
{
	struct rblk_queue *q;

	pthread_mutex_lock(&g.lock);
	while (!g.nr_idle)
		pthread_cond_wait(&g.freed, &g.lock);
	q = g.idle[--g.nr_idle];
	pthread_mutex_unlock(&g.lock);
	return q;
}

static void queue_put(struct rblk_queue *q)
{
	pthread_mutex_lock(&g.lock);
	g.idle[g.nr_idle++] = q;
	pthread_cond_signal(&g.freed);
	pthread_mutex_unlock(&g.lock);
}

/* Take q out of the pool if it is idle there (lock held). */
static bool take_if_idle(struct rblk_queue *q)
{
	unsigned int i;

	for (i = 0; i < g.nr_idle; i++) {
		if (g.idle[i] == q) {
			g.idle[i] = g.idle[--g.nr_idle];
			return true;
		}
	}
	return false;
}

/*
 * The keeper: every keepalive/2, poll each idle queue once without
 * waiting (librblk sends a KEEPALIVE, or reconnects, from inside that
 * call). A queue is out of the pool while it polls, as with any user;
 * busy ones are kept alive by their own I/O.
 */
static void *keeper_main(void *arg)
{
	struct rblk_completion c;
	struct rblk_queue *q;
	struct timespec ts;
	unsigned int i;
	long ms = g.keepalive_ms / 2 > 0 ? g.keepalive_ms / 2 : 1;

	pthread_mutex_lock(&g.lock);
	while (!g.stopping) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g.wake_keeper, &g.lock, &ts);
		for (i = 0; i < g.info->queues && !g.stopping; i++) {
			q = rblk_get_queue(g.r, i);
			if (!take_if_idle(q))
				continue;
			pthread_mutex_unlock(&g.lock);
			(void)rblk_poll(q, &c, 1, 0);
			pthread_mutex_lock(&g.lock);
			g.idle[g.nr_idle++] = q;
			pthread_cond_signal(&g.freed);
		}
	}
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

/*
 * After nbdkit has forked into the background (or at once with -f): open
 * the session here, never before, since verbs resources do not survive
 * fork(). A failure stops nbdkit with librblk's sentence.
 */
static int plug_after_fork(void)
{
	struct rblk_opts o;
	unsigned int i;
	int ret;

	fill_opts(&o);
	ret = rblk_open(cfg.url, &o, &g.r);
	if (ret < 0) {
		nbdkit_error("%s: %s", cfg.url, rblk_last_error());
		return -1;
	}
	g.info = rblk_get_info(g.r);
	for (i = 0; i < g.info->queues && i < PLUGIN_MAX_QUEUES; i++)
		g.idle[g.nr_idle++] = rblk_get_queue(g.r, i);
	g.keepalive_ms = o.keepalive_ms;
	if (g.keepalive_ms > 0) {
		ret = pthread_create(&g.keeper, NULL, keeper_main, NULL);
		if (ret) {
			nbdkit_error("pthread_create: %s", strerror(ret));
			rblk_close(g.r);
			g.r = NULL;
			return -1;
		}
		g.keeper_running = true;
	}
	nbdkit_debug("rblk: %s: %llu bytes, block size %u, %u queues of "
		     "depth %u over %s, features 0x%x",
		     cfg.url, (unsigned long long)g.info->size,
		     g.info->block_size, g.info->queues, g.info->queue_depth,
		     g.info->transport, g.info->features);
	return 0;
}

/* After every connection has closed. */
static void plug_cleanup(void)
{
	if (g.keeper_running) {
		pthread_mutex_lock(&g.lock);
		g.stopping = true;
		pthread_cond_signal(&g.wake_keeper);
		pthread_mutex_unlock(&g.lock);
		pthread_join(g.keeper, NULL);
		g.keeper_running = false;
	}
	if (g.r)
		rblk_close(g.r);
	g.r = NULL;
	g.info = NULL;
	g.nr_idle = 0;
}

/* ---- per connection --------------------------------------------------- */

/* Connections share the session: the handle is only a non-NULL token. */
static void *plug_nbd_open(int readonly)
{
	return &g;
}

static bool has(uint32_t feature)
{
	return g.info->features & feature;
}

static int64_t plug_get_size(void *handle)
{
	return (int64_t)g.info->size;
}

/*
 * Minimum: the volume's block size (librblk refuses smaller or misaligned
 * requests with EINVAL; --filter=blocksize serves clients that send them);
 * preferred max(4096, block size); maximum payload 32 MiB, as `rblk nbd`.
 */
static int plug_block_size(void *handle, uint32_t *minimum, uint32_t *preferred,
			   uint32_t *maximum)
{
	uint32_t bs = g.info->block_size;

	*minimum = bs;
	*preferred = bs > 4096 ? bs : 4096;
	*maximum = PLUGIN_MAX_PAYLOAD;
	return 0;
}

static int plug_can_write(void *handle)
{
	return !cfg.read_only && !has(RBLK_FEAT_READ_ONLY);
}

static int plug_can_flush(void *handle)
{
	return has(RBLK_FEAT_FLUSH);
}

/*
 * FUA travels on the wire when the volume has both FUA and FLUSH (as
 * `rblk nbd` offers it); with FLUSH alone nbdkit emulates it by a flush
 * after the write.
 */
static int plug_can_fua(void *handle)
{
	if (has(RBLK_FEAT_FUA) && has(RBLK_FEAT_FLUSH))
		return NBDKIT_FUA_NATIVE;
	if (has(RBLK_FEAT_FLUSH))
		return NBDKIT_FUA_EMULATE;
	return NBDKIT_FUA_NONE;
}

static int plug_can_trim(void *handle)
{
	return has(RBLK_FEAT_TRIM);
}

/* Without WRITE_ZEROES nbdkit still offers it, writing zeroes itself. */
static int plug_can_zero(void *handle)
{
	return has(RBLK_FEAT_ZEROES);
}

/*
 * Multi-conn is safe: every connection's requests go through the one
 * session to the one target, with no cache between them, so a read on
 * any connection sees every write completed on any other; and a
 * completed FLUSH covers every write acknowledged before it was sent, on
 * any session (the target fdatasyncs the whole backing store; see
 * docs/PROTOCOL.md, "Durability epoch"), whichever connection sent it.
 */
static int plug_can_multi_conn(void *handle)
{
	return 1;
}

/* librblk's -errno to the errno nbdkit turns into an NBD error. */
static int map_errno(int ret)
{
	switch (-ret) {
	case EROFS:
	case EPERM:
	case EACCES:
		return EPERM;
	case EINVAL:
	case ERANGE:
		return EINVAL;
	case ENOSPC:
		return ENOSPC;
	case ENOMEM:
		return ENOMEM;
	case EOPNOTSUPP:
		return EOPNOTSUPP;
	default:
		/* EIO, ENOTCONN, ETIMEDOUT, EPROTO: the volume failed us */
		return EIO;
	}
}

/* One synchronous I/O on a queue of the pool; 0 or -1 with nbdkit's errno. */
static int do_io(enum rblk_io_op op, void *buf, uint64_t offset, uint64_t len,
		 unsigned int flags)
{
	struct rblk_queue *q = queue_get();
	int ret = rblk_queue_io(q, op, buf, offset, len, flags);

	queue_put(q);
	if (ret < 0) {
		/* rblk_last_error() is this thread's: the queue may be
		 * someone else's by now, the sentence is still ours */
		nbdkit_error("%s", rblk_last_error());
		nbdkit_set_error(map_errno(ret));
		return -1;
	}
	return 0;
}

static unsigned int fua(uint32_t flags)
{
	return (flags & NBDKIT_FLAG_FUA) ? RBLK_IO_FUA : 0;
}

static int plug_nbd_pread(void *handle, void *buf, uint32_t count,
			  uint64_t offset, uint32_t flags)
{
	return do_io(RBLK_IO_READ, buf, offset, count, 0);
}

static int plug_nbd_pwrite(void *handle, const void *buf, uint32_t count,
			   uint64_t offset, uint32_t flags)
{
	return do_io(RBLK_IO_WRITE, (void *)buf, offset, count, fua(flags));
}

static int plug_nbd_flush(void *handle, uint32_t flags)
{
	return do_io(RBLK_IO_FLUSH, NULL, 0, 0, 0);
}

/* TRIM carries no FUA on rblk: a FLUSH after it makes it durable. */
static int plug_nbd_trim(void *handle, uint32_t count, uint64_t offset,
			 uint32_t flags)
{
	if (do_io(RBLK_IO_TRIM, NULL, offset, count, 0) < 0)
		return -1;
	if (flags & NBDKIT_FLAG_FUA)
		return do_io(RBLK_IO_FLUSH, NULL, 0, 0, 0);
	return 0;
}

/*
 * NBDKIT_FLAG_MAY_TRIM is allowed, not required: the target zeroes with
 * fallocate(ZERO_RANGE) or the backend's write-zeroes either way.
 */
static int plug_nbd_zero(void *handle, uint32_t count, uint64_t offset,
			 uint32_t flags)
{
	return do_io(RBLK_IO_WRITE_ZEROES, NULL, offset, count, fua(flags));
}

static struct nbdkit_plugin plugin = {
    .name = "rblk",
    .longname = "rblk RDMA block storage",
    .version = RBLK_VERSION_STRING,
    .description = "serve an rblk volume (tcp://, rdma://, unix://) over NBD",
    .config = plug_config,
    .config_complete = plug_config_complete,
    .config_help = rblk_config_help,
    .magic_config_key = "url",
    .dump_plugin = plug_dump_plugin,
    .after_fork = plug_after_fork,
    .cleanup = plug_cleanup,
    .open = plug_nbd_open,
    .get_size = plug_get_size,
    .block_size = plug_block_size,
    .can_write = plug_can_write,
    .can_flush = plug_can_flush,
    .can_fua = plug_can_fua,
    .can_trim = plug_can_trim,
    .can_zero = plug_can_zero,
    .can_multi_conn = plug_can_multi_conn,
    .pread = plug_nbd_pread,
    .pwrite = plug_nbd_pwrite,
    .flush = plug_nbd_flush,
    .trim = plug_nbd_trim,
    .zero = plug_nbd_zero,
    .errno_is_preserved = 0,
};

/* nbdkit's entry point, defined by the macro (the map's one global) */
struct nbdkit_plugin *plugin_init(void);
NBDKIT_REGISTER_PLUGIN(plugin)
