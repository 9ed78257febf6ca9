/* SPDX-License-Identifier: MIT */
/*
 * Private to the control thread's files: ctl.c (the thread and the
 * control socket), ctl_cmd.c (the commands), metrics.c (the Prometheus
 * endpoint). docs/CONTROL.md describes what a client sees.
 */
#ifndef RBLK_TARGET_CTL_H
#define RBLK_TARGET_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/proto.h"
#include "stats.h"
#include "target.h"

/* to send a request, and again to take the answer */
#define CTL_IO_TIMEOUT_S 2
#define CTL_MAX_ARGS 32

/* One control request being run. */
struct ctl_req {
	char *argv[CTL_MAX_ARGS];
	int argc;
	bool json;
	FILE *out;     /* the body */
	char err[512]; /* set: the request failed */
};

/* Set r's error message; returns -1. */
int ctl_req_fail(struct ctl_req *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Run one request line (modified in place); the response, status line
 * "ok" or "error: MESSAGE" then the body, goes to out. Control thread.
 */
void ctl_run(struct target *t, char *line, FILE *out);

/* What is shown of an export, copied under exports_lock. */
struct ctl_export_row {
	char name[RBLK_NAME_MAX];
	char path[4096];
	uint64_t size;
	uint32_t block_size;
	bool read_only;
	unsigned int sessions;
	struct iostats_snap stats;
	struct cfg_qos qos;		       /* its limits now */
	uint64_t throttled_cmds, throttled_ns; /* waited on them */
};

/*
 * Copy the exports (only the one named only, when given) with their
 * statistics. NULL with r->err set when out of memory or only is unknown;
 * the caller frees the rows. Any thread.
 */
struct ctl_export_row *ctl_exports_copy(struct target *t, struct ctl_req *r,
					const char *only, unsigned int *n);

/* ---- the Prometheus endpoint (metrics.c) ------------------------------- */

struct metrics;
/*
 * Serve GET /metrics on url (tcp://HOST:PORT or a bare port, loopback)
 * from libmicrohttpd's own thread: each connection is handled on its own,
 * so an idle or slow client delays nobody else. Returns 0 or -errno
 * after logging why.
 */
int metrics_open(struct target *t, const char *url, struct metrics **out);
/*
 * Cut connections that have not sent a whole request within
 * CTL_IO_TIMEOUT_S (a trickling client); the control thread calls it
 * about once a second.
 */
void metrics_expire(struct metrics *m);
void metrics_close(struct metrics *m);

#endif
