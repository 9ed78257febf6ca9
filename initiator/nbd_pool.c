/* SPDX-License-Identifier: MIT */
/* Buffer pools of the NBD paths (nbd_pool.h). */
#include "nbd_pool.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/log.h"

int nbd_pool_map(struct rblk_queue *q, size_t len, const char *who, void **pool,
		 bool *registered)
{
	void *p;
	int ret;

	*pool = NULL;
	*registered = false;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		log_err("%s: mmap of a %zu-byte buffer pool: %s", who, len,
			strerror(errno));
		return ret;
	}
	*pool = p;
	if (rblk_register_buffer(q, p, len) < 0)
		log_warn(
		    "%s: rblk_register_buffer (%zu bytes): %s; data will be copied through the library's slots",
		    who, len, rblk_last_error());
	else
		*registered = true;
	return 0;
}

void nbd_pool_unmap(struct rblk_queue *q, void *pool, size_t len,
		    bool registered)
{
	if (registered)
		rblk_unregister_buffer(q, pool);
	if (pool)
		munmap(pool, len);
}
