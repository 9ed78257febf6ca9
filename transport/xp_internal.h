/* SPDX-License-Identifier: MIT */
/*
 * xp_internal.h - pieces both transports share (transport.c); not part
 * of the API in transport.h.
 */
#ifndef RBLK_XP_INTERNAL_H
#define RBLK_XP_INTERNAL_H

#include "transport.h"

/*
 * An fd a group watches (xp_group_watch()): in the group's epoll set with
 * data.u64 = the xp_watch pointer | XP_WATCH_TAG, which no other entry of
 * the set has (pointers and the transports' own tags are even).
 */
#define XP_WATCH_TAG 1ull

struct xp_watch {
	int fd;
	uint64_t cookie;
	struct xp_watch *next;
};

/*
 * Free the group's watch list (xp_group_watch() adds to it); the group's
 * epoll fd is closed by the caller.
 */
void xp_watch_free_all(struct xp_watch **list);
/* The completion of a readable watch, from its epoll data. */
struct xp_wc xp_watch_wc(uint64_t data);

/* The completion opcode of a send-queue work request. */
enum xp_wc_opcode xp_wr_wc_opcode(enum xp_wr_opcode op);

#endif
