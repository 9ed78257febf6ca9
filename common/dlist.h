/* SPDX-License-Identifier: MIT */
/*
 * An intrusive doubly linked list: objects of one type linked through two
 * of their own pointer members, with a head pointer of that type (NULL:
 * empty). Unlinking needs no walk. No allocation, no locking.
 *
 *   DLIST_PUSH(head, obj, prev, next)    put obj first
 *   DLIST_UNLINK(head, obj, prev, next)  take obj out, wherever it is
 *
 * e.g. struct conn { ...; struct conn *gprev, *gnext; }; struct conn *conns;
 *      DLIST_PUSH(g->conns, c, gprev, gnext);
 */
#ifndef RBLK_COMMON_DLIST_H
#define RBLK_COMMON_DLIST_H

#define DLIST_PUSH(head, obj, prev, next)                                      \
	do {                                                                   \
		(obj)->prev = NULL;                                            \
		(obj)->next = (head);                                          \
		if (head)                                                      \
			(head)->prev = (obj);                                  \
		(head) = (obj);                                                \
	} while (0)

#define DLIST_UNLINK(head, obj, prev, next)                                    \
	do {                                                                   \
		if ((obj)->prev)                                               \
			(obj)->prev->next = (obj)->next;                       \
		else                                                           \
			(head) = (obj)->next;                                  \
		if ((obj)->next)                                               \
			(obj)->next->prev = (obj)->prev;                       \
	} while (0)

#endif
