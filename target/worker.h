/* SPDX-License-Identifier: MIT */
/*
 * Workers (worker.c): a thread with its poll groups (one per transport),
 * its slot pool, its connections and its I/O engine instance.
 */
#ifndef RBLK_TARGET_WORKER_H
#define RBLK_TARGET_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/slot_pool.h"
#include "../common/spin.h"

struct conn_handoff;
struct engine_ops;
struct export;
struct host_share;
struct target;
struct tconn;
struct treq;
struct xp_group;
struct xp_listener;
struct xp_mr;
struct xp_ops;

/*
 * A worker's poll group for one transport (docs/ARCHITECTURE.md): one PD,
 * one CQ, one fd; every connection of that transport on the worker is in
 * it, and the slot pool is registered in it (local write + MW bind only).
 */
struct wgroup {
	const struct xp_ops *ops;
	struct xp_group *g;
	struct xp_mr *pool_mr; /* the whole pool; NULL with block_mr */
	/*
	 * Only where a window reaches its whole region (the group's
	 * mw_reaches_region, rxe): the pool has no region of its own there
	 * but one per buddy block (order o, index i: pool page i << o), made
	 * while that block exists (the pool's keep mode, worker.c) and never
	 * overlapping. A window then covers one block's region, so the key
	 * reaches that command's run only (docs/ARCHITECTURE.md "Slot pool").
	 * NULL where registering failed (retried when the block is lent).
	 */
	struct xp_mr **block_mr[SLOT_MAX_ORDER + 1];
};

/* A DIRECT volume registered on one of a worker's groups (MW bind only). */
struct vol_reg {
	struct export *exp;
	struct wgroup *wg;
	struct xp_mr *mr;
	uint64_t len;	   /* bytes registered: the volume's size then */
	unsigned int refs; /* connections with a window on it */
	struct vol_reg *next;
};

#define WORKER_MAX_GROUPS 2 /* tcp, rdma */

struct worker {
	struct target *tgt;
	unsigned int index;
	pthread_t thread;
	int epfd; /* the one place it sleeps: groups, mailbox, engine */
	/* the worker's thread is the only one that touches them */
	struct wgroup groups[WORKER_MAX_GROUPS];
	unsigned int nr_groups;
	/* the slot pool: pool_len bytes, registered in every group */
	void *pool_mem;
	size_t pool_len;
	struct slot_pool pool;
	/* engine registration (worker_pool_buf()), -1, or POOL_BUF_UNTRIED */
	int pool_buf_index;
	/*
	 * Connections with commands waiting for a slot, served round-robin
	 * one command a turn (a connection over its share waits parked
	 * until it or its host frees some); page_owner[i]: the connection whose
	 * data pool page i may hold (0: unknown), so a window never shows
	 * one connection another's bytes (io.c, slot_scrub()).
	 */
	struct tconn *slot_conns_head, *slot_conns_tail;
	struct tconn *slot_parked; /* over a share, waiting for their own */
	bool serving_slots;
	uint64_t *page_owner;
	uint64_t share_session, share_host; /* caps on held, per worker */
	struct host_share *shares; /* per source address, with holders */
	uint64_t window_timeout_ms;
	struct vol_reg *vols;
	int mailbox_fd; /* eventfd: new connections, stop, the checks below */
	/* connection requests from the main thread, newest first (worker.c) */
	_Atomic(struct conn_handoff *) inbox;
	/* taken from the inbox, not joined yet: oldest first (worker.c) */
	struct conn_handoff *joins, *joins_tail;
	bool reap_more;	     /* closed connections left for the next turn */
	struct tconn *conns; /* owned */
	unsigned int nr_conns;
	/*
	 * Held by the worker while it links or unlinks conns or changes a
	 * connection's state or login fields, and by the control socket while
	 * it walks conns. Never taken on the command path.
	 */
	pthread_mutex_t conns_lock;
	atomic_bool stop;
	atomic_bool
	    check_removed; /* an export was removed: close its sessions */
	atomic_bool check_evicted; /* limits evicted a pending connection */

	const struct engine_ops *engine;
	void *engine_priv;
	struct treq *busy_head, *busy_tail; /* waiting for engine room */
	struct tconn *flush_head; /* connections with a batch to post */
	struct tconn *qos_conns;  /* with commands waiting on QoS limits */
	uint64_t qos_wake_ns;	  /* earliest a waiting one may go; 0: none */
	unsigned int spin_us;	  /* poll before sleeping (0: sleep at once) */
	struct spin_backoff spin;
	uint64_t now_ms; /* at the start of this turn */
};

int worker_start(struct worker *w, struct target *t, unsigned int index);
void worker_stop(struct worker *w);
#define POOL_BUF_UNTRIED (-2)
/*
 * The engine's registration of w's pool (a fixed buffer index), or -1
 * where the engine has none. Made at worker start (before its thread
 * runs), except where no export at start does I/O through the engine
 * (none has BACKEND_F_ENGINE: RAM, rbd, mmap): then on the worker's first
 * engine I/O (worker thread), so a target that serves such exports only
 * never pins its pool a second time for the engine (VmPin counts every
 * registration of the same pages).
 */
int worker_pool_buf(struct worker *w);

/*
 * Main thread: take the next connection request on listener l, check its
 * private data, admit it (limits) and hand it to w through w's mailbox;
 * w joins it to its poll group, sets it up (message buffers, receives
 * posted), accepts it and links it in, on its own thread. Returns 0
 * (handed over, or refused here), -EAGAIN when no request is pending, or
 * another -errno from the transport. Every request handed to w is
 * settled by worker_stop(), so stop the workers before the listeners.
 */
int worker_accept(struct worker *w, struct xp_listener *l, const char *url);
/* Any thread: tell w to close its evicted pending connections. */
void worker_kick_evicted(struct worker *w);
/* Control thread: tell every worker to close sessions of removed exports. */
void workers_check_removed(struct target *t);

#endif
