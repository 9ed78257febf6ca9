/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the target's login path: the bytes a connection
 * receives, fed through the same decisions target/worker.c makes, with the
 * same functions (login_decide(), login_reply(), rblk_cmd_peek_tag(),
 * rblk_cmd_decode()) against a fixed table of exports.
 *
 * Input: [cm_qd u16][max_io selector u8] then messages, each [len u16][len
 * bytes] (a length past the end takes what is left). The session follows
 * the worker's state machine (handle_recv()):
 *
 *   S_LOGIN  HELLO -> login_decide(): refusal ends the session, else the
 *            LOGIN is built with login_reply() and must decode at the
 *            initiator (rblk_login_decode) to what was granted; any other
 *            message is refused (BAD_STATE / INVALID) and ends it
 *   S_LIVE   CMD -> peek tag, decode against the granted limits; an
 *            accepted command must fit the slot region and the volume.
 *            Anything else ends the session, as the worker disconnects.
 *
 *   S_AUTH   after an accepted HELLO that login_auth_needed() says must
 *            authenticate (export "secure" has an allow list; hosts
 *            "fuzzhost", "rohost", "outsider" have secrets): without flag
 *            AUTH the session ends (AUTH_REQUIRED); else the worker has
 *            sent AUTH_CHALLENGE with the fixed nonce FZ_NONCE and target
 *            name "fuzz-target", and the next message goes through
 *            auth_decide(). Its verdict is checked against a MAC the
 *            harness computes itself: accepted exactly when the MAC is
 *            HMAC(host's secret, the exact context), the nonce is neither
 *            ours nor zero, the host is known and the allow list admits
 *            it; an allow_ro host is granted read-only. Then S_LIVE.
 */
#include "fuzz_common.h"

#include "../../common/auth.h"
#include "../../common/proto.h"
#include "../../common/slot_pool.h"
#include "../../common/util.h"
#include "../../config/config.h"
#include "../../target/export.h"
#include "../../target/login.h"

#define FZ_TARGET "fuzz-target"
#define FZ_NONCE 0x5a /* every byte of the target's challenge nonce */

/* export "secure": fuzzhost read-write, rohost read-only, ghost (no secret) */
static struct cfg_export secure_cfg = {
    .name = "secure",
    .restricted = true,
    .nr_allow = 3,
    .allow = {"fuzzhost", "rohost", "ghost"},
    .allow_ro = {false, true, false},
};
static struct cfg_target cfg = {
    .name = FZ_TARGET,
    .nr_hosts = 3,
    .hosts =
	{
	    {.name = "fuzzhost",
	     .secret = "fuzz-secret-0123456789",
	     .secret_len = 22},
	    {.name = "rohost",
	     .secret = "ro-secret-abcdefghijkl",
	     .secret_len = 22},
	    {.name = "outsider", /* known, but not on secure's list */
	     .secret = "outsider-secret-xyz0123",
	     .secret_len = 23},
	},
};

static struct export exports[] = {
    {.name = "vol0",
     .size = 1ull << 30,
     .block_size = 4096,
     .features = RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM | RBLK_F_ZEROES},
    {.name = "ro",
     .size = 64ull << 20,
     .block_size = 512,
     .features = RBLK_F_READ_ONLY | RBLK_F_FLUSH,
     .read_only = true},
    {.name = "ram",
     .size = 4096,
     .block_size = 4096,
     .features = RBLK_F_TRIM | RBLK_F_ZEROES},
    {.name = "big",
     /* the largest a LOGIN may carry (below 2^63) */
     .size = (1ull << 63) - 65536,
     .block_size = 65536,
     .features = RBLK_F_FLUSH},
    {.name = "secure",
     .size = 1ull << 20,
     .block_size = 4096,
     .features = RBLK_F_FLUSH | RBLK_F_TRIM,
     .cfg = &secure_cfg},
};

enum session_state { S_LOGIN, S_AUTH, S_LIVE, S_DONE };

struct session {
	enum session_state state;
	uint16_t cm_qd;
	uint32_t cfg_max_io;
	struct login_plan plan;
};

static struct export *table_lookup(void *ctx, const char *name)
{
	(void)ctx;
	for (size_t i = 0; i < ARRAY_SIZE(exports); i++)
		if (!strcmp(exports[i].name, name))
			return &exports[i];
	return NULL;
}

/* The harness's own host table lookup, independent of cfg_find_host(). */
static const struct cfg_host *fz_host(const char *name)
{
	if (!strcmp(name, "fuzzhost"))
		return &cfg.hosts[0];
	if (!strcmp(name, "rohost"))
		return &cfg.hosts[1];
	if (!strcmp(name, "outsider"))
		return &cfg.hosts[2];
	return NULL;
}

static void grant(struct session *s);

static void on_hello(struct session *s, const uint8_t *buf, size_t len)
{
	struct login_plan *p = &s->plan;
	int st;

	st = login_decide(buf, len, s->cm_qd, s->cfg_max_io, table_lookup, NULL,
			  p);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	if (st) {
		CHECK(p->why[0] != '\0'); /* every refusal is explained */
		s->state = S_DONE;
		return;
	}
	if (p->discover) { /* the worker answers with a listing, then closes */
		CHECK(p->exp == NULL && p->hello.export_name[0] == '\0');
		s->state = S_DONE;
		return;
	}
	CHECK(p->exp >= exports && p->exp < exports + ARRAY_SIZE(exports));
	CHECK(!strcmp(p->exp->name, p->hello.export_name));
	/* never more than the connection, the HELLO or the config allow */
	CHECK(p->lim.queue_depth >= 1);
	CHECK(p->lim.queue_depth <= s->cm_qd);
	CHECK(p->lim.queue_depth <= p->hello.queue_depth);
	CHECK(p->lim.max_io <= s->cfg_max_io &&
	      p->lim.max_io <= p->hello.max_io);
	CHECK(p->lim.max_io >= p->exp->block_size && IS_POW2(p->lim.max_io));
	CHECK(p->lim.block_size == p->exp->block_size);
	CHECK(p->lim.size == p->exp->size);
	if (p->exp->read_only || (p->hello.flags & RBLK_HELLO_F_READ_ONLY))
		CHECK(p->lim.features & RBLK_F_READ_ONLY);

	if (login_auth_needed(&cfg, p->exp, p->hello.host_name)) {
		/* our own reading of the rule */
		CHECK(p->exp->cfg || fz_host(p->hello.host_name));
		/* no secret offered: AUTH_REQUIRED, else AUTH_CHALLENGE */
		s->state =
		    (p->hello.flags & RBLK_HELLO_F_AUTH) ? S_AUTH : S_DONE;
		return;
	}
	CHECK(!p->exp->cfg && !fz_host(p->hello.host_name));
	grant(s);
}

/* The LOGIN for s->plan, and what the initiator makes of it. */
static void grant(struct session *s)
{
	struct login_plan *p = &s->plan;
	struct rblk_login l, back;
	uint8_t wire[RBLK_LOGIN_SIZE];

	login_reply(&p->lim, &l);
	l.session_id = 42;
	CHECK(rblk_login_encode(wire, &l) == RBLK_LOGIN_SIZE);
	/* what the initiator will make of it */
	CHECK(rblk_login_decode(wire, sizeof(wire), &back) == RBLK_S_OK);
	CHECK(back.status == RBLK_S_OK);
	CHECK(back.queue_depth == p->lim.queue_depth);
	CHECK(back.max_io == p->lim.max_io && back.size == p->lim.size);
	CHECK(back.features == p->lim.features);
	s->state = S_LIVE;
}

static void on_auth(struct session *s, const uint8_t *buf, size_t len)
{
	const struct rblk_hello *h = &s->plan.hello;
	const struct cfg_host *host = fz_host(h->host_name);
	uint8_t nonce[RBLK_AUTH_NONCE_LEN], zero[RBLK_AUTH_NONCE_LEN] = {0};
	uint8_t want[RBLK_AUTH_MAC_LEN];
	struct rblk_auth_response resp;
	struct rblk_auth_ctx ctx = {0};
	struct auth_plan a;
	bool decoded, nonce_ok, mac_ok, listed = true, ro = false;
	int st;

	memset(nonce, FZ_NONCE, sizeof(nonce));
	st = auth_decide(buf, len, &cfg, s->plan.exp, h, nonce, &a);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);

	/* the verdict the harness expects, computed independently */
	decoded = rblk_auth_response_decode(buf, len, &resp) == RBLK_S_OK;
	if (!decoded) {
		CHECK(st != RBLK_S_OK && a.why[0] != '\0');
		s->state = S_DONE;
		return;
	}
	memcpy(ctx.target_nonce, nonce, sizeof(nonce));
	memcpy(ctx.initiator_nonce, resp.nonce, sizeof(resp.nonce));
	strcpy(ctx.host_name, h->host_name);
	strcpy(ctx.export_name, h->export_name);
	strcpy(ctx.target_name, FZ_TARGET);
	nonce_ok = memcmp(resp.nonce, nonce, sizeof(nonce)) &&
		   memcmp(resp.nonce, zero, sizeof(zero));
	mac_ok = false;
	if (host) {
		rblk_auth_mac(host->secret, host->secret_len,
			      RBLK_AUTH_ROLE_INITIATOR, &ctx, want);
		mac_ok = !memcmp(want, resp.mac, sizeof(want));
	}
	if (s->plan.exp->cfg) {
		listed = false;
		for (unsigned int i = 0; i < secure_cfg.nr_allow; i++)
			if (!strcmp(secure_cfg.allow[i], h->host_name)) {
				listed = true;
				ro = secure_cfg.allow_ro[i];
			}
	}

	if (st != RBLK_S_OK) {
		CHECK(a.why[0] != '\0');
		CHECK(!(nonce_ok && host && mac_ok && listed));
		if (!nonce_ok || !host || !mac_ok)
			CHECK(st == RBLK_S_AUTH_FAILED);
		else
			CHECK(st == RBLK_S_ACCESS_DENIED);
		s->state = S_DONE;
		return;
	}
	/* accepted: only with the right MAC, a fresh nonce, a known host */
	CHECK(nonce_ok && host && mac_ok && listed);
	CHECK(a.host == host);
	CHECK(!memcmp(&a.ctx, &ctx, sizeof(ctx))); /* AUTH_RESULT's context */
	CHECK(a.read_only == ro);
	if (a.read_only) /* as login_grant(force_ro) */
		s->plan.lim.features |= RBLK_F_READ_ONLY;
	grant(s);
}

static void on_cmd(struct session *s, const uint8_t *buf, size_t len)
{
	const struct rblk_limits *lim = &s->plan.lim;
	struct rblk_cmd c;
	int tag, st;

	bool gen = lim->features & RBLK_F_TAG_GEN;

	tag = rblk_cmd_peek_tag(buf, len, rblk_tags(lim->queue_depth, gen));
	if (tag < 0) {
		s->state = S_DONE; /* the worker disconnects */
		return;
	}
	st = rblk_cmd_decode(buf, len, lim, &c);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	/* the refusal goes to the right tag */
	CHECK((gen ? rblk_tag_index(c.tag) : c.tag) == (unsigned int)tag);
	if (st)
		return;
	/* the tag has its window; a data command's run fits a pool share */
	CHECK((unsigned int)tag < lim->queue_depth);
	if (c.opcode == RBLK_OP_READ || c.opcode == RBLK_OP_WRITE)
		CHECK(c.length <= lim->max_io &&
		      slot_pool_run_bytes(c.length) <= lim->max_io);
	if (c.length)
		CHECK(c.offset + c.length > c.offset &&
		      c.offset + c.length <= lim->size);
	if (c.opcode == RBLK_OP_WRITE || c.opcode == RBLK_OP_TRIM ||
	    c.opcode == RBLK_OP_WRITE_ZEROES)
		CHECK(!(lim->features & RBLK_F_READ_ONLY));
}

static void session_step(struct session *s, const uint8_t *buf, size_t len)
{
	int type = rblk_msg_type(buf, len);

	switch (s->state) {
	case S_LOGIN:
		if (type >= 0 && type != RBLK_MSG_HELLO)
			s->state = S_DONE; /* refused: BAD_STATE */
		else
			on_hello(s, buf, len);
		break;
	case S_AUTH:
		if (type != RBLK_MSG_AUTH_RESPONSE)
			s->state = S_DONE; /* refused: BAD_STATE / INVALID */
		else
			on_auth(s, buf, len);
		break;
	case S_LIVE:
		if (type != RBLK_MSG_CMD)
			s->state = S_DONE; /* a second HELLO included */
		else
			on_cmd(s, buf, len);
		break;
	case S_DONE:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool sodium_ready;
	struct session s = {.state = S_LOGIN};
	size_t off = 3;

	if (!sodium_ready) {
		CHECK(rblk_auth_init() == 0);
		sodium_ready = true;
	}
	if (size < 3)
		return 0;
	/* as the listener grants it: rblk_cm_req_decode() allows 1..1024 */
	s.cm_qd = (uint16_t)(1 + fz_le(data, size, 2) % RBLK_MAX_QD);
	/* as the config allows: a power of two from 4K to 8M */
	s.cfg_max_io = RBLK_MIN_MAX_IO << (data[2] % 12);
	while (off + 2 <= size && s.state != S_DONE) {
		size_t len = (size_t)fz_le(data + off, 2, 2);
		uint8_t *msg;

		off += 2;
		if (len > size - off)
			len = size - off;
		/* the transport never delivers more than a receive buffer */
		if (len > RBLK_MSG_MAX)
			len = RBLK_MSG_MAX;
		/* a copy of exactly len bytes, so ASan sees any overread */
		msg = malloc(len ? len : 1);
		CHECK(msg);
		memcpy(msg, data + off, len);
		session_step(&s, msg, len);
		free(msg);
		off += len;
	}
	return 0;
}
