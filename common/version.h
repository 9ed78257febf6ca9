/* SPDX-License-Identifier: MIT */
/*
 * The version every program prints: RBLK_VERSION_STRING from the public
 * header (the one place the release number lives), followed by
 * `git describe` of the tree it was built from, when there was one.
 */
#ifndef RBLK_COMMON_VERSION_H
#define RBLK_COMMON_VERSION_H

/* "0.1.0" or "0.1.0 (git ad3e5ca-dirty)"; static storage. */
const char *rblk_version(void);

#endif
