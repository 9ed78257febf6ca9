/* SPDX-License-Identifier: MIT */
/*
 * Persistent reservations of an export (docs/PROTOCOL.md,
 * "Reservations"): NVMe's registrants, holder and types, kept with the
 * export (a sidecar file beside a file or under /var/lib/rblk for a block
 * device; the image's metadata for RBD) so that they outlive a target
 * restart, and enforced on every command of every session.
 *
 * A registrant is a host, named by its login's host name, with a key.
 * Every session of that host name shares its registration (as NVMe's
 * controllers of one host identifier do), so a host name should be
 * proven: give the host a [host] section (a secret), as the test and the
 * man page do.
 *
 * The data path: struct pr's gen changes (release) after every change of
 * its state; a connection keeps the gen it last computed its access for
 * (tconn.pr_seen, pr_deny) and recomputes only when gen moved, under the
 * lock. With no change since its login a command costs one load and one
 * compare, and takes no lock.
 */
#ifndef RBLK_TARGET_PR_H
#define RBLK_TARGET_PR_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/proto.h"

struct export;
struct tconn;
struct treq;
struct cfg_export;

struct pr_reg {
	char host[RBLK_NAME_MAX];
	uint64_t key;
};

/* What is stored (pr_format()), and what the rules change (pr_apply()). */
struct pr_data {
	uint64_t seq;	     /* stores so far: tells one state from another */
	uint32_t generation; /* NVMe PRGEN: registrations and preempts */
	uint8_t type;	     /* enum rblk_prt; RBLK_PRT_NONE: none */
	char holder[RBLK_NAME_MAX]; /* "" for none and the all-registrants types
				     */
	unsigned int nr;
	struct pr_reg regs[RBLK_PR_MAX_REGS];
};

#define PR_DENY_READ 0x1u
#define PR_DENY_WRITE 0x2u

struct pr {
	/*
	 * io_lock serializes loads and stores (and whoever changes d holds
	 * it for the whole load-apply-store); lock guards d itself, held
	 * only to copy it in or to read it, never across backend I/O, so a
	 * session recomputing its access never waits for a slow store.
	 */
	pthread_mutex_t io_lock;
	pthread_mutex_t lock;
	struct pr_data d;
	/* bumped (release) after every change of d; see the top comment */
	atomic_uint gen;
	/* the sidecar file; "" where the backend stores it (rbd) or nothing
	 * does (ram) */
	char file[PATH_MAX];
	bool volatile_only; /* ram: the state lasts as long as the volume */
	/*
	 * Where the backend stores the state (rbd), a thread reads it every
	 * PR_POLL_MS, so that a change made through another gateway reaches
	 * the sessions here though none of them sends a reservation command.
	 */
	pthread_t poller;
	bool polling, stop; /* stop: under lock, with cond */
	pthread_cond_t cond;
};

#define PR_POLL_MS 1000

/* A PR opcode (REGISTER, ACQUIRE, RELEASE, REPORT)? */
static inline bool pr_opcode(uint8_t op)
{
	return op >= RBLK_OP_PR_REGISTER && op <= RBLK_OP_PR_REPORT;
}

/* The class a reservation gates: NVMe's read and write command groups. */
static inline unsigned int pr_class(uint8_t op)
{
	switch (op) {
	case RBLK_OP_READ:
		return PR_DENY_READ;
	case RBLK_OP_WRITE:
	case RBLK_OP_TRIM:
	case RBLK_OP_WRITE_ZEROES:
	case RBLK_OP_FLUSH: /* as Linux nvmet: flush is in the write group */
		return PR_DENY_WRITE;
	default:
		return 0;
	}
}

/*
 * Open: the state of export e (cfg: its definition, for pr_file=), read
 * from its store; an export with direct access gets none (e->pr NULL:
 * one-sided access cannot be fenced, so RBLK_F_PR is not offered). 0 or
 * -errno (an unreadable or corrupt store: the export does not open, so
 * that no reservation is silently forgotten), said in err.
 */
int pr_open(struct export *e, const struct cfg_export *cfg, char *err,
	    size_t errlen);
void pr_close(struct export *e);

/*
 * Worker thread: recompute c's access for the state now (and the gen it
 * is for). Takes the lock, never across backend I/O; the slow half of
 * pr_denied() (target.h).
 */
void pr_refresh(struct tconn *c);

/*
 * Run a REGISTER, ACQUIRE or RELEASE of r (decoded, valid) for its
 * connection's host: reload where the backend stores the state, apply
 * the rules, store, publish. Sets r->status. Blocks for the store (an
 * fsync, or an RBD metadata write): reservation commands are rare.
 */
void pr_execute(struct treq *r);
/* REPORT: fill r->slot (r->cmd.length bytes); sets r->status. */
void pr_report(struct treq *r);
/*
 * Any thread: read the state again from the backend's store (rbd), so
 * that a change made through another gateway reaches this one's sessions.
 * No-op for a sidecar (this target is its only writer).
 */
void pr_reload(struct export *e);

/* ---- the rules, pure (tests/unit/test_pr.c) ---------------------------- */

/*
 * Apply command c (REGISTER, ACQUIRE or RELEASE; decoded) from host to d.
 * RBLK_S_OK (d changed or not), RBLK_S_RESV_CONFLICT, RBLK_S_INVALID, or
 * RBLK_S_NO_RESOURCES (registrants full).
 */
int pr_apply(struct pr_data *d, const char *host, const struct rblk_cmd *c);
/* What d forbids host: PR_DENY_* bits. */
unsigned int pr_deny_of(const struct pr_data *d, const char *host);
/* Does host hold d's reservation? */
bool pr_is_holder(const struct pr_data *d, const char *host);
/* d as text (the stored form); the length, or -ENOSPC. */
int pr_format(const struct pr_data *d, char *buf, size_t len);
/* text (NUL-terminated) into d; 0 or -EINVAL. */
int pr_parse(const char *text, struct pr_data *d);
/* d's report (rblk_pr_report_encode()). */
void pr_fill_report(const struct pr_data *d, struct rblk_pr_report *r);

#endif
