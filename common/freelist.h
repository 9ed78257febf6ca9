/* SPDX-License-Identifier: MIT */
/*
 * An intrusive LIFO free list: objects of one type linked through one of
 * their own pointer members, with a head pointer of that type (NULL:
 * empty). No allocation, no locking: the list belongs to one thread.
 *
 *   FREELIST_PUSH(head, obj, link)   put obj on the list
 *   FREELIST_POP(head, link)         take the last one put, or NULL
 *
 * e.g. struct op { ...; struct op *next; }; struct op *free_ops;
 *      FREELIST_PUSH(free_ops, op, next); op = FREELIST_POP(free_ops, next);
 */
#ifndef RBLK_COMMON_FREELIST_H
#define RBLK_COMMON_FREELIST_H

#define FREELIST_PUSH(head, obj, link)                                         \
	do {                                                                   \
		(obj)->link = (head);                                          \
		(head) = (obj);                                                \
	} while (0)

#define FREELIST_POP(head, link)                                               \
	({                                                                     \
		__typeof__(head) freelist_obj_ = (head);                       \
		if (freelist_obj_)                                             \
			(head) = freelist_obj_->link;                          \
		freelist_obj_;                                                 \
	})

#endif
