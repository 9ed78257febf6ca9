/* SPDX-License-Identifier: MIT */
/*
 * rblk-target configuration: INI files through libinih, and the --export /
 * --listen command-line forms. Every value is checked here, so the daemon
 * only ever sees a configuration that makes sense.
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

#define CFG_MAX_WORKERS 1024

/* format into the caller's err buffer (when given), return ret */
#define fail errbuf_printf

void cfg_init(struct cfg_target *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->engine, sizeof(cfg->engine), "io_uring");
	cfg->log_level = -1;
	cfg->max_queue_depth = 128;
	cfg->max_io = RBLK_DEFAULT_MAX_IO;
	cfg->slot_pool = CFG_DEFAULT_SLOT_POOL;
	cfg->inline_data = CFG_INLINE_AUTO;
	cfg->max_pending = CFG_DEFAULT_MAX_PENDING;
	cfg->max_pending_per_host = CFG_DEFAULT_MAX_PENDING_PER_HOST;
	cfg->max_sessions = CFG_DEFAULT_MAX_SESSIONS;
	cfg->max_sessions_per_host = CFG_DEFAULT_MAX_SESSIONS_PER_HOST;
	cfg->idle_timeout = CFG_DEFAULT_IDLE_TIMEOUT;
	snprintf(cfg->ctl_socket, sizeof(cfg->ctl_socket), "%s",
		 CFG_DEFAULT_CTL_SOCKET);
	cfg->ctl_socket_mode = 0600;
	snprintf(cfg->ceph.id, sizeof(cfg->ceph.id), "admin");
	cfg->ceph.connections = 1;
	cfg->ceph.takeover = true;
	cfg->ceph.timeout_s = 20;
}

/* ---- value checks, shared by the file, the options and cfg_validate ---- */

/* 1..127 bytes of printable ASCII, no '/', no whitespace. */
static int check_export_name(const char *name, char *err, size_t errlen)
{
	size_t n = strnlen(name, RBLK_NAME_MAX);

	if (n == 0)
		return fail(err, errlen, -EINVAL, "empty export name");
	if (n >= RBLK_NAME_MAX)
		return fail(err, errlen, -EINVAL,
			    "export name longer than %d bytes", RBLK_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x21 || c > 0x7e || c == '/')
			return fail(err, errlen, -EINVAL,
				    "export name '%.*s' holds a bad character (0x%02x): use printable ASCII without '/' or spaces",
				    (int)n, name, c);
	}
	return 0;
}

/* A path, or "ram:SIZE" with SIZE > 0 and a multiple of 4096. */
static int check_export_path(const char *path, char *err, size_t errlen)
{
	uint64_t size;

	if (!*path)
		return fail(err, errlen, -EINVAL, "empty path");
	if (strnlen(path, PATH_MAX) >= PATH_MAX)
		return fail(err, errlen, -EINVAL, "path longer than %d bytes",
			    PATH_MAX - 1);
	if (strncmp(path, "ram:", 4))
		return 0;
	if (parse_size(path + 4, &size))
		return fail(err, errlen, -EINVAL,
			    "bad RAM size '%s' (want ram:SIZE, e.g. ram:1G)",
			    path + 4);
	if (size == 0 || size % 4096)
		return fail(err, errlen, -EINVAL,
			    "RAM size '%s' must be a positive multiple of 4096",
			    path + 4);
	return 0;
}

/* 0 (choose) or a power of two in 512..65536. */
static int check_block_size(uint64_t bs, char *err, size_t errlen)
{
	if (bs == 0 || (IS_POW2(bs) && bs >= 512 && bs <= 65536))
		return 0;
	return fail(err, errlen, -EINVAL,
		    "block size %llu is not 0 or a power of two from 512 to 65536",
		    (unsigned long long)bs);
}

/* "0123abcd-..." (8-4-4-4-12 hex digits) -> 16 bytes; 0 or -EINVAL. */
int cfg_parse_cache(const char *s, bool *buffered)
{
	if (!strcmp(s, "buffered"))
		*buffered = true;
	else if (!strcmp(s, "direct"))
		*buffered = false;
	else
		return -EINVAL;
	return 0;
}

static int parse_uuid(const char *s, uint8_t out[16])
{
	unsigned int n = 0;

	if (strlen(s) != 36)
		return -EINVAL;
	for (int i = 0; i < 36; i++) {
		int hi, lo;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -EINVAL;
			continue;
		}
		if (!isxdigit((unsigned char)s[i]) ||
		    !isxdigit((unsigned char)s[i + 1]))
			return -EINVAL;
		hi = isdigit((unsigned char)s[i]) ? s[i] - '0' :
						    (tolower(s[i]) - 'a' + 10);
		lo = isdigit((unsigned char)s[i + 1]) ?
			     s[i + 1] - '0' :
			     (tolower(s[i + 1]) - 'a' + 10);
		out[n++] = (uint8_t)(hi << 4 | lo);
		i++;
	}
	return 0;
}

static int check_max_io(uint64_t v, char *err, size_t errlen)
{
	if (IS_POW2(v) && v >= RBLK_MIN_MAX_IO && v <= RBLK_MAX_MAX_IO)
		return 0;
	return fail(err, errlen, -EINVAL,
		    "max_io %llu is not a power of two from 4K to 8M",
		    (unsigned long long)v);
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "yes", "true", "1", "on" };
	static const char *const no[] = { "no", "false", "0", "off" };

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static struct cfg_export *find_export(const struct cfg_target *cfg,
				      const char *name)
{
	for (unsigned int i = 0; i < cfg->nr_exports; i++)
		if (!strcmp(cfg->exports[i].name, name))
			return (struct cfg_export *)&cfg->exports[i];
	return NULL;
}

/* Append an export named name with no path yet; the caller fills it. */
static struct cfg_export *new_export(struct cfg_target *cfg, const char *name,
				     char *err, size_t errlen, int *ret)
{
	struct cfg_export *e;

	*ret = check_export_name(name, err, errlen);
	if (*ret)
		return NULL;
	if (find_export(cfg, name)) {
		*ret = fail(err, errlen, -EINVAL, "export '%s' defined twice",
			    name);
		return NULL;
	}
	if (cfg->nr_exports >= CFG_MAX_EXPORTS) {
		*ret = fail(err, errlen, -ENOSPC, "more than %d exports",
			    CFG_MAX_EXPORTS);
		return NULL;
	}
	e = &cfg->exports[cfg->nr_exports++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	return e;
}

/* 1..127 bytes of printable ASCII without spaces or ','. */
static int check_host_name(const char *name, char *err, size_t errlen)
{
	size_t n = strnlen(name, RBLK_NAME_MAX);

	if (n == 0)
		return fail(err, errlen, -EINVAL, "empty host name");
	if (n >= RBLK_NAME_MAX)
		return fail(err, errlen, -EINVAL,
			    "host name longer than %d bytes", RBLK_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x21 || c > 0x7e || c == ',')
			return fail(err, errlen, -EINVAL,
				    "host name '%.*s' holds a bad character (0x%02x): use printable ASCII without ',' or spaces",
				    (int)n, name, c);
	}
	return 0;
}

const struct cfg_host *cfg_find_host(const struct cfg_target *cfg,
				     const char *name)
{
	for (unsigned int i = 0; i < cfg->nr_hosts; i++)
		if (!strcmp(cfg->hosts[i].name, name))
			return &cfg->hosts[i];
	return NULL;
}

int cfg_export_allows(const struct cfg_export *e, const char *name)
{
	for (unsigned int i = 0; i < e->nr_allow; i++)
		if (!strcmp(e->allow[i], name))
			return e->allow_ro[i] ? 1 : 0;
	return -1;
}

/* Append an empty host named name; the caller sets its secret. */
static struct cfg_host *new_host(struct cfg_target *cfg, const char *name,
				 char *err, size_t errlen, int *ret)
{
	struct cfg_host *h;

	*ret = check_host_name(name, err, errlen);
	if (*ret)
		return NULL;
	if (cfg_find_host(cfg, name)) {
		*ret = fail(err, errlen, -EINVAL, "host '%s' defined twice",
			    name);
		return NULL;
	}
	if (cfg->nr_hosts >= CFG_MAX_HOSTS) {
		*ret = fail(err, errlen, -ENOSPC, "more than %d hosts",
			    CFG_MAX_HOSTS);
		return NULL;
	}
	h = &cfg->hosts[cfg->nr_hosts++];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	return h;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/* Add the comma-separated host names in list to e's access list. */
static int add_allow(struct cfg_export *e, const char *list, bool ro,
		     char *err, size_t errlen)
{
	char buf[4096], *rest = buf, *name;
	int ret;

	if (strlen(list) >= sizeof(buf))
		return fail(err, errlen, -EINVAL, "host list too long");
	snprintf(buf, sizeof(buf), "%s", list);
	if (!strcmp(trim(buf), "any")) {
		if (ro)
			return fail(err, errlen, -EINVAL,
				    "allow_ro=any is not supported; give allow=any and read-only");
		if (e->restricted)
			return fail(err, errlen, -EINVAL,
				    "allow=any cannot be combined with a host list");
		e->allow_any = true;
		return 0;
	}
	if (e->allow_any)
		return fail(err, errlen, -EINVAL,
			    "allow=any cannot be combined with a host list");
	e->restricted = true;
	while ((name = strsep(&rest, ","))) {
		char *end;

		while (isspace((unsigned char)*name))
			name++;
		end = name + strlen(name);
		while (end > name && isspace((unsigned char)end[-1]))
			*--end = 0;
		ret = check_host_name(name, err, errlen);
		if (ret)
			return ret;
		if (cfg_export_allows(e, name) >= 0)
			return fail(err, errlen, -EINVAL,
				    "host '%s' listed twice in allow/allow_ro",
				    name);
		if (e->nr_allow >= CFG_MAX_ALLOW)
			return fail(err, errlen, -ENOSPC,
				    "more than %d hosts in allow/allow_ro",
				    CFG_MAX_ALLOW);
		snprintf(e->allow[e->nr_allow], RBLK_NAME_MAX, "%s", name);
		e->allow_ro[e->nr_allow++] = ro;
	}
	return 0;
}

int cfg_export_set_access(const struct cfg_target *cfg, struct cfg_export *e,
			  const char *allow, const char *allow_ro, char *err,
			  size_t errlen)
{
	int ret;

	e->restricted = false;
	e->allow_any = false;
	e->nr_allow = 0;
	if (allow && *allow) {
		ret = add_allow(e, allow, false, err, errlen);
		if (ret)
			return ret;
	}
	if (allow_ro && *allow_ro) {
		ret = add_allow(e, allow_ro, true, err, errlen);
		if (ret)
			return ret;
	}
	for (unsigned int i = 0; i < e->nr_allow; i++)
		if (!cfg_find_host(cfg, e->allow[i]))
			return fail(err, errlen, -EINVAL,
				    "host '%s' has no secret on this target ([host %s] or --host); every host in an access list needs one",
				    e->allow[i], e->allow[i]);
	if (!e->restricted && cfg->allow_any_host)
		e->allow_any = true;
	return 0;
}

/* The work of cfg_add_host_arg(); the reason goes to why. */
static int host_arg(struct cfg_target *cfg, const char *arg, char *why,
		    size_t whylen)
{
	char buf[RBLK_NAME_MAX + PATH_MAX + 64];
	struct cfg_host *h;
	uint8_t secret[RBLK_SECRET_MAX];
	size_t len;
	char *colon;
	int ret;

	if (strlen(arg) >= sizeof(buf))
		return fail(why, whylen, -EINVAL, "argument too long");
	snprintf(buf, sizeof(buf), "%s", arg);
	colon = strchr(buf, ':');
	if (!colon || colon == buf || strncmp(colon + 1, "secret-file=", 12) ||
	    !colon[13])
		return fail(why, whylen, -EINVAL,
			    "expected NAME:secret-file=PATH");
	*colon = 0;
	ret = check_host_name(buf, why, whylen);
	if (ret)
		return ret;
	if (cfg_find_host(cfg, buf))
		return fail(why, whylen, -EINVAL, "host '%s' defined twice",
			    buf);
	ret = rblk_auth_load_secret(colon + 13, secret, &len, why, whylen);
	if (ret)
		return ret;
	h = new_host(cfg, buf, why, whylen, &ret);
	if (h) {
		memcpy(h->secret, secret, len);
		h->secret_len = len;
	}
	memset(secret, 0, sizeof(secret));
	return h ? 0 : ret;
}

int cfg_add_host_arg(struct cfg_target *cfg, const char *arg, char *err,
		     size_t errlen)
{
	char why[512];
	int ret = host_arg(cfg, arg, why, sizeof(why));

	if (ret)
		fail(err, errlen, ret, "--host '%.80s%s': %s", arg,
		     strlen(arg) > 80 ? "..." : "", why);
	return ret;
}

int cfg_add_listen(struct cfg_target *cfg, const char *url, char *err,
		   size_t errlen)
{
	struct rblk_url u, o;
	char why[256];

	if (rblk_url_parse(url, RBLK_DEFAULT_PORT, &u, why, sizeof(why)))
		return fail(err, errlen, -EINVAL, "listen: %s", why);
	if (strcmp(u.scheme, "tcp") && strcmp(u.scheme, "rdma"))
		return fail(err, errlen, -EINVAL,
			    "listen '%s': scheme must be tcp:// or rdma://", url);
	if (u.export_name[0] || strchr(url + strlen(u.scheme) + 3, '/'))
		return fail(err, errlen, -EINVAL,
			    "listen '%s': a listen URL names no export (drop the '/...')",
			    url);
	if (strlen(url) >= sizeof(cfg->listen[0]))
		return fail(err, errlen, -EINVAL, "listen '%s': URL too long",
			    url);
	for (unsigned int i = 0; i < cfg->nr_listen; i++) {
		if (rblk_url_parse(cfg->listen[i], RBLK_DEFAULT_PORT, &o, NULL,
				   0))
			continue;
		if (!strcmp(o.scheme, u.scheme) && !strcmp(o.host, u.host) &&
		    o.port == u.port)
			return fail(err, errlen, -EINVAL,
				    "listen '%s' given twice", url);
	}
	if (cfg->nr_listen >= CFG_MAX_LISTEN)
		return fail(err, errlen, -ENOSPC, "more than %d listen URLs",
			    CFG_MAX_LISTEN);
	snprintf(cfg->listen[cfg->nr_listen++], sizeof(cfg->listen[0]), "%s",
		 url);
	return 0;
}

/* The work of cfg_add_export_arg(); the reason goes to why. */
static int export_arg(struct cfg_target *cfg, const char *arg, char *why,
		      size_t whylen)
{
	char buf[RBLK_NAME_MAX + PATH_MAX + 64];
	struct cfg_export *e;
	char *eq, *path, *opts, *opt;
	struct cfg_export acl = { 0 };
	enum cfg_direct direct = CFG_DIRECT_DEFAULT;
	bool ro = false, has_uuid = false, overcommit = false, buffered = false;
	uint8_t uuid[16];
	uint64_t bs = 0;
	int ret;

	if (strlen(arg) >= sizeof(buf))
		return fail(why, whylen, -EINVAL, "argument too long");
	snprintf(buf, sizeof(buf), "%s", arg);
	eq = strchr(buf, '=');
	if (!eq || eq == buf)
		return fail(why, whylen, -EINVAL,
			    "expected NAME=PATH[,ro][,bs=N][,direct][,cache=buffered][,allow=HOST|any][,allow_ro=HOST][,overcommit]");
	*eq = 0;
	path = eq + 1;
	opts = strchr(path, ',');
	if (opts)
		*opts++ = 0;
	ret = check_export_name(buf, why, whylen);
	if (ret)
		return ret;
	ret = check_export_path(path, why, whylen);
	if (ret)
		return ret;
	while (opts) {
		opt = strsep(&opts, ",");
		if (!strcmp(opt, "ro")) {
			ro = true;
		} else if (!strcmp(opt, "rw")) {
			ro = false;
		} else if (!strcmp(opt, "direct")) {
			direct = CFG_DIRECT_YES;
		} else if (!strcmp(opt, "nodirect")) {
			direct = CFG_DIRECT_NO;
		} else if (!strcmp(opt, "overcommit")) {
			overcommit = true;
		} else if (!strncmp(opt, "cache=", 6)) {
			if (cfg_parse_cache(opt + 6, &buffered))
				return fail(why, whylen, -EINVAL,
					    "bad cache '%.32s' (direct or buffered)",
					    opt + 6);
		} else if (!strncmp(opt, "bs=", 3)) {
			if (parse_size(opt + 3, &bs) ||
			    check_block_size(bs, NULL, 0))
				return fail(why, whylen, -EINVAL,
					    "bad bs '%.32s' (0 or a power of two from 512 to 65536)",
					    opt + 3);
		} else if (!strncmp(opt, "uuid=", 5)) {
			if (parse_uuid(opt + 5, uuid))
				return fail(why, whylen, -EINVAL,
					    "bad uuid '%.40s' (8-4-4-4-12 hex digits)",
					    opt + 5);
			has_uuid = true;
		} else if (!strncmp(opt, "allow=", 6)) {
			ret = add_allow(&acl, opt + 6, false, why, whylen);
			if (ret)
				return ret;
		} else if (!strncmp(opt, "allow_ro=", 9)) {
			ret = add_allow(&acl, opt + 9, true, why, whylen);
			if (ret)
				return ret;
		} else {
			return fail(why, whylen, -EINVAL,
				    "%s option '%.32s' (known: ro, rw, bs=N, direct, nodirect, cache=direct|buffered, uuid=UUID, allow=HOST|any, allow_ro=HOST, overcommit)",
				    *opt ? "unknown" : "empty", opt);
		}
	}
	e = new_export(cfg, buf, why, whylen, &ret);
	if (!e)
		return ret;
	e->restricted = acl.restricted;
	e->has_uuid = has_uuid;
	memcpy(e->uuid, uuid, has_uuid ? sizeof(e->uuid) : 0);
	e->allow_any = acl.allow_any;
	e->overcommit = overcommit;
	e->cache_buffered = buffered;
	e->nr_allow = acl.nr_allow;
	memcpy(e->allow, acl.allow, sizeof(acl.allow));
	memcpy(e->allow_ro, acl.allow_ro, sizeof(acl.allow_ro));
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->read_only = ro;
	e->block_size = (uint32_t)bs;
	e->direct = direct;
	return 0;
}

int cfg_add_export_arg(struct cfg_target *cfg, const char *arg, char *err,
		       size_t errlen)
{
	char why[512];
	int ret = export_arg(cfg, arg, why, sizeof(why));

	if (ret)
		fail(err, errlen, ret, "--export '%.80s%s': %s", arg,
		     strlen(arg) > 80 ? "..." : "", why);
	return ret;
}

int cfg_check_export(const struct cfg_export *e, char *err, size_t errlen)
{
	int ret = check_export_name(e->name, err, errlen);

	if (!ret)
		ret = check_export_path(e->path, err, errlen);
	if (!ret)
		ret = check_block_size(e->block_size, err, errlen);
	return ret;
}

int cfg_set_ctl_socket(struct cfg_target *cfg, const char *path, char *err,
		       size_t errlen)
{
	if (!*path)
		return fail(err, errlen, -EINVAL, "ctl_socket: empty path");
	if (strlen(path) >= sizeof(cfg->ctl_socket))
		return fail(err, errlen, -EINVAL,
			    "ctl_socket '%.40s...': longer than %zu bytes (a unix socket limit)",
			    path, sizeof(cfg->ctl_socket) - 1);
	snprintf(cfg->ctl_socket, sizeof(cfg->ctl_socket), "%s", path);
	cfg->ctl_socket_set = true;
	return 0;
}

int cfg_set_ctl_socket_mode(struct cfg_target *cfg, const char *mode,
			    char *err, size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(mode, &end, 8);
	if (!*mode || *end || errno || v > 0777 || !(v & 0600))
		return fail(err, errlen, -EINVAL,
			    "ctl_socket_mode: '%s' is not an octal mode from 0200 to 0777 that lets the owner in",
			    mode);
	/*
	 * Connecting to a unix socket needs write permission, so 0660 is how
	 * a dedicated group gets in; any user at all never should.
	 */
	if (v & 0002)
		return fail(err, errlen, -EINVAL,
			    "ctl_socket_mode: '%s' lets every local user connect, and whoever connects can add and remove exports; use 0600, or 0660 with a dedicated group",
			    mode);
	cfg->ctl_socket_mode = (unsigned int)v;
	return 0;
}

int cfg_set_limit(struct cfg_target *cfg, const char *key, const char *value,
		  char *err, size_t errlen)
{
	static const struct {
		const char *name;
		size_t off;
		unsigned long min, max;
	} keys[] = {
		{ "max_pending", offsetof(struct cfg_target, max_pending), 1,
		  1000000 },
		{ "max_pending_per_host",
		  offsetof(struct cfg_target, max_pending_per_host), 1,
		  1000000 },
		{ "max_sessions", offsetof(struct cfg_target, max_sessions), 1,
		  1000000 },
		{ "max_sessions_per_host",
		  offsetof(struct cfg_target, max_sessions_per_host), 1,
		  1000000 },
		{ "idle_timeout", offsetof(struct cfg_target, idle_timeout), 0,
		  86400 },
	};
	unsigned long v;

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		if (strcmp(keys[i].name, key))
			continue;
		if (parse_uint(value, keys[i].min, keys[i].max, &v)) {
			snprintf(err, errlen, "%s: '%s' is not a number from %lu to %lu",
				 key, value, keys[i].min, keys[i].max);
			return -EINVAL;
		}
		*(unsigned int *)((char *)cfg + keys[i].off) = (unsigned int)v;
		return 0;
	}
	return -ENOENT;
}

int cfg_set_inline_data(struct cfg_target *cfg, const char *value, char *err,
			size_t errlen)
{
	uint64_t size;

	if (!strcmp(value, "auto")) {
		cfg->inline_data = CFG_INLINE_AUTO;
		return 0;
	}
	if (parse_size(value, &size) || size > RBLK_INLINE_MAX ||
	    size % RBLK_INLINE_ALIGN) {
		snprintf(err, errlen,
			 "inline_data: '%s' is not auto or a multiple of 512 from 0 to 16K",
			 value);
		return -EINVAL;
	}
	cfg->inline_data = (int)size;
	return 0;
}

int cfg_set_slot_pool(struct cfg_target *cfg, const char *value, char *err,
		      size_t errlen)
{
	uint64_t size;

	if (parse_size(value, &size) || size < (1u << 20) ||
	    size > (1ull << 40)) {
		snprintf(err, errlen,
			 "slot_pool: '%s' is not a size from 1M to 1T", value);
		return -EINVAL;
	}
	cfg->slot_pool = size;
	return 0;
}

int cfg_set_metrics(struct cfg_target *cfg, const char *url, char *err,
		    size_t errlen)
{
	struct rblk_url u;
	char why[256], buf[64];

	if (*url && strlen(url) <= 5 && strspn(url, "0123456789") == strlen(url)) {
		/* a bare port: loopback */
		snprintf(buf, sizeof(buf), "tcp://127.0.0.1:%s", url);
		url = buf;
	}
	if (rblk_url_parse(url, 0, &u, why, sizeof(why)) ||
	    strcmp(u.scheme, "tcp") || !u.port || u.export_name[0])
		return fail(err, errlen, -EINVAL,
			    "metrics '%s': want tcp://HOST:PORT or a port on loopback (e.g. tcp://127.0.0.1:9441, 9441)",
			    url);
	if (strlen(url) >= sizeof(cfg->metrics))
		return fail(err, errlen, -EINVAL, "metrics: URL too long");
	snprintf(cfg->metrics, sizeof(cfg->metrics), "%s", url);
	return 0;
}

/* ---- the INI file ------------------------------------------------------ */

enum { KEY_LISTEN, KEY_WORKERS, KEY_ENGINE, KEY_LOG_LEVEL, KEY_MAX_QD,
       KEY_MAX_IO, KEY_CTL_SOCKET, KEY_CTL_SOCKET_MODE, KEY_METRICS,
       KEY_NAME, KEY_SLOT_POOL, KEY_CEPH_CONF, KEY_CEPH_ID, KEY_CEPH_KEYRING,
       KEY_RBD_CONNS, KEY_RBD_TAKEOVER, KEY_RBD_TIMEOUT, KEY_ALLOW_ANY_HOST,
       KEY_INLINE_DATA, NR_TARGET_KEYS };
enum { KEY_PATH, KEY_READ_ONLY, KEY_BLOCK_SIZE, KEY_ALLOW, KEY_ALLOW_RO,
       KEY_DIRECT, KEY_UUID, KEY_OVERCOMMIT, KEY_CACHE, NR_EXPORT_KEYS };
enum { KEY_SECRET, KEY_SECRET_FILE, NR_HOST_KEYS };

static const char *const target_keys[NR_TARGET_KEYS] = {
	[KEY_LISTEN] = "listen",	  [KEY_WORKERS] = "workers",
	[KEY_ENGINE] = "engine",	  [KEY_LOG_LEVEL] = "log_level",
	[KEY_MAX_QD] = "max_queue_depth", [KEY_MAX_IO] = "max_io",
	[KEY_CTL_SOCKET] = "ctl_socket",
	[KEY_CTL_SOCKET_MODE] = "ctl_socket_mode",
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
	unsigned int exp; /* SEC_EXPORT: index into cfg->exports */
	unsigned int first_new; /* exports below this came from the caller */
	int target_seen[NR_TARGET_KEYS]; /* line of first use, 0: none */
	int export_seen[CFG_MAX_EXPORTS][NR_EXPORT_KEYS];
	int export_line[CFG_MAX_EXPORTS]; /* line of [export NAME] */
	unsigned int host; /* SEC_HOST: index into cfg->hosts */
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
			ctx_fail(c, "host '%s' defined twice (first on line %d)",
				 name, c->host_line[i]);
		else
			ctx_fail(c, "host '%s' is already defined", name);
		return;
	}
	h = new_host(c->cfg, name, why, sizeof(why), &ret);
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

	text = trim(text);
	if (!strcmp(text, "target")) {
		c->sec = SEC_TARGET;
		return;
	}
	if (!strncmp(text, "host", 4) &&
	    (!text[4] || isspace((unsigned char)text[4]))) {
		host_section_begin(c, trim(text + 4));
		return;
	}
	if (strncmp(text, "export", 6) ||
	    (text[6] && !isspace((unsigned char)text[6]))) {
		c->sec = SEC_NONE;
		ctx_fail(c, "unknown section [%s] (known: [target], [export NAME], [host NAME])",
			 text);
		return;
	}
	name = trim(text + 6);
	if (!*name) {
		ctx_fail(c, "[export] needs a name: [export NAME]");
		return;
	}
	e = find_export(c->cfg, name);
	if (e) {
		unsigned int i = (unsigned int)(e - c->cfg->exports);

		if (i >= c->first_new)
			ctx_fail(c, "export '%s' defined twice (first on line %d)",
				 name, c->export_line[i]);
		else
			ctx_fail(c, "export '%s' is already defined", name);
		return;
	}
	e = new_export(c->cfg, name, why, sizeof(why), &ret);
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
			char *rest = trim(end + 1);

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
			return ctx_fail(c, "%s: path too long", target_keys[key]);
		snprintf(key == KEY_CEPH_CONF ? ceph->conf : ceph->keyring,
			 PATH_MAX, "%s", value);
		return 1;
	case KEY_CEPH_ID:
		if (strlen(value) >= sizeof(ceph->id) ||
		    strpbrk(value, " \t/"))
			return ctx_fail(c, "ceph_id: '%s' is not a client id (e.g. admin, for client.admin)",
					value);
		snprintf(ceph->id, sizeof(ceph->id), "%s", value);
		return 1;
	case KEY_RBD_CONNS:
		if (parse_uint(value, 1, 64, &v))
			return ctx_fail(c, "rbd_cluster_connections: '%s' is not a number from 1 to 64",
					value);
		ceph->connections = (unsigned int)v;
		return 1;
	case KEY_RBD_TAKEOVER:
		if (parse_bool(value, &ceph->takeover))
			return ctx_fail(c, "rbd_takeover: '%s' is not yes/no, true/false, on/off or 1/0",
					value);
		return 1;
	case KEY_RBD_TIMEOUT:
		if (parse_uint(value, 1, 3600, &v))
			return ctx_fail(c, "rbd_timeout: '%s' is not a number of seconds from 1 to 3600",
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

	if (key != KEY_LISTEN && seen_before(c, &c->target_seen[key],
					     target_keys[key]))
		return 0;
	switch (key) {
	case KEY_LISTEN:
		if (cfg_add_listen(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_WORKERS:
		if (parse_uint(value, 0, CFG_MAX_WORKERS, &v))
			return ctx_fail(c, "workers: '%s' is not a number from 0 (one per CPU) to %d",
					value, CFG_MAX_WORKERS);
		cfg->workers = (unsigned int)v;
		return 1;
	case KEY_ENGINE:
		if (strcmp(value, "io_uring") && strcmp(value, "libaio"))
			return ctx_fail(c, "engine: '%s' is not io_uring or libaio",
					value);
		snprintf(cfg->engine, sizeof(cfg->engine), "%s", value);
		return 1;
	case KEY_LOG_LEVEL:
		lvl = log_parse_level(value);
		if (lvl < 0)
			return ctx_fail(c, "log_level: '%s' is not error, warn, info or debug",
					value);
		cfg->log_level = lvl;
		return 1;
	case KEY_MAX_QD:
		if (parse_uint(value, 1, RBLK_MAX_QD, &v))
			return ctx_fail(c, "max_queue_depth: '%s' is not a number from 1 to %d",
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
		if (check_max_io(size, why, sizeof(why)))
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
	case KEY_METRICS:
		if (cfg_set_metrics(cfg, value, why, sizeof(why)))
			return ctx_fail(c, "%s", why);
		return 1;
	case KEY_NAME:
		if (check_host_name(value, why, sizeof(why)))
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
		if (parse_bool(value, &b))
			return ctx_fail(c, "allow_any_host: '%s' is not yes/no, true/false, on/off or 1/0",
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
		if (check_export_path(value, why, sizeof(why)))
			return ctx_fail(c, "export '%s': %s", e->name, why);
		snprintf(e->path, sizeof(e->path), "%s", value);
		return 1;
	case KEY_READ_ONLY:
		if (parse_bool(value, &b))
			return ctx_fail(c, "read_only: '%s' is not yes/no, true/false, on/off or 1/0",
					value);
		e->read_only = b;
		return 1;
	case KEY_BLOCK_SIZE:
		if (parse_size(value, &bs))
			return ctx_fail(c, "block_size: '%s' is not a size",
					value);
		if (check_block_size(bs, why, sizeof(why)))
			return ctx_fail(c, "export '%s': %s", e->name, why);
		e->block_size = (uint32_t)bs;
		return 1;
	case KEY_ALLOW:
	case KEY_ALLOW_RO:
		if (add_allow(e, value, key == KEY_ALLOW_RO, why, sizeof(why)))
			return ctx_fail(c, "export '%s': %s: %s", e->name,
					export_keys[key], why);
		return 1;
	case KEY_DIRECT:
		if (parse_bool(value, &b))
			return ctx_fail(c, "direct: '%s' is not yes/no, true/false, on/off or 1/0",
					value);
		e->direct = b ? CFG_DIRECT_YES : CFG_DIRECT_NO;
		return 1;
	case KEY_CACHE:
		if (cfg_parse_cache(value, &e->cache_buffered))
			return ctx_fail(c, "cache: '%s' is not direct or buffered",
					value);
		return 1;
	case KEY_UUID:
		if (parse_uuid(value, e->uuid))
			return ctx_fail(c, "uuid: '%s' is not 8-4-4-4-12 hex digits",
					value);
		e->has_uuid = true;
		return 1;
	case KEY_OVERCOMMIT:
		if (parse_bool(value, &b))
			return ctx_fail(c, "overcommit: '%s' is not yes/no, true/false, on/off or 1/0",
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
		return ctx_fail(c, "host '%s': give secret or secret_file, not both",
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
		if (rblk_auth_load_secret(value, h->secret, &h->secret_len,
					  why, sizeof(why)))
			return ctx_fail(c, "host '%s': %s", h->name, why);
		return 1;
	}
	return ctx_fail(c, "internal error: key %d", key);
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
		return ctx_fail(c, "'%s' outside a section ([target], [export NAME] or [host NAME])",
				name);
	case SEC_HOST:
		key = lookup_key(host_keys, NR_HOST_KEYS, name);
		if (key < 0)
			return ctx_fail(c, "unknown key '%s' in [host %s] (known: secret, secret_file)",
					name, c->cfg->hosts[c->host].name);
		return host_key(c, key, value);
	case SEC_TARGET:
		key = lookup_key(target_keys, NR_TARGET_KEYS, name);
		if (key < 0) {
			char why[256];
			int ret = cfg_set_limit(c->cfg, name, value, why,
						sizeof(why));

			if (ret == 0)
				return 1;
			if (ret != -ENOENT)
				return ctx_fail(c, "%s", why);
		}
		if (key < 0)
			return ctx_fail(c, "unknown key '%s' in [target] (known: listen, workers, engine, log_level, max_queue_depth, max_io, slot_pool, inline_data, max_pending, max_pending_per_host, max_sessions, max_sessions_per_host, idle_timeout, ctl_socket, ctl_socket_mode, metrics, name, ceph_conf, ceph_id, ceph_keyring, rbd_cluster_connections, rbd_takeover, rbd_timeout, allow_any_host)",
					name);
		return target_key(c, key, value);
	case SEC_EXPORT:
		key = lookup_key(export_keys, NR_EXPORT_KEYS, name);
		if (key < 0)
			return ctx_fail(c, "unknown key '%s' in [export %s] (known: path, read_only, block_size, allow, allow_ro, direct, uuid, overcommit)",
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
		ret = fail(err, errlen, -EINVAL,
			   "%s: not a regular file (a configuration file is one)",
			   path);
		goto out_close;
	}
	if (st.st_size > CFG_MAX_FILE_SIZE) {
		ret = fail(err, errlen, -EFBIG,
			   "%s: %lld bytes, more than the %d a configuration file may have",
			   path, (long long)st.st_size, CFG_MAX_FILE_SIZE);
		goto out_close;
	}
	*fp = fdopen(fd, "r");
	if (!*fp) {
		ret = fail(err, errlen, -errno, "%s: %s", path,
			   strerror(errno));
		goto out_close;
	}
	return 0;

out_close:
	close(fd);
	return ret;
}

int cfg_load(struct cfg_target *cfg, const char *path, char *err,
	     size_t errlen)
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
		ret = fail(err, errlen, -EINVAL,
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
			ret = fail(err, errlen, -EINVAL,
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

int cfg_validate(struct cfg_target *cfg, char *err, size_t errlen)
{
	char why[256];

	if (cfg->nr_exports == 0)
		return fail(err, errlen, -EINVAL,
			    "no export: give --export NAME=PATH or an [export NAME] section");
	if (cfg->nr_listen == 0)
		return fail(err, errlen, -EINVAL,
			    "no listener: give --listen tcp://HOST[:PORT] or rdma://HOST[:PORT]");
	if (cfg->nr_exports > CFG_MAX_EXPORTS || cfg->nr_listen > CFG_MAX_LISTEN)
		return fail(err, errlen, -EINVAL, "too many exports or listeners");
	for (unsigned int i = 0; i < cfg->nr_exports; i++) {
		const struct cfg_export *e = &cfg->exports[i];

		if (check_export_name(e->name, why, sizeof(why)) ||
		    check_export_path(e->path, why, sizeof(why)) ||
		    check_block_size(e->block_size, why, sizeof(why)))
			return fail(err, errlen, -EINVAL, "export '%.*s': %s",
				    RBLK_NAME_MAX - 1, e->name, why);
		for (unsigned int j = 0; j < i; j++)
			if (!strcmp(cfg->exports[j].name, e->name))
				return fail(err, errlen, -EINVAL,
					    "export '%s' defined twice",
					    e->name);
		for (unsigned int j = 0; j < e->nr_allow; j++)
			if (!cfg_find_host(cfg, e->allow[j]))
				return fail(err, errlen, -EINVAL,
					    "export '%s' allows host '%s', which has no [host %s] section (or --host %s:secret-file=PATH)",
					    e->name, e->allow[j], e->allow[j],
					    e->allow[j]);
	}
	for (unsigned int i = 0; i < cfg->nr_hosts; i++)
		if (!cfg->hosts[i].secret_len)
			return fail(err, errlen, -EINVAL,
				    "host '%s' has no secret",
				    cfg->hosts[i].name);
	if (cfg->max_queue_depth < 1 || cfg->max_queue_depth > RBLK_MAX_QD)
		return fail(err, errlen, -EINVAL,
			    "max_queue_depth %u is not from 1 to %d",
			    cfg->max_queue_depth, RBLK_MAX_QD);
	if (check_max_io(cfg->max_io, why, sizeof(why)))
		return fail(err, errlen, -EINVAL, "%s", why);
	if (strcmp(cfg->engine, "io_uring") && strcmp(cfg->engine, "libaio"))
		return fail(err, errlen, -EINVAL,
			    "engine '%.15s' is not io_uring or libaio",
			    cfg->engine);
	for (unsigned int i = 0; i < cfg->nr_exports; i++)
		if (cfg->allow_any_host && !cfg->exports[i].restricted)
			cfg->exports[i].allow_any = true;
	return 0;
}
