/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for every decoder in common/proto.c. Each input is
 * handed, as it is, to every decoder; the command decoder runs against a
 * table of volume limits and against limits taken from the input's tail.
 * Besides memory errors (ASan) and undefined behaviour (UBSan), it checks
 * what the decoders promise:
 *   - anything accepted re-encodes to exactly the bytes received (no field
 *     is ignored, nothing non-canonical gets through);
 *   - an accepted command lies inside the volume, is aligned, fits max_io,
 *     uses a tag below the queue depth and respects read-only and features;
 *   - rblk_cmd_peek_tag() and rblk_msg_type() agree with the decoders.
 */
#include "fuzz_common.h"

#include "../../common/proto.h"
#include "../../common/util.h"

static const struct rblk_limits fixed_limits[] = {
    {1, 4096, 4096, 4096, 0, 0},
    {64, 1u << 20, 4096, 1ull << 30, RBLK_F_ALL & ~RBLK_F_READ_ONLY, 4096},
    {64, 1u << 20, 512, 1ull << 30, RBLK_F_ALL, RBLK_INLINE_MAX},
    {RBLK_MAX_QD, RBLK_MAX_MAX_IO, 65536, UINT64_MAX & ~0xffffull,
     RBLK_F_FLUSH | RBLK_F_TRIM, 512},
    {128, 8192, 512, 0, RBLK_F_ZEROES | RBLK_F_FUA, 0},
};

static void check_cmd(const uint8_t *data, size_t size,
		      const struct rblk_limits *lim)
{
	struct rblk_cmd c;
	uint8_t again[RBLK_CMD_SIZE + RBLK_INLINE_MAX];
	size_t want;
	bool gen = lim->features & RBLK_F_TAG_GEN;
	int st = rblk_cmd_decode(data, size, lim, &c);
	int peek =
	    rblk_cmd_peek_tag(data, size, rblk_tags(lim->queue_depth, gen));
	uint64_t end;
	bool pr_args;
	/* the tag's index: only once the framing was good (c.tag is set) */
#define IDX (gen ? rblk_tag_index(c.tag) : c.tag)

	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	/* peek succeeds exactly when the header is sane and the tag fits */
	if (peek >= 0) {
		CHECK(st != RBLK_S_BAD_TAG && st != RBLK_S_BAD_VERSION);
		CHECK((unsigned int)peek == IDX && IDX < lim->queue_depth);
	} else if (st == RBLK_S_OK) {
		CHECK(0 && "accepted a command whose tag peek failed");
	}
	if (st == RBLK_S_BAD_TAG)
		CHECK(IDX >= lim->queue_depth);
#undef IDX
	if (st != RBLK_S_OK)
		return;

	/* in-capsule data: a WRITE within the grant, framed exactly */
	want = RBLK_CMD_SIZE;
	if (c.flags & RBLK_CMD_F_INLINE) {
		CHECK(c.opcode == RBLK_OP_WRITE && c.length <= lim->inline_max);
		CHECK(c.data == data + RBLK_CMD_SIZE);
		want += c.length;
	} else {
		CHECK(c.data == NULL);
	}
	CHECK(size == want);
	CHECK(c.opcode >= RBLK_OP_READ && c.opcode <= RBLK_OP_MAX_);
	CHECK(!(c.flags & ~RBLK_CMD_F_ALL));
	/* reservation commands carry their arguments in addr and rkey */
	pr_args =
	    c.opcode >= RBLK_OP_PR_REGISTER && c.opcode <= RBLK_OP_PR_RELEASE;
	if (!(c.flags & RBLK_CMD_F_PUSH))
		CHECK(pr_args || (c.addr == 0 && c.rkey == 0));
	else
		CHECK((c.opcode == RBLK_OP_READ ||
		       c.opcode == RBLK_OP_PR_REPORT) &&
		      (lim->features & RBLK_F_PUSH));
	if (c.flags & RBLK_CMD_F_FUA)
		CHECK(lim->features & RBLK_F_FUA);
	if (c.flags & RBLK_CMD_F_DONE)
		CHECK(lim->features & RBLK_F_CMD_DONE);
	switch (c.opcode) {
	case RBLK_OP_FLUSH:
		CHECK(lim->features & RBLK_F_FLUSH);
		/* fall through */
	case RBLK_OP_DISCONNECT:
	case RBLK_OP_KEEPALIVE:
		CHECK(c.offset == 0 && c.length == 0);
		break;
	case RBLK_OP_PR_REGISTER:
	case RBLK_OP_PR_ACQUIRE:
	case RBLK_OP_PR_RELEASE:
		/* no data; only where offered, never on a read-only login */
		CHECK(c.length == 0 && (lim->features & RBLK_F_PR));
		CHECK(!(lim->features & RBLK_F_READ_ONLY));
		break;
	case RBLK_OP_PR_REPORT:
		/* moves as a READ of length bytes, no range of the volume */
		CHECK(c.offset == 0 && (lim->features & RBLK_F_PR));
		CHECK(c.length > 0 && c.length <= lim->max_io);
		CHECK(c.length % lim->block_size == 0);
		break;
	case RBLK_OP_WRITE:
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
		CHECK(!(lim->features & RBLK_F_READ_ONLY));
		if (c.opcode == RBLK_OP_TRIM)
			CHECK(lim->features & RBLK_F_TRIM);
		if (c.opcode == RBLK_OP_WRITE_ZEROES)
			CHECK(lim->features & RBLK_F_ZEROES);
		/* fall through */
	case RBLK_OP_READ:
		CHECK(c.length > 0);
		if (c.opcode == RBLK_OP_READ || c.opcode == RBLK_OP_WRITE)
			CHECK(c.length <= lim->max_io); /* fits its slot */
		CHECK(c.offset % lim->block_size == 0);
		CHECK(c.length % lim->block_size == 0);
		end = c.offset + c.length;
		CHECK(end > c.offset && end <= lim->size);
		break;
	}
	CHECK(rblk_cmd_encode(again, &c) == want);
	CHECK(!memcmp(again, data, want));
}

/* Limits from 24 bytes of input, made as sane as a login would make them. */
static void limits_from(const uint8_t *p, struct rblk_limits *lim)
{
	lim->queue_depth = (uint16_t)(1 + fz_le(p, 24, 2) % RBLK_MAX_QD);
	lim->block_size = 512u << (p[2] % 8); /* 512 .. 64K */
	lim->max_io = lim->block_size << (p[3] % 8);
	if (lim->max_io > RBLK_MAX_MAX_IO)
		lim->max_io = RBLK_MAX_MAX_IO;
	lim->features = (uint32_t)fz_le(p + 4, 4, 4) & RBLK_F_ALL;
	lim->size = fz_le(p + 8, 8, 8) & ~(uint64_t)(lim->block_size - 1);
	lim->inline_max =
	    (uint32_t)(p[16] % (RBLK_INLINE_MAX / RBLK_INLINE_ALIGN + 1)) *
	    RBLK_INLINE_ALIGN;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t again[RBLK_MSG_MAX];
	struct rblk_hello h;
	struct rblk_login l;
	struct rblk_resp r;
	uint16_t qd = 0;
	int st, type;

	type = rblk_msg_type(data, size);
	CHECK(type >= -1 && type <= 255);

	st = rblk_hello_decode(data, size, &h);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	if (st == RBLK_S_OK) {
		CHECK(type == RBLK_MSG_HELLO && size == RBLK_HELLO_SIZE);
		CHECK(h.queue_depth >= 1 && h.queue_depth <= RBLK_MAX_QD);
		CHECK(h.max_io >= RBLK_MIN_MAX_IO && IS_POW2(h.max_io));
		/* only a discovery HELLO may leave the export name empty */
		CHECK(strnlen(h.export_name, RBLK_NAME_MAX) > 0 ||
		      (h.flags & RBLK_HELLO_F_DISCOVER));
		CHECK(strnlen(h.export_name, RBLK_NAME_MAX) < RBLK_NAME_MAX);
		CHECK(strnlen(h.host_name, RBLK_NAME_MAX) < RBLK_NAME_MAX);
		CHECK(rblk_hello_encode(again, &h) == RBLK_HELLO_SIZE);
		CHECK(!memcmp(again, data, RBLK_HELLO_SIZE));
	}

	st = rblk_login_decode(data, size, &l);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	if (st == RBLK_S_OK) {
		CHECK(type == RBLK_MSG_LOGIN && size == RBLK_LOGIN_SIZE);
		CHECK(l.status <= RBLK_S_MAX_);
		if (l.status == RBLK_S_OK) {
			/* what the initiator sizes its queue by: in bounds */
			CHECK(l.queue_depth >= 1 &&
			      l.queue_depth <= RBLK_MAX_QD);
			CHECK(l.max_io >= l.block_size &&
			      l.max_io <= RBLK_MAX_MAX_IO);
			if (l.features & RBLK_F_DIRECT)
				CHECK(l.vol_addr + l.vol_len >= l.vol_addr &&
				      l.vol_len == l.size);
			CHECK(l.size % l.block_size == 0);
			CHECK(rblk_login_encode(again, &l) == RBLK_LOGIN_SIZE);
			CHECK(!memcmp(again, data, RBLK_LOGIN_SIZE));
		}
	}

	for (size_t i = 0; i < ARRAY_SIZE(fixed_limits); i++)
		check_cmd(data, size, &fixed_limits[i]);
	if (size >= RBLK_CMD_SIZE + 24) {
		struct rblk_limits lim;

		limits_from(data + RBLK_CMD_SIZE, &lim);
		check_cmd(data, RBLK_CMD_SIZE, &lim);
	}

	for (unsigned int q = 1; q <= RBLK_MAX_QD; q *= 32) {
		st = rblk_resp_decode(data, size, (uint16_t)q, &r);
		CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
		if (st == RBLK_S_OK) {
			CHECK(type == RBLK_MSG_RESP && r.tag < q);
			CHECK(r.status <= RBLK_S_MAX_);
			/* a window only with data, never wrapping */
			if (r.flags & RBLK_RESP_F_PULL)
				CHECK(!r.status && r.length &&
				      r.addr + r.length >= r.addr);
			CHECK(rblk_resp_encode(again, &r) == RBLK_RESP_SIZE);
			CHECK(!memcmp(again, data, RBLK_RESP_SIZE));
		}
		{
			struct rblk_grant g;

			st = rblk_grant_decode(data, size, (uint16_t)q,
					       1u << 20, &g);
			CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
			if (st == RBLK_S_OK) {
				CHECK(type == RBLK_MSG_GRANT && g.tag < q);
				CHECK(g.length && g.length <= 1u << 20 &&
				      g.addr + g.length >= g.addr);
				CHECK(rblk_grant_encode(again, &g) ==
				      RBLK_GRANT_SIZE);
				CHECK(!memcmp(again, data, RBLK_GRANT_SIZE));
			}
		}
		{
			struct rblk_done d;

			st = rblk_done_decode(data, size, (uint16_t)q, &d);
			CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
			if (st == RBLK_S_OK) {
				CHECK(d.type == type && d.tag < q);
				CHECK(rblk_done_encode(again, &d) ==
				      RBLK_DONE_SIZE);
				CHECK(!memcmp(again, data, RBLK_DONE_SIZE));
			}
		}
	}

	st = rblk_cm_req_decode(data, size, &qd);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	if (st == RBLK_S_OK) {
		CHECK(qd >= 1 && qd <= RBLK_MAX_QD);
		CHECK(rblk_cm_req_encode(again, qd) == RBLK_CM_REQ_SIZE);
		CHECK(!memcmp(again, data, RBLK_CM_REQ_SIZE));
	}

	st = rblk_cm_rej_decode(data, size);
	CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);

	/* the string and errno tables take any int */
	if (size >= 4) {
		int v = (int)fz_le(data, size, 4);

		CHECK(rblk_status_str(v) != NULL);
		CHECK(rblk_opcode_str(v) != NULL);
		CHECK(rblk_status_to_errno(v) <= 0);
		st = rblk_errno_to_status(-(v & 0xfff));
		CHECK(st >= RBLK_S_OK && st <= RBLK_S_MAX_);
	}
	return 0;
}
