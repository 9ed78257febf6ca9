/* SPDX-License-Identifier: MIT */
/*
 * The ublk front end: an rblk volume as /dev/ublkbN. This file: the
 * control channel and the device (add, start, stop, delete, serve, probe,
 * detach); the queue threads' I/O loop is ublk_queue.c, recovery of a
 * device whose daemon died is ublk_recover.c, ublk_internal.h what they
 * share.
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
 *   queue thread  (one per hardware queue q, ublk_queue.c): owns rblk
 *                 queue q, its own io_uring, its descriptor mapping and its
 *                 buffers; it is the only thread that touches any of them.
 *                 The kernel binds the queue to this thread (ubq_daemon)
 *                 when its last FETCH arrives, so every command for q must
 *                 come from it.
 *
 * Recovery: devices are created with UBLK_F_USER_RECOVERY and _REISSUE
 * where the kernel has them, so that `rblk map --recover ID` can take over
 * a device whose daemon died (ublk_recover.c).
 *
 * Rings: the control ring needs 128-byte SQEs (the kernel refuses control
 * commands without IORING_SETUP_SQE128); the queue rings use plain ones.
 */
#include "ublk_internal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

#include "../common/util.h"

#define UBLK_CONTROL_PATH "/dev/ublk-control"
/* TRIM / WRITE_ZEROES per request: the library splits at 1 GiB anyway */
#define NODATA_MAX_SECTORS ((1u << 30) >> SECTOR_SHIFT)
/* /dev/ublkcN appears at ADD_DEV; udev may create it a little later */
#define CDEV_WAIT_MS 5000

_Static_assert(sizeof(struct ublksrv_ctrl_cmd) == 32,
	       "control command: the size its ioctl encoding names");
_Static_assert(sizeof(struct ublksrv_ctrl_cmd) <= 80,
	       "control command fits the command area of a 128-byte SQE");
_Static_assert(sizeof(struct ublksrv_ctrl_dev_info) == 64, "dev_info layout");

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
int uctrl_cmd(struct uctrl *c, unsigned int op, uint32_t dev_id, void *buf,
	      size_t len, uint64_t data0)
{
	bool ioctl_only = op == UBLK_U_CMD_GET_FEATURES ||
			  op == UBLK_U_CMD_DEL_DEV_ASYNC ||
			  op == UBLK_U_CMD_UPDATE_SIZE;
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

int uctrl_get_info(struct uctrl *c, int dev_id,
		   struct ublksrv_ctrl_dev_info *di)
{
	memset(di, 0, sizeof(*di));
	return uctrl_cmd(c, UBLK_U_CMD_GET_DEV_INFO, (uint32_t)dev_id, di,
			 sizeof(*di), 0);
}

static unsigned int ilog2_u32(uint32_t v)
{
	return 31u - (unsigned int)__builtin_clz(v);
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

int udev_open_cdev(struct udev *d)
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
	d->size = rblk_get_size(d->r);
	p.basic.dev_sectors = d->size >> SECTOR_SHIFT;
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
	/* each tag's buffer is pinned: requests of at most MAP_MAX_REQUEST */
	di->max_io_buf_bytes = MIN(info->max_io, MAP_MAX_REQUEST);
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

/*
 * The volume grew: UPDATE_SIZE where the driver has it (Linux 6.16+,
 * UBLK_F_UPDATE_SIZE in GET_FEATURES); elsewhere (6.12 included) the
 * device cannot change size while it exists, and the log says what the
 * user does. Serve thread. A shrink is never passed on.
 */
static void udev_resize(struct udev *d, struct map_ctx *ctx)
{
	uint64_t size = rblk_get_size(d->r), v;
	int ret;

	if (read(map_resize_fd(ctx), &v, sizeof(v)) < 0 || size <= d->size)
		return;
	if (!(d->ctrl.features & UBLK_F_UPDATE_SIZE)) {
		log_warn(
		    "ublk: the volume grew from %llu to %llu bytes, but this kernel's ublk cannot resize a live device (UPDATE_SIZE came in Linux 6.16): /dev/ublkb%d keeps %llu bytes; to use the rest, unmount it, 'rblk unmap /dev/ublkb%d' and map it again (or map it with --nbd, which grows live)",
		    (unsigned long long)d->size, (unsigned long long)size,
		    d->dev_id, (unsigned long long)d->size, d->dev_id);
		d->size = size; /* said once per change */
		return;
	}
	ret = uctrl_cmd(&d->ctrl, UBLK_U_CMD_UPDATE_SIZE, (uint32_t)d->dev_id,
			NULL, 0, size >> SECTOR_SHIFT);
	if (ret) {
		log_err("ublk: UPDATE_SIZE of device %d to %llu bytes: %s (it "
			"keeps %llu bytes)",
			d->dev_id, (unsigned long long)size, strerror(-ret),
			(unsigned long long)d->size);
		return;
	}
	log_info("ublk: device %d grown from %llu to %llu bytes", d->dev_id,
		 (unsigned long long)d->size, (unsigned long long)size);
	d->size = size;
}

static int udev_wait_stop(struct udev *d, struct map_ctx *ctx)
{
	struct pollfd p[3] = {
	    {.fd = map_stop_fd(ctx), .events = POLLIN},
	    {.fd = d->exit_efd, .events = POLLIN},
	    {.fd = map_resize_fd(ctx), .events = POLLIN},
	};

	while (!map_should_stop(ctx)) {
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("ublk: poll: %s", strerror(errno));
			return -errno;
		}
		if (p[0].revents)
			return 0;
		if (p[2].revents)
			udev_resize(d, ctx);
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
	d->spin_us = o->poll_spin_us;
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
	if (d->size < rblk_get_size(r)) /* grown before it was made */
		efd_signal(map_resize_fd(ctx));
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
	if (di.state == UBLK_S_DEV_LIVE && ublk_pid_alive(di.ublksrv_pid)) {
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
const struct frontend_ops frontend_ublk_ops = {
    .name = "ublk",
    .dev_prefix = "ublkb",
    .probe = ublk_probe,
    .serve = ublk_serve,
    .detach = ublk_detach,
    .recover_queues = ublk_recover_queues,
};
