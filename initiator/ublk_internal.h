/* SPDX-License-Identifier: MIT */
/*
 * What the ublk front end's files share (see ublk.c for the design):
 *   ublk.c          the control channel and the device: add, start, stop,
 *                   delete, serve(), probe, detach, frontend_ublk_ops
 *   ublk_queue.c    the queue threads: FETCH/COMMIT on each queue's
 *                   io_uring, the data path to rblk, setup and teardown
 *   ublk_recover.c  re-attaching to a device whose daemon died
 * The per-I/O code lives in ublk_queue.c alone; nothing here is on that
 * path but the structures.
 */
#ifndef RBLK_INITIATOR_UBLK_INTERNAL_H
#define RBLK_INITIATOR_UBLK_INTERNAL_H

#include "map.h"
#include "ublk_compat.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/spin.h"

#define SECTOR_SHIFT 9

/* The control channel: /dev/ublk-control and a small 128-byte-SQE ring. */
struct uctrl {
	int fd;
	struct io_uring ring;
	uint64_t features; /* GET_FEATURES; 0 when the kernel predates it */
	bool ioctl_encode; /* send UBLK_U_CMD_* rather than legacy numbers */
};

struct udev;
struct utag; /* a tag's state: ublk_queue.c */

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
	struct spin_backoff spin; /* dev->spin_us: common/spin.h */
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
	uint64_t size;	      /* bytes the device has (or was said to lack) */
	bool use_fua;
	unsigned int spin_us; /* map_opts.poll_spin_us */

	struct uq *queues;
	int stop_efd; /* serve -> queues: stop (or abandon) now */
	int exit_efd; /* queue -> serve: a queue thread has ended */
	atomic_bool abandon;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int nr_setup; /* queues whose setup ended (either way) */
	int setup_ret;	       /* first failure */
};

static inline size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

static inline void efd_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0)
		log_warn("ublk: eventfd write: %s", strerror(errno));
}

/* ublk.c: the control channel and the device */
int uctrl_cmd(struct uctrl *c, unsigned int op, uint32_t dev_id, void *buf,
	      size_t len, uint64_t data0);
int uctrl_get_info(struct uctrl *c, int dev_id,
		   struct ublksrv_ctrl_dev_info *di);
int udev_open_cdev(struct udev *d);

/* ublk_queue.c: the body of queue q's thread (arg: its struct uq) */
void *uq_thread(void *arg);

/* ublk_recover.c */
bool ublk_pid_alive(pid_t pid);
int udev_recover_prepare(struct udev *d, const struct map_opts *o);
int ublk_recover_queues(int id);

#endif /* RBLK_INITIATOR_UBLK_INTERNAL_H */
