/* SPDX-License-Identifier: MIT */
/*
 * rblk nbd - serve one rblk volume to NBD clients (qemu, libnbd's nbdcopy
 * and nbdinfo, fio's nbd engine, nbd-client) over a unix or TCP socket.
 *
 * Threads and ownership:
 *   - The main thread opens the volume (rblk_open, N queues), listens, and
 *     runs the accept loop, which also watches a signalfd (SIGINT, SIGTERM)
 *     and an eventfd that connection threads poke when they finish.
 *   - Each accepted socket gets one connection thread. It runs the fixed
 *     newstyle handshake; on NBD_OPT_GO or NBD_OPT_EXPORT_NAME it claims
 *     the lowest free rblk queue and keeps it until the client leaves, so
 *     connection i drives queue i alone and the I/O path takes no locks.
 *     A client that arrives while every queue is taken is refused (GO:
 *     NBD_REP_ERR_TOO_BIG with a message; EXPORT_NAME: the socket is
 *     closed), and a log line says why.
 *   - srv->lock guards only the connection list and the queue claim flags;
 *     it is taken at connect, claim, release and exit, never per I/O.
 *
 * Abuse limits (defaults in docs/RELIABILITY.md):
 *   - --max-connections sockets at once. When full, the oldest socket still
 *     in its handshake is dropped to make room, so idle or slow sockets
 *     cannot lock clients out; only when every socket is serving is a
 *     newcomer refused. A handshake must finish within
 *     --handshake-timeout.
 *   - --idle-timeout (off by default): a serving client that moves no
 *     byte in either direction while nothing is in flight is dropped.
 *   - --max-client-buffer: heap bytes for request data (requests larger
 *     than a pool slot) one client may hold; beyond it its requests are
 *     not read until replies are sent (see nbd_conn.h max_buf).
 *
 * Buffers: each queue gets, on first use, one mapping of nslots * max_io
 * bytes (nslots = the granted queue depth, capped at NBD_POOL_MAX bytes)
 * registered once with rblk_register_buffer(), so READ and WRITE data move
 * by RDMA straight between the target and the buffer the socket reads into
 * or writes from. The mapping outlives its connection and is reused by the
 * next client of that queue. Requests larger than max_io (or arriving when
 * every slot is busy) use a malloc'd buffer that the library bounces.
 *
 * Protocol choices (see docs/man/rblk.8):
 *   - Fixed newstyle only; simple replies only (NBD_OPT_STRUCTURED_REPLY
 *     and every other unknown option get NBD_REP_ERR_UNSUP). Replies may
 *     leave out of order; clients match them by cookie.
 *   - Size constraints: minimum = volume block size, preferred =
 *     max(4096, block size), maximum payload = 32 MiB, always sent with
 *     NBD_INFO_BLOCK_SIZE. Requests not aligned to the block size fail with
 *     NBD_EINVAL (clients using NBD_OPT_EXPORT_NAME, or GO without asking
 *     for block sizes, are still served, and misaligned requests fail
 *     cleanly).
 *   - TRIM and WRITE_ZEROES may be longer than 32 MiB (no payload); the
 *     library splits them. NBD_CMD_FLAG_NO_HOLE is accepted and ignored:
 *     the target zeroes with fallocate(ZERO_RANGE), which keeps the range
 *     allocated on file systems that support it. FUA on READ, FLUSH and
 *     TRIM is accepted and ignored (only WRITE and WRITE_ZEROES carry
 *     RBLK_IO_FUA).
 *   - NBD_FLAG_CAN_MULTI_CONN is advertised: a FLUSH on the target is an
 *     fdatasync of the whole backend, so it covers completed writes from
 *     every connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/url.h"
#include "common/util.h"
#include "initiator/cli.h"
#include "initiator/nbd_conn.h"
#include "initiator/nbd_pool.h"
#include "initiator/nbd_proto.h"

#define NBD_DEFAULT_QUEUES 4
#define NBD_DEFAULT_MAX_CONNS 64
#define NBD_MAX_QUEUES 256
#define NBD_DEFAULT_HANDSHAKE_MS 10000 /* whole handshake, per client */
#define NBD_DEFAULT_CLIENT_BUFFER (2ull * NBD_MAX_PAYLOAD) /* heap, per client */
#define NBD_DRAIN_TIMEOUT_MS 10000     /* in-flight I/O at server shutdown */
#define NBD_MAX_OPTIONS 32	       /* options per handshake */
#define NBD_OPT_DATA_MAX 8192	       /* longest option payload we read */
#define NBD_POOL_MAX (256u << 20)      /* registered bytes per queue, at most */
#define NBD_LISTEN_BACKLOG 128

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

	pthread_mutex_t lock; /* conns, nconns, qs[].busy, nbd_conn.negotiating */
	struct nbd_conn *conns; /* newest first */
	unsigned int nconns; /* counted against max_conns: not evicted */
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
	int fd;	       /* client socket, non-blocking */
	unsigned int id;
	char peer[96];
	bool fixed;	      /* client set NBD_FLAG_C_FIXED_NEWSTYLE */
	bool no_zeroes;	      /* client set NBD_FLAG_C_NO_ZEROES */
	uint64_t deadline_ms; /* handshake deadline */

	/* After the handshake; belongs to the thread. */
	int qidx; /* claimed queue, -1 when none */
	struct rblk_queue *q;
	struct nbd_qslot *qs;
};

/* ---- small helpers ----------------------------------------------------- */

static void nbd_errmsg(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* "rblk nbd: <reason>" on stderr: the CLI's way of failing. */
static void nbd_errmsg(const char *fmt, ...)
{
	va_list ap;

	fputs("rblk nbd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- queue claim and buffer pool --------------------------------------- */

static void conn_release_queue(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;

	if (c->qidx < 0)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->qs[c->qidx].busy = false;
	pthread_mutex_unlock(&srv->lock);
	c->qidx = -1;
	c->q = NULL;
	c->qs = NULL;
}

/*
 * Claim the lowest free queue. 0, -EBUSY (all taken), -ECONNABORTED
 * (evicted meanwhile) or -ENOTCONN.
 */
static int conn_claim_queue(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;
	int ret = -EBUSY;

	pthread_mutex_lock(&srv->lock);
	if (c->evicted) /* its socket is shut down: the handshake ends */
		ret = -ECONNABORTED;
	for (unsigned int i = 0; i < srv->nqueues && !c->evicted; i++) {
		if (!srv->qs[i].busy) {
			srv->qs[i].busy = true;
			c->qidx = (int)i;
			c->negotiating = false; /* serving now: not evictable */
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	if (ret)
		return ret;
	c->qs = &srv->qs[c->qidx];
	c->q = rblk_get_queue(srv->r, (unsigned int)c->qidx);
	if (!c->q) {
		log_err("queue %d: rblk_get_queue: %s", c->qidx,
			rblk_last_error());
		conn_release_queue(c);
		return -ENOTCONN;
	}
	return 0;
}

/*
 * Map and register the claimed queue's pool on first use. A failed
 * registration is not fatal: the library then copies through its own
 * registered slots. Runs on the thread holding the claim.
 */
static int qslot_pool_init(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;
	struct nbd_qslot *qs = c->qs;
	size_t len = (size_t)srv->nslots * srv->slot_size;
	char who[32];

	if (qs->pool)
		return 0;
	snprintf(who, sizeof(who), "queue %d", c->qidx);
	qs->pool_len = len;
	return nbd_pool_map(c->q, len, who, &qs->pool, &qs->registered);
}

/* Claim a queue and prepare for transmission. 0, -EBUSY or -ENOMEM. */
static int conn_attach(struct nbd_conn *c)
{
	int ret;

	ret = conn_claim_queue(c);
	if (ret == -EBUSY) {
		log_warn("client %u (%s): refused: all %u queues are in use "
			 "(one NBD connection per queue; see --queues)",
			 c->id, c->peer, c->srv->nqueues);
		return ret;
	}
	ret = qslot_pool_init(c);
	if (ret) {
		conn_release_queue(c);
		return ret;
	}
	return 0;
}

/* ---- handshake I/O ----------------------------------------------------- */

/* Wait for ev on the socket until the handshake deadline or shutdown. */
static int hs_wait(struct nbd_conn *c, short ev)
{
	struct pollfd p[2] = {
	    {.fd = c->fd, .events = ev},
	    {.fd = c->srv->stop_fd, .events = POLLIN},
	};
	uint64_t now = now_ms();
	int ret;

	if (now >= c->deadline_ms)
		return -ETIMEDOUT;
	ret = poll(p, 2, (int)MIN(c->deadline_ms - now, (uint64_t)INT32_MAX));
	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	if (ret == 0)
		return -ETIMEDOUT;
	if (p[1].revents)
		return -ESHUTDOWN;
	return 0;
}

static int hs_read(struct nbd_conn *c, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(c->fd, p, len, MSG_DONTWAIT);
		int ret;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = hs_wait(c, POLLIN);
		if (ret)
			return ret;
	}
	return 0;
}

static int hs_write(struct nbd_conn *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		int ret;

		if (n >= 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = hs_wait(c, POLLOUT);
		if (ret)
			return ret;
	}
	return 0;
}

/* One option reply: header, then len bytes of data. */
static int opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t type,
		     const void *data, uint32_t len)
{
	unsigned char hdr[NBD_OPT_REPLY_HDR_SIZE];
	int ret;

	nbd_put64(hdr, NBD_OPT_REPLY_MAGIC);
	nbd_put32(hdr + 8, opt);
	nbd_put32(hdr + 12, type);
	nbd_put32(hdr + 16, len);
	ret = hs_write(c, hdr, sizeof(hdr));
	if (!ret && len)
		ret = hs_write(c, data, len);
	return ret;
}

static int opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type,
		     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An error reply carrying a message for the user. */
static int opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type,
		     const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	log_debug("client %u: option %u: error 0x%x: %s", c->id, opt, type,
		  msg);
	return opt_reply(c, opt, type, msg, (uint32_t)n);
}

/* ---- handshake --------------------------------------------------------- */

static bool export_name_ok(const struct nbd_server *srv, const char *name,
			   uint32_t len)
{
	return len == 0 || (len == strlen(srv->export_name) &&
			    !memcmp(name, srv->export_name, len));
}

/* Printable copy of a client-supplied name, for logs and messages. */
static void name_for_log(char *out, size_t outlen, const char *name,
			 uint32_t len)
{
	size_t n = MIN((size_t)len, outlen - 1);

	for (size_t i = 0; i < n; i++)
		out[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	out[n] = 0;
}

static int info_send_export(struct nbd_conn *c, uint32_t opt)
{
	unsigned char b[NBD_INFO_EXPORT_SIZE];

	nbd_put16(b, NBD_INFO_EXPORT);
	nbd_put64(b + 2, c->srv->size);
	nbd_put16(b + 10, c->srv->tflags);
	return opt_reply(c, opt, NBD_REP_INFO, b, sizeof(b));
}

static int info_send_block_size(struct nbd_conn *c, uint32_t opt)
{
	unsigned char b[NBD_INFO_BLOCK_SIZE_SIZE];
	uint32_t bs = c->srv->block_size;

	nbd_put16(b, NBD_INFO_BLOCK_SIZE);
	nbd_put32(b + 2, bs);
	nbd_put32(b + 6, MAX(4096u, bs));
	nbd_put32(b + 10, NBD_MAX_PAYLOAD);
	return opt_reply(c, opt, NBD_REP_INFO, b, sizeof(b));
}

/* NBD_INFO_NAME or NBD_INFO_DESCRIPTION: a type and a string. */
static int info_send_string(struct nbd_conn *c, uint32_t opt, uint16_t type,
			    const char *s)
{
	unsigned char b[2 + 600];
	size_t n = MIN(strlen(s), sizeof(b) - 2);

	nbd_put16(b, type);
	memcpy(b + 2, s, n);
	return opt_reply(c, opt, NBD_REP_INFO, b, (uint32_t)(2 + n));
}

static void describe(const struct nbd_server *srv, char *out, size_t len)
{
	snprintf(out, len, "rblk volume %s (%s)", srv->url,
		 srv->read_only ? "read-only" : "read-write");
}

/*
 * NBD_OPT_INFO and NBD_OPT_GO. Returns 0 to keep negotiating, 1 to enter
 * transmission (GO succeeded: a queue is claimed), <0 to close.
 */
static int opt_info_go(struct nbd_conn *c, uint32_t opt,
		       const unsigned char *data, uint32_t len)
{
	struct nbd_server *srv = c->srv;
	bool want_name = false, want_desc = false;
	char shown[64], desc[600];
	uint32_t namelen;
	uint16_t nreq;
	int ret;

	if (len < 6)
		return opt_error(c, opt, NBD_REP_ERR_INVALID,
				 "option data too short");
	namelen = nbd_get32(data);
	if (namelen > len - 6)
		return opt_error(c, opt, NBD_REP_ERR_INVALID,
				 "export name length exceeds the option");
	nreq = nbd_get16(data + 4 + namelen);
	if (len != 6 + namelen + 2u * nreq)
		return opt_error(c, opt, NBD_REP_ERR_INVALID,
				 "option length does not match its contents");
	name_for_log(shown, sizeof(shown), (const char *)data + 4, namelen);
	if (!export_name_ok(srv, (const char *)data + 4, namelen)) {
		log_info("client %u: unknown export '%s'", c->id, shown);
		return opt_error(c, opt, NBD_REP_ERR_UNKNOWN,
				 "unknown export '%s'; this server has '%s'",
				 shown, srv->export_name);
	}
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = nbd_get16(data + 6 + namelen + 2u * i);

		if (t == NBD_INFO_NAME)
			want_name = true;
		else if (t == NBD_INFO_DESCRIPTION)
			want_desc = true;
		/* NBD_INFO_BLOCK_SIZE is sent whether asked or not */
	}
	if (opt == NBD_OPT_GO) {
		ret = conn_attach(c);
		if (ret == -EBUSY) {
			opt_error(c, opt, NBD_REP_ERR_TOO_BIG,
				  "all %u connections of this rblk nbd server "
				  "are in use; try again later",
				  srv->nqueues);
			return ret;
		}
		if (ret) {
			opt_error(c, opt, NBD_REP_ERR_SHUTDOWN,
				  "cannot set up the connection: %s",
				  strerror(-ret));
			return ret;
		}
	}
	ret = info_send_export(c, opt);
	if (!ret)
		ret = info_send_block_size(c, opt);
	if (!ret && want_name)
		ret = info_send_string(c, opt, NBD_INFO_NAME, srv->export_name);
	if (!ret && want_desc) {
		describe(srv, desc, sizeof(desc));
		ret = info_send_string(c, opt, NBD_INFO_DESCRIPTION, desc);
	}
	if (!ret)
		ret = opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
	if (ret)
		return ret; /* the caller releases a claimed queue */
	return opt == NBD_OPT_GO ? 1 : 0;
}

/* NBD_OPT_EXPORT_NAME: no error reply is possible, only a close. */
static int opt_export_name(struct nbd_conn *c, const unsigned char *data,
			   uint32_t len)
{
	unsigned char b[NBD_EXPORT_NAME_REPLY_SIZE + NBD_EXPORT_NAME_PAD];
	char shown[64];
	int ret;

	if (!export_name_ok(c->srv, (const char *)data, len)) {
		name_for_log(shown, sizeof(shown), (const char *)data, len);
		log_info("client %u: unknown export '%s'; closing", c->id,
			 shown);
		return -ENOENT;
	}
	ret = conn_attach(c);
	if (ret)
		return ret;
	memset(b, 0, sizeof(b));
	nbd_put64(b, c->srv->size);
	nbd_put16(b + 8, c->srv->tflags);
	ret = hs_write(c, b,
		       c->no_zeroes ? NBD_EXPORT_NAME_REPLY_SIZE : sizeof(b));
	return ret ? ret : 1;
}

static int opt_list(struct nbd_conn *c, uint32_t len)
{
	unsigned char b[4 + RBLK_NAME_MAX + 600];
	size_t n = strlen(c->srv->export_name);
	char desc[600];
	size_t d;
	int ret;

	if (len)
		return opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				 "NBD_OPT_LIST takes no data");
	describe(c->srv, desc, sizeof(desc));
	d = MIN(strlen(desc), sizeof(b) - 4 - n);
	nbd_put32(b, (uint32_t)n);
	memcpy(b + 4, c->srv->export_name, n);
	memcpy(b + 4 + n, desc, d);
	ret = opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, b,
			(uint32_t)(4 + n + d));
	if (!ret)
		ret = opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
	return ret;
}

/*
 * Run the fixed newstyle handshake. Returns 1 when the client entered the
 * transmission phase (a queue is claimed and set up), 0 when it ended the
 * negotiation politely (NBD_OPT_ABORT or a close between options), or a
 * negative errno; the caller closes the socket in every case but 1.
 */
static int nbd_handshake(struct nbd_conn *c)
{
	unsigned char hello[NBD_HELLO_SIZE], hdr[NBD_OPT_HDR_SIZE];
	unsigned char data[NBD_OPT_DATA_MAX];
	uint32_t cflags, opt, len;
	int ret;

	nbd_put64(hello, NBD_MAGIC);
	nbd_put64(hello + 8, NBD_IHAVEOPT);
	nbd_put16(hello + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	ret = hs_write(c, hello, sizeof(hello));
	if (ret)
		return ret;
	ret = hs_read(c, data, 4);
	if (ret)
		return ret;
	cflags = nbd_get32(data);
	if (cflags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		log_warn("client %u (%s): unknown client flags 0x%x; closing",
			 c->id, c->peer, cflags);
		return -EPROTO;
	}
	c->fixed = cflags & NBD_FLAG_C_FIXED_NEWSTYLE;
	c->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

	for (unsigned int n = 0;; n++) {
		if (n == NBD_MAX_OPTIONS) {
			log_warn(
			    "client %u (%s): more than %d options; closing",
			    c->id, c->peer, NBD_MAX_OPTIONS);
			return -EPROTO;
		}
		ret = hs_read(c, hdr, sizeof(hdr));
		if (ret == -EPIPE && n > 0)
			return 0; /* gone between options, e.g. after LIST */
		if (ret)
			return ret;
		if (nbd_get64(hdr) != NBD_IHAVEOPT) {
			log_warn("client %u (%s): bad option magic; closing",
				 c->id, c->peer);
			return -EPROTO;
		}
		opt = nbd_get32(hdr + 8);
		len = nbd_get32(hdr + 12);
		log_debug("client %u: option %u, %u bytes", c->id, opt, len);
		if (!c->fixed && opt != NBD_OPT_EXPORT_NAME) {
			log_warn("client %u (%s): option %u without fixed "
				 "newstyle; closing",
				 c->id, c->peer, opt);
			return -EPROTO;
		}
		if (len > NBD_OPT_DATA_MAX) {
			log_warn("client %u (%s): option %u carries %u bytes "
				 "(limit %d); closing",
				 c->id, c->peer, opt, len, NBD_OPT_DATA_MAX);
			if (opt != NBD_OPT_EXPORT_NAME)
				opt_error(c, opt, NBD_REP_ERR_TOO_BIG,
					  "option data longer than %d bytes",
					  NBD_OPT_DATA_MAX);
			return -E2BIG;
		}
		ret = hs_read(c, data, len);
		if (ret)
			return ret;

		switch (opt) {
		case NBD_OPT_EXPORT_NAME:
			ret = opt_export_name(c, data, len);
			break;
		case NBD_OPT_GO:
		case NBD_OPT_INFO:
			ret = opt_info_go(c, opt, data, len);
			break;
		case NBD_OPT_LIST:
			ret = opt_list(c, len);
			break;
		case NBD_OPT_ABORT:
			opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
			log_debug("client %u: aborted the handshake", c->id);
			return 0;
		default: /* STRUCTURED_REPLY, STARTTLS, META_CONTEXT, ... */
			ret = opt_error(c, opt, NBD_REP_ERR_UNSUP,
					"option %u is not supported", opt);
			break;
		}
		if (ret)
			return ret;
	}
}

/* ---- connection threads ------------------------------------------------ */

/* queue_lost callback of the engine; runs on the connection thread. */
static void conn_queue_lost(void *arg)
{
	struct nbd_conn *c = arg;

	log_warn("client %u: queue %d lost its connection to the target; "
		 "closing the client",
		 c->id, c->qidx);
}

/*
 * Serve the claimed queue with the shared transmission engine. Rules that
 * are ours: FUA accepted on every command and FLUSH flags checked (as
 * docs/man/rblk.8 says); a protocol error or a lost queue ends the
 * connection after what is in flight is answered (NBD_ESHUTDOWN for a
 * lost queue); shutdown (stop_fd) drains for NBD_DRAIN_TIMEOUT_MS.
 */
static void nbd_transmission(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;
	struct nbd_conn_stats st;
	char name[128];
	struct nbd_conn_opts o = {
	    .fd = c->fd,
	    .q = c->q,
	    .name = name,
	    .size = srv->size,
	    .block_size = srv->block_size,
	    .tx_flags = srv->tflags,
	    .checks = NBD_CONN_FUA_ON_ALL,
	    .qlost = NBD_CONN_QLOST_CLOSE,
	    .nreqs = srv->nreqs,
	    .pool = c->qs->pool,
	    .slot_size = srv->slot_size,
	    .nslots = srv->nslots,
	    .abort_fd = srv->stop_fd,
	    .drain_ms = NBD_DRAIN_TIMEOUT_MS,
	    .max_buf = srv->max_client_buf,
	    .idle_ms = srv->idle_ms,
	    .spin_us = srv->spin_us,
	    .queue_lost = conn_queue_lost,
	    .arg = c,
	};

	snprintf(name, sizeof(name), "client %u (%s)", c->id, c->peer);
	nbd_conn_run(&o, &st);
	if (st.abandoned)
		c->qs->abandoned = true;
	log_info("client %u (%s): disconnected after %llu requests "
		 "(%llu failed)",
		 c->id, c->peer, (unsigned long long)st.requests,
		 (unsigned long long)st.errors);
}

static void *conn_thread(void *arg)
{
	struct nbd_conn *c = arg;
	struct nbd_server *srv = c->srv;
	uint64_t one = 1;
	int ret;

	c->deadline_ms = now_ms() + srv->handshake_ms;
	ret = nbd_handshake(c);
	if (ret == 1) {
		log_info("client %u (%s): connected on queue %d", c->id,
			 c->peer, c->qidx);
		nbd_transmission(c);
	} else if (ret == -ETIMEDOUT) {
		log_warn("client %u (%s): handshake not finished within %u ms; "
			 "dropped (--handshake-timeout)",
			 c->id, c->peer, srv->handshake_ms);
	} else if (ret < 0 && ret != -EPIPE && ret != -ESHUTDOWN &&
		   ret != -ECONNRESET) {
		log_debug("client %u (%s): handshake ended: %s", c->id, c->peer,
			  strerror(-ret));
	}
	conn_release_queue(c);

	pthread_mutex_lock(&srv->lock);
	c->finished = true;
	c->negotiating = false; /* the accept loop leaves c->fd alone now */
	if (!c->evicted)
		srv->nconns--;
	pthread_mutex_unlock(&srv->lock);
	close(c->fd);
	c->fd = -1;
	if (write(srv->reap_fd, &one, sizeof(one)) < 0)
		(void)0; /* the counter cannot overflow in practice */
	return NULL;
}

/* Join finished connection threads (all of them when all is set). */
static void reap_conns(struct nbd_server *srv, bool all)
{
	struct nbd_conn *done = NULL, **pp, *c;

	pthread_mutex_lock(&srv->lock);
	pp = &srv->conns;
	while ((c = *pp)) {
		if (all || c->finished) {
			*pp = c->next;
			c->next = done;
			done = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	while ((c = done)) {
		done = c->next;
		pthread_join(c->thread, NULL);
		free(c);
	}
}

static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN], port[8];

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) ||
	    ss.ss_family == AF_UNIX ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(out, len, "unix");
		return;
	}
	if (ss.ss_family == AF_INET6)
		snprintf(out, len, "[%s]:%s", host, port);
	else
		snprintf(out, len, "%s:%s", host, port);
}

/*
 * Make room for a newcomer: drop the oldest connection still in its
 * handshake (the list is newest first). Its thread sees the shut-down
 * socket, ends the handshake and closes it. Caller holds srv->lock.
 * Returns false when every connection is serving.
 */
static bool evict_negotiating(struct nbd_server *srv)
{
	struct nbd_conn *victim = NULL;

	for (struct nbd_conn *c = srv->conns; c; c = c->next)
		if (c->negotiating)
			victim = c;
	if (!victim)
		return false;
	victim->negotiating = false;
	victim->evicted = true;
	srv->nconns--;
	shutdown(victim->fd, SHUT_RDWR);
	log_warn("client %u (%s): dropped while still in its handshake to make "
		 "room for a new connection (%u connections, --max-connections)",
		 victim->id, victim->peer, srv->max_conns);
	return true;
}

/* Take one connection off the listener and start its thread. */
static void accept_one(struct nbd_server *srv, int lfd)
{
	struct nbd_conn *c;
	int fd, one = 1, ret;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			log_warn("accept: %s", strerror(errno));
			usleep(100 * 1000); /* let connections go away */
		} else if (errno != EAGAIN && errno != EINTR &&
			   errno != ECONNABORTED) {
			log_warn("accept: %s", strerror(errno));
		}
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	c = calloc(1, sizeof(*c));
	if (!c) {
		log_err("out of memory for a connection");
		close(fd);
		return;
	}
	c->srv = srv;
	c->fd = fd;
	c->qidx = -1;
	peer_name(fd, c->peer, sizeof(c->peer));

	pthread_mutex_lock(&srv->lock);
	if (srv->nconns >= srv->max_conns && !evict_negotiating(srv)) {
		pthread_mutex_unlock(&srv->lock);
		log_warn("refusing a connection from %s: %u clients connected "
			 "(--max-connections)",
			 c->peer, srv->max_conns);
		close(fd);
		free(c);
		return;
	}
	c->id = srv->next_id++;
	c->negotiating = true;
	srv->nconns++;
	c->next = srv->conns;
	srv->conns = c;
	ret = pthread_create(&c->thread, NULL, conn_thread, c);
	if (ret) {
		srv->conns = c->next;
		srv->nconns--;
		pthread_mutex_unlock(&srv->lock);
		log_err("pthread_create: %s", strerror(ret));
		close(fd);
		free(c);
		return;
	}
	pthread_mutex_unlock(&srv->lock);
	log_debug("client %u: connection from %s", c->id, c->peer);
}

/* ---- listeners ---------------------------------------------------------- */

/*
 * Bind a unix socket at path with mode 0600. A file already there is
 * replaced only if it is a socket nobody listens on.
 */
static int listen_unix(const char *path, int *out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		nbd_errmsg("%s: socket path longer than %zu bytes", path,
			   sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		nbd_errmsg("socket(AF_UNIX): %s", strerror(errno));
		return ret;
	}
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			nbd_errmsg("%s exists and is not a socket", path);
			ret = -EEXIST;
			goto out_close;
		}
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
		    errno == EAGAIN) {
			nbd_errmsg("%s: another server is listening there",
				   path);
			ret = -EADDRINUSE;
			goto out_close;
		}
		close(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0) {
			ret = -errno;
			nbd_errmsg("socket(AF_UNIX): %s", strerror(errno));
			return ret;
		}
		if (unlink(path) && errno != ENOENT) {
			ret = -errno;
			nbd_errmsg("unlink stale socket %s: %s", path,
				   strerror(errno));
			goto out_close;
		}
	}
	old = umask(0177);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret) {
		ret = -errno;
		nbd_errmsg("bind %s: %s", path, strerror(errno));
		goto out_close;
	}
	if (listen(fd, NBD_LISTEN_BACKLOG)) {
		ret = -errno;
		nbd_errmsg("listen %s: %s", path, strerror(errno));
		goto out_unlink;
	}
	*out = fd;
	return 0;

out_unlink:
	unlink(path);
out_close:
	close(fd);
	return ret;
}

/* Bind host:port (SO_REUSEADDR); the bound address goes to addr. */
static int listen_tcp(const struct rblk_url *u, int *out, char *addr,
		      size_t addrlen)
{
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char port[8];
	int fd = -1, one = 1, ret, err = 0;

	snprintf(port, sizeof(port), "%u", u->port);
	ret = getaddrinfo(u->host, port, &hints, &res);
	if (ret) {
		nbd_errmsg("--listen: cannot resolve '%s': %s", u->host,
			   gai_strerror(ret));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) &&
		    !listen(fd, NBD_LISTEN_BACKLOG))
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		nbd_errmsg("--listen %s:%u: %s", u->host, u->port,
			   strerror(err));
		return -err;
	}
	if (strchr(u->host, ':'))
		snprintf(addr, addrlen, "tcp://[%s]:%u", u->host, u->port);
	else
		snprintf(addr, addrlen, "tcp://%s:%u", u->host, u->port);
	*out = fd;
	return 0;
}

/* Percent-encode an export name for an nbd URI path. */
static void uri_escape(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s && o + 4 < len; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			out[o++] = (char)ch;
		} else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o] = 0;
}

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: rblk nbd URL (--socket PATH | --listen tcp://HOST[:PORT])\n"
	    "                [--path URL]... [--failback SEC]\n"
	    "                [--queues N] [--queue-depth N] [--read-only]\n"
	    "                [--direct | --no-direct]\n"
	    "                [--max-connections N] [--handshake-timeout SEC]\n"
	    "                [--idle-timeout SEC] [--max-client-buffer SIZE]\n"
	    "                [--poll-spin-us N] [--reconnect-delay SEC]\n"
	    "                [--ctrl-loss-timeout SEC] [--log-level L] [--help]\n"
	    "\n"
	    "Serve the rblk volume URL (tcp://HOST[:PORT]/EXPORT or\n"
	    "rdma://HOST[:PORT]/EXPORT) to NBD clients: qemu-img, qemu-io, nbdcopy,\n"
	    "nbdinfo, nbdfuse, fio --ioengine=nbd, nbd-client.\n"
	    "\n"
	    "  --socket PATH         listen on a unix socket (created mode 0600; a stale\n"
	    "                        socket file is replaced; removed on exit).\n"
	    "                        Clients use nbd+unix:///EXPORT?socket=PATH\n"
	    "  --listen tcp://HOST[:PORT]\n"
	    "                        listen on TCP instead (port default %d)\n"
	    "  --queues N            rblk queues to open, default %d; each NBD connection\n"
	    "                        uses one queue for its lifetime, so N is also the\n"
	    "                        number of clients (or multi-conn connections) served\n"
	    "                        at once; further clients are refused\n"
	    "  --queue-depth N       requests in flight per queue (asked of the target;\n"
	    "                        default: the library's, 64)\n"
	    "  --read-only           log in read-only and advertise a read-only export;\n"
	    "                        writes fail with EPERM\n"
	    "  --direct              require direct volume access (RDMA straight to the\n"
	    "                        target's volume memory); default: use it if offered\n"
	    "  --no-direct           always use the target's slots\n"
	    "  --max-connections N   sockets open at once, in handshake or serving,\n"
	    "                        default %d; when full, the oldest socket still in\n"
	    "                        its handshake is dropped for a newcomer, which is\n"
	    "                        refused only if every socket is serving\n"
	    "  --handshake-timeout SEC\n"
	    "                        drop a client that has not finished the handshake\n"
	    "                        within SEC seconds, default %g\n"
	    "  --idle-timeout SEC    drop a client that moves no data for SEC seconds\n"
	    "                        while none of its requests is in flight; default 0:\n"
	    "                        never\n"
	    "  --max-client-buffer SIZE\n"
	    "                        request data one client may hold in memory beyond\n"
	    "                        its queue's buffer pool (requests larger than\n"
	    "                        max_io); past it the client's requests are read\n"
	    "                        only as its replies go out; default %lluM\n"
	    "  --poll-spin-us N      before a connection sleeps, poll its socket and\n"
	    "                        queue for up to N microseconds (no sleep and\n"
	    "                        wake-up when the reply or the next request comes\n"
	    "                        within it; backs off while spins find nothing);\n"
	    "                        for a host with a core to spare; default 0\n"
	    "  --reconnect-delay SEC first wait between reconnect attempts when a\n"
	    "                        queue's connection is lost (doubles up to 10 s),\n"
	    "                        default 1; clients' requests wait meanwhile\n"
	    "  --ctrl-loss-timeout SEC\n"
	    "                        give up reconnecting after SEC seconds and fail\n"
	    "                        requests with EIO; default 60, 0 at once, -1 never\n"
	    "  --log-level L         error, warn (default), info or debug, to stderr\n"
	    CLI_PATH_HELP
	    CLI_FAILBACK_HELP
	    CLI_AUTH_HELP
	    "  -h, --help            this text\n"
	    "\n"
	    "The export is offered under its rblk export name and as the default\n"
	    "export (\"\"). Block sizes: minimum = the volume's block size, preferred =\n"
	    "max(4096, block size), maximum payload 32 MiB. Multi-conn is advertised.\n"
	    "\n"
	    "Once listening, one line goes to stdout for scripts to wait on:\n"
	    "  ready unix:PATH nbd+unix:///EXPORT?socket=PATH\n"
	    "  ready tcp://HOST:PORT nbd://HOST:PORT/EXPORT\n"
	    "SIGINT or SIGTERM: stop accepting, finish in-flight requests, close the\n"
	    "clients, close the volume, remove the socket, exit 0.\n"
	    "Exit status: 0 after a clean shutdown, 1 on errors, 2 on usage errors.\n",
	    NBD_DEFAULT_PORT, NBD_DEFAULT_QUEUES, NBD_DEFAULT_MAX_CONNS,
	    NBD_DEFAULT_HANDSHAKE_MS / 1000.0,
	    (unsigned long long)(NBD_DEFAULT_CLIENT_BUFFER >> 20));
}

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("rblk nbd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'rblk nbd --help'.\n", stderr);
	return 2;
}

struct nbd_args {
	const char *url;
	const char *socket_path;
	const char *listen_url;
	unsigned long queues;
	unsigned long queue_depth; /* 0: library default */
	unsigned long max_conns;
	bool read_only;
	struct cli_auth auth;
	struct cli_paths paths;
	int direct; /* enum rblk_direct */
	int reconnect_delay_ms; /* -2: library default */
	int ctrl_loss_ms; /* -2: library default; -1: never */
	int handshake_ms;
	int idle_ms; /* 0: none */
	unsigned long spin_us;
	uint64_t max_client_buf;
};

/* Returns -1 to go on, or the exit code. */
static int parse_args(int argc, char **argv, struct nbd_args *a)
{
	enum {
		OPT_SOCKET = 256,
		OPT_LISTEN,
		OPT_QUEUES,
		OPT_QD,
		OPT_RO,
		OPT_MAXCONN,
		OPT_LOGLEVEL,
		OPT_DIRECT,
		OPT_NO_DIRECT,
		OPT_RECONNECT_DELAY,
		OPT_CTRL_LOSS,
		OPT_HANDSHAKE_TMO,
		OPT_IDLE_TMO,
		OPT_CLIENT_BUF,
		OPT_SPIN,
	};
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, OPT_SOCKET},
	    {"listen", required_argument, NULL, OPT_LISTEN},
	    {"queues", required_argument, NULL, OPT_QUEUES},
	    {"queue-depth", required_argument, NULL, OPT_QD},
	    {"read-only", no_argument, NULL, OPT_RO},
	    {"direct", no_argument, NULL, OPT_DIRECT},
	    {"no-direct", no_argument, NULL, OPT_NO_DIRECT},
	    {"max-connections", required_argument, NULL, OPT_MAXCONN},
	    {"log-level", required_argument, NULL, OPT_LOGLEVEL},
	    {"reconnect-delay", required_argument, NULL, OPT_RECONNECT_DELAY},
	    {"ctrl-loss-timeout", required_argument, NULL, OPT_CTRL_LOSS},
	    {"handshake-timeout", required_argument, NULL, OPT_HANDSHAKE_TMO},
	    {"idle-timeout", required_argument, NULL, OPT_IDLE_TMO},
	    {"max-client-buffer", required_argument, NULL, OPT_CLIENT_BUF},
	    {"poll-spin-us", required_argument, NULL, OPT_SPIN},
	    {"help", no_argument, NULL, 'h'},
	    CLI_AUTH_LONGOPTS,
	    CLI_PATH_LONGOPTS,
	    CLI_FAILBACK_LONGOPT,
	    {NULL, 0, NULL, 0},
	};
	int ch, ret;

	a->queues = NBD_DEFAULT_QUEUES;
	a->max_conns = NBD_DEFAULT_MAX_CONNS;
	a->reconnect_delay_ms = a->ctrl_loss_ms = -2;
	a->paths.failback_ms = -1;
	a->handshake_ms = NBD_DEFAULT_HANDSHAKE_MS;
	a->max_client_buf = NBD_DEFAULT_CLIENT_BUFFER;
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_auth_opt(ch, optarg, &a->auth))
			continue;
		ret = cli_path_opt("nbd", ch, optarg, &a->paths);
		if (ret < 0)
			return 2;
		if (ret)
			continue;
		switch (ch) {
		case OPT_SOCKET:
			a->socket_path = optarg;
			break;
		case OPT_LISTEN:
			a->listen_url = optarg;
			break;
		case OPT_QUEUES:
			if (parse_uint(optarg, 1, NBD_MAX_QUEUES, &a->queues))
				return usage_error("--queues: '%s' is not a "
						   "number from 1 to %d",
						   optarg, NBD_MAX_QUEUES);
			break;
		case OPT_QD:
			if (parse_uint(optarg, 1, RBLK_MAX_QD, &a->queue_depth))
				return usage_error("--queue-depth: '%s' is not "
						   "a number from 1 to %d",
						   optarg, RBLK_MAX_QD);
			break;
		case OPT_RO:
			a->read_only = true;
			break;
		case OPT_DIRECT:
			a->direct = RBLK_DIRECT_ON;
			break;
		case OPT_NO_DIRECT:
			a->direct = RBLK_DIRECT_OFF;
			break;
		case OPT_MAXCONN:
			if (parse_uint(optarg, 1, 65536, &a->max_conns))
				return usage_error("--max-connections: '%s' is "
						   "not a number from 1 to "
						   "65536",
						   optarg);
			break;
		case OPT_RECONNECT_DELAY:
			if (parse_seconds_ms(optarg, false,
					     &a->reconnect_delay_ms))
				return usage_error("--reconnect-delay: '%s' is "
						   "not a number of seconds",
						   optarg);
			break;
		case OPT_CTRL_LOSS:
			if (parse_seconds_ms(optarg, true, &a->ctrl_loss_ms))
				return usage_error("--ctrl-loss-timeout: '%s' is "
						   "not a number of seconds "
						   "(or -1)",
						   optarg);
			break;
		case OPT_HANDSHAKE_TMO:
			if (parse_seconds_ms(optarg, false, &a->handshake_ms) ||
			    a->handshake_ms <= 0)
				return usage_error("--handshake-timeout: '%s' is "
						   "not a positive number of "
						   "seconds",
						   optarg);
			break;
		case OPT_SPIN:
			if (parse_uint(optarg, 0, 1000000, &a->spin_us))
				return usage_error("--poll-spin-us: '%s' is not "
						   "a number from 0 to 1000000",
						   optarg);
			break;
		case OPT_IDLE_TMO:
			if (parse_seconds_ms(optarg, false, &a->idle_ms))
				return usage_error("--idle-timeout: '%s' is not "
						   "a number of seconds",
						   optarg);
			break;
		case OPT_CLIENT_BUF:
			if (parse_size(optarg, &a->max_client_buf) ||
			    a->max_client_buf < NBD_MAX_PAYLOAD ||
			    a->max_client_buf > (1ull << 40))
				return usage_error("--max-client-buffer: '%s' is "
						   "not a size from 32M (the "
						   "largest request) to 1T",
						   optarg);
			break;
		case OPT_LOGLEVEL:
			if (cli_parse_log_level("nbd", optarg))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("missing the volume URL");
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'",
				   argv[optind + 1]);
	a->url = argv[optind];
	if (!a->socket_path && !a->listen_url)
		return usage_error("one of --socket PATH or --listen URL is "
				   "required");
	if (a->socket_path && a->listen_url)
		return usage_error("--socket and --listen are exclusive");
	if (a->socket_path && !*a->socket_path)
		return usage_error("--socket: empty path");
	return -1;
}

/* Derive what we advertise from the volume. */
static void server_setup(struct nbd_server *srv, const struct nbd_args *a)
{
	const struct rblk_info *info = srv->info;
	uint32_t f = info->features;
	uint64_t pool_slots;

	srv->size = info->size;
	srv->block_size = info->block_size ? info->block_size : 1;
	srv->read_only = a->read_only || (f & RBLK_FEAT_READ_ONLY);
	srv->slot_size = info->max_io ? info->max_io : RBLK_DEFAULT_MAX_IO;
	srv->nreqs = info->queue_depth ? info->queue_depth : 1;
	pool_slots = NBD_POOL_MAX / srv->slot_size;
	srv->nslots = (uint32_t)MAX(1u, MIN((uint64_t)srv->nreqs, pool_slots));
	srv->nqueues = info->queues;

	srv->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_CAN_MULTI_CONN;
	if (f & RBLK_FEAT_FLUSH)
		srv->tflags |= NBD_FLAG_SEND_FLUSH;
	if (srv->read_only) {
		srv->tflags |= NBD_FLAG_READ_ONLY;
	} else {
		if (f & RBLK_FEAT_FUA)
			srv->tflags |= NBD_FLAG_SEND_FUA;
		if (f & RBLK_FEAT_TRIM)
			srv->tflags |= NBD_FLAG_SEND_TRIM;
		if (f & RBLK_FEAT_ZEROES)
			srv->tflags |= NBD_FLAG_SEND_WRITE_ZEROES;
	}
	if (srv->block_size > 65536 || !IS_POW2(srv->block_size))
		log_warn("volume block size %u is not a power of two up to "
			 "64 KiB; NBD clients may refuse it",
			 srv->block_size);
}

/* Wait for SIGINT/SIGTERM while accepting; returns when asked to stop. */
static void accept_loop(struct nbd_server *srv, int lfd, int sfd)
{
	for (;;) {
		struct pollfd p[3] = {
		    {.fd = lfd, .events = POLLIN},
		    {.fd = sfd, .events = POLLIN},
		    {.fd = srv->reap_fd, .events = POLLIN},
		};
		struct signalfd_siginfo si;
		uint64_t v;

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s", strerror(errno));
			return;
		}
		if (p[1].revents) {
			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				log_info("%s: shutting down",
					 strsignal((int)si.ssi_signo));
			return;
		}
		if (p[2].revents) {
			if (read(srv->reap_fd, &v, sizeof(v)) < 0)
				(void)0;
			reap_conns(srv, false);
		}
		if (p[0].revents)
			accept_one(srv, lfd);
	}
}

int cmd_nbd(int argc, char **argv)
{
	struct nbd_server srv = {.stop_fd = -1, .reap_fd = -1};
	char err[256], addr[320], uri[1100], name[3 * RBLK_NAME_MAX];
	struct rblk_url vu, lu;
	struct nbd_args a = {0};
	struct rblk_opts o;
	sigset_t mask;
	int ret, lfd = -1, sfd, rc = 1;
	uint64_t one = 1;

	log_set_prefix("rblk nbd");
	ret = parse_args(argc, argv, &a);
	if (ret >= 0)
		return ret;
	if (rblk_url_parse(a.url, RBLK_DEFAULT_PORT, &vu, err, sizeof(err)))
		return usage_error("%s", err);
	if (!vu.export_name[0])
		return usage_error("'%s' names no export "
				   "(tcp://HOST[:PORT]/EXPORT)",
				   a.url);
	if (a.listen_url) {
		if (rblk_url_parse(a.listen_url, NBD_DEFAULT_PORT, &lu, err,
				   sizeof(err)))
			return usage_error("--listen: %s", err);
		if (strcmp(lu.scheme, "tcp"))
			return usage_error(
			    "--listen: '%s': only tcp://HOST:PORT "
			    "is supported",
			    a.listen_url);
		if (lu.export_name[0])
			return usage_error("--listen: '%s': no export part "
					   "expected",
					   a.listen_url);
	}
	snprintf(srv.url, sizeof(srv.url), "%s", a.url);
	snprintf(srv.export_name, sizeof(srv.export_name), "%s",
		 vu.export_name);
	srv.max_conns = (unsigned int)a.max_conns;
	srv.handshake_ms = (unsigned int)a.handshake_ms;
	srv.idle_ms = (unsigned int)a.idle_ms;
	srv.spin_us = (unsigned int)a.spin_us;
	srv.max_client_buf = (size_t)a.max_client_buf;

	/* Signals: blocked in every thread (the library's too), read from a
	 * signalfd by the accept loop. SIGPIPE: sends use MSG_NOSIGNAL, but a
	 * transport might not. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) {
		nbd_errmsg("signalfd: %s", strerror(errno));
		return 1;
	}
	srv.stop_fd = eventfd(0, EFD_CLOEXEC);
	srv.reap_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv.stop_fd < 0 || srv.reap_fd < 0) {
		nbd_errmsg("eventfd: %s", strerror(errno));
		goto out_close_fds;
	}
	pthread_mutex_init(&srv.lock, NULL);

	rblk_opts_init(&o);
	o.queues = (unsigned int)a.queues;
	if (a.queue_depth)
		o.queue_depth = (unsigned int)a.queue_depth;
	if (a.read_only)
		o.flags |= RBLK_OPEN_READ_ONLY;
	cli_auth_apply(&a.auth, &o);
	cli_paths_apply(&a.paths, &o);
	o.direct = a.direct;
	if (a.reconnect_delay_ms >= 0)
		o.reconnect_delay_ms = a.reconnect_delay_ms;
	if (a.ctrl_loss_ms != -2)
		o.ctrl_loss_timeout_s = a.ctrl_loss_ms < 0 ?
					       -1 :
					       (a.ctrl_loss_ms + 999) / 1000;
	ret = rblk_open(a.url, &o, &srv.r);
	if (ret < 0) {
		nbd_errmsg("cannot open %s: %s", a.url, rblk_last_error());
		goto out_destroy_lock;
	}
	srv.info = rblk_get_info(srv.r);
	server_setup(&srv, &a);
	srv.qs = calloc(srv.nqueues, sizeof(*srv.qs));
	if (!srv.qs) {
		nbd_errmsg("out of memory");
		goto out_rblk_close;
	}

	uri_escape(srv.export_name, name, sizeof(name));
	if (a.socket_path) {
		if (listen_unix(a.socket_path, &lfd))
			goto out_free_qs;
		snprintf(addr, sizeof(addr), "unix:%s", a.socket_path);
		snprintf(uri, sizeof(uri), "nbd+unix:///%s?socket=%s", name,
			 a.socket_path);
	} else {
		if (listen_tcp(&lu, &lfd, addr, sizeof(addr)))
			goto out_free_qs;
		snprintf(uri, sizeof(uri), "nbd://%s/%s", addr + 6, name);
	}
	log_info("serving %s on %s (%llu bytes, block size %u, %u queues x "
		 "%u deep, max_io %u%s)",
		 a.url, addr, (unsigned long long)srv.size, srv.block_size,
		 srv.nqueues, srv.nreqs, srv.slot_size,
		 srv.read_only ? ", read-only" : "");
	printf("ready %s %s\n", addr, uri);
	fflush(stdout);

	accept_loop(&srv, lfd, sfd);
	rc = 0;

	/* Shutdown: no new clients; every connection drains and closes. */
	close(lfd);
	lfd = -1;
	if (write(srv.stop_fd, &one, sizeof(one)) < 0)
		(void)0;
	reap_conns(&srv, true);
	for (unsigned int i = 0; i < srv.nqueues; i++) {
		struct nbd_qslot *qs = &srv.qs[i];

		if (qs->registered && !qs->abandoned)
			rblk_unregister_buffer(rblk_get_queue(srv.r, i),
					       qs->pool);
	}
	if (a.socket_path)
		unlink(a.socket_path);
out_free_qs:
	if (lfd >= 0)
		close(lfd);
	/* pools are unmapped after rblk_close: abandoned I/O may target them */
out_rblk_close:
	rblk_close(srv.r);
	if (srv.qs) {
		for (unsigned int i = 0; i < srv.nqueues; i++)
			if (srv.qs[i].pool)
				munmap(srv.qs[i].pool, srv.qs[i].pool_len);
		free(srv.qs);
	}
out_destroy_lock:
	pthread_mutex_destroy(&srv.lock);
out_close_fds:
	if (srv.reap_fd >= 0)
		close(srv.reap_fd);
	if (srv.stop_fd >= 0)
		close(srv.stop_fd);
	close(sfd);
	return rc;
}
