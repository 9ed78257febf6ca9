/* SPDX-License-Identifier: MIT */
/*
 * URLs: scheme://host[:port][/export]. IPv6 hosts go in brackets.
 */
#ifndef RBLK_COMMON_URL_H
#define RBLK_COMMON_URL_H

#include <stdint.h>

#include "proto.h"

struct rblk_url {
	char scheme[16]; /* "tcp", "rdma" */
	char host[256]; /* without brackets */
	uint16_t port; /* default_port when absent */
	char export_name[RBLK_NAME_MAX]; /* "" when absent */
};

/*
 * Parse url. Returns 0, or -EINVAL with a reason in err (when err is given):
 * missing scheme, empty host, bad port, export name too long or holding
 * characters other than printable ASCII.
 */
int rblk_url_parse(const char *url, uint16_t default_port, struct rblk_url *out,
		   char *err, size_t errlen);

#endif
