/* SPDX-License-Identifier: MIT */
/*
 * The file backend: regular files and block devices, the fallback for a
 * path without a backend's prefix. Reads and writes go through the
 * worker's I/O engine, on an O_DIRECT descriptor where the file system
 * allows it (cache=buffered: the page cache); a file in memory (tmpfs) is
 * copied on the worker instead. TRIM and WRITE_ZEROES run synchronously.
 */
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../config/config.h"

#include "conn.h"
#include "engine.h"
#include "worker.h"

static uint32_t probe_dio_align(int fd, const char *path)
{
#ifdef STATX_DIOALIGN
	struct statx stx;

	if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
	    (stx.stx_mask & STATX_DIOALIGN)) {
		if (!stx.stx_dio_offset_align)
			return 0; /* file system says: no O_DIRECT */
		return stx.stx_dio_offset_align;
	}
#endif
	(void)fd;
	(void)path;
	return BACKEND_DEFAULT_BLOCK_SIZE;
}

/*
 * What e->fd (described by st) is: its kind, size, block size and
 * O_DIRECT alignment. Returns 0, or -errno with err written.
 */
static int file_geometry(struct export *e, const struct cfg_export *cfg,
			 const struct stat *st, char *err, size_t errlen)
{
	e->block_size =
	    cfg->block_size ? cfg->block_size : BACKEND_DEFAULT_BLOCK_SIZE;
	if (S_ISBLK(st->st_mode)) {
		int lbs = 0;

		e->bdev = true;
		if (ioctl(e->fd, BLKGETSIZE64, &e->size) ||
		    ioctl(e->fd, BLKSSZGET, &lbs))
			return open_fail(err, errlen, -errno,
					 "ioctl(BLKGETSIZE64/BLKSSZGET) %s: %s",
					 cfg->path, strerror(errno));
		if ((uint32_t)lbs > e->block_size) {
			if (cfg->block_size)
				return open_fail(
				    err, errlen, -EINVAL,
				    "block size %u is below the logical block size %d of %s",
				    cfg->block_size, lbs, cfg->path);
			e->block_size = (uint32_t)lbs;
		}
		e->dio_align = e->block_size;
	} else if (S_ISREG(st->st_mode)) {
		struct statfs sfs;

		e->size = (uint64_t)st->st_size;
		e->dio_align = probe_dio_align(e->fd, cfg->path);
		e->mem_fs = !fstatfs(e->fd, &sfs) &&
			    ((unsigned long)sfs.f_type == TMPFS_MAGIC ||
			     (unsigned long)sfs.f_type == RAMFS_MAGIC);
	} else {
		return open_fail(
		    err, errlen, S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL,
		    "%s is %s, not a regular file or a block device", cfg->path,
		    S_ISDIR(st->st_mode)    ? "a directory"
		    : S_ISFIFO(st->st_mode) ? "a FIFO"
		    : S_ISCHR(st->st_mode)  ? "a character device"
		    : S_ISSOCK(st->st_mode) ? "a socket"
					    : "something else");
	}
	if (e->size % e->block_size) {
		log_warn(
		    "export %s: size %llu is not a multiple of the block size %u; the tail is not exported",
		    e->name, (unsigned long long)e->size, e->block_size);
		e->size -= e->size % e->block_size;
	}
	if (e->size == 0)
		return open_fail(
		    err, errlen, -EINVAL,
		    "%s is empty (or smaller than the block size %u)",
		    cfg->path, e->block_size);
	return 0;
}

/*
 * How e's I/O goes: through the page cache (cache=buffered, with
 * read-ahead) or, where the alignment allows, on a second descriptor of
 * the same inode opened with O_DIRECT (e->fd_odirect; -1 when none).
 */
static void file_cache_mode(struct export *e, const struct cfg_export *cfg,
			    int flags, const struct stat *st)
{
	int ret;

	e->fd_odirect = -1;
	if (cfg->cache_buffered) {
		/*
		 * The sequential reader gets the kernel's read-ahead, with
		 * the window doubled: the requests of a queue arrive at once
		 * and the window is all that runs ahead of them. A random
		 * reader is not hurt: a read that does not follow the last
		 * one reads only itself.
		 */
		ret = posix_fadvise(e->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		if (ret)
			log_warn("export %s: posix_fadvise(SEQUENTIAL): %s",
				 e->name, strerror(ret));
		log_info(
		    "export %s: cache=buffered: I/O through the page cache",
		    e->name);
	} else if (e->dio_align && e->dio_align <= e->block_size) {
		struct stat st2;

		/* the path may name something else by now: same inode only */
		e->fd_odirect =
		    open_user_path(cfg->path, flags | O_DIRECT, &st2);
		if (e->fd_odirect >= 0 &&
		    (st2.st_dev != st->st_dev || st2.st_ino != st->st_ino)) {
			close(e->fd_odirect);
			e->fd_odirect = -ESTALE;
		}
		if (e->fd_odirect < 0) {
			log_info(
			    "export %s: O_DIRECT refused (%s); using buffered I/O",
			    e->name, strerror(-e->fd_odirect));
			e->fd_odirect = -1;
		}
	} else {
		log_info(
		    "export %s: O_DIRECT alignment %u unsuitable for block size %u; using buffered I/O",
		    e->name, e->dio_align, e->block_size);
	}
}

static int file_open(struct export *e, const struct cfg_export *cfg, char *err,
		     size_t errlen)
{
	int flags = e->read_only ? O_RDONLY : O_RDWR;
	struct stat st;
	int ret;

	/* a FIFO must not make us wait for its writer: refused below */
	e->fd = open_user_path(cfg->path, flags, &st);
	if (e->fd < 0)
		return open_fail(err, errlen, e->fd, "open %s: %s", cfg->path,
				 strerror(-e->fd));
	ret = file_geometry(e, cfg, &st, err, errlen);
	if (ret) {
		close(e->fd);
		e->fd = -1;
		return ret;
	}
	file_cache_mode(e, cfg, flags, &st);
	e->features = RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM | RBLK_F_ZEROES;
	return 0;
}

static void file_close(struct export *e)
{
	if (e->fd_odirect >= 0)
		close(e->fd_odirect);
	if (e->fd >= 0)
		close(e->fd);
	e->fd = e->fd_odirect = -1;
}

/*
 * TRIM and WRITE_ZEROES are metadata operations on files and cheap on
 * block devices; they run synchronously on the worker. Both must read back
 * as zeroes afterwards (we advertise that), so TRIM punches a hole and
 * WRITE_ZEROES prefers ZERO_RANGE (keeps the blocks allocated).
 */
static int file_zero_range(struct export *e, uint64_t off, uint64_t len,
			   bool trim)
{
	if (e->bdev) {
		/* BLKZEROOUT unmaps where the device can and reads back zero */
		uint64_t range[2] = {off, len};

		return ioctl(e->fd, BLKZEROOUT, range) ? -errno : 0;
	}
	if (!trim &&
	    !fallocate(e->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
		       (off_t)off, (off_t)len))
		return 0;
	if (!fallocate(e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		       (off_t)off, (off_t)len))
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	/* neither supported: write zeroes */
	{
		static const char zero[65536];

		while (len) {
			size_t n = MIN(len, sizeof(zero));
			ssize_t w = pwrite(e->fd, zero, n, (off_t)off);

			if (w < 0)
				return -errno;
			off += (uint64_t)w;
			len -= (uint64_t)w;
		}
	}
	return 0;
}

/*
 * A READ or WRITE of a file in memory, done now: a copy that cannot wait
 * for a disk (a full tmpfs fails the write with ENOSPC). 0 or -errno.
 */
static int file_rw_inline(struct export *e, struct treq *r, bool write,
			  int flags)
{
	const struct rblk_cmd *cmd = &r->cmd;
	uint32_t done = 0;

	while (done < cmd->length) {
		struct iovec iov = {(char *)r->slot + done, cmd->length - done};
		ssize_t n;

		n = write ? pwritev2(e->fd, &iov, 1,
				     (off_t)(cmd->offset + done), flags)
			  : preadv2(e->fd, &iov, 1, (off_t)(cmd->offset + done),
				    0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) /* the file shrank under the export */
			return -EIO;
		done += (uint32_t)n;
	}
	return 0;
}

static int file_submit(struct worker *w, struct treq *r)
{
	struct export *e = r->conn->exp;
	const struct rblk_cmd *cmd = &r->cmd;
	bool write = cmd->opcode == RBLK_OP_WRITE;
	int fd, flags = 0, ret;

	switch (cmd->opcode) {
	case RBLK_OP_READ:
	case RBLK_OP_WRITE:
		r->odirect = e->fd_odirect >= 0 &&
			     !atomic_load_explicit(&e->odirect_failed,
						   memory_order_relaxed) &&
			     !(cmd->offset % e->dio_align) &&
			     !(cmd->length % e->dio_align);
		fd = r->odirect ? e->fd_odirect : e->fd;
		if (write && (cmd->flags & RBLK_CMD_F_FUA) &&
		    !export_unsafe(UNSAFE_ACK_FUA))
			flags = RWF_DSYNC;
		if (e->mem_fs) {
			r->odirect = false;
			r->result = file_rw_inline(e, r, write, flags);
			if (r->result)
				log_ratelimited(
				    LOG_WARN,
				    "export %s: %s at %llu+%u failed: %s",
				    e->name, rblk_opcode_str(cmd->opcode),
				    (unsigned long long)cmd->offset,
				    cmd->length, strerror(-r->result));
			return 1;
		}
		ret =
		    w->engine->queue_rw(w, r, fd, write, r->slot, cmd->length,
					cmd->offset, flags, worker_pool_buf(w));
		break;
	case RBLK_OP_FLUSH:
		if (export_unsafe(UNSAFE_ACK_FLUSH)) {
			r->result = 0;
			return 1;
		}
		ret = w->engine->queue_fdatasync(w, r, e->fd);
		break;
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
		r->result = file_zero_range(e, cmd->offset, cmd->length,
					    cmd->opcode == RBLK_OP_TRIM);
		if (!r->result && (cmd->flags & RBLK_CMD_F_FUA) &&
		    !export_unsafe(UNSAFE_ACK_FUA) && fdatasync(e->fd))
			r->result = -errno;
		return 1;
	default:
		r->result = -EOPNOTSUPP;
		return 1;
	}
	if (ret == -EBUSY)
		return ret;
	if (ret) {
		r->result = ret;
		return 1;
	}
	return 0;
}

/*
 * A file grows or shrinks by ftruncate (sparse, as a file export is
 * written); a read-only export's file is left alone and its size only
 * read again. A block device is resized by its owner (lvextend, losetup
 * -c, a SAN): its size is read again (BLKGETSIZE64), never set.
 */
static int file_resize(struct export *e, uint64_t *size, char *err,
		       size_t errlen)
{
	uint64_t now;
	struct stat st;

	if (e->bdev) {
		if (ioctl(e->fd, BLKGETSIZE64, &now))
			return open_fail(err, errlen, -errno,
					 "ioctl(BLKGETSIZE64) %s: %s", e->path,
					 strerror(errno));
		now -= now % e->block_size;
		if (*size && *size != now)
			return open_fail(
			    err, errlen, -EINVAL,
			    "%s is a block device of %llu bytes: resize it with its own tools (lvextend, losetup -c, ...), then run resize-export %s without a size to take its size",
			    e->path, (unsigned long long)now, e->name);
		*size = now;
		return 0;
	}
	if (!*size || e->read_only) {
		if (fstat(e->fd, &st))
			return open_fail(err, errlen, -errno, "fstat %s: %s",
					 e->path, strerror(errno));
		now =
		    (uint64_t)st.st_size - (uint64_t)st.st_size % e->block_size;
		if (*size && *size != now)
			return open_fail(
			    err, errlen, -EROFS,
			    "export %s is read-only: its file is not changed (resize %s, then run resize-export %s without a size)",
			    e->name, e->path, e->name);
		*size = now;
		return 0;
	}
	if (ftruncate(e->fd, (off_t)*size))
		return open_fail(err, errlen, -errno,
				 "ftruncate %s to %llu: %s", e->path,
				 (unsigned long long)*size, strerror(errno));
	return 0;
}

const struct backend_ops backend_file_ops = {
    .name = "file",
    .flags = BACKEND_F_ENGINE | BACKEND_F_BUFFERED,
    .open = file_open,
    .close = file_close,
    .submit = file_submit,
    .resize = file_resize,
};
