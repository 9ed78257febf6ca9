/* SPDX-License-Identifier: MIT */
/*
 * librblk's bounce buffers: registered memory for the parts of I/O whose
 * buffer the caller did not register (rblk_register_buffer()), and the
 * accounting of what a handle pins (rblk_pinned_bytes()).
 *
 * Nothing is allocated at open: a queue whose callers register their
 * buffers (ublk, the NBD paths, the fio engine) never pins a bounce byte.
 * A part that needs one takes a buffer of the smallest power of two from
 * 4 KiB that holds it, from its queue's cache of free ones or newly
 * allocated and registered on the queue's group (each queue has its own
 * PD, so a buffer serves one queue), and gives it back when it completes.
 *
 * One process-wide cap (RBLK_BOUNCE_LIMIT, default BOUNCE_LIMIT_DEFAULT)
 * bounds the bounce bytes of every handle of the process together. A
 * part that would pass it waits on its queue's pending list, in order,
 * until bounce memory frees: never an error. It cannot wait for ever:
 * what it waits for is either in use by a part in flight (which frees it)
 * or kept in some queue's cache, and the caches together keep at most a
 * quarter of the cap and are not refilled while anyone waits; and a part
 * is never refused while no bounce memory at all is in use, whatever its
 * size. A waiting queue sleeps on an eventfd watched in its group
 * (BOUNCE_COOKIE), written by whichever thread frees memory.
 *
 * Threads: each queue's buffers are its owner's (no lock on the I/O
 * path); the counters are atomics; the list of waiting queues has a mutex
 * taken only by queues that wait and by frees while some queue waits.
 */
#include <rblk/rblk.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"
#include "lib_queue.h"

#define BOUNCE_MIN_SHIFT 12 /* 4 KiB */
#define BOUNCE_CLASSES 12   /* 4 KiB .. 8 MiB (RBLK_MAX_MAX_IO) */
_Static_assert((4096u << (BOUNCE_CLASSES - 1)) >= RBLK_MAX_MAX_IO,
	       "a class holds the largest part");
#define BOUNCE_LIMIT_DEFAULT (32ull << 20)

struct bbuf {
	char *addr;
	struct xp_mr *mr;
	uint32_t size;
	uint8_t cls;
	struct bbuf *next; /* the cache's free list */
};

/* A queue's bounce state, created at its first need (q->bounce). */
struct lib_bounce {
	struct rblk_queue *q;
	struct bbuf **tag;  /* [qd]: the buffer each tag's part uses, or NULL */
	struct bbuf *spare; /* reserved, not yet given to a tag */
	struct bbuf *free[BOUNCE_CLASSES]; /* the cache */
	size_t cached;			   /* bytes in the cache */
	_Atomic size_t
	    bytes;    /* every byte of this queue's (rblk_pinned_bytes) */
	int efd;      /* written when memory frees; -1 until the first wait */
	bool waiting; /* on waiters */
	struct lib_bounce *wnext;
};

static _Atomic uint64_t g_pinned; /* bounce bytes registered, process-wide */
static _Atomic uint64_t g_cached; /* of those, in caches */
static _Atomic unsigned int g_nr_waiters;
static pthread_mutex_t g_wait_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lib_bounce *g_waiters;
static pthread_once_t g_limit_once = PTHREAD_ONCE_INIT;
static uint64_t g_limit;

/* RBLK_BOUNCE_LIMIT=N[K|M|G], read once. */
static void limit_init(void)
{
	const char *s = getenv("RBLK_BOUNCE_LIMIT");
	unsigned long long v;
	char *end;

	g_limit = BOUNCE_LIMIT_DEFAULT;
	if (!s || !*s)
		return;
	errno = 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'G':
	case 'g':
		v <<= 10;
		/* fall through */
	case 'M':
	case 'm':
		v <<= 10;
		/* fall through */
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	}
	if (errno || *end || end == s)
		log_warn(
		    "RBLK_BOUNCE_LIMIT='%s' is not a size; using %llu bytes", s,
		    (unsigned long long)g_limit);
	else
		g_limit = v;
}

static uint64_t bounce_limit(void)
{
	pthread_once(&g_limit_once, limit_init);
	return g_limit;
}

static unsigned int class_of(uint32_t len)
{
	unsigned int c = 0;

	while ((4096u << c) < len)
		c++;
	return c;
}

static struct lib_bounce *bounce_get_state(struct rblk_queue *q)
{
	struct lib_bounce *b = q->bounce;

	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->tag = calloc(q->qd, sizeof(*b->tag));
	if (!b->tag) {
		free(b);
		return NULL;
	}
	b->q = q;
	b->efd = -1;
	q->bounce = b;
	return b;
}

/* Wake every waiting queue: memory freed (or a cache emptied). */
static void wake_waiters(void)
{
	struct lib_bounce *w;
	uint64_t one = 1;

	pthread_mutex_lock(&g_wait_lock);
	while ((w = g_waiters)) {
		g_waiters = w->wnext;
		w->waiting = false;
		atomic_fetch_sub(&g_nr_waiters, 1);
		if (write(w->efd, &one, sizeof(one)) < 0)
			log_warn("bounce: waking queue %u: %s", w->q->index,
				 strerror(errno));
	}
	pthread_mutex_unlock(&g_wait_lock);
}

static void unwait(struct lib_bounce *b)
{
	struct lib_bounce **p;

	pthread_mutex_lock(&g_wait_lock);
	for (p = &g_waiters; *p; p = &(*p)->wnext) {
		if (*p == b) {
			*p = b->wnext;
			b->waiting = false;
			atomic_fetch_sub(&g_nr_waiters, 1);
			break;
		}
	}
	pthread_mutex_unlock(&g_wait_lock);
}

/* Join the waiters (its eventfd watched in the group): 0 or -errno. */
static int start_wait(struct lib_bounce *b)
{
	int ret;

	if (b->waiting)
		return 0;
	if (b->efd < 0) {
		b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (b->efd < 0)
			return -errno;
		ret = xp_group_watch(b->q->g, b->efd, BOUNCE_COOKIE);
		if (ret) {
			close(b->efd);
			b->efd = -1;
			return ret;
		}
	}
	pthread_mutex_lock(&g_wait_lock);
	b->waiting = true;
	b->wnext = g_waiters;
	g_waiters = b;
	atomic_fetch_add(&g_nr_waiters, 1);
	pthread_mutex_unlock(&g_wait_lock);
	return 0;
}

void lib_bounce_wake(struct rblk_queue *q)
{
	struct lib_bounce *b = q->bounce;
	uint64_t v;

	if (b && b->efd >= 0)
		while (read(b->efd, &v, sizeof(v)) > 0)
			;
}

/* Deregister and free bb; the counters drop; waiters wake. */
static void bbuf_free(struct lib_bounce *b, struct bbuf *bb)
{
	xp_dereg_mr(bb->mr);
	free(bb->addr);
	atomic_fetch_sub(&b->bytes, bb->size);
	atomic_fetch_sub(&g_pinned, bb->size);
	free(bb);
}

/* Empty q's cache (its memory goes back to the process's cap). */
static bool drop_cache(struct lib_bounce *b)
{
	bool any = false;

	for (unsigned int c = 0; c < BOUNCE_CLASSES; c++) {
		struct bbuf *bb;

		while ((bb = b->free[c])) {
			b->free[c] = bb->next;
			b->cached -= bb->size;
			atomic_fetch_sub(&g_cached, bb->size);
			bbuf_free(b, bb);
			any = true;
		}
	}
	return any;
}

/*
 * Count size against the cap: true when it fits, or when no bounce
 * memory of the process is in use (then nothing would ever free).
 */
static bool charge(uint32_t size)
{
	uint64_t cur = atomic_load(&g_pinned);

	do {
		if (cur + size > bounce_limit() && cur > atomic_load(&g_cached))
			return false;
	} while (!atomic_compare_exchange_weak(&g_pinned, &cur, cur + size));
	return true;
}

/* A new registered buffer of class cls: 0, -EAGAIN (over the cap), -errno. */
static int bbuf_new(struct lib_bounce *b, unsigned int cls, int access,
		    struct bbuf **out)
{
	uint32_t size = 4096u << cls;
	struct bbuf *bb;
	void *p;
	int ret;

	if (!charge(size))
		return -EAGAIN;
	bb = calloc(1, sizeof(*bb));
	if (!bb || posix_memalign(&p, 4096, size)) {
		free(bb);
		atomic_fetch_sub(&g_pinned, size);
		return -ENOMEM;
	}
	ret = xp_group_reg_mr(b->q->g, p, size, access, &bb->mr);
	if (ret) {
		free(p);
		free(bb);
		atomic_fetch_sub(&g_pinned, size);
		return ret;
	}
	bb->addr = p;
	bb->size = size;
	bb->cls = (uint8_t)cls;
	atomic_fetch_add(&b->bytes, size);
	*out = bb;
	return 0;
}

static bool in_use_anywhere(void)
{
	return atomic_load(&g_pinned) > atomic_load(&g_cached);
}

int lib_bounce_reserve(struct rblk_queue *q, uint32_t len, int access)
{
	struct lib_bounce *b = bounce_get_state(q);
	unsigned int cls = class_of(len);
	struct bbuf *bb = NULL;
	int ret;

	if (!b)
		return lib_set_error(-ENOMEM,
				     "out of memory for bounce buffers");
	if (b->spare && b->spare->size >= len)
		return 0;
	if ((bb = b->spare)) { /* too small: back to the cache */
		b->spare = NULL;
		bb->next = b->free[bb->cls];
		b->free[bb->cls] = bb;
		b->cached += bb->size;
		atomic_fetch_add(&g_cached, bb->size);
	}
	if ((bb = b->free[cls])) {
		b->free[cls] = bb->next;
		b->cached -= bb->size;
		atomic_fetch_sub(&g_cached, bb->size);
		b->spare = bb;
		return 0;
	}
	ret = bbuf_new(b, cls, access, &bb);
	if (ret && drop_cache(b)) /* what this queue keeps, for what it needs */
		ret = bbuf_new(b, cls, access, &bb);
	if (ret == -EAGAIN || (ret && in_use_anywhere())) {
		/*
		 * Wait; join the waiters first, then look again, so a free
		 * between the two is not missed (the freer reads the waiter
		 * count after lowering g_pinned).
		 */
		int err = start_wait(b);

		if (err)
			return lib_set_error(err,
					     "waiting for bounce memory: %s",
					     strerror(-err));
		ret = bbuf_new(b, cls, access, &bb);
		if (ret == -EAGAIN || (ret && in_use_anywhere()))
			return -EAGAIN;
		if (b->waiting)
			unwait(b);
	}
	if (ret)
		return lib_pin_error(ret, 4096u << cls, "bounce buffer");
	b->spare = bb;
	return 0;
}

void lib_bounce_attach(struct rblk_queue *q, struct ireq *rq)
{
	struct lib_bounce *b = q->bounce;

	b->tag[rq->tag] = b->spare;
	b->spare = NULL;
}

void lib_bounce_release(struct rblk_queue *q, struct ireq *rq)
{
	struct lib_bounce *b = q->bounce;
	struct bbuf *bb;

	if (!b || !(bb = b->tag[rq->tag]))
		return;
	b->tag[rq->tag] = NULL;
	/* keep it while the caches hold under a quarter of the cap */
	if (!atomic_load(&g_nr_waiters) &&
	    atomic_load(&g_cached) + bb->size <= bounce_limit() / 4) {
		bb->next = b->free[bb->cls];
		b->free[bb->cls] = bb;
		b->cached += bb->size;
		atomic_fetch_add(&g_cached, bb->size);
	} else {
		bbuf_free(b, bb);
	}
	if (atomic_load(&g_nr_waiters))
		wake_waiters();
}

char *lib_bounce_buf(const struct rblk_queue *q, const struct ireq *rq)
{
	const struct bbuf *bb = q->bounce ? q->bounce->tag[rq->tag] : NULL;

	return bb ? bb->addr : NULL;
}

struct xp_mr *lib_bounce_mr(const struct rblk_queue *q, const struct ireq *rq)
{
	const struct bbuf *bb = q->bounce ? q->bounce->tag[rq->tag] : NULL;

	return bb ? bb->mr : NULL;
}

void lib_bounce_destroy(struct rblk_queue *q)
{
	struct lib_bounce *b = q->bounce;

	if (!b)
		return;
	if (b->waiting)
		unwait(b);
	drop_cache(b);
	for (unsigned int t = 0; t < q->qd; t++)
		if (b->tag[t])
			bbuf_free(b, b->tag[t]);
	if (b->spare)
		bbuf_free(b, b->spare);
	if (b->efd >= 0) {
		xp_group_unwatch(q->g, b->efd);
		close(b->efd);
	}
	free(b->tag);
	free(b);
	q->bounce = NULL;
	if (atomic_load(&g_nr_waiters))
		wake_waiters();
}

/* ---- what a handle pins ----------------------------------------------------
 */

size_t rblk_pinned_bytes(const struct rblk *r)
{
	size_t n = 0;

	for (unsigned int i = 0; i < r->nr_queues; i++) {
		const struct rblk_queue *q = &r->queues[i];

		if (q->qp.msg_mr)
			n += q->qp.msg_len;
		for (unsigned int u = 0; u < q->nr_umrs; u++)
			n += q->umrs[u].len;
		if (q->bounce)
			n += atomic_load(&q->bounce->bytes);
	}
	return n;
}

/* VmPin of this process in bytes, or 0 when unknown. */
static uint64_t vm_pinned(void)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

int lib_pin_error(int err, size_t len, const char *what)
{
	struct rlimit rl;
	uint64_t pinned;

	if ((err != -ENOMEM && err != -EPERM && err != -EAGAIN) ||
	    getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return lib_set_error(err, "registering %zu bytes (%s): %s", len,
				     what, strerror(-err));
	pinned = vm_pinned();
	return lib_set_error(
	    err,
	    "registering %zu bytes (%s): %s: RLIMIT_MEMLOCK is %llu bytes and this process pins %llu already, so it needs at least %llu: raise it (ulimit -l, LimitMEMLOCK=) or register less",
	    len, what, strerror(-err), (unsigned long long)rl.rlim_cur,
	    (unsigned long long)pinned, (unsigned long long)(pinned + len));
}
