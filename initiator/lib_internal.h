/* SPDX-License-Identifier: MIT */
/*
 * librblk internals shared by its source files (not exported: the version
 * script keeps every symbol but the public rblk_* ones local).
 */
#ifndef RBLK_INITIATOR_LIB_INTERNAL_H
#define RBLK_INITIATOR_LIB_INTERNAL_H

/* Set this thread's rblk_last_error() text; returns err. */
__attribute__((format(printf, 2, 3))) int lib_set_error(int err,
							const char *fmt, ...);
/* Clear it at the start of a public call. */
void lib_clear_error(void);

#endif
