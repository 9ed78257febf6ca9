/* SPDX-License-Identifier: MIT */
/*
 * librblk against the target's own code, in one process, over the tcp
 * transport on loopback: the real target/ objects (one worker, a RAM
 * export, its commands' treq lifecycle in target/io.c) and the real
 * initiator/lib*.c, nothing stubbed. The test plays the target's main
 * thread (tgt_start/tgt_stop: workers, listener, accepting), so it can
 * count the commands the worker served (the export's per-worker stats)
 * and stop and restart the target under the library.
 *
 *   - I/O larger than the granted max_io is split into max_io commands
 *     (counted at the target), reads and writes, with data compared;
 *     more parts than the queue depth wait in the library for tags.
 *   - After the target goes away and comes back on the same port, I/O
 *     submitted while it was gone and I/O in flight when it went are
 *     (re)issued on the new connection and land: every completion is 0
 *     and the volume holds the last data written.
 *   - Pull reads: a finished READ's window stays lent (the target's pool
 *     says so) until the tag's next command returns it (RBLK_CMD_F_DONE)
 *     or the queue arms to sleep (READ_DONE); one held across a restart
 *     is forgotten, and the next read on the new connection works.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "rblk/rblk.h"
#include "target/engine.h"
#include "target/export.h"
#include "target/stats.h"
#include "target/target.h"
#include "target/worker.h"
#include "transport/transport.h"

#define MAX_IO (64u << 10) /* the target's cap: what the library gets */
#define VOL_SIZE (8u << 20)

static struct target tgt; /* large: static */
static struct {
	const struct xp_ops *ops;
	struct xp_listener *xl;
	uint16_t port;
	char url[64];
	pthread_t acceptor;
	atomic_bool stop;
} L;

/* The main thread's job in rblk-target: hand requests to the worker. */
static void *acceptor_main(void *arg)
{
	struct pollfd pfd = {.fd = L.ops->listener_fd(L.xl), .events = POLLIN};

	while (!atomic_load(&L.stop)) {
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		while (worker_accept(&tgt.workers[0], L.xl, L.url) == 0)
			;
	}
	return NULL;
}

/* Workers up, listening on L.port (0: any free port, kept in L.port). */
static void tgt_start(void)
{
	int ret = -EADDRINUSE;

	assert_int_equal(worker_start(&tgt.workers[0], &tgt, 0), 0);
	if (L.port) {
		ret = L.ops->listen("127.0.0.1", L.port, &L.xl);
	} else {
		for (int i = 0; i < 200 && ret == -EADDRINUSE; i++) {
			L.port = (uint16_t)(20000 + random() % 40000);
			ret = L.ops->listen("127.0.0.1", L.port, &L.xl);
		}
	}
	assert_int_equal(ret, 0);
	snprintf(L.url, sizeof(L.url), "tcp://127.0.0.1:%u", L.port);
	atomic_store(&L.stop, false);
	assert_int_equal(pthread_create(&L.acceptor, NULL, acceptor_main, NULL),
			 0);
}

/*
 * The worker and the listener gone (in that order, as in rblk-target: the
 * worker settles the requests handed to it): every session's connection
 * drops.
 */
static void tgt_stop(void)
{
	atomic_store(&L.stop, true);
	pthread_join(L.acceptor, NULL);
	worker_stop(&tgt.workers[0]);
	L.ops->listener_destroy(L.xl);
	L.xl = NULL;
}

static int group_setup(void **state)
{
	static struct worker workers[1];
	char err[512];
	struct export *e;

	srandom((unsigned int)getpid());
	log_set_prefix("test_lib");
	log_set_level(LOG_WARN);
	assert_int_equal(rblk_auth_init(), 0);
	cfg_init(&tgt.cfg);
	snprintf(tgt.cfg.name, sizeof(tgt.cfg.name), "test-target");
	tgt.cfg.max_io = MAX_IO;
	tgt.cfg.slot_pool = 16u << 20;
	tgt.cfg.workers = 1;
	tgt.cfg.allow_any_host = true;
	/* the listener is the test's own (tgt_start), on a port of its own */
	if (cfg_add_listen(&tgt.cfg, "tcp://127.0.0.1", err, sizeof(err)) ||
	    cfg_add_export_arg(&tgt.cfg, "vol=ram:8M,allow=any", err,
			       sizeof(err)) ||
	    cfg_validate(&tgt.cfg, err, sizeof(err)))
		fail_msg("configuration: %s", err);
	tgt.engine = engine_find("io_uring");
	assert_non_null(tgt.engine);
	pthread_mutex_init(&tgt.exports_lock, NULL);
	e = export_create(&tgt.cfg.exports[0], 1, err, sizeof(err));
	assert_non_null(e);
	tgt.exports = e;
	tgt.nr_exports = 1;
	tgt.workers = workers;
	tgt.nr_workers = 1;
	L.ops = xp_find("tcp");
	assert_non_null(L.ops);
	if (worker_start(&workers[0], &tgt, 0)) {
		/* no io_uring here (seccomp, old kernel): the other engine */
		tgt.engine = engine_find("libaio");
	} else {
		worker_stop(&workers[0]);
	}
	tgt_start();
	return 0;
}

static int group_teardown(void **state)
{
	tgt_stop();
	export_put(tgt.exports);
	return 0;
}

/* Commands of op the worker has served on the export so far. */
static uint64_t served(enum stat_op op)
{
	return atomic_load(&tgt.exports->wstats[0].ops[op]);
}

static struct rblk *open_vol_flags(unsigned int qd, unsigned int flags)
{
	struct rblk_opts o;
	struct rblk *r = NULL;
	char url[96];

	rblk_opts_init(&o);
	o.flags |= flags;
	o.host_name = "test-host";
	o.queue_depth = qd;
	o.reconnect_delay_ms = 20;
	o.ctrl_loss_timeout_s = 60;
	o.direct = RBLK_DIRECT_OFF; /* commands: the slot path, treq by treq */
	snprintf(url, sizeof(url), "%s/vol", L.url);
	assert_int_equal(rblk_open(url, &o, &r), 0);
	return r;
}

static struct rblk *open_vol(unsigned int qd)
{
	return open_vol_flags(qd, 0);
}

static void fill(uint8_t *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 12)) ^ seed);
}

/* Reap n completions on q; each must be 0. */
static void reap(struct rblk_queue *q, unsigned int n)
{
	struct rblk_completion c[16];

	while (n) {
		int got = rblk_poll(q, c, n < 16 ? (int)n : 16, 30000);

		assert_true(got > 0);
		for (int i = 0; i < got; i++)
			assert_int_equal(c[i].result, 0);
		n -= (unsigned int)got;
	}
}

/* ---- splitting ---------------------------------------------------------- */

static void test_split_sync(void **state)
{
	const size_t len = 16 * MAX_IO + 4096; /* 16 whole parts and a tail */
	uint8_t *wbuf = malloc(len), *rbuf = malloc(len);
	struct rblk *r = open_vol(8);
	uint64_t w0, r0;

	assert_int_equal(rblk_get_info(r)->max_io, MAX_IO);
	fill(wbuf, len, 1);
	w0 = served(STAT_WRITE);
	assert_int_equal(rblk_pwrite(r, wbuf, len, 4096, 0), 0);
	assert_int_equal(served(STAT_WRITE) - w0, 17);

	memset(rbuf, 0, len);
	r0 = served(STAT_READ);
	assert_int_equal(rblk_pread(r, rbuf, len, 4096), 0);
	assert_int_equal(served(STAT_READ) - r0, 17);
	assert_memory_equal(rbuf, wbuf, len);

	/* exactly max_io: one command */
	w0 = served(STAT_WRITE);
	assert_int_equal(rblk_pwrite(r, wbuf, MAX_IO, 0, 0), 0);
	assert_int_equal(served(STAT_WRITE) - w0, 1);
	rblk_close(r);
	free(wbuf);
	free(rbuf);
}

/* Three 1 MiB writes at queue depth 4: 48 parts, most waiting for a tag. */
static void test_split_backlog(void **state)
{
	const size_t part = 16 * MAX_IO;
	uint8_t *wbuf = malloc(3 * part), *rbuf = malloc(3 * part);
	struct rblk *r = open_vol(4);
	struct rblk_queue *q = rblk_get_queue(r, 0);
	uint64_t w0 = served(STAT_WRITE);

	assert_int_equal(rblk_get_info(r)->queue_depth, 4);
	fill(wbuf, 3 * part, 2);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(rblk_submit(q, RBLK_IO_WRITE, wbuf + i * part,
					     i * part, part, 0, NULL),
				 0);
	reap(q, 3);
	assert_int_equal(served(STAT_WRITE) - w0, 48);
	assert_int_equal(rblk_pread(r, rbuf, 3 * part, 0), 0);
	assert_memory_equal(rbuf, wbuf, 3 * part);
	rblk_close(r);
	free(wbuf);
	free(rbuf);
}

/* ---- reissue after reconnect -------------------------------------------- */

static void test_reissue_after_restart(void **state)
{
	const size_t part = 8 * MAX_IO, n = 4;
	uint8_t *a = malloc(n * part), *b = malloc(n * part),
		*back = malloc(n * part);
	struct rblk *r = open_vol(4);
	struct rblk_queue *q = rblk_get_queue(r, 0);

	fill(a, n * part, 3);
	fill(b, n * part, 4);
	assert_int_equal(rblk_pwrite(r, a, n * part, 0, 0), 0);

	/* submitted while the target is away: issued once it is back */
	tgt_stop();
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rblk_submit(q, RBLK_IO_WRITE, b + i * part,
					     i * part, part, 0, NULL),
				 0);
	tgt_start();
	reap(q, n);
	assert_int_equal(rblk_pread(r, back, n * part, 0), 0);
	assert_memory_equal(back, b, n * part);

	/*
	 * In flight when it goes: nothing is reaped before the stop, so the
	 * first queue depth of parts are on the wire or done at the target
	 * but not acknowledged to us, the rest wait for tags; all are
	 * (re)issued on the new connection.
	 */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rblk_submit(q, RBLK_IO_WRITE, a + i * part,
					     i * part, part, 0, NULL),
				 0);
	tgt_stop();
	tgt_start();
	reap(q, n);
	assert_int_equal(rblk_pread(r, back, n * part, 0), 0);
	assert_memory_equal(back, a, n * part);
	rblk_close(r);
	free(a);
	free(b);
	free(back);
}

/* Pages of the worker's slot pool lent out now (read racily, polled). */
static uint32_t pool_used(void)
{
	const struct slot_pool *p = &tgt.workers[0].pool;

	return p->pages - __atomic_load_n(&p->free_pages, __ATOMIC_RELAXED);
}

/* Wait up to 2 s for the worker's pool to lend exactly want pages. */
static void expect_pool_used(uint32_t want)
{
	for (int i = 0; i < 200 && pool_used() != want; i++)
		usleep(10000);
	assert_int_equal(pool_used(), want);
}

/* One 4 KiB pull READ of block i on a queue of depth 1, checked. */
static void read_block(struct rblk_queue *q, const uint8_t *want, size_t i)
{
	uint8_t back[4096];

	memset(back, 0, sizeof(back));
	assert_int_equal(rblk_submit(q, RBLK_IO_READ, back, i * sizeof(back),
				     sizeof(back), 0, NULL),
			 0);
	reap(q, 1);
	assert_memory_equal(back, want + i * sizeof(back), sizeof(back));
}

static void test_pull_windows(void **state)
{
	const size_t n = 4;
	uint8_t *a = malloc(n * 4096);
	struct rblk *r = open_vol_flags(1, RBLK_OPEN_PULL_READS);
	struct rblk_queue *q = rblk_get_queue(r, 0);
	uint64_t conns;

	fill(a, n * 4096, 9);
	assert_int_equal(rblk_pwrite(r, a, n * 4096, 0, 0), 0);
	expect_pool_used(0);
	/*
	 * A refused DONE fails the connection and the read lands on a new
	 * one, so count the connections too.
	 */
	conns = atomic_load(&tgt.next_conn_id);
	/* the read completes; its window (one page) is still lent */
	read_block(q, a, 0);
	expect_pool_used(1);
	/* the next READ returns it: one page out, not two, and no error */
	read_block(q, a, 1);
	read_block(q, a, 2);
	expect_pool_used(1);
	/*
	 * about to sleep: READ_DONE, and the pool has every page back (arm
	 * may ask for another poll: the READ_DONE's own send completion)
	 */
	(void)rblk_queue_arm(q);
	expect_pool_used(0);
	assert_int_equal(atomic_load(&tgt.next_conn_id), conns);

	/* a window held when the target goes is not returned to the next */
	read_block(q, a, 3);
	tgt_stop();
	tgt_start();
	read_block(q, a, 0);
	(void)rblk_queue_arm(q);
	expect_pool_used(0);
	rblk_close(r);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_split_sync),
	    cmocka_unit_test(test_split_backlog),
	    cmocka_unit_test(test_reissue_after_restart),
	    cmocka_unit_test(test_pull_windows),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
