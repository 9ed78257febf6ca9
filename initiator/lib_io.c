/* SPDX-License-Identifier: MIT */
/*
 * librblk's data path: user buffer registrations, rblk_submit() and the
 * synchronous calls on it, splitting an I/O into parts, issuing them,
 * their completions, the pending backlog, rblk_poll(); and, once per
 * queue, its tags and I/Os, and the reissue of kept parts
 * after a reconnect (lib_queue_attach()). Sessions are opened in lib.c,
 * queues log in in lib_login.c, the structures are in lib_queue.h.
 *
 * Each queue is one transport connection with granted queue depth QD. Tag i
 * owns the target's slot i (slot_addr + i * max_io) from the moment we post
 * its command until we post the next command with that tag: no release
 * message is needed.
 *
 *   WRITE: RDMA WRITE (our buffer -> slot) and the command SEND, chained in
 *          one post; RC ordering places the data before the command.
 *   READ (pull, default): command SEND; on the response, RDMA READ
 *          (slot -> our buffer); the part completes with the READ.
 *   READ (push): the command carries our buffer's address and rkey; the
 *          target RDMA WRITEs it before sending the response.
 *   DIRECT (the volume offers RBLK_F_DIRECT and opts.direct allows it):
 *          READ and WRITE are one RDMA READ/WRITE against the registered
 *          volume (vol_addr + offset) and complete with that work
 *          completion; no command, no response. See issue_direct_part().
 *
 * A user I/O (struct io) larger than max_io is split into parts, one tag
 * each; parts waiting for a tag sit on the queue's pending list in order.
 * The queue owns the backlog: nr_ios (opts.max_queued) I/Os may be
 * submitted and not reaped, however few tags there are; rblk_submit()
 * refuses only past that (-EAGAIN).
 */
#include <rblk/rblk.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fifo.h"
#include "../common/freelist.h"
#include "../common/log.h"
#include "../common/proto.h"
#include "../transport/qp.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"
#include "lib_queue.h"

#define set_error lib_set_error

#define POLL_BATCH 32
/* TRIM / WRITE_ZEROES carry a 32-bit length: split them at 1 GiB */
#define NODATA_SPLIT (1u << 30)

_Static_assert((int)RBLK_IO_READ == RBLK_OP_READ &&
		   (int)RBLK_IO_WRITE == RBLK_OP_WRITE &&
		   (int)RBLK_IO_FLUSH == RBLK_OP_FLUSH &&
		   (int)RBLK_IO_TRIM == RBLK_OP_TRIM &&
		   (int)RBLK_IO_WRITE_ZEROES == RBLK_OP_WRITE_ZEROES,
	       "public opcodes are the wire opcodes");

/*
 * READ_DONE / WRITE_DATA of a tag: not in its command buffer, since a pull
 * READ's part completes (and its tag may carry a new command) before its
 * READ_DONE has necessarily left.
 */
static void *done_buf(struct rblk_queue *q, unsigned int tag)
{
	return (char *)hello_buf(q) + RBLK_MSG_MAX +
	       (size_t)tag * RBLK_DONE_SIZE;
}

/* ---- user buffer registrations
 * ------------------------------------------------ */

static struct xp_mr *umr_find(struct rblk_queue *q, const char *addr,
			      uint32_t len)
{
	unsigned int lo = 0, hi = q->nr_umrs;

	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;
		struct user_mr *u = &q->umrs[mid];

		if (addr < u->addr) {
			hi = mid;
		} else if (addr >= u->addr + u->len) {
			lo = mid + 1;
		} else {
			return (size_t)(addr - u->addr) + len <= u->len ? u->mr
									: NULL;
		}
	}
	return NULL;
}

/* Reads are pushed when the target offers it and the open chose it. */
static bool push_reads(const struct rblk_queue *q)
{
	return (q->features & RBLK_F_PUSH) &&
	       (q->r->info.features & RBLK_F_PUSH);
}

static int mr_access(struct rblk_queue *q)
{
	/*
	 * Push reads need the target to RDMA WRITE into our memory: through
	 * a window per command where the queue binds them, else by the
	 * region's own key.
	 */
	if (q->push_mw)
		return XP_ACCESS_LOCAL_WRITE | XP_ACCESS_MW_BIND;
	return XP_ACCESS_LOCAL_WRITE |
	       (push_reads(q) ? XP_ACCESS_REMOTE_WRITE : 0);
}

/*
 * Add the bind of rq's window over its push READ destination [dst, +len)
 * of region mr to the batch, ahead of its command; the caller took the
 * credit. Returns the window's new key, for the command.
 */
static uint32_t push_window_bind(struct rblk_queue *q, struct ireq *rq,
				 void *dst, struct xp_mr *mr)
{
	struct xp_send_wr *wr = qp_add(&q->qp);

	wr->opcode = XP_WR_BIND_MW;
	wr->bind.mw = rq->mw;
	wr->bind.mr = mr;
	wr->bind.addr = (uint64_t)(uintptr_t)dst;
	wr->bind.length = rq->len;
	wr->bind.access = XP_ACCESS_REMOTE_WRITE;
	wr->bind.rkey = xp_mw_next_rkey(rq->mw);
	rq->placed = 0;
	return wr->bind.rkey;
}

/*
 * The push READ rq was answered: its window must die before the READ
 * completes. Where the transport invalidates within a call (tcp: the key
 * table drops the key; no work request, no completion) that is all;
 * else LOCAL_INV it now, outside the batch (the bind went out with the
 * command, long before). 0, or -errno with the queue lost.
 */
static int push_window_end(struct rblk_queue *q, struct ireq *rq)
{
	struct xp_send_wr wr = {
	    .wr_id = qp_wrid(WRID_INV, 1, rq->tag),
	    .opcode = XP_WR_LOCAL_INV,
	    .flags = XP_SEND_SIGNALED,
	    .invalidate_rkey = rq->mw->rkey,
	};
	struct xp_send_wr *bad;
	int ret = xp_mw_inv_now(q->xc, rq->mw);

	if (!ret)
		return 0;
	if (ret != -EOPNOTSUPP) {
		lib_queue_lost(q, "a push READ's window was not bound");
		return ret;
	}
	if (!qp_take(&q->qp, 1)) {
		lib_queue_lost(q, "no send credit to end a push READ's window");
		return -EAGAIN;
	}
	if (xp_post_send(q->xc, &wr, &bad)) {
		lib_queue_lost(q, "posting a window invalidation failed");
		return -EIO;
	}
	return 0;
}

/*
 * RBLK_F_PUSH_IMM: index the tags by their windows' indexes (a key's
 * upper 24 bits stay from bind to bind). At setup and after a reconnect:
 * tearing a connection down may re-create its windows with new indexes.
 */
static void push_keys_index(struct rblk_queue *q)
{
	memset(q->mw_tag, 0, (q->mw_tag_mask + 1) * sizeof(*q->mw_tag));
	for (unsigned int t = 0; t < q->qd; t++) {
		uint32_t i = q->reqs[t].mw->rkey >> 8;

		while (q->mw_tag[i & q->mw_tag_mask])
			i++;
		q->mw_tag[i & q->mw_tag_mask] = (uint16_t)(t + 1);
	}
}

/* The tag whose window has rkey's index, or NULL. */
static struct ireq *push_key_owner(struct rblk_queue *q, uint32_t rkey)
{
	for (uint32_t i = rkey >> 8;; i++) {
		unsigned int t = q->mw_tag[i & q->mw_tag_mask];

		if (!t)
			return NULL;
		if (q->reqs[t - 1].mw->rkey >> 8 == rkey >> 8)
			return &q->reqs[t - 1];
	}
}

/*
 * A WRITE WITH IMMEDIATE of byte_len bytes naming key imm (RBLK_F_PUSH_IMM):
 * the data of the push READ whose window has that key now, all of it, once.
 * The HCA checked that the key is a live window of this connection; the
 * immediate says which one the target wrote (docs/PROTOCOL.md, "Push
 * READs over rdma").
 */
static void handle_push_data(struct rblk_queue *q, const struct xp_wc *wc)
{
	struct ireq *rq = q->push_imm ? push_key_owner(q, wc->imm) : NULL;
	char why[160];

	if (!rq || rq->mw->rkey != wc->imm || rq->state != IREQ_CMD ||
	    rq->op != RBLK_OP_READ) {
		snprintf(
		    why, sizeof(why),
		    "push data (%u bytes) naming key 0x%x, which no push READ in flight has",
		    wc->byte_len, wc->imm);
		lib_queue_lost(q, why);
		return;
	}
	if (rq->placed || wc->byte_len != rq->len) {
		snprintf(
		    why, sizeof(why),
		    "push READ on tag %u of %u bytes at %llu: data of %u bytes%s",
		    rq->tag, rq->len, (unsigned long long)rq->offset,
		    wc->byte_len, rq->placed ? " after its data" : "");
		lib_queue_lost(q, why);
		return;
	}
	rq->placed = wc->byte_len;
}

/*
 * RBLK_F_PUSH_IMM: the answer wc to push READ rq must have invalidated
 * its window (so the target can no longer write the buffer), and a
 * success must follow its whole data. true if so; false with the queue
 * lost.
 */
static bool push_imm_ended(struct rblk_queue *q, struct ireq *rq,
			   const struct xp_wc *wc, bool ok)
{
	char why[160];

	if (!(wc->flags & XP_WC_F_WITH_INV) ||
	    wc->invalidated_rkey != rq->mw->rkey) {
		snprintf(
		    why, sizeof(why),
		    "answer to the push READ on tag %u at %llu left its window open",
		    rq->tag, (unsigned long long)rq->offset);
		lib_queue_lost(q, why);
		return false;
	}
	if (ok && rq->placed != rq->len) {
		snprintf(
		    why, sizeof(why),
		    "push READ on tag %u of %u bytes at %llu answered with %u bytes placed",
		    rq->tag, rq->len, (unsigned long long)rq->offset,
		    rq->placed);
		lib_queue_lost(q, why);
		return false;
	}
	return true;
}

int rblk_register_buffer(struct rblk_queue *q, void *addr, size_t len)
{
	struct xp_mr *mr;
	unsigned int i;
	int ret;

	if (!addr || !len)
		return set_error(-EINVAL, "register: empty buffer");
	if (q->state == QUEUE_FAILED)
		return set_error(
		    -ENOTCONN, "register: queue %u is disconnected", q->index);
	for (i = 0; i < q->nr_umrs; i++) {
		struct user_mr *u = &q->umrs[i];

		if ((char *)addr < u->addr + u->len &&
		    u->addr < (char *)addr + len)
			return set_error(
			    -EEXIST,
			    "register: buffer overlaps one already registered");
	}
	if (q->nr_umrs == q->cap_umrs) {
		unsigned int cap = q->cap_umrs ? q->cap_umrs * 2 : 16;
		struct user_mr *n = realloc(q->umrs, cap * sizeof(*n));

		if (!n)
			return set_error(-ENOMEM, "register: out of memory");
		q->umrs = n;
		q->cap_umrs = cap;
	}
	/* on the group: valid on every connection of the queue, reconnecting
	 * too */
	ret = xp_group_reg_mr(q->g, addr, len, mr_access(q), &mr);
	if (ret)
		return lib_pin_error(ret, len, "rblk_register_buffer");
	for (i = q->nr_umrs; i > 0 && q->umrs[i - 1].addr > (char *)addr; i--)
		q->umrs[i] = q->umrs[i - 1];
	q->umrs[i] = (struct user_mr){.addr = addr, .len = len, .mr = mr};
	q->nr_umrs++;
	return 0;
}

int rblk_unregister_buffer(struct rblk_queue *q, void *addr)
{
	for (unsigned int i = 0; i < q->nr_umrs; i++) {
		if (q->umrs[i].addr != addr)
			continue;
		for (unsigned int t = 0; t < q->qd; t++) {
			const struct ireq *rq = &q->reqs[t];

			if (rq->state != IREQ_FREE && rq->io && rq->buf &&
			    rq->buf >= q->umrs[i].addr &&
			    rq->buf < q->umrs[i].addr + q->umrs[i].len)
				return set_error(
				    -EBUSY,
				    "unregister: buffer has I/O in flight");
		}
		xp_dereg_mr(q->umrs[i].mr);
		memmove(&q->umrs[i], &q->umrs[i + 1],
			(q->nr_umrs - i - 1) * sizeof(*q->umrs));
		q->nr_umrs--;
		return 0;
	}
	return set_error(-ENOENT, "unregister: buffer not registered");
}

/* ---- completion of parts and ios
 * ------------------------------------------------ */

uint64_t lib_acked_sum(struct rblk *r)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < r->nr_queues; i++)
		n += atomic_load_explicit(&r->queues[i].acked,
					  memory_order_relaxed);
	return n;
}

/*
 * Durability bookkeeping of a part that succeeded: an acknowledged write
 * without FUA counts until a FLUSH covers it; a FLUSH covers what was
 * acknowledged when it was issued - unless a target restart may have lost
 * some of that (r->flush_lost, lib_login.c): then it fails, once, with
 * -EIO, as fsync does after a lost write-back.
 */
static void flushed_advance(struct rblk *r, uint64_t mark)
{
	uint64_t f = atomic_load(&r->flushed);

	while (f < mark && !atomic_compare_exchange_weak(&r->flushed, &f, mark))
		;
}

static int part_durability(struct rblk_queue *q, struct ireq *rq)
{
	struct rblk *r = q->r;
	uint64_t lost;

	if (rq->op == RBLK_OP_FLUSH) {
		lost = atomic_load(&r->flush_lost);
		if (lost) {
			/*
			 * A FLUSH issued before the restart was known (one
			 * in flight across it, resent) covers only part of
			 * what may be lost: it fails, and so does the next,
			 * until one issued since has reported the whole loss
			 * (powercut.py's journal showed a FLUSH issued after
			 * the failed one claim writes the cut had taken).
			 */
			if (rq->flush_mark >= lost &&
			    atomic_compare_exchange_strong(&r->flush_lost,
							   &lost, 0))
				flushed_advance(r, rq->flush_mark);
			log_err(
			    "queue %u: FLUSH fails: the target restarted and may have lost writes it had acknowledged",
			    q->index);
			return -EIO;
		}
		flushed_advance(r, rq->flush_mark);
		return 0;
	}
	if ((rq->op == RBLK_OP_WRITE && !(rq->cmd_flags & RBLK_CMD_F_FUA)) ||
	    rq->op == RBLK_OP_TRIM || rq->op == RBLK_OP_WRITE_ZEROES)
		atomic_store_explicit(
		    &q->acked,
		    atomic_load_explicit(&q->acked, memory_order_relaxed) + 1,
		    memory_order_relaxed);
	return 0;
}

void lib_io_complete(struct rblk_queue *q, struct io *io)
{
	unsigned int slot = (q->done_head + q->done_count) % q->nr_ios;

	q->done[slot].user_data = io->user_data;
	q->done[slot].result = io->result;
	q->done_count++;
	FREELIST_PUSH(q->free_ios, io, next);
}

/*
 * A part finished with result res (0 or -errno). Its tag is free, or with
 * hold (a pull READ whose window the target still lends) held: its next
 * command returns the window.
 */
static void part_end(struct rblk_queue *q, struct ireq *rq, int res, bool hold)
{
	struct io *io = rq->io;

	if (res == 0 && rq->op == RBLK_OP_READ && !rq->mr)
		memcpy(rq->buf, lib_bounce_buf(q, rq), rq->len);
	else if (res == 0 && rq->op != RBLK_OP_READ)
		res = part_durability(q, rq);
	lib_bounce_release(q, rq);
	if (res && !io->result)
		io->result = res;
	if (!res)
		lib_conn_proved(q);
	rq->io = NULL;
	if (hold) {
		rq->state = IREQ_HELD;
		FREELIST_PUSH(q->held_tags, rq, next);
	} else {
		rq->state = IREQ_FREE;
		FREELIST_PUSH(q->free_tags, rq, next);
	}
	io->parts_inflight--;
	if (!io->parts_inflight && io->next_off >= io->end)
		lib_io_complete(q, io);
}

void lib_part_done(struct rblk_queue *q, struct ireq *rq, int res)
{
	part_end(q, rq, res, false);
}

/* ---- tags ------------------------------------------------------------------
 */

struct ireq *lib_tag_get(struct rblk_queue *q)
{
	if (q->held_tags)
		return FREELIST_POP(q->held_tags, next);
	return FREELIST_POP(q->free_tags, next);
}

void lib_tags_unhold(struct rblk_queue *q)
{
	struct ireq *rq;

	while ((rq = FREELIST_POP(q->held_tags, next))) {
		rq->state = IREQ_FREE;
		FREELIST_PUSH(q->free_tags, rq, next);
	}
}

/* ---- posting ---------------------------------------------------------------
 */

/* Post the batch; a failure loses the connection. */
int lib_batch_flush(struct rblk_queue *q)
{
	int ret = qp_flush(&q->qp);

	if (ret)
		lib_queue_lost(q, "posting work requests failed");
	return ret;
}

static void batch_done_adding(struct rblk_queue *q)
{
	if (!q->plugged)
		lib_batch_flush(q);
}

/* The SEND just added invalidates rq's window: its key dies on arrival. */
static void last_send_ends_window(struct rblk_queue *q, struct ireq *rq)
{
	struct xp_send_wr *wr = &q->qp.batch[q->qp.nr_batch - 1];

	wr->opcode = XP_WR_SEND_WITH_INV;
	wr->invalidate_rkey = rq->rkey;
}

/*
 * The SEND that ends a window: WRITE_DATA behind a WRITE's data, or a pull
 * READ's READ_DONE once its RDMA READ completed. SEND_WITH_INV of the
 * window's key, so the key is dead before the target sees the message.
 * The caller took its credit.
 */
static void add_done(struct rblk_queue *q, struct ireq *rq)
{
	struct rblk_done d = {
	    .type = rq->op == RBLK_OP_READ ? RBLK_MSG_READ_DONE
					   : RBLK_MSG_WRITE_DATA,
	    .tag = lib_wire_tag(q, rq), /* the command it ends */
	    .rkey = rq->rkey,
	};
	void *db = done_buf(q, rq->tag);

	qp_add_send(&q->qp, qp_wrid(WRID_CMD, 1, rq->tag), db,
		    (uint32_t)rblk_done_encode(db, &d));
	last_send_ends_window(q, rq);
}

void lib_add_cmd(struct rblk_queue *q, struct ireq *rq, struct rblk_cmd *cmd,
		 uint64_t wr_id)
{
	void *cb = cmd_buf(q, rq->tag);
	/* still IREQ_HELD: the caller sets the command's state after this */
	bool ret = rq->state == IREQ_HELD;

	if (ret)
		cmd->flags |= RBLK_CMD_F_DONE;
	/* a new use of the tag: answers to the last one are stale now */
	rq->gen++;
	cmd->tag = lib_wire_tag(q, rq);
	qp_add_send(&q->qp, wr_id, cb, (uint32_t)rblk_cmd_encode(cb, cmd));
	if (ret)
		last_send_ends_window(q, rq);
}

/*
 * Held tags get a READ_DONE each, as far as credits go: the queue is idle
 * (two polls in a row found nothing, or it is about to sleep), so no
 * command may come to return their windows soon, and the target wants
 * its slots back. One empty poll is not idle: a caller that reaped
 * completions polls once more before it submits the next commands (fio's
 * getevents does), and those commands are what returns the windows.
 */
static void return_held(struct rblk_queue *q)
{
	struct ireq *rq;

	while (q->held_tags && !lib_queue_down(q) && qp_take(&q->qp, 1)) {
		rq = FREELIST_POP(q->held_tags, next);
		add_done(q, rq);
		rq->state = IREQ_FREE;
		FREELIST_PUSH(q->free_tags, rq, next);
	}
}

/*
 * The second half of a data command, once the target lent its window
 * (rq->raddr/rkey), by rq's state:
 *   IREQ_NEED_READ  the RDMA READ of the window; the part completes when it
 *                   does, after READ_DONE is posted (below).
 *   IREQ_NEED_DONE  the READ completed: READ_DONE, then the part is done.
 *                   Not chained behind the READ with a fence: a fenced
 *                   SEND would hold every later command of the queue until
 *                   the READ is back. Posted in the same batch as the
 *                   commands that follow, so it costs no doorbell, and RC
 *                   ordering still delivers it before the tag's next
 *                   command.
 *   IREQ_NEED_DATA  a WRITE's RDMA WRITE and WRITE_DATA in one chain (RC
 *                   places the data first); the part completes with RESP.
 * -EAGAIN without the send credits.
 */
static int post_data(struct rblk_queue *q, struct ireq *rq)
{
	char *slot_local = lib_bounce_buf(q, rq);

	switch (rq->state) {
	case IREQ_NEED_READ:
		if (!qp_take(&q->qp, 1))
			return -EAGAIN;
		qp_add_rdma(&q->qp, XP_WR_RDMA_READ,
			    qp_wrid(WRID_READ, 1, rq->tag), XP_SEND_SIGNALED,
			    rq->mr ? rq->buf : slot_local, rq->len,
			    rq->mr ? rq->mr : lib_bounce_mr(q, rq), rq->raddr,
			    rq->rkey);
		rq->state = IREQ_READ;
		break;
	case IREQ_NEED_DONE:
		if (!qp_take(&q->qp, 1))
			return -EAGAIN;
		add_done(q, rq);
		lib_part_done(q, rq, 0);
		break;
	default: /* IREQ_NEED_DATA */
		if (!qp_take(&q->qp, 2))
			return -EAGAIN;
		if (!rq->mr)
			memcpy(slot_local, rq->buf, rq->len);
		qp_add_rdma(&q->qp, XP_WR_RDMA_WRITE, 0, 0,
			    rq->mr ? rq->buf : slot_local, rq->len,
			    rq->mr ? rq->mr : lib_bounce_mr(q, rq), rq->raddr,
			    rq->rkey);
		add_done(q, rq);
		q->qp.batch[q->qp.nr_batch - 1].wr_id =
		    qp_wrid(WRID_CMD, 2, rq->tag);
		rq->state = IREQ_CMD;
		rq->data_sent = true;
		break;
	}
	batch_done_adding(q);
	return 0;
}

/* rq waits for send credits (in order, behind any already waiting). */
static void wait_credits(struct rblk_queue *q, struct ireq *rq)
{
	FIFO_PUSH(q->wait_head, q->wait_tail, rq, next);
}

/*
 * Direct access serves READ and WRITE. FUA where the target would refuse
 * it (on a READ, or on a volume without FUA) takes the slot path, so the
 * target answers exactly as it always has.
 */
static bool direct_io(const struct rblk_queue *q, const struct io *io)
{
	/* past the window (the volume grew since login): commands */
	if (!q->direct || io->pr || io->end > q->vol_len)
		return false;
	if (io->flags & RBLK_IO_FUA)
		return io->op == RBLK_OP_WRITE && (q->features & RBLK_F_FUA);
	return io->op == RBLK_OP_READ || io->op == RBLK_OP_WRITE;
}

/*
 * Post part rq (fields filled in, rq->direct set) as one RDMA READ/WRITE
 * against the volume. With rq->direct_fua (the last part of a FUA write)
 * a FLUSH command on its tag follows in the same chained post: RC ordering
 * places this data (and every earlier part's, posted before on this
 * connection) before the target sees the FLUSH, and the part completes
 * with the FLUSH's response; otherwise with the work completion. The
 * caller checked for two send credits. Also the reissue after a reconnect,
 * against the new connection's volume registration.
 */
static void post_direct(struct rblk_queue *q, struct ireq *rq)
{
	char *slot_local = lib_bounce_buf(q, rq);
	enum xp_wr_opcode op =
	    rq->op == RBLK_OP_READ ? XP_WR_RDMA_READ : XP_WR_RDMA_WRITE;
	void *local = rq->mr ? rq->buf : slot_local;
	struct xp_mr *mr = rq->mr ? rq->mr : lib_bounce_mr(q, rq);
	uint64_t raddr = q->vol_addr + rq->offset;

	if (rq->op == RBLK_OP_WRITE && !rq->mr)
		memcpy(slot_local, rq->buf, rq->len);
	lib_deadline_set(q, rq);
	if (rq->direct_fua) {
		struct rblk_cmd cmd = {.tag = rq->tag, .opcode = RBLK_OP_FLUSH};

		qp_take(&q->qp, 2);
		qp_add_rdma(&q->qp, op, 0, 0, local, rq->len, mr, raddr,
			    q->vol_rkey);
		lib_add_cmd(q, rq, &cmd, qp_wrid(WRID_CMD, 2, rq->tag));
		rq->state = IREQ_CMD;
	} else {
		qp_take(&q->qp, 1);
		qp_add_rdma(&q->qp, op, qp_wrid(WRID_DIRECT, 1, rq->tag),
			    XP_SEND_SIGNALED, local, rq->len, mr, raddr,
			    q->vol_rkey);
		rq->state = IREQ_DIRECT;
	}
	batch_done_adding(q);
}

/*
 * The buffer of io's next READ/WRITE part of len bytes: its registration
 * in *mr, or (NULL) a bounce buffer reserved for it (lib_bounce.c), which
 * the caller attaches to the part's tag. 0; -EAGAIN: no bounce memory
 * now, the part waits; PART_FAILED: none can be had, io fails with the
 * error (set in io->result, the rest of io abandoned).
 */
#define PART_FAILED (-ENOBUFS)
static int part_buffer(struct rblk_queue *q, struct io *io, uint32_t len,
		       struct xp_mr **mr)
{
	int ret;

	*mr = umr_find(q, io->buf, len);
	if (*mr)
		return 0;
	ret = lib_bounce_reserve(q, len, mr_access(q));
	if (ret == 0 || ret == -EAGAIN)
		return ret;
	log_err("queue %u: %s", q->index, rblk_last_error());
	if (!io->result)
		io->result = ret;
	io->next_off = io->end;
	return PART_FAILED;
}

/*
 * Issue the next part of io by direct access, tracked by a free tag (a
 * bounce buffer stands in for an unregistered user buffer). -EAGAIN: no
 * tag, credits or bounce memory; PART_FAILED (part_buffer()). 0 even if
 * posting lost the connection (see issue_part()).
 */
static int issue_direct_part(struct rblk_queue *q, struct io *io)
{
	struct xp_mr *mr;
	struct ireq *rq;
	uint32_t len;
	int ret;

	/* a tag holding a window: its READ_DONE first, no command follows */
	if (!q->free_tags && q->held_tags)
		return_held(q);
	if (!q->free_tags || q->qp.sq_free < 2)
		return -EAGAIN;
	len = (uint32_t)MIN(io->end - io->next_off, (uint64_t)q->max_io);
	ret = part_buffer(q, io, len, &mr);
	if (ret)
		return ret;
	rq = FREELIST_POP(q->free_tags, next);
	rq->io = io;
	rq->op = io->op;
	rq->offset = io->next_off;
	rq->len = len;
	rq->cmd_flags = 0;
	rq->failures = 0;
	rq->timed_out = false;
	rq->direct = true;
	rq->direct_fua = io->op == RBLK_OP_WRITE && (io->flags & RBLK_IO_FUA) &&
			 io->next_off + len >= io->end;
	rq->buf = io->buf;
	rq->mr = mr;
	if (!mr)
		lib_bounce_attach(q, rq);
	io->parts_inflight++;
	io->next_off += len;
	io->buf += len;
	post_direct(q, rq);
	return 0;
}

/*
 * Post the command of part rq (its fields filled in). A WRITE of at most
 * the granted inline size carries its data in the capsule (copied into
 * the tag's command buffer, which stays untouched until the RESP: the
 * target has received the SEND by then); a larger one's data follows
 * once the target grants a window (post_data()). The caller checked for
 * send credits. Also the reissue after a reconnect, which decides inline
 * or granted anew by the new connection's grant.
 */
static void post_cmd(struct rblk_queue *q, struct ireq *rq)
{
	struct rblk_cmd cmd = {0};
	char *slot_local = lib_bounce_buf(q, rq);
	unsigned int credits = 1;

	cmd.tag = rq->tag;
	cmd.opcode = rq->op;
	cmd.offset = rq->offset;
	cmd.length = rq->len;
	cmd.flags = rq->cmd_flags;
	if (rq->io && rq->io->pr) { /* a REPORT is a READ but for this */
		cmd.opcode = rq->io->pr->opcode;
		if (rq->op != RBLK_OP_READ) {
			cmd.offset = rq->io->pr->crkey;
			cmd.addr = rq->io->pr->key2;
			cmd.rkey = rq->io->pr->arg;
		}
	}
	rq->inl = rq->op == RBLK_OP_WRITE && rq->len <= q->inline_max;
	rq->data_sent = rq->inl;
	if (rq->inl) {
		cmd.flags |= RBLK_CMD_F_INLINE;
		cmd.data = rq->buf;
	}
	if (rq->op == RBLK_OP_READ && push_reads(q)) {
		void *dst = rq->mr ? rq->buf : slot_local;
		struct xp_mr *mr = rq->mr ? rq->mr : lib_bounce_mr(q, rq);

		cmd.flags |= RBLK_CMD_F_PUSH;
		cmd.addr = (uint64_t)(uintptr_t)dst;
		if (q->push_mw) {
			cmd.rkey = push_window_bind(q, rq, dst, mr);
			credits = 2; /* the bind's, returned with the SEND's */
		} else {
			cmd.rkey = mr->rkey;
		}
	}
	lib_add_cmd(q, rq, &cmd, qp_wrid(WRID_CMD, credits, rq->tag));
	qp_take(&q->qp, credits);
	rq->state = IREQ_CMD;
	lib_deadline_set(q, rq);
	batch_done_adding(q);
}

/* Issue the next part of io on a free tag. -EAGAIN: no tag or credits. */
static int issue_part(struct rblk_queue *q, struct io *io)
{
	/* one command for all of it, no data: FLUSH, reservation commands */
	bool whole = io->op == RBLK_OP_FLUSH || (io->pr && !io->buf);
	struct xp_mr *mr = NULL;
	struct ireq *rq;
	uint32_t split, len;
	int ret;

	if (direct_io(q, io))
		return issue_direct_part(q, io);
	if ((!q->free_tags && !q->held_tags) || q->qp.sq_free < 2)
		return -EAGAIN;
	split = (io->op == RBLK_OP_READ || io->op == RBLK_OP_WRITE)
		    ? q->max_io
		    : NODATA_SPLIT;
	len = (uint32_t)MIN(io->end - io->next_off, (uint64_t)split);
	if (io->buf) {
		ret = part_buffer(q, io, len, &mr);
		if (ret)
			return ret;
	}
	rq = lib_tag_get(q);
	rq->direct = rq->direct_fua = false;
	rq->failures = 0;
	rq->timed_out = false;
	rq->io = io;
	rq->op = io->op;
	rq->offset = whole ? 0 : io->next_off;
	rq->len = whole ? 0 : len;
	rq->cmd_flags = (io->flags & RBLK_IO_FUA) ? RBLK_CMD_F_FUA : 0;
	if (io->op == RBLK_OP_FLUSH)
		rq->flush_mark = lib_acked_sum(q->r);
	rq->buf = io->buf; /* advanced past earlier parts */
	rq->mr = mr;
	if (io->buf && !mr)
		lib_bounce_attach(q, rq);
	io->parts_inflight++;
	io->next_off += rq->len;
	if (whole)
		io->next_off = io->end;
	if (io->buf)
		io->buf += rq->len;
	/*
	 * 0 even if posting lost the connection: the part is accounted for
	 * (kept for reissue), so the caller must still take a finished io
	 * off the pending list, or it would be issued again from its end.
	 */
	post_cmd(q, rq);
	return 0;
}

/* Issue parts of pending ios, in order, while tags and credits last. */
static void pump_pending(struct rblk_queue *q)
{
	struct io *io;
	int ret;

	while ((io = q->pend_head) && q->state == QUEUE_LIVE) {
		ret = issue_part(q, io);
		if (ret == PART_FAILED) {
			(void)FIFO_POP(q->pend_head, q->pend_tail, next);
			/* with parts in flight, its last part ends it */
			if (!io->parts_inflight)
				lib_io_complete(q, io);
			continue;
		}
		if (ret)
			return; /* -EAGAIN: wait for completions (or memory) */
		if (io->next_off >= io->end)
			(void)FIFO_POP(q->pend_head, q->pend_tail, next);
	}
}

static void retry_reads(struct rblk_queue *q)
{
	struct ireq *rq;
	int ret;

	while ((rq = q->wait_head) && !lib_queue_down(q)) {
		/*
		 * Unlinked only once posted, but its link read before: a
		 * READ_DONE posted frees the tag, which reuses the link.
		 */
		struct ireq *next = rq->next;

		ret = post_data(q, rq);
		if (ret == -EAGAIN)
			return;
		q->wait_head = next;
		if (!next)
			q->wait_tail = NULL;
	}
}

/* ---- completions
 * --------------------------------------------------------------- */

/* rq's window arrived: post its data half now, or wait for credits. */
static void data_ready(struct rblk_queue *q, struct ireq *rq, uint64_t addr,
		       uint32_t rkey)
{
	rq->raddr = addr;
	rq->rkey = rkey;
	rq->state = rq->op == RBLK_OP_READ ? IREQ_NEED_READ : IREQ_NEED_DATA;
	if (!q->wait_head && !post_data(q, rq))
		return;
	wait_credits(q, rq);
}

/*
 * An answer naming wire tag tag, whose index is rq's, but not rq's
 * current command (another generation: a stale or misdirected answer)
 * loses the connection; the command is sent again on the next one, never
 * completed by it. True when it did.
 */
static bool stale_answer(struct rblk_queue *q, const struct ireq *rq,
			 uint16_t tag, const char *what)
{
	char why[128];

	if (tag == lib_wire_tag(q, rq))
		return false;
	snprintf(
	    why, sizeof(why),
	    "%s for tag %u of generation %u; the tag's command is of generation %u",
	    what, rblk_tag_index(tag), rblk_tag_gen(tag),
	    rblk_tag_gen(lib_wire_tag(q, rq)));
	lib_queue_lost(q, why);
	return true;
}

static void handle_grant(struct rblk_queue *q, const void *buf, uint32_t len)
{
	struct rblk_grant g;
	struct ireq *rq;

	if (rblk_grant_decode(buf, len, lib_tags(q), q->max_io, &g)) {
		lib_queue_lost(q, "malformed GRANT from the target");
		return;
	}
	rq = &q->reqs[rblk_tag_index(g.tag)];
	if (stale_answer(q, rq, g.tag, "GRANT"))
		return;
	if (rq->state != IREQ_CMD || rq->op != RBLK_OP_WRITE || rq->inl ||
	    g.length != rq->len || rq == q->ka) {
		lib_queue_lost(q,
			       "GRANT for a tag with no WRITE waiting for one");
		return;
	}
	data_ready(q, rq, g.addr, g.rkey);
}

/*
 * A RESP with RBLK_RESP_F_SIZE (docs/PROTOCOL.md, "Live resize"): the
 * size it carries is taken (lib_size_learned()); one with PULL carries
 * none, and a KEEPALIVE asks for it (failing that, the target flags the
 * next answer again). False when q lost the connection over it.
 */
static bool size_told(struct rblk_queue *q, const struct rblk_resp *resp)
{
	if (!(q->features & RBLK_F_RESIZE)) {
		lib_queue_lost(q, "size notice from a target that did not "
				  "offer RESIZE");
		return false;
	}
	if (!resp->size) {
		lib_ka_send(q);
		return !lib_queue_down(q);
	}
	if (!lib_size_learned(q, resp->size, "told by the target")) {
		lib_queue_lost(q, "size notice not a multiple of the block "
				  "size");
		return false;
	}
	return true;
}

static void handle_response(struct rblk_queue *q, const void *buf,
			    const struct xp_wc *wc)
{
	uint32_t len = wc->byte_len;
	struct rblk_resp resp;
	struct ireq *rq;
	bool pull;
	int st;

	if (rblk_msg_type(buf, len) == RBLK_MSG_GRANT) {
		handle_grant(q, buf, len);
		return;
	}
	st = rblk_resp_decode(buf, len, lib_tags(q), &resp);
	if (st) {
		lib_queue_lost(q, "malformed response from the target");
		return;
	}
	rq = &q->reqs[rblk_tag_index(resp.tag)];
	if (stale_answer(q, rq, resp.tag, "response"))
		return;
	pull = resp.flags & RBLK_RESP_F_PULL;
	if ((resp.flags & RBLK_RESP_F_SIZE) && !size_told(q, &resp))
		return;
	if (rq == q->ka && !pull) {
		lib_ka_free(q);
		return;
	}
	if (rq->state != IREQ_CMD ||
	    (pull && (rq->op != RBLK_OP_READ || resp.length != rq->len))) {
		lib_queue_lost(q, "response for a tag with no command");
		return;
	}
	if (resp.status != RBLK_S_OK) {
		log_debug("queue %u: tag %u: %s", q->index, resp.tag,
			  rblk_status_str((int)resp.status));
		lib_conn_proved(q); /* an answer, if not the one hoped for */
		if (q->push_imm && rq->op == RBLK_OP_READ) {
			if (!push_imm_ended(q, rq, wc, false))
				return;
		} else if (q->push_mw && rq->op == RBLK_OP_READ &&
			   push_window_end(q, rq)) {
			return;
		}
		lib_part_done(q, rq, rblk_status_to_errno((int)resp.status));
		return;
	}
	/* success moved exactly the command's bytes (a FUA FLUSH: none) */
	if (resp.length != (rq->direct ? 0u : rq->len)) {
		lib_queue_lost(
		    q, "response reports a length other than the command's");
		return;
	}
	if (rq->op == RBLK_OP_WRITE && !rq->direct && !rq->data_sent) {
		lib_queue_lost(q,
			       "WRITE acknowledged before its data was sent");
		return;
	}
	if (!pull) {
		if (rq->op == RBLK_OP_READ && !push_reads(q)) {
			lib_queue_lost(q, "READ answered without its data");
			return;
		}
		if (q->push_imm && rq->op == RBLK_OP_READ) {
			if (push_imm_ended(q, rq, wc, true))
				lib_part_done(q, rq, 0);
			return;
		}
		if (q->push_mw && rq->op == RBLK_OP_READ) {
			int64_t got = xp_mw_placed(rq->mw);

			if (got != (int64_t)rq->len) {
				char why[128];

				snprintf(
				    why, sizeof(why),
				    "push READ of %u bytes answered with %lld bytes in its buffer",
				    rq->len, (long long)got);
				lib_queue_lost(q, why);
				return;
			}
			if (push_window_end(q, rq))
				return;
		}
		lib_part_done(q, rq, 0);
		return;
	}
	data_ready(q, rq, resp.addr, resp.rkey); /* fetch it from the window */
}

static void handle_wc(struct rblk_queue *q, const struct xp_wc *wc)
{
	uint32_t tag = qp_wrid_val(wc->wr_id);

	if (wc->opcode == XP_WC_FD_READY) {
		if (wc->wr_id == BOUNCE_COOKIE)
			lib_bounce_wake(
			    q); /* progress() pumps the waiting parts */
		else
			lib_timer_drain(
			    q); /* the tick runs once lib_timer_due() sees it */
		return;
	}
	/* the rest of a batch reaped from a lost connection */
	if (lib_queue_down(q))
		return;
	if (wc->status != XP_WC_SUCCESS) {
		/* a flush is a consequence: the transport may know the cause */
		const char *e = wc->status == XP_WC_FLUSH_ERR && wc->conn
				    ? xp_conn_error(wc->conn)
				    : NULL;
		char why[256];

		snprintf(why, sizeof(why), "connection failed (%s%s%s)",
			 xp_wc_status_str(wc->status), e ? ": " : "",
			 e ? e : "");
		lib_queue_lost(q, why);
		return;
	}
	if (qp_wrid_kind(wc->wr_id) != QP_WRID_RECV)
		qp_send_done(&q->qp, wc->wr_id);
	switch (qp_wrid_kind(wc->wr_id)) {
	case QP_WRID_RECV:
		if (tag >= q->qp.nr_recv) {
			lib_queue_lost(q,
				       "transport returned a bad receive id");
			break;
		}
		q->rx_seen = true;
		if (wc->flags & XP_WC_F_WITH_IMM)
			handle_push_data(q, wc);
		else
			handle_response(q, qp_recv_buf(&q->qp, tag), wc);
		if (!lib_queue_down(q) && qp_post_recv(&q->qp, tag))
			lib_queue_lost(q, "reposting a receive failed");
		break;
	case WRID_READ:
		/*
		 * The data is in. The window goes back with the tag's next
		 * command where the target takes that, else by READ_DONE now.
		 */
		if (tag < q->qd && q->reqs[tag].state == IREQ_READ) {
			struct ireq *rq = &q->reqs[tag];

			if (q->features & RBLK_F_CMD_DONE) {
				part_end(q, rq, 0, true);
				break;
			}
			rq->state = IREQ_NEED_DONE;
			q->plugged++; /* with whatever else this poll posts */
			if (q->wait_head || post_data(q, rq))
				wait_credits(q, rq);
			q->plugged--;
		}
		break;
	case WRID_DIRECT:
		if (tag < q->qd && q->reqs[tag].state == IREQ_DIRECT)
			lib_part_done(q, &q->reqs[tag], 0);
		break;
	}
}

/* Reap transport completions until none are left. */
static int progress(struct rblk_queue *q)
{
	struct xp_wc wc[POLL_BATCH];
	int n, total = 0;

	q->plugged++; /* RDMA READs and new commands go out in one post */
	do {
		n = xp_group_poll(q->g, wc, POLL_BATCH);
		if (n < 0) {
			lib_queue_lost(q, "transport poll failed");
			break;
		}
		for (int i = 0; i < n; i++)
			handle_wc(q, &wc[i]);
		total += n;
	} while (n == POLL_BATCH && !lib_queue_down(q));
	if (total && !lib_queue_down(q)) {
		q->empty_polls = 0;
		retry_reads(q);
		pump_pending(q);
	} else if (!total && ++q->empty_polls >= 2) {
		return_held(q);
	}
	q->plugged--;
	if (!q->plugged && !lib_queue_down(q))
		lib_batch_flush(q);
	return n < 0 ? n : total;
}

/* ---- public I/O API
 * ------------------------------------------------------------- */

int rblk_submit(struct rblk_queue *q, enum rblk_io_op op, void *buf,
		uint64_t offset, uint64_t len, unsigned int flags,
		void *user_data)
{
	const struct rblk_info *info = &q->r->info;
	uint64_t size = rblk_get_size(q->r); /* it grows while we run */
	struct io *io;

	/* while reconnecting, I/O queues up (at most nr_ios of it) */
	if (q->state == QUEUE_FAILED)
		return set_error(-ENOTCONN, "queue %u is disconnected",
				 q->index);
	if (op < RBLK_IO_READ || op > RBLK_IO_WRITE_ZEROES)
		return set_error(-EINVAL, "submit: unknown operation %d", op);
	if (flags & ~RBLK_IO_FUA)
		return set_error(-EINVAL, "submit: unknown flags 0x%x", flags);
	if (op != RBLK_IO_FLUSH) {
		if (!len || offset % info->block_size || len % info->block_size)
			return set_error(
			    -EINVAL,
			    "submit: offset %llu / length %llu not multiples of the block size %u",
			    (unsigned long long)offset, (unsigned long long)len,
			    info->block_size);
		if (offset > size || len > size - offset)
			return set_error(
			    -ERANGE,
			    "submit: %llu+%llu is beyond the end of the volume (%llu bytes)",
			    (unsigned long long)offset, (unsigned long long)len,
			    (unsigned long long)size);
		if ((op == RBLK_IO_READ || op == RBLK_IO_WRITE) && !buf)
			return set_error(-EINVAL, "submit: no buffer");
	}
	if (op != RBLK_IO_READ && op != RBLK_IO_FLUSH &&
	    (info->features & RBLK_FEAT_READ_ONLY))
		return set_error(-EROFS, "submit: volume is read-only");
	if (q->inflight >= q->nr_ios)
		return set_error(-EAGAIN,
				 "submit: %u I/Os already queued (max_queued)",
				 q->nr_ios);
	io = FREELIST_POP(q->free_ios, next);
	io->user_data = user_data;
	io->pr = NULL;
	io->op = (uint8_t)op;
	io->flags = flags;
	io->buf = (op == RBLK_IO_READ || op == RBLK_IO_WRITE) ? buf : NULL;
	io->next_off = op == RBLK_IO_FLUSH ? 0 : offset;
	io->end = op == RBLK_IO_FLUSH ? 1 : offset + len;
	io->parts_inflight = 0;
	io->result = 0;
	FIFO_PUSH(q->pend_head, q->pend_tail, io, next);
	q->inflight++;
	pump_pending(q);
	return 0;
}

void rblk_queue_plug(struct rblk_queue *q)
{
	q->plugged++;
}

int rblk_queue_unplug(struct rblk_queue *q)
{
	if (q->plugged && --q->plugged)
		return 0;
	if (q->state == QUEUE_FAILED)
		return set_error(-ENOTCONN, "queue %u is disconnected",
				 q->index);
	if (lib_queue_down(q))
		return 0; /* held until the connection is back */
	if (lib_batch_flush(q))
		return set_error(-ENOTCONN, "queue %u: posting failed",
				 q->index);
	return 0;
}

static int take_done(struct rblk_queue *q, struct rblk_completion *c, int max)
{
	int n = 0;

	while (n < max && q->done_count) {
		c[n++] = q->done[q->done_head];
		q->done_head = (q->done_head + 1) % q->nr_ios;
		q->done_count--;
		q->inflight--;
	}
	return n;
}

int rblk_queue_arm(struct rblk_queue *q)
{
	if (q->done_count || q->state == QUEUE_FAILED || lib_timer_due(q))
		return 1;
	if (lib_queue_down(q))
		return 0; /* the timer wakes the fd for the next attempt */
	if (q->held_tags) {
		return_held(q); /* about to sleep */
		if (!q->plugged)
			lib_batch_flush(q);
	}
	return xp_group_arm(q->g) > 0 || progress(q) > 0 || q->done_count;
}

int rblk_queue_fd(struct rblk_queue *q)
{
	return xp_group_fd(q->g);
}

unsigned int rblk_queue_ready(const struct rblk_queue *q)
{
	return q->done_count;
}

unsigned int rblk_queue_inflight(const struct rblk_queue *q)
{
	return q->inflight;
}

/*
 * Adaptive polling: reap without sleeping for up to spin_us, or until a
 * completion is ready or the queue fails. Returns true if one is ready;
 * false also when the queue's back-off says not to spin this time
 * (common/spin.h): a target slower than the spin soon stops costing one.
 */
static int spin_poll_once(void *arg)
{
	struct rblk_queue *q = arg;

	progress(q);
	return q->done_count || lib_queue_down(q);
}

static bool spin_poll(struct rblk_queue *q, unsigned int spin_us)
{
	return spin_run(&q->spin, spin_us, spin_poll_once, q);
}

int rblk_poll(struct rblk_queue *q, struct rblk_completion *c, int max,
	      int timeout_ms)
{
	uint64_t deadline =
	    timeout_ms > 0 ? now_ms() + (uint64_t)timeout_ms : 0;
	bool spun = false;

	if (max <= 0)
		return set_error(-EINVAL, "poll: max must be positive");
	/*
	 * Enough is ready: no post and no transport poll. A caller that
	 * reaps one completion and submits one I/O per call (fio's default)
	 * keeps its plug across these calls (rblk_queue_ready()), so the
	 * I/Os go out together when the ready ones run out.
	 */
	if (q->done_count >= (unsigned int)max)
		return take_done(q, c, max);
	if (!lib_queue_down(q))
		lib_batch_flush(
		    q); /* nothing plugged may wait while we sleep */
	for (;;) {
		struct pollfd pfd;
		int wait;

		if (lib_timer_due(q))
			lib_queue_tick(q);
		if (!lib_queue_down(q))
			progress(q);
		if (q->done_count)
			return take_done(q, c, max);
		if (q->state == QUEUE_FAILED)
			return set_error(-ENOTCONN, "queue %u is disconnected",
					 q->index);
		if (timeout_ms == 0)
			return 0;
		if (!spun && q->r->poll_spin_us && q->inflight) {
			spun =
			    true; /* once per call: one sleep, one decision */
			if (spin_poll(q, q->r->poll_spin_us))
				continue;
		}
		if (rblk_queue_arm(q))
			continue;
		wait = -1;
		if (timeout_ms > 0) {
			uint64_t now = now_ms();

			if (now >= deadline)
				return 0;
			wait = (int)(deadline - now);
		}
		pfd.fd = xp_group_fd(q->g);
		pfd.events = POLLIN;
		if (poll(&pfd, 1, wait) < 0 && errno != EINTR)
			return set_error(-errno, "poll: %s", strerror(errno));
	}
}

/*
 * The one I/O of a synchronous call: wait for its completion into c (1,
 * or a negative errno). A synchronous caller may not call again for a
 * long time: give a pull READ's window back now rather than with the
 * next command, as the target drops a session that holds one past its
 * window_timeout (docs/PROTOCOL.md, "What a session may hold").
 */
static int sync_wait(struct rblk_queue *q, struct rblk_completion *c)
{
	int ret;

	do {
		ret = rblk_poll(q, c, 1, -1);
	} while (ret == 0);
	if (ret < 0)
		return ret;
	if (q->held_tags && !lib_queue_down(q)) {
		return_held(q);
		if (!q->plugged)
			lib_batch_flush(q);
	}
	return ret;
}
int rblk_queue_io(struct rblk_queue *q, enum rblk_io_op op, void *buf,
		  uint64_t offset, uint64_t len, unsigned int flags)
{
	struct rblk_completion c;
	int ret;

	if (q->inflight)
		return set_error(
		    -EBUSY, "synchronous I/O on a queue with I/O in flight");
	ret = rblk_submit(q, op, buf, offset, len, flags, NULL);
	if (ret)
		return ret;
	ret = sync_wait(q, &c);
	if (ret < 0)
		return ret;
	if (c.result)
		return set_error(c.result, "%s at %llu+%llu: %s",
				 rblk_opcode_str(op),
				 (unsigned long long)offset,
				 (unsigned long long)len, strerror(-c.result));
	return 0;
}

int lib_pr_io(struct rblk_queue *q, const struct lib_pr *pr, void *buf,
	      uint32_t len)
{
	struct rblk_completion c;
	struct io *io;
	int ret;

	if (q->state == QUEUE_FAILED)
		return set_error(-ENOTCONN, "queue %u is disconnected",
				 q->index);
	if (q->inflight)
		return set_error(
		    -EBUSY,
		    "a reservation command on a queue with I/O in flight");
	io = FREELIST_POP(q->free_ios, next);
	io->user_data = NULL;
	io->pr = pr;
	io->op = buf ? RBLK_OP_READ : pr->opcode;
	io->flags = 0;
	io->buf = buf;
	io->next_off = 0;
	io->end = buf ? len : 1;
	io->parts_inflight = 0;
	io->result = 0;
	FIFO_PUSH(q->pend_head, q->pend_tail, io, next);
	q->inflight++;
	pump_pending(q);
	ret = sync_wait(q, &c);
	return ret < 0 ? ret : c.result;
}

int rblk_pread(struct rblk *r, void *buf, uint64_t len, uint64_t offset)
{
	return rblk_queue_io(&r->queues[0], RBLK_IO_READ, buf, offset, len, 0);
}

int rblk_pwrite(struct rblk *r, const void *buf, uint64_t len, uint64_t offset,
		unsigned int flags)
{
	return rblk_queue_io(&r->queues[0], RBLK_IO_WRITE, (void *)buf, offset,
			     len, flags);
}

int rblk_flush(struct rblk *r)
{
	return rblk_queue_io(&r->queues[0], RBLK_IO_FLUSH, NULL, 0, 0, 0);
}

int rblk_trim(struct rblk *r, uint64_t len, uint64_t offset)
{
	return rblk_queue_io(&r->queues[0], RBLK_IO_TRIM, NULL, offset, len, 0);
}

int rblk_write_zeroes(struct rblk *r, uint64_t len, uint64_t offset,
		      unsigned int flags)
{
	return rblk_queue_io(&r->queues[0], RBLK_IO_WRITE_ZEROES, NULL, offset,
			     len, flags);
}

/*
 * After lib_queue_connect() succeeded: resend every part kept from a lost
 * connection (on its own tag and with its own region: the granted queue
 * depth and the features are the same, the regions are the group's) and
 * start keep-alive.
 */
int lib_queue_attach(struct rblk_queue *q)
{
	if (!lib_queue_set_state(q, QUEUE_LIVE))
		return set_error(-EINVAL, "queue %u: attached while %s",
				 q->index, lib_queue_state_str(q->state));
	q->live_at = now_ms();
	q->rx_seen = false;
	q->stalled_ticks = 0;
	if (q->push_imm)
		push_keys_index(q);
	q->plugged++;
	for (unsigned int t = 0; t < q->qd; t++) {
		struct ireq *rq = &q->reqs[t];

		if (rq->state != IREQ_REISSUE)
			continue;
		if (rq->direct)
			post_direct(q, rq);
		else
			post_cmd(q, rq);
	}
	pump_pending(q);
	q->plugged--;
	if (!q->plugged)
		lib_batch_flush(q);
	if (lib_queue_down(q)) /* lost again at once: the timer is set */
		return 0;
	lib_timer_set(q, lib_tick_next(q, now_ms()));
	return 0;
}

/*
 * Once per queue, after its first login: tags and I/Os. Bounce buffers
 * come when a part first needs one (lib_bounce.c).
 */
int lib_queue_setup(struct rblk_queue *q)
{
	int ret;

	q->nr_ios = q->r->opts.max_queued
			? MAX(q->r->opts.max_queued, (unsigned int)q->qd)
			: RBLK_DEFAULT_QUEUED_FACTOR * q->qd;
	q->reqs = calloc(q->qd, sizeof(*q->reqs));
	q->ios = calloc(q->nr_ios, sizeof(*q->ios));
	q->done = calloc(q->nr_ios, sizeof(*q->done));
	if (!q->reqs || !q->ios || !q->done)
		return set_error(-ENOMEM, "out of memory");
	for (int t = q->qd - 1; t >= 0; t--) {
		q->reqs[t].tag = (uint16_t)t;
		FREELIST_PUSH(q->free_tags, &q->reqs[t], next);
	}
	for (unsigned int i = q->nr_ios; i-- > 0;) {
		FREELIST_PUSH(q->free_ios, &q->ios[i], next);
	}
	/*
	 * A window per tag for push READs, where what it received can be
	 * counted: by the transport (tcp) or by immediates (rdma).
	 */
	q->push_imm = push_reads(q) && (q->features & RBLK_F_PUSH_IMM);
	q->push_mw =
	    push_reads(q) && (xp_group_counts_placed(q->g) || q->push_imm);
	for (unsigned int t = 0; q->push_mw && t < q->qd; t++) {
		ret = xp_alloc_mw(q->g, &q->reqs[t].mw);
		if (ret)
			return set_error(ret, "allocating a memory window: %s",
					 strerror(-ret));
	}
	if (q->push_imm) {
		q->mw_tag_mask = 1;
		while (q->mw_tag_mask + 1 < 2u * q->qd)
			q->mw_tag_mask = q->mw_tag_mask * 2 + 1;
		q->mw_tag = calloc(q->mw_tag_mask + 1, sizeof(*q->mw_tag));
		if (!q->mw_tag)
			return set_error(-ENOMEM, "out of memory");
	}
	return lib_queue_attach(q);
}
