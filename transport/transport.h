/* SPDX-License-Identifier: MIT */
/*
 * transport.h - a verbs-shaped transport API.
 *
 * rblk moves data with one-sided RDMA READ/WRITE against registered memory
 * and carries commands in SEND/RECV messages. This header is the whole
 * contract between the target/initiator and a transport; two implement it:
 *
 *   rdma  transport/rdma_*.c  libibverbs + librdmacm (InfiniBand, RoCE, iWARP)
 *   tcp   transport/tcp_*.c   the same semantics in user space over TCP
 *
 * Model (the verbs model, reduced to what rblk needs):
 *   - A poll group (struct xp_group) is what one thread drives: one
 *     protection domain, one completion queue, one pollable fd. rdma: one
 *     PD, one CQ + completion channel, one rdma_cm event channel for the
 *     group's connections, one epoll set over those and the watched fds.
 *     tcp: one epoll set over the group's sockets and watched fds, and the
 *     group's key table (regions and windows). No nested epolls.
 *   - A connection (struct xp_conn) is one reliable connected queue pair in
 *     one group. Its completions come out of group_poll() tagged with it
 *     (xp_wc.conn). A connection created with a NULL group gets a private
 *     group of its own, and the per-connection fd()/arm()/poll() wrappers
 *     work on that group (the compatibility path; on a connection of a
 *     shared group they would return other connections' completions too).
 *   - Memory regions are registered on a group (its PD). A region's own
 *     rkey is valid on every connection of the group (verbs PD semantics);
 *     a region registered with only LOCAL_WRITE | MW_BIND grants no remote
 *     access by its own rkey at all.
 *   - Memory windows (type 2) are allocated on a group and bound with a
 *     XP_WR_BIND_MW work request on one connection: the window's key then
 *     grants exactly [addr, addr + length) with the bind's access on that
 *     connection only, until it is invalidated (XP_WR_LOCAL_INV, the peer's
 *     XP_WR_SEND_WITH_INV naming it, the next bind, dealloc_mw(), or the
 *     connection's destruction). xp_mw_next_rkey() is the key the next bind
 *     gives, so a SEND later in the same chain can carry it.
 *   - post_send() takes a chain of work requests (SEND, SEND_WITH_INV,
 *     RDMA WRITE, RDMA READ, BIND_MW, LOCAL_INV) and executes them in order
 *     (RC ordering): data of an RDMA WRITE is placed at the peer before a
 *     SEND posted after it is delivered; a bind or invalidate takes effect
 *     before any later request of the chain is seen by the peer. A request
 *     flagged XP_SEND_FENCE starts only after every earlier RDMA READ of
 *     its connection completed (IBV_SEND_FENCE).
 *   - post_recv() gives a buffer for one incoming SEND. A SEND arriving with
 *     no receive posted is a fatal error for the connection (RNR). A
 *     SEND_WITH_INV invalidates the named window of the receiving
 *     connection before its RECV completion is delivered; that completion
 *     has XP_WC_F_WITH_INV and the key in invalidated_rkey. A key that is
 *     not a window bound on the receiving connection fails the connection.
 *   - Completions are reaped with group_poll(). Every RECV completes; the
 *     send-queue requests complete only when XP_SEND_SIGNALED is set, and
 *     an unsignaled request is finished when a later signaled one completes.
 *     A signaled RDMA WRITE completes once the peer has placed its data
 *     (RC: the responder's acknowledgement; tcp: its WRITE_ACK frame), so
 *     the data is then visible to every later reader of that memory.
 *   - Any error moves the connection to the error state: the failing request
 *     completes with its error status, every other outstanding request
 *     completes with XP_WC_FLUSH_ERR, and new posts fail with -ENOTCONN.
 *     A one-sided access outside a registered region or bound window, with
 *     an unknown, invalidated or foreign key (a window bound on another
 *     connection), or without the needed access right, fails the
 *     connection on both sides (the issuer sees XP_WC_REM_ACCESS_ERR),
 *     exactly as RC QPs do; zero-length requests are checked too. The
 *     other connections of the group carry on. The passive side logs each
 *     refusal (rate-limited) with the peer's name.
 *   - The passive side of a one-sided operation does nothing but keep its
 *     group progressing (tcp: group_poll() serves the peer's READ/WRITE;
 *     rdma: the HCA does it).
 *
 * Threads: a group, its connections, regions and windows are used by one
 * thread at a time. A connection in a private group may be handed to
 * another thread between calls; so may a whole group. Listeners likewise.
 *
 * Passive side: the listener's thread takes a request (take_request())
 * that belongs to no group yet, with the initiator's private data; it may
 * refuse it there or hand it to the thread of the group it is meant for,
 * which joins it (request_join()) - as SPDK hands a new qpair to its poll
 * group's thread - so a group's thread is the only one that ever touches
 * it. Every request is joined or refused before its listener is
 * destroyed (rdma: it is on the listener's event channel until joined).
 *
 * Event loop contract: group_fd() returns a pollable descriptor (an epoll
 * fd the transport owns) that becomes readable when group_poll() may
 * return something. To sleep safely: group_poll() until it returns 0, call
 * group_arm(), group_poll() once more, and only if that returns 0 wait for
 * group_fd() to be readable. Watched fds (group_watch) are in that epoll
 * set: while one is readable, group_poll() returns one XP_WC_FD_READY
 * completion for it (conn NULL, wr_id = its cookie) per call.
 *
 * All functions return 0 (or a count) on success and a negative errno on
 * failure; they log the failing call at the point of failure.
 */
#ifndef RBLK_TRANSPORT_H
#define RBLK_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XP_PRIV_MAX 48 /* connect/reject private data, bytes */

struct xp_listener;
struct xp_request;
struct xp_conn;
struct xp_group;
struct xp_watch;
struct xp_tls;
struct xp_tls_peer;

enum xp_access {
	XP_ACCESS_LOCAL_WRITE = 1 << 0,	 /* RECV or RDMA READ may land here */
	XP_ACCESS_REMOTE_READ = 1 << 1,	 /* peer may RDMA READ from it */
	XP_ACCESS_REMOTE_WRITE = 1 << 2, /* peer may RDMA WRITE into it */
	XP_ACCESS_MW_BIND = 1 << 3,	 /* memory windows may be bound on it */
};

/* A registered memory region. Fields are read-only for users. */
struct xp_mr {
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey; /* valid on every connection of the group */
	int access;    /* enum xp_access bits */
	struct xp_group *group;
};

/*
 * A memory window (type 2). rkey is the key of the current (or last) bind;
 * it grants nothing unless the window is bound. Read-only for users.
 */
struct xp_mw {
	uint32_t rkey;
	struct xp_group *group;
};

/*
 * The key the next bind of mw will give: the low 8 bits ("key byte") step,
 * the rest (the window's index) stays (ibv_inc_rkey). Both transports make
 * keys this way, so this is not an op.
 */
static inline uint32_t xp_mw_next_rkey(const struct xp_mw *mw)
{
	return (mw->rkey & 0xffffff00u) | ((mw->rkey + 1) & 0xffu);
}

/* Local buffer: must lie inside mr. */
struct xp_sge {
	void *addr;
	uint32_t length;
	struct xp_mr *mr;
};

enum xp_wr_opcode {
	XP_WR_SEND,
	XP_WR_RDMA_WRITE,    /* local sge -> remote_addr/rkey */
	XP_WR_RDMA_READ,     /* remote_addr/rkey -> local sge */
	XP_WR_BIND_MW,	     /* wr->bind: bind a window on this connection */
	XP_WR_LOCAL_INV,     /* invalidate our window wr->invalidate_rkey */
	XP_WR_SEND_WITH_INV, /* SEND that invalidates the peer's window
				wr->invalidate_rkey before it is received */
	/*
	 * RDMA WRITE that also consumes one of the peer's receives: its
	 * RECV completion has XP_WC_F_WITH_IMM, wr->imm and the WRITE's
	 * length in byte_len, and no data in the receive buffer. Only
	 * where xp_ops.write_imm (rdma); tcp refuses it at post time.
	 */
	XP_WR_RDMA_WRITE_WITH_IMM,
};

#define XP_SEND_SIGNALED (1u << 0)
/* Start only after every earlier RDMA READ of the connection completed. */
#define XP_SEND_FENCE (1u << 1)

/*
 * XP_WR_BIND_MW: after it, mw's key rkey (which must be
 * xp_mw_next_rkey(mw)) grants access (XP_ACCESS_REMOTE_READ/WRITE) to
 * [addr, addr + length) of mr on the posting connection only. mr must have
 * XP_ACCESS_MW_BIND, the range must lie in it, and remote write needs
 * XP_ACCESS_LOCAL_WRITE on mr. length 0 is a valid (empty) bind. mw->rkey
 * becomes rkey when the bind is posted.
 */
struct xp_mw_bind {
	struct xp_mw *mw;
	struct xp_mr *mr;
	uint64_t addr;
	uint64_t length;
	int access;
	uint32_t rkey;
};

struct xp_send_wr {
	struct xp_send_wr *next; /* chain; NULL ends it */
	uint64_t wr_id;		 /* returned in the completion */
	enum xp_wr_opcode opcode;
	unsigned int flags;	  /* XP_SEND_* */
	struct xp_sge sge;	  /* one gather/scatter element */
	uint64_t remote_addr;	  /* one-sided only */
	uint32_t rkey;		  /* one-sided only */
	uint32_t invalidate_rkey; /* LOCAL_INV, SEND_WITH_INV */
	uint32_t imm;		  /* RDMA_WRITE_WITH_IMM, host order */
	struct xp_mw_bind bind;	  /* BIND_MW */
};

enum xp_wc_status {
	XP_WC_SUCCESS = 0,
	XP_WC_FLUSH_ERR, /* connection went to error; not this WR's fault */
	XP_WC_REM_ACCESS_ERR, /* peer refused our one-sided access */
	XP_WC_LOC_ERR, /* local: bad sge, recv buffer too small, bad bind */
	XP_WC_RNR_ERR, /* peer had no receive posted */
	XP_WC_FATAL,   /* transport failure: link down, peer gone */
};

enum xp_wc_opcode {
	XP_WC_SEND, /* SEND and SEND_WITH_INV */
	XP_WC_RDMA_WRITE,
	XP_WC_RDMA_READ,
	XP_WC_RECV,
	XP_WC_BIND_MW,
	XP_WC_LOCAL_INV,
	XP_WC_FD_READY, /* a watched fd is readable: wr_id = its cookie */
};

#define XP_WC_F_WITH_INV (1u << 0) /* RECV of a SEND_WITH_INV */
/* RECV consumed by an RDMA WRITE WITH IMMEDIATE: imm, byte_len written */
#define XP_WC_F_WITH_IMM (1u << 1)

struct xp_wc {
	uint64_t wr_id;
	enum xp_wc_status status;
	enum xp_wc_opcode opcode;
	uint32_t byte_len;	   /* RECV: bytes received */
	struct xp_conn *conn;	   /* NULL for XP_WC_FD_READY */
	unsigned int flags;	   /* XP_WC_F_* */
	uint32_t invalidated_rkey; /* with XP_WC_F_WITH_INV */
	uint32_t imm;		   /* with XP_WC_F_WITH_IMM, host order */
};

struct xp_conn_attr {
	uint32_t max_send_wr; /* outstanding send-queue requests */
	uint32_t max_recv_wr; /* outstanding receives */
	/*
	 * The most bytes of RDMA READ responses this side holds for its
	 * peer before they are sent: the peer's outstanding READs of our
	 * memory (verbs' responder resources, in bytes). A peer that asks
	 * for more without reading what it asked for fails the connection
	 * (logged). 0: no limit. tcp only: an HCA bounds its own responder
	 * resources, and serves a READ from memory without a copy.
	 */
	uint64_t max_read_bytes;
	/*
	 * connect() only: TLS credentials (xp_tls_create(), client side) to
	 * run a TLS 1.3 handshake with before anything else; NULL: plain.
	 * tcp only (rdma refuses it with -EPROTONOSUPPORT).
	 */
	struct xp_tls *tls;
};

enum xp_conn_state {
	XP_CONN_REQUESTED, /* from request_join(), not yet accepted */
	XP_CONN_CONNECTED,
	XP_CONN_ERROR, /* failed or disconnected; only destroy() is useful */
};

/*
 * The operations one transport provides. All are required. Everything
 * but listen/listener ops, the request ops and group_create runs on the
 * group's thread.
 */
struct xp_ops {
	const char *name; /* "tcp", "rdma": the URL scheme */
	/*
	 * The passive side's CPU serves a one-sided RDMA READ (tcp: a
	 * READ_REQ frame the peer's poll() answers, a round trip through
	 * its thread); false where the HCA does it. Initiators prefer push
	 * reads (the target RDMA WRITEs) on such a transport.
	 */
	bool read_costs_peer_cpu;
	/*
	 * Registering memory pins it (counted in the process's VmPin) for
	 * the life of the registration: true on rdma; on tcp a region is
	 * ordinary memory, resident only where it was touched.
	 */
	bool reg_pins_memory;
	/*
	 * XP_WR_RDMA_WRITE_WITH_IMM is carried (rdma): the receiver learns
	 * from a completion how many bytes a WRITE placed. tcp counts what
	 * a window received instead (mw_placed).
	 */
	bool write_imm;

	/* A poll group for the calling thread. */
	int (*group_create)(struct xp_group **out);
	/* Destroys every connection, region and window of the group first. */
	void (*group_destroy)(struct xp_group *g);
	int (*group_arm)(struct xp_group *g);
	/*
	 * Reap up to max completions of every connection of the group (and
	 * XP_WC_FD_READY for readable watched fds); makes progress. >= 0
	 * count or -errno.
	 */
	int (*group_poll)(struct xp_group *g, struct xp_wc *wc, int max);

	/* Listen on host:port (host may be NULL for any). Listener thread. */
	int (*listen)(const char *host, uint16_t port,
		      struct xp_listener **out);
	void (*listener_destroy)(struct xp_listener *l);
	/* Readable when take_request() may return a request. */
	int (*listener_fd)(struct xp_listener *l);
	/*
	 * Take the next incoming connection request, or -EAGAIN. Listener
	 * thread. The request belongs to no group: priv/priv_len receive the
	 * initiator's private data (buffer of XP_PRIV_MAX); the caller then
	 * joins it to a group or refuses it, on any one thread.
	 */
	int (*take_request)(struct xp_listener *l, struct xp_request **out,
			    void *priv, size_t *priv_len);
	/* The request's peer, as peer_name() will give it. */
	const char *(*request_peer_name)(struct xp_request *r);
	/*
	 * On g's thread (any, for NULL): the request becomes a connection of
	 * group g (NULL: a private group of its own) in XP_CONN_REQUESTED
	 * state with its QP created for attr. The caller registers memory,
	 * posts receives, then calls accept() or reject(). attr NULL: the
	 * queue waits, so that the private data can size it; the caller
	 * calls setup_queue() before it posts anything. r is consumed: on
	 * failure it was refused (no private data) and freed.
	 */
	int (*request_join)(struct xp_request *r, struct xp_group *g,
			    const struct xp_conn_attr *attr,
			    struct xp_conn **out);
	/* Refuse r with private data and free it. Any one thread. */
	void (*request_reject)(struct xp_request *r, const void *priv,
			       size_t priv_len);
	/*
	 * The queue of a connection request_join() made with a NULL attr:
	 * created for attr (its share of the group's CQ reserved). -ENOSPC
	 * when the group cannot hold it (the device's CQ limit), -EINVAL for
	 * attr past the device's limits; on failure the connection stays
	 * XP_CONN_REQUESTED, for reject().
	 */
	int (*setup_queue)(struct xp_conn *c, const struct xp_conn_attr *attr);
	/* Complete the handshake; receives must already be posted. */
	int (*accept)(struct xp_conn *c, const void *priv, size_t priv_len);
	/* Refuse with private data; the connection is destroyed. */
	void (*reject)(struct xp_conn *c, const void *priv, size_t priv_len);

	/*
	 * Connect to host:port with private data, waiting at most timeout_ms;
	 * the connection joins g (NULL: a private group). On a reject,
	 * returns -ECONNREFUSED and copies the target's private data into
	 * rej/rej_len (buffer of XP_PRIV_MAX) when given. -ETIMEDOUT,
	 * -EHOSTUNREACH, -ENETUNREACH as they happen.
	 */
	int (*group_connect)(struct xp_group *g, const char *host,
			     uint16_t port, const struct xp_conn_attr *attr,
			     const void *priv, size_t priv_len, int timeout_ms,
			     struct xp_conn **out, void *rej, size_t *rej_len);

	/*
	 * Disconnect (if connected) and free the connection; its windows are
	 * invalidated. A private group goes with it, regions included.
	 */
	void (*destroy)(struct xp_conn *c);
	/* Move to XP_CONN_ERROR: outstanding work flushes. Idempotent. */
	void (*disconnect)(struct xp_conn *c);
	enum xp_conn_state (*state)(struct xp_conn *c);
	/*
	 * Optional (NULL: the transport does not keep it): why c went to
	 * XP_CONN_ERROR, its first failure in words, or NULL while it has
	 * not. The owner often learns of a failure late and indirectly (a
	 * post refused with -ENOTCONN, a flush), so its own message can
	 * name the cause.
	 */
	const char *(*conn_error)(struct xp_conn *c);
	/* "tcp 127.0.0.1:41234" style peer description for logs. */
	const char *(*peer_name)(struct xp_conn *c);
	struct xp_group *(*conn_group)(struct xp_conn *c);

	int (*reg_mr)(struct xp_group *g, void *addr, size_t len, int access,
		      struct xp_mr **out);
	void (*dereg_mr)(struct xp_mr *mr);
	int (*alloc_mw)(struct xp_group *g, struct xp_mw **out);
	/* Invalidates the window if bound. */
	void (*dealloc_mw)(struct xp_mw *mw);
	/*
	 * Optional (NULL: the transport cannot tell, as an HCA cannot):
	 * how many bytes from the start of mw's last bind the peer's RDMA
	 * WRITEs placed without a gap (a WRITE that starts past them leaves
	 * a gap they never cross). Kept through the invalidation, until the
	 * next bind. Lets the owner check that exactly a command's data
	 * arrived (a push READ's buffer, a WRITE's slot: the target fails a
	 * WRITE whose window was not written in full).
	 */
	int64_t (*mw_placed)(const struct xp_mw *mw);
	/*
	 * Optional (NULL: post an XP_WR_LOCAL_INV instead): invalidate mw,
	 * a window bound on c, within the call, with no work request and
	 * no completion. Unlike LOCAL_INV it does not wait for requests
	 * posted before it, so it suits a window only the peer uses (a
	 * push READ's destination): once it returns, no later placement
	 * through the key happens (one arriving mid-frame is discarded)
	 * and the memory is the owner's. Runs on c's thread. 0, or -EINVAL
	 * when mw's key is not bound on c (then nothing changed).
	 */
	int (*mw_inv_now)(struct xp_conn *c, struct xp_mw *mw);
	/*
	 * Optional (NULL: no TLS): accept TLS handshakes on l with the
	 * server credentials t (which must outlive l; NULL: refuse them).
	 * Listener thread, before the first take_request().
	 */
	int (*listener_tls)(struct xp_listener *l, struct xp_tls *t);
	/* Optional (NULL: XP_TLS_OFF): what protects c. c's thread. */
	void (*conn_tls)(struct xp_conn *c, struct xp_tls_peer *out);

	/* On failure *bad points at the first request not posted. */
	int (*post_send)(struct xp_conn *c, struct xp_send_wr *wr,
			 struct xp_send_wr **bad);
	int (*post_recv)(struct xp_conn *c, uint64_t wr_id,
			 const struct xp_sge *sge);
};

/*
 * Every transport's connection/listener/group struct starts with this base
 * so the generic wrappers below can find the ops.
 */
struct xp_conn {
	const struct xp_ops *ops;
	void *user; /* owner's pointer, untouched by the transport */
};

struct xp_listener {
	const struct xp_ops *ops;
	void *user;
};

struct xp_request {
	const struct xp_ops *ops;
};

struct xp_group {
	const struct xp_ops *ops;
	void *user;
	/*
	 * The transport's: the group's epoll set (xp_group_fd(), the one fd
	 * to sleep on) and the fds its owner watches in it (xp_group_watch()).
	 */
	int epfd;
	struct xp_watch *watches;
	/*
	 * Device quirk, set by the transport: a window's accesses are checked
	 * against its whole region, not the window's own range (rxe checks
	 * the MR's range). A user that needs a window to confine its peer
	 * must then bind it on a region that holds nothing else. False on
	 * tcp and on HCAs that follow the verbs spec.
	 */
	bool mw_reaches_region;
};

extern const struct xp_ops xp_tcp_ops;
extern const struct xp_ops xp_rdma_ops;

/* Look up a transport by URL scheme ("tcp", "rdma"); NULL if unknown. */
const struct xp_ops *xp_find(const char *name);

static inline int xp_group_create(const struct xp_ops *ops,
				  struct xp_group **out)
{
	return ops->group_create(out);
}

static inline void xp_group_destroy(struct xp_group *g)
{
	if (g)
		g->ops->group_destroy(g);
}

static inline int xp_group_fd(struct xp_group *g)
{
	return g->epfd;
}

static inline int xp_group_arm(struct xp_group *g)
{
	return g->ops->group_arm(g);
}

static inline int xp_group_poll(struct xp_group *g, struct xp_wc *wc, int max)
{
	return g->ops->group_poll(g, wc, max);
}

/*
 * Add/remove an fd to/from the group's epoll set (the caller owns fd): a
 * readable one is reported by group_poll as XP_WC_FD_READY with cookie.
 * 0 or -errno (add: logged; remove: -ENOENT when not watched).
 */
int xp_group_watch(struct xp_group *g, int fd, uint64_t cookie);
int xp_group_unwatch(struct xp_group *g, int fd);

static inline int xp_take_request(struct xp_listener *l,
				  struct xp_request **out, void *priv,
				  size_t *priv_len)
{
	return l->ops->take_request(l, out, priv, priv_len);
}

static inline const char *xp_request_peer_name(struct xp_request *r)
{
	return r->ops->request_peer_name(r);
}

static inline int xp_request_join(struct xp_request *r, struct xp_group *g,
				  const struct xp_conn_attr *attr,
				  struct xp_conn **out)
{
	return r->ops->request_join(r, g, attr, out);
}

static inline void xp_request_reject(struct xp_request *r, const void *priv,
				     size_t priv_len)
{
	r->ops->request_reject(r, priv, priv_len);
}

/*
 * Take the next request and join it to g, on g's thread (which then
 * reads the listener): take_request() + request_join().
 */
static inline int xp_get_request(struct xp_listener *l, struct xp_group *g,
				 const struct xp_conn_attr *attr,
				 struct xp_conn **out, void *priv,
				 size_t *priv_len)
{
	struct xp_request *r;
	int ret = xp_take_request(l, &r, priv, priv_len);

	return ret ? ret : xp_request_join(r, g, attr, out);
}

static inline int xp_setup_queue(struct xp_conn *c,
				 const struct xp_conn_attr *attr)
{
	return c->ops->setup_queue(c, attr);
}

static inline int xp_connect(const struct xp_ops *ops, struct xp_group *g,
			     const char *host, uint16_t port,
			     const struct xp_conn_attr *attr, const void *priv,
			     size_t priv_len, int timeout_ms,
			     struct xp_conn **out, void *rej, size_t *rej_len)
{
	return ops->group_connect(g, host, port, attr, priv, priv_len,
				  timeout_ms, out, rej, rej_len);
}

static inline int xp_accept(struct xp_conn *c, const void *priv,
			    size_t priv_len)
{
	return c->ops->accept(c, priv, priv_len);
}

static inline void xp_reject(struct xp_conn *c, const void *priv,
			     size_t priv_len)
{
	c->ops->reject(c, priv, priv_len);
}

static inline struct xp_group *xp_conn_group(struct xp_conn *c)
{
	return c->ops->conn_group(c);
}

static inline int xp_post_send(struct xp_conn *c, struct xp_send_wr *wr,
			       struct xp_send_wr **bad)
{
	return c->ops->post_send(c, wr, bad);
}

static inline const char *xp_conn_error(struct xp_conn *c)
{
	return c->ops->conn_error ? c->ops->conn_error(c) : NULL;
}

static inline int xp_post_recv(struct xp_conn *c, uint64_t wr_id,
			       const struct xp_sge *sge)
{
	return c->ops->post_recv(c, wr_id, sge);
}

/* Per-connection event loop: for a connection in a private group only. */
static inline int xp_poll(struct xp_conn *c, struct xp_wc *wc, int max)
{
	return xp_group_poll(xp_conn_group(c), wc, max);
}

static inline int xp_arm(struct xp_conn *c)
{
	return xp_group_arm(xp_conn_group(c));
}

static inline int xp_fd(struct xp_conn *c)
{
	return xp_group_fd(xp_conn_group(c));
}

static inline int xp_group_reg_mr(struct xp_group *g, void *addr, size_t len,
				  int access, struct xp_mr **out)
{
	return g->ops->reg_mr(g, addr, len, access, out);
}

/* Registers on the connection's group: valid on all its connections. */
static inline int xp_reg_mr(struct xp_conn *c, void *addr, size_t len,
			    int access, struct xp_mr **out)
{
	return xp_group_reg_mr(xp_conn_group(c), addr, len, access, out);
}

static inline void xp_dereg_mr(struct xp_mr *mr)
{
	if (mr)
		mr->group->ops->dereg_mr(mr);
}

static inline int xp_alloc_mw(struct xp_group *g, struct xp_mw **out)
{
	return g->ops->alloc_mw(g, out);
}

/* See xp_ops.mw_placed; -EOPNOTSUPP where the transport cannot tell. */
static inline int64_t xp_mw_placed(const struct xp_mw *mw)
{
	const struct xp_ops *ops = mw->group->ops;

	return ops->mw_placed ? ops->mw_placed(mw) : -EOPNOTSUPP;
}

/* See xp_ops.mw_inv_now; -EOPNOTSUPP where LOCAL_INV must be posted. */
static inline int xp_mw_inv_now(struct xp_conn *c, struct xp_mw *mw)
{
	return c->ops->mw_inv_now ? c->ops->mw_inv_now(c, mw) : -EOPNOTSUPP;
}

static inline bool xp_group_counts_placed(const struct xp_group *g)
{
	return g->ops->mw_placed != NULL;
}

static inline void xp_dealloc_mw(struct xp_mw *mw)
{
	if (mw)
		mw->group->ops->dealloc_mw(mw);
}

static inline void xp_destroy(struct xp_conn *c)
{
	if (c)
		c->ops->destroy(c);
}

static inline void xp_disconnect(struct xp_conn *c)
{
	c->ops->disconnect(c);
}

static inline enum xp_conn_state xp_state(struct xp_conn *c)
{
	return c->ops->state(c);
}

static inline const char *xp_peer_name(struct xp_conn *c)
{
	return c->ops->peer_name(c);
}

const char *xp_wc_status_str(enum xp_wc_status st);
/* "SEND", "RDMA READ", ...: a completion's kind, for logs */
const char *xp_wc_opcode_str(enum xp_wc_opcode op);

/*
 * ---- TLS on tcp (transport/tcp_tls.c, GnuTLS) ----------------------------
 *
 * A tcp connection asked for with xp_conn_attr.tls is TLS 1.3 from its
 * first byte: the handshake runs before the transport's CONNECT frame.
 * A listener given server credentials (xp_listener_tls()) tells the two
 * apart by the first byte (22, a TLS handshake record; a CONNECT frame
 * starts with 1), so one port serves both. After the handshake the record
 * layer goes to the kernel (kTLS: TCP_ULP "tls", the keys by setsockopt)
 * where it has the tls module, and the data path is unchanged; elsewhere
 * the connection encrypts in user space (XP_TLS_USER).
 */
struct xp_tls;

enum xp_tls_mode {
	XP_TLS_OFF,  /* plaintext */
	XP_TLS_USER, /* TLS, records in user space (GnuTLS) */
	XP_TLS_KTLS, /* TLS, records in the kernel */
};

/*
 * The server's PSK for a client's identity (printable, as the client
 * sent it): 0 with the key in key[XP_TLS_PSK_LEN], or -ENOENT. Runs on
 * the listener's thread during the handshake.
 */
#define XP_TLS_PSK_LEN 32
typedef int (*xp_tls_psk_fn)(void *arg, const char *identity,
			     uint8_t key[XP_TLS_PSK_LEN]);

struct xp_tls_opts {
	bool server;
	/* client: the identity and key it offers (PSK mode) */
	const char *psk_identity;
	const uint8_t *psk; /* XP_TLS_PSK_LEN bytes */
	/* server: looks up a client's PSK (NULL: no PSK) */
	xp_tls_psk_fn psk_lookup;
	void *psk_arg;
	/*
	 * X.509, PEM files. Client: ca_file makes it X.509 mode (the
	 * target's certificate must chain to it and name the host
	 * connected to); cert/key its own certificate, if the server asks.
	 * Server: cert/key its certificate; ca_file verifies the client
	 * certificates that come (optional: a client may send none).
	 */
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
	/* records in user space even where the kernel has TLS */
	bool no_ktls;
};

/* What protects a connection; name: "" or the peer the handshake proved. */
struct xp_tls_peer {
	enum xp_tls_mode mode;
	bool psk;	/* by PSK (name: its identity), else X.509 */
	char name[128]; /* PSK identity, or the client certificate's CN */
};

/*
 * Credentials for one side, shared by any number of connections and
 * threads once made. 0, or -errno with a sentence in err.
 */
int xp_tls_create(const struct xp_tls_opts *o, struct xp_tls **out, char *err,
		  size_t errlen);
void xp_tls_destroy(struct xp_tls *t);
const char *xp_tls_mode_str(enum xp_tls_mode m);
/*
 * Why the calling thread's last TLS handshake as a client failed (the
 * connect() returned -EACCES: credentials refused; -ECONNRESET: the peer
 * closed, as one that does not take TLS does; -ETIMEDOUT), else "".
 */
const char *xp_tls_last_error(void);

static inline int xp_listener_tls(struct xp_listener *l, struct xp_tls *t)
{
	return l->ops->listener_tls ? l->ops->listener_tls(l, t)
				    : -EPROTONOSUPPORT;
}

static inline void xp_conn_tls(struct xp_conn *c, struct xp_tls_peer *out)
{
	memset(out, 0, sizeof(*out));
	if (c->ops->conn_tls)
		c->ops->conn_tls(c, out);
}

#endif
