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
 * speaks the NBD transmission phase as the server (the engine shared with
 * `rblk nbd`, nbd_conn.c); the kernel is the client: 28-byte requests
 * (READ, WRITE, FLUSH, TRIM, WRITE_ZEROES, DISC), simple 16-byte replies,
 * READ data after the reply.
 *
 * Threads and ownership:
 *   - serve() runs on the daemon's main thread: it builds the sockets,
 *     buffers and threads, connects the device, calls map_ready(), then
 *     sleeps until map_stop_fd() or until every socket thread has ended,
 *     and tears the device down.
 *   - Socket thread i owns socket i, rblk queue i, its request table (in
 *     nbd_conn_run()) and its registered buffer pool: no locks on the
 *     I/O path. The only shared state is the abort eventfd (serve ->
 *     threads), the exit eventfd and the count of live threads (threads
 *     -> serve).
 *
 * Buffers: each queue has a pool of min(QD, NK_POOL_MAX / slot) slots of
 * slot = min(max_io, MAP_MAX_REQUEST) bytes, registered once with
 * rblk_register_buffer(), so READ and WRITE data move by RDMA straight
 * between the target and the memory the socket reads into or writes from.
 * The kernel's requests are capped at the slot (queue/max_sectors_kb) so
 * one slot holds any of them; a request that finds no free slot gets a
 * malloc'd buffer the library bounces.
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
#include "initiator/nbd_conn.h"
#include "initiator/nbd_pool.h"
#include "initiator/nbd_proto.h"

#define NK_DEFAULT_TIMEOUT_S 30	  /* kernel request timeout */
#define NK_POOL_MAX (64u << 20)	  /* registered buffer bytes per queue */
#define NK_SOCK_BUF (4u << 20)	  /* socket buffer we ask for, each way */
#define NK_DRAIN_MS 10000	  /* rblk I/O still in flight at teardown */
#define NK_NL_TIMEOUT_MS 30000	  /* a netlink request and its answer */
#define NK_BACKEND_PREFIX "rblk:" /* our NBD_ATTR_BACKEND_IDENTIFIER */
#define NK_MAX_BLOCK_SIZE 4096	  /* the kernel takes 512 .. PAGE_SIZE */

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

	/* belongs to the socket thread while it runs */
	void *pool; /* nslots * slot_size bytes (mmap) */
	size_t pool_len;
	bool registered; /* rblk_register_buffer() took the pool */
	bool abandoned;	 /* ended with rblk I/O in flight: keep buffers */
	char name[32];	 /* "nbd socket N", the engine's log prefix */
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
 * The volume grew: NBD_CMD_RECONFIGURE with the new size, as rbd-nbd
 * does; the kernel then announces the new capacity (a uevent, and
 * resize2fs can grow a mounted file system). Runs on the serve thread:
 * the kernel may freeze the queue while it resizes, waiting for I/O the
 * socket threads must still answer. A shrink is never passed on.
 */
static void nk_resize(struct nk_dev *dev)
{
	uint64_t size = rblk_get_size(dev->r), v;
	struct nk_nl_reply rep;
	struct nl_sock *sk;
	struct nl_msg *msg;
	char why[256];
	int family, ret;

	if (read(map_resize_fd(dev->ctx), &v, sizeof(v)) < 0 ||
	    size <= dev->size)
		return;
	ret = nk_nl_open(&sk, &family, why, sizeof(why));
	if (ret) {
		log_err("%s: cannot grow to %llu bytes: %s", dev->path,
			(unsigned long long)size, why);
		return;
	}
	msg = nk_nl_msg(family, NBD_CMD_RECONFIGURE);
	/* the kernel refuses a reconfigure that does not name the backend */
	if (!msg ||
	    nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)dev->index) < 0 ||
	    nla_put_string(msg, NBD_ATTR_BACKEND_IDENTIFIER, dev->backend) <
		0 ||
	    nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, size) < 0) {
		if (msg)
			nlmsg_free(msg);
		nl_socket_free(sk);
		log_err("%s: cannot grow: out of memory", dev->path);
		return;
	}
	ret = nk_nl_request(sk, msg, &rep);
	nl_socket_free(sk);
	if (ret) {
		log_err("%s: NBD_CMD_RECONFIGURE to %llu bytes: %s (the device "
			"keeps %llu bytes; unmap and map it again to use the "
			"rest)",
			dev->path, (unsigned long long)size, strerror(-ret),
			(unsigned long long)dev->size);
		return;
	}
	log_info("%s: grown from %llu to %llu bytes", dev->path,
		 (unsigned long long)dev->size, (unsigned long long)size);
	dev->size = size;
}

/*
 * The kernel's request timeout. On expiry the kernel shuts the socket and
 * fails the request, so by default it outlasts the library's reconnect
 * window: I/O waits while the session reconnects. 0 means none (the
 * kernel then only warns about stuck requests).
 */
static uint64_t nk_timeout_s(const struct map_opts *o)
{
	if (o->io_timeout_s)
		return o->io_timeout_s;
	if (o->ctrl_loss_timeout_s < 0)
		return 0;
	return MAX((uint64_t)NK_DEFAULT_TIMEOUT_S,
		   (uint64_t)o->ctrl_loss_timeout_s + NK_DEFAULT_TIMEOUT_S);
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
	uint64_t timeout = nk_timeout_s(o);

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

/* ---- socket threads ------------------------------------------------------ */

/* queue_lost callback of the engine; runs on socket thread s. */
static void sock_queue_lost(void *arg)
{
	struct nk_sock *s = arg;

	log_err("%s: queue %u lost its connection to the target: its I/O "
		"fails with EIO from now on (rblk unmap %s removes the "
		"device)",
		s->dev->path, s->idx, s->dev->path);
}

/*
 * Socket thread i: the shared transmission engine on socket i and rblk
 * queue i. Rules that are ours: the kernel is trusted to send only what
 * it was offered, so FUA is checked as the driver sends it (write
 * commands only) and FLUSH flags are not looked at; a protocol error
 * shuts the socket down at once (the kernel then fails over); a lost
 * queue answers NBD_EIO and keeps the socket; abort_fd (serve) drains
 * for NK_DRAIN_MS.
 */
static void *sock_thread(void *arg)
{
	struct nk_sock *s = arg;
	struct nk_dev *dev = s->dev;
	struct nbd_conn_stats st;
	struct nbd_conn_opts o = {
	    .fd = s->fd,
	    .q = s->q,
	    .name = s->name,
	    .size = dev->size,
	    .live_size = dev->r, /* the device grows with it (nk_resize()) */
	    .block_size = dev->vol_block_size,
	    .tx_flags = dev->tflags,
	    .checks = NBD_CONN_FLUSH_ANY_FLAGS | NBD_CONN_PROTO_ERR_SHUTDOWN,
	    .qlost = NBD_CONN_QLOST_FAIL_EIO,
	    .nreqs = dev->nreqs,
	    .pool = s->pool,
	    .slot_size = dev->slot_size,
	    .nslots = dev->nslots,
	    .abort_fd = dev->abort_fd,
	    .drain_ms = NK_DRAIN_MS,
	    .spin_us = dev->o->poll_spin_us,
	    .queue_lost = sock_queue_lost,
	    .arg = s,
	};
	uint64_t one = 1;

	nbd_conn_run(&o, &st);
	if (st.abandoned)
		s->abandoned = true;
	if (!st.aborted && !map_should_stop(dev->ctx))
		log_warn("%s: socket %u was closed by the kernel (request "
			 "timeout or disconnect) after %llu requests",
			 dev->path[0] ? dev->path : "nbd", s->idx,
			 (unsigned long long)st.requests);
	log_info("nbd socket %u: %llu requests, %llu failed", s->idx,
		 (unsigned long long)st.requests,
		 (unsigned long long)st.errors);
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

/* Socketpair and registered buffer pool of socket s. */
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

	snprintf(s->name, sizeof(s->name), "nbd socket %u", idx);
	s->pool_len = len;
	return nbd_pool_map(s->q, len, s->name, &s->pool, &s->registered);
}

/*
 * Free what sock_init made; runs on serve()'s thread after the socket
 * thread is joined. Buffers of a socket that abandoned rblk I/O stay
 * allocated: the library may still write into them until rblk_close().
 */
static void sock_destroy(struct nk_sock *s)
{
	if (!s->abandoned)
		nbd_pool_unmap(s->q, s->pool, s->pool_len, s->registered);
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
	dev->size = rblk_get_size(dev->r);
	if (dev->size < dev->block_size) {
		log_err("the volume (%llu bytes) is smaller than one block",
			(unsigned long long)dev->size);
		return -EINVAL;
	}
	dev->slot_size = MIN(info->max_io ? info->max_io : RBLK_DEFAULT_MAX_IO,
			     MAP_MAX_REQUEST);
	dev->nreqs = info->queue_depth ? info->queue_depth : 1;
	dev->nslots = (uint32_t)MAX(
	    1u, MIN((uint64_t)dev->nreqs, NK_POOL_MAX / dev->slot_size));
	dev->nsocks = info->queues;
	dev->read_only = dev->o->read_only || (f & RBLK_FEAT_READ_ONLY);

	dev->tflags = nbd_conn_tx_flags(f, dev->read_only);
	snprintf(dev->backend, sizeof(dev->backend), "%s%s", NK_BACKEND_PREFIX,
		 dev->o->url);
	return 0;
}

/*
 * Keep the kernel's requests within one pool slot. Best effort:
 * larger requests still work, through a bounce buffer.
 */
static void dev_limit_requests(const struct nk_dev *dev)
{
	char path[96], cur[32], val[32];
	int fd;

	snprintf(path, sizeof(path), "/sys/block/nbd%d/queue/max_sectors_kb",
		 dev->index);
	if (read_small_file(path, cur, sizeof(cur)) < 0 ||
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

/*
 * The sockets and their threads; threads first: the kernel may read the
 * partition table as soon as it has the sockets. 0 or -errno (logged);
 * dev_stop_socks() cleans up either way.
 */
static int dev_start_socks(struct nk_dev *dev)
{
	unsigned int i;
	int ret;

	dev->socks = calloc(dev->nsocks, sizeof(*dev->socks));
	if (!dev->socks) {
		log_err("out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < dev->nsocks; i++)
		dev->socks[i].fd = dev->socks[i].kfd = -1;
	for (i = 0; i < dev->nsocks; i++) {
		ret = sock_init(dev, &dev->socks[i], i);
		if (ret)
			return ret;
	}
	for (i = 0; i < dev->nsocks; i++) {
		atomic_fetch_add(&dev->live, 1);
		ret = pthread_create(&dev->socks[i].thread, NULL, sock_thread,
				     &dev->socks[i]);
		if (ret) {
			atomic_fetch_sub(&dev->live, 1);
			log_err("pthread_create: %s", strerror(ret));
			return -ret;
		}
		dev->socks[i].started = true;
	}
	return 0;
}

/* Stop the socket threads and free what dev_start_socks() made. */
static void dev_stop_socks(struct nk_dev *dev)
{
	uint64_t one = 1;
	unsigned int i;

	if (!dev->socks)
		return;
	if (write(dev->abort_fd, &one, sizeof(one)) < 0)
		log_debug("abort eventfd: %s", strerror(errno));
	for (i = 0; i < dev->nsocks; i++)
		if (dev->socks[i].started)
			pthread_join(dev->socks[i].thread, NULL);
	for (i = 0; i < dev->nsocks; i++)
		sock_destroy(&dev->socks[i]);
	free(dev->socks);
	dev->socks = NULL;
}

/*
 * Hand the sockets to the kernel (NBD_CMD_CONNECT) and tell `rblk map`
 * the device is ready. 0 or -errno.
 */
static int dev_connect(struct nk_dev *dev)
{
	int ret;

	ret = nk_nl_connect(dev);
	/* the kernel holds its own references to the sockets now */
	for (unsigned int i = 0; i < dev->nsocks; i++) {
		close(dev->socks[i].kfd);
		dev->socks[i].kfd = -1;
	}
	if (ret)
		return ret;
	snprintf(dev->path, sizeof(dev->path), "/dev/nbd%d", dev->index);
	dev_limit_requests(dev);
	log_info("%s: %llu bytes, block size %u, %u sockets, request timeout "
		 "%llu s, flags 0x%x",
		 dev->path, (unsigned long long)dev->size, dev->block_size,
		 dev->nsocks, (unsigned long long)nk_timeout_s(dev->o),
		 dev->tflags);
	map_ready(dev->ctx, dev->path, dev->index);
	return 0;
}

/*
 * Serve until `rblk unmap` (or a signal) asks to stop, or the kernel has
 * closed every socket (*all_gone). 0, -ENOTCONN (all gone) or -errno.
 */
static int dev_wait(struct nk_dev *dev, bool *all_gone)
{
	uint64_t v;

	for (;;) {
		struct pollfd p[3] = {
		    {.fd = map_stop_fd(dev->ctx), .events = POLLIN},
		    {.fd = dev->exit_fd, .events = POLLIN},
		    {.fd = map_resize_fd(dev->ctx), .events = POLLIN},
		};

		if (poll(p, 3, -1) < 0 && errno != EINTR) {
			int ret = -errno;

			log_err("poll: %s", strerror(-ret));
			return ret;
		}
		if (p[0].revents || map_should_stop(dev->ctx))
			return 0;
		if (p[2].revents)
			nk_resize(dev);
		if (p[1].revents && read(dev->exit_fd, &v, sizeof(v)) < 0)
			log_debug("exit eventfd: %s", strerror(errno));
		if (!atomic_load(&dev->live)) {
			log_err("%s: the kernel closed all %u sockets; "
				"removing the device",
				dev->path, dev->nsocks);
			*all_gone = true;
			return -ENOTCONN;
		}
	}
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
	bool all_gone = false;
	int ret;

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
	ret = dev_start_socks(&dev);
	if (!ret)
		ret = dev_connect(&dev);
	if (!ret) {
		ret = dev_wait(&dev, &all_gone);
		if (!all_gone)
			dev_flush(&dev);
		if (nk_nl_disconnect(dev.index) && !ret)
			ret = -EIO;
	}
	dev_stop_socks(&dev);
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

	if (dev_id < 0)
		return -EINVAL;
	if (access("/sys/module/nbd", F_OK) && access("/dev/nbd0", F_OK))
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/block/nbd%d", dev_id);
	if (access(path, F_OK))
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/block/nbd%d/backend", dev_id);
	if (read_small_file(path, backend, sizeof(backend)) > 0 &&
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
    .dev_prefix = "nbd",
    .probe = nk_probe,
    .serve = nk_serve,
    .detach = nk_detach,
};
