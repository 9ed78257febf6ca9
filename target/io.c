/* SPDX-License-Identifier: MIT */
/*
 * Commands of a live connection (docs/PROTOCOL.md, "The flows"): the
 * per-tag state machine, slots from the worker's pool, the windows that
 * lend a slot to one command, responses batched per connection.
 *
 * Per command (struct treq, one per tag) treq_process() runs until the
 * state stops changing:
 *
 *   READ   SLOT -> EXEC -> BACKEND -> RESPOND -> PULLED -(READ_DONE, or
 *          the tag's next CMD with RBLK_CMD_F_DONE)-> FREE
 *                                            \-> FREE (push: the slot goes
 *                                                when its RESP completes)
 *   WRITE  SLOT -> GRANT -> DATA -(WRITE_DATA)-> EXEC -> BACKEND -> RESPOND
 *          -> FREE
 *   inline WRITE (data in the capsule)  SLOT -(data copied from the
 *          receive buffer, which is reposted)-> EXEC -> BACKEND -> RESPOND
 *          -> FREE
 *   other  EXEC -> (BACKEND) -> RESPOND -> FREE
 *
 * Key lifetime: a tag's window is bound in the chain that hands its key
 * out (GRANT, or a pull READ's RESP) and is invalidated by the initiator's
 * SEND_WITH_INV (WRITE_DATA, READ_DONE, or the tag's next CMD carrying
 * RBLK_CMD_F_DONE) before the target sees that message; a connection
 * that fails has its windows deallocated before its slots go back to the
 * pool (tconn_destroy()).
 */
#include "worker_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fifo.h"
#include "../common/log.h"
#include "../common/util.h"

_Static_assert(RBLK_RESP_SIZE <= RESP_BUF_SIZE, "response fits its buffer");
_Static_assert(RBLK_GRANT_SIZE <= RESP_BUF_SIZE, "grant fits its buffer");

static bool is_data(const struct treq *r)
{
	return r->cmd.opcode == RBLK_OP_READ || r->cmd.opcode == RBLK_OP_WRITE;
}

/* ---- the slot pool ------------------------------------------------------- */

/*
 * r got its slot: a READ executes, a WRITE asks for its data (GRANT), an
 * inline WRITE has its data copied from the capsule into the slot (the
 * backend may need aligned memory, and the receive goes back at once)
 * and executes.
 */
static void slot_got(struct treq *r)
{
	struct tconn *c = r->conn;

	if (r->cmd.opcode != RBLK_OP_WRITE) {
		r->state = TREQ_EXEC;
		return;
	}
	if (!(r->cmd.flags & RBLK_CMD_F_INLINE)) {
		r->state = TREQ_GRANT;
		return;
	}
	memcpy(r->slot, r->cmd.data, r->cmd.length);
	r->cmd.data = NULL;
	r->state = TREQ_EXEC;
	if (r->held_recv) {
		unsigned int i = r->held_recv - 1;

		r->held_recv = 0;
		if (c->state != TCONN_CLOSING && qp_post_recv(&c->qp, i))
			tconn_fail(c, "reposting a receive failed");
	}
}

/*
 * Serve waiting commands in arrival order while the pool has room. The
 * head waits until its run fits (no overtaking: a large command is never
 * starved by small ones). Re-entered from inside (a served command can
 * free a slot at once): the outer call carries on.
 */
static void slot_serve(struct worker *w)
{
	struct treq *r;

	if (w->serving_slots)
		return;
	w->serving_slots = true;
	while ((r = w->slot_wait_head)) {
		r->slot = slot_pool_alloc(&w->pool, r->cmd.length);
		if (!r->slot)
			break;
		(void)FIFO_POP(w->slot_wait_head, w->slot_wait_tail, next_slot);
		slot_got(r);
		treq_process(r);
	}
	w->serving_slots = false;
}

void slot_release(struct worker *w, void **slot)
{
	if (!*slot)
		return;
	slot_pool_free(&w->pool, *slot);
	*slot = NULL;
	slot_serve(w);
}

/* A slot for r now (nobody waiting before it), or r joins the FIFO. */
static void slot_get(struct worker *w, struct treq *r)
{
	if (!w->slot_wait_head)
		r->slot = slot_pool_alloc(&w->pool, r->cmd.length);
	if (r->slot) {
		slot_got(r);
		return;
	}
	r->state = TREQ_SLOT;
	FIFO_PUSH(w->slot_wait_head, w->slot_wait_tail, r, next_slot);
}

void slot_wait_drop(struct worker *w, struct tconn *c)
{
	struct treq **pp = &w->slot_wait_head, *r;

	w->slot_wait_tail = NULL;
	while ((r = *pp)) {
		if (r->conn == c) {
			*pp = r->next_slot;
			r->state = TREQ_FREE;
			continue;
		}
		w->slot_wait_tail = r;
		pp = &r->next_slot;
	}
}

/* ---- responses ------------------------------------------------------------ */

/* If wr_id is a push READ's response, its slot is free now. */
static void treq_push_done(struct tconn *c, uint64_t wr_id)
{
	struct worker *w = c->worker;
	void *slot;

	if (qp_wrid_kind(wr_id) != WRID_PUSH)
		return;
	slot = w->pool.base + ((size_t)qp_wrid_val(wr_id) << SLOT_PAGE_SHIFT);
	c->push_inflight--;
	slot_release(w, &slot);
}

static void batch_join(struct tconn *c)
{
	if (!c->qp.nr_batch) {
		c->next_flush = c->worker->flush_head;
		c->worker->flush_head = c;
	}
}

/*
 * The region r's slot lies in, for its window and for local access. Where
 * windows confine their peer to their own range (tcp, HCAs that follow
 * the spec) that is the pool's region. Where they reach their whole region
 * (rxe: the group's mw_reaches_region) it is the slot block's own region
 * (struct wgroup, block_mr; registered when the block formed, or here if
 * that failed), so the window reaches exactly the command's block. NULL
 * when registering failed.
 */
static struct xp_mr *block_region(struct tconn *c, struct treq *r)
{
	size_t run = slot_pool_run_bytes(r->cmd.length);
	unsigned int o = 0;
	struct xp_mr **mrp;

	if (!c->wg->block_mr[0])
		return c->wg->pool_mr;
	while (((size_t)SLOT_PAGE << o) < run)
		o++;
	mrp = block_mr_of(c->worker, c->wg, r->slot, o);
	if (!*mrp && xp_group_reg_mr(c->wg->g, r->slot, run,
				     XP_ACCESS_LOCAL_WRITE | XP_ACCESS_MW_BIND,
				     mrp))
		*mrp = NULL;
	return *mrp;
}

/*
 * Bind tag r's window over its slot with access, on the slot block's own
 * region; returns the new key, or 0 (nothing added) when the block's
 * region could not be registered.
 */
static uint32_t bind_window(struct tconn *c, struct treq *r, int access)
{
	struct xp_mw *mw = c->mw[r->cmd.tag];
	struct xp_mr *mr = block_region(c, r);
	struct xp_send_wr *wr;

	if (!mr)
		return 0;
	wr = qp_add(&c->qp);
	wr->opcode = XP_WR_BIND_MW;
	wr->bind.mw = mw;
	wr->bind.mr = mr;
	wr->bind.addr = (uint64_t)(uintptr_t)r->slot;
	wr->bind.length = r->cmd.length;
	wr->bind.access = access;
	wr->bind.rkey = xp_mw_next_rkey(mw);
	return wr->bind.rkey;
}

/*
 * Add r's response to the connection's batch, taking its send credits:
 * a pull READ's window bind in front of it, a push READ's RDMA WRITE.
 * tconn_flush_sends() posts it. 0, or -EAGAIN without credits.
 */
static int treq_post_response(struct treq *r)
{
	struct tconn *c = r->conn;
	struct worker *w = c->worker;
	struct rblk_resp resp = {
		.tag = r->cmd.tag,
		.status = (uint32_t)r->status,
		.length = r->status ? 0 : r->cmd.length,
	};
	bool read = !r->status && r->cmd.opcode == RBLK_OP_READ;
	bool push = read && (r->cmd.flags & RBLK_CMD_F_PUSH);
	unsigned int need = read ? 2 : 1;
	uint64_t wrid = qp_wrid(WRID_RESP, need, r->cmd.tag);
	struct xp_mr *mr = NULL;

	if (!qp_take(&c->qp, need))
		return -EAGAIN;
	batch_join(c);
	r->resp_batch = c->flushes + 1;
	if (push && !(mr = block_region(c, r))) { /* no region: it fails */
		slot_release(w, &r->slot);
		resp.status = RBLK_S_NO_RESOURCES;
		resp.length = 0;
		r->status = RBLK_S_NO_RESOURCES;
		push = false;
		read = false; /* the RESP's completion returns both credits */
	}
	if (push) {
		/* RC ordering places the data before the response; the
		 * slot is the NIC's until that response completes */
		qp_add_rdma(&c->qp, XP_WR_RDMA_WRITE, 0, 0, r->slot,
			    r->cmd.length, mr, r->cmd.addr, r->cmd.rkey);
		wrid = qp_wrid(WRID_PUSH, need,
			       (uint32_t)(((char *)r->slot - w->pool.base) >>
					  SLOT_PAGE_SHIFT));
		r->slot = NULL;
		c->push_inflight++;
	} else if (read) {
		resp.flags = RBLK_RESP_F_PULL;
		resp.addr = (uint64_t)(uintptr_t)r->slot;
		resp.rkey = bind_window(c, r, XP_ACCESS_REMOTE_READ);
		if (!resp.rkey) { /* no window: the READ fails, the slot goes */
			slot_release(w, &r->slot);
			resp.flags = 0;
			resp.addr = 0;
			resp.status = RBLK_S_NO_RESOURCES;
			resp.length = 0;
			r->status = RBLK_S_NO_RESOURCES;
		}
	}
	qp_add_send(&c->qp, wrid, r->resp_buf,
		    (uint32_t)rblk_resp_encode(r->resp_buf, &resp));
	return 0;
}

/* A WRITE's window and GRANT, in one chain. 0, or -EAGAIN. */
static int treq_post_grant(struct treq *r)
{
	struct tconn *c = r->conn;
	struct rblk_grant g = {
		.tag = r->cmd.tag,
		.length = r->cmd.length,
		.addr = (uint64_t)(uintptr_t)r->slot,
	};

	if (!qp_take(&c->qp, 2))
		return -EAGAIN;
	batch_join(c); /* before anything is added: it tests nr_batch */
	g.rkey = bind_window(c, r, XP_ACCESS_REMOTE_WRITE);
	if (!g.rkey) { /* no window: the WRITE fails */
		c->qp.sq_free += 2;
		return -ENOMEM;
	}
	r->resp_batch = c->flushes + 1;
	qp_add_send(&c->qp, qp_wrid(WRID_RESP, 2, r->cmd.tag), r->resp_buf,
		    (uint32_t)rblk_grant_encode(r->resp_buf, &g));
	return 0;
}

/*
 * Post c's batch as one chain: one doorbell on rdma, one sendmsg() on
 * tcp. A closing connection's batch is dropped (its credits no longer
 * matter; a push slot in it is freed by tconn_destroy()). Runs on the
 * worker thread, before it sleeps.
 */
static void tconn_flush_sends(struct tconn *c)
{
	c->flushes++;
	if (c->state == TCONN_CLOSING) {
		/* never posted: nothing reads these push slots */
		for (unsigned int i = 0; i < c->qp.nr_batch; i++)
			treq_push_done(c, c->qp.batch[i].wr_id);
		qp_drop(&c->qp);
	} else if (qp_flush(&c->qp)) {
		tconn_fail(c, "posting responses failed");
	}
}

void worker_flush_sends(struct worker *w)
{
	struct tconn *c;

	while ((c = w->flush_head)) {
		w->flush_head = c->next_flush;
		c->next_flush = NULL;
		tconn_flush_sends(c);
	}
}

static void wait_credits(struct tconn *c, struct treq *r)
{
	FIFO_PUSH(c->wait_head, c->wait_tail, r, next_wait);
}

static void treq_account(struct worker *w, struct treq *r)
{
	struct tconn *c = r->conn;
	enum stat_op op;
	uint64_t lat_us;
	bool ok = r->status == RBLK_S_OK;

	switch (r->cmd.opcode) {
	case RBLK_OP_READ:
		op = STAT_READ;
		break;
	case RBLK_OP_WRITE:
		op = STAT_WRITE;
		break;
	case RBLK_OP_FLUSH:
		op = STAT_FLUSH;
		break;
	case RBLK_OP_TRIM:
		op = STAT_TRIM;
		break;
	case RBLK_OP_WRITE_ZEROES:
		op = STAT_WRITE_ZEROES;
		break;
	default:
		return; /* KEEPALIVE, DISCONNECT, undecodable */
	}
	lat_us = (now_ns() - r->t_recv_ns) / 1000u;
	stats_account(&c->stats, op, r->cmd.length, ok, lat_us);
	stats_account(&c->exp->wstats[w->index], op, r->cmd.length, ok,
		      lat_us);
}

void treq_process(struct treq *r)
{
	struct tconn *c = r->conn;
	struct worker *w = c->worker;
	enum treq_state prev;
	int ret;

	do {
		prev = r->state;
		if (c->state == TCONN_CLOSING &&
		    (r->state == TREQ_GRANT || r->state == TREQ_EXEC ||
		     r->state == TREQ_RESPOND)) {
			/* no window of r is bound in these states */
			slot_release(w, &r->slot);
			r->state = TREQ_FREE;
			break;
		}
		switch (r->state) {
		case TREQ_FREE:
		case TREQ_SLOT:
		case TREQ_DATA:
		case TREQ_BACKEND:
		case TREQ_PULLED:
			break;
		case TREQ_GRANT:
			ret = treq_post_grant(r);
			if (ret == -EAGAIN) {
				wait_credits(c, r);
				return;
			}
			if (ret) {
				slot_release(w, &r->slot);
				r->status = RBLK_S_NO_RESOURCES;
				r->state = TREQ_RESPOND;
				break;
			}
			r->state = TREQ_DATA;
			break;
		case TREQ_EXEC:
			r->result = 0;
			ret = c->exp->ops->submit(w, r);
			if (ret == 0) {
				c->backend_inflight++;
				r->state = TREQ_BACKEND;
			} else if (ret == 1) {
				r->status = rblk_errno_to_status(r->result);
				r->state = TREQ_RESPOND;
			} else {
				/*
				 * Engine full: park until completions free
				 * room. Counted as backend I/O so the
				 * connection outlives the parked request.
				 */
				c->backend_inflight++;
				FIFO_PUSH(w->busy_head, w->busy_tail, r,
					  next_wait);
				return;
			}
			break;
		case TREQ_RESPOND:
			/* a failed READ or any WRITE is done with its slot */
			if (r->cmd.opcode == RBLK_OP_WRITE || r->status)
				slot_release(w, &r->slot);
			if (treq_post_response(r)) { /* -EAGAIN */
				wait_credits(c, r);
				return;
			}
			treq_account(w, r);
			/*
			 * A pull READ keeps its slot, lent through its window,
			 * until READ_DONE; any other command's tag is the
			 * initiator's again (r->resp_batch catches a command
			 * sent before the response went out).
			 */
			r->state = r->slot ? TREQ_PULLED : TREQ_FREE;
			break;
		}
	} while (r->state != prev);
}

void treq_backend_done(struct treq *r, int res)
{
	struct tconn *c = r->conn;

	c->backend_inflight--;
	if (res == -EINVAL && r->odirect) {
		/* the file system refused this O_DIRECT I/O: go buffered */
		if (!atomic_exchange(&c->exp->odirect_failed, true))
			log_warn("export %s: O_DIRECT I/O refused; switching to buffered I/O",
				 c->exp->name);
		r->state = TREQ_EXEC;
		treq_process(r);
		return;
	}
	if (res >= 0 && (r->cmd.opcode == RBLK_OP_READ ||
			 r->cmd.opcode == RBLK_OP_WRITE) &&
	    (uint32_t)res != r->cmd.length) {
		log_warn("export %s: short %s at %llu: %d of %u bytes",
			 c->exp->name, rblk_opcode_str(r->cmd.opcode),
			 (unsigned long long)r->cmd.offset, res, r->cmd.length);
		res = -EIO;
	}
	r->result = res < 0 ? res : 0;
	r->status = rblk_errno_to_status(r->result);
	if (r->result)
		log_warn("export %s: %s at %llu+%u failed: %s", c->exp->name,
			 rblk_opcode_str(r->cmd.opcode),
			 (unsigned long long)r->cmd.offset, r->cmd.length,
			 strerror(-r->result));
	r->state = TREQ_RESPOND;
	treq_process(r);
}

/*
 * The SEND_WITH_INV that ends a window must have killed exactly r's
 * window: anything else (no invalidation, another key) is a protocol
 * violation.
 */
static bool killed_window(struct tconn *c, const struct treq *r,
			  const struct xp_wc *wc)
{
	return (wc->flags & XP_WC_F_WITH_INV) &&
	       wc->invalidated_rkey == c->mw[r - c->reqs]->rkey;
}

/* A pull READ's window is dead: its slot goes back, the tag is free. */
static void pulled_done(struct tconn *c, struct treq *r)
{
	slot_release(c->worker, &r->slot);
	r->state = TREQ_FREE;
}

/*
 * A CMD on a live connection, received as wc. With
 * RBLK_CMD_F_DONE it first ends the tag's pull READ, as a READ_DONE
 * would: decoded whatever else is wrong with it, since the command is
 * answered on that tag. True when an inline WRITE waiting for a slot
 * keeps that buffer.
 */
static bool handle_command(struct tconn *c, const void *buf,
			   const struct xp_wc *wc)
{
	struct rblk_cmd cmd;
	struct treq *r;
	int tag, st;

	tag = rblk_cmd_peek_tag(buf, wc->byte_len, c->lim.queue_depth);
	if (tag < 0) {
		tconn_fail(c, "malformed command capsule (header, length or tag)");
		return false;
	}
	r = &c->reqs[tag];
	st = rblk_cmd_decode(buf, wc->byte_len, &c->lim, &cmd);
	if (cmd.flags & RBLK_CMD_F_DONE) {
		if (r->state != TREQ_PULLED) {
			tconn_fail(c, "command returns a read window its tag does not hold");
			return false;
		}
		if (!killed_window(c, r, wc)) {
			tconn_fail(c, "command returning a read window did not invalidate it");
			return false;
		}
		pulled_done(c, r);
	} else if (wc->flags & XP_WC_F_WITH_INV) {
		tconn_fail(c, "command invalidated a key without returning its window");
		return false;
	}
	if (r->state != TREQ_FREE || r->resp_batch > c->flushes) {
		tconn_fail(c, "command on a tag still in use");
		return false;
	}
	r->held_recv = 0;
	r->t_recv_ns = now_ns();
	r->cmd = cmd;
	r->cmd.tag = (uint16_t)tag;
	if (st) {
		log_debug("conn %llu: tag %d: %s rejected: %s",
			  (unsigned long long)c->id, tag,
			  rblk_opcode_str(r->cmd.opcode), rblk_status_str(st));
		r->status = st;
		r->cmd.flags = 0; /* never push data for a refused command */
		r->state = TREQ_RESPOND;
	} else if (r->cmd.opcode == RBLK_OP_KEEPALIVE ||
		   r->cmd.opcode == RBLK_OP_DISCONNECT) {
		/* DISCONNECT: answer; the initiator then closes its side */
		r->status = RBLK_S_OK;
		r->state = TREQ_RESPOND;
	} else if (is_data(r)) {
		slot_get(c->worker, r);
		if (r->state == TREQ_SLOT && r->cmd.data) {
			r->held_recv = qp_wrid_val(wc->wr_id) + 1;
			return true;
		}
	} else {
		r->state = TREQ_EXEC;
	}
	treq_process(r);
	return false;
}

/*
 * READ_DONE or WRITE_DATA: the initiator's SEND_WITH_INV killed the tag's
 * window before we see it. Anything else (no invalidation, another key,
 * a tag not waiting for it) is a protocol violation.
 */
static void handle_done(struct tconn *c, const void *buf,
			const struct xp_wc *wc)
{
	struct rblk_done d;
	struct treq *r;
	enum treq_state want;

	if (rblk_done_decode(buf, wc->byte_len, c->lim.queue_depth, &d)) {
		tconn_fail(c, "malformed READ_DONE/WRITE_DATA");
		return;
	}
	r = &c->reqs[d.tag];
	want = d.type == RBLK_MSG_READ_DONE ? TREQ_PULLED : TREQ_DATA;
	if (r->state != want) {
		tconn_fail(c, d.type == RBLK_MSG_READ_DONE ?
				      "READ_DONE for a tag with no read window" :
				      "WRITE_DATA for a tag with no write window");
		return;
	}
	if (!killed_window(c, r, wc) || d.rkey != c->mw[d.tag]->rkey) {
		tconn_fail(c, "READ_DONE/WRITE_DATA did not invalidate its window");
		return;
	}
	if (d.type == RBLK_MSG_READ_DONE) {
		pulled_done(c, r);
		return;
	}
	/*
	 * Where the transport knows (tcp), a WRITE_DATA before the whole
	 * window was written would write what the slot held before: the
	 * command fails instead (issue 25). rdma cannot tell.
	 */
	if (!xp_mw_fully_written(c->mw[d.tag])) {
		log_ratelimited(LOG_WARN,
				"conn %llu (%s): tag %u: WRITE_DATA before its "
				"window was written in full; failing the command",
				(unsigned long long)c->id, c->peer, d.tag);
		r->status = RBLK_S_INVALID;
		r->state = TREQ_RESPOND;
		treq_process(r);
		return;
	}
	r->state = TREQ_EXEC;
	treq_process(r);
}

bool treq_recv(struct tconn *c, const void *buf, const struct xp_wc *wc)
{
	switch (rblk_msg_type(buf, wc->byte_len)) {
	case RBLK_MSG_CMD:
		return handle_command(c, buf, wc);
	case RBLK_MSG_READ_DONE:
	case RBLK_MSG_WRITE_DATA:
		handle_done(c, buf, wc);
		break;
	case -1:
		tconn_fail(c, "malformed message");
		break;
	default:
		tconn_fail(c, "unexpected message type");
		break;
	}
	return false;
}

void treq_send_done(struct tconn *c, const struct xp_wc *wc)
{
	struct treq *r;

	treq_push_done(c, wc->wr_id); /* whatever the status */
	if (wc->status != XP_WC_SUCCESS)
		return;
	qp_send_done(&c->qp, wc->wr_id);
	while (c->wait_head && c->state != TCONN_CLOSING) {
		r = FIFO_POP(c->wait_head, c->wait_tail, next_wait);
		treq_process(r);
		if (r->state == TREQ_RESPOND || r->state == TREQ_GRANT)
			break; /* went back on the wait list */
	}
}
