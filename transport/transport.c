/* SPDX-License-Identifier: MIT */
#include "transport.h"

#include <string.h>

#include "../common/util.h"

static const struct xp_ops *const transports[] = {
	&xp_tcp_ops,
	&xp_rdma_ops,
};

const struct xp_ops *xp_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(transports); i++)
		if (!strcmp(transports[i]->name, name))
			return transports[i];
	return NULL;
}

const char *xp_wc_status_str(enum xp_wc_status st)
{
	switch (st) {
	case XP_WC_SUCCESS:
		return "success";
	case XP_WC_FLUSH_ERR:
		return "flushed";
	case XP_WC_REM_ACCESS_ERR:
		return "remote access error";
	case XP_WC_LOC_ERR:
		return "local protection/length error";
	case XP_WC_RNR_ERR:
		return "receiver not ready";
	case XP_WC_FATAL:
		return "transport failure";
	}
	return "unknown";
}
