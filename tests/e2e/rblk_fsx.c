/* SPDX-License-Identifier: MIT */
/*
 * Durability and random-operation checks (issue 28).
 *
 *   rblk_fsx fsx TARGET [-n OPS] [-s SEED] [-q QD] [-m MAX_IO]
 *                [-r RESTARTS -c CMD]
 *     fsx-style random READ, WRITE (some FUA), TRIM, WRITE_ZEROES and
 *     FLUSH, checked against an in-memory model of the whole volume:
 *     every READ must return the model's bytes, and the volume is read
 *     back whole at the end. Sizes: odd block counts, around the inline
 *     limit (4 KiB) and across max I/O. TARGET is a URL (librblk, up to
 *     QD commands in flight, never two overlapping) or a block device
 *     (O_DIRECT, one at a time; BLKDISCARD, BLKZEROOUT, fdatasync and
 *     RWF_DSYNC). With -r, CMD (sh -c) runs RESTARTS times at evenly
 *     spaced points, with commands in flight: it restarts the target,
 *     and the initiator must reconnect and lose nothing.
 *
 *   rblk_fsx durable TARGET -j JOURNAL (-k MARKCMD | -d DMNAME) [-n OPS]
 *                    [-s SEED]
 *     One command at a time; after each acknowledgement appends to
 *     JOURNAL what was acknowledged ("W seq off len fua", "Z off len
 *     fua", "F"). After each FLUSH and FUA write logs mark "rblk-N" in
 *     the dm-log-writes device DMNAME (a DM_TARGET_MSG ioctl, as
 *     `dmsetup message DMNAME 0 mark rblk-N`), or runs MARKCMD with $MARK
 *     set to N, and journals "M N". Write data is a function of
 *     (seq, byte offset), so the journal alone says what each block held.
 *     No FUA over blocks written since the last FLUSH (see run_durable).
 *
 *   rblk_fsx replay LOG -j JOURNAL -z SIZE [-o IMG -x CMD] [-a]
 *     Replays a dm-log-writes log (the kernel's log-writes format:
 *     a super block, then per entry one sector of header and its data)
 *     onto an image of SIZE bytes, starting from zeroes. At each mark
 *     "rblk-N" it checks strictly (every block holds what it held when
 *     mark N was taken, or for FUA marks a write since the last flush),
 *     and at each FLUSH or FUA entry loosely (what it held at the last
 *     mark or anything written before the next). Without -x the image
 *     is the exported volume itself and is checked in memory; with -x
 *     the image is written to IMG and CMD (sh -c) runs with MARK, LOOSE
 *     and IMG set (it mounts, runs "rblk_fsx verify", fscks). -a: CMD
 *     at every FLUSH/FUA entry too, not only at marks.
 *
 *   rblk_fsx verify FILE -j JOURNAL -M MARK [-L]
 *     The check above of FILE (the exported file) at mark MARK; -L loose.
 *
 * Prints a summary line; exit 0 only when nothing was lost or wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <linux/dm-ioctl.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rblk/rblk.h>

#define MAX_QD 32
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define POOL_SIZE (8u << 20)

static uint64_t rng_state;

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t n)
{
	return n ? splitmix(&rng_state) % n : 0;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "rblk_fsx: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the volume: librblk or a block device ------------------------------ */

enum op { OP_READ, OP_WRITE, OP_TRIM, OP_ZERO, OP_FLUSH, NR_OPS };
static const char *const op_name[NR_OPS] = {"read", "write", "trim",
					    "write_zeroes", "flush"};

struct io {
	enum op op;
	uint64_t off, len;
	bool fua, busy;
	char *buf;
	uint64_t seq;
};

struct vol {
	struct rblk *r;
	struct rblk_queue *q;
	int fd; /* block device, or -1 */
	uint64_t size;
	uint32_t bs, max_io;
	unsigned int qd;
	struct io io[MAX_QD];
	unsigned int inflight;
};

static void vol_open(struct vol *v, const char *target, unsigned int qd,
		     uint32_t max_io)
{
	memset(v, 0, sizeof(*v));
	v->fd = -1;
	if (strstr(target, "://")) {
		struct rblk_opts o;
		const struct rblk_info *in;
		int ret;

		rblk_opts_init(&o);
		o.queue_depth = qd;
		if (max_io)
			o.max_io = max_io;
		o.ctrl_loss_timeout_s = -1; /* target restarts: wait */
		o.io_retries = -1;
		o.reconnect_delay_ms = 100;
		ret = rblk_open(target, &o, &v->r);
		if (ret)
			die("open %s: %s", target, rblk_last_error());
		in = rblk_get_info(v->r);
		v->size = in->size;
		v->bs = in->block_size;
		v->max_io = in->max_io;
		v->q = rblk_get_queue(v->r, 0);
		v->qd = qd < in->queue_depth ? qd : in->queue_depth;
	} else {
		int ssz = 512;

		v->fd = open(target, O_RDWR | O_DIRECT);
		if (v->fd < 0)
			die("open %s: %s", target, strerror(errno));
		if (ioctl(v->fd, BLKGETSIZE64, &v->size) ||
		    ioctl(v->fd, BLKSSZGET, &ssz))
			die("%s: not a block device", target);
		v->bs = (uint32_t)ssz;
		v->max_io = max_io ? max_io : 1u << 20;
		v->qd = 1;
	}
	if (v->qd > MAX_QD)
		v->qd = MAX_QD;
	if (!v->qd)
		v->qd = 1;
	for (unsigned int i = 0; i < v->qd; i++) {
		/* room for 2 x max_io + one block (the largest I/O) */
		size_t n = 2 * (size_t)v->max_io + 65536;

		if (posix_memalign((void **)&v->io[i].buf, 4096, n))
			die("out of memory");
		if (v->r && rblk_register_buffer(v->q, v->io[i].buf, n))
			die("register: %s", rblk_last_error());
	}
}

/* One I/O done synchronously on a block device: 0 or -errno. */
static int dev_io(struct vol *v, struct io *io)
{
	uint64_t range[2] = {io->off, io->len};
	uint64_t done = 0;

	switch (io->op) {
	case OP_FLUSH:
		return fdatasync(v->fd) ? -errno : 0;
	case OP_TRIM:
		if (ioctl(v->fd, BLKDISCARD, range))
			return -errno;
		/* BLKDISCARD need not zero: rblk's TRIM promises zeroes, so
		 * reading them back is part of the check */
		break;
	case OP_ZERO:
		if (ioctl(v->fd, BLKZEROOUT, range))
			return -errno;
		break;
	case OP_READ:
	case OP_WRITE:
		while (done < io->len) {
			struct iovec iov = {io->buf + done, io->len - done};
			ssize_t n = io->op == OP_READ
					? preadv2(v->fd, &iov, 1,
						  (off_t)(io->off + done), 0)
					: pwritev2(v->fd, &iov, 1,
						   (off_t)(io->off + done),
						   io->fua ? RWF_DSYNC : 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n ? -errno : -EIO;
			done += (uint64_t)n;
		}
		return 0;
	default:
		return -EINVAL;
	}
	if (io->fua && fdatasync(v->fd))
		return -errno;
	return 0;
}

static int lib_submit(struct vol *v, struct io *io)
{
	static const enum rblk_io_op map[NR_OPS] = {
	    RBLK_IO_READ, RBLK_IO_WRITE, RBLK_IO_TRIM, RBLK_IO_WRITE_ZEROES,
	    RBLK_IO_FLUSH};

	return rblk_submit(
	    v->q, map[io->op], io->buf, io->op == OP_FLUSH ? 0 : io->off,
	    io->op == OP_FLUSH ? 0 : io->len, io->fua ? RBLK_IO_FUA : 0, io);
}

/* Wait for one I/O of v; returns it with *res. */
static struct io *vol_reap(struct vol *v, int *res)
{
	struct rblk_completion c;
	int n;

	do {
		n = rblk_poll(v->q, &c, 1, 1000);
		if (n < 0)
			die("poll: %s", strerror(-n));
	} while (!n);
	*res = c.result;
	v->inflight--;
	return c.user_data;
}

/* One I/O, synchronously, on either kind of volume. */
static int vol_sync(struct vol *v, struct io *io)
{
	int res, ret;

	if (v->fd >= 0)
		return dev_io(v, io);
	ret = lib_submit(v, io);
	if (ret)
		return ret;
	v->inflight++;
	if (vol_reap(v, &res) != io)
		die("a completion of another I/O");
	return res;
}

/* ---- data: a function of (seq, byte offset) ----------------------------- */

static uint64_t word_at(uint64_t seq, uint64_t off)
{
	uint64_t s = seq * 0x100000001b3ull ^ off;

	return splitmix(&s);
}

static void fill(char *buf, uint64_t seq, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t w = word_at(seq, off + i);

		memcpy(buf + i, &w, 8);
	}
}

/* Does [p, p + len) hold version seq (0: zeroes) of offset off? */
static bool holds(const char *p, uint64_t seq, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t w = seq ? word_at(seq, off + i) : 0, got;

		memcpy(&got, p + i, 8);
		if (got != w)
			return false;
	}
	return true;
}

/* ---- fsx ---------------------------------------------------------------- */

struct fsx {
	struct vol v;
	char *model, *pool;
	uint64_t count[NR_OPS], bytes, fua, seq;
	uint64_t mismatches;
};

/* A length in blocks' multiples: mostly odd counts, and the edges. */
static uint64_t pick_len(struct fsx *f)
{
	uint64_t bs = f->v.bs, mi = f->v.max_io, r = rnd(1000), len;
	static const int64_t around[] = {-1, 0, 1};

	if (r < 600)
		len = (2 * rnd(12) + 1) * bs; /* odd: 1..23 blocks */
	else if (r < 850)		      /* around the inline limit */
		len = (uint64_t)((int64_t)(4096 * (1 + rnd(2))) +
				 around[rnd(3)] * (int64_t)bs);
	else if (r < 985) /* up to 255 blocks, at most 2 x max I/O */
		len = (rnd(MIN(255, 2 * mi / bs)) + 1) * bs;
	else /* across max I/O: the library splits */
		len = (uint64_t)((int64_t)(mi * (1 + rnd(2))) +
				 around[rnd(3)] * (int64_t)bs);
	if (!len) /* 4 KiB less a 4 KiB block */
		len = bs;
	if (len > f->v.size)
		len = f->v.size;
	return len;
}

static bool overlaps(struct vol *v, uint64_t off, uint64_t len)
{
	for (unsigned int i = 0; i < v->qd; i++) {
		struct io *o = &v->io[i];

		if (o->busy && o->op != OP_FLUSH && off < o->off + o->len &&
		    o->off < off + len)
			return true;
	}
	return false;
}

static void check_read(struct fsx *f, struct io *io)
{
	const char *m = f->model + io->off;

	if (!memcmp(io->buf, m, io->len))
		return;
	for (uint64_t i = 0; i < io->len; i += f->v.bs)
		if (memcmp(io->buf + i, m + i, f->v.bs)) {
			uint64_t got, want;

			memcpy(&got, io->buf + i, 8);
			memcpy(&want, m + i, 8);
			fprintf(stderr,
				"MISMATCH: read %" PRIu64 "+%" PRIu64
				" (op %" PRIu64 "): block at %" PRIu64
				" differs from the model (stamp %" PRIu64
				", model's %" PRIu64 ")\n",
				io->off, io->len, f->seq, io->off + i, got,
				want);
			break;
		}
	f->mismatches++;
	if (f->mismatches > 10)
		die("too many mismatches");
}

static void fsx_complete(struct fsx *f, struct io *io, int res)
{
	if (res)
		die("%s %" PRIu64 "+%" PRIu64 " failed: %s", op_name[io->op],
		    io->off, io->len, strerror(-res));
	switch (io->op) {
	case OP_READ:
		check_read(f, io);
		break;
	case OP_WRITE:
		memcpy(f->model + io->off, io->buf, io->len);
		break;
	case OP_TRIM:
	case OP_ZERO:
		memset(f->model + io->off, 0, io->len);
		break;
	default:
		break;
	}
	io->busy = false;
}

static struct io *free_slot(struct fsx *f)
{
	struct vol *v = &f->v;
	int res;

	for (;;) {
		for (unsigned int i = 0; i < v->qd; i++)
			if (!v->io[i].busy)
				return &v->io[i];
		struct io *done = vol_reap(v, &res);

		fsx_complete(f, done, res);
	}
}

static void drain(struct fsx *f)
{
	int res;

	while (f->v.fd < 0 && f->v.inflight) {
		struct io *done = vol_reap(&f->v, &res);

		fsx_complete(f, done, res);
	}
}

static void fsx_one(struct fsx *f)
{
	struct vol *v = &f->v;
	struct io *io = free_slot(f);
	uint64_t r = rnd(100), blocks;
	int ret;

	io->op = r < 38	  ? OP_READ
		 : r < 78 ? OP_WRITE
		 : r < 87 ? OP_TRIM
		 : r < 96 ? OP_ZERO
			  : OP_FLUSH;
	io->fua = (io->op == OP_WRITE || io->op == OP_ZERO) && !rnd(8);
	if (io->op != OP_FLUSH) {
		io->len = pick_len(f);
		blocks = (v->size - io->len) / v->bs;
		/* a run of ops near the end now and then */
		io->off = (rnd(16) ? rnd(blocks + 1) : blocks) * v->bs;
		while (overlaps(v, io->off, io->len)) {
			int res;
			struct io *done = vol_reap(v, &res);

			fsx_complete(f, done, res);
		}
	} else {
		io->off = io->len = 0;
	}
	if (io->op == OP_WRITE) {
		/* fresh bytes: a window of the pool, stamped per block */
		uint64_t at = rnd(POOL_SIZE - io->len) & ~7ull;

		memcpy(io->buf, f->pool + at, io->len);
		for (uint64_t i = 0; i < io->len; i += v->bs)
			memcpy(io->buf + i, &f->seq, 8);
		f->bytes += io->len;
	}
	f->count[io->op]++;
	f->fua += io->fua;
	f->seq++;
	io->busy = true;
	if (v->fd >= 0) {
		fsx_complete(f, io, dev_io(v, io));
		return;
	}
	ret = lib_submit(v, io);
	if (ret)
		die("submit %s: %s", op_name[io->op], strerror(-ret));
	v->inflight++;
}

/* The whole volume against the model, max_io at a time. */
static void fsx_verify_all(struct fsx *f)
{
	struct vol *v = &f->v;
	struct io *io;

	drain(f);
	for (uint64_t off = 0; off < v->size; off += v->max_io) {
		io = &v->io[0];
		io->op = OP_READ;
		io->fua = false;
		io->off = off;
		io->len = v->size - off < v->max_io ? v->size - off : v->max_io;
		io->busy = true;
		fsx_complete(f, io, vol_sync(v, io));
	}
}

static uint64_t reconnects(struct vol *v)
{
	struct rblk_queue_stats s;

	if (!v->q)
		return 0;
	rblk_queue_stats(v->q, &s);
	return s.reconnects;
}

static int run_fsx(const char *target, uint64_t nops, unsigned int qd,
		   uint32_t max_io, unsigned int restarts, const char *cmd)
{
	static struct fsx f;
	uint64_t next_restart = UINT64_MAX, done_restarts = 0;
	double t0 = now_s();
	int res;

	vol_open(&f.v, target, qd, max_io);
	f.model = calloc(1, f.v.size);
	f.pool = malloc(POOL_SIZE);
	if (!f.model || !f.pool)
		die("out of memory");
	for (uint64_t i = 0; i < POOL_SIZE; i += 8) {
		uint64_t w = splitmix(&rng_state);

		memcpy(f.pool + i, &w, 8);
	}
	/* the model starts from what the volume holds */
	for (uint64_t off = 0; off < f.v.size; off += f.v.max_io) {
		struct io io = {.op = OP_READ,
				.off = off,
				.len = f.v.size - off < f.v.max_io
					   ? f.v.size - off
					   : f.v.max_io,
				.buf = f.v.io[0].buf};

		res = vol_sync(&f.v, &io);
		if (res)
			die("initial read: %s", strerror(-res));
		memcpy(f.model + off, io.buf, io.len);
	}
	if (restarts && cmd)
		next_restart = nops / (restarts + 1);
	for (uint64_t i = 0; i < nops; i++) {
		if (i == next_restart) {
			/* commands in flight stay in flight: they must be
			 * retried on the new connection */
			if (system(cmd))
				die("restart command failed");
			done_restarts++;
			next_restart =
			    done_restarts < restarts
				? nops / (restarts + 1) * (done_restarts + 1)
				: UINT64_MAX;
		}
		fsx_one(&f);
		if (nops >= 10 && !((i + 1) % (nops / 10)))
			fprintf(stderr, "fsx: %" PRIu64 " ops, %.1f s\n", i + 1,
				now_s() - t0);
	}
	fsx_verify_all(&f);
	printf("fsx: %" PRIu64 " ops in %.1f s (read %" PRIu64
	       ", write %" PRIu64 " (fua %" PRIu64 "), trim %" PRIu64
	       ", write_zeroes %" PRIu64 ", flush %" PRIu64 "), %" PRIu64
	       " MiB written, volume %" PRIu64 " MiB bs %u max_io %u qd %u, "
	       "restarts %" PRIu64 ", reconnects %" PRIu64
	       ", mismatches %" PRIu64 "\n",
	       nops, now_s() - t0, f.count[OP_READ], f.count[OP_WRITE], f.fua,
	       f.count[OP_TRIM], f.count[OP_ZERO], f.count[OP_FLUSH],
	       f.bytes >> 20, f.v.size >> 20, f.v.bs, f.v.max_io, f.v.qd,
	       done_restarts, reconnects(&f.v), f.mismatches);
	if (restarts && reconnects(&f.v) < done_restarts && f.v.r)
		die("%" PRIu64 " restarts but %" PRIu64 " reconnects",
		    done_restarts, reconnects(&f.v));
	return f.mismatches ? 1 : 0;
}

/* ---- durable: the acknowledged-what-when journal ------------------------ */

/* `dmsetup message NAME 0 MSG` without a process per mark. */
static int dm_message(const char *name, const char *msg)
{
	struct {
		struct dm_ioctl io;
		struct dm_target_msg tm;
		char text[128];
	} __attribute__((packed)) b;
	int fd = open("/dev/mapper/control", O_RDWR), ret = 0;

	if (fd < 0)
		return -errno;
	memset(&b, 0, sizeof(b));
	b.io.version[0] = DM_VERSION_MAJOR;
	b.io.data_size = sizeof(b);
	b.io.data_start = sizeof(b.io);
	snprintf(b.io.name, sizeof(b.io.name), "%s", name);
	b.tm.sector = 0;
	snprintf(b.text, sizeof(b.text), "%s", msg);
	if (ioctl(fd, DM_TARGET_MSG, &b))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * dm-log-writes logs a write once a FLUSH has made it durable, but a FUA
 * write at once (Documentation/admin-guide/device-mapper/log-writes.rst,
 * "Log Ordering"): a FUA write over a block that a write since the last
 * FLUSH changed lands in the log ahead of that older write, and a replay
 * puts the older data back on top, which no disk with a coherent cache
 * does. Such a FUA write would fail the check without a fault in the
 * target, so the workload sends it without FUA (counted as fua_plain).
 * Unflushed: the blocks written, zeroed or trimmed without FUA since the
 * last FLUSH.
 */
static bool durable_fua_ok(const unsigned char *unflushed, uint64_t b0,
			   uint64_t nb)
{
	for (uint64_t b = b0; b < b0 + nb; b++)
		if (unflushed[b])
			return false;
	return true;
}

static int run_durable(const char *target, uint64_t nops, const char *jpath,
		       const char *markcmd, const char *dmname)
{
	static struct vol v;
	FILE *j;
	uint64_t seq = 0, marks = 0, cnt[NR_OPS] = {0}, fua = 0, fua_plain = 0;
	unsigned char *unflushed;
	char env[32];

	vol_open(&v, target, 1, 0);
	unflushed = calloc(v.size / v.bs, 1);
	if (!unflushed)
		die("out of memory");
	j = fopen(jpath, "w");
	if (!j)
		die("%s: %s", jpath, strerror(errno));
	setvbuf(j, NULL, _IOLBF, 0);
	fprintf(j, "V %" PRIu64 " %u\n", v.size, v.bs);
	for (uint64_t i = 0; i < nops; i++) {
		struct io *io = &v.io[0];
		uint64_t r = rnd(100), maxlen;
		bool mark;
		int res;

		io->op = r < 60	  ? OP_WRITE
			 : r < 70 ? OP_TRIM
			 : r < 80 ? OP_ZERO
				  : OP_FLUSH;
		io->fua = io->op != OP_FLUSH && io->op != OP_TRIM && !rnd(5);
		/* small volume, small I/O: many blocks rewritten often */
		maxlen = 64 * (uint64_t)v.bs;
		if (maxlen > v.size / 4)
			maxlen = v.size / 4;
		io->len = (rnd(maxlen / v.bs) + 1) * v.bs;
		if (!rnd(20))
			io->len = 4096 + v.bs; /* past the inline limit */
		if (io->len > v.size)
			io->len = v.size;
		io->off = rnd((v.size - io->len) / v.bs + 1) * v.bs;
		if (io->op == OP_FLUSH)
			io->off = io->len = 0;
		if (io->fua && !durable_fua_ok(unflushed, io->off / v.bs,
					       io->len / v.bs)) {
			io->fua = false;
			fua_plain++;
		}
		io->seq = ++seq;
		if (io->op == OP_WRITE)
			fill(io->buf, io->seq, io->off, io->len);
		res = vol_sync(&v, io);
		if (res)
			die("%s failed: %s", op_name[io->op], strerror(-res));
		cnt[io->op]++;
		fua += io->fua;
		if (io->op == OP_FLUSH)
			memset(unflushed, 0, v.size / v.bs);
		else if (!io->fua)
			memset(unflushed + io->off / v.bs, 1, io->len / v.bs);
		switch (io->op) {
		case OP_WRITE:
			fprintf(j, "W %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n",
				io->seq, io->off, io->len, io->fua);
			break;
		case OP_TRIM:
		case OP_ZERO:
			fprintf(j, "Z %" PRIu64 " %" PRIu64 " %d\n", io->off,
				io->len, io->fua);
			break;
		default:
			fprintf(j, "F\n");
		}
		mark = io->op == OP_FLUSH || io->fua;
		if (mark && dmname) {
			char msg[64];

			snprintf(msg, sizeof(msg), "mark rblk-%" PRIu64,
				 ++marks);
			res = dm_message(dmname, msg);
			if (res)
				die("dm message %s '%s': %s", dmname, msg,
				    strerror(-res));
			fprintf(j, "M %" PRIu64 "\n", marks);
		} else if (mark && markcmd) {
			snprintf(env, sizeof(env), "%" PRIu64, ++marks);
			setenv("MARK", env, 1);
			if (system(markcmd))
				die("mark command failed");
			fprintf(j, "M %" PRIu64 "\n", marks);
		}
	}
	fclose(j);
	printf("durable: %" PRIu64 " ops (write %" PRIu64 " (fua %" PRIu64
	       "), trim %" PRIu64 ", write_zeroes %" PRIu64 ", flush %" PRIu64
	       "), %" PRIu64 " marks, %" PRIu64
	       " FUA sent plain (over unflushed blocks)\n",
	       nops, cnt[OP_WRITE], fua, cnt[OP_TRIM], cnt[OP_ZERO],
	       cnt[OP_FLUSH], marks, fua_plain);
	free(unflushed);
	if (v.r)
		rblk_close(v.r);
	return 0;
}

/* ---- the journal's model: which versions a block may hold -------------- */

struct jop {
	char kind; /* W, Z, F, M */
	uint64_t seq, off, len, mark;
	bool fua;
};

struct journal {
	struct jop *ops;
	size_t n;
	uint64_t size;
	uint32_t bs;
};

static void journal_load(struct journal *jl, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t cap = 0;

	if (!f)
		die("%s: %s", path, strerror(errno));
	memset(jl, 0, sizeof(*jl));
	while (fgets(line, sizeof(line), f)) {
		struct jop o = {.kind = line[0]};
		int fua = 0;

		switch (line[0]) {
		case 'V':
			if (sscanf(line, "V %" SCNu64 " %" SCNu32, &jl->size,
				   &jl->bs) != 2)
				die("bad journal line %s", line);
			continue;
		case 'W':
			if (sscanf(line,
				   "W %" SCNu64 " %" SCNu64 " %" SCNu64 " %d",
				   &o.seq, &o.off, &o.len, &fua) != 4)
				die("bad journal line %s", line);
			break;
		case 'Z':
			if (sscanf(line, "Z %" SCNu64 " %" SCNu64 " %d", &o.off,
				   &o.len, &fua) != 3)
				die("bad journal line %s", line);
			break;
		case 'M':
			if (sscanf(line, "M %" SCNu64, &o.mark) != 1)
				die("bad journal line %s", line);
			break;
		case 'F':
			break;
		default:
			die("bad journal line %s", line);
		}
		o.fua = fua;
		if (jl->n == cap) {
			cap = cap ? 2 * cap : 1024;
			jl->ops = realloc(jl->ops, cap * sizeof(*jl->ops));
			if (!jl->ops)
				die("out of memory");
		}
		jl->ops[jl->n++] = o;
	}
	fclose(f);
	if (!jl->bs)
		die("%s: no V line", path);
}

/*
 * What each block may hold at mark K, kept incrementally as the marks of
 * a log come in order: dver[b] is the version a crash must keep (0:
 * zeroes) and exp the image of those versions; ops of the journal from
 * max(from, since[b]) up to the mark (loose: up to the next mark) may
 * have landed on b too (written after the last FLUSH, or after it).
 */
struct model {
	const struct journal *jl;
	uint64_t nb, mark;
	uint64_t *dver, *pver;
	size_t *since;
	uint64_t *plist; /* blocks with an unflushed version */
	size_t nplist;
	bool *pend;
	char *exp;
	size_t pos, from; /* journal cursor; first op after the last FLUSH */
};

static void model_init(struct model *m, const struct journal *jl)
{
	memset(m, 0, sizeof(*m));
	m->jl = jl;
	m->nb = jl->size / jl->bs;
	m->dver = calloc(m->nb, sizeof(uint64_t));
	m->pver = calloc(m->nb, sizeof(uint64_t));
	m->since = calloc(m->nb, sizeof(size_t));
	m->plist = calloc(m->nb, sizeof(uint64_t));
	m->pend = calloc(m->nb, 1);
	m->exp = calloc(1, jl->size);
	if (!m->dver || !m->pver || !m->since || !m->plist || !m->pend ||
	    !m->exp)
		die("out of memory");
}

static void model_durable(struct model *m, uint64_t b, uint64_t ver, size_t i)
{
	uint64_t off = b * m->jl->bs;

	m->dver[b] = ver;
	m->since[b] = i + 1;
	if (ver)
		fill(m->exp + off, ver, off, m->jl->bs);
	else
		memset(m->exp + off, 0, m->jl->bs);
}

/* Move to mark K (marks come in increasing order). */
static void model_advance(struct model *m, uint64_t mark)
{
	const struct journal *jl = m->jl;

	if (!mark || mark <= m->mark)
		return; /* mark 0: the start; a log's marks only grow */
	for (; m->pos < jl->n; m->pos++) {
		const struct jop *o = &jl->ops[m->pos];
		uint64_t b0 = o->off / jl->bs, b1 = (o->off + o->len) / jl->bs;

		if (o->kind == 'M' && o->mark == mark) {
			m->pos++;
			m->mark = mark;
			return;
		}
		if (o->kind == 'F') {
			for (size_t k = 0; k < m->nplist; k++) {
				uint64_t b = m->plist[k];

				if (m->pend[b]) {
					model_durable(m, b, m->pver[b], m->pos);
					m->pend[b] = false;
				}
			}
			m->nplist = 0;
			m->from = m->pos + 1;
			continue;
		}
		if (o->kind != 'W' && o->kind != 'Z')
			continue;
		for (uint64_t b = b0; b < b1; b++) {
			uint64_t ver = o->kind == 'W' ? o->seq : 0;

			if (o->fua) { /* acknowledged: this version or later */
				model_durable(m, b, ver, m->pos);
				m->pend[b] = false;
				continue;
			}
			m->pver[b] = ver;
			if (!m->pend[b]) {
				m->pend[b] = true;
				m->plist[m->nplist++] = b;
			}
		}
	}
	die("mark %" PRIu64 " is not in the journal (after mark %" PRIu64 ")",
	    mark, m->mark);
}

/* Check img (the exported volume's bytes) at m's mark. Blocks wrong. */
static uint64_t model_check(const struct model *m, const char *img, bool loose,
			    const char *where)
{
	const struct journal *jl = m->jl;
	size_t to = m->pos;
	uint64_t bad = 0;

	if (loose) /* ... and anything up to the next mark */
		while (to < jl->n && jl->ops[to].kind != 'M')
			to++;
	for (uint64_t b = 0; b < m->nb; b++) {
		uint64_t off = b * jl->bs;
		const char *p = img + off;
		bool ok = !memcmp(p, m->exp + off, jl->bs);

		for (size_t i = m->from > m->since[b] ? m->from : m->since[b];
		     !ok && i < to; i++) {
			const struct jop *o = &jl->ops[i];

			if ((o->kind == 'W' || o->kind == 'Z') &&
			    off >= o->off && off < o->off + o->len)
				ok = holds(p, o->kind == 'W' ? o->seq : 0, off,
					   jl->bs);
		}
		if (!ok && bad++ < 5)
			fprintf(stderr,
				"LOST at %s: mark %" PRIu64
				"%s: block at %" PRIu64
				" should hold version %" PRIu64
				" (0: zeroes) or a later unflushed one\n",
				where, m->mark, loose ? " (loose)" : "", off,
				m->dver[b]);
	}
	return bad;
}

static int run_verify(const char *file, const char *jpath, uint64_t mark,
		      bool loose)
{
	struct journal jl;
	struct model m;
	char *img;
	int fd = open(file, O_RDONLY);
	uint64_t got = 0, bad;

	journal_load(&jl, jpath);
	img = calloc(1, jl.size);
	if (fd < 0 || !img)
		die("%s: %s", file, strerror(errno));
	while (got < jl.size) {
		ssize_t n = pread(fd, img + got, jl.size - got, (off_t)got);

		if (n < 0)
			die("read %s: %s", file, strerror(errno));
		if (!n)
			break; /* short file: the rest reads as zeroes */
		got += (uint64_t)n;
	}
	close(fd);
	model_init(&m, &jl);
	model_advance(&m, mark);
	bad = model_check(&m, img, loose, file);
	printf("verify %s mark %" PRIu64 "%s: %" PRIu64 " blocks wrong\n", file,
	       mark, loose ? " loose" : "", bad);
	return bad ? 1 : 0;
}

/* ---- replay of a dm-log-writes log -------------------------------------- */

/* Documentation/admin-guide/device-mapper/log-writes.rst */
#define LOG_FLUSH_FLAG (1u << 0)
#define LOG_FUA_FLAG (1u << 1)
#define LOG_DISCARD_FLAG (1u << 2)
#define LOG_MARK_FLAG (1u << 3)
#define WRITE_LOG_MAGIC 0x6a736677736872ull

struct lw_super {
	uint64_t magic, version, nr_entries;
	uint32_t sectorsize;
} __attribute__((packed));

struct lw_entry {
	uint64_t sector, nr_sectors, flags, data_len;
} __attribute__((packed));

static void write_image(const char *path, const char *img, uint64_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	uint64_t done = 0;

	if (fd < 0)
		die("%s: %s", path, strerror(errno));
	while (done < size) {
		ssize_t n = pwrite(fd, img + done, size - done, (off_t)done);

		if (n <= 0)
			die("write %s: %s", path, strerror(errno));
		done += (uint64_t)n;
	}
	close(fd);
}

struct replay {
	const char *imgpath, *cmd;
	struct journal jl;
	struct model m;
	bool file_mode, all;
	uint64_t last_mark, checks, marks, cmd_runs, bad;
	bool seen_mark;
};

static void checkpoint(struct replay *rp, const char *img, uint64_t size,
		       bool loose, uint64_t entry)
{
	char where[64], env[32];

	snprintf(where, sizeof(where), "log entry %" PRIu64, entry);
	rp->checks++;
	if (!rp->file_mode) {
		model_advance(&rp->m, rp->last_mark);
		rp->bad += model_check(&rp->m, img, loose, where) != 0;
		return;
	}
	if (loose && !rp->all)
		return;
	write_image(rp->imgpath, img, size);
	snprintf(env, sizeof(env), "%" PRIu64, rp->last_mark);
	setenv("MARK", env, 1);
	setenv("LOOSE", loose ? "1" : "0", 1);
	setenv("IMG", rp->imgpath, 1);
	setenv("ENTRY", where + 10, 1);
	rp->cmd_runs++;
	if (system(rp->cmd)) {
		fprintf(stderr, "LOST or corrupt at %s: mark %" PRIu64 "%s\n",
			where, rp->last_mark, loose ? " (loose)" : "");
		rp->bad++;
	}
}

static int run_replay(const char *log, struct replay *rp, uint64_t size)
{
	int fd = open(log, O_RDONLY);
	struct lw_super sb;
	char *img = calloc(1, size), *sec, *data = NULL;
	uint64_t pos, ss, nr_flush = 0, nr_fua = 0, nr_disc = 0, nr_w = 0;
	size_t data_cap = 0;

	if (fd < 0 || !img)
		die("%s: %s", log, strerror(errno));
	if (pread(fd, &sb, sizeof(sb), 0) != sizeof(sb) ||
	    sb.magic != WRITE_LOG_MAGIC || sb.version != 1)
		die("%s: not a dm-log-writes log (magic, version 1)", log);
	ss = sb.sectorsize;
	if (ss < 512 || ss > 65536)
		die("%s: sector size %" PRIu64, log, ss);
	sec = malloc(ss);
	pos = ss; /* entries start one sector in */
	for (uint64_t e = 0; e < sb.nr_entries; e++) {
		struct lw_entry le;
		uint64_t off, len;

		if (pread(fd, sec, ss, (off_t)pos) != (ssize_t)ss)
			die("%s: short read at entry %" PRIu64, log, e);
		memcpy(&le, sec, sizeof(le));
		pos += ss;
		off = le.sector * ss;
		len = le.nr_sectors * ss;
		if (le.flags & LOG_MARK_FLAG) {
			char name[64] = "";
			size_t n = le.data_len < sizeof(name) - 1
				       ? le.data_len
				       : sizeof(name) - 1;

			memcpy(name, sec + sizeof(le), n);
			if (!strncmp(name, "rblk-", 5)) {
				rp->last_mark = strtoull(name + 5, NULL, 10);
				rp->seen_mark = true;
				rp->marks++;
				checkpoint(rp, img, size, false, e);
			}
			continue;
		}
		if (len && off + len > size)
			die("entry %" PRIu64 " at %" PRIu64 "+%" PRIu64
			    " beyond the image",
			    e, off, len);
		if (le.flags & LOG_DISCARD_FLAG) {
			/* rblk promises zeroes after TRIM: replay as zeroes */
			memset(img + off, 0, len);
			nr_disc++;
		} else if (len) {
			if (len > data_cap) {
				data_cap = len;
				data = realloc(data, data_cap);
				if (!data)
					die("out of memory");
			}
			if (pread(fd, data, len, (off_t)pos) != (ssize_t)len)
				die("%s: short data at entry %" PRIu64, log, e);
			memcpy(img + off, data, len);
			pos += len;
			nr_w++;
		}
		nr_flush += !!(le.flags & LOG_FLUSH_FLAG);
		nr_fua += !!(le.flags & LOG_FUA_FLAG);
		if ((le.flags & (LOG_FLUSH_FLAG | LOG_FUA_FLAG)) &&
		    rp->seen_mark)
			checkpoint(rp, img, size, true, e);
	}
	close(fd);
	printf("replay: %" PRIu64 " entries (%" PRIu64 " writes, %" PRIu64
	       " discards, %" PRIu64 " flushes, %" PRIu64 " fua), %" PRIu64
	       " rblk marks, %" PRIu64 " checkpoints (%" PRIu64
	       " through the check command), %" PRIu64 " failed\n",
	       sb.nr_entries, nr_w, nr_disc, nr_flush, nr_fua, rp->marks,
	       rp->checks, rp->cmd_runs, rp->bad);
	free(img);
	free(sec);
	free(data);
	if (!rp->marks)
		die("no rblk marks in the log");
	return rp->bad ? 1 : 0;
}

/* ---- main --------------------------------------------------------------- */

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: rblk_fsx fsx TARGET [-n OPS] [-s SEED] [-q QD] "
	    "[-m MAX_IO] [-r RESTARTS -c CMD]\n"
	    "       rblk_fsx durable TARGET -j JOURNAL [-k MARKCMD] [-n OPS] "
	    "[-s SEED]\n"
	    "       rblk_fsx replay LOG -j JOURNAL -z SIZE [-o IMG -x CMD] "
	    "[-a]\n"
	    "       rblk_fsx verify FILE -j JOURNAL -M MARK [-L]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t nops = 10000, seed = 1, size = 0, mark = 0;
	unsigned int qd = 16, restarts = 0;
	uint32_t max_io = 0;
	const char *cmd = NULL, *jpath = NULL, *img = NULL, *dmname = NULL;
	bool loose = false, all = false;
	const char *mode, *target;
	int c;

	if (argc < 3)
		usage();
	mode = argv[1];
	target = argv[2];
	optind = 3;
	while ((c = getopt(argc, argv, "n:s:q:m:r:c:j:k:d:z:o:x:aM:L")) != -1) {
		switch (c) {
		case 'n':
			nops = strtoull(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'q':
			qd = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'm':
			max_io = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			restarts = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'c':
		case 'k':
		case 'x':
			cmd = optarg;
			break;
		case 'd':
			dmname = optarg;
			break;
		case 'j':
			jpath = optarg;
			break;
		case 'z':
			size = strtoull(optarg, NULL, 0);
			break;
		case 'o':
			img = optarg;
			break;
		case 'a':
			all = true;
			break;
		case 'M':
			mark = strtoull(optarg, NULL, 0);
			break;
		case 'L':
			loose = true;
			break;
		default:
			usage();
		}
	}
	rng_state = seed;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "fsx"))
		return run_fsx(target, nops, qd, max_io, restarts, cmd);
	if (!jpath)
		usage();
	if (!strcmp(mode, "durable"))
		return run_durable(target, nops, jpath, cmd, dmname);
	if (!strcmp(mode, "verify"))
		return run_verify(target, jpath, mark, loose);
	if (!strcmp(mode, "replay")) {
		static struct replay rp;

		journal_load(&rp.jl, jpath);
		model_init(&rp.m, &rp.jl);
		if (!size)
			size = rp.jl.size;
		if (cmd && !img)
			usage();
		rp.imgpath = img;
		rp.cmd = cmd;
		rp.file_mode = cmd != NULL;
		rp.all = all;
		if (!rp.file_mode && size != rp.jl.size)
			die("-z %" PRIu64 " is not the volume's size %" PRIu64,
			    size, rp.jl.size);
		return run_replay(target, &rp, size);
	}
	usage();
	return 2;
}
