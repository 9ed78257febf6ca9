/* SPDX-License-Identifier: MIT */
/*
 * What config.c (the model, its checks, the command-line forms) shares
 * with config_ini.c (the INI file). Not for the rest of the target: it
 * uses config.h.
 */
#ifndef RBLK_CONFIG_INTERNAL_H
#define RBLK_CONFIG_INTERNAL_H

#include "config.h"

#define CFG_MAX_WORKERS 1024

/* format into the caller's err buffer (when given), return ret */
#define fail errbuf_printf

/* add a comma-separated host list to e's allow (ro: allow_ro) list */
int cfg_add_allow(struct cfg_export *e, const char *list, bool ro, char *err,
		  size_t errlen);
int cfg_check_block_size(uint64_t bs, char *err, size_t errlen);
int cfg_check_export_path(const char *path, char *err, size_t errlen);
int cfg_check_host_name(const char *name, char *err, size_t errlen);
int cfg_check_max_io(uint64_t v, char *err, size_t errlen);
struct cfg_export *cfg_find_export(const struct cfg_target *cfg,
				   const char *name);
/* a new export named name in cfg; NULL with *ret and err on failure */
struct cfg_export *cfg_new_export(struct cfg_target *cfg, const char *name,
				  char *err, size_t errlen, int *ret);
struct cfg_host *cfg_new_host(struct cfg_target *cfg, const char *name,
			      char *err, size_t errlen, int *ret);
int cfg_parse_bool(const char *s, bool *out);
/* s without leading and trailing whitespace (trailing cut in place) */
char *cfg_trim(char *s);

#endif
