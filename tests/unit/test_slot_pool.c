/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/slot_pool.c: size classes, no overlap, exhaustion
 * and full recovery, merging back to the initial blocks; keep mode (a
 * registration per block): registrations never overlap, every page is
 * registered once, freed blocks are reused, a large run still forms.
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
	} live[256] = {{0}};

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

/*
 * Keep mode's owner, as the target's worker is on rxe: one registration
 * per block, recorded per page as (block head + 1, order).
 */
struct regs {
	char *mem;
	uint32_t *head; /* per page: head page + 1 of its registration, or 0 */
	uint8_t *order;
	unsigned int forms, drops;
	size_t pages; /* registered pages */
};

static void reg_form(void *arg, void *addr, unsigned int o)
{
	struct regs *r = arg;
	uint32_t first = (uint32_t)(((char *)addr - r->mem) / SLOT_PAGE);

	if (r->head[first] == first + 1) { /* again: the same block only */
		assert_int_equal(r->order[first], o);
		return;
	}
	for (uint32_t i = first; i < first + (1u << o); i++) {
		assert_int_equal(r->head[i], 0); /* would pin a page twice */
		r->head[i] = first + 1;
		r->order[i] = (uint8_t)o;
	}
	r->forms++;
	r->pages += 1u << o;
}

static void reg_drop(void *arg, void *addr, unsigned int o)
{
	struct regs *r = arg;
	uint32_t first = (uint32_t)(((char *)addr - r->mem) / SLOT_PAGE);

	if (r->head[first] != first + 1)
		return; /* never registered */
	assert_int_equal(r->order[first], o);
	for (uint32_t i = first; i < first + (1u << o); i++)
		r->head[i] = 0;
	r->drops++;
	r->pages -= 1u << o;
}

/* A run is exactly one registered block. */
static void assert_registered(struct regs *r, char *a, size_t len)
{
	uint32_t first = (uint32_t)((a - r->mem) / SLOT_PAGE);

	assert_int_equal(r->head[first], first + 1);
	assert_int_equal((size_t)SLOT_PAGE << r->order[first],
			 slot_pool_run_bytes(len));
}

static void keep_blocks(void **state)
{
	struct slot_pool p;
	size_t len = 16 * MIB + 5 * 4096, pages = len / SLOT_PAGE;
	struct regs r = {.mem = region(len)};
	struct {
		char *a;
		size_t len;
	} live[256] = {{0}};
	char *a, *b;
	unsigned int forms;

	(void)state;
	r.head = calloc(pages, sizeof(*r.head));
	r.order = calloc(pages, 1);
	assert_int_equal(slot_pool_init(&p, r.mem, len), 0);
	slot_pool_keep_blocks(&p, reg_form, reg_drop, &r);
	assert_int_equal(r.pages, pages); /* every page, once */
	/* a freed block is kept and lent again, its registration with it */
	a = slot_pool_alloc(&p, 4096);
	assert_registered(&r, a, 4096);
	slot_pool_free(&p, a);
	forms = r.forms;
	b = slot_pool_alloc(&p, 4096);
	assert_ptr_equal(a, b);
	assert_int_equal(r.forms, forms);
	slot_pool_free(&p, b);

	srand(11);
	for (int it = 0; it < 20000; it++) {
		unsigned int k = (unsigned int)rand() % 256;

		if (live[k].a) {
			slot_pool_free(&p, live[k].a);
			live[k].a = NULL;
		} else {
			size_t l = rand() % 4
				       ? 4096u << (rand() % 3)
				       : 512 + (size_t)rand() % (2 * MIB);

			live[k].a = slot_pool_alloc(&p, l);
			live[k].len = l;
			if (live[k].a)
				assert_registered(&r, live[k].a, l);
		}
		assert_int_equal(r.pages, pages);
	}
	for (unsigned int k = 0; k < 256; k++)
		if (live[k].a)
			slot_pool_free(&p, live[k].a);
	assert_int_equal(p.free_pages, pages);
	assert_int_equal(r.pages, pages);
	/* fragmented into small kept blocks, large runs still form */
	a = slot_pool_alloc(&p, 8 * MIB);
	b = slot_pool_alloc(&p, 8 * MIB);
	assert_non_null(a);
	assert_non_null(b);
	assert_registered(&r, a, 8 * MIB);
	assert_registered(&r, b, 8 * MIB);
	assert_null(slot_pool_alloc(&p, 8 * MIB));
	/* a waiting request makes frees merge: a freed 8 MiB, then more */
	assert_null(slot_pool_alloc(&p, 16 * 4096)); /* only 5 odd pages */
	slot_pool_free(&p, a);
	a = slot_pool_alloc(&p, 16 * 4096);
	assert_registered(&r, a, 16 * 4096);
	assert_int_equal(r.pages, pages);
	slot_pool_fini(&p);
	free(r.head);
	free(r.order);
	free(r.mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(size_classes),
	    cmocka_unit_test(exhaustion),
	    cmocka_unit_test(random_churn),
	    cmocka_unit_test(keep_blocks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
