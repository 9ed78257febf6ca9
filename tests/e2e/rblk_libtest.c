/* SPDX-License-Identifier: MIT */
/*
 * librblk end-to-end check, driven by tests/e2e/05-librblk.sh against a
 * running rblk-target:
 *
 *   rblk_libtest rw URL        async writes of mixed sizes (split at max_io,
 *                              registered and bounce buffers) on queue 0,
 *                              read back on queue 1 and compared; TRIM and
 *                              WRITE_ZEROES read back as zeroes; FLUSH; bad
 *                              arguments refused with the documented errno
 *   rblk_libtest ro URL        reads work, writes fail with -EROFS
 *   rblk_libtest open URL      just open; print rblk_last_error() on failure
 *   rblk_libtest rw URL direct|slot
 *                              rw with opts.direct ON (and the volume must
 *                              report RBLK_FEAT_DIRECT) or OFF (must not)
 *   rblk_libtest put URL FILE  write FILE at offset 0 through direct access
 *                              (required), 1 MiB I/Os, 4 in flight, then
 *                              FLUSH when the volume offers it
 *   rblk_libtest get URL FILE  read the whole volume (direct) into FILE
 *   rblk_libtest put|get URL FILE slot
 *                              the same through the slot path (no direct
 *                              access)
 *   rblk_libtest rawro URL     below librblk: log in read-only by hand and
 *                              RDMA WRITE the registered volume; the target
 *                              must have registered it without remote
 *                              write (remote access error), while an RDMA
 *                              READ of it works
 *
 *   rblk_libtest backlog URL [GATE]
 *                              librblk owns the backlog: queue depth 4,
 *                              max_queued 16 x 4; 64 writes of mixed sizes
 *                              (some split at max_io) and a FLUSH submitted
 *                              at once without reaping, the 66th I/O
 *                              refused with -EAGAIN, then all reaped; then
 *                              64 reads at once and every byte compared.
 *                              With GATE, wait (without polling) until the
 *                              file GATE exists after the writes are
 *                              queued, so the caller can restart the
 *                              target: the backlog must survive it. Also
 *                              checks the default limit (4 x queue depth)
 *
 * ro and open log in as $RBLK_HOST_NAME with the key in $RBLK_KEY_FILE when
 * those are set (tests/e2e/65-auth.sh).
 *   rblk_libtest idle URL MS   keep-alive: open with keepalive_ms MS and no
 *                              reconnect (ctrl_loss_timeout_s 0), idle in
 *                              rblk_poll(); print "alive" once 4 * MS have
 *                              passed with the queue up, then wait until the
 *                              queue fails (-ENOTCONN) and print "lost";
 *                              exit 0 then, 1 on anything else
 *
 *   rblk_libtest resize URL GATE [live]
 *                              live resize (tests/e2e/32-resize.sh): the
 *                              volume (64 MiB) grows to 96 MiB while the
 *                              session idles (the shell creates GATE.1
 *                              after ctl resize-export): it learns the size
 *                              without a reconnect, on_resize runs once,
 *                              I/O across the old end works; without
 *                              live, a target restart on a 128 MiB file
 *                              (GATE.2) is taken as growth, and a forced
 *                              shrink to 64 MiB (GATE.3) is not taken
 *
 *   rblk_libtest rogue URL read|pushread|write|reads|pair IO_TIMEOUT_MS
 *                IO_RETRIES
 *                CTRL_LOSS_S RECONNECT_DELAY_MS
 *                              one 64 KiB I/O against tests/e2e/rblk_rogue.py
 *                              (or build/tests/rblk-target-fault over rdma;
 *                              pushread: a read with push reads asked for)
 *                              with those options; prints how it ended, how
 *                              long it took, whether the data read is the
 *                              rogue's pattern, and rblk_queue_stats()
 *
 * Exit 0 on success, 1 on any mismatch or unexpected error.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <rblk/rblk.h>

#include "common/proto.h"
#include "transport/transport.h"

#define MiB (1024ull * 1024)
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, " (%s)\n", rblk_last_error());         \
			exit(1);                                               \
		}                                                              \
	} while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = next_rand();

		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

static void wait_all(struct rblk_queue *q)
{
	struct rblk_completion c[16];

	while (rblk_queue_inflight(q)) {
		int n = rblk_poll(q, c, 16, 10000);

		CHECK(n > 0, "poll returned %d", n);
		for (int i = 0; i < n; i++)
			CHECK(c[i].result == 0, "I/O %p failed: %s",
			      c[i].user_data, strerror(-c[i].result));
	}
}

static int direct_mode = RBLK_DIRECT_AUTO;

/* How many of this process's fds are epoll sets. */
static int count_epolls(void)
{
	char path[300], link[64];
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	ssize_t n;
	int count = 0;

	CHECK(d, "opendir /proc/self/fd");
	while ((de = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		count += !strcmp(link, "anon_inode:[eventpoll]");
	}
	closedir(d);
	return count;
}

/* What test_rw's steps share: the session, its two queues and buffers. */
struct rw_ctx {
	struct rblk *r;
	const struct rblk_info *info;
	struct rblk_queue *q0, *q1;
	char *data, *back; /* span bytes each; data's first half registered */
	uint64_t span;
};

/* Open with two small queues; check the geometry and the epoll sets. */
static void rw_open(const char *url, struct rw_ctx *t)
{
	struct rblk_opts o;
	int ret, epolls = count_epolls();

	rblk_opts_init(&o);
	o.queues = 2;
	o.queue_depth = 8;
	o.max_io = 64 * 1024; /* small, so that big I/Os are split */
	o.max_queued = 8; /* the depth itself: -EAGAIN as soon as it is full */
	o.direct = direct_mode;
	ret = rblk_open(url, &o, &t->r);
	CHECK(ret == 0, "open %s: %d", url, ret);
	t->info = rblk_get_info(t->r);
	if (direct_mode == RBLK_DIRECT_ON)
		CHECK(t->info->features & RBLK_FEAT_DIRECT,
		      "direct not in use");
	if (direct_mode == RBLK_DIRECT_OFF)
		CHECK(!(t->info->features & RBLK_FEAT_DIRECT), "direct in use");
	CHECK(t->info->size >= t->span, "volume too small: %llu",
	      (unsigned long long)t->info->size);
	CHECK(t->info->queues == 2 && t->info->max_io == 64 * 1024,
	      "geometry: queues %u max_io %u", t->info->queues,
	      t->info->max_io);
	t->q0 = rblk_get_queue(t->r, 0);
	t->q1 = rblk_get_queue(t->r, 1);
	CHECK(t->q0 && t->q1 && !rblk_get_queue(t->r, 2), "queues");
	/* issue 11.1: each queue sleeps on its poll group's one epoll set */
	CHECK(count_epolls() == epolls + 2, "%d epoll sets for 2 queues",
	      count_epolls() - epolls);
}

/* Write all of data on q0 in mixed sizes, 4 KiB .. 512 KiB, 8 in flight. */
static void rw_write_mixed(struct rw_ctx *t)
{
	for (uint64_t off = 0; off < t->span;) {
		uint64_t len = 4096ull << (next_rand() % 8);
		int r2;

		if (len > t->span - off)
			len = t->span - off;
		while ((r2 = rblk_submit(t->q0, RBLK_IO_WRITE, t->data + off,
					 off, len, 0,
					 (void *)(uintptr_t)off)) == -EAGAIN) {
			struct rblk_completion c;
			int n = rblk_poll(t->q0, &c, 1, 10000);

			CHECK(n == 1 && c.result == 0,
			      "write completion: n %d result %d", n, c.result);
		}
		CHECK(r2 == 0, "submit write at %llu", (unsigned long long)off);
		off += len;
	}
	wait_all(t->q0);
	CHECK(rblk_queue_io(t->q0, RBLK_IO_FLUSH, NULL, 0, 0, 0) == 0 ||
		  !(t->info->features & RBLK_FEAT_FLUSH),
	      "flush");
}

/*
 * A FUA write (or its refusal), then TRIM [1, 2) MiB and WRITE_ZEROES
 * [3, 4) MiB: the volume must read back as data with those ranges zero.
 * 0, or 1 on a byte that differs.
 */
static int rw_check_zeroes(struct rw_ctx *t)
{
	char *data = t->data, *back = t->back;

	if (t->info->features & RBLK_FEAT_FUA)
		CHECK(rblk_queue_io(t->q0, RBLK_IO_WRITE, data, 0, 4096,
				    RBLK_IO_FUA) == 0,
		      "fua write");
	else /* refused the same way on the slot and the direct path */
		CHECK(rblk_queue_io(t->q0, RBLK_IO_WRITE, data, 0, 4096,
				    RBLK_IO_FUA) == -EOPNOTSUPP,
		      "fua write on a volume without FUA");
	CHECK(rblk_trim(t->r, 1 * MiB, 1 * MiB) == 0, "trim");
	CHECK(rblk_write_zeroes(t->r, 1 * MiB, 3 * MiB, 0) == 0,
	      "write zeroes");
	CHECK(rblk_queue_io(t->q1, RBLK_IO_READ, back, 0, t->span, 0) == 0,
	      "read");
	for (uint64_t i = 0; i < t->span; i++) {
		int zero = (i >= 1 * MiB && i < 2 * MiB) ||
			   (i >= 3 * MiB && i < 4 * MiB);
		char want = zero ? 0 : data[i];

		if (back[i] != want) {
			fprintf(stderr, "FAIL: byte %llu is %d, want %d\n",
				(unsigned long long)i, back[i], want);
			return 1;
		}
	}
	return 0;
}

/*
 * rblk_queue_ready(): completions already reaped come back one per
 * rblk_poll(max 1) at once and leave a plug held (the fio engine's
 * batching); the write submitted under the plug lands once unplugged.
 */
static void rw_plugged(struct rw_ctx *t)
{
	struct rblk_queue *q0 = t->q0;
	struct rblk_completion c;
	unsigned int ready;
	int n;

	for (int k = 0; k < 8; k++)
		CHECK(rblk_submit(q0, RBLK_IO_READ, t->back + k * 4096,
				  (uint64_t)k * 4096, 4096, 0, NULL) == 0,
		      "submit read %d", k);
	/*
	 * Take one at a time, 100 ms apart, until a poll leaves some
	 * ready: on the first, a pull read (rdma's default) has only
	 * its response; its RDMA READ goes out then.
	 */
	for (int k = 0; k < 8 && !rblk_queue_ready(q0); k++) {
		usleep(100000);
		n = rblk_poll(q0, &c, 1, 10000);
		CHECK(n == 1 && c.result == 0, "read %d of 8: %d", k, n);
	}
	CHECK(rblk_queue_ready(q0) >= 1,
	      "no poll of 8 answered reads left any ready");
	rblk_queue_plug(q0);
	fill(t->data, 4096);
	CHECK(rblk_submit(q0, RBLK_IO_WRITE, t->data, 0, 4096, 0, NULL) == 0,
	      "submit write under the plug");
	while ((ready = rblk_queue_ready(q0))) {
		n = rblk_poll(q0, &c, 1, 0);
		CHECK(n == 1 && c.result == 0 &&
			  rblk_queue_ready(q0) == ready - 1,
		      "poll with %u ready: %d, then %u ready", ready, n,
		      rblk_queue_ready(q0));
	}
	CHECK(rblk_queue_unplug(q0) == 0, "unplug");
	wait_all(q0);
	CHECK(rblk_queue_io(t->q1, RBLK_IO_READ, t->back, 0, 4096, 0) == 0,
	      "read back");
	CHECK(!memcmp(t->data, t->back, 4096),
	      "plugged write read back differs");
}

/* Arguments the library must refuse; then unregister data's half. */
static void rw_bad_args(struct rw_ctx *t)
{
	struct rblk_queue *q0 = t->q0;
	char *back = t->back;

	CHECK(rblk_submit(q0, RBLK_IO_READ, back, t->info->size, 4096, 0,
			  NULL) == -ERANGE,
	      "read past the end");
	CHECK(rblk_submit(q0, RBLK_IO_READ, back, 100, 4096, 0, NULL) ==
		  -EINVAL,
	      "misaligned read");
	CHECK(rblk_submit(q0, RBLK_IO_READ, back, 0, 0, 0, NULL) == -EINVAL,
	      "zero-length read");
	CHECK(rblk_submit(q0, 99, back, 0, 4096, 0, NULL) == -EINVAL,
	      "bad opcode");
	CHECK(rblk_unregister_buffer(q0, t->data) == 0, "unregister");
	CHECK(rblk_unregister_buffer(q0, t->data) == -ENOENT,
	      "unregister twice");
}

static int test_rw(const char *url)
{
	struct rw_ctx t = {.span = 8 * MiB};

	rw_open(url, &t);
	t.data = aligned_alloc(4096, t.span);
	t.back = aligned_alloc(4096, t.span);
	CHECK(t.data && t.back, "alloc");
	fill(t.data, t.span);
	/* the first half of data goes zero-copy, the second through bounces */
	CHECK(rblk_register_buffer(t.q0, t.data, t.span / 2) == 0, "register");
	CHECK(rblk_register_buffer(t.q0, t.data, 4096) == -EEXIST,
	      "double register");

	rw_write_mixed(&t);
	/* read it all back on the other queue in one 8 MiB I/O (split) */
	memset(t.back, 0xa5, t.span);
	CHECK(rblk_queue_io(t.q1, RBLK_IO_READ, t.back, 0, t.span, 0) == 0,
	      "read");
	CHECK(!memcmp(t.data, t.back, t.span), "data read back differs");
	if (rw_check_zeroes(&t))
		return 1;
	rw_plugged(&t);
	rw_bad_args(&t);

	rblk_close(t.r);
	free(t.data);
	free(t.back);
	printf(
	    "rw: 8 MiB written in mixed sizes and verified; trim/zeroes/flush OK\n");
	return 0;
}

/* Submit; the submission must be accepted. */
static void submit_ok(struct rblk_queue *q, enum rblk_io_op op, void *buf,
		      uint64_t off, uint64_t len, void *ud)
{
	int ret = rblk_submit(q, op, buf, off, len, 0, ud);

	CHECK(ret == 0, "submit op %d at %llu+%llu: %d", op,
	      (unsigned long long)off, (unsigned long long)len, ret);
}

/* Reap exactly n completions, all successful. */
static void reap_n(struct rblk_queue *q, unsigned int n)
{
	struct rblk_completion c[16];

	while (n) {
		int got = rblk_poll(q, c, 16, 30000);

		CHECK(got > 0 && (unsigned int)got <= n, "poll returned %d",
		      got);
		for (int i = 0; i < got; i++)
			CHECK(c[i].result == 0, "I/O %p failed: %s",
			      c[i].user_data, strerror(-c[i].result));
		n -= (unsigned int)got;
	}
	CHECK(rblk_queue_inflight(q) == 0, "inflight %u after reaping all",
	      rblk_queue_inflight(q));
}

static int test_backlog(const char *url, const char *gate)
{
	enum { QD = 4, NQ = 16 * QD, NW = NQ - 1 };
	static uint64_t offs[NQ + 1], lens[NQ];
	struct rblk_opts o;
	struct rblk *r;
	struct rblk_queue *q;
	const struct rblk_info *info;
	uint64_t span;
	char *data, *back, dummy[4096];
	unsigned int i;
	int ret;

	rblk_opts_init(&o);
	o.queue_depth = QD;
	o.max_io = 64 * 1024;
	o.max_queued = NQ;
	o.reconnect_delay_ms = 100;
	o.ctrl_loss_timeout_s = 30;
	ret = rblk_open(url, &o, &r);
	CHECK(ret == 0, "open %s: %d", url, ret);
	info = rblk_get_info(r);
	CHECK(info->queue_depth == QD, "granted depth %u", info->queue_depth);
	q = rblk_get_queue(r, 0);

	/* NW writes of 4 KiB .. 256 KiB laid end to end, plus one FLUSH */
	for (i = 0, span = 0; i < NW; i++) {
		offs[i] = span;
		lens[i] = 4096ull << (next_rand() % 7);
		span += lens[i];
	}
	offs[NW] = span;
	CHECK(info->size >= span, "volume too small");
	data = aligned_alloc(4096, span);
	back = aligned_alloc(4096, span);
	CHECK(data && back, "alloc");
	fill(data, span);
	for (i = 0; i < NW; i++)
		submit_ok(q, RBLK_IO_WRITE, data + offs[i], offs[i], lens[i],
			  (void *)(uintptr_t)(i + 1));
	if (info->features & RBLK_FEAT_FLUSH)
		submit_ok(q, RBLK_IO_FLUSH, NULL, 0, 0, (void *)(uintptr_t)NQ);
	else
		submit_ok(q, RBLK_IO_WRITE, data, 0, 4096,
			  (void *)(uintptr_t)NQ);
	CHECK(rblk_queue_inflight(q) == NQ, "inflight %u",
	      rblk_queue_inflight(q));
	ret = rblk_submit(q, RBLK_IO_READ, dummy, 0, 4096, 0, NULL);
	CHECK(ret == -EAGAIN, "submit past max_queued: %d, want -EAGAIN", ret);
	if (gate) {
		printf("queued\n");
		fflush(stdout);
		while (access(gate, F_OK))
			usleep(20000);
	}
	reap_n(q, NQ);

	memset(back, 0xa5, span);
	for (i = 0; i < NW; i++)
		submit_ok(q, RBLK_IO_READ, back + offs[i], offs[i], lens[i],
			  NULL);
	CHECK(rblk_submit(q, RBLK_IO_READ, dummy, 0, 4096, 0, NULL) == 0,
	      "one more read");
	CHECK(rblk_submit(q, RBLK_IO_READ, dummy, 0, 4096, 0, NULL) == -EAGAIN,
	      "read past max_queued");
	reap_n(q, NQ);
	for (uint64_t b = 0; b < span; b++)
		CHECK(back[b] == data[b], "byte %llu differs",
		      (unsigned long long)b);
	rblk_close(r);

	/* the default limit: RBLK_DEFAULT_QUEUED_FACTOR x the granted depth */
	o.max_queued = 0;
	CHECK(rblk_open(url, &o, &r) == 0, "open (default max_queued)");
	q = rblk_get_queue(r, 0);
	for (i = 0; i < RBLK_DEFAULT_QUEUED_FACTOR * QD; i++)
		submit_ok(q, RBLK_IO_READ, back + i * 4096ull, i * 4096ull,
			  4096, NULL);
	CHECK(rblk_submit(q, RBLK_IO_READ, dummy, 0, 4096, 0, NULL) == -EAGAIN,
	      "read past the default max_queued");
	reap_n(q, RBLK_DEFAULT_QUEUED_FACTOR * QD);
	CHECK(!memcmp(back, data, RBLK_DEFAULT_QUEUED_FACTOR * QD * 4096),
	      "default-limit reads differ");
	rblk_close(r);
	o.max_queued = RBLK_MAX_QUEUED + 1;
	CHECK(rblk_open(url, &o, &r) == -EINVAL, "max_queued too large");

	free(data);
	free(back);
	printf(
	    "backlog: %u writes (%llu bytes) and %u reads queued at once on depth %u%s; -EAGAIN past %u; all verified\n",
	    NQ, (unsigned long long)span, NQ, QD,
	    gate ? " across a target restart" : "", NQ);
	return 0;
}

/* Options from the environment: host name and key file, when given. */
static struct rblk_opts *env_opts(struct rblk_opts *o)
{
	rblk_opts_init(o);
	o->host_name = getenv("RBLK_HOST_NAME");
	o->key_file = getenv("RBLK_KEY_FILE");
	return o;
}

static int test_ro(const char *url)
{
	struct rblk_opts o;
	struct rblk *r;
	char *buf = aligned_alloc(4096, 65536);
	int ret;

	CHECK(rblk_open(url, env_opts(&o), &r) == 0, "open");
	CHECK(rblk_get_info(r)->features & RBLK_FEAT_READ_ONLY,
	      "volume not read-only");
	CHECK(rblk_pread(r, buf, 65536, 0) == 0, "read");
	ret = rblk_pwrite(r, buf, 4096, 0, 0);
	CHECK(ret == -EROFS, "write on read-only volume returned %d", ret);
	rblk_close(r);
	free(buf);
	printf("ro: reads work, writes refused with EROFS\n");
	return 0;
}

/* put/get: whole-file transfers, with direct access required or not used. */
static int test_copy(const char *url, const char *path, bool put, bool slot)
{
	const uint64_t chunk = 1 * MiB;
	struct rblk_opts o;
	const struct rblk_info *info;
	struct rblk_queue *q;
	struct rblk *r;
	uint64_t size, off;
	char *buf;
	FILE *f;

	rblk_opts_init(&o);
	o.direct = slot ? RBLK_DIRECT_OFF : RBLK_DIRECT_ON;
	o.queue_depth = 4;
	CHECK(rblk_open(url, &o, &r) == 0, "open %s", url);
	info = rblk_get_info(r);
	CHECK(slot || (info->features & RBLK_FEAT_DIRECT), "direct not in use");
	q = rblk_get_queue(r, 0);
	f = fopen(path, put ? "rb" : "wb");
	CHECK(f, "open %s", path);
	if (put) {
		fseek(f, 0, SEEK_END);
		size = (uint64_t)ftell(f);
		rewind(f);
		CHECK(size <= info->size && size % info->block_size == 0,
		      "%s: %llu bytes do not fit the volume", path,
		      (unsigned long long)size);
	} else {
		size = info->size;
	}
	buf = aligned_alloc(4096, 4 * chunk);
	CHECK(buf, "alloc");
	for (off = 0; off < size; off += 4 * chunk) {
		uint64_t n = size - off < 4 * chunk ? size - off : 4 * chunk;

		if (put)
			CHECK(fread(buf, 1, n, f) == n, "read %s", path);
		/* up to 4 I/Os in flight, completions in any order */
		for (uint64_t i = 0; i < n; i += chunk)
			CHECK(rblk_submit(q, put ? RBLK_IO_WRITE : RBLK_IO_READ,
					  buf + i, off + i,
					  n - i < chunk ? n - i : chunk, 0,
					  NULL) == 0,
			      "submit at %llu", (unsigned long long)(off + i));
		wait_all(q);
		if (!put)
			CHECK(fwrite(buf, 1, n, f) == n, "write %s", path);
	}
	if (put && (info->features & RBLK_FEAT_FLUSH))
		CHECK(rblk_flush(r) == 0, "flush");
	CHECK(fclose(f) == 0, "close %s", path);
	rblk_close(r);
	free(buf);
	printf("%s: %llu bytes %s through %s\n", put ? "put" : "get",
	       (unsigned long long)size, put ? "written" : "read",
	       slot ? "the slot path" : "direct access");
	return 0;
}

/* Wait for one completion on xc; returns it in *wc. */
static void raw_wait(struct xp_conn *xc, struct xp_wc *wc)
{
	for (int i = 0; i < 100000; i++) {
		int n = xp_poll(xc, wc, 1);

		CHECK(n >= 0, "xp_poll: %d", n);
		if (n == 1)
			return;
		usleep(100);
	}
	CHECK(0, "no completion within 10 s");
}

/*
 * The next completion that is not a successful SEND's: the HELLO's may
 * be reported after the LOGIN it was answered with (the send and the
 * receive queue's completions come in no set order).
 */
static void raw_wait_op(struct xp_conn *xc, struct xp_wc *wc)
{
	do
		raw_wait(xc, wc);
	while (wc->opcode == XP_WC_SEND && wc->status == XP_WC_SUCCESS);
}

static int test_rawro(const char *url)
{
	const struct xp_ops *ops;
	char scheme[8], host[64], exp[RBLK_NAME_MAX], priv[RBLK_CM_REQ_SIZE];
	static char msgs[2 * RBLK_MSG_MAX], data[4096];
	struct xp_conn_attr attr = {.max_send_wr = 4, .max_recv_wr = 4};
	struct rblk_hello h = {
	    .queue_depth = 1, .max_io = 4096, .flags = RBLK_HELLO_F_READ_ONLY};
	struct xp_send_wr wr = {0}, *bad;
	struct xp_mr *mr, *dmr;
	struct rblk_login l;
	struct xp_conn *xc;
	struct xp_sge sge;
	struct xp_wc wc;
	unsigned int port;

	CHECK(sscanf(url, "%7[a-z]://%63[^:]:%u/%127s", scheme, host, &port,
		     exp) == 4 &&
		  (ops = xp_find(scheme)),
	      "rawro wants tcp|rdma://HOST:PORT/EXPORT");
	CHECK(xp_connect(ops, NULL, host, (uint16_t)port, &attr, priv,
			 rblk_cm_req_encode(priv, 1), 5000, &xc, NULL,
			 NULL) == 0,
	      "connect");
	CHECK(xp_reg_mr(xc, msgs, sizeof(msgs), XP_ACCESS_LOCAL_WRITE, &mr) ==
		      0 &&
		  xp_reg_mr(xc, data, sizeof(data), XP_ACCESS_LOCAL_WRITE,
			    &dmr) == 0,
	      "reg_mr");
	sge = (struct xp_sge){.addr = msgs, .length = RBLK_MSG_MAX, .mr = mr};
	CHECK(xp_post_recv(xc, 1, &sge) == 0, "post_recv");
	snprintf(h.export_name, sizeof(h.export_name), "%s", exp);
	wr.opcode = XP_WR_SEND;
	wr.flags = XP_SEND_SIGNALED;
	wr.sge.addr = msgs + RBLK_MSG_MAX;
	wr.sge.length = (uint32_t)rblk_hello_encode(wr.sge.addr, &h);
	wr.sge.mr = mr;
	CHECK(xp_post_send(xc, &wr, &bad) == 0, "send HELLO");
	do
		raw_wait(xc, &wc);
	while (wc.opcode != XP_WC_RECV);
	CHECK(rblk_login_decode(msgs, wc.byte_len, &l) == RBLK_S_OK &&
		  l.status == RBLK_S_OK,
	      "login");
	CHECK((l.features & RBLK_F_DIRECT) && (l.features & RBLK_F_READ_ONLY),
	      "want a read-only direct login, features 0x%x", l.features);

	/* reading the volume in place is allowed */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.opcode = XP_WR_RDMA_READ;
	wr.flags = XP_SEND_SIGNALED;
	wr.sge = (struct xp_sge){.addr = data, .length = 4096, .mr = dmr};
	wr.remote_addr = l.vol_addr;
	wr.rkey = l.vol_rkey;
	CHECK(xp_post_send(xc, &wr, &bad) == 0, "post RDMA READ");
	raw_wait_op(xc, &wc);
	CHECK(wc.wr_id == 2 && wc.status == XP_WC_SUCCESS,
	      "RDMA READ of a read-only volume: %s",
	      xp_wc_status_str(wc.status));
	/* writing it is not: the registration lacks remote write */
	memset(data, 0x5a, sizeof(data));
	wr.wr_id = 3;
	wr.opcode = XP_WR_RDMA_WRITE;
	CHECK(xp_post_send(xc, &wr, &bad) == 0, "post RDMA WRITE");
	raw_wait_op(xc, &wc);
	CHECK(wc.wr_id == 3 && wc.status == XP_WC_REM_ACCESS_ERR,
	      "RDMA WRITE of a read-only volume completed with %s",
	      xp_wc_status_str(wc.status));
	xp_destroy(xc);
	printf("rawro: RDMA READ of the volume OK, RDMA WRITE refused (%s)\n",
	       xp_wc_status_str(XP_WC_REM_ACCESS_ERR));
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Byte o of tests/e2e/rblk_rogue.py's volume. */
static uint8_t rogue_byte(uint64_t o)
{
	return (uint8_t)((o >> 12) * 7 + (o & 0xff));
}

/* Whether len bytes at buf are the rogue's pattern at off. */
static bool rogue_data_ok(const char *buf, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if ((uint8_t)buf[i] != rogue_byte(off + i))
			return false;
	return true;
}

/*
 * "reads": 8 READs of len bytes one after another (one tag, used again
 * and again), each at its own offset, each checked. 0 or the first
 * error; *ok false at the first wrong byte.
 */
static int rogue_reads(struct rblk_queue *q, char *buf, uint64_t len, bool *ok)
{
	for (uint64_t i = 1; i <= 8; i++) {
		int ret = rblk_queue_io(q, RBLK_IO_READ, buf, i * len, len, 0);

		if (ret)
			return ret;
		if (!rogue_data_ok(buf, i * len, len))
			*ok = false;
	}
	return 0;
}

/*
 * "pair": one READ (tag A's first use), then two READs in flight at once
 * (A again, and B), each into its own half of [buf, + 2 len) from its own
 * offset, each checked. 0 or the first error.
 */
static int rogue_pair(struct rblk_queue *q, char *buf, uint64_t len, bool *ok)
{
	struct rblk_completion c[2];
	int ret = rblk_queue_io(q, RBLK_IO_READ, buf, len, len, 0), got = 0;

	if (ret)
		return ret;
	*ok = rogue_data_ok(buf, len, len);
	CHECK(
	    !rblk_submit(q, RBLK_IO_READ, buf, 2 * len, len, 0, NULL) &&
		!rblk_submit(q, RBLK_IO_READ, buf + len, 4 * len, len, 0, NULL),
	    "submit");
	while (got < 2) {
		int n = rblk_poll(q, c + got, 2 - got, 60000);

		CHECK(n > 0, "poll returned %d", n);
		for (int i = got; i < got + n; i++)
			if (c[i].result && !ret)
				ret = c[i].result;
		got += n;
	}
	if (!ret && !(rogue_data_ok(buf, 2 * len, len) &&
		      rogue_data_ok(buf + len, 4 * len, len)))
		*ok = false;
	return ret;
}

/*
 * Against tests/e2e/rblk_rogue.py: one I/O (op "read": 64 KiB at 64 KiB,
 * into a registered buffer that is checked against the rogue's pattern;
 * "write": 64 KiB of data, not in-capsule; "reads", "pair": as
 * rogue_reads() and rogue_pair() say), with io_timeout_ms TO,
 * io_retries RET, ctrl_loss_timeout_s LOSS and reconnect_delay_ms DELAY.
 * Prints "open=E" when rblk_open() fails, else "result=E ms=N data=ok|bad|-"
 * and the queue's counters, E an errno name or 0; exits 0 when it ran.
 * RBLK_TEST_PULL set in the environment: pull reads.
 */
static int test_rogue(const char *url, const char *op, int to, int ret_max,
		      int loss, int delay)
{
	const uint64_t len = 64 * 1024, off = 64 * 1024;
	struct rblk_queue_stats st;
	struct rblk_queue *q;
	struct rblk_opts o;
	struct rblk *r;
	uint64_t start;
	bool push = !strcmp(op, "pushread");
	bool read = push || !strcmp(op, "read");
	bool reads = !strcmp(op, "reads"), pair = !strcmp(op, "pair");
	const char *data = "-";
	bool ok = true;
	char *buf;
	int ret;

	rblk_opts_init(&o);
	o.io_timeout_ms = to;
	o.io_retries = ret_max;
	o.ctrl_loss_timeout_s = loss;
	o.reconnect_delay_ms = delay;
	o.inline_data = -1;
	o.keepalive_ms = 1000;
	/* reads pulled rather than pushed (tcp's default) */
	if (getenv("RBLK_TEST_PULL") && *getenv("RBLK_TEST_PULL"))
		o.flags |= RBLK_OPEN_PULL_READS;
	if (push)
		o.flags |= RBLK_OPEN_PUSH_READS;
	ret = rblk_open(url, &o, &r);
	if (ret) {
		printf("open=%s (%s)\n", strerrorname_np(-ret),
		       rblk_last_error());
		return 0;
	}
	q = rblk_get_queue(r, 0);
	buf = aligned_alloc(4096, 4 * len);
	CHECK(buf, "alloc");
	memset(buf, 0xaa, 4 * len);
	/* the read's neighbour: a rogue must not reach it either */
	CHECK(rblk_register_buffer(q, buf, 4 * len) == 0, "register: %s",
	      rblk_last_error());
	start = mono_ms();
	if (reads)
		ret = rogue_reads(q, buf, len, &ok);
	else if (pair)
		ret = rogue_pair(q, buf, len, &ok);
	else if (read)
		ret = rblk_queue_io(q, RBLK_IO_READ, buf, off, len, 0);
	else
		ret = rblk_queue_io(q, RBLK_IO_WRITE, buf, off, len, 0);
	if (read && !ret)
		ok = rogue_data_ok(buf, off, len);
	if ((read || reads || pair) && !ret) {
		for (uint64_t i = (pair ? 2 : 1) * len; i < 4 * len; i++)
			if ((uint8_t)buf[i] != 0xaa)
				ok = false;
		data = ok ? "ok" : "bad";
	}
	rblk_queue_stats(q, &st);
	printf(
	    "result=%s ms=%llu data=%s timeouts=%llu lost=%llu reconnects=%llu retries=%llu failed=%llu\n",
	    ret ? strerrorname_np(-ret) : "0",
	    (unsigned long long)(mono_ms() - start), data,
	    (unsigned long long)st.timeouts, (unsigned long long)st.conn_lost,
	    (unsigned long long)st.reconnects, (unsigned long long)st.retries,
	    (unsigned long long)st.io_failed);
	fflush(stdout);
	rblk_close(r);
	free(buf);
	return 0;
}

static int test_idle(const char *url, int ka_ms)
{
	struct rblk_completion c;
	struct rblk_opts o;
	struct rblk_queue *q;
	struct rblk *r;
	uint64_t start;
	bool said = false;
	int n;

	rblk_opts_init(&o);
	o.keepalive_ms = ka_ms;
	o.ctrl_loss_timeout_s = 0;
	CHECK(rblk_open(url, &o, &r) == 0, "open %s", url);
	q = rblk_get_queue(r, 0);
	start = mono_ms();
	for (;;) {
		n = rblk_poll(q, &c, 1, 50);
		if (n == -ENOTCONN)
			break;
		CHECK(n == 0, "idle poll returned %d", n);
		if (!said && mono_ms() - start >= 4ull * (uint64_t)ka_ms) {
			printf("alive\n");
			fflush(stdout);
			said = true;
		}
	}
	CHECK(said,
	      "the queue failed after %llu ms, before 4 keep-alive periods",
	      (unsigned long long)(mono_ms() - start));
	printf("lost\n");
	rblk_close(r);
	return 0;
}

/* ---- resize: live growth, a grown volume after a restart, a shrink ---- */

struct resize_seen {
	unsigned int calls;
	uint64_t old_size, new_size;
};

static void resized(struct rblk *r, uint64_t old_size, uint64_t new_size,
		    void *arg)
{
	struct resize_seen *s = arg;

	CHECK(rblk_get_size(r) == new_size &&
		  rblk_get_info(r)->size == new_size,
	      "on_resize before the size changed");
	s->calls++;
	s->old_size = old_size;
	s->new_size = new_size;
	printf("on_resize %llu -> %llu\n", (unsigned long long)old_size,
	       (unsigned long long)new_size);
}

/* Poll both queues (nothing in flight: keep-alives only) for ms. */
static void resize_idle(struct rblk *r, int ms)
{
	struct rblk_completion c;

	for (unsigned int i = 0; i < 2; i++)
		CHECK(rblk_poll(rblk_get_queue(r, i), &c, 1, ms / 2) >= 0,
		      "poll queue %u", i);
}

/* Idle until the file gate exists (the shell's turn is over). */
static void resize_gate(struct rblk *r, const char *gate, int n)
{
	char path[512];

	snprintf(path, sizeof(path), "%s.%d", gate, n);
	fflush(stdout);
	for (uint64_t t0 = mono_ms(); access(path, F_OK);) {
		CHECK(mono_ms() - t0 < 60000, "no %s within 60 s", path);
		resize_idle(r, 50);
	}
}

/* Idle until the session says size; returns how long that took (ms). */
static uint64_t resize_await(struct rblk *r, uint64_t size, int max_ms)
{
	uint64_t t0 = mono_ms();

	while (rblk_get_size(r) != size) {
		CHECK(mono_ms() - t0 < (uint64_t)max_ms,
		      "size %llu, still not %llu after %d ms",
		      (unsigned long long)rblk_get_size(r),
		      (unsigned long long)size, max_ms);
		resize_idle(r, 20);
	}
	return mono_ms() - t0;
}

/* Write len bytes of a fresh pattern at off on q, read them on the other. */
static void resize_rw(struct rblk *r, unsigned int q, uint64_t off,
		      uint64_t len, char *data, char *back)
{
	int ret;

	fill(data, len);
	ret = rblk_queue_io(rblk_get_queue(r, q), RBLK_IO_WRITE, data, off, len,
			    0);
	CHECK(ret == 0, "write %llu+%llu: %d", (unsigned long long)off,
	      (unsigned long long)len, ret);
	memset(back, 0, len);
	ret = rblk_queue_io(rblk_get_queue(r, !q), RBLK_IO_READ, back, off, len,
			    0);
	CHECK(ret == 0, "read %llu+%llu: %d", (unsigned long long)off,
	      (unsigned long long)len, ret);
	CHECK(!memcmp(data, back, len), "%llu+%llu read back differs",
	      (unsigned long long)off, (unsigned long long)len);
}

/*
 * rblk_libtest resize URL GATE [live]: the volume starts at 64 MiB; the
 * shell grows it to 96 MiB live (GATE.1), then (unless live) restarts the
 * target on a 128 MiB file (GATE.2), then shrinks it to 64 MiB with
 * --force (GATE.3). Each step is checked from the session's side.
 */
static int test_resize(const char *url, const char *gate, bool live_only)
{
	const uint64_t MB = MiB, len = 4 * MiB;
	struct resize_seen seen = {0};
	char *data = malloc(len), *back = malloc(len), *keep = malloc(len);
	struct rblk_opts o;
	struct rblk *r;
	int ret;

	CHECK(data && back && keep, "malloc");
	rblk_opts_init(&o);
	o.queues = 2;
	o.queue_depth = 8;
	o.max_io = 256 * 1024;
	o.keepalive_ms = 1000; /* idle queues learn within 2 s */
	o.reconnect_delay_ms = 100;
	o.ctrl_loss_timeout_s = 30;
	o.on_resize = resized;
	o.on_resize_arg = &seen;
	ret = rblk_open(url, &o, &r);
	CHECK(ret == 0, "open %s: %d", url, ret);
	CHECK(rblk_get_size(r) == 64 * MB, "size %llu at open",
	      (unsigned long long)rblk_get_size(r));
	resize_rw(r, 0, 63 * MB, MB, data, back);
	ret = rblk_queue_io(rblk_get_queue(r, 0), RBLK_IO_WRITE, data, 64 * MB,
			    4096, 0);
	CHECK(ret == -ERANGE, "write past the end: %d", ret);
	printf("phase1 size=%llu%s\n", (unsigned long long)rblk_get_size(r),
	       (rblk_get_info(r)->features & RBLK_FEAT_DIRECT) ? " direct"
							       : "");

	/* 1: grown live to 96 MiB: told without a reconnect */
	resize_gate(r, gate, 1);
	printf("phase2 learned_ms=%llu\n",
	       (unsigned long long)resize_await(r, 96 * MB, 10000));
	CHECK(seen.calls == 1 && seen.old_size == 64 * MB &&
		  seen.new_size == 96 * MB,
	      "on_resize: %u calls, last %llu -> %llu", seen.calls,
	      (unsigned long long)seen.old_size,
	      (unsigned long long)seen.new_size);
	for (unsigned int i = 0; i < 2; i++) {
		struct rblk_queue_stats st;

		rblk_queue_stats(rblk_get_queue(r, i), &st);
		CHECK(!st.conn_lost, "queue %u lost its connection", i);
	}
	resize_rw(r, 1, 62 * MB, len, data, back); /* across the old end */
	memcpy(keep, data, len);
	resize_rw(r, 0, 95 * MB, MB, data, back);
	ret = rblk_queue_io(rblk_get_queue(r, 0), RBLK_IO_WRITE, data, 96 * MB,
			    4096, 0);
	CHECK(ret == -ERANGE, "write past the new end: %d", ret);
	printf("phase2 ok\n");
	if (live_only)
		goto out;

	/* 2: the target restarts on the file, grown again to 128 MiB */
	resize_gate(r, gate, 2);
	ret = rblk_queue_io(rblk_get_queue(r, 0), RBLK_IO_READ, back, 62 * MB,
			    len, 0);
	CHECK(ret == 0 && !memcmp(keep, back, len),
	      "after the restart: read %d, data %s", ret,
	      ret ? "-" : "differs");
	resize_await(r, 128 * MB, 20000);
	CHECK(seen.calls == 2 && seen.new_size == 128 * MB,
	      "on_resize after the restart: %u calls, last %llu", seen.calls,
	      (unsigned long long)seen.new_size);
	resize_rw(r, 1, 127 * MB, MB, data, back);
	resize_rw(r, 0, 127 * MB, MB, data, back); /* both queues back */
	printf("phase3 ok\n");

	/* 3: shrunk to 64 MiB with --force: reported, never taken */
	resize_gate(r, gate, 3);
	for (uint64_t t0 = mono_ms(); mono_ms() - t0 < 1000;)
		resize_idle(r, 20); /* keep-alives bring the notice */
	CHECK(rblk_get_size(r) == 128 * MB && seen.calls == 2,
	      "the session shrank to %llu",
	      (unsigned long long)rblk_get_size(r));
	ret = rblk_queue_io(rblk_get_queue(r, 0), RBLK_IO_READ, back, 100 * MB,
			    4096, 0);
	CHECK(ret == -ERANGE, "read past the shrunk end: %d", ret);
	ret =
	    rblk_queue_io(rblk_get_queue(r, 1), RBLK_IO_READ, back, 0, 4096, 0);
	CHECK(ret == 0, "read inside the shrunk volume: %d", ret);
	printf("phase4 ok\n");
out:
	rblk_close(r);
	free(data);
	free(back);
	free(keep);
	return 0;
}

int main(int argc, char **argv)
{
	struct rblk *r;
	int ret;

	if (argc == 4 && !strcmp(argv[1], "rw")) {
		if (!strcmp(argv[3], "direct"))
			direct_mode = RBLK_DIRECT_ON;
		else if (!strcmp(argv[3], "slot"))
			direct_mode = RBLK_DIRECT_OFF;
		else
			return 2;
		return test_rw(argv[2]);
	}
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "slot"))) &&
	    (!strcmp(argv[1], "put") || !strcmp(argv[1], "get")))
		return test_copy(argv[2], argv[3], argv[1][0] == 'p',
				 argc == 5);
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "backlog"))
		return test_backlog(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc == 4 && !strcmp(argv[1], "idle"))
		return test_idle(argv[2], atoi(argv[3]));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "resize"))
		return test_resize(argv[2], argv[3],
				   argc == 5 && !strcmp(argv[4], "live"));
	if (argc == 8 && !strcmp(argv[1], "rogue"))
		return test_rogue(argv[2], argv[3], atoi(argv[4]),
				  atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
	if (argc != 3) {
		fprintf(
		    stderr,
		    "usage: %s rw|ro|open|rawro|idle|backlog URL [MS|GATE]\n",
		    argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "rw"))
		return test_rw(argv[2]);
	if (!strcmp(argv[1], "rawro"))
		return test_rawro(argv[2]);
	if (!strcmp(argv[1], "ro"))
		return test_ro(argv[2]);
	{
		struct rblk_opts o;

		ret = rblk_open(argv[2], env_opts(&o), &r);
	}
	if (ret) {
		printf("error %d: %s\n", ret, rblk_last_error());
		return 1;
	}
	rblk_close(r);
	return 0;
}
