/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <unistd.h>

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int parse_uint(const char *s, unsigned long min, unsigned long max,
	       unsigned long *out)
{
	char *end;
	unsigned long v;

	/* strtoul would accept leading blanks, '+' and '-' */
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end)
		return errno == ERANGE ? -ERANGE : -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTP";
	char *end;
	unsigned long long v;
	const char *u;
	int shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end) {
		u = strchr(units, *end >= 'a' ? *end - 32 : *end);
		if (!u || !*u)
			return -EINVAL;
		shift = 10 * (int)(u - units + 1);
		end++;
		if (*end && strcasecmp(end, "iB") && strcasecmp(end, "B"))
			return -EINVAL;
	}
	if (shift && v > (~0ULL >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t read_small_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return n;
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	return n;
}

void random_bytes(void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			abort(); /* no entropy source: nothing safe to do */
		}
		p += n;
		len -= (size_t)n;
	}
}

int parse_seconds_ms(const char *s, bool allow_forever, int *out_ms)
{
	char *end;
	double v;

	if (allow_forever && s && !strcmp(s, "-1")) {
		*out_ms = -1;
		return 0;
	}
	/* strtod would accept blanks, signs, hex, inf and nan */
	if (!s || !isdigit((unsigned char)*s) || strpbrk(s, "xXeEnN"))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || end == s)
		return -EINVAL;
	if (v > 86400.0 * 24)
		return -ERANGE;
	*out_ms = (int)(v * 1000.0 + 0.5);
	return 0;
}

int errbuf_printf(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

int open_user_path(const char *path, int flags, struct stat *st)
{
	int fd, fl, ret;

	fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	fl = fcntl(fd, F_GETFL);
	if (fstat(fd, st) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

char *str_sanitize(char *dst, size_t len, const char *src, size_t srclen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (size_t i = 0; i < srclen && src[i]; i++) {
		unsigned char ch = (unsigned char)src[i];

		if (ch >= 0x20 && ch <= 0x7e) {
			if (o + 1 >= len)
				break;
			dst[o++] = (char)ch;
		} else {
			if (o + 4 >= len)
				break;
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[ch >> 4];
			dst[o++] = hex[ch & 15];
		}
	}
	dst[o] = 0;
	return dst;
}
