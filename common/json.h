/* SPDX-License-Identifier: MIT */
/*
 * JSON for the programs (not librblk): every JSON document rblk writes or
 * reads goes through json-c, and every string through rjson_str(), so
 * there is one escaping rule: valid UTF-8 passes through, an invalid byte
 * becomes U+FFFD, and json-c escapes quote, backslash and control
 * characters (as \uXXXX or \n, \t, ...). Output is compact, one document
 * per line, '/' not escaped.
 */
#ifndef RBLK_COMMON_JSON_H
#define RBLK_COMMON_JSON_H

#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

/* A JSON string of s (NULL: JSON null). */
struct json_object *rjson_str(const char *s);
/* Add key: value to object o; value may be NULL (JSON null). */
void rjson_add(struct json_object *o, const char *key, struct json_object *v);
void rjson_add_str(struct json_object *o, const char *key, const char *s);
void rjson_add_u64(struct json_object *o, const char *key, uint64_t v);
void rjson_add_i64(struct json_object *o, const char *key, int64_t v);
void rjson_add_bool(struct json_object *o, const char *key, int v);
/*
 * Print o and a newline to f and drop the caller's reference to o.
 * Returns 0 or -errno (-ENOMEM when o is NULL).
 */
int rjson_print(FILE *f, struct json_object *o);
/* The same, indented by two spaces, for output people read first. */
int rjson_print_pretty(FILE *f, struct json_object *o);
/*
 * Parse the JSON document in path (at most max_len bytes). NULL with the
 * reason in err (file missing: errno ENOENT) otherwise the caller's
 * reference.
 */
struct json_object *rjson_read_file(const char *path, size_t max_len, char *err,
				    size_t errlen);
/* o's member key as a string, or NULL when absent or not a string */
const char *rjson_get_str(struct json_object *o, const char *key);
/* o's member key as an integer, or def when absent or not a number */
int64_t rjson_get_i64(struct json_object *o, const char *key, int64_t def);

#endif
