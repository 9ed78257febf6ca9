/* SPDX-License-Identifier: MIT */
/*
 * librblk - the rblk initiator library.
 *
 * A session (struct rblk) is one export on one target, reached through N
 * queues. Each queue is one connection (one RC QP or one TCP socket) with its
 * own tags and buffers; a queue is used by one thread at a time and takes no
 * locks, so the fast way to use the library is one thread per queue.
 *
 *   struct rblk_opts o;
 *   struct rblk *r;
 *   rblk_opts_init(&o);
 *   o.queues = 4;
 *   if (rblk_open("rdma://192.0.2.1/vol0", &o, &r) < 0)
 *           fprintf(stderr, "%s\n", rblk_last_error());
 *
 * Every function returns 0 (or a count) on success and a negative errno on
 * failure; rblk_last_error() then holds a sentence saying what went wrong
 * (per thread). Errors that come from the target map as follows: -ENOENT
 * no such export, -EROFS read-only volume, -ERANGE beyond the end,
 * -EINVAL misaligned or malformed, -EOPNOTSUPP not offered by the volume,
 * -EIO backend failure, -ENOSPC target out of space, -ECONNREFUSED refused,
 * -EPROTONOSUPPORT version mismatch, -ENOTCONN the queue's connection died
 * and could not be brought back (see "Connection loss" below), -EACCES
 * authentication failed or host not allowed, -ENOKEY the target requires
 * authentication and no key file was given.
 *
 * Connection loss. Each queue watches its own connection: a transport error
 * (target killed or restarted, link down) or a KEEPALIVE left unanswered
 * (a queue that heard nothing for keepalive_ms sends one; no answer within
 * another keepalive_ms and the connection counts as dead, so a hung target
 * is noticed within 3 * keepalive_ms) drops it. The queue then reconnects:
 * the first attempt at once, then after reconnect_delay_ms, doubling up to
 * 10 s (or reconnect_delay_ms if larger), each attempt a fresh connect and
 * login bounded by timeout_ms. Once back, every I/O that had not completed
 * is sent again on the same tag (a write not acknowledged is written again;
 * an acknowledged write is on the target already, so none is lost; FLUSH and
 * FUA keep their meaning). Meanwhile rblk_submit() queues new I/O (up to
 * max_queued I/Os, then -EAGAIN as usual) and rblk_poll() returns nothing.
 * After ctrl_loss_timeout_s without a connection (0: at once, which is the
 * behaviour without reconnect; -1: never) the queue fails for good: every
 * I/O completes with -ENOTCONN and so do later calls. A target that comes
 * back with a different volume (size, block size, max_io, queue depth or
 * features) fails the queue at once with -EPROTO and says why; one that
 * answers without the export (-ENOENT: removed) or refuses the login
 * (-EACCES, -ENOKEY) fails it at once too.
 *
 * Multipath. With opts.paths, a queue that loses its connection tries the
 * next path at once (then the others in turn, the lost one last), with
 * the same reissue of unfinished I/O; the refusals above then only skip
 * that path, and the queue fails when ctrl_loss_timeout_s passes with no
 * path. The session keeps its queues on one path: a queue that sees
 * another queue move moves too, between commands (it stops issuing,
 * lets what is in flight complete, then reconnects on that path), and so
 * does failback to the preferred path (opts.failback_ms). Every path
 * must be the same volume (vol_id); reaching one volume through two
 * targets at once is never done on purpose, but a queue may briefly use
 * another path than its siblings while they follow.
 *
 * All of it runs inside the caller's own calls - rblk_poll(), and
 * rblk_queue_arm() - on the thread that owns the queue; there are no
 * library threads. Timers are visible to event loops: rblk_queue_fd() is
 * the epoll descriptor of the queue's poll group, which holds the
 * connection and watches a timerfd, so it becomes
 * readable when a keep-alive or reconnect step is due as well as when
 * completions wait. A loop that sleeps on it (after rblk_queue_arm()) and
 * calls rblk_poll() when it wakes keeps the queue alive; one that sleeps
 * elsewhere should call rblk_poll(q, c, n, 0) at least every keepalive_ms.
 * A reconnect attempt blocks the calling thread for up to timeout_ms (a
 * refused connection returns at once).
 *
 * Command timeouts. Every command has a deadline, io_timeout_ms after it
 * was posted (a pull READ's RDMA READ and window return included). When
 * one passes, the queue logs the command and drops the connection (the
 * target may still hold the command; only a new connection frees its
 * tag and buffers) and reconnects as above. Each time a connection fails
 * with a command on it, the command counts one failure; after
 * io_retries + 1 failures its I/O completes with -ETIMEDOUT (the last
 * failure was its deadline) or -EIO (the connection broke under it) and
 * is not sent again. A silent target therefore fails an I/O after about
 * io_timeout_ms x (io_retries + 1) plus the reconnect delays.
 *
 * Unstable targets. A connection counts as stable once a command
 * completed on it or it stayed up RBLK_STABLE_MS. While none is, losses
 * belong to one outage: the attempts keep backing off from the last
 * delay (after the first, at most one per reconnect_delay_ms, doubling to
 * 10 s) and ctrl_loss_timeout_s runs from the first loss, so a target
 * that logs in and then breaks every connection fails the I/O once the
 * loss timeout passes. Loss and reconnect lines are rate-limited per
 * queue (a burst of 5, then about 4 a minute, with a count of those left
 * out). rblk_queue_stats() counts timeouts, losses and failed I/O.
 */
#ifndef RBLK_RBLK_H
#define RBLK_RBLK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RBLK_VERSION_STRING "0.1.0"

struct rblk;
struct rblk_queue;

/* rblk_opts.flags */
#define RBLK_OPEN_READ_ONLY (1u << 0) /* log in read-only */
/*
 * How read data moves. Neither flag: the transport's preference (push on
 * tcp, where an RDMA READ costs the target a round trip through its CPU;
 * pull on rdma, where the HCA serves it). Both: -EINVAL.
 */
#define RBLK_OPEN_PUSH_READS (1u << 1) /* target RDMA WRITEs read data */
#define RBLK_OPEN_PULL_READS (1u << 3) /* initiator RDMA READs the slot */
/* Refuse a target that does not prove it holds our secret (AUTH_RESULT). */
#define RBLK_OPEN_MUTUAL_AUTH (1u << 2)

/* rblk_opts.direct: use the volume's direct access (RBLK_FEAT_DIRECT) */
enum rblk_direct {
	RBLK_DIRECT_AUTO = 0, /* when the export offers it (default) */
	RBLK_DIRECT_ON, /* required: rblk_open fails with -EOPNOTSUPP without */
	RBLK_DIRECT_OFF, /* always the slot path */
};

struct rblk_opts {
	size_t opts_size;    /* set by rblk_opts_init(); lets the struct grow */
	unsigned int queues; /* connections to open; default 1 */
	unsigned int queue_depth; /* requested per queue; default 64 */
	unsigned int max_io; /* requested bytes per command; default 1 MiB */
	int timeout_ms;	     /* connect and login timeout; default 10000 */
	const char
	    *host_name;	    /* identifies us to the target; default hostname */
	unsigned int flags; /* RBLK_OPEN_* */
	/*
	 * File holding this host's shared secret (the target's [host NAME]
	 * secret; mode 0600 or stricter). NULL: no authentication. With it,
	 * the target may challenge us; a wrong secret fails with -EACCES,
	 * a target that needs one we lack with -ENOKEY.
	 */
	const char *key_file;
	int direct; /* enum rblk_direct */
	/*
	 * Adaptive polling: before rblk_poll() sleeps, it polls the
	 * transport this long (microseconds) without sleeping; 0 (default)
	 * sleeps at once. Trades CPU for completion latency.
	 */
	unsigned int poll_spin_us;
	/* reconnect and keep-alive, per queue: see "Connection loss" below */
	int reconnect_delay_ms;	 /* first wait between attempts; default 1000 */
	int ctrl_loss_timeout_s; /* give up after; default 60, 0 at once, -1
				    never */
	int keepalive_ms; /* probe an idle connection; default 5000, 0 off */
	/*
	 * Backlog, per queue: the most I/Os rblk_submit() accepts that are
	 * not yet reaped by rblk_poll() (on the wire, waiting for a tag, or
	 * completed). Beyond the granted queue depth they wait inside the
	 * library and are issued in submission order as tags free up.
	 * 0 (default): RBLK_DEFAULT_QUEUED_FACTOR x the granted queue depth;
	 * a value below the granted depth is raised to it; at most
	 * RBLK_MAX_QUEUED. Costs about 100 bytes per I/O at open.
	 */
	unsigned int max_queued;
	/*
	 * In-capsule WRITE data: a WRITE of at most the granted size carries
	 * its data in the command itself, saving the round trip for the
	 * target's window (GRANT). 0 (default): ask for RBLK_DEFAULT_INLINE
	 * bytes (the target grants what its receive buffers hold, maybe
	 * less or none); > 0: ask for that many (at most 16384); < 0: off.
	 * Costs queue_depth x the size asked of registered memory per queue:
	 * where registering pins memory (rdma) the default ask is halved
	 * while (queue_depth + 1) x (64 + ask) passes 128 KiB, as a target's
	 * default grant is (1024 at depth 64).
	 */
	int inline_data;
	/*
	 * Multipath (active/passive): more URLs of the same volume, e.g.
	 * the same export on other targets; at most RBLK_MAX_PATHS - 1, all
	 * with the URL's transport. The URL given to rblk_open() is the
	 * preferred path. rblk_open() logs in to each reachable one and
	 * fails with -EPROTO when its volume id (rblk_info.vol_id) is not the
	 * first path's; one that is down may come later. A queue whose path
	 * fails (see "Multipath" above) moves to the next path at once, its
	 * unfinished I/O reissued there. The strings are copied.
	 */
	const char *const *paths;
	unsigned int nr_paths;
	/*
	 * Failback: while not on the preferred path, log in to it this
	 * often (ms) and, once it answers, move every queue back to it
	 * between commands. Default 5000; 0: never fail back.
	 */
	int failback_ms;
	/*
	 * Command deadline (see "Command timeouts" above): a command the
	 * target has not answered within io_timeout_ms counts as lost, and
	 * the queue drops its connection and reconnects. Default
	 * RBLK_DEFAULT_IO_TIMEOUT_MS (30 s, as Linux nvme); 0: no deadline.
	 */
	int io_timeout_ms;
	/*
	 * How often a command is sent again after its connection failed
	 * under it (its deadline passed, or the connection broke with it in
	 * flight); one more failure and its I/O completes with -ETIMEDOUT
	 * (the last failure was its deadline) or -EIO. Default
	 * RBLK_DEFAULT_IO_RETRIES; -1: no limit.
	 */
	int io_retries;
	/*
	 * Live resize: called when the volume grows (the target told a
	 * queue, or a queue logged in again to a larger volume), once per
	 * change, with the size before and the size now, which
	 * rblk_get_size() and rblk_get_info() already give. It runs on the
	 * thread whose rblk_poll() (or reconnect) learned it, inside that
	 * call: it must not call rblk_poll(), rblk_submit() or rblk_close(),
	 * and should only note the change (set a flag, write an eventfd).
	 * A volume never shrinks under the caller: when the target says it
	 * did (rblk-target ctl resize-export --force), the library logs it
	 * and keeps the size, I/O past the new end fails with -ERANGE, and
	 * a reconnect that finds a smaller volume fails the queue (-EPROTO).
	 * NULL: no call (the size still follows). See "Live resize" below.
	 */
	void (*on_resize)(struct rblk *r, uint64_t old_size, uint64_t new_size,
			  void *arg);
	void *on_resize_arg;
	/*
	 * TLS 1.3 on tcp:// (docs/PROTOCOL.md, "TLS"): non-zero: every
	 * connection (discovery too) is TLS from its first byte, the
	 * records in the kernel (kTLS) where it has the tls module. Its
	 * credentials: with tls_ca_file, X.509 (the target's certificate
	 * must chain to that CA and name the URL's host; tls_cert_file and
	 * tls_key_file, PEM, are this host's certificate, if the target asks
	 * for one); without, a pre-shared key derived from key_file's secret
	 * for host_name (the target derives the same from its [host] entry).
	 * A target that refuses the credentials fails the open with -EACCES;
	 * one that requires TLS of a plaintext login refuses it with -EACCES
	 * and says so. Not on rdma:// or unix:// (-EPROTONOSUPPORT).
	 */
	int tls;
	const char *tls_ca_file;
	const char *tls_cert_file;
	const char *tls_key_file;
};

#define RBLK_DEFAULT_IO_TIMEOUT_MS 30000
#define RBLK_DEFAULT_IO_RETRIES 3
/* a connection up this long (or that completed a command) is stable */
#define RBLK_STABLE_MS 10000

#define RBLK_MAX_PATHS 8

#define RBLK_DEFAULT_QUEUED_FACTOR 4
#define RBLK_DEFAULT_INLINE 4096
#define RBLK_MAX_QUEUED 65536

void rblk_opts_init(struct rblk_opts *opts);

/* Volume features (rblk_info.features). */
#define RBLK_FEAT_READ_ONLY 0x01u
#define RBLK_FEAT_FLUSH 0x02u
#define RBLK_FEAT_FUA 0x04u
#define RBLK_FEAT_TRIM 0x08u
#define RBLK_FEAT_ZEROES 0x10u
#define RBLK_FEAT_PUSH 0x20u
/*
 * Direct volume access in use: READ and WRITE move by RDMA READ/WRITE
 * straight against the target's registered volume memory, with no command
 * and no target CPU; FUA adds a FLUSH command behind the data.
 */
#define RBLK_FEAT_DIRECT 0x40u
/*
 * The volume has no identity of its own (the target could not tie its
 * volume id to the data: a read-only file without a stored id, a device
 * without serial): the id is unique on the target's host only. Such a
 * volume is refused as a multipath volume (rblk_opts.paths).
 */
#define RBLK_FEAT_NO_IDENTITY 0x100u
/*
 * The volume takes persistent reservations (rblk_pr_*() below): the
 * target offers them on every export without direct access.
 */
#define RBLK_FEAT_PR 0x2000u

struct rblk_info {
	uint64_t size;	      /* bytes */
	uint32_t block_size;  /* offsets and lengths must be multiples */
	uint32_t max_io;      /* larger I/O is split by the library */
	uint32_t queue_depth; /* granted, per queue */
	uint32_t queues;
	uint32_t features;     /* RBLK_FEAT_* */
	const char *transport; /* "tcp", "rdma" or "unix" */
	const char *export_name;
	const char *host; /* target host as given in the URL */
	uint16_t port;
	/*
	 * The volume's identity, stable across sessions and target restarts
	 * (the export's uuid, else taken from the backing store: the RBD
	 * image, a UUID stored with the file, the device's WWN or serial; a
	 * RAM volume's lasts one target run): for multipath and stable device
	 * names. RBLK_FEAT_NO_IDENTITY when the target has none to give.
	 */
	uint8_t vol_id[16];
};

/*
 * Open URL "tcp://host[:port]/export" or "rdma://host[:port]/export"
 * (IPv6 hosts in brackets). Connects and logs in every queue.
 */
int rblk_open(const char *url, const struct rblk_opts *opts, struct rblk **out);
/* Disconnects every queue; I/O still in flight is abandoned. */
void rblk_close(struct rblk *r);
const struct rblk_info *rblk_get_info(const struct rblk *r);
/*
 * Live resize. A target that resizes an export (rblk-target ctl
 * resize-export, an RBD image resized) tells every session: a queue
 * learns the new size in the next answer it gets, within two keep-alive
 * intervals when idle (keepalive_ms), and I/O up to the new end works at
 * once. rblk_info.size grows then (read it with rblk_get_size() from
 * threads other than the one polling) and opts.on_resize is called.
 * A target that predates live resize never tells; a reconnect to it
 * still finds the grown volume and takes it.
 */
uint64_t rblk_get_size(const struct rblk *r);
/*
 * Ask the target for the volume's size now on q (one KEEPALIVE, whose
 * answer carries a changed size), waiting up to timeout_ms; for a caller
 * about to report the size (an NBD server greeting a client) on a queue
 * no other thread polls. The size, or a negative errno: -EBUSY when q has
 * I/O submitted and not reaped, -ETIMEDOUT, -ENOTCONN.
 */
int64_t rblk_queue_refresh_size(struct rblk_queue *q, int timeout_ms);
/*
 * Multipath: the number of paths (1 + opts.nr_paths), path i's URL as
 * given, and the path the session uses now (the one queues move to: any
 * thread may ask; it changes when a path fails or on failback).
 */
unsigned int rblk_path_count(const struct rblk *r);
const char *rblk_path_url(const struct rblk *r, unsigned int i);
unsigned int rblk_path_active(const struct rblk *r);
struct rblk_queue *rblk_get_queue(struct rblk *r, unsigned int index);

/*
 * Bytes of memory the handle has registered (pinned where the transport
 * pins: rdma): every queue's message buffers, the buffers given to
 * rblk_register_buffer(), and the bounce buffers the library holds for
 * I/O from unregistered buffers (none until such I/O comes; the process's
 * bounce memory, all handles together, is capped by the environment
 * variable RBLK_BOUNCE_LIMIT, default 32 MiB, and I/O over the cap waits).
 * A snapshot: call it where no other thread registers buffers on r.
 */
size_t rblk_pinned_bytes(const struct rblk *r);

/* Human-readable reason for the last failure on this thread. */
const char *rblk_last_error(void);

/* ---- discovery --------------------------------------------------------- */

/* One export as rblk_discover() lists it. */
struct rblk_export_entry {
	char name[128]; /* NUL-terminated export name */
	uint64_t size;	/* bytes */
	uint32_t block_size;
	uint32_t features; /* RBLK_FEAT_* the export offers */
};

/*
 * List the exports the target at URL ("tcp://host[:port]" or
 * "rdma://host[:port]", no export part) lets this host see. Of opts (may
 * be NULL) only host_name and timeout_ms are used. Returns the number of
 * exports (0 or more) and stores in *out an array of that many, which the
 * caller frees with free(); *out is NULL when there are none. On failure,
 * a negative errno as for rblk_open() and rblk_last_error().
 */
int rblk_discover(const char *url, const struct rblk_opts *opts,
		  struct rblk_export_entry **out);

/* ---- asynchronous I/O, per queue ------------------------------------- */

enum rblk_io_op {
	RBLK_IO_READ = 1,
	RBLK_IO_WRITE = 2,
	RBLK_IO_FLUSH = 3,
	RBLK_IO_TRIM = 4,
	RBLK_IO_WRITE_ZEROES = 5,
};

#define RBLK_IO_FUA (1u << 0) /* WRITE, WRITE_ZEROES: durable on completion */

struct rblk_completion {
	void *user_data;
	int result; /* 0 or -errno */
};

/*
 * Register [addr, addr+len) with the queue (its poll group) so I/O on
 * buffers inside it moves by RDMA directly to or from it (zero copy). I/O
 * on other buffers goes through bounce buffers the library registers
 * when they are first needed (one copy; see rblk_pinned_bytes()). Register once
 * at setup; it costs one memory registration, which stays valid across
 * reconnects (also while one is in progress).
 */
int rblk_register_buffer(struct rblk_queue *q, void *addr, size_t len);
int rblk_unregister_buffer(struct rblk_queue *q, void *addr);

/*
 * Queue one I/O. len and offset must be multiples of block_size; len may
 * exceed max_io (the library splits it). buf is unused for FLUSH, TRIM,
 * WRITE_ZEROES. I/O beyond the queue depth waits in the library (issued
 * in submission order as tags free up; it survives a reconnect like I/O
 * in flight, and fails with the queue). Returns 0, -EAGAIN when
 * opts.max_queued I/Os are already submitted and not reaped (reap some
 * first), -EINVAL/-ERANGE for bad arguments, -EROFS, -ENOTCONN. The
 * buffer must stay valid until the I/O completes.
 */
int rblk_submit(struct rblk_queue *q, enum rblk_io_op op, void *buf,
		uint64_t offset, uint64_t len, unsigned int flags,
		void *user_data);

/*
 * Batching: between rblk_queue_plug() and rblk_queue_unplug(), submitted
 * commands are held and then posted together in one transport call (one
 * doorbell on RDMA, one system call on TCP). Plugs nest. rblk_poll() posts
 * whatever is held before it waits.
 */
void rblk_queue_plug(struct rblk_queue *q);
int rblk_queue_unplug(struct rblk_queue *q);

/*
 * Reap up to max completions, waiting up to timeout_ms (0: do not wait,
 * -1: forever) for the first. Returns the count (0 on timeout) or -ENOTCONN
 * once the queue has failed for good and every I/O has been completed.
 * While the queue reconnects it waits (and returns 0 on timeout). When
 * rblk_queue_ready() already covers max, those are returned at once: no
 * post, no transport poll (a plug stays held).
 */
int rblk_poll(struct rblk_queue *q, struct rblk_completion *c, int max,
	      int timeout_ms);

/*
 * For external event loops: a descriptor that becomes readable when
 * rblk_poll() may return something or has timer work to do (keep-alive,
 * reconnect). It stays the same across reconnects. Before sleeping on it
 * call rblk_queue_arm(); if that returns > 0, poll again instead of sleeping.
 */
int rblk_queue_fd(struct rblk_queue *q);
int rblk_queue_arm(struct rblk_queue *q);
/* I/Os submitted and not yet reaped. */
unsigned int rblk_queue_inflight(const struct rblk_queue *q);
/*
 * Completions already reaped from the transport: rblk_poll() returns up to
 * this many at once without a system call. A caller that submits one I/O
 * per completion it takes (fio's default) can stay plugged while this is
 * non-zero and unplug when it reaches 0: the commands then go out in one
 * post instead of one each, and none waits on more than the caller's own
 * work, since rblk_poll() posts them before it touches the transport.
 */
unsigned int rblk_queue_ready(const struct rblk_queue *q);

/* Counters of one queue since rblk_open() (rblk_queue_stats()). */
struct rblk_queue_stats {
	uint64_t timeouts;   /* commands whose deadline passed */
	uint64_t conn_lost;  /* connections lost (any reason) */
	uint64_t reconnects; /* connections brought back */
	uint64_t retries;    /* commands sent again on a new connection */
	uint64_t io_failed;  /* commands failed after their retries */
};

/* A copy of q's counters; any thread may ask (the values may be stale). */
void rblk_queue_stats(const struct rblk_queue *q, struct rblk_queue_stats *s);

/* ---- synchronous helpers -------------------------------------------- */

/* Submit one I/O on q and wait for it. q must have nothing else in flight. */
int rblk_queue_io(struct rblk_queue *q, enum rblk_io_op op, void *buf,
		  uint64_t offset, uint64_t len, unsigned int flags);

/* The same on queue 0. */
int rblk_pread(struct rblk *r, void *buf, uint64_t len, uint64_t offset);
int rblk_pwrite(struct rblk *r, const void *buf, uint64_t len, uint64_t offset,
		unsigned int flags);
int rblk_flush(struct rblk *r);
int rblk_trim(struct rblk *r, uint64_t len, uint64_t offset);
int rblk_write_zeroes(struct rblk *r, uint64_t len, uint64_t offset,
		      unsigned int flags);

/* ---- persistent reservations ------------------------------------------ */

/*
 * NVMe reservations on the volume (docs/PROTOCOL.md, "Reservations"). A
 * registrant is this host - the session's host name (opts.host_name),
 * shared by every session and path that logs in with it - with a key; a
 * registrant may hold the reservation, whose type says who else may do
 * what. The state is kept with the volume on the target (and, for RBD,
 * in the image, so every gateway of it agrees) and survives restarts.
 *
 * A command a reservation forbids this host fails with -EBADE (as Linux's
 * block layer reports a reservation conflict: BLK_STS_RESV_CONFLICT is
 * EBADE, so tools that know the one know the other); so do reservation
 * commands the rules refuse (a wrong key, another holder). Volumes
 * without RBLK_FEAT_PR answer -EOPNOTSUPP. The calls run on queue 0
 * synchronously, like rblk_pread(): nothing may be in flight on it. A
 * command sent again after a connection loss (see "Connection loss")
 * may report -EBADE though its first try took effect (a preempt whose
 * victim is gone): rblk_pr_report() tells.
 */
enum rblk_pr_type {
	RBLK_PR_WRITE_EXCLUSIVE = 1,  /* others read, only the holder writes */
	RBLK_PR_EXCLUSIVE_ACCESS = 2, /* only the holder reads or writes */
	/* registrants read and write, others only read */
	RBLK_PR_WRITE_EXCLUSIVE_REG_ONLY = 3,
	/* registrants read and write, others nothing */
	RBLK_PR_EXCLUSIVE_ACCESS_REG_ONLY = 4,
	/* as the two above, every registrant a holder */
	RBLK_PR_WRITE_EXCLUSIVE_ALL_REGS = 5,
	RBLK_PR_EXCLUSIVE_ACCESS_ALL_REGS = 6,
};

/* rblk_pr_register() flags: ignore the current key (NVMe's IEKEY) */
#define RBLK_PR_IGNORE_KEY (1u << 0)

/*
 * As Linux's pr_ops: new_key 0 unregisters (the reservation goes with a
 * holder's registration); old_key 0 registers new_key; both replace
 * old_key with new_key. With RBLK_PR_IGNORE_KEY old_key is not checked
 * (and an unregistered host registers by a replace).
 */
int rblk_pr_register(struct rblk *r, uint64_t old_key, uint64_t new_key,
		     unsigned int flags);
/* Acquire a reservation of type, holding registration key. */
int rblk_pr_reserve(struct rblk *r, uint64_t key, enum rblk_pr_type type);
/* Release it (type must be the reservation's); no-op if not the holder. */
int rblk_pr_release(struct rblk *r, uint64_t key, enum rblk_pr_type type);
/*
 * Remove the registrants whose key is victim_key; if that is the holder's
 * key (or victim_key is 0 under an all-registrants reservation) take the
 * reservation with type. With abort, commands of the preempted hosts not
 * yet started on the target fail too (they are checked again when they
 * would reach the backing store); a command already in the backing
 * store completes.
 */
int rblk_pr_preempt(struct rblk *r, uint64_t key, uint64_t victim_key,
		    enum rblk_pr_type type, int abort);
/* Remove every registration and the reservation (key: ours). */
int rblk_pr_clear(struct rblk *r, uint64_t key);

#define RBLK_PR_MAX_REGISTRANTS 64

struct rblk_pr_registrant {
	uint64_t key;
	int holder; /* holds the reservation */
	char host[128];
};

struct rblk_pr_status {
	uint32_t generation; /* counts registrations and preempts */
	int type;	     /* enum rblk_pr_type; 0: no reservation */
	unsigned int nr_registrants;
	struct rblk_pr_registrant registrants[RBLK_PR_MAX_REGISTRANTS];
};

/* The volume's registrants and reservation, as the target has them. */
int rblk_pr_report(struct rblk *r, struct rblk_pr_status *out);
/* "write-exclusive", ...; "none" for 0, NULL for an unknown type. */
const char *rblk_pr_type_name(int type);

#ifdef __cplusplus
}
#endif

#endif
