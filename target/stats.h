/* SPDX-License-Identifier: MIT */
/*
 * I/O statistics of rblk-target: operations per opcode, bytes, errors and
 * a log2 latency histogram (microseconds from command receipt to response
 * posted).
 *
 * Writers: exactly one thread writes a given struct iostats (the worker
 * that owns the session, or the worker's slot of an export's per-worker
 * array), so counting is a relaxed load and store, no lock and no locked
 * instruction. Readers (the control thread, ctl.c) load the same fields
 * relaxed; a snapshot may be a few operations behind but never tears a
 * counter.
 *
 * struct iostats is cache-line aligned (no false sharing between the
 * per-worker slots of an export), so whatever embeds it must be allocated
 * aligned: aligned_alloc/posix_memalign, never plain malloc/calloc.
 */
#ifndef RBLK_TARGET_STATS_H
#define RBLK_TARGET_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum stat_op {
	STAT_READ,
	STAT_WRITE,
	STAT_FLUSH,
	STAT_TRIM,
	STAT_WRITE_ZEROES,
	STAT_NR_OPS,
};

/*
 * Bucket 0 counts latencies below 1 us; bucket i (1..30) those in
 * [2^(i-1), 2^i) us; bucket 31 everything from 2^30 us (~18 min) on.
 */
#define STAT_LAT_BUCKETS 32

struct iostats {
	_Alignas(64) _Atomic uint64_t ops[STAT_NR_OPS];
	_Atomic uint64_t bytes_read;
	_Atomic uint64_t bytes_written;
	_Atomic uint64_t errors; /* responses with a status other than OK */
	/* sessions dropped for holding slot windows (window_timeout) */
	_Atomic uint64_t window_timeouts;
	_Atomic uint64_t lat_sum_us;
	_Atomic uint64_t lat[STAT_LAT_BUCKETS];
};

/* A plain copy for aggregation and printing. */
struct iostats_snap {
	uint64_t ops[STAT_NR_OPS];
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t errors;
	uint64_t window_timeouts;
	uint64_t lat_sum_us;
	uint64_t lat[STAT_LAT_BUCKETS];
};

static inline void stat_inc(_Atomic uint64_t *p, uint64_t v)
{
	/* single writer: no read-modify-write instruction needed */
	atomic_store_explicit(p,
			      atomic_load_explicit(p, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static inline unsigned int stat_lat_bucket(uint64_t us)
{
	unsigned int b = us ? 64u - (unsigned int)__builtin_clzll(us) : 0;

	return b < STAT_LAT_BUCKETS ? b : STAT_LAT_BUCKETS - 1;
}

/*
 * Count one finished command. op is an enum stat_op; bytes move in the
 * direction of op (read or write) and count only when ok.
 */
static inline void stats_account(struct iostats *s, enum stat_op op,
				 uint32_t bytes, bool ok, uint64_t lat_us)
{
	stat_inc(&s->ops[op], 1);
	if (!ok)
		stat_inc(&s->errors, 1);
	else if (op == STAT_READ)
		stat_inc(&s->bytes_read, bytes);
	else if (op == STAT_WRITE)
		stat_inc(&s->bytes_written, bytes);
	stat_inc(&s->lat_sum_us, lat_us);
	stat_inc(&s->lat[stat_lat_bucket(lat_us)], 1);
}

/* Add s to the snapshot dst (any thread). */
void stats_add(struct iostats_snap *dst, const struct iostats *s);
/* Total number of commands counted in the histogram. */
uint64_t stats_count(const struct iostats_snap *s);
/*
 * The latency (us) below which fraction q (0..1) of the commands fell, as
 * the upper bound of the histogram bucket that holds that quantile; 0 when
 * nothing was counted.
 */
uint64_t stats_quantile_us(const struct iostats_snap *s, double q);
const char *stat_op_name(enum stat_op op);

#endif
