/* SPDX-License-Identifier: MIT */
/*
 * A raw rblk initiator for the security tests (tests/e2e/65-auth.sh and
 * 66-rkey-isolation.sh). It speaks the wire protocol through the transport
 * API directly, so it can send what librblk never would:
 *
 *   rblk_rawclient reflect URL HOST KEYFILE
 *        answer the challenge with the target's own nonce as ours (and a
 *        MAC that is right for that input): must be refused AUTH_FAILED
 *   rblk_rawclient replay URL HOST KEYFILE
 *        log in properly (checking the target's AUTH_RESULT), then send the
 *        same AUTH_RESPONSE bytes on a second connection: must be refused
 *        AUTH_FAILED
 *   rblk_rawclient rowrite URL HOST KEYFILE
 *        log in (a read-only grant) and send a WRITE command anyway: the
 *        target must answer READ_ONLY
 *   rblk_rawclient skip URL HOST KEYFILE
 *        take the challenge and send a READ command instead of answering:
 *        must be refused BAD_STATE (no way around authentication)
 *   rblk_rawclient stall URL HOST KEYFILE
 *        take the challenge and never answer: the target must drop the
 *        connection at its 10 s login deadline (prints the seconds)
 *   rblk_rawclient isolation URL [HOST KEYFILE]
 *        log in connections A and B. A's READ window (lent by its RESP,
 *        not yet read) used by B: remote access error; A's WRITE window
 *        (its GRANT) used by B: remote access error, and B's bytes never
 *        land; A finishes both commands and verifies the data; A's READ
 *        window used by A after its READ_DONE: remote access error; where
 *        the target takes READ_DONE in a command (RBLK_F_CMD_DONE), the
 *        same after the tag's next command returned it, and a DONE that
 *        does not invalidate the window or names none fails the
 *        connection
 *   rblk_rawclient stale URL ROUNDS
 *        on 4 connections (so every worker serves some), ROUNDS times
 *        each: a WRITE whose GRANT is answered with WRITE_DATA without
 *        writing the window, or after writing only its first 512 bytes
 *        (0xA5), or (every third round) after writing it whole, the
 *        WRITE_DATA chained behind the RDMA WRITE, then a READ of the
 *        same block: every byte read back must be 0 or 0xA5 (all 0xA5
 *        after a whole write), never a byte another connection left in
 *        the slot (run it while a legitimate client writes another
 *        export); and a 512-byte READ of a block it wrote whole must
 *        return its bytes. A failure names the connection, the round and
 *        the completion awaited, with the connection's last work
 *        requests and completions
 *   rblk_rawclient hold URL N SECS
 *        N connections (queue depth 8) each take 3 WRITE windows and 3
 *        pull READ windows of 1 MiB and never use or return them,
 *        sending a KEEPALIVE every second for SECS seconds; prints when
 *        the target dropped each one (exit 0 when all were dropped)
 *   rblk_rawclient sweep URL N [HOST KEYFILE]
 *        hold a READ window open on A, then try N guessed keys (every key
 *        byte of the lowest key indexes) against that slot address, each
 *        on a fresh connection: all must fail with a remote access error;
 *        then A finishes its READ and verifies
 *
 * Prints what happened; exits 0 when the target behaved, 1 otherwise.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/proto.h"
#include "common/url.h"
#include "common/util.h"
#include "transport/transport.h"

#define NR_RECV 4
#define BLK 4096
static int timeout_ms = 10000;
static bool quiet; /* sweep: no line per refused key */
#define TIMEOUT_MS timeout_ms

#define TRACE_LEN 16 /* what a connection did last, for a failure message */

struct rc {
	struct xp_conn *xc;
	int id; /* stale: the connection's number, for messages */
	char trace[TRACE_LEN][96];
	unsigned int ntrace;
	char *mem; /* NR_RECV receive buffers, a send buffer, two data blocks */
	struct xp_mr *mr;
	struct rblk_login login;
	struct rblk_auth_ctx ctx;
	uint8_t resp_wire[RBLK_AUTH_RESPONSE_SIZE]; /* our last AUTH_RESPONSE */
	/* a message that came while wait_rdma() waited: next_wc()'s next */
	bool held;
	struct xp_wc held_wc;
	char held_msg[RBLK_MSG_MAX];
};

static struct rblk_url url;
static unsigned int held_msgs;	   /* messages wait_rdma() held, for the log */
static uint16_t conn_qd = 4;	   /* hold: 8 */
static uint32_t conn_max_io = BLK; /* hold: 1 MiB */
static uint32_t io_len = BLK; /* bytes of a data command (stale: 512 too) */
static const struct xp_ops *ops;
static const char *host = "";
static uint8_t secret[RBLK_SECRET_MAX];
static size_t secret_len;

/*
 * What the program is doing (set by step()) and the connection it waits
 * on: a failure names both and the connection's last posts and
 * completions, so a timeout says which message never came.
 */
static char where[160];
static const char *waiting = ""; /* the completion next_wc() waits for */
static struct rc *cur;
static uint64_t t0_ms;

static void step(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void step(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(where, sizeof(where), fmt, ap);
	va_end(ap);
}

static void note(struct rc *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct rc *c, const char *fmt, ...)
{
	char *t = c->trace[c->ntrace++ % TRACE_LEN];
	int n = snprintf(t, sizeof(c->trace[0]), "%6.3f ",
			 (double)(now_ms() - t0_ms) / 1000.0);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t + n, sizeof(c->trace[0]) - (size_t)n, fmt, ap);
	va_end(ap);
}

static void die_context(void)
{
	struct rc *c = cur;

	if (where[0])
		fprintf(stderr, "rawclient: while %s%s%s\n", where,
			waiting[0] ? ", waiting for " : "", waiting);
	if (!c || !c->xc)
		return;
	fprintf(stderr,
		"rawclient: connection %d (transport state %s), its last "
		"work requests and completions:\n",
		c->id,
		xp_state(c->xc) == XP_CONN_ERROR ? "error" : "connected");
	for (unsigned int i = c->ntrace > TRACE_LEN ? c->ntrace - TRACE_LEN : 0;
	     i < c->ntrace; i++)
		fprintf(stderr, "rawclient:   %s\n", c->trace[i % TRACE_LEN]);
}

#define DIE(...)                                                               \
	do {                                                                   \
		fprintf(stderr, "rawclient: " __VA_ARGS__);                    \
		fputc('\n', stderr);                                           \
		die_context();                                                 \
		exit(1);                                                       \
	} while (0)

static const char *wr_name(enum xp_wr_opcode op)
{
	switch (op) {
	case XP_WR_SEND:
		return "SEND";
	case XP_WR_SEND_WITH_INV:
		return "SEND_WITH_INV";
	case XP_WR_RDMA_WRITE:
		return "RDMA WRITE";
	case XP_WR_RDMA_READ:
		return "RDMA READ";
	default:
		return "other";
	}
}

/* Note a chain about to be posted on c (its messages' types too). */
static void note_post(struct rc *c, const struct xp_send_wr *wr)
{
	for (; wr; wr = wr->next) {
		bool msg = wr->opcode == XP_WR_SEND ||
			   wr->opcode == XP_WR_SEND_WITH_INV;

		note(c, "post %s wr_id %llu len %u type %d rkey 0x%x",
		     wr_name(wr->opcode), (unsigned long long)wr->wr_id,
		     wr->sge.length,
		     msg ? rblk_msg_type(wr->sge.addr, wr->sge.length) : 0,
		     msg ? wr->invalidate_rkey : wr->rkey);
	}
}

static char *recv_buf(struct rc *c, unsigned int i)
{
	return c->mem + (size_t)i * RBLK_MSG_MAX;
}

static char *send_buf(struct rc *c)
{
	return c->mem + NR_RECV * RBLK_MSG_MAX;
}

static char *data_buf(struct rc *c, unsigned int i)
{
	return c->mem + (NR_RECV + 1) * RBLK_MSG_MAX + (size_t)i * BLK;
}

static void post_recv(struct rc *c, unsigned int i)
{
	struct xp_sge sge = {recv_buf(c, i), RBLK_MSG_MAX, c->mr};

	if (xp_post_recv(c->xc, 100 + i, &sge))
		DIE("post_recv failed");
}

/*
 * Give a consumed receive back. The peer may already have closed the
 * connection after the message just read (a refusal is sent, then the
 * connection dropped): then the repost is refused with -ENOTCONN, which
 * is no error here; the next completion says the connection is gone.
 */
static void repost_recv(struct rc *c, unsigned int i)
{
	struct xp_sge sge = {recv_buf(c, i), RBLK_MSG_MAX, c->mr};
	int ret = xp_post_recv(c->xc, 100 + i, &sge);

	if (ret && ret != -ENOTCONN)
		DIE("post_recv failed: %s", strerror(-ret));
}

static void rc_connect(struct rc *c)
{
	struct xp_conn_attr attr = {.max_send_wr = 8, .max_recv_wr = NR_RECV};
	char priv[RBLK_CM_REQ_SIZE];
	size_t len = (NR_RECV + 1) * RBLK_MSG_MAX + 2 * BLK;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = xp_connect(ops, NULL, url.host, url.port, &attr, priv,
			 rblk_cm_req_encode(priv, conn_qd), TIMEOUT_MS, &c->xc,
			 NULL, NULL);
	if (ret)
		DIE("connect: %s", strerror(-ret));
	if (posix_memalign((void **)&c->mem, 4096, len))
		DIE("out of memory");
	memset(c->mem, 0, len);
	if (xp_reg_mr(c->xc, c->mem, len,
		      XP_ACCESS_LOCAL_WRITE | XP_ACCESS_REMOTE_WRITE, &c->mr))
		DIE("reg_mr failed");
	for (unsigned int i = 0; i < NR_RECV; i++)
		post_recv(c, i);
}

static void rc_close(struct rc *c)
{
	xp_destroy(c->xc);
	free(c->mem);
}

/* Post one work request; data ones use data block `blk`. */
static int post(struct rc *c, enum xp_wr_opcode op, const void *msg, size_t len,
		unsigned int blk, uint64_t raddr, uint32_t rkey)
{
	struct xp_send_wr wr = {0}, *bad;

	wr.wr_id = op;
	wr.opcode = op;
	wr.flags = XP_SEND_SIGNALED;
	if (op == XP_WR_SEND || op == XP_WR_SEND_WITH_INV) {
		memcpy(send_buf(c), msg, len);
		wr.sge.addr = send_buf(c);
		wr.sge.length = (uint32_t)len;
		wr.invalidate_rkey = rkey;
	} else {
		wr.sge.addr = data_buf(c, blk);
		wr.sge.length = io_len;
		wr.remote_addr = raddr;
		wr.rkey = rkey;
	}
	wr.sge.mr = c->mr;
	note_post(c, &wr);
	return xp_post_send(c->xc, &wr, &bad);
}

/*
 * Next completion from the transport that is not a successful SEND.
 * Returns its status; a received message is copied to copy (its length
 * to len) and its buffer reposted at once.
 */
static enum xp_wc_status poll_wc(struct rc *c, struct xp_wc *wc, void *copy,
				 uint32_t *len)
{
	uint64_t deadline = now_ms() + TIMEOUT_MS;
	bool armed = false;
	int n;

	cur = c;
	for (;;) {
		n = xp_poll(c->xc, wc, 1);
		if (n < 0)
			DIE("poll: %s", strerror(-n));
		if (n == 1) {
			armed = false;
			note(c, "got %s %s wr_id %llu len %u type %d",
			     xp_wc_opcode_str(wc->opcode),
			     xp_wc_status_str(wc->status),
			     (unsigned long long)wc->wr_id, wc->byte_len,
			     wc->opcode == XP_WC_RECV &&
				     wc->status == XP_WC_SUCCESS
				 ? rblk_msg_type(
				       recv_buf(c, (unsigned)wc->wr_id - 100),
				       wc->byte_len)
				 : 0);
			if (wc->status == XP_WC_SUCCESS &&
			    wc->opcode == XP_WC_SEND)
				continue;
			if (wc->status == XP_WC_SUCCESS &&
			    wc->opcode == XP_WC_RECV) {
				memcpy(copy,
				       recv_buf(c, (unsigned)wc->wr_id - 100),
				       wc->byte_len);
				*len = wc->byte_len;
				repost_recv(c, (unsigned)wc->wr_id - 100);
			}
			return wc->status;
		}
		if (!armed) {
			armed = xp_arm(c->xc) <= 0;
			continue;
		}
		{
			struct pollfd pfd = {.fd = xp_fd(c->xc),
					     .events = POLLIN};
			uint64_t now = now_ms();

			if (now >= deadline)
				DIE("timed out waiting for a completion");
			poll(&pfd, 1, (int)(deadline - now));
			armed = false;
		}
	}
}

/* poll_wc(), but a message wait_rdma() held comes first. */
static enum xp_wc_status next_wc(struct rc *c, struct xp_wc *wc, void *copy,
				 uint32_t *len)
{
	if (!c->held)
		return poll_wc(c, wc, copy, len);
	c->held = false;
	*wc = c->held_wc;
	memcpy(copy, c->held_msg, wc->byte_len);
	*len = wc->byte_len;
	return wc->status;
}

/* Wait for one message; returns its type, the bytes in msg. */
static int recv_msg(struct rc *c, void *msg, uint32_t *len)
{
	struct xp_wc wc;

	if (next_wc(c, &wc, msg, len) != XP_WC_SUCCESS ||
	    wc.opcode != XP_WC_RECV)
		DIE("connection failed (%s) while waiting for a message",
		    xp_wc_status_str(wc.status));
	return rblk_msg_type(msg, *len);
}

static void send_hello(struct rc *c, bool auth)
{
	struct rblk_hello h = {.queue_depth = conn_qd, .max_io = conn_max_io};
	char b[RBLK_HELLO_SIZE];

	h.flags = auth ? RBLK_HELLO_F_AUTH : 0;
	snprintf(h.export_name, sizeof(h.export_name), "%s", url.export_name);
	snprintf(h.host_name, sizeof(h.host_name), "%s", host);
	if (post(c, XP_WR_SEND, b, rblk_hello_encode(b, &h), 0, 0, 0))
		DIE("sending HELLO failed");
}

/* Wait for the challenge and fill c->ctx with its nonce and the names. */
static void get_challenge(struct rc *c)
{
	struct rblk_auth_challenge ch;
	char msg[RBLK_MSG_MAX];
	uint32_t len;
	int type = recv_msg(c, msg, &len);

	if (type == RBLK_MSG_LOGIN && !rblk_login_decode(msg, len, &c->login))
		DIE("expected AUTH_CHALLENGE, got LOGIN status %u (%s)",
		    c->login.status, rblk_status_str((int)c->login.status));
	if (type != RBLK_MSG_AUTH_CHALLENGE ||
	    rblk_auth_challenge_decode(msg, len, &ch))
		DIE("expected AUTH_CHALLENGE, got message type %d", type);
	memcpy(c->ctx.target_nonce, ch.nonce, RBLK_AUTH_NONCE_LEN);
	memcpy(c->ctx.target_name, ch.target_name, RBLK_NAME_MAX);
	snprintf(c->ctx.host_name, sizeof(c->ctx.host_name), "%s", host);
	snprintf(c->ctx.export_name, sizeof(c->ctx.export_name), "%s",
		 url.export_name);
}

/* Send AUTH_RESPONSE for initiator nonce `nonce` with a right MAC. */
static void respond(struct rc *c, const uint8_t *nonce)
{
	struct rblk_auth_response r;

	memcpy(c->ctx.initiator_nonce, nonce, RBLK_AUTH_NONCE_LEN);
	memcpy(r.nonce, nonce, RBLK_AUTH_NONCE_LEN);
	rblk_auth_mac(secret, secret_len, RBLK_AUTH_ROLE_INITIATOR, &c->ctx,
		      r.mac);
	rblk_auth_response_encode(c->resp_wire, &r);
	if (post(c, XP_WR_SEND, c->resp_wire, sizeof(c->resp_wire), 0, 0, 0))
		DIE("sending AUTH_RESPONSE failed");
}

/* Wait for LOGIN (after AUTH_RESULT, checked, when authenticating). */
static uint32_t get_login(struct rc *c, bool expect_result)
{
	char msg[RBLK_MSG_MAX];
	uint32_t len;
	int type = recv_msg(c, msg, &len);

	if (type == RBLK_MSG_AUTH_RESULT) {
		struct rblk_auth_result res;

		if (!expect_result || rblk_auth_result_decode(msg, len, &res))
			DIE("unexpected AUTH_RESULT");
		if (rblk_auth_verify(secret, secret_len, RBLK_AUTH_ROLE_TARGET,
				     &c->ctx, res.mac))
			DIE("the target's AUTH_RESULT MAC is wrong");
		printf("target proved the secret (AUTH_RESULT verified)\n");
		type = recv_msg(c, msg, &len);
	}
	if (type != RBLK_MSG_LOGIN || rblk_login_decode(msg, len, &c->login))
		DIE("expected LOGIN, got message type %d", type);
	return c->login.status;
}

static void login(struct rc *c)
{
	uint8_t nonce[RBLK_AUTH_NONCE_LEN];

	rc_connect(c);
	send_hello(c, secret_len > 0);
	if (secret_len) {
		get_challenge(c);
		rblk_auth_nonce(nonce);
		respond(c, nonce);
	}
	if (get_login(c, secret_len > 0) != RBLK_S_OK)
		DIE("login refused: %s", rblk_status_str((int)c->login.status));
}

static int expect_refused(struct rc *c, const char *what)
{
	uint32_t st = get_login(c, false);

	if (st != RBLK_S_AUTH_FAILED) {
		printf("FAIL: %s: login status %u (%s), want AUTH_FAILED\n",
		       what, st, rblk_status_str((int)st));
		return 1;
	}
	printf("%s refused: %s\n", what, rblk_status_str((int)st));
	return 0;
}

static int cmd_reflect(void)
{
	struct rc c;
	int ret;

	rc_connect(&c);
	send_hello(&c, true);
	get_challenge(&c);
	respond(&c, c.ctx.target_nonce); /* the target's nonce as ours */
	ret = expect_refused(&c, "reflected challenge");
	rc_close(&c);
	return ret;
}

static int cmd_replay(void)
{
	uint8_t old[RBLK_AUTH_RESPONSE_SIZE];
	struct rc c;
	int ret;

	login(&c);
	printf("first connection logged in (session 0x%llx)\n",
	       (unsigned long long)c.login.session_id);
	memcpy(old, c.resp_wire, sizeof(old));
	rc_close(&c);

	rc_connect(&c);
	send_hello(&c, true);
	get_challenge(&c);
	if (post(&c, XP_WR_SEND, old, sizeof(old), 0, 0, 0))
		DIE("sending the replayed response failed");
	ret = expect_refused(&c, "replayed response");
	rc_close(&c);
	return ret;
}

/* The next message (skipping other completions); its type. */
static int next_msg(struct rc *c, char *msg, uint32_t *len)
{
	for (;;) {
		struct xp_wc wc;

		if (next_wc(c, &wc, msg, len) != XP_WC_SUCCESS)
			DIE("connection failed: %s",
			    xp_wc_status_str(wc.status));
		if (wc.opcode == XP_WC_RECV)
			return rblk_msg_type(msg, *len);
	}
}

/*
 * Wait for the completion of a one-sided op we posted; its status. A
 * message that comes first is held for next_wc(): completions of the
 * send and the receive queue come in no set order, so the answer to a
 * message posted behind an RDMA WRITE (its WRITE_DATA's RESP) may be
 * reported before the WRITE itself (rxe on a busy host does so).
 */
static enum xp_wc_status wait_rdma(struct rc *c)
{
	char msg[RBLK_MSG_MAX];
	uint32_t len;

	for (;;) {
		struct xp_wc wc;
		enum xp_wc_status st = poll_wc(c, &wc, msg, &len);

		if (st == XP_WC_SUCCESS && wc.opcode == XP_WC_RECV) {
			if (c->held)
				DIE("a second message came before an RDMA "
				    "completion (type %d)",
				    rblk_msg_type(msg, len));
			c->held = true;
			held_msgs++;
			c->held_wc = wc;
			memcpy(c->held_msg, msg, len);
			continue;
		}
		if (st != XP_WC_SUCCESS || wc.opcode == XP_WC_RDMA_READ ||
		    wc.opcode == XP_WC_RDMA_WRITE)
			return st;
	}
}

/* The window a command was lent: a pull READ's RESP or a WRITE's GRANT. */
struct window {
	uint64_t addr;
	uint32_t rkey;
	uint32_t status; /* the RESP's status when no window came */
};

/*
 * Send a data command on tag 0. With flags RBLK_CMD_F_DONE it returns the
 * tag's READ window: sent as SEND_WITH_INV of inv_rkey, or as a plain SEND
 * when inv_rkey is 0 (which the target must refuse).
 */
static void send_cmd(struct rc *c, uint8_t op, uint64_t off, uint8_t flags,
		     uint32_t inv_rkey)
{
	struct rblk_cmd cmd = {.tag = 0,
			       .opcode = op,
			       .length = io_len,
			       .offset = off,
			       .flags = flags};
	char b[RBLK_CMD_SIZE];

	if (post(c, inv_rkey ? XP_WR_SEND_WITH_INV : XP_WR_SEND, b,
		 rblk_cmd_encode(b, &cmd), 0, 0, inv_rkey))
		DIE("sending a command failed");
}

/*
 * Send a data command on tag 0 (send_cmd()) and wait for its window (or
 * its RESP).
 */
static struct window command_start_ex(struct rc *c, uint8_t op, uint64_t off,
				      uint8_t flags, uint32_t inv_rkey)
{
	struct window w = {0};
	char msg[RBLK_MSG_MAX];
	uint32_t len;
	int type;

	send_cmd(c, op, off, flags, inv_rkey);
	waiting = op == RBLK_OP_WRITE ? "the WRITE's GRANT (or its RESP)"
				      : "the READ's RESP (its window)";
	type = next_msg(c, msg, &len);
	waiting = "";
	if (type == RBLK_MSG_GRANT) {
		struct rblk_grant g;

		if (rblk_grant_decode(msg, len, 4, BLK, &g) || g.tag != 0)
			DIE("malformed GRANT");
		w.addr = g.addr;
		w.rkey = g.rkey;
		return w;
	}
	{
		struct rblk_resp resp;

		if (type != RBLK_MSG_RESP ||
		    rblk_resp_decode(msg, len, 4, &resp))
			DIE("expected GRANT or RESP, got message type %d",
			    type);
		w.status = resp.status;
		if (resp.flags & RBLK_RESP_F_PULL) {
			w.addr = resp.addr;
			w.rkey = resp.rkey;
		}
	}
	return w;
}

static struct window command_start(struct rc *c, uint8_t op, uint64_t off)
{
	return command_start_ex(c, op, off, 0, 0);
}

/* RDMA READ window w into data block 0, and nothing else. */
static void read_window(struct rc *c, struct window w)
{
	memset(data_buf(c, 0), 0, BLK);
	if (post(c, XP_WR_RDMA_READ, NULL, 0, 0, w.addr, w.rkey) ||
	    wait_rdma(c) != XP_WC_SUCCESS)
		DIE("reading our own window failed");
}

/* c sent what the target must refuse by failing the connection. */
static int expect_conn_failed(struct rc *c, const char *what)
{
	char msg[RBLK_MSG_MAX];
	uint32_t len;
	struct xp_wc wc;
	enum xp_wc_status st = next_wc(c, &wc, msg, &len);

	if (st == XP_WC_SUCCESS) {
		printf("FAIL: %s: the target went on (message type %d)\n", what,
		       rblk_msg_type(msg, len));
		return 1;
	}
	printf("%s: connection failed (%s)\n", what, xp_wc_status_str(st));
	return 0;
}

/*
 * Finish a command whose window w came: RDMA READ it into data block 0
 * (READ) or RDMA WRITE data block 0 into it (WRITE), then the SEND that
 * invalidates it (READ_DONE fenced behind the READ, WRITE_DATA). Returns
 * the command's final status (a WRITE's RESP).
 */
static uint32_t command_finish(struct rc *c, uint8_t op, struct window w)
{
	bool read = op == RBLK_OP_READ;
	struct rblk_done d = {.type = read ? RBLK_MSG_READ_DONE
					   : RBLK_MSG_WRITE_DATA,
			      .tag = 0,
			      .rkey = w.rkey};
	struct xp_send_wr wr[2], *bad;
	char msg[RBLK_MSG_MAX];
	struct rblk_resp resp;
	uint32_t len;

	memset(wr, 0, sizeof(wr));
	wr[0].next = &wr[1];
	wr[0].wr_id = 1;
	wr[0].opcode = read ? XP_WR_RDMA_READ : XP_WR_RDMA_WRITE;
	wr[0].flags = XP_SEND_SIGNALED;
	wr[0].sge = (struct xp_sge){data_buf(c, 0), io_len, c->mr};
	wr[0].remote_addr = w.addr;
	wr[0].rkey = w.rkey;
	wr[1].wr_id = 2;
	wr[1].opcode = XP_WR_SEND_WITH_INV;
	wr[1].flags = XP_SEND_SIGNALED | (read ? XP_SEND_FENCE : 0);
	wr[1].invalidate_rkey = w.rkey;
	wr[1].sge = (struct xp_sge){
	    send_buf(c), (uint32_t)rblk_done_encode(send_buf(c), &d), c->mr};
	note_post(c, wr);
	if (xp_post_send(c->xc, wr, &bad))
		DIE("posting the data and its done message failed");
	waiting =
	    read ? "the RDMA READ's completion" : "the RDMA WRITE's completion";
	if (wait_rdma(c) != XP_WC_SUCCESS)
		DIE("our own window access failed");
	waiting = "";
	if (read)
		return RBLK_S_OK;
	waiting = "the WRITE's RESP";
	if (next_msg(c, msg, &len) != RBLK_MSG_RESP ||
	    rblk_resp_decode(msg, len, 4, &resp))
		DIE("expected the WRITE's RESP");
	waiting = "";
	return resp.status;
}

/* One command on tag 0 of a logged-in connection; returns the status. */
static uint32_t command(struct rc *c, uint8_t op, uint64_t off)
{
	struct window w = command_start(c, op, off);

	if (!w.rkey)
		return w.status;
	return command_finish(c, op, w);
}

/*
 * A one-sided op with a key that is not ours must fail with a remote
 * access error. RDMA READ reports it on the READ itself. An RDMA WRITE
 * over the tcp transport completes once its bytes are in the kernel
 * (transport/tcp.c, "Known differences"), so there the error arrives as
 * the connection failing right after; that the bytes never landed is
 * checked by their owner.
 */
/* b uses (addr, rkey), which belong to another connection: must fail. */
static int foreign_access_at(struct rc *b, enum xp_wr_opcode op,
			     const char *what, uint64_t addr, uint32_t rkey)
{
	struct xp_wc wc;
	char msg[RBLK_MSG_MAX];
	uint32_t len;
	enum xp_wc_status st;

	memset(data_buf(b, 1), 0x5a, BLK);
	if (post(b, op, NULL, 0, 1, addr, rkey))
		DIE("posting %s failed", what);
	st = next_wc(b, &wc, msg, &len);
	if (st == XP_WC_SUCCESS && op == XP_WR_RDMA_WRITE &&
	    !strcmp(url.scheme, "tcp")) {
		st = next_wc(b, &wc, msg, &len);
		if (st == XP_WC_FLUSH_ERR)
			st = XP_WC_REM_ACCESS_ERR; /* logged by the transport */
	}
	/*
	 * rdma: the refusing side's disconnect can overtake the NAK, so the
	 * issuer may see its op flushed; the connection failed either way.
	 */
	if (st == XP_WC_FLUSH_ERR && !strcmp(url.scheme, "rdma"))
		st = XP_WC_REM_ACCESS_ERR;
	if (st == XP_WC_SUCCESS) {
		printf("FAIL: %s with another connection's rkey succeeded\n",
		       what);
		return 1;
	}
	if (st != XP_WC_REM_ACCESS_ERR) {
		printf("FAIL: %s failed with %s, want a remote access error\n",
		       what, xp_wc_status_str(st));
		return 1;
	}
	if (!quiet)
		printf("%s with rkey 0x%x: %s\n", what, rkey,
		       xp_wc_status_str(st));
	return 0;
}

static int cmd_rowrite(void)
{
	struct rc c;
	uint32_t st;

	login(&c);
	if (!(c.login.features & RBLK_F_READ_ONLY)) {
		printf("FAIL: login is not read-only (features 0x%x)\n",
		       c.login.features);
		return 1;
	}
	memset(data_buf(&c, 0), 0x77, BLK);
	st = command(&c, RBLK_OP_WRITE, 0);
	rc_close(&c);
	if (st != RBLK_S_READ_ONLY) {
		printf("FAIL: WRITE on a read-only grant: status %u (%s)\n", st,
		       rblk_status_str((int)st));
		return 1;
	}
	printf("WRITE on a read-only grant refused: %s\n",
	       rblk_status_str((int)st));
	return 0;
}

static int cmd_skip(void)
{
	struct rblk_cmd cmd = {.tag = 0, .opcode = RBLK_OP_READ, .length = BLK};
	char b[RBLK_CMD_SIZE];
	struct rc c;
	uint32_t st;

	rc_connect(&c);
	send_hello(&c, true);
	get_challenge(&c);
	if (post(&c, XP_WR_SEND, b, rblk_cmd_encode(b, &cmd), 0, 0, 0))
		DIE("sending the command failed");
	st = get_login(&c, false);
	rc_close(&c);
	if (st != RBLK_S_BAD_STATE) {
		printf(
		    "FAIL: a command instead of AUTH_RESPONSE: login status %u (%s)\n",
		    st, rblk_status_str((int)st));
		return 1;
	}
	printf("command instead of AUTH_RESPONSE refused: %s\n",
	       rblk_status_str((int)st));
	return 0;
}

static int cmd_stall(void)
{
	uint64_t start = now_ms();
	struct xp_wc wc;
	char msg[RBLK_MSG_MAX];
	uint32_t len;
	struct rc c;
	double secs;

	timeout_ms = 20000;
	rc_connect(&c);
	send_hello(&c, true);
	get_challenge(&c);
	while (next_wc(&c, &wc, msg, &len) == XP_WC_SUCCESS)
		DIE("unexpected message type %d while stalling",
		    rblk_msg_type(msg, len));
	secs = (double)(now_ms() - start) / 1000;
	rc_close(&c);
	printf("stalled after the challenge: dropped after %.1f s\n", secs);
	return secs >= 9.5 && secs < 13 ? 0 : 1;
}

/* Fill data block 0 with a pattern of seed; keep a copy in block 1. */
static void pattern(struct rc *c, int seed)
{
	for (int i = 0; i < BLK; i++)
		data_buf(c, 0)[i] = (char)(i * 7 + seed);
	memcpy(data_buf(c, 1), data_buf(c, 0), BLK);
}

/* A reads off back and compares it with block 1. */
static int verify(struct rc *a, uint64_t off, const char *what)
{
	uint32_t st;

	memset(data_buf(a, 0), 0, BLK);
	st = command(a, RBLK_OP_READ, off);
	if (st)
		DIE("A: READ failed: %s", rblk_status_str((int)st));
	if (memcmp(data_buf(a, 0), data_buf(a, 1), BLK)) {
		printf("FAIL: %s: connection A read back different data\n",
		       what);
		return 1;
	}
	printf("connection A verifies its data (%s)\n", what);
	return 0;
}

/*
 * RBLK_CMD_F_DONE: the tag's next command returns its READ window. The
 * key is dead once that command is in; a DONE that does not invalidate
 * the window, or that names no window, fails the connection.
 */
static int isolation_cmd_done(void)
{
	struct window w, w2;
	struct rc a;
	int bad = 0;

	login(&a);
	pattern(&a, 3); /* what cmd_isolation() wrote at 8192 */
	w = command_start(&a, RBLK_OP_READ, 8192);
	if (!w.rkey)
		DIE("A: READ got no window (status %u)", w.status);
	read_window(&a, w);
	if (memcmp(data_buf(&a, 0), data_buf(&a, 1), BLK)) {
		printf(
		    "FAIL: A's READ through its window read different data\n");
		bad = 1;
	}
	w2 = command_start_ex(&a, RBLK_OP_READ, 8192, RBLK_CMD_F_DONE, w.rkey);
	if (!w2.rkey)
		DIE("A: READ returning a window got no window (status %u)",
		    w2.status);
	read_window(&a, w2);
	if (memcmp(data_buf(&a, 0), data_buf(&a, 1), BLK)) {
		printf(
		    "FAIL: A's READ after returning a window read different data\n");
		bad = 1;
	}
	bad |= foreign_access_at(
	    &a, XP_WR_RDMA_READ,
	    "A: RDMA READ with its own key after its tag's next command",
	    w.addr, w.rkey);
	rc_close(&a);

	login(&a);
	w = command_start(&a, RBLK_OP_READ, 8192);
	if (!w.rkey)
		DIE("A: READ got no window (status %u)", w.status);
	send_cmd(&a, RBLK_OP_READ, 8192, RBLK_CMD_F_DONE, 0);
	bad |=
	    expect_conn_failed(&a, "A: DONE without invalidating the window");
	rc_close(&a);

	login(&a);
	send_cmd(&a, RBLK_OP_READ, 8192, RBLK_CMD_F_DONE, 0);
	bad |= expect_conn_failed(&a, "A: DONE on a tag that holds no window");
	rc_close(&a);
	return bad;
}

static int cmd_isolation(void)
{
	struct rc a, b;
	struct window w;
	uint32_t st;
	int bad = 0;

	login(&a);
	/* a block A owns, written the normal way */
	pattern(&a, 3);
	st = command(&a, RBLK_OP_WRITE, 8192);
	if (st)
		DIE("A: WRITE failed: %s", rblk_status_str((int)st));

	/* A's READ window, lent and not yet read: B may not use it */
	w = command_start(&a, RBLK_OP_READ, 8192);
	if (!w.rkey)
		DIE("A: READ got no window (status %u)", w.status);
	printf("A: READ window addr 0x%llx rkey 0x%x\n",
	       (unsigned long long)w.addr, w.rkey);
	login(&b);
	bad |= foreign_access_at(&b, XP_WR_RDMA_READ,
				 "B: RDMA READ of A's in-flight READ window",
				 w.addr, w.rkey);
	rc_close(&b);
	memset(data_buf(&a, 0), 0, BLK);
	command_finish(&a, RBLK_OP_READ, w);
	if (memcmp(data_buf(&a, 0), data_buf(&a, 1), BLK)) {
		printf(
		    "FAIL: A's READ through its window read different data\n");
		bad = 1;
	}

	/* A's WRITE window (its GRANT): B's bytes must never land */
	pattern(&a, 11);
	w = command_start(&a, RBLK_OP_WRITE, 16384);
	if (!w.rkey)
		DIE("A: WRITE got no GRANT (status %u)", w.status);
	printf("A: WRITE window addr 0x%llx rkey 0x%x\n",
	       (unsigned long long)w.addr, w.rkey);
	login(&b);
	bad |= foreign_access_at(
	    &b, XP_WR_RDMA_WRITE,
	    "B: RDMA WRITE into A's in-flight WRITE window", w.addr, w.rkey);
	rc_close(&b);
	st = command_finish(&a, RBLK_OP_WRITE, w);
	if (st)
		DIE("A: WRITE failed: %s", rblk_status_str((int)st));
	bad |= verify(&a, 16384, "after B's write into its window");

	/* a key is dead once its command completed: A's own stale key */
	w = command_start(&a, RBLK_OP_READ, 8192);
	if (!w.rkey)
		DIE("A: READ got no window (status %u)", w.status);
	command_finish(&a, RBLK_OP_READ, w);
	bad |= foreign_access_at(
	    &a, XP_WR_RDMA_READ,
	    "A: RDMA READ with its own key after READ_DONE", w.addr, w.rkey);
	rc_close(&a);
	if (a.login.features & RBLK_F_CMD_DONE)
		bad |= isolation_cmd_done();

	login(&a);
	if (a.login.features & RBLK_F_DIRECT) {
		struct rc c;
		uint64_t c_addr;
		uint32_t c_rkey;

		/* the volume window is per connection too */
		login(&b);
		bad |=
		    foreign_access_at(&b, XP_WR_RDMA_READ, "direct RDMA READ",
				      a.login.vol_addr, a.login.vol_rkey);
		rc_close(&b);
		/* and dies with its connection: C's key after C is gone */
		login(&c);
		c_addr = c.login.vol_addr;
		c_rkey = c.login.vol_rkey;
		rc_close(&c);
		login(&b);
		bad |= foreign_access_at(
		    &b, XP_WR_RDMA_READ,
		    "direct RDMA READ (closed connection C)", c_addr, c_rkey);
		rc_close(&b);
	}
	/* A carries on */
	pattern(&a, 5);
	st = command(&a, RBLK_OP_WRITE, 8192);
	if (st)
		DIE("A: WRITE failed: %s", rblk_status_str((int)st));
	bad |= verify(&a, 8192, "at the end");
	rc_close(&a);
	return bad;
}

/*
 * n guessed keys, each on a fresh connection that never logs in (a key
 * needs no login to be tried), against the slot address of a READ window
 * A holds open: every one must be refused. Keys are index << 8 | key
 * byte, the shape both transports give, lowest indexes first, so the
 * pool's region key and the windows of the first connections are among
 * them.
 */
static int cmd_sweep(unsigned int n)
{
	unsigned int refused = 0;
	struct rc a, b;
	struct window w;
	uint32_t st;
	int bad = 0;

	login(&a);
	pattern(&a, 9);
	st = command(&a, RBLK_OP_WRITE, 4096);
	if (st)
		DIE("A: WRITE failed: %s", rblk_status_str((int)st));
	w = command_start(&a, RBLK_OP_READ, 4096);
	if (!w.rkey)
		DIE("A: READ got no window (status %u)", w.status);
	quiet = true;
	for (unsigned int i = 0; i < n; i++) {
		uint32_t key = (i / 256 + 1) << 8 | (i % 256);

		rc_connect(&b);
		if (foreign_access_at(&b, XP_WR_RDMA_READ, "guessed key",
				      w.addr, key))
			bad = 1;
		else
			refused++;
		rc_close(&b);
	}
	quiet = false;
	printf("sweep: %u of %u guessed keys refused (remote access error)\n",
	       refused, n);
	memset(data_buf(&a, 0), 0, BLK);
	command_finish(&a, RBLK_OP_READ, w);
	if (memcmp(data_buf(&a, 0), data_buf(&a, 1), BLK)) {
		printf("FAIL: A's READ after the sweep read different data\n");
		bad = 1;
	} else {
		printf("connection A verifies its data after the sweep\n");
	}
	rc_close(&a);
	return bad;
}

/* ---- stale slot bytes (docs/PROTOCOL.md, "What a session may hold") */

#define STALE_CONNS 4
#define STALE_MINE 0xA5

/*
 * Answer WRITE window w with WRITE_DATA after RDMA WRITing only the first
 * len bytes of data block 0 (0: none). Returns the WRITE's status.
 */
static uint32_t write_partial(struct rc *c, struct window w, uint32_t len)
{
	struct rblk_done d = {.type = RBLK_MSG_WRITE_DATA, .rkey = w.rkey};
	char msg[RBLK_MSG_MAX];
	struct rblk_resp resp;
	uint32_t mlen;

	if (len) {
		struct xp_send_wr wr = {.wr_id = 1,
					.opcode = XP_WR_RDMA_WRITE,
					.flags = XP_SEND_SIGNALED,
					.remote_addr = w.addr,
					.rkey = w.rkey};
		struct xp_send_wr *bad;

		wr.sge = (struct xp_sge){data_buf(c, 0), len, c->mr};
		note_post(c, &wr);
		waiting = "the partial RDMA WRITE's completion";
		if (xp_post_send(c->xc, &wr, &bad) ||
		    wait_rdma(c) != XP_WC_SUCCESS)
			DIE("writing our own window failed");
	}
	waiting = "the WRITE's RESP (after WRITE_DATA)";
	if (post(c, XP_WR_SEND_WITH_INV, msg, rblk_done_encode(msg, &d), 0, 0,
		 w.rkey))
		DIE("sending WRITE_DATA failed");
	if (next_msg(c, msg, &mlen) != RBLK_MSG_RESP ||
	    rblk_resp_decode(msg, mlen, conn_qd, &resp))
		DIE("expected the WRITE's RESP");
	waiting = "";
	return resp.status;
}

/* Bytes of data block 0 that are neither 0 nor ours; the first at *at. */
static unsigned int foreign_bytes(struct rc *c, unsigned int *at)
{
	unsigned int n = 0;

	for (unsigned int i = BLK; i-- > 0;)
		if (data_buf(c, 0)[i] &&
		    (uint8_t)data_buf(c, 0)[i] != STALE_MINE) {
			n++;
			*at = i;
		}
	return n;
}

/*
 * A 512-byte READ of c's own block at off, written whole with ours: every
 * byte must be ours (a sub-page READ shares its page with stale bytes the
 * target clears around it, never in it). 0 or 1.
 */
static int small_read_ok(struct rc *c, uint64_t off, unsigned int round)
{
	uint32_t st;

	io_len = 512;
	memset(data_buf(c, 0), 0, BLK);
	st = command(c, RBLK_OP_READ, off + 1024);
	io_len = BLK;
	if (st)
		DIE("512-byte READ failed: %s", rblk_status_str((int)st));
	for (unsigned int i = 0; i < 512; i++)
		if ((uint8_t)data_buf(c, 0)[i] != STALE_MINE) {
			printf(
			    "FAIL: round %u: a 512-byte READ of our own data returned 0x%02x at %u\n",
			    round, (uint8_t)data_buf(c, 0)[i], i);
			return 1;
		}
	return 0;
}

/* Rounds cycle through WRITEs of none, 512 bytes, the whole block. */
static const uint32_t stale_len[3] = {0, 512, BLK};
static const char *const stale_name[3] = {"no", "partial", "whole"};

static int cmd_stale(unsigned int rounds)
{
	struct rc a[STALE_CONNS];
	unsigned int bad = 0, failed_writes = 0;
	const uint64_t known = 1u << 20; /* + i * BLK: each one's own block */

	/*
	 * Generous: rxe in a TCG guest on a busy host. (A timeout here once
	 * was no slow target: wait_rdma() dropped the RESP that came before
	 * its WRITE's completion.)
	 */
	timeout_ms = 30000;

	for (unsigned int i = 0; i < STALE_CONNS; i++) {
		step("logging in connection %u", i);
		login(&a[i]);
		a[i].id = (int)i;
		step("connection %u: writing its own block", i);
		memset(data_buf(&a[i], 0), STALE_MINE, BLK);
		if (command(&a[i], RBLK_OP_WRITE, known + i * BLK))
			DIE("writing our own block failed");
	}
	for (unsigned int r = 0; r < rounds; r++) {
		for (unsigned int i = 0; i < STALE_CONNS; i++) {
			uint64_t off =
			    (uint64_t)((r * STALE_CONNS + i) % 256) * BLK;
			uint32_t len = stale_len[r % 3];
			struct window w;
			unsigned int n, at = 0;
			uint32_t st;

			step("round %u connection %u: WRITE at %llu (tag 0)", r,
			     i, (unsigned long long)off);
			w = command_start(&a[i], RBLK_OP_WRITE, off);

			if (!w.rkey)
				DIE("WRITE not granted: %s",
				    rblk_status_str((int)w.status));
			memset(data_buf(&a[i], 0), STALE_MINE, BLK);
			step("round %u connection %u: WRITE at %llu (tag 0, "
			     "rkey 0x%x), %u bytes written, then WRITE_DATA",
			     r, i, (unsigned long long)off, w.rkey, len);
			if (len < BLK && write_partial(&a[i], w, len))
				failed_writes++;
			/* chained: its RESP may come before the WRITE's
			 * completion (wait_rdma() holds it) */
			if (len == BLK &&
			    command_finish(&a[i], RBLK_OP_WRITE, w))
				DIE("a WRITE written whole failed");
			memset(data_buf(&a[i], 0), 0, BLK);
			step("round %u connection %u: READ at %llu (tag 0)", r,
			     i, (unsigned long long)off);
			st = command(&a[i], RBLK_OP_READ, off);
			if (st)
				DIE("READ failed: %s",
				    rblk_status_str((int)st));
			n = foreign_bytes(&a[i], &at);
			if (n) {
				bad++;
				printf(
				    "FAIL: round %u conn %u (%s write): %u bytes we never wrote came back, e.g. 0x%02x at %u\n",
				    r, i, stale_name[r % 3], n,
				    (uint8_t)data_buf(&a[i], 0)[at], at);
			} else if (len == BLK &&
				   memchr(data_buf(&a[i], 0), 0, BLK)) {
				bad++;
				printf(
				    "FAIL: round %u conn %u: a block written whole read back with zeros\n",
				    r, i);
			}
		}
		/* after the others' commands: pages pass between connections */
		for (unsigned int i = STALE_CONNS; i-- > 0;) {
			step("round %u connection %u: 512-byte READ of its own "
			     "block (tag 0)",
			     r, i);
			bad += (unsigned int)small_read_ok(&a[i],
							   known + i * BLK, r);
		}
	}
	for (unsigned int i = 0; i < STALE_CONNS; i++)
		rc_close(&a[i]);
	printf(
	    "stale: %u rounds x %u connections, %u unwritten or partial WRITEs refused, %u reads wrong (foreign bytes, or ours lost); %u RESPs came before their WRITE's completion\n",
	    rounds, STALE_CONNS, failed_writes, bad, held_msgs);
	return bad ? 1 : 0;
}

/* ---- windows held without progress ------------------------------------- */

#define HOLD_MAX 16
#define HOLD_LEN (1u << 20)
#define HOLD_TAGS 6 /* of queue depth 8; tag 7 carries the KEEPALIVEs */
#define HOLD_KA_TAG 7

struct holder {
	struct rc c;
	unsigned int windows;
	bool ka_out, dropped;
	double dropped_at;
};

static void hold_send(struct holder *h, uint16_t tag, uint8_t op, uint32_t len,
		      uint64_t off)
{
	struct rblk_cmd cmd = {
	    .tag = tag, .opcode = op, .length = len, .offset = off};
	char b[RBLK_CMD_SIZE];

	if (post(&h->c, XP_WR_SEND, b, rblk_cmd_encode(b, &cmd), 0, 0, 0))
		h->dropped = true;
}

/* Take what has come on h without waiting: windows, KEEPALIVE answers. */
static void hold_poll(struct holder *h, double t)
{
	struct xp_wc wc;
	int n;

	while (!h->dropped && (n = xp_poll(h->c.xc, &wc, 1)) > 0) {
		char *m;

		if (wc.status != XP_WC_SUCCESS) {
			h->dropped = true;
			h->dropped_at = t;
			break;
		}
		if (wc.opcode != XP_WC_RECV)
			continue;
		m = recv_buf(&h->c, (unsigned int)wc.wr_id - 100);
		if (rblk_msg_type(m, wc.byte_len) == RBLK_MSG_GRANT) {
			h->windows++;
		} else if (rblk_msg_type(m, wc.byte_len) == RBLK_MSG_RESP) {
			struct rblk_resp r;

			if (!rblk_resp_decode(m, wc.byte_len, conn_qd, &r)) {
				if (r.tag == HOLD_KA_TAG)
					h->ka_out = false;
				else if (r.flags & RBLK_RESP_F_PULL)
					h->windows++;
			}
		}
		repost_recv(&h->c, (unsigned int)wc.wr_id - 100);
	}
	if (n < 0 && !h->dropped) {
		h->dropped = true;
		h->dropped_at = t;
	}
}

static int cmd_hold(unsigned int n, unsigned int secs)
{
	static struct holder h[HOLD_MAX];
	uint64_t start = now_ms(), last_ka = 0;
	unsigned int dropped = 0;

	if (!n || n > HOLD_MAX)
		DIE("hold: 1..%d connections", HOLD_MAX);
	conn_qd = 8;
	conn_max_io = HOLD_LEN;
	for (unsigned int i = 0; i < n; i++) {
		login(&h[i].c);
		for (uint16_t tag = 0; tag < HOLD_TAGS; tag++)
			hold_send(&h[i], tag,
				  tag % 2 ? RBLK_OP_READ : RBLK_OP_WRITE,
				  HOLD_LEN, (uint64_t)tag * HOLD_LEN);
	}
	printf("hold: %u connections asked for %u windows of %u bytes each\n",
	       n, HOLD_TAGS, HOLD_LEN);
	fflush(stdout);
	while (now_ms() - start < (uint64_t)secs * 1000u) {
		double t = (double)(now_ms() - start) / 1000.0;
		bool ka = now_ms() - last_ka >= 1000;

		for (unsigned int i = 0; i < n; i++) {
			hold_poll(&h[i], t);
			if (ka && !h[i].dropped && !h[i].ka_out) {
				hold_send(&h[i], HOLD_KA_TAG, RBLK_OP_KEEPALIVE,
					  0, 0);
				h[i].ka_out = true;
			}
		}
		if (ka)
			last_ka = now_ms();
		usleep(20000);
	}
	for (unsigned int i = 0; i < n; i++) {
		if (h[i].dropped) {
			dropped++;
			printf(
			    "holder %u: %u windows, dropped by the target after %.1f s\n",
			    i, h[i].windows, h[i].dropped_at);
		} else {
			printf(
			    "holder %u: %u windows, still connected after %u s\n",
			    i, h[i].windows, secs);
		}
		rc_close(&h[i].c);
	}
	return dropped == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	char err[512];

	t0_ms = now_ms();
	if (argc < 3)
		goto usage;
	if (rblk_auth_init())
		DIE("libsodium failed");
	if (rblk_url_parse(argv[2], RBLK_DEFAULT_PORT, &url, err, sizeof(err)))
		DIE("%s", err);
	ops = xp_find(url.scheme);
	if (!ops)
		DIE("unknown transport %s", url.scheme);
	if (!strcmp(argv[1], "stale") && argc == 4)
		return cmd_stale((unsigned int)strtoul(argv[3], NULL, 10));
	if (!strcmp(argv[1], "hold") && argc == 5)
		return cmd_hold((unsigned int)strtoul(argv[3], NULL, 10),
				(unsigned int)strtoul(argv[4], NULL, 10));
	if (argc >= 5 && strcmp(argv[1], "sweep")) {
		host = argv[3];
		if (rblk_auth_load_secret(argv[4], secret, &secret_len, err,
					  sizeof(err)))
			DIE("%s", err);
	} else if (argc != 3 && strcmp(argv[1], "sweep")) {
		goto usage;
	}
	if (!strcmp(argv[1], "reflect") && secret_len)
		return cmd_reflect();
	if (!strcmp(argv[1], "replay") && secret_len)
		return cmd_replay();
	if (!strcmp(argv[1], "skip") && secret_len)
		return cmd_skip();
	if (!strcmp(argv[1], "stall") && secret_len)
		return cmd_stall();
	if (!strcmp(argv[1], "rowrite") && secret_len)
		return cmd_rowrite();
	if (!strcmp(argv[1], "isolation") && argc != 4)
		return cmd_isolation();
	if (!strcmp(argv[1], "sweep") && argc >= 4 && argc != 5) {
		unsigned long n = strtoul(argv[3], NULL, 10);

		if (argc == 6) {
			host = argv[4];
			if (rblk_auth_load_secret(argv[5], secret, &secret_len,
						  err, sizeof(err)))
				DIE("%s", err);
		}
		return cmd_sweep((unsigned int)n);
	}
usage:
	fprintf(stderr,
		"usage: %s reflect|replay|rowrite|skip|stall URL HOST KEYFILE\n"
		"       %s isolation URL [HOST KEYFILE]\n"
		"       %s sweep URL N [HOST KEYFILE]\n"
		"       %s stale URL ROUNDS\n"
		"       %s hold URL N SECS\n",
		argv[0], argv[0], argv[0], argv[0], argv[0]);
	return 2;
}
