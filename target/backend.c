/* SPDX-License-Identifier: MIT */
/*
 * The registry of backends (backend.h, struct backend_ops): which one
 * serves an export's path, and opening it, its fallback included; and
 * the test aid all of them obey (RBLK_TARGET_UNSAFE_ACK).
 */
#include "backend.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../config/config.h"

/* The backends a path names by its prefix ("ram:SIZE", "rbd:POOL/IMAGE"). */
static const struct backend_ops *const backends[] = {
    &backend_ram_ops,
    &backend_rbd_ops,
};

int open_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

unsigned int export_unsafe_ack;

int export_unsafe_ack_init(void)
{
	const char *v = getenv("RBLK_TARGET_UNSAFE_ACK");
	char buf[64], *tok, *save = NULL;

	if (!v || !*v)
		return 0;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "flush")) {
			export_unsafe_ack |= UNSAFE_ACK_FLUSH;
		} else if (!strcmp(tok, "fua")) {
			export_unsafe_ack |= UNSAFE_ACK_FUA;
		} else {
			log_err("RBLK_TARGET_UNSAFE_ACK='%s': want flush, fua "
				"or flush,fua",
				v);
			return -EINVAL;
		}
	}
	log_warn("**************************************************");
	log_warn("RBLK_TARGET_UNSAFE_ACK=%s: THIS TARGET LIES (a test aid).",
		 v);
	if (export_unsafe_ack & UNSAFE_ACK_FLUSH)
		log_warn("FLUSH is answered OK without syncing anything.");
	if (export_unsafe_ack & UNSAFE_ACK_FUA)
		log_warn(
		    "FUA writes are acknowledged before they are durable.");
	log_warn("Acknowledged data WILL be lost on a crash. Never in use.");
	log_warn("**************************************************");
	return 0;
}

static const struct backend_ops *backend_select(const struct cfg_export *cfg)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
		const char *prefix = backends[i]->prefix;

		if (!strncmp(cfg->path, prefix, strlen(prefix)))
			return backends[i];
	}
	/* no prefix: a file or block device, mapped when `direct` asks */
	return cfg->direct == CFG_DIRECT_YES ? &backend_mmap_ops
					     : &backend_file_ops;
}

int backend_open(struct export *e, const struct cfg_export *cfg, char *err,
		 size_t errlen)
{
	const struct backend_ops *ops = backend_select(cfg);
	int ret;

	if (cfg->cache_buffered && !(ops->flags & BACKEND_F_BUFFERED))
		return open_fail(
		    err, errlen, -EINVAL,
		    "cache=buffered applies to files and block devices on the slot path (not ram:, rbd: or direct)");
	e->ops = ops;
	ret = ops->open(e, cfg, err, errlen);
	if (ret == BACKEND_FALLBACK && ops->fallback) {
		/* e is open as the fallback's: it serves e from here on */
		e->ops = ops->fallback;
		ret = 0;
	} else if (ret == BACKEND_FALLBACK) {
		ret = open_fail(err, errlen, -EINVAL,
				"%s: the %s backend cannot serve it here",
				cfg->path, ops->name);
	}
	if (ret)
		return ret;
	/*
	 * Direct access unless the export says nodirect (a file's mmap
	 * backend is chosen by `direct` itself) or has QoS limits: they
	 * count commands, and a direct volume has none.
	 */
	e->direct = (e->ops->flags & BACKEND_F_DIRECT) &&
		    cfg->direct != CFG_DIRECT_NO && !cfg_qos_any(&cfg->qos);
	return 0;
}
