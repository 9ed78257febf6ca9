/* SPDX-License-Identifier: MIT */
/*
 * librblk's session and queue structures, shared by its sessions (lib.c),
 * data path (lib_io.c), login (lib_login.c), keep-alive and reconnect
 * (lib_reconnect.c) and multipath (lib_path.c) code, and what each offers
 * the others. Not exported (the version script keeps every symbol but
 * rblk_* local).
 */
#ifndef RBLK_INITIATOR_LIB_QUEUE_H
#define RBLK_INITIATOR_LIB_QUEUE_H

#include <rblk/rblk.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/auth.h"
#include "../common/proto.h"
#include "../transport/qp.h"
#include "../common/spin.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../transport/transport.h"

#define CMD_BUF_SIZE 64
_Static_assert(RBLK_CMD_SIZE <= CMD_BUF_SIZE, "command fits its buffer");
/* wr_id of the XP_WC_FD_READY completions of the queue's timer_fd */
#define TIMER_COOKIE 0

/*
 * A reservation command riding an io (lib_pr.c): the opcode and fields
 * post_cmd() puts in its capsule. A REPORT travels as a READ of its
 * buffer (io->op RBLK_OP_READ); the others as a command without data.
 */
struct lib_pr {
	uint8_t opcode; /* RBLK_OP_PR_* */
	uint64_t crkey; /* the capsule's offset */
	uint64_t key2;	/* its addr: the new or the preempted key */
	uint32_t arg;	/* its rkey: RBLK_PR_ARG() */
};

struct io {
	void *user_data;
	/* a reservation command (rblk_pr_*()), or NULL: I/O */
	const struct lib_pr *pr;
	uint8_t op;
	unsigned int flags;
	char *buf;
	uint64_t next_off; /* next part starts here */
	uint64_t end;
	unsigned int parts_inflight;
	int result; /* first error */
	struct io *next;
};

enum ireq_state {
	IREQ_FREE,
	IREQ_CMD, /* command (or WRITE data) posted; waiting for RESP/GRANT */
	IREQ_NEED_READ, /* RESP(PULL); its RDMA READ waits for credits */
	IREQ_READ,	/* RDMA READ of the window posted */
	IREQ_NEED_DONE, /* READ done; READ_DONE waits for a credit */
	IREQ_NEED_DATA, /* GRANT; RDMA WRITE + WRITE_DATA wait for credits */
	IREQ_DIRECT,	/* RDMA READ/WRITE against the volume posted */
	IREQ_REISSUE,	/* connection lost before completion: resend it */
	IREQ_KA,	/* KEEPALIVE posted (no io) */
	/*
	 * Pull READ done, its window not yet returned (RBLK_F_CMD_DONE): on
	 * held_tags; the tag's next command, or a READ_DONE, returns it.
	 */
	IREQ_HELD,
};

struct ireq {
	enum ireq_state state;
	uint16_t tag; /* the index: q->reqs[tag], buffers, work request ids */
	/*
	 * With RBLK_F_TAG_GEN: the generation of the tag's last command,
	 * bumped by each command (lib_add_cmd()); answers must carry it.
	 */
	uint8_t gen;
	struct io *io;
	uint8_t op;
	uint8_t cmd_flags; /* RBLK_CMD_F_FUA */
	uint32_t len;
	uint64_t offset;
	char *buf;	  /* user buffer for this part */
	struct xp_mr *mr; /* its registration, or NULL: use the bounce slot */
	/* push READs with per-command windows (q->push_mw): the tag's window */
	struct xp_mw *mw;
	/* q->push_imm: bytes the WRITE WITH IMMEDIATE naming mw placed */
	uint32_t placed;
	bool direct;	 /* by direct access to the volume (post_direct()) */
	bool direct_fua; /* ... followed by a FLUSH: the end of a FUA write */
	bool inl;	 /* a WRITE whose data went in its command capsule */
	bool data_sent;	 /* a granted WRITE's data is posted: RESP may come */
	uint64_t raddr;	 /* the target's window (RESP PULL, GRANT) */
	uint32_t rkey;
	struct ireq *next; /* free list or credit wait list */
	/*
	 * Deadline (now_ms() clock) of the command on the wire, set when it
	 * is posted; checked by the queue's timer (lib_reconnect.c).
	 * failures: connections that failed with it in flight; timed_out:
	 * its deadline passed on the connection being dropped.
	 */
	uint64_t deadline;
	uint16_t failures;
	bool timed_out;
	/* a FLUSH: the session's acknowledged writes when it was issued */
	uint64_t flush_mark;
};

/*
 * A queue's connection state. lib_queue_set_state() makes every change
 * and refuses (and logs) any not in its table (lib_reconnect.c):
 *
 *   QUEUE_CONNECTING  rblk_open(): the first connection and login; no
 *                     tags or I/Os yet (a calloc'd queue starts here)
 *   QUEUE_LIVE        connected and logged in: commands go out
 *   QUEUE_DRAINING    live, moving to r->active between commands
 *                     (lib_path_tick()): nothing new is issued until what
 *                     is in flight completes, or drain_until
 *   QUEUE_LOST        no usable connection: unfinished parts are kept for
 *                     reissue, I/O queues up, the timer runs attempts
 *   QUEUE_FAILED      given up for good: every I/O fails with -ENOTCONN
 *
 *   CONNECTING -> LIVE           lib_queue_attach(), after the first login
 *   LIVE -> DRAINING             lib_path_tick(): the session moved path
 *   LIVE, DRAINING -> LOST       lib_queue_lost()
 *   LOST -> LIVE                 lib_queue_attach(), after a reconnect
 *   LIVE, DRAINING, LOST -> FAILED  lib_queue_fail(): ctrl-loss timeout,
 *                                a refusal, or reconnecting off
 *
 * Whether the outage goes on (q->unstable: back-off and loss timeout keep
 * running until a connection proves stable) is the outage's, not the
 * connection's: it spans LOST and LIVE, so it is not a state. q->xc is
 * the connection, a resource: while LOST an attempt's, or NULL between
 * attempts.
 */
enum queue_state {
	QUEUE_CONNECTING,
	QUEUE_LIVE,
	QUEUE_DRAINING,
	QUEUE_LOST,
	QUEUE_FAILED,
};

struct user_mr {
	char *addr;
	size_t len;
	struct xp_mr *mr;
};

struct rblk_queue {
	struct rblk *r;
	unsigned int index;
	/*
	 * The queue's poll group, created once before the first connection
	 * and kept across reconnects: each connection of the queue is made
	 * into it, the bounce slots and the user's buffers are registered on
	 * it once (regions outlive the connections), and it watches timer_fd.
	 * Its fd is rblk_queue_fd(): one epoll set, no nested one.
	 */
	struct xp_group *g;
	struct xp_conn *xc;
	/* message buffers, send credits and the send batch (transport/qp.h) */
	struct qp qp;
	enum queue_state state; /* lib_queue_set_state() changes it */

	uint16_t qd; /* granted */
	uint32_t max_io;
	uint32_t features;
	uint8_t vol_id[RBLK_VOL_ID_LEN];
	bool authed; /* login: the target proved the secret (AUTH_RESULT) */
	bool direct; /* READ/WRITE go straight to the volume */
	/*
	 * Push READs through a window per command (lib_io.c): the target
	 * may write only the command's buffer, only until its RESP, and the
	 * RESP completes the READ only when exactly its bytes arrived. On
	 * transports that count what a window received (tcp).
	 */
	bool push_mw;
	/*
	 * ... counted by immediates (RBLK_F_PUSH_IMM, rdma): the data comes
	 * as a WRITE WITH IMMEDIATE naming the window's key, the RESP as a
	 * SEND_WITH_INV of it. mw_tag: tag + 1 by window index (the key's
	 * upper 24 bits), open addressing, mw_tag_mask + 1 >= 2 * qd slots.
	 */
	bool push_imm;
	uint16_t *mw_tag;
	uint32_t mw_tag_mask;
	uint32_t vol_rkey;
	uint64_t vol_addr;
	uint64_t vol_len; /* the volume window's bytes: direct I/O below it */
	/* the last smaller size the target told (logged once), 0: none */
	uint64_t shrink_told;

	/* send area: command buffers (cmd_bufs of cmd_size), then HELLO's */
	unsigned int cmd_bufs; /* command buffers (requested qd) */
	/* CMD_BUF_SIZE + the in-capsule bytes asked for, rounded to 64 */
	uint32_t cmd_size;
	uint32_t inline_max; /* in-capsule WRITE bytes granted (LOGIN) */

	struct lib_bounce *bounce; /* lazy bounce buffers (lib_bounce.c) */

	struct ireq *reqs;
	struct ireq *free_tags;
	/*
	 * Tags whose pull READ completed while the target keeps its slot
	 * lent (IREQ_HELD): taken before free ones, so the next command
	 * returns the window in its capsule (RBLK_CMD_F_DONE) and the
	 * READ_DONE costs no message. Returned by READ_DONEs instead when the
	 * queue goes idle (lib_io.c, return_held()).
	 */
	struct ireq *held_tags;
	unsigned int
	    empty_polls; /* progress() passes in a row that reaped nothing */
	struct ireq *wait_head, *wait_tail; /* RDMA READs waiting for credits */

	/*
	 * Work requests built but not yet posted wait in qp's batch.
	 * Unplugged, each command is posted at once; plugged
	 * (rblk_queue_plug(), and always inside progress()), they go out in
	 * one chained post: one doorbell on rdma, one sendmsg on tcp.
	 */
	unsigned int plugged;

	struct io *ios;	     /* nr_ios of them */
	unsigned int nr_ios; /* opts.max_queued, resolved at setup */
	struct io *free_ios;
	struct io *pend_head, *pend_tail; /* ios with parts not yet issued */
	/*
	 * ios submitted, not reaped: at most nr_ios. An io is freed when it
	 * completes, before it is reaped, so free_ios is never empty while
	 * inflight < nr_ios, and done (which holds only unreaped ios) never
	 * overflows.
	 */
	unsigned int inflight;

	struct rblk_completion *done; /* ring of nr_ios */
	unsigned int done_head, done_count;
	struct spin_backoff spin; /* rblk_poll()'s adaptive spin */

	struct user_mr *umrs; /* sorted by addr */
	unsigned int nr_umrs, cap_umrs;

	/*
	 * Reconnect and keep-alive (QUEUE_LOST, QUEUE_FAILED). timer_fd is
	 * watched in g (XP_WC_FD_READY, cookie TIMER_COOKIE), so a caller's
	 * event loop sleeping on the group fd wakes for completions and for
	 * timer duties alike (timer_at, ms on the monotonic clock; 0: none).
	 */
	int timer_fd;
	uint64_t timer_at;
	uint64_t lost_at;	     /* when the connection was lost */
	unsigned int retry_delay_ms; /* next wait between attempts */
	unsigned int attempts;
	bool rx_seen; /* a message arrived since the last keep-alive tick */
	unsigned int stalled_ticks; /* silent ticks with no tag for a KA */
	struct ireq *ka;	    /* KEEPALIVE awaiting its answer */
	uint64_t ka_at; /* the next keep-alive tick (lib_tick_next()) */
	uint64_t to_at; /* the next deadline check (lib_tick_next()) */
	/*
	 * An outage in progress: lost_at is its first loss, and it lasts
	 * until a connection proves stable (a command completed on it, or
	 * it stayed up RBLK_STABLE_MS from live_at). Losses meanwhile keep
	 * the back-off and the loss timeout running (lib_queue_lost()).
	 */
	bool unstable;
	uint64_t live_at;
	/* rate limit of loss/reconnect lines: tokens, refilled over time */
	unsigned int log_tokens;
	uint64_t log_at;
	unsigned int log_quiet; /* lines left out since the last one */
	struct rblk_queue_stats stats;
	/*
	 * Write-class commands (WRITE without FUA, TRIM, WRITE_ZEROES)
	 * acknowledged on this queue: written by its thread only, summed by
	 * any (lib_acked_sum()) to tell what a FLUSH covers.
	 */
	_Atomic uint64_t acked;

	/*
	 * Multipath (lib_path.c). path: the r->paths entry of the connection
	 * (or of the attempt); path_first: where the next round of attempts
	 * starts; drain_until: when QUEUE_DRAINING stops waiting for what is
	 * in flight.
	 */
	unsigned int path;
	unsigned int path_first;
	uint64_t drain_until;
};

/* One path to the volume: the URL as given and parsed. */
struct rblk_path {
	char *str;
	struct rblk_url url;
	/* the target's durability epoch | 1 << 32 once seen (RBLK_F_EPOCH) */
	_Atomic uint64_t epoch;
};

struct rblk {
	struct rblk_info info;
	struct rblk_url url;
	const struct xp_ops *ops;
	unsigned int nr_queues;
	struct rblk_queue *queues;
	char host_name[RBLK_NAME_MAX];
	struct xp_tls *tls; /* TLS client credentials (opts.tls), or NULL */
	uint8_t secret[RBLK_SECRET_MAX]; /* from opts.key_file */
	size_t secret_len;		 /* 0: none */
	bool mutual;			 /* RBLK_OPEN_MUTUAL_AUTH */
	unsigned int poll_spin_us;	 /* rblk_opts.poll_spin_us */
	struct rblk_opts opts; /* as opened; reconnects log in with these */
	/* a target refused the HELLO asking for in-capsule data: ask none */
	bool inline_refused;
	/* a target refused the HELLO flag IDENTITY: it predates it */
	bool identity_refused;
	/* what the last refused HELLO made the session drop (a HELLO flag's
	 * name or "in-capsule data"), for lib_queue_connect(); NULL: none */
	const char *dropped;
	/* a target refused the HELLO flag TAG_GEN: it predates it */
	bool tag_gen_refused;
	/* ... the HELLO flag PUSH_IMM: push READs are then counted by none */
	bool push_imm_refused;
	/* a target refused the HELLO flag EPOCH: it predates it */
	bool epoch_refused;
	/* a target refused the HELLO flag PR: it predates reservations */
	bool pr_refused;
	/* ... the HELLO flag RESIZE: sizes are then learned at login only */
	bool resize_refused;
	/*
	 * Durability across a target's restart (lib_login.c, epoch_check()):
	 * flushed is the lib_acked_sum() the last completed FLUSH covered;
	 * flush_lost is the lib_acked_sum() when a path came back with
	 * another durability epoch while writes were acknowledged past
	 * flushed (they may be lost; 0: none): every FLUSH that completes
	 * fails with -EIO until one that covers them all (issued with a
	 * flush_mark >= flush_lost) has failed, which clears it.
	 */
	_Atomic uint64_t flushed;
	_Atomic uint64_t flush_lost;
	/*
	 * Paths (lib_path.c): paths[0] is the preferred one (the URL given
	 * to rblk_open). active: the path queues use and move to; any queue
	 * thread changes it. probe_at: when the next failback probe is due
	 * (now_ms() clock); the queue that moves it forward probes.
	 */
	struct rblk_path *paths;
	unsigned int nr_paths;
	_Atomic unsigned int active;
	_Atomic uint64_t probe_at;
};

/* Work request kinds (transport/qp.h; RECV is the layer's); value: the tag. */
enum wrid_kind {
	WRID_CMD = QP_WRID_USER, /* a SEND of a tag (+ RDMA WRITE/READ) */
	WRID_READ,		 /* pull RDMA READ of a tag */
	WRID_HELLO,		 /* HELLO, AUTH_RESPONSE */
	WRID_DIRECT, /* RDMA READ/WRITE of a tag against the volume */
	WRID_INV,    /* LOCAL_INV of a push READ's window */
};

/* What q's answers are decoded against (proto.h, rblk_tags()). */
static inline uint32_t lib_tags(const struct rblk_queue *q)
{
	return rblk_tags((uint16_t)q->qd, q->features & RBLK_F_TAG_GEN);
}

/* The wire tag of rq's current command. */
static inline uint16_t lib_wire_tag(const struct rblk_queue *q,
				    const struct ireq *rq)
{
	if (q->features & RBLK_F_TAG_GEN)
		return rblk_tag_make(rq->tag, rq->gen);
	return rq->tag;
}

static inline void *cmd_buf(struct rblk_queue *q, unsigned int tag)
{
	return (char *)qp_send_area(&q->qp) + (size_t)tag * q->cmd_size;
}

/* HELLO and AUTH_RESPONSE go from here, behind the command buffers. */
static inline void *hello_buf(struct rblk_queue *q)
{
	return cmd_buf(q, q->cmd_bufs);
}

/* ---- lib_io.c: the data path ----------------------------------------------
 */

/* Write-class commands acknowledged by all queues so far; any thread. */
uint64_t lib_acked_sum(struct rblk *r);
/* An io is done: queue its completion for rblk_poll(), free it. */
void lib_io_complete(struct rblk_queue *q, struct io *io);
/* A part finished with result res (0 or -errno): free its tag. */
void lib_part_done(struct rblk_queue *q, struct ireq *rq, int res);
/* A tag for a new command: one holding a window first, else a free one. */
struct ireq *lib_tag_get(struct rblk_queue *q);
/* The connection is gone, its windows with it: held tags are free. */
void lib_tags_unhold(struct rblk_queue *q);
/*
 * Add command cmd of tag rq to the batch (from the tag's command buffer),
 * returning the tag's window if it holds one (rq still IREQ_HELD, as
 * lib_tag_get() gave it: set the command's state after this call). The
 * caller took the credit.
 */
void lib_add_cmd(struct rblk_queue *q, struct ireq *rq, struct rblk_cmd *cmd,
		 uint64_t wr_id);
/* Post the built batch: 0, or -errno with the queue lost. */
int lib_batch_flush(struct rblk_queue *q);
/*
 * One reservation command on q, synchronously (q has nothing in flight):
 * a REPORT reads len bytes into buf, the others take buf NULL. 0 or the
 * command's -errno (-EBADE: a reservation conflict).
 */
int lib_pr_io(struct rblk_queue *q, const struct lib_pr *pr, void *buf,
	      uint32_t len);
/* Once, after q's first login: tags, I/Os, bounce slots; then attach. */
int lib_queue_setup(struct rblk_queue *q);
/* After lib_queue_connect(): resend kept parts, start keep-alive. */
int lib_queue_attach(struct rblk_queue *q);

/* ---- lib_login.c: a queue's connection and login ---------------------------
 */

/* Connect q and log in (HELLO/LOGIN, authentication): 0 or -errno, set. */
int lib_queue_connect(struct rblk *r, struct rblk_queue *q,
		      const struct rblk_opts *o);
/* Forget the connection and its message buffers; the group stays. */
void lib_queue_drop_conn(struct rblk_queue *q);

/* ---- lib_reconnect.c: keep-alive, reconnect, the queue's timer ------------
 */

/* Arm the timer for at_ms (now_ms() clock; 0: disarm). */
void lib_timer_set(struct rblk_queue *q, uint64_t at_ms);
/* Clear the timer fd's readiness; lib_queue_tick() runs the duty when due. */
void lib_timer_drain(struct rblk_queue *q);
/* Free the tag of the KEEPALIVE in flight, if any. */
void lib_ka_free(struct rblk_queue *q);
/*
 * Send a KEEPALIVE now (q->ka) and post it: false (nothing sent) when one
 * is out already or no tag or send credit is free.
 */
bool lib_ka_send(struct rblk_queue *q);

/* ---- lib.c: live resize -------------------------------------------------- */

/*
 * The target says (a RESP with RBLK_RESP_F_SIZE, or a LOGIN: how) that
 * the volume is size bytes. A larger size is taken, once however many
 * queues tell it, and opts.on_resize called; a smaller one is logged (once
 * per size and queue) and not taken: the volume never shrinks under the
 * caller. False when size is no multiple of the block size (the caller
 * fails the connection).
 */
bool lib_size_learned(struct rblk_queue *q, uint64_t size, const char *how);
/* Whether the table has from -> to (enum queue_state's comment). */
bool lib_queue_state_legal(enum queue_state from, enum queue_state to);
/* Move q to state to: true, or false (logged, q unchanged) if illegal. */
bool lib_queue_set_state(struct rblk_queue *q, enum queue_state to);
const char *lib_queue_state_str(enum queue_state s);
/* No usable connection: lost (reconnecting) or failed. */
static inline bool lib_queue_down(const struct rblk_queue *q)
{
	return q->state == QUEUE_LOST || q->state == QUEUE_FAILED;
}
/*
 * A command completed on a connection: it proved stable. Its loss, if it
 * comes, is a new outage, logged in full (the loss-line bucket refills).
 */
static inline void lib_conn_proved(struct rblk_queue *q)
{
	if (q->unstable) {
		q->unstable = false;
		q->log_at = 0;
	}
}
/* Set rq's deadline: it was just posted. */
static inline void lib_deadline_set(struct rblk_queue *q, struct ireq *rq)
{
	rq->deadline = now_ms() + (uint64_t)q->r->opts.io_timeout_ms;
}
/* Give up for good: fail everything in flight and pending (-ENOTCONN). */
void lib_queue_fail(struct rblk_queue *q, const char *why);
/* The connection failed: keep unfinished parts, schedule a reconnect. */
void lib_queue_lost(struct rblk_queue *q, const char *why);
/* Answers after which trying the same path again cannot help. */
bool lib_refusal(int err);
/* Run the timer duty that is due: a keep-alive tick or a reconnect attempt. */
void lib_queue_tick(struct rblk_queue *q);

/* When the next tick of a live queue is due (0: none), from now. */
uint64_t lib_tick_next(struct rblk_queue *q, uint64_t now);

/* ---- lib_path.c: multipath ---------------------------------------------- */

/* Parse url and opts->paths into r->paths: 0, or -errno with the error set. */
int lib_path_setup(struct rblk *r, const char *url, const struct rblk_opts *o);
void lib_path_free(struct rblk *r);
/* The URL q connects to now. */
static inline const struct rblk_url *lib_path_url(const struct rblk_queue *q)
{
	return &q->r->paths[q->path].url;
}
/* First connection of q at open: r->active first, then the others. */
int lib_path_open_queue(struct rblk_queue *q, const struct rblk_opts *o);
/* After every queue opened: the other paths must be the same volume. */
int lib_path_verify(struct rblk *r);
/* Login found vol_id where q expected its own: the error, -EPROTO. */
int lib_path_vol_mismatch(const struct rblk_queue *q,
			  const uint8_t vol_id[RBLK_VOL_ID_LEN]);
/* q lost its connection: choose where the attempts start. */
void lib_path_lost(struct rblk_queue *q);
/*
 * A reconnect round: connect and attach q on each path in turn from
 * path_first. 0, or the last attempt's -errno with why set; with several
 * paths a refusal (reconnect_fatal) is reported as -EAGAIN.
 */
int lib_path_connect(struct rblk_queue *q, const struct rblk_opts *o, char *why,
		     size_t why_len);
/*
 * A live queue's tick: failback probe, following r->active. true when it
 * took the tick (draining or switching paths; the timer is set).
 */
bool lib_path_tick(struct rblk_queue *q, uint64_t now);

static inline bool lib_timer_due(const struct rblk_queue *q)
{
	return q->timer_at && now_ms() >= q->timer_at;
}

#endif
