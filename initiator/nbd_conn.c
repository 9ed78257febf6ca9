/* SPDX-License-Identifier: MIT */
/*
 * The NBD transmission-phase engine (see nbd_conn.h for the contract):
 * requests in, the poll loop, nbd_conn_run(). Replies out are
 * nbd_conn_tx.c; nbd_conn_internal.h holds the state both share.
 *
 * Everything here runs on the thread that called nbd_conn_run() and
 * touches only that run's socket, queue, pool and the state below: no
 * locks on the I/O path.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/util.h"
#include "initiator/nbd_conn_internal.h"

#define NC_RX_BUF (64u * 1024) /* request staging buffer per socket */

/* ---- small helpers ------------------------------------------------------ */

uint32_t nbd_errno_to_nbd(int err, uint32_t q_lost)
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
	case -E2BIG:
		return NBD_EINVAL;
	case -ENOSPC:
		return NBD_ENOSPC;
	case -EOPNOTSUPP:
		return NBD_ENOTSUP;
	case -ENOTCONN:
	case -ESHUTDOWN:
		return q_lost;
	default: /* -EIO and anything else */
		return NBD_EIO;
	}
}

const char *nc_cmd_name(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ:
		return "READ";
	case NBD_CMD_WRITE:
		return "WRITE";
	case NBD_CMD_DISC:
		return "DISC";
	case NBD_CMD_FLUSH:
		return "FLUSH";
	case NBD_CMD_TRIM:
		return "TRIM";
	case NBD_CMD_CACHE:
		return "CACHE";
	case NBD_CMD_WRITE_ZEROES:
		return "WRITE_ZEROES";
	case NBD_CMD_BLOCK_STATUS:
		return "BLOCK_STATUS";
	default:
		return "unknown";
	}
}

/* ---- request validation -------------------------------------------------- */

uint16_t nbd_conn_tx_flags(uint32_t features, bool read_only)
{
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_CAN_MULTI_CONN;

	if (features & RBLK_FEAT_FLUSH)
		f |= NBD_FLAG_SEND_FLUSH;
	if (read_only)
		return f | NBD_FLAG_READ_ONLY;
	if ((features & RBLK_FEAT_FUA) && (features & RBLK_FEAT_FLUSH))
		f |= NBD_FLAG_SEND_FUA;
	if (features & RBLK_FEAT_TRIM)
		f |= NBD_FLAG_SEND_TRIM;
	if (features & RBLK_FEAT_ZEROES)
		f |= NBD_FLAG_SEND_WRITE_ZEROES;
	return f;
}

/*
 * The one place that judges a request header (magic already checked).
 * Returns 0 when the request may go to the volume, else the NBD error to
 * reply with. Order: unknown command, read-only, not offered, flags, size,
 * alignment, range. READ/WRITE above NBD_MAX_PAYLOAD fail with NBD_EINVAL
 * here; the caller disconnects instead for a WRITE of that size (its
 * payload cannot be consumed sensibly).
 */
static uint32_t nc_validate(const struct nbd_conn_opts *o, uint16_t type,
			    uint16_t flags, uint64_t offset, uint32_t len)
{
	uint16_t allowed = 0;
	bool is_write = false;
	uint64_t size;

	switch (type) {
	case NBD_CMD_READ:
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		is_write = true;
		break;
	case NBD_CMD_FLUSH:
		if (!(o->tx_flags & NBD_FLAG_SEND_FLUSH))
			return NBD_EINVAL;
		break;
	case NBD_CMD_WRITE_ZEROES:
		is_write = true;
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		break;
	default: /* CACHE, BLOCK_STATUS, RESIZE, unknown: not offered */
		return NBD_EINVAL;
	}
	if (is_write && (o->tx_flags & NBD_FLAG_READ_ONLY))
		return NBD_EPERM;
	if (type == NBD_CMD_TRIM && !(o->tx_flags & NBD_FLAG_SEND_TRIM))
		return NBD_EINVAL;
	if (type == NBD_CMD_WRITE_ZEROES &&
	    !(o->tx_flags & NBD_FLAG_SEND_WRITE_ZEROES))
		return NBD_EINVAL;
	if ((o->tx_flags & NBD_FLAG_SEND_FUA) &&
	    (is_write || (o->checks & NBD_CONN_FUA_ON_ALL)))
		allowed |= NBD_CMD_FLAG_FUA;
	if (type == NBD_CMD_FLUSH && (o->checks & NBD_CONN_FLUSH_ANY_FLAGS))
		flags = 0;
	if (flags & ~allowed)
		return NBD_EINVAL;
	if (type == NBD_CMD_FLUSH)
		return offset || len ? NBD_EINVAL : 0;
	if ((type == NBD_CMD_READ || type == NBD_CMD_WRITE) &&
	    len > NBD_MAX_PAYLOAD)
		return NBD_EINVAL;
	if (offset % o->block_size || len % o->block_size)
		return NBD_EINVAL;
	size = o->live_size ? rblk_get_size(o->live_size) : o->size;
	if (len > size || offset > size - len)
		return is_write ? NBD_ENOSPC : NBD_EINVAL;
	return 0;
}

/* ---- request state ------------------------------------------------------- */

static struct nc_req *req_alloc(struct nc *c)
{
	struct nc_req *req = FREELIST_POP(c->free_reqs, next);

	req->next = NULL;
	req->buf = NULL;
	req->slot = -1;
	req->error = 0;
	return req;
}

/* Heap bytes a READ/WRITE of len needs now: 0 when a pool slot takes it. */
static size_t heap_need(const struct nc *c, uint32_t len)
{
	if (len <= c->o->slot_size && c->nfree_slots)
		return 0;
	return ALIGN_UP((size_t)len, 4096);
}

/*
 * Whether the request header h must wait before it is read: its buffer
 * would take the heap bytes held past max_buf (and some are held, so
 * sending replies will free them).
 */
static bool over_buf_limit(const struct nc *c, const unsigned char *h)
{
	uint16_t type = nbd_get16(h + 6);
	uint32_t len = nbd_get32(h + 24);
	size_t need;

	if (!c->o->max_buf || !c->heap_bytes ||
	    (type != NBD_CMD_READ && type != NBD_CMD_WRITE) ||
	    len > NBD_MAX_PAYLOAD)
		return false;
	need = heap_need(c, len);
	return need && c->heap_bytes + need > c->o->max_buf;
}

/* A data buffer for READ/WRITE: a pool slot when one fits. */
static int req_get_buf(struct nc *c, struct nc_req *req)
{
	const struct nbd_conn_opts *o = c->o;
	size_t need = heap_need(c, req->len);
	void *p;

	if (!need) {
		req->slot = c->free_slots[--c->nfree_slots];
		req->buf = (char *)o->pool + (size_t)req->slot * o->slot_size;
		return 0;
	}
	if (posix_memalign(&p, 4096, need))
		return -ENOMEM;
	req->buf = p;
	req->slot = -1;
	req->heap_len = need;
	c->heap_bytes += need;
	return 0;
}

void nc_rx_close(struct nc *c)
{
	if (c->rx_closed)
		return;
	c->rx_closed = true;
	if (c->rx_state != NC_RX_HDR && c->rx_req) {
		req_free(c, c->rx_req);
		c->rx_req = NULL;
	}
	c->rx_state = NC_RX_HDR;
}

/* A protocol error from the peer: by policy, stop reading or shut down. */
static void proto_fail(struct nc *c)
{
	if (c->o->checks & NBD_CONN_PROTO_ERR_SHUTDOWN) {
		nc_sock_fail(c, -EPROTO);
		shutdown(c->o->fd, SHUT_RDWR);
	} else {
		nc_rx_close(c);
	}
}

static int req_submit_one(struct nc *c, struct nc_req *req)
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
	return rblk_submit(c->o->q, ops[req->type], req->buf, req->offset,
			   req->len, flags, req);
}

/*
 * Hand a validated request to the queue; one that cannot be submitted gets
 * its error reply. The queue never refuses for room (-EAGAIN): at most
 * nreqs (<= the queue depth <= its max_queued) requests exist at once.
 */
static void req_submit(struct nc *c, struct nc_req *req)
{
	int ret;

	if (c->q_dead) {
		req->error = nc_qlost_error(c);
		nc_queue_reply(c, req);
		return;
	}
	ret = req_submit_one(c, req);
	if (!ret) {
		req->state = NC_REQ_INFLIGHT;
		c->inflight++;
		return;
	}
	log_debug("%s: %s %u@%llu: submit: %s", c->o->name,
		  nc_cmd_name(req->type), req->len,
		  (unsigned long long)req->offset, strerror(-ret));
	nc_req_fail(c, req, ret);
}

/* ---- requests in --------------------------------------------------------- */

/*
 * A request header is complete in the staging buffer: decode, validate,
 * and either submit it, answer it, or start receiving its payload.
 */
static void rx_header(struct nc *c)
{
	const unsigned char *h = c->rx + c->rx_start;
	uint32_t magic = nbd_get32(h);
	struct nc_req *req;

	c->rx_start += NBD_REQUEST_SIZE;
	if (magic != NBD_REQUEST_MAGIC) {
		log_warn("%s: bad request magic 0x%08x; disconnecting",
			 c->o->name, magic);
		proto_fail(c);
		return;
	}
	req = req_alloc(c);
	req->flags = nbd_get16(h + 4);
	req->type = nbd_get16(h + 6);
	req->cookie = nbd_get64(h + 8);
	req->offset = nbd_get64(h + 16);
	req->len = nbd_get32(h + 24);
	c->st->requests++;

	if (req->type == NBD_CMD_DISC) {
		log_debug("%s: NBD_CMD_DISC", c->o->name);
		req_free(c, req);
		nc_rx_close(c);
		return;
	}
	if (req->type == NBD_CMD_WRITE && req->len > NBD_MAX_PAYLOAD) {
		log_warn("%s: WRITE of %u bytes exceeds the %u-byte maximum "
			 "payload; disconnecting",
			 c->o->name, req->len, NBD_MAX_PAYLOAD);
		req_free(c, req);
		proto_fail(c);
		return;
	}
	req->error =
	    nc_validate(c->o, req->type, req->flags, req->offset, req->len);
	if (!req->error && c->q_dead)
		req->error = nc_qlost_error(c);
	if (req->error) {
		log_debug("%s: %s flags 0x%x %u@%llu rejected: error %u",
			  c->o->name, nc_cmd_name(req->type), req->flags,
			  req->len, (unsigned long long)req->offset,
			  req->error);
	} else if (req->len == 0 && req->type != NBD_CMD_FLUSH) {
		/* unspecified by the protocol: answer success, touch nothing */
	} else if ((req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE) &&
		   req_get_buf(c, req)) {
		req->error = NBD_ENOMEM;
	} else if (req->type == NBD_CMD_WRITE) {
		req->state = NC_REQ_RECV;
		c->rx_req = req;
		c->rx_done = 0;
		c->rx_state = NC_RX_DATA;
		return;
	} else {
		req_submit(c, req);
		return;
	}
	if (req->type == NBD_CMD_WRITE && req->len) {
		/* consume the payload, then answer with the error */
		req->state = NC_REQ_RECV;
		c->rx_req = req;
		c->rx_done = 0;
		c->rx_state = NC_RX_DISCARD;
		return;
	}
	nc_queue_reply(c, req);
}

/*
 * Refill the staging buffer. Returns bytes read, 0 when the socket has
 * nothing now, -1 when reading is over (EOF or error; rx is closed).
 */
static ssize_t rx_fill(struct nc *c)
{
	ssize_t n;

	if (c->rx_start == c->rx_end) {
		c->rx_start = c->rx_end = 0;
	} else if (c->rx_start && NC_RX_BUF - c->rx_end < 4096) {
		memmove(c->rx, c->rx + c->rx_start, c->rx_end - c->rx_start);
		c->rx_end -= c->rx_start;
		c->rx_start = 0;
	}
	for (;;) {
		size_t room = NC_RX_BUF - c->rx_end;

		n = recv(c->o->fd, c->rx + c->rx_end, room, MSG_DONTWAIT);
		if (n > 0) {
			c->rx_empty = (size_t)n < room;
			c->rx_end += (size_t)n;
			c->last_io_ms = now_ms();
			return n;
		}
		if (n == 0) {
			if (c->rx_state != NC_RX_HDR ||
			    c->rx_start != c->rx_end)
				log_warn("%s: closed the connection in the "
					 "middle of a request",
					 c->o->name);
			else
				log_debug("%s: EOF", c->o->name);
			nc_rx_close(c);
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		nc_sock_fail(c, -errno);
		return -1;
	}
}

/*
 * Payload bytes for rx_req: from the staging buffer first, then straight
 * from the socket into the request's buffer when much remains. Returns
 * true when bytes moved (or reading ended).
 */
static bool rx_payload(struct nc *c, bool discard)
{
	struct nc_req *req = c->rx_req;
	size_t want = req->len - c->rx_done;
	size_t avail = c->rx_end - c->rx_start;
	size_t n;
	ssize_t r;

	if (avail) {
		n = MIN(avail, want);
		if (!discard)
			memcpy((char *)req->buf + c->rx_done,
			       c->rx + c->rx_start, n);
		c->rx_start += n;
	} else if (!discard && want >= NC_RX_BUF / 2) {
		r = recv(c->o->fd, (char *)req->buf + c->rx_done, want,
			 MSG_DONTWAIT);
		if (r == 0) {
			log_warn("%s: closed the connection in the middle of "
				 "a WRITE payload",
				 c->o->name);
			nc_rx_close(c);
			return true;
		}
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				return false;
			nc_sock_fail(c, -errno);
			return true;
		}
		n = (size_t)r;
		c->last_io_ms = now_ms();
	} else {
		return rx_fill(c) != 0;
	}
	c->rx_done += n;
	if (c->rx_done == req->len) {
		c->rx_req = NULL;
		c->rx_state = NC_RX_HDR;
		if (discard)
			nc_queue_reply(c, req);
		else
			req_submit(c, req);
	}
	return true;
}

/*
 * Read and dispatch requests until the socket has nothing more, no
 * request slot is free, or the next request's buffer would exceed max_buf
 * (back-pressure: the client's sends then block in its socket buffer).
 */
static bool rx_process(struct nc *c)
{
	bool progress = false;

	c->rx_stalled = false;
	while (!c->rx_closed) {
		switch (c->rx_state) {
		case NC_RX_HDR:
			if (!c->free_reqs)
				return progress;
			if (c->rx_end - c->rx_start < NBD_REQUEST_SIZE) {
				if (c->rx_empty || rx_fill(c) <= 0)
					return progress;
				continue;
			}
			if (over_buf_limit(c, c->rx + c->rx_start)) {
				c->rx_stalled = true;
				return progress;
			}
			rx_header(c);
			progress = true;
			break;
		case NC_RX_DATA:
		case NC_RX_DISCARD:
			if (!rx_payload(c, c->rx_state == NC_RX_DISCARD))
				return progress;
			progress = true;
			break;
		}
	}
	return progress;
}

/* ---- the loop ----------------------------------------------------------- */

/*
 * poll(p, np, 0) until something is ready or o->spin_us have passed:
 * what poll() returns, 0 when nothing came (or the back-off said not to
 * spin this time, common/spin.h).
 */
struct spin_fds {
	struct pollfd *p;
	nfds_t np;
	int ret; /* poll()'s */
};

static int spin_poll_once(void *arg)
{
	struct spin_fds *f = arg;

	f->ret = poll(f->p, f->np, 0);
	return f->ret != 0;
}

static int spin_poll(struct nc *c, struct pollfd *p, nfds_t np)
{
	struct spin_fds f = {.p = p, .np = np};

	return spin_run(&c->spin, c->o->spin_us, spin_poll_once, &f) ? f.ret
								     : 0;
}

static bool nc_done(const struct nc *c)
{
	return c->rx_closed && !c->inflight && (c->sock_dead || !c->tx.head);
}

/*
 * nc_loop()'s poll timeout in ms (-1: none) from the drain deadline and
 * the idle timeout. 0, 1 when the idle timeout has just failed the socket
 * (go round again), or -ETIMEDOUT when draining is over: give up.
 */
static inline int nc_timeout(struct nc *c, int *timeout)
{
	const struct nbd_conn_opts *o = c->o;

	if (c->aborting) {
		uint64_t now = now_ms();

		if (now >= c->deadline_ms) {
			log_warn("%s: abandoning %u requests still in flight",
				 o->name, c->inflight);
			return -ETIMEDOUT;
		}
		*timeout = (int)(c->deadline_ms - now);
	}
	if (o->idle_ms && !c->inflight && !c->sock_dead) {
		uint64_t now = now_ms(), end = c->last_io_ms + o->idle_ms;

		if (now >= end) {
			log_warn("%s: no data moved for %u ms; "
				 "disconnecting (idle timeout)",
				 o->name, o->idle_ms);
			nc_sock_fail(c, -ETIMEDOUT);
			return 1;
		}
		*timeout = *timeout < 0 ? (int)(end - now)
					: MIN(*timeout, (int)(end - now));
	}
	return 0;
}

/*
 * What a poll() that returned > 0 says for the next pass: p[isock] (asked
 * for ev), p[iq] the queue, p[iabort] abort_fd; an index < 0 was not
 * polled.
 */
static inline void nc_woken(struct nc *c, const struct pollfd *p, int isock,
			    int iq, int iabort, short ev)
{
	c->rx_empty = isock >= 0 && (ev & POLLIN) &&
		      !(p[isock].revents & (POLLIN | POLLERR | POLLHUP));
	if (iq >= 0 && p[iq].revents)
		c->q_ready = true;
	if (iabort >= 0 && p[iabort].revents) {
		log_debug("%s: shutting down", c->o->name);
		c->aborting = true;
		c->st->aborted = true;
		c->deadline_ms = now_ms() + c->o->drain_ms;
		nc_rx_close(c);
	}
	if (isock >= 0 && (p[isock].revents & POLLERR) &&
	    !(p[isock].revents & POLLIN))
		nc_sock_fail(c, -EPIPE);
}

/*
 * The loop: read and submit requests (plugged: every request of a pass
 * goes to the target in one post); reap completions when the queue may
 * have some; send replies (all of a pass in one sendmsg). When a pass
 * moves nothing, sleep in poll() on the socket (POLLIN when a request can
 * be taken, POLLOUT when replies wait), the queue fd (after
 * rblk_queue_arm() said nothing is pending; while idle too, for its
 * keep-alive timer) and abort_fd. What poll() reports decides what the
 * next pass looks at: on a host where every system call is dear, a wake-up
 * for a reply costs no recv, and one for a request no epoll_wait.
 */
static int nc_loop(struct nc *c)
{
	const struct nbd_conn_opts *o = c->o;
	int qfd = rblk_queue_fd(o->q);

	for (;;) {
		struct pollfd p[3];
		bool progress;
		int timeout = -1, ret, np = 0, isock = -1, iabort = -1, iq = -1;
		short ev = 0;

		rblk_queue_plug(o->q);
		progress = rx_process(c);
		/* a failed post shows in the next rblk_poll() */
		(void)rblk_queue_unplug(o->q);
		if (c->q_ready) {
			progress |= nc_reap(c);
			/* reap() took all there was (or the queue is dead) */
			c->q_ready = false;
		}
		progress |= nc_tx_flush(c);
		if (nc_done(c))
			return 0;
		if (progress)
			continue;

		ret = nc_timeout(c, &timeout);
		if (ret < 0)
			return ret;
		if (ret)
			continue;
		if (!c->rx_closed && (c->rx_state != NC_RX_HDR ||
				      (c->free_reqs && !c->rx_stalled)))
			ev |= POLLIN;
		if (c->tx.head && !c->sock_dead)
			ev |= POLLOUT;
		if (ev) {
			isock = np;
			p[np++] = (struct pollfd){.fd = o->fd, .events = ev};
		}
		if (c->inflight || !c->q_dead) {
			ret = rblk_queue_arm(o->q);
			if (ret > 0) {
				c->q_ready = true;
				continue;
			}
			if (ret < 0 || qfd < 0) /* cannot sleep on the fd */
				timeout = timeout < 0 ? 1 : MIN(timeout, 1);
			/* no fd: poll the queue after every (1 ms) sleep */
			c->q_ready = qfd < 0;
			if (qfd >= 0) {
				iq = np;
				p[np++] = (struct pollfd){.fd = qfd,
							  .events = POLLIN};
			}
		}
		if (!c->aborting && o->abort_fd >= 0) {
			iabort = np;
			p[np++] = (struct pollfd){.fd = o->abort_fd,
						  .events = POLLIN};
		}
		ret = 0;
		/* spin for a reply from the queue or a request from the client
		 */
		if (o->spin_us && timeout && !c->aborting &&
		    (c->inflight || (ev & POLLIN)))
			ret = spin_poll(c, p, (nfds_t)np);
		if (!ret)
			ret = poll(p, (nfds_t)np, timeout);
		if (ret < 0 && errno != EINTR) {
			ret = -errno;
			log_err("%s: poll: %s", o->name, strerror(-ret));
			return ret;
		}
		if (ret <= 0) { /* a timeout or a signal: look at everything */
			c->rx_empty = false;
			c->q_ready = true;
			continue;
		}
		nc_woken(c, p, isock, iq, iabort, ev);
	}
}

int nbd_conn_run(const struct nbd_conn_opts *o, struct nbd_conn_stats *st)
{
	struct nc c = {
	    .o = o, .st = st, .last_io_ms = now_ms(), .q_ready = true};
	int ret;

	memset(st, 0, sizeof(*st));
	c.reqs = calloc(o->nreqs, sizeof(*c.reqs));
	c.free_slots = calloc(o->nslots, sizeof(*c.free_slots));
	c.rx = malloc(NC_RX_BUF);
	if (!c.reqs || !c.free_slots || !c.rx) {
		log_err("%s: out of memory for request state", o->name);
		ret = -ENOMEM;
		goto out_free;
	}
	for (unsigned int i = o->nreqs; i-- > 0;) {
		c.reqs[i].slot = -1;
		FREELIST_PUSH(c.free_reqs, &c.reqs[i], next);
	}
	for (unsigned int i = o->nslots; i-- > 0;)
		c.free_slots[c.nfree_slots++] = (int)i;

	ret = nc_loop(&c);
	st->abandoned = c.inflight != 0;

	/*
	 * Heap buffers of requests still in flight (only after an abandoned
	 * drain) are left alone: the library may still write into them
	 * until rblk_close(). Their nc_req is never looked at again.
	 */
	for (unsigned int i = 0; i < o->nreqs; i++) {
		struct nc_req *req = &c.reqs[i];

		if (req->slot < 0 && req->state != NC_REQ_INFLIGHT)
			free(req->buf);
	}
out_free:
	free(c.rx);
	free(c.free_slots);
	free(c.reqs);
	return ret;
}
