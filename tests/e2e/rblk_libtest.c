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
 *   rblk_libtest idle URL MS   keep-alive: open with keepalive_ms MS and no
 *                              reconnect (ctrl_loss_timeout_s 0), idle in
 *                              rblk_poll(); print "alive" once 4 * MS have
 *                              passed with the queue up, then wait until the
 *                              queue fails (-ENOTCONN) and print "lost";
 *                              exit 0 then, 1 on anything else
 *
 * Exit 0 on success, 1 on any mismatch or unexpected error.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rblk/rblk.h>

#define MiB (1024ull * 1024)
#define CHECK(cond, ...)                                              \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__,     \
				__LINE__);                            \
			fprintf(stderr, __VA_ARGS__);                 \
			fprintf(stderr, " (%s)\n", rblk_last_error()); \
			exit(1);                                      \
		}                                                     \
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

static int test_rw(const char *url)
{
	const uint64_t span = 8 * MiB;
	struct rblk_opts o;
	struct rblk *r;
	struct rblk_queue *q0, *q1;
	const struct rblk_info *info;
	char *data, *back, *reg;
	uint64_t off;
	int ret;

	rblk_opts_init(&o);
	o.queues = 2;
	o.queue_depth = 8;
	o.max_io = 64 * 1024; /* small, so that big I/Os are split */
	ret = rblk_open(url, &o, &r);
	CHECK(ret == 0, "open %s: %d", url, ret);
	info = rblk_get_info(r);
	CHECK(info->size >= span, "volume too small: %llu",
	      (unsigned long long)info->size);
	CHECK(info->queues == 2 && info->max_io == 64 * 1024,
	      "geometry: queues %u max_io %u", info->queues, info->max_io);
	q0 = rblk_get_queue(r, 0);
	q1 = rblk_get_queue(r, 1);
	CHECK(q0 && q1 && !rblk_get_queue(r, 2), "queues");

	data = aligned_alloc(4096, span);
	back = aligned_alloc(4096, span);
	CHECK(data && back, "alloc");
	fill(data, span);
	/* the first half of data goes zero-copy, the second through bounces */
	reg = data;
	CHECK(rblk_register_buffer(q0, reg, span / 2) == 0, "register");
	CHECK(rblk_register_buffer(q0, reg, 4096) == -EEXIST, "double register");

	/* mixed sizes, 4 KiB .. 512 KiB, up to 8 in flight */
	for (off = 0; off < span;) {
		uint64_t len = 4096ull << (next_rand() % 8);
		int r2;

		if (len > span - off)
			len = span - off;
		while ((r2 = rblk_submit(q0, RBLK_IO_WRITE, data + off, off,
					 len, 0, (void *)(uintptr_t)off)) ==
		       -EBUSY) {
			struct rblk_completion c;
			int n = rblk_poll(q0, &c, 1, 10000);

			CHECK(n == 1 && c.result == 0,
			      "write completion: n %d result %d", n, c.result);
		}
		CHECK(r2 == 0, "submit write at %llu", (unsigned long long)off);
		off += len;
	}
	wait_all(q0);
	CHECK(rblk_queue_io(q0, RBLK_IO_FLUSH, NULL, 0, 0, 0) == 0 ||
		      !(info->features & RBLK_FEAT_FLUSH),
	      "flush");

	/* read it all back on the other queue in one 8 MiB I/O (split) */
	memset(back, 0xa5, span);
	CHECK(rblk_queue_io(q1, RBLK_IO_READ, back, 0, span, 0) == 0, "read");
	CHECK(!memcmp(data, back, span), "data read back differs");

	/* FUA write, then TRIM and WRITE_ZEROES read back as zeroes */
	if (info->features & RBLK_FEAT_FUA)
		CHECK(rblk_queue_io(q0, RBLK_IO_WRITE, data, 0, 4096,
				    RBLK_IO_FUA) == 0,
		      "fua write");
	CHECK(rblk_trim(r, 1 * MiB, 1 * MiB) == 0, "trim");
	CHECK(rblk_write_zeroes(r, 1 * MiB, 3 * MiB, 0) == 0, "write zeroes");
	CHECK(rblk_queue_io(q1, RBLK_IO_READ, back, 0, span, 0) == 0, "read");
	for (uint64_t i = 0; i < span; i++) {
		int zero = (i >= 1 * MiB && i < 2 * MiB) ||
			   (i >= 3 * MiB && i < 4 * MiB);
		char want = zero ? 0 : data[i];

		if (back[i] != want) {
			fprintf(stderr, "FAIL: byte %llu is %d, want %d\n",
				(unsigned long long)i, back[i], want);
			return 1;
		}
	}

	/* arguments the library must refuse */
	CHECK(rblk_submit(q0, RBLK_IO_READ, back, info->size, 4096, 0, NULL) ==
		      -ERANGE,
	      "read past the end");
	CHECK(rblk_submit(q0, RBLK_IO_READ, back, 100, 4096, 0, NULL) ==
		      -EINVAL,
	      "misaligned read");
	CHECK(rblk_submit(q0, RBLK_IO_READ, back, 0, 0, 0, NULL) == -EINVAL,
	      "zero-length read");
	CHECK(rblk_submit(q0, 99, back, 0, 4096, 0, NULL) == -EINVAL,
	      "bad opcode");
	CHECK(rblk_unregister_buffer(q0, reg) == 0, "unregister");
	CHECK(rblk_unregister_buffer(q0, reg) == -ENOENT, "unregister twice");

	rblk_close(r);
	free(data);
	free(back);
	printf("rw: 8 MiB written in mixed sizes and verified; trim/zeroes/flush OK\n");
	return 0;
}

static int test_ro(const char *url)
{
	struct rblk *r;
	char *buf = aligned_alloc(4096, 65536);
	int ret;

	CHECK(rblk_open(url, NULL, &r) == 0, "open");
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

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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
	CHECK(said, "the queue failed after %llu ms, before 4 keep-alive periods",
	      (unsigned long long)(mono_ms() - start));
	printf("lost\n");
	rblk_close(r);
	return 0;
}

int main(int argc, char **argv)
{
	struct rblk *r;
	int ret;

	if (argc == 4 && !strcmp(argv[1], "idle"))
		return test_idle(argv[2], atoi(argv[3]));
	if (argc != 3) {
		fprintf(stderr, "usage: %s rw|ro|open|idle URL [MS]\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "rw"))
		return test_rw(argv[2]);
	if (!strcmp(argv[1], "ro"))
		return test_ro(argv[2]);
	ret = rblk_open(argv[2], NULL, &r);
	if (ret) {
		printf("error %d: %s\n", ret, rblk_last_error());
		return 1;
	}
	rblk_close(r);
	return 0;
}
