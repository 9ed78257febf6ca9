/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/proto.c: every encoder/decoder round trip, the wire
 * layout, and the decoders against every malformed field.
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/proto.h"
#include "common/util.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

/* ---- helpers ---------------------------------------------------------- */

/* Room for any message plus slack to test "long buffer" lengths. */
struct msgbuf {
	uint8_t b[RBLK_MSG_MAX + 16];
};

static const struct rblk_limits base_lim = {
    .queue_depth = 16,
    .max_io = 128 * KIB,
    .block_size = 512,
    .size = 1 * MIB,
    .features =
	RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM | RBLK_F_ZEROES | RBLK_F_PUSH,
};

static struct rblk_cmd mkcmd(uint16_t tag, uint8_t op, uint8_t flags,
			     uint64_t off, uint32_t len)
{
	struct rblk_cmd c = {
	    .tag = tag,
	    .opcode = op,
	    .flags = flags,
	    .offset = off,
	    .length = len,
	};

	if (flags & RBLK_CMD_F_PUSH) {
		c.addr = 0x7f0012345000ull;
		c.rkey = 0xabcd;
	}
	return c;
}

/* Encode c and decode it against lim; returns the status. */
static int cmd_check(const struct rblk_cmd *c, const struct rblk_limits *lim,
		     struct rblk_cmd *out)
{
	struct msgbuf m;
	struct rblk_cmd tmp;

	assert_int_equal(rblk_cmd_encode(m.b, c), RBLK_CMD_SIZE);
	return rblk_cmd_decode(m.b, RBLK_CMD_SIZE, lim, out ? out : &tmp);
}

static int cmd_st(uint16_t tag, uint8_t op, uint8_t flags, uint64_t off,
		  uint32_t len, const struct rblk_limits *lim)
{
	struct rblk_cmd c = mkcmd(tag, op, flags, off, len);

	return cmd_check(&c, lim, NULL);
}

/* One cmd_check() case: a command (tag 1) and the status it must get. */
struct cmd_case {
	uint8_t op, flags;
	uint64_t off;
	uint32_t len;
	int st;
};

/* Every case of a table against lim; a failure names the case. */
static void check_cmd_cases(const struct cmd_case *c, size_t n,
			    const struct rblk_limits *lim)
{
	for (size_t i = 0; i < n; i++) {
		int st =
		    cmd_st(1, c[i].op, c[i].flags, c[i].off, c[i].len, lim);

		if (st != c[i].st)
			fail_msg("case %zu (op %u, flags %#x, offset %#llx, "
				 "length %u): status %d, expected %d",
				 i, c[i].op, c[i].flags,
				 (unsigned long long)c[i].off, c[i].len, st,
				 c[i].st);
	}
}

#define CHECK_CMDS(cases, lim) check_cmd_cases(cases, ARRAY_SIZE(cases), lim)

static struct rblk_wire_cmd *wcmd(struct msgbuf *m)
{
	return (struct rblk_wire_cmd *)m->b;
}

static void good_cmd(struct msgbuf *m)
{
	struct rblk_cmd c = mkcmd(3, RBLK_OP_READ, 0, 4096, 8192);

	memset(m, 0, sizeof(*m));
	rblk_cmd_encode(m->b, &c);
}

static int decode_m(struct msgbuf *m, size_t len)
{
	struct rblk_cmd out;

	return rblk_cmd_decode(m->b, len, &base_lim, &out);
}

static struct rblk_hello good_hello(void)
{
	struct rblk_hello h = {
	    .queue_depth = 64,
	    .queue_id = 2,
	    .max_io = 1 * MIB,
	    .flags = RBLK_HELLO_F_READ_ONLY,
	};

	strcpy(h.export_name, "vol0");
	strcpy(h.host_name, "host-a.example");
	return h;
}

static struct rblk_login good_login(void)
{
	struct rblk_login l = {
	    .status = RBLK_S_OK,
	    .queue_depth = 32,
	    .max_io = 128 * KIB,
	    .block_size = 4096,
	    .size = 1ull << 40,
	    .features = RBLK_F_FLUSH | RBLK_F_TRIM,
	    .session_id = 0x0123456789abcdefull,
	    .vol_id = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x01,
		       0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef},
	};

	return l;
}

static int login_decode_of(const struct rblk_login *l)
{
	struct msgbuf m;
	struct rblk_login out;

	rblk_login_encode(m.b, l);
	return rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void check_hdr_bytes(const uint8_t *b, uint8_t type, uint16_t len)
{
	assert_memory_equal(b, "RBLK", 4);
	assert_int_equal(b[4], RBLK_PROTO_VERSION);
	assert_int_equal(b[5], type);
	assert_int_equal(get16(b + 6), len);
}

/* ---- layout ------------------------------------------------------------ */

static void test_sizes(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct rblk_wire_hdr), 8);
	assert_int_equal(sizeof(struct rblk_wire_hello), RBLK_HELLO_SIZE);
	assert_int_equal(sizeof(struct rblk_wire_login), RBLK_LOGIN_SIZE);
	assert_int_equal(sizeof(struct rblk_wire_cmd), RBLK_CMD_SIZE);
	assert_int_equal(sizeof(struct rblk_wire_resp), RBLK_RESP_SIZE);
	assert_int_equal(sizeof(struct rblk_wire_cm_req), RBLK_CM_REQ_SIZE);
	assert_int_equal(sizeof(struct rblk_wire_cm_rej), RBLK_CM_REJ_SIZE);
	assert_true(RBLK_HELLO_SIZE <= RBLK_MSG_MAX);
	assert_true(RBLK_LOGIN_SIZE <= RBLK_MSG_MAX);
	assert_true(RBLK_CMD_SIZE <= RBLK_MSG_MAX);
	assert_true(RBLK_CM_REQ_SIZE <= 56);
}

/* ---- round trips ------------------------------------------------------- */

static void test_hello_roundtrip(void **state)
{
	struct rblk_hello h = good_hello(), out;
	struct msgbuf m;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_hello_encode(m.b, &h), RBLK_HELLO_SIZE);
	check_hdr_bytes(m.b, RBLK_MSG_HELLO, RBLK_HELLO_SIZE);
	assert_int_equal(get16(m.b + 8), 64);
	assert_int_equal(get16(m.b + 10), 2);
	assert_int_equal(get32(m.b + 12), 1 * MIB);
	assert_int_equal(get32(m.b + 16), RBLK_HELLO_F_READ_ONLY);
	assert_int_equal(get32(m.b + 20), 0);
	assert_string_equal((char *)m.b + 24, "vol0");
	assert_string_equal((char *)m.b + 24 + RBLK_NAME_MAX, "host-a.example");
	assert_int_equal(m.b[RBLK_HELLO_SIZE], 0xee); /* wrote no more */
	assert_int_equal(rblk_msg_type(m.b, RBLK_HELLO_SIZE), RBLK_MSG_HELLO);

	memset(&out, 0x55, sizeof(out));
	assert_int_equal(rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &out),
			 RBLK_S_OK);
	assert_int_equal(out.queue_depth, h.queue_depth);
	assert_int_equal(out.queue_id, h.queue_id);
	assert_int_equal(out.max_io, h.max_io);
	assert_int_equal(out.flags, h.flags);
	assert_string_equal(out.export_name, "vol0");
	assert_string_equal(out.host_name, "host-a.example");
}

static void test_hello_roundtrip_limits(void **state)
{
	struct rblk_hello h = good_hello(), out;
	struct msgbuf m;

	(void)state;
	/* Longest names, extreme legal values, empty host name. */
	memset(h.export_name, 'e', RBLK_NAME_MAX - 1);
	h.export_name[RBLK_NAME_MAX - 1] = 0;
	h.host_name[0] = 0;
	h.queue_depth = RBLK_MAX_QD;
	h.queue_id = 0xffff;
	h.max_io = RBLK_MIN_MAX_IO;
	h.flags = 0;
	rblk_hello_encode(m.b, &h);
	assert_int_equal(rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &out),
			 RBLK_S_OK);
	assert_int_equal(strlen(out.export_name), RBLK_NAME_MAX - 1);
	assert_string_equal(out.host_name, "");
	assert_int_equal(out.queue_depth, RBLK_MAX_QD);
	assert_int_equal(out.queue_id, 0xffff);
	assert_int_equal(out.max_io, RBLK_MIN_MAX_IO);

	h.queue_depth = 1;
	h.max_io = RBLK_MAX_MAX_IO;
	strcpy(h.export_name, "!~");
	strcpy(h.host_name, "a b"); /* space is printable */
	rblk_hello_encode(m.b, &h);
	assert_int_equal(rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &out),
			 RBLK_S_OK);
	assert_string_equal(out.export_name, "!~");
	assert_string_equal(out.host_name, "a b");
}

static void test_login_roundtrip(void **state)
{
	struct rblk_login l = good_login(), out;
	struct msgbuf m;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_login_encode(m.b, &l), RBLK_LOGIN_SIZE);
	check_hdr_bytes(m.b, RBLK_MSG_LOGIN, RBLK_LOGIN_SIZE);
	assert_int_equal(get32(m.b + 8), RBLK_S_OK);
	assert_int_equal(get16(m.b + 12), 32);
	assert_int_equal(get16(m.b + 14), 0);
	assert_int_equal(get32(m.b + 16), 128 * KIB);
	assert_int_equal(get32(m.b + 20), 4096);
	assert_true(get64(m.b + 24) == 1ull << 40);
	assert_int_equal(get32(m.b + 32), RBLK_F_FLUSH | RBLK_F_TRIM);
	/* no DIRECT: the volume fields are zero on the wire */
	for (int i = 36; i < 56; i++)
		assert_int_equal(m.b[i], 0);
	assert_true(get64(m.b + 56) == 0x0123456789abcdefull);
	assert_memory_equal(m.b + 64, l.vol_id, RBLK_VOL_ID_LEN);
	assert_int_equal(m.b[RBLK_LOGIN_SIZE], 0xee);
	assert_int_equal(rblk_msg_type(m.b, RBLK_LOGIN_SIZE), RBLK_MSG_LOGIN);

	assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
			 RBLK_S_OK);
	assert_int_equal(out.status, l.status);
	assert_int_equal(out.queue_depth, l.queue_depth);
	assert_int_equal(out.max_io, l.max_io);
	assert_int_equal(out.block_size, l.block_size);
	assert_true(out.size == l.size);
	assert_int_equal(out.features, l.features);
	assert_true(out.session_id == l.session_id);
	assert_memory_equal(out.vol_id, l.vol_id, RBLK_VOL_ID_LEN);
}

static void test_login_refusal(void **state)
{
	struct rblk_login l = {0}, out;
	struct msgbuf m;

	(void)state;
	/* A refusal carries only its status; the other fields are ignored. */
	for (uint32_t st = 1; st <= RBLK_S_MAX_; st++) {
		l.status = st;
		rblk_login_encode(m.b, &l);
		memset(&out, 0x55, sizeof(out));
		assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
				 RBLK_S_OK);
		assert_int_equal(out.status, st);
		assert_int_equal(out.queue_depth, 0);
		assert_int_equal(out.max_io, 0);
	}
}

static void test_cmd_roundtrip(void **state)
{
	struct rblk_cmd c, out;
	struct msgbuf m;

	(void)state;
	c = mkcmd(15, RBLK_OP_READ, RBLK_CMD_F_PUSH, 512 * KIB, 128 * KIB);
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_cmd_encode(m.b, &c), RBLK_CMD_SIZE);
	check_hdr_bytes(m.b, RBLK_MSG_CMD, RBLK_CMD_SIZE);
	assert_int_equal(get16(m.b + 8), 15);
	assert_int_equal(m.b[10], RBLK_OP_READ);
	assert_int_equal(m.b[11], RBLK_CMD_F_PUSH);
	assert_int_equal(get32(m.b + 12), 128 * KIB);
	assert_true(get64(m.b + 16) == 512 * KIB);
	assert_true(get64(m.b + 24) == 0x7f0012345000ull);
	assert_int_equal(get32(m.b + 32), 0xabcd);
	for (int i = 36; i < RBLK_CMD_SIZE; i++)
		assert_int_equal(m.b[i], 0);
	assert_int_equal(m.b[RBLK_CMD_SIZE], 0xee);
	assert_int_equal(rblk_msg_type(m.b, RBLK_CMD_SIZE), RBLK_MSG_CMD);

	assert_int_equal(rblk_cmd_decode(m.b, RBLK_CMD_SIZE, &base_lim, &out),
			 RBLK_S_OK);
	assert_int_equal(out.tag, 15);
	assert_int_equal(out.opcode, RBLK_OP_READ);
	assert_int_equal(out.flags, RBLK_CMD_F_PUSH);
	assert_int_equal(out.length, 128 * KIB);
	assert_true(out.offset == 512 * KIB);
	assert_true(out.addr == 0x7f0012345000ull);
	assert_int_equal(out.rkey, 0xabcd);
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), 15);
}

static void test_cmd_every_opcode(void **state)
{
	static const struct {
		uint8_t op, flags;
		uint64_t off;
		uint32_t len;
	} ok[] = {
	    {RBLK_OP_READ, 0, 0, 512},
	    {RBLK_OP_READ, 0, MIB - 128 * KIB, 128 * KIB},
	    {RBLK_OP_READ, RBLK_CMD_F_PUSH, 4096, 4096},
	    {RBLK_OP_WRITE, 0, 1024, 2048},
	    {RBLK_OP_WRITE, RBLK_CMD_F_FUA, 0, 128 * KIB},
	    {RBLK_OP_FLUSH, 0, 0, 0},
	    {RBLK_OP_TRIM, 0, 0, MIB}, /* TRIM may exceed max_io */
	    {RBLK_OP_WRITE_ZEROES, 0, 512, 512},
	    {RBLK_OP_WRITE_ZEROES, RBLK_CMD_F_FUA, 0, MIB},
	    {RBLK_OP_DISCONNECT, 0, 0, 0},
	    {RBLK_OP_KEEPALIVE, 0, 0, 0},
	};
	struct rblk_cmd c, out;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		c = mkcmd((uint16_t)i, ok[i].op, ok[i].flags, ok[i].off,
			  ok[i].len);
		assert_int_equal(cmd_check(&c, &base_lim, &out), RBLK_S_OK);
		assert_int_equal(out.tag, i);
		assert_int_equal(out.opcode, ok[i].op);
		assert_int_equal(out.flags, ok[i].flags);
		assert_true(out.offset == ok[i].off);
		assert_int_equal(out.length, ok[i].len);
		assert_true(out.addr == c.addr);
		assert_int_equal(out.rkey, c.rkey);
	}
}

static void test_resp_roundtrip(void **state)
{
	struct rblk_resp r = {.tag = 7, .status = RBLK_S_OK, .length = 4096};
	struct rblk_resp out;
	struct msgbuf m;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_resp_encode(m.b, &r), RBLK_RESP_SIZE);
	check_hdr_bytes(m.b, RBLK_MSG_RESP, RBLK_RESP_SIZE);
	assert_int_equal(get16(m.b + 8), 7);
	assert_int_equal(get16(m.b + 10), 0);
	assert_int_equal(get32(m.b + 12), RBLK_S_OK);
	assert_int_equal(get32(m.b + 16), 4096);
	for (int i = 20; i < RBLK_RESP_SIZE; i++)
		assert_int_equal(m.b[i], 0);
	assert_int_equal(m.b[RBLK_RESP_SIZE], 0xee);
	assert_int_equal(rblk_msg_type(m.b, RBLK_RESP_SIZE), RBLK_MSG_RESP);

	for (uint32_t st = 0; st <= RBLK_S_MAX_; st++) {
		r.status = st;
		r.tag = (uint16_t)st;
		r.length = st * 512;
		rblk_resp_encode(m.b, &r);
		assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE,
						  RBLK_S_MAX_ + 1, &out),
				 RBLK_S_OK);
		assert_int_equal(out.tag, st);
		assert_int_equal(out.status, st);
		assert_int_equal(out.length, st * 512);
	}
}

static void test_cm_roundtrip(void **state)
{
	struct msgbuf m;
	uint16_t qd = 0;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_cm_req_encode(m.b, 77), RBLK_CM_REQ_SIZE);
	assert_memory_equal(m.b, "RBLK", 4);
	assert_int_equal(m.b[4], RBLK_PROTO_VERSION);
	assert_int_equal(m.b[5], 0);
	assert_int_equal(get16(m.b + 6), 77);
	for (int i = 8; i < RBLK_CM_REQ_SIZE; i++)
		assert_int_equal(m.b[i], 0);
	assert_int_equal(m.b[RBLK_CM_REQ_SIZE], 0xee);
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
			 RBLK_S_OK);
	assert_int_equal(qd, 77);

	for (uint32_t st = 0; st <= RBLK_S_MAX_; st++) {
		memset(&m, 0xee, sizeof(m));
		assert_int_equal(rblk_cm_rej_encode(m.b, st), RBLK_CM_REJ_SIZE);
		assert_memory_equal(m.b, "RBLK", 4);
		assert_int_equal(m.b[4], RBLK_PROTO_VERSION);
		assert_int_equal(get32(m.b + 8), st);
		assert_int_equal(m.b[RBLK_CM_REJ_SIZE], 0xee);
		assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE),
				 (int)st);
		assert_int_equal(rblk_cm_rej_version(m.b, RBLK_CM_REJ_SIZE),
				 RBLK_PROTO_VERSION);
		assert_int_equal(rblk_cm_rej_version(m.b, 4), -1);
	}
}

/* ---- the common header, on every message type ------------------------- */

static void test_header_errors(void **state)
{
	struct msgbuf m, good;
	struct rblk_hello h = good_hello(), hout;
	struct rblk_login l = good_login(), lout;
	struct rblk_resp r = {.tag = 1}, rout;
	struct rblk_cmd c = mkcmd(1, RBLK_OP_FLUSH, 0, 0, 0), cout;
	static const size_t sizes[] = {RBLK_HELLO_SIZE, RBLK_LOGIN_SIZE,
				       RBLK_CMD_SIZE, RBLK_RESP_SIZE};

	(void)state;
	for (int t = 0; t < 4; t++) {
		size_t sz = sizes[t];
		struct rblk_wire_hdr *w = (struct rblk_wire_hdr *)m.b;

		memset(&good, 0, sizeof(good));
		switch (t) {
		case 0:
			rblk_hello_encode(good.b, &h);
			break;
		case 1:
			rblk_login_encode(good.b, &l);
			break;
		case 2:
			rblk_cmd_encode(good.b, &c);
			break;
		default:
			rblk_resp_encode(good.b, &r);
			break;
		}

#define DECODE(len)                                                            \
	(t == 0	  ? rblk_hello_decode(m.b, (len), &hout)                       \
	 : t == 1 ? rblk_login_decode(m.b, (len), &lout)                       \
	 : t == 2 ? rblk_cmd_decode(m.b, (len), &base_lim, &cout)              \
		  : rblk_resp_decode(m.b, (len), 16, &rout))

		m = good;
		assert_int_equal(DECODE(sz), RBLK_S_OK);

		/* bad magic, each byte */
		for (int i = 0; i < 4; i++) {
			m = good;
			m.b[i] ^= 0x20;
			assert_int_equal(DECODE(sz), RBLK_S_INVALID);
			assert_int_equal(rblk_msg_type(m.b, sz), -1);
		}
		/* bad version */
		m = good;
		w->version = RBLK_PROTO_VERSION + 1;
		assert_int_equal(DECODE(sz), RBLK_S_BAD_VERSION);
		assert_int_equal(rblk_msg_type(m.b, sz), -1);
		m = good;
		w->version = 0;
		assert_int_equal(DECODE(sz), RBLK_S_BAD_VERSION);
		/* wrong type: every other type, 0 and 255 */
		for (int ty = 0; ty < 256; ty++) {
			if (ty == good.b[5])
				continue;
			m = good;
			w->type = (uint8_t)ty;
			assert_int_equal(DECODE(sz), RBLK_S_INVALID);
			assert_int_equal(rblk_msg_type(m.b, sz), ty);
		}
		/* wrong length field */
		m = good;
		w->length = htole16((uint16_t)(sz - 1));
		assert_int_equal(DECODE(sz), RBLK_S_INVALID);
		w->length = htole16((uint16_t)(sz + 1));
		assert_int_equal(DECODE(sz), RBLK_S_INVALID);
		w->length = 0;
		assert_int_equal(DECODE(sz), RBLK_S_INVALID);
		w->length = 0xffff;
		assert_int_equal(DECODE(sz), RBLK_S_INVALID);
		/* short and long buffers */
		m = good;
		assert_int_equal(DECODE(0), RBLK_S_INVALID);
		assert_int_equal(DECODE(4), RBLK_S_INVALID);
		assert_int_equal(DECODE(sizeof(struct rblk_wire_hdr) - 1),
				 RBLK_S_INVALID);
		assert_int_equal(DECODE(sizeof(struct rblk_wire_hdr)),
				 RBLK_S_INVALID);
		assert_int_equal(DECODE(sz - 1), RBLK_S_INVALID);
		assert_int_equal(DECODE(sz + 1), RBLK_S_INVALID);
		assert_int_equal(DECODE(RBLK_MSG_MAX), RBLK_S_INVALID);
		assert_int_equal(rblk_msg_type(m.b, 7), -1);
		assert_int_equal(rblk_msg_type(m.b, 8), good.b[5]);
#undef DECODE
	}
}

/* ---- commands ---------------------------------------------------------- */

static void test_cmd_tag(void **state)
{
	struct rblk_cmd c, out;
	struct msgbuf m;

	(void)state;
	assert_int_equal(cmd_st(15, RBLK_OP_READ, 0, 0, 512, &base_lim),
			 RBLK_S_OK);
	assert_int_equal(cmd_st(0, RBLK_OP_READ, 0, 0, 512, &base_lim),
			 RBLK_S_OK);
	/* tag == queue_depth and above */
	for (uint32_t tag = 16; tag <= 0xffff; tag += (tag < 64 ? 1 : 997)) {
		c = mkcmd((uint16_t)tag, RBLK_OP_READ, 0, 0, 512);
		memset(&out, 0, sizeof(out));
		assert_int_equal(cmd_check(&c, &base_lim, &out),
				 RBLK_S_BAD_TAG);
		rblk_cmd_encode(m.b, &c);
		assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), -1);
	}
	c = mkcmd(0xffff, RBLK_OP_READ, 0, 0, 512);
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_BAD_TAG);

	/* A bad command with a good tag still reports its tag. */
	c = mkcmd(9, 0, 0, 0, 512);
	memset(&out, 0, sizeof(out));
	assert_int_equal(cmd_check(&c, &base_lim, &out), RBLK_S_INVALID);
	assert_int_equal(out.tag, 9);
	rblk_cmd_encode(m.b, &c);
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), 9);
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 9), -1);
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 10), 9);
	/* peek needs a sane header */
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE - 1, 16), -1);
	m.b[0] = 0;
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), -1);
	rblk_cmd_encode(m.b, &c);
	m.b[5] = RBLK_MSG_RESP;
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), -1);
}

static void test_cmd_opcode(void **state)
{
	(void)state;
	assert_int_equal(cmd_st(1, 0, 0, 0, 512, &base_lim), RBLK_S_INVALID);
	for (int op = RBLK_OP_MAX_ + 1; op < 256; op++)
		assert_int_equal(cmd_st(1, (uint8_t)op, 0, 0, 512, &base_lim),
				 RBLK_S_INVALID);
}

static void test_cmd_flags(void **state)
{
	static const struct cmd_case cases[] = {
	    /* FUA only on WRITE and WRITE_ZEROES */
	    {RBLK_OP_READ, RBLK_CMD_F_FUA, 0, 512, RBLK_S_INVALID},
	    {RBLK_OP_FLUSH, RBLK_CMD_F_FUA, 0, 0, RBLK_S_INVALID},
	    {RBLK_OP_TRIM, RBLK_CMD_F_FUA, 0, 512, RBLK_S_INVALID},
	    {RBLK_OP_KEEPALIVE, RBLK_CMD_F_FUA, 0, 0, RBLK_S_INVALID},
	    {RBLK_OP_DISCONNECT, RBLK_CMD_F_FUA, 0, 0, RBLK_S_INVALID},
	    /* PUSH only on READ */
	    {RBLK_OP_WRITE, RBLK_CMD_F_PUSH, 0, 512, RBLK_S_INVALID},
	    {RBLK_OP_FLUSH, RBLK_CMD_F_PUSH, 0, 0, RBLK_S_INVALID},
	    {RBLK_OP_TRIM, RBLK_CMD_F_PUSH, 0, 512, RBLK_S_INVALID},
	    {RBLK_OP_WRITE_ZEROES, RBLK_CMD_F_PUSH, 0, 512, RBLK_S_INVALID},
	    {RBLK_OP_READ, RBLK_CMD_F_PUSH | RBLK_CMD_F_FUA, 0, 512,
	     RBLK_S_INVALID},
	    {RBLK_OP_WRITE, RBLK_CMD_F_PUSH | RBLK_CMD_F_FUA, 0, 512,
	     RBLK_S_INVALID},
	};

	(void)state;
	/*
	 * unknown flag bits (bit 2 is INLINE: test_cmd_inline_*), and bit 3,
	 * DONE, where the limits do not offer it (test_cmd_done)
	 */
	for (int bit = 3; bit < 8; bit++)
		for (int op = 1; op <= RBLK_OP_MAX_; op++)
			assert_int_equal(cmd_st(1, (uint8_t)op,
						(uint8_t)(1u << bit), 0, 512,
						&base_lim),
					 RBLK_S_INVALID);
	CHECK_CMDS(cases, &base_lim);
}

/* DONE: on any opcode, with any other valid flag, where offered. */
static void test_cmd_done(void **state)
{
	static const struct cmd_case with[] = {
	    {RBLK_OP_READ, RBLK_CMD_F_DONE | RBLK_CMD_F_PUSH, 0, 512,
	     RBLK_S_OK},
	    {RBLK_OP_WRITE, RBLK_CMD_F_DONE | RBLK_CMD_F_FUA, 0, 512,
	     RBLK_S_OK},
	    /* DONE does not make another flag valid */
	    {RBLK_OP_FLUSH, RBLK_CMD_F_DONE | RBLK_CMD_F_FUA, 0, 0,
	     RBLK_S_INVALID},
	};
	struct rblk_limits lim = base_lim;
	struct rblk_cmd c, out;

	(void)state;
	lim.features |= RBLK_F_CMD_DONE;
	/* (reservation commands: test_cmd_pr) */
	for (int op = 1; op <= RBLK_OP_KEEPALIVE; op++) {
		bool data = op != RBLK_OP_FLUSH && op != RBLK_OP_KEEPALIVE &&
			    op != RBLK_OP_DISCONNECT;

		c = mkcmd(3, (uint8_t)op, RBLK_CMD_F_DONE, 0, data ? 512 : 0);
		assert_int_equal(cmd_check(&c, &lim, &out), RBLK_S_OK);
		assert_int_equal(out.flags, RBLK_CMD_F_DONE);
		assert_int_equal(out.tag, 3);
		assert_int_equal(cmd_check(&c, &base_lim, NULL),
				 RBLK_S_INVALID);
	}
	CHECK_CMDS(with, &lim);
}

/*
 * Reservation commands: keys in offset/addr, action/type/flags in rkey,
 * no data (REPORT: a READ's data, offset 0), only where RBLK_F_PR is
 * offered, and no change from a read-only login.
 */
static void test_cmd_pr(void **state)
{
	struct rblk_limits lim = base_lim;
	struct rblk_cmd c, out;
	struct {
		uint8_t op;
		uint32_t arg;
		uint64_t crkey, key2;
		uint32_t length;
		int st;
	} cases[] = {
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(0, 0, 0), 0, 5, 0, RBLK_S_OK},
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(0, 0, 0), 0, 0, 0,
	     RBLK_S_INVALID}, /* new key 0 */
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(1, 0, 1), 7, 0, 0, RBLK_S_OK},
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(1, 0, 0), 7, 3, 0,
	     RBLK_S_INVALID}, /* unregister names no new key */
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(2, 0, 1), 7, 3, 0, RBLK_S_OK},
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(3, 0, 0), 7, 3, 0,
	     RBLK_S_INVALID},
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(0, 1, 0), 0, 3, 0,
	     RBLK_S_INVALID}, /* a type */
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(0, 0, 2), 0, 3, 0,
	     RBLK_S_INVALID}, /* unknown flag */
	    {RBLK_OP_PR_REGISTER, RBLK_PR_ARG(0, 0, 0), 0, 3, 512,
	     RBLK_S_INVALID}, /* a length */
	    {RBLK_OP_PR_ACQUIRE, RBLK_PR_ARG(0, 6, 0), 7, 0, 0, RBLK_S_OK},
	    {RBLK_OP_PR_ACQUIRE, RBLK_PR_ARG(0, 0, 0), 7, 0, 0, RBLK_S_INVALID},
	    {RBLK_OP_PR_ACQUIRE, RBLK_PR_ARG(0, 7, 0), 7, 0, 0, RBLK_S_INVALID},
	    {RBLK_OP_PR_ACQUIRE, RBLK_PR_ARG(0, 1, 0), 7, 9, 0,
	     RBLK_S_INVALID}, /* acquire names no other key */
	    {RBLK_OP_PR_ACQUIRE, RBLK_PR_ARG(2, 1, 0), 7, 9, 0, RBLK_S_OK},
	    {RBLK_OP_PR_ACQUIRE, RBLK_PR_ARG(3, 1, 0), 7, 9, 0, RBLK_S_INVALID},
	    {RBLK_OP_PR_RELEASE, RBLK_PR_ARG(0, 2, 0), 7, 0, 0, RBLK_S_OK},
	    {RBLK_OP_PR_RELEASE, RBLK_PR_ARG(0, 0, 0), 7, 0, 0, RBLK_S_INVALID},
	    {RBLK_OP_PR_RELEASE, RBLK_PR_ARG(1, 0, 0), 7, 0, 0, RBLK_S_OK},
	    {RBLK_OP_PR_RELEASE, RBLK_PR_ARG(1, 2, 0), 7, 0, 0,
	     RBLK_S_INVALID}, /* clear names no type */
	    {RBLK_OP_PR_RELEASE, RBLK_PR_ARG(0, 2, 0), 7, 1, 0, RBLK_S_INVALID},
	    {RBLK_OP_PR_REPORT, 0, 0, 0, 4096, RBLK_S_OK},
	    {RBLK_OP_PR_REPORT, 0, 512, 0, 4096, RBLK_S_INVALID}, /* offset */
	    {RBLK_OP_PR_REPORT, 0, 0, 0, 0, RBLK_S_TOO_LARGE},
	    {RBLK_OP_PR_REPORT, 0, 0, 0, 100, RBLK_S_MISALIGNED},
	    {RBLK_OP_PR_REPORT, 0, 0, 0, 256 * KIB, RBLK_S_TOO_LARGE},
	};

	(void)state;
	lim.features |= RBLK_F_PR;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		c = mkcmd(2, cases[i].op, 0, cases[i].crkey, cases[i].length);
		c.addr = cases[i].key2;
		c.rkey = cases[i].arg;
		assert_int_equal(cmd_check(&c, &lim, &out), cases[i].st);
		if (cases[i].st == RBLK_S_OK &&
		    cases[i].op != RBLK_OP_PR_REPORT) {
			assert_int_equal(out.rkey, cases[i].arg);
			assert_true(out.offset == cases[i].crkey);
			assert_true(out.addr == cases[i].key2);
			/* not offered: refused, after the fields' own checks */
			assert_int_equal(cmd_check(&c, &base_lim, NULL),
					 RBLK_S_NOT_SUPPORTED);
			lim.features |= RBLK_F_READ_ONLY;
			assert_int_equal(cmd_check(&c, &lim, NULL),
					 RBLK_S_READ_ONLY);
			lim.features &= ~RBLK_F_READ_ONLY;
		}
	}
	/* REPORT: push like a READ, read-only logins may ask, not offered */
	c = mkcmd(2, RBLK_OP_PR_REPORT, RBLK_CMD_F_PUSH, 0, 4096);
	c.addr = 0x1000;
	c.rkey = 9;
	assert_int_equal(cmd_check(&c, &lim, NULL), RBLK_S_OK);
	lim.features |= RBLK_F_READ_ONLY;
	assert_int_equal(cmd_check(&c, &lim, NULL), RBLK_S_OK);
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_NOT_SUPPORTED);
	c = mkcmd(2, RBLK_OP_PR_REPORT, RBLK_CMD_F_FUA, 0, 4096);
	assert_int_equal(cmd_check(&c, &lim, NULL), RBLK_S_INVALID);
	assert_string_equal(rblk_opcode_str(RBLK_OP_PR_REPORT), "PR_REPORT");
}

static void test_cmd_addr_rkey_without_push(void **state)
{
	struct rblk_cmd c;

	(void)state;
	c = mkcmd(1, RBLK_OP_READ, 0, 0, 512);
	c.addr = 0x1000;
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_INVALID);
	c = mkcmd(1, RBLK_OP_READ, 0, 0, 512);
	c.rkey = 1;
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_INVALID);
	c = mkcmd(1, RBLK_OP_WRITE, 0, 0, 512);
	c.addr = 1ull << 63;
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_INVALID);
	c = mkcmd(1, RBLK_OP_FLUSH, 0, 0, 0);
	c.rkey = 0xffffffff;
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_INVALID);
	/* PUSH with zero addr/rkey is the initiator's business: allowed */
	c = mkcmd(1, RBLK_OP_READ, RBLK_CMD_F_PUSH, 0, 512);
	c.addr = 0;
	c.rkey = 0;
	assert_int_equal(cmd_check(&c, &base_lim, NULL), RBLK_S_OK);
}

static void test_cmd_reserved(void **state)
{
	struct msgbuf m;

	(void)state;
	for (int i = 0; i < 7; i++) {
		good_cmd(&m);
		assert_int_equal(decode_m(&m, RBLK_CMD_SIZE), RBLK_S_OK);
		wcmd(&m)->reserved[i] = htole32(1);
		assert_int_equal(decode_m(&m, RBLK_CMD_SIZE), RBLK_S_INVALID);
		wcmd(&m)->reserved[i] = htole32(0x80000000u);
		assert_int_equal(decode_m(&m, RBLK_CMD_SIZE), RBLK_S_INVALID);
	}
	/* every single byte of the reserved area */
	for (int i = 36; i < RBLK_CMD_SIZE; i++) {
		good_cmd(&m);
		m.b[i] = 0x01;
		assert_int_equal(decode_m(&m, RBLK_CMD_SIZE), RBLK_S_INVALID);
	}
}

static void test_cmd_no_data_ops(void **state)
{
	static const uint8_t ops[] = {RBLK_OP_FLUSH, RBLK_OP_KEEPALIVE,
				      RBLK_OP_DISCONNECT};
	/* KEEPALIVE and DISCONNECT need no feature at all */
	static const struct cmd_case featureless[] = {
	    {RBLK_OP_KEEPALIVE, 0, 0, 0, RBLK_S_OK},
	    {RBLK_OP_DISCONNECT, 0, 0, 0, RBLK_S_OK},
	};
	/* nor does anything stop them on a read-only volume */
	static const struct cmd_case read_only[] = {
	    {RBLK_OP_FLUSH, 0, 0, 0, RBLK_S_OK},
	    {RBLK_OP_KEEPALIVE, 0, 0, 0, RBLK_S_OK},
	};
	struct rblk_limits lim = base_lim;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
		const struct cmd_case cases[] = {
		    {ops[i], 0, 0, 0, RBLK_S_OK},
		    {ops[i], 0, 512, 0, RBLK_S_INVALID},
		    {ops[i], 0, 0, 512, RBLK_S_INVALID},
		    {ops[i], 0, 1, 1, RBLK_S_INVALID},
		    {ops[i], 0, UINT64_MAX, 0, RBLK_S_INVALID},
		};

		CHECK_CMDS(cases, &lim);
	}
	/* FLUSH when the volume has no volatile cache */
	lim.features &= ~RBLK_F_FLUSH;
	assert_int_equal(cmd_st(1, RBLK_OP_FLUSH, 0, 0, 0, &lim),
			 RBLK_S_NOT_SUPPORTED);
	lim.features = 0;
	CHECK_CMDS(featureless, &lim);
	lim.features = RBLK_F_READ_ONLY | RBLK_F_FLUSH;
	CHECK_CMDS(read_only, &lim);
}

static void test_cmd_length(void **state)
{
	static const struct cmd_case cases[] = {
	    /* a data command moves at least one byte */
	    {RBLK_OP_READ, 0, 0, 0, RBLK_S_TOO_LARGE},
	    {RBLK_OP_WRITE, 0, 0, 0, RBLK_S_TOO_LARGE},
	    {RBLK_OP_TRIM, 0, 0, 0, RBLK_S_TOO_LARGE},
	    {RBLK_OP_WRITE_ZEROES, 0, 0, 0, RBLK_S_TOO_LARGE},
	    /* max_io bounds READ and WRITE (they use a slot) */
	    {RBLK_OP_READ, 0, 0, 128 * KIB, RBLK_S_OK},
	    {RBLK_OP_READ, 0, 0, 128 * KIB + 512, RBLK_S_TOO_LARGE},
	    {RBLK_OP_WRITE, 0, 0, 128 * KIB + 512, RBLK_S_TOO_LARGE},
	    {RBLK_OP_WRITE, 0, 0, UINT32_MAX, RBLK_S_TOO_LARGE},
	    {RBLK_OP_READ, RBLK_CMD_F_PUSH, 0, 256 * KIB, RBLK_S_TOO_LARGE},
	    /* TRIM and WRITE_ZEROES move no data: the volume bounds them */
	    {RBLK_OP_TRIM, 0, 0, MIB, RBLK_S_OK},
	    {RBLK_OP_WRITE_ZEROES, 0, 0, MIB, RBLK_S_OK},
	};

	(void)state;
	CHECK_CMDS(cases, &base_lim);
}

static void test_cmd_alignment(void **state)
{
	static const struct cmd_case blk512[] = {
	    {RBLK_OP_READ, 0, 1, 512, RBLK_S_MISALIGNED},
	    {RBLK_OP_READ, 0, 511, 512, RBLK_S_MISALIGNED},
	    {RBLK_OP_WRITE, 0, 0, 511, RBLK_S_MISALIGNED},
	    {RBLK_OP_WRITE, 0, 0, 513, RBLK_S_MISALIGNED},
	    {RBLK_OP_TRIM, 0, 100, 512, RBLK_S_MISALIGNED},
	    {RBLK_OP_WRITE_ZEROES, 0, 0, 1000, RBLK_S_MISALIGNED},
	};
	static const struct cmd_case blk4k[] = {
	    {RBLK_OP_READ, 0, 512, 4096, RBLK_S_MISALIGNED},
	    {RBLK_OP_READ, 0, 4096, 512, RBLK_S_MISALIGNED},
	    {RBLK_OP_READ, 0, 8192, 4096, RBLK_S_OK},
	    /* an out-of-range misaligned offset is misaligned first */
	    {RBLK_OP_READ, 0, UINT64_MAX, 4096, RBLK_S_MISALIGNED},
	};
	struct rblk_limits lim = base_lim;

	(void)state;
	CHECK_CMDS(blk512, &lim);
	lim.block_size = 4096;
	CHECK_CMDS(blk4k, &lim);
}

static void test_cmd_range(void **state)
{
	const uint64_t top = UINT64_MAX & ~(uint64_t)511; /* aligned */
	const struct cmd_case mib[] = {
	    /* exactly up to the end is fine, one block further is not */
	    {RBLK_OP_READ, 0, MIB - 512, 512, RBLK_S_OK},
	    {RBLK_OP_READ, 0, MIB - 512, 1024, RBLK_S_OUT_OF_RANGE},
	    {RBLK_OP_WRITE, 0, MIB, 512, RBLK_S_OUT_OF_RANGE},
	    {RBLK_OP_TRIM, 0, 0, MIB + 512, RBLK_S_OUT_OF_RANGE},
	    {RBLK_OP_WRITE_ZEROES, 0, 512, MIB, RBLK_S_OUT_OF_RANGE},
	    {RBLK_OP_READ, 0, top, 512, RBLK_S_OUT_OF_RANGE},
	};
	/*
	 * offset + length wrapping past 2^64: with a volume as large as the
	 * offset space, only the overflow check catches it.
	 */
	const struct cmd_case huge[] = {
	    {RBLK_OP_READ, 0, top - 1024, 1024, RBLK_S_OK},
	    {RBLK_OP_READ, 0, top, 512, RBLK_S_OUT_OF_RANGE},
	    {RBLK_OP_READ, 0, top - 512, 1024, RBLK_S_OUT_OF_RANGE},
	    {RBLK_OP_TRIM, 0, top - 512, UINT32_MAX & ~511u,
	     RBLK_S_OUT_OF_RANGE},
	};
	struct rblk_limits lim = base_lim;

	(void)state;
	CHECK_CMDS(mib, &lim);
	lim.size = top;
	CHECK_CMDS(huge, &lim);
	/* an empty volume accepts no data command */
	lim.size = 0;
	assert_int_equal(cmd_st(1, RBLK_OP_READ, 0, 0, 512, &lim),
			 RBLK_S_OUT_OF_RANGE);
}

static void test_cmd_read_only(void **state)
{
	static const struct cmd_case cases[] = {
	    {RBLK_OP_WRITE, 0, 0, 512, RBLK_S_READ_ONLY},
	    {RBLK_OP_WRITE, RBLK_CMD_F_FUA, 0, 512, RBLK_S_READ_ONLY},
	    {RBLK_OP_TRIM, 0, 0, 512, RBLK_S_READ_ONLY},
	    {RBLK_OP_WRITE_ZEROES, 0, 0, 512, RBLK_S_READ_ONLY},
	    {RBLK_OP_READ, 0, 0, 512, RBLK_S_OK},
	    {RBLK_OP_READ, RBLK_CMD_F_PUSH, 0, 512, RBLK_S_OK},
	};
	struct rblk_limits lim = base_lim;

	(void)state;
	lim.features |= RBLK_F_READ_ONLY;
	CHECK_CMDS(cases, &lim);
}

static void test_cmd_not_supported(void **state)
{
	/* a command at offset 0, 512 bytes, on a volume with these features */
	static const struct {
		uint32_t features;
		uint8_t op, flags;
		int st;
	} cases[] = {
	    {RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_ZEROES | RBLK_F_PUSH,
	     RBLK_OP_TRIM, 0, RBLK_S_NOT_SUPPORTED},
	    {RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM | RBLK_F_PUSH,
	     RBLK_OP_WRITE_ZEROES, 0, RBLK_S_NOT_SUPPORTED},
	    {RBLK_F_FLUSH | RBLK_F_TRIM | RBLK_F_ZEROES | RBLK_F_PUSH,
	     RBLK_OP_WRITE, RBLK_CMD_F_FUA, RBLK_S_NOT_SUPPORTED},
	    {RBLK_F_FLUSH | RBLK_F_TRIM | RBLK_F_ZEROES | RBLK_F_PUSH,
	     RBLK_OP_WRITE_ZEROES, RBLK_CMD_F_FUA, RBLK_S_NOT_SUPPORTED},
	    {RBLK_F_FLUSH | RBLK_F_TRIM | RBLK_F_ZEROES | RBLK_F_PUSH,
	     RBLK_OP_WRITE, 0, RBLK_S_OK},
	    {RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM | RBLK_F_ZEROES,
	     RBLK_OP_READ, RBLK_CMD_F_PUSH, RBLK_S_NOT_SUPPORTED},
	    {RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM | RBLK_F_ZEROES,
	     RBLK_OP_READ, 0, RBLK_S_OK},
	    /* a volume with no features still reads and writes */
	    {0, RBLK_OP_READ, 0, RBLK_S_OK},
	    {0, RBLK_OP_WRITE, 0, RBLK_S_OK},
	};
	struct rblk_limits lim = base_lim;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct cmd_case c = {cases[i].op, cases[i].flags, 0, 512,
					   cases[i].st};

		lim.features = cases[i].features;
		check_cmd_cases(&c, 1, &lim);
	}
}

/* ---- HELLO ------------------------------------------------------------- */

static int hello_st(const struct rblk_hello *h)
{
	struct msgbuf m;
	struct rblk_hello out;

	rblk_hello_encode(m.b, h);
	return rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &out);
}

static struct rblk_wire_hello *whello(struct msgbuf *m)
{
	return (struct rblk_wire_hello *)m->b;
}

static int hello_decode_m(struct msgbuf *m)
{
	struct rblk_hello out;

	return rblk_hello_decode(m->b, RBLK_HELLO_SIZE, &out);
}

static void test_hello_fields(void **state)
{
	struct rblk_hello h;
	static const uint32_t bad_max_io[] = {
	    0, 1, 512, 2048, 4095, 4097, 6000, 12288, 0x80000001u, UINT32_MAX};

	(void)state;
	h = good_hello();
	h.queue_depth = 0;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
	h.queue_depth = RBLK_MAX_QD + 1;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
	h.queue_depth = 0xffff;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
	h.queue_depth = RBLK_MAX_QD;
	assert_int_equal(hello_st(&h), RBLK_S_OK);

	h = good_hello();
	for (size_t i = 0; i < ARRAY_SIZE(bad_max_io); i++) {
		h.max_io = bad_max_io[i];
		assert_int_equal(hello_st(&h), RBLK_S_INVALID);
	}
	/* larger than the target's cap is a request it may shrink */
	h.max_io = 1u << 30;
	assert_int_equal(hello_st(&h), RBLK_S_OK);

	h = good_hello();
	h.flags = 0x2;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
	h.flags = 0x80000000u;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
}

/* HELLO's inline_data (offset 20, once reserved): any value is a request */
static void test_hello_inline(void **state)
{
	static const uint32_t asks[] = {0,    1,     512,	4096,
					4097, 65536, UINT32_MAX};
	struct rblk_hello h = good_hello(), out;
	struct msgbuf m;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(asks); i++) {
		h.inline_data = asks[i];
		rblk_hello_encode(m.b, &h);
		assert_int_equal(get32(m.b + 20), asks[i]);
		assert_int_equal(rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &out),
				 RBLK_S_OK);
		assert_int_equal(out.inline_data, asks[i]);
	}
}

/*
 * rblk_inline_fit(): the target's receive ring (2 x depth + 2 buffers
 * within 256 KiB over rdma) and librblk's command buffers (depth + 1
 * within 128 KiB) come to the same size at every depth, so librblk's
 * default ask is what a default target grants (issue 26).
 */
static void test_inline_fit(void **state)
{
	static const struct {
		unsigned int qd;
		uint32_t n;
	} known[] = {{1, 4096},	 {16, 4096}, {32, 2048}, {64, 1024},
		     {128, 512}, {254, 0},   {256, 0}};

	(void)state;
	for (unsigned int qd = 1; qd <= RBLK_MAX_QD; qd++) {
		uint32_t n = rblk_inline_fit(2u * qd + 2u, 256u << 10);

		assert_int_equal(rblk_inline_fit(qd + 1u, 128u << 10), n);
		assert_int_equal(n % RBLK_INLINE_ALIGN, 0);
		assert_true(n <= RBLK_INLINE_DEFAULT);
		if (n)
			assert_true((qd + 1u) * (RBLK_CMD_SIZE + n) <=
				    (128u << 10));
	}
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		assert_int_equal(rblk_inline_fit(known[i].qd + 1u, 128u << 10),
				 known[i].n);
}

/* LOGIN's inline_data (offset 14): 0 or a multiple of 512 up to 16K */
static void test_login_inline(void **state)
{
	struct rblk_login l = good_login(), out;
	struct msgbuf m;

	(void)state;
	for (uint32_t n = 0; n <= RBLK_INLINE_MAX; n += RBLK_INLINE_ALIGN) {
		l.inline_data = (uint16_t)n;
		rblk_login_encode(m.b, &l);
		assert_int_equal(get16(m.b + 14), n);
		assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
				 RBLK_S_OK);
		assert_int_equal(out.inline_data, n);
	}
	l.inline_data = 4096 + 1;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.inline_data = 100;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.inline_data = RBLK_INLINE_MAX + RBLK_INLINE_ALIGN;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	/* an empty volume, or one past off_t (2^63 and more), is refused */
	l = good_login();
	l.size = 0;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.size = 1ull << 63;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.size = UINT64_MAX - 4095;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.size = (1ull << 63) - 4096;
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);
	/* a refusal grants nothing */
	l = (struct rblk_login){.status = RBLK_S_NO_EXPORT};
	rblk_login_encode(m.b, &l);
	m.b[15] = 0x10;
	assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
			 RBLK_S_INVALID);
}

/* Room for a capsule with the most in-capsule data, plus slack. */
struct bigbuf {
	uint8_t b[RBLK_CMD_SIZE + RBLK_INLINE_MAX + 64];
};

static const struct rblk_limits inline_lim = {
    .queue_depth = 16,
    .max_io = 128 * KIB,
    .block_size = 512,
    .size = 1 * MIB,
    .features = RBLK_F_FLUSH | RBLK_F_FUA,
    .inline_max = 4096,
};

/* An inline WRITE of len bytes of a pattern at tag 5, offset 8192. */
static size_t inline_cmd(struct bigbuf *m, uint32_t len, uint8_t extra_flags)
{
	static uint8_t data[RBLK_INLINE_MAX];
	struct rblk_cmd c =
	    mkcmd(5, RBLK_OP_WRITE, RBLK_CMD_F_INLINE | extra_flags, 8192, len);

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	c.data = data;
	memset(m, 0xee, sizeof(*m));
	return rblk_cmd_encode(m->b, &c);
}

static void test_cmd_inline_roundtrip(void **state)
{
	static const uint32_t lens[] = {512, 1024, 3584, 4096};
	struct bigbuf m;
	struct rblk_cmd out;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
		uint32_t len = lens[i];
		size_t n = inline_cmd(&m, len, RBLK_CMD_F_FUA);

		assert_int_equal(n, RBLK_CMD_SIZE + len);
		check_hdr_bytes(m.b, RBLK_MSG_CMD, (uint16_t)n);
		assert_int_equal(m.b[11], RBLK_CMD_F_INLINE | RBLK_CMD_F_FUA);
		assert_int_equal(m.b[n], 0xee); /* nothing written past it */
		assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), 5);
		assert_int_equal(rblk_cmd_decode(m.b, n, &inline_lim, &out),
				 RBLK_S_OK);
		assert_int_equal(out.length, len);
		assert_int_equal(out.flags, RBLK_CMD_F_INLINE | RBLK_CMD_F_FUA);
		assert_ptr_equal(out.data, m.b + RBLK_CMD_SIZE);
		for (uint32_t j = 0; j < len; j++)
			assert_int_equal(((const uint8_t *)out.data)[j],
					 (uint8_t)(j * 7 + 3));
	}
	/* without INLINE there is no data pointer */
	{
		struct msgbuf c;

		good_cmd(&c);
		assert_int_equal(decode_m(&c, RBLK_CMD_SIZE), RBLK_S_OK);
		assert_int_equal(
		    rblk_cmd_decode(c.b, RBLK_CMD_SIZE, &inline_lim, &out),
		    RBLK_S_OK);
		assert_null(out.data);
	}
}

/* Well framed, but not allowed: answered on the tag with INVALID. */
static void test_cmd_inline_refused(void **state)
{
	struct rblk_limits lim = inline_lim;
	struct bigbuf m;
	struct rblk_cmd out;
	size_t n;

	(void)state;
	/* above the granted size */
	n = inline_cmd(&m, 4608, 0);
	assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), 5);
	assert_int_equal(rblk_cmd_decode(m.b, n, &lim, &out), RBLK_S_INVALID);
	assert_int_equal(out.tag, 5);
	/* nothing granted */
	lim.inline_max = 0;
	n = inline_cmd(&m, 512, 0);
	assert_int_equal(rblk_cmd_decode(m.b, n, &lim, &out), RBLK_S_INVALID);
	/* INLINE on anything but WRITE, with its data framed correctly */
	for (int op = 1; op <= RBLK_OP_MAX_; op++) {
		if (op == RBLK_OP_WRITE)
			continue;
		n = inline_cmd(&m, 512, 0);
		m.b[10] = (uint8_t)op;
		assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), 5);
		assert_int_equal(rblk_cmd_decode(m.b, n, &inline_lim, &out),
				 RBLK_S_INVALID);
	}
	/* the usual checks still apply: read-only, misaligned, range */
	lim = inline_lim;
	lim.features |= RBLK_F_READ_ONLY;
	n = inline_cmd(&m, 512, 0);
	assert_int_equal(rblk_cmd_decode(m.b, n, &lim, &out), RBLK_S_READ_ONLY);
	n = inline_cmd(&m, 600, 0);
	assert_int_equal(rblk_cmd_decode(m.b, n, &inline_lim, &out),
			 RBLK_S_MISALIGNED);
}

/*
 * Malformed framing: the header's length, the bytes received and the
 * capsule's data length disagree. peek_tag says -1 (the connection
 * fails) and the decoder refuses it too.
 */
static void test_cmd_inline_framing(void **state)
{
	struct bigbuf m;
	struct rblk_cmd out;
	size_t n;

	(void)state;
	n = inline_cmd(&m, 1024, 0);
	/* fewer or more bytes received than the header says */
	assert_int_equal(rblk_cmd_peek_tag(m.b, n - 512, 16), -1);
	assert_int_equal(rblk_cmd_peek_tag(m.b, n - 1, 16), -1);
	assert_int_equal(rblk_cmd_peek_tag(m.b, n + 1, 16), -1);
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), -1);
	assert_int_equal(rblk_cmd_decode(m.b, n - 512, &inline_lim, &out),
			 RBLK_S_INVALID);
	/* header and bytes agree, but the capsule's length says otherwise */
	n = inline_cmd(&m, 1024, 0);
	m.b[12] = 0;	/* length 1024 -> 0 */
	m.b[13] = 0x08; /* -> 2048 */
	assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), -1);
	assert_int_equal(rblk_cmd_decode(m.b, n, &inline_lim, &out),
			 RBLK_S_INVALID);
	/* data behind a capsule without INLINE */
	n = inline_cmd(&m, 512, 0);
	m.b[11] = 0;
	assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), -1);
	/* INLINE with the header saying a bare capsule */
	n = inline_cmd(&m, 512, 0);
	m.b[6] = RBLK_CMD_SIZE;
	m.b[7] = 0;
	assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, 16), -1);
	assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), -1);
	/* a length that would wrap 64 + length in 32 bits */
	n = inline_cmd(&m, 512, 0);
	m.b[12] = 0xff;
	m.b[13] = 0xff;
	m.b[14] = 0xff;
	m.b[15] = 0xff;
	assert_int_equal(rblk_cmd_peek_tag(m.b, n, 16), -1);
	assert_int_equal(rblk_cmd_decode(m.b, n, &inline_lim, &out),
			 RBLK_S_INVALID);
}

static void test_hello_names(void **state)
{
	struct rblk_hello h = good_hello();
	struct msgbuf m;
	static const unsigned char bad[] = {0x01, 0x09, 0x0a, 0x1f,
					    0x7f, 0x80, 0xc3, 0xff};

	(void)state;
	/* empty export name */
	h.export_name[0] = 0;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);

	for (int which = 0; which < 2; which++) {
		size_t off =
		    which ? offsetof(struct rblk_wire_hello, host_name)
			  : offsetof(struct rblk_wire_hello, export_name);
		char *name;

		h = good_hello();
		/* no NUL inside the field */
		rblk_hello_encode(m.b, &h);
		name = (char *)m.b + off;
		memset(name, 'a', RBLK_NAME_MAX);
		assert_int_equal(hello_decode_m(&m), RBLK_S_INVALID);
		/* NUL in the last byte: 127 characters are fine */
		name[RBLK_NAME_MAX - 1] = 0;
		assert_int_equal(hello_decode_m(&m), RBLK_S_OK);
		/* non-printable bytes anywhere in the name */
		for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
			rblk_hello_encode(m.b, &h);
			name = (char *)m.b + off;
			name[1] = (char)bad[i];
			assert_int_equal(hello_decode_m(&m), RBLK_S_INVALID);
			rblk_hello_encode(m.b, &h);
			name[0] = (char)bad[i];
			assert_int_equal(hello_decode_m(&m), RBLK_S_INVALID);
		}
		/* garbage after the NUL */
		for (size_t pos = 15; pos < RBLK_NAME_MAX; pos += 17) {
			rblk_hello_encode(m.b, &h);
			name = (char *)m.b + off;
			name[pos] = 'x';
			assert_int_equal(hello_decode_m(&m), RBLK_S_INVALID);
		}
		rblk_hello_encode(m.b, &h);
		name = (char *)m.b + off;
		name[RBLK_NAME_MAX - 1] = 'x';
		assert_int_equal(hello_decode_m(&m), RBLK_S_INVALID);
	}
	/* the encoder truncates an over-long name to what decodes */
	memset(h.export_name, 'z', sizeof(h.export_name));
	h.export_name[RBLK_NAME_MAX - 1] = 0;
	rblk_hello_encode(m.b, &h);
	assert_int_equal(whello(&m)->export_name[RBLK_NAME_MAX - 1], 0);
	assert_int_equal(hello_decode_m(&m), RBLK_S_OK);
}

/* ---- LOGIN ------------------------------------------------------------- */

static void test_login_fields(void **state)
{
	struct rblk_login l;
	struct msgbuf m;
	struct rblk_login out;

	(void)state;
	l = good_login();
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);

	l.status = RBLK_S_MAX_ + 1;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.status = UINT32_MAX;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);

	/* reserved0, in a success and in a refusal */
	l = good_login();
	rblk_login_encode(m.b, &l);
	m.b[14] = 1;
	assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
			 RBLK_S_INVALID);
	l.status = RBLK_S_NO_EXPORT;
	rblk_login_encode(m.b, &l);
	m.b[15] = 1;
	assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
			 RBLK_S_INVALID);

	l = good_login();
	l.queue_depth = 0;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.queue_depth = RBLK_MAX_QD + 1;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.queue_depth = RBLK_MAX_QD;
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);
}

static void test_login_block_size(void **state)
{
	static const uint32_t bad[] = {0,     1,      256,	 511,  513,
				       1000,  3072,   4095,	 6144, 65535,
				       65537, 131072, UINT32_MAX};
	static const uint32_t good[] = {512, 1024, 2048, 4096, 65536};
	struct rblk_login l;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		l = good_login();
		l.block_size = bad[i];
		assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	}
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		l = good_login();
		l.block_size = good[i];
		assert_int_equal(login_decode_of(&l), RBLK_S_OK);
	}
}

static void test_login_size_and_max_io(void **state)
{
	struct rblk_login l;

	(void)state;
	/* size must be a multiple of the block size */
	l = good_login();
	l.size += 512;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.size = 4095;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.size = 4096;
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);
	l.size = UINT64_MAX;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);

	/* max_io: power of two, at least the block size, at most 8 MiB */
	l = good_login();
	l.max_io = 2048;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.max_io = 96 * KIB;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.max_io = RBLK_MAX_MAX_IO * 2;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.max_io = RBLK_MAX_MAX_IO;
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);
	l.max_io = 0;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);

	/* unknown feature bits */
	l = good_login();
	l.features = RBLK_F_ALL + 1;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.features = 0x80000000u;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.features = RBLK_F_ALL;
	l.vol_len = l.size; /* DIRECT is among them */
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);
}

static void test_login_direct(void **state)
{
	struct rblk_login l, out;
	struct msgbuf m;

	(void)state;
	l = good_login();
	l.features |= RBLK_F_DIRECT;
	l.vol_rkey = 0xcafef00d;
	l.vol_addr = 0x7e0000000000ull;
	l.vol_len = l.size;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_login_encode(m.b, &l), RBLK_LOGIN_SIZE);
	assert_int_equal(get32(m.b + 32),
			 RBLK_F_FLUSH | RBLK_F_TRIM | RBLK_F_DIRECT);
	assert_int_equal(get32(m.b + 36), 0xcafef00d);
	assert_true(get64(m.b + 40) == 0x7e0000000000ull);
	assert_true(get64(m.b + 48) == l.size);
	assert_int_equal(m.b[RBLK_LOGIN_SIZE], 0xee);
	assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
			 RBLK_S_OK);
	assert_int_equal(out.vol_rkey, 0xcafef00d);
	assert_true(out.vol_addr == l.vol_addr);
	assert_true(out.vol_len == l.size);

	/* the region is exactly the volume */
	l.vol_len = l.size - 4096;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.vol_len = l.size + 4096;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.vol_len = 0;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	/* and does not wrap the address space */
	l.vol_len = l.size;
	l.vol_addr = UINT64_MAX - l.size + 1;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l.vol_addr = UINT64_MAX - l.size;
	assert_int_equal(login_decode_of(&l), RBLK_S_OK);
	/* without DIRECT every volume field is zero */
	l = good_login();
	l.vol_rkey = 1;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l = good_login();
	l.vol_addr = 4096;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
	l = good_login();
	l.vol_len = l.size;
	assert_int_equal(login_decode_of(&l), RBLK_S_INVALID);
}

/* Version 2: the LOGIN carries no slot region; a version 1 LOGIN is refused. */
static void test_login_v1_refused(void **state)
{
	struct rblk_login l = good_login(), out;
	struct msgbuf m;

	(void)state;
	rblk_login_encode(m.b, &l);
	m.b[4] = 1; /* version 1 header */
	assert_int_equal(rblk_login_decode(m.b, RBLK_LOGIN_SIZE, &out),
			 RBLK_S_BAD_VERSION);
	/* version 1's 88-byte LOGIN, version 2 header: wrong size */
	rblk_login_encode(m.b, &l);
	m.b[6] = 88;
	assert_int_equal(rblk_login_decode(m.b, 88, &out), RBLK_S_INVALID);
}

/* ---- RESP -------------------------------------------------------------- */

static void test_resp_fields(void **state)
{
	struct rblk_resp r = {.tag = 3, .status = RBLK_S_OK, .length = 512};
	struct rblk_resp out;
	struct msgbuf m;

	(void)state;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_OK);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 3, &out),
			 RBLK_S_BAD_TAG);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 0, &out),
			 RBLK_S_BAD_TAG);
	r.tag = 0xffff;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(
	    rblk_resp_decode(m.b, RBLK_RESP_SIZE, RBLK_MAX_QD, &out),
	    RBLK_S_BAD_TAG);

	r.tag = 0;
	r.status = RBLK_S_MAX_ + 1;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	r.status = UINT32_MAX;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);

	r.status = RBLK_S_IO_ERROR;
	for (int i = 10; i < 12; i++) {
		rblk_resp_encode(m.b, &r);
		m.b[i] = 1;
		assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
				 RBLK_S_INVALID);
	}
	/* without PULL, rkey and addr must be zero */
	for (int i = 20; i < RBLK_RESP_SIZE; i++) {
		rblk_resp_encode(m.b, &r);
		m.b[i] = 0x80;
		assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
				 RBLK_S_INVALID);
	}
}

/* RESIZE: SIZE without PULL carries the size where addr would be */
static void test_resp_size(void **state)
{
	struct rblk_resp r = {.tag = 1,
			      .flags = RBLK_RESP_F_SIZE,
			      .status = RBLK_S_OK,
			      .size = 3ull << 30};
	struct rblk_resp out;
	struct msgbuf m;

	(void)state;
	assert_int_equal(rblk_resp_encode(m.b, &r), RBLK_RESP_SIZE);
	assert_int_equal(get16(m.b + 10), RBLK_RESP_F_SIZE);
	assert_true(get64(m.b + 24) == 3ull << 30);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_OK);
	assert_true(out.size == 3ull << 30);
	assert_true(out.addr == 0);
	/* on an error answer too (a KEEPALIVE refused is still an answer) */
	r.status = RBLK_S_IO_ERROR;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_OK);
	/* a size of 0 or >= 2^63, or an rkey beside it, is malformed */
	r.size = 0;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	r.size = 1ull << 63;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	r.size = 4096;
	rblk_resp_encode(m.b, &r);
	m.b[20] = 1;
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	/* with PULL the flag says "changed" only: addr stays the window's */
	r = (struct rblk_resp){.tag = 1,
			       .flags = RBLK_RESP_F_SIZE | RBLK_RESP_F_PULL,
			       .length = 4096,
			       .rkey = 5,
			       .addr = 0x10000,
			       .size = 99};
	rblk_resp_encode(m.b, &r);
	assert_true(get64(m.b + 24) == 0x10000);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_OK);
	assert_true(out.addr == 0x10000 && out.size == 0);
	/* flags beyond the two known stay malformed */
	r.flags = 0x04;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
}

static void test_resp_pull(void **state)
{
	struct rblk_resp r = {.tag = 2,
			      .flags = RBLK_RESP_F_PULL,
			      .status = RBLK_S_OK,
			      .length = 8192,
			      .rkey = 0xabcdef01,
			      .addr = 0x7f0012340000ull};
	struct rblk_resp out;
	struct msgbuf m;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_resp_encode(m.b, &r), RBLK_RESP_SIZE);
	assert_int_equal(get16(m.b + 10), RBLK_RESP_F_PULL);
	assert_int_equal(get32(m.b + 20), 0xabcdef01);
	assert_true(get64(m.b + 24) == 0x7f0012340000ull);
	assert_int_equal(m.b[RBLK_RESP_SIZE], 0xee);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_OK);
	assert_int_equal(out.flags, RBLK_RESP_F_PULL);
	assert_int_equal(out.rkey, 0xabcdef01);
	assert_true(out.addr == r.addr);
	assert_int_equal(out.length, 8192);
	/* PULL only on success, with data, without wrapping */
	r.status = RBLK_S_IO_ERROR;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	r.status = RBLK_S_OK;
	r.length = 0;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	r.length = 4096;
	r.addr = UINT64_MAX - 4095;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
	r.addr = UINT64_MAX - 4096;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_OK);
	/* unknown flags */
	r.flags = 0x02;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_resp_decode(m.b, RBLK_RESP_SIZE, 4, &out),
			 RBLK_S_INVALID);
}

static void test_grant(void **state)
{
	struct rblk_grant g = {.tag = 9,
			       .rkey = 0x11223344,
			       .length = 64 * KIB,
			       .addr = 0x7f0000100000ull};
	struct rblk_grant out;
	struct msgbuf m;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_grant_encode(m.b, &g), RBLK_GRANT_SIZE);
	check_hdr_bytes(m.b, RBLK_MSG_GRANT, RBLK_GRANT_SIZE);
	assert_int_equal(get16(m.b + 8), 9);
	assert_int_equal(get16(m.b + 10), 0);
	assert_int_equal(get32(m.b + 12), 0x11223344);
	assert_int_equal(get32(m.b + 16), 64 * KIB);
	assert_int_equal(get32(m.b + 20), 0);
	assert_true(get64(m.b + 24) == 0x7f0000100000ull);
	assert_int_equal(m.b[RBLK_GRANT_SIZE], 0xee);
	assert_int_equal(rblk_msg_type(m.b, RBLK_GRANT_SIZE), RBLK_MSG_GRANT);
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, MIB, &out),
			 RBLK_S_OK);
	assert_int_equal(out.tag, 9);
	assert_int_equal(out.rkey, 0x11223344);
	assert_int_equal(out.length, 64 * KIB);
	assert_true(out.addr == g.addr);
	/* tag, length against max_io, wrap, reserved, size, type */
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 9, MIB, &out),
			 RBLK_S_BAD_TAG);
	assert_int_equal(
	    rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, 32 * KIB, &out),
	    RBLK_S_INVALID);
	assert_int_equal(
	    rblk_grant_decode(m.b, RBLK_GRANT_SIZE - 1, 16, MIB, &out),
	    RBLK_S_INVALID);
	m.b[10] = 1;
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, MIB, &out),
			 RBLK_S_INVALID);
	rblk_grant_encode(m.b, &g);
	m.b[20] = 1;
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, MIB, &out),
			 RBLK_S_INVALID);
	g.length = 0;
	rblk_grant_encode(m.b, &g);
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, MIB, &out),
			 RBLK_S_INVALID);
	g.length = 4096;
	g.addr = UINT64_MAX - 4095;
	rblk_grant_encode(m.b, &g);
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, MIB, &out),
			 RBLK_S_INVALID);
	g.addr = 0x1000;
	rblk_grant_encode(m.b, &g);
	m.b[5] = RBLK_MSG_RESP;
	assert_int_equal(rblk_grant_decode(m.b, RBLK_GRANT_SIZE, 16, MIB, &out),
			 RBLK_S_INVALID);
}

static void test_done(void **state)
{
	struct rblk_done d = {
	    .type = RBLK_MSG_READ_DONE, .tag = 3, .rkey = 0x01020304};
	struct rblk_done out;
	struct msgbuf m;

	(void)state;
	for (int t = 0; t < 2; t++) {
		d.type = t ? RBLK_MSG_WRITE_DATA : RBLK_MSG_READ_DONE;
		memset(&m, 0xee, sizeof(m));
		assert_int_equal(rblk_done_encode(m.b, &d), RBLK_DONE_SIZE);
		check_hdr_bytes(m.b, d.type, RBLK_DONE_SIZE);
		assert_int_equal(get16(m.b + 8), 3);
		assert_int_equal(get16(m.b + 10), 0);
		assert_int_equal(get32(m.b + 12), 0x01020304);
		assert_int_equal(m.b[RBLK_DONE_SIZE], 0xee);
		assert_int_equal(rblk_done_decode(m.b, RBLK_DONE_SIZE, 4, &out),
				 RBLK_S_OK);
		assert_int_equal(out.type, d.type);
		assert_int_equal(out.tag, 3);
		assert_int_equal(out.rkey, 0x01020304);
		assert_int_equal(rblk_done_decode(m.b, RBLK_DONE_SIZE, 3, &out),
				 RBLK_S_BAD_TAG);
		assert_int_equal(
		    rblk_done_decode(m.b, RBLK_DONE_SIZE + 1, 4, &out),
		    RBLK_S_INVALID);
		m.b[10] = 1;
		assert_int_equal(rblk_done_decode(m.b, RBLK_DONE_SIZE, 4, &out),
				 RBLK_S_INVALID);
	}
	/* another type, a version 1 header */
	rblk_done_encode(m.b, &d);
	m.b[5] = RBLK_MSG_CMD;
	assert_int_equal(rblk_done_decode(m.b, RBLK_DONE_SIZE, 4, &out),
			 RBLK_S_INVALID);
	rblk_done_encode(m.b, &d);
	m.b[4] = 1;
	assert_int_equal(rblk_done_decode(m.b, RBLK_DONE_SIZE, 4, &out),
			 RBLK_S_INVALID);
}

/* ---- tag generations (RBLK_F_TAG_GEN) ---------------------------------- */

/*
 * Every decoder that reads a tag, against one table: a wire tag, the
 * queue depth, whether generations were granted, and the index the tag
 * names (-1: refused as a bad tag). Without generations the upper bits
 * are part of the tag (and so out of range); with them only the index
 * is checked against the depth, and every decoder hands the whole wire
 * tag back, for the initiator to compare with its command's.
 */
static const struct {
	uint16_t tag;
	uint16_t qd;
	bool gen;
	int index;
} tag_cases[] = {
    {5, 16, false, 5},
    {5, 16, true, 5},
    {15, 16, true, 15},
    {16, 16, true, -1},
    {16, 16, false, -1},
    {(1 << 10) | 5, 16, false, -1}, /* generation 1 of 5: unknown */
    {(1 << 10) | 5, 16, true, 5},
    {(63 << 10) | 15, 16, true, 15},
    {(63 << 10) | 16, 16, true, -1},
    {0xffff, RBLK_MAX_QD, true, RBLK_MAX_QD - 1},
    {0xffff, RBLK_MAX_QD, false, -1},
    {RBLK_MAX_QD - 1, RBLK_MAX_QD, false, RBLK_MAX_QD - 1},
    {0x0400, RBLK_MAX_QD, true, 0},
    {0x0400, RBLK_MAX_QD, false, -1},
    {0, 1, true, 0},
    {1 << 10, 1, true, 0},
};

static void test_tag_gen_decoders(void **state)
{
	struct msgbuf m;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(tag_cases); i++) {
		uint16_t tag = tag_cases[i].tag;
		uint32_t tags = rblk_tags(tag_cases[i].qd, tag_cases[i].gen);
		int want = tag_cases[i].index;
		int want_st = want < 0 ? RBLK_S_BAD_TAG : RBLK_S_OK;
		struct rblk_limits lim = base_lim;
		struct rblk_cmd c = mkcmd(tag, RBLK_OP_READ, 0, 0, 512), cout;
		struct rblk_resp r = {.tag = tag, .length = 512}, rout;
		struct rblk_grant g = {
		    .tag = tag, .rkey = 7, .length = 512, .addr = 4096};
		struct rblk_grant gout;
		struct rblk_done d = {
		    .type = RBLK_MSG_READ_DONE, .tag = tag, .rkey = 7};
		struct rblk_done dout;

		lim.queue_depth = tag_cases[i].qd;
		if (tag_cases[i].gen)
			lim.features |= RBLK_F_TAG_GEN;
		rblk_cmd_encode(m.b, &c);
		assert_int_equal(rblk_cmd_peek_tag(m.b, RBLK_CMD_SIZE, tags),
				 want);
		assert_int_equal(
		    rblk_cmd_decode(m.b, RBLK_CMD_SIZE, &lim, &cout), want_st);
		rblk_resp_encode(m.b, &r);
		assert_int_equal(
		    rblk_resp_decode(m.b, RBLK_RESP_SIZE, tags, &rout),
		    want_st);
		rblk_grant_encode(m.b, &g);
		assert_int_equal(
		    rblk_grant_decode(m.b, RBLK_GRANT_SIZE, tags, MIB, &gout),
		    want_st);
		rblk_done_encode(m.b, &d);
		assert_int_equal(
		    rblk_done_decode(m.b, RBLK_DONE_SIZE, tags, &dout),
		    want_st);
		if (want < 0)
			continue;
		/* the whole wire tag comes back; its index is the slot's */
		assert_int_equal(cout.tag, tag);
		assert_int_equal(rout.tag, tag);
		assert_int_equal(gout.tag, tag);
		assert_int_equal(dout.tag, tag);
		assert_int_equal(tag_cases[i].gen ? rblk_tag_index(tag) : tag,
				 want);
	}
}

static void test_tag_gen_helpers(void **state)
{
	struct rblk_hello h = {.queue_depth = 4, .max_io = 65536}, ho;
	struct msgbuf m;

	(void)state;
	/* index and generation round-trip; the generation wraps at 64 */
	for (unsigned int gen = 0; gen < 130; gen++) {
		uint16_t t = rblk_tag_make(RBLK_MAX_QD - 1, gen);

		assert_int_equal(rblk_tag_index(t), RBLK_MAX_QD - 1);
		assert_int_equal(rblk_tag_gen(t), gen % 64);
		assert_int_equal(rblk_tag_index(rblk_tag_make(3, gen)), 3);
	}
	assert_int_equal(rblk_tag_make(3, 0), 3);
	assert_int_equal(RBLK_TAG_INDEX_MASK + 1, RBLK_MAX_QD);
	/* HELLO asks with its flag; LOGIN grants with its feature bit */
	strcpy(h.export_name, "vol0");
	h.flags = RBLK_HELLO_F_TAG_GEN;
	rblk_hello_encode(m.b, &h);
	assert_int_equal(rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &ho),
			 RBLK_S_OK);
	assert_int_equal(ho.flags, RBLK_HELLO_F_TAG_GEN);
	assert_true(RBLK_F_ALL & RBLK_F_TAG_GEN);
}

/* ---- rdma_cm private data ---------------------------------------------- */

static void test_cm_req(void **state)
{
	struct msgbuf m;
	uint16_t qd;

	(void)state;
	memset(&m, 0, sizeof(m));
	rblk_cm_req_encode(m.b, 32);
	/* rdma_cm pads private data with zeroes: longer is fine */
	assert_int_equal(rblk_cm_req_decode(m.b, 56, &qd), RBLK_S_OK);
	assert_int_equal(qd, 32);
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE - 1, &qd),
			 RBLK_S_INVALID);
	assert_int_equal(rblk_cm_req_decode(m.b, 0, &qd), RBLK_S_INVALID);

	m.b[1] ^= 1;
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
			 RBLK_S_INVALID);
	rblk_cm_req_encode(m.b, 32);
	m.b[4] = RBLK_PROTO_VERSION + 1;
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
			 RBLK_S_BAD_VERSION);

	rblk_cm_req_encode(m.b, 0);
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
			 RBLK_S_INVALID);
	rblk_cm_req_encode(m.b, RBLK_MAX_QD + 1);
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
			 RBLK_S_INVALID);
	rblk_cm_req_encode(m.b, RBLK_MAX_QD);
	assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
			 RBLK_S_OK);
	assert_int_equal(qd, RBLK_MAX_QD);

	/* reserved bytes must be zero, like everywhere else */
	for (int i = 5; i < RBLK_CM_REQ_SIZE; i++) {
		if (i == 6 || i == 7)
			continue; /* queue_depth */
		rblk_cm_req_encode(m.b, 8);
		m.b[i] = 1;
		assert_int_equal(rblk_cm_req_decode(m.b, RBLK_CM_REQ_SIZE, &qd),
				 RBLK_S_INVALID);
	}
}

static void test_cm_rej(void **state)
{
	struct msgbuf m;

	(void)state;
	memset(&m, 0, sizeof(m));
	rblk_cm_rej_encode(m.b, RBLK_S_NO_EXPORT);
	assert_int_equal(rblk_cm_rej_decode(m.b, 56), RBLK_S_NO_EXPORT);
	assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE - 1),
			 RBLK_S_INVALID);
	assert_int_equal(rblk_cm_rej_decode(m.b, 0), RBLK_S_INVALID);
	/* a reject from a target of another version still says why */
	m.b[4] = RBLK_PROTO_VERSION + 1;
	assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE),
			 RBLK_S_NO_EXPORT);
	rblk_cm_rej_encode(m.b, RBLK_S_BAD_VERSION);
	m.b[4] = 7;
	assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE),
			 RBLK_S_BAD_VERSION);
	/* bad magic: not ours (e.g. a reject from the kernel's CM) */
	rblk_cm_rej_encode(m.b, RBLK_S_NO_EXPORT);
	m.b[3] = 0;
	assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE),
			 RBLK_S_INVALID);
	/* unknown status */
	rblk_cm_rej_encode(m.b, RBLK_S_MAX_ + 1);
	assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE),
			 RBLK_S_INVALID);
	rblk_cm_rej_encode(m.b, UINT32_MAX);
	assert_int_equal(rblk_cm_rej_decode(m.b, RBLK_CM_REJ_SIZE),
			 RBLK_S_INVALID);
}

/* ---- status and opcode names ------------------------------------------ */

static void test_status_str(void **state)
{
	(void)state;
	for (int i = 0; i <= RBLK_S_MAX_; i++) {
		const char *s = rblk_status_str(i);

		if (i == 19) /* reserved: reservation conflict */
			continue;

		assert_non_null(s);
		assert_true(strlen(s) > 0);
		assert_string_not_equal(s, "unknown status");
		for (int j = 0; j < i; j++)
			if (j != 19)
				assert_string_not_equal(s, rblk_status_str(j));
	}
	assert_string_equal(rblk_status_str(-1), "unknown status");
	assert_string_equal(rblk_status_str(RBLK_S_MAX_ + 1), "unknown status");
	assert_string_equal(rblk_status_str(1 << 30), "unknown status");
	assert_string_equal(rblk_status_str(RBLK_S_OK), "success");
}

static void test_status_to_errno(void **state)
{
	static const struct {
		int status, err;
	} map[] = {
	    {RBLK_S_OK, 0},
	    {RBLK_S_INVALID, -EINVAL},
	    {RBLK_S_BAD_VERSION, -EPROTONOSUPPORT},
	    {RBLK_S_NO_EXPORT, -ENOENT},
	    {RBLK_S_READ_ONLY, -EROFS},
	    {RBLK_S_OUT_OF_RANGE, -ERANGE},
	    {RBLK_S_IO_ERROR, -EIO},
	    {RBLK_S_NOT_SUPPORTED, -EOPNOTSUPP},
	    {RBLK_S_BAD_TAG, -EPROTO},
	    {RBLK_S_NO_SPACE, -ENOSPC},
	    {RBLK_S_ACCESS_DENIED, -EACCES},
	    {RBLK_S_NO_RESOURCES, -ENOMEM},
	    {RBLK_S_BAD_STATE, -EPROTO},
	    {RBLK_S_SHUTDOWN, -ESHUTDOWN},
	    {RBLK_S_MISALIGNED, -EINVAL},
	    {RBLK_S_TOO_LARGE, -E2BIG},
	    {RBLK_S_AUTH_FAILED, -EACCES},
	    {RBLK_S_AUTH_REQUIRED, -ENOKEY},
	    {RBLK_S_BUSY, -EBUSY},
	    {RBLK_S_RESV_CONFLICT, -EBADE},
	    {RBLK_S_TLS_REQUIRED, -EACCES},
	};

	(void)state;
	assert_int_equal(ARRAY_SIZE(map), RBLK_S_MAX_ + 1);
	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		assert_int_equal(map[i].status, i);
		assert_int_equal(rblk_status_to_errno(map[i].status),
				 map[i].err);
	}
	/* unknown codes are errors, never success */
	assert_int_equal(rblk_status_to_errno(RBLK_S_MAX_ + 1), -EINVAL);
	assert_int_equal(rblk_status_to_errno(-1), -EINVAL);
	for (int i = 1; i <= RBLK_S_MAX_ + 5; i++)
		assert_true(rblk_status_to_errno(i) < 0);
}

static void test_errno_to_status(void **state)
{
	(void)state;
	assert_int_equal(rblk_errno_to_status(0), RBLK_S_OK);
	assert_int_equal(rblk_errno_to_status(-ENOSPC), RBLK_S_NO_SPACE);
	assert_int_equal(rblk_errno_to_status(-EDQUOT), RBLK_S_NO_SPACE);
	assert_int_equal(rblk_errno_to_status(-EOPNOTSUPP),
			 RBLK_S_NOT_SUPPORTED);
	assert_int_equal(rblk_errno_to_status(-EROFS), RBLK_S_READ_ONLY);
	assert_int_equal(rblk_errno_to_status(-EPERM), RBLK_S_READ_ONLY);
	assert_int_equal(rblk_errno_to_status(-ENOMEM), RBLK_S_NO_RESOURCES);
	assert_int_equal(rblk_errno_to_status(-EIO), RBLK_S_IO_ERROR);
	assert_int_equal(rblk_errno_to_status(-EINVAL), RBLK_S_IO_ERROR);
	assert_int_equal(rblk_errno_to_status(-EBADF), RBLK_S_IO_ERROR);
	/* round trip of what both directions name */
	assert_int_equal(rblk_status_to_errno(rblk_errno_to_status(-ENOSPC)),
			 -ENOSPC);
	assert_int_equal(rblk_status_to_errno(rblk_errno_to_status(-EROFS)),
			 -EROFS);
	assert_int_equal(rblk_status_to_errno(rblk_errno_to_status(-EIO)),
			 -EIO);
}

static void test_opcode_str(void **state)
{
	(void)state;
	assert_string_equal(rblk_opcode_str(RBLK_OP_READ), "READ");
	assert_string_equal(rblk_opcode_str(RBLK_OP_WRITE), "WRITE");
	assert_string_equal(rblk_opcode_str(RBLK_OP_FLUSH), "FLUSH");
	assert_string_equal(rblk_opcode_str(RBLK_OP_TRIM), "TRIM");
	assert_string_equal(rblk_opcode_str(RBLK_OP_WRITE_ZEROES),
			    "WRITE_ZEROES");
	assert_string_equal(rblk_opcode_str(RBLK_OP_DISCONNECT), "DISCONNECT");
	assert_string_equal(rblk_opcode_str(RBLK_OP_KEEPALIVE), "KEEPALIVE");
	assert_string_equal(rblk_opcode_str(0), "UNKNOWN");
	assert_string_equal(rblk_opcode_str(RBLK_OP_MAX_ + 1), "UNKNOWN");
	assert_string_equal(rblk_opcode_str(-1), "UNKNOWN");
}

static void test_msg_type(void **state)
{
	struct msgbuf m;
	struct rblk_resp r = {0};

	(void)state;
	rblk_resp_encode(m.b, &r);
	assert_int_equal(rblk_msg_type(m.b, RBLK_RESP_SIZE), RBLK_MSG_RESP);
	assert_int_equal(rblk_msg_type(m.b, 0), -1);
	m.b[4] = 9;
	assert_int_equal(rblk_msg_type(m.b, RBLK_RESP_SIZE), -1);
}

/* ---- discovery --------------------------------------------------------- */

static void test_hello_discover(void **state)
{
	struct rblk_hello h = good_hello(), out;
	struct msgbuf m;

	(void)state;
	/* discovery names no export; queue_id is the first index wanted */
	h.flags = RBLK_HELLO_F_DISCOVER;
	h.export_name[0] = 0;
	h.queue_id = 7;
	rblk_hello_encode(m.b, &h);
	assert_int_equal(rblk_hello_decode(m.b, RBLK_HELLO_SIZE, &out),
			 RBLK_S_OK);
	assert_int_equal(out.flags, RBLK_HELLO_F_DISCOVER);
	assert_int_equal(out.queue_id, 7);
	assert_string_equal(out.export_name, "");
	assert_string_equal(out.host_name, "host-a.example");
	/* a discovery HELLO that names an export is malformed */
	strcpy(h.export_name, "vol0");
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
	/* garbage behind an empty name is still garbage */
	h.export_name[0] = 0;
	rblk_hello_encode(m.b, &h);
	m.b[offsetof(struct rblk_wire_hello, export_name) + 5] = 'x';
	assert_int_equal(hello_decode_m(&m), RBLK_S_INVALID);
	/* a login still needs a name */
	h = good_hello();
	h.export_name[0] = 0;
	assert_int_equal(hello_st(&h), RBLK_S_INVALID);
}

static struct rblk_disc_reply good_disc(void)
{
	struct rblk_disc_reply d = {.total = 5, .first = 3, .count = 2};

	strcpy(d.entry[0].name, "vol0");
	d.entry[0].size = 1ull << 30;
	d.entry[0].block_size = 512;
	d.entry[0].features = RBLK_F_FLUSH | RBLK_F_TRIM;
	strcpy(d.entry[1].name, "ro-4k");
	d.entry[1].size = 3 * 4096;
	d.entry[1].block_size = 4096;
	d.entry[1].features = RBLK_F_READ_ONLY;
	return d;
}

static int disc_st(const struct rblk_disc_reply *d)
{
	struct msgbuf m;
	struct rblk_disc_reply out;

	assert_int_equal(rblk_disc_reply_encode(m.b, d), RBLK_DISC_REPLY_SIZE);
	return rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out);
}

static void test_disc_roundtrip(void **state)
{
	struct rblk_disc_reply d = good_disc(), out;
	struct rblk_wire_disc_reply *w;
	struct msgbuf m;

	(void)state;
	memset(&m, 0xee, sizeof(m));
	assert_int_equal(rblk_disc_reply_encode(m.b, &d), RBLK_DISC_REPLY_SIZE);
	w = (struct rblk_wire_disc_reply *)m.b;
	/* wire layout: little-endian, fixed offsets */
	assert_int_equal(m.b[5], RBLK_MSG_DISCOVER_REPLY);
	assert_int_equal(m.b[6] | m.b[7] << 8, RBLK_DISC_REPLY_SIZE);
	assert_int_equal(m.b[8], 5);
	assert_int_equal(m.b[10], 3);
	assert_int_equal(m.b[12], 2);
	assert_int_equal(offsetof(struct rblk_wire_disc_reply, entry), 24);
	assert_string_equal((char *)m.b + 24, "vol0");
	assert_int_equal(m.b[24 + 128 + 3], 0x40); /* 1 GiB, LE u64 */
	assert_int_equal(le32toh(w->entry[1].block_size), 4096);
	assert_int_equal(m.b[RBLK_DISC_REPLY_SIZE], 0xee); /* no overrun */

	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out), RBLK_S_OK);
	assert_int_equal(out.total, 5);
	assert_int_equal(out.first, 3);
	assert_int_equal(out.count, 2);
	assert_string_equal(out.entry[0].name, "vol0");
	assert_int_equal(out.entry[0].size, 1ull << 30);
	assert_int_equal(out.entry[0].block_size, 512);
	assert_int_equal(out.entry[0].features, RBLK_F_FLUSH | RBLK_F_TRIM);
	assert_string_equal(out.entry[1].name, "ro-4k");
	assert_int_equal(out.entry[1].size, 3 * 4096);
	assert_int_equal(out.entry[1].features, RBLK_F_READ_ONLY);
	assert_string_equal(out.entry[2].name, "");

	/* an empty list is a valid answer */
	memset(&d, 0, sizeof(d));
	assert_int_equal(disc_st(&d), RBLK_S_OK);
	/* a full page */
	d = good_disc();
	d.count = 3;
	d.entry[2] = d.entry[0];
	d.first = 2;
	assert_int_equal(disc_st(&d), RBLK_S_OK);
	/* wrong lengths, wrong type */
	rblk_disc_reply_encode(m.b, &d);
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE - 1, &out),
	    RBLK_S_INVALID);
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE + 1, &out),
	    RBLK_S_INVALID);
	m.b[5] = RBLK_MSG_LOGIN;
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
	    RBLK_S_INVALID);
	rblk_disc_reply_encode(m.b, &d);
	m.b[4] = RBLK_PROTO_VERSION + 1;
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
	    RBLK_S_BAD_VERSION);
}

static void test_disc_fields(void **state)
{
	struct rblk_disc_reply d, out;
	struct msgbuf m;

	(void)state;
	/* count above the page, or past the total */
	d = good_disc();
	d.count = RBLK_DISC_PER_REPLY + 1;
	rblk_disc_reply_encode(m.b, &d);
	m.b[12] = RBLK_DISC_PER_REPLY + 1;
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
	    RBLK_S_INVALID);
	d = good_disc();
	d.first = 4; /* 4 + 2 > 5 */
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d.first = 0xffff; /* no wrap-around */
	d.total = 0xffff;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	/* entries: empty name, bad block sizes, size not a multiple, features
	 */
	d = good_disc();
	d.entry[1].name[0] = 0;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d = good_disc();
	d.entry[1].name[0] = '\t';
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d = good_disc();
	d.entry[0].block_size = 256;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d.entry[0].block_size = 131072;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d.entry[0].block_size = 1536;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d = good_disc();
	d.entry[1].size = 4096 + 512;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	d = good_disc();
	d.entry[0].features = 0x80000000u;
	assert_int_equal(disc_st(&d), RBLK_S_INVALID);
	/* garbage after a name's NUL */
	d = good_disc();
	rblk_disc_reply_encode(m.b, &d);
	m.b[24 + 100] = 'x';
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
	    RBLK_S_INVALID);
	/* an unused entry must be all zero */
	rblk_disc_reply_encode(m.b, &d);
	m.b[24 + 2 * RBLK_DISC_ENTRY_SIZE + 130] = 1;
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
	    RBLK_S_INVALID);
	/* reserved bytes */
	for (int i = 13; i < 24; i++) {
		rblk_disc_reply_encode(m.b, &d);
		m.b[i] = 1;
		assert_int_equal(
		    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
		    RBLK_S_INVALID);
	}
	/* the encoder never writes past the page, whatever count says */
	d = good_disc();
	d.count = 200;
	rblk_disc_reply_encode(m.b, &d);
	assert_int_equal(
	    rblk_disc_reply_decode(m.b, RBLK_DISC_REPLY_SIZE, &out),
	    RBLK_S_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_hello_roundtrip),
	    cmocka_unit_test(test_hello_roundtrip_limits),
	    cmocka_unit_test(test_login_roundtrip),
	    cmocka_unit_test(test_login_refusal),
	    cmocka_unit_test(test_cmd_roundtrip),
	    cmocka_unit_test(test_cmd_every_opcode),
	    cmocka_unit_test(test_resp_roundtrip),
	    cmocka_unit_test(test_cm_roundtrip),
	    cmocka_unit_test(test_header_errors),
	    cmocka_unit_test(test_cmd_tag),
	    cmocka_unit_test(test_cmd_opcode),
	    cmocka_unit_test(test_cmd_flags),
	    cmocka_unit_test(test_cmd_done),
	    cmocka_unit_test(test_cmd_pr),
	    cmocka_unit_test(test_cmd_addr_rkey_without_push),
	    cmocka_unit_test(test_cmd_reserved),
	    cmocka_unit_test(test_cmd_no_data_ops),
	    cmocka_unit_test(test_cmd_length),
	    cmocka_unit_test(test_cmd_alignment),
	    cmocka_unit_test(test_cmd_range),
	    cmocka_unit_test(test_cmd_read_only),
	    cmocka_unit_test(test_cmd_not_supported),
	    cmocka_unit_test(test_hello_fields),
	    cmocka_unit_test(test_hello_inline),
	    cmocka_unit_test(test_login_inline),
	    cmocka_unit_test(test_inline_fit),
	    cmocka_unit_test(test_cmd_inline_roundtrip),
	    cmocka_unit_test(test_cmd_inline_refused),
	    cmocka_unit_test(test_cmd_inline_framing),
	    cmocka_unit_test(test_hello_names),
	    cmocka_unit_test(test_login_fields),
	    cmocka_unit_test(test_login_block_size),
	    cmocka_unit_test(test_login_size_and_max_io),
	    cmocka_unit_test(test_login_v1_refused),
	    cmocka_unit_test(test_resp_pull),
	    cmocka_unit_test(test_resp_size),
	    cmocka_unit_test(test_grant),
	    cmocka_unit_test(test_done),
	    cmocka_unit_test(test_login_direct),
	    cmocka_unit_test(test_resp_fields),
	    cmocka_unit_test(test_cm_req),
	    cmocka_unit_test(test_cm_rej),
	    cmocka_unit_test(test_status_str),
	    cmocka_unit_test(test_status_to_errno),
	    cmocka_unit_test(test_errno_to_status),
	    cmocka_unit_test(test_opcode_str),
	    cmocka_unit_test(test_msg_type),
	    cmocka_unit_test(test_hello_discover),
	    cmocka_unit_test(test_disc_roundtrip),
	    cmocka_unit_test(test_disc_fields),
	    cmocka_unit_test(test_tag_gen_decoders),
	    cmocka_unit_test(test_tag_gen_helpers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
