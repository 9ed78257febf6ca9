/* SPDX-License-Identifier: MIT */
/*
 * The registry of I/O engines: the configuration names one, the main
 * thread looks it up here and every worker uses its ops (engine.h).
 */
#include "engine.h"

#include <string.h>

#include "../common/util.h"

const struct engine_ops *engine_find(const char *name)
{
	static const struct engine_ops *const engines[] = {
	    &engine_uring_ops,
	    &engine_aio_ops,
	};

	for (size_t i = 0; i < ARRAY_SIZE(engines); i++)
		if (!strcmp(engines[i]->name, name))
			return engines[i];
	return NULL;
}
