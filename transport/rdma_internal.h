/* SPDX-License-Identifier: MIT */
/*
 * rdma_internal.h - the verbs transport (libibverbs + librdmacm), shared
 * by transport/rdma*.c:
 *
 *   rdma.c        the ops table
 *   rdma_cm.c     listener, passive and active connection setup, rdma_cm
 *                 events, connection teardown
 *   rdma_group.c  poll groups: PD, CQ, channels, epoll set, polling
 *   rdma_post.c   regions, windows, posting
 *
 * One code path for InfiniBand, RoCE (rdma_rxe included) and iWARP (siw):
 * addresses are IP addresses resolved by rdma_cm, connections are RC QPs.
 *
 * Objects per group (one per thread), in setup order:
 *   event channel  rdma_cm events of the group's connections. A passive
 *                  side id is migrated onto it off the listener's channel
 *                  by request_join(), an active one is created on it, so
 *                  every event of a connection is read by the thread that
 *                  owns it (a per-listener channel would deliver them to
 *                  the listener's thread)
 *   PD             one protection domain: a region's rkey is valid on
 *                  every QP of the group; type-2 memory windows bound on
 *                  one QP narrow that to one connection
 *   comp channel   CQ notifications (O_NONBLOCK)
 *   CQ             one for send and receive of every connection, resized
 *                  as connections join
 *   epoll fd       the comp channel, the cm channel and the watched fds:
 *                  (base.epfd: what xp_group_fd() hands out)
 * A shared group (group_create) is bound to the first RDMA device
 * (rdma_get_devices) and takes connections on that device only. A private
 * group (a connection made with a NULL group) binds to the device of its
 * connection once that is known, and goes with the connection.
 *
 * Work request ids: the wr_id given to the HCA is not the caller's:
 *   bit 63 receive, bits 62..40 the connection's index in its group's
 *   table, bits 39..32 that entry's generation, bits 31..0 the low bits of
 *   the send or receive sequence number.
 * The caller's wr_id and opcode are kept in a per-connection ring slot
 * indexed by the sequence number. RC completes each queue in posting
 * order, so a completion for sequence n retires every earlier slot of its
 * queue (unsignaled sends included), and an error completion, whose
 * ibv_wc.opcode is undefined, still reports the right xp opcode. A
 * completion of a connection already destroyed (its index freed or
 * reused with another generation) is dropped. The rings also enforce
 * max_send_wr/max_recv_wr, so the CQ, sized for all of them, cannot
 * overflow.
 *
 * Threads: as transport.h says; nothing here is shared between groups
 * except the read-only device contexts librdmacm keeps per device and one
 * atomic counter spreading CQs over completion vectors.
 */
#ifndef RBLK_RDMA_INTERNAL_H
#define RBLK_RDMA_INTERNAL_H

#include "transport.h"
#include "xp_internal.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../common/log.h"
#include "../common/util.h"

/*
 * Outstanding RDMA READs per QP, each direction. ConnectX parts advertise
 * 16; more only grows per-QP responder state on devices that allow it,
 * and READs beyond the limit simply wait in the send queue.
 */
#define XR_RD_ATOM_CAP 16
/* Ask for this much inline send data; fall back to none if refused. */
#define XR_INLINE_WANT 64
/* transport retries (lost packets, ACK timeouts) before IBV_WC_RETRY_EXC */
#define XR_RETRY_COUNT 7
/*
 * RNR retries. transport.h makes a SEND with no receive posted fatal for
 * the connection (XP_WC_RNR_ERR), as on tcp and iWARP. 7 would mean
 * "retry forever" and turn that into a silent hang; 6 retries at the CM's
 * minimum RNR timer (encoding 0: 655 ms) fail it after about 4 s, which
 * still rides over a receive that is merely reposted late.
 */
#define XR_RNR_RETRY 6
#define XR_LISTEN_BACKLOG 128
/* ibv_device_attr.vendor_id of Soft-RoCE (the kernel's RXE_VENDOR_ID) */
#define XR_RXE_VENDOR_ID 0xffffffu
/* connect() timeout when the caller passes <= 0 */
#define XR_DEFAULT_TIMEOUT_MS 30000
/* Ack CQ events in batches: each ack takes a mutex in libibverbs. */
#define XR_CQ_ACK_BATCH 16
#define XR_POLL_BATCH 16
#define XR_CQ_INIT 256 /* CQ entries of a new group; grows by resizing */
#define XR_EP_EVENTS 16
#define XR_SERVICE_EVERY 16 /* busy polls between channel services */
/* wr_id layout, see above */
#define XR_RECV_BIT (1ull << 63)
#define XR_IDX_SHIFT 40
#define XR_IDX_MAX (1u << 23)
#define XR_GEN_SHIFT 32
#define XR_SEQ_MASK 0xffffffffull
/*
 * IB CM reject reason for a reject issued by the remote consumer
 * (rdma_reject); anything else (no listener: "invalid service id", stale
 * connection, timeout) carries no private data of the peer's.
 */
#define XR_IB_CM_REJ_CONSUMER_DEFINED 28
#define XR_IB_CM_REJ_INVALID_SERVICE_ID 8 /* no listener on the port */

#define XR_NAME_MAX 80
#define XR_WHY_MAX 200

struct xr_listener {
	struct xp_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char name[XR_NAME_MAX];
};

struct xr_mr {
	struct xp_mr base;
	struct ibv_mr *mr;
	struct xr_mr *prev, *next; /* group's list, for group_destroy() */
};

struct xr_mw {
	struct xp_mw base;
	struct ibv_mw *mw;
	struct xr_mw *prev, *next;   /* group's list */
	struct xr_conn *conn;	     /* last bound on (see xr_conn_mws_reset) */
	struct xr_mw *cprev, *cnext; /* conn's list */
};

/* A connection table entry: wr_ids name connections through it. */
struct xr_slot {
	struct xr_conn *conn; /* NULL: free */
	uint8_t gen;
	uint32_t next_free;
};

struct xr_group {
	struct xp_group base;
	struct rdma_event_channel *ch;
	struct ibv_context *verbs; /* NULL until bound to a device */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	int cq_size;		 /* entries the CQ has */
	uint32_t cq_need;	 /* entries the connections need */
	unsigned int cq_unacked; /* CQ events read but not yet acked */
	struct ibv_device_attr da;
	bool iwarp;

	struct xr_conn *private_conn; /* compatibility: goes with it */
	struct xr_conn *conns;	      /* all connections (gnext) */
	struct xr_slot *ctab;
	uint32_t ctab_len, ctab_cap, ctab_free; /* ctab_free: index + 1 */
	struct xr_mr *mrs;
	struct xr_mw *mws;
	bool dying; /* group_destroy(): windows need no recycling */
	unsigned int busy_polls; /* polls with completions since a service */
};

/*
 * Per work request scratch: its sge, or for a BIND_MW a copy of the
 * window's ibv_mw carrying the key it has when that bind executes (the
 * provider reads the window's "current" key at post time, and rxe
 * refuses a bind whose idea of it is stale: several binds of one window
 * in one chain each need their own).
 */
union xr_wr_aux {
	struct ibv_sge sge;
	struct ibv_mw mw;
};

/* What a send-queue sequence number stands for. */
struct xr_sq_slot {
	uint64_t wr_id;
	enum xp_wc_opcode opcode;
};

struct xr_conn {
	struct xp_conn base;
	struct xr_group *g;
	struct xr_conn *gprev, *gnext;
	uint32_t idx; /* in g->ctab */
	uint8_t gen;
	enum xp_conn_state state;
	bool cm_connected; /* accepted or established: rdma_disconnect owed */
	bool shut;	   /* xr_shutdown() ran */
	bool err_logged;   /* the one warning about a failed completion */
	/*
	 * Why it went to XP_CONN_ERROR, its first failure in words (empty
	 * while it has not): what conn_error() tells the owner, who may
	 * only see a post refused or a flush.
	 */
	char why[XR_WHY_MAX];

	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint32_t cq_share; /* CQ entries counted in g->cq_need */

	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_inline;
	uint8_t rd_atom;	/* our responder resources (device, capped) */
	uint8_t init_depth;	/* our initiator depth (device, capped) */
	uint8_t req_rd_atom;	/* passive: peer's responder resources */
	uint8_t req_init_depth; /* passive: peer's initiator depth */

	/* send queue: seq sq_head..sq_tail-1 outstanding */
	uint64_t sq_head, sq_tail;
	struct xr_sq_slot *sq_slot; /* [max_send_wr] */
	struct ibv_send_wr *swr;    /* [max_send_wr], built per post_send */
	union xr_wr_aux *aux;	    /* [max_send_wr] */
	/* receive queue: seq rq_head..rq_tail-1 outstanding */
	uint64_t rq_head, rq_tail;
	uint64_t *rq_wr_id; /* [max_recv_wr] */

	struct xr_mw *mws;	/* windows last bound on this connection */
	char name[XR_NAME_MAX]; /* "rdma 192.0.2.1:7441" */
};

static inline struct xr_conn *to_conn(struct xp_conn *xc)
{
	return container_of(xc, struct xr_conn, base);
}

static inline struct xr_group *to_xr_group(struct xp_group *g)
{
	return container_of(g, struct xr_group, base);
}

static inline struct xr_listener *to_listener(struct xp_listener *xl)
{
	return container_of(xl, struct xr_listener, base);
}

/* errno of a librdmacm/libibverbs call that returned -1/NULL, as -errno. */
static inline int neg_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/*
 * libibverbs calls return a positive errno (the documented convention),
 * -1 with errno set, or (some providers) a negative errno. Normalise.
 */
static inline int verbs_ret(int ret)
{
	if (ret > 0)
		return -ret;
	if (ret == -1)
		return neg_errno();
	return ret;
}

/* rdma_cm.c */
int xr_set_nonblock(int fd);
struct rdma_event_channel *xr_channel_create(void);
int xr_check_devices(void);
void xr_shutdown(struct xr_conn *c);
void xr_fail(struct xr_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *xr_conn_error(struct xp_conn *xc);
void xr_cm_event(struct xr_conn *c, enum rdma_cm_event_type type, int status);
int xr_listen(const char *host, uint16_t port, struct xp_listener **out);
void xr_listener_destroy(struct xp_listener *xl);
int xr_listener_fd(struct xp_listener *xl);
int xr_take_request_op(struct xp_listener *xl, struct xp_request **out,
		       void *priv, size_t *priv_len);
const char *xr_request_peer_name(struct xp_request *xr);
void xr_request_reject(struct xp_request *xr, const void *priv,
		       size_t priv_len);
int xr_request_join(struct xp_request *xr, struct xp_group *xg,
		    const struct xp_conn_attr *attr, struct xp_conn **out);
int xr_accept(struct xp_conn *xc, const void *priv, size_t priv_len);
void xr_reject(struct xp_conn *xc, const void *priv, size_t priv_len);
int xr_group_connect(struct xp_group *g, const char *host, uint16_t port,
		     const struct xp_conn_attr *attr, const void *priv,
		     size_t priv_len, int timeout_ms, struct xp_conn **out,
		     void *rej, size_t *rej_len);
void xr_destroy(struct xp_conn *xc);
void xr_disconnect(struct xp_conn *xc);
enum xp_conn_state xr_state(struct xp_conn *xc);
const char *xr_peer_name(struct xp_conn *xc);
struct xp_group *xr_conn_group(struct xp_conn *xc);

/* rdma_group.c */
int xr_group_alloc(struct xr_group **out);
int xr_group_bind_device(struct xr_group *g, struct ibv_context *verbs,
			 uint32_t cqe);
int xr_group_create(struct xp_group **out);
void xr_group_destroy(struct xp_group *xg);
int xr_conn_join(struct xr_group *g, struct xr_conn *c);
void xr_conn_leave(struct xr_conn *c);
int xr_setup_queue(struct xr_conn *c, const struct xp_conn_attr *attr);
void xr_teardown_queue(struct xr_conn *c);
void xr_cm_drain(struct xr_group *g);
int xr_group_arm(struct xp_group *xg);
int xr_group_poll(struct xp_group *xg, struct xp_wc *wc, int max);

/* rdma_post.c */
int xr_setup_queue_op(struct xp_conn *xc, const struct xp_conn_attr *attr);
int xr_reg_mr(struct xp_group *xg, void *addr, size_t len, int access,
	      struct xp_mr **out);
void xr_dereg_mr(struct xp_mr *xm);
void xr_mr_free(struct xr_group *g, struct xr_mr *m);
int xr_alloc_mw(struct xp_group *xg, struct xp_mw **out);
void xr_dealloc_mw(struct xp_mw *xw);
void xr_mw_free(struct xr_group *g, struct xr_mw *w);
void xr_conn_mws_reset(struct xr_conn *c);
int xr_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
		 struct xp_send_wr **bad);
int xr_post_recv(struct xp_conn *xc, uint64_t wr_id, const struct xp_sge *sge);

#endif
