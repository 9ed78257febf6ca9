/* SPDX-License-Identifier: MIT */
/*
 * Private to `rblk nbd`: nbd.c (the command line), nbd_server.c (volume,
 * listener, accept loop, connection threads, queue claims; it describes
 * the threads and who owns what) and nbd_handshake.c (the fixed newstyle
 * negotiation, run on a connection's thread).
 */
#ifndef RBLK_INITIATOR_NBD_SERVER_H
#define RBLK_INITIATOR_NBD_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rblk/rblk.h"
#include "common/url.h"
#include "initiator/nbd_proto.h"

/* Defaults and bounds of the options (docs/RELIABILITY.md, rblk nbd -h) */
#define NBD_DEFAULT_QUEUES 4
#define NBD_DEFAULT_MAX_CONNS 64
#define NBD_MAX_QUEUES 256
#define NBD_DEFAULT_HANDSHAKE_MS 10000 /* whole handshake, per client */
/* heap, per client */
#define NBD_DEFAULT_CLIENT_BUFFER (2ull * NBD_MAX_PAYLOAD)
/*
 * --poll-spin-us: at QD1 a spin replaces two sleeps and wake-ups per
 * request; at QD32, yielding while it spins, it costs little
 * (docs/BENCHMARKS.md, "Polling before sleeping").
 */
#define NBD_DEFAULT_SPIN_US 50u

/* What to serve and how: the command line's choices, for nbd_serve(). */
struct nbd_serve_opts {
	const char *url;	       /* the volume */
	const char *export_name;       /* its export name (from url) */
	const struct rblk_opts *ropts; /* for rblk_open() */
	const char *socket_path;       /* a unix socket, or NULL and: */
	const struct rblk_url *listen; /* tcp://HOST:PORT to listen on */
	bool read_only;		       /* --read-only */
	unsigned int max_conns;	       /* --max-connections */
	unsigned int handshake_ms;     /* --handshake-timeout */
	unsigned int idle_ms;	       /* --idle-timeout; 0: none */
	unsigned int spin_us;	       /* --poll-spin-us; 0: none */
	size_t max_client_buf;	       /* --max-client-buffer */
};

/*
 * Open the volume, listen, print the ready line and serve until SIGINT or
 * SIGTERM. Returns the exit status: 0 after a clean shutdown, 1 on errors
 * (said on stderr as "rblk nbd: ...").
 */
int nbd_serve(const struct nbd_serve_opts *o);

/* One rblk queue and its registered buffer pool. */
struct nbd_qslot {
	bool busy; /* claimed by a connection; guarded by srv->lock */
	/* The rest is touched only by the thread holding the claim, or by
	 * the main thread after every connection thread has been joined. */
	void *pool; /* nslots * slot_size bytes (mmap), NULL until first use */
	size_t pool_len;
	bool registered; /* rblk_register_buffer() succeeded on pool */
	bool abandoned;	 /* a connection left I/O in flight at shutdown */
};

struct nbd_server {
	struct rblk *r;
	const struct rblk_info *info;
	char url[512]; /* the volume, for logs and descriptions */
	char export_name[RBLK_NAME_MAX];
	uint64_t size;
	uint32_t block_size;
	uint32_t slot_size; /* bytes per pool slot: the volume's max_io */
	uint32_t nslots;    /* pool slots per queue */
	uint32_t nreqs;	 /* requests per connection: the granted queue depth */
	uint16_t tflags; /* NBD transmission flags */
	bool read_only;
	unsigned int max_conns;
	unsigned int handshake_ms; /* --handshake-timeout */
	unsigned int idle_ms;	   /* --idle-timeout; 0: none */
	unsigned int spin_us;	   /* --poll-spin-us; 0: none */
	size_t max_client_buf;	   /* --max-client-buffer */

	int stop_fd; /* eventfd: readable once shutdown begins; never drained */
	int reap_fd; /* eventfd: a connection thread has finished */

	pthread_mutex_t
	    lock; /* conns, nconns, qs[].busy, nbd_conn.negotiating */
	struct nbd_conn *conns; /* newest first */
	unsigned int nconns;	/* counted against max_conns: not evicted */
	unsigned int next_id;
	struct nbd_qslot *qs;
	unsigned int nqueues;
};

struct nbd_conn {
	struct nbd_server *srv;
	struct nbd_conn *next; /* srv->conns; guarded by srv->lock */
	pthread_t thread;
	bool finished; /* thread is done and may be joined; srv->lock */
	/*
	 * In the handshake, no queue claimed yet (srv->lock). While set, the
	 * accept loop may evict it: shutdown() its socket (the thread still
	 * owns and closes the fd) and stop counting it in nconns.
	 */
	bool negotiating;
	bool evicted; /* srv->lock */
	int fd;	      /* client socket, non-blocking */
	unsigned int id;
	char peer[96];
	bool fixed;	      /* client set NBD_FLAG_C_FIXED_NEWSTYLE */
	bool no_zeroes;	      /* client set NBD_FLAG_C_NO_ZEROES */
	uint64_t deadline_ms; /* handshake deadline */

	/* After the handshake; belongs to the thread. */
	int qidx; /* claimed queue, -1 when none */
	struct rblk_queue *q;
	struct nbd_qslot *qs;
	/* the size this client was told (nbd_server_size()), its bound */
	uint64_t size;
};

/*
 * Claim the lowest free queue for c and set up its buffer pool (the
 * handshake's NBD_OPT_GO or NBD_OPT_EXPORT_NAME). 0, -EBUSY (every queue
 * is taken; logged), -ECONNABORTED (evicted meanwhile), -ENOTCONN or
 * -ENOMEM. nbd_server.c.
 */
int nbd_server_attach(struct nbd_conn *c);

/*
 * The volume's size to tell client c now, kept in c->size: asked of the
 * target on c's queue once it holds one (no thread polls an idle queue, so
 * the session may not have heard of a resize yet), else the session's.
 * nbd_server.c.
 */
uint64_t nbd_server_size(struct nbd_conn *c);

/* c's handshake, on its thread: 1 to serve, else close (nbd_handshake.c) */
int nbd_handshake(struct nbd_conn *c);

#endif
