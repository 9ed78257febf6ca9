/* SPDX-License-Identifier: MIT */
/*
 * I/O statistics (stats.h): summing the per-worker counters, quantiles of
 * the latency histogram, operation names.
 */
#include "stats.h"

void stats_add(struct iostats_snap *dst, const struct iostats *s)
{
	for (int i = 0; i < STAT_NR_OPS; i++)
		dst->ops[i] +=
		    atomic_load_explicit(&s->ops[i], memory_order_relaxed);
	dst->bytes_read +=
	    atomic_load_explicit(&s->bytes_read, memory_order_relaxed);
	dst->bytes_written +=
	    atomic_load_explicit(&s->bytes_written, memory_order_relaxed);
	dst->errors += atomic_load_explicit(&s->errors, memory_order_relaxed);
	dst->window_timeouts +=
	    atomic_load_explicit(&s->window_timeouts, memory_order_relaxed);
	dst->lat_sum_us +=
	    atomic_load_explicit(&s->lat_sum_us, memory_order_relaxed);
	for (int i = 0; i < STAT_LAT_BUCKETS; i++)
		dst->lat[i] +=
		    atomic_load_explicit(&s->lat[i], memory_order_relaxed);
}

uint64_t stats_count(const struct iostats_snap *s)
{
	uint64_t n = 0;

	for (int i = 0; i < STAT_LAT_BUCKETS; i++)
		n += s->lat[i];
	return n;
}

uint64_t stats_quantile_us(const struct iostats_snap *s, double q)
{
	uint64_t total = stats_count(s), want, seen = 0;

	if (!total)
		return 0;
	want = (uint64_t)(q * (double)total + 0.999999);
	if (want < 1)
		want = 1;
	for (int i = 0; i < STAT_LAT_BUCKETS; i++) {
		seen += s->lat[i];
		if (seen >= want)
			return i ? 1ull << i : 1;
	}
	return 1ull << (STAT_LAT_BUCKETS - 1);
}

const char *stat_op_name(enum stat_op op)
{
	static const char *const names[STAT_NR_OPS] = {
	    [STAT_READ] = "read",
	    [STAT_WRITE] = "write",
	    [STAT_FLUSH] = "flush",
	    [STAT_TRIM] = "trim",
	    [STAT_WRITE_ZEROES] = "write_zeroes",
	};

	return (unsigned int)op < STAT_NR_OPS ? names[op] : "?";
}
