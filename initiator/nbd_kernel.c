/* SPDX-License-Identifier: MIT */
/*
 * Kernel NBD front end of `rblk map` (frontend_nbd_ops): the volume becomes
 * /dev/nbdN, configured through the kernel's "nbd" generic netlink family
 * (libnl-genl-3), with no nbd-client and no NBD handshake.
 *
 * Shape: one AF_UNIX socketpair per rblk queue. NBD_CMD_CONNECT hands one
 * end of each to the kernel (NBD_ATTR_SOCKETS; the kernel makes one blk-mq
 * hardware queue per socket), so hardware queue i is served by rblk queue
 * i. The daemon keeps the other ends and runs one thread per socket that
 * speaks the NBD transmission phase as the server; the kernel is the
 * client: 28-byte requests (READ, WRITE, FLUSH, TRIM, WRITE_ZEROES, DISC),
 * simple 16-byte replies, READ data after the reply.
 *
 * Threads and ownership:
 *   - serve() runs on the daemon's main thread: it builds the sockets,
 *     buffers and threads, connects the device, calls map_ready(), then
 *     sleeps until map_stop_fd() or until every socket thread has ended,
 *     and tears the device down.
 *   - Socket thread i owns socket i, rblk queue i, its request table and
 *     its registered buffer pool: no locks on the I/O path. The only shared
 *     state is the abort eventfd (serve -> threads), the exit eventfd and
 *     the count of live threads (threads -> serve).
 *
 * Buffers: each queue has a pool of min(QD, NK_POOL_MAX / max_io) slots of
 * max_io bytes, registered once with rblk_register_buffer(), so READ and
 * WRITE data move by RDMA straight between the target and the memory the
 * socket reads into or writes from. The kernel's requests are capped at
 * max_io (queue/max_sectors_kb) so one slot holds any of them; a request
 * that finds no free slot gets a malloc'd buffer the library bounces.
 * Requests in a thread are limited to the granted queue depth: when all
 * are busy the thread stops reading and the kernel waits in its send.
 *
 * What happens when things fail (never an unbounded hang):
 *   - The rblk connection of a queue dies (target killed, link lost): its
 *     in-flight requests complete with NBD_EIO at once, and every later
 *     request on that socket is answered NBD_EIO at once, so the kernel
 *     fails those bios with EIO without waiting for any timeout. The device
 *     stays (I/O keeps failing) until `rblk unmap`. There is no reconnect.
 *   - The target stops answering while the connection stays up: the
 *     kernel's request timeout (--timeout, default NK_DEFAULT_TIMEOUT_S)
 *     expires; the kernel then shuts that socket down and retries on
 *     another; once every socket is dead it fails I/O with EIO at once
 *     (dead-connection timeout 0). A socket thread whose socket the kernel
 *     shut down ends; when all have ended the daemon disconnects the device
 *     and exits with an error.
 *   - The daemon is killed: every socket reaches EOF on the kernel side and
 *     I/O fails with EIO at once; the device stays attached (size kept,
 *     I/O failing) until `rblk unmap` or `rblk list` detaches it.
 *   - Unmap (SIGTERM): fsync(/dev/nbdN) pushes dirty page-cache data and a
 *     FLUSH through the still-running threads; then NBD_CMD_DISCONNECT: the
 *     kernel sends NBD_CMD_DISC on every socket, shuts them down and fails
 *     whatever is still queued. The threads then get NK_DRAIN_MS for the
 *     rblk I/O they still hold, and end.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/nbd-netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"
#include "initiator/map.h"
#include "initiator/nbd_proto.h"

#define NK_DEFAULT_TIMEOUT_S 30 /* kernel request timeout */
#define NK_POOL_MAX (64u << 20) /* registered buffer bytes per queue */
#define NK_RX_BUF (64u * 1024)	/* request staging buffer per socket */
#define NK_SOCK_BUF (4u << 20)	/* socket buffer we ask for, each way */
#define NK_REAP_BATCH 64
#define NK_TX_IOV 64		  /* iovecs per sendmsg */
#define NK_DRAIN_MS 10000	  /* rblk I/O still in flight at teardown */
#define NK_NL_TIMEOUT_MS 30000	  /* a netlink request and its answer */
#define NK_BACKEND_PREFIX "rblk:" /* our NBD_ATTR_BACKEND_IDENTIFIER */
#define NK_MAX_BLOCK_SIZE 4096	  /* the kernel takes 512 .. PAGE_SIZE */

/*
 * Request life cycle, owned by its socket thread:
 *   FREE -> RECV (WRITE payload arriving, or being discarded)
 *        -> PENDING (rblk_submit said -EBUSY; retried after reaping)
 *        -> INFLIGHT (submitted to the rblk queue)
 *        -> REPLY (on the tx list) -> FREE once the reply is sent.
 * Any stage may jump to REPLY with an error, and to FREE when the socket
 * is gone.
 */
enum nk_req_state {
	NK_REQ_FREE,
	NK_REQ_RECV,
	NK_REQ_PENDING,
	NK_REQ_INFLIGHT,
	NK_REQ_REPLY,
};

struct nk_req {
	struct nk_req *next; /* free, pending or tx list */
	enum nk_req_state state;
	uint16_t type;
	uint16_t flags;
	uint64_t cookie;
	uint64_t offset;
	uint32_t len;
	uint32_t error; /* NBD_E* for the reply, 0 on success */
	void *buf;	/* READ/WRITE data; NULL for the others */
	int slot; /* pool slot of buf, -1 when buf is malloc'd (or NULL) */
	unsigned char reply[NBD_SIMPLE_REPLY_SIZE];
};

struct nk_list {
	struct nk_req *head, *tail;
};

enum nk_rx_state {
	NK_RX_HDR,     /* waiting for a 28-byte request header */
	NK_RX_DATA,    /* copying a WRITE payload into rx_req->buf */
	NK_RX_DISCARD, /* skipping the payload of a WRITE that fails anyway */
};

struct nk_dev;

/* One socket, one rblk queue, one thread. */
struct nk_sock {
	struct nk_dev *dev;
	unsigned int idx;
	int fd;	 /* our end, non-blocking */
	int kfd; /* the kernel's end until NBD_CMD_CONNECT has taken it */
	pthread_t thread;
	bool started;
	struct rblk_queue *q;
	int qfd;

	/* everything below belongs to the socket thread while it runs */
	void *pool; /* nslots * slot_size bytes (mmap) */
	size_t pool_len;
	bool registered; /* rblk_register_buffer() took the pool */
	bool abandoned;	 /* ended with rblk I/O in flight: keep buffers */
	struct nk_req *reqs;
	struct nk_req *free_reqs;
	int *free_slots;
	unsigned int nfree_slots;
	struct nk_list pending; /* waiting for a queue tag */
	struct nk_list tx;	/* replies to send, head partly sent */
	size_t tx_off;		/* bytes of tx.head already sent */
	unsigned int inflight;	/* submitted to rblk, not yet reaped */

	unsigned char *rx; /* staging buffer for headers and payloads */
	size_t rx_start, rx_end;
	enum nk_rx_state rx_state;
	struct nk_req *rx_req; /* NK_RX_DATA, NK_RX_DISCARD */
	size_t rx_done;	       /* payload bytes received for rx_req */

	bool rx_closed; /* read no more requests (DISC, EOF, abort) */
	bool sock_dead; /* the socket failed: replies are dropped */
	bool q_dead;	/* the rblk connection failed: answer NBD_EIO */
	bool aborting;	/* serve() asked us to end; deadline_ms applies */
	uint64_t deadline_ms;

	uint64_t nr_requests;
	uint64_t nr_errors;
};

struct nk_dev {
	struct map_ctx *ctx;
	struct rblk *r;
	const struct map_opts *o;
	int index; /* /dev/nbdN, -1 until connected */
	char path[32];
	char backend[600]; /* NBD_ATTR_BACKEND_IDENTIFIER */
	uint64_t size;
	uint32_t block_size; /* what the kernel is told, >= 512 */
	uint32_t vol_block_size;
	uint32_t slot_size; /* max_io: the largest request we let through */
	uint32_t nslots;    /* pool slots per queue */
	uint32_t nreqs;	    /* requests per socket: the granted queue depth */
	uint16_t tflags;    /* NBD transmission flags given to the kernel */
	bool read_only;
	int abort_fd;	  /* eventfd: socket threads stop reading and drain */
	int exit_fd;	  /* eventfd: a socket thread has ended */
	atomic_uint live; /* socket threads that have not ended */
	struct nk_sock *socks;
	unsigned int nsocks;
};

/* ---- small helpers ------------------------------------------------------ */

static uint32_t nk_errno_to_nbd(int err)
{
	switch (err) {
	case -EROFS:
	case -EACCES:
	case -EPERM:
		return NBD_EPERM;
	case -ENOMEM:
		return NBD_ENOMEM;
	case -EINVAL:
	case -ERANGE:
		return NBD_EINVAL;
	case -ENOSPC:
		return NBD_ENOSPC;
	case -EOPNOTSUPP:
		return NBD_ENOTSUP;
	default: /* -EIO, -ENOTCONN, anything else: the kernel says EIO */
		return NBD_EIO;
	}
}

static void nk_list_push(struct nk_list *l, struct nk_req *req)
{
	req->next = NULL;
	if (l->tail)
		l->tail->next = req;
	else
		l->head = req;
	l->tail = req;
}

static struct nk_req *nk_list_pop(struct nk_list *l)
{
	struct nk_req *req = l->head;

	if (req) {
		l->head = req->next;
		if (!l->head)
			l->tail = NULL;
		req->next = NULL;
	}
	return req;
}

/* Read a small sysfs file into buf (NUL-terminated, newline stripped). */
static int read_small_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return 0;
}

/* ---- generic netlink ----------------------------------------------------- */

struct nk_nl_reply {
	bool done; /* the ACK or an error arrived */
	int err;   /* 0 or -errno from the kernel */
	int index; /* NBD_ATTR_INDEX of a CONNECT reply, -1 when none */
};

static int nk_nl_valid(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	struct nk_nl_reply *rep = arg;

	if (!genlmsg_parse(nlmsg_hdr(msg), 0, tb, NBD_ATTR_MAX, NULL) &&
	    tb[NBD_ATTR_INDEX])
		rep->index = (int)nla_get_u32(tb[NBD_ATTR_INDEX]);
	return NL_OK;
}

static int nk_nl_ack(struct nl_msg *msg, void *arg)
{
	struct nk_nl_reply *rep = arg;

	rep->done = true;
	return NL_STOP;
}

static int nk_nl_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct nk_nl_reply *rep = arg;

	rep->done = true;
	rep->err = e->error < 0 ? e->error : -e->error;
	return NL_STOP;
}

/*
 * Connect a generic netlink socket and resolve the "nbd" family.
 * 0, or -ENODEV (no such family: the driver is not loaded) / -errno, with
 * a sentence in why.
 */
static int nk_nl_open(struct nl_sock **out, int *family, char *why,
		      size_t why_len)
{
	struct timeval tv = {.tv_sec = 1};
	struct nl_sock *sk;
	int ret;

	sk = nl_socket_alloc();
	if (!sk) {
		snprintf(why, why_len, "out of memory for a netlink socket");
		return -ENOMEM;
	}
	ret = genl_connect(sk);
	if (ret < 0) {
		snprintf(why, why_len,
			 "cannot open a generic netlink socket: "
			 "%s",
			 nl_geterror(ret));
		nl_socket_free(sk);
		return -EAFNOSUPPORT;
	}
	ret = genl_ctrl_resolve(sk, NBD_GENL_FAMILY_NAME);
	if (ret < 0) {
		snprintf(why, why_len,
			 "the kernel has no '%s' generic netlink "
			 "family: the nbd driver is not loaded ('modprobe "
			 "nbd') or is too old (%s)",
			 NBD_GENL_FAMILY_NAME, nl_geterror(ret));
		nl_socket_free(sk);
		return -ENODEV;
	}
	*family = ret;
	/* replies are waited for in slices; see nk_nl_request */
	setsockopt(nl_socket_get_fd(sk), SOL_SOCKET, SO_RCVTIMEO, &tv,
		   sizeof(tv));
	*out = sk;
	return 0;
}

/*
 * Send msg (consumed) and wait, at most NK_NL_TIMEOUT_MS, for the kernel's
 * answer. Returns 0 or the kernel's -errno (-ETIMEDOUT, -EIO on netlink
 * trouble).
 */
static int nk_nl_request(struct nl_sock *sk, struct nl_msg *msg,
			 struct nk_nl_reply *rep)
{
	uint64_t deadline = now_ms() + NK_NL_TIMEOUT_MS;
	struct nl_cb *cb;
	int ret;

	rep->done = false;
	rep->err = 0;
	rep->index = -1;
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, nk_nl_valid, rep);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, nk_nl_ack, rep);
	nl_cb_err(cb, NL_CB_CUSTOM, nk_nl_error, rep);
	ret = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (ret < 0) {
		log_err("nbd netlink: send: %s", nl_geterror(ret));
		nl_cb_put(cb);
		return -EIO;
	}
	while (!rep->done) {
		ret = nl_recvmsgs(sk, cb);
		if (ret == -NLE_AGAIN || ret == -NLE_INTR)
			ret = 0; /* a receive-timeout slice passed */
		if (ret < 0 && !rep->done) {
			log_err("nbd netlink: receive: %s", nl_geterror(ret));
			nl_cb_put(cb);
			return -EIO;
		}
		if (!rep->done && now_ms() >= deadline) {
			log_err(
			    "nbd netlink: no answer from the kernel in %d s",
			    NK_NL_TIMEOUT_MS / 1000);
			nl_cb_put(cb);
			return -ETIMEDOUT;
		}
	}
	nl_cb_put(cb);
	return rep->err;
}

/* A genl message for cmd, or NULL. */
static struct nl_msg *nk_nl_msg(int family, uint8_t cmd)
{
	struct nl_msg *msg = nlmsg_alloc_size(16384);

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, 0, cmd,
			 NBD_GENL_VERSION)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

/* NBD_CMD_DISCONNECT of device index: 0 or -errno. */
static int nk_nl_disconnect(int index)
{
	struct nk_nl_reply rep;
	struct nl_sock *sk;
	struct nl_msg *msg;
	char why[256];
	int family, ret;

	ret = nk_nl_open(&sk, &family, why, sizeof(why));
	if (ret) {
		log_err("cannot disconnect /dev/nbd%d: %s", index, why);
		return ret;
	}
	msg = nk_nl_msg(family, NBD_CMD_DISCONNECT);
	if (!msg || nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)index) < 0) {
		if (msg)
			nlmsg_free(msg);
		nl_socket_free(sk);
		return -ENOMEM;
	}
	ret = nk_nl_request(sk, msg, &rep);
	nl_socket_free(sk);
	if (ret)
		log_err("NBD_CMD_DISCONNECT /dev/nbd%d: %s", index,
			strerror(-ret));
	return ret;
}

/*
 * NBD_CMD_CONNECT with every socket's kernel end. Sets dev->index. 0 or
 * -errno; the reason is logged.
 */
static int nk_nl_connect(struct nk_dev *dev)
{
	const struct map_opts *o = dev->o;
	struct nlattr *socks, *item;
	struct nk_nl_reply rep;
	struct nl_sock *sk;
	struct nl_msg *msg;
	char why[256];
	int family, ret;
	uint64_t timeout =
	    o->io_timeout_s ? o->io_timeout_s : NK_DEFAULT_TIMEOUT_S;

	ret = nk_nl_open(&sk, &family, why, sizeof(why));
	if (ret) {
		log_err("%s", why);
		return ret;
	}
	ret = -ENOMEM;
	msg = nk_nl_msg(family, NBD_CMD_CONNECT);
	if (!msg)
		goto out_free_sock;
	if (o->dev_id >= 0 &&
	    nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)o->dev_id) < 0)
		goto out_free_msg;
	if (nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, dev->size) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_BLOCK_SIZE_BYTES, dev->block_size) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_SERVER_FLAGS, dev->tflags) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_TIMEOUT, timeout) < 0 ||
	    nla_put_u64(msg, NBD_ATTR_DEAD_CONN_TIMEOUT, 0) < 0 ||
	    nla_put_string(msg, NBD_ATTR_BACKEND_IDENTIFIER, dev->backend) < 0)
		goto out_free_msg;
	socks = nla_nest_start(msg, NBD_ATTR_SOCKETS);
	if (!socks)
		goto out_free_msg;
	for (unsigned int i = 0; i < dev->nsocks; i++) {
		item = nla_nest_start(msg, NBD_SOCK_ITEM);
		if (!item || nla_put_u32(msg, NBD_SOCK_FD,
					 (uint32_t)dev->socks[i].kfd) < 0)
			goto out_free_msg;
		nla_nest_end(msg, item);
	}
	nla_nest_end(msg, socks);

	ret = nk_nl_request(sk, msg, &rep);
	msg = NULL;
	if (ret == -EPERM) {
		log_err("NBD_CMD_CONNECT: %s (attaching an NBD device needs "
			"root, CAP_SYS_ADMIN)",
			strerror(-ret));
	} else if (ret == -EBUSY && o->dev_id >= 0) {
		log_err("NBD_CMD_CONNECT: /dev/nbd%d is already in use",
			o->dev_id);
	} else if (ret) {
		log_err("NBD_CMD_CONNECT (%u sockets, %llu bytes, block size "
			"%u): %s; see the kernel log",
			dev->nsocks, (unsigned long long)dev->size,
			dev->block_size, strerror(-ret));
	} else if (rep.index < 0 && o->dev_id < 0) {
		log_err("NBD_CMD_CONNECT: the kernel did not say which device "
			"it attached");
		ret = -EPROTO;
	} else {
		dev->index = rep.index >= 0 ? rep.index : o->dev_id;
	}
out_free_msg:
	if (msg)
		nlmsg_free(msg);
out_free_sock:
	nl_socket_free(sk);
	return ret;
}

/* ---- request validation ----------------------------------------------------
 */

/*
 * The one place that judges a request header (magic already checked).
 * 0 when it may go to the volume, else the NBD error to reply with.
 */
static uint32_t nk_validate(const struct nk_dev *dev, uint16_t type,
			    uint16_t flags, uint64_t offset, uint32_t len)
{
	uint16_t allowed = 0;
	bool is_write = true;

	switch (type) {
	case NBD_CMD_READ:
		is_write = false;
		break;
	case NBD_CMD_WRITE:
		break;
	case NBD_CMD_FLUSH:
		if (!(dev->tflags & NBD_FLAG_SEND_FLUSH))
			return NBD_EINVAL;
		return offset || len ? NBD_EINVAL : 0;
	case NBD_CMD_TRIM:
		if (!(dev->tflags & NBD_FLAG_SEND_TRIM))
			return NBD_EINVAL;
		break;
	case NBD_CMD_WRITE_ZEROES:
		if (!(dev->tflags & NBD_FLAG_SEND_WRITE_ZEROES))
			return NBD_EINVAL;
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		break;
	default: /* CACHE, BLOCK_STATUS, ...: never offered */
		return NBD_EINVAL;
	}
	if (is_write && dev->read_only)
		return NBD_EPERM;
	if (is_write && (dev->tflags & NBD_FLAG_SEND_FUA))
		allowed |= NBD_CMD_FLAG_FUA;
	if (flags & ~allowed)
		return NBD_EINVAL;
	if ((type == NBD_CMD_READ || type == NBD_CMD_WRITE) &&
	    len > NBD_MAX_PAYLOAD)
		return NBD_EINVAL;
	if (offset % dev->vol_block_size || len % dev->vol_block_size)
		return NBD_EINVAL;
	if (len > dev->size || offset > dev->size - len)
		return is_write ? NBD_ENOSPC : NBD_EINVAL;
	return 0;
}

/* ---- per-socket request state ----------------------------------------------
 */

static struct nk_req *req_alloc(struct nk_sock *s)
{
	struct nk_req *req = s->free_reqs;

	s->free_reqs = req->next;
	req->next = NULL;
	req->buf = NULL;
	req->slot = -1;
	req->error = 0;
	return req;
}

static void req_free(struct nk_sock *s, struct nk_req *req)
{
	if (req->slot >= 0)
		s->free_slots[s->nfree_slots++] = req->slot;
	else
		free(req->buf);
	req->buf = NULL;
	req->slot = -1;
	req->state = NK_REQ_FREE;
	req->next = s->free_reqs;
	s->free_reqs = req;
}

/* A data buffer for READ/WRITE: a registered slot when one fits. */
static int req_get_buf(struct nk_sock *s, struct nk_req *req)
{
	const struct nk_dev *dev = s->dev;
	void *p;

	if (req->len <= dev->slot_size && s->nfree_slots) {
		req->slot = s->free_slots[--s->nfree_slots];
		req->buf = (char *)s->pool + (size_t)req->slot * dev->slot_size;
		return 0;
	}
	if (posix_memalign(&p, 4096, ALIGN_UP((size_t)req->len, 4096)))
		return -ENOMEM;
	req->buf = p;
	req->slot = -1;
	return 0;
}

/* Stop reading requests; a half-received one is dropped. */
static void rx_close(struct nk_sock *s)
{
	if (s->rx_closed)
		return;
	s->rx_closed = true;
	if (s->rx_state != NK_RX_HDR && s->rx_req) {
		req_free(s, s->rx_req);
		s->rx_req = NULL;
	}
	s->rx_state = NK_RX_HDR;
}

/* The socket is unusable: drop every queued reply. */
static void sock_fail(struct nk_sock *s, int err)
{
	struct nk_req *req;

	if (s->sock_dead)
		return;
	if (err != -EPIPE && err != -ECONNRESET)
		log_warn("nbd socket %u: %s", s->idx, strerror(-err));
	s->sock_dead = true;
	rx_close(s);
	while ((req = nk_list_pop(&s->tx)))
		req_free(s, req);
	s->tx_off = 0;
}

static void queue_reply(struct nk_sock *s, struct nk_req *req)
{
	if (req->error)
		s->nr_errors++;
	if (s->sock_dead) {
		req_free(s, req);
		return;
	}
	nbd_put32(req->reply, NBD_SIMPLE_REPLY_MAGIC);
	nbd_put32(req->reply + 4, req->error);
	nbd_put64(req->reply + 8, req->cookie);
	req->state = NK_REQ_REPLY;
	nk_list_push(&s->tx, req);
}

/* The rblk connection of this queue is gone: NBD_EIO from now on. */
static void queue_dead(struct nk_sock *s)
{
	if (s->q_dead)
		return;
	s->q_dead = true;
	log_err("%s: queue %u lost its connection to the target: its I/O "
		"fails with EIO from now on (rblk unmap %s removes the "
		"device)",
		s->dev->path, s->idx, s->dev->path);
}

static int req_submit_one(struct nk_sock *s, struct nk_req *req)
{
	static const enum rblk_io_op ops[] = {
	    [NBD_CMD_READ] = RBLK_IO_READ,
	    [NBD_CMD_WRITE] = RBLK_IO_WRITE,
	    [NBD_CMD_FLUSH] = RBLK_IO_FLUSH,
	    [NBD_CMD_TRIM] = RBLK_IO_TRIM,
	    [NBD_CMD_WRITE_ZEROES] = RBLK_IO_WRITE_ZEROES,
	};
	unsigned int flags = 0;

	if ((req->flags & NBD_CMD_FLAG_FUA) &&
	    (req->type == NBD_CMD_WRITE || req->type == NBD_CMD_WRITE_ZEROES))
		flags |= RBLK_IO_FUA;
	return rblk_submit(s->q, ops[req->type], req->buf, req->offset,
			   req->len, flags, req);
}

/* A submit failed with ret: answer the request. */
static void req_submit_failed(struct nk_sock *s, struct nk_req *req, int ret)
{
	log_debug("nbd socket %u: submit type %u %u@%llu: %s", s->idx,
		  req->type, req->len, (unsigned long long)req->offset,
		  strerror(-ret));
	if (ret == -ENOTCONN)
		queue_dead(s);
	req->error = nk_errno_to_nbd(ret);
	queue_reply(s, req);
}

/* Hand a validated request to the queue, park it, or answer it. */
static void req_submit(struct nk_sock *s, struct nk_req *req)
{
	int ret;

	if (s->q_dead) {
		req->error = NBD_EIO;
		queue_reply(s, req);
		return;
	}
	if (s->pending.head) {
		req->state = NK_REQ_PENDING;
		nk_list_push(&s->pending, req);
		return;
	}
	ret = req_submit_one(s, req);
	if (!ret) {
		req->state = NK_REQ_INFLIGHT;
		s->inflight++;
	} else if (ret == -EBUSY && s->inflight) {
		req->state = NK_REQ_PENDING;
		nk_list_push(&s->pending, req);
	} else {
		req_submit_failed(s, req, ret);
	}
}

/* Retry parked requests in order. True if any left the list. */
static bool submit_pending(struct nk_sock *s)
{
	bool progress = false;
	struct nk_req *req;
	int ret;

	while ((req = s->pending.head)) {
		ret = s->q_dead ? -ENOTCONN : req_submit_one(s, req);
		if (ret == -EBUSY && s->inflight)
			break;
		nk_list_pop(&s->pending);
		progress = true;
		if (!ret) {
			req->state = NK_REQ_INFLIGHT;
			s->inflight++;
		} else {
			req_submit_failed(s, req, ret);
		}
	}
	return progress;
}

/* ---- requests in
 * ------------------------------------------------------------- */

/* A whole header is in the staging buffer: decode and dispatch it. */
static void rx_header(struct nk_sock *s)
{
	const unsigned char *h = s->rx + s->rx_start;
	uint32_t magic = nbd_get32(h);
	struct nk_req *req;

	s->rx_start += NBD_REQUEST_SIZE;
	if (magic != NBD_REQUEST_MAGIC) {
		log_err("nbd socket %u: bad request magic 0x%08x from the "
			"kernel; closing the socket",
			s->idx, magic);
		sock_fail(s, -EPROTO);
		shutdown(s->fd, SHUT_RDWR);
		return;
	}
	req = req_alloc(s);
	req->flags = nbd_get16(h + 4);
	req->type = nbd_get16(h + 6);
	req->cookie = nbd_get64(h + 8);
	req->offset = nbd_get64(h + 16);
	req->len = nbd_get32(h + 24);
	s->nr_requests++;

	if (req->type == NBD_CMD_DISC) {
		log_debug("nbd socket %u: NBD_CMD_DISC", s->idx);
		req_free(s, req);
		rx_close(s);
		return;
	}
	if (req->type == NBD_CMD_WRITE && req->len > NBD_MAX_PAYLOAD) {
		log_err("nbd socket %u: WRITE of %u bytes exceeds %u; closing "
			"the socket",
			s->idx, req->len, NBD_MAX_PAYLOAD);
		req_free(s, req);
		sock_fail(s, -EPROTO);
		shutdown(s->fd, SHUT_RDWR);
		return;
	}
	req->error =
	    nk_validate(s->dev, req->type, req->flags, req->offset, req->len);
	if (!req->error && s->q_dead)
		req->error = NBD_EIO;
	if (req->error) {
		log_debug("nbd socket %u: type %u flags 0x%x %u@%llu: error %u",
			  s->idx, req->type, req->flags, req->len,
			  (unsigned long long)req->offset, req->error);
	} else if (req->len == 0 && req->type != NBD_CMD_FLUSH) {
		/* nothing to do: answer success */
	} else if ((req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE) &&
		   req_get_buf(s, req)) {
		req->error = NBD_ENOMEM;
	} else if (req->type == NBD_CMD_WRITE) {
		req->state = NK_REQ_RECV;
		s->rx_req = req;
		s->rx_done = 0;
		s->rx_state = NK_RX_DATA;
		return;
	} else {
		req_submit(s, req);
		return;
	}
	if (req->type == NBD_CMD_WRITE && req->len) {
		/* consume the payload, then answer with the error */
		req->state = NK_REQ_RECV;
		s->rx_req = req;
		s->rx_done = 0;
		s->rx_state = NK_RX_DISCARD;
		return;
	}
	queue_reply(s, req);
}

/*
 * Refill the staging buffer. Bytes read, 0 when the socket has nothing
 * now, -1 when reading is over (EOF or error).
 */
static ssize_t rx_fill(struct nk_sock *s)
{
	ssize_t n;

	if (s->rx_start == s->rx_end) {
		s->rx_start = s->rx_end = 0;
	} else if (s->rx_start && NK_RX_BUF - s->rx_end < 4096) {
		memmove(s->rx, s->rx + s->rx_start, s->rx_end - s->rx_start);
		s->rx_end -= s->rx_start;
		s->rx_start = 0;
	}
	for (;;) {
		n = recv(s->fd, s->rx + s->rx_end, NK_RX_BUF - s->rx_end,
			 MSG_DONTWAIT);
		if (n > 0) {
			s->rx_end += (size_t)n;
			return n;
		}
		if (n == 0) {
			log_debug("nbd socket %u: EOF", s->idx);
			rx_close(s);
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		sock_fail(s, -errno);
		return -1;
	}
}

/*
 * Payload bytes for rx_req: from the staging buffer first, then straight
 * from the socket into the request's buffer when much remains. True when
 * bytes moved (or reading ended).
 */
static bool rx_payload(struct nk_sock *s, bool discard)
{
	struct nk_req *req = s->rx_req;
	size_t want = req->len - s->rx_done;
	size_t avail = s->rx_end - s->rx_start;
	size_t n;
	ssize_t r;

	if (avail) {
		n = MIN(avail, want);
		if (!discard)
			memcpy((char *)req->buf + s->rx_done,
			       s->rx + s->rx_start, n);
		s->rx_start += n;
	} else if (!discard && want >= NK_RX_BUF / 2) {
		r = recv(s->fd, (char *)req->buf + s->rx_done, want,
			 MSG_DONTWAIT);
		if (r == 0) {
			rx_close(s);
			return true;
		}
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				return false;
			sock_fail(s, -errno);
			return true;
		}
		n = (size_t)r;
	} else {
		return rx_fill(s) != 0;
	}
	s->rx_done += n;
	if (s->rx_done == req->len) {
		s->rx_req = NULL;
		s->rx_state = NK_RX_HDR;
		if (discard)
			queue_reply(s, req);
		else
			req_submit(s, req);
	}
	return true;
}

/*
 * Read and dispatch requests until the socket is empty, every request slot
 * is busy, or requests wait for queue tags (back-pressure: the kernel then
 * waits in its send).
 */
static bool rx_process(struct nk_sock *s)
{
	bool progress = false;

	while (!s->rx_closed) {
		switch (s->rx_state) {
		case NK_RX_HDR:
			if (!s->free_reqs || s->pending.head)
				return progress;
			if (s->rx_end - s->rx_start < NBD_REQUEST_SIZE) {
				if (rx_fill(s) <= 0)
					return progress;
				continue;
			}
			rx_header(s);
			progress = true;
			break;
		case NK_RX_DATA:
		case NK_RX_DISCARD:
			if (!rx_payload(s, s->rx_state == NK_RX_DISCARD))
				return progress;
			progress = true;
			break;
		}
	}
	return progress;
}

/* ---- completions and replies out
 * ---------------------------------------------- */

/* Complete what the queue has finished. True if anything did. */
static bool reap(struct nk_sock *s)
{
	struct rblk_completion comp[NK_REAP_BATCH];
	bool progress = false;
	int n;

	while (s->inflight) {
		n = rblk_poll(s->q, comp, NK_REAP_BATCH, 0);
		if (n < 0) {
			/* every I/O has completed: none of ours comes back */
			queue_dead(s);
			for (unsigned int i = 0; i < s->dev->nreqs; i++) {
				struct nk_req *req = &s->reqs[i];

				if (req->state != NK_REQ_INFLIGHT)
					continue;
				req->error = NBD_EIO;
				queue_reply(s, req);
			}
			s->inflight = 0;
			return true;
		}
		for (int i = 0; i < n; i++) {
			struct nk_req *req = comp[i].user_data;

			s->inflight--;
			if (comp[i].result) {
				log_debug("nbd socket %u: type %u %u@%llu: %s",
					  s->idx, req->type, req->len,
					  (unsigned long long)req->offset,
					  strerror(-comp[i].result));
				if (comp[i].result == -ENOTCONN)
					queue_dead(s);
				req->error = nk_errno_to_nbd(comp[i].result);
			}
			queue_reply(s, req);
			progress = true;
		}
		if (n < NK_REAP_BATCH)
			break;
	}
	return progress;
}

static size_t reply_len(const struct nk_req *req)
{
	if (req->type == NBD_CMD_READ && !req->error)
		return NBD_SIMPLE_REPLY_SIZE + req->len;
	return NBD_SIMPLE_REPLY_SIZE;
}

/* Send queued replies, batched into sendmsg calls. True if any went. */
static bool tx_flush(struct nk_sock *s)
{
	bool progress = false;

	while (s->tx.head && !s->sock_dead) {
		struct iovec iov[NK_TX_IOV];
		struct msghdr msg = {.msg_iov = iov};
		size_t skip = s->tx_off;
		struct nk_req *req;
		int cnt = 0;
		ssize_t n;

		for (req = s->tx.head; req && cnt + 2 <= NK_TX_IOV;
		     req = req->next) {
			size_t hl = NBD_SIMPLE_REPLY_SIZE;
			size_t dl = reply_len(req) - hl;

			if (skip < hl) {
				iov[cnt].iov_base = req->reply + skip;
				iov[cnt++].iov_len = hl - skip;
				skip = 0;
			} else {
				skip -= hl;
			}
			if (dl) {
				iov[cnt].iov_base = (char *)req->buf + skip;
				iov[cnt++].iov_len = dl - skip;
				skip = 0;
			}
		}
		msg.msg_iovlen = (size_t)cnt;
		n = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sock_fail(s, -errno);
			break;
		}
		while (n > 0) {
			size_t left;

			req = s->tx.head;
			left = reply_len(req) - s->tx_off;
			if ((size_t)n < left) {
				s->tx_off += (size_t)n;
				break;
			}
			n -= (ssize_t)left;
			s->tx_off = 0;
			nk_list_pop(&s->tx);
			req_free(s, req);
			progress = true;
		}
	}
	return progress;
}

static bool sock_done(const struct nk_sock *s)
{
	return s->rx_closed && !s->inflight && !s->pending.head &&
	       (s->sock_dead || !s->tx.head);
}

/*
 * The socket thread's loop: retry parked requests, read and submit
 * requests, reap completions, send replies; when a pass moves nothing,
 * sleep in poll() on the socket (POLLIN when a request can be taken,
 * POLLOUT when replies wait), the queue fd (with I/O in flight, after
 * rblk_queue_arm() said nothing is pending) and the abort eventfd.
 * Ends when reading is over (DISC, EOF, abort) and every request has been
 * answered or the socket is dead. After an abort, rblk I/O in flight gets
 * NK_DRAIN_MS; returns -ETIMEDOUT when some had to be abandoned.
 */
static int sock_run(struct nk_sock *s)
{
	for (;;) {
		struct pollfd p[3];
		bool progress;
		int timeout = -1, ret, np = 0, iabort = -1;
		short ev = 0;

		progress = submit_pending(s);
		progress |= rx_process(s);
		progress |= reap(s);
		progress |= tx_flush(s);
		if (sock_done(s))
			return 0;
		if (progress)
			continue;

		if (s->aborting) {
			uint64_t now = now_ms();

			if (now >= s->deadline_ms) {
				log_warn("nbd socket %u: abandoning %u "
					 "requests still in flight",
					 s->idx, s->inflight);
				return -ETIMEDOUT;
			}
			timeout = (int)(s->deadline_ms - now);
		}
		if (!s->rx_closed && (s->rx_state != NK_RX_HDR ||
				      (s->free_reqs && !s->pending.head)))
			ev |= POLLIN;
		if (s->tx.head && !s->sock_dead)
			ev |= POLLOUT;
		if (ev)
			p[np++] = (struct pollfd){.fd = s->fd, .events = ev};
		if (s->inflight) {
			ret = rblk_queue_arm(s->q);
			if (ret > 0)
				continue;
			if (ret < 0 || s->qfd < 0) /* cannot sleep on the fd */
				timeout = timeout < 0 ? 1 : MIN(timeout, 1);
			if (s->qfd >= 0)
				p[np++] = (struct pollfd){.fd = s->qfd,
							  .events = POLLIN};
		}
		if (!s->aborting) {
			iabort = np;
			p[np++] = (struct pollfd){.fd = s->dev->abort_fd,
						  .events = POLLIN};
		}
		ret = poll(p, (nfds_t)np, timeout);
		if (ret < 0 && errno != EINTR) {
			log_err("nbd socket %u: poll: %s", s->idx,
				strerror(errno));
			return -errno;
		}
		if (ret > 0 && iabort >= 0 && p[iabort].revents) {
			s->aborting = true;
			s->deadline_ms = now_ms() + NK_DRAIN_MS;
			rx_close(s);
		}
	}
}

static void *sock_thread(void *arg)
{
	struct nk_sock *s = arg;
	struct nk_dev *dev = s->dev;
	uint64_t one = 1;
	int ret;

	ret = sock_run(s);
	if (ret && s->inflight)
		s->abandoned = true;
	if (!s->aborting && !map_should_stop(dev->ctx))
		log_warn("%s: socket %u was closed by the kernel (request "
			 "timeout or disconnect) after %llu requests",
			 dev->path[0] ? dev->path : "nbd", s->idx,
			 (unsigned long long)s->nr_requests);
	log_info("nbd socket %u: %llu requests, %llu failed", s->idx,
		 (unsigned long long)s->nr_requests,
		 (unsigned long long)s->nr_errors);
	atomic_fetch_sub(&dev->live, 1);
	if (write(dev->exit_fd, &one, sizeof(one)) < 0)
		log_debug("exit eventfd: %s", strerror(errno));
	return NULL;
}

/* ---- setup and teardown
 * ------------------------------------------------------- */

/* Ask for large socket buffers (forced when we may): fewer wakeups. */
static void sock_bufs(int fd)
{
	int v = (int)NK_SOCK_BUF;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

/* Socketpair, request table, staging buffer and pool of socket s. */
static int sock_init(struct nk_dev *dev, struct nk_sock *s, unsigned int idx)
{
	size_t len = (size_t)dev->nslots * dev->slot_size;
	int sv[2], ret;

	s->dev = dev;
	s->idx = idx;
	s->fd = s->kfd = -1;
	s->q = rblk_get_queue(dev->r, idx);
	if (!s->q) {
		log_err("rblk queue %u: %s", idx, rblk_last_error());
		return -EINVAL;
	}
	s->qfd = rblk_queue_fd(s->q);
	/* blocking: the kernel uses its end with its own flags anyway */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		ret = -errno;
		log_err("socketpair: %s", strerror(errno));
		return ret;
	}
	s->fd = sv[0];
	s->kfd = sv[1];
	if (fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK)) {
		ret = -errno;
		log_err("fcntl(O_NONBLOCK): %s", strerror(errno));
		return ret;
	}
	sock_bufs(s->fd);
	sock_bufs(s->kfd);

	s->reqs = calloc(dev->nreqs, sizeof(*s->reqs));
	s->free_slots = calloc(dev->nslots, sizeof(*s->free_slots));
	s->rx = malloc(NK_RX_BUF);
	if (!s->reqs || !s->free_slots || !s->rx) {
		log_err("out of memory for the request state of socket %u",
			idx);
		return -ENOMEM;
	}
	for (unsigned int i = dev->nreqs; i-- > 0;) {
		s->reqs[i].slot = -1;
		s->reqs[i].next = s->free_reqs;
		s->free_reqs = &s->reqs[i];
	}
	for (unsigned int i = dev->nslots; i-- > 0;)
		s->free_slots[s->nfree_slots++] = (int)i;

	s->pool = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->pool == MAP_FAILED) {
		ret = -errno;
		s->pool = NULL;
		log_err("mmap of a %zu-byte buffer pool: %s", len,
			strerror(errno));
		return ret;
	}
	s->pool_len = len;
	ret = rblk_register_buffer(s->q, s->pool, len);
	if (ret < 0)
		log_warn("queue %u: rblk_register_buffer (%zu bytes): %s; data "
			 "will be copied through the library's slots",
			 idx, len, rblk_last_error());
	else
		s->registered = true;
	return 0;
}

/*
 * Free what sock_init made; runs on serve()'s thread after the socket
 * thread is joined. Buffers of a socket that abandoned rblk I/O stay
 * allocated: the library may still write into them until rblk_close().
 */
static void sock_destroy(struct nk_sock *s)
{
	if (s->reqs && !s->abandoned)
		for (unsigned int i = 0; i < s->dev->nreqs; i++)
			if (s->reqs[i].slot < 0)
				free(s->reqs[i].buf);
	if (!s->abandoned) {
		free(s->reqs);
		if (s->registered)
			rblk_unregister_buffer(s->q, s->pool);
		if (s->pool)
			munmap(s->pool, s->pool_len);
	}
	free(s->free_slots);
	free(s->rx);
	if (s->kfd >= 0)
		close(s->kfd);
	if (s->fd >= 0)
		close(s->fd);
}

/* What the kernel is told, from the volume and the options. */
static int dev_setup(struct nk_dev *dev)
{
	const struct rblk_info *info = rblk_get_info(dev->r);
	uint32_t f = info->features;
	uint32_t bs = info->block_size ? info->block_size : 512;

	if (!IS_POW2(bs) || bs > NK_MAX_BLOCK_SIZE) {
		log_err("the volume's block size %u cannot be given to the "
			"kernel NBD driver (powers of two up to %u)",
			bs, NK_MAX_BLOCK_SIZE);
		return -EINVAL;
	}
	dev->vol_block_size = bs;
	dev->block_size = MAX(bs, 512u);
	dev->size = info->size;
	if (dev->size < dev->block_size) {
		log_err("the volume (%llu bytes) is smaller than one block",
			(unsigned long long)dev->size);
		return -EINVAL;
	}
	dev->slot_size = info->max_io ? info->max_io : RBLK_DEFAULT_MAX_IO;
	dev->nreqs = info->queue_depth ? info->queue_depth : 1;
	dev->nslots = (uint32_t)MAX(
	    1u, MIN((uint64_t)dev->nreqs, NK_POOL_MAX / dev->slot_size));
	dev->nsocks = info->queues;
	dev->read_only = dev->o->read_only || (f & RBLK_FEAT_READ_ONLY);

	/* multi-conn: a FLUSH is an fdatasync of the whole backend */
	dev->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_CAN_MULTI_CONN;
	if (f & RBLK_FEAT_FLUSH)
		dev->tflags |= NBD_FLAG_SEND_FLUSH;
	if (dev->read_only) {
		dev->tflags |= NBD_FLAG_READ_ONLY;
	} else {
		if ((f & RBLK_FEAT_FUA) && (f & RBLK_FEAT_FLUSH))
			dev->tflags |= NBD_FLAG_SEND_FUA;
		if (f & RBLK_FEAT_TRIM)
			dev->tflags |= NBD_FLAG_SEND_TRIM;
		if (f & RBLK_FEAT_ZEROES)
			dev->tflags |= NBD_FLAG_SEND_WRITE_ZEROES;
	}
	snprintf(dev->backend, sizeof(dev->backend), "%s%s", NK_BACKEND_PREFIX,
		 dev->o->url);
	return 0;
}

/*
 * Keep the kernel's requests within one pool slot (max_io). Best effort:
 * larger requests still work, through a bounce buffer.
 */
static void dev_limit_requests(const struct nk_dev *dev)
{
	char path[96], cur[32], val[32];
	int fd;

	snprintf(path, sizeof(path), "/sys/block/nbd%d/queue/max_sectors_kb",
		 dev->index);
	if (read_small_file(path, cur, sizeof(cur)) ||
	    strtoul(cur, NULL, 10) <= dev->slot_size / 1024)
		return;
	snprintf(val, sizeof(val), "%u", dev->slot_size / 1024);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, strlen(val)) < 0)
		log_debug("%s: cannot set %s: %s", path, val, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * Push the device's dirty page cache and a FLUSH to the volume while the
 * socket threads still serve. Bounded by the kernel's request timeout.
 */
static void dev_flush(const struct nk_dev *dev)
{
	int fd;

	if (dev->read_only)
		return;
	fd = open(dev->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		log_warn("%s: open for the final flush: %s", dev->path,
			 strerror(errno));
		return;
	}
	if (fsync(fd))
		log_warn("%s: final flush: %s", dev->path, strerror(errno));
	close(fd);
}

static int nk_serve(struct map_ctx *ctx, struct rblk *r,
		    const struct map_opts *o)
{
	struct nk_dev dev = {
	    .ctx = ctx,
	    .r = r,
	    .o = o,
	    .index = -1,
	    .abort_fd = -1,
	    .exit_fd = -1,
	};
	uint64_t one = 1, v;
	unsigned int i;
	bool all_gone = false;
	int ret;

	if (o->recover_id >= 0) {
		log_err("the kernel NBD front end cannot take over a device "
			"(--recover); 'rblk unmap /dev/nbd%d' and map again",
			o->recover_id);
		return -EOPNOTSUPP;
	}
	ret = dev_setup(&dev);
	if (ret)
		return ret;
	dev.abort_fd = eventfd(0, EFD_CLOEXEC);
	dev.exit_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev.abort_fd < 0 || dev.exit_fd < 0) {
		ret = -errno;
		log_err("eventfd: %s", strerror(errno));
		goto out_close_fds;
	}
	dev.socks = calloc(dev.nsocks, sizeof(*dev.socks));
	if (!dev.socks) {
		ret = -ENOMEM;
		log_err("out of memory");
		goto out_close_fds;
	}
	for (i = 0; i < dev.nsocks; i++) {
		dev.socks[i].fd = dev.socks[i].kfd = -1;
		ret = sock_init(&dev, &dev.socks[i], i);
		if (ret)
			goto out_destroy_socks;
	}
	/* threads first: the kernel may read the partition table at once */
	for (i = 0; i < dev.nsocks; i++) {
		atomic_fetch_add(&dev.live, 1);
		ret = pthread_create(&dev.socks[i].thread, NULL, sock_thread,
				     &dev.socks[i]);
		if (ret) {
			atomic_fetch_sub(&dev.live, 1);
			log_err("pthread_create: %s", strerror(ret));
			ret = -ret;
			goto out_stop_threads;
		}
		dev.socks[i].started = true;
	}

	ret = nk_nl_connect(&dev);
	/* the kernel holds its own references to the sockets now */
	for (i = 0; i < dev.nsocks; i++) {
		close(dev.socks[i].kfd);
		dev.socks[i].kfd = -1;
	}
	if (ret)
		goto out_stop_threads;
	snprintf(dev.path, sizeof(dev.path), "/dev/nbd%d", dev.index);
	dev_limit_requests(&dev);
	log_info("%s: %llu bytes, block size %u, %u sockets, request timeout "
		 "%u s, flags 0x%x",
		 dev.path, (unsigned long long)dev.size, dev.block_size,
		 dev.nsocks,
		 o->io_timeout_s ? o->io_timeout_s : NK_DEFAULT_TIMEOUT_S,
		 dev.tflags);
	map_ready(ctx, dev.path, dev.index);

	for (;;) {
		struct pollfd p[2] = {
		    {.fd = map_stop_fd(ctx), .events = POLLIN},
		    {.fd = dev.exit_fd, .events = POLLIN},
		};

		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			ret = -errno;
			log_err("poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents || map_should_stop(ctx))
			break;
		if (p[1].revents && read(dev.exit_fd, &v, sizeof(v)) < 0)
			log_debug("exit eventfd: %s", strerror(errno));
		if (!atomic_load(&dev.live)) {
			log_err("%s: the kernel closed all %u sockets; "
				"removing the device",
				dev.path, dev.nsocks);
			all_gone = true;
			ret = -ENOTCONN;
			break;
		}
	}
	if (!all_gone)
		dev_flush(&dev);
	if (nk_nl_disconnect(dev.index) && !ret)
		ret = -EIO;

out_stop_threads:
	if (write(dev.abort_fd, &one, sizeof(one)) < 0)
		log_debug("abort eventfd: %s", strerror(errno));
	for (i = 0; i < dev.nsocks; i++)
		if (dev.socks[i].started)
			pthread_join(dev.socks[i].thread, NULL);
out_destroy_socks:
	for (i = 0; i < dev.nsocks; i++)
		sock_destroy(&dev.socks[i]);
	free(dev.socks);
out_close_fds:
	if (dev.exit_fd >= 0)
		close(dev.exit_fd);
	if (dev.abort_fd >= 0)
		close(dev.abort_fd);
	return ret;
}

/* ---- probe and detach -------------------------------------------------------
 */

static int nk_probe(char *why, size_t why_len)
{
	struct nl_sock *sk;
	int family, ret;

	if (access("/sys/module/nbd", F_OK) && access("/dev/nbd0", F_OK)) {
		snprintf(why, why_len,
			 "the kernel NBD driver is not loaded "
			 "(no /sys/module/nbd; 'modprobe nbd' loads it)");
		return -ENODEV;
	}
	ret = nk_nl_open(&sk, &family, why, why_len);
	if (ret)
		return ret;
	nl_socket_free(sk);
	return 0;
}

/*
 * Disconnect /dev/nbdN whose daemon is gone. A device that another NBD
 * client attached (its backend identifier is not ours) is left alone.
 */
static int nk_detach(int dev_id)
{
	char path[96], backend[600];
	int ret;

	if (dev_id < 0)
		return -EINVAL;
	if (access("/sys/module/nbd", F_OK) && access("/dev/nbd0", F_OK))
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/block/nbd%d", dev_id);
	if (access(path, F_OK))
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/block/nbd%d/backend", dev_id);
	ret = read_small_file(path, backend, sizeof(backend));
	if (!ret && backend[0] &&
	    strncmp(backend, NK_BACKEND_PREFIX, strlen(NK_BACKEND_PREFIX))) {
		log_err("/dev/nbd%d belongs to another NBD client (backend "
			"'%s'); not detaching it",
			dev_id, backend);
		return -EBUSY;
	}
	return nk_nl_disconnect(dev_id);
}

const struct frontend_ops frontend_nbd_ops = {
    .name = "nbd",
    .probe = nk_probe,
    .serve = nk_serve,
    .detach = nk_detach,
};
