/* SPDX-License-Identifier: MIT */
/*
 * The NBD transmission phase, shared by `rblk nbd` (nbd_server.c, after
 * its handshake) and `rblk map --nbd` (nbd_kernel.c, where the kernel NBD
 * driver is the client on a socketpair and there is no handshake).
 *
 * One call to nbd_conn_run() serves one socket with one rblk queue on the
 * calling thread until the client is done: a non-blocking request reader
 * with a staging buffer, one validator, submission to the queue (which
 * holds what waits for a tag), reaping with rblk_poll(), simple replies
 * batched into sendmsg(), and a poll() loop that follows the
 * rblk_queue_arm() protocol. No locks: the caller must not touch the
 * socket or the queue from another thread while it runs.
 *
 * Buffers: READ and WRITE data live in the caller's pool of nslots slots
 * of slot_size bytes (registered with rblk_register_buffer() or not; the
 * engine does not care), one slot per request; a request larger than a
 * slot, or arriving when every slot is busy, gets a posix_memalign()'d
 * buffer that the library bounces, within max_buf bytes per run. Nothing
 * else is allocated per request.
 */
#ifndef RBLK_INITIATOR_NBD_CONN_H
#define RBLK_INITIATOR_NBD_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "rblk/rblk.h"

/*
 * What to do once the queue's rblk connection is gone (a submit or a
 * completion says -ENOTCONN or -ESHUTDOWN, or rblk_poll() fails).
 */
enum nbd_conn_qlost {
	/*
	 * Stop reading requests; what is in flight is answered
	 * NBD_ESHUTDOWN; the run then ends and the caller closes the
	 * socket. A user-space client reconnects or gives up (rblk nbd).
	 */
	NBD_CONN_QLOST_CLOSE,
	/*
	 * Keep the socket: every request, in flight or later, is answered
	 * NBD_EIO at once, so the kernel fails its bios without waiting for
	 * a timeout; the run goes on until DISC, EOF or abort (rblk map).
	 */
	NBD_CONN_QLOST_FAIL_EIO,
};

/* nbd_conn_opts.checks: where the validators of the two callers differ */
enum {
	/*
	 * NBD_CMD_FLAG_FUA is accepted (and ignored) on READ and FLUSH too,
	 * as docs/man/rblk.8 promises NBD clients. Without it FUA is valid
	 * on WRITE, TRIM and WRITE_ZEROES only.
	 */
	NBD_CONN_FUA_ON_ALL = 1u << 0,
	/*
	 * The flags of a FLUSH are not looked at (the kernel client; what it
	 * puts there is its business). Without it unknown flags on a FLUSH
	 * fail with NBD_EINVAL like on any other command.
	 */
	NBD_CONN_FLUSH_ANY_FLAGS = 1u << 1,
	/*
	 * A protocol error (bad request magic, a WRITE payload above
	 * NBD_MAX_PAYLOAD) drops the replies not yet sent and shuts the
	 * socket down at once (the kernel then sees a dead socket). Without
	 * it the engine only stops reading, answers what it holds and ends.
	 */
	NBD_CONN_PROTO_ERR_SHUTDOWN = 1u << 2,
};

struct nbd_conn_opts {
	int fd;			   /* connected socket, O_NONBLOCK set */
	struct rblk_queue *q;	   /* used by this run alone */
	const char *name;	   /* log prefix: "client 3 (unix)" */
	uint64_t size;		   /* export size in bytes */
	uint32_t block_size;	   /* offsets and lengths align to it */
	uint16_t tx_flags;	   /* NBD_FLAG_* advertised to the client */
	unsigned int checks;	   /* NBD_CONN_* bits above */
	enum nbd_conn_qlost qlost; /* policy once the queue is gone */
	/* requests at once; at most the queue's max_queued (rblk_opts) */
	unsigned int nreqs;
	void *pool;	       /* nslots * slot_size bytes */
	uint32_t slot_size;    /* the largest request a slot holds */
	uint32_t nslots;       /* >= 1 */
	int abort_fd;	       /* readable: stop reading and drain */
	unsigned int drain_ms; /* in-flight I/O allowed after abort */
	/*
	 * Heap bytes (buffers outside the pool) the run's requests may hold
	 * at once; 0: no limit. A READ or WRITE that would need more is not
	 * read off the socket until replies have freed enough (one request
	 * is always admitted, so a single maximal request still works): a
	 * client that does not read its replies stops being read.
	 */
	size_t max_buf;
	/*
	 * End the run when no byte moved on the socket for idle_ms while no
	 * request was in flight at the queue; 0: never.
	 */
	unsigned int idle_ms;
	/*
	 * Before sleeping, poll the socket and the queue without sleeping
	 * for up to spin_us microseconds, so that a reply or request that
	 * comes within it costs no sleep and wake-up; after a spin that
	 * found nothing, the next 1, 2, 4 ... 64 sleeps do not spin (reset
	 * by one that finds something). 0: sleep at once.
	 */
	unsigned int spin_us;
	/*
	 * Optional: called once, on the running thread, when the queue is
	 * found dead, before any request is answered for it.
	 */
	void (*queue_lost)(void *arg);
	void *arg;
	/*
	 * Kernel NBD: the session whose size bounds requests instead of
	 * size (the device grows with the volume, so the kernel may send
	 * past size once it has); NULL: size is the bound (an NBD client
	 * was told it).
	 */
	struct rblk *live_size;
};

/* Filled by nbd_conn_run() whatever it returns. */
struct nbd_conn_stats {
	uint64_t requests; /* request headers read, DISC included */
	uint64_t errors;   /* replies carrying an error */
	bool aborted;	   /* abort_fd fired during the run */
	/*
	 * rblk I/O was still in flight when the run ended: its buffers (pool
	 * slots and a few heap buffers the engine leaks on purpose) may be
	 * written by the library until rblk_close(); keep the pool.
	 */
	bool abandoned;
};

/*
 * The NBD transmission flags for a volume with rblk_info.features
 * `features`, served read-only when `read_only` (the caller's option or
 * RBLK_FEAT_READ_ONLY): both NBD paths advertise exactly these. FUA is
 * offered only beside FLUSH: without a volatile cache (no FLUSH) every
 * write is already durable, and the kernel, like ublk.c, ignores FUA
 * there. Multi-conn is always safe: a FLUSH is an fdatasync of the whole
 * backend.
 */
uint16_t nbd_conn_tx_flags(uint32_t features, bool read_only);

/*
 * Serve the transmission phase on o->fd until reading is over (DISC, EOF,
 * protocol error, abort, or a lost queue under NBD_CONN_QLOST_CLOSE) and
 * every request is answered or the socket is dead. After abort_fd fires,
 * rblk I/O in flight gets o->drain_ms. Does not close o->fd.
 *
 * Returns 0, -ENOMEM (setup), -ETIMEDOUT (drain expired, I/O abandoned)
 * or the -errno of a failed poll().
 */
int nbd_conn_run(const struct nbd_conn_opts *o, struct nbd_conn_stats *st);

/*
 * The NBD error for a -errno from rblk_submit() or a completion; q_lost is
 * the answer for -ENOTCONN and -ESHUTDOWN (the queue's connection is gone).
 */
uint32_t nbd_errno_to_nbd(int err, uint32_t q_lost);

#endif /* RBLK_INITIATOR_NBD_CONN_H */
