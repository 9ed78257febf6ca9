/* SPDX-License-Identifier: MIT */
/*
 * The NBD transmission-phase engine, replies side (see nbd_conn.h for the
 * contract, nbd_conn_internal.h for the split): reaping the rblk queue,
 * turning completions and failures into simple replies, and sending those
 * in batches with sendmsg(). Runs on the thread that called
 * nbd_conn_run(), like the rest of the engine: no locks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "rblk/rblk.h"
#include "common/fifo.h"
#include "common/log.h"
#include "common/util.h"
#include "initiator/nbd_conn_internal.h"

#define NC_REAP_BATCH 64
#define NC_TX_IOV 64 /* iovecs per sendmsg */

static void nc_list_push(struct nc_list *l, struct nc_req *req)
{
	FIFO_PUSH(l->head, l->tail, req, next);
}

static struct nc_req *nc_list_pop(struct nc_list *l)
{
	struct nc_req *req = FIFO_POP(l->head, l->tail, next);

	if (req)
		req->next = NULL;
	return req;
}

/* The socket is unusable: drop every queued reply. */
void nc_sock_fail(struct nc *c, int err)
{
	struct nc_req *req;

	if (c->sock_dead)
		return;
	if (err != -EPIPE && err != -ECONNRESET && err != -ETIMEDOUT)
		log_warn("%s: socket: %s", c->o->name, strerror(-err));
	c->sock_dead = true;
	nc_rx_close(c);
	while ((req = nc_list_pop(&c->tx)))
		req_free(c, req);
	c->tx_off = 0;
}

void nc_queue_reply(struct nc *c, struct nc_req *req)
{
	if (req->error)
		c->st->errors++;
	if (c->sock_dead) {
		req_free(c, req);
		return;
	}
	nbd_put32(req->reply, NBD_SIMPLE_REPLY_MAGIC);
	nbd_put32(req->reply + 4, req->error);
	nbd_put64(req->reply + 8, req->cookie);
	req->state = NC_REQ_REPLY;
	nc_list_push(&c->tx, req);
}

/* The queue's rblk connection is gone: apply the qlost policy. */
static void queue_dead(struct nc *c)
{
	if (!c->q_dead && c->o->queue_lost)
		c->o->queue_lost(c->o->arg);
	c->q_dead = true;
	if (c->o->qlost == NBD_CONN_QLOST_CLOSE)
		nc_rx_close(c);
}

/* Answer req with the NBD error for ret (a -errno from rblk). */
void nc_req_fail(struct nc *c, struct nc_req *req, int ret)
{
	req->error = nbd_errno_to_nbd(ret, nc_qlost_error(c));
	if (ret == -ENOTCONN || ret == -ESHUTDOWN)
		queue_dead(c);
	nc_queue_reply(c, req);
}

/* Complete everything the queue has finished. Returns true if any. */
bool nc_reap(struct nc *c)
{
	struct rblk_completion comp[NC_REAP_BATCH];
	bool progress = false;
	int n;

	if (!c->inflight && !c->q_dead) {
		/* idle: the queue's timers (keep-alive, reconnect) still run */
		if (rblk_poll(c->o->q, comp, NC_REAP_BATCH, 0) < 0)
			queue_dead(c);
		return false;
	}
	while (c->inflight) {
		n = rblk_poll(c->o->q, comp, NC_REAP_BATCH, 0);
		if (n < 0) {
			/* every I/O has completed; anything we still count
			 * as in flight will not come back */
			log_debug("%s: rblk_poll: %s", c->o->name,
				  strerror(-n));
			queue_dead(c);
			for (unsigned int i = 0; i < c->o->nreqs; i++) {
				struct nc_req *req = &c->reqs[i];

				if (req->state != NC_REQ_INFLIGHT)
					continue;
				req->error = nc_qlost_error(c);
				nc_queue_reply(c, req);
			}
			c->inflight = 0;
			return true;
		}
		for (int i = 0; i < n; i++) {
			struct nc_req *req = comp[i].user_data;

			c->inflight--;
			progress = true;
			if (!comp[i].result) {
				nc_queue_reply(c, req);
				continue;
			}
			log_debug("%s: %s %u@%llu: %s", c->o->name,
				  nc_cmd_name(req->type), req->len,
				  (unsigned long long)req->offset,
				  strerror(-comp[i].result));
			nc_req_fail(c, req, comp[i].result);
		}
		if (n < NC_REAP_BATCH)
			break;
	}
	return progress;
}

static size_t reply_len(const struct nc_req *req)
{
	if (req->type == NBD_CMD_READ && !req->error)
		return NBD_SIMPLE_REPLY_SIZE + req->len;
	return NBD_SIMPLE_REPLY_SIZE;
}

/*
 * Send queued replies with as few sendmsg calls as the socket allows.
 * Returns true when at least one reply went out (its request is free).
 */
bool nc_tx_flush(struct nc *c)
{
	bool progress = false;

	while (c->tx.head && !c->sock_dead) {
		struct iovec iov[NC_TX_IOV];
		struct msghdr msg = {.msg_iov = iov};
		size_t skip = c->tx_off;
		struct nc_req *req;
		int cnt = 0;
		ssize_t n;

		for (req = c->tx.head; req && cnt + 2 <= NC_TX_IOV;
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
		n = sendmsg(c->o->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				nc_sock_fail(c, -errno);
			break;
		}
		if (n > 0)
			c->last_io_ms = now_ms();
		while (n > 0) {
			size_t left;

			req = c->tx.head;
			left = reply_len(req) - c->tx_off;
			if ((size_t)n < left) {
				c->tx_off += (size_t)n;
				break;
			}
			n -= (ssize_t)left;
			c->tx_off = 0;
			nc_list_pop(&c->tx);
			req_free(c, req);
			progress = true;
		}
	}
	return progress;
}
