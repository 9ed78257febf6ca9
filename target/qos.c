// SPDX-License-Identifier: MIT
/*
 * Token buckets for QoS limits (qos.h). Every worker refills and draws
 * with atomics; a race between two workers can let a command through a
 * bucket another just emptied, which the debt model repays: the next
 * commands wait longer. Refill advances stamp_ns by exactly the time the
 * tokens added are worth, so rounding never loses rate.
 */
#include "qos.h"

#include "../common/proto.h"

#define NSEC 1000000000ull

static int64_t burst_of(uint64_t rate, uint32_t burst_ms)
{
	unsigned __int128 b = (unsigned __int128)rate * burst_ms / 1000u;

	if (b < 1)
		b = 1;
	if (b > INT64_MAX / 4)
		b = INT64_MAX / 4;
	return (int64_t)b;
}

void qos_configure(struct qos *q, const struct cfg_qos *cfg)
{
	uint32_t ms = cfg->burst_ms ? cfg->burst_ms : CFG_QOS_DEFAULT_BURST_MS;
	bool on = false;

	atomic_store(&q->burst_ms, ms);
	for (int k = 0; k < CFG_QOS_NR; k++) {
		struct qos_bucket *b = &q->b[k];
		uint64_t rate = cfg->limit[k];
		int64_t burst = burst_of(rate, ms);
		int64_t t = atomic_load(&b->tokens);

		/* a newly limited bucket starts full, a changed one keeps
		 * what it holds up to the new burst */
		if (!atomic_load(&b->rate) || t > burst)
			t = burst;
		atomic_store(&b->burst, burst);
		atomic_store(&b->tokens, t);
		atomic_store(&b->stamp_ns, 0);
		atomic_store(&b->rate, rate);
		on |= rate != 0;
	}
	atomic_store(&q->on, on);
}

void qos_limits(const struct qos *q, struct cfg_qos *out)
{
	for (int k = 0; k < CFG_QOS_NR; k++)
		out->limit[k] = atomic_load(&q->b[k].rate);
	out->burst_ms = atomic_load(&q->burst_ms);
}

/*
 * The most b may hold after a refill: its burst, or while commands wait
 * and it is empty (it is what holds them back) a second's worth more,
 * since the time it was empty for them is time they were owed tokens
 * for, however late the worker came to look.
 */
static int64_t refill_cap(uint64_t rate, int64_t burst, int64_t t, bool waiting)
{
	if (waiting && t <= 0)
		return burst + burst_of(rate, QOS_CATCHUP_MS);
	return burst;
}

/* Back to the burst after away_ns without a look (refill()). */
static void cut_surplus(struct qos_bucket *b, uint64_t rate, int64_t burst,
			uint64_t away_ns)
{
	int64_t t = atomic_load(&b->tokens);

	if (away_ns < (uint64_t)((unsigned __int128)burst * NSEC / rate))
		return;
	while (t > burst &&
	       !atomic_compare_exchange_weak(&b->tokens, &t, burst))
		;
}

/*
 * Add the tokens earned since stamp_ns, up to the cap (refill_cap()). A
 * surplus over the burst is what waiting commands are still owed: it is
 * kept while the client keeps coming (a QD16 client takes it 16 commands
 * a round trip, its queue empty in between), and cut back to the burst
 * once nobody waits and nobody came for a burst's time.
 */
static void refill(struct qos_bucket *b, uint64_t rate, uint64_t now,
		   bool waiting)
{
	uint64_t last = atomic_load(&b->stamp_ns), used_ns;
	int64_t burst = atomic_load(&b->burst), cap, t, nt, add;
	unsigned __int128 earned;

	if (!waiting && last && now > last)
		cut_surplus(b, rate, burst, now - last);
	if (last && now <= last)
		return; /* another worker's clock ran ahead: nothing earned */
	if (last == 0 || now - last > 10 * NSEC) {
		/* first use, or idle long enough to be full anyway */
		if (atomic_compare_exchange_strong(&b->stamp_ns, &last, now) &&
		    last != 0)
			atomic_store(&b->tokens, burst);
		return;
	}
	earned = (unsigned __int128)(now - last) * rate / NSEC;
	if (earned == 0)
		return; /* keep the fraction for the next look */
	add = (int64_t)earned;
	used_ns = (uint64_t)((unsigned __int128)earned * NSEC / rate);
	if (!atomic_compare_exchange_strong(&b->stamp_ns, &last,
					    last + used_ns))
		return; /* another worker refilled it */
	t = atomic_load(&b->tokens);
	do {
		cap = refill_cap(rate, burst, t, waiting);
		/* a surplus neither grows nor is cut here */
		nt = t + add <= cap ? t + add : cap > t ? cap : t;
	} while (!atomic_compare_exchange_weak(&b->tokens, &t, nt));
}

/* The buckets a command draws from, and its cost in each. */
static int costs(int opcode, uint32_t length, uint64_t cost[CFG_QOS_NR])
{
	bool rd = opcode == RBLK_OP_READ;

	for (int k = 0; k < CFG_QOS_NR; k++)
		cost[k] = 0;
	switch (opcode) {
	case RBLK_OP_READ:
	case RBLK_OP_WRITE:
		cost[CFG_QOS_BPS] = length;
		cost[rd ? CFG_QOS_READ_BPS : CFG_QOS_WRITE_BPS] = length;
		/* fallthrough */
	case RBLK_OP_WRITE_ZEROES:
	case RBLK_OP_TRIM:
		cost[CFG_QOS_IOPS] = 1;
		cost[rd ? CFG_QOS_READ_IOPS : CFG_QOS_WRITE_IOPS] = 1;
		return 1;
	default:
		return 0; /* FLUSH, KEEPALIVE, ...: never held back */
	}
}

uint64_t qos_admit(struct qos *const *qs, int n, int opcode, uint32_t length,
		   uint64_t now_ns)
{
	uint64_t cost[CFG_QOS_NR], wait = 0;

	if (!costs(opcode, length, cost))
		return 0;
	for (int i = 0; i < n; i++) {
		bool waiting;

		if (!qs[i] || !atomic_load(&qs[i]->on))
			continue;
		waiting = atomic_load(&qs[i]->waiting) > 0;
		for (int k = 0; k < CFG_QOS_NR; k++) {
			struct qos_bucket *b = &qs[i]->b[k];
			uint64_t rate = atomic_load(&b->rate), w, stamp;
			int64_t t;

			if (!cost[k] || !rate)
				continue;
			refill(b, rate, now_ns, waiting);
			t = atomic_load(&b->tokens);
			if (t > 0)
				continue;
			/* until the debt is paid and one token is in,
			 * counting what was earned since the last refill */
			w = (uint64_t)((unsigned __int128)(1 - t) * NSEC /
				       rate) +
			    1;
			stamp = atomic_load(&b->stamp_ns);
			if (now_ns > stamp && now_ns - stamp < w)
				w -= now_ns - stamp;
			if (w > wait)
				wait = w;
		}
	}
	if (wait)
		return wait;
	for (int i = 0; i < n; i++) {
		if (!qs[i] || !atomic_load(&qs[i]->on))
			continue;
		for (int k = 0; k < CFG_QOS_NR; k++)
			if (cost[k] && atomic_load(&qs[i]->b[k].rate))
				atomic_fetch_sub(&qs[i]->b[k].tokens,
						 (int64_t)cost[k]);
	}
	return 0;
}
