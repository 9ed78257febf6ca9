/* SPDX-License-Identifier: MIT */
#include "url.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static int url_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Export names: printable ASCII, no '/', shorter than RBLK_NAME_MAX. */
static int url_export(const char *url, const char *name, size_t n,
		      struct rblk_url *out, char *err, size_t errlen)
{
	if (n >= sizeof(out->export_name))
		return url_fail(err, errlen,
				"'%s': export name longer than %d bytes", url,
				RBLK_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x21 ||
		    (unsigned char)name[i] > 0x7e || name[i] == '/')
			return url_fail(err, errlen,
					"'%s': bad character in export name",
					url);
	memcpy(out->export_name, name, n);
	return 0;
}

/*
 * unix:///[EXPORT]?socket=PATH, as NBD URIs name a unix socket: host is
 * the socket's absolute path, port 0.
 */
static int url_parse_unix(const char *url, const char *p, struct rblk_url *out,
			  char *err, size_t errlen)
{
	const char *q;
	size_t n;

	if (*p != '/')
		return url_fail(err, errlen,
				"'%s': want unix:///[EXPORT]?socket=PATH", url);
	p++;
	q = strchr(p, '?');
	if (!q || strncmp(q, "?socket=", 8))
		return url_fail(
		    err, errlen,
		    "'%s': no socket path (want unix:///[EXPORT]?socket=PATH)",
		    url);
	if (url_export(url, p, (size_t)(q - p), out, err, errlen))
		return -EINVAL;
	q += 8;
	n = strlen(q);
	if (*q != '/')
		return url_fail(err, errlen,
				"'%s': the socket path must be absolute", url);
	if (n >= RBLK_UNIX_PATH_MAX)
		return url_fail(err, errlen,
				"'%s': socket path longer than %d bytes", url,
				RBLK_UNIX_PATH_MAX - 1);
	memcpy(out->host, q, n);
	out->port = 0;
	return 0;
}

int rblk_url_endpoint(const struct rblk_url *u, char *buf, size_t size)
{
	if (!strcmp(u->scheme, "unix"))
		return snprintf(buf, size, "unix:///?socket=%s", u->host);
	if (strchr(u->host, ':'))
		return snprintf(buf, size, "%s://[%s]:%u", u->scheme, u->host,
				u->port);
	return snprintf(buf, size, "%s://%s:%u", u->scheme, u->host, u->port);
}

const char *rblk_url_form(const char *scheme, bool with_export)
{
	static __thread char buf[64];

	if (!strcmp(scheme, "unix"))
		return with_export ? "unix:///EXPORT?socket=PATH"
				   : "unix:///?socket=PATH";
	snprintf(buf, sizeof(buf), "%.16s://HOST[:PORT]%s", scheme,
		 with_export ? "/EXPORT" : "");
	return buf;
}

const char *rblk_url_str(const struct rblk_url *u)
{
	static __thread char buf[RBLK_UNIX_PATH_MAX + 300];

	rblk_url_endpoint(u, buf, sizeof(buf));
	return buf;
}

int rblk_url_parse(const char *url, uint16_t default_port, struct rblk_url *out,
		   char *err, size_t errlen)
{
	const char *p = strstr(url, "://");
	const char *host, *host_end, *rest;
	unsigned long port;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!p || p == url)
		return url_fail(err, errlen, "'%s': expected scheme://host",
				url);
	n = (size_t)(p - url);
	if (n >= sizeof(out->scheme))
		return url_fail(err, errlen, "'%s': unknown scheme", url);
	memcpy(out->scheme, url, n);
	if (!strcmp(out->scheme, "unix"))
		return url_parse_unix(url, p + 3, out, err, errlen);
	host = p + 3;
	if (*host == '[') {
		host++;
		host_end = strchr(host, ']');
		if (!host_end)
			return url_fail(err, errlen, "'%s': missing ']'", url);
		rest = host_end + 1;
	} else {
		host_end = host + strcspn(host, ":/");
		rest = host_end;
	}
	n = (size_t)(host_end - host);
	if (n == 0)
		return url_fail(err, errlen, "'%s': empty host", url);
	if (n >= sizeof(out->host))
		return url_fail(err, errlen, "'%s': host name too long", url);
	memcpy(out->host, host, n);
	out->port = default_port;
	if (*rest == ':') {
		char buf[8];

		rest++;
		n = strcspn(rest, "/");
		if (n == 0 || n >= sizeof(buf))
			return url_fail(err, errlen, "'%s': bad port", url);
		memcpy(buf, rest, n);
		buf[n] = 0;
		if (parse_uint(buf, 1, 65535, &port))
			return url_fail(err, errlen, "'%s': bad port '%s'", url,
					buf);
		out->port = (uint16_t)port;
		rest += n;
	}
	if (*rest == '/') {
		rest++;
		return url_export(url, rest, strlen(rest), out, err, errlen);
	} else if (*rest) {
		return url_fail(err, errlen, "'%s': unexpected '%s'", url,
				rest);
	}
	return 0;
}
