/* SPDX-License-Identifier: MIT */
/*
 * rblk-target's configuration file: INI through libinih, into the model
 * config.c keeps (cfg_load()). Every value goes through the same checks
 * as its command-line form.
 *
 * libinih does the INI syntax (comments, "key = value", stripping); a reader
 * of our own feeds it the file one line at a time so that we always know the
 * line being parsed. The reader also
 *   - strips leading whitespace, so indented keys are keys and never become
 *     libinih's multi-line continuations of the previous value;
 *   - sees section headers ([target], [export NAME]) itself, so a section
 *     with no keys is still checked;
 *   - refuses lines longer than libinih's line buffer instead of letting
 *     libinih split them silently.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/url.h"
#include "../common/util.h"
#include "config_internal.h"

/* ---- the INI file ------------------------------------------------------ */

enum {
	KEY_LISTEN,
	KEY_WORKERS,
	KEY_ENGINE,
	KEY_LOG_LEVEL,
	KEY_MAX_QD,
	KEY_MAX_IO,
	KEY_CTL_SOCKET,
	KEY_CTL_SOCKET_MODE,
	KEY_UNIX_SOCKET_MODE,
	KEY_METRICS,
	KEY_NAME,
	KEY_SLOT_POOL,
	KEY_CEPH_CONF,
	KEY_CEPH_ID,
	KEY_CEPH_KEYRING,
	KEY_RBD_CONNS,
	KEY_RBD_TAKEOVER,
	KEY_RBD_TIMEOUT,
	KEY_ALLOW_ANY_HOST,
	KEY_INLINE_DATA,
	NR_TARGET_KEYS
};
enum {
	KEY_PATH,
	KEY_READ_ONLY,
	KEY_BLOCK_SIZE,
	KEY_ALLOW,
	KEY_ALLOW_RO,
	KEY_DIRECT,
	KEY_UUID,
	KEY_OVERCOMMIT,
	KEY_CACHE,
	KEY_PR_FILE,
	NR_EXPORT_KEYS
};
enum { KEY_SECRET, KEY_SECRET_FILE, NR_HOST_KEYS };

static const char *const target_keys[NR_TARGET_KEYS] = {
    [KEY_LISTEN] = "listen",
    [KEY_WORKERS] = "workers",
    [KEY_ENGINE] = "engine",
    [KEY_LOG_LEVEL] = "log_level",
    [KEY_MAX_QD] = "max_queue_depth",
    [KEY_MAX_IO] = "max_io",
    [KEY_CTL_SOCKET] = "ctl_socket",
    [KEY_CTL_SOCKET_MODE] = "ctl_socket_mode",
    [KEY_UNIX_SOCKET_MODE] = "unix_socket_mode",
    [KEY_METRICS] = "metrics",
    [KEY_NAME] = "name",
    [KEY_SLOT_POOL] = "slot_pool",
    [KEY_INLINE_DATA] = "inline_data",
    [KEY_CEPH_CONF] = "ceph_conf",
    [KEY_CEPH_ID] = "ceph_id",
    [KEY_CEPH_KEYRING] = "ceph_keyring",
    [KEY_RBD_CONNS] = "rbd_cluster_connections",
    [KEY_RBD_TAKEOVER] = "rbd_takeover",
    [KEY_RBD_TIMEOUT] = "rbd_timeout",
    [KEY_ALLOW_ANY_HOST] = "allow_any_host",
};
static const char *const export_keys[NR_EXPORT_KEYS] = {
    [KEY_PATH] = "path",
    [KEY_READ_ONLY] = "read_only",
    [KEY_BLOCK_SIZE] = "block_size",
    [KEY_ALLOW] = "allow",
    [KEY_ALLOW_RO] = "allow_ro",
    [KEY_DIRECT] = "direct",
    [KEY_UUID] = "uuid",
    [KEY_OVERCOMMIT] = "overcommit",
    [KEY_CACHE] = "cache",
    [KEY_PR_FILE] = "pr_file",
};
static const char *const host_keys[NR_HOST_KEYS] = {
    [KEY_SECRET] = "secret",
    [KEY_SECRET_FILE] = "secret_file",
};

enum section { SEC_NONE, SEC_TARGET, SEC_EXPORT, SEC_HOST };

struct parse_ctx {
	struct cfg_target *cfg; /* a scratch copy, committed on success */
	FILE *f;
	char *line; /* getline buffer */
	size_t line_cap;
	int lineno; /* the line libinih is working on */
	enum section sec;
	unsigned int exp;	/* SEC_EXPORT: index into cfg->exports */
	unsigned int first_new; /* exports below this came from the caller */
	int target_seen[NR_TARGET_KEYS]; /* line of first use, 0: none */
	int export_seen[CFG_MAX_EXPORTS][NR_EXPORT_KEYS];
	int export_line[CFG_MAX_EXPORTS]; /* line of [export NAME] */
	unsigned int host;		  /* SEC_HOST: index into cfg->hosts */
	unsigned int first_new_host;
	int host_seen[CFG_MAX_HOSTS][NR_HOST_KEYS];
	int host_line[CFG_MAX_HOSTS];
	int err_line; /* first error found by us, 0: none */
	char err[512];
};

static int ctx_fail(struct parse_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Record the first error; returns 0 so a handler can return it to inih. */
static int ctx_fail(struct parse_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->err_line)
		return 0;
	c->err_line = c->lineno;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return 0;
}

/* "[host NAME]": name is trimmed. */
static void host_section_begin(struct parse_ctx *c, const char *name)
{
	const struct cfg_host *old;
	struct cfg_host *h;
	char why[256];
	int ret;

	c->sec = SEC_NONE;
	if (!*name) {
		ctx_fail(c, "[host] needs a name: [host NAME]");
		return;
	}
	old = cfg_find_host(c->cfg, name);
	if (old) {
		unsigned int i = (unsigned int)(old - c->cfg->hosts);

		if (i >= c->first_new_host)
			ctx_fail(c,
				 "host '%s' defined twice (first on line %d)",
				 name, c->host_line[i]);
		else
			ctx_fail(c, "host '%s' is already defined", name);
		return;
	}
	h = cfg_new_host(c->cfg, name, why, sizeof(why), &ret);
	if (!h) {
		ctx_fail(c, "[host %s]: %s", name, why);
		return;
	}
	c->sec = SEC_HOST;
	c->host = (unsigned int)(h - c->cfg->hosts);
	c->host_line[c->host] = c->lineno;
}

/* "[target]" or "[export NAME]" on line c->lineno; text is inside [ ]. */
static void section_begin(struct parse_ctx *c, char *text)
{
	struct cfg_export *e;
	char why[256];
	char *name;
	int ret;

	text = cfg_trim(text);
	if (!strcmp(text, "target")) {
		c->sec = SEC_TARGET;
		return;
	}
	if (!strncmp(text, "host", 4) &&
	    (!text[4] || isspace((unsigned char)text[4]))) {
		host_section_begin(c, cfg_trim(text + 4));
		return;
	}
	if (strncmp(text, "export", 6) ||
	    (text[6] && !isspace((unsigned char)text[6]))) {
		c->sec = SEC_NONE;
		ctx_fail(
		    c,
		    "unknown section [%s] (known: [target], [export NAME], [host NAME])",
		    text);
		return;
	}
	name = cfg_trim(text + 6);
	if (!*name) {
		ctx_fail(c, "[export] needs a name: [export NAME]");
		return;
	}
	e = cfg_find_export(c->cfg, name);
	if (e) {
		unsigned int i = (unsigned int)(e - c->cfg->exports);

		if (i >= c->first_new)
			ctx_fail(c,
				 "export '%s' defined twice (first on line %d)",
				 name, c->export_line[i]);
		else
			ctx_fail(c, "export '%s' is already defined", name);
		return;
	}
	e = cfg_new_export(c->cfg, name, why, sizeof(why), &ret);
	if (!e) {
		ctx_fail(c, "[export %s]: %s", name, why);
		return;
	}
	c->sec = SEC_EXPORT;
	c->exp = (unsigned int)(e - c->cfg->exports);
	c->export_line[c->exp] = c->lineno;
}

/*
 * fgets-style reader for ini_parse_stream(): one whole line per call, with
 * leading whitespace removed. Stops the parse (returns NULL) once an error
 * has been recorded.
 */
static char *ctx_read_line(char *str, int num, void *stream)
{
	struct parse_ctx *c = stream;
	ssize_t n;
	char *s, *end;

	if (c->err_line)
		return NULL;
	n = getline(&c->line, &c->line_cap, c->f);
	if (n < 0)
		return NULL;
	c->lineno++;
	if (memchr(c->line, 0, (size_t)n)) {
		ctx_fail(c, "NUL byte in line");
		return NULL;
	}
	s = c->line;
	if (c->lineno == 1 && !strncmp(s, "\xef\xbb\xbf", 3))
		s += 3; /* a UTF-8 byte order mark */
	while (*s == ' ' || *s == '\t')
		s++;
	n -= s - c->line;
	if (num < 2 || n > num - 1) {
		ctx_fail(c, "line too long (at most %d characters)", num - 2);
		return NULL;
	}
	memcpy(str, s, (size_t)n + 1);
	if (*s == '[') {
		end = strchr(s, ']');
		if (end) {
			char *rest = cfg_trim(end + 1);

			if (*rest && *rest != ';' && *rest != '#') {
				ctx_fail(c, "unexpected '%s' after ']'", rest);
				return NULL;
			}
			*end = 0;
			section_begin(c, s + 1);
			if (c->err_line)
				return NULL;
		}
		/* without ']', libinih reports the syntax error */
	}
	return str;
}

/* Line of an earlier use of a key that may appear once, else records it. */
static bool seen_before(struct parse_ctx *c, int *seen, const char *key)
{
	if (*seen) {
		ctx_fail(c, "'%s' given twice (first on line %d)", key, *seen);
		return true;
	}
	*seen = c->lineno;
	return false;
}

/*
 * The [target] keys of the rbd backend (ceph_*, rbd_*), once target_key()
 * has checked that key is not given twice. 1, or 0 with the error
 * recorded (inih's convention).
 */
static int ceph_key(struct parse_ctx *c, int key, const char *value)
{
	struct cfg_ceph *ceph = &c->cfg->ceph;
	unsigned long v;

	switch (key) {
	case KEY_CEPH_CONF:
	case KEY_CEPH_KEYRING:
		if (strlen(value) >= PATH_MAX)
			return ctx_fail(c, "%s: path too long",
					target_keys[key]);
		snprintf(key == KEY_CEPH_CONF ? ceph->conf : ceph->keyring,
			 PATH_MAX, "%s", value);
		return 1;
	case KEY_CEPH_ID:
		if (strlen(value) >= sizeof(ceph->id) || strpbrk(value, " \t/"))
			return ctx_fail(
			    c,
			    "ceph_id: '%s' is not a client id (e.g. admin, for client.admin)",
			    value);
		snprintf(ceph->id, sizeof(ceph->id), "%s", value);
		return 1;
	case KEY_RBD_CONNS:
		if (parse_uint(value, 1, 64, &v))
			return ctx_fail(
			    c,
			    "rbd_cluster_connections: '%s' is not a number from 1 to 64",
			    value);
		ceph->connections = (unsigned int)v;
		return 1;
	case KEY_RBD_TAKEOVER:
		if (cfg_parse_bool(value, &ceph->takeover))
			return ctx_fail(
			    c,
			    "rbd_takeover: '%s' is not yes/no, true/false, on/off or 1/0",
			    value);
		return 1;
	case KEY_RBD_TIMEOUT:
		if (parse_uint(value, 1, 3600, &v))
			return ctx_fail(
			    c,
			    "rbd_timeout: '%s' is not a number of seconds from 1 to 3600",
			    value);
		ceph->timeout_s = (unsigned int)v;
		return 1;
	}
	return ctx_fail(c, "internal error: key %d", key);
}

/* One key of [target]: 1, or 0 with the error recorded (for inih). */
static int target_key(struct parse_ctx *c, int key, const char *value)
{
	struct cfg_target *cfg = c->cfg;
	unsigned long v;
	uint64_t size;
	char why[256];
	int lvl;
	bool b;

	if (key != KEY_LISTEN &&
	    seen_before(c, &c->target_seen[key], target_keys[key]))
		return 0;
	switch (key) {
	case KEY_LISTEN:
		if (cfg_add_listen(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_WORKERS:
		if (parse_uint(value, 0, CFG_MAX_WORKERS, &v))
			return ctx_fail(
			    c,
			    "workers: '%s' is not a number from 0 (one per CPU) to %d",
			    value, CFG_MAX_WORKERS);
		cfg->workers = (unsigned int)v;
		return 1;
	case KEY_ENGINE:
		if (strcmp(value, "io_uring") && strcmp(value, "libaio"))
			return ctx_fail(
			    c, "engine: '%s' is not io_uring or libaio", value);
		snprintf(cfg->engine, sizeof(cfg->engine), "%s", value);
		return 1;
	case KEY_LOG_LEVEL:
		lvl = log_parse_level(value);
		if (lvl < 0)
			return ctx_fail(
			    c,
			    "log_level: '%s' is not error, warn, info or debug",
			    value);
		cfg->log_level = lvl;
		return 1;
	case KEY_MAX_QD:
		if (parse_uint(value, 1, RBLK_MAX_QD, &v))
			return ctx_fail(
			    c,
			    "max_queue_depth: '%s' is not a number from 1 to %d",
			    value, RBLK_MAX_QD);
		cfg->max_queue_depth = (unsigned int)v;
		return 1;
	case KEY_SLOT_POOL:
		if (cfg_set_slot_pool(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_INLINE_DATA:
		if (cfg_set_inline_data(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_MAX_IO:
		if (parse_size(value, &size))
			return ctx_fail(c, "max_io: '%s' is not a size", value);
		if (cfg_check_max_io(size, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		cfg->max_io = (uint32_t)size;
		return 1;
	case KEY_CTL_SOCKET:
		if (cfg_set_ctl_socket(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_CTL_SOCKET_MODE:
		if (cfg_set_ctl_socket_mode(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_UNIX_SOCKET_MODE:
		if (cfg_set_unix_socket_mode(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_METRICS:
		if (cfg_set_metrics(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_NAME:
		if (cfg_check_host_name(value, why, sizeof(why)))
			return ctx_fail(c, "name: %s", why);
		snprintf(cfg->name, sizeof(cfg->name), "%s", value);
		return 1;
	case KEY_CEPH_CONF:
	case KEY_CEPH_KEYRING:
	case KEY_CEPH_ID:
	case KEY_RBD_CONNS:
	case KEY_RBD_TAKEOVER:
	case KEY_RBD_TIMEOUT:
		return ceph_key(c, key, value);
	case KEY_ALLOW_ANY_HOST:
		if (cfg_parse_bool(value, &b))
			return ctx_fail(
			    c,
			    "allow_any_host: '%s' is not yes/no, true/false, on/off or 1/0",
			    value);
		cfg->allow_any_host = b;
		return 1;
	}
	return ctx_fail(c, "internal error: key %d", key);
}

static int export_key(struct parse_ctx *c, int key, const char *value)
{
	struct cfg_export *e = &c->cfg->exports[c->exp];
	uint64_t bs;
	char why[256];
	bool b;

	if (seen_before(c, &c->export_seen[c->exp][key], export_keys[key]))
		return 0;
	switch (key) {
	case KEY_PATH:
		if (cfg_check_export_path(value, why, sizeof(why)))
			return ctx_fail(c, "export '%s': %s", e->name, why);
		snprintf(e->path, sizeof(e->path), "%s", value);
		return 1;
	case KEY_READ_ONLY:
		if (cfg_parse_bool(value, &b))
			return ctx_fail(
			    c,
			    "read_only: '%s' is not yes/no, true/false, on/off or 1/0",
			    value);
		e->read_only = b;
		return 1;
	case KEY_BLOCK_SIZE:
		if (parse_size(value, &bs))
			return ctx_fail(c, "block_size: '%s' is not a size",
					value);
		if (cfg_check_block_size(bs, why, sizeof(why)))
			return ctx_fail(c, "export '%s': %s", e->name, why);
		e->block_size = (uint32_t)bs;
		return 1;
	case KEY_ALLOW:
	case KEY_ALLOW_RO:
		if (cfg_add_allow(e, value, key == KEY_ALLOW_RO, why,
				  sizeof(why)))
			return ctx_fail(c, "export '%s': %s: %s", e->name,
					export_keys[key], why);
		return 1;
	case KEY_DIRECT:
		if (cfg_parse_bool(value, &b))
			return ctx_fail(
			    c,
			    "direct: '%s' is not yes/no, true/false, on/off or 1/0",
			    value);
		e->direct = b ? CFG_DIRECT_YES : CFG_DIRECT_NO;
		return 1;
	case KEY_CACHE:
		if (cfg_parse_cache(value, &e->cache_buffered))
			return ctx_fail(
			    c, "cache: '%s' is not direct or buffered", value);
		return 1;
	case KEY_PR_FILE:
		if (value[0] != '/' || strlen(value) >= sizeof(e->pr_file))
			return ctx_fail(
			    c, "pr_file: '%s' is not an absolute path", value);
		snprintf(e->pr_file, sizeof(e->pr_file), "%s", value);
		return 1;
	case KEY_UUID:
		if (cfg_parse_uuid(value, e->uuid))
			return ctx_fail(
			    c, "uuid: '%s' is not 8-4-4-4-12 hex digits",
			    value);
		e->has_uuid = true;
		return 1;
	case KEY_OVERCOMMIT:
		if (cfg_parse_bool(value, &b))
			return ctx_fail(
			    c,
			    "overcommit: '%s' is not yes/no, true/false, on/off or 1/0",
			    value);
		e->overcommit = b;
		return 1;
	}
	return ctx_fail(c, "internal error: key %d", key);
}

static int host_key(struct parse_ctx *c, int key, const char *value)
{
	struct cfg_host *h = &c->cfg->hosts[c->host];
	char why[512];
	int *seen = c->host_seen[c->host];

	if (seen_before(c, &seen[key], host_keys[key]))
		return 0;
	if (seen[KEY_SECRET] && seen[KEY_SECRET_FILE])
		return ctx_fail(
		    c, "host '%s': give secret or secret_file, not both",
		    h->name);
	switch (key) {
	case KEY_SECRET:
		if (rblk_auth_check_secret(value, strlen(value), why,
					   sizeof(why)))
			return ctx_fail(c, "host '%s': %s", h->name, why);
		h->secret_len = strlen(value);
		memcpy(h->secret, value, h->secret_len);
		return 1;
	case KEY_SECRET_FILE:
		if (rblk_auth_load_secret(value, h->secret, &h->secret_len, why,
					  sizeof(why)))
			return ctx_fail(c, "host '%s': %s", h->name, why);
		return 1;
	}
	return ctx_fail(c, "internal error: key %d", key);
}

#define QOS_KEYS                                                               \
	"iops, read_iops, write_iops, bps, read_bps, write_bps, burst_ms"

/*
 * A QoS key of [export] or [host] (config.h, struct cfg_qos): true when
 * name is one, with an error recorded if its value is bad.
 */
static bool qos_key(struct parse_ctx *c, struct cfg_qos *q, const char *name,
		    const char *value)
{
	char why[256];
	int ret = cfg_qos_set(q, name, value, why, sizeof(why));

	if (ret == -ENOENT)
		return false;
	if (ret)
		ctx_fail(c, "%s", why);
	return true;
}

/* `tls` of [export] or [host]: true when name is it (error recorded). */
static bool tls_key(struct parse_ctx *c, uint8_t *tls, const char *name,
		    const char *value)
{
	enum cfg_tls t;

	if (strcmp(name, "tls"))
		return false;
	if (cfg_parse_tls(value, &t))
		ctx_fail(c, "tls: '%s' is not off, optional or required",
			 value);
	else
		*tls = (uint8_t)t;
	return true;
}

static int lookup_key(const char *const *keys, int nr, const char *name)
{
	for (int i = 0; i < nr; i++)
		if (!strcmp(keys[i], name))
			return i;
	return -1;
}

/* libinih callback: one "name = value" of the line at c->lineno. */
static int ini_handler_cb(void *user, const char *section, const char *name,
			  const char *value)
{
	struct parse_ctx *c = user;
	int key;

	(void)section; /* we track sections ourselves, see ctx_read_line() */
	if (c->err_line)
		return 0;
	/* libinih also splits at ':', so "listen tcp://h" arrives here */
	if (!*name || strpbrk(name, " \t"))
		return ctx_fail(c, "syntax error: expected key = value");
	if (!*value)
		return ctx_fail(c, "'%s' has no value", name);
	switch (c->sec) {
	case SEC_NONE:
		return ctx_fail(
		    c,
		    "'%s' outside a section ([target], [export NAME] or [host NAME])",
		    name);
	case SEC_HOST:
		key = lookup_key(host_keys, NR_HOST_KEYS, name);
		if (key < 0 &&
		    tls_key(c, &c->cfg->hosts[c->host].tls, name, value))
			return !c->err_line;
		if (key < 0 &&
		    qos_key(c, &c->cfg->hosts[c->host].qos, name, value))
			return !c->err_line;
		if (key < 0)
			return ctx_fail(
			    c,
			    "unknown key '%s' in [host %s] (known: secret, secret_file, tls, " QOS_KEYS
			    ")",
			    name, c->cfg->hosts[c->host].name);
		return host_key(c, key, value);
	case SEC_TARGET:
		key = lookup_key(target_keys, NR_TARGET_KEYS, name);
		if (key < 0) {
			char why[256];
			int ret = cfg_set_limit(c->cfg, name, value, why,
						sizeof(why));

			if (ret == -ENOENT)
				ret = cfg_set_tls_key(c->cfg, name, value, why,
						      sizeof(why));
			if (ret == 0)
				return 1;
			if (ret != -ENOENT)
				return ctx_fail(c, "%s", why);
		}
		if (key < 0)
			return ctx_fail(
			    c,
			    "unknown key '%s' in [target] (known: listen, workers, engine, log_level, max_queue_depth, max_io, slot_pool, inline_data, max_pending, max_pending_per_host, max_sessions, max_sessions_per_host, idle_timeout, poll_spin_us, session_pool_share, window_timeout, ctl_socket, ctl_socket_mode, unix_socket_mode, metrics, name, ceph_conf, ceph_id, ceph_keyring, rbd_cluster_connections, rbd_takeover, rbd_timeout, allow_any_host, tls, tls_cert, tls_key, tls_ca)",
			    name);
		return target_key(c, key, value);
	case SEC_EXPORT:
		key = lookup_key(export_keys, NR_EXPORT_KEYS, name);
		if (key < 0 &&
		    tls_key(c, &c->cfg->exports[c->exp].tls, name, value))
			return !c->err_line;
		if (key < 0 &&
		    qos_key(c, &c->cfg->exports[c->exp].qos, name, value))
			return !c->err_line;
		if (key < 0)
			return ctx_fail(
			    c,
			    "unknown key '%s' in [export %s] (known: path, read_only, block_size, allow, allow_ro, direct, uuid, overcommit, cache, tls, " QOS_KEYS
			    ")",
			    name, c->cfg->exports[c->exp].name);
		return export_key(c, key, value);
	}
	return ctx_fail(c, "internal error: section %d", c->sec);
}

/*
 * Open the configuration file without waiting on a FIFO or a device, and
 * only if it is a regular file of at most CFG_MAX_FILE_SIZE bytes: so a
 * path such as /dev/zero or a pipe is refused at once instead of being
 * read forever.
 */
static int open_config(const char *path, FILE **fp, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	fd = open_user_path(path, O_RDONLY, &st);
	if (fd < 0)
		return fail(err, errlen, fd, "%s: %s", path, strerror(-fd));
	if (!S_ISREG(st.st_mode)) {
		ret =
		    fail(err, errlen, -EINVAL,
			 "%s: not a regular file (a configuration file is one)",
			 path);
		goto out_close;
	}
	if (st.st_size > CFG_MAX_FILE_SIZE) {
		ret = fail(
		    err, errlen, -EFBIG,
		    "%s: %lld bytes, more than the %d a configuration file may have",
		    path, (long long)st.st_size, CFG_MAX_FILE_SIZE);
		goto out_close;
	}
	*fp = fdopen(fd, "r");
	if (!*fp) {
		ret =
		    fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto out_close;
	}
	return 0;

out_close:
	close(fd);
	return ret;
}

int cfg_load(struct cfg_target *cfg, const char *path, char *err, size_t errlen)
{
	struct parse_ctx *c;
	int ret, line;

	c = calloc(1, sizeof(*c));
	if (!c)
		return fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	c->cfg = malloc(sizeof(*c->cfg));
	if (!c->cfg) {
		ret = fail(err, errlen, -ENOMEM, "%s: out of memory", path);
		goto out_free_ctx;
	}
	memcpy(c->cfg, cfg, sizeof(*cfg));
	c->first_new = cfg->nr_exports;
	c->first_new_host = cfg->nr_hosts;
	ret = open_config(path, &c->f, err, errlen);
	if (ret)
		goto out_free_cfg;

	line = ini_parse_stream(ctx_read_line, c, ini_handler_cb, c);
	if (ferror(c->f)) {
		ret = fail(err, errlen, -EIO, "%s:%d: read error", path,
			   c->lineno + 1);
		goto out_close;
	}
	if (line < 0) {
		ret = fail(err, errlen, -ENOMEM, "%s: out of memory", path);
		goto out_close;
	}
	if (line > 0 && (!c->err_line || line < c->err_line)) {
		/* inih found a line it could not parse before we objected */
		ret = fail(
		    err, errlen, -EINVAL,
		    "%s:%d: syntax error (expected [section], key = value, or a ; comment)",
		    path, line);
		goto out_close;
	}
	if (c->err_line) {
		ret = fail(err, errlen, -EINVAL, "%s:%d: %s", path, c->err_line,
			   c->err);
		goto out_close;
	}
	for (unsigned int i = c->first_new; i < c->cfg->nr_exports; i++) {
		if (!c->cfg->exports[i].path[0]) {
			ret = fail(err, errlen, -EINVAL,
				   "%s:%d: export '%s' has no path", path,
				   c->export_line[i], c->cfg->exports[i].name);
			goto out_close;
		}
	}
	for (unsigned int i = c->first_new_host; i < c->cfg->nr_hosts; i++) {
		if (!c->cfg->hosts[i].secret_len) {
			ret = fail(
			    err, errlen, -EINVAL,
			    "%s:%d: host '%s' has no secret (give secret_file = PATH or secret = TEXT)",
			    path, c->host_line[i], c->cfg->hosts[i].name);
			goto out_close;
		}
	}
	memcpy(cfg, c->cfg, sizeof(*cfg));
	ret = 0;
out_close:
	sodium_memzero(c->cfg->hosts, sizeof(c->cfg->hosts));
	fclose(c->f);
	free(c->line);
out_free_cfg:
	free(c->cfg);
out_free_ctx:
	free(c);
	return ret;
}
