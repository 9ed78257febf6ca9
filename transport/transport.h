/* SPDX-License-Identifier: MIT */
/*
 * transport.h - a verbs-shaped transport API.
 *
 * rblk moves data with one-sided RDMA READ/WRITE against registered memory
 * and carries commands in SEND/RECV messages. This header is the whole
 * contract between the target/initiator and a transport; two implement it:
 *
 *   rdma  transport/rdma.c  libibverbs + librdmacm (InfiniBand, RoCE, iWARP)
 *   tcp   transport/tcp.c   the same semantics in user space over TCP
 *
 * Model (the verbs model, reduced to what rblk needs):
 *   - A connection (struct xp_conn) is one reliable connected queue pair with
 *     its own protection domain and one completion queue shared by its send
 *     and receive work. Memory regions are registered on a connection and
 *     their rkeys are valid on that connection only.
 *   - post_send() takes a chain of work requests (SEND, RDMA WRITE, RDMA
 *     READ) and executes them in order (RC ordering): data of an RDMA WRITE
 *     is placed at the peer before a SEND posted after it is delivered.
 *   - post_recv() gives a buffer for one incoming SEND. A SEND arriving with
 *     no receive posted is a fatal error for the connection (RNR).
 *   - Completions are reaped with poll(). Every RECV completes; SEND, RDMA
 *     WRITE and RDMA READ complete only when XP_SEND_SIGNALED is set, and
 *     an unsignaled request is finished when a later signaled one completes.
 *     A signaled RDMA WRITE completes once the peer has placed its data
 *     (RC: the responder's acknowledgement; tcp: its WRITE_ACK frame), so
 *     the data is then visible to every later reader of that memory.
 *   - Any error moves the connection to the error state: the failing request
 *     completes with its error status, every other outstanding request
 *     completes with XP_WC_FLUSH_ERR, and new posts fail with -ENOTCONN.
 *     A one-sided access outside a registered region, with the wrong rkey or
 *     without the needed access right fails the connection on both sides
 *     (the issuer sees XP_WC_REM_ACCESS_ERR), exactly as RC QPs do.
 *   - The passive side of a one-sided operation does nothing but keep its
 *     connection progressing (tcp: its poll() serves the peer's READ/WRITE;
 *     rdma: the HCA does it).
 *
 * Threads: a connection and everything registered on it are used by one
 * thread at a time. A connection may be handed to another thread between
 * calls. Listeners likewise.
 *
 * Event loop contract: fd() returns a pollable descriptor (an epoll fd the
 * transport owns) that becomes readable when poll() may return something.
 * To sleep safely: poll() until it returns 0, call arm(), poll() once more,
 * and only if that returns 0 wait for fd() to be readable.
 *
 * All functions return 0 (or a count) on success and a negative errno on
 * failure; they log the failing call at the point of failure.
 */
#ifndef RBLK_TRANSPORT_H
#define RBLK_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define XP_PRIV_MAX 48 /* connect/reject private data, bytes */

struct xp_listener;
struct xp_conn;

enum xp_access {
	XP_ACCESS_LOCAL_WRITE = 1 << 0, /* RECV or RDMA READ may land here */
	XP_ACCESS_REMOTE_READ = 1 << 1, /* peer may RDMA READ from it */
	XP_ACCESS_REMOTE_WRITE = 1 << 2, /* peer may RDMA WRITE into it */
};

/* A registered memory region. Fields are read-only for users. */
struct xp_mr {
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey; /* what the peer puts in its one-sided requests */
	int access; /* enum xp_access bits */
	struct xp_conn *conn;
};

/* Local buffer: must lie inside mr. */
struct xp_sge {
	void *addr;
	uint32_t length;
	struct xp_mr *mr;
};

enum xp_wr_opcode {
	XP_WR_SEND,
	XP_WR_RDMA_WRITE, /* local sge -> remote_addr/rkey */
	XP_WR_RDMA_READ, /* remote_addr/rkey -> local sge */
};

#define XP_SEND_SIGNALED (1u << 0)

struct xp_send_wr {
	struct xp_send_wr *next; /* chain; NULL ends it */
	uint64_t wr_id; /* returned in the completion */
	enum xp_wr_opcode opcode;
	unsigned int flags; /* XP_SEND_* */
	struct xp_sge sge; /* one gather/scatter element */
	uint64_t remote_addr; /* one-sided only */
	uint32_t rkey; /* one-sided only */
};

enum xp_wc_status {
	XP_WC_SUCCESS = 0,
	XP_WC_FLUSH_ERR, /* connection went to error; not this WR's fault */
	XP_WC_REM_ACCESS_ERR, /* peer refused our one-sided access */
	XP_WC_LOC_ERR, /* local: bad sge, recv buffer too small */
	XP_WC_RNR_ERR, /* peer had no receive posted */
	XP_WC_FATAL, /* transport failure: link down, peer gone */
};

enum xp_wc_opcode {
	XP_WC_SEND,
	XP_WC_RDMA_WRITE,
	XP_WC_RDMA_READ,
	XP_WC_RECV,
};

struct xp_wc {
	uint64_t wr_id;
	enum xp_wc_status status;
	enum xp_wc_opcode opcode;
	uint32_t byte_len; /* RECV: bytes received */
};

struct xp_conn_attr {
	uint32_t max_send_wr; /* outstanding send-queue requests */
	uint32_t max_recv_wr; /* outstanding receives */
};

enum xp_conn_state {
	XP_CONN_REQUESTED, /* from get_request(), not yet accepted */
	XP_CONN_CONNECTED,
	XP_CONN_ERROR, /* failed or disconnected; only destroy() is useful */
};

/*
 * The operations one transport provides. All are required.
 */
struct xp_ops {
	const char *name; /* "tcp", "rdma": the URL scheme */

	/* Listen on host:port (host may be NULL for any). Listener thread. */
	int (*listen)(const char *host, uint16_t port, struct xp_listener **out);
	void (*listener_destroy)(struct xp_listener *l);
	/* Readable when get_request() may return a connection. */
	int (*listener_fd)(struct xp_listener *l);
	/*
	 * Take the next incoming connection request, or -EAGAIN. The new
	 * connection is in XP_CONN_REQUESTED state with its QP/CQ/PD created
	 * for attr; priv/priv_len receive the initiator's private data
	 * (buffer of XP_PRIV_MAX). The caller registers memory, posts
	 * receives, then calls accept() or reject().
	 */
	int (*get_request)(struct xp_listener *l, const struct xp_conn_attr *attr,
			   struct xp_conn **out, void *priv, size_t *priv_len);
	/* Complete the handshake; receives must already be posted. */
	int (*accept)(struct xp_conn *c, const void *priv, size_t priv_len);
	/* Refuse with private data; the connection is destroyed. */
	void (*reject)(struct xp_conn *c, const void *priv, size_t priv_len);

	/*
	 * Connect to host:port with private data, waiting at most timeout_ms.
	 * On a reject, returns -ECONNREFUSED and copies the target's private
	 * data into rej/rej_len (buffer of XP_PRIV_MAX) when given.
	 * -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH as they happen.
	 */
	int (*connect)(const char *host, uint16_t port,
		       const struct xp_conn_attr *attr, const void *priv,
		       size_t priv_len, int timeout_ms, struct xp_conn **out,
		       void *rej, size_t *rej_len);

	/* Disconnect (if connected) and free everything, MRs included. */
	void (*destroy)(struct xp_conn *c);
	/* Move to XP_CONN_ERROR: outstanding work flushes. Idempotent. */
	void (*disconnect)(struct xp_conn *c);
	enum xp_conn_state (*state)(struct xp_conn *c);
	/* "tcp 127.0.0.1:41234" style peer description for logs. */
	const char *(*peer_name)(struct xp_conn *c);

	int (*fd)(struct xp_conn *c);
	int (*arm)(struct xp_conn *c);
	/* Reap up to max completions; makes progress; >= 0 count or -errno. */
	int (*poll)(struct xp_conn *c, struct xp_wc *wc, int max);

	int (*reg_mr)(struct xp_conn *c, void *addr, size_t len, int access,
		      struct xp_mr **out);
	void (*dereg_mr)(struct xp_mr *mr);

	/* On failure *bad points at the first request not posted. */
	int (*post_send)(struct xp_conn *c, struct xp_send_wr *wr,
			 struct xp_send_wr **bad);
	int (*post_recv)(struct xp_conn *c, uint64_t wr_id,
			 const struct xp_sge *sge);
};

/*
 * Every transport's connection/listener struct starts with this base so the
 * generic wrappers below can find the ops.
 */
struct xp_conn {
	const struct xp_ops *ops;
	void *user; /* owner's pointer, untouched by the transport */
};

struct xp_listener {
	const struct xp_ops *ops;
	void *user;
};

extern const struct xp_ops xp_tcp_ops;
extern const struct xp_ops xp_rdma_ops;

/* Look up a transport by URL scheme ("tcp", "rdma"); NULL if unknown. */
const struct xp_ops *xp_find(const char *name);

static inline int xp_post_send(struct xp_conn *c, struct xp_send_wr *wr,
			       struct xp_send_wr **bad)
{
	return c->ops->post_send(c, wr, bad);
}

static inline int xp_post_recv(struct xp_conn *c, uint64_t wr_id,
			       const struct xp_sge *sge)
{
	return c->ops->post_recv(c, wr_id, sge);
}

static inline int xp_poll(struct xp_conn *c, struct xp_wc *wc, int max)
{
	return c->ops->poll(c, wc, max);
}

static inline int xp_arm(struct xp_conn *c)
{
	return c->ops->arm(c);
}

static inline int xp_fd(struct xp_conn *c)
{
	return c->ops->fd(c);
}

static inline int xp_reg_mr(struct xp_conn *c, void *addr, size_t len,
			    int access, struct xp_mr **out)
{
	return c->ops->reg_mr(c, addr, len, access, out);
}

static inline void xp_dereg_mr(struct xp_mr *mr)
{
	if (mr)
		mr->conn->ops->dereg_mr(mr);
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

#endif
