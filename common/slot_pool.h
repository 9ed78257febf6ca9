/* SPDX-License-Identifier: MIT */
/*
 * The slot pool's allocator: a buddy allocator over 4 KiB pages of one
 * region (a worker's registered pool, docs/PROTOCOL.md "Version 2").
 * A request takes the smallest power-of-two run of pages that holds it,
 * so a 4 KiB read takes one page and a 1 MiB write 256. The bookkeeping
 * lives beside the region, never in it (the region is data only).
 *
 * Threads: one pool is used by one thread (its worker). No I/O.
 */
#ifndef RBLK_COMMON_SLOT_POOL_H
#define RBLK_COMMON_SLOT_POOL_H

#include <stddef.h>
#include <stdint.h>

#define SLOT_PAGE_SHIFT 12
#define SLOT_PAGE (1u << SLOT_PAGE_SHIFT)
#define SLOT_MAX_ORDER 11 /* 2^11 pages = 8 MiB = RBLK_MAX_MAX_IO */

struct slot_pool {
	char *base;
	uint32_t pages;
	uint32_t free_pages;
	uint32_t heads[SLOT_MAX_ORDER + 1]; /* first free block, or NONE */
	uint32_t *next, *prev; /* free-list links, per page (block heads) */
	int8_t *free_order; /* order of the free block headed here, or -1 */
	int8_t *used_order; /* order of the allocated block headed here, or -1 */
};

/*
 * Manage [base, base + len): len is rounded down to whole pages; base
 * must be page aligned. 0 or -ENOMEM (bookkeeping) / -EINVAL (no page).
 */
int slot_pool_init(struct slot_pool *p, void *base, size_t len);
void slot_pool_fini(struct slot_pool *p);
/*
 * A run of at least len bytes (1 <= len <= 2^SLOT_MAX_ORDER pages), or
 * NULL when no run that large is free now (the caller waits for a free).
 */
void *slot_pool_alloc(struct slot_pool *p, size_t len);
/* Return a run slot_pool_alloc() gave; anything else aborts (a bug). */
void slot_pool_free(struct slot_pool *p, void *addr);
/* Bytes a run for len takes (its power-of-two page count). */
size_t slot_pool_run_bytes(size_t len);

#endif
