/* SPDX-License-Identifier: MIT */
/*
 * librblk internals shared by its source files (not exported: the version
 * script keeps every symbol but the public rblk_* ones local).
 */
#ifndef RBLK_INITIATOR_LIB_INTERNAL_H
#define RBLK_INITIATOR_LIB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Set this thread's rblk_last_error() text; returns err. */
__attribute__((format(printf, 2, 3))) int lib_set_error(int err,
							const char *fmt, ...);
/* Clear it at the start of a public call. */
void lib_clear_error(void);

struct rblk_url;
struct xp_ops;
struct xp_conn;
struct xp_group;
struct xp_conn_attr;
struct xp_wc;
struct xp_tls;

/*
 * Connect to u with a CM request for queue_depth (lib_conn.c), into group
 * g (NULL: a private group). Returns 0,
 * or a negative errno with the error set: the target's refusal decoded
 * (-EPROTONOSUPPORT for a bad version, else -ECONNREFUSED) or the
 * transport's failure.
 */
int lib_connect(const struct xp_ops *ops, struct xp_group *g,
		const struct rblk_url *u, const struct xp_conn_attr *attr,
		struct xp_tls *tls, uint16_t queue_depth, int timeout_ms,
		struct xp_conn **out);

struct rblk_opts;
struct xp_tls;
/*
 * TLS client credentials for o (rblk_opts.tls; lib_conn.c): *out NULL
 * without TLS. PSK mode needs secret (the key file's) for host_name.
 * 0, or -errno with the error set.
 */
int lib_tls_open(const struct rblk_opts *o, const struct rblk_url *u,
		 const char *host_name, const uint8_t *secret,
		 size_t secret_len, struct xp_tls **out);

/*
 * Wait for one completion on xc until deadline (now_ms() clock), sleeping
 * on its fd between polls: 0 with *wc filled (its status unchecked),
 * -ETIMEDOUT once past deadline, or another negative errno (xp_poll,
 * poll). Not for the I/O path: for the login and discovery exchanges.
 * XP_WC_FD_READY completions of the group's watched fds are skipped: the
 * caller keeps them from being readable during the wait (the queue's timer
 * is idle while it connects) or it spins until deadline.
 */
int lib_wait_wc(struct xp_conn *xc, struct xp_wc *wc, uint64_t deadline);

/* ---- lib_bounce.c: bounce buffers for unregistered user buffers --------- */

struct rblk_queue;
struct ireq;
struct xp_mr;

/* XP_WC_FD_READY cookie of a queue's bounce eventfd (the timer's is 0) */
#define BOUNCE_COOKIE 1

/*
 * Before a READ/WRITE part of len bytes whose buffer is not registered
 * takes a tag: reserve a registered buffer (access: the region's XP_ACCESS_*).
 * 0; -EAGAIN: over the process's cap, the part waits (pending) and the
 * queue's group fd wakes when memory frees; another -errno (error set):
 * the registration failed with nothing in use that could free, fail it.
 */
int lib_bounce_reserve(struct rblk_queue *q, uint32_t len, int access);
/* Give the reserved buffer to rq's tag (right after the reserve). */
void lib_bounce_attach(struct rblk_queue *q, struct ireq *rq);
/* rq's part is over: its buffer (if any) goes back. */
void lib_bounce_release(struct rblk_queue *q, struct ireq *rq);
/* rq's buffer and its region, or NULL when it has none. */
char *lib_bounce_buf(const struct rblk_queue *q, const struct ireq *rq);
struct xp_mr *lib_bounce_mr(const struct rblk_queue *q, const struct ireq *rq);
/* The bounce eventfd was readable (BOUNCE_COOKIE): clear it. */
void lib_bounce_wake(struct rblk_queue *q);
/* At close, before the group goes: free q's buffers. */
void lib_bounce_destroy(struct rblk_queue *q);
/*
 * A registration of len bytes (for what) failed with err: set the error,
 * naming RLIMIT_MEMLOCK and the bytes needed when the limit is the likely
 * cause. Returns err.
 */
int lib_pin_error(int err, size_t len, const char *what);

#endif
