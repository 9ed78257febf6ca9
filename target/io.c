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
 * A command over its export's or host's QoS limits (qos.h) first waits
 * in THROTTLE, on its connection's FIFO, until qos_serve() lets it start.
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

#include "backend.h"
#include "limits.h"

_Static_assert(RBLK_RESP_SIZE <= RESP_BUF_SIZE, "response fits its buffer");
_Static_assert(RBLK_GRANT_SIZE <= RESP_BUF_SIZE, "grant fits its buffer");

static bool is_data(const struct treq *r)
{
	return r->cmd.opcode == RBLK_OP_READ ||
	       r->cmd.opcode == RBLK_OP_WRITE ||
	       r->cmd.opcode == RBLK_OP_PR_REPORT;
}

/* Its data goes to the initiator as a READ's does (pull or push). */
static bool reads_out(uint8_t opcode)
{
	return opcode == RBLK_OP_READ || opcode == RBLK_OP_PR_REPORT;
}

/* ---- the slot pool ------------------------------------------------------- */

/*
 * Pool pages hold whatever their last command left: another connection's
 * data, or another export's. A window lends a slot's whole run to the
 * peer (over rxe a window reaches its block's whole region), and over rdma
 * nothing tells the target how much of a WRITE window the peer wrote, so
 * before a window shows a run to connection c every page of it that may
 * hold anyone else's bytes is cleared (docs/PROTOCOL.md, "What a
 * session may hold"). worker->page_owner[i] names the connection whose
 * bytes page i may hold: c's own pages are lent as they are, so a
 * session that reuses its runs (the common case: one session a worker,
 * or runs that stay with their connection) clears nothing.
 */
static size_t page_of(const struct worker *w, const void *addr)
{
	return (size_t)((const char *)addr - w->pool.base) >> SLOT_PAGE_SHIFT;
}

/* Before r's window shows its run to its connection: clear what is not c's. */
static void slot_scrub(struct tconn *c, struct treq *r)
{
	struct worker *w = c->worker;
	size_t first = page_of(w, r->slot);
	size_t n = slot_pool_run_bytes(r->cmd.length) >> SLOT_PAGE_SHIFT;

	for (size_t i = first; i < first + n; i++) {
		if (w->page_owner[i] == c->id)
			continue;
		memset(w->pool.base + (i << SLOT_PAGE_SHIFT), 0, SLOT_PAGE);
		w->page_owner[i] = c->id;
	}
}

/*
 * r's first len bytes now hold its connection's data (a READ the backend
 * filled, an in-capsule WRITE copied in), or bytes of unknown mix when
 * !ok (a failed READ: no window will show them). A page the data covers
 * whole is c's. A page it covers in part keeps someone else's bytes
 * behind c's: those are cleared here (never c's own, which the window is
 * about to show), and the page is c's.
 */
static void slot_filled(struct tconn *c, struct treq *r, bool ok)
{
	struct worker *w = c->worker;
	size_t first = page_of(w, r->slot);
	size_t whole = r->cmd.length >> SLOT_PAGE_SHIFT;
	size_t part = r->cmd.length & (SLOT_PAGE - 1);
	size_t i;

	for (i = first; i < first + whole; i++)
		w->page_owner[i] = ok ? c->id : 0;
	if (!part)
		return;
	if (!ok) {
		w->page_owner[i] = 0;
	} else if (w->page_owner[i] != c->id) {
		memset(w->pool.base + (i << SLOT_PAGE_SHIFT) + part, 0,
		       SLOT_PAGE - part);
		w->page_owner[i] = c->id;
	}
}

/*
 * Per source address on this worker: the pool bytes its sessions hold,
 * capped at worker->share_host. Made at a connection's first slot, gone
 * with the last connection that used it.
 */
struct host_share {
	char addr[64];
	uint64_t held;
	unsigned int refs;
	struct host_share *next;
};

static struct host_share *host_share_get(struct worker *w, const char *peer)
{
	struct host_share *h;
	char addr[64];

	limits_host_of(peer, addr, sizeof(addr));
	for (h = w->shares; h; h = h->next)
		if (!strcmp(h->addr, addr))
			break;
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h)
			return NULL;
		snprintf(h->addr, sizeof(h->addr), "%s", addr);
		h->next = w->shares;
		w->shares = h;
	}
	h->refs++;
	return h;
}

void slot_share_put(struct worker *w, struct tconn *c)
{
	struct host_share **pp, *h = c->hs;

	c->hs = NULL;
	if (!h || --h->refs)
		return;
	for (pp = &w->shares; *pp != h; pp = &(*pp)->next)
		;
	*pp = h->next;
	free(h);
}

/* Would r fit c's shares once the pool has room? */
static bool within_share(const struct tconn *c, const struct treq *r)
{
	const struct worker *w = c->worker;
	uint64_t run = slot_pool_run_bytes(r->cmd.length);

	return c->held + run <= w->share_session &&
	       (!c->hs || c->hs->held + run <= w->share_host);
}

/*
 * A run for r within its connection's and its host's share, or NULL
 * (over a share, or no run that large free now: it waits). A host whose
 * entry cannot be made is held to the session share alone.
 */
static void *slot_alloc(struct tconn *c, struct treq *r)
{
	struct worker *w = c->worker;
	uint64_t run = slot_pool_run_bytes(r->cmd.length);
	void *slot;

	if (!c->hs)
		c->hs = host_share_get(w, c->peer);
	if (!within_share(c, r))
		return NULL;
	slot = slot_pool_alloc(&w->pool, r->cmd.length);
	if (!slot)
		return NULL;
	c->held += run;
	if (c->hs)
		c->hs->held += run;
	return slot;
}

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
	slot_filled(c, r, true);
	r->cmd.data = NULL;
	r->state = TREQ_EXEC;
	if (r->held_recv) {
		unsigned int i = r->held_recv - 1;

		r->held_recv = 0;
		tconn_repost(c, i);
	}
}

/*
 * c has commands waiting: in turn on worker->slot_conns when its next
 * one is within its shares, else parked on worker->slot_parked until its
 * own or its host's slots come back (slot_unpark()).
 */
static void slot_queue_conn(struct worker *w, struct tconn *c)
{
	if (c->slot_queued || c->slot_parked || !c->slot_head)
		return;
	if (!within_share(c, c->slot_head)) {
		c->slot_parked = true;
		c->next_slot_conn = w->slot_parked;
		w->slot_parked = c;
		return;
	}
	c->slot_queued = true;
	c->next_slot_conn = NULL;
	FIFO_PUSH(w->slot_conns_head, w->slot_conns_tail, c, next_slot_conn);
}

/* Take c off the parked list (it is on it). */
static void slot_unpark_one(struct worker *w, struct tconn *c)
{
	struct tconn **pp;

	for (pp = &w->slot_parked; *pp != c; pp = &(*pp)->next_slot_conn)
		;
	*pp = c->next_slot_conn;
	c->slot_parked = false;
}

/* Slots of host h came back: its parked connections that fit go in turn. */
static void slot_unpark(struct worker *w, const struct host_share *h)
{
	struct tconn *c = w->slot_parked, *next;

	for (; c; c = next) {
		next = c->next_slot_conn;
		if (c->hs != h || !within_share(c, c->slot_head))
			continue;
		slot_unpark_one(w, c);
		slot_queue_conn(w, c);
	}
}

/*
 * Serve waiting commands while the pool has room: one command of each
 * waiting connection in turn, so no session's queue delays another's
 * beyond one command each. The connection whose turn it is waits until
 * its command's run fits (no overtaking: a large command is never
 * starved by small ones); one over its share leaves the list until it
 * frees a slot. Re-entered from inside (a served command can free a slot
 * at once): the outer call carries on.
 */
static void slot_serve(struct worker *w)
{
	struct tconn *c;
	struct treq *r;

	if (w->serving_slots)
		return;
	w->serving_slots = true;
	while ((c = w->slot_conns_head)) {
		r = c->slot_head;
		if (!within_share(c,
				  r)) { /* its host's share filled meanwhile */
			(void)FIFO_POP(w->slot_conns_head, w->slot_conns_tail,
				       next_slot_conn);
			c->slot_queued = false;
			slot_queue_conn(w, c);
			continue;
		}
		r->slot = slot_alloc(c, r);
		if (!r->slot)
			break;
		(void)FIFO_POP(c->slot_head, c->slot_tail, next_slot);
		(void)FIFO_POP(w->slot_conns_head, w->slot_conns_tail,
			       next_slot_conn);
		c->slot_queued = false;
		slot_queue_conn(w, c); /* to the back, if more wait */
		slot_got(r);
		treq_process(r);
	}
	w->serving_slots = false;
}

void slot_release(struct tconn *c, void **slot)
{
	struct worker *w = c->worker;
	uint64_t run;

	if (!*slot)
		return;
	run = (uint64_t)SLOT_PAGE << w->pool.used_order[page_of(w, *slot)];
	c->held -= run;
	if (c->hs)
		c->hs->held -= run;
	slot_pool_free(&w->pool, *slot);
	*slot = NULL;
	if (c->slot_parked && within_share(c, c->slot_head))
		slot_unpark_one(w, c);
	if (c->state != TCONN_CLOSING)
		slot_queue_conn(w,
				c); /* back in turn if it was over its share */
	if (c->hs && w->slot_parked)
		slot_unpark(w, c->hs);
	slot_serve(w);
}

/* A slot for r now (nobody waiting before it), or r joins the wait. */
static void slot_get(struct worker *w, struct treq *r)
{
	struct tconn *c = r->conn;

	if (!w->slot_conns_head && !c->slot_head)
		r->slot = slot_alloc(c, r);
	if (r->slot) {
		slot_got(r);
		return;
	}
	r->state = TREQ_SLOT;
	r->next_slot = NULL;
	FIFO_PUSH(c->slot_head, c->slot_tail, r, next_slot);
	slot_queue_conn(w, c);
}

void slot_wait_drop(struct worker *w, struct tconn *c)
{
	struct tconn **pp = &w->slot_conns_head, *x;
	struct treq *r;

	while ((r = FIFO_POP(c->slot_head, c->slot_tail, next_slot)))
		r->state = TREQ_FREE;
	if (c->slot_parked)
		slot_unpark_one(w, c);
	if (!c->slot_queued)
		return;
	c->slot_queued = false;
	w->slot_conns_tail = NULL;
	while ((x = *pp)) {
		if (x == c) {
			*pp = x->next_slot_conn;
			continue;
		}
		w->slot_conns_tail = x;
		pp = &x->next_slot_conn;
	}
}

/*
 * A command whose slot waits on the peer (a WRITE window it has not
 * filled, a pull READ window it has not returned, a response or GRANT
 * waiting for send credits the peer's receives give back), or a push
 * READ the peer has not taken, for longer than window_timeout: the
 * peer holds pool memory without progress. Writes why into why.
 */
bool slot_held_too_long(const struct tconn *c, uint64_t now, char *why,
			size_t len)
{
	uint64_t limit = c->worker->window_timeout_ms;
	unsigned int n = 0;
	uint64_t oldest = now;

	if (c->state != TCONN_LIVE || !c->held || !limit)
		return false;
	for (unsigned int i = 0; i < c->lim.queue_depth; i++) {
		const struct treq *r = &c->reqs[i];

		if (!r->slot ||
		    (r->state != TREQ_GRANT && r->state != TREQ_DATA &&
		     r->state != TREQ_RESPOND && r->state != TREQ_PULLED))
			continue;
		n++;
		oldest = MIN(oldest, r->state_ms);
	}
	if (c->push_inflight) {
		n += c->push_inflight;
		oldest = MIN(oldest, c->push_progress_ms);
	}
	if (!n || now - oldest <= limit)
		return false;
	snprintf(
	    why, len,
	    "held %u slot window(s), %llu bytes of the pool, for %llu ms without returning them (window_timeout %llu s)",
	    n, (unsigned long long)c->held, (unsigned long long)(now - oldest),
	    (unsigned long long)(limit / 1000));
	return true;
}

/* ---- responses ------------------------------------------------------------
 */

/* If wr_id is a push READ's response, its slot is free now. */
static void treq_push_done(struct tconn *c, uint64_t wr_id)
{
	struct worker *w = c->worker;
	void *slot;

	if (qp_wrid_kind(wr_id) != WRID_PUSH)
		return;
	slot = w->pool.base + ((size_t)qp_wrid_val(wr_id) << SLOT_PAGE_SHIFT);
	c->push_inflight--;
	c->push_progress_ms = w->now_ms;
	slot_release(c, &slot);
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
	if (!*mrp &&
	    xp_group_reg_mr(c->wg->g, r->slot, run,
			    XP_ACCESS_LOCAL_WRITE | XP_ACCESS_MW_BIND, mrp))
		*mrp = NULL;
	return *mrp;
}

/*
 * Could a window with access on c show bytes its command did not put
 * there? Where the window reaches its block's whole run (rxe's
 * mw_reaches_region: block_mr), yes. A WRITE window, unless the
 * transport counts what the peer wrote (tcp: a WRITE_DATA before the
 * window is full fails the command): over rdma the peer may write part
 * of it and say it is done. A READ window covers exactly the bytes the
 * backend just read.
 */
static bool window_shows_stale(const struct tconn *c, int access)
{
	if (c->wg->block_mr[0])
		return true;
	return (access & XP_ACCESS_REMOTE_WRITE) &&
	       !xp_group_counts_placed(c->wg->g);
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
	if (window_shows_stale(c, access))
		slot_scrub(c, r);
	else if (access & XP_ACCESS_REMOTE_WRITE)
		slot_filled(c, r, true); /* the peer must write it all */
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
 * Test build only (target_fault()): the faults that act on a command as
 * it arrives. true: r is not served.
 */
static bool fault_on_command(struct tconn *c, struct treq *r)
{
	bool io =
	    r->cmd.opcode == RBLK_OP_READ || r->cmd.opcode == RBLK_OP_WRITE;

	if (io && target_fault("silent"))
		return true; /* never answered, as by a hung disk */
	if (io && target_fault("break")) {
		tconn_fail(c, "fault injection: break after login");
		return true;
	}
	if (r->cmd.opcode == RBLK_OP_WRITE && !r->cmd.data &&
	    target_fault("write-early")) {
		r->status = RBLK_S_OK; /* answered before any GRANT */
		r->state = TREQ_RESPOND;
		treq_process(r);
		return true;
	}
	return false;
}

/*
 * Where push READ r's data goes: false for nowhere. Test build only
 * (target_fault()): push-nodata sends none; push-wrongtag aims it
 * through the window of another push READ in flight on the connection
 * (that command's address and key, as a target that mixed up its
 * commands would), or nowhere without one.
 */
static bool fault_push_aim(struct tconn *c, struct treq *r, uint64_t *addr,
			   uint32_t *rkey)
{
	if (target_fault("push-nodata"))
		return false;
	if (!target_fault("push-wrongtag"))
		return true;
	for (unsigned int i = 0; i < c->lim.queue_depth; i++) {
		struct treq *o = &c->reqs[i];

		if (o != r && o->state != TREQ_FREE &&
		    o->cmd.opcode == RBLK_OP_READ &&
		    (o->cmd.flags & RBLK_CMD_F_PUSH)) {
			*addr = o->cmd.addr;
			*rkey = o->cmd.rkey;
			return true;
		}
	}
	return false;
}

/*
 * RBLK_F_RESIZE (docs/PROTOCOL.md, "Live resize"): while the export's size
 * is not the one c was told, every answer says so; one without PULL
 * carries the size, and c has then been told.
 */
static void resp_tell_size(struct tconn *c, struct rblk_resp *resp)
{
	uint64_t size;

	if (!(c->lim.features & RBLK_F_RESIZE))
		return;
	size = export_size(c->exp);
	if (size == c->told_size)
		return;
	resp->flags |= RBLK_RESP_F_SIZE;
	if (!(resp->flags & RBLK_RESP_F_PULL)) {
		resp->size = size;
		c->told_size = size;
	}
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
	    .tag = r->wire_tag,
	    .status = (uint32_t)r->status,
	    .length = r->status ? 0 : r->cmd.length,
	};
	bool read = !r->status && reads_out(r->cmd.opcode);
	bool push = read && (r->cmd.flags & RBLK_CMD_F_PUSH);
	unsigned int need = read ? 2 : 1;
	uint64_t wrid = qp_wrid(WRID_RESP, need, r->cmd.tag);
	struct xp_mr *mr = NULL;

	if (!qp_take(&c->qp, need))
		return -EAGAIN;
	batch_join(c);
	r->resp_batch = c->flushes + 1;
	if (push && !(mr = block_region(c, r))) { /* no region: it fails */
		slot_release(c, &r->slot);
		resp.status = RBLK_S_NO_RESOURCES;
		resp.length = 0;
		r->status = RBLK_S_NO_RESOURCES;
		push = false;
		read = false; /* the RESP's completion returns both credits */
	}
	if (!resp.status && r->cmd.opcode == RBLK_OP_WRITE &&
	    target_fault("write-zero"))
		resp.length = 0;
	if (push) {
		uint64_t addr = r->cmd.addr;
		uint32_t rkey = r->cmd.rkey;

		/* RC ordering places the data before the response; the
		 * slot is the NIC's until that response completes */
		if (fault_push_aim(c, r, &addr, &rkey)) {
			qp_add_rdma(&c->qp,
				    r->push_inv ? XP_WR_RDMA_WRITE_WITH_IMM
						: XP_WR_RDMA_WRITE,
				    0, 0, r->slot, r->cmd.length, mr, addr,
				    rkey);
			/* the initiator counts the bytes of the key named */
			c->qp.batch[c->qp.nr_batch - 1].imm = rkey;
		}
		wrid = qp_wrid(WRID_PUSH, need,
			       (uint32_t)(((char *)r->slot - w->pool.base) >>
					  SLOT_PAGE_SHIFT));
		r->slot = NULL;
		if (!c->push_inflight++)
			c->push_progress_ms = w->now_ms;
	} else if (read) {
		resp.flags = RBLK_RESP_F_PULL;
		resp.addr = (uint64_t)(uintptr_t)r->slot;
		resp.rkey = bind_window(c, r, XP_ACCESS_REMOTE_READ);
		if (!resp.rkey) { /* no window: the READ fails, the slot goes */
			slot_release(c, &r->slot);
			resp.flags = 0;
			resp.addr = 0;
			resp.status = RBLK_S_NO_RESOURCES;
			resp.length = 0;
			r->status = RBLK_S_NO_RESOURCES;
		}
	}
	resp_tell_size(c, &resp);
	qp_add_send(&c->qp, wrid, r->resp_buf,
		    (uint32_t)rblk_resp_encode(r->resp_buf, &resp));
	if (r->push_inv) { /* the window dies before the answer is seen */
		struct xp_send_wr *wr = &c->qp.batch[c->qp.nr_batch - 1];

		wr->opcode = XP_WR_SEND_WITH_INV;
		wr->invalidate_rkey = r->cmd.rkey;
	}
	return 0;
}

/* A WRITE's window and GRANT, in one chain. 0, or -EAGAIN. */
static int treq_post_grant(struct treq *r)
{
	struct tconn *c = r->conn;
	struct rblk_grant g = {
	    .tag = r->wire_tag,
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
	stats_account(&c->exp->wstats[w->index], op, r->cmd.length, ok, lat_us);
}

/*
 * Reservations, at the last step before the backend, so a command that
 * waited (QoS, a slot, its data) meets the reservations as they are when
 * it would reach the disk: a preempted host's queued commands fail here.
 * A reservation command runs here (pr.c). True when r is answered without
 * the backend (r->state is TREQ_RESPOND).
 */
static bool treq_exec_pr(struct treq *r)
{
	struct tconn *c = r->conn;

	if (r->cmd.opcode == RBLK_OP_PR_REPORT) {
		pr_report(r);
		slot_filled(c, r, !r->status);
	} else if (pr_opcode(r->cmd.opcode)) {
		pr_execute(r);
	} else if (pr_denied(c, r->cmd.opcode)) {
		/* an initiator that does not know the status gets one it does
		 */
		r->status = (c->lim.features & RBLK_F_PR)
				? RBLK_S_RESV_CONFLICT
				: RBLK_S_ACCESS_DENIED;
		log_ratelimited(LOG_INFO,
				"conn %llu: host '%s': %s refused: reservation "
				"conflict on export %s",
				(unsigned long long)c->id, c->host,
				rblk_opcode_str(r->cmd.opcode), c->exp->name);
	} else {
		return false;
	}
	r->state = TREQ_RESPOND;
	return true;
}

void treq_process(struct treq *r)
{
	struct tconn *c = r->conn;
	struct worker *w = c->worker;
	enum treq_state prev;
	int ret;

	do {
		prev = r->state;
		r->state_ms = w->now_ms;
		if (c->state == TCONN_CLOSING &&
		    (r->state == TREQ_GRANT || r->state == TREQ_EXEC ||
		     r->state == TREQ_RESPOND)) {
			/* no window of r is bound in these states */
			slot_release(c, &r->slot);
			r->state = TREQ_FREE;
			break;
		}
		switch (r->state) {
		case TREQ_FREE:
		case TREQ_THROTTLE:
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
				slot_release(c, &r->slot);
				r->status = RBLK_S_NO_RESOURCES;
				r->state = TREQ_RESPOND;
				break;
			}
			r->state = TREQ_DATA;
			break;
		case TREQ_EXEC:
			if (treq_exec_pr(r))
				break;
			r->result = 0;
			ret = c->exp->ops->submit(w, r);
			if (ret == 0) {
				c->backend_inflight++;
				r->state = TREQ_BACKEND;
			} else if (ret == 1) {
				r->status = rblk_errno_to_status(r->result);
				if (r->cmd.opcode == RBLK_OP_READ && r->slot)
					slot_filled(c, r, !r->result);
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
				slot_release(c, &r->slot);
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
			log_warn(
			    "export %s: O_DIRECT I/O refused; switching to buffered I/O",
			    c->exp->name);
		r->state = TREQ_EXEC;
		treq_process(r);
		return;
	}
	if (res >= 0 &&
	    (r->cmd.opcode == RBLK_OP_READ || r->cmd.opcode == RBLK_OP_WRITE) &&
	    (uint32_t)res != r->cmd.length) {
		log_warn("export %s: short %s at %llu: %d of %u bytes",
			 c->exp->name, rblk_opcode_str(r->cmd.opcode),
			 (unsigned long long)r->cmd.offset, res, r->cmd.length);
		res = -EIO;
	}
	r->result = res < 0 ? res : 0;
	r->status = rblk_errno_to_status(r->result);
	if (r->cmd.opcode == RBLK_OP_READ && r->slot)
		slot_filled(c, r, !r->result);
	if (r->result)
		log_warn("export %s: %s at %llu+%u failed: %s", c->exp->name,
			 rblk_opcode_str(r->cmd.opcode),
			 (unsigned long long)r->cmd.offset, r->cmd.length,
			 strerror(-r->result));
	r->state = TREQ_RESPOND;
	treq_process(r);
}

/* The tag space c's commands use (tag generations, if LOGIN granted them). */
static uint32_t tconn_tags(const struct tconn *c)
{
	return rblk_tags(c->lim.queue_depth, c->lim.features & RBLK_F_TAG_GEN);
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
	slot_release(c, &r->slot);
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

	tag = rblk_cmd_peek_tag(buf, wc->byte_len, tconn_tags(c));
	if (tag < 0) {
		tconn_fail(c,
			   "malformed command capsule (header, length or tag)");
		return false;
	}
	r = &c->reqs[tag];
	/* the volume as it is now: a resize applies from the next command */
	c->lim.size = export_size(c->exp);
	st = rblk_cmd_decode(buf, wc->byte_len, &c->lim, &cmd);
	if (cmd.flags & RBLK_CMD_F_DONE) {
		if (r->state != TREQ_PULLED) {
			tconn_fail(
			    c,
			    "command returns a read window its tag does not hold");
			return false;
		}
		if (!killed_window(c, r, wc)) {
			tconn_fail(
			    c,
			    "command returning a read window did not invalidate it");
			return false;
		}
		pulled_done(c, r);
	} else if (wc->flags & XP_WC_F_WITH_INV) {
		tconn_fail(
		    c,
		    "command invalidated a key without returning its window");
		return false;
	}
	if (r->state != TREQ_FREE || r->resp_batch > c->flushes) {
		tconn_fail(c, "command on a tag still in use");
		return false;
	}
	r->held_recv = 0;
	r->t_recv_ns = now_ns();
	r->cmd = cmd;
	r->wire_tag = cmd.tag;
	r->cmd.tag = (uint16_t)tag;
	r->push_inv = (c->lim.features & RBLK_F_PUSH_IMM) &&
		      reads_out(cmd.opcode) && (cmd.flags & RBLK_CMD_F_PUSH);
	if (!st && fault_on_command(c, r))
		return false;
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
	} else if (qos_hold(c, r)) {
		if (r->cmd.data) {
			r->held_recv = qp_wrid_val(wc->wr_id) + 1;
			return true;
		}
		return false;
	} else {
		treq_start(r);
		if (r->state == TREQ_SLOT && r->cmd.data) {
			r->held_recv = qp_wrid_val(wc->wr_id) + 1;
			return true;
		}
		return false;
	}
	treq_process(r);
	return false;
}

/*
 * A valid command that may go (its QoS limits let it): a READ or WRITE
 * asks for a slot, anything else executes. An inline WRITE still waiting
 * for a slot afterwards (TREQ_SLOT) keeps its receive buffer.
 */
void treq_start(struct treq *r)
{
	if (is_data(r)) {
		slot_get(r->conn->worker, r);
		if (r->state == TREQ_SLOT)
			return;
	} else {
		r->state = TREQ_EXEC;
	}
	treq_process(r);
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
	int64_t placed;

	if (rblk_done_decode(buf, wc->byte_len, tconn_tags(c), &d)) {
		tconn_fail(c, "malformed READ_DONE/WRITE_DATA");
		return;
	}
	r = &c->reqs[rblk_tag_index(d.tag)];
	want = d.type == RBLK_MSG_READ_DONE ? TREQ_PULLED : TREQ_DATA;
	/* a wire tag of another generation names another command */
	if (r->state != want || d.tag != r->wire_tag) {
		tconn_fail(c,
			   d.type == RBLK_MSG_READ_DONE
			       ? "READ_DONE for a tag with no read window"
			       : "WRITE_DATA for a tag with no write window");
		return;
	}
	if (!killed_window(c, r, wc) || d.rkey != c->mw[r->cmd.tag]->rkey) {
		tconn_fail(
		    c, "READ_DONE/WRITE_DATA did not invalidate its window");
		return;
	}
	if (d.type == RBLK_MSG_READ_DONE) {
		pulled_done(c, r);
		return;
	}
	/*
	 * Where the transport counts what its peer wrote (tcp), a WRITE_DATA
	 * before the whole window was written would write what the slot held
	 * before: the command fails instead. rdma cannot tell: there the
	 * window's run was cleared of others' bytes (slot_scrub()).
	 */
	placed = xp_mw_placed(c->mw[r->cmd.tag]);
	if (placed != -EOPNOTSUPP && placed < (int64_t)r->cmd.length) {
		log_ratelimited(
		    LOG_WARN,
		    "conn %llu (%s): tag %u: WRITE_DATA before its "
		    "window was written in full; failing the command",
		    (unsigned long long)c->id, c->peer, r->cmd.tag);
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
