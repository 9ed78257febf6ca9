/* SPDX-License-Identifier: MIT */
/*
 * ublk recovery: re-attaching a new daemon to a device whose daemon died.
 *
 * Devices are created with UBLK_F_USER_RECOVERY and _REISSUE where the
 * kernel has them (ublk.c). When the daemon dies (kill -9), the kernel
 * quiesces the device and requeues its in-flight requests instead of
 * failing them; `rblk map --recover ID` then runs serve() with o->recover
 * (device o->dev_id): udev_recover_prepare() checks that the session fits
 * the device and issues START_USER_RECOVERY, new queue threads fetch, and
 * END_USER_RECOVERY (ublk.c) resumes the queued I/O on the new session.
 * The price: until then (or until detach() removes the device) I/O on it
 * waits.
 */
#include "ublk_internal.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>

#include "../common/util.h"

/* START_USER_RECOVERY answers -EBUSY until the old daemon is fully gone */
#define RECOVERY_WAIT_MS 90000
/* ... but a device whose daemon still runs after this is not recoverable */
#define LIVE_GRACE_MS 5000

/* A process that exists and is not a zombie. */
bool ublk_pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;

	if (pid <= 0 || (kill(pid, 0) && errno == ESRCH))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return true;
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && p[2] == 'Z');
}

/*
 * Whether device d->dev_id can take this session: it exists, was created
 * recoverable, and has the session's queues, size and block size. Leaves
 * its info in d->di.
 */
static int recover_check_fit(struct udev *d)
{
	const struct rblk_info *info = d->info;
	struct ublksrv_ctrl_dev_info *di = &d->di;
	struct ublk_params p;
	int ret;

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
	/* the volume may have grown since the device was made: still it */
	if (p.basic.dev_sectors > rblk_get_size(d->r) >> SECTOR_SHIFT ||
	    (1u << p.basic.logical_bs_shift) != info->block_size) {
		log_err(
		    "ublk: device %d (%llu bytes, %u-byte blocks) is not this volume (%llu bytes, %u-byte blocks)",
		    d->dev_id,
		    (unsigned long long)p.basic.dev_sectors << SECTOR_SHIFT,
		    1u << p.basic.logical_bs_shift,
		    (unsigned long long)info->size, info->block_size);
		return -EINVAL;
	}
	d->size = p.basic.dev_sectors << SECTOR_SHIFT;
	return 0;
}

/*
 * START_USER_RECOVERY on d->dev_id, retried while the kernel answers
 * -EBUSY: until the old daemon's /dev/ublkcN is closed and the kernel
 * has quiesced the device (after its requests time out, when every
 * tag was in flight). A device still served, or already stopped,
 * will never get there. Leaves the device's latest info in d->di.
 */
static int recover_start(struct udev *d)
{
	struct ublksrv_ctrl_dev_info *di = &d->di;
	uint64_t start = now_ms(), deadline = start + RECOVERY_WAIT_MS;
	bool said = false;
	int ret;

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
		    ublk_pid_alive(di->ublksrv_pid) &&
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
	if (ret)
		log_err("ublk: START_USER_RECOVERY on device %d: %s", d->dev_id,
			strerror(-ret));
	return ret;
}

/*
 * Re-attach to device o->dev_id (o->recover), whose daemon died: check
 * that this session fits it, START_USER_RECOVERY, open /dev/ublkcN.
 */
int udev_recover_prepare(struct udev *d, const struct map_opts *o)
{
	const struct rblk_info *info = d->info;
	struct ublksrv_ctrl_dev_info *di = &d->di;
	int ret;

	d->dev_id = o->dev_id;
	ret = recover_check_fit(d);
	if (ret)
		return ret;
	ret = recover_start(d);
	if (ret)
		return ret;
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

/* Hardware queues of /dev/ublkbID (entries of its mq/ directory), or -errno. */
int ublk_recover_queues(int id)
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
