/* SPDX-License-Identifier: MIT */
#include "proto.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

_Static_assert(sizeof(struct rblk_wire_hdr) == 8, "hdr size");
_Static_assert(sizeof(struct rblk_wire_hello) == RBLK_HELLO_SIZE, "hello size");
_Static_assert(sizeof(struct rblk_wire_login) == RBLK_LOGIN_SIZE, "login size");
_Static_assert(sizeof(struct rblk_wire_cmd) == RBLK_CMD_SIZE, "cmd size");
_Static_assert(sizeof(struct rblk_wire_resp) == RBLK_RESP_SIZE, "resp size");
_Static_assert(sizeof(struct rblk_wire_grant) == RBLK_GRANT_SIZE, "grant size");
_Static_assert(sizeof(struct rblk_wire_done) == RBLK_DONE_SIZE, "done size");
_Static_assert(sizeof(struct rblk_wire_cm_req) == RBLK_CM_REQ_SIZE, "cm req");
_Static_assert(sizeof(struct rblk_wire_cm_rej) == RBLK_CM_REJ_SIZE, "cm rej");
_Static_assert(sizeof(struct rblk_wire_disc_entry) == RBLK_DISC_ENTRY_SIZE,
	       "discovery entry size");
_Static_assert(sizeof(struct rblk_wire_disc_reply) == RBLK_DISC_REPLY_SIZE,
	       "discovery reply size");
_Static_assert(RBLK_DISC_REPLY_SIZE <= RBLK_MSG_MAX,
	       "discovery reply fits a receive buffer");
_Static_assert(sizeof(struct rblk_wire_auth_challenge) ==
		   RBLK_AUTH_CHALLENGE_SIZE,
	       "auth challenge size");
_Static_assert(sizeof(struct rblk_wire_auth_response) ==
		   RBLK_AUTH_RESPONSE_SIZE,
	       "auth response size");
_Static_assert(sizeof(struct rblk_wire_auth_result) == RBLK_AUTH_RESULT_SIZE,
	       "auth result size");
_Static_assert(RBLK_AUTH_CHALLENGE_SIZE <= RBLK_MSG_MAX, "challenge fits");
_Static_assert(RBLK_HELLO_SIZE <= RBLK_MSG_MAX, "hello fits a receive buffer");
_Static_assert(RBLK_MAX_QD <= 65536, "tags are 16 bits on the wire");
_Static_assert(RBLK_CM_REQ_SIZE <= 56, "rdma_cm REQ private data limit");
_Static_assert(RBLK_CMD_SIZE + RBLK_INLINE_MAX <= 0xffff,
	       "an inline capsule's size fits the header's length");
_Static_assert(RBLK_INLINE_MAX % RBLK_INLINE_ALIGN == 0, "inline granule");

static const char *const status_names[] = {
    [RBLK_S_OK] = "success",
    [RBLK_S_INVALID] = "malformed message",
    [RBLK_S_BAD_VERSION] = "protocol version mismatch",
    [RBLK_S_NO_EXPORT] = "no such export",
    [RBLK_S_READ_ONLY] = "volume is read-only",
    [RBLK_S_OUT_OF_RANGE] = "offset or length beyond the end of the volume",
    [RBLK_S_IO_ERROR] = "I/O error on the target",
    [RBLK_S_NOT_SUPPORTED] = "operation not supported by this volume",
    [RBLK_S_BAD_TAG] = "tag out of range or in use",
    [RBLK_S_NO_SPACE] = "no space left on the target",
    [RBLK_S_ACCESS_DENIED] = "access denied",
    [RBLK_S_NO_RESOURCES] = "target out of resources",
    [RBLK_S_BAD_STATE] = "message not valid in this state",
    [RBLK_S_SHUTDOWN] = "target is shutting down",
    [RBLK_S_MISALIGNED] = "offset or length not aligned to the block size",
    [RBLK_S_TOO_LARGE] = "length zero or above the maximum I/O size",
    [RBLK_S_AUTH_FAILED] = "authentication failed",
    [RBLK_S_AUTH_REQUIRED] = "authentication required",
    [RBLK_S_BUSY] = "connection or session limit reached",
    [RBLK_S_RESV_CONFLICT] = "reservation conflict",
    [RBLK_S_TLS_REQUIRED] = "TLS required (plaintext login refused)",
};

const char *rblk_status_str(int status)
{
	if (status < 0 || status > RBLK_S_MAX_ || !status_names[status])
		return "unknown status";
	return status_names[status];
}

int rblk_status_to_errno(int status)
{
	switch (status) {
	case RBLK_S_OK:
		return 0;
	case RBLK_S_BAD_VERSION:
		return -EPROTONOSUPPORT;
	case RBLK_S_NO_EXPORT:
		return -ENOENT;
	case RBLK_S_READ_ONLY:
		return -EROFS;
	case RBLK_S_OUT_OF_RANGE:
		return -ERANGE;
	case RBLK_S_IO_ERROR:
		return -EIO;
	case RBLK_S_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case RBLK_S_NO_SPACE:
		return -ENOSPC;
	case RBLK_S_ACCESS_DENIED:
		return -EACCES;
	case RBLK_S_NO_RESOURCES:
		return -ENOMEM;
	case RBLK_S_SHUTDOWN:
		return -ESHUTDOWN;
	case RBLK_S_TOO_LARGE:
		return -E2BIG;
	case RBLK_S_AUTH_FAILED:
		return -EACCES;
	case RBLK_S_AUTH_REQUIRED:
		return -ENOKEY;
	case RBLK_S_BUSY:
		return -EBUSY;
	case RBLK_S_RESV_CONFLICT:
		/* what Linux block layer returns for BLK_STS_RESV_CONFLICT */
		return -EBADE;
	case RBLK_S_TLS_REQUIRED:
		return -EACCES;
	case RBLK_S_BAD_TAG:
	case RBLK_S_BAD_STATE:
		return -EPROTO;
	case RBLK_S_INVALID:
	case RBLK_S_MISALIGNED:
	default:
		return -EINVAL;
	}
}

int rblk_errno_to_status(int neg_errno)
{
	switch (neg_errno) {
	case 0:
		return RBLK_S_OK;
	case -ENOSPC:
	case -EDQUOT:
		return RBLK_S_NO_SPACE;
	case -EOPNOTSUPP:
		return RBLK_S_NOT_SUPPORTED;
	case -EROFS:
	case -EPERM:
		return RBLK_S_READ_ONLY;
	case -ENOMEM:
		return RBLK_S_NO_RESOURCES;
	default:
		return RBLK_S_IO_ERROR;
	}
}

const char *rblk_opcode_str(int opcode)
{
	static const char *const names[] = {
	    [RBLK_OP_READ] = "READ",
	    [RBLK_OP_WRITE] = "WRITE",
	    [RBLK_OP_FLUSH] = "FLUSH",
	    [RBLK_OP_TRIM] = "TRIM",
	    [RBLK_OP_WRITE_ZEROES] = "WRITE_ZEROES",
	    [RBLK_OP_DISCONNECT] = "DISCONNECT",
	    [RBLK_OP_KEEPALIVE] = "KEEPALIVE",
	    [RBLK_OP_PR_REGISTER] = "PR_REGISTER",
	    [RBLK_OP_PR_ACQUIRE] = "PR_ACQUIRE",
	    [RBLK_OP_PR_RELEASE] = "PR_RELEASE",
	    [RBLK_OP_PR_REPORT] = "PR_REPORT",
	};

	if (opcode <= 0 || opcode > RBLK_OP_MAX_)
		return "UNKNOWN";
	return names[opcode];
}

static void hdr_encode(struct rblk_wire_hdr *h, uint8_t type, uint16_t len)
{
	h->magic = htole32(RBLK_MAGIC);
	h->version = RBLK_PROTO_VERSION;
	h->type = type;
	h->length = htole16(len);
}

static int hdr_check(const void *buf, size_t len, uint8_t type, size_t want)
{
	const struct rblk_wire_hdr *h = buf;

	if (len < sizeof(*h) || le32toh(h->magic) != RBLK_MAGIC)
		return RBLK_S_INVALID;
	if (h->version != RBLK_PROTO_VERSION)
		return RBLK_S_BAD_VERSION;
	if (h->type != type || len != want || le16toh(h->length) != want)
		return RBLK_S_INVALID;
	return RBLK_S_OK;
}

int rblk_msg_type(const void *buf, size_t len)
{
	const struct rblk_wire_hdr *h = buf;

	if (len < sizeof(*h) || le32toh(h->magic) != RBLK_MAGIC ||
	    h->version != RBLK_PROTO_VERSION)
		return -1;
	return h->type;
}

/* A name field must hold a NUL inside it and nothing but printable bytes. */
static int name_decode(char *dst, const char *src, bool allow_empty)
{
	size_t n = strnlen(src, RBLK_NAME_MAX);

	if (n == RBLK_NAME_MAX || (!allow_empty && n == 0))
		return RBLK_S_INVALID;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)src[i] < 0x20 ||
		    (unsigned char)src[i] > 0x7e)
			return RBLK_S_INVALID;
	for (size_t i = n; i < RBLK_NAME_MAX; i++)
		if (src[i])
			return RBLK_S_INVALID;
	memcpy(dst, src, n + 1);
	return RBLK_S_OK;
}

size_t rblk_hello_encode(void *buf, const struct rblk_hello *h)
{
	struct rblk_wire_hello *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_HELLO, RBLK_HELLO_SIZE);
	w->queue_depth = htole16(h->queue_depth);
	w->queue_id = htole16(h->queue_id);
	w->max_io = htole32(h->max_io);
	w->flags = htole32(h->flags);
	w->inline_data = htole32(h->inline_data);
	/* w is zeroed: names stay NUL-terminated and NUL-padded */
	memcpy(w->export_name, h->export_name,
	       strnlen(h->export_name, RBLK_NAME_MAX - 1));
	memcpy(w->host_name, h->host_name,
	       strnlen(h->host_name, RBLK_NAME_MAX - 1));
	return RBLK_HELLO_SIZE;
}

int rblk_hello_decode(const void *buf, size_t len, struct rblk_hello *out)
{
	const struct rblk_wire_hello *w = buf;
	int st = hdr_check(buf, len, RBLK_MSG_HELLO, RBLK_HELLO_SIZE);

	if (st)
		return st;
	out->queue_depth = le16toh(w->queue_depth);
	out->queue_id = le16toh(w->queue_id);
	out->max_io = le32toh(w->max_io);
	out->flags = le32toh(w->flags);
	out->inline_data = le32toh(w->inline_data);
	if (out->queue_depth == 0 || out->queue_depth > RBLK_MAX_QD)
		return RBLK_S_INVALID;
	if (out->max_io < RBLK_MIN_MAX_IO || !IS_POW2(out->max_io))
		return RBLK_S_INVALID;
	if (out->flags & ~RBLK_HELLO_F_ALL)
		return RBLK_S_INVALID;
	/* discovery names no export; a login must name one */
	if ((out->flags & RBLK_HELLO_F_DISCOVER) && w->export_name[0])
		return RBLK_S_INVALID;
	if (name_decode(out->export_name, w->export_name,
			out->flags & RBLK_HELLO_F_DISCOVER) ||
	    name_decode(out->host_name, w->host_name, true))
		return RBLK_S_INVALID;
	return RBLK_S_OK;
}

/* ---- authentication messages ---------------------------------------- */

size_t rblk_auth_challenge_encode(void *buf,
				  const struct rblk_auth_challenge *c)
{
	struct rblk_wire_auth_challenge *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_AUTH_CHALLENGE, RBLK_AUTH_CHALLENGE_SIZE);
	memcpy(w->nonce, c->nonce, sizeof(w->nonce));
	memcpy(w->target_name, c->target_name,
	       strnlen(c->target_name, RBLK_NAME_MAX - 1));
	return RBLK_AUTH_CHALLENGE_SIZE;
}

int rblk_auth_challenge_decode(const void *buf, size_t len,
			       struct rblk_auth_challenge *out)
{
	const struct rblk_wire_auth_challenge *w = buf;
	int st = hdr_check(buf, len, RBLK_MSG_AUTH_CHALLENGE,
			   RBLK_AUTH_CHALLENGE_SIZE);

	if (st)
		return st;
	if (w->flags || w->reserved)
		return RBLK_S_INVALID;
	memcpy(out->nonce, w->nonce, sizeof(out->nonce));
	return name_decode(out->target_name, w->target_name, false);
}

size_t rblk_auth_response_encode(void *buf, const struct rblk_auth_response *r)
{
	struct rblk_wire_auth_response *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_AUTH_RESPONSE, RBLK_AUTH_RESPONSE_SIZE);
	memcpy(w->nonce, r->nonce, sizeof(w->nonce));
	memcpy(w->mac, r->mac, sizeof(w->mac));
	return RBLK_AUTH_RESPONSE_SIZE;
}

int rblk_auth_response_decode(const void *buf, size_t len,
			      struct rblk_auth_response *out)
{
	const struct rblk_wire_auth_response *w = buf;
	int st = hdr_check(buf, len, RBLK_MSG_AUTH_RESPONSE,
			   RBLK_AUTH_RESPONSE_SIZE);

	if (st)
		return st;
	if (w->flags || w->reserved)
		return RBLK_S_INVALID;
	memcpy(out->nonce, w->nonce, sizeof(out->nonce));
	memcpy(out->mac, w->mac, sizeof(out->mac));
	return RBLK_S_OK;
}

size_t rblk_auth_result_encode(void *buf, const struct rblk_auth_result *r)
{
	struct rblk_wire_auth_result *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_AUTH_RESULT, RBLK_AUTH_RESULT_SIZE);
	memcpy(w->mac, r->mac, sizeof(w->mac));
	return RBLK_AUTH_RESULT_SIZE;
}

int rblk_auth_result_decode(const void *buf, size_t len,
			    struct rblk_auth_result *out)
{
	const struct rblk_wire_auth_result *w = buf;
	int st =
	    hdr_check(buf, len, RBLK_MSG_AUTH_RESULT, RBLK_AUTH_RESULT_SIZE);

	if (st)
		return st;
	if (w->status || w->reserved)
		return RBLK_S_INVALID;
	memcpy(out->mac, w->mac, sizeof(out->mac));
	return RBLK_S_OK;
}

size_t rblk_login_encode(void *buf, const struct rblk_login *l)
{
	struct rblk_wire_login *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_LOGIN, RBLK_LOGIN_SIZE);
	w->status = htole32(l->status);
	w->queue_depth = htole16(l->queue_depth);
	w->inline_data = htole16(l->inline_data);
	w->max_io = htole32(l->max_io);
	w->block_size = htole32(l->block_size);
	w->size = htole64(l->size);
	w->features = htole32(l->features);
	w->session_id = htole64(l->session_id);
	w->vol_rkey = htole32(l->vol_rkey);
	w->vol_addr = htole64(l->vol_addr);
	w->vol_len = htole64(l->vol_len);
	memcpy(w->vol_id, l->vol_id, sizeof(w->vol_id));
	return RBLK_LOGIN_SIZE;
}

int rblk_login_decode(const void *buf, size_t len, struct rblk_login *out)
{
	const struct rblk_wire_login *w = buf;
	int st = hdr_check(buf, len, RBLK_MSG_LOGIN, RBLK_LOGIN_SIZE);

	if (st)
		return st;
	memset(out, 0, sizeof(*out));
	out->status = le32toh(w->status);
	if (out->status > RBLK_S_MAX_)
		return RBLK_S_INVALID;
	if (out->status != RBLK_S_OK)
		return w->inline_data ? RBLK_S_INVALID
				      : RBLK_S_OK; /* status only */
	out->queue_depth = le16toh(w->queue_depth);
	out->inline_data = le16toh(w->inline_data);
	if (out->inline_data % RBLK_INLINE_ALIGN ||
	    out->inline_data > RBLK_INLINE_MAX)
		return RBLK_S_INVALID;
	out->max_io = le32toh(w->max_io);
	out->block_size = le32toh(w->block_size);
	out->size = le64toh(w->size);
	out->features = le32toh(w->features);
	out->session_id = le64toh(w->session_id);
	out->vol_rkey = le32toh(w->vol_rkey);
	out->vol_addr = le64toh(w->vol_addr);
	out->vol_len = le64toh(w->vol_len);
	memcpy(out->vol_id, w->vol_id, sizeof(out->vol_id));
	if (out->features & RBLK_F_DIRECT) {
		/* the whole volume, and nothing that wraps around */
		if (out->vol_len != out->size ||
		    out->vol_addr + out->vol_len < out->vol_addr)
			return RBLK_S_INVALID;
	} else if (out->vol_rkey || out->vol_addr || out->vol_len) {
		return RBLK_S_INVALID;
	}
	if (out->queue_depth == 0 || out->queue_depth > RBLK_MAX_QD)
		return RBLK_S_INVALID;
	if (out->block_size < 512 || out->block_size > 65536 ||
	    !IS_POW2(out->block_size))
		return RBLK_S_INVALID;
	if (out->max_io < out->block_size || out->max_io > RBLK_MAX_MAX_IO ||
	    !IS_POW2(out->max_io))
		return RBLK_S_INVALID;
	if (out->features & ~RBLK_F_ALL || out->size % out->block_size)
		return RBLK_S_INVALID;
	/* an empty volume, or one whose offsets do not fit an off_t */
	if (!out->size || out->size > (uint64_t)INT64_MAX)
		return RBLK_S_INVALID;
	return RBLK_S_OK;
}

size_t rblk_cmd_encode(void *buf, const struct rblk_cmd *c)
{
	struct rblk_wire_cmd *w = buf;

	size_t size = RBLK_CMD_SIZE;

	if (c->flags & RBLK_CMD_F_INLINE) {
		size += c->length;
		memcpy((char *)buf + RBLK_CMD_SIZE, c->data, c->length);
	}
	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_CMD, (uint16_t)size);
	w->tag = htole16(c->tag);
	w->opcode = c->opcode;
	w->flags = c->flags;
	w->length = htole32(c->length);
	w->offset = htole64(c->offset);
	w->addr = htole64(c->addr);
	w->rkey = htole32(c->rkey);
	return size;
}

/*
 * A CMD's framing: the header's length is the bytes received, and it is
 * the capsule alone, or with INLINE the capsule and its length bytes.
 */
static int cmd_frame_check(const void *buf, size_t len)
{
	const struct rblk_wire_cmd *w = buf;
	size_t want = RBLK_CMD_SIZE;

	if (len >= RBLK_CMD_SIZE && (w->flags & RBLK_CMD_F_INLINE))
		want += le32toh(w->length); /* size_t: no wrap */
	return hdr_check(buf, len, RBLK_MSG_CMD, want);
}

/* Whether tag lies in tags (rblk_tags()). */
static bool tag_ok(uint16_t tag, uint32_t tags)
{
	if (tags & RBLK_TAGS_GEN)
		return rblk_tag_index(tag) < (uint16_t)tags;
	return tag < (uint16_t)tags;
}

int rblk_cmd_peek_tag(const void *buf, size_t len, uint32_t tags)
{
	const struct rblk_wire_cmd *w = buf;
	uint16_t tag;

	if (cmd_frame_check(buf, len))
		return -1;
	tag = le16toh(w->tag);
	if (!tag_ok(tag, tags))
		return -1;
	return (tags & RBLK_TAGS_GEN) ? (int)rblk_tag_index(tag) : tag;
}

static bool is_write_class(uint8_t op)
{
	return op == RBLK_OP_WRITE || op == RBLK_OP_TRIM ||
	       op == RBLK_OP_WRITE_ZEROES;
}

/*
 * REGISTER, ACQUIRE, RELEASE: no data, no flags but DONE; action and type
 * known for the opcode, keys as NVMe allows them (a new key of 0 is
 * refused: 0 means "no key" in a report).
 */
static int pr_cmd_check(const struct rblk_cmd *c, const struct rblk_limits *lim)
{
	unsigned int action = RBLK_PR_ACTION(c->rkey);
	unsigned int type = RBLK_PR_TYPE(c->rkey);
	unsigned int flags = RBLK_PR_FLAGS(c->rkey);

	if (c->length || (c->flags & ~RBLK_CMD_F_DONE))
		return RBLK_S_INVALID;
	switch (c->opcode) {
	case RBLK_OP_PR_REGISTER:
		if (action > RBLK_PR_REG_REPLACE || type ||
		    (flags & ~RBLK_PR_F_IEKEY))
			return RBLK_S_INVALID;
		if (action != RBLK_PR_REG_UNREGISTER && !c->addr)
			return RBLK_S_INVALID;
		if (action == RBLK_PR_REG_UNREGISTER && c->addr)
			return RBLK_S_INVALID;
		break;
	case RBLK_OP_PR_ACQUIRE:
		if (action > RBLK_PR_ACQ_PREEMPT_ABORT || !type ||
		    type > RBLK_PRT_TYPE_MAX_ || flags)
			return RBLK_S_INVALID;
		if (action == RBLK_PR_ACQ_ACQUIRE && c->addr)
			return RBLK_S_INVALID;
		break;
	default: /* RELEASE: a clear names no type */
		if (action > RBLK_PR_REL_CLEAR || type > RBLK_PRT_TYPE_MAX_ ||
		    flags || c->addr ||
		    (action == RBLK_PR_REL_RELEASE && !type) ||
		    (action == RBLK_PR_REL_CLEAR && type))
			return RBLK_S_INVALID;
		break;
	}
	if (!(lim->features & RBLK_F_PR))
		return RBLK_S_NOT_SUPPORTED;
	/* a read-only login may look (REPORT), not change reservations */
	if (lim->features & RBLK_F_READ_ONLY)
		return RBLK_S_READ_ONLY;
	return RBLK_S_OK;
}

int rblk_cmd_decode(const void *buf, size_t len, const struct rblk_limits *lim,
		    struct rblk_cmd *out)
{
	const struct rblk_wire_cmd *w = buf;
	int st = cmd_frame_check(buf, len);
	uint64_t end;

	if (st)
		return st;
	out->tag = le16toh(w->tag);
	out->opcode = w->opcode;
	out->flags = w->flags;
	out->length = le32toh(w->length);
	out->offset = le64toh(w->offset);
	out->addr = le64toh(w->addr);
	out->rkey = le32toh(w->rkey);
	out->data = (out->flags & RBLK_CMD_F_INLINE)
			? (const char *)buf + RBLK_CMD_SIZE
			: NULL;

	if (!tag_ok(out->tag, rblk_tags(lim->queue_depth,
					lim->features & RBLK_F_TAG_GEN)))
		return RBLK_S_BAD_TAG;
	for (size_t i = 0; i < ARRAY_SIZE(w->reserved); i++)
		if (w->reserved[i])
			return RBLK_S_INVALID;
	if (out->opcode == 0 || out->opcode > RBLK_OP_MAX_)
		return RBLK_S_INVALID;
	if (out->flags & ~RBLK_CMD_F_ALL)
		return RBLK_S_INVALID;
	if ((out->flags & RBLK_CMD_F_DONE) &&
	    !(lim->features & RBLK_F_CMD_DONE))
		return RBLK_S_INVALID;
	if (out->opcode >= RBLK_OP_PR_REGISTER &&
	    out->opcode <= RBLK_OP_PR_RELEASE)
		return pr_cmd_check(out, lim);
	if (out->opcode == RBLK_OP_PR_REPORT) {
		if (out->offset ||
		    (out->flags & ~(RBLK_CMD_F_PUSH | RBLK_CMD_F_DONE)))
			return RBLK_S_INVALID;
		if (!(lim->features & RBLK_F_PR))
			return RBLK_S_NOT_SUPPORTED;
	}
	if ((out->flags & RBLK_CMD_F_PUSH) && out->opcode != RBLK_OP_READ &&
	    out->opcode != RBLK_OP_PR_REPORT)
		return RBLK_S_INVALID;
	if (!(out->flags & RBLK_CMD_F_PUSH) && (out->addr || out->rkey))
		return RBLK_S_INVALID;
	if ((out->flags & RBLK_CMD_F_FUA) && out->opcode != RBLK_OP_WRITE &&
	    out->opcode != RBLK_OP_WRITE_ZEROES)
		return RBLK_S_INVALID;
	/* in-capsule data: WRITE only, within what LOGIN granted */
	if ((out->flags & RBLK_CMD_F_INLINE) &&
	    (out->opcode != RBLK_OP_WRITE || out->length > lim->inline_max))
		return RBLK_S_INVALID;

	switch (out->opcode) {
	case RBLK_OP_FLUSH:
	case RBLK_OP_DISCONNECT:
	case RBLK_OP_KEEPALIVE:
		if (out->offset || out->length)
			return RBLK_S_INVALID;
		if (out->opcode == RBLK_OP_FLUSH &&
		    !(lim->features & RBLK_F_FLUSH))
			return RBLK_S_NOT_SUPPORTED;
		return RBLK_S_OK;
	default:
		break;
	}

	if (is_write_class(out->opcode) && (lim->features & RBLK_F_READ_ONLY))
		return RBLK_S_READ_ONLY;
	if ((out->flags & RBLK_CMD_F_FUA) && !(lim->features & RBLK_F_FUA))
		return RBLK_S_NOT_SUPPORTED;
	if ((out->flags & RBLK_CMD_F_PUSH) && !(lim->features & RBLK_F_PUSH))
		return RBLK_S_NOT_SUPPORTED;
	if (out->opcode == RBLK_OP_TRIM && !(lim->features & RBLK_F_TRIM))
		return RBLK_S_NOT_SUPPORTED;
	if (out->opcode == RBLK_OP_WRITE_ZEROES &&
	    !(lim->features & RBLK_F_ZEROES))
		return RBLK_S_NOT_SUPPORTED;
	if (out->length == 0)
		return RBLK_S_TOO_LARGE;
	if ((out->opcode == RBLK_OP_READ || out->opcode == RBLK_OP_WRITE ||
	     out->opcode == RBLK_OP_PR_REPORT) &&
	    out->length > lim->max_io)
		return RBLK_S_TOO_LARGE;
	if (out->offset % lim->block_size || out->length % lim->block_size)
		return RBLK_S_MISALIGNED;
	if (out->opcode == RBLK_OP_PR_REPORT)
		return RBLK_S_OK; /* its offset is 0: no range */
	end = out->offset + out->length;
	if (end < out->offset || end > lim->size)
		return RBLK_S_OUT_OF_RANGE;
	return RBLK_S_OK;
}

size_t rblk_resp_encode(void *buf, const struct rblk_resp *r)
{
	struct rblk_wire_resp *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_RESP, RBLK_RESP_SIZE);
	w->tag = htole16(r->tag);
	w->flags = htole16(r->flags);
	w->status = htole32(r->status);
	w->length = htole32(r->length);
	w->rkey = htole32(r->rkey);
	/* SIZE without PULL: the size rides where a window's address would */
	w->addr = htole64((r->flags & (RBLK_RESP_F_SIZE | RBLK_RESP_F_PULL)) ==
				  RBLK_RESP_F_SIZE
			      ? r->size
			      : r->addr);
	return RBLK_RESP_SIZE;
}

int rblk_resp_decode(const void *buf, size_t len, uint32_t tags,
		     struct rblk_resp *out)
{
	const struct rblk_wire_resp *w = buf;
	int st = hdr_check(buf, len, RBLK_MSG_RESP, RBLK_RESP_SIZE);

	if (st)
		return st;
	out->tag = le16toh(w->tag);
	out->flags = le16toh(w->flags);
	out->status = le32toh(w->status);
	out->length = le32toh(w->length);
	out->rkey = le32toh(w->rkey);
	out->addr = le64toh(w->addr);
	if (!tag_ok(out->tag, tags))
		return RBLK_S_BAD_TAG;
	out->size = 0;
	if (out->status > RBLK_S_MAX_ ||
	    out->flags & ~(RBLK_RESP_F_PULL | RBLK_RESP_F_SIZE))
		return RBLK_S_INVALID;
	if ((out->flags & (RBLK_RESP_F_SIZE | RBLK_RESP_F_PULL)) ==
	    RBLK_RESP_F_SIZE) {
		if (out->rkey || !out->addr || out->addr >> 63)
			return RBLK_S_INVALID;
		out->size = out->addr;
		out->addr = 0;
	} else if (out->flags & RBLK_RESP_F_PULL) {
		if (out->status != RBLK_S_OK || !out->length ||
		    out->addr + out->length < out->addr)
			return RBLK_S_INVALID;
	} else if (out->rkey || out->addr) {
		return RBLK_S_INVALID;
	}
	return RBLK_S_OK;
}

size_t rblk_grant_encode(void *buf, const struct rblk_grant *g)
{
	struct rblk_wire_grant *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_GRANT, RBLK_GRANT_SIZE);
	w->tag = htole16(g->tag);
	w->rkey = htole32(g->rkey);
	w->length = htole32(g->length);
	w->addr = htole64(g->addr);
	return RBLK_GRANT_SIZE;
}

int rblk_grant_decode(const void *buf, size_t len, uint32_t tags,
		      uint32_t max_io, struct rblk_grant *out)
{
	const struct rblk_wire_grant *w = buf;
	int st = hdr_check(buf, len, RBLK_MSG_GRANT, RBLK_GRANT_SIZE);

	if (st)
		return st;
	out->tag = le16toh(w->tag);
	out->rkey = le32toh(w->rkey);
	out->length = le32toh(w->length);
	out->addr = le64toh(w->addr);
	if (!tag_ok(out->tag, tags))
		return RBLK_S_BAD_TAG;
	if (w->reserved0 || w->reserved1 || !out->length ||
	    out->length > max_io || out->addr + out->length < out->addr)
		return RBLK_S_INVALID;
	return RBLK_S_OK;
}

size_t rblk_done_encode(void *buf, const struct rblk_done *d)
{
	struct rblk_wire_done *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, d->type, RBLK_DONE_SIZE);
	w->tag = htole16(d->tag);
	w->rkey = htole32(d->rkey);
	return RBLK_DONE_SIZE;
}

int rblk_done_decode(const void *buf, size_t len, uint32_t tags,
		     struct rblk_done *out)
{
	const struct rblk_wire_done *w = buf;
	int type = rblk_msg_type(buf, len);
	int st;

	if (type != RBLK_MSG_READ_DONE && type != RBLK_MSG_WRITE_DATA)
		return RBLK_S_INVALID;
	st = hdr_check(buf, len, (uint8_t)type, RBLK_DONE_SIZE);
	if (st)
		return st;
	out->type = (uint8_t)type;
	out->tag = le16toh(w->tag);
	out->rkey = le32toh(w->rkey);
	if (!tag_ok(out->tag, tags))
		return RBLK_S_BAD_TAG;
	if (w->reserved)
		return RBLK_S_INVALID;
	return RBLK_S_OK;
}

size_t rblk_cm_req_encode(void *buf, uint16_t queue_depth)
{
	struct rblk_wire_cm_req *w = buf;

	memset(w, 0, sizeof(*w));
	w->magic = htole32(RBLK_MAGIC);
	w->version = RBLK_PROTO_VERSION;
	w->queue_depth = htole16(queue_depth);
	return RBLK_CM_REQ_SIZE;
}

int rblk_cm_req_decode(const void *buf, size_t len, uint16_t *queue_depth)
{
	const struct rblk_wire_cm_req *w = buf;

	/* rdma_cm may pad private data with zeroes up to its own limit */
	if (len < RBLK_CM_REQ_SIZE || le32toh(w->magic) != RBLK_MAGIC)
		return RBLK_S_INVALID;
	if (w->version != RBLK_PROTO_VERSION)
		return RBLK_S_BAD_VERSION;
	if (w->reserved0 || w->reserved[0] || w->reserved[1])
		return RBLK_S_INVALID;
	*queue_depth = le16toh(w->queue_depth);
	if (*queue_depth == 0 || *queue_depth > RBLK_MAX_QD)
		return RBLK_S_INVALID;
	return RBLK_S_OK;
}

size_t rblk_cm_rej_encode(void *buf, uint32_t status)
{
	struct rblk_wire_cm_rej *w = buf;

	memset(w, 0, sizeof(*w));
	w->magic = htole32(RBLK_MAGIC);
	w->version = RBLK_PROTO_VERSION;
	w->status = htole32(status);
	return RBLK_CM_REJ_SIZE;
}

int rblk_cm_rej_decode(const void *buf, size_t len)
{
	const struct rblk_wire_cm_rej *w = buf;
	uint32_t st;

	if (len < RBLK_CM_REJ_SIZE || le32toh(w->magic) != RBLK_MAGIC)
		return RBLK_S_INVALID;
	st = le32toh(w->status);
	return st > RBLK_S_MAX_ ? RBLK_S_INVALID : (int)st;
}

int rblk_cm_rej_version(const void *buf, size_t len)
{
	const struct rblk_wire_cm_rej *w = buf;

	if (len < RBLK_CM_REJ_SIZE || le32toh(w->magic) != RBLK_MAGIC)
		return -1;
	return w->version;
}

size_t rblk_disc_reply_encode(void *buf, const struct rblk_disc_reply *d)
{
	struct rblk_wire_disc_reply *w = buf;

	memset(w, 0, sizeof(*w));
	hdr_encode(&w->hdr, RBLK_MSG_DISCOVER_REPLY, RBLK_DISC_REPLY_SIZE);
	w->total = htole16(d->total);
	w->first = htole16(d->first);
	w->count = d->count;
	for (unsigned int i = 0; i < d->count && i < RBLK_DISC_PER_REPLY; i++) {
		const struct rblk_disc_entry *e = &d->entry[i];
		struct rblk_wire_disc_entry *we = &w->entry[i];

		memcpy(we->name, e->name, strnlen(e->name, RBLK_NAME_MAX - 1));
		we->size = htole64(e->size);
		we->block_size = htole32(e->block_size);
		we->features = htole32(e->features);
	}
	return RBLK_DISC_REPLY_SIZE;
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

int rblk_disc_reply_decode(const void *buf, size_t len,
			   struct rblk_disc_reply *out)
{
	const struct rblk_wire_disc_reply *w = buf;
	int st =
	    hdr_check(buf, len, RBLK_MSG_DISCOVER_REPLY, RBLK_DISC_REPLY_SIZE);

	if (st)
		return st;
	memset(out, 0, sizeof(*out));
	out->total = le16toh(w->total);
	out->first = le16toh(w->first);
	out->count = w->count;
	if (out->count > RBLK_DISC_PER_REPLY ||
	    (uint32_t)out->first + out->count > out->total ||
	    !all_zero(w->reserved, sizeof(w->reserved)))
		return RBLK_S_INVALID;
	for (unsigned int i = 0; i < RBLK_DISC_PER_REPLY; i++) {
		const struct rblk_wire_disc_entry *we = &w->entry[i];
		struct rblk_disc_entry *e = &out->entry[i];

		if (i >= out->count) {
			if (!all_zero(we, sizeof(*we)))
				return RBLK_S_INVALID;
			continue;
		}
		if (name_decode(e->name, we->name, false))
			return RBLK_S_INVALID;
		e->size = le64toh(we->size);
		e->block_size = le32toh(we->block_size);
		e->features = le32toh(we->features);
		if (e->block_size < 512 || e->block_size > 65536 ||
		    !IS_POW2(e->block_size) || e->size % e->block_size ||
		    e->features & ~RBLK_F_ALL)
			return RBLK_S_INVALID;
	}
	return RBLK_S_OK;
}

/* ---- reservation reports ---------------------------------------------- */

_Static_assert(sizeof(struct rblk_wire_pr_hdr) == RBLK_PR_HDR_SIZE,
	       "pr header size");
_Static_assert(sizeof(struct rblk_wire_pr_entry) == RBLK_PR_ENTRY_SIZE,
	       "pr entry size");

const char *rblk_pr_type_str(int type)
{
	static const char *const names[] = {
	    [RBLK_PRT_NONE] = "none",
	    [RBLK_PRT_WRITE_EXCLUSIVE] = "write-exclusive",
	    [RBLK_PRT_EXCLUSIVE_ACCESS] = "exclusive-access",
	    [RBLK_PRT_WRITE_EXCLUSIVE_REG_ONLY] = "write-exclusive-reg-only",
	    [RBLK_PRT_EXCLUSIVE_ACCESS_REG_ONLY] = "exclusive-access-reg-only",
	    [RBLK_PRT_WRITE_EXCLUSIVE_ALL_REGS] = "write-exclusive-all-regs",
	    [RBLK_PRT_EXCLUSIVE_ACCESS_ALL_REGS] = "exclusive-access-all-regs",
	};

	if (type < 0 || type > RBLK_PRT_TYPE_MAX_)
		return "unknown";
	return names[type];
}

void rblk_pr_report_encode(void *buf, size_t len,
			   const struct rblk_pr_report *r)
{
	struct rblk_wire_pr_hdr *h = buf;
	char *p = (char *)buf + RBLK_PR_HDR_SIZE;

	memset(buf, 0, len);
	if (len < RBLK_PR_HDR_SIZE)
		return;
	h->generation = htole32(r->generation);
	h->type = r->type;
	h->nr_regs = htole16(r->nr_regs);
	for (unsigned int i = 0; i < r->nr_regs && i < RBLK_PR_MAX_REGS &&
				 p + RBLK_PR_ENTRY_SIZE <= (char *)buf + len;
	     i++, p += RBLK_PR_ENTRY_SIZE) {
		struct rblk_wire_pr_entry *e = (void *)p;

		e->key = htole64(r->regs[i].key);
		e->flags = r->regs[i].holder ? RBLK_PR_E_HOLDER : 0;
		snprintf(e->host, sizeof(e->host), "%s", r->regs[i].host);
	}
}

static bool zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

int rblk_pr_report_decode(const void *buf, size_t len,
			  struct rblk_pr_report *out)
{
	const struct rblk_wire_pr_hdr *h = buf;
	const char *p = (const char *)buf + RBLK_PR_HDR_SIZE;

	if (len < RBLK_PR_HDR_SIZE)
		return RBLK_S_INVALID;
	memset(out, 0, sizeof(*out));
	out->generation = le32toh(h->generation);
	out->type = h->type;
	out->nr_regs = le16toh(h->nr_regs);
	if (out->type > RBLK_PRT_TYPE_MAX_ || out->nr_regs > RBLK_PR_MAX_REGS ||
	    h->reserved0 || !zero(h->reserved, sizeof(h->reserved)))
		return RBLK_S_INVALID;
	for (unsigned int i = 0;
	     i < out->nr_regs &&
	     p + RBLK_PR_ENTRY_SIZE <= (const char *)buf + len;
	     i++, p += RBLK_PR_ENTRY_SIZE) {
		const struct rblk_wire_pr_entry *e = (const void *)p;
		struct rblk_pr_entry *o = &out->regs[i];
		size_t n = strnlen(e->host, sizeof(e->host));

		if (e->flags & ~RBLK_PR_E_HOLDER ||
		    !zero(e->reserved, sizeof(e->reserved)) || !n ||
		    n == sizeof(e->host) ||
		    !zero(e->host + n, sizeof(e->host) - n))
			return RBLK_S_INVALID;
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)e->host[k] < 0x20 ||
			    (unsigned char)e->host[k] > 0x7e)
				return RBLK_S_INVALID;
		o->key = le64toh(e->key);
		o->holder = e->flags & RBLK_PR_E_HOLDER;
		memcpy(o->host, e->host, n);
		out->nr_given++;
	}
	return RBLK_S_OK;
}
