/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/spin.h, the back-off of poll-before-sleep loops:
 * empty spins make the next 1, 2, 4 ... SPIN_BACKOFF_MAX sleeps skip
 * spinning, capped there; a spin that finds something resets it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/spin.h"

/* Sleeps that skip spinning before spin_wanted() says yes again. */
static unsigned int skipped(struct spin_backoff *s)
{
	unsigned int n = 0;

	while (!spin_wanted(s)) {
		n++;
		assert_true(n <= SPIN_BACKOFF_MAX);
	}
	return n;
}

static void fresh_spins(void **state)
{
	struct spin_backoff s = {0};

	(void)state;
	for (int i = 0; i < 100; i++) {
		assert_true(spin_wanted(&s));
		spin_result(&s, true);
	}
}

static void empty_spins_back_off(void **state)
{
	struct spin_backoff s = {0};
	unsigned int want = 1;

	(void)state;
	assert_true(spin_wanted(&s));
	for (int i = 0; i < 10; i++) {
		spin_result(&s, false);
		assert_int_equal(skipped(&s), want);
		want =
		    want * 2 > SPIN_BACKOFF_MAX ? SPIN_BACKOFF_MAX : want * 2;
	}
	assert_int_equal(want, SPIN_BACKOFF_MAX);
}

static void found_resets(void **state)
{
	struct spin_backoff s = {0};

	(void)state;
	for (int i = 0; i < 8; i++) { /* back off to the cap */
		spin_result(&s, false);
		skipped(&s);
	}
	spin_result(&s, true);
	assert_true(spin_wanted(&s)); /* no skips left after a find */
	spin_result(&s, false);
	assert_int_equal(skipped(&s), 1); /* and the back-off starts over */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(fresh_spins),
	    cmocka_unit_test(empty_spins_back_off),
	    cmocka_unit_test(found_resets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
