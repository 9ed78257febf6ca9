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

void *slot_pool_alloc(struct slot_pool *p, size_t len)
{
	unsigned int want, o;
	uint32_t i;

	if (!len || len > (size_t)SLOT_PAGE << SLOT_MAX_ORDER)
		return NULL;
	want = order_for(len);
	for (o = want; o <= SLOT_MAX_ORDER && p->heads[o] == NONE; o++)
		;
	if (o > SLOT_MAX_ORDER)
		return NULL;
	i = p->heads[o];
	list_del(p, i, o);
	while (o > want) { /* split: the upper half stays free */
		o--;
		list_add(p, i + (1u << o), o);
	}
	p->used_order[i] = (int8_t)want;
	p->free_pages -= 1u << want;
	return p->base + ((size_t)i << SLOT_PAGE_SHIFT);
}

void slot_pool_free(struct slot_pool *p, void *addr)
{
	size_t off = (size_t)((char *)addr - p->base);
	uint32_t i = (uint32_t)(off >> SLOT_PAGE_SHIFT);
	unsigned int o;

	if ((char *)addr < p->base || off % SLOT_PAGE || i >= p->pages ||
	    p->used_order[i] < 0)
		abort(); /* not a run of this pool: memory would be shared */
	o = (unsigned int)p->used_order[i];
	p->used_order[i] = -1;
	p->free_pages += 1u << o;
	while (o < SLOT_MAX_ORDER) { /* merge with a free buddy */
		uint32_t b = i ^ (1u << o);

		if (b >= p->pages || p->free_order[b] != (int8_t)o)
			break;
		list_del(p, b, o);
		i &= ~(1u << o);
		o++;
	}
	list_add(p, i, o);
}
