/* SPDX-License-Identifier: MIT */
/*
 * Quality of service: per-export and per-host limits on I/Os and bytes per
 * second, reads and writes apart, with a burst (docs/ARCHITECTURE.md,
 * "Quality of service"). A limit is a token bucket that every worker
 * draws from with atomics: no lock on the data path, one limit for all the
 * sessions of an export (or host) whichever workers serve them. A command
 * over a limit waits on its connection, in order, and never fails.
 */
#ifndef RBLK_TARGET_QOS_H
#define RBLK_TARGET_QOS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../config/config.h"

/* how far a bucket with waiters may catch up on a late worker */
#define QOS_CATCHUP_MS 1000u

/*
 * One limit. tokens may go below zero: a command takes its whole cost
 * once the bucket is not empty, and later ones wait out the debt, so an
 * I/O larger than the burst is slowed, never stuck.
 */
struct qos_bucket {
	_Atomic uint64_t rate;	   /* units per second; 0: no limit */
	_Atomic int64_t burst;	   /* most tokens the bucket holds */
	_Atomic int64_t tokens;	   /* what a command may take now */
	_Atomic uint64_t stamp_ns; /* refilled up to this time */
};

struct qos {
	struct qos_bucket b[CFG_QOS_NR];
	_Atomic uint32_t burst_ms;
	atomic_bool on; /* some limit set: commands look at the buckets */
	/*
	 * connections with commands waiting on these limits: while there
	 * are any, an empty bucket's refill is not capped at the burst
	 * (qos_admit())
	 */
	_Atomic int32_t waiting;
	/* commands that waited, and how long in all (ctl stats, /metrics) */
	_Atomic uint64_t throttled_cmds, throttled_ns;
};

/*
 * Set every limit from cfg (a live change: the buckets keep their
 * tokens, capped to the new burst).
 */
void qos_configure(struct qos *q, const struct cfg_qos *cfg);
/* The limits as they are now (for ctl stats, /metrics, set-qos). */
void qos_limits(const struct qos *q, struct cfg_qos *out);

/*
 * May a command of this opcode and length go now under every limit in
 * qs[0..n) (NULL entries skipped)? If yes its cost is taken from each and
 * 0 is returned; else the nanoseconds until the emptiest bucket holds a
 * token again (at least 1).
 *
 * A refill caps a bucket at its burst, so that an idle client does not
 * save up more, unless the bucket is empty and commands wait on it
 * (q->waiting): then the worker, not the client, was late (a busy CPU),
 * and what it earned meanwhile is owed to them, up to QOS_CATCHUP_MS
 * worth beyond the burst. That surplus stays while the client keeps
 * coming and goes back to the burst once it stayed away a burst's time.
 */
uint64_t qos_admit(struct qos *const *qs, int n, int opcode, uint32_t length,
		   uint64_t now_ns);

#endif
