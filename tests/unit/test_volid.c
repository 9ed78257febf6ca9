/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the volume identity of exports (target/volid.c, linked as
 * it is): the id stored in a file's user.rblk.uuid xattr (made once, then
 * read back; a garbage value refused), the sidecar .NAME.rblk-uuid (made
 * once with link(), read back, its path), block devices in a fake sysfs
 * tree (wwid, serial, dm uuid; a partition: its disk's id and start;
 * none: -ENOENT), the local stand-in (per inode and per device) and
 * random ids (RFC 9562 version 4).
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
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/auth.h"
#include "config/config.h"
#include "target/export.h"

static char dir[PATH_MAX / 2];

/* volid.c asks export.c for a backend's id: none here */
bool export_vol_id(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN])
{
	memset(id, 0, EXPORT_VOL_ID_LEN);
	return false;
}

static int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	assert_int_equal(rblk_auth_init(), 0);
	snprintf(dir, sizeof(dir), "%s/test_volid.XXXXXX", tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void put_file(const char *rel, const char *text)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void test_random(void **state)
{
	uint8_t a[EXPORT_VOL_ID_LEN], b[EXPORT_VOL_ID_LEN];
	char text[37];

	volid_random(a);
	volid_random(b);
	assert_memory_not_equal(a, b, sizeof(a));
	assert_int_equal(a[6] >> 4, 4); /* version 4 */
	assert_int_equal(a[8] >> 6, 2); /* variant 10 */
	volid_format(a, text);
	assert_int_equal(strlen(text), 36);
	assert_int_equal(text[8], '-');
	assert_int_equal(text[23], '-');
}

static void test_xattr(void **state)
{
	uint8_t a[EXPORT_VOL_ID_LEN], b[EXPORT_VOL_ID_LEN],
	    c[EXPORT_VOL_ID_LEN];
	char p[PATH_MAX], text[37], want[37], big[100];
	bool created;
	int fd, fd2, ret;

	snprintf(p, sizeof(p), "%s/a.img", dir);
	fd = open(p, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	ret = volid_xattr(fd, a, &created);
	if (ret == -ENOTSUP) {
		close(fd);
		skip(); /* no user xattrs where TMPDIR is */
	}
	assert_int_equal(ret, 0);
	assert_true(created);
	/* stored: read back, the same, not made again */
	assert_int_equal(volid_xattr(fd, b, &created), 0);
	assert_false(created);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(getxattr(p, VOLID_XATTR, text, sizeof(text)), 36);
	text[36] = '\0';
	volid_format(a, want);
	assert_string_equal(text, want);

	/* another file: another id */
	snprintf(p, sizeof(p), "%s/b.img", dir);
	fd2 = open(p, O_RDWR | O_CREAT, 0600);
	assert_true(fd2 >= 0);
	assert_int_equal(volid_xattr(fd2, c, &created), 0);
	assert_memory_not_equal(a, c, sizeof(a));

	/* garbage in the attribute: not an id */
	assert_int_equal(fsetxattr(fd2, VOLID_XATTR, "not-a-uuid", 10, 0), 0);
	assert_int_equal(volid_xattr(fd2, c, &created), -EINVAL);
	/* longer than the reader's buffer (ERANGE): not an id either */
	memset(big, 'b', sizeof(big));
	assert_int_equal(fsetxattr(fd2, VOLID_XATTR, big, sizeof(big), 0), 0);
	assert_int_equal(volid_xattr(fd2, c, &created), -EINVAL);
	close(fd2);
	close(fd);
}

static void test_sidecar(void **state)
{
	uint8_t a[EXPORT_VOL_ID_LEN], b[EXPORT_VOL_ID_LEN],
	    c[EXPORT_VOL_ID_LEN];
	char p[PATH_MAX], side[PATH_MAX], want[PATH_MAX];
	bool created;
	struct stat st;

	assert_int_equal(
	    volid_sidecar_path("/srv/img/vol.img", side, sizeof(side)), 0);
	assert_string_equal(side, "/srv/img/.vol.img.rblk-uuid");
	assert_int_equal(volid_sidecar_path("vol.img", side, sizeof(side)), 0);
	assert_string_equal(side, ".vol.img.rblk-uuid");

	snprintf(p, sizeof(p), "%s/s.img", dir);
	snprintf(want, sizeof(want), "%s/.s.img.rblk-uuid", dir);
	assert_int_equal(volid_sidecar(p, a, &created, side, sizeof(side)), 0);
	assert_true(created);
	assert_string_equal(side, want);
	assert_int_equal(stat(side, &st), 0);
	assert_int_equal(st.st_size, 37); /* the UUID and a newline */
	assert_int_equal(volid_sidecar(p, b, &created, side, sizeof(side)), 0);
	assert_false(created);
	assert_memory_equal(a, b, sizeof(a));

	/* one written by hand (upper case, no newline) is read */
	put_file(".t.img.rblk-uuid", "0123ABCD-0123-4567-89AB-0123456789AB");
	snprintf(p, sizeof(p), "%s/t.img", dir);
	assert_int_equal(volid_sidecar(p, c, &created, side, sizeof(side)), 0);
	assert_false(created);
	assert_int_equal(c[0], 0x01);
	assert_int_equal(c[15], 0xab);

	/* garbage: refused, not replaced */
	put_file(".u.img.rblk-uuid", "hello\n");
	snprintf(p, sizeof(p), "%s/u.img", dir);
	assert_int_equal(volid_sidecar(p, c, &created, side, sizeof(side)),
			 -EINVAL);
}

static void mkdirs(const char *rel)
{
	char cmd[PATH_MAX * 2];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", dir, rel);
	assert_int_equal(system(cmd), 0);
}

static void link_dev(const char *devno, const char *target)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/sys/dev/block/%s", dir, devno);
	assert_int_equal(symlink(target, p), 0);
}

static void test_device(void **state)
{
	uint8_t disk[EXPORT_VOL_ID_LEN], part1[EXPORT_VOL_ID_LEN],
	    part2[EXPORT_VOL_ID_LEN], other[EXPORT_VOL_ID_LEN],
	    x[EXPORT_VOL_ID_LEN];
	char sys[PATH_MAX], src[256];

	/* a disk with a wwid and two partitions, a virtio disk, a loop */
	mkdirs("sys/dev/block");
	mkdirs("sys/devices/sda/sda1");
	mkdirs("sys/devices/sda/sda2");
	mkdirs("sys/devices/sda/device");
	mkdirs("sys/devices/vda");
	mkdirs("sys/devices/dm-0/dm");
	mkdirs("sys/devices/loop0/loop");
	put_file("sys/devices/sda/device/wwid", "naa.5000c500a1b2c3d4\n");
	put_file("sys/devices/sda/sda1/partition", "1\n");
	put_file("sys/devices/sda/sda1/start", "2048\n");
	put_file("sys/devices/sda/sda2/partition", "2\n");
	put_file("sys/devices/sda/sda2/start", "4096\n");
	put_file("sys/devices/vda/serial", "  disk-7  \n");
	put_file("sys/devices/dm-0/dm/uuid", "LVM-abc\n");
	put_file("sys/devices/loop0/loop/backing_file", "/x\n");
	put_file("sys/devices/loop0/serial", "\n"); /* empty: no identity */
	link_dev("8:0", "../../devices/sda");
	link_dev("8:1", "../../devices/sda/sda1");
	link_dev("8:2", "../../devices/sda/sda2");
	link_dev("252:0", "../../devices/vda");
	link_dev("253:0", "../../devices/dm-0");
	link_dev("7:0", "../../devices/loop0");
	snprintf(sys, sizeof(sys), "%s/sys", dir);

	assert_int_equal(volid_device(sys, 8, 0, disk, src, sizeof(src)), 0);
	assert_non_null(strstr(src, "naa.5000c500a1b2c3d4"));
	assert_int_equal(disk[6] >> 4, 8);
	assert_int_equal(volid_device(sys, 8, 0, x, src, sizeof(src)), 0);
	assert_memory_equal(disk, x, sizeof(x)); /* stable */
	assert_int_equal(volid_device(sys, 8, 1, part1, src, sizeof(src)), 0);
	assert_non_null(strstr(src, "sector 2048"));
	assert_int_equal(volid_device(sys, 8, 2, part2, src, sizeof(src)), 0);
	assert_memory_not_equal(disk, part1, sizeof(x));
	assert_memory_not_equal(part1, part2, sizeof(x));
	assert_int_equal(volid_device(sys, 252, 0, other, src, sizeof(src)), 0);
	assert_string_equal(src, "serial 'disk-7'");
	assert_memory_not_equal(disk, other, sizeof(x));
	assert_int_equal(volid_device(sys, 253, 0, x, src, sizeof(src)), 0);
	assert_string_equal(src, "dm/uuid 'LVM-abc'");
	assert_int_equal(volid_device(sys, 7, 0, x, src, sizeof(src)), -ENOENT);
	assert_int_equal(volid_device(sys, 9, 9, x, src, sizeof(src)), -ENOENT);
}

static void test_local(void **state)
{
	uint8_t a[EXPORT_VOL_ID_LEN], b[EXPORT_VOL_ID_LEN],
	    c[EXPORT_VOL_ID_LEN];
	struct stat st = {
	    .st_mode = S_IFREG, .st_dev = makedev(8, 1), .st_ino = 12};

	volid_local("machine-1", &st, a);
	volid_local("machine-1", &st, b);
	assert_memory_equal(a, b, sizeof(a));
	st.st_ino = 13;
	volid_local("machine-1", &st, b);
	assert_memory_not_equal(a, b, sizeof(a));
	st.st_ino = 12;
	volid_local("machine-2", &st, c);
	assert_memory_not_equal(a, c, sizeof(a));
	st.st_mode = S_IFBLK;
	st.st_rdev = makedev(7, 0);
	volid_local("machine-1", &st, b);
	st.st_rdev = makedev(7, 1);
	volid_local("machine-1", &st, c);
	assert_memory_not_equal(b, c, sizeof(a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random),  cmocka_unit_test(test_xattr),
	    cmocka_unit_test(test_sidecar), cmocka_unit_test(test_device),
	    cmocka_unit_test(test_local),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
