/* SPDX-License-Identifier: MIT */
/*
 * Many sessions on one target, each verifying its own data (issue 11's
 * scale and pool-exhaustion checks; tests/e2e/67-many-sessions.sh):
 *
 *   rblk_manysess URL SESSIONS QD IO IOS [HOLD_MS|sig [ROUNDS]]
 *
 * Opens SESSIONS sessions (one queue of depth QD each, max I/O = IO) one
 * after the other, prints "open SESSIONS" and holds HOLD_MS (the caller
 * measures the target meanwhile). Then ROUNDS times (default 1): every
 * session submits IOS writes of IO bytes to its own region (session s owns
 * [s * IOS * IO, + IOS * IO)) - all sessions at once, so the target has
 * SESSIONS * min(QD, IOS) commands in flight - waits for all, reads
 * everything back the same way and compares; prints "verified ROUND".
 * Then prints "idle" and holds HOLD_MS again, closes every session and
 * prints "done". Exits 0 when every byte read back was the byte written.
 * HOLD_MS "sig" holds until a SIGUSR1 instead (each hold takes one), for a
 * caller that measures longer than any fixed time would allow
 * (tests/vm/tests/18-rdma-many-sessions.sh).
 *
 * Buffers: each session has min(QD, IOS) buffers of IO bytes registered
 * with its queue; I/O k uses buffer k % QD and carries a pattern of
 * (session, round, k).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rblk/rblk.h>

struct sess {
	struct rblk *r;
	struct rblk_queue *q;
	char *bufs;
	unsigned int next; /* next I/O to submit */
	unsigned int done;
};

static unsigned int nsess, qd, ios, nbufs;
static size_t io;

static void die(const char *what, int err)
{
	fprintf(stderr, "manysess: %s: %s (%s)\n", what, strerror(-err),
		rblk_last_error());
	exit(1);
}

static void fill(char *p, unsigned int s, unsigned int round, unsigned int k)
{
	uint64_t seed = (uint64_t)s << 40 | (uint64_t)round << 24 | k;

	for (size_t i = 0; i < io; i += 8) {
		uint64_t v = seed * 0x9e3779b97f4a7c15ull + i;

		memcpy(p + i, &v, 8);
	}
}

static char *buf_of(struct sess *x, unsigned int k)
{
	return x->bufs + (size_t)(k % nbufs) * io;
}

/* Submit what fits (at most nbufs in flight per session). */
static void pump(struct sess *x, unsigned int s, enum rblk_io_op op,
		 unsigned int round)
{
	while (x->next < ios && x->next - x->done < nbufs) {
		unsigned int k = x->next;
		uint64_t off = ((uint64_t)s * ios + k) * io;
		int ret;

		if (op == RBLK_IO_WRITE)
			fill(buf_of(x, k), s, round, k);
		ret = rblk_submit(x->q, op, buf_of(x, k), off, io, 0,
				  (void *)(uintptr_t)k);
		if (ret == -EAGAIN || ret == -EBUSY)
			return;
		if (ret)
			die("submit", ret);
		x->next++;
	}
}

/* One pass of op over every session's region, all sessions at once. */
static int pass(struct sess *ss, enum rblk_io_op op, unsigned int round)
{
	unsigned int left = nsess;
	int bad = 0;

	for (unsigned int s = 0; s < nsess; s++) {
		ss[s].next = ss[s].done = 0;
		pump(&ss[s], s, op, round);
	}
	while (left) {
		for (unsigned int s = 0; s < nsess; s++) {
			struct sess *x = &ss[s];
			struct rblk_completion c[16];
			int n;

			if (x->done == ios)
				continue;
			n = rblk_poll(x->q, c, 16, 0);
			if (n < 0)
				die("poll", n);
			for (int i = 0; i < n; i++) {
				unsigned int k =
				    (unsigned int)(uintptr_t)c[i].user_data;

				if (c[i].result)
					die(op == RBLK_IO_WRITE ? "write"
								: "read",
					    c[i].result);
				if (op == RBLK_IO_READ) {
					char *want = malloc(io);

					fill(want, s, round, k);
					if (memcmp(want, buf_of(x, k), io)) {
						fprintf(
						    stderr,
						    "manysess: session %u I/O %u: data differs\n",
						    s, k);
						bad = 1;
					}
					free(want);
				}
				x->done++;
			}
			if (x->done == ios)
				left--;
			pump(x, s, op, round);
		}
	}
	return bad;
}

static bool hold_sig;
static sigset_t usr1;

static void hold(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	int sig;

	fflush(stdout);
	if (hold_sig)
		sigwait(&usr1, &sig);
	else
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	unsigned int hold_ms = 0, rounds = 1;
	struct rblk_opts o;
	struct sess *ss;
	int bad = 0, ret;

	if (argc < 6 || argc > 8) {
		fprintf(
		    stderr,
		    "usage: %s URL SESSIONS QD IO IOS [HOLD_MS|sig [ROUNDS]]\n",
		    argv[0]);
		return 2;
	}
	nsess = (unsigned int)strtoul(argv[2], NULL, 0);
	qd = (unsigned int)strtoul(argv[3], NULL, 0);
	io = strtoul(argv[4], NULL, 0);
	ios = (unsigned int)strtoul(argv[5], NULL, 0);
	if (argc > 6 && !strcmp(argv[6], "sig"))
		hold_sig = true;
	else if (argc > 6)
		hold_ms = (unsigned int)strtoul(argv[6], NULL, 0);
	/* blocked before any thread starts, so only sigwait() takes it */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (hold_sig)
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	if (argc > 7)
		rounds = (unsigned int)strtoul(argv[7], NULL, 0);
	if (!nsess || !qd || !ios || io < 4096 || io % 4096)
		return 2;
	nbufs = qd < ios ? qd : ios;
	ss = calloc(nsess, sizeof(*ss));
	if (!ss)
		return 1;
	rblk_opts_init(&o);
	o.queue_depth = qd;
	o.max_io = (unsigned int)io;
	o.max_queued = qd;
	o.keepalive_ms = 0; /* idle on purpose while held */
	o.ctrl_loss_timeout_s = 0;
	for (unsigned int s = 0; s < nsess; s++) {
		struct sess *x = &ss[s];

		ret = rblk_open(argv[1], &o, &x->r);
		if (ret) {
			fprintf(stderr, "manysess: session %u: ", s);
			die("open", ret);
		}
		x->q = rblk_get_queue(x->r, 0);
		if (posix_memalign((void **)&x->bufs, 4096, nbufs * io))
			die("memory", -ENOMEM);
		memset(x->bufs, 0, nbufs * io);
		ret = rblk_register_buffer(x->q, x->bufs, nbufs * io);
		if (ret)
			die("register", ret);
	}
	printf("open %u\n", nsess);
	hold(hold_ms);
	for (unsigned int round = 0; round < rounds; round++) {
		bad |= pass(ss, RBLK_IO_WRITE, round);
		bad |= pass(ss, RBLK_IO_READ, round);
		printf("verified %u: %u sessions x %u I/Os of %zu bytes\n",
		       round, nsess, ios, io);
		fflush(stdout);
	}
	printf("idle\n");
	hold(hold_ms);
	for (unsigned int s = 0; s < nsess; s++) {
		rblk_close(ss[s].r);
		free(ss[s].bufs);
	}
	free(ss);
	printf("done%s\n", bad ? " (MISMATCH)" : "");
	return bad;
}
