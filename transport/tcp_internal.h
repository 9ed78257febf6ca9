/* SPDX-License-Identifier: MIT */
/*
 * tcp_internal.h - the transport.h verbs semantics in user space over TCP
 * sockets, for hosts without an RDMA device; shared by transport/tcp_*.c:
 *
 *   tcp.c         the ops table
 *   tcp_listen.c  listener, handshake table, connect
 *   tcp_io.c      frame header, output queue, input state machine, failure
 *   tcp_conn.c    send/receive/completion queues, lifecycle, posting
 *   tcp_mem.c     the group's key table: regions, windows, remote checks
 *   tcp_group.c   poll groups: epoll set, ready list, watched fds
 *
 * One connection is one TCP socket. Everything that verbs does in the HCA
 * (placing one-sided WRITEs, answering one-sided READs, checking keys) is
 * done here by the passive side's group_poll(). libfabric's tcp provider
 * (fi_read/fi_write against registered keys) was considered and not used:
 * it would bring a dependency the host path otherwise lacks and its own
 * progress, completion and error model that this verbs-shaped API would
 * have to be mapped onto; a few hundred lines over plain sockets give
 * exactly the semantics below and keep the data path visible.
 *
 * Frame format. Every frame is a 32-byte header, little-endian, followed
 * by `len` payload bytes (except READ_REQ, whose len is the length asked
 * for and which carries no payload):
 *
 *   off size field
 *     0    1 type     enum tcp_ftype
 *     1    1 flags    0, or on WRITE 0x01 ACK (the issuer's WR is signaled:
 *                     answer WRITE_ACK once the payload is placed); any
 *                     other bit fails the connection
 *     2    2 magic    0x5854 on every frame: catches a desynchronised stream
 *     4    4 len      payload bytes (READ_REQ: bytes requested)
 *     8    8 id       issuer's send-queue sequence number (SEND, WRITE,
 *                     READ_REQ); echoed in READ_RESP and ERROR
 *    16    8 addr     WRITE, READ_REQ: the peer's virtual address
 *    24    4 rkey     WRITE, READ_REQ: the peer's region or window key;
 *                     SEND_INV: the receiver's window to invalidate
 *    28    4 aux      CONNECT, ACCEPT: TCP_VERSION; ERROR: the enum
 *                     xp_wc_status the issuer reports for request `id`
 *
 *   CONNECT   client -> server, payload = private data (<= XP_PRIV_MAX)
 *   ACCEPT    server -> client, payload = private data
 *   REJECT    server -> client, payload = private data; server closes
 *   SEND      payload lands in the oldest posted receive
 *   SEND_INV  a SEND that first invalidates the receiver's window `rkey`
 *             (which must be bound on this connection, else ERROR)
 *   WRITE     payload lands at addr in the region named by rkey
 *   READ_REQ  asks for len bytes at addr/rkey
 *   READ_RESP payload = the bytes asked for by READ_REQ `id`
 *   WRITE_ACK no payload; WRITE `id` (sent with ACK) has been placed. A
 *             signaled RDMA WRITE completes on it, as on an RC QP, where
 *             the completion follows the responder's acknowledgement; an
 *             unsignaled one is finished once its bytes are out
 *   ERROR     the sender found request `id` bad (rkey, bounds, access,
 *             RNR, receive too small) and has moved to XP_CONN_ERROR; no
 *             frame follows it
 *
 * Progress engine. All sockets are non-blocking after connect; a slow or
 * stalled peer never blocks the caller.
 *   - Send queue (sq): a ring of max_send_wr slots indexed by a 64-bit
 *     sequence number. A slot stays occupied until its completion (or that
 *     of a later signaled one, which retires it) is handed to the user by
 *     poll(), as in verbs. Completions are generated in posting order.
 *     post_send() fills slots; they start in order (sq_start): BIND_MW and
 *     LOCAL_INV are carried out in the key table, the others framed. A
 *     slot flagged FENCE waits, with everything behind it, until the
 *     RDMA READs started before it have their responses placed.
 *   - Output: post_send() gathers the frames of a chain and writes them with
 *     one sendmsg() when nothing is queued. Unsent header bytes, and payload
 *     remainders up to TCP_COPY_MAX while the output buffer holds less than
 *     TCP_COPY_BUDGET, are copied into the output buffer and the WR is done
 *     at once (its buffer is reusable); larger remainders stay referenced
 *     in place (zero copy) and the WR is done when their last byte reaches
 *     the kernel. READ_RESP payloads are always referenced in the
 *     registered region; invalidating a window or dereg_mr() copies out
 *     what is still unsent. The unsent READ_RESP bytes of a connection
 *     are bounded (xp_conn_attr.max_read_bytes: the target sets queue
 *     depth x max I/O): a peer that asks for more while not reading its
 *     socket fails the connection, so a copy-out costs at most that.
 *     The output buffer is taken (from the group's spare) when bytes must
 *     be copied and given back when the output queue drains.
 *     EPOLLOUT is in the epoll set only while output is queued.
 *   - Input: an incremental state machine (header, then payload straight
 *     into its destination: the posted receive, the registered region of
 *     an incoming WRITE, or the local sge of an RDMA READ). Reads go into a
 *     64 KiB staging buffer (the group's, kept by a connection only while
 *     it holds unparsed bytes) that frames are parsed out of; while a payload
 *     is outstanding, readv() fills the destination directly and spills
 *     what follows into the staging buffer.
 *   - poll() hands out queued completions, flushes output, reads at most
 *     TCP_RX_BUDGET bytes and stops once it has as many completions as the
 *     caller asked for, flushes again (READ_RESPs) and hands out the rest.
 *   - fd() contract: poll() returns 0 only when no completion is queued and
 *     every byte already read from the socket has been parsed, so whatever
 *     is left shows as socket readiness (EPOLLIN, or EPOLLOUT while output
 *     is queued) on the epoll fd. arm() therefore has nothing to do.
 *     A read that comes back short means the socket was empty: the next
 *     poll(), and the one after the next arm(), parse without reading
 *     (the level-triggered epoll fd still shows what arrives meanwhile),
 *     so a wake-up costs one readv() instead of three.
 *   - Errors: the failing request gets its status, every other outstanding
 *     request (signaled or not) and posted receive XP_WC_FLUSH_ERR; the
 *     socket is shut down for writing and stays in the epoll set, for
 *     EPOLLOUT only (always ready once write-shut), until those flushes
 *     are delivered, so an owner asleep on the group fd still sees them. A
 * failed check of an incoming request sends ERROR first (when no output is
 *     backed up in front of it; otherwise the peer sees EOF and flushes).
 *
 * Handshake. connect() sends CONNECT and waits (poll(), timeout_ms) for
 * ACCEPT or REJECT. The listener never blocks: accepted sockets wait in a
 * table (at most TCP_PENDING_MAX, each at most TCP_HANDSHAKE_MS) until
 * their CONNECT frame is complete, and take_request() returns -EAGAIN
 * meanwhile; listener_fd() is an epoll fd holding the listening socket
 * and those sockets. Completed CONNECTs are taken before anything new is
 * accepted, and a full table evicts only a socket that sent nothing for
 * TCP_EVICT_GRACE_MS; when
 * every one has sent something, or accept4() runs out of fds (backoff
 * 100 ms doubling to 1 s), the listening socket leaves the epoll set for
 * a while instead of spinning its owner. ACCEPT private data is not returned
 * (as in transport.h: rej/rej_len are filled only on a reject).
 *
 * Known differences from verbs: a SEND or RDMA WRITE completes when its
 * bytes are in the kernel (or copied), not when the peer acknowledged them,
 * so an access error found later by the peer fails the connection but
 * cannot re-complete an already completed WRITE. A SEND larger than the
 * receive fails the issuer's request with XP_WC_FATAL (verbs: remote
 * invalid request), if it has not completed yet.
 */
#ifndef RBLK_TCP_INTERNAL_H
#define RBLK_TCP_INTERNAL_H

#include "transport.h"
#include "xp_internal.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define TCP_HDR_LEN 32
#define TCP_MAGIC 0x5854u
#define TCP_VERSION 1u

#define TCP_SBUF_SIZE (64u * 1024) /* receive staging buffer */
#define TCP_RX_BUDGET (2u << 20)   /* bytes read per poll() call */
/* After a payload this large, stage at most TCP_SMALL_READ bytes per read
 * for the next TCP_LARGE_DECAY frames, so that the next large payload goes
 * straight to its destination instead of through the staging buffer. */
#define TCP_LARGE_PAYLOAD (16u * 1024)
#define TCP_SMALL_READ 4096u
#define TCP_LARGE_DECAY 64
#define TCP_COPY_MAX (64u * 1024)  /* largest payload remainder copied */
#define TCP_COPY_BUDGET (1u << 20) /* copy only while the buffer is below */
#define TCP_OB_INIT (64u * 1024)   /* initial output buffer */
/*
 * Queue rings start this small and double up to the connection's
 * max_send_wr / max_recv_wr when a post finds them full: a listener sizes
 * a connection for the largest depth it grants, before it knows the depth
 * asked for, and an idle session must not pay for that (issue 11).
 */
#define TCP_Q_INIT 8u
#define TCP_IOV 64	 /* iovecs per sendmsg() */
#define TCP_BATCH 32	 /* frames per direct sendmsg() in post_send() */
#define TCP_MAX_WR 65536 /* per queue */
/*
 * Output the peer makes us queue (READ_RESP and WRITE_ACK frames) beyond
 * these means it sends requests and does not read its socket: fail the
 * connection rather than grow. A legitimate peer has at most its send
 * queue's worth of requests outstanding (a few hundred 32-byte headers).
 */
#define TCP_OQ_LIMIT (1u << 14)
#define TCP_OB_LIMIT (2u << 20)
/* Key table of a group: rkey = index << 8 | key byte, index 0 unused. */
#define TCP_KEY_MAX (1u << 24)
#define TCP_KEY_INIT 64
#define TCP_EP_EVENTS 64      /* epoll events per group_poll() */
#define TCP_PENDING_MAX 64    /* handshakes in progress per listener */
#define TCP_HANDSHAKE_MS 5000 /* a client must send CONNECT within this */
/*
 * A full handshake table evicts a socket that has sent nothing, and only
 * once it has been in the table this long: a client slow to send its
 * CONNECT right after its TCP handshake is not pushed out by a flood.
 */
#define TCP_EVICT_GRACE_MS 250
/* accept4 out of fds (EMFILE...): stop accepting this long, doubling */
#define TCP_BACKOFF_MIN_MS 100
#define TCP_BACKOFF_MAX_MS 1000
#define TCP_NO_SEQ UINT64_MAX

struct tcp_tls;

enum tcp_ftype {
	TCP_F_CONNECT = 1,
	TCP_F_ACCEPT = 2,
	TCP_F_REJECT = 3,
	TCP_F_SEND = 4,
	TCP_F_WRITE = 5,
	TCP_F_READ_REQ = 6,
	TCP_F_READ_RESP = 7,
	TCP_F_ERROR = 8,
	TCP_F_WRITE_ACK = 9,
	TCP_F_SEND_INV = 10,
};

#define TCP_FL_ACK 0x01u /* WRITE: answer with WRITE_ACK once placed */

/* Host-order view of a frame header; tcp_hdr_decode() validates it. */
struct tcp_hdr {
	uint8_t type;
	uint8_t flags; /* TCP_FL_* */
	uint32_t len;
	uint64_t id;
	uint64_t addr;
	uint32_t rkey;
	uint32_t aux;
};

enum tcp_key_kind {
	TCP_KEY_FREE,
	TCP_KEY_MR,
	TCP_KEY_MW,
};

/*
 * One entry of a group's key table: what an incoming rkey grants. Looked
 * up by index (rkey >> 8) and matched on the whole key, so a stale key
 * (an older key byte of a window) finds nothing.
 */
struct tcp_key {
	uint32_t key;
	uint8_t kind;	/* enum tcp_key_kind */
	uint8_t access; /* remote rights granted now (0: none) */
	char *addr;	/* range granted */
	uint64_t len;
	struct tcp_conn *conn; /* MW: bound on this connection, else NULL */
	struct tcp_mr *mr;     /* the region the bytes belong to */
	struct tcp_mw *mw;     /* MW: the window object */
	uint32_t next_free;    /* FREE: next free index, 0 ends */
};

struct tcp_mr {
	struct xp_mr mr;
	uint32_t idx; /* key table index */
};

struct tcp_mw {
	struct xp_mw mw;
	uint32_t idx;
	struct tcp_mw *cprev, *cnext; /* windows bound on one connection */
	/*
	 * How far from its last bind's start the peer's WRITEs have placed
	 * bytes without a gap (tcp_mw_count()): kept through the
	 * invalidation, for mw_placed().
	 */
	uint64_t placed;
};

/*
 * A poll group: one epoll set over its sockets and watched fds (data.u64
 * is the tcp_conn pointer, or a watch: see xp_internal.h), the key table,
 * and a FIFO of connections with work epoll cannot show (queued
 * completions, input parsed only in part).
 */
struct tcp_group {
	struct xp_group base; /* base.epfd: the epoll set of the sockets */
	struct tcp_conn *private_conn; /* compatibility: destroyed with it */
	struct tcp_conn *conns;	       /* all connections (gnext) */
	struct tcp_conn *ready, *ready_tail;
	struct tcp_key *keys;
	/*
	 * Spare buffers lent to the group's connections (one thread drives a
	 * group): the staging buffer while a connection parses input, the
	 * output buffer while its output is backed up. A connection keeps
	 * one only while it holds bytes in it; NULL: lent out or not made.
	 */
	char *sbuf;
	char *ob;
	uint32_t nkeys; /* entries in use or on the free list, index 0 too */
	uint32_t kcap;
	uint32_t free_head; /* 0: none */
	/* see tcp_group_arm(): the epoll set was drained just before */
	bool ep_skip;
	bool ep_arm_skip;
};

/* Send-queue slot: the whole request, started when the fence allows. */
struct tcp_swr {
	uint64_t wr_id;
	char *dst;	  /* RDMA READ: local destination; else the payload */
	struct xp_mr *mr; /* the local sge's region; BIND_MW: the bound one */
	uint32_t len;
	uint8_t opcode; /* enum xp_wr_opcode */
	bool signaled;
	bool fence;
	bool done;	/* bytes out (SEND/WRITE) or response placed (READ) */
	uint8_t status; /* error pinned on this WR when the connection fails */
	uint8_t access; /* BIND_MW */
	uint32_t rkey;	/* READ/WRITE: remote key; BIND_MW: new key;
			   LOCAL_INV, SEND_WITH_INV: key to invalidate */
	uint64_t raddr; /* READ/WRITE: remote address; BIND_MW: addr */
	uint64_t blen;	/* BIND_MW: length */
	struct tcp_mw *mw; /* BIND_MW */
};

/* Receive-queue slot. */
struct tcp_rwr {
	uint64_t wr_id;
	char *addr;
	struct xp_mr *mr;
	uint32_t len;
	uint8_t status;
};

struct tcp_cqe {
	struct xp_wc wc;
	uint64_t seq; /* sq or rq sequence number: retires slots on delivery */
	bool recv;
};

/*
 * Queued output. ptr == NULL: `len` bytes at the front of the output
 * buffer (those segments are FIFO in the buffer, so no offset is kept).
 * Otherwise the bytes are referenced where they are: a user buffer of a
 * posted WR (owned by us until the WR completes), a registered region (a
 * READ_RESP payload) or a copy of either made when its memory was pulled
 * from under it (owned; mapped of its own, so that the pages go back to
 * the system when it drains whatever the allocator keeps).
 */
struct tcp_oseg {
	const char *ptr;
	size_t len;
	struct xp_mr *mr; /* region ptr points into, NULL if none */
	uint64_t seq; /* sq slot that is done once this drains, or TCP_NO_SEQ */
	void *owned;  /* mapped copy ptr points into: unmapped once drained */
	size_t owned_len;
	bool rd; /* a READ_RESP payload: counted in the conn's rd_queued */
};

/* A frame to send: header image plus one payload. */
struct tcp_frame {
	uint8_t hdr[TCP_HDR_LEN];
	const char *payload;
	uint32_t len; /* payload bytes actually following the header */
	struct xp_mr *mr;
	uint64_t seq; /* sq slot done once sent/copied, or TCP_NO_SEQ */
	bool copy;    /* payload must be copied if it cannot go out now */
};

/* Receive state: between frames, or placing a payload. */
struct tcp_rx {
	bool in_payload;
	struct tcp_hdr hdr;
	char *dst;	  /* next payload byte goes here; NULL: discard */
	struct xp_mr *mr; /* region dst lies in */
	uint32_t kidx;	  /* WRITE: key table index it came through */
	uint32_t left;
};

struct tcp_conn {
	struct xp_conn base;
	struct tcp_group *g;
	struct tcp_conn *gprev, *gnext; /* g->conns */
	struct tcp_conn *rnext;		/* g->ready */
	bool on_ready;
	bool serving;  /* in tcp_serve_ready(), which puts it back if need be */
	bool rx_ready; /* shared group: epoll says there is input */
	int sock;
	enum xp_conn_state state;
	bool epollout; /* EPOLLOUT is in the epoll set */
	bool in_epoll; /* the socket is in the epoll set */
	bool tls_user; /* records in user space: I/O through c->tls */
	char peer[96];
	char why[160]; /* its first failure in words (conn_error()); or "" */
	struct tcp_mw *mws; /* windows bound on this connection */

	struct tcp_swr *sq;
	uint32_t sq_size;   /* ring slots: max(max_send_wr, 1) */
	uint32_t sq_max;    /* max_send_wr */
	uint64_t sq_head;   /* oldest slot not yet retired */
	uint64_t sq_emit;   /* next slot to generate a completion for */
	uint64_t sq_start;  /* next slot to start (fence: may lag sq_tail) */
	uint64_t sq_tail;   /* next slot to post */
	uint32_t reads_out; /* RDMA READs started, response not placed */

	struct tcp_rwr *rq;
	uint32_t rq_size;
	uint32_t rq_max;
	uint64_t rq_head; /* oldest slot whose completion is not delivered */
	uint64_t rq_cons; /* next slot an incoming SEND consumes */
	uint64_t rq_tail;

	struct tcp_cqe *cq; /* sq_size + rq_size: never overflows */
	uint32_t cq_size;
	uint32_t cq_head;
	uint32_t cq_count;

	struct tcp_oseg *oq;
	uint32_t oq_cap;
	uint32_t oq_head;
	uint32_t oq_count;
	char *ob; /* NULL while no copied output is queued */
	size_t ob_cap;
	size_t ob_head;
	size_t ob_tail;

	char *sbuf; /* NULL while nothing staged is left unparsed */
	size_t s_head;
	size_t s_tail;
	struct tcp_rx rx;
	unsigned int rx_large; /* > 0: large payloads seen lately */
	/*
	 * The last readv() came back short or with EAGAIN: the socket was
	 * empty then. rx_skip: the next poll() does not read (what arrives
	 * meanwhile keeps the epoll fd readable). rx_arm_skip: neither does
	 * the poll() after the next arm(). So a "poll until 0, arm, poll,
	 * sleep" loop reads once per wake-up instead of three times, and a
	 * caller that never sleeps still reads on every third poll() at worst.
	 */
	bool rx_skip;
	bool rx_arm_skip;
	/*
	 * READ_RESP payload bytes queued and not yet sent (referenced in
	 * place, or copied out when their window or region went), and the
	 * most the peer may make us hold (xp_conn_attr.max_read_bytes;
	 * UINT64_MAX: no limit): what an unread socket can cost us. Last,
	 * so that the hot fields above keep their places.
	 */
	uint64_t rd_queued;
	uint64_t rd_max;
	/* TLS (tcp_tls.c): the session, kept for its peer; NULL: plain */
	struct tcp_tls *tls;
};

/* A socket accepted by the listener, waiting for its CONNECT frame. */
struct tcp_pending {
	int fd;
	uint64_t deadline_ms;
	size_t got;
	struct tcp_hdr hdr; /* valid once got >= TCP_HDR_LEN */
	uint8_t buf[TCP_HDR_LEN + XP_PRIV_MAX];
	/* a TLS client: its session (handshake, then the CONNECT in it) */
	struct tcp_tls *tls;
	bool tls_done; /* handshake over (and kTLS set up, where it is) */
};

struct tcp_listener {
	struct xp_listener base;
	int lfd;
	int epfd; /* lfd (unless paused), every pending socket, and tfd */
	int tfd;  /* timerfd: earliest handshake deadline or pause end */
	bool lfd_paused;      /* lfd is out of epfd: see tcp_listen_pause() */
	uint64_t pause_until; /* ms; 0: paused until a table slot frees */
	unsigned int backoff_ms; /* accept failing for lack of fds */
	unsigned int npend;
	struct tcp_pending pend[TCP_PENDING_MAX];
	struct xp_tls *tls; /* server credentials; NULL: refuse TLS */
	/* a unix socket's file, unlinked at the end ("": none) */
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static inline struct tcp_conn *to_tcp(struct xp_conn *c)
{
	return container_of(c, struct tcp_conn, base);
}

static inline struct tcp_group *to_tcp_group(struct xp_group *g)
{
	return container_of(g, struct tcp_group, base);
}

static inline struct tcp_listener *to_tcp_listener(struct xp_listener *l)
{
	return container_of(l, struct tcp_listener, base);
}

static inline struct tcp_swr *tcp_swr(struct tcp_conn *c, uint64_t seq)
{
	return &c->sq[seq % c->sq_size];
}

static inline struct tcp_rwr *tcp_rwr(struct tcp_conn *c, uint64_t seq)
{
	return &c->rq[seq % c->rq_size];
}

static inline struct tcp_oseg *tcp_oseg(struct tcp_conn *c, uint32_t i)
{
	return &c->oq[(c->oq_head + i) % c->oq_cap];
}

/* tcp_tls.c: one connection's TLS session (opaque) */
struct tcp_tls;
int tcp_tls_new(struct xp_tls *creds, int fd, const char *host,
		struct tcp_tls **out);
void tcp_tls_free(struct tcp_tls *t);
int tcp_tls_handshake_step(struct tcp_tls *t);
int tcp_tls_handshake(struct tcp_tls *t, uint64_t deadline);
int tcp_tls_ktls(struct tcp_tls *t);
ssize_t tcp_tls_readv(struct tcp_tls *t, const struct iovec *iov, int n);
ssize_t tcp_tls_sendv(struct tcp_tls *t, const struct iovec *iov, int n);
int tcp_tls_out_flush(struct tcp_tls *t);
bool tcp_tls_out_pending(const struct tcp_tls *t);
bool tcp_tls_rx_pending(struct tcp_tls *t);
int tcp_tls_io_timed(struct tcp_tls *t, void *buf, size_t len, bool wr,
		     uint64_t deadline);
const struct xp_tls_peer *tcp_tls_peer(const struct tcp_tls *t);
const char *tcp_tls_why(const struct tcp_tls *t);
bool tcp_tls_is_server(const struct tcp_tls *t);

/* Output waiting for the socket: frames, or TLS records made of them. */
static inline bool tcp_out_queued(const struct tcp_conn *c)
{
	return c->oq_count || (c->tls_user && tcp_tls_out_pending(c->tls));
}

/*
 * Staged input that parsing would move (a whole header, or payload bytes):
 * no fd shows it, so a poll that stops before parsing it must leave the
 * connection on its group's ready list.
 */
static inline bool tcp_rx_pending(const struct tcp_conn *c)
{
	size_t staged = c->s_tail - c->s_head;

	if (c->state != XP_CONN_CONNECTED)
		return false;
	/* records GnuTLS decrypted and holds show on no fd either */
	if (c->tls_user && tcp_tls_rx_pending(c->tls))
		return true;
	return staged && (c->rx.in_payload || staged >= TCP_HDR_LEN);
}

/* PROTOTYPES */

/* tcp_conn.c */
struct xp_wc *tcp_cq_push(struct tcp_conn *c, bool recv, uint64_t seq,
			  uint64_t wr_id, enum xp_wc_status status,
			  enum xp_wc_opcode op, uint32_t byte_len);
int tcp_cq_drain(struct tcp_conn *c, struct xp_wc *wc, int max);
void tcp_swr_complete(struct tcp_conn *c, uint64_t seq,
		      enum xp_wc_status status);
void tcp_sq_emit(struct tcp_conn *c);
int tcp_attr_check(const struct xp_conn_attr *attr);
/* The largest queues; a request taken without attr starts with these. */
extern const struct xp_conn_attr tcp_attr_max;
int tcp_setup_queue(struct xp_conn *xc, const struct xp_conn_attr *attr);
int tcp_conn_create(int sock, struct xp_group *xg,
		    const struct xp_conn_attr *attr, enum xp_conn_state state,
		    struct tcp_conn **out);
/* c takes tls (NULL: plain): user-space records unless kTLS has them */
void tcp_conn_set_tls(struct tcp_conn *c, struct tcp_tls *tls);
void tcp_conn_tls(struct xp_conn *xc, struct xp_tls_peer *out);
void tcp_destroy(struct xp_conn *xc);
void tcp_disconnect(struct xp_conn *xc);
enum xp_conn_state tcp_state(struct xp_conn *xc);
const char *tcp_peer_name(struct xp_conn *xc);
/* Close a socket after a FIN (what the peer sent is read first). */
void tcp_sock_close(int sock);
struct xp_group *tcp_conn_group(struct xp_conn *xc);
int tcp_conn_arm(struct tcp_conn *c);
int tcp_conn_poll(struct tcp_conn *c, struct xp_wc *wc, int max);
int tcp_post_recv(struct xp_conn *xc, uint64_t wr_id, const struct xp_sge *sge);
void tcp_sq_start(struct tcp_conn *c);
int tcp_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
		  struct xp_send_wr **bad);

/* tcp_group.c */
int tcp_group_create(struct xp_group **out);
void tcp_group_destroy(struct xp_group *xg);
int tcp_group_add(struct tcp_group *g, struct tcp_conn *c);
void tcp_group_remove(struct tcp_group *g, struct tcp_conn *c);
void tcp_ready(struct tcp_conn *c);
int tcp_group_arm(struct xp_group *xg);
int tcp_group_poll(struct xp_group *xg, struct xp_wc *wc, int max);

/* tcp_io.c */
void tcp_hdr_encode(uint8_t *p, uint8_t type, uint32_t len, uint64_t id,
		    uint64_t addr, uint32_t rkey, uint32_t aux);
int tcp_hdr_decode(const uint8_t *p, struct tcp_hdr *h);
void tcp_oq_drop(struct tcp_conn *c);
void *tcp_copy_alloc(size_t len);
int tcp_flush(struct tcp_conn *c);
int tcp_send_frames(struct tcp_conn *c, struct tcp_frame *f, int nf);
void tcp_fail(struct tcp_conn *c, uint8_t peer_status, uint64_t peer_id);
/* Record why c fails (the first reason only), before tcp_fail(). */
void tcp_why(struct tcp_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *tcp_conn_error(struct xp_conn *xc);
void tcp_epoll_del(struct tcp_conn *c);
void tcp_fail_io(struct tcp_conn *c, int err);
/* The socket's sendmsg()/readv(), through TLS where records are ours. */
static inline ssize_t tcp_sock_sendmsg(struct tcp_conn *c,
				       const struct msghdr *m)
{
	if (c->tls_user)
		return tcp_tls_sendv(c->tls, m->msg_iov, (int)m->msg_iovlen);
	return sendmsg(c->sock, m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static inline ssize_t tcp_sock_readv(struct tcp_conn *c,
				     const struct iovec *iov, int n)
{
	if (c->tls_user)
		return tcp_tls_readv(c->tls, iov, n);
	return readv(c->sock, iov, n);
}
void tcp_rx_finish(struct tcp_conn *c);
void tcp_rx_progress(struct tcp_conn *c, uint32_t cq_limit);

/* tcp_listen.c */
void tcp_format_addr(int sock, const struct sockaddr_storage *ss, char *buf,
		     size_t size);
int tcp_accept(struct xp_conn *xc, const void *priv, size_t priv_len);
int tcp_group_connect(struct xp_group *g, const char *host, uint16_t port,
		      const struct xp_conn_attr *attr, const void *priv,
		      size_t priv_len, int timeout_ms, struct xp_conn **out,
		      void *rej, size_t *rej_len);
int tcp_listen(const char *host, uint16_t port, struct xp_listener **out);
void tcp_listener_destroy(struct xp_listener *xl);
int tcp_listener_fd(struct xp_listener *xl);
int tcp_listener_tls(struct xp_listener *xl, struct xp_tls *t);
void tcp_reject(struct xp_conn *xc, const void *priv, size_t priv_len);
int tcp_request_join(struct xp_request *xr, struct xp_group *g,
		     const struct xp_conn_attr *attr, struct xp_conn **out);
const char *tcp_request_peer_name(struct xp_request *xr);
void tcp_request_reject(struct xp_request *xr, const void *priv,
			size_t priv_len);
int tcp_take_request(struct xp_listener *xl, struct xp_request **out,
		     void *priv, size_t *priv_len);

/* tcp_mem.c */
char *tcp_mr_check(struct tcp_conn *c, const struct tcp_hdr *h, int access,
		   struct xp_mr **mrp, uint32_t *kidx);
int tcp_reg_mr(struct xp_group *xg, void *addr, size_t len, int access,
	       struct xp_mr **out);
void tcp_dereg_mr(struct xp_mr *mr);
int tcp_sge_check(struct tcp_conn *c, const struct xp_sge *sge, int access);
int tcp_alloc_mw(struct xp_group *xg, struct xp_mw **out);
int64_t tcp_mw_placed(const struct xp_mw *mw);
void tcp_mw_count(struct tcp_conn *c, uint32_t kidx, const struct tcp_hdr *h);
void tcp_dealloc_mw(struct xp_mw *mw);
int tcp_bind_check(struct tcp_conn *c, const struct xp_mw_bind *b);
int tcp_mw_bind(struct tcp_conn *c, const struct tcp_swr *s);
int tcp_mw_inv(struct tcp_conn *c, uint32_t rkey);
int tcp_mw_inv_now(struct xp_conn *xc, struct xp_mw *mw);
void tcp_conn_mws_drop(struct tcp_conn *c);
void tcp_keys_free(struct tcp_group *g);

#endif
