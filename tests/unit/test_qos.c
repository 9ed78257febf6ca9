/* SPDX-License-Identifier: MIT */
/*
 * target/qos.c: token buckets on a simulated clock. The rate over seconds
 * is the limit (within 0.1%), a burst passes at once and no more, reads
 * and writes draw from their own buckets, an I/O larger than the burst
 * is slowed but never stuck, a late worker costs waiting commands no
 * tokens, a live change keeps the bucket's tokens up to the new burst,
 * and the config parser refuses bad values.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/proto.h"
#include "target/qos.h"

#define MS 1000000ull
#define SEC 1000000000ull

static struct qos q;
static struct qos *qs[2] = {&q, NULL};

static void set(enum cfg_qos_kind k, uint64_t v, uint32_t burst_ms)
{
	struct cfg_qos c = {0};

	c.limit[k] = v;
	c.burst_ms = burst_ms;
	memset(&q, 0, sizeof(q));
	qos_configure(&q, &c);
}

/*
 * Issue opcode/len as fast as the limits let them from t0 for span ns, a
 * client that always has one waiting: returns how many went.
 */
static uint64_t drive(int opcode, uint32_t len, uint64_t t0, uint64_t span)
{
	uint64_t t = t0, n = 0, w;

	while (t < t0 + span) {
		w = qos_admit(qs, 2, opcode, len, t);
		if (w) {
			t += w;
			continue;
		}
		n++;
	}
	return n;
}

static void test_iops_rate_and_burst(void **state)
{
	uint64_t n;

	(void)state;
	set(CFG_QOS_IOPS, 1000, 100);
	/* the burst (100 ms at 1000/s) goes at once, the next waits ~1 ms */
	for (int i = 0; i < 100; i++)
		assert_int_equal(qos_admit(qs, 2, RBLK_OP_READ, 4096, SEC), 0);
	n = qos_admit(qs, 2, RBLK_OP_READ, 4096, SEC);
	assert_true(n > 0 && n <= MS + 1);
	/* then 1000 a second, over 10 s, whatever the steps of the clock */
	n = drive(RBLK_OP_READ, 4096, SEC, 10 * SEC);
	assert_true(n >= 9990 && n <= 10010);
	/* FLUSH is never held back */
	assert_int_equal(qos_admit(qs, 2, RBLK_OP_FLUSH, 0, 11 * SEC), 0);
}

static void test_bps_large_io(void **state)
{
	uint64_t n;

	(void)state;
	/* 1 MiB/s with a 100 ms burst: a 1 MiB I/O still goes, in debt */
	set(CFG_QOS_BPS, 1 << 20, 100);
	assert_int_equal(qos_admit(qs, 2, RBLK_OP_READ, 1 << 20, SEC), 0);
	n = qos_admit(qs, 2, RBLK_OP_READ, 1 << 20, SEC);
	/* the debt (~0.9 MiB) is paid at 1 MiB/s first */
	assert_true(n > 800 * MS && n < 1000 * MS);
	n = drive(RBLK_OP_WRITE, 64 << 10, 2 * SEC, 20 * SEC);
	assert_true(n * (64 << 10) >= 20ull * (1 << 20) * 999 / 1000);
	assert_true(n * (64 << 10) <= 21ull * (1 << 20));
}

/*
 * The worker comes 500 ms late to an empty bucket (a busy CPU): with
 * commands waiting on it the 500 tokens it earned meanwhile are theirs,
 * not just the 100 of the burst; the rate over 10 s of such late looks
 * stays the limit. Without waiters the burst caps it. A surplus left
 * when the waiters go is kept while the client keeps coming, and cut
 * back to the burst once it stayed away for a burst's time.
 */
static uint64_t take_all(uint64_t t)
{
	uint64_t n = 0;

	while (!qos_admit(qs, 2, RBLK_OP_READ, 4096, t))
		n++;
	return n;
}

static void test_late_worker(void **state)
{
	uint64_t t = SEC, n = 0;

	(void)state;
	set(CFG_QOS_IOPS, 1000, 100);
	assert_int_equal(take_all(t), 100);
	atomic_store(&q.waiting, 1);
	for (int i = 0; i < 20; i++) {
		t += 500 * MS;
		n += take_all(t);
	}
	assert_true(n >= 9990 && n <= 10010);
	/* the same without waiters: a burst per look */
	atomic_store(&q.waiting, 0);
	t += 500 * MS;
	assert_int_equal(take_all(t), 100);
	/* a surplus: kept for a client that comes back at once */
	atomic_store(&q.waiting, 1);
	t += 500 * MS;
	assert_true(qos_admit(qs, 2, RBLK_OP_READ, 4096, t) == 0);
	atomic_store(&q.waiting, 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(qos_admit(qs, 2, RBLK_OP_READ, 4096, t + 1),
				 0);
	/* cut back to the burst after 200 ms away */
	assert_int_equal(take_all(t + 200 * MS), 100);
}

static void test_read_write_apart(void **state)
{
	struct cfg_qos c = {0};

	(void)state;
	c.limit[CFG_QOS_READ_IOPS] = 10;
	c.burst_ms = 100; /* one I/O */
	memset(&q, 0, sizeof(q));
	qos_configure(&q, &c);
	assert_int_equal(qos_admit(qs, 2, RBLK_OP_READ, 512, SEC), 0);
	assert_true(qos_admit(qs, 2, RBLK_OP_READ, 512, SEC) > 0);
	/* writes, trims and write-zeroes are not read-limited */
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(qos_admit(qs, 2, RBLK_OP_WRITE, 512, SEC), 0);
		assert_int_equal(qos_admit(qs, 2, RBLK_OP_TRIM, 512, SEC), 0);
	}
}

static void test_two_limits(void **state)
{
	struct qos host = {0};
	struct qos *both[2] = {&q, &host};
	struct cfg_qos c = {0};
	uint64_t t = SEC, n = 0, w;

	(void)state;
	set(CFG_QOS_IOPS, 1000, 100);
	c.limit[CFG_QOS_IOPS] = 200;
	qos_configure(&host, &c);
	/* the tighter one rules; nothing is taken from either while held */
	while (t < 11 * SEC) {
		w = qos_admit(both, 2, RBLK_OP_WRITE, 4096, t);
		if (w)
			t += w;
		else
			n++;
	}
	assert_true(n >= 1995 && n <= 2025);
}

static void test_live_change(void **state)
{
	struct cfg_qos c = {0};
	uint64_t n;

	(void)state;
	set(CFG_QOS_IOPS, 100, 100);
	n = drive(RBLK_OP_READ, 4096, SEC, 5 * SEC);
	assert_true(n >= 495 && n <= 515);
	c.limit[CFG_QOS_IOPS] = 5000;
	qos_configure(&q, &c);
	n = drive(RBLK_OP_READ, 4096, 6 * SEC, 5 * SEC);
	assert_true(n >= 24900 && n <= 25600);
	/* lifted: nothing waits */
	memset(&c, 0, sizeof(c));
	qos_configure(&q, &c);
	for (int i = 0; i < 100000; i++)
		assert_int_equal(qos_admit(qs, 2, RBLK_OP_READ, 4096, 12 * SEC),
				 0);
}

static void test_config_values(void **state)
{
	struct cfg_qos c = {0};
	char why[256];

	(void)state;
	assert_int_equal(cfg_qos_set(&c, "iops", "1000", why, sizeof(why)), 0);
	assert_int_equal(c.limit[CFG_QOS_IOPS], 1000);
	assert_int_equal(cfg_qos_set(&c, "write_bps", "50M", why, sizeof(why)),
			 0);
	assert_int_equal(c.limit[CFG_QOS_WRITE_BPS], 50ull << 20);
	assert_int_equal(cfg_qos_set(&c, "burst_ms", "250", why, sizeof(why)),
			 0);
	assert_int_equal(c.burst_ms, 250);
	assert_int_equal(cfg_qos_set(&c, "iops", "1K", why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "a number of I/Os per second"));
	assert_int_equal(cfg_qos_set(&c, "bps", "-1", why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(cfg_qos_set(&c, "burst_ms", "0", why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(cfg_qos_set(&c, "iopz", "1", why, sizeof(why)),
			 -ENOENT);
	assert_true(cfg_qos_any(&c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_iops_rate_and_burst),
	    cmocka_unit_test(test_bps_large_io),
	    cmocka_unit_test(test_late_worker),
	    cmocka_unit_test(test_read_write_apart),
	    cmocka_unit_test(test_two_limits),
	    cmocka_unit_test(test_live_change),
	    cmocka_unit_test(test_config_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
