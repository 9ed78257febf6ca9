/* SPDX-License-Identifier: MIT */
/*
 * librblk: connecting a queue and logging in. One connection of a queue
 * (lib_queue_connect()): the transport connection and its message
 * buffers, the HELLO, authentication (docs/PROTOCOL.md) while waiting for
 * the LOGIN, then the LOGIN's checks (against what was asked for, and
 * against the session's other queues and earlier connections) and what the
 * queue and the session take from it. lib_queue_drop_conn() undoes one
 * connection. Sessions are opened in lib.c, the data path is lib_io.c's.
 */
#include <rblk/rblk.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../common/auth.h"
#include "../common/log.h"
#include "../common/proto.h"
#include "../transport/qp.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"
#include "lib_queue.h"

#define set_error lib_set_error

_Static_assert(RBLK_DEFAULT_INLINE == RBLK_INLINE_DEFAULT &&
		   RBLK_DEFAULT_INLINE <= RBLK_INLINE_MAX,
	       "librblk asks what a target grants by default");
_Static_assert(RBLK_HELLO_SIZE <= RBLK_MSG_MAX, "hello fits a buffer");
_Static_assert(CMD_BUF_SIZE == RBLK_CMD_SIZE, "inline_ask() sizes as sent");
_Static_assert(RBLK_FEAT_READ_ONLY == RBLK_F_READ_ONLY &&
		   RBLK_FEAT_FLUSH == RBLK_F_FLUSH &&
		   RBLK_FEAT_FUA == RBLK_F_FUA &&
		   RBLK_FEAT_TRIM == RBLK_F_TRIM &&
		   RBLK_FEAT_ZEROES == RBLK_F_ZEROES &&
		   RBLK_FEAT_PUSH == RBLK_F_PUSH &&
		   RBLK_FEAT_DIRECT == RBLK_F_DIRECT &&
		   RBLK_FEAT_NO_IDENTITY == RBLK_F_NO_IDENTITY &&
		   RBLK_FEAT_PR == RBLK_F_PR,
	       "public feature bits are the wire bits");

/* LOGIN bits that are options of the protocol, not of the volume */
#define PROTO_OPTIONS                                                          \
	(RBLK_F_CMD_DONE | RBLK_F_TAG_GEN | RBLK_F_PUSH_IMM | RBLK_F_EPOCH |   \
	 RBLK_F_RESIZE)

/* Push reads when asked to, or by default where the transport prefers it. */
static bool want_push_reads(const struct rblk *r, const struct rblk_opts *o)
{
	if (o->flags & RBLK_OPEN_PUSH_READS)
		return true;
	if (o->flags & RBLK_OPEN_PULL_READS)
		return false;
	return r->ops->read_costs_peer_cpu;
}

/*
 * Push reads whose bytes the initiator can count (RBLK_F_PUSH_IMM): where
 * the transport carries immediates (rdma; tcp counts a window's bytes
 * itself). Each push READ then takes two receives: its data's and its
 * RESP's.
 */
static bool want_push_imm(const struct rblk *r, const struct rblk_opts *o)
{
	return want_push_reads(r, o) && r->ops->write_imm &&
	       !r->push_imm_refused;
}

/*
 * One authentication message during login (docs/PROTOCOL.md). Answers
 * AUTH_CHALLENGE with AUTH_RESPONSE (sent from the HELLO buffer: the
 * target has the HELLO already) and checks AUTH_RESULT, the target's MAC.
 * Returns 0 to keep waiting for LOGIN, or -errno with the error set.
 */
static int login_auth_step(struct rblk_queue *q, struct rblk_auth_ctx *ctx,
			   bool *challenged, const void *buf, uint32_t len)
{
	struct rblk *r = q->r;
	struct rblk_auth_challenge ch;
	struct rblk_auth_response resp;
	struct rblk_auth_result res;
	int ret;

	if (rblk_msg_type(buf, len) == RBLK_MSG_AUTH_RESULT) {
		if (!*challenged || q->authed ||
		    rblk_auth_result_decode(buf, len, &res))
			return set_error(
			    -EPROTO,
			    "target sent a malformed or unexpected AUTH_RESULT");
		if (rblk_auth_verify(r->secret, r->secret_len,
				     RBLK_AUTH_ROLE_TARGET, ctx, res.mac))
			return set_error(
			    -EACCES,
			    "authentication failed: target '%s' does not hold our secret (mutual authentication)",
			    ctx->target_name);
		q->authed = true;
		return 0;
	}
	if (!r->secret_len)
		return set_error(
		    -ENOKEY, "target requires authentication; give --key-file");
	if (*challenged || rblk_auth_challenge_decode(buf, len, &ch))
		return set_error(
		    -EPROTO,
		    "target sent a malformed or repeated AUTH_CHALLENGE");
	*challenged = true;
	memcpy(ctx->target_nonce, ch.nonce, sizeof(ctx->target_nonce));
	memcpy(ctx->target_name, ch.target_name, sizeof(ctx->target_name));
	snprintf(ctx->host_name, sizeof(ctx->host_name), "%s", r->host_name);
	snprintf(ctx->export_name, sizeof(ctx->export_name), "%s",
		 r->url.export_name);
	do
		rblk_auth_nonce(ctx->initiator_nonce);
	while (rblk_auth_check_nonces(ctx));
	memcpy(resp.nonce, ctx->initiator_nonce, sizeof(resp.nonce));
	rblk_auth_mac(r->secret, r->secret_len, RBLK_AUTH_ROLE_INITIATOR, ctx,
		      resp.mac);
	ret = qp_send_now(
	    &q->qp, WRID_HELLO, 0, hello_buf(q),
	    (uint32_t)rblk_auth_response_encode(hello_buf(q), &resp));
	if (ret == -EAGAIN)
		return set_error(-EPROTO, "no send credit for AUTH_RESPONSE");
	if (ret)
		return set_error(ret, "sending AUTH_RESPONSE: %s",
				 strerror(-ret));
	return 0;
}

/*
 * Wait for the LOGIN within timeout_ms, answering authentication messages
 * on the way. -EACCES, -ENOKEY and -EPROTO from authentication come with
 * the error already set (*err_set).
 */
static int wait_login(struct rblk_queue *q, int timeout_ms,
		      struct rblk_login *login, bool *err_set)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	struct rblk_auth_ctx ctx = {0};
	bool challenged = false;
	struct xp_wc wc;
	const void *buf;
	int n, st, type;

	q->authed = false; /* this connection's proof, not the last one's */
	for (;;) {
		n = lib_wait_wc(q->xc, &wc, deadline);
		if (n)
			return n;
		if (wc.status != XP_WC_SUCCESS)
			return -ECONNRESET;
		if (qp_wrid_kind(wc.wr_id) != QP_WRID_RECV) {
			qp_send_done(&q->qp, wc.wr_id);
			continue;
		}
		buf = qp_recv_of(&q->qp, wc.wr_id);
		if (!buf)
			return -EPROTO;
		type = rblk_msg_type(buf, wc.byte_len);
		if (type == RBLK_MSG_AUTH_CHALLENGE ||
		    type == RBLK_MSG_AUTH_RESULT) {
			st = login_auth_step(q, &ctx, &challenged, buf,
					     wc.byte_len);
			if (st) {
				*err_set = true;
				return st;
			}
			if (qp_post_recv(&q->qp, qp_wrid_val(wc.wr_id)))
				return -ECONNRESET;
			continue;
		}
		st = rblk_login_decode(buf, wc.byte_len, login);
		if (st)
			return -EPROTO;
		if (login->status == RBLK_S_OK && challenged && !q->authed) {
			*err_set = true;
			return set_error(
			    -EPROTO, "target logged us in without AUTH_RESULT");
		}
		/*
		 * A refusal: the target disconnects right behind it, and on
		 * rdma the disconnect can be processed in this very poll, so
		 * reposting the receive may fail. Nothing follows a refusal.
		 */
		if (login->status != RBLK_S_OK)
			return 0;
		return qp_post_recv(&q->qp, qp_wrid_val(wc.wr_id)) ? -ECONNRESET
								   : 0;
	}
}

/* Sets the error for a login refused for an authentication reason. */
static bool login_auth_error(struct rblk *r, int status)
{
	switch (status) {
	case RBLK_S_AUTH_FAILED:
		set_error(
		    -EACCES,
		    "authentication failed: wrong secret or unknown host '%s'",
		    r->host_name);
		return true;
	case RBLK_S_AUTH_REQUIRED:
		set_error(
		    -ENOKEY,
		    "target requires authentication for host '%s'; give --key-file",
		    r->host_name);
		return true;
	case RBLK_S_ACCESS_DENIED:
		set_error(-EACCES,
			  "host '%s' is not allowed to use export '%s'",
			  r->host_name, r->url.export_name);
		return true;
	case RBLK_S_TLS_REQUIRED:
		set_error(
		    -EACCES,
		    "export '%s' requires TLS: connect with --tls (rblk_opts.tls)",
		    r->url.export_name);
		return true;
	}
	return false;
}

/*
 * Decide whether q moves READ/WRITE by direct volume access: the target
 * offers it (the LOGIN carries the volume's region) and opts.direct is
 * AUTO or ON; ON without the offer is an error.
 */
static int queue_use_direct(struct rblk *r, struct rblk_queue *q,
			    const struct rblk_opts *o,
			    const struct rblk_login *login)
{
	bool offered = login->features & RBLK_F_DIRECT;

	if (o->direct == RBLK_DIRECT_ON && !offered)
		return set_error(-EOPNOTSUPP,
				 "export '%s' does not offer direct access",
				 r->url.export_name);
	q->direct = offered && o->direct != RBLK_DIRECT_OFF;
	q->vol_rkey = login->vol_rkey;
	q->vol_addr = login->vol_addr;
	q->vol_len = login->vol_len; /* beyond it (a grown volume): commands */
	return 0;
}

/*
 * In-capsule bytes to ask for (rblk_opts.inline_data). The command
 * buffers that carry them (depth x (CMD_BUF_SIZE + the ask)) are
 * registered at dial, before the LOGIN says what was granted, so where
 * registering pins memory the default asks what a target's default
 * grants: its receive ring of 2 x depth + 2 buffers within
 * INLINE_RING_PINNED is depth + 1 buffers within half of it. At depth 64
 * that is 1024: 68 KiB of command buffers, not 260 KiB for a 4096-byte
 * ask granted 1024.
 */
#define INLINE_SEND_PINNED (128u << 10) /* target's INLINE_RING_PINNED / 2 */
static uint32_t inline_ask(const struct rblk *r, const struct rblk_opts *o)
{
	if (r->inline_refused || o->inline_data < 0)
		return 0;
	if (o->inline_data)
		return (uint32_t)MIN(o->inline_data, RBLK_INLINE_MAX);
	if (!r->ops->reg_pins_memory)
		return RBLK_DEFAULT_INLINE;
	return rblk_inline_fit(o->queue_depth + 1u, INLINE_SEND_PINNED);
}

/*
 * Connect q on its path and set up the connection's message buffers: a
 * command buffer per tag asked for (with room for ask in-capsule bytes),
 * the HELLO's, and a READ_DONE / WRITE_DATA buffer per tag.
 */
static int queue_dial(struct rblk *r, struct rblk_queue *q,
		      const struct rblk_opts *o, uint32_t ask)
{
	struct xp_conn_attr attr = {0};
	uint16_t qd = (uint16_t)o->queue_depth;
	size_t send_len;
	int ret;

	attr.max_recv_wr = (want_push_imm(r, o) ? 2u * qd : qd) + 2u;
	attr.max_send_wr = 3u * qd + 4u;
	ret = lib_connect(r->ops, q->g, lib_path_url(q), &attr, r->tls, qd,
			  o->timeout_ms, &q->xc);
	if (ret)
		return ret;

	q->cmd_bufs = qd;
	q->cmd_size = ALIGN_UP(CMD_BUF_SIZE + ask, 64u);
	q->inline_max = 0;
	send_len = (size_t)qd * q->cmd_size + RBLK_MSG_MAX +
		   (size_t)qd * RBLK_DONE_SIZE;
	ret = qp_init(&q->qp, q->xc, &attr, 0, send_len);
	if (ret) /* registering them is what RLIMIT_MEMLOCK refuses */
		return lib_pin_error(
		    ret, send_len + (size_t)attr.max_recv_wr * QP_RECV_SIZE,
		    "message buffers");
	return 0;
}

/* Ask for the export: the HELLO, asking for ask in-capsule bytes. */
static int send_hello(struct rblk *r, struct rblk_queue *q,
		      const struct rblk_opts *o, uint32_t ask)
{
	struct rblk_hello hello = {0};
	int ret;

	hello.queue_depth = (uint16_t)o->queue_depth;
	hello.queue_id = (uint16_t)q->index;
	hello.max_io = o->max_io;
	hello.inline_data = ask;
	hello.flags =
	    (o->flags & RBLK_OPEN_READ_ONLY) ? RBLK_HELLO_F_READ_ONLY : 0;
	if (r->secret_len)
		hello.flags |= RBLK_HELLO_F_AUTH;
	if (!r->identity_refused)
		hello.flags |= RBLK_HELLO_F_IDENTITY;
	if (!r->tag_gen_refused)
		hello.flags |= RBLK_HELLO_F_TAG_GEN;
	if (want_push_imm(r, o))
		hello.flags |= RBLK_HELLO_F_PUSH_IMM;
	if (!r->epoch_refused)
		hello.flags |= RBLK_HELLO_F_EPOCH;
	if (!r->resize_refused)
		hello.flags |= RBLK_HELLO_F_RESIZE;
	if (!r->pr_refused)
		hello.flags |= RBLK_HELLO_F_PR;
	snprintf(hello.export_name, sizeof(hello.export_name), "%s",
		 lib_path_url(q)->export_name);
	snprintf(hello.host_name, sizeof(hello.host_name), "%s", r->host_name);
	ret = qp_send_now(&q->qp, WRID_HELLO, 0, hello_buf(q),
			  (uint32_t)rblk_hello_encode(hello_buf(q), &hello));
	if (ret)
		return set_error(ret, "sending HELLO: %s", strerror(-ret));
	return 0;
}

/* Wait for the LOGIN (wait_login()): 0, or -errno with the error set. */
static int await_login(struct rblk_queue *q, const struct rblk_opts *o,
		       struct rblk_login *login)
{
	const struct rblk_url *u = lib_path_url(q);
	bool err_set = false;
	int ret;

	ret = wait_login(q, o->timeout_ms, login, &err_set);
	if (ret && err_set)
		return ret;
	if (ret == -ETIMEDOUT)
		return set_error(ret, "%s: no login answer within %d ms",
				 rblk_url_str(u), o->timeout_ms);
	if (ret == -EPROTO)
		return set_error(ret, "%s: malformed login answer",
				 rblk_url_str(u));
	if (ret)
		return set_error(ret, "%s: connection lost during login",
				 rblk_url_str(u));
	return 0;
}

/*
 * The newest HELLO flag an older target may not know that the refused
 * HELLO asked for, now dropped for the session: its name, or NULL when
 * none is left. Newest first.
 */
static const char *drop_newest_flag(struct rblk *r, bool asked_imm)
{
	if (!r->pr_refused) {
		r->pr_refused = true;
		return "the HELLO flag PR";
	}
	if (!r->resize_refused) {
		r->resize_refused = true;
		return "the HELLO flag RESIZE";
	}
	if (!r->epoch_refused) {
		r->epoch_refused = true;
		return "the HELLO flag EPOCH";
	}
	if (asked_imm) {
		r->push_imm_refused = true;
		return "the HELLO flag PUSH_IMM";
	}
	if (!r->tag_gen_refused) {
		r->tag_gen_refused = true;
		return "the HELLO flag TAG_GEN";
	}
	if (!r->identity_refused) {
		r->identity_refused = true;
		return "the HELLO flag IDENTITY";
	}
	return NULL;
}

/*
 * The LOGIN refused us (its status is not RBLK_S_OK): the error for it,
 * set. A HELLO refused as malformed may have asked for something an older
 * target does not know: the newest first, the PR flag (r->pr_refused),
 * the RESIZE flag (r->resize_refused), the EPOCH flag
 * (r->epoch_refused), the PUSH_IMM flag (r->push_imm_refused), the
 * TAG_GEN flag (r->tag_gen_refused), the IDENTITY flag
 * (r->identity_refused), then ask in-capsule bytes (r->inline_refused);
 * see lib_queue_connect().
 */
static int login_refused(struct rblk *r, struct rblk_queue *q,
			 const struct rblk_login *login, uint32_t ask,
			 bool asked_imm)
{
	const struct rblk_url *u = lib_path_url(q);
	int ret = rblk_status_to_errno((int)login->status);

	if (login_auth_error(r, (int)login->status))
		return ret;
	if (login->status == RBLK_S_NO_EXPORT)
		return set_error(ret, "export '%s' not found on %s",
				 u->export_name, rblk_url_str(u));
	if (login->status == RBLK_S_INVALID &&
	    (r->dropped = drop_newest_flag(r, asked_imm)))
		return set_error(
		    -EPROTO,
		    "login to '%s' refused as malformed: the target may not know %s",
		    u->export_name, r->dropped);
	if (login->status == RBLK_S_INVALID && ask) {
		r->inline_refused = true;
		r->dropped = "in-capsule data";
		return set_error(
		    -EPROTO,
		    "login to '%s' refused as malformed: the target may not know in-capsule data (the HELLO asked for %u bytes)",
		    u->export_name, ask);
	}
	return set_error(ret, "login to '%s' refused: %s", u->export_name,
			 rblk_status_str((int)login->status));
}

/*
 * Check an accepted LOGIN: the target authenticated itself if it had to,
 * granted no more than was asked for, and on a reconnect is still the
 * same volume with the same geometry and grants, at least as large as
 * the session knows it (a grown volume is taken: login_apply()).
 */
static int login_check(struct rblk *r, struct rblk_queue *q,
		       const struct rblk_opts *o,
		       const struct rblk_login *login, uint32_t ask)
{
	const struct rblk_url *u = lib_path_url(q);

	if (r->mutual && !q->authed)
		return set_error(
		    -EACCES,
		    "target did not authenticate itself and mutual authentication was required (is host '%s' configured on the target?)",
		    r->host_name);
	if (login->queue_depth > (uint16_t)o->queue_depth ||
	    login->max_io > o->max_io || login->inline_data > ask ||
	    ((login->features & RBLK_F_TAG_GEN) && r->tag_gen_refused) ||
	    ((login->features & RBLK_F_PR) && r->pr_refused) ||
	    ((login->features & RBLK_F_RESIZE) && r->resize_refused))
		return set_error(-EPROTO,
				 "target granted more than was asked for");
	if (q->state == QUEUE_CONNECTING)
		return 0; /* the first login: nothing to match yet */
	if (memcmp(login->vol_id, q->vol_id, sizeof(q->vol_id)))
		return lib_path_vol_mismatch(q, login->vol_id);
	if (login->size < rblk_get_size(r))
		return set_error(
		    -EPROTO,
		    "%s, export %s, shrank across the reconnect from %llu to %llu bytes: refusing it (the device keeps its size; data past the new end is gone)",
		    rblk_url_str(u), u->export_name,
		    (unsigned long long)rblk_get_size(r),
		    (unsigned long long)login->size);
	if (login->block_size != r->info.block_size ||
	    login->max_io != q->max_io || login->queue_depth != q->qd ||
	    (login->features ^ q->features) & ~PROTO_OPTIONS)
		return set_error(
		    -EPROTO,
		    "%s, export %s, changed across the reconnect: size %llu, block size %u, max I/O %u, queue depth %u, features 0x%x before; %llu, %u, %u, %u, 0x%x now",
		    rblk_url_str(u), u->export_name,
		    (unsigned long long)rblk_get_size(r), r->info.block_size,
		    q->max_io, q->qd, q->features,
		    (unsigned long long)login->size, login->block_size,
		    login->max_io, login->queue_depth, login->features);
	return 0;
}

/*
 * Take the grants of a checked LOGIN into q. The first login of queue 0
 * fills the session's info (less the features the open turned down);
 * every other must match its geometry.
 */
static int login_apply(struct rblk *r, struct rblk_queue *q,
		       const struct rblk_opts *o,
		       const struct rblk_login *login)
{
	int ret;

	q->qd = login->queue_depth;
	q->max_io = login->max_io;
	q->inline_max = login->inline_data;
	memcpy(q->vol_id, login->vol_id, sizeof(q->vol_id));
	q->features = login->features;
	ret = queue_use_direct(r, q, o, login);
	if (ret)
		return ret;
	if (q->index == 0 && q->state == QUEUE_CONNECTING) {
		r->info.size = login->size;
		r->info.block_size = login->block_size;
		r->info.max_io = login->max_io;
		r->info.queue_depth = login->queue_depth;
		/* protocol options, not the volume's */
		r->info.features = login->features & ~PROTO_OPTIONS;
		memcpy(r->info.vol_id, login->vol_id, sizeof(r->info.vol_id));
		if (!want_push_reads(r, o))
			r->info.features &= ~RBLK_F_PUSH;
		if (!q->direct)
			r->info.features &= ~RBLK_F_DIRECT;
	} else if (login->size < rblk_get_size(r) ||
		   login->block_size != r->info.block_size ||
		   login->max_io != r->info.max_io ||
		   login->queue_depth != r->info.queue_depth) {
		return set_error(
		    -EPROTO,
		    "queue %u got a different volume geometry than queue 0",
		    q->index);
	} else {
		/* a volume that grew since (or while) the session opened */
		lib_size_learned(q, login->size, "at login");
	}
	return 0;
}

/*
 * A block device promises that a completed FLUSH made every write
 * acknowledged before it durable. A target whose machine lost power, or
 * whose process held acknowledged writes in its own cache (RBD), comes
 * back without the writes it acknowledged but had not flushed, and a
 * FLUSH reissued or sent after the reconnect would then claim them
 * durable. The target's durability epoch (RBLK_F_EPOCH) changes exactly
 * then: a path that comes back with another epoch while writes are
 * acknowledged past the last completed FLUSH sets r->flush_lost, and
 * FLUSHes fail with -EIO until one issued since then has (lib_io.c,
 * part_durability()): a FLUSH in flight across the restart covers only
 * part of what may be lost. A restart
 * that loses nothing (a process restart on the same boot, for files and
 * devices) keeps the epoch and fails nothing.
 */
static void epoch_check(struct rblk *r, struct rblk_queue *q,
			const struct rblk_login *login)
{
	struct rblk_path *p = &r->paths[q->path];
	uint64_t now = 1ull << 32 | rblk_login_epoch(login), seen, acked, fl;

	if (!(login->features & RBLK_F_EPOCH))
		return;
	seen = atomic_load(&p->epoch);
	do {
		if (seen == now)
			return;
	} while (!atomic_compare_exchange_weak(&p->epoch, &seen, now));
	if (!seen)
		return; /* the first login on this path */
	acked = lib_acked_sum(r);
	fl = atomic_load(&r->flushed);
	if (acked <= fl) {
		log_info(
		    "queue %u: %s restarted (durability epoch %08x, was %08x); every acknowledged write was flushed",
		    q->index, rblk_url_str(lib_path_url(q)), (unsigned int)now,
		    (unsigned int)seen);
		return;
	}
	atomic_store(&r->flush_lost, acked);
	log_err(
	    "queue %u: %s restarted (durability epoch %08x, was %08x) after acknowledging %llu write(s) no FLUSH has covered yet: they may be lost, so FLUSHes fail with EIO until one issued from now on has",
	    q->index, rblk_url_str(lib_path_url(q)), (unsigned int)now,
	    (unsigned int)seen, (unsigned long long)(acked - fl));
}

/*
 * One connection of q and its login: 0, or -errno with the error set (the
 * connection, if made, is left for the caller to drop).
 */
static int queue_connect_once(struct rblk *r, struct rblk_queue *q,
			      const struct rblk_opts *o)
{
	struct rblk_login login;
	uint32_t ask = inline_ask(r, o);
	int ret;

	ret = queue_dial(r, q, o, ask);
	if (!ret)
		ret = send_hello(r, q, o, ask);
	if (!ret)
		ret = await_login(q, o, &login);
	if (ret)
		return ret;
	if (login.status != RBLK_S_OK)
		return login_refused(r, q, &login, ask, want_push_imm(r, o));
	ret = login_check(r, q, o, &login, ask);
	if (!ret)
		ret = login_apply(r, q, o, &login);
	if (!ret)
		epoch_check(r, q, &login);
	return ret;
}

/*
 * A target that predates the EPOCH, PUSH_IMM, TAG_GEN or IDENTITY flag or
 * in-capsule data refuses a HELLO asking for them as malformed (the bits
 * and the field were reserved, zero): then the queue connects once more
 * without the newest of them, and again without the next, and the session
 * asks for none of those from then on.
 */
int lib_queue_connect(struct rblk *r, struct rblk_queue *q,
		      const struct rblk_opts *o)
{
	for (;;) {
		int ret;

		r->dropped = NULL;
		ret = queue_connect_once(r, q, o);
		if (!ret || !r->dropped)
			return ret;
		log_info("queue %u: %s; connecting again without %s", q->index,
			 rblk_last_error(), r->dropped);
		lib_queue_drop_conn(q);
	}
}

/*
 * Forget the transport connection and its message buffers. The group and
 * the regions registered on it (bounce slots, user buffers) stay.
 */
void lib_queue_drop_conn(struct rblk_queue *q)
{
	xp_destroy(q->xc);
	q->xc = NULL;
	xp_dereg_mr(q->qp.msg_mr); /* a shared group keeps it otherwise */
	qp_fini(&q->qp);
}
