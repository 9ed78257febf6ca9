/* SPDX-License-Identifier: MIT */
/*
 * rblk-target configuration: the INI file (parsed with libinih) and the
 * equivalent command-line options. See docs/man/rblk-target.conf.5.
 */
#ifndef RBLK_CONFIG_H
#define RBLK_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/proto.h"

#define CFG_MAX_LISTEN 16
#define CFG_MAX_EXPORTS 256

/* cfg_export.direct: register the volume itself for each connection */
enum cfg_direct {
	CFG_DIRECT_DEFAULT = 0, /* RAM volumes: yes; files: no */
	CFG_DIRECT_NO,
	CFG_DIRECT_YES, /* files are mmap'd MAP_SHARED; block devices refused */
};

struct cfg_export {
	char name[RBLK_NAME_MAX];
	/* A file or block device path, or "ram:SIZE" (e.g. ram:1G). */
	char path[PATH_MAX];
	bool read_only;
	uint32_t block_size; /* 0: choose (device logical block size or 512) */
	enum cfg_direct direct;
};

struct cfg_target {
	char listen[CFG_MAX_LISTEN][256]; /* URLs: tcp://host:port, rdma://... */
	unsigned int nr_listen;
	struct cfg_export exports[CFG_MAX_EXPORTS];
	unsigned int nr_exports;
	unsigned int workers; /* 0: one per online CPU */
	char engine[16]; /* "io_uring" (default) or "libaio" */
	int log_level; /* enum log_level; -1: not set */
	unsigned int max_queue_depth; /* cap on what initiators may request */
	uint32_t max_io; /* cap on max_io, power of two */
};

/* Defaults: no listeners, no exports, workers 0, engine io_uring,
 * log_level -1, max_queue_depth 128, max_io 1 MiB. */
void cfg_init(struct cfg_target *cfg);

/*
 * Parse an INI file into cfg (on top of what is there). On error returns
 * -errno (-ENOENT, -EINVAL, ...) with "FILE:LINE: reason" in err.
 *
 *   [target]
 *   listen = tcp://0.0.0.0:7441      ; may repeat
 *   workers = 2
 *   engine = io_uring | libaio
 *   log_level = error | warn | info | debug
 *   max_queue_depth = 128
 *   max_io = 1M
 *
 *   [export NAME]
 *   path = /srv/vol0.img | /dev/sdb | ram:1G
 *   read_only = yes | no
 *   block_size = 512 | 4096 ...
 *   direct = yes | no                ; RAM: yes unless no; files: no
 */
int cfg_load(struct cfg_target *cfg, const char *path, char *err,
	     size_t errlen);

/*
 * Parse "NAME=PATH[,ro][,bs=N][,direct|,nodirect]" (the --export option)
 * and add it.
 */
int cfg_add_export_arg(struct cfg_target *cfg, const char *arg, char *err,
		       size_t errlen);

/* Add a listen URL after checking it parses; -EINVAL with reason. */
int cfg_add_listen(struct cfg_target *cfg, const char *url, char *err,
		   size_t errlen);

/* Final checks: at least one export and listener, unique export names. */
int cfg_validate(const struct cfg_target *cfg, char *err, size_t errlen);

#endif
