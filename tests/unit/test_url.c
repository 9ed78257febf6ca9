/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/url.c (rblk_url_parse) and the number parsers in
 * common/util.c (parse_size, parse_uint).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/url.h"
#include "common/util.h"

static void url_ok(const char *url, const char *scheme, const char *host,
		   uint16_t port, const char *export_name)
{
	struct rblk_url u;
	char err[1024] = "";

	memset(&u, 0x55, sizeof(u));
	if (rblk_url_parse(url, RBLK_DEFAULT_PORT, &u, err, sizeof(err)))
		fail_msg("'%s' should parse, got: %s", url, err);
	assert_string_equal(u.scheme, scheme);
	assert_string_equal(u.host, host);
	assert_int_equal(u.port, port);
	assert_string_equal(u.export_name, export_name);
}

/* Must fail with -EINVAL and a reason that contains want (if given). */
static void url_bad(const char *url, const char *want)
{
	struct rblk_url u;
	char err[1024] = "";

	assert_int_equal(
	    rblk_url_parse(url, RBLK_DEFAULT_PORT, &u, err, sizeof(err)),
	    -EINVAL);
	if (!err[0])
		fail_msg("'%s': no reason given", url);
	if (want && !strstr(err, want))
		fail_msg("'%s': reason '%s' lacks '%s'", url, err, want);
	/* a NULL err buffer is allowed */
	assert_int_equal(rblk_url_parse(url, RBLK_DEFAULT_PORT, &u, NULL, 0),
			 -EINVAL);
}

static void test_url_default_port(void **state)
{
	struct rblk_url u;

	(void)state;
	url_ok("tcp://localhost", "tcp", "localhost", 7441, "");
	url_ok("rdma://192.0.2.1", "rdma", "192.0.2.1", 7441, "");
	url_ok("rdma://192.0.2.1/vol0", "rdma", "192.0.2.1", 7441, "vol0");
	url_ok("tcp://h/", "tcp", "h", 7441, "");
	/* the default comes from the caller */
	assert_int_equal(rblk_url_parse("tcp://h", 10809, &u, NULL, 0), 0);
	assert_int_equal(u.port, 10809);
}

static void test_url_explicit_port(void **state)
{
	(void)state;
	url_ok("tcp://h:1", "tcp", "h", 1, "");
	url_ok("tcp://h:80/e", "tcp", "h", 80, "e");
	url_ok("rdma://10.0.0.1:65535", "rdma", "10.0.0.1", 65535, "");
	url_ok("tcp://h:7441/vol0", "tcp", "h", 7441, "vol0");
	url_ok("tcp://h:00080", "tcp", "h", 80, "");
}

static void test_url_ipv6(void **state)
{
	(void)state;
	url_ok("tcp://[::1]", "tcp", "::1", 7441, "");
	url_ok("tcp://[::1]:9000", "tcp", "::1", 9000, "");
	url_ok("rdma://[fe80::1:2:3:4]:7441/vol0", "rdma", "fe80::1:2:3:4",
	       7441, "vol0");
	url_ok("rdma://[2001:db8::5]/x", "rdma", "2001:db8::5", 7441, "x");
	url_bad("tcp://[::1", "]");
	url_bad("tcp://[]", "empty host");
	url_bad("tcp://[]:80", "empty host");
	url_bad("tcp://[::1]x", NULL);
	url_bad("tcp://[::1]:", "port");
	/* without brackets the first ':' starts the port */
	url_bad("tcp://::1", "empty host");
}

static void test_url_missing_scheme(void **state)
{
	(void)state;
	url_bad("localhost", "scheme");
	url_bad("localhost:7441", "scheme");
	url_bad("://h", "scheme");
	url_bad("tcp:/h", "scheme");
	url_bad("tcp:h", "scheme");
	url_bad("", "scheme");
	url_bad("averyveryverylongscheme://h", "scheme");
}

static void test_url_empty_host(void **state)
{
	(void)state;
	url_bad("tcp://", "empty host");
	url_bad("tcp:///vol0", "empty host");
	url_bad("tcp://:7441", "empty host");
	url_bad("tcp://:7441/vol0", "empty host");
}

static void test_url_long_host(void **state)
{
	char url[400], host[300];

	(void)state;
	memset(host, 'h', 255);
	host[255] = 0;
	snprintf(url, sizeof(url), "tcp://%s:1", host);
	url_ok(url, "tcp", host, 1, "");
	memset(host, 'h', 256);
	host[256] = 0;
	snprintf(url, sizeof(url), "tcp://%s:1", host);
	url_bad(url, "too long");
}

static void test_url_bad_port(void **state)
{
	(void)state;
	url_bad("tcp://h:0", "port");
	url_bad("tcp://h:65536", "port");
	url_bad("tcp://h:99999", "port");
	url_bad("tcp://h:1234567", "port");
	url_bad("tcp://h:12345678901234567890", "port");
	url_bad("tcp://h:", "port");
	url_bad("tcp://h:/vol0", "port");
	url_bad("tcp://h:abc", "port");
	url_bad("tcp://h:80x", "port");
	url_bad("tcp://h:0x50", "port");
	url_bad("tcp://h:-1", "port");
	url_bad("tcp://h:8.0", "port");
	url_bad("tcp://[::1]:65536/e", "port");
}

static void test_url_export_name(void **state)
{
	char url[300], name[200];

	(void)state;
	/* 127 bytes is the longest export name */
	memset(name, 'n', RBLK_NAME_MAX - 1);
	name[RBLK_NAME_MAX - 1] = 0;
	snprintf(url, sizeof(url), "rdma://h/%s", name);
	url_ok(url, "rdma", "h", 7441, name);
	snprintf(url, sizeof(url), "rdma://[::1]:5/%s", name);
	url_ok(url, "rdma", "::1", 5, name);
	memset(name, 'n', RBLK_NAME_MAX);
	name[RBLK_NAME_MAX] = 0;
	snprintf(url, sizeof(url), "rdma://h/%s", name);
	url_bad(url, "longer than 127");

	url_ok("tcp://h/a-b_c.d~!", "tcp", "h", 7441, "a-b_c.d~!");
	url_bad("tcp://h/a b", "bad character");
	url_bad("tcp://h/a\tb", "bad character");
	url_bad("tcp://h/\x7f", "bad character");
	url_bad("tcp://h/\xc3\xa9", "bad character");
	url_bad("tcp://h/a\nb", "bad character");
	url_bad("tcp://h/ ", "bad character");
}

static void test_url_trailing_garbage(void **state)
{
	(void)state;
	url_bad("tcp://[::1]junk", "unexpected");
	url_bad("tcp://[::1]]", "unexpected");
}

/* A unix socket on this host, named as NBD URIs name one. */
static void test_url_unix(void **state)
{
	char url[300], path[200], out[300];
	struct rblk_url u;

	(void)state;
	url_ok("unix:///vol0?socket=/run/rblk/data.sock", "unix",
	       "/run/rblk/data.sock", 0, "vol0");
	url_ok("unix:///?socket=/tmp/t.sock", "unix", "/tmp/t.sock", 0, "");
	url_bad("unix://vol0?socket=/tmp/t.sock", "unix:///");
	url_bad("unix:///vol0", "socket path");
	url_bad("unix:///vol0?sock=/tmp/t", "socket path");
	url_bad("unix:///vol0?socket=tmp/t.sock", "absolute");
	url_bad("unix:///vol0?socket=", "absolute");
	url_bad("unix:///a/b?socket=/tmp/t.sock", "bad character");
	/* sun_path holds 107 bytes and the NUL */
	memset(path, 'p', sizeof(path));
	path[0] = '/';
	path[107] = 0;
	snprintf(url, sizeof(url), "unix:///v?socket=%s", path);
	url_ok(url, "unix", path, 0, "v");
	path[107] = 'p';
	path[108] = 0;
	snprintf(url, sizeof(url), "unix:///v?socket=%s", path);
	url_bad(url, "longer than 107");
	/* for messages */
	assert_int_equal(rblk_url_parse("unix:///v?socket=/s", 1, &u, NULL, 0),
			 0);
	rblk_url_endpoint(&u, out, sizeof(out));
	assert_string_equal(out, "unix:///?socket=/s");
	assert_int_equal(rblk_url_parse("tcp://[::1]:9/v", 1, &u, NULL, 0), 0);
	rblk_url_endpoint(&u, out, sizeof(out));
	assert_string_equal(out, "tcp://[::1]:9");
	assert_int_equal(rblk_url_parse("rdma://h/v", 7441, &u, NULL, 0), 0);
	rblk_url_endpoint(&u, out, sizeof(out));
	assert_string_equal(out, "rdma://h:7441");
}

/* ---- parse_size ---------------------------------------------------------- */

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = 0xdeadbeef;

	if (parse_size(s, &v))
		fail_msg("parse_size('%s') failed", s);
	if (v != want)
		fail_msg("parse_size('%s') = %llu, want %llu", s,
			 (unsigned long long)v, (unsigned long long)want);
}

static void size_bad(const char *s, int want)
{
	uint64_t v = 0xdeadbeef;
	int ret = parse_size(s, &v);

	if (ret != want)
		fail_msg("parse_size('%s') = %d, want %d", s, ret, want);
	assert_true(v == 0xdeadbeef); /* untouched on failure */
}

static void test_parse_size(void **state)
{
	(void)state;
	size_ok("0", 0);
	size_ok("1", 1);
	size_ok("4096", 4096);
	size_ok("18446744073709551615", UINT64_MAX);
	size_ok("1K", 1024);
	size_ok("1k", 1024);
	size_ok("4KiB", 4096);
	size_ok("4kib", 4096);
	size_ok("4KB", 4096);
	size_ok("1M", 1ull << 20);
	size_ok("8M", 8ull << 20);
	size_ok("1MiB", 1ull << 20);
	size_ok("1G", 1ull << 30);
	size_ok("3g", 3ull << 30);
	size_ok("1T", 1ull << 40);
	size_ok("1P", 1ull << 50);
	size_ok("16383P", 16383ull << 50);
	size_ok("0K", 0);

	size_bad("", -EINVAL);
	size_bad("-1", -EINVAL);
	size_bad("-1K", -EINVAL);
	size_bad("K", -EINVAL);
	size_bad("abc", -EINVAL);
	size_bad("1X", -EINVAL);
	size_bad("1E", -EINVAL);
	size_bad("1B", -EINVAL);
	size_bad("1Ki", -EINVAL);
	size_bad("1KiBx", -EINVAL);
	size_bad("1KK", -EINVAL);
	size_bad("1.5M", -EINVAL);
	size_bad("0x10", -EINVAL);
	size_bad("1 K", -EINVAL);
	size_bad("1K ", -EINVAL);
	size_bad("4096 ", -EINVAL);
	size_bad("18446744073709551616", -EINVAL);
	size_bad("99999999999999999999999", -EINVAL);
	/* in range before the suffix, out of range after it */
	size_bad("16384P", -ERANGE);
	size_bad("18014398509481984K", -ERANGE);
	size_bad("17179869184G", -ERANGE);
	assert_int_equal(parse_size(NULL, &(uint64_t){0}), -EINVAL);
}

/* ---- parse_uint ---------------------------------------------------------- */

/* str_sanitize(): peer-supplied names before a log line or a listing */
static void test_str_sanitize(void **state)
{
	char out[64], again[64], tiny[5];
	const char nl[] = "/tmp/x\nFAKE: admin\x1b[2J\xff";

	(void)state;
	str_sanitize(out, sizeof(out), nl, sizeof(nl));
	assert_string_equal(out, "/tmp/x\\x0aFAKE: admin\\x1b[2J\\xff");
	assert_null(strchr(out, '\n'));
	/* idempotent: a second pass changes nothing */
	str_sanitize(again, sizeof(again), out, sizeof(out));
	assert_string_equal(again, out);
	/* srclen bounds an unterminated source (a sun_path) */
	str_sanitize(out, sizeof(out), "abcdef", 3);
	assert_string_equal(out, "abc");
	/* cut on a whole character, never half an escape */
	str_sanitize(tiny, sizeof(tiny), "a\nb", 3);
	assert_string_equal(tiny, "a");
	str_sanitize(tiny, sizeof(tiny), "abcdefgh", 8);
	assert_string_equal(tiny, "abcd");
}

static void test_parse_uint(void **state)
{
	unsigned long v;

	(void)state;
	v = 99;
	assert_int_equal(parse_uint("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_uint("10", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse_uint("1024", 1, 1024, &v), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(parse_uint("007", 1, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(parse_uint("18446744073709551615", 0, ULONG_MAX, &v),
			 0);
	assert_true(v == ULONG_MAX);

	v = 99;
	assert_int_equal(parse_uint("11", 0, 10, &v), -ERANGE);
	assert_int_equal(parse_uint("0", 1, 10, &v), -ERANGE);
	assert_int_equal(parse_uint("1025", 1, 1024, &v), -ERANGE);
	assert_int_equal(parse_uint("18446744073709551616", 0, ULONG_MAX, &v),
			 -ERANGE);
	assert_int_equal(v, 99); /* untouched on failure */

	assert_int_equal(parse_uint("", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint(NULL, 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("-1", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("-0", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("abc", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("1a", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("0x1", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("1.0", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("1 ", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("1K", 0, 10000, &v), -EINVAL);
	assert_int_equal(v, 99);
}

/* ---- parse_seconds_ms ------------------------------------------------------
 */

static void test_parse_seconds_ms(void **state)
{
	int ms;

	(void)state;
	ms = 7;
	assert_int_equal(parse_seconds_ms("0", false, &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(parse_seconds_ms("3", false, &ms), 0);
	assert_int_equal(ms, 3000);
	assert_int_equal(parse_seconds_ms("0.2", false, &ms), 0);
	assert_int_equal(ms, 200);
	assert_int_equal(parse_seconds_ms("1.0005", false, &ms), 0);
	assert_int_equal(ms, 1001);
	assert_int_equal(parse_seconds_ms("-1", true, &ms), 0);
	assert_int_equal(ms, -1);
	ms = 7;
	assert_int_equal(parse_seconds_ms("-1", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("-2", true, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms(" 1", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("1s", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("1e3", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("0x10", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("nan", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms(".5", false, &ms), -EINVAL);
	assert_int_equal(parse_seconds_ms("9999999", false, &ms), -ERANGE);
	assert_int_equal(parse_seconds_ms(NULL, true, &ms), -EINVAL);
	assert_int_equal(ms, 7); /* untouched on failure */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url_default_port),
	    cmocka_unit_test(test_url_explicit_port),
	    cmocka_unit_test(test_url_ipv6),
	    cmocka_unit_test(test_url_missing_scheme),
	    cmocka_unit_test(test_url_empty_host),
	    cmocka_unit_test(test_url_long_host),
	    cmocka_unit_test(test_url_bad_port),
	    cmocka_unit_test(test_url_export_name),
	    cmocka_unit_test(test_url_trailing_garbage),
	    cmocka_unit_test(test_url_unix),
	    cmocka_unit_test(test_parse_size),
	    cmocka_unit_test(test_parse_uint),
	    cmocka_unit_test(test_str_sanitize),
	    cmocka_unit_test(test_parse_seconds_ms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
