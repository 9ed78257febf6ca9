/* SPDX-License-Identifier: MIT */
/*
 * What the NBD transmission-phase engine's files share (see nbd_conn.h
 * for the contract):
 *   nbd_conn.c     requests in (read, validate, submit), the poll loop,
 *                  nbd_conn_run()
 *   nbd_conn_tx.c  completions and replies out (reap, batched sendmsg),
 *                  and what fails a request, the queue or the socket
 * One run's state, struct nc, belongs to the thread that called
 * nbd_conn_run(); nothing here takes a lock. What both files use per
 * request is static inline here.
 */
#ifndef RBLK_INITIATOR_NBD_CONN_INTERNAL_H
#define RBLK_INITIATOR_NBD_CONN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/freelist.h"
#include "common/spin.h"
#include "initiator/nbd_conn.h"
#include "initiator/nbd_proto.h"

/*
 * Request life cycle:
 *   FREE -> RECV (WRITE payload arriving, or being discarded)
 *        -> INFLIGHT (submitted to the rblk queue, which holds what
 *           waits for a tag itself)
 *        -> REPLY (on the tx list) -> FREE once the reply is sent.
 * Any stage may go straight to REPLY with an error, and to FREE when the
 * socket is gone.
 */
enum nc_req_state {
	NC_REQ_FREE,
	NC_REQ_RECV,
	NC_REQ_INFLIGHT,
	NC_REQ_REPLY,
};

struct nc_req {
	struct nc_req *next; /* free or tx list */
	enum nc_req_state state;
	uint16_t type;
	uint16_t flags;
	uint64_t cookie;
	uint64_t offset;
	uint32_t len;
	uint32_t error; /* NBD_E* for the reply, 0 on success */
	void *buf;	/* READ/WRITE data; NULL for the others */
	int slot; /* pool slot of buf, -1 when buf is malloc'd (or NULL) */
	size_t heap_len; /* bytes of a malloc'd buf, counted in nc.heap_bytes */
	unsigned char reply[NBD_SIMPLE_REPLY_SIZE];
};

struct nc_list {
	struct nc_req *head, *tail;
};

enum nc_rx_state {
	NC_RX_HDR,     /* waiting for a 28-byte request header */
	NC_RX_DATA,    /* copying a WRITE payload into rx_req->buf */
	NC_RX_DISCARD, /* skipping the payload of a WRITE that fails anyway */
};

struct nc {
	const struct nbd_conn_opts *o;
	struct nbd_conn_stats *st;
	struct nc_req *reqs;
	struct nc_req *free_reqs;
	int *free_slots;
	unsigned int nfree_slots;
	struct nc_list tx;     /* replies to send, head partly sent */
	size_t tx_off;	       /* bytes of tx.head already sent */
	unsigned int inflight; /* submitted to rblk, not yet reaped */
	size_t heap_bytes; /* malloc'd request buffers held: <= o->max_buf */
	bool rx_stalled;   /* a header waits for heap_bytes to drop (max_buf) */
	uint64_t last_io_ms; /* a byte last moved on the socket (idle_ms) */

	unsigned char *rx; /* staging buffer for headers and payloads */
	size_t rx_start, rx_end;
	enum nc_rx_state rx_state;
	struct nc_req *rx_req; /* NC_RX_DATA, NC_RX_DISCARD */
	size_t rx_done;	       /* payload bytes received for rx_req */

	bool rx_closed; /* read no more requests (DISC, EOF, error, abort) */
	/*
	 * The socket is known empty: the last read came back short, or the
	 * last poll() asked for POLLIN and did not get it. Headers are not
	 * read for until poll() says more came (level-triggered): no EAGAIN
	 * recv per request.
	 */
	bool rx_empty;
	/*
	 * The queue may have completions or work: its fd was readable,
	 * rblk_queue_arm() said so, or nothing is known yet. Only then does
	 * the loop call rblk_poll(): each call costs an epoll_wait on tcp.
	 */
	bool q_ready;
	struct spin_backoff spin; /* o->spin_us: common/spin.h */
	bool sock_dead;		  /* the socket failed: replies are dropped */
	bool q_dead;		  /* the rblk connection failed */
	bool aborting;		  /* abort_fd fired; deadline_ms applies */
	uint64_t deadline_ms;
};

/* The NBD error for requests of a lost queue, by policy. */
static inline uint32_t nc_qlost_error(const struct nc *c)
{
	return c->o->qlost == NBD_CONN_QLOST_CLOSE ? NBD_ESHUTDOWN : NBD_EIO;
}

static inline void req_free(struct nc *c, struct nc_req *req)
{
	if (req->slot >= 0)
		c->free_slots[c->nfree_slots++] = req->slot;
	else
		free(req->buf);
	c->heap_bytes -= req->heap_len;
	req->heap_len = 0;
	req->buf = NULL;
	req->slot = -1;
	req->state = NC_REQ_FREE;
	FREELIST_PUSH(c->free_reqs, req, next);
}

/* nbd_conn.c */
const char *nc_cmd_name(uint16_t type);
/* Stop reading requests; a half-received one is dropped. */
void nc_rx_close(struct nc *c);

/* nbd_conn_tx.c */
/* The socket is unusable: drop every queued reply. */
void nc_sock_fail(struct nc *c, int err);
/* Put req's simple reply (req->error) on the tx list. */
void nc_queue_reply(struct nc *c, struct nc_req *req);
/* Answer req with the NBD error for ret (a -errno from rblk). */
void nc_req_fail(struct nc *c, struct nc_req *req, int ret);
/* Complete everything the queue has finished. Returns true if any. */
bool nc_reap(struct nc *c);
/*
 * Send queued replies with as few sendmsg calls as the socket allows.
 * Returns true when at least one reply went out (its request is free).
 */
bool nc_tx_flush(struct nc *c);

#endif /* RBLK_INITIATOR_NBD_CONN_INTERNAL_H */
