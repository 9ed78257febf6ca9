/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for a librblk queue's connection state (initiator/lib_queue.h,
 * enum queue_state; the table in initiator/lib_reconnect.c, linked as it
 * is): every pair of states against the transitions the enum's comment
 * documents, lib_queue_set_state() taking the legal ones and refusing the
 * rest with the queue unchanged, the lives of a queue (open, loss and
 * reconnect, a path move, giving up) step by step, and which states count
 * as down.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "initiator/lib_queue.h"

#define NR_STATES (QUEUE_FAILED + 1)

/* The documented table, written out pair by pair: [from][to]. */
static const bool want[NR_STATES][NR_STATES] = {
    [QUEUE_CONNECTING] = {[QUEUE_LIVE] = true},
    [QUEUE_LIVE] =
	{[QUEUE_DRAINING] = true, [QUEUE_LOST] = true, [QUEUE_FAILED] = true},
    [QUEUE_DRAINING] = {[QUEUE_LOST] = true, [QUEUE_FAILED] = true},
    [QUEUE_LOST] = {[QUEUE_LIVE] = true, [QUEUE_FAILED] = true},
    [QUEUE_FAILED] = {false},
};

/* Error lines logged (the refusals), and the last one. */
static unsigned int errors;
static char last_error[256];

static void on_error(const char *msg, void *arg)
{
	(void)arg;
	errors++;
	snprintf(last_error, sizeof(last_error), "%s", msg);
}

static int setup(void **state)
{
	(void)state;
	log_set_error_hook(on_error, NULL);
	return 0;
}

static void every_pair(void **state)
{
	(void)state;
	for (int f = 0; f < NR_STATES; f++)
		for (int t = 0; t < NR_STATES; t++) {
			bool got = lib_queue_state_legal((enum queue_state)f,
							 (enum queue_state)t);

			if (got != want[f][t])
				fail_msg("%s -> %s: %s, want %s",
					 lib_queue_state_str(f),
					 lib_queue_state_str(t),
					 got ? "legal" : "refused",
					 want[f][t] ? "legal" : "refused");
		}
	/* out of range on either side: refused, not read past the table */
	assert_false(lib_queue_state_legal(NR_STATES, QUEUE_LIVE));
	assert_false(lib_queue_state_legal(QUEUE_LIVE, NR_STATES));
}

static void set_takes_legal_refuses_rest(void **state)
{
	struct rblk_queue q;
	char line[128];

	(void)state;
	for (int f = 0; f < NR_STATES; f++)
		for (int t = 0; t < NR_STATES; t++) {
			unsigned int before = errors;

			memset(&q, 0, sizeof(q));
			q.index = 3;
			q.state = (enum queue_state)f;
			assert_int_equal(
			    lib_queue_set_state(&q, (enum queue_state)t),
			    want[f][t]);
			assert_int_equal(q.state, want[f][t] ? t : f);
			/* a refusal is logged as an error, naming both */
			assert_int_equal(errors - before, want[f][t] ? 0 : 1);
			if (want[f][t])
				continue;
			snprintf(line, sizeof(line),
				 "queue 3: refusing state change %s -> %s",
				 lib_queue_state_str(f),
				 lib_queue_state_str(t));
			assert_string_equal(last_error, line);
		}
}

/* Walk q through states, each step legal. */
static void walk(struct rblk_queue *q, const enum queue_state *steps, int n)
{
	for (int i = 0; i < n; i++) {
		if (!lib_queue_set_state(q, steps[i]))
			fail_msg("step %d: %s refused", i,
				 lib_queue_state_str(steps[i]));
		assert_int_equal(q->state, steps[i]);
	}
}

static void lives_of_a_queue(void **state)
{
	/* open; lost twice, reconnected; moved path; given up */
	static const enum queue_state life[] = {
	    QUEUE_LIVE,	    /* first login */
	    QUEUE_LOST,	    /* a transport error */
	    QUEUE_LIVE,	    /* reconnected */
	    QUEUE_LOST,	    /* a keep-alive timeout */
	    QUEUE_LIVE,	    /* reconnected */
	    QUEUE_DRAINING, /* the session moved path */
	    QUEUE_LOST,	    /* drained: it leaves */
	    QUEUE_LIVE,	    /* on the session's path */
	    QUEUE_FAILED,   /* lost, reconnecting off */
	};
	static const enum queue_state lost_for_good[] = {QUEUE_LIVE, QUEUE_LOST,
							 QUEUE_FAILED};
	static const enum queue_state no_reconnect[] = {QUEUE_LIVE,
							QUEUE_FAILED};
	struct rblk_queue q = {0};

	(void)state;
	/* a calloc'd queue is connecting */
	assert_int_equal(q.state, QUEUE_CONNECTING);
	walk(&q, life, (int)(sizeof(life) / sizeof(life[0])));
	memset(&q, 0, sizeof(q));
	walk(&q, lost_for_good, 3);
	memset(&q, 0, sizeof(q));
	walk(&q, no_reconnect, 2);
	/* failed is final */
	for (int t = 0; t < NR_STATES; t++) {
		assert_false(lib_queue_set_state(&q, (enum queue_state)t));
		assert_int_equal(q.state, QUEUE_FAILED);
	}
}

static void illegal_ones(void **state)
{
	struct rblk_queue q = {0};

	(void)state;
	/* a loss or a failure before the first login: no tags to keep */
	assert_false(lib_queue_set_state(&q, QUEUE_LOST));
	assert_false(lib_queue_set_state(&q, QUEUE_FAILED));
	assert_false(lib_queue_set_state(&q, QUEUE_DRAINING));
	assert_int_equal(q.state, QUEUE_CONNECTING);
	/* a loss handled twice; a drain while reconnecting */
	q.state = QUEUE_LOST;
	assert_false(lib_queue_set_state(&q, QUEUE_LOST));
	assert_false(lib_queue_set_state(&q, QUEUE_DRAINING));
	/* a drain ends in a reconnect, never back to live in place */
	q.state = QUEUE_DRAINING;
	assert_false(lib_queue_set_state(&q, QUEUE_LIVE));
	assert_false(lib_queue_set_state(&q, QUEUE_DRAINING));
	q.state = QUEUE_LIVE;
	assert_false(lib_queue_set_state(&q, QUEUE_LIVE));
	assert_false(lib_queue_set_state(&q, QUEUE_CONNECTING));
	assert_int_equal(q.state, QUEUE_LIVE);
}

static void down_and_names(void **state)
{
	static const char *const names[NR_STATES] = {
	    "connecting", "live", "draining", "lost", "failed"};
	struct rblk_queue q = {0};

	(void)state;
	for (int s = 0; s < NR_STATES; s++) {
		q.state = (enum queue_state)s;
		assert_int_equal(lib_queue_down(&q),
				 s == QUEUE_LOST || s == QUEUE_FAILED);
		assert_string_equal(lib_queue_state_str(q.state), names[s]);
	}
	assert_string_equal(lib_queue_state_str(NR_STATES), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(every_pair),
	    cmocka_unit_test(set_takes_legal_refuses_rest),
	    cmocka_unit_test(lives_of_a_queue),
	    cmocka_unit_test(illegal_ones),
	    cmocka_unit_test(down_and_names),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
