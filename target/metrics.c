/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus endpoint of rblk-target: GET /metrics in the text
 * exposition format, served by libmicrohttpd from its own thread (one
 * epoll loop over every connection). A client that is idle or slow delays
 * nobody: each connection advances on its own. libmicrohttpd parses HTTP
 * (request line, headers, keep-alive, HEAD, malformed input); this file
 * only says what a request gets:
 *
 *   GET or HEAD /metrics (any query)   200, the metrics
 *   another path                       404
 *   another method                     405
 *   headers over METRICS_MEM_LIMIT     431 (libmicrohttpd)
 *   malformed request                  400 (libmicrohttpd), then closed
 *
 * Limits: METRICS_MAX_CONNS connections at once (a newcomer beyond them
 * cuts the connection that has waited longest for a request:
 * make_room()); a connection must send a
 * whole request CTL_IO_TIMEOUT_S after it opens or after its previous
 * answer went out (a trickling client is cut by metrics_expire() on the
 * control thread), take its answer within CTL_IO_TIMEOUT_S, and is closed
 * after METRICS_IDLE_S without a request (keep-alive, as Prometheus
 * scrapes).
 */
#include "ctl.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "../common/log.h"
#include "../common/url.h"
#include "../common/util.h"

#define METRICS_MAX_CONNS 128
/* a connection waiting for its request this long may be cut for a newcomer */
#define METRICS_EVICT_GRACE_MS 1000
#define METRICS_IDLE_S 60 /* keep-alive between scrapes */
/* per connection: request headers over it get 431 */
#define METRICS_MEM_LIMIT 4096
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One open connection, from libmicrohttpd's STARTED to its CLOSED. */
struct mconn {
	int fd;
	/* cut at this now_ms() unless a request arrived; 0: answering */
	uint64_t deadline;
	bool cut;  /* shut down; libmicrohttpd closes it soon */
	bool busy; /* a request came; its answer has not gone out */
	struct mconn *next, **pprev;
};

struct metrics {
	struct target *t;
	struct MHD_Daemon *d;
	pthread_mutex_t lock; /* conns and their deadlines */
	struct mconn *conns;
	unsigned int nr_conns;
};

/* Prometheus label value: escape backslash, quote and newline. */
static void prom_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* QoS of the [host] entries that have limits (labels host=, kind=). */
static void host_qos_metrics(const struct target *t, FILE *f)
{
	for (unsigned int h = 0; h < t->cfg.nr_hosts; h++) {
		const struct qos *q = &t->host_qos[h];
		struct cfg_qos l;

		qos_limits(q, &l);
		if (!cfg_qos_any(&l) && !atomic_load(&q->throttled_cmds))
			continue;
		for (int k = 0; k < CFG_QOS_NR; k++) {
			fputs("rblk_qos_limit{host=", f);
			prom_str(f, t->cfg.hosts[h].name);
			fprintf(f, ",kind=\"%s\"} %llu\n", cfg_qos_key(k),
				(unsigned long long)l.limit[k]);
		}
		fputs("rblk_qos_throttled_seconds_total{host=", f);
		prom_str(f, t->cfg.hosts[h].name);
		fprintf(f, "} %.6f\n", atomic_load(&q->throttled_ns) / 1e9);
		fputs("rblk_qos_throttled_total{host=", f);
		prom_str(f, t->cfg.hosts[h].name);
		fprintf(f, "} %llu\n",
			(unsigned long long)atomic_load(&q->throttled_cmds));
	}
}

static int metrics_text(struct target *t, FILE *f)
{
	struct ctl_export_row *rows;
	struct ctl_req r = {0};
	unsigned int n;

	rows = ctl_exports_copy(t, &r, NULL, &n);
	if (!rows)
		return -1;

	fputs(
	    "# HELP rblk_ops_total Commands answered, by export and opcode.\n"
	    "# TYPE rblk_ops_total counter\n"
	    "# HELP rblk_bytes_total Bytes read or written, by export.\n"
	    "# TYPE rblk_bytes_total counter\n"
	    "# HELP rblk_errors_total Commands answered with an error status.\n"
	    "# TYPE rblk_errors_total counter\n"
	    "# HELP rblk_window_timeouts_total Sessions dropped for holding slot windows past window_timeout.\n"
	    "# TYPE rblk_window_timeouts_total counter\n"
	    "# HELP rblk_qos_limit QoS limits (per second; 0: none), by export or host and kind.\n"
	    "# TYPE rblk_qos_limit gauge\n"
	    "# HELP rblk_qos_throttled_seconds_total Time commands waited on QoS limits, summed.\n"
	    "# TYPE rblk_qos_throttled_seconds_total counter\n"
	    "# HELP rblk_qos_throttled_total Commands that waited on QoS limits.\n"
	    "# TYPE rblk_qos_throttled_total counter\n"
	    "# HELP rblk_sessions Sessions logged in, by export.\n"
	    "# TYPE rblk_sessions gauge\n"
	    "# HELP rblk_latency_us Command receipt to response posted, microseconds.\n"
	    "# TYPE rblk_latency_us histogram\n",
	    f);
	for (unsigned int k = 0; k < n; k++) {
		const struct ctl_export_row *e = &rows[k];
		const struct iostats_snap *s = &e->stats;
		uint64_t cum = 0;

#define LBL(extra)                                                             \
	do {                                                                   \
		fputs("{export=", f);                                          \
		prom_str(f, e->name);                                          \
		fputs(extra, f);                                               \
	} while (0)
		for (int i = 0; i < STAT_NR_OPS; i++) {
			fputs("rblk_ops_total", f);
			LBL(",op=\"");
			fprintf(f, "%s\"} %llu\n",
				stat_op_name((enum stat_op)i),
				(unsigned long long)s->ops[i]);
		}
		fputs("rblk_bytes_total", f);
		LBL(",direction=\"read\"} ");
		fprintf(f, "%llu\n", (unsigned long long)s->bytes_read);
		fputs("rblk_bytes_total", f);
		LBL(",direction=\"write\"} ");
		fprintf(f, "%llu\n", (unsigned long long)s->bytes_written);
		fputs("rblk_errors_total", f);
		LBL("} ");
		fprintf(f, "%llu\n", (unsigned long long)s->errors);
		fputs("rblk_window_timeouts_total", f);
		LBL("} ");
		fprintf(f, "%llu\n", (unsigned long long)s->window_timeouts);
		fputs("rblk_sessions", f);
		LBL("} ");
		fprintf(f, "%u\n", e->sessions);
		for (int q = 0; q < CFG_QOS_NR; q++) {
			fputs("rblk_qos_limit", f);
			LBL(",kind=\"");
			fprintf(f, "%s\"} %llu\n", cfg_qos_key(q),
				(unsigned long long)e->qos.limit[q]);
		}
		fputs("rblk_qos_throttled_seconds_total", f);
		LBL("} ");
		fprintf(f, "%.6f\n", e->throttled_ns / 1e9);
		fputs("rblk_qos_throttled_total", f);
		LBL("} ");
		fprintf(f, "%llu\n", (unsigned long long)e->throttled_cmds);
		/* integer microseconds: bucket i holds values <= 2^i - 1 */
		for (int i = 0; i < STAT_LAT_BUCKETS - 1; i++) {
			cum += s->lat[i];
			fputs("rblk_latency_us_bucket", f);
			LBL(",le=\"");
			fprintf(f, "%llu\"} %llu\n", (1ull << i) - 1,
				(unsigned long long)cum);
		}
		fputs("rblk_latency_us_bucket", f);
		LBL(",le=\"+Inf\"} ");
		fprintf(f, "%llu\n", (unsigned long long)stats_count(s));
		fputs("rblk_latency_us_sum", f);
		LBL("} ");
		fprintf(f, "%llu\n", (unsigned long long)s->lat_sum_us);
		fputs("rblk_latency_us_count", f);
		LBL("} ");
		fprintf(f, "%llu\n", (unsigned long long)stats_count(s));
#undef LBL
	}
	free(rows);
	host_qos_metrics(t, f);
	return 0;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = 0;
	log_debug("metrics: %s", msg);
}

static struct mconn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* busy: a request is being answered (not to be cut for a newcomer) */
static void set_deadline(struct metrics *m, struct MHD_Connection *c,
			 uint64_t deadline, bool busy)
{
	struct mconn *mc = conn_of(c);

	if (!mc)
		return;
	pthread_mutex_lock(&m->lock);
	mc->deadline = deadline;
	mc->busy = busy;
	pthread_mutex_unlock(&m->lock);
}

/*
 * Make room for newcomer, a connection past METRICS_MAX_CONNS: cut the
 * one that has waited longest for its next request, if that is
 * METRICS_EVICT_GRACE_MS or more (none: the newcomer stays, up to
 * libmicrohttpd's own limit of twice as many). A crowd of silent
 * clients that reconnect as soon as they are cut then cycles through
 * the table instead of filling it, and a scrape, which sends its
 * request at once, is served (at libmicrohttpd's limit it stops
 * accepting: a scrape waited in the backlog behind them, 1-3 s with 200
 * such clients). Under m->lock.
 */
static void make_room(struct metrics *m, struct mconn *newcomer)
{
	uint64_t now = now_ms();
	struct mconn *v = NULL;

	for (struct mconn *mc = m->conns; mc; mc = mc->next) {
		uint64_t since;

		if (mc == newcomer || mc->cut || mc->busy || !mc->deadline ||
		    mc->fd < 0)
			continue;
		since = mc->deadline - CTL_IO_TIMEOUT_S * 1000u;
		if (now < since + METRICS_EVICT_GRACE_MS)
			continue;
		if (!v || mc->deadline < v->deadline)
			v = mc;
	}
	if (!v)
		return;
	log_ratelimited(
	    LOG_WARN,
	    "metrics: %u connections; cutting the one that waited longest for a request",
	    m->nr_conns);
	shutdown(v->fd, SHUT_RDWR);
	v->cut = true;
}

/* libmicrohttpd's thread: a connection opened or closed (before its fd is). */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
			  enum MHD_ConnectionNotificationCode code)
{
	struct metrics *m = cls;
	struct mconn *mc = *ctx;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    c, MHD_CONNECTION_INFO_CONNECTION_FD);

		mc = calloc(1, sizeof(*mc));
		if (!mc)
			return; /* only its deadline is lost */
		mc->fd = ci ? ci->connect_fd : -1;
		mc->deadline = now_ms() + CTL_IO_TIMEOUT_S * 1000u;
		pthread_mutex_lock(&m->lock);
		mc->next = m->conns;
		if (mc->next)
			mc->next->pprev = &mc->next;
		mc->pprev = &m->conns;
		m->conns = mc;
		if (++m->nr_conns > METRICS_MAX_CONNS)
			make_room(m, mc);
		pthread_mutex_unlock(&m->lock);
		*ctx = mc;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && mc) {
		pthread_mutex_lock(&m->lock);
		*mc->pprev = mc->next;
		if (mc->next)
			mc->next->pprev = mc->pprev;
		m->nr_conns--;
		pthread_mutex_unlock(&m->lock);
		free(mc);
		*ctx = NULL;
	}
}

/* An answer went out: the next request has until its own deadline. */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_ctx,
			 enum MHD_RequestTerminationCode code)
{
	(void)req_ctx;
	(void)code;
	set_deadline(cls, c, now_ms() + CTL_IO_TIMEOUT_S * 1000u, false);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
			     char *body, size_t len, bool is_405)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp =
	    MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				METRICS_CONTENT_TYPE);
	if (is_405)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					"GET, HEAD");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* libmicrohttpd's thread: a whole request line and headers arrived. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_len, void **req_ctx)
{
	struct metrics *m = cls;
	unsigned int status = MHD_HTTP_OK;
	bool get = !strcmp(method, MHD_HTTP_METHOD_GET) ||
		   !strcmp(method, MHD_HTTP_METHOD_HEAD);
	char *body = NULL;
	size_t len = 0;
	FILE *f;

	(void)version;
	(void)upload;
	/*
	 * The first call comes with the headers; answering then would make
	 * libmicrohttpd close the connection (it stops reading the request),
	 * so answer on the next one, once the request, body dropped, is in:
	 * keep-alive works.
	 */
	if (!*req_ctx) {
		*req_ctx = m;
		set_deadline(m, c, now_ms() + CTL_IO_TIMEOUT_S * 1000u, true);
		return MHD_YES;
	}
	if (*upload_len) { /* a body we do not want: drop it */
		*upload_len = 0;
		return MHD_YES;
	}
	set_deadline(m, c, now_ms() + CTL_IO_TIMEOUT_S * 1000u, true);
	f = open_memstream(&body, &len);
	if (!f)
		return MHD_NO;
	if (!get) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		fputs("GET /metrics only\n", f);
	} else if (strcmp(url, "/metrics")) {
		status = MHD_HTTP_NOT_FOUND;
		fputs("only /metrics here\n", f);
	} else if (metrics_text(m->t, f)) {
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		fputs("out of memory\n", f);
	}
	if (fclose(f)) {
		free(body);
		return MHD_NO;
	}
	return reply(c, status, body, len, !get);
}

void metrics_expire(struct metrics *m)
{
	uint64_t now = now_ms();

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	for (struct mconn *mc = m->conns; mc; mc = mc->next) {
		if (!mc->deadline || now < mc->deadline || mc->fd < 0)
			continue;
		/*
		 * The fd is still libmicrohttpd's (CLOSED, which unlinks mc
		 * under this lock, comes before it closes the fd): shutting
		 * it down makes its loop see the end and close.
		 */
		log_debug(
		    "metrics: a client sent no whole request in %d s; closing it",
		    CTL_IO_TIMEOUT_S);
		shutdown(mc->fd, SHUT_RDWR);
		mc->deadline = 0;
	}
	pthread_mutex_unlock(&m->lock);
}

/* A listening socket for url (tcp://HOST:PORT or a bare port). */
static int listen_on(const char *url)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai;
	struct rblk_url u;
	char port[8];
	int fd, ret, one = 1;

	if (rblk_url_parse(url, 0, &u, NULL, 0))
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", u.port);
	ret = getaddrinfo(u.host, port, &hints, &ai);
	if (ret) {
		log_err("metrics %s: %s", url, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		ret = -errno;
		goto out_free;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		ret = -errno;
		close(fd);
		goto out_free;
	}
	ret = fd;
out_free:
	freeaddrinfo(ai);
	return ret;
}

int metrics_open(struct target *t, const char *url, struct metrics **out)
{
	struct metrics *m;
	int fd;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->t = t;
	pthread_mutex_init(&m->lock, NULL);
	fd = listen_on(url);
	if (fd < 0) {
		log_err("metrics %s: %s", url, strerror(-fd));
		goto out_free;
	}
	m->d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, on_request, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
	    m, /* first: all its lines */
	    MHD_OPTION_LISTEN_SOCKET, fd,
	    /* past METRICS_MAX_CONNS make_room() cuts one: never reached */
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(2 * METRICS_MAX_CONNS),
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_IDLE_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_MEM_LIMIT,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
	if (!m->d) {
		log_err("metrics %s: libmicrohttpd did not start", url);
		close(fd);
		fd = -EIO;
		goto out_free;
	}
	log_info("metrics on %s/metrics", url);
	*out = m;
	return 0;

out_free:
	pthread_mutex_destroy(&m->lock);
	free(m);
	return fd;
}

void metrics_close(struct metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d); /* closes the listening socket too */
	pthread_mutex_destroy(&m->lock);
	free(m);
}
