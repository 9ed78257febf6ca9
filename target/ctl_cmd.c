/* SPDX-License-Identifier: MIT */
/*
 * The control commands of rblk-target (list-exports, list-sessions,
 * add-export, remove-export, set-hosts, stats, help): one request line in,
 * "ok" or "error: MESSAGE" and a text or JSON body out (docs/CONTROL.md).
 * Runs on the control thread, the only thread that adds and removes
 * exports; what it shows is copied under exports_lock and each worker's
 * conns_lock (counters with relaxed loads, stats.h) and formatted after
 * unlocking. JSON goes through json-c (common/json.h).
 */
#include "ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/json.h"
#include "../common/log.h"
#include "../common/util.h"

#include "conn.h"
#include "export.h"
#include "worker.h"

#define REMOVE_WAIT_S 20 /* remove-export --wait; below the client's 30 s */

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

static struct json_object *stats_json(const struct iostats_snap *s)
{
	struct json_object *o = json_object_new_object(), *ops, *lat, *b;

	ops = json_object_new_object();
	for (int i = 0; i < STAT_NR_OPS; i++)
		rjson_add_u64(ops, stat_op_name((enum stat_op)i), s->ops[i]);
	rjson_add(o, "ops", ops);
	rjson_add_u64(o, "bytes_read", s->bytes_read);
	rjson_add_u64(o, "bytes_written", s->bytes_written);
	rjson_add_u64(o, "errors", s->errors);
	rjson_add_u64(o, "window_timeouts", s->window_timeouts);
	lat = json_object_new_object();
	rjson_add_u64(lat, "count", stats_count(s));
	rjson_add_u64(lat, "sum", s->lat_sum_us);
	rjson_add_u64(lat, "p50", stats_quantile_us(s, 0.50));
	rjson_add_u64(lat, "p99", stats_quantile_us(s, 0.99));
	b = json_object_new_array_ext(STAT_LAT_BUCKETS);
	for (int i = 0; i < STAT_LAT_BUCKETS; i++)
		json_object_array_add(b, json_object_new_uint64(s->lat[i]));
	rjson_add(lat, "buckets", b);
	rjson_add(o, "latency_us", lat);
	return o;
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
	fprintf(f, "  window timeouts: %llu\n",
		(unsigned long long)s->window_timeouts);
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

int ctl_req_fail(struct ctl_req *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* Split line in place: spaces separate, backslash escapes. */
static int split_line(char *line, struct ctl_req *r)
{
	char *in = line, *out = line;

	r->argc = 0;
	for (;;) {
		while (*in == ' ' || *in == '\t')
			in++;
		if (!*in)
			return 0;
		if (r->argc == CTL_MAX_ARGS)
			return ctl_req_fail(r, "more than %d arguments",
					    CTL_MAX_ARGS);
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
	char short_name;  /* 0: none */
	bool has_arg;
	const char *val;
};

/*
 * Parse r's arguments after the command: options from opts (and -o/--output
 * FORMAT, which every command takes), positional ones into pos. Returns the
 * number of positional arguments, or -1 with r->err set.
 */
static int parse_opts(struct ctl_req *r, struct opt *opts, const char **pos,
		      int max_pos, int min_pos)
{
	int npos = 0;

	for (int i = 1; i < r->argc; i++) {
		char *a = r->argv[i], *val = NULL;
		struct opt *o = NULL;

		if (a[0] != '-' || !a[1]) {
			if (npos == max_pos)
				return ctl_req_fail(
				    r, "%s: unexpected argument '%s'",
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
			if (!val ||
			    (strcmp(val, "json") && strcmp(val, "text")))
				return ctl_req_fail(r, "-o: want json or text");
			r->json = !strcmp(val, "json");
			continue;
		}
		for (struct opt *p = opts; p && p->name; p++) {
			size_t n = strlen(p->name);

			if ((a[1] == p->short_name && !a[2]) ||
			    (a[1] == '-' && !strncmp(a + 2, p->name, n) &&
			     (!a[2 + n] || a[2 + n] == '='))) {
				o = p;
				val = a[1] == '-' && a[2 + n] == '=' ? a + 3 + n
								     : NULL;
				break;
			}
		}
		if (!o)
			return ctl_req_fail(r, "%s: unknown option '%s'",
					    r->argv[0], a);
		if (o->has_arg) {
			if (!val && i + 1 < r->argc)
				val = r->argv[++i];
			if (!val)
				return ctl_req_fail(r, "%s: %s needs a value",
						    r->argv[0], a);
			o->val = val;
		} else {
			if (val)
				return ctl_req_fail(r, "%s: %s takes no value",
						    r->argv[0], a);
			o->val = "1";
		}
	}
	if (npos < min_pos)
		return ctl_req_fail(r, "%s: missing argument (see 'help')",
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

struct ctl_export_row *ctl_exports_copy(struct target *t, struct ctl_req *r,
					const char *only, unsigned int *n)
{
	struct ctl_export_row *rows;
	unsigned int max;

	/*
	 * Allocate outside the lock. On the control thread the count holds
	 * (only it adds and removes); on the metrics thread an export added
	 * meanwhile is left for the next scrape (the copy stops at max).
	 */
	pthread_mutex_lock(&t->exports_lock);
	max = t->nr_exports;
	pthread_mutex_unlock(&t->exports_lock);
	*n = 0;
	rows = calloc(max ? max : 1, sizeof(*rows));
	if (!rows) {
		ctl_req_fail(r, "out of memory");
		return NULL;
	}
	pthread_mutex_lock(&t->exports_lock);
	for (struct export *e = t->exports; e && *n < max; e = e->next) {
		struct ctl_export_row *x = &rows[*n];

		if (only && strcmp(e->name, only))
			continue;
		snprintf(x->name, sizeof(x->name), "%s", e->name);
		snprintf(x->path, sizeof(x->path), "%s", e->path);
		x->size = export_size(e);
		x->block_size = e->block_size;
		x->read_only = e->read_only;
		x->sessions = atomic_load(&e->sessions);
		export_stats(e, &x->stats);
		qos_limits(&e->qos, &x->qos);
		x->throttled_cmds = atomic_load(&e->qos.throttled_cmds);
		x->throttled_ns = atomic_load(&e->qos.throttled_ns);
		(*n)++;
	}
	pthread_mutex_unlock(&t->exports_lock);
	if (only && !*n) {
		free(rows);
		ctl_req_fail(r, "no export named '%s'", only);
		return NULL;
	}
	return rows;
}

/* Print o as r's JSON body (one line) and drop it; out of memory fails r. */
static void json_print_obj(struct ctl_req *r, struct json_object *o)
{
	if (rjson_print(r->out, o))
		ctl_req_fail(r, "out of memory");
}

/* {"key": list} */
static void json_print_list(struct ctl_req *r, const char *key,
			    struct json_object *list)
{
	struct json_object *o = json_object_new_object();

	rjson_add(o, key, list);
	json_print_obj(r, o);
}

static void cmd_list_exports(struct target *t, struct ctl_req *r)
{
	FILE *f = r->out;
	struct ctl_export_row *rows;
	unsigned int n;

	if (parse_opts(r, NULL, NULL, 0, 0) < 0)
		return;
	rows = ctl_exports_copy(t, r, NULL, &n);
	if (!rows)
		return;
	if (r->json) {
		struct json_object *list = json_object_new_array();

		for (unsigned int i = 0; i < n; i++) {
			const struct ctl_export_row *e = &rows[i];
			struct json_object *o = json_object_new_object();

			rjson_add_str(o, "name", e->name);
			rjson_add_str(o, "path", e->path);
			rjson_add_u64(o, "size", e->size);
			rjson_add_u64(o, "block_size", e->block_size);
			rjson_add_bool(o, "read_only", e->read_only);
			rjson_add_u64(o, "sessions", e->sessions);
			json_object_array_add(list, o);
		}
		json_print_list(r, "exports", list);
		free(rows);
		return;
	}
	fprintf(f, "%-20s %-40s %14s %6s %-3s %s\n", "NAME", "PATH", "SIZE",
		"BS", "RO", "SESSIONS");
	for (unsigned int i = 0; i < n; i++) {
		const struct ctl_export_row *e = &rows[i];

		fprintf(f, "%-20s %-40s %14llu %6u %-3s %u\n", e->name, e->path,
			(unsigned long long)e->size, e->block_size,
			e->read_only ? "yes" : "no", e->sessions);
	}
	free(rows);
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
	enum xp_tls_mode tls;
};

/*
 * Copy every session (connection past its login that found an export) of
 * every worker, or only those of export only. NULL with r->err set when
 * out of memory; *n may be 0.
 */
static struct sess_row *sessions_copy(struct target *t, struct ctl_req *r,
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
					ctl_req_fail(r, "out of memory");
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
			x->tls = c->tls.mode; /* set before it joined */
			stats_add(&x->stats, &c->stats);
		}
		pthread_mutex_unlock(&w->conns_lock);
	}
	if (!rows)
		rows = malloc(sizeof(*rows)); /* an empty list, not a failure */
	if (!rows)
		ctl_req_fail(r, "out of memory");
	return rows;
}

static uint64_t sess_uptime_s(const struct sess_row *c)
{
	return c->login_ms ? (now_ms() - c->login_ms) / 1000u : 0;
}

static void cmd_list_sessions(struct target *t, struct ctl_req *r)
{
	struct opt opts[] = {{"export", 'e', true, NULL}, {0}};
	struct sess_row *rows;
	FILE *f = r->out;
	unsigned int n;

	if (parse_opts(r, opts, NULL, 0, 0) < 0)
		return;
	rows = sessions_copy(t, r, opts[0].val, &n);
	if (!rows)
		return;
	if (r->json) {
		struct json_object *list = json_object_new_array();

		for (unsigned int i = 0; i < n; i++) {
			const struct sess_row *c = &rows[i];
			struct json_object *o = json_object_new_object();

			rjson_add_u64(o, "id", c->id);
			rjson_add_str(o, "peer", c->peer);
			rjson_add_str(o, "host", c->host);
			rjson_add_str(o, "export", c->exp);
			rjson_add_u64(o, "queue", c->queue_id);
			rjson_add_u64(o, "queue_depth", c->queue_depth);
			rjson_add_u64(o, "worker", c->worker);
			rjson_add_str(o, "state", conn_state_str(c->state));
			rjson_add_u64(o, "uptime_s", sess_uptime_s(c));
			rjson_add_str(o, "tls", xp_tls_mode_str(c->tls));
			json_object_array_add(list, o);
		}
		json_print_list(r, "sessions", list);
		free(rows);
		return;
	}
	fprintf(f, "%-6s %-24s %-20s %-20s %5s %5s %6s %-8s %8s %s\n", "ID",
		"PEER", "HOST", "EXPORT", "QUEUE", "QD", "WORKER", "STATE",
		"UPTIME_S", "TLS");
	for (unsigned int i = 0; i < n; i++) {
		const struct sess_row *c = &rows[i];

		fprintf(f,
			"%-6llu %-24s %-20s %-20s %5u %5u %6u %-8s %8llu %s\n",
			(unsigned long long)c->id, c->peer,
			c->host[0] ? c->host : "-", c->exp, c->queue_id,
			c->queue_depth, c->worker, conn_state_str(c->state),
			(unsigned long long)sess_uptime_s(c),
			xp_tls_mode_str(c->tls));
	}
	free(rows);
}

static void cmd_add_export(struct target *t, struct ctl_req *r)
{
	struct opt opts[] = {
	    {"read-only", 'r', false, NULL},
	    {"block-size", 'b', true, NULL},
	    {"allow", 'a', true, NULL},
	    {"allow-ro", 0, true, NULL},
	    {"cache", 0, true, NULL},
	    {"uuid", 0, true, NULL},
	    {0},
	};
	const char *pos[2];
	const struct export *clash;
	struct cfg_export ce = {0};
	struct export *e, **pp;
	char why[400];
	unsigned int n;
	uint64_t bs = 0;

	if (parse_opts(r, opts, pos, 2, 2) < 0)
		return;
	if (opts[1].val && parse_size(opts[1].val, &bs)) {
		ctl_req_fail(r, "add-export: bad block size '%s'", opts[1].val);
		return;
	}
	if (strlen(pos[0]) >= sizeof(ce.name) ||
	    strlen(pos[1]) >= sizeof(ce.path)) {
		ctl_req_fail(r, "add-export: name or path too long");
		return;
	}
	if (pos[1][0] != '/' && strncmp(pos[1], "ram:", 4) &&
	    strncmp(pos[1], "rbd:", 4)) {
		/* the target's working directory is not the client's */
		ctl_req_fail(
		    r,
		    "add-export: '%s': give an absolute path, ram:SIZE or rbd:POOL/IMAGE",
		    pos[1]);
		return;
	}
	snprintf(ce.name, sizeof(ce.name), "%s", pos[0]);
	snprintf(ce.path, sizeof(ce.path), "%s", pos[1]);
	ce.read_only = opts[0].val != NULL;
	ce.block_size = bs > UINT32_MAX ? 1 : (uint32_t)bs; /* 1: refused */
	if (opts[4].val && cfg_parse_cache(opts[4].val, &ce.cache_buffered)) {
		ctl_req_fail(r,
			     "add-export: bad cache '%s' (direct or buffered)",
			     opts[4].val);
		return;
	}
	if (opts[5].val) {
		if (cfg_parse_uuid(opts[5].val, ce.uuid)) {
			ctl_req_fail(
			    r,
			    "add-export: bad uuid '%.40s' (8-4-4-4-12 hex digits)",
			    opts[5].val);
			return;
		}
		ce.has_uuid = true;
	}
	if (cfg_export_set_access(&t->cfg, &ce, opts[2].val, opts[3].val,
				  r->err, sizeof(r->err)) ||
	    cfg_check_export(&ce, r->err, sizeof(r->err)))
		return;
	pthread_mutex_lock(&t->exports_lock);
	e = find_locked(t, ce.name);
	n = t->nr_exports;
	pthread_mutex_unlock(&t->exports_lock);
	if (e) {
		ctl_req_fail(r, "export '%s' exists", ce.name);
		return;
	}
	if (n >= CFG_MAX_EXPORTS) {
		ctl_req_fail(
		    r,
		    "add-export: already %u exports, the most one target serves",
		    n);
		return;
	}
	/* opening may take a moment (files, mmap); not under the lock */
	e = export_create(&ce, t->nr_workers, why, sizeof(why));
	if (!e) {
		ctl_req_fail(r, "cannot open export '%s': %s", ce.name, why);
		return;
	}
	pthread_mutex_lock(&t->exports_lock);
	clash = export_id_clash(t->exports, e);
	if (clash) {
		ctl_req_fail(
		    r,
		    "add-export: export '%s' has that volume id already: two volumes must not share one identity",
		    clash->name);
		pthread_mutex_unlock(&t->exports_lock);
		export_put(e);
		return;
	}
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
		struct json_object *o = json_object_new_object();

		rjson_add_str(o, "added", e->name);
		rjson_add_u64(o, "size", e->size);
		rjson_add_u64(o, "block_size", e->block_size);
		json_print_obj(r, o);
	} else {
		fprintf(r->out, "added export %s (%llu bytes, block size %u)\n",
			e->name, (unsigned long long)e->size, e->block_size);
	}
}

static void cmd_remove_export(struct target *t, struct ctl_req *r)
{
	struct opt opts[] = {
	    {"force", 'f', false, NULL},
	    {"wait", 'w', false, NULL},
	    {0},
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
		ctl_req_fail(r, "no export named '%s'", pos[0]);
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
		ctl_req_fail(
		    r,
		    "export '%s' is in use by %u session%s (%u connection%s); --force closes them",
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
		ctl_req_fail(
		    r,
		    "removed export %s, but %u connection%s still closing after %d s",
		    name, left, left == 1 ? " is" : "s are", REMOVE_WAIT_S);
		return;
	}
	if (r->json) {
		struct json_object *o = json_object_new_object();

		rjson_add_str(o, "removed", name);
		rjson_add_u64(o, "sessions", sessions);
		rjson_add_bool(o, "released", released);
		json_print_obj(r, o);
	} else if (!sessions && released) {
		fprintf(r->out, "removed export %s\n", name);
	} else if (released) {
		fprintf(r->out, "removed export %s (%u session%s closed)\n",
			name, sessions, sessions == 1 ? "" : "s");
	} else {
		fprintf(
		    r->out,
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
static void cmd_set_hosts(struct target *t, struct ctl_req *r)
{
	struct opt opts[] = {
	    {"allow", 'a', true, NULL},
	    {"allow-ro", 0, true, NULL},
	    {"open", 0, false, NULL},
	    {0},
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
		ctl_req_fail(
		    r,
		    "set-hosts: give --allow and/or --allow-ro, or --open (every host may log in)");
		return;
	}
	if (opts[2].val && (opts[0].val || opts[1].val)) {
		ctl_req_fail(
		    r, "set-hosts: --open replaces the lists; give it alone");
		return;
	}
	copy = malloc(sizeof(*copy));
	old = malloc(sizeof(*old));
	if (!copy || !old) {
		ctl_req_fail(r, "set-hosts: out of memory");
		goto out_free;
	}
	pthread_mutex_lock(&t->exports_lock);
	e = find_locked(t, pos[0]);
	if (!e) {
		pthread_mutex_unlock(&t->exports_lock);
		ctl_req_fail(r, "no export named '%s'", pos[0]);
		goto out_free;
	}
	memcpy(copy, e->cfg, sizeof(*copy));
	if (cfg_export_set_access(&t->cfg, copy,
				  opts[2].val ? "any" : opts[0].val,
				  opts[1].val, r->err, sizeof(r->err))) {
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
		struct json_object *o = json_object_new_object();

		rjson_add_str(o, "export", pos[0]);
		rjson_add_bool(o, "restricted", restricted);
		rjson_add_u64(o, "sessions", sessions);
		json_print_obj(r, o);
	} else {
		fprintf(
		    r->out,
		    "export %s: %s; applies to new logins (%u session%s keep their access)\n",
		    pos[0],
		    restricted ? "access list replaced" : "open to every host",
		    sessions, sessions == 1 ? "" : "s");
	}
	return;

out_free:
	free(copy);
	free(old);
}

/* "iops=1000 read_bps=50M": the limits set, or "none". */
static void qos_text(FILE *f, const struct cfg_qos *q)
{
	bool any = false;

	for (int k = 0; k < CFG_QOS_NR; k++) {
		if (!q->limit[k])
			continue;
		fprintf(f, "%s%s=%llu", any ? " " : "", cfg_qos_key(k),
			(unsigned long long)q->limit[k]);
		any = true;
	}
	if (any)
		fprintf(f, " burst_ms=%u", q->burst_ms);
	else
		fputs("none", f);
}

static struct json_object *qos_json(const struct cfg_qos *q, uint64_t cmds,
				    uint64_t ns)
{
	struct json_object *o = json_object_new_object();
	struct json_object *l = json_object_new_object();

	for (int k = 0; k < CFG_QOS_NR; k++)
		rjson_add_u64(l, cfg_qos_key(k), q->limit[k]);
	rjson_add_u64(l, "burst_ms", q->burst_ms);
	rjson_add(o, "limits", l);
	rjson_add_u64(o, "throttled_commands", cmds);
	rjson_add(o, "throttled_seconds", json_object_new_double(ns / 1e9));
	return o;
}

/*
 * set-qos EXPORT KEY=VALUE... | --host NAME KEY=VALUE...: change QoS
 * limits live (config.h, struct cfg_qos; 0 lifts one, "off" all). Every
 * worker reads the new rates at its next command; commands waiting on
 * the old ones are looked at again within 100 ms.
 */
static void cmd_set_qos(struct target *t, struct ctl_req *r)
{
	struct opt opts[] = {{"host", 0, true, NULL}, {0}};
	const char *pos[CFG_QOS_NR + 3];
	struct cfg_qos q;
	struct qos *target_q = NULL;
	struct export *e = NULL;
	const char *who;
	int npos, first;

	npos = parse_opts(r, opts, pos, ARRAY_SIZE(pos), 1);
	if (npos < 0)
		return;
	who = opts[0].val;
	first = who ? 0 : 1;
	if (npos <= first) {
		ctl_req_fail(
		    r,
		    "set-qos: give EXPORT KEY=VALUE... or --host NAME KEY=VALUE... (keys: iops, read_iops, write_iops, bps, read_bps, write_bps, burst_ms; 0 lifts a limit, off lifts all)");
		return;
	}
	pthread_mutex_lock(&t->exports_lock);
	if (who) {
		for (unsigned int i = 0; i < t->cfg.nr_hosts; i++)
			if (!strcmp(t->cfg.hosts[i].name, who))
				target_q = &t->host_qos[i];
		if (!target_q)
			ctl_req_fail(
			    r,
			    "set-qos: no [host %s] in the configuration (limits apply to hosts that authenticate)",
			    who);
	} else {
		who = pos[0];
		e = find_locked(t, who);
		if (!e)
			ctl_req_fail(r, "no export named '%s'", who);
		else
			target_q = &e->qos;
	}
	if (!target_q)
		goto out;
	qos_limits(target_q, &q);
	for (int i = first; i < npos; i++) {
		char key[16];
		const char *eq = strchr(pos[i], '=');

		if (!strcmp(pos[i], "off")) {
			memset(q.limit, 0, sizeof(q.limit));
			continue;
		}
		if (!eq || (size_t)(eq - pos[i]) >= sizeof(key)) {
			ctl_req_fail(r, "set-qos: '%s' is not KEY=VALUE",
				     pos[i]);
			goto out;
		}
		memcpy(key, pos[i], (size_t)(eq - pos[i]));
		key[eq - pos[i]] = 0;
		if (cfg_qos_set(&q, key, eq + 1, r->err, sizeof(r->err)) ==
		    -ENOENT)
			ctl_req_fail(
			    r,
			    "set-qos: unknown key '%s' (iops, read_iops, write_iops, bps, read_bps, write_bps, burst_ms)",
			    key);
		if (r->err[0])
			goto out;
	}
	if (e && (e->features & RBLK_F_DIRECT) && cfg_qos_any(&q)) {
		ctl_req_fail(
		    r,
		    "set-qos: export %s is exported for direct access, which sends no commands to limit (export it with nodirect)",
		    who);
		goto out;
	}
	qos_configure(target_q, &q);
	qos_limits(target_q, &q);
	log_info("ctl: %s %s: QoS limits set", e ? "export" : "host", who);
	if (r->json) {
		struct json_object *o =
		    qos_json(&q, atomic_load(&target_q->throttled_cmds),
			     atomic_load(&target_q->throttled_ns));

		rjson_add_str(o, e ? "export" : "host", who);
		json_print_obj(r, o);
	} else {
		fprintf(r->out, "%s %s: ", e ? "export" : "host", who);
		qos_text(r->out, &q);
		fputc('\n', r->out);
	}
out:
	pthread_mutex_unlock(&t->exports_lock);
}

/*
 * resize-export NAME [SIZE] [--force]: the backend changes its store (or,
 * without SIZE, reads its size again) and the size is published; live
 * sessions are told in their next answers (docs/PROTOCOL.md, "Live
 * resize"). The export's reference keeps it while the backend works,
 * outside the list lock, so logins are not held up.
 */
static void cmd_resize_export(struct target *t, struct ctl_req *r)
{
	struct opt opts[] = {{"force", 'f', false, NULL}, {0}};
	uint64_t size = 0, old = 0, now = 0;
	const char *pos[2];
	struct export *e;
	unsigned int live;
	int npos;

	npos = parse_opts(r, opts, pos, 2, 1);
	if (npos < 0)
		return;
	if (npos == 2 && (parse_size(pos[1], &size) || !size)) {
		ctl_req_fail(
		    r,
		    "resize-export: bad size '%s' (bytes, or with K, M, G, T)",
		    pos[1]);
		return;
	}
	pthread_mutex_lock(&t->exports_lock);
	e = find_locked(t, pos[0]);
	if (e)
		export_get(e);
	pthread_mutex_unlock(&t->exports_lock);
	if (!e) {
		ctl_req_fail(r, "no export named '%s'", pos[0]);
		return;
	}
	if (export_resize(e, size, opts[0].val != NULL, &old, &now, r->err,
			  sizeof(r->err))) {
		log_err("ctl: resize-export %s: %s", e->name, r->err);
		export_put(e);
		return;
	}
	live = atomic_load(&e->sessions);
	if (r->json) {
		struct json_object *o = json_object_new_object();

		rjson_add_str(o, "resized", e->name);
		rjson_add_u64(o, "old_size", old);
		rjson_add_u64(o, "size", now);
		rjson_add_u64(o, "sessions", live);
		json_print_obj(r, o);
	} else {
		fprintf(
		    r->out,
		    "export %s: %llu -> %llu bytes; %u live session(s) %s\n",
		    e->name, (unsigned long long)old, (unsigned long long)now,
		    live,
		    now < old
			? "keep their size: their I/O past the new end fails"
			: "are told in their next answers");
	}
	export_put(e);
}

/* Hosts with QoS limits, or that waited on them, for stats; -1: none. */
static int next_qos_host(const struct target *t, int i, struct cfg_qos *q)
{
	for (i++; i < (int)t->cfg.nr_hosts; i++) {
		qos_limits(&t->host_qos[i], q);
		if (cfg_qos_any(q) ||
		    atomic_load(&t->host_qos[i].throttled_cmds))
			return i;
	}
	return -1;
}

static void stats_print_json(const struct target *t, struct ctl_req *r,
			     const struct ctl_export_row *ex, unsigned int nex,
			     const struct sess_row *ss, unsigned int nss)
{
	struct json_object *o = json_object_new_object();
	struct json_object *exl = json_object_new_array();
	struct json_object *ssl = json_object_new_array();
	struct json_object *hl = json_object_new_array();
	struct cfg_qos q;

	for (int h = next_qos_host(t, -1, &q); h >= 0;
	     h = next_qos_host(t, h, &q)) {
		struct json_object *x =
		    qos_json(&q, atomic_load(&t->host_qos[h].throttled_cmds),
			     atomic_load(&t->host_qos[h].throttled_ns));

		rjson_add_str(x, "host", t->cfg.hosts[h].name);
		json_object_array_add(hl, x);
	}
	rjson_add(o, "hosts", hl);

	for (unsigned int i = 0; i < nex; i++) {
		struct json_object *x = json_object_new_object();

		rjson_add_str(x, "name", ex[i].name);
		rjson_add_u64(x, "sessions", ex[i].sessions);
		rjson_add(x, "stats", stats_json(&ex[i].stats));
		rjson_add(x, "qos",
			  qos_json(&ex[i].qos, ex[i].throttled_cmds,
				   ex[i].throttled_ns));
		json_object_array_add(exl, x);
	}
	for (unsigned int i = 0; i < nss; i++) {
		struct json_object *x = json_object_new_object();

		rjson_add_u64(x, "id", ss[i].id);
		rjson_add_str(x, "export", ss[i].exp);
		rjson_add_str(x, "host", ss[i].host);
		rjson_add(x, "stats", stats_json(&ss[i].stats));
		json_object_array_add(ssl, x);
	}
	rjson_add(o, "exports", exl);
	rjson_add(o, "sessions", ssl);
	json_print_obj(r, o);
}

static void stats_print_text(const struct target *t, FILE *f,
			     const struct ctl_export_row *ex, unsigned int nex,
			     const struct sess_row *ss, unsigned int nss)
{
	struct cfg_qos q;

	for (int h = next_qos_host(t, -1, &q); h >= 0;
	     h = next_qos_host(t, h, &q)) {
		fprintf(f, "host %s: qos: ", t->cfg.hosts[h].name);
		qos_text(f, &q);
		fprintf(f, "; throttled %llu commands, %.3f s\n",
			(unsigned long long)atomic_load(
			    &t->host_qos[h].throttled_cmds),
			atomic_load(&t->host_qos[h].throttled_ns) / 1e9);
	}
	for (unsigned int i = 0; i < nex; i++) {
		fprintf(f, "export %s (%u session%s)\n", ex[i].name,
			ex[i].sessions, ex[i].sessions == 1 ? "" : "s");
		stats_text(f, &ex[i].stats);
		fputs("  qos: ", f);
		qos_text(f, &ex[i].qos);
		fprintf(f, "; throttled %llu commands, %.3f s\n",
			(unsigned long long)ex[i].throttled_cmds,
			ex[i].throttled_ns / 1e9);
	}
	for (unsigned int i = 0; i < nss; i++) {
		const struct sess_row *c = &ss[i];

		fprintf(f, "session %llu (export %s, host %s, %s)\n",
			(unsigned long long)c->id, c->exp,
			c->host[0] ? c->host : "-", c->peer);
		stats_text(f, &c->stats);
	}
}

static void cmd_stats(struct target *t, struct ctl_req *r)
{
	const char *pos[1] = {NULL};
	struct ctl_export_row *ex;
	struct sess_row *ss;
	unsigned int nex, nss;
	FILE *f = r->out;

	if (parse_opts(r, NULL, pos, 1, 0) < 0)
		return;
	ex = ctl_exports_copy(t, r, pos[0], &nex);
	if (!ex)
		return;
	ss = sessions_copy(t, r, pos[0], &nss);
	if (!ss) {
		free(ex);
		return;
	}
	if (r->json)
		stats_print_json(t, r, ex, nex, ss, nss);
	else
		stats_print_text(t, f, ex, nex, ss, nss);
	free(ex);
	free(ss);
}

/* An export's reservations, copied under its pr lock (pr.h). */
struct resv_row {
	char name[RBLK_NAME_MAX];
	struct pr_data d;
};

/*
 * list-reservations [EXPORT]: the registrants and reservation of each
 * export that offers reservations, as its target has them now (an RBD
 * export's as last read from the image: at most a second old).
 */
static void cmd_list_reservations(struct target *t, struct ctl_req *r)
{
	const char *pos[1] = {NULL};
	struct resv_row *rows = NULL, *tmp;
	unsigned int n = 0;
	FILE *f = r->out;

	if (parse_opts(r, NULL, pos, 1, 0) < 0)
		return;
	pthread_mutex_lock(&t->exports_lock);
	for (struct export *e = t->exports; e; e = e->next) {
		if (!e->pr || (pos[0] && strcmp(pos[0], e->name)))
			continue;
		tmp = realloc(rows, (n + 1) * sizeof(*rows));
		if (!tmp)
			break;
		rows = tmp;
		snprintf(rows[n].name, sizeof(rows[n].name), "%s", e->name);
		pthread_mutex_lock(&e->pr->lock);
		rows[n].d = e->pr->d;
		pthread_mutex_unlock(&e->pr->lock);
		n++;
	}
	pthread_mutex_unlock(&t->exports_lock);
	if (pos[0] && !n) {
		ctl_req_fail(r, "no export '%s' with reservations", pos[0]);
		free(rows);
		return;
	}
	if (r->json) {
		struct json_object *list = json_object_new_array();

		for (unsigned int i = 0; i < n; i++) {
			const struct pr_data *d = &rows[i].d;
			struct json_object *o = json_object_new_object();
			struct json_object *regs = json_object_new_array();

			rjson_add_str(o, "export", rows[i].name);
			rjson_add_u64(o, "generation", d->generation);
			rjson_add_str(o, "type", rblk_pr_type_str(d->type));
			for (unsigned int k = 0; k < d->nr; k++) {
				struct json_object *g =
				    json_object_new_object();
				char key[24];

				snprintf(key, sizeof(key), "0x%llx",
					 (unsigned long long)d->regs[k].key);
				rjson_add_str(g, "host", d->regs[k].host);
				rjson_add_str(g, "key", key);
				rjson_add_bool(
				    g, "holder",
				    pr_is_holder(d, d->regs[k].host));
				json_object_array_add(regs, g);
			}
			rjson_add(o, "registrants", regs);
			json_object_array_add(list, o);
		}
		json_print_list(r, "reservations", list);
		free(rows);
		return;
	}
	for (unsigned int i = 0; i < n; i++) {
		const struct pr_data *d = &rows[i].d;

		fprintf(f, "export %s: %s, generation %u, %u registrant%s\n",
			rows[i].name, rblk_pr_type_str(d->type), d->generation,
			d->nr, d->nr == 1 ? "" : "s");
		for (unsigned int k = 0; k < d->nr; k++)
			fprintf(f, "  host %s key 0x%llx%s\n", d->regs[k].host,
				(unsigned long long)d->regs[k].key,
				pr_is_holder(d, d->regs[k].host) ? " (holder)"
								 : "");
	}
	free(rows);
}

static void cmd_help(struct target *t, struct ctl_req *r)
{
	(void)t;
	if (parse_opts(r, NULL, NULL, 0, 0) < 0)
		return;
	fputs(
	    "commands (each takes -o json):\n"
	    "  list-exports\n"
	    "  list-sessions [--export NAME]\n"
	    "  add-export NAME PATH [--read-only] [--block-size N] [--cache direct|buffered]\n"
	    "             [--allow H,..] [--allow-ro H,..]\n"
	    "  remove-export NAME [--force [--wait]]\n"
	    "  resize-export NAME [SIZE] [--force]\n"
	    "          (no SIZE: take the size of the device, file or image now;\n"
	    "          shrinking needs --force)\n"
	    "  set-hosts EXPORT [--allow H1,H2] [--allow-ro H3] | --open\n"
	    "  set-qos EXPORT KEY=VALUE... | --host NAME KEY=VALUE...\n"
	    "          (iops, read_iops, write_iops, bps, read_bps, write_bps,\n"
	    "          burst_ms; 0 lifts one limit, off all)\n"
	    "  stats [EXPORT]\n"
	    "  list-reservations [EXPORT]\n",
	    r->out);
}

static const struct {
	const char *name;
	void (*fn)(struct target *t, struct ctl_req *r);
} commands[] = {
    {"help", cmd_help},
    {"list-exports", cmd_list_exports},
    {"list-sessions", cmd_list_sessions},
    {"add-export", cmd_add_export},
    {"remove-export", cmd_remove_export},
    {"resize-export", cmd_resize_export},
    {"set-hosts", cmd_set_hosts},
    {"set-qos", cmd_set_qos},
    {"stats", cmd_stats},
    {"list-reservations", cmd_list_reservations},
};

/* Run one request line; the response (status line and body) goes to out. */
void ctl_run(struct target *t, char *line, FILE *out)
{
	struct ctl_req r = {0};
	char *body = NULL;
	size_t body_len = 0;

	r.out = open_memstream(&body, &body_len);
	if (!r.out) {
		fputs("error: out of memory\n", out);
		return;
	}
	if (!split_line(line, &r) && r.argc == 0)
		ctl_req_fail(&r, "empty request (try 'help')");
	if (!r.err[0]) {
		size_t i;

		for (i = 0; i < ARRAY_SIZE(commands); i++)
			if (!strcmp(commands[i].name, r.argv[0]))
				break;
		if (i == ARRAY_SIZE(commands))
			ctl_req_fail(&r, "unknown command '%s' (try 'help')",
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
