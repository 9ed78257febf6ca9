/* SPDX-License-Identifier: MIT */
/*
 * The ublk front end: an rblk volume as /dev/ublkbN.
 *
 * Kernel interface (drivers/block/ublk_drv.c): control commands are
 * IORING_OP_URING_CMD on /dev/ublk-control with 128-byte SQEs (ADD_DEV,
 * SET_PARAMS, START_DEV, STOP_DEV, DEL_DEV, GET_FEATURES, the recovery
 * pair); I/O moves through /dev/ublkcN, which one process opens once: per
 * hardware queue the server mmaps a read-only array of request
 * descriptors and posts one FETCH_REQ per tag. A FETCH completes when the
 * kernel hands the tag a request; the server does it and answers with
 * COMMIT_AND_FETCH_REQ (result, then wait for the next request).
 *
 * Threads and ownership:
 *   serve thread  (the daemon's thread that calls serve()): owns the
 *                 control ring, the /dev/ublkcN descriptor and struct udev;
 *                 creates the device, starts one queue thread per hardware
 *                 queue, issues START_DEV (or END_USER_RECOVERY) once
 *                 every queue has posted its fetches, calls map_ready(),
 *                 waits for map_stop_fd(), then STOP_DEV, joins, DEL_DEV.
 *   queue thread  (one per hardware queue q): owns rblk queue q, its own
 *                 io_uring, its descriptor mapping and its buffers; it is
 *                 the only thread that touches any of them. The kernel
 *                 binds the queue to this thread (ubq_daemon) when its last
 *                 FETCH arrives, so every command for q must come from it.
 *
 * Buffers: each queue thread maps depth * max_io bytes in one piece and
 * registers it once with rblk_register_buffer() on its rblk queue; tag t
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
 * are already there, reap instead of sleeping.
 *
 * Failure: an rblk queue that has died completes every request with -EIO
 * at once (never a hang). After STOP is asked for, rblk I/O that has not
 * finished within STOP_GRACE_MS is failed with -EIO so STOP_DEV can end;
 * later requests on such a tag fail without touching its buffer, which a
 * late RDMA READ may still write.
 *
 * Recovery: devices are created with UBLK_F_USER_RECOVERY and _REISSUE
 * where the kernel has them. When the daemon dies (kill -9), the kernel
 * quiesces the device and requeues its in-flight requests instead of
 * failing them; `rblk map --recover ID` then runs serve() with
 * o->recover (device o->dev_id): START_USER_RECOVERY, new queue threads fetch, and
 * END_USER_RECOVERY resumes the queued I/O on the new session. The price:
 * until then (or until detach() removes the device) I/O on it waits.
 *
 * Rings: the control ring needs 128-byte SQEs (the kernel refuses control
 * commands without IORING_SETUP_SQE128); struct ublksrv_io_cmd is 16 bytes
 * and fits a plain 64-byte SQE, so the queue rings use those.
 */
#include "map.h"
#include "ublk_compat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define UBLK_CONTROL_PATH "/dev/ublk-control"
#define SECTOR_SHIFT 9
/* TRIM / WRITE_ZEROES per request: the library splits at 1 GiB anyway */
#define NODATA_MAX_SECTORS ((1u << 30) >> SECTOR_SHIFT)
/*
 * After STOP: how long rblk I/O may still take before it fails with -EIO;
 * well inside the 30 s that `rblk unmap` waits for the daemon.
 */
#define STOP_GRACE_MS 15000
/* START_USER_RECOVERY answers -EBUSY until the old daemon is fully gone */
#define RECOVERY_WAIT_MS 90000
/* ... but a device whose daemon still runs after this is not recoverable */
#define LIVE_GRACE_MS 5000
/* /dev/ublkcN appears at ADD_DEV; udev may create it a little later */
#define CDEV_WAIT_MS 5000
#define RBLK_REAP_BATCH 32

_Static_assert(sizeof(struct ublksrv_ctrl_cmd) == 32,
	       "control command: the size its ioctl encoding names");
_Static_assert(sizeof(struct ublksrv_ctrl_cmd) <= 80,
	       "control command fits the command area of a 128-byte SQE");
_Static_assert(sizeof(struct ublksrv_io_cmd) == 16,
	       "I/O command fits the 16-byte command area of a 64-byte SQE");
_Static_assert(sizeof(struct ublksrv_io_desc) == 24, "descriptor layout");
_Static_assert(sizeof(struct ublksrv_ctrl_dev_info) == 64, "dev_info layout");

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

/* ---- structures ------------------------------------------------------- */

/* The control channel: /dev/ublk-control and a small 128-byte-SQE ring. */
struct uctrl {
	int fd;
	struct io_uring ring;
	uint64_t features; /* GET_FEATURES; 0 when the kernel predates it */
	bool ioctl_encode; /* send UBLK_U_CMD_* rather than legacy numbers */
};

enum utag_state {
	UTAG_IDLE,    /* nothing posted yet */
	UTAG_FETCH,   /* FETCH or COMMIT_AND_FETCH posted: the kernel owns it */
	UTAG_RBLK,    /* request taken; its rblk I/O is in flight */
	UTAG_DONE,    /* the kernel aborted the fetch: no more requests */
};

struct utag {
	enum utag_state state;
	uint16_t tag;
	/* failed at stop while its rblk I/O was in flight: buffer still busy */
	bool orphan;
	struct ublksrv_io_desc iod; /* the request, copied at fetch */
};

struct udev;

/* One hardware queue; every field belongs to its thread once it runs. */
struct uq {
	struct udev *dev;
	unsigned int id;
	struct rblk_queue *rq;
	pthread_t thread;
	bool thread_started;

	struct io_uring ring;
	bool ring_ready;
	const struct ublksrv_io_desc *iods; /* mmap of /dev/ublkcN, read-only */
	size_t iods_len;
	char *bufs; /* depth * buf_size, registered with rq */
	size_t bufs_len;
	bool bufs_registered;

	struct utag *tags;

	unsigned int nr_done; /* tags in UTAG_DONE */
	unsigned int nr_rblk; /* rblk I/Os in flight, orphans included */
	bool rblk_dead;	   /* the rblk queue has failed: every request -EIO */
	bool rblk_polling; /* POLL_ADD on rblk_queue_fd() is pending */
	bool stopping;	   /* stop eventfd fired */
	bool expired;	   /* STOP_GRACE_MS passed: in-flight rblk I/O failed */
	bool abandon; /* leave at once: recovery failed, the kernel keeps I/O */
	bool broken;  /* the ring failed us: give up the queue */
	uint64_t stop_deadline;
	int ret; /* thread result: 0 or -errno */
};

/* One mapped device; owned by the serve thread. */
struct udev {
	struct uctrl ctrl;
	struct rblk *r;
	const struct rblk_info *info;
	struct ublksrv_ctrl_dev_info di; /* as the driver returned it */
	int dev_id;
	bool held; /* ours to stop and delete: added, or recovery started */
	bool recovering; /* START_USER_RECOVERY done, END not yet */
	int cdev_fd;

	unsigned int nr_queues;
	unsigned int depth;
	uint32_t buf_size;    /* bytes per tag: the device's max_io_buf_bytes */
	bool io_ioctl_encode; /* I/O commands as UBLK_U_IO_* */
	uint32_t features;    /* RBLK_FEAT_* of the volume */
	bool use_fua;

	struct uq *queues;
	int stop_efd; /* serve -> queues: stop (or abandon) now */
	int exit_efd; /* queue -> serve: a queue thread has ended */
	atomic_bool abandon;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int nr_setup; /* queues whose setup ended (either way) */
	int setup_ret;	       /* first failure */
};

/* ---- control channel -------------------------------------------------- */

static const char *ctrl_op_name(unsigned int op)
{
	switch (_IOC_NR(op)) {
	case UBLK_CMD_GET_DEV_INFO:
		return "GET_DEV_INFO";
	case UBLK_CMD_ADD_DEV:
		return "ADD_DEV";
	case UBLK_CMD_DEL_DEV:
		return "DEL_DEV";
	case UBLK_CMD_START_DEV:
		return "START_DEV";
	case UBLK_CMD_STOP_DEV:
		return "STOP_DEV";
	case UBLK_CMD_SET_PARAMS:
		return "SET_PARAMS";
	case UBLK_CMD_GET_PARAMS:
		return "GET_PARAMS";
	case UBLK_CMD_START_USER_RECOVERY:
		return "START_USER_RECOVERY";
	case UBLK_CMD_END_USER_RECOVERY:
		return "END_USER_RECOVERY";
	case _IOC_NR(UBLK_U_CMD_GET_FEATURES):
		return "GET_FEATURES";
	case _IOC_NR(UBLK_U_CMD_DEL_DEV_ASYNC):
		return "DEL_DEV_ASYNC";
	}
	return "?";
}

/*
 * Issue one control command and wait for it; returns the driver's answer
 * (0 or -errno). op is the UBLK_U_CMD_* encoding; kernels without
 * UBLK_F_CMD_IOCTL_ENCODE get its legacy number. Commands that exist only
 * in ioctl form (GET_FEATURES, DEL_DEV_ASYNC) are always sent as such.
 * Serve thread (or detach's caller) only: the ring is not shared.
 */
static int uctrl_cmd(struct uctrl *c, unsigned int op, uint32_t dev_id,
		     void *buf, size_t len, uint64_t data0)
{
	bool ioctl_only =
	    op == UBLK_U_CMD_GET_FEATURES || op == UBLK_U_CMD_DEL_DEV_ASYNC;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	struct ublksrv_ctrl_cmd *cmd;
	struct io_uring_cqe *cqe;
	int ret;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: the slot is two SQEs */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = c->fd;
	sqe->cmd_op = (c->ioctl_encode || ioctl_only) ? op : _IOC_NR(op);
	cmd = (struct ublksrv_ctrl_cmd *)(void *)sqe->cmd;
	cmd->dev_id = dev_id;
	cmd->queue_id = (uint16_t)-1;
	cmd->len = (uint16_t)len;
	cmd->addr = (uint64_t)(uintptr_t)buf;
	cmd->data[0] = data0;
	ret = io_uring_submit(&c->ring);
	if (ret < 0)
		return ret;
	do {
		ret = io_uring_wait_cqe(&c->ring, &cqe);
	} while (ret == -EINTR);
	if (ret)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(&c->ring, cqe);
	if (ret < 0)
		log_debug("ublk: %s on device %d: %s", ctrl_op_name(op),
			  (int)dev_id, strerror(-ret));
	return ret;
}

static void uctrl_close(struct uctrl *c)
{
	io_uring_queue_exit(&c->ring);
	close(c->fd);
	c->fd = -1;
}

/*
 * Open /dev/ublk-control and ask what the driver supports. On failure
 * writes a sentence for the user to why (may be NULL) and returns -errno.
 */
static int uctrl_open(struct uctrl *c, char *why, size_t why_len)
{
	uint64_t features = 0;
	int ret;

	memset(c, 0, sizeof(*c));
	c->fd = open(UBLK_CONTROL_PATH, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		ret = -errno;
		if (!why)
			return ret;
		if (ret == -ENOENT || ret == -ENODEV || ret == -ENXIO)
			snprintf(
			    why, why_len,
			    "ublk_drv not loaded (no %s): modprobe ublk_drv",
			    UBLK_CONTROL_PATH);
		else if (ret == -EACCES || ret == -EPERM)
			snprintf(
			    why, why_len,
			    "%s: permission denied (ublk devices need root)",
			    UBLK_CONTROL_PATH);
		else
			snprintf(why, why_len, "%s: %s", UBLK_CONTROL_PATH,
				 strerror(-ret));
		return ret;
	}
	ret = io_uring_queue_init(4, &c->ring, IORING_SETUP_SQE128);
	if (ret) {
		if (why)
			snprintf(
			    why, why_len,
			    "io_uring with 128-byte SQEs unavailable (%s): ublk needs Linux 6.0 or later",
			    strerror(-ret));
		close(c->fd);
		c->fd = -1;
		return ret;
	}
	/* kernels before 6.5 have no GET_FEATURES: legacy opcodes, no extras */
	ret = uctrl_cmd(c, UBLK_U_CMD_GET_FEATURES, 0, &features,
			UBLK_FEATURES_LEN, 0);
	c->features = ret ? 0 : features;
	c->ioctl_encode = c->features & UBLK_F_CMD_IOCTL_ENCODE;
	return 0;
}

/* DEL_DEV without waiting for the disk's last opener where possible. */
static int uctrl_del_dev(struct uctrl *c, int dev_id)
{
	int ret = uctrl_cmd(c, UBLK_U_CMD_DEL_DEV_ASYNC, (uint32_t)dev_id, NULL,
			    0, 0);

	if (ret == -EOPNOTSUPP || ret == -EINVAL)
		ret = uctrl_cmd(c, UBLK_U_CMD_DEL_DEV, (uint32_t)dev_id, NULL,
				0, 0);
	return ret;
}

static int uctrl_get_info(struct uctrl *c, int dev_id,
			  struct ublksrv_ctrl_dev_info *di)
{
	memset(di, 0, sizeof(*di));
	return uctrl_cmd(c, UBLK_U_CMD_GET_DEV_INFO, (uint32_t)dev_id, di,
			 sizeof(*di), 0);
}

/* ---- helpers ---------------------------------------------------------- */

static unsigned int ilog2_u32(uint32_t v)
{
	return 31u - (unsigned int)__builtin_clz(v);
}

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

/* A process that exists and is not a zombie. */
static bool pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	if (pid <= 0 || (kill(pid, 0) && errno == ESRCH))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && p[2] == 'Z');
}

static void efd_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0)
		log_warn("ublk: eventfd write: %s", strerror(errno));
}

/* Errors the block layer has a status for pass through; the rest is EIO. */
static int ublk_errno(int err)
{
	switch (err) {
	case -EOPNOTSUPP:
	case -ENOSPC:
	case -ETIMEDOUT:
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

/* The queue thread's loop; returns when every tag is aborted. */
static int uq_run(struct uq *q)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n;
	int ret;

	for (;;) {
		uq_reap_rblk(q);
		if (q->broken)
			return -EIO;
		if (q->abandon)
			return -ECANCELED;
		if (uq_finished(q))
			return 0;
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
		n = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe)
		{
			uq_handle_cqe(q, cqe);
			n++;
		}
		io_uring_cq_advance(&q->ring, n);
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

static void udev_setup_done(struct udev *d, int ret)
{
	pthread_mutex_lock(&d->lock);
	d->nr_setup++;
	if (ret && !d->setup_ret)
		d->setup_ret = ret;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void *uq_thread(void *arg)
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

/* ---- device: serve thread ---------------------------------------------- */

/* Start one thread per queue and wait until each has posted its fetches. */
static int udev_start_queues(struct udev *d)
{
	sigset_t all, old;
	unsigned int started = 0;
	int ret = 0;

	d->queues = calloc(d->nr_queues, sizeof(*d->queues));
	if (!d->queues)
		return -ENOMEM;
	/* queue threads take no signals: the framework's handling stays put */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned int i = 0; i < d->nr_queues; i++) {
		struct uq *q = &d->queues[i];

		q->dev = d;
		q->id = i;
		q->rq = rblk_get_queue(d->r, i);
		ret = -pthread_create(&q->thread, NULL, uq_thread, q);
		if (ret) {
			log_err("ublk: starting queue thread %u: %s", i,
				strerror(-ret));
			break;
		}
		q->thread_started = true;
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	pthread_mutex_lock(&d->lock);
	while (d->nr_setup < started)
		pthread_cond_wait(&d->cond, &d->lock);
	if (!ret)
		ret = d->setup_ret;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static void udev_join_queues(struct udev *d)
{
	if (!d->queues)
		return;
	for (unsigned int i = 0; i < d->nr_queues; i++)
		if (d->queues[i].thread_started)
			pthread_join(d->queues[i].thread, NULL);
	free(d->queues);
	d->queues = NULL;
}

static int udev_open_cdev(struct udev *d)
{
	uint64_t deadline = now_ms() + CDEV_WAIT_MS;
	char path[32];
	int ret;

	snprintf(path, sizeof(path), "/dev/ublkc%d", d->dev_id);
	for (;;) {
		d->cdev_fd = open(path, O_RDWR | O_CLOEXEC);
		if (d->cdev_fd >= 0)
			return 0;
		ret = -errno;
		if (ret != -ENOENT || now_ms() >= deadline)
			break;
		usleep(10000);
	}
	log_err("ublk: %s: %s", path, strerror(-ret));
	return ret;
}

static int udev_set_params(struct udev *d, bool read_only)
{
	const struct rblk_info *info = d->info;
	unsigned int bs_shift = ilog2_u32(info->block_size);
	struct ublk_params p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.len = sizeof(p);
	p.types = UBLK_PARAM_TYPE_BASIC;
	p.basic.logical_bs_shift = (uint8_t)bs_shift;
	p.basic.physical_bs_shift = (uint8_t)bs_shift;
	p.basic.io_min_shift = (uint8_t)bs_shift;
	p.basic.io_opt_shift = (uint8_t)bs_shift;
	p.basic.max_sectors = d->buf_size >> SECTOR_SHIFT;
	p.basic.dev_sectors = info->size >> SECTOR_SHIFT;
	if (read_only)
		p.basic.attrs |= UBLK_ATTR_READ_ONLY;
	/* a volatile cache only where FLUSH is honoured; FUA only with it */
	if (d->features & RBLK_FEAT_FLUSH) {
		p.basic.attrs |= UBLK_ATTR_VOLATILE_CACHE;
		if (d->use_fua)
			p.basic.attrs |= UBLK_ATTR_FUA;
	}
	if (!read_only && (d->features & (RBLK_FEAT_TRIM | RBLK_FEAT_ZEROES))) {
		p.types |= UBLK_PARAM_TYPE_DISCARD;
		p.discard.discard_granularity = info->block_size;
		if (d->features & RBLK_FEAT_TRIM) {
			p.discard.max_discard_sectors = NODATA_MAX_SECTORS;
			p.discard.max_discard_segments = 1;
		}
		if (d->features & RBLK_FEAT_ZEROES)
			p.discard.max_write_zeroes_sectors = NODATA_MAX_SECTORS;
	}
	ret = uctrl_cmd(&d->ctrl, UBLK_U_CMD_SET_PARAMS, (uint32_t)d->dev_id,
			&p, sizeof(p), 0);
	if (ret)
		log_err("ublk: SET_PARAMS on device %d: %s", d->dev_id,
			strerror(-ret));
	return ret;
}

/* New device: ADD_DEV, SET_PARAMS, open /dev/ublkcN. */
static int udev_create(struct udev *d, const struct map_opts *o)
{
	const struct rblk_info *info = d->info;
	struct ublksrv_ctrl_dev_info *di = &d->di;
	uint64_t want = 0;
	unsigned int depth;
	int ret;

	depth = info->queue_depth;
	if (o->queue_depth && o->queue_depth < depth)
		depth = o->queue_depth;
	depth = MIN(depth, (unsigned int)UBLK_MAX_QUEUE_DEPTH);
	/* GET_FEATURES missing (before 6.5): ask; ADD_DEV drops what it lacks
	 */
	if (!d->ctrl.features || (d->ctrl.features & UBLK_F_USER_RECOVERY))
		want |= UBLK_F_USER_RECOVERY;
	if (!d->ctrl.features ||
	    (d->ctrl.features & UBLK_F_USER_RECOVERY_REISSUE))
		want |= UBLK_F_USER_RECOVERY_REISSUE;
	if (d->ctrl.features & UBLK_F_CMD_IOCTL_ENCODE)
		want |= UBLK_F_CMD_IOCTL_ENCODE;

	memset(di, 0, sizeof(*di));
	di->nr_hw_queues = (uint16_t)info->queues;
	di->queue_depth = (uint16_t)depth;
	di->max_io_buf_bytes = info->max_io;
	di->dev_id = o->dev_id >= 0 ? (uint32_t)o->dev_id : UINT32_MAX;
	di->flags = want;
	ret = uctrl_cmd(&d->ctrl, UBLK_U_CMD_ADD_DEV, di->dev_id, di,
			sizeof(*di), 0);
	if (ret) {
		if (ret == -EEXIST)
			log_err("ublk: device %d already exists", o->dev_id);
		else
			log_err("ublk: ADD_DEV: %s", strerror(-ret));
		return ret;
	}
	d->held = true;
	d->dev_id = (int)di->dev_id;
	d->nr_queues = di->nr_hw_queues;
	d->depth = di->queue_depth;
	d->buf_size = di->max_io_buf_bytes;
	d->io_ioctl_encode = di->flags & UBLK_F_CMD_IOCTL_ENCODE;
	if (d->nr_queues < info->queues)
		log_info(
		    "ublk: the kernel gave device %d %u hardware queues (one per CPU); %u rblk queues stay idle",
		    d->dev_id, d->nr_queues, info->queues - d->nr_queues);
	if (!d->nr_queues || !d->depth || d->buf_size < info->block_size) {
		log_err("ublk: ADD_DEV returned an unusable geometry");
		return -EPROTO;
	}
	log_info(
	    "ublk: added device %d: %u queues x %u tags, %u-byte I/O, flags 0x%llx%s",
	    d->dev_id, d->nr_queues, d->depth, d->buf_size,
	    (unsigned long long)di->flags,
	    di->flags & UBLK_F_USER_RECOVERY ? " (recoverable)" : "");
	ret = udev_set_params(d, o->read_only ||
				     (info->features & RBLK_FEAT_READ_ONLY));
	if (ret)
		return ret;
	return udev_open_cdev(d);
}

/*
 * Re-attach to device o->dev_id (o->recover), whose daemon died: check that this
 * session fits it, START_USER_RECOVERY, open /dev/ublkcN.
 */
static int udev_recover_prepare(struct udev *d, const struct map_opts *o)
{
	const struct rblk_info *info = d->info;
	struct ublksrv_ctrl_dev_info *di = &d->di;
	uint64_t start = now_ms(), deadline = start + RECOVERY_WAIT_MS;
	bool said = false;
	struct ublk_params p;
	int ret;

	d->dev_id = o->dev_id;
	ret = uctrl_get_info(&d->ctrl, d->dev_id, di);
	if (ret) {
		log_err("ublk: no device %d to recover (%s)", d->dev_id,
			strerror(-ret));
		return ret;
	}
	if (!(di->flags & UBLK_F_USER_RECOVERY)) {
		log_err(
		    "ublk: device %d was created without user recovery; it cannot be re-attached",
		    d->dev_id);
		return -EOPNOTSUPP;
	}
	if (di->nr_hw_queues != info->queues) {
		log_err(
		    "ublk: device %d has %u hardware queues but the session has %u: map with --queues %u",
		    d->dev_id, di->nr_hw_queues, info->queues,
		    di->nr_hw_queues);
		return -EINVAL;
	}
	memset(&p, 0, sizeof(p));
	p.len = sizeof(p);
	ret = uctrl_cmd(&d->ctrl, UBLK_U_CMD_GET_PARAMS, (uint32_t)d->dev_id,
			&p, sizeof(p), 0);
	if (ret) {
		log_err("ublk: GET_PARAMS on device %d: %s", d->dev_id,
			strerror(-ret));
		return ret;
	}
	if (p.basic.dev_sectors != info->size >> SECTOR_SHIFT ||
	    (1u << p.basic.logical_bs_shift) != info->block_size) {
		log_err(
		    "ublk: device %d (%llu bytes, %u-byte blocks) is not this volume (%llu bytes, %u-byte blocks)",
		    d->dev_id,
		    (unsigned long long)p.basic.dev_sectors << SECTOR_SHIFT,
		    1u << p.basic.logical_bs_shift,
		    (unsigned long long)info->size, info->block_size);
		return -EINVAL;
	}
	/*
	 * -EBUSY until the old daemon's /dev/ublkcN is closed and the kernel
	 * has quiesced the device (after its requests time out, when every
	 * tag was in flight). A device still served, or already stopped,
	 * will never get there.
	 */
	for (;;) {
		ret = uctrl_cmd(&d->ctrl, UBLK_U_CMD_START_USER_RECOVERY,
				(uint32_t)d->dev_id, NULL, 0, 0);
		if (ret != -EBUSY || now_ms() >= deadline)
			break;
		if (uctrl_get_info(&d->ctrl, d->dev_id, di))
			break;
		if (di->state == UBLK_S_DEV_DEAD) {
			log_err(
			    "ublk: device %d is stopped; it cannot be recovered (unmap it)",
			    d->dev_id);
			return -ENODEV;
		}
		/* a daemon just killed may take a moment to exit */
		if (di->state == UBLK_S_DEV_LIVE &&
		    pid_alive(di->ublksrv_pid) &&
		    now_ms() >= start + LIVE_GRACE_MS) {
			log_err("ublk: device %d is live, served by pid %d",
				d->dev_id, di->ublksrv_pid);
			return -EBUSY;
		}
		if (!said) {
			log_info(
			    "ublk: device %d is still quiescing; waiting up to %d s",
			    d->dev_id, RECOVERY_WAIT_MS / 1000);
			said = true;
		}
		usleep(100000);
	}
	if (ret) {
		log_err("ublk: START_USER_RECOVERY on device %d: %s", d->dev_id,
			strerror(-ret));
		return ret;
	}
	d->held = true;
	d->recovering = true;
	d->nr_queues = di->nr_hw_queues;
	d->depth = di->queue_depth;
	d->buf_size = di->max_io_buf_bytes;
	d->io_ioctl_encode = di->flags & UBLK_F_CMD_IOCTL_ENCODE;
	if (d->depth > info->queue_depth)
		log_info(
		    "ublk: device %d has %u tags per queue, the session %u; requests beyond wait their turn",
		    d->dev_id, d->depth, info->queue_depth);
	return udev_open_cdev(d);
}

/*
 * The block layer's request timeout. ublk has no parameter for it; the
 * queue's io_timeout attribute is the same knob. A privileged ublk device
 * only acts on expiry when its daemon is dying (the kernel then aborts the
 * queue, which lets a recovery start sooner); otherwise the timer rearms.
 * Best effort.
 */
static void udev_set_io_timeout(struct udev *d, unsigned int secs)
{
	char path[64], val[32];
	int fd, n;

	snprintf(path, sizeof(path), "/sys/block/ublkb%d/queue/io_timeout",
		 d->dev_id);
	n = snprintf(val, sizeof(val), "%llu", (unsigned long long)secs * 1000);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		log_warn("ublk: cannot set %s to %s ms: %s", path, val,
			 strerror(errno));
	if (fd >= 0)
		close(fd);
}

static int udev_wait_stop(struct udev *d, struct map_ctx *ctx)
{
	struct pollfd p[2] = {
	    {.fd = map_stop_fd(ctx), .events = POLLIN},
	    {.fd = d->exit_efd, .events = POLLIN},
	};

	while (!map_should_stop(ctx)) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("ublk: poll: %s", strerror(errno));
			return -errno;
		}
		if (p[0].revents)
			return 0;
		if (p[1].revents) {
			log_warn(
			    "ublk: device %d: a queue ended on its own (device removed?); shutting down",
			    d->dev_id);
			return -ENODEV;
		}
	}
	return 0;
}

/*
 * Tear down. remove: STOP_DEV and DEL_DEV (normal unmap, failed create);
 * otherwise only leave (failed recovery: the kernel keeps the device
 * quiesced with its I/O queued for the next attempt).
 */
static void udev_shutdown(struct udev *d, bool remove)
{
	int ret;

	if (!remove)
		atomic_store(&d->abandon, true);
	efd_signal(d->stop_efd);
	if (remove && d->held) {
		/* in-flight requests finish (queue threads keep serving) */
		ret = uctrl_cmd(&d->ctrl, UBLK_U_CMD_STOP_DEV,
				(uint32_t)d->dev_id, NULL, 0, 0);
		if (ret && ret != -ENODEV)
			log_warn("ublk: STOP_DEV on device %d: %s", d->dev_id,
				 strerror(-ret));
	}
	udev_join_queues(d);
	if (d->cdev_fd >= 0)
		close(d->cdev_fd);
	d->cdev_fd = -1;
	if (remove && d->held) {
		ret = uctrl_del_dev(&d->ctrl, d->dev_id);
		if (ret && ret != -ENODEV)
			log_warn("ublk: DEL_DEV on device %d: %s", d->dev_id,
				 strerror(-ret));
		else
			log_info("ublk: removed device %d", d->dev_id);
	}
}

static int ublk_serve(struct map_ctx *ctx, struct rblk *r,
		      const struct map_opts *o)
{
	const struct rblk_info *info = rblk_get_info(r);
	char why[256], path[32];
	struct udev *d;
	int ret;

	if (!IS_POW2(info->block_size) || info->block_size < 512 ||
	    info->block_size > page_size()) {
		log_err("ublk: block size %u is not supported (512 to %zu)",
			info->block_size, page_size());
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->r = r;
	d->info = info;
	d->features = info->features;
	d->use_fua = (info->features & RBLK_FEAT_FUA) &&
		     (info->features & RBLK_FEAT_FLUSH);
	d->dev_id = -1;
	d->cdev_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	d->exit_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->stop_efd < 0 || d->exit_efd < 0) {
		ret = -errno;
		log_err("ublk: eventfd: %s", strerror(-ret));
		goto out_close_efds;
	}
	ret = uctrl_open(&d->ctrl, why, sizeof(why));
	if (ret) {
		log_err("ublk: %s", why);
		goto out_close_efds;
	}

	if (o->recover)
		ret = udev_recover_prepare(d, o);
	else
		ret = udev_create(d, o);
	if (ret)
		goto out_shutdown;
	ret = udev_start_queues(d);
	if (ret)
		goto out_shutdown;
	if (d->recovering) {
		/* returns once every queue has fetched; queued I/O resumes */
		ret =
		    uctrl_cmd(&d->ctrl, UBLK_U_CMD_END_USER_RECOVERY,
			      (uint32_t)d->dev_id, NULL, 0, (uint64_t)getpid());
		if (ret) {
			log_err("ublk: END_USER_RECOVERY on device %d: %s",
				d->dev_id, strerror(-ret));
			goto out_shutdown;
		}
		d->recovering = false;
		log_info("ublk: device %d recovered", d->dev_id);
	} else {
		/* returns once every queue has fetched and the disk is added */
		ret =
		    uctrl_cmd(&d->ctrl, UBLK_U_CMD_START_DEV,
			      (uint32_t)d->dev_id, NULL, 0, (uint64_t)getpid());
		if (ret) {
			log_err("ublk: START_DEV on device %d: %s", d->dev_id,
				strerror(-ret));
			goto out_shutdown;
		}
	}
	if (o->io_timeout_s)
		udev_set_io_timeout(d, o->io_timeout_s);
	snprintf(path, sizeof(path), "/dev/ublkb%d", d->dev_id);
	map_ready(ctx, path, d->dev_id);
	ret = udev_wait_stop(d, ctx);

out_shutdown:
	/*
	 * A failed recovery leaves the device to the kernel, quiesced with
	 * its I/O queued, so that another attempt (or detach) can follow;
	 * everything else removes what this call created or served.
	 */
	udev_shutdown(d, !d->recovering);
	uctrl_close(&d->ctrl);
out_close_efds:
	if (d->stop_efd >= 0)
		close(d->stop_efd);
	if (d->exit_efd >= 0)
		close(d->exit_efd);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return ret;
}

/* ---- probe, detach ------------------------------------------------------ */

static int ublk_probe(char *why, size_t why_len)
{
	struct uctrl c;
	int ret = uctrl_open(&c, why, why_len);

	if (ret)
		return ret;
	uctrl_close(&c);
	return 0;
}

static int ublk_detach(int dev_id)
{
	struct ublksrv_ctrl_dev_info di;
	char why[256];
	struct uctrl c;
	int ret;

	ret = uctrl_open(&c, why, sizeof(why));
	if (ret) {
		log_err("ublk: %s", why);
		return ret;
	}
	ret = uctrl_get_info(&c, dev_id, &di);
	if (ret) {
		log_err("ublk: no device %d (%s)", dev_id, strerror(-ret));
		goto out_close;
	}
	if (di.state == UBLK_S_DEV_LIVE && pid_alive(di.ublksrv_pid)) {
		log_err("ublk: device %d is still served by pid %d", dev_id,
			di.ublksrv_pid);
		ret = -EBUSY;
		goto out_close;
	}
	/* a quiesced (recoverable) device fails its queued I/O here */
	ret = uctrl_cmd(&c, UBLK_U_CMD_STOP_DEV, (uint32_t)dev_id, NULL, 0, 0);
	if (ret && ret != -ENODEV)
		log_warn("ublk: STOP_DEV on device %d: %s", dev_id,
			 strerror(-ret));
	ret = uctrl_del_dev(&c, dev_id);
	if (ret)
		log_err("ublk: DEL_DEV on device %d: %s", dev_id,
			strerror(-ret));
out_close:
	uctrl_close(&c);
	return ret;
}

/* Hardware queues of /dev/ublkbID (entries of its mq/ directory), or -errno. */
static int ublk_recover_queues(int id)
{
	char path[64];
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/block/ublkb%d/mq", id);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((de = readdir(dir)))
		n += de->d_name[0] != '.';
	closedir(dir);
	return n;
}

const struct frontend_ops frontend_ublk_ops = {
    .name = "ublk",
    .dev_prefix = "ublkb",
    .probe = ublk_probe,
    .serve = ublk_serve,
    .detach = ublk_detach,
    .recover_queues = ublk_recover_queues,
};
