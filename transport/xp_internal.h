/* SPDX-License-Identifier: MIT */
/*
 * xp_internal.h - pieces both transports share (transport.c); not part
 * of the API in transport.h.
 */
#ifndef RBLK_XP_INTERNAL_H
#define RBLK_XP_INTERNAL_H

#include "transport.h"

/*
 * An fd a group watches (group_watch): in the group's epoll set with
 * data.u64 = the xp_watch pointer | XP_WATCH_TAG, which no other entry of
 * the set has (pointers and the transports' own tags are even).
 */
#define XP_WATCH_TAG 1ull

struct xp_watch {
	int fd;
	uint64_t cookie;
	struct xp_watch *next;
};

/* Add fd to epfd and to *list. 0 or -errno (logged). */
int xp_watch_add(struct xp_watch **list, int epfd, int fd, uint64_t cookie);
/* Remove fd from epfd and *list. 0 or -ENOENT. */
int xp_watch_del(struct xp_watch **list, int epfd, int fd);
/* Free the list (the group's epoll fd is closed by the caller). */
void xp_watch_free_all(struct xp_watch **list);
/* The completion of a readable watch, from its epoll data. */
struct xp_wc xp_watch_wc(uint64_t data);

/* The completion opcode of a send-queue work request. */
enum xp_wc_opcode xp_wr_wc_opcode(enum xp_wr_opcode op);

#endif
