/* SPDX-License-Identifier: MIT */
/*
 * The rblk wire protocol: message layouts, constants, status codes, and the
 * one decoder that validates every field crossing the wire.
 *
 * Every multi-byte field is little-endian on the wire. The structs named
 * rblk_wire_* are the exact wire images (packed, fixed size, checked by
 * _Static_assert); nothing outside proto.c reads them. Code elsewhere uses
 * the host-order structs (struct rblk_cmd, struct rblk_hello, ...) that the
 * decoders fill only after validation. docs/PROTOCOL.md is the prose
 * version of this file; keep them in step.
 */
#ifndef RBLK_COMMON_PROTO_H
#define RBLK_COMMON_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RBLK_MAGIC 0x4b4c4252u /* "RBLK" read as a little-endian u32 */
#define RBLK_PROTO_VERSION 2
#define RBLK_DEFAULT_PORT 7441

#define RBLK_NAME_MAX 128 /* export and host names, including NUL */
#define RBLK_MAX_QD 1024  /* tags are 16 bits on the wire; we allow 1024 */
#define RBLK_MIN_MAX_IO 4096
#define RBLK_MAX_MAX_IO (8u << 20)
#define RBLK_DEFAULT_MAX_IO (1u << 20)
#define RBLK_DEFAULT_QD 64
/*
 * Every receive buffer holds at least this much; the largest fixed-size
 * message fits. A CMD with in-capsule data is larger (RBLK_CMD_SIZE + its
 * length): the target sizes its receives for the inline size it grants.
 */
#define RBLK_MSG_MAX 512

/* Message types (rblk_wire_hdr.type). */
enum rblk_msg_type {
	RBLK_MSG_HELLO = 1, /* initiator -> target, first message */
	RBLK_MSG_LOGIN = 2, /* target -> initiator, answer to HELLO */
	RBLK_MSG_CMD = 3,   /* initiator -> target, a command capsule */
	RBLK_MSG_RESP = 4,  /* target -> initiator, a response capsule */
	RBLK_MSG_DISCOVER_REPLY = 10, /* target -> initiator, exports listed */
	RBLK_MSG_AUTH_CHALLENGE = 5,  /* target -> initiator, answer to HELLO */
	RBLK_MSG_AUTH_RESPONSE = 6,   /* initiator -> target */
	RBLK_MSG_AUTH_RESULT = 7,     /* target -> initiator, target's proof */
	/* version 2: per-command windows (docs/PROTOCOL.md) */
	RBLK_MSG_GRANT = 11,	  /* target -> initiator: a WRITE's window */
	RBLK_MSG_READ_DONE = 12,  /* initiator -> target, SEND_WITH_INV */
	RBLK_MSG_WRITE_DATA = 13, /* initiator -> target, SEND_WITH_INV */
};

/* Command opcodes (rblk_wire_cmd.opcode). Stable numbers. */
enum rblk_opcode {
	RBLK_OP_READ = 1,
	RBLK_OP_WRITE = 2,
	RBLK_OP_FLUSH = 3,
	RBLK_OP_TRIM = 4,
	RBLK_OP_WRITE_ZEROES = 5,
	RBLK_OP_DISCONNECT = 6,
	RBLK_OP_KEEPALIVE = 7,
	/*
	 * Persistent reservations (docs/PROTOCOL.md, "Reservations"), only
	 * where LOGIN offered RBLK_F_PR. REGISTER, ACQUIRE and RELEASE move
	 * no data: offset is the host's current key, addr the new key
	 * (REGISTER) or the key preempted (ACQUIRE), rkey RBLK_PR_ARG(); length
	 * 0. REPORT moves data as a READ does (pull or push), offset 0.
	 */
	RBLK_OP_PR_REGISTER = 8,
	RBLK_OP_PR_ACQUIRE = 9,
	RBLK_OP_PR_RELEASE = 10,
	RBLK_OP_PR_REPORT = 11,
	RBLK_OP_MAX_ = 11,
};

/* A reservation command's action, type and flags, in its rkey field. */
#define RBLK_PR_ARG(action, type, flags)                                       \
	((uint32_t)(action) | (uint32_t)(type) << 8 | (uint32_t)(flags) << 16)
#define RBLK_PR_ACTION(arg) ((arg)&0xffu)
#define RBLK_PR_TYPE(arg) (((arg) >> 8) & 0xffu)
#define RBLK_PR_FLAGS(arg) ((arg) >> 16)

/* Reservation types: NVMe's numbers (RTYPE). */
enum rblk_prt {
	RBLK_PRT_NONE = 0,
	RBLK_PRT_WRITE_EXCLUSIVE = 1,
	RBLK_PRT_EXCLUSIVE_ACCESS = 2,
	RBLK_PRT_WRITE_EXCLUSIVE_REG_ONLY = 3,
	RBLK_PRT_EXCLUSIVE_ACCESS_REG_ONLY = 4,
	RBLK_PRT_WRITE_EXCLUSIVE_ALL_REGS = 5,
	RBLK_PRT_EXCLUSIVE_ACCESS_ALL_REGS = 6,
	RBLK_PRT_TYPE_MAX_ = 6,
};

/* REGISTER actions (NVMe RREGA) */
#define RBLK_PR_REG_REGISTER 0
#define RBLK_PR_REG_UNREGISTER 1
#define RBLK_PR_REG_REPLACE 2
/* ACQUIRE actions (RACQA) */
#define RBLK_PR_ACQ_ACQUIRE 0
#define RBLK_PR_ACQ_PREEMPT 1
#define RBLK_PR_ACQ_PREEMPT_ABORT 2
/* RELEASE actions (RRELA) */
#define RBLK_PR_REL_RELEASE 0
#define RBLK_PR_REL_CLEAR 1
/* REGISTER flag: ignore the current key (NVMe IEKEY) */
#define RBLK_PR_F_IEKEY 0x1u

/*
 * REPORT's data: a header, then one entry per registrant that fits the
 * command's length (nr_regs counts them all). Little-endian.
 */
#define RBLK_PR_MAX_REGS 64 /* registrants per export */
struct rblk_wire_pr_hdr {
	uint32_t generation; /* NVMe PRGEN: registrations and preempts */
	uint8_t type;	     /* enum rblk_prt; 0: no reservation */
	uint8_t reserved0;
	uint16_t nr_regs; /* registrants, at most RBLK_PR_MAX_REGS */
	uint8_t reserved[8];
} __attribute__((packed));

#define RBLK_PR_E_HOLDER 0x01u /* this registrant holds the reservation */
struct rblk_wire_pr_entry {
	uint64_t key;
	uint8_t flags; /* RBLK_PR_E_* */
	uint8_t reserved[7];
	char host[RBLK_NAME_MAX]; /* NUL-terminated, printable, NUL-padded */
} __attribute__((packed));

#define RBLK_PR_HDR_SIZE 16
#define RBLK_PR_ENTRY_SIZE 144
/* a REPORT buffer that holds every registrant an export may have */
#define RBLK_PR_REPORT_MAX                                                     \
	(RBLK_PR_HDR_SIZE + RBLK_PR_MAX_REGS * RBLK_PR_ENTRY_SIZE)

struct rblk_pr_entry {
	uint64_t key;
	bool holder;
	char host[RBLK_NAME_MAX];
};

struct rblk_pr_report {
	uint32_t generation;
	uint8_t type;
	uint16_t nr_regs;  /* registrants on the target */
	uint16_t nr_given; /* entries filled below (what fitted) */
	struct rblk_pr_entry regs[RBLK_PR_MAX_REGS];
};

/* Writes the report into buf (len bytes: as many entries as fit). */
void rblk_pr_report_encode(void *buf, size_t len,
			   const struct rblk_pr_report *r);
/*
 * Validates a REPORT's len bytes: type known, nr_regs at most
 * RBLK_PR_MAX_REGS, each entry that fits a non-empty printable host name
 * and known flags, reserved bytes zero. RBLK_S_OK or RBLK_S_INVALID.
 */
int rblk_pr_report_decode(const void *buf, size_t len,
			  struct rblk_pr_report *out);
const char *rblk_pr_type_str(int type);

/* Command flags (rblk_wire_cmd.flags). */
/* WRITE, WRITE_ZEROES: durable before the response */
#define RBLK_CMD_F_FUA 0x01u
#define RBLK_CMD_F_PUSH 0x02u /* READ: target RDMA WRITEs into addr/rkey */
/* WRITE: its length bytes of data follow the capsule (in-capsule data) */
#define RBLK_CMD_F_INLINE 0x04u
/*
 * Any opcode, where LOGIN offered RBLK_F_CMD_DONE: the capsule first ends
 * its tag's pull READ (it is that READ's READ_DONE), sent as SEND_WITH_INV
 * of the READ's window key.
 */
#define RBLK_CMD_F_DONE 0x08u
#define RBLK_CMD_F_ALL                                                         \
	(RBLK_CMD_F_FUA | RBLK_CMD_F_PUSH | RBLK_CMD_F_INLINE | RBLK_CMD_F_DONE)

/*
 * In-capsule WRITE data (docs/PROTOCOL.md, "In-capsule data"): HELLO asks
 * for up to this many bytes, LOGIN grants 0 or a multiple of
 * RBLK_INLINE_ALIGN up to RBLK_INLINE_MAX.
 */
#define RBLK_INLINE_ALIGN 512
#define RBLK_INLINE_MAX 16384
#define RBLK_INLINE_DEFAULT 4096 /* what auto grants at small depths */

/* Volume feature flags (login). */
#define RBLK_F_READ_ONLY 0x01u
#define RBLK_F_FLUSH 0x02u /* volatile cache: FLUSH is meaningful */
#define RBLK_F_FUA 0x04u
#define RBLK_F_TRIM 0x08u
#define RBLK_F_ZEROES 0x10u
#define RBLK_F_PUSH 0x20u /* READ with RBLK_CMD_F_PUSH is accepted */
/* the volume itself is registered: vol_addr/vol_rkey/vol_len in LOGIN */
#define RBLK_F_DIRECT 0x40u
/*
 * Not a volume feature but the target's: a CMD may carry its tag's
 * READ_DONE (RBLK_CMD_F_DONE). LOGIN only; librblk keeps it out of
 * rblk_info.features.
 */
#define RBLK_F_CMD_DONE 0x80u
/*
 * The volume has no identity of its own: vol_id is a stand-in, unique on
 * the target's host but tied to nothing that travels with the data, so it
 * must not be used to tell paths to one volume from paths to another.
 * Only in a LOGIN answering a HELLO with RBLK_HELLO_F_IDENTITY.
 */
#define RBLK_F_NO_IDENTITY 0x100u
/*
 * Not a volume feature: tags carry generations (rblk_tag_make() below),
 * echoed verbatim in every answer. Only in a LOGIN answering a HELLO
 * with RBLK_HELLO_F_TAG_GEN; librblk keeps it out of rblk_info.features.
 */
#define RBLK_F_TAG_GEN 0x200u
/*
 * Not a volume feature but the connection's: a push READ's data comes as
 * one RDMA WRITE WITH IMMEDIATE whose immediate is the command's rkey, and
 * every answer to a push READ is a SEND_WITH_INV of that rkey (the
 * initiator checks both: docs/PROTOCOL.md, "Push READs over rdma"). Only
 * in a LOGIN answering a HELLO with RBLK_HELLO_F_PUSH_IMM, on a transport
 * that carries immediates; librblk keeps it out of rblk_info.features.
 */
#define RBLK_F_PUSH_IMM 0x400u
/*
 * Not a volume feature but the target's: the high 32 bits of session_id
 * are the target's durability epoch (rblk_login_epoch()), which stays the
 * same for as long as everything the target acknowledged survives (the
 * machine's boot for files and block devices, the process for RBD and
 * RAM). Only in a LOGIN answering a HELLO with RBLK_HELLO_F_EPOCH; librblk
 * keeps it out of rblk_info.features.
 */
#define RBLK_F_EPOCH 0x800u
/*
 * Not a volume feature but the target's: it tells this connection when the
 * volume's size changes (RBLK_RESP_F_SIZE, docs/PROTOCOL.md "Live resize").
 * Only in a LOGIN answering a HELLO with RBLK_HELLO_F_RESIZE; librblk
 * keeps it out of rblk_info.features.
 */
#define RBLK_F_RESIZE 0x1000u
/*
 * The export takes reservation commands (RBLK_OP_PR_*) and enforces
 * reservations: a command one forbids is answered RBLK_S_RESV_CONFLICT.
 * Only in a LOGIN answering a HELLO with RBLK_HELLO_F_PR, on an export
 * without direct access (one-sided access cannot be fenced).
 */
#define RBLK_F_PR 0x2000u
#define RBLK_F_ALL (0x1fffu | RBLK_F_PR)

/* HELLO flags. */
/* the initiator asks for a read-only login */
#define RBLK_HELLO_F_READ_ONLY 0x01u
/*
 * Discovery: no login; the export name is empty, queue_id is the index of
 * the first export wanted, and the target answers with one DISCOVER_REPLY
 * (or a LOGIN refusal) and disconnects.
 */
#define RBLK_HELLO_F_DISCOVER 0x02u
/* the initiator holds a secret: it may authenticate */
#define RBLK_HELLO_F_AUTH 0x04u
/* the initiator knows RBLK_F_NO_IDENTITY: the target may set it */
#define RBLK_HELLO_F_IDENTITY 0x08u
/* the initiator numbers its tags' uses: the target may set RBLK_F_TAG_GEN */
#define RBLK_HELLO_F_TAG_GEN 0x10u
/* the initiator takes push READs as RBLK_F_PUSH_IMM describes */
#define RBLK_HELLO_F_PUSH_IMM 0x20u
/* the initiator checks the durability epoch: the target may set RBLK_F_EPOCH */
#define RBLK_HELLO_F_EPOCH 0x40u
/* the initiator follows size changes: the target may set RBLK_F_RESIZE */
#define RBLK_HELLO_F_RESIZE 0x80u
/*
 * the initiator speaks reservations: the target may set RBLK_F_PR and
 * answer RBLK_S_RESV_CONFLICT (to other initiators a conflict is
 * RBLK_S_ACCESS_DENIED, a status they know)
 */
#define RBLK_HELLO_F_PR 0x100u
#define RBLK_HELLO_F_ALL                                                       \
	(RBLK_HELLO_F_READ_ONLY | RBLK_HELLO_F_DISCOVER | RBLK_HELLO_F_AUTH |  \
	 RBLK_HELLO_F_IDENTITY | RBLK_HELLO_F_TAG_GEN |                        \
	 RBLK_HELLO_F_PUSH_IMM | RBLK_HELLO_F_EPOCH | RBLK_HELLO_F_RESIZE |    \
	 RBLK_HELLO_F_PR)

/*
 * Tag generations (RBLK_F_TAG_GEN): a wire tag's low bits are the tag's
 * index (< queue depth: what names the slot and the window), its upper
 * bits how many times the initiator has used that index, modulo 64. The
 * target echoes the whole tag in every message about the command (RESP,
 * GRANT; READ_DONE/WRITE_DATA name it too), so the initiator can tell an
 * answer to the command now on the index from a stale or misdirected one,
 * as nvme's command-id generation counter does. Without the feature the
 * tag is the index.
 */
#define RBLK_TAG_INDEX_BITS 10
#define RBLK_TAG_INDEX_MASK ((1u << RBLK_TAG_INDEX_BITS) - 1)
#define RBLK_TAG_GEN_MASK ((1u << (16 - RBLK_TAG_INDEX_BITS)) - 1)

static inline uint16_t rblk_tag_make(unsigned int index, unsigned int gen)
{
	return (uint16_t)(index | (gen & RBLK_TAG_GEN_MASK)
				      << RBLK_TAG_INDEX_BITS);
}

static inline unsigned int rblk_tag_index(uint16_t tag)
{
	return tag & RBLK_TAG_INDEX_MASK;
}

static inline unsigned int rblk_tag_gen(uint16_t tag)
{
	return tag >> RBLK_TAG_INDEX_BITS;
}

/*
 * The tag space a decoder checks tags against: the granted queue depth,
 * with RBLK_TAGS_GEN where LOGIN granted RBLK_F_TAG_GEN (then the index
 * must be below the depth; the generation is the caller's to check).
 */
#define RBLK_TAGS_GEN 0x10000u

static inline uint32_t rblk_tags(uint16_t queue_depth, bool gen)
{
	return queue_depth | (gen ? RBLK_TAGS_GEN : 0);
}

/*
 * Status codes: in RESP.status, LOGIN.status and the rdma_cm reject private
 * data. The numbers are part of the protocol and never change meaning.
 */
enum rblk_status {
	RBLK_S_OK = 0,
	RBLK_S_INVALID = 1,	 /* malformed message or field */
	RBLK_S_BAD_VERSION = 2,	 /* protocol version not spoken here */
	RBLK_S_NO_EXPORT = 3,	 /* no export of that name */
	RBLK_S_READ_ONLY = 4,	 /* write-class command on a read-only volume */
	RBLK_S_OUT_OF_RANGE = 5, /* offset + length beyond the volume */
	RBLK_S_IO_ERROR = 6,	 /* the backend failed the I/O */
	RBLK_S_NOT_SUPPORTED = 7,  /* opcode/flag not offered by this volume */
	RBLK_S_BAD_TAG = 8,	   /* tag out of range or still in use */
	RBLK_S_NO_SPACE = 9,	   /* backend out of space */
	RBLK_S_ACCESS_DENIED = 10, /* host not allowed */
	RBLK_S_NO_RESOURCES = 11,  /* target out of memory or registrations */
	RBLK_S_BAD_STATE = 12,	/* message not valid in this connection state */
	RBLK_S_SHUTDOWN = 13,	/* target is shutting down */
	RBLK_S_MISALIGNED = 14, /* offset/length not a multiple of block size */
	RBLK_S_TOO_LARGE = 15,	/* length above max_io, or zero */
	RBLK_S_AUTH_FAILED = 16, /* wrong secret, unknown host, bad response */
	RBLK_S_AUTH_REQUIRED = 17, /* host/export needs authentication */
	RBLK_S_BUSY = 18, /* connection or session limit reached: retry later */
	/* a reservation forbids this command to this host (RBLK_F_PR) */
	RBLK_S_RESV_CONFLICT = 19,
	RBLK_S_TLS_REQUIRED = 20, /* export or host refuses plaintext logins */
	RBLK_S_MAX_ = 20,
};

const char *rblk_status_str(int status);
/* Status -> negative errno, for librblk callers. */
int rblk_status_to_errno(int status);
/* Negative errno from a backend -> status. */
int rblk_errno_to_status(int neg_errno);
const char *rblk_opcode_str(int opcode);

/* ---- wire images ------------------------------------------------------ */

struct rblk_wire_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t length; /* whole message length in bytes */
} __attribute__((packed));

struct rblk_wire_hello {
	struct rblk_wire_hdr hdr;
	uint16_t queue_depth; /* requested; target may grant less */
	uint16_t queue_id;    /* index of this connection among the session's */
	uint32_t max_io;      /* requested; target may grant less */
	uint32_t flags;	      /* RBLK_HELLO_F_* */
	uint32_t inline_data; /* in-capsule WRITE bytes asked for; 0: none */
	char export_name[RBLK_NAME_MAX];
	char host_name[RBLK_NAME_MAX];
} __attribute__((packed));

#define RBLK_VOL_ID_LEN 16

struct rblk_wire_login {
	struct rblk_wire_hdr hdr;
	uint32_t status;
	uint16_t queue_depth; /* granted */
	uint16_t inline_data; /* in-capsule WRITE bytes granted; 0: none */
	uint32_t max_io;      /* granted */
	uint32_t block_size;
	uint64_t size;	   /* volume size in bytes */
	uint32_t features; /* RBLK_F_* */
	/* DIRECT only (zero otherwise): the volume window of this conn */
	uint32_t vol_rkey;
	uint64_t vol_addr; /* byte b of the volume is at vol_addr + b */
	uint64_t vol_len;  /* == size */
	uint64_t session_id;
	uint8_t vol_id[RBLK_VOL_ID_LEN]; /* the volume's stable identity */
} __attribute__((packed));

struct rblk_wire_cmd {
	struct rblk_wire_hdr hdr;
	uint16_t tag;
	uint8_t opcode;
	uint8_t flags;
	uint32_t length;
	uint64_t offset;
	uint64_t addr; /* PUSH only: initiator buffer address */
	uint32_t rkey; /* PUSH only: its rkey */
	uint32_t reserved[7];
} __attribute__((packed));

#define RBLK_RESP_F_PULL 0x01u /* READ data waits in the window addr/rkey */
/*
 * RBLK_F_RESIZE only: the volume's size changed since this connection was
 * last told. Without PULL, addr is the new size in bytes; with PULL (addr
 * is the window's) it only says so, and the initiator asks with a
 * KEEPALIVE, whose answer carries it.
 */
#define RBLK_RESP_F_SIZE 0x02u

struct rblk_wire_resp {
	struct rblk_wire_hdr hdr;
	uint16_t tag;
	uint16_t flags; /* RBLK_RESP_F_* */
	uint32_t status;
	uint32_t length; /* bytes transferred */
	uint32_t rkey;	 /* PULL only */
	uint64_t addr;	 /* PULL only */
} __attribute__((packed));

/* A WRITE's window: [addr, + length) writable by this connection. */
struct rblk_wire_grant {
	struct rblk_wire_hdr hdr;
	uint16_t tag;
	uint16_t reserved0;
	uint32_t rkey;
	uint32_t length;
	uint32_t reserved1;
	uint64_t addr;
} __attribute__((packed));

/* READ_DONE / WRITE_DATA: sent with SEND_WITH_INV of rkey. */
struct rblk_wire_done {
	struct rblk_wire_hdr hdr;
	uint16_t tag;
	uint16_t reserved;
	uint32_t rkey; /* the window this message invalidates */
} __attribute__((packed));

/* One export as discovery lists it. */
struct rblk_wire_disc_entry {
	char name[RBLK_NAME_MAX]; /* NUL-terminated, printable, NUL-padded */
	uint64_t size;		  /* bytes, a multiple of block_size */
	uint32_t block_size;
	uint32_t features; /* RBLK_F_* the export offers */
} __attribute__((packed));

/* Exports per DISCOVER_REPLY: as many as fit in RBLK_MSG_MAX. */
#define RBLK_DISC_PER_REPLY 3

struct rblk_wire_disc_reply {
	struct rblk_wire_hdr hdr;
	uint16_t total; /* exports visible to this host */
	uint16_t
	    first;     /* index of entry[0] among them (the HELLO's queue_id) */
	uint8_t count; /* entries used, 0..RBLK_DISC_PER_REPLY */
	uint8_t reserved[11];
	struct rblk_wire_disc_entry entry[RBLK_DISC_PER_REPLY]; /* unused: 0 */
} __attribute__((packed));

/* Authentication (docs/PROTOCOL.md, "Authentication"). */
#define RBLK_AUTH_NONCE_LEN 32
#define RBLK_AUTH_MAC_LEN 32

struct rblk_wire_auth_challenge {
	struct rblk_wire_hdr hdr;
	uint32_t flags; /* 0 */
	uint32_t reserved;
	uint8_t nonce[RBLK_AUTH_NONCE_LEN]; /* target's, fresh per connection */
	char target_name[RBLK_NAME_MAX];    /* the target's identity */
} __attribute__((packed));

struct rblk_wire_auth_response {
	struct rblk_wire_hdr hdr;
	uint32_t flags; /* 0 */
	uint32_t reserved;
	uint8_t nonce[RBLK_AUTH_NONCE_LEN]; /* initiator's, fresh */
	uint8_t mac[RBLK_AUTH_MAC_LEN];	    /* role "initiator" */
} __attribute__((packed));

struct rblk_wire_auth_result {
	struct rblk_wire_hdr hdr;
	uint32_t status; /* 0 */
	uint32_t reserved;
	uint8_t mac[RBLK_AUTH_MAC_LEN]; /* role "target" */
} __attribute__((packed));

/* Carried in rdma_cm (or tcp CONNECT) private data; must stay <= 56 bytes. */
struct rblk_wire_cm_req {
	uint32_t magic;
	uint8_t version;
	uint8_t reserved0;
	uint16_t queue_depth;
	uint32_t reserved[2];
} __attribute__((packed));

struct rblk_wire_cm_rej {
	uint32_t magic;
	uint8_t version; /* the version the target speaks */
	uint8_t reserved0;
	uint16_t reserved1;
	uint32_t status;
} __attribute__((packed));

#define RBLK_HELLO_SIZE 280
#define RBLK_LOGIN_SIZE 80
#define RBLK_CMD_SIZE 64
#define RBLK_RESP_SIZE 32
#define RBLK_GRANT_SIZE 32
#define RBLK_DONE_SIZE 16
#define RBLK_CM_REQ_SIZE 16
#define RBLK_CM_REJ_SIZE 12
#define RBLK_DISC_ENTRY_SIZE 144
#define RBLK_DISC_REPLY_SIZE 456
#define RBLK_AUTH_CHALLENGE_SIZE 176
#define RBLK_AUTH_RESPONSE_SIZE 80
#define RBLK_AUTH_RESULT_SIZE 48

/*
 * The in-capsule size offered by default: RBLK_INLINE_DEFAULT, halved
 * while nr buffers of RBLK_CMD_SIZE + that many bytes pass budget; 0 when
 * not even RBLK_INLINE_ALIGN fits. The target sizes its receive ring by it
 * (login_inline_cap()) and librblk its command buffers (before it learns
 * the grant), with nr and budget in the same ratio, so that what librblk
 * asks by default is what a target's default grants.
 */
static inline uint32_t rblk_inline_fit(size_t nr, size_t budget)
{
	uint32_t n = RBLK_INLINE_DEFAULT;

	while (n >= RBLK_INLINE_ALIGN && nr * (RBLK_CMD_SIZE + n) > budget)
		n /= 2;
	return n >= RBLK_INLINE_ALIGN ? n : 0;
}

/* ---- host-order views, filled by the decoders ------------------------- */

struct rblk_hello {
	uint16_t queue_depth;
	uint16_t queue_id;
	uint32_t max_io;
	uint32_t flags;
	uint32_t inline_data; /* asked: any value, the target grants less */
	char export_name[RBLK_NAME_MAX];
	char host_name[RBLK_NAME_MAX];
};

struct rblk_login {
	uint32_t status;
	uint16_t queue_depth;
	uint16_t inline_data; /* 0 or a multiple of 512, <= RBLK_INLINE_MAX */
	uint32_t max_io;
	uint32_t block_size;
	uint64_t size;
	uint32_t features;
	uint64_t session_id;
	uint32_t vol_rkey; /* RBLK_F_DIRECT only */
	uint64_t vol_addr;
	uint64_t vol_len;
	uint8_t vol_id[RBLK_VOL_ID_LEN];
};

struct rblk_cmd {
	uint16_t tag;
	uint8_t opcode;
	uint8_t flags;
	uint32_t length;
	uint64_t offset;
	uint64_t addr;
	uint32_t rkey;
	/*
	 * RBLK_CMD_F_INLINE: the length bytes of data after the capsule
	 * (the encoder copies them from here; the decoder points into buf).
	 */
	const void *data;
};

struct rblk_resp {
	uint16_t tag;
	uint16_t flags; /* RBLK_RESP_F_PULL, RBLK_RESP_F_SIZE */
	uint32_t status;
	uint32_t length;
	uint32_t rkey; /* PULL */
	uint64_t addr; /* PULL */
	uint64_t size; /* SIZE without PULL: the volume's size (addr's bytes) */
};

struct rblk_grant {
	uint16_t tag;
	uint32_t rkey;
	uint32_t length;
	uint64_t addr;
};

/* READ_DONE or WRITE_DATA (type says which). */
struct rblk_done {
	uint8_t type; /* RBLK_MSG_READ_DONE or RBLK_MSG_WRITE_DATA */
	uint16_t tag;
	uint32_t rkey;
};

struct rblk_disc_entry {
	char name[RBLK_NAME_MAX];
	uint64_t size;
	uint32_t block_size;
	uint32_t features;
};

struct rblk_disc_reply {
	uint16_t total;
	uint16_t first;
	uint8_t count;
	struct rblk_disc_entry entry[RBLK_DISC_PER_REPLY];
};

struct rblk_auth_challenge {
	uint8_t nonce[RBLK_AUTH_NONCE_LEN];
	char target_name[RBLK_NAME_MAX];
};

struct rblk_auth_response {
	uint8_t nonce[RBLK_AUTH_NONCE_LEN];
	uint8_t mac[RBLK_AUTH_MAC_LEN];
};

struct rblk_auth_result {
	uint8_t mac[RBLK_AUTH_MAC_LEN];
};

/* What a command is validated against: the volume as granted at login. */
struct rblk_limits {
	uint16_t queue_depth;
	uint32_t max_io;
	uint32_t block_size;
	uint64_t size;
	uint32_t features;
	uint32_t inline_max; /* in-capsule bytes granted; 0: none */
};

/*
 * Encoders write exactly RBLK_*_SIZE bytes into buf and return that size.
 * Decoders return RBLK_S_OK or the status that says what is wrong; on
 * failure *out is left unspecified and must not be used.
 */
size_t rblk_hello_encode(void *buf, const struct rblk_hello *h);
int rblk_hello_decode(const void *buf, size_t len, struct rblk_hello *out);

size_t rblk_login_encode(void *buf, const struct rblk_login *l);
/* The target's durability epoch of a LOGIN with RBLK_F_EPOCH. */
static inline uint32_t rblk_login_epoch(const struct rblk_login *l)
{
	return (uint32_t)(l->session_id >> 32);
}
int rblk_login_decode(const void *buf, size_t len, struct rblk_login *out);

/*
 * Writes RBLK_CMD_SIZE bytes, and with RBLK_CMD_F_INLINE the length bytes
 * at c->data behind them (buf must hold RBLK_CMD_SIZE + length); returns
 * the capsule's size.
 */
size_t rblk_cmd_encode(void *buf, const struct rblk_cmd *c);
/*
 * The one validator for commands: header, tag < queue_depth (its index
 * where lim->features has RBLK_F_TAG_GEN; out->tag is the wire tag), opcode,
 * flags allowed for the opcode and offered by the volume, offset/length aligned
 * to the block size, 0 < length <= max_io for data commands, offset + length
 * inside the volume (overflow-safe), write-class ops on a read-only volume,
 * reserved fields zero; INLINE only on a WRITE of at most lim->inline_max
 * bytes (out->data then points at them in buf). On failure *out->tag is
 * still filled when the tag itself was valid, so the target can answer
 * that tag. Framing (below) is checked first, as rblk_cmd_peek_tag() does.
 */
int rblk_cmd_decode(const void *buf, size_t len, const struct rblk_limits *lim,
		    struct rblk_cmd *out);
/*
 * Tag index of a capsule whose framing is sane (tags: rblk_tags()), or -1 (a
 * malformed capsule: the connection fails). Framing: a CMD header whose length
 * equals the bytes received, RBLK_CMD_SIZE without INLINE, RBLK_CMD_SIZE +
 * length with it.
 */
int rblk_cmd_peek_tag(const void *buf, size_t len, uint32_t tags);

size_t rblk_resp_encode(void *buf, const struct rblk_resp *r);
/*
 * Validates header and tag (in tags: rblk_tags()); out->tag is the whole
 * wire tag; status must be a known code;
 * PULL only on success with a length, rkey/addr zero without PULL, and
 * addr + length must not wrap. SIZE without PULL: rkey zero and the size
 * (in out->size; out->addr 0) in 1 .. 2^63 - 1; whether the connection
 * may get SIZE at all (RBLK_F_RESIZE) is the caller's to check.
 */
int rblk_resp_decode(const void *buf, size_t len, uint32_t tags,
		     struct rblk_resp *out);

size_t rblk_grant_encode(void *buf, const struct rblk_grant *g);
/* tag in tags, 0 < length <= max_io, no wrap, reserved zero. */
int rblk_grant_decode(const void *buf, size_t len, uint32_t tags,
		      uint32_t max_io, struct rblk_grant *out);

size_t rblk_done_encode(void *buf, const struct rblk_done *d);
/* READ_DONE or WRITE_DATA; tag in tags, reserved zero. */
int rblk_done_decode(const void *buf, size_t len, uint32_t tags,
		     struct rblk_done *out);

size_t rblk_auth_challenge_encode(void *buf,
				  const struct rblk_auth_challenge *c);
int rblk_auth_challenge_decode(const void *buf, size_t len,
			       struct rblk_auth_challenge *out);
size_t rblk_auth_response_encode(void *buf, const struct rblk_auth_response *r);
int rblk_auth_response_decode(const void *buf, size_t len,
			      struct rblk_auth_response *out);
size_t rblk_auth_result_encode(void *buf, const struct rblk_auth_result *r);
int rblk_auth_result_decode(const void *buf, size_t len,
			    struct rblk_auth_result *out);

size_t rblk_cm_req_encode(void *buf, uint16_t queue_depth);
int rblk_cm_req_decode(const void *buf, size_t len, uint16_t *queue_depth);
size_t rblk_cm_rej_encode(void *buf, uint32_t status);
/* Returns the status carried by a reject, or RBLK_S_INVALID if unparseable. */
int rblk_cm_rej_decode(const void *buf, size_t len);
/* The protocol version the rejecting target speaks, or -1 if unparseable. */
int rblk_cm_rej_version(const void *buf, size_t len);

size_t rblk_disc_reply_encode(void *buf, const struct rblk_disc_reply *d);
/*
 * Validates header, count <= RBLK_DISC_PER_REPLY, first + count <= total,
 * each used entry (non-empty printable name, block size a power of two in
 * 512..65536, size a multiple of it, known features), unused entries and
 * reserved bytes zero.
 */
int rblk_disc_reply_decode(const void *buf, size_t len,
			   struct rblk_disc_reply *out);

/* Message type of a buffer with a valid header, or -1. */
int rblk_msg_type(const void *buf, size_t len);

#endif
