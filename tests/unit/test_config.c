/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for config/config.c: cfg_load on temporary files, the
 * --export and --listen forms, cfg_validate, and the shipped example.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "config/config.h"

static struct cfg_target *cfg_new(void)
{
	struct cfg_target *cfg = malloc(sizeof(*cfg));

	assert_non_null(cfg);
	cfg_init(cfg);
	return cfg;
}

/* Write text to a new temporary file; returns its malloc'd path. */
static char *tmp_file(const char *text)
{
	const char *dir = getenv("TMPDIR");
	char *path;
	FILE *f;
	int fd;

	if (asprintf(&path, "%s/rblk-cfg-XXXXXX", dir ? dir : "/tmp") < 0)
		fail_msg("asprintf");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	return path;
}

/* cfg_load of text into cfg; err receives the message. */
static int load_text(struct cfg_target *cfg, const char *text, char *err,
		     size_t errlen, char **pathp)
{
	char *path = tmp_file(text);
	int ret;

	err[0] = 0;
	ret = cfg_load(cfg, path, err, errlen);
	unlink(path);
	if (pathp)
		*pathp = path;
	else
		free(path);
	return ret;
}

static void load_ok(struct cfg_target *cfg, const char *text)
{
	char err[1024];

	if (load_text(cfg, text, err, sizeof(err), NULL))
		fail_msg("cfg_load failed: %s\n--- input ---\n%s", err, text);
}

/* The load must fail with -EINVAL, naming "FILE:LINE:" and want. */
static void load_bad_ret(const char *text, int line, const char *want, int ret)
{
	struct cfg_target *cfg = cfg_new();
	struct cfg_target *before = cfg_new();
	char err[1024], prefix[PATH_MAX + 32];
	char *path;
	int got;

	got = load_text(cfg, text, err, sizeof(err), &path);
	if (got != ret)
		fail_msg("want %d, got %d (%s)\n--- input ---\n%s", ret, got,
			 err, text);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	if (strncmp(err, prefix, strlen(prefix)))
		fail_msg(
		    "message '%s' does not start with '%s'\n--- input ---\n%s",
		    err, prefix, text);
	if (want && !strstr(err, want))
		fail_msg("message '%s' lacks '%s'", err, want);
	/* a failed load leaves the configuration as it was */
	assert_memory_equal(cfg, before, sizeof(*cfg));
	free(path);
	free(cfg);
	free(before);
}

static void load_bad(const char *text, int line, const char *want)
{
	load_bad_ret(text, line, want, -EINVAL);
}

static const char full[] = "; a full configuration\n"
			   "# hash comments too\n"
			   "\n"
			   "[target]\n"
			   "listen = rdma://0.0.0.0:7441\n"
			   "listen = tcp://[::1]\n"
			   "workers = 4\n"
			   "engine = libaio\n"
			   "log_level = debug ; inline comment\n"
			   "max_queue_depth = 256\n"
			   "max_io = 2M\n"
			   "poll_spin_us = 50\n"
			   "\n"
			   "[export vol0]\n"
			   "path = /srv/vol0.img\n"
			   "read_only = yes\n"
			   "block_size = 4096\n"
			   "\n"
			   "[export ram-1]\n"
			   "path = ram:64M\n"
			   "\n"
			   "[export dev]\n"
			   "path = /dev/disk/by-id/nvme-x\n"
			   "read_only = off\n"
			   "block_size = 4K\n";

static void test_defaults(void **state)
{
	struct cfg_target *cfg = cfg_new();

	(void)state;
	assert_int_equal(cfg->nr_listen, 0);
	assert_int_equal(cfg->nr_exports, 0);
	assert_int_equal(cfg->workers, 0);
	assert_string_equal(cfg->engine, "io_uring");
	assert_int_equal(cfg->log_level, -1);
	assert_int_equal(cfg->max_queue_depth, 128);
	assert_int_equal(cfg->max_io, 1u << 20);
	assert_int_equal(cfg->poll_spin_us, 0);
	free(cfg);
}

static void test_load_full(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];

	(void)state;
	load_ok(cfg, full);
	assert_int_equal(cfg->nr_listen, 2);
	assert_string_equal(cfg->listen[0], "rdma://0.0.0.0:7441");
	assert_string_equal(cfg->listen[1], "tcp://[::1]");
	assert_int_equal(cfg->workers, 4);
	assert_string_equal(cfg->engine, "libaio");
	assert_int_equal(cfg->log_level, LOG_DEBUG);
	assert_int_equal(cfg->max_queue_depth, 256);
	assert_int_equal(cfg->max_io, 2u << 20);
	assert_int_equal(cfg->poll_spin_us, 50);
	assert_int_equal(cfg->nr_exports, 3);
	assert_string_equal(cfg->exports[0].name, "vol0");
	assert_string_equal(cfg->exports[0].path, "/srv/vol0.img");
	assert_true(cfg->exports[0].read_only);
	assert_int_equal(cfg->exports[0].block_size, 4096);
	assert_string_equal(cfg->exports[1].name, "ram-1");
	assert_string_equal(cfg->exports[1].path, "ram:64M");
	assert_false(cfg->exports[1].read_only);
	assert_int_equal(cfg->exports[1].block_size, 0);
	assert_string_equal(cfg->exports[2].name, "dev");
	assert_false(cfg->exports[2].read_only);
	assert_int_equal(cfg->exports[2].block_size, 4096);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);
	free(cfg);
}

static void test_load_layout(void **state)
{
	struct cfg_target *cfg = cfg_new();

	(void)state;
	/* indented keys are keys, not continuations of the previous value */
	load_ok(cfg, "[target]\n"
		     "    listen = tcp://h\n"
		     "\tworkers = 2\n"
		     "  [export  a ]  ; spaces around the name\n"
		     "    path =   /p q  \n"
		     "    read_only=1\n"
		     "\r\n"
		     "[ target ]\n"
		     "engine = io_uring\r\n");
	assert_int_equal(cfg->nr_listen, 1);
	assert_string_equal(cfg->listen[0], "tcp://h");
	assert_int_equal(cfg->workers, 2);
	assert_int_equal(cfg->nr_exports, 1);
	assert_string_equal(cfg->exports[0].name, "a");
	assert_string_equal(cfg->exports[0].path, "/p q");
	assert_true(cfg->exports[0].read_only);
	assert_string_equal(cfg->engine, "io_uring");

	/* a UTF-8 byte order mark before the first section */
	cfg_init(cfg);
	load_ok(cfg, "\xef\xbb\xbf[export bom]\npath = /x\n");
	assert_string_equal(cfg->exports[0].name, "bom");

	/* an empty file changes nothing */
	cfg_init(cfg);
	load_ok(cfg, "");
	load_ok(cfg, "; only a comment\n\n");
	assert_int_equal(cfg->nr_exports, 0);
	free(cfg);
}

static void test_load_on_top(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];

	(void)state;
	assert_int_equal(cfg_add_export_arg(cfg, "cli=/x", err, sizeof(err)),
			 0);
	assert_int_equal(cfg_add_listen(cfg, "tcp://h:1", err, sizeof(err)), 0);
	load_ok(cfg, "[target]\nlisten = tcp://h:2\n[export f]\npath=/y\n");
	assert_int_equal(cfg->nr_listen, 2);
	assert_int_equal(cfg->nr_exports, 2);
	assert_string_equal(cfg->exports[0].name, "cli");
	assert_string_equal(cfg->exports[1].name, "f");
	/* a name the caller already has is a duplicate */
	assert_int_equal(
	    load_text(cfg, "[export cli]\npath=/z\n", err, sizeof(err), NULL),
	    -EINVAL);
	assert_non_null(strstr(err, ":1: "));
	assert_non_null(strstr(err, "already defined"));
	assert_int_equal(cfg->nr_exports, 2);
	free(cfg);
}

static void test_load_missing_file(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];

	(void)state;
	assert_int_equal(
	    cfg_load(cfg, "/nonexistent/rblk.conf", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/rblk.conf"));
	assert_non_null(strstr(err, "No such file"));
	assert_int_equal(cfg_load(cfg, "/", err, sizeof(err)) < 0, 1);
	free(cfg);
}

static void test_load_syntax_errors(void **state)
{
	(void)state;
	load_bad("[target]\nworkers 4\n", 2, "syntax");
	load_bad("[target]\nlisten = tcp://h\n[export a\npath = /x\n", 3,
		 "syntax");
	load_bad("\n\n\n\n[target]\n=5\n", 6, "syntax");
	load_bad("[target]\nlisten tcp://h\n", 2, "expected key = value");
	load_bad("[target] junk\n", 1, "after ']'");
	/* the first error wins, whoever finds it */
	load_bad("[target]\nno equals here\nbogus = 1\n", 2, "syntax");
	load_bad("[target]\nbogus = 1\nno equals here\n", 2, "bogus");
}

static void test_load_sections(void **state)
{
	(void)state;
	load_bad("[targets]\nworkers = 1\n", 1, "unknown section [targets]");
	load_bad("; c\n[global]\n", 2, "unknown section");
	load_bad("[exports a]\npath=/x\n", 1, "unknown section");
	load_bad("[export]\npath=/x\n", 1, "needs a name");
	load_bad("[export   ]\npath=/x\n", 1, "needs a name");
	load_bad("workers = 1\n", 1, "outside a section");
	load_bad("[]\n", 1, "unknown section");
}

static void test_load_unknown_keys(void **state)
{
	(void)state;
	load_bad("[target]\nworkers = 1\nthreads = 2\n", 3,
		 "unknown key 'threads'");
	load_bad("[export a]\npath = /x\nsize = 1G\n", 3, "unknown key 'size'");
	load_bad("[export a]\npath = /x\n[target]\npath = /y\n", 4,
		 "unknown key 'path' in [target]");
	load_bad("[target]\nListen = tcp://h\n", 2, "unknown key 'Listen'");
	load_bad("[export a]\nlisten = tcp://h\n", 2, "unknown key 'listen'");
}

static void test_load_bad_values(void **state)
{
	(void)state;
	load_bad("[target]\nworkers =\n", 2, "no value");
	load_bad("[target]\nworkers = many\n", 2, "workers");
	load_bad("[target]\nworkers = -1\n", 2, "workers");
	load_bad("[target]\nworkers = 1025\n", 2, "workers");
	load_bad("[target]\nengine = aio\n", 2, "engine");
	load_bad("[target]\nengine = IO_URING\n", 2, "engine");
	load_bad("[target]\npoll_spin_us = 1001\n", 2,
		 "poll_spin_us: '1001' is not a number from 0 to 1000");
	load_bad("[target]\npoll_spin_us = -1\n", 2, "poll_spin_us");
	load_bad("[target]\nlog_level = verbose\n", 2, "log_level");
	load_bad("[target]\nmax_queue_depth = 0\n", 2, "max_queue_depth");
	load_bad("[target]\nmax_queue_depth = 1025\n", 2, "max_queue_depth");
	load_bad("[target]\nmax_queue_depth = 1K\n", 2, "max_queue_depth");
	load_bad("[target]\nmax_io = 2K\n", 2, "max_io");
	load_bad("[target]\nmax_io = 16M\n", 2, "max_io");
	load_bad("[target]\nmax_io = 12K\n", 2, "max_io");
	load_bad("[target]\nmax_io = 0\n", 2, "max_io");
	load_bad("[target]\nmax_io = lots\n", 2, "max_io");
	load_bad("[export a]\npath = /x\nblock_size = 256\n", 3, "block size");
	load_bad("[export a]\npath = /x\nblock_size = 3000\n", 3, "block size");
	load_bad("[export a]\npath = /x\nblock_size = 128K\n", 3, "block size");
	load_bad("[export a]\npath = /x\nblock_size = big\n", 3, "block_size");
	load_bad("[export a]\npath =\n", 2, "no value");
	load_bad("[target]\nlisten = http://h\n", 2, "scheme");
	load_bad("[target]\nlisten = tcp://h/vol0\n", 2, "no export");
	load_bad("[target]\nlisten = tcp://h/\n", 2, "no export");
	load_bad("[target]\nlisten = tcp://h:0\n", 2, "port");
	load_bad("[target]\nlisten = h:7441\n", 2, "scheme");
}

static void test_load_good_values(void **state)
{
	struct cfg_target *cfg = cfg_new();

	(void)state;
	load_ok(cfg, "[target]\nmax_io = 4K\nmax_queue_depth = 1\n"
		     "workers = 0\nlog_level = 0\n");
	assert_int_equal(cfg->max_io, 4096);
	assert_int_equal(cfg->max_queue_depth, 1);
	assert_int_equal(cfg->log_level, LOG_ERR);
	cfg_init(cfg);
	load_ok(cfg, "[target]\nmax_io = 8M\nmax_queue_depth = 1024\n"
		     "log_level = warn\n"
		     "[export a]\npath=/x\nblock_size = 512\n"
		     "[export b]\npath=/x\nblock_size = 65536\n"
		     "[export c]\npath=/x\nblock_size = 0\n");
	assert_int_equal(cfg->max_io, 8u << 20);
	assert_int_equal(cfg->max_queue_depth, 1024);
	assert_int_equal(cfg->log_level, LOG_WARN);
	assert_int_equal(cfg->exports[0].block_size, 512);
	assert_int_equal(cfg->exports[1].block_size, 65536);
	assert_int_equal(cfg->exports[2].block_size, 0);
	free(cfg);
}

static void test_load_duplicates(void **state)
{
	(void)state;
	load_bad("[target]\nworkers = 1\n\nworkers = 2\n", 4,
		 "given twice (first on line 2)");
	load_bad("[target]\nmax_io = 1M\n[target]\nmax_io = 1M\n", 4,
		 "given twice");
	load_bad("[export a]\npath = /x\npath = /y\n", 3, "given twice");
	load_bad("[export a]\npath = /x\nread_only = no\nread_only = yes\n", 4,
		 "given twice");
	load_bad("[export a]\npath = /x\n\n[export a]\npath = /y\n", 4,
		 "defined twice (first on line 1)");
	load_bad("[target]\nlisten = tcp://h\nlisten = tcp://h:7441\n", 3,
		 "given twice");
}

static void test_load_repeated_listen(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char text[4096];
	size_t n = 0;

	(void)state;
	load_ok(cfg, "[target]\nlisten = tcp://h:1\nlisten = rdma://h:1\n"
		     "listen = tcp://h:2\n");
	assert_int_equal(cfg->nr_listen, 3);
	assert_string_equal(cfg->listen[0], "tcp://h:1");
	assert_string_equal(cfg->listen[1], "rdma://h:1");
	assert_string_equal(cfg->listen[2], "tcp://h:2");

	/* CFG_MAX_LISTEN of them fit, one more does not */
	n += (size_t)snprintf(text + n, sizeof(text) - n, "[target]\n");
	for (int i = 0; i < CFG_MAX_LISTEN; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "listen = tcp://h:%d\n", 1000 + i);
	cfg_init(cfg);
	load_ok(cfg, text);
	assert_int_equal(cfg->nr_listen, CFG_MAX_LISTEN);
	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      "listen = tcp://h:999\n");
	load_bad_ret(text, CFG_MAX_LISTEN + 2, "more than", -EINVAL);
	free(cfg);
}

static void test_load_booleans(void **state)
{
	static const struct {
		const char *s;
		bool v;
	} vals[] = {
	    {"yes", true}, {"no", false},  {"true", true}, {"false", false},
	    {"1", true},   {"0", false},   {"on", true},   {"off", false},
	    {"YES", true}, {"Off", false}, {"True", true},
	};
	static const char *const bad[] = {"y",	"n",	"2", "enabled",
					  "-1", "yess", "o"};
	struct cfg_target *cfg = cfg_new();
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		snprintf(text, sizeof(text),
			 "[export a]\npath = /x\nread_only = %s\n", vals[i].s);
		cfg_init(cfg);
		load_ok(cfg, text);
		assert_int_equal(cfg->exports[0].read_only, vals[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 "[export a]\npath = /x\nread_only = %s\n", bad[i]);
		load_bad(text, 3, "read_only");
	}
	free(cfg);
}

static void test_load_ram(void **state)
{
	struct cfg_target *cfg = cfg_new();

	(void)state;
	load_ok(cfg, "[export a]\npath = ram:4096\n"
		     "[export b]\npath = ram:4K\n"
		     "[export c]\npath = ram:1G\n"
		     "[export d]\npath = ram:12K\n");
	assert_string_equal(cfg->exports[3].path, "ram:12K");
	load_bad("[export a]\npath = ram:0\n", 2, "positive multiple of 4096");
	load_bad("[export a]\npath = ram:1000\n", 2, "multiple of 4096");
	load_bad("[export a]\npath = ram:6K\n", 2, "multiple of 4096");
	load_bad("[export a]\npath = ram:\n", 2, "RAM size");
	load_bad("[export a]\npath = ram:lots\n", 2, "RAM size");
	load_bad("[export a]\npath = ram:-4K\n", 2, "RAM size");
	free(cfg);
}

static void test_load_export_names(void **state)
{
	char text[512], name[200];

	(void)state;
	load_bad("[export a/b]\npath = /x\n", 1, "bad character");
	load_bad("[export a b]\npath = /x\n", 1, "bad character");
	load_bad("[export a\tb]\npath = /x\n", 1, "bad character");
	load_bad("[export \x7f]\npath = /x\n", 1, "bad character");
	load_bad("[export \xc3\xa9]\npath = /x\n", 1, "bad character");
	memset(name, 'n', RBLK_NAME_MAX);
	name[RBLK_NAME_MAX] = 0;
	snprintf(text, sizeof(text), "[export %s]\npath = /x\n", name);
	load_bad(text, 1, "longer than 127");
	name[RBLK_NAME_MAX - 1] = 0;
	snprintf(text, sizeof(text), "[export %s]\npath = /x\n", name);
	{
		struct cfg_target *cfg = cfg_new();

		load_ok(cfg, text);
		assert_string_equal(cfg->exports[0].name, name);
		free(cfg);
	}
	/* export without a path: the error names the section's line */
	load_bad("[export a]\npath = /x\n\n[export b]\nread_only = yes\n", 4,
		 "export 'b' has no path");
	load_bad("[target]\n[export empty]\n", 2, "has no path");
}

static void test_load_long_and_odd_lines(void **state)
{
	char *text;
	size_t n = 1000;

	(void)state;
	text = malloc(n + 64);
	assert_non_null(text);
	snprintf(text, n + 64, "[export a]\npath = /%0*d\n", (int)n, 0);
	load_bad(text, 2, "line too long");
	free(text);
	/* a NUL byte inside a line */
	{
		char *path, err[512];
		struct cfg_target *cfg = cfg_new();
		FILE *f;

		path = tmp_file("");
		f = fopen(path, "w");
		assert_non_null(f);
		fwrite("[target]\nwork\0ers = 1\n", 1, 22, f);
		fclose(f);
		assert_int_equal(cfg_load(cfg, path, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, ":2: "));
		assert_non_null(strstr(err, "NUL"));
		unlink(path);
		free(path);
		free(cfg);
	}
}

/* ---- --export ------------------------------------------------------------ */

static void export_bad(const char *arg, const char *want)
{
	struct cfg_target *cfg = cfg_new();
	char err[1024] = "";

	if (cfg_add_export_arg(cfg, arg, err, sizeof(err)) != -EINVAL)
		fail_msg("'%s' should fail", arg);
	if (!strstr(err, want))
		fail_msg("'%s': message '%s' lacks '%s'", arg, err, want);
	assert_int_equal(cfg->nr_exports, 0);
	free(cfg);
}

static void test_export_arg(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];

	(void)state;
	assert_int_equal(
	    cfg_add_export_arg(cfg, "a=/srv/a.img", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "b=/dev/sdb,ro", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "c=ram:1G,bs=4096", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "d=/x=y,ro,bs=4K", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "e=/x,bs=512,ro,rw", err, sizeof(err)), 0);
	assert_int_equal(cfg->nr_exports, 5);
	assert_string_equal(cfg->exports[0].name, "a");
	assert_string_equal(cfg->exports[0].path, "/srv/a.img");
	assert_false(cfg->exports[0].read_only);
	assert_int_equal(cfg->exports[0].block_size, 0);
	assert_string_equal(cfg->exports[1].path, "/dev/sdb");
	assert_true(cfg->exports[1].read_only);
	assert_string_equal(cfg->exports[2].path, "ram:1G");
	assert_int_equal(cfg->exports[2].block_size, 4096);
	assert_string_equal(cfg->exports[3].name, "d");
	assert_string_equal(cfg->exports[3].path, "/x=y");
	assert_true(cfg->exports[3].read_only);
	assert_int_equal(cfg->exports[3].block_size, 4096);
	assert_false(cfg->exports[4].read_only);
	assert_int_equal(cfg->exports[4].block_size, 512);

	/* the same name twice */
	assert_int_equal(cfg_add_export_arg(cfg, "a=/other", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "defined twice"));
	assert_int_equal(cfg->nr_exports, 5);
	free(cfg);

	export_bad("noequals", "NAME=PATH");
	export_bad("=/x", "NAME=PATH");
	export_bad("", "NAME=PATH");
	export_bad("a=", "empty path");
	export_bad("a=,ro", "empty path");
	export_bad("a/b=/x", "bad character");
	export_bad("a b=/x", "bad character");
	export_bad("a=/x,foo", "unknown option 'foo'");
	export_bad("a=/x,RO", "unknown option 'RO'");
	export_bad("a=/x,", "empty option");
	export_bad("a=/x,,ro", "empty option");
	export_bad("a=/x,bs=1000", "bad bs");
	export_bad("a=/x,bs=128K", "bad bs");
	export_bad("a=/x,bs=", "bad bs");
	export_bad("a=/x,bs=x", "bad bs");
	export_bad("a=ram:0", "positive multiple");
	export_bad("a=ram:100", "multiple of 4096");
	export_bad("a=ram:x", "RAM size");
}

static void test_direct(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];

	(void)state;
	/* --export: direct / nodirect, default left to the backend */
	assert_int_equal(cfg_add_export_arg(cfg, "a=/x", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "b=/x,direct", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "c=ram:4K,ro,nodirect", err, sizeof(err)),
	    0);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "d=/x,nodirect,direct", err, sizeof(err)),
	    0);
	assert_int_equal(cfg->exports[0].direct, CFG_DIRECT_DEFAULT);
	assert_int_equal(cfg->exports[1].direct, CFG_DIRECT_YES);
	assert_int_equal(cfg->exports[2].direct, CFG_DIRECT_NO);
	assert_true(cfg->exports[2].read_only);
	assert_int_equal(cfg->exports[3].direct, CFG_DIRECT_YES);
	export_bad("a=/x,Direct", "unknown option 'Direct'");
	export_bad("a=/x,direct=yes", "unknown option 'direct=yes'");

	/* the INI key */
	cfg_init(cfg);
	load_ok(cfg, "[export a]\npath = /x\ndirect = yes\n"
		     "[export b]\npath = ram:1M\ndirect = off\n"
		     "[export c]\npath = ram:1M\n");
	assert_int_equal(cfg->exports[0].direct, CFG_DIRECT_YES);
	assert_int_equal(cfg->exports[1].direct, CFG_DIRECT_NO);
	assert_int_equal(cfg->exports[2].direct, CFG_DIRECT_DEFAULT);
	free(cfg);
	load_bad("[export a]\npath = /x\ndirect = maybe\n", 3, "direct");
	load_bad("[export a]\npath = /x\ndirect = yes\ndirect = no\n", 4,
		 "direct");
}

static void test_export_arg_limits(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512], arg[64], name[200];
	char *big;

	(void)state;
	for (int i = 0; i < CFG_MAX_EXPORTS; i++) {
		snprintf(arg, sizeof(arg), "v%d=ram:4K", i);
		assert_int_equal(cfg_add_export_arg(cfg, arg, err, sizeof(err)),
				 0);
	}
	assert_int_equal(
	    cfg_add_export_arg(cfg, "one-more=/x", err, sizeof(err)), -ENOSPC);
	assert_non_null(strstr(err, "more than"));
	assert_int_equal(cfg->nr_exports, CFG_MAX_EXPORTS);

	cfg_init(cfg);
	memset(name, 'n', RBLK_NAME_MAX - 1);
	name[RBLK_NAME_MAX - 1] = 0;
	big = malloc(PATH_MAX + RBLK_NAME_MAX + 16);
	assert_non_null(big);
	snprintf(big, PATH_MAX + RBLK_NAME_MAX + 16, "%s=/x", name);
	assert_int_equal(cfg_add_export_arg(cfg, big, err, sizeof(err)), 0);
	snprintf(big, PATH_MAX + RBLK_NAME_MAX + 16, "n%s=/x", name);
	assert_int_equal(cfg_add_export_arg(cfg, big, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "longer than 127"));
	/* a path of PATH_MAX - 1 bytes fits, PATH_MAX does not */
	snprintf(big, PATH_MAX + RBLK_NAME_MAX + 16, "p=/%0*d", PATH_MAX - 2,
		 0);
	assert_int_equal(cfg_add_export_arg(cfg, big, err, sizeof(err)), 0);
	assert_int_equal(strlen(cfg->exports[1].path), PATH_MAX - 1);
	snprintf(big, PATH_MAX + RBLK_NAME_MAX + 16, "q=/%0*d", PATH_MAX - 1,
		 0);
	assert_int_equal(cfg_add_export_arg(cfg, big, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "path longer"));
	free(big);
	free(cfg);
}

/* ---- --listen ------------------------------------------------------------ */

static void test_listen(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];
	static const char *const bad[] = {
	    "localhost",	"http://h",	 "udp://h:1",	 "tcp://",
	    "tcp://h:0",	"tcp://h:65536", "tcp://h/vol0", "tcp://h/",
	    "rdma://[::1]:1/x", "rdma://[::1",	 "TCP://h",	 "",
	};

	(void)state;
	assert_int_equal(cfg_add_listen(cfg, "tcp://0.0.0.0", err, sizeof(err)),
			 0);
	assert_int_equal(
	    cfg_add_listen(cfg, "rdma://0.0.0.0", err, sizeof(err)), 0);
	assert_int_equal(
	    cfg_add_listen(cfg, "rdma://[::]:9999", err, sizeof(err)), 0);
	assert_int_equal(cfg->nr_listen, 3);
	/* the same address twice, spelled differently */
	assert_int_equal(
	    cfg_add_listen(cfg, "tcp://0.0.0.0:7441", err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "twice"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (cfg_add_listen(cfg, bad[i], err, sizeof(err)) != -EINVAL)
			fail_msg("listen '%s' should fail", bad[i]);
		assert_true(err[0] != 0);
	}
	assert_int_equal(cfg->nr_listen, 3);
	free(cfg);
}

/* ---- cfg_validate -------------------------------------------------------- */

static void test_validate(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char err[512];

	(void)state;
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no export"));

	assert_int_equal(cfg_add_export_arg(cfg, "a=/x", err, sizeof(err)), 0);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no listener"));

	assert_int_equal(cfg_add_listen(cfg, "tcp://h", err, sizeof(err)), 0);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);

	/* duplicates that bypassed the adders (filled in by hand) */
	cfg->exports[1] = cfg->exports[0];
	cfg->nr_exports = 2;
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'a' defined twice"));
	snprintf(cfg->exports[1].name, sizeof(cfg->exports[1].name), "b");
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);

	/* values set by hand are checked too */
	cfg->exports[1].block_size = 1000;
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'b'"));
	cfg->exports[1].block_size = 0;
	cfg->exports[1].path[0] = 0;
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "empty path"));
	snprintf(cfg->exports[1].path, sizeof(cfg->exports[1].path), "/y");
	cfg->max_io = 3000;
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	cfg->max_io = 4096;
	cfg->max_queue_depth = 0;
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	cfg->max_queue_depth = 1;
	snprintf(cfg->engine, sizeof(cfg->engine), "posix");
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	snprintf(cfg->engine, sizeof(cfg->engine), "libaio");
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);

	/* only a listener */
	cfg_init(cfg);
	assert_int_equal(cfg_add_listen(cfg, "rdma://h", err, sizeof(err)), 0);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no export"));
	free(cfg);
}

/* ---- the shipped example ------------------------------------------------- */

static char *example_path(void)
{
	static const char rel[] = "config/rblk-target.conf.example";
	const char *src = getenv("RBLK_SRCDIR");
	const char *me = __FILE__;
	const char *tail = strstr(me, "tests/unit/test_config.c");
	char *p;

	if (src) {
		if (asprintf(&p, "%s/%s", src, rel) < 0)
			return NULL;
		return p;
	}
	if (access(rel, R_OK) == 0)
		return strdup(rel);
	if (tail && asprintf(&p, "%.*s%s", (int)(tail - me), me, rel) >= 0) {
		if (access(p, R_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

/* The control socket and metrics keys, and cfg_check_export(). */
static void test_ctl_keys(void **state)
{
	struct cfg_target *cfg = cfg_new();
	struct cfg_export e = {.name = "v", .path = "/x"};
	char err[256];

	(void)state;
	assert_string_equal(cfg->ctl_socket, "/run/rblk/target.sock");
	assert_int_equal(cfg->ctl_socket_mode, 0600);
	assert_false(cfg->ctl_socket_set);
	assert_string_equal(cfg->metrics, "");
	load_ok(cfg,
		"[target]\nctl_socket = /tmp/t.sock\nctl_socket_mode = 660\n"
		"metrics = tcp://127.0.0.1:9441\n");
	assert_string_equal(cfg->ctl_socket, "/tmp/t.sock");
	assert_true(cfg->ctl_socket_set);
	assert_int_equal(cfg->ctl_socket_mode, 0660);
	assert_string_equal(cfg->metrics, "tcp://127.0.0.1:9441");
	load_ok(cfg, "[target]\nctl_socket = none\n");
	load_ok(cfg, "[target]\nmetrics = 9442\n");
	assert_string_equal(cfg->metrics, "tcp://127.0.0.1:9442");
	assert_string_equal(cfg->ctl_socket, "none");

	load_bad("[target]\nctl_socket_mode = 0999\n", 2, "ctl_socket_mode");
	load_bad("[target]\nctl_socket_mode = 0044\n", 2, "owner");
	load_bad("[target]\nctl_socket_mode = 01777\n", 2, "ctl_socket_mode");
	load_bad("[target]\nctl_socket_mode = 0666\n", 2, "every local user");
	load_bad("[target]\nctl_socket_mode = 0602\n", 2, "every local user");
	load_bad(
	    "[target]\nctl_socket = /tmp/"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
	    2, "unix socket limit");
	load_bad("[target]\nmetrics = 127.0.0.1:9441\n", 2, "tcp://HOST:PORT");
	load_bad("[target]\nmetrics = 99999\n", 2, "tcp://HOST:PORT");
	load_bad("[target]\nmetrics = tcp://127.0.0.1\n", 2, "tcp://HOST:PORT");
	load_bad("[target]\nmetrics = rdma://127.0.0.1:1\n", 2,
		 "tcp://HOST:PORT");
	load_bad("[target]\nctl_socket = /a\nctl_socket = /b\n", 3, "twice");

	assert_int_equal(cfg_check_export(&e, err, sizeof(err)), 0);
	e.block_size = 1000;
	assert_int_equal(cfg_check_export(&e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "block size"));
	e.block_size = 4096;
	snprintf(e.path, sizeof(e.path), "ram:4097");
	assert_int_equal(cfg_check_export(&e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "multiple of 4096"));
	snprintf(e.path, sizeof(e.path), "/x");
	snprintf(e.name, sizeof(e.name), "a b");
	assert_int_equal(cfg_check_export(&e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bad character"));
	free(cfg);
}

/* The Ceph keys of rbd: exports. */
static void test_ceph_keys(void **state)
{
	struct cfg_target *cfg = cfg_new();

	(void)state;
	assert_string_equal(cfg->ceph.conf, "");
	assert_string_equal(cfg->ceph.id, "admin");
	assert_int_equal(cfg->ceph.connections, 1);
	assert_true(cfg->ceph.takeover);
	assert_int_equal(cfg->ceph.timeout_s, 20);
	load_ok(cfg, "[target]\nceph_conf = /etc/ceph/c.conf\nceph_id = rblk\n"
		     "ceph_keyring = /k\nrbd_cluster_connections = 4\n"
		     "rbd_takeover = no\nrbd_timeout = 5\n");
	assert_string_equal(cfg->ceph.conf, "/etc/ceph/c.conf");
	assert_string_equal(cfg->ceph.id, "rblk");
	assert_string_equal(cfg->ceph.keyring, "/k");
	assert_int_equal(cfg->ceph.connections, 4);
	assert_false(cfg->ceph.takeover);
	assert_int_equal(cfg->ceph.timeout_s, 5);
	load_bad("[target]\nrbd_cluster_connections = 0\n", 2,
		 "rbd_cluster_connections");
	load_bad("[target]\nrbd_cluster_connections = 65\n", 2, "1 to 64");
	load_bad("[target]\nrbd_takeover = maybe\n", 2, "rbd_takeover");
	load_bad("[target]\nrbd_timeout = 0\n", 2, "rbd_timeout");
	load_bad("[target]\nceph_id = client/x\n", 2, "client id");
	load_bad("[target]\nceph_id = a\nceph_id = b\n", 3, "twice");
	free(cfg);
}

static void test_example(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char *path = example_path();
	char err[1024];
	int ret;

	(void)state;
	if (!path) {
		free(cfg);
		skip();
	}
	ret = cfg_load(cfg, path, err, sizeof(err));
	if (ret)
		fail_msg("%s", err);
	if (cfg_validate(cfg, err, sizeof(err)))
		fail_msg("%s: %s", path, err);
	assert_true(cfg->nr_listen >= 1);
	assert_true(cfg->nr_exports >= 1);
	free(path);
	free(cfg);
}

/* ---- [host], allow, allow_ro, --host ----------------------------------- */

static char *key_file(mode_t mode)
{
	char *path = tmp_file("0123456789abcdef-key\n");

	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static void test_hosts(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char *kf = key_file(0600), text[2048], err[1024];
	const struct cfg_host *h;

	(void)state;
	snprintf(text, sizeof(text),
		 "[target]\nlisten = tcp://127.0.0.1\nname = tgt-1\n"
		 "[host alpha]\nsecret_file = %s\n"
		 "[host beta]\nsecret = sixteen-chars-ok\n"
		 "[export vol]\npath = ram:1M\nallow = alpha , beta\n"
		 "allow_ro = gamma\n"
		 "[export open]\npath = ram:1M\n"
		 "[host gamma]\nsecret = another-secret-16\n",
		 kf);
	load_ok(cfg, text);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg->name, "tgt-1");
	assert_int_equal(cfg->nr_hosts, 3);
	h = cfg_find_host(cfg, "alpha");
	assert_non_null(h);
	assert_int_equal(h->secret_len, 20);
	assert_memory_equal(h->secret, "0123456789abcdef-key", 20);
	h = cfg_find_host(cfg, "beta");
	assert_non_null(h);
	assert_int_equal(h->secret_len, 16);
	assert_memory_equal(h->secret, "sixteen-chars-ok", 16);
	assert_null(cfg_find_host(cfg, "delta"));
	assert_null(cfg_find_host(cfg, ""));
	assert_true(cfg->exports[0].restricted);
	assert_int_equal(cfg->exports[0].nr_allow, 3);
	assert_int_equal(cfg_export_allows(&cfg->exports[0], "alpha"), 0);
	assert_int_equal(cfg_export_allows(&cfg->exports[0], "beta"), 0);
	assert_int_equal(cfg_export_allows(&cfg->exports[0], "gamma"), 1);
	assert_int_equal(cfg_export_allows(&cfg->exports[0], "delta"), -1);
	assert_false(cfg->exports[1].restricted);
	assert_int_equal(cfg->exports[1].nr_allow, 0);

	/* an allow list naming a host without a [host] section */
	cfg_init(cfg);
	load_ok(cfg, "[export v]\npath = ram:1M\nallow = nobody\n"
		     "[target]\nlisten = tcp://127.0.0.1\n");
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(
	    err, "allows host 'nobody', which has no [host nobody] section"));
	unlink(kf);
	free(kf);
	free(cfg);
}

static void test_hosts_bad(void **state)
{
	char *kf = key_file(0644), text[2048];

	(void)state;
	load_bad("[host]\nsecret = sixteen-chars-ok\n", 1, "needs a name");
	load_bad("[host a]\nsecret = short\n", 2,
		 "host 'a': secret is 5 bytes; at least 16 are needed");
	load_bad("[host a]\nsecret = sixteen-chars-ok\nsecret_file = /x\n", 3,
		 "give secret or secret_file, not both");
	load_bad(
	    "[host a]\nsecret = sixteen-chars-ok\nsecret = sixteen-chars-ok\n",
	    3, "'secret' given twice");
	load_bad("[host a]\n\n[export v]\npath = ram:1M\n", 1,
		 "host 'a' has no secret");
	load_bad("[host a]\nkey = sixteen-chars-ok\n", 2,
		 "unknown key 'key' in [host a]");
	load_bad("[host a]\nsecret = sixteen-chars-ok\n[host a]\n", 3,
		 "host 'a' defined twice (first on line 1)");
	load_bad("[host a,b]\n", 1, "bad character");
	load_bad("[host a]\nsecret_file = /nonexistent/key\n", 2,
		 "secret file /nonexistent/key: No such file or directory");
	snprintf(text, sizeof(text), "[host a]\nsecret_file = %s\n", kf);
	load_bad(text, 2,
		 "is accessible by group or others (mode 0644); chmod 600 it");
	load_bad("[export v]\npath = ram:1M\nallow = a, a\n", 3,
		 "host 'a' listed twice");
	load_bad("[export v]\npath = ram:1M\nallow = a\nallow_ro = a\n", 4,
		 "host 'a' listed twice");
	load_bad("[export v]\npath = ram:1M\nallow = a,,b\n", 3,
		 "empty host name");
	load_bad("[export v]\npath = ram:1M\nallow = a\nallow = b\n", 4,
		 "'allow' given twice");
	load_bad("[target]\nname = a b\n", 2, "name: host name 'a b'");
	unlink(kf);
	free(kf);
}

/* TLS: the keys of the three sections, the command-line forms, checks */
static void test_tls(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char *kf = key_file(0600), text[2048], arg[PATH_MAX + 64], err[1024];

	(void)state;
	snprintf(text, sizeof(text),
		 "[target]\nlisten = tcp://127.0.0.1\ntls = required\n"
		 "tls_cert = /etc/c.pem\ntls_key = /etc/k.pem\n"
		 "tls_ca = /etc/ca.pem\n"
		 "[host alpha]\nsecret_file = %s\ntls = required\n"
		 "[export vol]\npath = ram:1M\nallow = any\ntls = optional\n",
		 kf);
	load_ok(cfg, text);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg->tls, CFG_TLS_REQUIRED);
	assert_string_equal(cfg->tls_cert, "/etc/c.pem");
	assert_string_equal(cfg->tls_key, "/etc/k.pem");
	assert_string_equal(cfg->tls_ca, "/etc/ca.pem");
	assert_int_equal(cfg->hosts[0].tls, CFG_TLS_REQUIRED);
	assert_int_equal(cfg->exports[0].tls, CFG_TLS_OPTIONAL);
	assert_true(cfg_tls_accepted(cfg));
	assert_false(cfg_tls_required(cfg, &cfg->exports[0], NULL));
	assert_true(cfg_tls_required(cfg, &cfg->exports[0], &cfg->hosts[0]));
	assert_true(cfg_tls_required(cfg, NULL, NULL));

	/* the command-line forms */
	cfg_init(cfg);
	snprintf(arg, sizeof(arg), "alpha:secret-file=%s,tls=required", kf);
	assert_int_equal(cfg_add_host_arg(cfg, arg, err, sizeof(err)), 0);
	assert_int_equal(cfg_find_host(cfg, "alpha")->tls, CFG_TLS_REQUIRED);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "v=ram:1M,tls=required", err, sizeof(err)),
	    0);
	assert_int_equal(cfg->exports[0].tls, CFG_TLS_REQUIRED);
	assert_int_equal(
	    cfg_add_export_arg(cfg, "w=ram:1M,tls=maybe", err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "bad tls 'maybe'"));
	assert_int_equal(
	    cfg_set_tls_key(cfg, "tls", "sometimes", err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(cfg_set_tls_key(cfg, "tlsx", "off", err, sizeof(err)),
			 -ENOENT);
	assert_int_equal(
	    cfg_add_listen(cfg, "tcp://127.0.0.1", err, sizeof(err)), 0);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), 0);
	assert_true(cfg_tls_accepted(cfg)); /* a host: its PSK */

	/* a requirement without TLS, or without credentials; a lone cert */
	assert_int_equal(cfg_set_tls_key(cfg, "tls", "off", err, sizeof(err)),
			 0);
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(
	    strstr(err, "requires TLS, but the target's tls is off"));
	cfg_init(cfg);
	load_ok(cfg,
		"[target]\nlisten = tcp://127.0.0.1\n"
		"[export v]\npath = ram:1M\nallow = any\ntls = required\n");
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(
	    strstr(err, "v requires TLS, and the target has no credentials"));
	assert_false(cfg_tls_accepted(cfg));
	cfg_init(cfg);
	load_ok(cfg, "[target]\nlisten = tcp://127.0.0.1\ntls_cert = /c\n"
		     "[export v]\npath = ram:1M\nallow = any\n");
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "tls_cert and tls_key go together"));
	load_bad("[target]\ntls = yes\n", 2,
		 "tls: 'yes' is not off, optional or required");
	load_bad("[export v]\npath = ram:1M\ntls = 1\n", 3,
		 "tls: '1' is not off");
	unlink(kf);
	free(kf);
	free(cfg);
}

static void test_host_arg(void **state)
{
	struct cfg_target *cfg = cfg_new();
	char *kf = key_file(0600), *open_kf = key_file(0604),
	     arg[PATH_MAX + 64], err[1024];

	(void)state;
	snprintf(arg, sizeof(arg), "alpha:secret-file=%s", kf);
	assert_int_equal(cfg_add_host_arg(cfg, arg, err, sizeof(err)), 0);
	assert_non_null(cfg_find_host(cfg, "alpha"));
	assert_int_equal(cfg_add_host_arg(cfg, arg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "host 'alpha' defined twice"));
	snprintf(arg, sizeof(arg), "beta:secret-file=%s", open_kf);
	assert_int_equal(cfg_add_host_arg(cfg, arg, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "accessible by group or others"));
	assert_int_equal(cfg_add_host_arg(cfg, "beta", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "expected NAME:secret-file=PATH"));
	assert_int_equal(
	    cfg_add_host_arg(cfg, "beta:secret=abc", err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(
	    cfg_add_host_arg(cfg, ":secret-file=/x", err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(cfg->nr_hosts, 1);

	assert_int_equal(
	    cfg_add_export_arg(cfg, "v=ram:1M,allow=alpha,allow_ro=beta", err,
			       sizeof(err)),
	    0);
	assert_true(cfg->exports[0].restricted);
	assert_int_equal(cfg_export_allows(&cfg->exports[0], "alpha"), 0);
	assert_int_equal(cfg_export_allows(&cfg->exports[0], "beta"), 1);
	assert_int_equal(
	    cfg_add_listen(cfg, "tcp://127.0.0.1", err, sizeof(err)), 0);
	/* beta has no secret (its --host failed) */
	assert_int_equal(cfg_validate(cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "allows host 'beta'"));
	assert_int_equal(
	    cfg_add_export_arg(cfg, "w=ram:1M,allow=", err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "empty host name"));
	unlink(kf);
	unlink(open_kf);
	free(kf);
	free(open_kf);
	free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hosts),
	    cmocka_unit_test(test_hosts_bad),
	    cmocka_unit_test(test_host_arg),
	    cmocka_unit_test(test_tls),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_load_full),
	    cmocka_unit_test(test_load_layout),
	    cmocka_unit_test(test_load_on_top),
	    cmocka_unit_test(test_load_missing_file),
	    cmocka_unit_test(test_load_syntax_errors),
	    cmocka_unit_test(test_load_sections),
	    cmocka_unit_test(test_load_unknown_keys),
	    cmocka_unit_test(test_load_bad_values),
	    cmocka_unit_test(test_load_good_values),
	    cmocka_unit_test(test_load_duplicates),
	    cmocka_unit_test(test_load_repeated_listen),
	    cmocka_unit_test(test_load_booleans),
	    cmocka_unit_test(test_load_ram),
	    cmocka_unit_test(test_load_export_names),
	    cmocka_unit_test(test_load_long_and_odd_lines),
	    cmocka_unit_test(test_export_arg),
	    cmocka_unit_test(test_direct),
	    cmocka_unit_test(test_export_arg_limits),
	    cmocka_unit_test(test_listen),
	    cmocka_unit_test(test_validate),
	    cmocka_unit_test(test_ctl_keys),
	    cmocka_unit_test(test_ceph_keys),
	    cmocka_unit_test(test_example),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
