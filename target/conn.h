/* SPDX-License-Identifier: MIT */
/*
 * A connection of the target and its commands (conn.c, io.c): the
 * per-command state machine's states and the connection's state, buffers,
 * windows and share of the slot pool. Owned by one worker; everything here
 * runs on its thread unless a field says otherwise.
 */
#ifndef RBLK_TARGET_CONN_H
#define RBLK_TARGET_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/auth.h"
#include "../common/proto.h"
#include "../transport/qp.h"
#include "export.h"
#include "pr.h"
#include "stats.h"

struct export;
struct host_share;
struct lim_conn;
struct vol_reg;
struct wgroup;
struct worker;

/*
 * One tag of a connection. States (docs/PROTOCOL.md, "The flows"):
 */
enum treq_state {
	TREQ_FREE,     /* tag not in use */
	TREQ_THROTTLE, /* over a QoS limit: on its conn's qos FIFO (qos.h) */
	TREQ_SLOT,  /* READ/WRITE: waiting for pool space (worker->slot_wait) */
	TREQ_GRANT, /* WRITE: bind a write window and send GRANT (credits) */
	TREQ_DATA,  /* WRITE: GRANT out; waiting for WRITE_DATA */
	TREQ_EXEC,  /* start the backend operation */
	TREQ_BACKEND, /* engine operation in flight */
	TREQ_RESPOND, /* result known; waiting for send-queue credits */
	TREQ_PULLED,  /* pull READ: RESP + window out; waiting for READ_DONE */
};

struct treq {
	struct tconn *conn;
	/* cmd.tag is the tag's index (c->reqs[], c->mw[], work request ids) */
	struct rblk_cmd cmd;
	/* the tag as the command carried it, echoed in its answers */
	uint16_t wire_tag;
	enum treq_state state;
	int result;	    /* 0 or -errno from the backend */
	int status;	    /* RBLK_S_* to send back */
	bool odirect;	    /* current attempt used the O_DIRECT descriptor */
	uint64_t t_recv_ns; /* when the command arrived, for latency stats */
	/*
	 * The command's run of the worker's slot pool (READ/WRITE), from
	 * TREQ_SLOT until its window is dead and nothing reads it: NULL
	 * otherwise. Backends read and write the data here.
	 */
	void *slot;
	/* a push READ's slot: the NIC reads it until its RESP completes */
	void *sent_slot;
	void *resp_buf; /* this tag's response capsule buffer */
	/*
	 * A push READ on a RBLK_F_PUSH_IMM connection (refused or not): its
	 * answer is a SEND_WITH_INV of cmd.rkey, its data a WRITE WITH
	 * IMMEDIATE naming that key (treq_post_response()).
	 */
	bool push_inv;
	/*
	 * An inline WRITE waiting in TREQ_SLOT keeps its receive buffer
	 * (cmd.data points into it) until a slot takes the data: its index
	 * + 1, else 0.
	 */
	unsigned int held_recv;
	struct treq *next_wait; /* on conn's send-credit wait list */
	struct treq *next_slot; /* on its connection's slot_head FIFO */
	struct treq *next_qos;	/* on its connection's qos_head FIFO */
	/*
	 * worker->now_ms when r last changed state: in the states where its
	 * slot waits on the peer (GRANT, DATA, RESPOND, PULLED) this is how
	 * long the peer has held it (slot_held_too_long(), io.c).
	 */
	uint64_t state_ms;
	/* conn->flushes + 1 while this tag's response waits in the batch:
	 * a command on the tag before that batch is posted is a violation */
	uint64_t resp_batch;
};

/* Called by engines (worker thread) when r's operation finished. */
void treq_backend_done(struct treq *r, int res);

/* ---- connections ----------------------------------------------------- */

enum tconn_state {
	TCONN_LOGIN,   /* accepted; waiting for HELLO */
	TCONN_LIVE,    /* logged in; serving commands */
	TCONN_CLOSING, /* failed or finished; waiting for backend I/O to end */
};

struct tconn {
	struct xp_conn *xc;
	struct worker *worker;
	enum tconn_state state;
	uint64_t id; /* for logs */
	char peer[96];
	uint16_t cm_qd; /* queue depth asked for in the connect request */
	/* in-capsule bytes its receives hold (login_inline_cap()) */
	uint32_t inline_cap;
	struct export *exp;
	/*
	 * What commands are validated against; lim.size follows the
	 * export's (export_size()) from one command to the next.
	 */
	struct rblk_limits lim;
	/*
	 * The volume size this connection was last told (its LOGIN, then
	 * RBLK_RESP_F_SIZE); with RBLK_F_RESIZE its answers carry the flag
	 * while the export's size differs.
	 */
	uint64_t told_size;

	/*
	 * Message buffers and send credits (transport/qp.h). The send area:
	 * a response buffer per tag, LOGIN's, then auth_buf. Responses (and
	 * push-read RDMA WRITEs) built since the last flush sit in qp's
	 * batch, posted as one chain (one doorbell, one sendmsg) by
	 * tconn_flush_sends() at the end of the worker's loop iteration.
	 */
	struct qp qp;
	/*
	 * Receive buffers the transport holds (posted, not yet completed):
	 * a buffer is reposted only once its message is done with, by
	 * whichever path finishes it (tconn_repost()); a second post of
	 * one still out is refused, naming it, rather than left to fill
	 * the receive queue or land two messages in one buffer.
	 */
	uint64_t recv_out[(2 * RBLK_MAX_QD + 2 + 63) / 64];

	struct wgroup *wg; /* the worker's poll group c is in */
	/* one type-2 window per tag, bound per command (LIVE only) */
	struct xp_mw **mw;
	/* RBLK_F_DIRECT: a window over the volume, bound at login */
	struct vol_reg *vol;
	struct xp_mw *vol_mw;

	struct treq *reqs;		    /* qd of them */
	struct treq *wait_head, *wait_tail; /* waiting for credits */
	uint64_t flushes;	  /* batches posted (or dropped) so far */
	struct tconn *next_flush; /* on worker->flush_head while nr_batch */
	unsigned int backend_inflight;
	bool login_sent_close; /* close once the LOGIN refusal is sent */
	/* shown by the control socket; written under worker->conns_lock */
	char host[RBLK_NAME_MAX]; /* host name from HELLO */
	uint16_t queue_id;
	uint64_t login_ms;    /* now_ms() at login */
	struct iostats stats; /* written by the owning worker only */

	uint64_t login_deadline_ms; /* TCONN_LOGIN: fail if still here then */
	/*
	 * Authentication, in TCONN_LOGIN (so the login deadline covers it):
	 * the HELLO is kept while AUTH_CHALLENGE is out; nothing is
	 * allocated or registered for slots until the response verifies.
	 */
	bool auth_wait; /* AUTH_CHALLENGE sent; only AUTH_RESPONSE is valid */
	void *auth_buf; /* send buffer of AUTH_* messages, in msg_mem */
	struct rblk_hello hello;
	uint8_t auth_nonce[RBLK_AUTH_NONCE_LEN];
	/*
	 * A refusal kept from a stranger (login_hidden_refusal()): answered
	 * AUTH_REQUIRED or AUTH_FAILED, or with this status once the host
	 * authenticated; c->exp is NULL. 0: none.
	 */
	int hidden_st;
	char hidden_why[256];
	/* what protects the connection (TLS), from its setup on */
	struct xp_tls_peer tls;

	struct tconn *next;	    /* worker's list */
	unsigned int push_inflight; /* push READ responses not completed */
	uint64_t push_progress_ms;  /* last push completed, or first posted */
	/*
	 * Slot pool share (docs/PROTOCOL.md, "What a session may hold"):
	 * the bytes of pool runs its commands hold (push slots included),
	 * its host's share on this worker, and its commands waiting for a
	 * slot (FIFO), served round-robin with other connections' from
	 * worker->slot_conns while on it (slot_queued).
	 */
	uint64_t held;
	struct host_share *hs;
	struct treq *slot_head, *slot_tail;
	struct tconn *next_slot_conn;
	bool slot_queued, slot_parked;
	/*
	 * QoS (qos.h): the limits its commands draw from (its export's, its
	 * host's; NULL: none), and its commands waiting for them (FIFO), on
	 * worker->qos_conns while there are any.
	 */
	struct qos *qos[2];
	struct treq *qos_head, *qos_tail;
	struct tconn *next_qos_conn;
	bool qos_listed;
	struct lim_conn *adm; /* its admission (limits_admit()); owned */
	/*
	 * Reservations (pr.h): the export's pr->gen its access was computed
	 * for (0: never), and what that access forbids (PR_DENY_*).
	 */
	unsigned int pr_seen;
	uint8_t pr_deny;
	uint64_t accepted_ms; /* when worker_accept() took it */
	bool talked;	      /* TCONN_LOGIN: a first message came */
	uint64_t last_rx_ms;  /* worker->now_ms of the last message */
	uint64_t closing_ms;  /* when it became TCONN_CLOSING */
};

/*
 * Does a reservation forbid c this opcode? The command path's check
 * (pr.h): one load and compare while the export's reservations stay as
 * they were, no lock.
 */
static inline bool pr_denied(struct tconn *c, uint8_t opcode)
{
	struct pr *p = c->exp->pr;

	if (!p)
		return false;
	if (atomic_load_explicit(&p->gen, memory_order_acquire) != c->pr_seen)
		pr_refresh(c);
	return c->pr_deny & pr_class(opcode);
}

/* Transport sizes for a connection of queue depth qd. */
void tconn_attr(uint16_t qd, uint32_t max_io, struct xp_conn_attr *attr);

#endif
