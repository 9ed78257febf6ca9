/* SPDX-License-Identifier: MIT */
/*
 * io_uring engine: one ring per worker, completions signalled through an
 * eventfd in the worker's epoll set. Each connection's slot region is one
 * fixed buffer (sparse table), so the kernel does not pin pages per I/O and
 * the disk DMAs straight to/from the memory the HCA reads and writes.
 */
#include "engine.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#include "backend.h"
#include "conn.h"
#include "worker.h"

#define URING_BUF_TABLE 1024
#define URING_REAP_BATCH 64

struct uring_priv {
	struct io_uring ring;
	int efd;
	unsigned int nr_bufs; /* size of the sparse fixed-buffer table */
	unsigned char *buf_used;
	bool disabled; /* made R_DISABLED: uring_enable() enables it */
};

static struct uring_priv *priv_of(struct worker *w)
{
	return w->engine_priv;
}

/*
 * The ring, for the worker alone: made here on the main thread disabled
 * and single-issuer, and enabled by the worker's thread (uring_enable()),
 * which the kernel then takes for its only submitter. Kernels before 6.0
 * (no SINGLE_ISSUER) get a ring any thread may use, enabled at once;
 * before 5.19 one without COOP_TASKRUN as well.
 */
static int uring_setup(struct uring_priv *u, unsigned int depth)
{
	static const unsigned int tries[] = {
	    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
		IORING_SETUP_R_DISABLED,
	    IORING_SETUP_COOP_TASKRUN,
	    0,
	};
	struct io_uring_params p;
	int ret = -EINVAL;

	for (size_t i = 0; i < ARRAY_SIZE(tries) && ret == -EINVAL; i++) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE | tries[i];
		p.cq_entries = depth * 4;
		ret = io_uring_queue_init_params(depth, &u->ring, &p);
		u->disabled = !ret && (tries[i] & IORING_SETUP_R_DISABLED);
	}
	return ret;
}

static int uring_init(struct worker *w, unsigned int depth)
{
	struct uring_priv *u;
	int ret;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	ret = uring_setup(u, depth);
	if (ret) {
		log_err("worker %u: io_uring_queue_init: %s", w->index,
			strerror(-ret));
		goto out_free;
	}
	u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->efd < 0) {
		ret = -errno;
		log_err("worker %u: eventfd: %s", w->index, strerror(errno));
		goto out_exit_ring;
	}
	ret = io_uring_register_eventfd(&u->ring, u->efd);
	if (ret) {
		log_err("worker %u: io_uring_register_eventfd: %s", w->index,
			strerror(-ret));
		goto out_close_efd;
	}
	if (!io_uring_register_buffers_sparse(&u->ring, URING_BUF_TABLE)) {
		u->nr_bufs = URING_BUF_TABLE;
		u->buf_used = calloc(URING_BUF_TABLE, 1);
		if (!u->buf_used)
			u->nr_bufs = 0;
	} else {
		log_info(
		    "worker %u: io_uring fixed buffers unavailable; using plain reads and writes",
		    w->index);
	}
	log_debug("worker %u: io_uring ring%s", w->index,
		  u->disabled ? ", single issuer: enabled by the worker"
			      : " any thread may use (an older kernel)");
	w->engine_priv = u;
	return 0;

out_close_efd:
	close(u->efd);
out_exit_ring:
	io_uring_queue_exit(&u->ring);
out_free:
	free(u);
	return ret;
}

/*
 * Worker thread. liburing 2.3 declares io_uring_enable_rings() but does
 * not export it: the system call itself.
 */
static int uring_enable(struct worker *w)
{
	struct uring_priv *u = priv_of(w);

	if (!u->disabled)
		return 0;
	if (syscall(__NR_io_uring_register, u->ring.ring_fd,
		    IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0) {
		log_err("worker %u: io_uring_register(ENABLE_RINGS): %s",
			w->index, strerror(errno));
		return -errno;
	}
	u->disabled = false;
	return 0;
}

static void uring_fini(struct worker *w)
{
	struct uring_priv *u = priv_of(w);

	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	close(u->efd);
	free(u->buf_used);
	free(u);
	w->engine_priv = NULL;
}

static int uring_fd(struct worker *w)
{
	return priv_of(w)->efd;
}

static int uring_register_buf(struct worker *w, void *addr, size_t len)
{
	struct uring_priv *u = priv_of(w);
	struct iovec iov = {.iov_base = addr, .iov_len = len};
	int ret;

	for (unsigned int i = 0; i < u->nr_bufs; i++) {
		if (u->buf_used[i])
			continue;
		ret = io_uring_register_buffers_update_tag(&u->ring, i, &iov,
							   NULL, 1);
		if (ret < 0) {
			log_warn(
			    "worker %u: io_uring_register_buffers_update_tag: %s",
			    w->index, strerror(-ret));
			return ret;
		}
		u->buf_used[i] = 1;
		return (int)i;
	}
	return -ENOSPC;
}

static void uring_unregister_buf(struct worker *w, int index)
{
	struct uring_priv *u = priv_of(w);
	struct iovec iov = {0};

	if (index < 0 || (unsigned int)index >= u->nr_bufs)
		return;
	io_uring_register_buffers_update_tag(&u->ring, (unsigned int)index,
					     &iov, NULL, 1);
	u->buf_used[index] = 0;
}

/* An SQE, submitting what is queued when the ring is full. */
static struct io_uring_sqe *uring_sqe(struct uring_priv *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

static int uring_queue_rw(struct worker *w, struct treq *r, int fd, bool write,
			  void *buf, uint32_t len, uint64_t off, int rw_flags,
			  int buf_index)
{
	struct uring_priv *u = priv_of(w);
	struct io_uring_sqe *sqe = uring_sqe(u);

	if (!sqe)
		return -EBUSY;
	if (buf_index >= 0) {
		if (write)
			io_uring_prep_write_fixed(sqe, fd, buf, len, off,
						  buf_index);
		else
			io_uring_prep_read_fixed(sqe, fd, buf, len, off,
						 buf_index);
	} else {
		if (write)
			io_uring_prep_write(sqe, fd, buf, len, off);
		else
			io_uring_prep_read(sqe, fd, buf, len, off);
	}
	sqe->rw_flags = rw_flags;
	io_uring_sqe_set_data(sqe, r);
	return 0;
}

static int uring_queue_fdatasync(struct worker *w, struct treq *r, int fd)
{
	struct io_uring_sqe *sqe = uring_sqe(priv_of(w));

	if (!sqe)
		return -EBUSY;
	io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, r);
	return 0;
}

static int uring_submit(struct worker *w)
{
	int ret = io_uring_submit(&priv_of(w)->ring);

	/* unsubmitted SQEs stay in the ring and go with the next submit */
	if (ret < 0 && ret != -EAGAIN && ret != -EBUSY && ret != -EINTR) {
		log_err("worker %u: io_uring_submit: %s", w->index,
			strerror(-ret));
		return ret;
	}
	return 0;
}

static int uring_reap(struct worker *w)
{
	struct uring_priv *u = priv_of(w);
	struct io_uring_cqe *cqes[URING_REAP_BATCH];
	struct {
		struct treq *r;
		int res;
	} done[URING_REAP_BATCH];
	uint64_t cnt;
	int total = 0;
	unsigned int n;

	if (read(u->efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		log_warn("worker %u: read eventfd: %s", w->index,
			 strerror(errno));
	total += backend_remote_reap(w);
	/*
	 * Copy results out and advance the CQ before calling back: the
	 * callbacks may queue new SQEs (retries) and submit.
	 */
	do {
		n = io_uring_peek_batch_cqe(&u->ring, cqes, URING_REAP_BATCH);
		for (unsigned int i = 0; i < n; i++) {
			done[i].r = io_uring_cqe_get_data(cqes[i]);
			done[i].res = cqes[i]->res;
		}
		io_uring_cq_advance(&u->ring, n);
		for (unsigned int i = 0; i < n; i++)
			treq_backend_done(done[i].r, done[i].res);
		total += (int)n;
	} while (n == URING_REAP_BATCH);
	return total;
}

static bool uring_ready(struct worker *w)
{
	return io_uring_cq_ready(&priv_of(w)->ring) > 0;
}

const struct engine_ops engine_uring_ops = {
    .name = "io_uring",
    .init = uring_init,
    .enable = uring_enable,
    .fini = uring_fini,
    .fd = uring_fd,
    .register_buf = uring_register_buf,
    .unregister_buf = uring_unregister_buf,
    .queue_rw = uring_queue_rw,
    .queue_fdatasync = uring_queue_fdatasync,
    .submit = uring_submit,
    .reap = uring_reap,
    .ready = uring_ready,
};
