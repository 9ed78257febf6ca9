/* SPDX-License-Identifier: MIT */
/* Buddy allocator over the pages of a slot pool: see slot_pool.h. */
#include "slot_pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

_Static_assert(SLOT_MAX_ORDER < 31, "orders fit the page indexes");

static unsigned int order_for(size_t len)
{
	size_t pages = (len + SLOT_PAGE - 1) >> SLOT_PAGE_SHIFT;
	unsigned int o = 0;

	while (((size_t)1 << o) < pages)
		o++;
	return o;
}

size_t slot_pool_run_bytes(size_t len)
{
	return (size_t)SLOT_PAGE << order_for(len);
}

static void list_add(struct slot_pool *p, uint32_t i, unsigned int o)
{
	p->free_order[i] = (int8_t)o;
	p->prev[i] = NONE;
	p->next[i] = p->heads[o];
	if (p->heads[o] != NONE)
		p->prev[p->heads[o]] = i;
	p->heads[o] = i;
}

static void list_del(struct slot_pool *p, uint32_t i, unsigned int o)
{
	if (p->prev[i] != NONE)
		p->next[p->prev[i]] = p->next[i];
	else
		p->heads[o] = p->next[i];
	if (p->next[i] != NONE)
		p->prev[p->next[i]] = p->prev[i];
	p->free_order[i] = -1;
}

int slot_pool_init(struct slot_pool *p, void *base, size_t len)
{
	uint32_t i = 0;

	memset(p, 0, sizeof(*p));
	if ((uintptr_t)base % SLOT_PAGE || len >> SLOT_PAGE_SHIFT >= NONE)
		return -EINVAL;
	p->base = base;
	p->pages = (uint32_t)(len >> SLOT_PAGE_SHIFT);
	if (!p->pages)
		return -EINVAL;
	p->next = calloc(p->pages, sizeof(*p->next));
	p->prev = calloc(p->pages, sizeof(*p->prev));
	p->free_order = malloc(p->pages);
	p->used_order = malloc(p->pages);
	if (!p->next || !p->prev || !p->free_order || !p->used_order) {
		slot_pool_fini(p);
		return -ENOMEM;
	}
	memset(p->free_order, -1, p->pages);
	memset(p->used_order, -1, p->pages);
	for (unsigned int o = 0; o <= SLOT_MAX_ORDER; o++)
		p->heads[o] = NONE;
	/* the largest aligned blocks that fit, left to right */
	while (i < p->pages) {
		unsigned int o = SLOT_MAX_ORDER;

		while (o && ((i & ((1u << o) - 1)) || i + (1u << o) > p->pages))
			o--;
		list_add(p, i, o);
		i += 1u << o;
	}
	p->free_pages = p->pages;
	return 0;
}

void slot_pool_fini(struct slot_pool *p)
{
	free(p->next);
	free(p->prev);
	free(p->free_order);
	free(p->used_order);
	memset(p, 0, sizeof(*p));
}

static void *page_addr(const struct slot_pool *p, uint32_t i)
{
	return p->base + ((size_t)i << SLOT_PAGE_SHIFT);
}

static void block_form(struct slot_pool *p, uint32_t i, unsigned int o)
{
	if (p->keep)
		p->form(p->hook_arg, page_addr(p, i), o);
}

static void block_drop(struct slot_pool *p, uint32_t i, unsigned int o)
{
	if (p->keep)
		p->drop(p->hook_arg, page_addr(p, i), o);
}

void slot_pool_form_free(struct slot_pool *p)
{
	if (!p->keep)
		return;
	for (unsigned int o = 0; o <= SLOT_MAX_ORDER; o++)
		for (uint32_t i = p->heads[o]; i != NONE; i = p->next[i])
			block_form(p, i, o);
}

void slot_pool_keep_blocks(struct slot_pool *p, slot_block_fn *form,
			   slot_block_fn *drop, void *arg)
{
	p->form = form;
	p->drop = drop;
	p->hook_arg = arg;
	p->keep = true;
	slot_pool_form_free(p);
}

/*
 * Keep mode, no free block of order want or above: merge every pair of
 * free buddies below want, smallest first, so a block of want forms where
 * the free pages allow one. The merged blocks are formed afterwards, once
 * each (not on the way up, where most merge again).
 */
static void coalesce(struct slot_pool *p, unsigned int want)
{
	for (unsigned int o = 0; o < want; o++) {
		uint32_t i = p->heads[o];

		while (i != NONE) {
			uint32_t next = p->next[i], b = i ^ (1u << o);

			if (b < p->pages && p->free_order[b] == (int8_t)o) {
				if (next == b)
					next = p->next[b];
				list_del(p, i, o);
				list_del(p, b, o);
				block_drop(p, i, o);
				block_drop(p, b, o);
				list_add(p, i & ~(1u << o), o + 1);
			}
			i = next;
		}
	}
	for (unsigned int o = 1; o <= want; o++)
		for (uint32_t i = p->heads[o]; i != NONE; i = p->next[i])
			block_form(p, i, o);
}

static unsigned int first_fit(const struct slot_pool *p, unsigned int want)
{
	unsigned int o;

	for (o = want; o <= SLOT_MAX_ORDER && p->heads[o] == NONE; o++)
		;
	return o;
}

void *slot_pool_alloc(struct slot_pool *p, size_t len)
{
	unsigned int want, o;
	uint32_t i;

	if (!len || len > (size_t)SLOT_PAGE << SLOT_MAX_ORDER)
		return NULL;
	want = order_for(len);
	o = first_fit(p, want);
	if (o > SLOT_MAX_ORDER && p->keep) {
		coalesce(p, want);
		o = first_fit(p, want);
	}
	if (o > SLOT_MAX_ORDER) {
		p->merging = p->keep;
		return NULL;
	}
	p->merging = false;
	i = p->heads[o];
	list_del(p, i, o);
	if (o > want) /* gone before its parts form: nothing pinned twice */
		block_drop(p, i, o);
	while (o > want) { /* split: the upper half stays free */
		o--;
		list_add(p, i + (1u << o), o);
		block_form(p, i + (1u << o), o);
	}
	block_form(p, i, want); /* a no-op unless it was split off just now */
	p->used_order[i] = (int8_t)want;
	p->free_pages -= 1u << want;
	return page_addr(p, i);
}

void slot_pool_free(struct slot_pool *p, void *addr)
{
	size_t off = (size_t)((char *)addr - p->base);
	uint32_t i = (uint32_t)(off >> SLOT_PAGE_SHIFT);
	unsigned int o, o0;

	if ((char *)addr < p->base || off % SLOT_PAGE || i >= p->pages ||
	    p->used_order[i] < 0)
		abort(); /* not a run of this pool: memory would be shared */
	o = o0 = (unsigned int)p->used_order[i];
	p->used_order[i] = -1;
	p->free_pages += 1u << o;
	/* merge with a free buddy (keep mode: only while a request waits) */
	while (o < SLOT_MAX_ORDER && (!p->keep || p->merging)) {
		uint32_t b = i ^ (1u << o);

		if (b >= p->pages || p->free_order[b] != (int8_t)o)
			break;
		list_del(p, b, o);
		if (o == o0)
			block_drop(p, i, o);
		block_drop(p, b, o);
		i &= ~(1u << o);
		o++;
	}
	list_add(p, i, o);
	block_form(p, i, o);
}
