/* SPDX-License-Identifier: MIT */
/*
 * tcp.c - the transport.h verbs semantics in user space over TCP sockets,
 * for hosts without an RDMA device.
 *
 * One connection is one TCP socket. Everything that verbs does in the HCA
 * (placing one-sided WRITEs, answering one-sided READs, checking rkeys) is
 * done here by the passive side's poll(). libfabric's tcp provider
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
 *    24    4 rkey     WRITE, READ_REQ: the peer's region key
 *    28    4 aux      CONNECT, ACCEPT: TCP_VERSION; ERROR: the enum
 *                     xp_wc_status the issuer reports for request `id`
 *
 *   CONNECT   client -> server, payload = private data (<= XP_PRIV_MAX)
 *   ACCEPT    server -> client, payload = private data
 *   REJECT    server -> client, payload = private data; server closes
 *   SEND      payload lands in the oldest posted receive
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
 *   - Output: post_send() gathers the frames of a chain and writes them with
 *     one sendmsg() when nothing is queued. Unsent header bytes, and payload
 *     remainders up to TCP_COPY_MAX while the output buffer holds less than
 *     TCP_COPY_BUDGET, are copied into the output buffer and the WR is done
 *     at once (its buffer is reusable); larger remainders stay referenced
 *     in place (zero copy) and the WR is done when their last byte reaches
 *     the kernel. READ_RESP payloads are always referenced in the
 *     registered region; dereg_mr() copies out what is still unsent.
 *     EPOLLOUT is in the epoll set only while output is queued.
 *   - Input: an incremental state machine (header, then payload straight
 *     into its destination: the posted receive, the registered region of
 *     an incoming WRITE, or the local sge of an RDMA READ). Reads go into a
 *     64 KiB staging buffer that frames are parsed out of; while a payload
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
 *     socket leaves the epoll set and is shut down for writing. A failed
 *     check of an incoming request sends ERROR first (when no output is
 *     backed up in front of it; otherwise the peer sees EOF and flushes).
 *
 * Handshake. connect() sends CONNECT and waits (poll(), timeout_ms) for
 * ACCEPT or REJECT. The listener never blocks: accepted sockets wait in a
 * table (at most TCP_PENDING_MAX, each at most TCP_HANDSHAKE_MS) until
 * their CONNECT frame is complete, and get_request() returns -EAGAIN
 * meanwhile; listener_fd() is an epoll fd holding the listening socket
 * and those sockets. ACCEPT private data is not returned (as in
 * transport.h: rej/rej_len are filled only on a reject).
 *
 * Known differences from verbs: a SEND or RDMA WRITE completes when its
 * bytes are in the kernel (or copied), not when the peer acknowledged them,
 * so an access error found later by the peer fails the connection but
 * cannot re-complete an already completed WRITE. A SEND larger than the
 * receive fails the issuer's request with XP_WC_FATAL (verbs: remote
 * invalid request), if it has not completed yet.
 */
#include "transport.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
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
#define TCP_IOV 64		   /* iovecs per sendmsg() */
#define TCP_BATCH 32	 /* frames per direct sendmsg() in post_send() */
#define TCP_MAX_WR 65536 /* per queue */
/* Output queued for READ_RESPs beyond these means the peer floods us with
 * READ_REQs and does not read: fail the connection rather than grow. */
#define TCP_OQ_LIMIT (1u << 17)
#define TCP_OB_LIMIT (32u << 20)
#define TCP_MR_BUCKETS 64
#define TCP_PENDING_MAX 64    /* handshakes in progress per listener */
#define TCP_HANDSHAKE_MS 5000 /* a client must send CONNECT within this */
#define TCP_NO_SEQ UINT64_MAX

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

struct tcp_mr {
	struct xp_mr mr;
	struct tcp_mr *hnext; /* rkey hash chain */
};

/* Send-queue slot. */
struct tcp_swr {
	uint64_t wr_id;
	char *dst;	  /* RDMA READ: local destination */
	struct xp_mr *mr; /* the local sge's region */
	uint32_t len;
	uint8_t opcode; /* enum xp_wr_opcode */
	bool signaled;
	bool done;	/* bytes out (SEND/WRITE) or response placed (READ) */
	uint8_t status; /* error pinned on this WR when the connection fails */
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
 * READ_RESP payload) or a malloc'd copy (owned).
 */
struct tcp_oseg {
	const char *ptr;
	size_t len;
	struct xp_mr *mr; /* region ptr points into, NULL if none */
	uint64_t seq; /* sq slot that is done once this drains, or TCP_NO_SEQ */
	void *owned;  /* malloc'd copy ptr points into: freed once drained */
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
	uint32_t left;
};

struct tcp_conn {
	struct xp_conn base;
	struct xp_group grp; /* private group (compatibility path) */
	int sock;
	int epfd;
	enum xp_conn_state state;
	bool epollout; /* EPOLLOUT is in the epoll set */
	bool in_epoll; /* the socket is in the epoll set */
	char peer[96];

	struct tcp_swr *sq;
	uint32_t sq_size; /* ring slots: max(max_send_wr, 1) */
	uint32_t sq_max;  /* max_send_wr */
	uint64_t sq_head; /* oldest slot not yet retired */
	uint64_t sq_emit; /* next slot to generate a completion for */
	uint64_t sq_tail; /* next slot to post */

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
	char *ob;
	size_t ob_cap;
	size_t ob_head;
	size_t ob_tail;

	char *sbuf;
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

	struct tcp_mr *mr_hash[TCP_MR_BUCKETS];
};

/* A socket accepted by the listener, waiting for its CONNECT frame. */
struct tcp_pending {
	int fd;
	uint64_t deadline_ms;
	size_t got;
	struct tcp_hdr hdr; /* valid once got >= TCP_HDR_LEN */
	uint8_t buf[TCP_HDR_LEN + XP_PRIV_MAX];
};

struct tcp_listener {
	struct xp_listener base;
	int lfd;
	int epfd; /* lfd, every pending socket, and tfd */
	int tfd; /* timerfd: fires at the earliest handshake deadline */
	unsigned int npend;
	struct tcp_pending pend[TCP_PENDING_MAX];
};

static inline struct tcp_conn *to_tcp(struct xp_conn *c)
{
	return container_of(c, struct tcp_conn, base);
}

static inline struct tcp_conn *grp_to_tcp(struct xp_group *g)
{
	return container_of(g, struct tcp_conn, grp);
}

static inline struct tcp_listener *to_tcp_listener(struct xp_listener *l)
{
	return container_of(l, struct tcp_listener, base);
}

/* ---- frame header ------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static void tcp_hdr_encode(uint8_t *p, uint8_t type, uint32_t len, uint64_t id,
			   uint64_t addr, uint32_t rkey, uint32_t aux)
{
	p[0] = type;
	p[1] = 0;
	put16(p + 2, TCP_MAGIC);
	put32(p + 4, len);
	put64(p + 8, id);
	put64(p + 16, addr);
	put32(p + 24, rkey);
	put32(p + 28, aux);
}

/* The one place a received header is checked. 0 or -EPROTO. */
static int tcp_hdr_decode(const uint8_t *p, struct tcp_hdr *h)
{
	h->type = p[0];
	h->flags = p[1];
	h->len = get32(p + 4);
	h->id = get64(p + 8);
	h->addr = get64(p + 16);
	h->rkey = get32(p + 24);
	h->aux = get32(p + 28);
	if (get16(p + 2) != TCP_MAGIC ||
	    (h->flags & ~(h->type == TCP_F_WRITE ? TCP_FL_ACK : 0)))
		return -EPROTO;
	switch (h->type) {
	case TCP_F_CONNECT:
	case TCP_F_ACCEPT:
		if (h->aux != TCP_VERSION)
			return -EPROTO;
		/* fall through */
	case TCP_F_REJECT:
		return h->len <= XP_PRIV_MAX ? 0 : -EPROTO;
	case TCP_F_SEND:
	case TCP_F_WRITE:
	case TCP_F_READ_REQ:
	case TCP_F_READ_RESP:
		return 0;
	case TCP_F_ERROR:
	case TCP_F_WRITE_ACK:
		return h->len == 0 ? 0 : -EPROTO;
	}
	return -EPROTO;
}

/* ---- addresses --------------------------------------------------------- */

static void tcp_format_addr(const struct sockaddr_storage *ss, char *buf,
			    size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(buf, size, "tcp %s:%u", host, ntohs(sin->sin_port));
	} else if (ss->ss_family == AF_INET6 &&
		   IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
		inet_ntop(AF_INET, &sin6->sin6_addr.s6_addr[12], host,
			  sizeof(host));
		snprintf(buf, size, "tcp %s:%u", host, ntohs(sin6->sin6_port));
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "tcp [%s]:%u", host,
			 ntohs(sin6->sin6_port));
	} else {
		snprintf(buf, size, "tcp ?");
	}
}

static int tcp_resolve(const char *host, uint16_t port, bool passive,
		       struct addrinfo **res)
{
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	char service[8];
	int ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = getaddrinfo(host, service, &hints, res);
	if (ret == 0)
		return 0;
	log_err("getaddrinfo(%s, %s): %s", host ? host : "*", service,
		ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
	if (ret == EAI_SYSTEM)
		return -errno;
	if (ret == EAI_MEMORY)
		return -ENOMEM;
	return -EHOSTUNREACH;
}

/* ---- connection: queues and completions -------------------------------- */

static inline struct tcp_swr *tcp_swr(struct tcp_conn *c, uint64_t seq)
{
	return &c->sq[seq % c->sq_size];
}

static inline struct tcp_rwr *tcp_rwr(struct tcp_conn *c, uint64_t seq)
{
	return &c->rq[seq % c->rq_size];
}

static void tcp_cq_push(struct tcp_conn *c, bool recv, uint64_t seq,
			uint64_t wr_id, enum xp_wc_status status,
			enum xp_wc_opcode op, uint32_t byte_len)
{
	struct tcp_cqe *e;

	/* Each outstanding WR owns at most one entry until delivered. */
	if (unlikely(c->cq_count == c->cq_size)) {
		log_err("%s: completion ring overflow (bug)", c->peer);
		return;
	}
	e = &c->cq[(c->cq_head + c->cq_count) % c->cq_size];
	e->wc.wr_id = wr_id;
	e->wc.status = status;
	e->wc.opcode = op;
	e->wc.byte_len = byte_len;
	e->seq = seq;
	e->recv = recv;
	c->cq_count++;
}

/* Hand queued completions to the user; their slots are free from now on. */
static int tcp_cq_drain(struct tcp_conn *c, struct xp_wc *wc, int max)
{
	int n = 0;

	while (n < max && c->cq_count) {
		struct tcp_cqe *e = &c->cq[c->cq_head];

		wc[n++] = e->wc;
		if (e->recv)
			c->rq_head = e->seq + 1;
		else
			c->sq_head = e->seq + 1; /* retires unsignaled ones */
		c->cq_head = (c->cq_head + 1) % c->cq_size;
		c->cq_count--;
	}
	return n;
}

static enum xp_wc_opcode tcp_wc_opcode(uint8_t wr_opcode)
{
	switch (wr_opcode) {
	case XP_WR_RDMA_WRITE:
		return XP_WC_RDMA_WRITE;
	case XP_WR_RDMA_READ:
		return XP_WC_RDMA_READ;
	default:
		return XP_WC_SEND;
	}
}

static void tcp_swr_complete(struct tcp_conn *c, uint64_t seq,
			     enum xp_wc_status status)
{
	struct tcp_swr *s = tcp_swr(c, seq);

	tcp_cq_push(c, false, seq, s->wr_id, status, tcp_wc_opcode(s->opcode),
		    s->opcode == XP_WR_RDMA_READ ? s->len : 0);
}

/* Generate completions for the done prefix of the send queue, in order. */
static void tcp_sq_emit(struct tcp_conn *c)
{
	while (c->sq_emit != c->sq_tail) {
		struct tcp_swr *s = tcp_swr(c, c->sq_emit);

		if (!s->done || s->status)
			break;
		if (s->signaled)
			tcp_swr_complete(c, c->sq_emit, XP_WC_SUCCESS);
		c->sq_emit++;
	}
}

/* ---- output ------------------------------------------------------------ */

static void tcp_set_epollout(struct tcp_conn *c, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0)};

	if (c->epollout == on || !c->in_epoll)
		return;
	if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, c->sock, &ev) < 0) {
		log_err("%s: epoll_ctl(MOD): %s", c->peer, strerror(errno));
		return;
	}
	c->epollout = on;
}

static inline struct tcp_oseg *tcp_oseg(struct tcp_conn *c, uint32_t i)
{
	return &c->oq[(c->oq_head + i) % c->oq_cap];
}

/* Make room for one more segment. 0 or -ENOMEM. */
static int tcp_oq_reserve(struct tcp_conn *c)
{
	struct tcp_oseg *n;
	uint32_t cap, i;

	if (c->oq_count < c->oq_cap)
		return 0;
	cap = c->oq_cap * 2;
	n = malloc(sizeof(*n) * cap);
	if (!n) {
		log_err("%s: malloc(output queue of %u): %s", c->peer, cap,
			strerror(errno));
		return -ENOMEM;
	}
	for (i = 0; i < c->oq_count; i++)
		n[i] = *tcp_oseg(c, i);
	free(c->oq);
	c->oq = n;
	c->oq_cap = cap;
	c->oq_head = 0;
	return 0;
}

/* Copy bytes to the end of the output queue. 0 or -ENOMEM. */
static int tcp_ob_append(struct tcp_conn *c, const void *data, size_t len)
{
	size_t used = c->ob_tail - c->ob_head;
	struct tcp_oseg *last;

	if (c->ob_tail + len > c->ob_cap && c->ob_head) {
		memmove(c->ob, c->ob + c->ob_head, used);
		c->ob_head = 0;
		c->ob_tail = used;
	}
	if (c->ob_tail + len > c->ob_cap) {
		size_t cap = MAX(c->ob_cap * 2, used + len);
		char *n = realloc(c->ob, cap);

		if (!n) {
			log_err("%s: realloc(output buffer of %zu): %s",
				c->peer, cap, strerror(errno));
			return -ENOMEM;
		}
		c->ob = n;
		c->ob_cap = cap;
	}
	last = c->oq_count ? tcp_oseg(c, c->oq_count - 1) : NULL;
	if (!last || last->ptr) {
		if (tcp_oq_reserve(c))
			return -ENOMEM;
		last = tcp_oseg(c, c->oq_count++);
		*last = (struct tcp_oseg){.seq = TCP_NO_SEQ};
	}
	memcpy(c->ob + c->ob_tail, data, len);
	c->ob_tail += len;
	last->len += len;
	return 0;
}

/* Queue a reference to bytes that stay valid until the segment drains. */
static int tcp_oq_ref(struct tcp_conn *c, const char *ptr, size_t len,
		      struct xp_mr *mr, uint64_t seq)
{
	if (tcp_oq_reserve(c))
		return -ENOMEM;
	*tcp_oseg(c, c->oq_count++) = (struct tcp_oseg){
	    .ptr = ptr,
	    .len = len,
	    .mr = mr,
	    .seq = seq,
	};
	return 0;
}

/*
 * Queue what is left of frame f after hoff header and poff payload bytes
 * went out. A SEND/WRITE whose remainder is copied is done now; one whose
 * payload stays referenced is done when that segment drains.
 */
static int tcp_queue_frame(struct tcp_conn *c, const struct tcp_frame *f,
			   size_t hoff, size_t poff)
{
	size_t rest = f->len - poff;
	bool ref;

	if (hoff < TCP_HDR_LEN &&
	    tcp_ob_append(c, f->hdr + hoff, TCP_HDR_LEN - hoff))
		return -ENOMEM;
	if (!rest)
		goto done;
	/* no seq and no copy: a READ_RESP, referenced in its region */
	ref = !f->copy && (f->seq == TCP_NO_SEQ || rest > TCP_COPY_MAX ||
			   c->ob_tail - c->ob_head + rest > TCP_COPY_BUDGET);
	if (ref)
		return tcp_oq_ref(c, f->payload + poff, rest, f->mr, f->seq);
	if (tcp_ob_append(c, f->payload + poff, rest))
		return -ENOMEM;
done:
	if (f->seq != TCP_NO_SEQ)
		tcp_swr(c, f->seq)->done = true;
	return 0;
}

static void tcp_oseg_drained(struct tcp_conn *c, struct tcp_oseg *s)
{
	if (s->seq != TCP_NO_SEQ)
		tcp_swr(c, s->seq)->done = true;
	free(s->owned);
	c->oq_head = (c->oq_head + 1) % c->oq_cap;
	c->oq_count--;
}

/* Drop all queued output (connection failed or destroyed). */
static void tcp_oq_drop(struct tcp_conn *c)
{
	while (c->oq_count) {
		struct tcp_oseg *s = tcp_oseg(c, 0);

		free(s->owned);
		c->oq_head = (c->oq_head + 1) % c->oq_cap;
		c->oq_count--;
	}
	c->oq_head = 0;
	c->ob_head = c->ob_tail = 0;
}

/*
 * Write queued output until it is gone or the socket is full. Marks WRs
 * done as their bytes leave; the caller runs tcp_sq_emit(). 0 or -errno
 * (socket error: the caller fails the connection).
 */
static int tcp_flush(struct tcp_conn *c)
{
	while (c->oq_count) {
		struct iovec iov[TCP_IOV];
		struct msghdr msg = {.msg_iov = iov};
		size_t off = c->ob_head, total = 0;
		uint32_t i, n = MIN(c->oq_count, (uint32_t)TCP_IOV);
		ssize_t r;

		for (i = 0; i < n; i++) {
			struct tcp_oseg *s = tcp_oseg(c, i);

			if (s->ptr) {
				iov[i].iov_base = (void *)s->ptr;
			} else {
				iov[i].iov_base = c->ob + off;
				off += s->len;
			}
			iov[i].iov_len = s->len;
			total += s->len;
		}
		msg.msg_iovlen = n;
		r = sendmsg(c->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			log_debug("%s: sendmsg: %s", c->peer, strerror(errno));
			return -errno;
		}
		for (size_t left = (size_t)r; left;) {
			struct tcp_oseg *s = tcp_oseg(c, 0);
			size_t k = MIN(left, s->len);

			if (s->ptr)
				s->ptr += k;
			else
				c->ob_head += k;
			s->len -= k;
			left -= k;
			if (!s->len)
				tcp_oseg_drained(c, s);
		}
		if ((size_t)r < total)
			break; /* socket full */
	}
	if (!c->oq_count)
		c->ob_head = c->ob_tail = 0;
	tcp_set_epollout(c, c->oq_count != 0);
	return 0;
}

/*
 * Send frames in order: straight from their buffers with one sendmsg()
 * when nothing is queued, queueing the unsent rest. 0 or -errno (socket
 * error or out of memory: the caller fails the connection).
 */
static int tcp_send_frames(struct tcp_conn *c, struct tcp_frame *f, int nf)
{
	struct iovec iov[2 * TCP_BATCH];
	struct msghdr msg = {.msg_iov = iov};
	size_t sent = 0;
	ssize_t r;
	int i, n = 0;

	if (c->oq_count) {
		for (i = 0; i < nf; i++)
			if (tcp_queue_frame(c, &f[i], 0, 0))
				return -ENOMEM;
		return tcp_flush(c);
	}
	for (i = 0; i < nf; i++) {
		iov[n].iov_base = f[i].hdr;
		iov[n++].iov_len = TCP_HDR_LEN;
		if (f[i].len) {
			iov[n].iov_base = (void *)f[i].payload;
			iov[n++].iov_len = f[i].len;
		}
	}
	msg.msg_iovlen = (size_t)n;
	do {
		r = sendmsg(c->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			log_debug("%s: sendmsg: %s", c->peer, strerror(errno));
			return -errno;
		}
		r = 0;
	}
	sent = (size_t)r;
	for (i = 0; i < nf; i++) {
		size_t hoff = MIN(sent, (size_t)TCP_HDR_LEN), poff;

		sent -= hoff;
		poff = MIN(sent, (size_t)f[i].len);
		sent -= poff;
		if (hoff == TCP_HDR_LEN && poff == f[i].len) {
			if (f[i].seq != TCP_NO_SEQ)
				tcp_swr(c, f[i].seq)->done = true;
			continue;
		}
		if (tcp_queue_frame(c, &f[i], hoff, poff))
			return -ENOMEM;
	}
	tcp_set_epollout(c, c->oq_count != 0);
	return 0;
}

/* ---- connection failure ------------------------------------------------ */

/* Best effort: ERROR can only follow complete frames. */
static void tcp_send_error(struct tcp_conn *c, uint8_t status, uint64_t id)
{
	uint8_t hdr[TCP_HDR_LEN];

	if (c->oq_count && tcp_flush(c) < 0)
		return;
	if (c->oq_count) {
		log_debug("%s: output backed up, ERROR frame not sent",
			  c->peer);
		return;
	}
	tcp_hdr_encode(hdr, TCP_F_ERROR, 0, id, 0, 0, status);
	if (send(c->sock, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(hdr))
		log_debug("%s: send(ERROR) incomplete", c->peer);
}

/*
 * Move to XP_CONN_ERROR: statuses pinned on WRs stay, everything else
 * outstanding flushes. peer_status != 0: we found the peer's request
 * peer_id bad, tell it with an ERROR frame. Idempotent.
 */
static void tcp_fail(struct tcp_conn *c, uint8_t peer_status, uint64_t peer_id)
{
	if (c->state == XP_CONN_ERROR)
		return;
	if (peer_status && c->state == XP_CONN_CONNECTED)
		tcp_send_error(c, peer_status, peer_id);
	c->state = XP_CONN_ERROR;

	tcp_sq_emit(c); /* what finished before the failure */
	for (; c->sq_emit != c->sq_tail; c->sq_emit++) {
		struct tcp_swr *s = tcp_swr(c, c->sq_emit);

		tcp_swr_complete(c, c->sq_emit,
				 s->status ? s->status : XP_WC_FLUSH_ERR);
	}
	for (; c->rq_cons != c->rq_tail; c->rq_cons++) {
		struct tcp_rwr *r = tcp_rwr(c, c->rq_cons);

		tcp_cq_push(c, true, c->rq_cons, r->wr_id,
			    r->status ? r->status : XP_WC_FLUSH_ERR, XP_WC_RECV,
			    0);
	}
	tcp_oq_drop(c);
	c->rx.in_payload = false;
	c->s_head = c->s_tail = 0;
	if (c->in_epoll) {
		if (epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->sock, NULL) < 0)
			log_err("%s: epoll_ctl(DEL): %s", c->peer,
				strerror(errno));
		c->in_epoll = false;
		c->epollout = false;
	}
	/* FIN after anything already in the kernel (ERROR included). */
	shutdown(c->sock, SHUT_WR);
}

/* Socket error or EOF: an RDMA READ whose response was arriving is FATAL. */
static void tcp_fail_io(struct tcp_conn *c, int err)
{
	if (c->state == XP_CONN_ERROR)
		return;
	if (err)
		log_warn("%s: connection failed: %s", c->peer, strerror(-err));
	else
		log_debug("%s: peer closed the connection", c->peer);
	if (c->rx.in_payload && c->rx.hdr.type == TCP_F_READ_RESP)
		tcp_swr(c, c->rx.hdr.id)->status = XP_WC_FATAL;
	tcp_fail(c, 0, 0);
}

/* A malformed or unexpected frame: the stream cannot be trusted further. */
static void tcp_fail_proto(struct tcp_conn *c, const struct tcp_hdr *h,
			   const char *why)
{
	log_warn("%s: protocol error: %s (frame type %u, len %u, id %llu)",
		 c->peer, why, h->type, h->len, (unsigned long long)h->id);
	tcp_fail(c, 0, 0); /* no ERROR: its id could not be trusted */
}

/* ---- memory regions ---------------------------------------------------- */

static inline unsigned int tcp_mr_bucket(uint32_t rkey)
{
	return (rkey * 2654435761u) >> 26; /* 64 buckets */
}

_Static_assert(TCP_MR_BUCKETS == 64, "tcp_mr_bucket() makes 6 bits");

static struct tcp_mr *tcp_mr_find(struct tcp_conn *c, uint32_t rkey)
{
	struct tcp_mr *m = c->mr_hash[tcp_mr_bucket(rkey)];

	while (m && m->mr.rkey != rkey)
		m = m->hnext;
	return m;
}

/*
 * The check an HCA makes on an incoming one-sided request: rkey known on
 * this connection, [addr, addr + len) inside the region (no overflow),
 * access right present. Returns the destination/source or NULL.
 */
static char *tcp_mr_check(struct tcp_conn *c, const struct tcp_hdr *h,
			  int access, struct xp_mr **mrp)
{
	struct tcp_mr *m = tcp_mr_find(c, h->rkey);
	uint64_t base, off;

	if (!m) {
		log_warn("%s: remote access with unknown rkey 0x%x", c->peer,
			 h->rkey);
		return NULL;
	}
	if (!(m->mr.access & access)) {
		log_warn("%s: remote %s on rkey 0x%x without the access right",
			 c->peer,
			 access == XP_ACCESS_REMOTE_READ ? "read" : "write",
			 h->rkey);
		return NULL;
	}
	base = (uint64_t)(uintptr_t)m->mr.addr;
	off = h->addr - base;
	if (h->addr < base || off > m->mr.length ||
	    h->len > m->mr.length - off) {
		log_warn("%s: remote access [0x%llx, +%u) outside region "
			 "rkey 0x%x [%p, +%zu)",
			 c->peer, (unsigned long long)h->addr, h->len, h->rkey,
			 m->mr.addr, m->mr.length);
		return NULL;
	}
	*mrp = &m->mr;
	return (char *)m->mr.addr + off;
}

static int tcp_reg_mr(struct xp_group *g, void *addr, size_t len, int access,
		      struct xp_mr **out)
{
	struct tcp_conn *c = grp_to_tcp(g);
	const int all = XP_ACCESS_LOCAL_WRITE | XP_ACCESS_REMOTE_READ |
			XP_ACCESS_REMOTE_WRITE;
	struct tcp_mr *m;
	uint32_t rkey;
	unsigned int b;

	/* as ibv_reg_mr: remote write needs local write */
	if (!addr || !len || (access & ~all) ||
	    ((access & XP_ACCESS_REMOTE_WRITE) &&
	     !(access & XP_ACCESS_LOCAL_WRITE)) ||
	    (uintptr_t)addr + len < (uintptr_t)addr) {
		log_err("%s: reg_mr(%p, %zu, 0x%x): invalid argument", c->peer,
			addr, len, access);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		log_err("%s: reg_mr: calloc: %s", c->peer, strerror(errno));
		return -ENOMEM;
	}
	do
		random_bytes(&rkey, sizeof(rkey));
	while (rkey == 0 || tcp_mr_find(c, rkey));
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = rkey;
	m->mr.rkey = rkey;
	m->mr.access = access;
	m->mr.group = g;
	b = tcp_mr_bucket(rkey);
	m->hnext = c->mr_hash[b];
	c->mr_hash[b] = m;
	*out = &m->mr;
	return 0;
}

static void tcp_mr_unlink(struct tcp_conn *c, struct tcp_mr *m)
{
	struct tcp_mr **pp = &c->mr_hash[tcp_mr_bucket(m->mr.rkey)];

	while (*pp && *pp != m)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = m->hnext;
}

/*
 * Unsent bytes still pointing into the region (READ_RESP payloads, or a
 * posted SEND/WRITE the user deregistered early) are copied out first so
 * the peer still gets them. Posted receives, RDMA READ destinations and a
 * payload being received into it are local work the region is pulled
 * from under: the connection fails first (as an HCA's protection fault
 * would). A WRITE from the peer landing in it is discarded from here on.
 */
static void tcp_dereg_mr(struct xp_mr *mr)
{
	struct tcp_mr *m = container_of(mr, struct tcp_mr, mr);
	struct tcp_conn *c = grp_to_tcp(mr->group);
	bool busy = false;
	uint64_t seq;
	uint32_t i;

	for (i = 0; i < c->oq_count; i++) {
		struct tcp_oseg *s = tcp_oseg(c, i);
		char *copy;

		if (s->mr != mr || !s->ptr || s->owned)
			continue;
		copy = malloc(s->len);
		if (!copy) {
			log_err("%s: dereg_mr: malloc(%zu): %s", c->peer,
				s->len, strerror(errno));
			tcp_fail(c, 0, 0);
			break;
		}
		log_debug("%s: dereg_mr: copying %zu unsent bytes out of "
			  "region %p",
			  c->peer, s->len, mr->addr);
		memcpy(copy, s->ptr, s->len);
		s->ptr = copy;
		s->owned = copy;
		s->mr = NULL;
	}
	if (c->state != XP_CONN_ERROR) {
		if (c->rx.in_payload && c->rx.mr == mr) {
			if (c->rx.hdr.type == TCP_F_WRITE)
				c->rx.dst = NULL;
			else
				busy = true;
		}
		for (seq = c->rq_cons; seq != c->rq_tail; seq++)
			if (tcp_rwr(c, seq)->mr == mr)
				busy = true;
		for (seq = c->sq_emit; seq != c->sq_tail; seq++) {
			struct tcp_swr *s = tcp_swr(c, seq);

			if (s->opcode == XP_WR_RDMA_READ && !s->done &&
			    s->mr == mr)
				busy = true;
		}
		if (busy) {
			log_warn(
			    "%s: region %p deregistered under posted work; "
			    "failing the connection",
			    c->peer, mr->addr);
			tcp_fail(c, 0, 0);
		}
	}
	tcp_mr_unlink(c, m);
	free(m);
}

/* A local sge: inside its region, registered on this connection. */
static int tcp_sge_check(struct tcp_conn *c, const struct xp_sge *sge,
			 int access)
{
	uintptr_t a = (uintptr_t)sge->addr, base;

	if (!sge->length)
		return 0;
	if (!sge->mr || sge->mr->group != &c->grp ||
	    (sge->mr->access & access) != access)
		goto out_invalid;
	base = (uintptr_t)sge->mr->addr;
	if (a < base || a - base > sge->mr->length ||
	    sge->length > sge->mr->length - (a - base))
		goto out_invalid;
	return 0;

out_invalid:
	log_err("%s: sge %p+%u not inside a suitable region of this "
		"connection",
		c->peer, sge->addr, sge->length);
	return -EINVAL;
}

/* ---- input ------------------------------------------------------------- */

static void tcp_rx_payload(struct tcp_conn *c, char *dst, struct xp_mr *mr)
{
	if (c->rx.hdr.len >= TCP_LARGE_PAYLOAD)
		c->rx_large = TCP_LARGE_DECAY;
	else if (c->rx_large)
		c->rx_large--;
	c->rx.in_payload = true;
	c->rx.dst = dst;
	c->rx.mr = mr;
	c->rx.left = c->rx.hdr.len;
}

/* Queue WRITE_ACK for a placed WRITE; poll() flushes it with the rest. */
static void tcp_queue_write_ack(struct tcp_conn *c, const struct tcp_hdr *h)
{
	struct tcp_frame f = { .seq = TCP_NO_SEQ };

	if (c->oq_count >= TCP_OQ_LIMIT ||
	    c->ob_tail - c->ob_head >= TCP_OB_LIMIT) {
		tcp_fail_proto(c, h, "peer does not read its WRITE acks");
		return;
	}
	tcp_hdr_encode(f.hdr, TCP_F_WRITE_ACK, 0, h->id, 0, 0, 0);
	if (tcp_queue_frame(c, &f, 0, 0))
		tcp_fail_io(c, -ENOMEM);
}

/* The payload of the current frame has been placed. */
static void tcp_rx_finish(struct tcp_conn *c)
{
	const struct tcp_hdr *h = &c->rx.hdr;

	c->rx.in_payload = false;
	switch (h->type) {
	case TCP_F_SEND: {
		struct tcp_rwr *r = tcp_rwr(c, c->rq_cons);

		tcp_cq_push(c, true, c->rq_cons, r->wr_id, XP_WC_SUCCESS,
			    XP_WC_RECV, h->len);
		c->rq_cons++;
		break;
	}
	case TCP_F_READ_RESP:
		tcp_swr(c, h->id)->done = true;
		tcp_sq_emit(c);
		break;
	case TCP_F_WRITE:
		/* placed; nothing to report on this side */
		if (h->flags & TCP_FL_ACK)
			tcp_queue_write_ack(c, h);
		break;
	default:
		break;
	}
}

/* Serve a READ_REQ: queue READ_RESP with the region's bytes, by reference. */
static void tcp_rx_read_req(struct tcp_conn *c, const struct tcp_hdr *h)
{
	struct tcp_frame f = {.seq = TCP_NO_SEQ, .len = h->len};
	struct xp_mr *mr = NULL;

	if (h->len) {
		f.payload = tcp_mr_check(c, h, XP_ACCESS_REMOTE_READ, &mr);
		if (!f.payload) {
			tcp_fail(c, XP_WC_REM_ACCESS_ERR, h->id);
			return;
		}
	}
	if (c->oq_count >= TCP_OQ_LIMIT ||
	    c->ob_tail - c->ob_head >= TCP_OB_LIMIT) {
		tcp_fail_proto(c, h, "peer does not read its READ responses");
		return;
	}
	f.mr = mr;
	tcp_hdr_encode(f.hdr, TCP_F_READ_RESP, h->len, h->id, 0, 0, 0);
	/* queued, not written: poll() flushes all responses in one go */
	if (tcp_queue_frame(c, &f, 0, 0))
		tcp_fail_io(c, -ENOMEM);
}

/* A complete header has arrived: decide where its payload goes. */
static void tcp_rx_header(struct tcp_conn *c, const uint8_t *p)
{
	struct tcp_hdr *h = &c->rx.hdr;
	struct xp_mr *mr = NULL;
	struct tcp_swr *s;
	struct tcp_rwr *r;
	char *dst;

	if (tcp_hdr_decode(p, h)) {
		tcp_fail_proto(c, h, "bad frame header");
		return;
	}
	switch (h->type) {
	case TCP_F_SEND:
		if (c->rq_cons == c->rq_tail) {
			log_warn("%s: SEND of %u bytes with no receive posted "
				 "(RNR)",
				 c->peer, h->len);
			tcp_fail(c, XP_WC_RNR_ERR, h->id);
			return;
		}
		r = tcp_rwr(c, c->rq_cons);
		if (h->len > r->len) {
			log_warn("%s: SEND of %u bytes into a %u-byte receive",
				 c->peer, h->len, r->len);
			r->status = XP_WC_LOC_ERR;
			tcp_fail(c, XP_WC_FATAL, h->id);
			return;
		}
		tcp_rx_payload(c, r->addr, r->mr);
		break;
	case TCP_F_WRITE:
		dst = NULL;
		if (h->len) {
			dst = tcp_mr_check(c, h, XP_ACCESS_REMOTE_WRITE, &mr);
			if (!dst) {
				tcp_fail(c, XP_WC_REM_ACCESS_ERR, h->id);
				return;
			}
		}
		tcp_rx_payload(c, dst, mr);
		break;
	case TCP_F_READ_REQ:
		tcp_rx_read_req(c, h);
		return;
	case TCP_F_READ_RESP:
		if (h->id < c->sq_emit || h->id >= c->sq_tail) {
			tcp_fail_proto(c, h, "READ response for no request");
			return;
		}
		s = tcp_swr(c, h->id);
		if (s->opcode != XP_WR_RDMA_READ || s->done ||
		    s->len != h->len) {
			tcp_fail_proto(c, h, "READ response does not match");
			return;
		}
		tcp_rx_payload(c, s->dst, s->mr);
		break;
	case TCP_F_WRITE_ACK:
		if (h->id < c->sq_emit || h->id >= c->sq_tail) {
			tcp_fail_proto(c, h, "WRITE ack for no request");
			return;
		}
		s = tcp_swr(c, h->id);
		if (s->opcode != XP_WR_RDMA_WRITE || !s->signaled || s->done) {
			tcp_fail_proto(c, h, "WRITE ack does not match");
			return;
		}
		s->done = true;
		tcp_sq_emit(c);
		return;
	case TCP_F_ERROR:
		if (h->aux != XP_WC_REM_ACCESS_ERR && h->aux != XP_WC_RNR_ERR)
			h->aux = XP_WC_FATAL;
		log_warn("%s: peer failed request %llu: %s", c->peer,
			 (unsigned long long)h->id,
			 xp_wc_status_str((enum xp_wc_status)h->aux));
		/* pin the error unless that WR already completed */
		if (h->id >= c->sq_emit && h->id < c->sq_tail)
			tcp_swr(c, h->id)->status = (uint8_t)h->aux;
		tcp_fail(c, 0, 0);
		return;
	default:
		tcp_fail_proto(c, h, "handshake frame on a live connection");
		return;
	}
	if (!h->len)
		tcp_rx_finish(c);
}

/*
 * Read and parse until the socket is drained, the byte budget is spent or
 * cq_limit completions are queued. Everything read is parsed before
 * returning unless cq_limit stopped it (then poll() returns > 0).
 */
static void tcp_rx_progress(struct tcp_conn *c, uint32_t cq_limit)
{
	size_t budget = TCP_RX_BUDGET;
	bool drained = c->rx_skip; /* found empty just before: parse only */

	c->rx_skip = false;

	for (;;) {
		struct iovec iov[2];
		size_t want;
		ssize_t r;
		int n;
		bool direct;

		while (c->s_head < c->s_tail) {
			size_t avail = c->s_tail - c->s_head;

			if (c->cq_count >= cq_limit)
				return;
			if (c->rx.in_payload) {
				size_t k = MIN(avail, (size_t)c->rx.left);

				if (c->rx.dst) {
					memcpy(c->rx.dst, c->sbuf + c->s_head,
					       k);
					c->rx.dst += k;
				}
				c->s_head += k;
				c->rx.left -= (uint32_t)k;
				if (!c->rx.left)
					tcp_rx_finish(c);
				continue;
			}
			if (avail < TCP_HDR_LEN)
				break;
			c->s_head += TCP_HDR_LEN;
			tcp_rx_header(c, (uint8_t *)c->sbuf + c->s_head -
					     TCP_HDR_LEN);
			if (c->state != XP_CONN_CONNECTED)
				return;
		}
		if (c->s_head == c->s_tail)
			c->s_head = c->s_tail = 0;
		if (drained || !budget || c->cq_count >= cq_limit)
			return;

		direct =
		    c->rx.in_payload && c->rx.dst && c->s_head == c->s_tail;
		if (direct) {
			/* payload to its destination, what follows staged */
			iov[0].iov_base = c->rx.dst;
			iov[0].iov_len = c->rx.left;
			iov[1].iov_base = c->sbuf;
			iov[1].iov_len =
			    c->rx_large ? TCP_SMALL_READ : TCP_SBUF_SIZE;
			n = 2;
		} else {
			if (c->s_head) {
				memmove(c->sbuf, c->sbuf + c->s_head,
					c->s_tail - c->s_head);
				c->s_tail -= c->s_head;
				c->s_head = 0;
			}
			iov[0].iov_base = c->sbuf + c->s_tail;
			iov[0].iov_len = TCP_SBUF_SIZE - c->s_tail;
			if (c->rx_large)
				iov[0].iov_len =
				    MIN(iov[0].iov_len, (size_t)TCP_SMALL_READ);
			n = 1;
		}
		want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
		r = readv(c->sock, iov, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->rx_skip = c->rx_arm_skip = true;
				return;
			}
			tcp_fail_io(c, -errno);
			return;
		}
		if (r == 0) {
			tcp_fail_io(c, 0);
			return;
		}
		budget -= MIN((size_t)r, budget);
		/* a short read almost always means the socket is empty */
		drained = (size_t)r < want;
		c->rx_skip = c->rx_arm_skip = drained;
		if (direct) {
			size_t k = MIN((size_t)r, (size_t)c->rx.left);

			c->rx.dst += k;
			c->rx.left -= (uint32_t)k;
			c->s_tail = (size_t)r - k;
			if (!c->rx.left)
				tcp_rx_finish(c);
		} else {
			c->s_tail += (size_t)r;
		}
	}
}

/* ---- connection lifecycle ---------------------------------------------- */

static void tcp_conn_free(struct tcp_conn *c)
{
	for (unsigned int b = 0; b < TCP_MR_BUCKETS; b++) {
		while (c->mr_hash[b]) {
			struct tcp_mr *m = c->mr_hash[b];

			c->mr_hash[b] = m->hnext;
			free(m);
		}
	}
	if (c->oq)
		tcp_oq_drop(c);
	free(c->sbuf);
	free(c->ob);
	free(c->oq);
	free(c->cq);
	free(c->rq);
	free(c->sq);
	if (c->epfd >= 0)
		close(c->epfd);
	free(c);
}

static int tcp_attr_check(const struct xp_conn_attr *attr)
{
	if (attr && attr->max_send_wr <= TCP_MAX_WR &&
	    attr->max_recv_wr <= TCP_MAX_WR)
		return 0;
	log_err("tcp: connection attributes out of range (max %u WRs)",
		TCP_MAX_WR);
	return -EINVAL;
}

/*
 * Wrap a connected socket. On success the connection owns sock; on
 * failure the caller still does.
 */
static int tcp_conn_create(int sock, const struct xp_conn_attr *attr,
			   enum xp_conn_state state, struct tcp_conn **out)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tcp_conn *c;
	int one = 1, ret = -ENOMEM;

	ret = tcp_attr_check(attr);
	if (ret)
		return ret;
	ret = -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c) {
		log_err("tcp: calloc(connection): %s", strerror(errno));
		return -ENOMEM;
	}
	c->base.ops = &xp_tcp_ops;
	c->grp.ops = &xp_tcp_ops;
	c->sock = sock;
	c->epfd = -1;
	c->state = state;
	c->sq_max = attr->max_send_wr;
	c->rq_max = attr->max_recv_wr;
	c->sq_size = MAX(attr->max_send_wr, 1u);
	c->rq_size = MAX(attr->max_recv_wr, 1u);
	c->cq_size = c->sq_size + c->rq_size;
	c->oq_cap = 2 * c->sq_size + 16;
	c->ob_cap = TCP_OB_INIT;
	c->sq = calloc(c->sq_size, sizeof(*c->sq));
	c->rq = calloc(c->rq_size, sizeof(*c->rq));
	c->cq = calloc(c->cq_size, sizeof(*c->cq));
	c->oq = calloc(c->oq_cap, sizeof(*c->oq));
	c->ob = malloc(c->ob_cap);
	c->sbuf = malloc(TCP_SBUF_SIZE);
	if (!c->sq || !c->rq || !c->cq || !c->oq || !c->ob || !c->sbuf) {
		log_err("tcp: allocating queues for %u/%u WRs: %s", c->sq_size,
			c->rq_size, strerror(ENOMEM));
		goto out_free_conn;
	}
	if (getpeername(sock, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_addr(&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "tcp ?");
	if (setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		log_warn("%s: setsockopt(TCP_NODELAY): %s", c->peer,
			 strerror(errno));
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0) {
		ret = -errno;
		log_err("%s: epoll_create1: %s", c->peer, strerror(errno));
		goto out_free_conn;
	}
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, sock, &ev) < 0) {
		ret = -errno;
		log_err("%s: epoll_ctl(ADD): %s", c->peer, strerror(errno));
		goto out_free_conn;
	}
	c->in_epoll = true;
	*out = c;
	return 0;

out_free_conn:
	tcp_conn_free(c);
	return ret;
}

static void tcp_destroy(struct xp_conn *xc)
{
	struct tcp_conn *c;

	if (!xc)
		return;
	c = to_tcp(xc);
	/*
	 * Read what the peer already sent so close() ends with a FIN, not
	 * an RST that could discard our last frames (bounded).
	 */
	shutdown(c->sock, SHUT_WR);
	for (int i = 0; i < 16; i++)
		if (recv(c->sock, c->sbuf, TCP_SBUF_SIZE, MSG_DONTWAIT) <= 0)
			break;
	close(c->sock);
	tcp_conn_free(c);
}

static void tcp_disconnect(struct xp_conn *xc)
{
	struct tcp_conn *c = to_tcp(xc);

	if (c->state != XP_CONN_ERROR)
		log_debug("%s: disconnect", c->peer);
	tcp_fail(c, 0, 0);
}

static enum xp_conn_state tcp_state(struct xp_conn *xc)
{
	return to_tcp(xc)->state;
}

static const char *tcp_peer_name(struct xp_conn *xc)
{
	return to_tcp(xc)->peer;
}

static int tcp_fd(struct xp_conn *xc)
{
	return to_tcp(xc)->epfd;
}

/*
 * See "fd() contract" at the top: nothing to arm. If the socket was found
 * empty by the last read, the poll() that follows skips reading once more:
 * the caller sleeps on the level-triggered epoll fd next, which wakes at
 * once for anything that arrived since.
 */
static int tcp_arm(struct xp_conn *xc)
{
	struct tcp_conn *c = to_tcp(xc);

	if (c->rx_arm_skip) {
		c->rx_arm_skip = false;
		c->rx_skip = true;
	}
	return 0;
}

static int tcp_poll(struct xp_conn *xc, struct xp_wc *wc, int max)
{
	struct tcp_conn *c = to_tcp(xc);
	int n, ret;

	if (max < 0)
		return -EINVAL;
	n = tcp_cq_drain(c, wc, max);
	if (n == max || c->state != XP_CONN_CONNECTED)
		return n;
	if (c->oq_count) {
		ret = tcp_flush(c);
		if (ret)
			tcp_fail_io(c, ret);
		tcp_sq_emit(c);
	}
	if (c->state == XP_CONN_CONNECTED)
		tcp_rx_progress(c, (uint32_t)(max - n));
	if (c->state == XP_CONN_CONNECTED && c->oq_count) {
		ret = tcp_flush(c);
		if (ret)
			tcp_fail_io(c, ret);
		tcp_sq_emit(c);
	}
	return n + tcp_cq_drain(c, wc + n, max - n);
}

static int tcp_post_recv(struct xp_conn *xc, uint64_t wr_id,
			 const struct xp_sge *sge)
{
	struct tcp_conn *c = to_tcp(xc);
	struct tcp_rwr *r;
	int ret;

	if (c->state == XP_CONN_ERROR)
		return -ENOTCONN;
	if (c->rq_tail - c->rq_head >= c->rq_max)
		return -ENOMEM;
	ret = tcp_sge_check(c, sge, XP_ACCESS_LOCAL_WRITE);
	if (ret)
		return ret;
	r = tcp_rwr(c, c->rq_tail++);
	r->wr_id = wr_id;
	r->addr = sge->addr;
	r->len = sge->length;
	r->mr = sge->mr;
	r->status = 0;
	return 0;
}

/* Fill sq slot seq from wr and build its frame. */
static void tcp_build(struct tcp_conn *c, const struct xp_send_wr *wr,
		      uint64_t seq, struct tcp_frame *f)
{
	struct tcp_swr *s = tcp_swr(c, seq);
	uint8_t type = TCP_F_SEND;

	s->wr_id = wr->wr_id;
	s->opcode = (uint8_t)wr->opcode;
	s->signaled = wr->flags & XP_SEND_SIGNALED;
	s->done = false;
	s->status = 0;
	s->dst = wr->sge.addr;
	s->mr = wr->sge.mr;
	s->len = wr->sge.length;
	f->payload = wr->sge.addr;
	f->len = wr->sge.length;
	f->mr = wr->sge.mr;
	f->seq = seq;
	f->copy = false;
	if (wr->opcode == XP_WR_RDMA_WRITE) {
		type = TCP_F_WRITE;
		/* signaled: done on the peer's WRITE_ACK, not when sent */
		if (s->signaled)
			f->seq = TCP_NO_SEQ;
	} else if (wr->opcode == XP_WR_RDMA_READ) {
		type = TCP_F_READ_REQ;
		f->len = 0; /* no payload; done when READ_RESP is placed */
		f->seq = TCP_NO_SEQ;
	}
	tcp_hdr_encode(f->hdr, type, wr->sge.length, seq, wr->remote_addr,
		       wr->rkey, 0);
	if (type == TCP_F_WRITE && s->signaled)
		f->hdr[1] = TCP_FL_ACK;
}

static int tcp_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
			 struct xp_send_wr **bad)
{
	struct tcp_conn *c = to_tcp(xc);
	struct tcp_frame f[TCP_BATCH];
	int nf = 0, ret = 0;

	for (; wr; wr = wr->next) {
		if (c->state != XP_CONN_CONNECTED) {
			ret = -ENOTCONN;
			break;
		}
		if (c->sq_tail - c->sq_head >= c->sq_max) {
			ret = -ENOMEM;
			break;
		}
		if (wr->opcode != XP_WR_SEND &&
		    wr->opcode != XP_WR_RDMA_WRITE &&
		    wr->opcode != XP_WR_RDMA_READ) {
			log_err("%s: post_send: bad opcode %d", c->peer,
				wr->opcode);
			ret = -EINVAL;
			break;
		}
		ret = tcp_sge_check(
		    c, &wr->sge,
		    wr->opcode == XP_WR_RDMA_READ ? XP_ACCESS_LOCAL_WRITE : 0);
		if (ret)
			break;
		tcp_build(c, wr, c->sq_tail++, &f[nf++]);
		if (nf == TCP_BATCH) {
			ret = tcp_send_frames(c, f, nf);
			nf = 0;
			if (ret) {
				tcp_fail_io(c, ret);
				ret = 0; /* posted; they complete flushed */
			}
		}
	}
	if (nf && c->state == XP_CONN_CONNECTED) {
		int err = tcp_send_frames(c, f, nf);

		if (err)
			tcp_fail_io(c, err);
	}
	tcp_sq_emit(c);
	if (ret && bad)
		*bad = wr;
	return ret;
}

/* ---- handshake helpers ------------------------------------------------- */

static int tcp_remaining_ms(uint64_t deadline)
{
	uint64_t now;

	if (deadline == UINT64_MAX)
		return -1;
	now = now_ms();
	return now >= deadline ? 0
			       : (int)MIN(deadline - now, (uint64_t)INT32_MAX);
}

/* Move exactly len bytes on a non-blocking socket before deadline. */
static int tcp_io_timed(int fd, void *buf, size_t len, bool wr,
			uint64_t deadline)
{
	char *p = buf;

	while (len) {
		ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
			       : recv(fd, p, len, MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd pfd = {
			    .fd = fd,
			    .events = wr ? POLLOUT : POLLIN,
			};
			int ms = tcp_remaining_ms(deadline), r;

			if (ms == 0)
				return -ETIMEDOUT;
			r = poll(&pfd, 1, ms);
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r == 0)
				return -ETIMEDOUT;
			continue;
		}
		return -errno;
	}
	return 0;
}

/* Non-blocking connect to one address, waiting until deadline. */
static int tcp_connect_one(const struct addrinfo *ai, uint64_t deadline,
			   int *out)
{
	int fd, err = 0;
	socklen_t el = sizeof(err);

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0) {
		err = errno;
		log_err("tcp: socket: %s", strerror(err));
		return -err;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto out_connected;
	if (errno != EINPROGRESS) {
		err = errno;
		goto out_close_socket;
	}
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int r = poll(&pfd, 1, tcp_remaining_ms(deadline));

		if (r > 0)
			break;
		if (r == 0) {
			err = ETIMEDOUT;
			goto out_close_socket;
		}
		if (errno != EINTR) {
			err = errno;
			goto out_close_socket;
		}
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err)
		goto out_close_socket;
out_connected:
	*out = fd;
	return 0;

out_close_socket:
	close(fd);
	return -err;
}

static int tcp_connect(const char *host, uint16_t port,
		       const struct xp_conn_attr *attr, const void *priv,
		       size_t priv_len, int timeout_ms, struct xp_conn **out,
		       void *rej, size_t *rej_len)
{
	uint8_t frame[TCP_HDR_LEN + XP_PRIV_MAX];
	uint64_t deadline =
	    timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
	struct addrinfo *res, *ai;
	struct tcp_conn *c;
	struct tcp_hdr h;
	int ret, fd = -1;

	if (rej_len)
		*rej_len = 0;
	if (priv_len > XP_PRIV_MAX || (priv_len && !priv)) {
		log_err("tcp: connect: %zu bytes of private data (max %d)",
			priv_len, XP_PRIV_MAX);
		return -EINVAL;
	}
	ret = tcp_attr_check(attr);
	if (ret)
		return ret;
	ret = tcp_resolve(host, port, false, &res);
	if (ret)
		return ret;
	ret = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		ret = tcp_connect_one(ai, deadline, &fd);
		if (!ret || ret == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (ret) {
		log_err("tcp: connect(%s:%u): %s", host, port, strerror(-ret));
		return ret;
	}
	ret = tcp_conn_create(fd, attr, XP_CONN_REQUESTED, &c);
	if (ret)
		goto out_close_socket;

	tcp_hdr_encode(frame, TCP_F_CONNECT, (uint32_t)priv_len, 0, 0, 0,
		       TCP_VERSION);
	if (priv_len)
		memcpy(frame + TCP_HDR_LEN, priv, priv_len);
	ret = tcp_io_timed(fd, frame, TCP_HDR_LEN + priv_len, true, deadline);
	if (ret) {
		log_err("%s: send(CONNECT): %s", c->peer, strerror(-ret));
		goto out_destroy_conn;
	}
	/* exactly the answer frame: what follows it belongs to poll() */
	ret = tcp_io_timed(fd, frame, TCP_HDR_LEN, false, deadline);
	if (!ret && tcp_hdr_decode(frame, &h))
		ret = -EPROTO;
	if (!ret && h.type != TCP_F_ACCEPT && h.type != TCP_F_REJECT)
		ret = -EPROTO;
	if (!ret && h.len)
		ret = tcp_io_timed(fd, frame + TCP_HDR_LEN, h.len, false,
				   deadline);
	if (ret) {
		log_err("%s: waiting for ACCEPT: %s", c->peer, strerror(-ret));
		goto out_destroy_conn;
	}
	if (h.type == TCP_F_REJECT) {
		if (rej && rej_len) {
			memcpy(rej, frame + TCP_HDR_LEN, h.len);
			*rej_len = h.len;
		}
		log_debug("%s: connection rejected", c->peer);
		ret = -ECONNREFUSED;
		goto out_destroy_conn;
	}
	c->state = XP_CONN_CONNECTED;
	*out = &c->base;
	return 0;

out_destroy_conn:
	tcp_destroy(&c->base); /* closes fd */
	return ret;
out_close_socket:
	close(fd);
	return ret;
}

/* ---- listener ---------------------------------------------------------- */

static int tcp_listen_one(int family, const struct sockaddr *sa, socklen_t sl,
			  bool dual)
{
	int fd, one = 1, zero = 0, err;

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		log_warn("tcp: setsockopt(SO_REUSEADDR): %s", strerror(errno));
	if (dual &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		log_warn("tcp: setsockopt(IPV6_V6ONLY): %s", strerror(errno));
	if (bind(fd, sa, sl) < 0 || listen(fd, SOMAXCONN) < 0) {
		err = errno;
		goto out_close_socket;
	}
	return fd;

out_close_socket:
	close(fd);
	return -err;
}

static int tcp_listen(const char *host, uint16_t port, struct xp_listener **out)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct tcp_listener *l;
	int fd = -EAFNOSUPPORT, ret;

	if (!host || !*host || !strcmp(host, "0.0.0.0") ||
	    !strcmp(host, "::")) {
		/* any: dual-stack IPv6 socket, IPv4 where there is no IPv6 */
		struct sockaddr_in6 sin6 = {
		    .sin6_family = AF_INET6,
		    .sin6_port = htons(port),
		    .sin6_addr = IN6ADDR_ANY_INIT,
		};
		struct sockaddr_in sin = {
		    .sin_family = AF_INET,
		    .sin_port = htons(port),
		    .sin_addr.s_addr = htonl(INADDR_ANY),
		};

		fd = tcp_listen_one(AF_INET6, (struct sockaddr *)&sin6,
				    sizeof(sin6), true);
		if (fd == -EAFNOSUPPORT)
			fd = tcp_listen_one(AF_INET, (struct sockaddr *)&sin,
					    sizeof(sin), false);
	} else {
		struct addrinfo *res, *ai;

		ret = tcp_resolve(host, port, true, &res);
		if (ret)
			return ret;
		for (ai = res; ai; ai = ai->ai_next) {
			fd = tcp_listen_one(ai->ai_family, ai->ai_addr,
					    ai->ai_addrlen, false);
			if (fd >= 0)
				break;
		}
		freeaddrinfo(res);
	}
	if (fd < 0) {
		log_err("tcp: listen(%s:%u): %s", host ? host : "*", port,
			strerror(-fd));
		return fd;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		ret = -ENOMEM;
		log_err("tcp: calloc(listener): %s", strerror(ENOMEM));
		goto out_close_socket;
	}
	l->base.ops = &xp_tcp_ops;
	l->lfd = fd;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		ret = -errno;
		log_err("tcp: epoll_create1: %s", strerror(errno));
		goto out_free_listener;
	}
	ev.data.fd = fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		log_err("tcp: epoll_ctl(ADD): %s", strerror(errno));
		goto out_close_epoll;
	}
	/* wakes the listener's owner so silent handshakes expire on time */
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->tfd < 0) {
		ret = -errno;
		log_err("tcp: timerfd_create: %s", strerror(errno));
		goto out_close_epoll;
	}
	ev.data.fd = l->tfd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
		ret = -errno;
		log_err("tcp: epoll_ctl(ADD timerfd): %s", strerror(errno));
		goto out_close_timer;
	}
	*out = &l->base;
	return 0;

out_close_timer:
	close(l->tfd);
out_close_epoll:
	close(l->epfd);
out_free_listener:
	free(l);
out_close_socket:
	close(fd);
	return ret;
}

static void tcp_pending_drop(struct tcp_listener *l, unsigned int i)
{
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->pend[i].fd, NULL);
	close(l->pend[i].fd);
	l->pend[i] = l->pend[--l->npend];
}

static void tcp_listener_destroy(struct xp_listener *xl)
{
	struct tcp_listener *l;

	if (!xl)
		return;
	l = to_tcp_listener(xl);
	while (l->npend)
		tcp_pending_drop(l, l->npend - 1);
	close(l->tfd);
	close(l->epfd);
	close(l->lfd);
	free(l);
}

static int tcp_listener_fd(struct xp_listener *xl)
{
	return to_tcp_listener(xl)->epfd;
}

/* The pending handshake to drop for a new one: the oldest silent one. */
static unsigned int tcp_pending_victim(const struct tcp_listener *l)
{
	unsigned int old = 0;
	bool old_silent = false;

	for (unsigned int i = 0; i < l->npend; i++) {
		int unread = 0;
		bool silent = ioctl(l->pend[i].fd, FIONREAD, &unread) == 0 &&
			      unread == 0;

		if ((silent && !old_silent) ||
		    (silent == old_silent &&
		     l->pend[i].deadline_ms < l->pend[old].deadline_ms)) {
			old = i;
			old_silent = silent;
		}
	}
	return old;
}

/* Accept what the kernel has queued into the pending table. */
static void tcp_accept_pending(struct tcp_listener *l, uint64_t now)
{
	for (int n = 0; n < TCP_PENDING_MAX; n++) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct tcp_pending *p;
		int fd =
		    accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("tcp: accept4: %s", strerror(errno));
			return;
		}
		if (l->npend == TCP_PENDING_MAX) {
			/*
			 * Full of silent clients: the oldest one goes. A
			 * socket with unread bytes (a CONNECT not parsed yet)
			 * is spared while a silent one is left, so a flood
			 * of idle connections cannot evict a real client.
			 */
			unsigned int old = tcp_pending_victim(l);

			log_warn("tcp: %u handshakes pending, dropping the "
				 "oldest",
				 l->npend);
			tcp_pending_drop(l, old);
		}
		ev.data.fd = fd;
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			log_warn("tcp: epoll_ctl(ADD): %s", strerror(errno));
			close(fd);
			continue;
		}
		p = &l->pend[l->npend++];
		p->fd = fd;
		p->deadline_ms = now + TCP_HANDSHAKE_MS;
		p->got = 0;
	}
}

/* Read more of a CONNECT frame: 1 complete, 0 not yet, -errno drop it. */
static int tcp_pending_read(struct tcp_pending *p)
{
	for (;;) {
		size_t need = TCP_HDR_LEN;
		ssize_t n;

		if (p->got >= TCP_HDR_LEN)
			need += p->hdr.len;
		if (p->got == need)
			return 1;
		n = recv(p->fd, p->buf + p->got, need - p->got, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		p->got += (size_t)n;
		if (p->got == TCP_HDR_LEN && (tcp_hdr_decode(p->buf, &p->hdr) ||
					      p->hdr.type != TCP_F_CONNECT))
			return -EPROTO;
	}
}

/*
 * Non-blocking: sockets that have not sent their CONNECT frame wait in a
 * table (at most TCP_PENDING_MAX, each for at most TCP_HANDSHAKE_MS), so a
 * silent client never stalls the listener thread. A timerfd in the
 * listener's epoll set makes listener_fd() readable at the earliest
 * deadline, so expiry needs no polling by the owner.
 */
static int tcp_take_request(struct tcp_listener *l,
			    const struct xp_conn_attr *attr,
			    struct xp_conn **out, void *priv, size_t *priv_len)
{
	uint64_t now = now_ms();
	struct tcp_conn *c;
	unsigned int i = 0;
	int ret, fd;

	tcp_accept_pending(l, now);
	while (i < l->npend) {
		struct tcp_pending *p = &l->pend[i];

		ret = tcp_pending_read(p);
		if (ret == 0 && now >= p->deadline_ms)
			ret = -ETIMEDOUT;
		if (ret < 0) {
			log_warn("tcp: dropping incoming connection: %s",
				 ret == -EPROTO ? "not an rblk tcp CONNECT"
						: strerror(-ret));
			tcp_pending_drop(l, i);
			continue;
		}
		if (ret == 0) {
			i++;
			continue;
		}
		if (priv)
			memcpy(priv, p->buf + TCP_HDR_LEN, p->hdr.len);
		if (priv_len)
			*priv_len = p->hdr.len;
		fd = p->fd;
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		l->pend[i] = l->pend[--l->npend];
		ret = tcp_conn_create(fd, attr, XP_CONN_REQUESTED, &c);
		if (ret) {
			close(fd);
			return ret;
		}
		log_debug("%s: connection request", c->peer);
		*out = &c->base;
		return 0;
	}
	return -EAGAIN;
}

/* Arm the timer for the earliest handshake deadline, or disarm it. */
static void tcp_arm_handshake_timer(struct tcp_listener *l)
{
	struct itimerspec its = {0};
	uint64_t first = UINT64_MAX;
	uint64_t exp;

	while (read(l->tfd, &exp, sizeof(exp)) > 0)
		; /* drain expirations */
	for (unsigned int i = 0; i < l->npend; i++)
		first = MIN(first, l->pend[i].deadline_ms);
	if (first != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(first / 1000);
		its.it_value.tv_nsec = (long)(first % 1000) * 1000000;
	}
	if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL))
		log_warn("tcp: timerfd_settime: %s", strerror(errno));
}

static int tcp_get_request(struct xp_listener *xl,
			   const struct xp_conn_attr *attr,
			   struct xp_conn **out, void *priv, size_t *priv_len)
{
	struct tcp_listener *l = to_tcp_listener(xl);
	int ret = tcp_take_request(l, attr, out, priv, priv_len);

	tcp_arm_handshake_timer(l);
	return ret;
}

static int tcp_send_handshake(struct tcp_conn *c, uint8_t type,
			      const void *priv, size_t priv_len)
{
	struct tcp_frame f = {.seq = TCP_NO_SEQ, .copy = true};

	if (priv_len > XP_PRIV_MAX || (priv_len && !priv)) {
		log_err("%s: %zu bytes of private data (max %d)", c->peer,
			priv_len, XP_PRIV_MAX);
		return -EINVAL;
	}
	tcp_hdr_encode(f.hdr, type, (uint32_t)priv_len, 0, 0, 0,
		       type == TCP_F_REJECT ? 0 : TCP_VERSION);
	f.payload = priv;
	f.len = (uint32_t)priv_len;
	return tcp_send_frames(c, &f, 1);
}

static int tcp_accept(struct xp_conn *xc, const void *priv, size_t priv_len)
{
	struct tcp_conn *c = to_tcp(xc);
	int ret;

	if (c->state != XP_CONN_REQUESTED) {
		log_err("%s: accept: connection not in REQUESTED state",
			c->peer);
		return -EINVAL;
	}
	ret = tcp_send_handshake(c, TCP_F_ACCEPT, priv, priv_len);
	if (ret) {
		log_err("%s: send(ACCEPT): %s", c->peer, strerror(-ret));
		return ret;
	}
	c->state = XP_CONN_CONNECTED;
	return 0;
}

static void tcp_reject(struct xp_conn *xc, const void *priv, size_t priv_len)
{
	struct tcp_conn *c = to_tcp(xc);
	int ret;

	ret = tcp_send_handshake(c, TCP_F_REJECT, priv, priv_len);
	if (!ret && c->oq_count)
		ret = -EAGAIN; /* a fresh socket takes 80 bytes; never seen */
	if (ret)
		log_warn("%s: send(REJECT): %s", c->peer, strerror(-ret));
	tcp_destroy(xc);
}

/* ---- groups and windows (first step: private groups only) ------------ */

static int tcp_group_create(struct xp_group **out)
{
	return -ENOSYS;
}

static void tcp_group_destroy(struct xp_group *g)
{
}

static int tcp_group_fd(struct xp_group *g)
{
	return tcp_fd(&grp_to_tcp(g)->base);
}

static int tcp_group_arm(struct xp_group *g)
{
	return tcp_arm(&grp_to_tcp(g)->base);
}

static int tcp_group_poll(struct xp_group *g, struct xp_wc *wc, int max)
{
	struct xp_conn *xc = &grp_to_tcp(g)->base;
	int n = tcp_poll(xc, wc, max);

	for (int i = 0; i < n; i++) {
		wc[i].conn = xc;
		wc[i].flags = 0;
		wc[i].invalidated_rkey = 0;
	}
	return n;
}

static int tcp_group_watch(struct xp_group *g, int fd, uint64_t cookie)
{
	return -ENOSYS;
}

static int tcp_group_unwatch(struct xp_group *g, int fd)
{
	return -ENOSYS;
}

static struct xp_group *tcp_conn_group(struct xp_conn *xc)
{
	return &to_tcp(xc)->grp;
}

static int tcp_group_get_request(struct xp_listener *xl, struct xp_group *g,
			   const struct xp_conn_attr *attr,
			   struct xp_conn **out, void *priv, size_t *priv_len)
{
	if (g)
		return -ENOSYS;
	return tcp_get_request(xl, attr, out, priv, priv_len);
}

static int tcp_group_connect(struct xp_group *g, const char *host,
			       uint16_t port, const struct xp_conn_attr *attr,
			       const void *priv, size_t priv_len, int timeout_ms,
			       struct xp_conn **out, void *rej, size_t *rej_len)
{
	if (g)
		return -ENOSYS;
	return tcp_connect(host, port, attr, priv, priv_len, timeout_ms, out,
			 rej, rej_len);
}

static int tcp_alloc_mw(struct xp_group *g, struct xp_mw **out)
{
	return -ENOSYS;
}

static void tcp_dealloc_mw(struct xp_mw *mw)
{
}

const struct xp_ops xp_tcp_ops = {
    .name = "tcp",
    .listen = tcp_listen,
    .listener_destroy = tcp_listener_destroy,
    .listener_fd = tcp_listener_fd,
    .get_request = tcp_get_request,
    .accept = tcp_accept,
    .reject = tcp_reject,
    .connect = tcp_connect,
    .destroy = tcp_destroy,
    .disconnect = tcp_disconnect,
    .state = tcp_state,
    .peer_name = tcp_peer_name,
    .conn_group = tcp_conn_group,
    .group_create = tcp_group_create,
    .group_destroy = tcp_group_destroy,
    .group_fd = tcp_group_fd,
    .group_arm = tcp_group_arm,
    .group_poll = tcp_group_poll,
    .group_watch = tcp_group_watch,
    .group_unwatch = tcp_group_unwatch,
    .group_get_request = tcp_group_get_request,
    .group_connect = tcp_group_connect,
    .alloc_mw = tcp_alloc_mw,
    .dealloc_mw = tcp_dealloc_mw,
    .reg_mr = tcp_reg_mr,
    .dereg_mr = tcp_dereg_mr,
    .post_send = tcp_post_send,
    .post_recv = tcp_post_recv,
};
