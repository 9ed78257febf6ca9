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

int rblk_url_parse(const char *url, uint16_t default_port, struct rblk_url *out,
		   char *err, size_t errlen)
{
	const char *p = strstr(url, "://");
	const char *host, *host_end, *rest;
	unsigned long port;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!p || p == url)
		return url_fail(err, errlen, "'%s': expected scheme://host", url);
	n = (size_t)(p - url);
	if (n >= sizeof(out->scheme))
		return url_fail(err, errlen, "'%s': unknown scheme", url);
	memcpy(out->scheme, url, n);
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
		n = strlen(rest);
		if (n >= sizeof(out->export_name))
			return url_fail(err, errlen,
					"'%s': export name longer than %d bytes",
					url, RBLK_NAME_MAX - 1);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)rest[i] < 0x21 ||
			    (unsigned char)rest[i] > 0x7e || rest[i] == '/')
				return url_fail(err, errlen,
						"'%s': bad character in export name",
						url);
		memcpy(out->export_name, rest, n);
	} else if (*rest) {
		return url_fail(err, errlen, "'%s': unexpected '%s'", url, rest);
	}
	return 0;
}
