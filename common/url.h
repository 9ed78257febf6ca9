/* SPDX-License-Identifier: MIT */
/*
 * URLs: scheme://host[:port][/export]. IPv6 hosts go in brackets. A unix
 * stream socket on this host (the socket transport, without TCP): as NBD
 * URIs name one, unix:///[export]?socket=/absolute/path.
 */
#ifndef RBLK_COMMON_URL_H
#define RBLK_COMMON_URL_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

/* sun_path's size: the longest unix socket path is one byte less */
#define RBLK_UNIX_PATH_MAX 108

struct rblk_url {
	char scheme[16]; /* "tcp", "rdma", "unix" */
	char host[256];	 /* without brackets; unix: the socket's path */
	uint16_t port;	 /* default_port when absent; unix: 0 */
	char export_name[RBLK_NAME_MAX]; /* "" when absent */
};

/*
 * Parse url. Returns 0, or -EINVAL with a reason in err (when err is given):
 * missing scheme, empty host, bad port, export name too long or holding
 * characters other than printable ASCII.
 */
int rblk_url_parse(const char *url, uint16_t default_port, struct rblk_url *out,
		   char *err, size_t errlen);

/*
 * The endpoint u names, without its export, for messages: tcp://HOST:PORT,
 * tcp://[V6]:PORT, unix:///?socket=PATH. snprintf's return.
 */
int rblk_url_endpoint(const struct rblk_url *u, char *buf, size_t size);
/* What a URL of scheme looks like, for messages: tcp://HOST[:PORT]/EXPORT. */
const char *rblk_url_form(const char *scheme, bool with_export);
/* The same in a buffer of the calling thread's, good until its next call. */
const char *rblk_url_str(const struct rblk_url *u);

#endif
