/* SPDX-License-Identifier: MIT */
/*
 * libaio engine, the fallback for kernels or sandboxes without io_uring.
 * Completions are signalled through an eventfd (io_set_eventfd). Kernel
 * AIO has no reliable fdatasync (most file systems refuse IOCB_CMD_FDSYNC),
 * so FLUSH runs fdatasync(2) synchronously and its completion is queued
 * locally and delivered by the next reap().
 */
#include "engine.h"

#include <errno.h>
#include <libaio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/fifo.h"
#include "../common/freelist.h"
#include "../common/log.h"

#include "backend.h"
#include "conn.h"
#include "worker.h"

#define AIO_REAP_BATCH 64

struct aio_op {
	struct iocb iocb;
	struct treq *r;
	int res; /* for locally completed ops */
	struct aio_op *next;
};

struct aio_priv {
	io_context_t ctx;
	int efd;
	unsigned int depth;
	struct aio_op *ops;
	struct aio_op *free_list;
	struct iocb **pending; /* queued, not yet io_submit()ted */
	unsigned int nr_pending;
	struct aio_op *local_head, *local_tail; /* completed synchronously */
};

static struct aio_priv *priv_of(struct worker *w)
{
	return w->engine_priv;
}

static int aio_init(struct worker *w, unsigned int depth)
{
	struct aio_priv *a;
	int ret;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->depth = depth;
	a->ops = calloc(depth, sizeof(*a->ops));
	a->pending = calloc(depth, sizeof(*a->pending));
	if (!a->ops || !a->pending) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (unsigned int i = 0; i < depth; i++) {
		FREELIST_PUSH(a->free_list, &a->ops[i], next);
	}
	ret = io_setup((int)depth, &a->ctx);
	if (ret) {
		log_err("worker %u: io_setup(%u): %s", w->index, depth,
			strerror(-ret));
		goto out_free;
	}
	a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->efd < 0) {
		ret = -errno;
		log_err("worker %u: eventfd: %s", w->index, strerror(errno));
		goto out_destroy_ctx;
	}
	w->engine_priv = a;
	return 0;

out_destroy_ctx:
	io_destroy(a->ctx);
out_free:
	free(a->pending);
	free(a->ops);
	free(a);
	return ret;
}

static void aio_fini(struct worker *w)
{
	struct aio_priv *a = priv_of(w);

	if (!a)
		return;
	io_destroy(a->ctx);
	close(a->efd);
	free(a->pending);
	free(a->ops);
	free(a);
	w->engine_priv = NULL;
}

/* An aio context takes submissions from any thread: nothing to do. */
static int aio_enable(struct worker *w)
{
	return 0;
}

static int aio_fd(struct worker *w)
{
	return priv_of(w)->efd;
}

static int aio_register_buf(struct worker *w, void *addr, size_t len)
{
	return -EOPNOTSUPP;
}

static void aio_unregister_buf(struct worker *w, int index)
{
}

static struct aio_op *op_get(struct aio_priv *a)
{
	return FREELIST_POP(a->free_list, next);
}

static void op_put(struct aio_priv *a, struct aio_op *op)
{
	FREELIST_PUSH(a->free_list, op, next);
}

static int aio_queue_rw(struct worker *w, struct treq *r, int fd, bool write,
			void *buf, uint32_t len, uint64_t off, int rw_flags,
			int buf_index)
{
	struct aio_priv *a = priv_of(w);
	struct aio_op *op = op_get(a);

	if (!op)
		return -EBUSY;
	if (write)
		io_prep_pwrite(&op->iocb, fd, buf, len, (long long)off);
	else
		io_prep_pread(&op->iocb, fd, buf, len, (long long)off);
	op->iocb.aio_rw_flags = (unsigned int)rw_flags;
	io_set_eventfd(&op->iocb, a->efd);
	op->iocb.data = op;
	op->r = r;
	a->pending[a->nr_pending++] = &op->iocb;
	return 0;
}

static int aio_queue_fdatasync(struct worker *w, struct treq *r, int fd)
{
	struct aio_priv *a = priv_of(w);
	struct aio_op *op = op_get(a);
	uint64_t one = 1;

	if (!op)
		return -EBUSY;
	op->r = r;
	op->res = fdatasync(fd) ? -errno : 0;
	FIFO_PUSH(a->local_head, a->local_tail, op, next);
	if (write(a->efd, &one, sizeof(one)) < 0)
		log_warn("worker %u: write eventfd: %s", w->index,
			 strerror(errno));
	return 0;
}

static int aio_submit(struct worker *w)
{
	struct aio_priv *a = priv_of(w);
	unsigned int done = 0;

	while (done < a->nr_pending) {
		int n = io_submit(a->ctx, (long)(a->nr_pending - done),
				  a->pending + done);

		if (n == -EAGAIN || n == 0)
			break; /* retried on the next loop iteration */
		if (n < 0) {
			/* the first iocb is bad: fail it, go on with the rest
			 */
			struct aio_op *op = a->pending[done]->data;
			struct treq *r = op->r;

			op_put(a, op);
			done++;
			treq_backend_done(r, n);
			continue;
		}
		done += (unsigned int)n;
	}
	memmove(a->pending, a->pending + done,
		(a->nr_pending - done) * sizeof(*a->pending));
	a->nr_pending -= done;
	return 0;
}

static int aio_reap(struct worker *w)
{
	struct aio_priv *a = priv_of(w);
	struct io_event ev[AIO_REAP_BATCH];
	struct timespec zero = {0, 0};
	struct aio_op *local;
	uint64_t cnt;
	int total = 0, n;

	if (read(a->efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		log_warn("worker %u: read eventfd: %s", w->index,
			 strerror(errno));
	local = a->local_head;
	a->local_head = a->local_tail = NULL;
	while (local) {
		struct aio_op *next = local->next;
		struct treq *r = local->r;
		int res = local->res;

		op_put(a, local);
		treq_backend_done(r, res);
		local = next;
		total++;
	}
	total += backend_remote_reap(w);
	do {
		n = io_getevents(a->ctx, 0, AIO_REAP_BATCH, ev, &zero);
		if (n < 0) {
			log_warn("worker %u: io_getevents: %s", w->index,
				 strerror(-n));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct aio_op *op = ev[i].data;
			struct treq *r = op->r;

			op_put(a, op);
			treq_backend_done(r, (int)(long)ev[i].res);
		}
		total += n;
	} while (n == AIO_REAP_BATCH);
	return total;
}

const struct engine_ops engine_aio_ops = {
    .name = "libaio",
    .init = aio_init,
    .enable = aio_enable,
    .fini = aio_fini,
    .fd = aio_fd,
    .register_buf = aio_register_buf,
    .unregister_buf = aio_unregister_buf,
    .queue_rw = aio_queue_rw,
    .queue_fdatasync = aio_queue_fdatasync,
    .submit = aio_submit,
    .reap = aio_reap,
};
