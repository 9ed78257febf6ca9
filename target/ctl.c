/* SPDX-License-Identifier: MIT */
/*
 * The control socket of rblk-target, and the Prometheus metrics endpoint.
 * Both are served by the control thread (started by ctl_open()), one
 * request per connection and one connection at a time; docs/CONTROL.md
 * describes the protocol.
 *
 * Request: one line, the command and its arguments as the command line
 * gives them, separated by spaces; a backslash makes the next character
 * literal (so a path may hold spaces). Response: a first line "ok" or
 * "error: MESSAGE", then the body (text, or JSON with -o json), then the
 * server closes the connection.
 *
 * Threads: the control thread is the only one that adds and removes
 * exports, and the reaper that closes removed exports (export_put()). It
 * copies what it shows under exports_lock and each worker's conns_lock
 * (counters with relaxed loads, stats.h) and formats after unlocking.
 * The main thread only accepts data connections, so no control or
 * metrics client can delay a login. A client gets IO_TIMEOUT_S in all to
 * send its request, and again to take the response (non-blocking socket,
 * poll against an absolute deadline): a stalled or trickling client holds
 * the control thread that long at most. The control socket is mode 0600
 * by default, the metrics endpoint listens on loopback unless told
 * otherwise.
 */
#include "target.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/url.h"
#include "../common/util.h"

#define REQ_MAX 8192
#define MAX_ARGS 32
#define IO_TIMEOUT_S 2
#define HTTP_HDR_MAX 4096
#define REMOVE_WAIT_S 20 /* remove-export --wait; below CLIENT_TIMEOUT_S */
#define CLIENT_TIMEOUT_S 30

struct ctl {
	struct target *t;
	int unix_fd; /* -1: none */
	int metrics_fd; /* -1: none */
	int epfd; /* the control thread's */
	int stop_fd; /* eventfd: end the thread */
	int reap_fd; /* eventfd: a removed export waits to be closed */
	pthread_t thread;
	bool started;
	char path[108]; /* unix socket we created, unlinked at close */
	/* their addresses are the epoll data */
	char unix_tag, metrics_tag, stop_tag, reap_tag;
};

/* ---- JSON and text helpers ---------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

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

static const char *conn_state_str(enum tconn_state s)
{
	switch (s) {
	case TCONN_LOGIN:
		return "login";
	case TCONN_LIVE:
		return "live";
	case TCONN_CLOSING:
		return "closing";
	}
	return "?";
}

static void export_stats(const struct export *e, struct iostats_snap *snap)
{
	memset(snap, 0, sizeof(*snap));
	for (unsigned int i = 0; i < e->nr_wstats; i++)
		stats_add(snap, &e->wstats[i]);
}

static void stats_json(FILE *f, const struct iostats_snap *s)
{
	fputs("{\"ops\":{", f);
	for (int i = 0; i < STAT_NR_OPS; i++)
		fprintf(f, "%s\"%s\":%llu", i ? "," : "",
			stat_op_name((enum stat_op)i),
			(unsigned long long)s->ops[i]);
	fprintf(f,
		"},\"bytes_read\":%llu,\"bytes_written\":%llu,\"errors\":%llu,"
		"\"latency_us\":{\"count\":%llu,\"sum\":%llu,\"p50\":%llu,\"p99\":%llu,\"buckets\":[",
		(unsigned long long)s->bytes_read,
		(unsigned long long)s->bytes_written,
		(unsigned long long)s->errors,
		(unsigned long long)stats_count(s),
		(unsigned long long)s->lat_sum_us,
		(unsigned long long)stats_quantile_us(s, 0.50),
		(unsigned long long)stats_quantile_us(s, 0.99));
	for (int i = 0; i < STAT_LAT_BUCKETS; i++)
		fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)s->lat[i]);
	fputs("]}}", f);
}

static void stats_text(FILE *f, const struct iostats_snap *s)
{
	fputs("  ops:", f);
	for (int i = 0; i < STAT_NR_OPS; i++)
		fprintf(f, " %s %llu", stat_op_name((enum stat_op)i),
			(unsigned long long)s->ops[i]);
	fprintf(f, "\n  bytes: read %llu written %llu\n  errors: %llu\n",
		(unsigned long long)s->bytes_read,
		(unsigned long long)s->bytes_written,
		(unsigned long long)s->errors);
	fprintf(f, "  latency: %llu commands, p50 < %llu us, p99 < %llu us",
		(unsigned long long)stats_count(s),
		(unsigned long long)stats_quantile_us(s, 0.50),
		(unsigned long long)stats_quantile_us(s, 0.99));
	if (stats_count(s))
		fprintf(f, ", mean %llu us",
			(unsigned long long)(s->lat_sum_us / stats_count(s)));
	fputc('\n', f);
}

/* ---- requests ---------------------------------------------------------- */

struct req {
	char *argv[MAX_ARGS];
	int argc;
	bool json;
	FILE *out; /* the body */
	char err[512]; /* set: the request failed */
};

static int req_fail(struct req *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int req_fail(struct req *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* Split line in place: spaces separate, backslash escapes. */
static int split_line(char *line, struct req *r)
{
	char *in = line, *out = line;

	r->argc = 0;
	for (;;) {
		while (*in == ' ' || *in == '\t')
			in++;
		if (!*in)
			return 0;
		if (r->argc == MAX_ARGS)
			return req_fail(r, "more than %d arguments", MAX_ARGS);
		r->argv[r->argc++] = out;
		while (*in && *in != ' ' && *in != '\t') {
			if (*in == '\\' && in[1])
				in++;
			*out++ = *in++;
		}
		if (*in)
			in++;
		*out++ = 0;
	}
}

/*
 * Options of a command. has_arg: the option takes a value ("--bs 4096",
 * "--bs=4096"). val receives it, or "1" for a flag.
 */
struct opt {
	const char *name; /* long name without "--" */
	char short_name; /* 0: none */
	bool has_arg;
	const char *val;
};

/*
 * Parse r's arguments after the command: options from opts (and -o/--output
 * FORMAT, which every command takes), positional ones into pos. Returns the
 * number of positional arguments, or -1 with r->err set.
 */
static int parse_opts(struct req *r, struct opt *opts, const char **pos,
		      int max_pos, int min_pos)
{
	int npos = 0;

	for (int i = 1; i < r->argc; i++) {
		char *a = r->argv[i], *val = NULL;
		struct opt *o = NULL;

		if (a[0] != '-' || !a[1]) {
			if (npos == max_pos)
				return req_fail(r, "%s: unexpected argument '%s'",
						r->argv[0], a);
			pos[npos++] = a;
			continue;
		}
		if (!strcmp(a, "-o") || !strncmp(a, "--output", 8)) {
			val = a[1] == 'o' ? NULL : strchr(a, '=');
			if (val)
				val++;
			else if (i + 1 < r->argc)
				val = r->argv[++i];
			if (!val || (strcmp(val, "json") && strcmp(val, "text")))
				return req_fail(r, "-o: want json or text");
			r->json = !strcmp(val, "json");
			continue;
		}
		for (struct opt *p = opts; p && p->name; p++) {
			size_t n = strlen(p->name);

			if ((a[1] == p->short_name && !a[2]) ||
			    (a[1] == '-' && !strncmp(a + 2, p->name, n) &&
			     (!a[2 + n] || a[2 + n] == '='))) {
				o = p;
				val = a[1] == '-' && a[2 + n] == '=' ?
					      a + 3 + n : NULL;
				break;
			}
		}
		if (!o)
			return req_fail(r, "%s: unknown option '%s'", r->argv[0],
					a);
		if (o->has_arg) {
			if (!val && i + 1 < r->argc)
				val = r->argv[++i];
			if (!val)
				return req_fail(r, "%s: %s needs a value",
						r->argv[0], a);
			o->val = val;
		} else {
			if (val)
				return req_fail(r, "%s: %s takes no value",
						r->argv[0], a);
			o->val = "1";
		}
	}
	if (npos < min_pos)
		return req_fail(r, "%s: missing argument (see 'help')",
				r->argv[0]);
	return npos;
}

static struct export *find_locked(struct target *t, const char *name)
{
	for (struct export *e = t->exports; e; e = e->next)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

/* What is shown of an export, copied under exports_lock. */
struct exp_row {
	char name[RBLK_NAME_MAX];
	char path[4096];
	uint64_t size;
	uint32_t block_size;
	bool read_only;
	unsigned int sessions;
	struct iostats_snap stats;
};

/*
 * Copy the exports (only the one named only, when given) with their
 * statistics. NULL with r->err set when out of memory or only is unknown.
 */
static struct exp_row *exports_copy(struct target *t, struct req *r,
				    const char *only, unsigned int *n)
{
	struct exp_row *rows;
	unsigned int max;

	/* only this thread adds and removes: the count holds until we copy */
	pthread_mutex_lock(&t->exports_lock);
	max = t->nr_exports;
	pthread_mutex_unlock(&t->exports_lock);
	*n = 0;
	rows = calloc(max ? max : 1, sizeof(*rows));
	if (!rows) {
		req_fail(r, "out of memory");
		return NULL;
	}
	pthread_mutex_lock(&t->exports_lock);
	for (struct export *e = t->exports; e && *n < max; e = e->next) {
		struct exp_row *x = &rows[*n];

		if (only && strcmp(e->name, only))
			continue;
		snprintf(x->name, sizeof(x->name), "%s", e->name);
		snprintf(x->path, sizeof(x->path), "%s", e->path);
		x->size = e->size;
		x->block_size = e->block_size;
		x->read_only = e->read_only;
		x->sessions = atomic_load(&e->sessions);
		export_stats(e, &x->stats);
		(*n)++;
	}
	pthread_mutex_unlock(&t->exports_lock);
	if (only && !*n) {
		free(rows);
		req_fail(r, "no export named '%s'", only);
		return NULL;
	}
	return rows;
}

static void cmd_list_exports(struct target *t, struct req *r)
{
	FILE *f = r->out;
	struct exp_row *rows;
	unsigned int n;

	if (parse_opts(r, NULL, NULL, 0, 0) < 0)
		return;
	rows = exports_copy(t, r, NULL, &n);
	if (!rows)
		return;
	if (r->json)
		fputs("{\"exports\":[", f);
	else
		fprintf(f, "%-20s %-40s %14s %6s %-3s %s\n", "NAME", "PATH",
			"SIZE", "BS", "RO", "SESSIONS");
	for (unsigned int i = 0; i < n; i++) {
		const struct exp_row *e = &rows[i];

		if (r->json) {
			fputs(i ? ",{\"name\":" : "{\"name\":", f);
			json_str(f, e->name);
			fputs(",\"path\":", f);
			json_str(f, e->path);
			fprintf(f,
				",\"size\":%llu,\"block_size\":%u,\"read_only\":%s,\"sessions\":%u}",
				(unsigned long long)e->size, e->block_size,
				e->read_only ? "true" : "false", e->sessions);
		} else {
			fprintf(f, "%-20s %-40s %14llu %6u %-3s %u\n", e->name,
				e->path, (unsigned long long)e->size,
				e->block_size, e->read_only ? "yes" : "no",
				e->sessions);
		}
	}
	free(rows);
	if (r->json)
		fputs("]}\n", f);
}

/* What is shown of a session, copied under its worker's conns_lock. */
struct sess_row {
	uint64_t id;
	char peer[96];
	char host[RBLK_NAME_MAX];
	char exp[RBLK_NAME_MAX];
	uint16_t queue_id, queue_depth;
	unsigned int worker;
	enum tconn_state state;
	uint64_t login_ms;
	struct iostats_snap stats;
};

/*
 * Copy every session (connection past its login that found an export) of
 * every worker, or only those of export only. NULL with r->err set when
 * out of memory; *n may be 0.
 */
static struct sess_row *sessions_copy(struct target *t, struct req *r,
				      const char *only, unsigned int *n)
{
	struct sess_row *rows = NULL;
	unsigned int cap = 0;

	*n = 0;
	for (unsigned int i = 0; i < t->nr_workers; i++) {
		struct worker *w = &t->workers[i];

		pthread_mutex_lock(&w->conns_lock);
		for (struct tconn *c = w->conns; c; c = c->next) {
			struct sess_row *x;

			/*
			 * state changes under conns_lock, after the login
			 * fields are set: in LOGIN, exp and lim may still
			 * be being written.
			 */
			if (c->state == TCONN_LOGIN || !c->exp ||
			    (only && strcmp(c->exp->name, only)))
				continue;
			if (*n == cap) {
				unsigned int ncap = cap ? 2 * cap : 64;
				void *p = realloc(rows, ncap * sizeof(*rows));

				if (!p) {
					pthread_mutex_unlock(&w->conns_lock);
					free(rows);
					req_fail(r, "out of memory");
					return NULL;
				}
				rows = p;
				cap = ncap;
			}
			x = &rows[(*n)++];
			memset(x, 0, sizeof(*x));
			x->id = c->id;
			snprintf(x->peer, sizeof(x->peer), "%s", c->peer);
			snprintf(x->host, sizeof(x->host), "%s", c->host);
			snprintf(x->exp, sizeof(x->exp), "%s", c->exp->name);
			x->queue_id = c->queue_id;
			x->queue_depth = c->lim.queue_depth;
			x->worker = w->index;
			x->state = c->state;
			x->login_ms = c->login_ms;
			stats_add(&x->stats, &c->stats);
		}
		pthread_mutex_unlock(&w->conns_lock);
	}
	if (!rows)
		rows = malloc(sizeof(*rows)); /* an empty list, not a failure */
	if (!rows)
		req_fail(r, "out of memory");
	return rows;
}

static void cmd_list_sessions(struct target *t, struct req *r)
{
	struct opt opts[] = { { "export", 'e', true, NULL }, { 0 } };
	struct sess_row *rows;
	FILE *f = r->out;
	unsigned int n;

	if (parse_opts(r, opts, NULL, 0, 0) < 0)
		return;
	rows = sessions_copy(t, r, opts[0].val, &n);
	if (!rows)
		return;
	if (r->json)
		fputs("{\"sessions\":[", f);
	else
		fprintf(f, "%-6s %-24s %-20s %-20s %5s %5s %6s %-8s %s\n",
			"ID", "PEER", "HOST", "EXPORT", "QUEUE", "QD", "WORKER",
			"STATE", "UPTIME_S");
	for (unsigned int i = 0; i < n; i++) {
		const struct sess_row *c = &rows[i];
		uint64_t up = c->login_ms ? (now_ms() - c->login_ms) / 1000u :
					    0;

		if (r->json) {
			fprintf(f, "%s{\"id\":%llu,\"peer\":", i ? "," : "",
				(unsigned long long)c->id);
			json_str(f, c->peer);
			fputs(",\"host\":", f);
			json_str(f, c->host);
			fputs(",\"export\":", f);
			json_str(f, c->exp);
			fprintf(f,
				",\"queue\":%u,\"queue_depth\":%u,\"worker\":%u,\"state\":\"%s\",\"uptime_s\":%llu}",
				c->queue_id, c->queue_depth, c->worker,
				conn_state_str(c->state),
				(unsigned long long)up);
		} else {
			fprintf(f,
				"%-6llu %-24s %-20s %-20s %5u %5u %6u %-8s %llu\n",
				(unsigned long long)c->id, c->peer,
				c->host[0] ? c->host : "-", c->exp, c->queue_id,
				c->queue_depth, c->worker,
				conn_state_str(c->state),
				(unsigned long long)up);
		}
	}
	free(rows);
	if (r->json)
		fputs("]}\n", f);
}

static void cmd_add_export(struct target *t, struct req *r)
{
	struct opt opts[] = {
		{ "read-only", 'r', false, NULL },
		{ "block-size", 'b', true, NULL },
		{ "allow", 'a', true, NULL },
		{ "allow-ro", 0, true, NULL },
		{ 0 },
	};
	const char *pos[2];
	struct cfg_export ce = { 0 };
	struct export *e, **pp;
	char why[400];
	unsigned int n;
	uint64_t bs = 0;

	if (parse_opts(r, opts, pos, 2, 2) < 0)
		return;
	if (opts[1].val && parse_size(opts[1].val, &bs)) {
		req_fail(r, "add-export: bad block size '%s'", opts[1].val);
		return;
	}
	if (strlen(pos[0]) >= sizeof(ce.name) ||
	    strlen(pos[1]) >= sizeof(ce.path)) {
		req_fail(r, "add-export: name or path too long");
		return;
	}
	if (pos[1][0] != '/' && strncmp(pos[1], "ram:", 4)) {
		/* the target's working directory is not the client's */
		req_fail(r, "add-export: '%s': give an absolute path or ram:SIZE",
			 pos[1]);
		return;
	}
	snprintf(ce.name, sizeof(ce.name), "%s", pos[0]);
	snprintf(ce.path, sizeof(ce.path), "%s", pos[1]);
	ce.read_only = opts[0].val != NULL;
	ce.block_size = bs > UINT32_MAX ? 1 : (uint32_t)bs; /* 1: refused */
	if (cfg_export_set_access(&t->cfg, &ce, opts[2].val, opts[3].val,
				  r->err, sizeof(r->err)) ||
	    cfg_check_export(&ce, r->err, sizeof(r->err)))
		return;
	pthread_mutex_lock(&t->exports_lock);
	e = find_locked(t, ce.name);
	n = t->nr_exports;
	pthread_mutex_unlock(&t->exports_lock);
	if (e) {
		req_fail(r, "export '%s' exists", ce.name);
		return;
	}
	if (n >= CFG_MAX_EXPORTS) {
		req_fail(r, "add-export: already %u exports, the most one target serves",
			 n);
		return;
	}
	/* opening may take a moment (files, mmap); not under the lock */
	e = export_create(&ce, t->nr_workers, why, sizeof(why));
	if (!e) {
		req_fail(r, "cannot open export '%s': %s", ce.name, why);
		return;
	}
	pthread_mutex_lock(&t->exports_lock);
	/*
	 * Only this thread adds, so the name is still free. At the tail:
	 * discovery pages by index, and earlier pages stay valid.
	 */
	for (pp = &t->exports; *pp; pp = &(*pp)->next)
		;
	*pp = e;
	t->nr_exports++;
	pthread_mutex_unlock(&t->exports_lock);
	log_info("ctl: added export %s", e->name);
	if (r->json) {
		fputs("{\"added\":", r->out);
		json_str(r->out, e->name);
		fprintf(r->out, ",\"size\":%llu,\"block_size\":%u}\n",
			(unsigned long long)e->size, e->block_size);
	} else {
		fprintf(r->out, "added export %s (%llu bytes, block size %u)\n",
			e->name, (unsigned long long)e->size, e->block_size);
	}
}

static void cmd_remove_export(struct target *t, struct req *r)
{
	struct opt opts[] = {
		{ "force", 'f', false, NULL },
		{ "wait", 'w', false, NULL },
		{ 0 },
	};
	bool wait, released;
	struct export **pp, *e;
	const char *pos[1];
	unsigned int sessions, refs, left = 0;
	char name[RBLK_NAME_MAX];

	if (parse_opts(r, opts, pos, 1, 1) < 0)
		return;
	wait = opts[1].val != NULL;
	pthread_mutex_lock(&t->exports_lock);
	for (pp = &t->exports; (e = *pp); pp = &e->next)
		if (!strcmp(e->name, pos[0]))
			break;
	if (!e) {
		pthread_mutex_unlock(&t->exports_lock);
		req_fail(r, "no export named '%s'", pos[0]);
		return;
	}
	/*
	 * Under the lock no login can take a new reference, so refs says
	 * exactly whether a connection holds e (logged in, logging in, or
	 * draining its last I/O).
	 */
	sessions = atomic_load(&e->sessions);
	refs = atomic_load(&e->refs);
	if (refs > 1 && !opts[0].val) {
		pthread_mutex_unlock(&t->exports_lock);
		req_fail(r, "export '%s' is in use by %u session%s (%u connection%s); --force closes them",
			 e->name, sessions, sessions == 1 ? "" : "s", refs - 1,
			 refs == 2 ? "" : "s");
		return;
	}
	*pp = e->next;
	t->nr_exports--;
	atomic_store(&e->removed, true);
	pthread_mutex_unlock(&t->exports_lock);
	snprintf(name, sizeof(name), "%s", e->name);
	log_info("ctl: removed export %s%s", name,
		 refs > 1 ? "; closing its sessions" : "");
	if (refs > 1) {
		uint64_t deadline = now_ms() + REMOVE_WAIT_S * 1000u;

		workers_check_removed(t);
		/*
		 * --wait: until only the list's reference (still ours) is
		 * left. The workers drop theirs when their connections are
		 * freed, after the last backend I/O.
		 */
		while (wait && atomic_load(&e->refs) > 1 && now_ms() < deadline)
			usleep(20 * 1000);
		left = atomic_load(&e->refs) - 1;
	}
	released = left == 0;
	/*
	 * The list's reference. On this thread the last put closes e at
	 * once, so with released the backing store is closed when we answer.
	 */
	export_put(e);
	if (wait && !released) {
		req_fail(r, "removed export %s, but %u connection%s still closing after %d s",
			 name, left, left == 1 ? " is" : "s are", REMOVE_WAIT_S);
		return;
	}
	if (r->json) {
		fputs("{\"removed\":", r->out);
		json_str(r->out, name);
		fprintf(r->out, ",\"sessions\":%u,\"released\":%s}\n",
			sessions, released ? "true" : "false");
	} else if (!sessions && released) {
		fprintf(r->out, "removed export %s\n", name);
	} else if (released) {
		fprintf(r->out, "removed export %s (%u session%s closed)\n",
			name, sessions, sessions == 1 ? "" : "s");
	} else {
		fprintf(r->out,
			"removed export %s (closing %u session%s; --wait waits for them)\n",
			name, sessions, sessions == 1 ? "" : "s");
	}
}

/*
 * set-hosts EXPORT [--allow H1,H2] [--allow-ro H3] | --open: replace an
 * export's access list at run time (--open: no list, every host). The new
 * definition is a fresh copy published with an atomic store; logins read
 * e->cfg without a lock, so the old copy is retired, not freed, until the
 * export goes. Sessions already logged in keep the access they were
 * granted; the reply says how many there are.
 */
static void cmd_set_hosts(struct target *t, struct req *r)
{
	struct opt opts[] = {
		{ "allow", 'a', true, NULL },
		{ "allow-ro", 0, true, NULL },
		{ "open", 0, false, NULL },
		{ 0 },
	};
	struct cfg_retired *old = NULL;
	struct cfg_export *copy = NULL;
	const char *pos[1];
	struct export *e;
	unsigned int sessions = 0;
	bool restricted = false;

	if (parse_opts(r, opts, pos, 1, 1) < 0)
		return;
	if (!opts[0].val == !opts[2].val && !opts[1].val == !opts[2].val) {
		req_fail(r, "set-hosts: give --allow and/or --allow-ro, or --open (every host may log in)");
		return;
	}
	if (opts[2].val && (opts[0].val || opts[1].val)) {
		req_fail(r, "set-hosts: --open replaces the lists; give it alone");
		return;
	}
	copy = malloc(sizeof(*copy));
	old = malloc(sizeof(*old));
	if (!copy || !old) {
		req_fail(r, "set-hosts: out of memory");
		goto out_free;
	}
	pthread_mutex_lock(&t->exports_lock);
	e = find_locked(t, pos[0]);
	if (!e) {
		pthread_mutex_unlock(&t->exports_lock);
		req_fail(r, "no export named '%s'", pos[0]);
		goto out_free;
	}
	memcpy(copy, e->cfg, sizeof(*copy));
	if (cfg_export_set_access(&t->cfg, copy,
				  opts[2].val ? "any" : opts[0].val, opts[1].val,
				  r->err, sizeof(r->err))) {
		pthread_mutex_unlock(&t->exports_lock);
		goto out_free; /* r->err says why */
	}
	/* only this thread replaces definitions: e->cfg is ours to retire */
	old->cfg = e->cfg;
	old->next = e->retired;
	e->retired = old;
	atomic_store(&e->cfg, copy);
	sessions = atomic_load(&e->sessions);
	restricted = copy->restricted;
	pthread_mutex_unlock(&t->exports_lock);
	log_info("ctl: export %s: access list set (allow '%s', allow_ro '%s')",
		 pos[0], opts[0].val ? opts[0].val : "",
		 opts[1].val ? opts[1].val : "");
	if (r->json) {
		fputs("{\"export\":", r->out);
		json_str(r->out, pos[0]);
		fprintf(r->out, ",\"restricted\":%s,\"sessions\":%u}\n",
			restricted ? "true" : "false", sessions);
	} else {
		fprintf(r->out,
			"export %s: %s; applies to new logins (%u session%s keep their access)\n",
			pos[0],
			restricted ? "access list replaced" :
				     "open to every host",
			sessions, sessions == 1 ? "" : "s");
	}
	return;

out_free:
	free(copy);
	free(old);
}

static void cmd_stats(struct target *t, struct req *r)
{
	const char *pos[1] = { NULL };
	struct exp_row *ex;
	struct sess_row *ss;
	unsigned int nex, nss;
	FILE *f = r->out;

	if (parse_opts(r, NULL, pos, 1, 0) < 0)
		return;
	ex = exports_copy(t, r, pos[0], &nex);
	if (!ex)
		return;
	ss = sessions_copy(t, r, pos[0], &nss);
	if (!ss) {
		free(ex);
		return;
	}
	if (r->json)
		fputs("{\"exports\":[", f);
	for (unsigned int i = 0; i < nex; i++) {
		const struct exp_row *e = &ex[i];

		if (r->json) {
			fputs(i ? ",{\"name\":" : "{\"name\":", f);
			json_str(f, e->name);
			fprintf(f, ",\"sessions\":%u,\"stats\":", e->sessions);
			stats_json(f, &e->stats);
			fputc('}', f);
		} else {
			fprintf(f, "export %s (%u session%s)\n", e->name,
				e->sessions, e->sessions == 1 ? "" : "s");
			stats_text(f, &e->stats);
		}
	}
	if (r->json)
		fputs("],\"sessions\":[", f);
	for (unsigned int i = 0; i < nss; i++) {
		const struct sess_row *c = &ss[i];

		if (r->json) {
			fprintf(f, "%s{\"id\":%llu,\"export\":", i ? "," : "",
				(unsigned long long)c->id);
			json_str(f, c->exp);
			fputs(",\"host\":", f);
			json_str(f, c->host);
			fputs(",\"stats\":", f);
			stats_json(f, &c->stats);
			fputc('}', f);
		} else {
			fprintf(f, "session %llu (export %s, host %s, %s)\n",
				(unsigned long long)c->id, c->exp,
				c->host[0] ? c->host : "-", c->peer);
			stats_text(f, &c->stats);
		}
	}
	if (r->json)
		fputs("]}\n", f);
	free(ex);
	free(ss);
}

static void cmd_help(struct target *t, struct req *r)
{
	(void)t;
	if (parse_opts(r, NULL, NULL, 0, 0) < 0)
		return;
	fputs("commands (each takes -o json):\n"
	      "  list-exports\n"
	      "  list-sessions [--export NAME]\n"
	      "  add-export NAME PATH [--read-only] [--block-size N] [--allow H,..] [--allow-ro H,..]\n"
	      "  remove-export NAME [--force [--wait]]\n"
	      "  set-hosts EXPORT [--allow H1,H2] [--allow-ro H3] | --open\n"
	      "  stats [EXPORT]\n",
	      r->out);
}

static const struct {
	const char *name;
	void (*fn)(struct target *t, struct req *r);
} commands[] = {
	{ "help", cmd_help },
	{ "list-exports", cmd_list_exports },
	{ "list-sessions", cmd_list_sessions },
	{ "add-export", cmd_add_export },
	{ "remove-export", cmd_remove_export },
	{ "set-hosts", cmd_set_hosts },
	{ "stats", cmd_stats },
};

/* Run one request line; the response (status line and body) goes to out. */
static void ctl_run(struct target *t, char *line, FILE *out)
{
	struct req r = { 0 };
	char *body = NULL;
	size_t body_len = 0;

	r.out = open_memstream(&body, &body_len);
	if (!r.out) {
		fputs("error: out of memory\n", out);
		return;
	}
	if (!split_line(line, &r) && r.argc == 0)
		req_fail(&r, "empty request (try 'help')");
	if (!r.err[0]) {
		size_t i;

		for (i = 0; i < ARRAY_SIZE(commands); i++)
			if (!strcmp(commands[i].name, r.argv[0]))
				break;
		if (i == ARRAY_SIZE(commands))
			req_fail(&r, "unknown command '%s' (try 'help')",
				 r.argv[0]);
		else
			commands[i].fn(t, &r);
	}
	fclose(r.out);
	if (r.err[0]) {
		fprintf(out, "error: %s\n", r.err);
		log_debug("ctl: '%s' failed: %s", r.argc ? r.argv[0] : "",
			  r.err);
	} else {
		fputs("ok\n", out);
		fwrite(body, 1, body_len, out);
	}
	free(body);
}

/* ---- metrics ----------------------------------------------------------- */

static int metrics_text(struct target *t, FILE *f)
{
	struct exp_row *rows;
	struct req r = { 0 };
	unsigned int n;

	rows = exports_copy(t, &r, NULL, &n);
	if (!rows)
		return -1;

	fputs("# HELP rblk_ops_total Commands answered, by export and opcode.\n"
	      "# TYPE rblk_ops_total counter\n"
	      "# HELP rblk_bytes_total Bytes read or written, by export.\n"
	      "# TYPE rblk_bytes_total counter\n"
	      "# HELP rblk_errors_total Commands answered with an error status.\n"
	      "# TYPE rblk_errors_total counter\n"
	      "# HELP rblk_sessions Sessions logged in, by export.\n"
	      "# TYPE rblk_sessions gauge\n"
	      "# HELP rblk_latency_us Command receipt to response posted, microseconds.\n"
	      "# TYPE rblk_latency_us histogram\n",
	      f);
	for (unsigned int k = 0; k < n; k++) {
		const struct exp_row *e = &rows[k];
		const struct iostats_snap *s = &e->stats;
		uint64_t cum = 0;

#define LBL(extra)                       \
	do {                             \
		fputs("{export=", f);    \
		prom_str(f, e->name);    \
		fputs(extra, f);         \
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
		fputs("rblk_sessions", f);
		LBL("} ");
		fprintf(f, "%u\n", e->sessions);
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
	return 0;
}

/* ---- sockets ----------------------------------------------------------- */

/* Wait until fd is ready for events, or deadline (now_ms()) passes. */
static int wait_until(int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		uint64_t now = now_ms();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)MIN(deadline - now, 60000u));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			return 0;
	}
}

/* Write all of p to the non-blocking fd by deadline; -1 when not. */
static int write_by(int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			if (wait_until(fd, POLLOUT, deadline))
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Read from the non-blocking fd into buf until a line end (end "\n") or a
 * blank line (end "\r\n\r\n" or "\n\n" for HTTP), EOF or deadline.
 * Returns the length, -1 (timeout, error) or -2 (longer than cap - 1).
 */
static ssize_t read_request(int fd, char *buf, size_t cap, bool http,
			    uint64_t deadline)
{
	size_t len = 0;

	buf[0] = 0;
	for (;;) {
		ssize_t n;

		if (len == cap - 1)
			return -2;
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (wait_until(fd, POLLIN, deadline))
				return -1;
			continue;
		}
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		if (!http && memchr(buf, '\n', len))
			break;
		if (http && (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n")))
			break;
	}
	buf[len] = 0;
	return (ssize_t)len;
}

/*
 * Take one connection from lfd (non-blocking). -1 when none; out of file
 * descriptors is logged and slowed down, since the pending connection
 * keeps lfd readable.
 */
static int accept_one(int lfd, const char *what)
{
	static uint64_t last_warn;
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
	    errno == ENOMEM) {
		if (now_ms() - last_warn > 10000) {
			log_warn("%s: accept: %s; retrying", what,
				 strerror(errno));
			last_warn = now_ms();
		}
		usleep(100 * 1000);
	}
	return -1;
}

static void serve_ctl(struct ctl *ctl)
{
	int fd = accept_one(ctl->unix_fd, "control socket");
	char *req, *resp = NULL, *nl;
	size_t resp_len = 0;
	ssize_t len;
	FILE *out;

	if (fd < 0)
		return;
	req = malloc(REQ_MAX);
	len = req ? read_request(fd, req, REQ_MAX, false,
				 now_ms() + IO_TIMEOUT_S * 1000u) :
		    -1;
	if (len < 0) {
		char msg[128];
		int n = snprintf(msg, sizeof(msg), "error: %s\n",
				 len == -2 ? "request too long" :
					     "request unreadable or not in time");

		if (write_by(fd, msg, (size_t)n, now_ms() + IO_TIMEOUT_S * 1000u))
			log_debug("ctl: client went away");
		goto out;
	}
	nl = strchr(req, '\n');
	if (nl)
		*nl = 0;
	out = open_memstream(&resp, &resp_len);
	if (!out)
		goto out;
	ctl_run(ctl->t, req, out);
	fclose(out);
	if (write_by(fd, resp, resp_len, now_ms() + IO_TIMEOUT_S * 1000u))
		log_debug("ctl: client went away before the response");
out:
	free(resp);
	free(req);
	close(fd);
}

static void serve_metrics(struct ctl *ctl)
{
	int fd = accept_one(ctl->metrics_fd, "metrics");
	char req[HTTP_HDR_MAX + 1], hdr[256], *body = NULL;
	size_t body_len = 0;
	const char *status = "200 OK";
	uint64_t deadline;
	ssize_t len;
	FILE *out;
	int n;

	if (fd < 0)
		return;
	deadline = now_ms() + IO_TIMEOUT_S * 1000u;
	len = read_request(fd, req, sizeof(req), true, deadline);
	if (len == -1)
		goto out;
	out = open_memstream(&body, &body_len);
	if (!out)
		goto out;
	if (len == -2) {
		status = "431 Request Header Fields Too Large";
		fprintf(out, "request headers over %d bytes\n", HTTP_HDR_MAX);
	} else if (!strncmp(req, "GET /metrics ", 13) ||
		   !strncmp(req, "GET /metrics?", 13) ||
		   !strncmp(req, "GET /metrics\r", 13)) {
		if (metrics_text(ctl->t, out)) {
			status = "500 Internal Server Error";
			fputs("out of memory\n", out);
		}
	} else if (!strncmp(req, "GET ", 4)) {
		status = "404 Not Found";
		fputs("only /metrics here\n", out);
	} else {
		status = "405 Method Not Allowed";
		fputs("GET /metrics only\n", out);
	}
	fclose(out);
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		     status, body_len);
	/* a fresh deadline: the response may be long */
	deadline = now_ms() + IO_TIMEOUT_S * 1000u;
	if (!write_by(fd, hdr, (size_t)n, deadline))
		write_by(fd, body, body_len, deadline);
out:
	free(body);
	close(fd);
}

/*
 * The control thread: one connection per event, so that a stop request
 * or a removed export to close is never queued behind many clients.
 */
static void *ctl_thread(void *arg)
{
	struct ctl *ctl = arg;
	uint64_t v;

	export_reaper_set(ctl->reap_fd);
	for (;;) {
		struct epoll_event evs[4];
		int n = epoll_wait(ctl->epfd, evs, 4, -1);

		if (n < 0 && errno != EINTR) {
			log_err("ctl: epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &ctl->stop_tag)
				goto out;
			if (p == &ctl->reap_tag) {
				if (read(ctl->reap_fd, &v, sizeof(v)) < 0 &&
				    errno != EAGAIN)
					log_warn("ctl: read eventfd: %s",
						 strerror(errno));
				export_reap();
			} else if (p == &ctl->unix_tag) {
				serve_ctl(ctl);
			} else if (p == &ctl->metrics_tag) {
				serve_metrics(ctl);
			}
		}
	}
out:
	/* from now on the thread that drops the last reference closes */
	export_reaper_set(-1);
	export_reap();
	return NULL;
}

static int watch(struct ctl *ctl, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/*
 * Is path a live control socket? 1 yes, 0 stale socket (removed), -errno
 * when it is something else or cannot be checked.
 */
static int check_existing(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, ret;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (!ret)
		return 1;
	if (errno != ECONNREFUSED)
		return -errno;
	return unlink(path) ? -errno : 0;
}

static int open_unix(struct ctl *ctl, const struct cfg_target *cfg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = cfg->ctl_socket;
	mode_t old;
	int fd, ret;

	if (!cfg->ctl_socket_set && !strcmp(path, CFG_DEFAULT_CTL_SOCKET) &&
	    mkdir("/run/rblk", 0755) && errno != EEXIST)
		return -errno;
	ret = check_existing(path);
	if (ret == 1)
		return -EADDRINUSE; /* another rblk-target serves it */
	if (ret < 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	old = umask(0177); /* no window with looser permissions */
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret) {
		ret = -errno;
		goto out_close;
	}
	if (chmod(path, cfg->ctl_socket_mode) || listen(fd, 16)) {
		ret = -errno;
		unlink(path);
		goto out_close;
	}
	ctl->unix_fd = fd;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	return 0;

out_close:
	close(fd);
	return ret;
}

static int open_metrics(struct ctl *ctl, const char *url)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
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
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
		ret = -errno;
		close(fd);
		goto out_free;
	}
	ctl->metrics_fd = fd;
	ret = 0;
out_free:
	freeaddrinfo(ai);
	return ret;
}

int ctl_open(struct target *t, struct ctl **out)
{
	const struct cfg_target *cfg = &t->cfg;
	struct ctl *ctl;
	int ret;

	*out = NULL;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->t = t;
	ctl->unix_fd = ctl->metrics_fd = -1;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctl->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ctl->reap_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->epfd < 0 || ctl->stop_fd < 0 || ctl->reap_fd < 0) {
		ret = -errno;
		log_err("ctl: epoll/eventfd: %s", strerror(errno));
		goto out_close;
	}
	ret = watch(ctl, ctl->stop_fd, &ctl->stop_tag);
	if (!ret)
		ret = watch(ctl, ctl->reap_fd, &ctl->reap_tag);
	if (ret)
		goto out_close;
	if (strcmp(cfg->ctl_socket, "none")) {
		ret = open_unix(ctl, cfg);
		if (ret && cfg->ctl_socket_set) {
			log_err("control socket %s: %s", cfg->ctl_socket,
				ret == -EADDRINUSE ?
					"another rblk-target is serving it" :
					strerror(-ret));
			goto out_close;
		}
		if (ret) {
			/* the default place: run without rather than fail */
			log_warn("control socket %s: %s; running without one (--ctl-socket PATH|none)",
				 cfg->ctl_socket,
				 ret == -EADDRINUSE ?
					 "another rblk-target is serving it" :
					 strerror(-ret));
		} else {
			ret = watch(ctl, ctl->unix_fd, &ctl->unix_tag);
			if (ret)
				goto out_close;
			log_info("control socket %s (mode %04o)", ctl->path,
				 cfg->ctl_socket_mode);
		}
	}
	if (cfg->metrics[0]) {
		ret = open_metrics(ctl, cfg->metrics);
		if (ret) {
			log_err("metrics %s: %s", cfg->metrics, strerror(-ret));
			goto out_close;
		}
		ret = watch(ctl, ctl->metrics_fd, &ctl->metrics_tag);
		if (ret)
			goto out_close;
		log_info("metrics on %s/metrics", cfg->metrics);
	}
	/* also without a socket: it closes removed exports off the workers */
	ret = -pthread_create(&ctl->thread, NULL, ctl_thread, ctl);
	if (ret) {
		log_err("ctl: starting its thread: %s", strerror(-ret));
		goto out_close;
	}
	ctl->started = true;
	*out = ctl;
	return 0;

out_close:
	ctl_close(ctl);
	return ret;
}

void ctl_close(struct ctl *ctl)
{
	uint64_t one = 1;

	if (!ctl)
		return;
	if (ctl->started) {
		if (write(ctl->stop_fd, &one, sizeof(one)) < 0)
			log_warn("ctl: stopping its thread: %s",
				 strerror(errno));
		pthread_join(ctl->thread, NULL);
	}
	if (ctl->unix_fd >= 0) {
		close(ctl->unix_fd);
		unlink(ctl->path);
	}
	if (ctl->metrics_fd >= 0)
		close(ctl->metrics_fd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	if (ctl->stop_fd >= 0)
		close(ctl->stop_fd);
	if (ctl->reap_fd >= 0)
		close(ctl->reap_fd);
	free(ctl);
}

/* ---- the client: rblk-target ctl ---------------------------------------- */

static void client_usage(FILE *f)
{
	fprintf(f,
		"Usage: rblk-target ctl [--socket PATH] COMMAND [ARGS] [-o json]\n"
		"Talk to a running rblk-target through its control socket\n"
		"(default %s).\n"
		"\n"
		"Commands:\n"
		"  list-exports                       exports: name, path, size, block size, sessions\n"
		"  list-sessions [--export NAME]      sessions: peer, host, export, queue, worker, state\n"
		"  add-export NAME PATH [--read-only] [--block-size N] [--allow H,..] [--allow-ro H,..]\n"
		"                                     export a file, block device or ram:SIZE now\n"
		"  remove-export NAME [--force [--wait]]\n"
		"                                     stop exporting; --force closes its sessions,\n"
		"                                     --wait until they are closed and the file released\n"
		"  set-hosts EXPORT [--allow H,..] [--allow-ro H,..] | --open\n"
		"                                     replace an export's host allow lists\n"
		"  stats [EXPORT]                     I/O counters and latency per export and session\n"
		"\n"
		"  -s, --socket PATH   the control socket\n"
		"  -o json             JSON output (any command)\n"
		"Errors go to stderr and the exit status is 1 (2 for usage errors).\n",
		CFG_DEFAULT_CTL_SOCKET);
}

int ctl_client_main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = CLIENT_TIMEOUT_S };
	const char *path = CFG_DEFAULT_CTL_SOCKET;
	char *line = NULL, *resp = NULL;
	size_t line_len = 0, resp_len = 0, resp_cap = 0;
	FILE *lf;
	int i, fd, ret = 1;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if ((!strcmp(argv[i], "-s") || !strcmp(argv[i], "--socket")) &&
		    i + 1 < argc) {
			path = argv[++i];
		} else if (!strncmp(argv[i], "--socket=", 9)) {
			path = argv[i] + 9;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			client_usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "rblk-target ctl: unknown option '%s'\n",
				argv[i]);
			client_usage(stderr);
			return 2;
		}
	}
	if (i == argc) {
		client_usage(stderr);
		return 2;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "rblk-target ctl: socket path too long\n");
		return 2;
	}
	lf = open_memstream(&line, &line_len);
	if (!lf)
		return 1;
	for (int j = i; j < argc; j++) {
		if (strchr(argv[j], '\n')) {
			fprintf(stderr, "rblk-target ctl: newline in argument\n");
			fclose(lf);
			free(line);
			return 2;
		}
		if (j > i)
			fputc(' ', lf);
		for (const char *p = argv[j]; *p; p++) {
			if (*p == ' ' || *p == '\t' || *p == '\\')
				fputc('\\', lf);
			fputc(*p, lf);
		}
	}
	fputc('\n', lf);
	fclose(lf);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "rblk-target ctl: %s: %s\n", path,
			strerror(errno));
		goto out;
	}
	/* a target that accepts but never answers must not hang us */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (write_full(fd, line, line_len)) {
		if (errno == EAGAIN)
			fprintf(stderr, "rblk-target ctl: %s: no answer from the target within %d s\n",
				path, CLIENT_TIMEOUT_S);
		else
			fprintf(stderr, "rblk-target ctl: sending: %s\n",
				strerror(errno));
		goto out;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t n;

		if (resp_cap - resp_len < 4096) {
			char *p = realloc(resp, resp_cap + 65536);

			if (!p)
				goto out;
			resp = p;
			resp_cap += 65536;
		}
		n = read(fd, resp + resp_len, resp_cap - resp_len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			fprintf(stderr, "rblk-target ctl: %s: no answer from the target within %d s\n",
				path, CLIENT_TIMEOUT_S);
			goto out;
		}
		if (n < 0) {
			fprintf(stderr, "rblk-target ctl: reading: %s\n",
				strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		resp_len += (size_t)n;
	}
	if (!resp) {
		fprintf(stderr, "rblk-target ctl: no response\n");
		goto out;
	}
	resp[resp_len] = 0;
	if (!strncmp(resp, "ok\n", 3)) {
		fwrite(resp + 3, 1, resp_len - 3, stdout);
		ret = fflush(stdout) ? 1 : 0;
	} else if (!strncmp(resp, "error: ", 7)) {
		fprintf(stderr, "rblk-target ctl: %s", resp + 7);
	} else {
		fprintf(stderr, "rblk-target ctl: malformed response\n");
	}
out:
	if (fd >= 0)
		close(fd);
	free(resp);
	free(line);
	return ret;
}
