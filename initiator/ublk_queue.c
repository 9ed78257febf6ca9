/* SPDX-License-Identifier: MIT */
/*
 * The ublk front end's queue threads (see ublk.c for the device and the
 * threads' place in it): one per hardware queue, each with its own
 * io_uring, its mapping of the request descriptors and its buffers.
 *
 * Buffers: each queue thread maps depth * buf_size bytes (buf_size =
 * min(max_io, MAP_MAX_REQUEST), the largest request the device passes) in
 * one piece and registers it once with rblk_register_buffer() on its rblk
 * queue (the library then needs no bounce buffers for it); tag t
 * owns slice t, which is also the address given to ublk in FETCH and
 * COMMIT. A READ's RDMA READ therefore lands where the kernel copies from
 * at COMMIT, and a WRITE's RDMA WRITE leaves from where the kernel copied
 * the data before completing the FETCH: no copy in the initiator.
 *
 * One wait for everything: the queue ring holds the ublk commands, a
 * one-shot POLL_ADD on rblk_queue_fd() and a one-shot POLL_ADD on the
 * device's stop eventfd, so one io_uring_submit_and_wait() sleeps on the
 * kernel and the network at once. The rblk poll is re-armed after it fires
 * following rblk.h: rblk_queue_arm() first, and if that says completions
 * are already there, reap instead of sleeping. While rblk has I/O out, the
 * thread first polls for a while without sleeping (`rblk map
 * --poll-spin-us`, uq_spin()).
 *
 * Failure: an rblk queue that has died completes every request with -EIO
 * at once (never a hang). After STOP is asked for, rblk I/O that has not
 * finished within STOP_GRACE_MS is failed with -EIO so STOP_DEV can end;
 * later requests on such a tag fail without touching its buffer, which a
 * late RDMA READ may still write.
 *
 * Rings: struct ublksrv_io_cmd is 16 bytes and fits a plain 64-byte SQE,
 * so the queue rings use those (the control ring needs 128-byte ones).
 */
#include "ublk_internal.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "../common/util.h"

/*
 * After STOP: how long rblk I/O may still take before it fails with -EIO;
 * well inside the 30 s that `rblk unmap` waits for the daemon.
 */
#define STOP_GRACE_MS 15000
#define RBLK_REAP_BATCH 32

_Static_assert(sizeof(struct ublksrv_io_cmd) == 16,
	       "I/O command fits the 16-byte command area of a 64-byte SQE");
_Static_assert(sizeof(struct ublksrv_io_desc) == 24, "descriptor layout");

/*
 * user_data of the queue ring: kind in the bits above the tag. Tags are
 * below UBLK_MAX_QUEUE_DEPTH; the io command carries them as __u16.
 */
enum ud_kind {
	UD_IO = 1,	  /* FETCH / COMMIT_AND_FETCH of a tag */
	UD_RBLK_POLL = 2, /* POLL_ADD on rblk_queue_fd() */
	UD_STOP_POLL = 3, /* POLL_ADD on the device's stop eventfd */
};

#define UD_TAG_BITS 16
_Static_assert(UBLK_MAX_QUEUE_DEPTH <= (1u << UD_TAG_BITS),
	       "every tag fits the tag field of user_data");

static inline uint64_t ud_make(enum ud_kind kind, unsigned int tag)
{
	return (uint64_t)kind << UD_TAG_BITS | tag;
}

static inline enum ud_kind ud_kind(uint64_t ud)
{
	return (enum ud_kind)(ud >> UD_TAG_BITS);
}

static inline unsigned int ud_tag(uint64_t ud)
{
	return (unsigned int)(ud & ((1u << UD_TAG_BITS) - 1));
}

enum utag_state {
	UTAG_IDLE,  /* nothing posted yet */
	UTAG_FETCH, /* FETCH or COMMIT_AND_FETCH posted: the kernel owns it */
	UTAG_RBLK,  /* request taken; its rblk I/O is in flight */
	UTAG_DONE,  /* the kernel aborted the fetch: no more requests */
};

/* One tag of a queue: the request the kernel handed it and where it is. */
struct utag {
	enum utag_state state;
	uint16_t tag;
	/* failed at stop while its rblk I/O was in flight: buffer still busy */
	bool orphan;
	struct ublksrv_io_desc iod; /* the request, copied at fetch */
};

/* Errors the block layer has a status for pass through; the rest is EIO. */
static int ublk_errno(int err)
{
	switch (err) {
	case -EOPNOTSUPP:
	case -ENOSPC:
	case -ETIMEDOUT:
	/*
	 * a reservation conflict: ublk_drv turns it into
	 * BLK_STS_RESV_CONFLICT, which the block layer reports as EBADE, as
	 * for an NVMe or SCSI disk
	 */
	case -EBADE:
		return err;
	default:
		return -EIO;
	}
}

/* ---- queue thread: commands -------------------------------------------- */

static struct io_uring_sqe *uq_get_sqe(struct uq *q)
{
	struct io_uring_sqe *sqe;
	int ret;

	/*
	 * The SQ holds depth + 4 entries and at most one command per tag
	 * plus two polls are ever outstanding, so a full SQ only means
	 * entries not yet submitted: submit them and take one.
	 */
	while (!(sqe = io_uring_get_sqe(&q->ring))) {
		ret = io_uring_submit(&q->ring);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN) {
			log_err("ublk: queue %u: io_uring_submit: %s", q->id,
				strerror(-ret));
			q->broken = true;
			return NULL;
		}
	}
	return sqe;
}

/* Post FETCH_REQ (commit == false) or COMMIT_AND_FETCH_REQ for tag t. */
static void uq_post(struct uq *q, struct utag *t, bool commit, int result)
{
	const struct udev *d = q->dev;
	struct io_uring_sqe *sqe = uq_get_sqe(q);
	struct ublksrv_io_cmd *cmd;
	unsigned int op;

	if (!sqe)
		return;
	op = commit ? UBLK_U_IO_COMMIT_AND_FETCH_REQ : UBLK_U_IO_FETCH_REQ;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = 0; /* the registered /dev/ublkcN */
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->cmd_op = d->io_ioctl_encode ? op : _IOC_NR(op);
	sqe->user_data = ud_make(UD_IO, t->tag);
	cmd = (struct ublksrv_io_cmd *)(void *)sqe->cmd;
	cmd->q_id = (uint16_t)q->id;
	cmd->tag = t->tag;
	cmd->result = result;
	cmd->addr =
	    (uint64_t)(uintptr_t)(q->bufs + (size_t)t->tag * d->buf_size);
	t->state = UTAG_FETCH;
}

static void uq_commit(struct uq *q, struct utag *t, int result)
{
	uq_post(q, t, true, result);
}

static void uq_post_poll(struct uq *q, int fd, enum ud_kind kind)
{
	struct io_uring_sqe *sqe = uq_get_sqe(q);

	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, fd, POLLIN);
	sqe->user_data = ud_make(kind, 0);
}

/* ---- queue thread: requests -------------------------------------------- */

/* Bytes the kernel expects back for a successful request. */
static int utag_bytes(const struct utag *t)
{
	uint8_t op = (uint8_t)(t->iod.op_flags & 0xff);

	if (op == UBLK_IO_OP_READ || op == UBLK_IO_OP_WRITE)
		return (int)(t->iod.nr_sectors << SECTOR_SHIFT);
	return 0;
}

/*
 * Hand the request on tag t to rblk. Returns 0 (in flight) or a result to
 * commit. rblk never refuses for lack of room (-EAGAIN): the device's depth
 * is at most the granted queue depth, and rblk takes at least that many
 * (max_queued) whatever it has on the wire; it queues what waits for a tag.
 */
static int uq_submit(struct uq *q, struct utag *t)
{
	const struct udev *d = q->dev;
	uint32_t op_flags = t->iod.op_flags;
	uint64_t off = t->iod.start_sector << SECTOR_SHIFT;
	uint64_t len = (uint64_t)t->iod.nr_sectors << SECTOR_SHIFT;
	unsigned int flags = 0;
	enum rblk_io_op op;
	void *buf = NULL;
	int ret;

	/* after the stop grace nothing new goes to rblk: it may be hung */
	if (q->rblk_dead || t->orphan || q->expired)
		return -EIO;
	/* UBLK_IO_F_* sit in op_flags at their own bit positions */
	if ((op_flags & UBLK_IO_F_FUA) && d->use_fua)
		flags |= RBLK_IO_FUA;
	switch (op_flags & 0xff) {
	case UBLK_IO_OP_READ:
		op = RBLK_IO_READ;
		buf = q->bufs + (size_t)t->tag * d->buf_size;
		break;
	case UBLK_IO_OP_WRITE:
		op = RBLK_IO_WRITE;
		buf = q->bufs + (size_t)t->tag * d->buf_size;
		break;
	case UBLK_IO_OP_FLUSH:
		if (!(d->features & RBLK_FEAT_FLUSH))
			return 0; /* no volatile cache advertised */
		op = RBLK_IO_FLUSH;
		off = len = 0;
		flags = 0;
		break;
	case UBLK_IO_OP_DISCARD:
		if (!(d->features & RBLK_FEAT_TRIM))
			return -EOPNOTSUPP;
		op = RBLK_IO_TRIM;
		flags = 0;
		break;
	case UBLK_IO_OP_WRITE_ZEROES:
		if (!(d->features & RBLK_FEAT_ZEROES))
			return -EOPNOTSUPP;
		op = RBLK_IO_WRITE_ZEROES;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if ((op == RBLK_IO_READ || op == RBLK_IO_WRITE) && len > d->buf_size)
		return -EIO; /* the kernel never exceeds max_io_buf_bytes */
	ret = rblk_submit(q->rq, op, buf, off, len, flags, t);
	if (ret == 0) {
		t->state = UTAG_RBLK;
		q->nr_rblk++;
		return 0;
	}
	if (ret == -ENOTCONN) {
		if (!q->rblk_dead)
			log_warn(
			    "ublk: queue %u: the rblk connection is gone; failing I/O with EIO",
			    q->id);
		q->rblk_dead = true;
	} else {
		log_debug("ublk: queue %u tag %u: %s", q->id, t->tag,
			  rblk_last_error());
	}
	return ublk_errno(ret);
}

/* A FETCH completed with a request on tag t. */
static void uq_start(struct uq *q, struct utag *t)
{
	int ret;

	t->iod = q->iods[t->tag];
	ret = uq_submit(q, t);
	if (t->state != UTAG_RBLK) /* answered without rblk */
		uq_commit(q, t, ret ? ret : utag_bytes(t));
}

static void uq_handle_io(struct uq *q, unsigned int tag, int res)
{
	struct utag *t;

	if (tag >= q->dev->depth || q->tags[tag].state != UTAG_FETCH) {
		log_err("ublk: queue %u: completion for tag %u it did not post",
			q->id, tag);
		return;
	}
	t = &q->tags[tag];
	if (res == UBLK_IO_RES_OK) {
		uq_start(q, t);
		return;
	}
	if (res != UBLK_IO_RES_ABORT)
		log_err("ublk: queue %u tag %u: fetch/commit refused: %s",
			q->id, tag, strerror(-res));
	t->state = UTAG_DONE;
	q->nr_done++;
}

/* Reap rblk completions and commit them. */
static void uq_reap_rblk(struct uq *q)
{
	struct rblk_completion c[RBLK_REAP_BATCH];
	int n;

	if (q->rblk_dead && !q->nr_rblk)
		return;
	do {
		n = rblk_poll(q->rq, c, RBLK_REAP_BATCH, 0);
		if (n < 0) {
			if (!q->rblk_dead)
				log_warn(
				    "ublk: queue %u: the rblk connection is gone; failing I/O with EIO",
				    q->id);
			q->rblk_dead = true;
			return;
		}
		for (int i = 0; i < n; i++) {
			struct utag *t = c[i].user_data;

			q->nr_rblk--;
			if (t->orphan) { /* already failed at stop */
				t->orphan = false;
				continue;
			}
			if (c[i].result == -ENOTCONN)
				q->rblk_dead = true;
			uq_commit(q, t,
				  c[i].result ? ublk_errno(c[i].result)
					      : utag_bytes(t));
		}
	} while (n == RBLK_REAP_BATCH);
}

/*
 * Before sleeping: make sure the ring holds a poll on the rblk queue.
 * Returns true when rblk already has completions (reap, do not sleep).
 */
static bool uq_arm_rblk(struct uq *q)
{
	if (q->rblk_dead || q->rblk_polling)
		return false;
	if (rblk_queue_arm(q->rq) > 0)
		return true;
	uq_post_poll(q, rblk_queue_fd(q->rq), UD_RBLK_POLL);
	q->rblk_polling = !q->broken;
	return false;
}

/*
 * STOP_GRACE_MS after STOP: fail what rblk still holds so STOP_DEV can
 * finish. An orphaned tag's buffer may still be written by a late RDMA
 * READ, so later requests on that tag fail without touching it.
 */
static void uq_expire(struct uq *q)
{
	unsigned int n = 0;

	q->expired = true;
	for (unsigned int i = 0; i < q->dev->depth; i++) {
		struct utag *t = &q->tags[i];

		if (t->state == UTAG_RBLK) {
			t->orphan = true;
			uq_commit(q, t, -EIO);
			n++;
		}
	}
	if (n)
		log_warn(
		    "ublk: queue %u: %u I/Os still unanswered %d s after stop; failed with EIO",
		    q->id, n, STOP_GRACE_MS / 1000);
}

static void uq_handle_cqe(struct uq *q, const struct io_uring_cqe *cqe)
{
	switch (ud_kind(cqe->user_data)) {
	case UD_IO:
		uq_handle_io(q, ud_tag(cqe->user_data), cqe->res);
		break;
	case UD_RBLK_POLL:
		q->rblk_polling = false;
		break;
	case UD_STOP_POLL:
		q->stopping = true;
		q->stop_deadline = now_ms() + STOP_GRACE_MS;
		q->abandon = atomic_load(&q->dev->abandon);
		break;
	default:
		log_err("ublk: queue %u: unknown completion 0x%llx", q->id,
			(unsigned long long)cqe->user_data);
	}
}

static bool uq_finished(const struct uq *q)
{
	return q->nr_done == q->dev->depth && (!q->nr_rblk || q->expired);
}

/* Handle what the ring completed; the requests among it go out in one post. */
static void uq_handle_ring(struct uq *q)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	rblk_queue_plug(q->rq);
	io_uring_for_each_cqe(&q->ring, head, cqe)
	{
		uq_handle_cqe(q, cqe);
		n++;
	}
	io_uring_cq_advance(&q->ring, n);
	/* a failed post shows in the next rblk_poll() */
	(void)rblk_queue_unplug(q->rq);
}

/*
 * Before sleeping while rblk has I/O out: poll for its completions, and
 * for the ring's, up to spin_us without sleeping, so that an answer that
 * comes within the spin costs no sleep and no wake-up (the fio engine's
 * and `rblk nbd`'s default too). common/spin.h backs off where spins find
 * nothing (a slow target). The ring's commits go to the kernel first.
 * The yield between polls is a system call, on whose way back the kernel
 * runs the ring's pending task work (COOP_TASKRUN), so new requests show
 * in the CQ during the spin. True when something came.
 */
static int uq_spin_once(void *arg)
{
	struct uq *q = arg;
	unsigned int before = q->nr_rblk;

	uq_reap_rblk(q);
	return q->nr_rblk != before || q->rblk_dead ||
	       io_uring_cq_ready(&q->ring);
}

static bool uq_spin(struct uq *q)
{
	if (!q->dev->spin_us || !q->nr_rblk || q->rblk_dead || q->stopping)
		return false;
	if (io_uring_sq_ready(&q->ring) && io_uring_submit(&q->ring) < 0)
		return false; /* the wait below submits again and reports */
	return spin_run(&q->spin, q->dev->spin_us, uq_spin_once, q);
}

/* The queue thread's loop; returns when every tag is aborted. */
static int uq_run(struct uq *q)
{
	struct io_uring_cqe *cqe;
	int ret;

	for (;;) {
		uq_reap_rblk(q);
		if (q->broken)
			return -EIO;
		if (q->abandon)
			return -ECANCELED;
		if (uq_finished(q))
			return 0;
		if (uq_spin(q)) {
			uq_handle_ring(q);
			continue;
		}
		if (uq_arm_rblk(q))
			continue;
		if (q->stopping) {
			struct __kernel_timespec ts = {.tv_sec = 1};

			ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe,
							       1, &ts, NULL);
		} else {
			ret = io_uring_submit_and_wait(&q->ring, 1);
		}
		if (ret < 0 && ret != -EINTR && ret != -ETIME &&
		    ret != -EAGAIN) {
			log_err("ublk: queue %u: io_uring_enter: %s", q->id,
				strerror(-ret));
			return ret;
		}
		/* every request of this wake-up goes to the target in one post
		 */
		uq_handle_ring(q);
		if (q->stopping && !q->expired && now_ms() >= q->stop_deadline)
			uq_expire(q);
	}
}

/* ---- queue thread: setup and teardown ----------------------------------- */

static int uq_setup(struct uq *q)
{
	struct udev *d = q->dev;
	struct io_uring_params p;
	size_t ps = page_size();
	size_t stride =
	    ALIGN_UP(UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc), ps);
	unsigned int entries = d->depth + 4;
	void *m;
	int ret;

	q->iods_len =
	    ALIGN_UP((size_t)d->depth * sizeof(struct ublksrv_io_desc), ps);
	m = mmap(NULL, q->iods_len, PROT_READ, MAP_SHARED | MAP_POPULATE,
		 d->cdev_fd, (off_t)(UBLKSRV_CMD_BUF_OFFSET + q->id * stride));
	if (m == MAP_FAILED) {
		ret = -errno;
		log_err("ublk: queue %u: mmap of the descriptors: %s", q->id,
			strerror(-ret));
		return ret;
	}
	q->iods = m;

	/* one submitter, completions run when we wait: no IPIs needed */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
		  IORING_SETUP_CQSIZE;
	p.cq_entries = 2 * entries;
	ret = io_uring_queue_init_params(entries, &q->ring, &p);
	if (ret == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = 2 * entries;
		ret = io_uring_queue_init_params(entries, &q->ring, &p);
	}
	if (ret) {
		log_err("ublk: queue %u: io_uring_queue_init: %s", q->id,
			strerror(-ret));
		return ret;
	}
	q->ring_ready = true;
	ret = io_uring_register_files(&q->ring, &d->cdev_fd, 1);
	if (ret) {
		log_err("ublk: queue %u: io_uring_register_files: %s", q->id,
			strerror(-ret));
		return ret;
	}

	q->tags = calloc(d->depth, sizeof(*q->tags));
	if (!q->tags) {
		log_err("ublk: queue %u: out of memory", q->id);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < d->depth; i++)
		q->tags[i].tag = (uint16_t)i;

	q->bufs_len = (size_t)d->depth * d->buf_size;
	m = mmap(NULL, q->bufs_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		ret = -errno;
		log_err("ublk: queue %u: %zu bytes of I/O buffers: %s", q->id,
			q->bufs_len, strerror(-ret));
		return ret;
	}
	q->bufs = m;
	ret = rblk_register_buffer(q->rq, q->bufs, q->bufs_len);
	if (ret) {
		log_err("ublk: queue %u: registering the I/O buffers: %s",
			q->id, rblk_last_error());
		return ret;
	}
	q->bufs_registered = true;

	/* every tag asks for its first request; the kernel binds us */
	for (unsigned int i = 0; i < d->depth; i++)
		uq_post(q, &q->tags[i], false, 0);
	uq_post_poll(q, d->stop_efd, UD_STOP_POLL);
	if (q->broken)
		return -EIO;
	ret = io_uring_submit(&q->ring);
	if (ret < 0) {
		log_err("ublk: queue %u: submitting the fetches: %s", q->id,
			strerror(-ret));
		return ret;
	}
	return 0;
}

static void uq_teardown(struct uq *q)
{
	bool busy = q->nr_rblk > 0;

	/* closing the ring cancels what is still posted (abandon, errors) */
	if (q->ring_ready)
		io_uring_queue_exit(&q->ring);
	q->ring_ready = false;
	if (q->bufs_registered && !busy)
		rblk_unregister_buffer(q->rq, q->bufs);
	if (q->bufs && !busy)
		munmap(q->bufs, q->bufs_len);
	else if (busy)
		log_warn(
		    "ublk: queue %u: %u rblk I/Os never finished; keeping their buffers",
		    q->id, q->nr_rblk);
	q->bufs = NULL;
	if (q->iods)
		munmap((void *)q->iods, q->iods_len);
	q->iods = NULL;
	free(q->tags);
	q->tags = NULL;
}

/* Tell the serve thread (udev_start_queues()) that this queue is set up. */
static void udev_setup_done(struct udev *d, int ret)
{
	pthread_mutex_lock(&d->lock);
	d->nr_setup++;
	if (ret && !d->setup_ret)
		d->setup_ret = ret;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

void *uq_thread(void *arg)
{
	struct uq *q = arg;
	char name[16];
	int ret;

	snprintf(name, sizeof(name), "rblk-ublk-q%u", q->id);
	pthread_setname_np(pthread_self(), name);
	ret = uq_setup(q);
	udev_setup_done(q->dev, ret);
	q->ret = ret ? ret : uq_run(q);
	uq_teardown(q);
	efd_signal(q->dev->exit_efd);
	return NULL;
}
