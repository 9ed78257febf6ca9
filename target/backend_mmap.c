/* SPDX-License-Identifier: MIT */
/*
 * The mmap backend: a file exported with `direct`, opened by the file
 * backend and then mapped MAP_SHARED once; the mapping is what connections
 * register for direct access, so slot-path commands must go through it too
 * (memcpy, as RAM) or they would race the page cache behind O_DIRECT.
 * FLUSH and FUA msync. The size is fixed at open: growing the file later
 * does not grow the volume. Block devices are refused (documented in
 * rblk-target.conf(5)): mapping a device pins its page cache per
 * connection and its size may change under us; the O_DIRECT slot path
 * serves them.
 *
 * Only memory-backed file systems can be mapped this way: an RDMA
 * registration is a long-term writable pin, which Linux (6.5 and later)
 * refuses for the page cache of ordinary file systems (ibv_reg_mr fails
 * with EFAULT on ext4, xfs, ...). tmpfs/shmem, hugetlbfs and DAX mounts
 * work; on anything else map_open() returns BACKEND_FALLBACK and the file
 * backend serves the file through the slot path instead, with a warning.
 *
 * A writable mapping is fully allocated at open (fallocate): a store into
 * a hole that the file system cannot fill is a SIGBUS that would kill the
 * target, and a one-sided RDMA WRITE into the mapping cannot be caught by
 * the target at all. No space for the whole file: the export is refused.
 */
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "../common/log.h"
#include "../config/config.h"

#include "conn.h"

static const char *fs_name(unsigned long magic)
{
	switch (magic) {
	case EXT4_SUPER_MAGIC:
		return "ext2/ext3/ext4";
	case XFS_SUPER_MAGIC:
		return "xfs";
	case BTRFS_SUPER_MAGIC:
		return "btrfs";
	case NFS_SUPER_MAGIC:
		return "nfs";
	case OVERLAYFS_SUPER_MAGIC:
		return "overlayfs";
	case F2FS_SUPER_MAGIC:
		return "f2fs";
	case V9FS_MAGIC:
		return "9p";
	case FUSE_SUPER_MAGIC:
		return "fuse";
	default:
		return NULL;
	}
}

/* 1 when fd's file lives where a writable RDMA pin of its mapping works. */
static bool direct_fs_ok(int fd, char *fs, size_t fslen)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs)) {
		snprintf(fs, fslen, "an unknown file system (%s)",
			 strerror(errno));
		return false;
	}
	if ((unsigned long)sfs.f_type == TMPFS_MAGIC ||
	    (unsigned long)sfs.f_type == HUGETLBFS_MAGIC)
		return true;
#ifdef STATX_ATTR_DAX
	{
		struct statx stx;

		if (!statx(fd, "", AT_EMPTY_PATH, 0, &stx) &&
		    (stx.stx_attributes_mask & STATX_ATTR_DAX) &&
		    (stx.stx_attributes & STATX_ATTR_DAX))
			return true;
	}
#endif
	if (fs_name((unsigned long)sfs.f_type))
		snprintf(fs, fslen, "%s", fs_name((unsigned long)sfs.f_type));
	else
		snprintf(fs, fslen, "file system 0x%lx",
			 (unsigned long)sfs.f_type);
	return false;
}

static int map_open(struct export *e, const struct cfg_export *cfg, char *err,
		    size_t errlen)
{
	int prot = PROT_READ | (e->read_only ? 0 : PROT_WRITE);
	char fs[64];
	int ret;

	ret = backend_file_ops.open(e, cfg, err, errlen);
	if (ret)
		return ret;
	if (e->bdev) {
		ret = open_fail(
		    err, errlen, -EINVAL,
		    "direct needs a regular file; %s is a block device",
		    cfg->path);
		goto out_close;
	}
	if (!direct_fs_ok(e->fd, fs, sizeof(fs))) {
		log_warn(
		    "export %s: WARNING: 'direct' ignored: %s is on %s; direct access needs tmpfs, hugetlbfs or a DAX mount (RDMA cannot pin the page cache of other file systems); serving it through the slot path",
		    e->name, cfg->path, fs);
		/* the file backend's descriptors serve the slot path */
		return BACKEND_FALLBACK;
	}
	if (!e->read_only && fallocate(e->fd, 0, 0, (off_t)e->size)) {
		ret = open_fail(
		    err, errlen, -errno,
		    "direct: cannot allocate all %llu bytes of %s (%s); a direct export must be fully allocated (free space, or drop 'direct')",
		    (unsigned long long)e->size, cfg->path, strerror(errno));
		goto out_close;
	}
	e->mem = mmap(NULL, e->size, prot, MAP_SHARED, e->fd, 0);
	if (e->mem == MAP_FAILED) {
		e->mem = NULL;
		ret = open_fail(err, errlen, -errno, "mmap %s: %s", cfg->path,
				strerror(errno));
		goto out_close;
	}
	/* every slot-path command goes through the mapping: no O_DIRECT fd */
	if (e->fd_odirect >= 0)
		close(e->fd_odirect);
	e->fd_odirect = -1;
	return 0;

out_close:
	backend_file_ops.close(e);
	return ret;
}

static void map_close(struct export *e)
{
	if (e->mem)
		munmap(e->mem, e->size);
	e->mem = NULL;
	backend_file_ops.close(e);
}

/* msync the pages covering [off, off + len); the whole map when len is 0. */
static int map_sync(struct export *e, uint64_t off, uint64_t len)
{
	uint64_t start = off & ~((uint64_t)sysconf(_SC_PAGESIZE) - 1);

	if (!len) {
		start = 0;
		len = e->size;
	} else {
		len += off - start;
	}
	return msync((char *)e->mem + start, len, MS_SYNC) ? -errno : 0;
}

static int map_submit(struct worker *w, struct treq *r)
{
	struct export *e = r->conn->exp;
	const struct rblk_cmd *cmd = &r->cmd;

	switch (cmd->opcode) {
	case RBLK_OP_FLUSH:
		/* DIRECT writes of this connection were placed before this
		 * command arrived (RC ordering); msync makes them durable */
		r->result =
		    export_unsafe(UNSAFE_ACK_FLUSH) ? 0 : map_sync(e, 0, 0);
		return 1;
	case RBLK_OP_READ:
	case RBLK_OP_WRITE:
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
		backend_mem_submit(w, r);
		if (!r->result && cmd->opcode != RBLK_OP_READ &&
		    (cmd->flags & RBLK_CMD_F_FUA) &&
		    !export_unsafe(UNSAFE_ACK_FUA))
			r->result = map_sync(e, cmd->offset, cmd->length);
		return 1;
	default:
		r->result = -EOPNOTSUPP;
		return 1;
	}
}

const struct backend_ops backend_mmap_ops = {
    .name = "mmap",
    .flags = BACKEND_F_DIRECT,
    .open = map_open,
    .close = map_close,
    .submit = map_submit,
    .fallback = &backend_file_ops,
};
