/* SPDX-License-Identifier: MIT */
/*
 * Exports and their backends: regular files and block devices (through the
 * worker's I/O engine, O_DIRECT where the file system allows it), and RAM.
 */
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define DEFAULT_BLOCK_SIZE 512u

int open_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

unsigned int export_unsafe_ack;

int export_unsafe_ack_init(void)
{
	const char *v = getenv("RBLK_TARGET_UNSAFE_ACK");
	char buf[64], *tok, *save = NULL;

	if (!v || !*v)
		return 0;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "flush")) {
			export_unsafe_ack |= UNSAFE_ACK_FLUSH;
		} else if (!strcmp(tok, "fua")) {
			export_unsafe_ack |= UNSAFE_ACK_FUA;
		} else {
			log_err("RBLK_TARGET_UNSAFE_ACK='%s': want flush, fua "
				"or flush,fua",
				v);
			return -EINVAL;
		}
	}
	log_warn("**************************************************");
	log_warn("RBLK_TARGET_UNSAFE_ACK=%s: THIS TARGET LIES (a test aid).",
		 v);
	if (export_unsafe_ack & UNSAFE_ACK_FLUSH)
		log_warn("FLUSH is answered OK without syncing anything.");
	if (export_unsafe_ack & UNSAFE_ACK_FUA)
		log_warn(
		    "FUA writes are acknowledged before they are durable.");
	log_warn("Acknowledged data WILL be lost on a crash. Never in use.");
	log_warn("**************************************************");
	return 0;
}

static bool unsafe(unsigned int what)
{
	return export_unsafe_ack & what;
}

/* ---- file and block device backend -------------------------------------- */

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
	return DEFAULT_BLOCK_SIZE;
}

/*
 * What e->fd (described by st) is: its kind, size, block size and
 * O_DIRECT alignment. Returns 0, or -errno with err written.
 */
static int file_geometry(struct export *e, const struct cfg_export *cfg,
			 const struct stat *st, char *err, size_t errlen)
{
	e->block_size = cfg->block_size ? cfg->block_size : DEFAULT_BLOCK_SIZE;
	if (S_ISBLK(st->st_mode)) {
		int lbs = 0;

		e->kind = EXPORT_BDEV;
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

		e->kind = EXPORT_FILE;
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
	if (e->kind == EXPORT_BDEV) {
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
		    !unsafe(UNSAFE_ACK_FUA))
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
		if (unsafe(UNSAFE_ACK_FLUSH)) {
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
		    !unsafe(UNSAFE_ACK_FUA) && fdatasync(e->fd))
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

	if (e->kind == EXPORT_BDEV) {
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
    .open = file_open,
    .close = file_close,
    .submit = file_submit,
    .resize = file_resize,
};

/* ---- RAM backend -------------------------------------------------------- */

/* Bytes of all open RAM exports (their pages are reserved lazily). */
static _Atomic uint64_t ram_total;

/* A /proc/meminfo field in bytes, or 0 when it cannot be read. */
static uint64_t meminfo(const char *key)
{
	unsigned long long kib = 0;
	size_t klen = strlen(key);
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			if (sscanf(line + klen + 1, "%llu", &kib) != 1)
				kib = 0;
			break;
		}
	fclose(f);
	return (uint64_t)kib * 1024;
}

/*
 * RAM volumes are mapped MAP_NORESERVE and filled as written, so an
 * oversized one is accepted and then gets the target OOM-killed mid-way.
 * Refuse one larger than MemAvailable, or RAM volumes adding up to more
 * than MemTotal, unless the export says `overcommit`.
 */
static int ram_check_size(const struct cfg_export *cfg, uint64_t size,
			  char *err, size_t errlen)
{
	uint64_t avail = meminfo("MemAvailable"), total = meminfo("MemTotal");
	uint64_t others = atomic_load(&ram_total);

	if (cfg->overcommit || !avail || !total)
		return 0;
	if (size > avail)
		return open_fail(
		    err, errlen, -ENOMEM,
		    "%s is more than the %llu MiB of memory available; give a smaller size, or add 'overcommit' to accept the risk",
		    cfg->path, (unsigned long long)(avail >> 20));
	if (others + size > total)
		return open_fail(
		    err, errlen, -ENOMEM,
		    "%s with the %llu MiB of RAM exports already open is more than the %llu MiB of memory; give a smaller size, or add 'overcommit' to accept the risk",
		    cfg->path, (unsigned long long)(others >> 20),
		    (unsigned long long)(total >> 20));
	return 0;
}

static int ram_open(struct export *e, const struct cfg_export *cfg, char *err,
		    size_t errlen)
{
	uint64_t size;
	int ret;

	if (parse_size(cfg->path + 4, &size) || size == 0 || size % 4096)
		return open_fail(
		    err, errlen, -EINVAL,
		    "bad RAM size '%s' (want ram:SIZE, a multiple of 4 KiB)",
		    cfg->path);
	ret = ram_check_size(cfg, size, err, errlen);
	if (ret)
		return ret;
	/*
	 * Address space for growth is reserved now (PROT_NONE, no memory),
	 * so a resize never moves the volume: workers and registrations
	 * keep their pointers.
	 */
	e->mem_len = MAX(size, MIN(RAM_GROW_FACTOR * size, RAM_GROW_CAP));
	e->mem = mmap(NULL, e->mem_len, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (e->mem == MAP_FAILED) {
		e->mem = NULL;
		return open_fail(err, errlen, -ENOMEM, "mmap %llu bytes: %s",
				 (unsigned long long)e->mem_len,
				 strerror(errno));
	}
	if (mprotect(e->mem, size, PROT_READ | PROT_WRITE)) {
		ret = -errno;
		munmap(e->mem, e->mem_len);
		e->mem = NULL;
		return open_fail(err, errlen, ret, "mprotect %llu bytes: %s",
				 (unsigned long long)size, strerror(-ret));
	}
	e->kind = EXPORT_RAM;
	e->size = size;
	atomic_fetch_add(&ram_total, size);
	e->block_size = cfg->block_size ? cfg->block_size : DEFAULT_BLOCK_SIZE;
	/* no volatile cache: FLUSH and FUA are not offered */
	e->features = RBLK_F_TRIM | RBLK_F_ZEROES;
	return 0;
}

static void ram_close(struct export *e)
{
	if (e->mem) {
		munmap(e->mem, e->mem_len);
		atomic_fetch_sub(&ram_total, e->size);
	}
	e->mem = NULL;
}

/* Grow into the reservation made at open; RAM never shrinks. */
static int ram_resize(struct export *e, uint64_t *size, char *err,
		      size_t errlen)
{
	const struct cfg_export *cfg = atomic_load(&e->cfg);
	uint64_t old = e->size;
	int ret;

	if (!*size || *size == old) {
		*size = old;
		return 0;
	}
	if (*size < old)
		return open_fail(err, errlen, -EINVAL,
				 "RAM export %s does not shrink", e->name);
	if (*size % 4096 || *size > e->mem_len)
		return open_fail(
		    err, errlen, -EINVAL,
		    "RAM export %s grows in multiples of 4 KiB up to %llu bytes (the address space reserved at its start: %u times its size then, at most %llu GiB)",
		    e->name, (unsigned long long)e->mem_len, RAM_GROW_FACTOR,
		    (unsigned long long)(RAM_GROW_CAP >> 30));
	if (cfg && (ret = ram_check_size(cfg, *size - old, err, errlen)))
		return ret;
	if (mprotect((char *)e->mem + old, *size - old, PROT_READ | PROT_WRITE))
		return open_fail(err, errlen, -errno, "mprotect %llu bytes: %s",
				 (unsigned long long)(*size - old),
				 strerror(errno));
	atomic_fetch_add(&ram_total, *size - old);
	return 0;
}

static int ram_submit(struct worker *w, struct treq *r)
{
	struct export *e = r->conn->exp;
	char *p = (char *)e->mem + r->cmd.offset;

	switch (r->cmd.opcode) {
	case RBLK_OP_READ:
		memcpy(r->slot, p, r->cmd.length);
		break;
	case RBLK_OP_WRITE:
		memcpy(p, r->slot, r->cmd.length);
		break;
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
		memset(p, 0, r->cmd.length);
		break;
	default:
		r->result = -EOPNOTSUPP;
		return 1;
	}
	r->result = 0;
	return 1;
}

const struct backend_ops backend_ram_ops = {
    .name = "ram",
    .open = ram_open,
    .close = ram_close,
    .submit = ram_submit,
    .resize = ram_resize,
};

/* ---- mapped file backend (files exported with `direct`) -------------------
 */

/*
 * The file is mapped MAP_SHARED once; the mapping is what connections
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
 * work; on anything else map_open() returns 1 and export_open() serves
 * the file through the slot path instead, with a warning.
 *
 * A writable mapping is fully allocated at open (fallocate): a store into
 * a hole that the file system cannot fill is a SIGBUS that would kill the
 * target, and a one-sided RDMA WRITE into the mapping cannot be caught by
 * the target at all. No space for the whole file: the export is refused.
 */
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

	ret = file_open(e, cfg, err, errlen);
	if (ret)
		return ret;
	if (e->kind != EXPORT_FILE) {
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
		return 1; /* file_open()'s descriptors serve the slot path */
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
	file_close(e);
	return ret;
}

static void map_close(struct export *e)
{
	if (e->mem)
		munmap(e->mem, e->size);
	e->mem = NULL;
	file_close(e);
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
		r->result = unsafe(UNSAFE_ACK_FLUSH) ? 0 : map_sync(e, 0, 0);
		return 1;
	case RBLK_OP_READ:
	case RBLK_OP_WRITE:
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
		ram_submit(w, r);
		if (!r->result && cmd->opcode != RBLK_OP_READ &&
		    (cmd->flags & RBLK_CMD_F_FUA) && !unsafe(UNSAFE_ACK_FUA))
			r->result = map_sync(e, cmd->offset, cmd->length);
		return 1;
	default:
		r->result = -EOPNOTSUPP;
		return 1;
	}
}

const struct backend_ops backend_map_ops = {
    .name = "mmap",
    .open = map_open,
    .close = map_close,
    .submit = map_submit,
};

/* ---- exports ------------------------------------------------------------ */

int export_open(struct export *e, const struct cfg_export *cfg, char *err,
		size_t errlen)
{
	int ret;

	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", cfg->name);
	snprintf(e->path, sizeof(e->path), "%s", cfg->path);
	e->read_only = cfg->read_only;
	e->fd = e->fd_odirect = -1;
	if (cfg->cache_buffered &&
	    (!strncmp(cfg->path, "rbd:", 4) || !strncmp(cfg->path, "ram:", 4) ||
	     cfg->direct == CFG_DIRECT_YES))
		return open_fail(
		    err, errlen, -EINVAL,
		    "cache=buffered applies to files and block devices on the slot path (not ram:, rbd: or direct)");
	if (!strncmp(cfg->path, "rbd:", 4)) {
		e->ops = &backend_rbd_ops;
	} else if (!strncmp(cfg->path, "ram:", 4)) {
		e->ops = &backend_ram_ops;
		/* QoS limits count commands: a limited volume has none */
		e->direct =
		    cfg->direct != CFG_DIRECT_NO && !cfg_qos_any(&cfg->qos);
	} else {
		e->direct = cfg->direct == CFG_DIRECT_YES;
		e->ops = e->direct ? &backend_map_ops : &backend_file_ops;
	}
	ret = e->ops->open(e, cfg, err, errlen);
	if (ret == 1) { /* map_open(): not mappable here, slot path instead */
		e->ops = &backend_file_ops;
		e->direct = false;
		ret = 0;
	}
	if (ret)
		return ret;
	if (e->read_only)
		e->features |= RBLK_F_READ_ONLY;
	if (e->direct)
		e->features |= RBLK_F_DIRECT;
	qos_configure(&e->qos, &cfg->qos);
	volid_identify(e, cfg);
	log_info("export %s: %s %s, %llu bytes, block size %u%s%s%s", e->name,
		 e->ops->name, e->path, (unsigned long long)e->size,
		 e->block_size, e->read_only ? ", read-only" : "",
		 e->fd_odirect >= 0 ? ", O_DIRECT" : "",
		 e->direct ? ", direct access" : "");
	return 0;
}

int export_resize(struct export *e, uint64_t size, bool force,
		  uint64_t *old_size, uint64_t *new_size, char *err,
		  size_t errlen)
{
	uint64_t old = export_size(e);
	unsigned int live = atomic_load(&e->sessions);
	int ret;

	if (!e->ops->resize)
		return open_fail(
		    err, errlen, -EOPNOTSUPP,
		    "export %s cannot change size while it runs%s", e->name,
		    e->direct && e->kind != EXPORT_RAM
			? " (a file exported direct is mapped and registered at its size; export it without direct to resize it live)"
			: "");
	if (size % e->block_size)
		return open_fail(
		    err, errlen, -EINVAL,
		    "%llu bytes is not a multiple of export %s's block size %u",
		    (unsigned long long)size, e->name, e->block_size);
	if (size && size < old && !force)
		return open_fail(
		    err, errlen, -EINVAL,
		    "shrinking export %s from %llu to %llu bytes drops the data past the new end%s; give --force to do it",
		    e->name, (unsigned long long)old, (unsigned long long)size,
		    live ? " and fails the I/O of live sessions there" : "");
	ret = e->ops->resize(e, &size, err, errlen);
	if (ret)
		return ret;
	if (!size)
		return open_fail(err, errlen, -EINVAL,
				 "export %s: its backing store is empty",
				 e->name);
	if (size < old && !force)
		return open_fail(
		    err, errlen, -EINVAL,
		    "export %s's backing store is %llu bytes, less than the %llu sessions were told: give --force to take the smaller size",
		    e->name, (unsigned long long)size, (unsigned long long)old);
	export_size_set(e, size);
	*old_size = old;
	*new_size = size;
	if (size < old && live)
		log_warn(
		    "export %s: shrunk from %llu to %llu bytes under %u live session(s): their I/O past the new end fails (OUT_OF_RANGE), and their devices keep the old size",
		    e->name, (unsigned long long)old, (unsigned long long)size,
		    live);
	else
		log_info(
		    "export %s: resized from %llu to %llu bytes (%u live session(s) are told)",
		    e->name, (unsigned long long)old, (unsigned long long)size,
		    live);
	return 0;
}

void export_close(struct export *e)
{
	if (e->ops)
		e->ops->close(e);
	e->ops = NULL;
}

bool export_vol_id(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN])
{
	if (!e->ops || !e->ops->vol_id) {
		memset(id, 0, EXPORT_VOL_ID_LEN);
		return false;
	}
	return e->ops->vol_id(e, id);
}

const struct export *export_id_clash(const struct export *list,
				     const struct export *e)
{
	for (const struct export *o = list; o; o = o->next)
		if (o != e &&
		    !memcmp(o->vol_id, e->vol_id, sizeof(e->vol_id)) &&
		    (o->ident == VOL_IDENT_CONFIG ||
		     e->ident == VOL_IDENT_CONFIG))
			return o;
	return NULL;
}

bool export_visible_to(const struct export *e, const char *host)
{
	const struct cfg_export *c = e->cfg;

	(void)host;
	/*
	 * Discovery is not authenticated, so the host name it claims proves
	 * nothing: only exports open to any host (allow=any, or the
	 * target's allow_any_host) are listed. One with an allow list needs
	 * authentication and is listed to nobody (a host on the list logs in
	 * by name); one without either is closed to everyone.
	 */
	if (!c)
		return true;
	return !c->restricted && c->allow_any;
}

/* Open to any host without authentication: nothing about it to hide. */
static bool export_open_to_all(const struct export *e)
{
	const struct cfg_export *c = e->cfg;

	return !c || (!c->restricted && c->allow_any);
}

bool exports_all_open(struct target *t)
{
	bool open = true;

	pthread_mutex_lock(&t->exports_lock);
	for (const struct export *e = t->exports; e && open; e = e->next)
		open = export_open_to_all(e);
	pthread_mutex_unlock(&t->exports_lock);
	return open;
}

struct export *export_create(const struct cfg_export *cfg,
			     unsigned int nr_workers, char *err, size_t errlen)
{
	struct export *e = calloc(1, sizeof(*e));
	struct cfg_export *copy = NULL;

	if (!e) {
		open_fail(err, errlen, -ENOMEM, "out of memory");
		goto out_log;
	}
	/*
	 * A copy that lives as long as e: the caller's may be on its stack
	 * (add-export), and whatever keeps a pointer to its definition must
	 * not see it go away.
	 */
	copy = malloc(sizeof(*copy));
	if (!copy) {
		open_fail(err, errlen, -ENOMEM, "out of memory");
		goto out_free;
	}
	memcpy(copy, cfg, sizeof(*cfg));
	if (export_open(e, copy, err, errlen)) /* clears e first */
		goto out_free;
	e->cfg = copy;
	if (!copy->restricted && copy->allow_any)
		log_warn(
		    "export %s: WARNING: open to ANY host that reaches the target, without authentication (allow=any or allow_any_host); give allow=HOST to restrict it",
		    e->name);
	else if (!copy->restricted)
		log_warn(
		    "export %s: no allow list: every host is refused (give allow=HOST, or allow=any to open it)",
		    e->name);
	e->wstats = aligned_alloc(_Alignof(struct iostats),
				  (size_t)nr_workers * sizeof(*e->wstats));
	if (!e->wstats) {
		open_fail(err, errlen, -ENOMEM, "out of memory");
		goto out_close;
	}
	memset(e->wstats, 0, (size_t)nr_workers * sizeof(*e->wstats));
	e->nr_wstats = nr_workers;
	atomic_init(&e->refs, 1);
	return e;

out_close:
	export_close(e);
out_free:
	free(copy);
	free(e);
out_log:
	log_err("export %s: %s", cfg->name, err);
	return NULL;
}

void export_get(struct export *e)
{
	atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

/* The export called name with a reference taken, or NULL (any thread). */
struct export *export_lookup(struct target *t, const char *name)
{
	struct export *e;

	pthread_mutex_lock(&t->exports_lock);
	for (e = t->exports; e; e = e->next)
		if (!strcmp(e->name, name))
			break;
	if (e)
		export_get(e);
	pthread_mutex_unlock(&t->exports_lock);
	return e;
}

static void export_destroy(struct export *e)
{
	bool removed = atomic_load(&e->removed);
	char name[RBLK_NAME_MAX];

	snprintf(name, sizeof(name), "%s", e->name);
	export_close(e);
	free(e->wstats);
	free(e->cfg);
	while (e->retired) {
		struct cfg_retired *old = e->retired;

		e->retired = old->next;
		free(old->cfg);
		free(old);
	}
	free(e);
	if (removed)
		log_info(
		    "export %s: closed, its backing store released (removed, no session left)",
		    name);
}

/*
 * Closing an export can take long (munmap of a big RAM volume, the last
 * close() of a block device flushing its page cache), so a removed one is
 * not closed on the worker that happens to drop the last reference: it is
 * queued for the reaper thread (the control thread, ctl.c), woken through
 * its eventfd. Without a reaper (none registered, or shutting down) the
 * putting thread closes it.
 */
static struct {
	pthread_mutex_t lock;
	struct export *queue; /* linked through next */
	int efd;	      /* -1: no reaper */
	pthread_t thread;
} reaper = {.lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1};

void export_reaper_set(int efd)
{
	pthread_mutex_lock(&reaper.lock);
	reaper.efd = efd;
	reaper.thread = pthread_self();
	pthread_mutex_unlock(&reaper.lock);
}

void export_reap(void)
{
	struct export *e, *next;

	pthread_mutex_lock(&reaper.lock);
	e = reaper.queue;
	reaper.queue = NULL;
	pthread_mutex_unlock(&reaper.lock);
	for (; e; e = next) {
		next = e->next;
		export_destroy(e);
	}
}

void export_put(struct export *e)
{
	uint64_t one = 1;

	if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (atomic_load(&e->removed)) {
		pthread_mutex_lock(&reaper.lock);
		if (reaper.efd >= 0 &&
		    !pthread_equal(reaper.thread, pthread_self())) {
			/* unlinked from the target's list: next is free */
			e->next = reaper.queue;
			reaper.queue = e;
			if (write(reaper.efd, &one, sizeof(one)) < 0)
				log_warn("export %s: waking the reaper: %s",
					 e->name, strerror(errno));
			pthread_mutex_unlock(&reaper.lock);
			return;
		}
		pthread_mutex_unlock(&reaper.lock);
	}
	export_destroy(e);
}

/* ---- statistics ---------------------------------------------------------- */

void stats_add(struct iostats_snap *dst, const struct iostats *s)
{
	for (int i = 0; i < STAT_NR_OPS; i++)
		dst->ops[i] +=
		    atomic_load_explicit(&s->ops[i], memory_order_relaxed);
	dst->bytes_read +=
	    atomic_load_explicit(&s->bytes_read, memory_order_relaxed);
	dst->bytes_written +=
	    atomic_load_explicit(&s->bytes_written, memory_order_relaxed);
	dst->errors += atomic_load_explicit(&s->errors, memory_order_relaxed);
	dst->window_timeouts +=
	    atomic_load_explicit(&s->window_timeouts, memory_order_relaxed);
	dst->lat_sum_us +=
	    atomic_load_explicit(&s->lat_sum_us, memory_order_relaxed);
	for (int i = 0; i < STAT_LAT_BUCKETS; i++)
		dst->lat[i] +=
		    atomic_load_explicit(&s->lat[i], memory_order_relaxed);
}

uint64_t stats_count(const struct iostats_snap *s)
{
	uint64_t n = 0;

	for (int i = 0; i < STAT_LAT_BUCKETS; i++)
		n += s->lat[i];
	return n;
}

uint64_t stats_quantile_us(const struct iostats_snap *s, double q)
{
	uint64_t total = stats_count(s), want, seen = 0;

	if (!total)
		return 0;
	want = (uint64_t)(q * (double)total + 0.999999);
	if (want < 1)
		want = 1;
	for (int i = 0; i < STAT_LAT_BUCKETS; i++) {
		seen += s->lat[i];
		if (seen >= want)
			return i ? 1ull << i : 1;
	}
	return 1ull << (STAT_LAT_BUCKETS - 1);
}

const char *stat_op_name(enum stat_op op)
{
	static const char *const names[STAT_NR_OPS] = {
	    [STAT_READ] = "read",
	    [STAT_WRITE] = "write",
	    [STAT_FLUSH] = "flush",
	    [STAT_TRIM] = "trim",
	    [STAT_WRITE_ZEROES] = "write_zeroes",
	};

	return (unsigned int)op < STAT_NR_OPS ? names[op] : "?";
}
