/* SPDX-License-Identifier: MIT */
/*
 * Presenting an rblk volume as a local block device: `rblk map`, `rblk
 * unmap`, `rblk list`. The framework (initiator/map.c) owns the command
 * line, the daemon process that keeps the session alive, the records that
 * `rblk list` reads, and unmapping; a *front end* (struct frontend_ops)
 * owns one kernel interface: ublk (initiator/ublk.c) or the kernel NBD
 * driver over netlink (initiator/nbd_kernel.c).
 *
 * Lifecycle of one mapping:
 *   rblk map URL        parent: picks the front end (--ublk / --nbd / auto:
 *                       ublk when its probe() succeeds, else nbd), forks
 *   daemon (child)      opens the rblk session (one queue per hardware
 *                       queue / NBD socket), calls frontend->serve(), which
 *                       creates the device, calls map_ready() with its path
 *                       (the parent then prints it and exits 0), and serves
 *                       I/O until map_stop_fd() becomes readable, then
 *                       removes the device and returns
 *   rblk unmap DEV      finds DEV's record, signals the daemon, waits for it
 *                       to exit; if the daemon is gone, frontend->detach()
 *   rblk list           shows the records: device, state, latest error
 *
 * Files: map.c (rblk map), map_daemon.c (the daemon, this contract),
 * map_record.c (records), unmap.c, list.c; map_internal.h joins them.
 */
#ifndef RBLK_INITIATOR_MAP_H
#define RBLK_INITIATOR_MAP_H

#include <stdbool.h>

#include <rblk/rblk.h>

#include "initiator/cli.h"

struct map_opts {
	const char *url;
	unsigned int queues; /* rblk queues = hardware queues / NBD sockets */
	unsigned int queue_depth; /* per queue */
	bool read_only;
	int direct; /* enum rblk_direct */
	int dev_id; /* -1: any free device number */
	/*
	 * Take over device dev_id, whose daemon died, instead of creating
	 * one (`rblk map --recover N`; only front ends with recover_queues).
	 */
	bool recover;
	unsigned int io_timeout_s; /* kernel request timeout; 0: default */
	struct cli_auth auth;	   /* --host-name, --key-file, --mutual-auth */
	struct cli_paths paths;	   /* --path, --failback */
	struct cli_io io;	   /* --io-timeout, --io-retries */
	int reconnect_delay_ms;	   /* rblk_opts: what the library does when */
	int ctrl_loss_timeout_s;   /* a connection is lost (I/O waits) */
	/*
	 * A queue thread with I/O out at the target polls for its answers
	 * (and for new requests) this long before it sleeps (common/spin.h
	 * backs off where that finds nothing); 0: sleep at once.
	 */
	unsigned int poll_spin_us;
};

/*
 * The largest request a mapped device (ublk, kernel NBD) passes to us: the
 * size of each tag's registered buffer. depth x this is what a queue pins
 * (64 x 128 KiB = 8 MiB; `rblk map --queues 4` about 33 MiB in all, where
 * depth x max_io was 64 MiB a queue). The kernel splits larger bios; at
 * 128 KiB a request already streams at the link's rate.
 */
#define MAP_MAX_REQUEST (128u << 10)

/* --poll-spin-us default: what `rblk nbd` and the fio engine spin */
#define MAP_DEFAULT_SPIN_US 50u

struct map_ctx; /* owned by map.c */

/* Front end: tell the framework the device exists (e.g. "/dev/nbd0"). */
void map_ready(struct map_ctx *ctx, const char *dev_path, int dev_id);
/* Readable (eventfd/pipe) once unmap or SIGTERM asks the daemon to stop. */
int map_stop_fd(struct map_ctx *ctx);
bool map_should_stop(struct map_ctx *ctx);
/*
 * Readable (an eventfd: read it to clear) when the volume grew (librblk's
 * opts.on_resize, which runs on a queue thread inside rblk_poll(): the
 * front end resizes its device from the thread that waits on
 * map_stop_fd(), never from a queue thread, which must keep serving the
 * I/O a resize may wait for). rblk_get_size() says the size.
 */
int map_resize_fd(struct map_ctx *ctx);
/*
 * Front end, any thread: the mapping's latest error, in words ("ADD_DEV:
 * Operation not permitted"). It goes to the mapping's record: `rblk list`
 * shows it, and when serve() fails before map_ready() it is what `rblk
 * map` says. Any error line the daemon logs is recorded the same way, so
 * a front end that logs its failure with log_err() need not call this.
 */
void map_set_error(struct map_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

struct frontend_ops {
	const char *name; /* "ublk", "nbd" */
	/* device node name before its number: /dev/PREFIXn ("ublkb", "nbd") */
	const char *dev_prefix;
	/*
	 * Can this front end work here (driver loaded, control device
	 * present)? 0, or -errno with a reason written to why.
	 */
	int (*probe)(char *why, size_t why_len);
	/*
	 * Daemon process. Create the device for session r (already open with
	 * o->queues queues), call map_ready(), serve I/O until map_stop_fd()
	 * is readable (or the session dies: then fail I/O, never hang), tear
	 * the device down and return 0 or -errno. Errors before map_ready()
	 * are reported by the framework to the waiting `rblk map` process.
	 */
	int (*serve)(struct map_ctx *ctx, struct rblk *r,
		     const struct map_opts *o);
	/* Any process: remove dev_id whose daemon is gone. 0 or -errno. */
	int (*detach)(int dev_id);
	/*
	 * Optional (NULL: the front end cannot take a device over). `rblk
	 * map` process: the number of queues device dev_id, left by a dead
	 * daemon, was made with (the new session must match), or -errno.
	 * A device whose daemon died then stays for `rblk map --recover`.
	 */
	int (*recover_queues)(int dev_id);
};

extern const struct frontend_ops frontend_ublk_ops;
extern const struct frontend_ops frontend_nbd_ops;

#endif
