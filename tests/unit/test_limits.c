/* SPDX-License-Identifier: MIT */
/*
 * target/limits.c: a full pending table evicts rather than refuses
 * (issue 25 point 4). The oldest silent connection goes first, then one
 * that has talked; none younger than the grace time; a known host's
 * (one that holds a session) only for another known host; the victim is
 * only marked and its worker told; unix peers count by uid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "target/limits.h"
#include "target/worker.h"

static struct worker w1, w2;
static unsigned int kicks1, kicks2;

/* the worker side of an eviction: counted, not done */
void worker_kick_evicted(struct worker *w)
{
	if (w == &w1)
		kicks1++;
	else if (w == &w2)
		kicks2++;
}

static struct cfg_target cfg;

static void past_grace(void)
{
	usleep(300 * 1000); /* LIM_EVICT_GRACE_MS is 250 */
}

static void test_evict_order(void **state)
{
	struct lim_conn *a[4], *n1, *n2, *n3, *n4;
	char why[256];

	(void)state;
	cfg_init(&cfg);
	cfg.max_pending = 4;
	cfg.max_pending_per_host = 4;
	a[0] = limits_admit(&cfg, "tcp 10.0.0.1:1", &w1);
	a[1] = limits_admit(&cfg, "tcp 10.0.0.1:2", &w2);
	a[2] = limits_admit(&cfg, "tcp 10.0.0.1:3", &w1);
	a[3] = limits_admit(&cfg, "tcp 10.0.0.1:4", &w2);
	for (int i = 0; i < 4; i++)
		assert_non_null(a[i]);
	assert_true(limits_pressure());
	/* full, and none old enough to evict: the newcomer is refused */
	assert_null(limits_admit(&cfg, "tcp 10.0.0.2:1", &w1));
	assert_int_equal(kicks1 + kicks2, 0);

	past_grace();
	limits_talking(a[0]); /* a[0] sent its HELLO: silent ones go first */
	n1 = limits_admit(&cfg, "tcp 10.0.0.2:1", &w1);
	assert_non_null(n1);
	assert_false(limits_evicted(a[0]));
	assert_true(limits_evicted(a[1])); /* the oldest silent one */
	assert_int_equal(kicks2, 1);	   /* its worker was told */
	/* an evicted connection cannot log in any more */
	assert_int_equal(limits_login(&cfg, a[1], why, sizeof(why)),
			 RBLK_S_BUSY);
	n2 = limits_admit(&cfg, "tcp 10.0.0.2:2", &w1);
	assert_true(limits_evicted(a[2]));
	n3 = limits_admit(&cfg, "tcp 10.0.0.2:3", &w1);
	assert_true(limits_evicted(a[3]));
	/*
	 * Left: a[0] (talked, old) and n1..n3 (silent, but young): the
	 * talker goes before any young one.
	 */
	n4 = limits_admit(&cfg, "tcp 10.0.0.2:4", &w1);
	assert_non_null(n4);
	assert_true(limits_evicted(a[0]));
	assert_false(limits_evicted(n1));
	for (int i = 0; i < 4; i++)
		limits_release(&cfg, a[i]);
	limits_release(&cfg, n1);
	limits_release(&cfg, n2);
	limits_release(&cfg, n3);
	limits_release(&cfg, n4);
	assert_false(limits_pressure());
}

static void test_known_hosts_kept(void **state)
{
	struct lim_conn *s, *k[3], *u, *n;
	char why[256];

	(void)state;
	cfg_init(&cfg);
	cfg.max_pending = 3;
	cfg.max_pending_per_host = 3;
	/* 10.0.0.9 holds a session: its next connections are "known" */
	s = limits_admit(&cfg, "tcp 10.0.0.9:1", &w1);
	assert_int_equal(limits_login(&cfg, s, why, sizeof(why)), RBLK_S_OK);
	for (int i = 0; i < 3; i++) {
		k[i] = limits_admit(&cfg, "tcp 10.0.0.9:2", &w1);
		assert_non_null(k[i]);
	}
	past_grace();
	/* a stranger may not push a known host's connection out */
	assert_null(limits_admit(&cfg, "tcp 10.0.0.3:1", &w2));
	for (int i = 0; i < 3; i++)
		assert_false(limits_evicted(k[i]));
	limits_release(&cfg, k[2]);
	u = limits_admit(&cfg, "tcp 10.0.0.3:1", &w2); /* room again */
	assert_non_null(u);
	past_grace();
	/* another known host's newcomer evicts the stranger first */
	n = limits_admit(&cfg, "tcp 10.0.0.9:3", &w1);
	assert_non_null(n);
	assert_true(limits_evicted(u));
	assert_false(limits_evicted(k[0]));
	limits_release(&cfg, u);
	limits_release(&cfg, n);
	limits_release(&cfg, k[0]);
	limits_release(&cfg, k[1]);
	limits_release(&cfg, s);
}

static void test_unix_by_uid(void **state)
{
	struct lim_conn *a, *b;

	(void)state;
	cfg_init(&cfg);
	cfg.max_pending_per_host = 1;
	a = limits_admit(&cfg, "unix pid 10 uid 1000 path /tmp/a", &w1);
	assert_non_null(a);
	/* another path and pid, the same user: the same "host" */
	assert_null(
	    limits_admit(&cfg, "unix pid 11 uid 1000 path /tmp/b", &w1));
	assert_null(limits_admit(&cfg, "unix pid 12 uid 1000", &w1));
	b = limits_admit(&cfg, "unix pid 13 uid 1001 path /tmp/a", &w1);
	assert_non_null(b);
	limits_release(&cfg, a);
	limits_release(&cfg, b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_evict_order),
	    cmocka_unit_test(test_known_hosts_kept),
	    cmocka_unit_test(test_unix_by_uid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
