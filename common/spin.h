/* SPDX-License-Identifier: MIT */
/*
 * Back-off for poll-before-sleep loops (librblk's adaptive rblk_poll(),
 * `rblk nbd --poll-spin-us`). A spin that finds something saves a sleep
 * and a wake-up, which on most machines cost more CPU than the spin did;
 * a spin that finds nothing wasted its budget. So after an empty spin the
 * next 1, 2, 4 ... SPIN_BACKOFF_MAX sleeps skip spinning, and one spin
 * that finds something resets that: a peer slower than the budget (a
 * disk, a loaded target) costs a spin per 64 sleeps, not one per sleep.
 *
 * Between its polls a spin yields the CPU (spin_relax()): where another
 * thread is runnable on this CPU - the client or the target that will
 * produce what we wait for, when three processes share two CPUs - it runs
 * at once instead of waiting for our spin to end, and where none is the
 * yield returns at once. Without it a spinning `rblk nbd` cost more CPU
 * per request at QD32 for no more IOPS (docs/BENCHMARKS.md, "Polling
 * before sleeping").
 */
#ifndef RBLK_COMMON_SPIN_H
#define RBLK_COMMON_SPIN_H

#include <sched.h>
#include <stdbool.h>

#include "util.h"

#define SPIN_BACKOFF_MAX 64

struct spin_backoff {
	unsigned int skip;    /* sleeps left that do not spin */
	unsigned int backoff; /* skip after the next empty spin */
};

/* True when this sleep should spin first; false uses up one skip. */
static inline bool spin_wanted(struct spin_backoff *s)
{
	if (!s->skip)
		return true;
	s->skip--;
	return false;
}

/* Between two polls of a spin: let a runnable thread have this CPU. */
static inline void spin_relax(void)
{
	sched_yield();
}

/* Record how a spin went. */
static inline void spin_result(struct spin_backoff *s, bool found)
{
	if (found) {
		s->backoff = 0;
		return;
	}
	s->backoff = !s->backoff			 ? 1
		     : 2 * s->backoff > SPIN_BACKOFF_MAX ? SPIN_BACKOFF_MAX
							 : 2 * s->backoff;
	s->skip = s->backoff;
}

/*
 * One poll-before-sleep: unless the back-off says to skip it, call
 * poll(arg) until it returns non-zero or spin_us have passed, yielding
 * between calls; a positive return is a find, a negative one ends the
 * spin without (someone else wants the thread). Records the result.
 * True when something was found.
 */
static inline bool spin_run(struct spin_backoff *s, unsigned int spin_us,
			    int (*poll)(void *arg), void *arg)
{
	uint64_t end;
	int r;

	if (!spin_wanted(s))
		return false;
	end = now_ns() + (uint64_t)spin_us * 1000;
	while (!(r = poll(arg))) {
		if (now_ns() >= end)
			break;
		spin_relax();
	}
	spin_result(s, r > 0);
	return r > 0;
}

#endif
