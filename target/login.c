/* SPDX-License-Identifier: MIT */
/*
 * The target's answer to a HELLO, as a pure function: no I/O, no
 * allocation, no logging. worker.c calls it and then does the side effects
 * (slot region, registration, LOGIN send); tests/fuzz/fuzz_login.c calls
 * the same function with arbitrary bytes.
 */
#include "target.h"

#include <stdio.h>
#include <string.h>

#include "../common/util.h"

int login_decide(const void *buf, size_t len, uint16_t cm_qd,
		 uint32_t cfg_max_io, login_lookup_fn lookup, void *ctx,
		 struct login_plan *p)
{
	struct export *e;
	int st;

	memset(p, 0, sizeof(*p));
	st = rblk_hello_decode(buf, len, &p->hello);
	if (st) {
		snprintf(p->why, sizeof(p->why), "%s", rblk_status_str(st));
		return st;
	}
	if (p->hello.flags & RBLK_HELLO_F_DISCOVER) {
		p->discover = true; /* no export, nothing granted */
		return RBLK_S_OK;
	}
	e = lookup(ctx, p->hello.export_name);
	if (!e) {
		snprintf(p->why, sizeof(p->why), "no export named '%s'",
			 p->hello.export_name);
		return RBLK_S_NO_EXPORT;
	}
	p->exp = e;
	p->lim.queue_depth = MIN(p->hello.queue_depth, cm_qd);
	p->lim.max_io = MIN(p->hello.max_io, cfg_max_io);
	if (p->lim.max_io < e->block_size) {
		snprintf(p->why, sizeof(p->why),
			 "max I/O %u below export %s's block size %u",
			 p->lim.max_io, e->name, e->block_size);
		return RBLK_S_INVALID;
	}
	p->lim.block_size = e->block_size;
	p->lim.size = e->size;
	p->lim.features = e->features | RBLK_F_PUSH;
	if (p->hello.flags & RBLK_HELLO_F_READ_ONLY)
		p->lim.features |= RBLK_F_READ_ONLY;
	return RBLK_S_OK;
}

void login_reply(const struct rblk_limits *lim, uint64_t slot_addr,
		 uint32_t slot_rkey, struct rblk_login *l)
{
	memset(l, 0, sizeof(*l));
	l->status = RBLK_S_OK;
	l->queue_depth = lim->queue_depth;
	l->max_io = lim->max_io;
	l->block_size = lim->block_size;
	l->size = lim->size;
	l->features = lim->features;
	l->slot_rkey = slot_rkey;
	l->slot_addr = slot_addr;
	l->slot_len = (uint64_t)lim->queue_depth * lim->max_io;
}
