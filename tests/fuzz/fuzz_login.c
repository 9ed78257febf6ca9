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
 * Authentication (message types 5-7, HELLO flag 0x04) adds a state
 * between the two: give login_decide()'s plan a "needs auth" answer, add
 * S_AUTH and its case in session_step(), and seed corpus files with an
 * AUTH_RESPONSE after the HELLO.
 */
#include "fuzz_common.h"

#include "../../common/proto.h"
#include "../../common/util.h"
#include "../../target/target.h"

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
     .size = UINT64_MAX & ~0xffffull,
     .block_size = 65536,
     .features = RBLK_F_FLUSH},
};

enum session_state { S_LOGIN, S_LIVE, S_DONE };

struct session {
	enum session_state state;
	uint16_t cm_qd;
	uint32_t cfg_max_io;
	struct login_plan plan;
	uint64_t slots_len; /* what the worker would allocate */
};

static struct export *table_lookup(void *ctx, const char *name)
{
	(void)ctx;
	for (size_t i = 0; i < ARRAY_SIZE(exports); i++)
		if (!strcmp(exports[i].name, name))
			return &exports[i];
	return NULL;
}

static void on_hello(struct session *s, const uint8_t *buf, size_t len)
{
	struct login_plan *p = &s->plan;
	struct rblk_login l, back;
	uint8_t wire[RBLK_LOGIN_SIZE];
	int st;

	st = login_decide(buf, len, s->cm_qd, s->cfg_max_io, table_lookup,
			  NULL, p);
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

	s->slots_len = (uint64_t)p->lim.queue_depth * p->lim.max_io;
	login_reply(&p->lim, 0x7f0000001000ull, 0x1234, &l);
	l.session_id = 42;
	CHECK(rblk_login_encode(wire, &l) == RBLK_LOGIN_SIZE);
	/* what the initiator will make of it */
	CHECK(rblk_login_decode(wire, sizeof(wire), &back) == RBLK_S_OK);
	CHECK(back.status == RBLK_S_OK);
	CHECK(back.queue_depth == p->lim.queue_depth);
	CHECK(back.max_io == p->lim.max_io && back.size == p->lim.size);
	CHECK(back.features == p->lim.features);
	CHECK(back.slot_len == s->slots_len);
	s->state = S_LIVE;
}

static void on_cmd(struct session *s, const uint8_t *buf, size_t len)
{
	const struct rblk_limits *lim = &s->plan.lim;
	struct rblk_cmd c;
	int tag, st;

	tag = rblk_cmd_peek_tag(buf, len, lim->queue_depth);
	if (tag < 0) {
		s->state = S_DONE; /* the worker disconnects */
		return;
	}
	st = rblk_cmd_decode(buf, len, lim, &c);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	CHECK(c.tag == tag); /* the refusal goes to the right tag */
	if (st)
		return;
	/* slot[tag] = slots + tag * max_io: inside the registered region */
	CHECK((uint64_t)c.tag * lim->max_io + lim->max_io <= s->slots_len);
	if (c.opcode == RBLK_OP_READ || c.opcode == RBLK_OP_WRITE)
		CHECK(c.length <= lim->max_io);
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
	struct session s = {.state = S_LOGIN};
	size_t off = 3;

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
