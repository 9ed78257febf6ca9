/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/slot_pool.c: size classes, no overlap, exhaustion
 * and full recovery, merging back to the initial blocks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/slot_pool.h"

#define MIB (1u << 20)

static void *region(size_t len)
{
	void *p = NULL;

	assert_int_equal(posix_memalign(&p, SLOT_PAGE, len), 0);
	return p;
}

static void size_classes(void **state)
{
	struct slot_pool p;
	void *mem = region(4 * MIB);
	char *a, *b, *c;

	(void)state;
	assert_int_equal(slot_pool_init(&p, mem, 4 * MIB), 0);
	assert_int_equal(p.free_pages, 1024);
	a = slot_pool_alloc(&p, 4096);
	assert_non_null(a);
	assert_int_equal(p.free_pages, 1023); /* a 4K read takes one page */
	b = slot_pool_alloc(&p, 1 * MIB);
	assert_non_null(b);
	assert_int_equal(p.free_pages, 1023 - 256);
	c = slot_pool_alloc(&p, 5000); /* two pages */
	assert_int_equal(p.free_pages, 1023 - 256 - 2);
	assert_int_equal(slot_pool_run_bytes(5000), 8192);
	assert_int_equal(slot_pool_run_bytes(MIB + 1), 2 * MIB);
	/* runs are disjoint */
	assert_true(a + 4096 <= b || b + MIB <= a);
	assert_true(c + 8192 <= b || b + MIB <= c);
	assert_true(c + 8192 <= a || a + 4096 <= c);
	assert_null(slot_pool_alloc(&p, 0));
	assert_null(slot_pool_alloc(&p, 16 * MIB)); /* above 2^MAX_ORDER */
	slot_pool_free(&p, b);
	slot_pool_free(&p, a);
	slot_pool_free(&p, c);
	assert_int_equal(p.free_pages, 1024);
	/* everything merged: one 4 MiB run fits again */
	a = slot_pool_alloc(&p, 4 * MIB);
	assert_ptr_equal(a, mem);
	slot_pool_free(&p, a);
	slot_pool_fini(&p);
	free(mem);
}

static void exhaustion(void **state)
{
	struct slot_pool p;
	size_t len = 8 * MIB + 3 * 4096; /* not a power of two */
	void *mem = region(len);
	char *runs[64];
	unsigned int n = 0;

	(void)state;
	assert_int_equal(slot_pool_init(&p, mem, len), 0);
	while (n < 64 && (runs[n] = slot_pool_alloc(&p, MIB)))
		n++;
	assert_int_equal(n, 8); /* the three odd pages hold no 1 MiB run */
	assert_null(slot_pool_alloc(&p, MIB));
	assert_non_null(runs[0]);
	/* small runs still fit in the tail */
	for (unsigned int i = 0; i < 3; i++)
		assert_non_null(slot_pool_alloc(&p, 4096));
	assert_int_equal(p.free_pages, 0);
	assert_null(slot_pool_alloc(&p, 4096));
	slot_pool_fini(&p);
	free(mem);
}

/* Random alloc/free: runs never overlap, the pool always recovers. */
static void random_churn(void **state)
{
	struct slot_pool p;
	size_t len = 16 * MIB;
	char *mem = region(len);
	uint8_t *owner = calloc(len / SLOT_PAGE, 1);
	struct {
		char *a;
		size_t len;
	} live[256] = { { 0 } };

	(void)state;
	srand(7);
	assert_int_equal(slot_pool_init(&p, mem, len), 0);
	for (int it = 0; it < 20000; it++) {
		unsigned int k = (unsigned int)rand() % 256;

		if (live[k].a) {
			size_t first = (size_t)(live[k].a - mem) / SLOT_PAGE;
			size_t n = slot_pool_run_bytes(live[k].len) / SLOT_PAGE;

			for (size_t i = 0; i < n; i++)
				owner[first + i] = 0;
			slot_pool_free(&p, live[k].a);
			live[k].a = NULL;
		} else {
			size_t l = 512 + (size_t)rand() % (2 * MIB);
			char *a = slot_pool_alloc(&p, l);

			if (!a)
				continue;
			size_t first = (size_t)(a - mem) / SLOT_PAGE;
			size_t n = slot_pool_run_bytes(l) / SLOT_PAGE;

			assert_true((size_t)(a - mem) + n * SLOT_PAGE <= len);
			for (size_t i = 0; i < n; i++) {
				assert_int_equal(owner[first + i], 0);
				owner[first + i] = 1;
			}
			live[k].a = a;
			live[k].len = l;
		}
	}
	for (unsigned int k = 0; k < 256; k++)
		if (live[k].a)
			slot_pool_free(&p, live[k].a);
	assert_int_equal(p.free_pages, len / SLOT_PAGE);
	/* merged back into the two 8 MiB blocks it started as */
	assert_non_null(slot_pool_alloc(&p, 8 * MIB));
	assert_non_null(slot_pool_alloc(&p, 8 * MIB));
	assert_int_equal(p.free_pages, 0);
	slot_pool_fini(&p);
	free(owner);
	free(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(size_classes),
		cmocka_unit_test(exhaustion),
		cmocka_unit_test(random_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
