/* SPDX-License-Identifier: MIT */
/*
 * rblk-target configuration: the model (targets, exports, hosts), the
 * checks every value goes through, the --export / --listen / --host
 * command-line forms and the final validation. The INI file is read by
 * config_ini.c into the same model through the same checks, so the daemon
 * only ever sees a configuration that makes sense.
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
	cfg->session_pool_share = CFG_DEFAULT_SESSION_POOL_SHARE;
	cfg->window_timeout = CFG_DEFAULT_WINDOW_TIMEOUT;
	snprintf(cfg->ctl_socket, sizeof(cfg->ctl_socket), "%s",
		 CFG_DEFAULT_CTL_SOCKET);
	cfg->ctl_socket_mode = 0600;
	cfg->unix_socket_mode = 0660; /* owner and group, whatever the umask */
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
			    "export name longer than %d bytes",
			    RBLK_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x21 || c > 0x7e || c == '/')
			return fail(
			    err, errlen, -EINVAL,
			    "export name '%.*s' holds a bad character (0x%02x): use printable ASCII without '/' or spaces",
			    (int)n, name, c);
	}
	return 0;
}

/* A path, or "ram:SIZE" with SIZE > 0 and a multiple of 4096. */
int cfg_check_export_path(const char *path, char *err, size_t errlen)
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
int cfg_check_block_size(uint64_t bs, char *err, size_t errlen)
{
	if (bs == 0 || (IS_POW2(bs) && bs >= 512 && bs <= 65536))
		return 0;
	return fail(
	    err, errlen, -EINVAL,
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

int cfg_parse_uuid(const char *s, uint8_t out[16])
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
		hi = isdigit((unsigned char)s[i]) ? s[i] - '0'
						  : (tolower(s[i]) - 'a' + 10);
		lo = isdigit((unsigned char)s[i + 1])
			 ? s[i + 1] - '0'
			 : (tolower(s[i + 1]) - 'a' + 10);
		out[n++] = (uint8_t)(hi << 4 | lo);
		i++;
	}
	return 0;
}

int cfg_check_max_io(uint64_t v, char *err, size_t errlen)
{
	if (IS_POW2(v) && v >= RBLK_MIN_MAX_IO && v <= RBLK_MAX_MAX_IO)
		return 0;
	return fail(err, errlen, -EINVAL,
		    "max_io %llu is not a power of two from 4K to 8M",
		    (unsigned long long)v);
}

int cfg_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"yes", "true", "1", "on"};
	static const char *const no[] = {"no", "false", "0", "off"};

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

struct cfg_export *cfg_find_export(const struct cfg_target *cfg,
				   const char *name)
{
	for (unsigned int i = 0; i < cfg->nr_exports; i++)
		if (!strcmp(cfg->exports[i].name, name))
			return (struct cfg_export *)&cfg->exports[i];
	return NULL;
}

/* Append an export named name with no path yet; the caller fills it. */
struct cfg_export *cfg_new_export(struct cfg_target *cfg, const char *name,
				  char *err, size_t errlen, int *ret)
{
	struct cfg_export *e;

	*ret = check_export_name(name, err, errlen);
	if (*ret)
		return NULL;
	if (cfg_find_export(cfg, name)) {
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
int cfg_check_host_name(const char *name, char *err, size_t errlen)
{
	size_t n = strnlen(name, RBLK_NAME_MAX);

	if (n == 0)
		return fail(err, errlen, -EINVAL, "empty host name");
	if (n >= RBLK_NAME_MAX)
		return fail(err, errlen, -EINVAL,
			    "host name longer than %d bytes",
			    RBLK_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x21 || c > 0x7e || c == ',')
			return fail(
			    err, errlen, -EINVAL,
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
struct cfg_host *cfg_new_host(struct cfg_target *cfg, const char *name,
			      char *err, size_t errlen, int *ret)
{
	struct cfg_host *h;

	*ret = cfg_check_host_name(name, err, errlen);
	if (*ret)
		return NULL;
	if (cfg_find_host(cfg, name)) {
		*ret =
		    fail(err, errlen, -EINVAL, "host '%s' defined twice", name);
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

char *cfg_trim(char *s)
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
int cfg_add_allow(struct cfg_export *e, const char *list, bool ro, char *err,
		  size_t errlen)
{
	char buf[4096], *rest = buf, *name;
	int ret;

	if (strlen(list) >= sizeof(buf))
		return fail(err, errlen, -EINVAL, "host list too long");
	snprintf(buf, sizeof(buf), "%s", list);
	if (!strcmp(cfg_trim(buf), "any")) {
		if (ro)
			return fail(
			    err, errlen, -EINVAL,
			    "allow_ro=any is not supported; give allow=any and read-only");
		if (e->restricted)
			return fail(
			    err, errlen, -EINVAL,
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
		ret = cfg_check_host_name(name, err, errlen);
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
		ret = cfg_add_allow(e, allow, false, err, errlen);
		if (ret)
			return ret;
	}
	if (allow_ro && *allow_ro) {
		ret = cfg_add_allow(e, allow_ro, true, err, errlen);
		if (ret)
			return ret;
	}
	for (unsigned int i = 0; i < e->nr_allow; i++)
		if (!cfg_find_host(cfg, e->allow[i]))
			return fail(
			    err, errlen, -EINVAL,
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
	enum cfg_tls tls = CFG_TLS_UNSET;
	size_t len;
	char *colon, *tlsopt;
	int ret;

	if (strlen(arg) >= sizeof(buf))
		return fail(why, whylen, -EINVAL, "argument too long");
	snprintf(buf, sizeof(buf), "%s", arg);
	/* a trailing ",tls=MODE" (a path may hold commas, not that) */
	tlsopt = strstr(buf, ",tls=");
	if (tlsopt && !strchr(tlsopt + 1, ',')) {
		*tlsopt = 0;
		if (cfg_parse_tls(tlsopt + 5, &tls))
			return fail(
			    why, whylen, -EINVAL,
			    "bad tls '%.32s' (off, optional or required)",
			    tlsopt + 5);
	}
	colon = strchr(buf, ':');
	if (!colon || colon == buf || strncmp(colon + 1, "secret-file=", 12) ||
	    !colon[13])
		return fail(why, whylen, -EINVAL,
			    "expected NAME:secret-file=PATH[,tls=required]");
	*colon = 0;
	ret = cfg_check_host_name(buf, why, whylen);
	if (ret)
		return ret;
	if (cfg_find_host(cfg, buf))
		return fail(why, whylen, -EINVAL, "host '%s' defined twice",
			    buf);
	ret = rblk_auth_load_secret(colon + 13, secret, &len, why, whylen);
	if (ret)
		return ret;
	h = cfg_new_host(cfg, buf, why, whylen, &ret);
	if (h) {
		memcpy(h->secret, secret, len);
		h->secret_len = len;
		h->tls = (uint8_t)tls;
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
	if (strcmp(u.scheme, "tcp") && strcmp(u.scheme, "rdma") &&
	    strcmp(u.scheme, "unix"))
		return fail(
		    err, errlen, -EINVAL,
		    "listen '%s': scheme must be tcp://, rdma:// or unix:///?socket=PATH",
		    url);
	if (u.export_name[0] || (strcmp(u.scheme, "unix") &&
				 strchr(url + strlen(u.scheme) + 3, '/')))
		return fail(
		    err, errlen, -EINVAL,
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

static const char *const qos_keys[CFG_QOS_NR] = {
    [CFG_QOS_IOPS] = "iops",
    [CFG_QOS_READ_IOPS] = "read_iops",
    [CFG_QOS_WRITE_IOPS] = "write_iops",
    [CFG_QOS_BPS] = "bps",
    [CFG_QOS_READ_BPS] = "read_bps",
    [CFG_QOS_WRITE_BPS] = "write_bps",
};

const char *cfg_qos_key(enum cfg_qos_kind k)
{
	return k < CFG_QOS_NR ? qos_keys[k] : "?";
}

bool cfg_qos_any(const struct cfg_qos *q)
{
	for (int k = 0; k < CFG_QOS_NR; k++)
		if (q->limit[k])
			return true;
	return false;
}

int cfg_qos_set(struct cfg_qos *q, const char *key, const char *value,
		char *why, size_t whylen)
{
	unsigned long ms;
	uint64_t v;

	if (!strcmp(key, "burst_ms")) {
		if (parse_uint(value, 1, CFG_QOS_MAX_BURST_MS, &ms))
			return fail(why, whylen, -EINVAL,
				    "burst_ms '%.32s' is not 1..%u", value,
				    CFG_QOS_MAX_BURST_MS);
		q->burst_ms = (uint32_t)ms;
		return 0;
	}
	for (int k = 0; k < CFG_QOS_NR; k++) {
		if (strcmp(key, qos_keys[k]))
			continue;
		/* I/Os are a plain count; bytes take K, M, G (binary) */
		if (k < CFG_QOS_BPS ? parse_uint(value, 0, 1ul << 40, &ms)
				    : parse_size(value, &v) || v > (1ull << 50))
			return fail(why, whylen, -EINVAL,
				    "%s '%.32s' is not %s (0: no limit)", key,
				    value,
				    k < CFG_QOS_BPS
					? "a number of I/Os per second"
					: "bytes per second (50M: 50 MiB/s)");
		if (k < CFG_QOS_BPS)
			v = ms;
		q->limit[k] = v;
		return 0;
	}
	return -ENOENT;
}

/* KEY=VALUE of --export when KEY is a QoS key, else -ENOENT. */
static int export_qos_opt(struct cfg_qos *q, const char *opt, char *why,
			  size_t whylen)
{
	char key[16];
	const char *eq = strchr(opt, '=');

	if (!eq || (size_t)(eq - opt) >= sizeof(key))
		return -ENOENT;
	memcpy(key, opt, (size_t)(eq - opt));
	key[eq - opt] = 0;
	return cfg_qos_set(q, key, eq + 1, why, whylen);
}

int cfg_check_export_qos(const struct cfg_export *e, char *why, size_t whylen)
{
	if (cfg_qos_any(&e->qos) && e->direct == CFG_DIRECT_YES)
		return fail(
		    why, whylen, -EINVAL,
		    "export '%s': QoS limits need commands, and direct access has none: drop direct or the limits",
		    e->name);
	return 0;
}

/* The work of cfg_add_export_arg(); the reason goes to why. */
static int export_arg(struct cfg_target *cfg, const char *arg, char *why,
		      size_t whylen)
{
	char buf[RBLK_NAME_MAX + PATH_MAX + 64];
	struct cfg_export *e;
	char *eq, *path, *opts, *opt;
	struct cfg_export acl = {0};
	struct cfg_qos qos = {0};
	enum cfg_direct direct = CFG_DIRECT_DEFAULT;
	enum cfg_tls tls = CFG_TLS_UNSET;
	bool ro = false, has_uuid = false, overcommit = false, buffered = false;
	uint8_t uuid[16];
	uint64_t bs = 0;
	const char *pr_file = "";
	int ret;

	if (strlen(arg) >= sizeof(buf))
		return fail(why, whylen, -EINVAL, "argument too long");
	snprintf(buf, sizeof(buf), "%s", arg);
	eq = strchr(buf, '=');
	if (!eq || eq == buf)
		return fail(
		    why, whylen, -EINVAL,
		    "expected NAME=PATH[,ro][,bs=N][,direct][,cache=buffered][,allow=HOST|any][,allow_ro=HOST][,overcommit][,tls=required]");
	*eq = 0;
	path = eq + 1;
	opts = strchr(path, ',');
	if (opts)
		*opts++ = 0;
	ret = check_export_name(buf, why, whylen);
	if (ret)
		return ret;
	ret = cfg_check_export_path(path, why, whylen);
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
				return fail(
				    why, whylen, -EINVAL,
				    "bad cache '%.32s' (direct or buffered)",
				    opt + 6);
		} else if (!strncmp(opt, "bs=", 3)) {
			if (parse_size(opt + 3, &bs) ||
			    cfg_check_block_size(bs, NULL, 0))
				return fail(
				    why, whylen, -EINVAL,
				    "bad bs '%.32s' (0 or a power of two from 512 to 65536)",
				    opt + 3);
		} else if (!strncmp(opt, "uuid=", 5)) {
			if (cfg_parse_uuid(opt + 5, uuid))
				return fail(
				    why, whylen, -EINVAL,
				    "bad uuid '%.40s' (8-4-4-4-12 hex digits)",
				    opt + 5);
			has_uuid = true;
		} else if (!strncmp(opt, "pr_file=", 8)) {
			if (opt[8] != '/')
				return fail(why, whylen, -EINVAL,
					    "pr_file must be an absolute path");
			pr_file = opt + 8;
		} else if (!strncmp(opt, "tls=", 4)) {
			if (cfg_parse_tls(opt + 4, &tls))
				return fail(
				    why, whylen, -EINVAL,
				    "bad tls '%.32s' (off, optional or required)",
				    opt + 4);
		} else if (!strncmp(opt, "allow=", 6)) {
			ret = cfg_add_allow(&acl, opt + 6, false, why, whylen);
			if (ret)
				return ret;
		} else if (!strncmp(opt, "allow_ro=", 9)) {
			ret = cfg_add_allow(&acl, opt + 9, true, why, whylen);
			if (ret)
				return ret;
		} else if ((ret = export_qos_opt(&qos, opt, why, whylen)) !=
			   -ENOENT) {
			if (ret)
				return ret;
		} else {
			return fail(
			    why, whylen, -EINVAL,
			    "%s option '%.32s' (known: ro, rw, bs=N, direct, nodirect, cache=direct|buffered, uuid=UUID, pr_file=PATH, allow=HOST|any, allow_ro=HOST, overcommit, tls=off|optional|required, iops=, read_iops=, write_iops=, bps=, read_bps=, write_bps=, burst_ms=)",
			    *opt ? "unknown" : "empty", opt);
		}
	}
	e = cfg_new_export(cfg, buf, why, whylen, &ret);
	if (!e)
		return ret;
	e->restricted = acl.restricted;
	e->has_uuid = has_uuid;
	memcpy(e->uuid, uuid, has_uuid ? sizeof(e->uuid) : 0);
	e->allow_any = acl.allow_any;
	e->overcommit = overcommit;
	e->cache_buffered = buffered;
	e->tls = (uint8_t)tls;
	e->nr_allow = acl.nr_allow;
	memcpy(e->allow, acl.allow, sizeof(acl.allow));
	memcpy(e->allow_ro, acl.allow_ro, sizeof(acl.allow_ro));
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->read_only = ro;
	e->block_size = (uint32_t)bs;
	e->direct = direct;
	e->qos = qos;
	snprintf(e->pr_file, sizeof(e->pr_file), "%s", pr_file);
	return cfg_check_export_qos(e, why, whylen);
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
		ret = cfg_check_export_path(e->path, err, errlen);
	if (!ret)
		ret = cfg_check_block_size(e->block_size, err, errlen);
	if (!ret)
		ret = cfg_check_export_qos(e, err, errlen);
	return ret;
}

int cfg_set_ctl_socket(struct cfg_target *cfg, const char *path, char *err,
		       size_t errlen)
{
	if (!*path)
		return fail(err, errlen, -EINVAL, "ctl_socket: empty path");
	if (strlen(path) >= sizeof(cfg->ctl_socket))
		return fail(
		    err, errlen, -EINVAL,
		    "ctl_socket '%.40s...': longer than %zu bytes (a unix socket limit)",
		    path, sizeof(cfg->ctl_socket) - 1);
	snprintf(cfg->ctl_socket, sizeof(cfg->ctl_socket), "%s", path);
	cfg->ctl_socket_set = true;
	return 0;
}

int cfg_set_ctl_socket_mode(struct cfg_target *cfg, const char *mode, char *err,
			    size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(mode, &end, 8);
	if (!*mode || *end || errno || v > 0777 || !(v & 0600))
		return fail(
		    err, errlen, -EINVAL,
		    "ctl_socket_mode: '%s' is not an octal mode from 0200 to 0777 that lets the owner in",
		    mode);
	/*
	 * Connecting to a unix socket needs write permission, so 0660 is how
	 * a dedicated group gets in; any user at all never should.
	 */
	if (v & 0002)
		return fail(
		    err, errlen, -EINVAL,
		    "ctl_socket_mode: '%s' lets every local user connect, and whoever connects can add and remove exports; use 0600, or 0660 with a dedicated group",
		    mode);
	cfg->ctl_socket_mode = (unsigned int)v;
	return 0;
}

int cfg_set_unix_socket_mode(struct cfg_target *cfg, const char *mode,
			     char *err, size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(mode, &end, 8);
	/* connecting needs write permission: the owner must have it */
	if (!*mode || *end || errno || v > 0777 || !(v & 0200))
		return fail(
		    err, errlen, -EINVAL,
		    "unix_socket_mode: '%s' is not an octal mode up to 0777 that lets the owner connect (e.g. 0660)",
		    mode);
	cfg->unix_socket_mode = (unsigned int)v;
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
	    {"max_pending", offsetof(struct cfg_target, max_pending), 1,
	     1000000},
	    {"max_pending_per_host",
	     offsetof(struct cfg_target, max_pending_per_host), 1, 1000000},
	    {"max_sessions", offsetof(struct cfg_target, max_sessions), 1,
	     1000000},
	    {"max_sessions_per_host",
	     offsetof(struct cfg_target, max_sessions_per_host), 1, 1000000},
	    {"idle_timeout", offsetof(struct cfg_target, idle_timeout), 0,
	     86400},
	    {"poll_spin_us", offsetof(struct cfg_target, poll_spin_us), 0,
	     1000},
	    {"session_pool_share",
	     offsetof(struct cfg_target, session_pool_share), 1, 100},
	    {"window_timeout", offsetof(struct cfg_target, window_timeout), 1,
	     3600},
	};
	unsigned long v;

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		if (strcmp(keys[i].name, key))
			continue;
		if (parse_uint(value, keys[i].min, keys[i].max, &v)) {
			snprintf(err, errlen,
				 "%s: '%s' is not a number from %lu to %lu",
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
		snprintf(
		    err, errlen,
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

	if (*url && strlen(url) <= 5 &&
	    strspn(url, "0123456789") == strlen(url)) {
		/* a bare port: loopback */
		snprintf(buf, sizeof(buf), "tcp://127.0.0.1:%s", url);
		url = buf;
	}
	if (rblk_url_parse(url, 0, &u, why, sizeof(why)) ||
	    strcmp(u.scheme, "tcp") || !u.port || u.export_name[0])
		return fail(
		    err, errlen, -EINVAL,
		    "metrics '%s': want tcp://HOST:PORT or a port on loopback (e.g. tcp://127.0.0.1:9441, 9441)",
		    url);
	if (strlen(url) >= sizeof(cfg->metrics))
		return fail(err, errlen, -EINVAL, "metrics: URL too long");
	snprintf(cfg->metrics, sizeof(cfg->metrics), "%s", url);
	return 0;
}

static int cfg_validate_tls(const struct cfg_target *cfg, char *err,
			    size_t errlen);

int cfg_validate(struct cfg_target *cfg, char *err, size_t errlen)
{
	char why[256];

	if (cfg->nr_exports == 0)
		return fail(
		    err, errlen, -EINVAL,
		    "no export: give --export NAME=PATH or an [export NAME] section");
	if (cfg->nr_listen == 0)
		return fail(
		    err, errlen, -EINVAL,
		    "no listener: give --listen tcp://HOST[:PORT] or rdma://HOST[:PORT]");
	if (cfg->nr_exports > CFG_MAX_EXPORTS ||
	    cfg->nr_listen > CFG_MAX_LISTEN)
		return fail(err, errlen, -EINVAL,
			    "too many exports or listeners");
	for (unsigned int i = 0; i < cfg->nr_exports; i++) {
		const struct cfg_export *e = &cfg->exports[i];

		if (check_export_name(e->name, why, sizeof(why)) ||
		    cfg_check_export_path(e->path, why, sizeof(why)) ||
		    cfg_check_block_size(e->block_size, why, sizeof(why)) ||
		    cfg_check_export_qos(e, why, sizeof(why)))
			return fail(err, errlen, -EINVAL, "export '%.*s': %s",
				    RBLK_NAME_MAX - 1, e->name, why);
		for (unsigned int j = 0; j < i; j++) {
			const struct cfg_export *o = &cfg->exports[j];

			if (!strcmp(o->name, e->name))
				return fail(err, errlen, -EINVAL,
					    "export '%s' defined twice",
					    e->name);
			/* one identity, two volumes: multipath would join them
			 */
			if (e->has_uuid && o->has_uuid &&
			    !memcmp(e->uuid, o->uuid, sizeof(e->uuid)))
				return fail(
				    err, errlen, -EINVAL,
				    "exports '%s' and '%s' have the same uuid: two volumes must not share one identity (initiators would take one for the other)",
				    o->name, e->name);
		}
		for (unsigned int j = 0; j < e->nr_allow; j++)
			if (!cfg_find_host(cfg, e->allow[j]))
				return fail(
				    err, errlen, -EINVAL,
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
	if (cfg_check_max_io(cfg->max_io, why, sizeof(why)))
		return fail(err, errlen, -EINVAL, "%s", why);
	if (strcmp(cfg->engine, "io_uring") && strcmp(cfg->engine, "libaio"))
		return fail(err, errlen, -EINVAL,
			    "engine '%.15s' is not io_uring or libaio",
			    cfg->engine);
	if (cfg_validate_tls(cfg, err, errlen))
		return -EINVAL;
	for (unsigned int i = 0; i < cfg->nr_exports; i++)
		if (cfg->allow_any_host && !cfg->exports[i].restricted)
			cfg->exports[i].allow_any = true;
	return 0;
}

/* ---- TLS ---------------------------------------------------------------- */

static const char *const tls_names[] = {
    [CFG_TLS_UNSET] = "unset",
    [CFG_TLS_OFF] = "off",
    [CFG_TLS_OPTIONAL] = "optional",
    [CFG_TLS_REQUIRED] = "required",
};

int cfg_parse_tls(const char *s, enum cfg_tls *out)
{
	for (int i = CFG_TLS_OFF; i <= CFG_TLS_REQUIRED; i++)
		if (!strcmp(s, tls_names[i])) {
			*out = (enum cfg_tls)i;
			return 0;
		}
	return -EINVAL;
}

const char *cfg_tls_str(enum cfg_tls t)
{
	return (unsigned int)t <= CFG_TLS_REQUIRED ? tls_names[t] : "?";
}

int cfg_set_tls_key(struct cfg_target *cfg, const char *key, const char *value,
		    char *why, size_t whylen)
{
	char *dst;
	enum cfg_tls t;

	if (!strcmp(key, "tls")) {
		if (cfg_parse_tls(value, &t))
			return fail(
			    why, whylen, -EINVAL,
			    "tls: '%s' is not off, optional or required",
			    value);
		cfg->tls = (uint8_t)t;
		return 0;
	}
	if (!strcmp(key, "tls_cert"))
		dst = cfg->tls_cert;
	else if (!strcmp(key, "tls_key"))
		dst = cfg->tls_key;
	else if (!strcmp(key, "tls_ca"))
		dst = cfg->tls_ca;
	else
		return -ENOENT;
	if (!*value || strlen(value) >= PATH_MAX)
		return fail(why, whylen, -EINVAL, "%s: not a path", key);
	snprintf(dst, PATH_MAX, "%s", value);
	return 0;
}

/* Credentials: a certificate, or hosts with secrets (their PSKs). */
static bool cfg_tls_credentials(const struct cfg_target *cfg)
{
	return cfg->tls_cert[0] || cfg->nr_hosts;
}

bool cfg_tls_accepted(const struct cfg_target *cfg)
{
	return cfg->tls != CFG_TLS_OFF && cfg_tls_credentials(cfg);
}

bool cfg_tls_required(const struct cfg_target *cfg, const struct cfg_export *e,
		      const struct cfg_host *h)
{
	uint8_t t = e && e->tls ? e->tls : cfg->tls;

	return t == CFG_TLS_REQUIRED || (h && h->tls == CFG_TLS_REQUIRED);
}

/*
 * A requirement needs a listener that takes TLS, and that needs
 * credentials; a certificate needs its key.
 */
static int cfg_validate_tls(const struct cfg_target *cfg, char *err,
			    size_t errlen)
{
	bool needed = cfg->tls == CFG_TLS_REQUIRED;
	const char *who = "the target";

	if (!cfg->tls_cert[0] != !cfg->tls_key[0])
		return fail(
		    err, errlen, -EINVAL,
		    "tls_cert and tls_key go together (the certificate and its key)");
	for (unsigned int i = 0; i < cfg->nr_exports && !needed; i++)
		if (cfg->exports[i].tls == CFG_TLS_REQUIRED) {
			needed = true;
			who = cfg->exports[i].name;
		}
	for (unsigned int i = 0; i < cfg->nr_hosts && !needed; i++)
		if (cfg->hosts[i].tls == CFG_TLS_REQUIRED) {
			needed = true;
			who = cfg->hosts[i].name;
		}
	if (!needed)
		return 0;
	if (cfg->tls == CFG_TLS_OFF)
		return fail(err, errlen, -EINVAL,
			    "%s requires TLS, but the target's tls is off",
			    who);
	if (!cfg_tls_credentials(cfg))
		return fail(
		    err, errlen, -EINVAL,
		    "%s requires TLS, and the target has no credentials for it: [host] secrets (PSK) or tls_cert and tls_key",
		    who);
	return 0;
}
