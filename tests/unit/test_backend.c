/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the backend registry (target/backend.c) with the real
 * backends linked: which backend a path and its options choose (ram:,
 * a file, a file exported `direct`), what each offers (direct access,
 * flags), the explicit fallback of mmap to the file backend on a file
 * system RDMA cannot pin (the build tree's, when it is not tmpfs), the
 * refusal of cache=buffered where the backend does not honour it, and
 * data written through a memory backend's submit() read back (for
 * mmap: from the file itself).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/magic.h>

#include "common/auth.h"
#include "common/log.h"
#include "config/config.h"
#include "target/backend.h"
#include "target/conn.h"
#include "target/login.h"

static struct cfg_target cfg;	    /* large: static */
static char disk_dir[PATH_MAX / 2]; /* TMPDIR: a disk file system, we hope */
static char shm_dir[PATH_MAX / 2];  /* /dev/shm, when it is tmpfs */

static bool on_tmpfs(const char *path)
{
	struct statfs sfs;

	return !statfs(path, &sfs) &&
	       (unsigned long)sfs.f_type == (unsigned long)TMPFS_MAGIC;
}

static int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	log_set_prefix("test_backend");
	log_set_level(LOG_ERR);
	assert_int_equal(rblk_auth_init(), 0);
	snprintf(disk_dir, sizeof(disk_dir), "%s/test_backend.XXXXXX",
		 tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(disk_dir));
	snprintf(shm_dir, sizeof(shm_dir), "/dev/shm/test_backend.XXXXXX");
	if (!on_tmpfs("/dev/shm") || !mkdtemp(shm_dir))
		shm_dir[0] = '\0';
	return 0;
}

static void rm_rf(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "test_backend: could not remove %s\n", dir);
}

static int teardown(void **state)
{
	rm_rf(disk_dir);
	if (shm_dir[0])
		rm_rf(shm_dir);
	return 0;
}

/* A file of size bytes in dir; its path to path. */
static void make_file(const char *dir, const char *name, off_t size, char *path,
		      size_t len)
{
	int fd;

	snprintf(path, len, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

/* Open export e for the --export argument arg; returns export_open()'s. */
static int open_arg(struct export *e, const char *arg, char *err, size_t errlen)
{
	char perr[256];

	cfg_init(&cfg);
	if (cfg_add_export_arg(&cfg, arg, perr, sizeof(perr)))
		fail_msg("%s: %s", arg, perr);
	return export_open(e, &cfg.exports[0], err, errlen);
}

/* Run one command through e's backend; its result (submit must finish). */
static int run_cmd(struct export *e, uint8_t op, uint64_t off, void *buf,
		   uint32_t len)
{
	struct tconn c = {.exp = e};
	struct treq r = {.conn = &c, .slot = buf};

	r.cmd.opcode = op;
	r.cmd.offset = off;
	r.cmd.length = len;
	r.result = -EINPROGRESS;
	assert_int_equal(e->ops->submit(NULL, &r), 1);
	return r.result;
}

static void test_ram(void **state)
{
	static char out[8192], in[8192];
	struct export e;
	char err[256];

	assert_int_equal(open_arg(&e, "r=ram:1M", err, sizeof(err)), 0);
	assert_ptr_equal(e.ops, &backend_ram_ops);
	assert_true(e.direct);
	assert_true(e.features & RBLK_F_DIRECT);
	assert_false(e.features & RBLK_F_FLUSH); /* no volatile cache */
	assert_true(e.ops->flags & BACKEND_F_VOLATILE);
	assert_int_equal(e.ident, VOL_IDENT_RUN);
	assert_int_equal(e.size, 1u << 20);
	memset(out, 'R', sizeof(out));
	assert_int_equal(run_cmd(&e, RBLK_OP_WRITE, 4096, out, sizeof(out)), 0);
	assert_int_equal(run_cmd(&e, RBLK_OP_READ, 4096, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(
	    run_cmd(&e, RBLK_OP_WRITE_ZEROES, 4096, NULL, sizeof(in)), 0);
	assert_int_equal(run_cmd(&e, RBLK_OP_READ, 4096, in, sizeof(in)), 0);
	memset(out, 0, sizeof(out));
	assert_memory_equal(in, out, sizeof(in));
	export_close(&e);

	/* nodirect: the same backend without direct access */
	assert_int_equal(open_arg(&e, "r=ram:1M,nodirect", err, sizeof(err)),
			 0);
	assert_ptr_equal(e.ops, &backend_ram_ops);
	assert_false(e.direct);
	assert_false(e.features & RBLK_F_DIRECT);
	export_close(&e);

	/* QoS limits count commands: a limited volume has no direct access */
	assert_int_equal(open_arg(&e, "r=ram:1M,iops=1000", err, sizeof(err)),
			 0);
	assert_ptr_equal(e.ops, &backend_ram_ops);
	assert_false(e.direct);
	assert_false(e.features & RBLK_F_DIRECT);
	export_close(&e);
}

static void test_file(void **state)
{
	char path[PATH_MAX], arg[PATH_MAX + 32], err[256];
	struct export e;

	make_file(disk_dir, "f.img", 1 << 20, path, sizeof(path));
	snprintf(arg, sizeof(arg), "f=%s", path);
	assert_int_equal(open_arg(&e, arg, err, sizeof(err)), 0);
	assert_ptr_equal(e.ops, &backend_file_ops);
	assert_false(e.direct);
	assert_true(e.fd >= 0);
	assert_true(e.features & RBLK_F_FLUSH);
	assert_true(e.ops->flags & BACKEND_F_ENGINE);
	export_close(&e);

	snprintf(arg, sizeof(arg), "f=%s,cache=buffered", path);
	assert_int_equal(open_arg(&e, arg, err, sizeof(err)), 0);
	assert_ptr_equal(e.ops, &backend_file_ops);
	assert_int_equal(e.fd_odirect, -1);
	export_close(&e);
}

/* cache=buffered where the backend has no page cache to use: refused. */
static void test_buffered_refused(void **state)
{
	char path[PATH_MAX], arg[PATH_MAX + 48], err[256];
	struct export e;

	err[0] = '\0';
	assert_int_equal(
	    open_arg(&e, "r=ram:1M,cache=buffered", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cache=buffered"));
	make_file(disk_dir, "b.img", 1 << 20, path, sizeof(path));
	snprintf(arg, sizeof(arg), "b=%s,direct,cache=buffered", path);
	err[0] = '\0';
	assert_int_equal(open_arg(&e, arg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cache=buffered"));
}

/*
 * Where acknowledged writes live decides the durability epoch: the run's
 * for ram (memory) and rbd (librbd's write-back cache), the boot's for a
 * file, whose page cache outlives the target (login_epoch()).
 */
static void test_epoch(void **state)
{
	char path[PATH_MAX], arg[PATH_MAX + 32], err[256];
	struct export ram, file, ram2;

	assert_int_equal(open_arg(&ram, "r=ram:1M", err, sizeof(err)), 0);
	make_file(disk_dir, "e.img", 1 << 20, path, sizeof(path));
	snprintf(arg, sizeof(arg), "f=%s", path);
	assert_int_equal(open_arg(&file, arg, err, sizeof(err)), 0);
	assert_int_equal(open_arg(&ram2, "r2=ram:1M", err, sizeof(err)), 0);
	assert_true(ram.ops->flags & BACKEND_F_PROCESS_CACHE);
	assert_false(file.ops->flags & BACKEND_F_PROCESS_CACHE);
	assert_true(backend_rbd_ops.flags & BACKEND_F_PROCESS_CACHE);
	assert_false(backend_mmap_ops.flags & BACKEND_F_PROCESS_CACHE);
	assert_int_not_equal(login_epoch(&ram), login_epoch(&file));
	assert_int_equal(login_epoch(&ram), login_epoch(&ram2));
	export_close(&ram2);
	export_close(&file);
	export_close(&ram);
}

/* direct on a file system RDMA cannot pin: the file backend serves it. */
static void test_mmap_fallback(void **state)
{
	char path[PATH_MAX], arg[PATH_MAX + 32], err[256];
	struct export e;

	if (on_tmpfs(disk_dir))
		skip(); /* TMPDIR is tmpfs: mapped, no fallback to see */
	make_file(disk_dir, "m.img", 1 << 20, path, sizeof(path));
	snprintf(arg, sizeof(arg), "m=%s,direct", path);
	assert_int_equal(open_arg(&e, arg, err, sizeof(err)), 0);
	assert_ptr_equal(e.ops, &backend_file_ops);
	assert_false(e.direct);
	assert_false(e.features & RBLK_F_DIRECT);
	assert_null(e.mem);
	assert_true(e.fd >= 0);
	export_close(&e);
}

/* direct on tmpfs: mapped; a WRITE through it is in the file. */
static void test_mmap(void **state)
{
	char path[PATH_MAX], arg[PATH_MAX + 32], err[256];
	static char out[4096], in[4096];
	struct export e;
	int fd;

	if (!shm_dir[0])
		skip(); /* no tmpfs at /dev/shm */
	make_file(shm_dir, "m.img", 1 << 20, path, sizeof(path));
	snprintf(arg, sizeof(arg), "m=%s,direct", path);
	assert_int_equal(open_arg(&e, arg, err, sizeof(err)), 0);
	assert_ptr_equal(e.ops, &backend_mmap_ops);
	assert_true(e.direct);
	assert_true(e.features & RBLK_F_DIRECT);
	assert_non_null(e.mem);
	memset(out, 'M', sizeof(out));
	assert_int_equal(run_cmd(&e, RBLK_OP_WRITE, 8192, out, sizeof(out)), 0);
	assert_int_equal(run_cmd(&e, RBLK_OP_FLUSH, 0, NULL, 0), 0);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, in, sizeof(in), 8192), (ssize_t)sizeof(in));
	close(fd);
	assert_memory_equal(in, out, sizeof(in));
	export_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ram),
	    cmocka_unit_test(test_file),
	    cmocka_unit_test(test_buffered_refused),
	    cmocka_unit_test(test_mmap_fallback),
	    cmocka_unit_test(test_mmap),
	    cmocka_unit_test(test_epoch),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
