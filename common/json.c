/* SPDX-License-Identifier: MIT */
/* The JSON helpers of common/json.h (json-c). */
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Length of the valid UTF-8 sequence at s, or 0 when s starts none. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

struct json_object *rjson_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	struct json_object *o;
	size_t len, i, out = 0;
	char *copy;

	if (!s)
		return NULL;
	len = strlen(s);
	for (i = 0; i < len; i += utf8_len(p + i))
		if (!utf8_len(p + i))
			break;
	if (i >= len)
		return json_object_new_string_len(s, (int)len);
	/* some byte is not UTF-8: U+FFFD (3 bytes) for each such byte */
	copy = malloc(3 * len + 1);
	if (!copy)
		return NULL;
	for (i = 0; i < len;) {
		size_t n = utf8_len(p + i);

		if (n) {
			memcpy(copy + out, s + i, n);
			out += n;
			i += n;
		} else {
			memcpy(copy + out, "\xef\xbf\xbd", 3);
			out += 3;
			i++;
		}
	}
	o = json_object_new_string_len(copy, (int)out);
	free(copy);
	return o;
}

void rjson_add(struct json_object *o, const char *key, struct json_object *v)
{
	json_object_object_add(o, key, v);
}

void rjson_add_str(struct json_object *o, const char *key, const char *s)
{
	json_object_object_add(o, key, rjson_str(s));
}

void rjson_add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

void rjson_add_i64(struct json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

void rjson_add_bool(struct json_object *o, const char *key, int v)
{
	json_object_object_add(o, key, json_object_new_boolean(v != 0));
}

static int print_flags(FILE *f, struct json_object *o, int flags)
{
	const char *s;
	int ret = 0;

	if (!o)
		return -ENOMEM;
	s = json_object_to_json_string_ext(
	    o, flags | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!s)
		ret = -ENOMEM;
	else if (fputs(s, f) == EOF || fputc('\n', f) == EOF)
		ret = -EIO;
	json_object_put(o);
	return ret;
}

int rjson_print(FILE *f, struct json_object *o)
{
	return print_flags(f, o, JSON_C_TO_STRING_PLAIN);
}

int rjson_print_pretty(FILE *f, struct json_object *o)
{
	return print_flags(f, o,
			   JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED);
}

struct json_object *rjson_read_file(const char *path, size_t max_len, char *err,
				    size_t errlen)
{
	struct json_object *o = NULL;
	enum json_tokener_error jerr;
	char *buf = malloc(max_len + 1);
	ssize_t n;
	size_t len = 0;
	int fd;

	if (!buf) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out_free;
	}
	while (len < max_len && (n = read(fd, buf + len, max_len - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = 0;
	o = json_tokener_parse_verbose(buf, &jerr);
	if (!o) {
		snprintf(err, errlen, "%s: not JSON (%s)", path,
			 json_tokener_error_desc(jerr));
		errno = EINVAL;
	}
out_free:
	free(buf);
	return o;
}

const char *rjson_get_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int64_t rjson_get_i64(struct json_object *o, const char *key, int64_t def)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !(json_object_is_type(v, json_type_int) ||
	      json_object_is_type(v, json_type_double)))
		return def;
	return json_object_get_int64(v);
}
