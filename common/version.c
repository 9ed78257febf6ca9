/* SPDX-License-Identifier: MIT */
#include "version.h"

#include <rblk/rblk.h>

/* build/gen/version.h, rewritten by the Makefile only when it changes */
#include "version-git.h"

const char *rblk_version(void)
{
	if (RBLK_GIT_DESCRIBE[0])
		return RBLK_VERSION_STRING " (git " RBLK_GIT_DESCRIBE ")";
	return RBLK_VERSION_STRING;
}
