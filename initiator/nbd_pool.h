/* SPDX-License-Identifier: MIT */
/*
 * The buffer pool of one NBD connection (rblk nbd, nbd_server.c) or one
 * kernel NBD socket (rblk map --nbd, nbd_kernel.c): one anonymous mapping
 * of nslots * max_io bytes registered with the connection's rblk queue, so
 * READ and WRITE data move by RDMA straight into or out of it.
 */
#ifndef RBLK_INITIATOR_NBD_POOL_H
#define RBLK_INITIATOR_NBD_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include <rblk/rblk.h>

/*
 * Map len bytes into *pool and register them with q; who names the queue
 * in log lines ("queue 3"). A failed registration only warns (*registered
 * false: the library then copies through its own registered slots).
 * 0, or -errno when the mapping fails (*pool stays NULL).
 */
int nbd_pool_map(struct rblk_queue *q, size_t len, const char *who, void **pool,
		 bool *registered);
/* Undo nbd_pool_map(); pool may be NULL. The queue must be idle. */
void nbd_pool_unmap(struct rblk_queue *q, void *pool, size_t len,
		    bool registered);

#endif
