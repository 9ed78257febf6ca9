/* SPDX-License-Identifier: MIT */
/*
 * The initiator at fleet scale (issue 26): what librblk pins when one
 * process holds many sessions, or moves data from buffers it never
 * registered (tests/e2e/56-initiator-memory.sh, tests/vm/tests/42-*).
 *
 *   rblk_fleet open URL HANDLES QUEUES [sig]
 *     Opens HANDLES handles of QUEUES queues each, default options
 *     otherwise, and prints "open S sessions: pinned P" (P: the sum of
 *     rblk_pinned_bytes()). Then on every queue writes 4 KiB from a heap
 *     buffer it never registers (queue s of all owns [s * 4 KiB, + 4 KiB)),
 *     reads it back into another and compares; prints "verified S
 *     sessions: pinned P". With "sig" it holds after each of the two
 *     lines until a SIGUSR1 (the caller measures VmPin meanwhile). Then
 *     closes everything and prints "done".
 *
 *   rblk_fleet burst URL THREADS COUNT SIZE
 *     THREADS threads, each with its own handle (one queue): submits
 *     COUNT writes of SIZE bytes from unregistered heap buffers at once
 *     (thread t owns [t * COUNT * SIZE, + COUNT * SIZE)), reaps them,
 *     reads everything back the same way into other unregistered buffers
 *     and compares. Prints "burst: max bounce B" (the most any handle's
 *     rblk_pinned_bytes() rose over its value after open) and "done".
 *     With RBLK_BOUNCE_LIMIT below THREADS * COUNT * SIZE the I/O must
 *     wait for bounce memory, across threads, and still all complete.
 *
 * Every line but the data goes to stdout; exit 0 only when every byte
 * read back is the byte written.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rblk/rblk.h>

#define SMALL 4096

static void die(const char *what, int err)
{
	fprintf(stderr, "fleet: %s: %s (%s)\n", what, strerror(-err),
		rblk_last_error());
	exit(1);
}

static void fill(char *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = seed * 0x9e3779b97f4a7c15ull + i;

		memcpy(p + i, &v, 8);
	}
}

static void hold(bool sig)
{
	sigset_t set;
	int s;

	fflush(stdout);
	if (!sig)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigwait(&set, &s);
}

static int run_open(const char *url, unsigned int nh, unsigned int nq, bool sig)
{
	struct rblk **h = calloc(nh, sizeof(*h));
	char *w = malloc(SMALL), *r = malloc(SMALL);
	struct rblk_opts o;
	size_t pinned = 0;
	unsigned int bad = 0;
	int ret;

	if (!h || !w || !r)
		die("calloc", -ENOMEM);
	rblk_opts_init(&o);
	o.queues = nq;
	for (unsigned int i = 0; i < nh; i++) {
		ret = rblk_open(url, &o, &h[i]);
		if (ret)
			die("rblk_open", ret);
		pinned += rblk_pinned_bytes(h[i]);
	}
	printf("open %u sessions: pinned %zu\n", nh * nq, pinned);
	hold(sig);
	for (unsigned int i = 0; i < nh; i++) {
		for (unsigned int k = 0; k < nq; k++) {
			struct rblk_queue *q = rblk_get_queue(h[i], k);
			uint64_t s = (uint64_t)i * nq + k;

			fill(w, SMALL, s + 1);
			memset(r, 0, SMALL);
			ret = rblk_queue_io(q, RBLK_IO_WRITE, w, s * SMALL,
					    SMALL, 0);
			if (ret)
				die("write", ret);
			ret = rblk_queue_io(q, RBLK_IO_READ, r, s * SMALL,
					    SMALL, 0);
			if (ret)
				die("read", ret);
			if (memcmp(w, r, SMALL)) {
				fprintf(stderr,
					"fleet: session %" PRIu64
					" read back other data\n",
					s);
				bad++;
			}
		}
	}
	pinned = 0;
	for (unsigned int i = 0; i < nh; i++)
		pinned += rblk_pinned_bytes(h[i]);
	printf("verified %u sessions: pinned %zu\n", nh * nq - bad, pinned);
	hold(sig);
	for (unsigned int i = 0; i < nh; i++)
		rblk_close(h[i]);
	free(h);
	free(w);
	free(r);
	printf("done\n");
	return bad ? 1 : 0;
}

struct burst {
	pthread_t t;
	const char *url;
	unsigned int idx, count;
	size_t size;
	size_t max_bounce;
	int ret;
};

/* Submit every buffer's I/O at once, then reap them all. */
static int burst_round(struct burst *b, struct rblk *r, struct rblk_queue *q,
		       enum rblk_io_op op, char **bufs, size_t base)
{
	struct rblk_completion c[16];
	unsigned int done = 0;
	int ret;

	for (unsigned int k = 0; k < b->count; k++) {
		uint64_t off = ((uint64_t)b->idx * b->count + k) * b->size;

		ret = rblk_submit(q, op, bufs[k], off, b->size, 0, NULL);
		if (ret)
			return ret;
	}
	while (done < b->count) {
		size_t p;

		ret = rblk_poll(q, c, 16, -1);
		if (ret < 0)
			return ret;
		for (int i = 0; i < ret; i++)
			if (c[i].result)
				return c[i].result;
		done += (unsigned int)ret;
		p = rblk_pinned_bytes(r) - base;
		if (p > b->max_bounce)
			b->max_bounce = p;
	}
	return 0;
}

static void *burst_thread(void *arg)
{
	struct burst *b = arg;
	char **w = calloc(b->count, sizeof(*w)),
	     **rd = calloc(b->count, sizeof(*rd));
	struct rblk_opts o;
	struct rblk *r;
	size_t base;
	int ret;

	rblk_opts_init(&o);
	o.max_queued = b->count;
	ret = rblk_open(b->url, &o, &r);
	if (ret) {
		fprintf(stderr, "fleet: thread %u: rblk_open: %s\n", b->idx,
			rblk_last_error());
		b->ret = ret;
		return NULL;
	}
	base = rblk_pinned_bytes(r);
	for (unsigned int k = 0; k < b->count; k++) {
		w[k] = malloc(b->size);
		rd[k] = calloc(1, b->size);
		fill(w[k], b->size, ((uint64_t)b->idx << 32) + k + 7);
	}
	ret = burst_round(b, r, rblk_get_queue(r, 0), RBLK_IO_WRITE, w, base);
	if (!ret)
		ret = burst_round(b, r, rblk_get_queue(r, 0), RBLK_IO_READ, rd,
				  base);
	if (ret)
		fprintf(stderr, "fleet: thread %u: %s (%s)\n", b->idx,
			strerror(-ret), rblk_last_error());
	for (unsigned int k = 0; !ret && k < b->count; k++)
		if (memcmp(w[k], rd[k], b->size)) {
			fprintf(
			    stderr,
			    "fleet: thread %u: I/O %u read back other data\n",
			    b->idx, k);
			ret = -EIO;
		}
	for (unsigned int k = 0; k < b->count; k++) {
		free(w[k]);
		free(rd[k]);
	}
	free(w);
	free(rd);
	rblk_close(r);
	b->ret = ret;
	return NULL;
}

static int run_burst(const char *url, unsigned int nt, unsigned int count,
		     size_t size)
{
	struct burst *b = calloc(nt, sizeof(*b));
	size_t max = 0;
	int bad = 0;

	for (unsigned int i = 0; i < nt; i++) {
		b[i] = (struct burst){
		    .url = url, .idx = i, .count = count, .size = size};
		pthread_create(&b[i].t, NULL, burst_thread, &b[i]);
	}
	for (unsigned int i = 0; i < nt; i++) {
		pthread_join(b[i].t, NULL);
		if (b[i].ret)
			bad = 1;
		if (b[i].max_bounce > max)
			max = b[i].max_bounce;
	}
	printf("burst: max bounce %zu\n", max);
	if (!bad)
		printf("done\n");
	free(b);
	return bad;
}

int main(int argc, char **argv)
{
	sigset_t set;

	/* SIGUSR1 waits in sigwait(); threads inherit the mask */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 5 && !strcmp(argv[1], "open"))
		return run_open(argv[2], (unsigned int)atoi(argv[3]),
				(unsigned int)atoi(argv[4]),
				argc > 5 && !strcmp(argv[5], "sig"));
	if (argc == 6 && !strcmp(argv[1], "burst"))
		return run_burst(argv[2], (unsigned int)atoi(argv[3]),
				 (unsigned int)atoi(argv[4]),
				 (size_t)strtoull(argv[5], NULL, 0));
	fprintf(stderr, "usage: rblk_fleet open URL HANDLES QUEUES [sig]\n"
			"       rblk_fleet burst URL THREADS COUNT SIZE\n");
	return 2;
}
