/* SPDX-License-Identifier: MIT */
/*
 * The slot pool's allocator: a buddy allocator over 4 KiB pages of one
 * region (a worker's registered pool, docs/PROTOCOL.md "Target memory").
 * A request takes the smallest power-of-two run of pages that holds it,
 * so a 4 KiB read takes one page and a 1 MiB write 256. The bookkeeping
 * lives beside the region, never in it (the region is data only).
 *
 * Keep mode (slot_pool_keep_blocks(), for transports whose windows reach
 * their whole region, docs/ARCHITECTURE.md "Slot pool"): every block is
 * a unit its owner registers once. A freed block stays as it is instead
 * of merging with its buddy, so the next command of that size reuses it
 * and its registration; the allocator tells the owner when a block forms
 * (form: register it, if not yet) and when it stops existing (drop:
 * deregister it), so registrations never overlap and each page is pinned
 * once. Blocks merge again only when a request finds nothing large
 * enough: free buddies below its size are merged at once, and frees keep
 * merging until that request is served.
 *
 * Threads: one pool is used by one thread (its worker). No I/O.
 */
#ifndef RBLK_COMMON_SLOT_POOL_H
#define RBLK_COMMON_SLOT_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOT_PAGE_SHIFT 12
#define SLOT_PAGE (1u << SLOT_PAGE_SHIFT)
#define SLOT_MAX_ORDER 11 /* 2^11 pages = 8 MiB = RBLK_MAX_MAX_IO */

/* A block of the pool: its first byte and its order (2^order pages). */
typedef void slot_block_fn(void *arg, void *addr, unsigned int order);

struct slot_pool {
	char *base;
	uint32_t pages;
	uint32_t free_pages;
	uint32_t heads[SLOT_MAX_ORDER + 1]; /* first free block, or NONE */
	uint32_t *next, *prev; /* free-list links, per page (block heads) */
	int8_t *free_order;    /* order of the free block headed here, or -1 */
	int8_t
	    *used_order; /* order of the allocated block headed here, or -1 */
	/* keep mode: see above */
	bool keep;
	bool merging; /* a request found no block: frees merge until served */
	slot_block_fn *form, *drop;
	void *hook_arg;
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
/*
 * Switch p to keep mode for good. form(arg, addr, order) is called for
 * every free block now and for each block that forms later (a split's
 * halves, a merge's result, a block freed); it must be idempotent (a
 * block may be reported again). drop() is called for each block that
 * stops existing (split or merged), free at that moment; it must accept
 * a block form() could not register. Both run inside alloc() and free().
 */
void slot_pool_keep_blocks(struct slot_pool *p, slot_block_fn *form,
			   slot_block_fn *drop, void *arg);
/* Call p's form hook for every free block again (keep mode only). */
void slot_pool_form_free(struct slot_pool *p);
/* Bytes a run for len takes (its power-of-two page count). */
size_t slot_pool_run_bytes(size_t len);

#endif
