/* SPDX-License-Identifier: MIT */
/*
 * The NBD wire protocol, as far as `rblk nbd` speaks it: the fixed newstyle
 * handshake and the transmission phase with simple replies. Values follow
 * the protocol description (NetworkBlockDevice/nbd, doc/proto.md); the
 * kernel's linux/nbd.h lacks the newstyle ones, hence this header.
 *
 * Every integer on the wire is big-endian; the nbd_get / nbd_put helpers
 * below do the conversion on unaligned buffers.
 */
#ifndef RBLK_INITIATOR_NBD_PROTO_H
#define RBLK_INITIATOR_NBD_PROTO_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* ---- handshake -------------------------------------------------------- */

#define NBD_MAGIC 0x4e42444d41474943ull	   /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_OPT_REPLY_MAGIC 0x0003e889045565a9ull
#define NBD_DEFAULT_PORT 10809

/* Handshake flags (server, 16 bits). */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)

/* Client flags (32 bits). */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

/* Options. */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_PEEK_EXPORT 4 /* withdrawn */
#define NBD_OPT_STARTTLS 5
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_OPT_STRUCTURED_REPLY 8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT 10
#define NBD_OPT_EXTENDED_HEADERS 11

/* Option reply types. Errors have bit 31 set. */
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_FLAG_ERROR (1u << 31)
#define NBD_REP_ERR_UNSUP (NBD_REP_FLAG_ERROR + 1)
#define NBD_REP_ERR_POLICY (NBD_REP_FLAG_ERROR + 2)
#define NBD_REP_ERR_INVALID (NBD_REP_FLAG_ERROR + 3)
#define NBD_REP_ERR_PLATFORM (NBD_REP_FLAG_ERROR + 4)
#define NBD_REP_ERR_TLS_REQD (NBD_REP_FLAG_ERROR + 5)
#define NBD_REP_ERR_UNKNOWN (NBD_REP_FLAG_ERROR + 6)
#define NBD_REP_ERR_SHUTDOWN (NBD_REP_FLAG_ERROR + 7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR + 8)
#define NBD_REP_ERR_TOO_BIG (NBD_REP_FLAG_ERROR + 9)

/* NBD_REP_INFO information types (NBD_OPT_INFO / NBD_OPT_GO). */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* Transmission flags (16 bits). */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_FLAG_SEND_RESIZE (1u << 9)
#define NBD_FLAG_SEND_CACHE (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)

/* Wire sizes of the fixed parts. */
#define NBD_HELLO_SIZE 18	      /* NBDMAGIC, IHAVEOPT, 16-bit flags */
#define NBD_OPT_HDR_SIZE 16	      /* IHAVEOPT, option, length */
#define NBD_OPT_REPLY_HDR_SIZE 20     /* magic, option, type, length */
#define NBD_EXPORT_NAME_REPLY_SIZE 10 /* size, transmission flags */
#define NBD_EXPORT_NAME_PAD 124	      /* zeroes unless NO_ZEROES */
#define NBD_INFO_EXPORT_SIZE 12	      /* type, size, flags */
#define NBD_INFO_BLOCK_SIZE_SIZE 14   /* type, min, preferred, max */
#define NBD_STRING_MAX 4096	      /* names and messages, by the protocol */

/* ---- transmission ----------------------------------------------------- */

#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

#define NBD_REQUEST_SIZE 28 /* magic, flags, type, cookie, offset, length */
#define NBD_SIMPLE_REPLY_SIZE 16 /* magic, error, cookie */

/* Commands. */
#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_CACHE 5
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7
#define NBD_CMD_RESIZE 8

/* Command flags (16 bits). */
#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)
#define NBD_CMD_FLAG_PAYLOAD_LEN (1u << 5)

/* Errors in replies (fixed values, not the host's errno). */
#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP 95u
#define NBD_ESHUTDOWN 108u

/*
 * Largest READ/WRITE payload any client may send without being deemed a
 * denial of service (the protocol's 2^25); advertised as the maximum.
 */
#define NBD_MAX_PAYLOAD (32u << 20)

/* ---- big-endian access to unaligned wire buffers --------------------- */

static inline uint16_t nbd_get16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t nbd_get32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t nbd_get64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void nbd_put16(void *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void nbd_put32(void *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void nbd_put64(void *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

#endif
