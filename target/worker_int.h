/* SPDX-License-Identifier: MIT */
/*
 * Worker internals shared by worker.c (the thread, its groups and pool),
 * conn.c (connections: setup, login, teardown) and io.c (commands: slots,
 * windows, responses). Everything here runs on the worker thread.
 */
#ifndef RBLK_TARGET_WORKER_INT_H
#define RBLK_TARGET_WORKER_INT_H

#include "../transport/qp.h"
#include "../common/slot_pool.h"
#include "conn.h"
#include "worker.h"

#define LOGIN_TIMEOUT_MS 10000
/* the login limit while the pending table is under pressure (limits.c) */
#define LOGIN_PRESSURE_MS 2000
#define RESP_BUF_SIZE 64 /* per tag; RESP and GRANT are 32 bytes */
/* The last send buffer: AUTH_CHALLENGE, then AUTH_RESULT (sent right
 * before LOGIN, so it cannot share LOGIN's buffer). */
#define AUTH_BUF_SIZE 256

/* Work request kinds (transport/qp.h); RECV is the layer's. */
enum wrid_kind {
	WRID_RESP = QP_WRID_USER, /* a response or GRANT (+ bind); val: tag */
	/* a push READ's RDMA WRITE + RESP; val: the slot's pool page */
	WRID_PUSH,
	WRID_LOGIN, /* LOGIN (+ volume bind), its refusal, DISCOVER_REPLY */
	WRID_AUTH,  /* AUTH_CHALLENGE or AUTH_RESULT */
};

static inline void *send_buf(struct tconn *c, unsigned int i)
{
	return (char *)qp_send_area(&c->qp) + (size_t)i * RESP_BUF_SIZE;
}

/* wg's region of the pool block at addr of order o (wg->block_mr set). */
static inline struct xp_mr **block_mr_of(const struct worker *w,
					 struct wgroup *wg, const void *addr,
					 unsigned int o)
{
	size_t off = (size_t)((const char *)addr - (const char *)w->pool_mem);

	return &wg->block_mr[o][off >> (SLOT_PAGE_SHIFT + o)];
}

/* conn.c */
void tconn_fail(struct tconn *c, const char *why);
/* Repost receive buffer i; on failure c fails, saying why. */
void tconn_repost(struct tconn *c, unsigned int i);
/* Free c (CLOSING, no backend I/O left): windows, connection, slots. */
void tconn_destroy(struct worker *w, struct tconn *c);
/*
 * Set up xc (just joined to wg's group, its queue made) for queue depth
 * qd and accept it. NULL after rejecting xc. Takes over lim, its
 * admission (released on failure).
 */
struct tconn *tconn_new(struct worker *w, struct wgroup *wg, struct xp_conn *xc,
			uint16_t qd, struct lim_conn *lim);
/* c is in TCONN_LOGIN past its login limit (the pressure one included). */
bool tconn_login_expired(const struct tconn *c, uint64_t now);
/* One completion of c (RECV or send side). */
void tconn_handle_wc(struct worker *w, struct tconn *c, const struct xp_wc *wc);

/* io.c */
void treq_process(struct treq *r);
/*
 * A CMD, READ_DONE or WRITE_DATA on a live connection. True when the
 * receive buffer is kept (an inline WRITE waiting for a slot reposts it
 * once its data is copied out); false: the caller reposts it.
 */
bool treq_recv(struct tconn *c, const void *buf, const struct xp_wc *wc);
/* A signaled send of c completed (any status): credits, slots, waiters. */
void treq_send_done(struct tconn *c, const struct xp_wc *wc);
/* Post every connection's batch; none is left on the flush list. */
void worker_flush_sends(struct worker *w);
/* Return c's slot to the pool and serve the commands waiting for one. */
void slot_release(struct tconn *c, void **slot);
/* c is being freed: drop its reference to its host's pool share. */
void slot_share_put(struct worker *w, struct tconn *c);
/*
 * Has c (LIVE) held a slot window, grant or push for longer than the
 * worker's window_timeout without returning it? why: the log line's text.
 */
bool slot_held_too_long(const struct tconn *c, uint64_t now, char *why,
			size_t len);
/* Take c's commands off the pool's wait list (c is closing). */
void slot_wait_drop(struct worker *w, struct tconn *c);
/* Start a valid command its QoS limits let go: slot, or execute. */
void treq_start(struct treq *r);

/* io_qos.c: commands waiting on QoS limits (qos.h) */
/*
 * Must r (decoded, valid) wait for its connection's QoS limits? If so it
 * is queued (TREQ_THROTTLE) and true returned; false: it may start now,
 * its cost taken.
 */
bool qos_hold(struct tconn *c, struct treq *r);
/* Start the waiting commands the limits let go; sets w->qos_wake_ns. */
void qos_serve(struct worker *w);
/* Milliseconds the worker may sleep before qos_serve() has work (max). */
int qos_sleep_ms(const struct worker *w, int max);
/* c is closing: its waiting commands are dropped, c leaves the list. */
void qos_wait_drop(struct worker *w, struct tconn *c);
/* At login: the limits c's commands draw from (export, host entry). */
void qos_bind(struct tconn *c);

/*
 * Fault injection for the initiator's tests (tests/vm/tests/25, 26): only
 * in the test build build/tests/rblk-target-fault (-DRBLK_FAULTS), where
 * the environment's RBLK_FAULT names how the target misbehaves once a
 * session has logged in (the modes of tests/e2e/rblk_rogue.py: silent,
 * break, push-nodata, push-wrongtag, write-zero, write-early, size0,
 * size63), or with "@FILE" the file that names it, read at each use so a
 * test can change it while sessions run. Compiled out of rblk-target.
 */
#ifdef RBLK_FAULTS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static inline bool target_fault(const char *mode)
{
	const char *f = getenv("RBLK_FAULT");
	char buf[32] = "";
	FILE *fp;

	if (f && f[0] == '@' && (fp = fopen(f + 1, "r"))) {
		if (fgets(buf, sizeof(buf), fp))
			buf[strcspn(buf, "\n")] = 0;
		fclose(fp);
		f = buf;
	}
	return f && !strcmp(f, mode);
}
#else
#define target_fault(mode) false
#endif

#endif
