/* SPDX-License-Identifier: MIT */
/*
 * An intrusive FIFO: objects of one type linked through one of their own
 * pointer members, with head and tail pointers of that type (both NULL:
 * empty). No allocation, no locking: the queue belongs to one thread.
 * The LIFO twin is common/freelist.h.
 *
 *   FIFO_PUSH(head, tail, obj, link)   append obj
 *   FIFO_POP(head, tail, link)         take the oldest, or NULL
 *
 * e.g. struct req { ...; struct req *next_wait; };
 *      struct req *wait_head, *wait_tail;
 *      FIFO_PUSH(wait_head, wait_tail, r, next_wait);
 *      r = FIFO_POP(wait_head, wait_tail, next_wait);
 */
#ifndef RBLK_COMMON_FIFO_H
#define RBLK_COMMON_FIFO_H

#define FIFO_PUSH(head, tail, obj, link)                                       \
	do {                                                                   \
		(obj)->link = NULL;                                            \
		if (tail)                                                      \
			(tail)->link = (obj);                                  \
		else                                                           \
			(head) = (obj);                                        \
		(tail) = (obj);                                                \
	} while (0)

#define FIFO_POP(head, tail, link)                                             \
	({                                                                     \
		__typeof__(head) fifo_obj_ = (head);                           \
		if (fifo_obj_) {                                               \
			(head) = fifo_obj_->link;                              \
			if (!(head))                                           \
				(tail) = NULL;                                 \
		}                                                              \
		fifo_obj_;                                                     \
	})

#endif
