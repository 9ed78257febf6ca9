/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the `rblk` subcommands: parsing the options several of
 * them take (-o, -t, -L) and the volume id as text. JSON output goes
 * through common/json.h.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "cli.h"

int cli_parse_output(const char *cmd, const char *arg, bool *json)
{
	if (!strcmp(arg, "json")) {
		*json = true;
	} else if (strcmp(arg, "text")) {
		fprintf(stderr, "rblk %s: unknown output format '%s' (text, json)\n",
			cmd, arg);
		return -1;
	}
	return 0;
}

int cli_parse_timeout(const char *cmd, const char *arg, int *timeout_ms)
{
	*timeout_ms = atoi(arg);
	if (*timeout_ms <= 0) {
		fprintf(stderr, "rblk %s: bad timeout '%s'\n", cmd, arg);
		return -1;
	}
	return 0;
}

int cli_parse_log_level(const char *cmd, const char *arg)
{
	int lvl = log_parse_level(arg);

	if (lvl < 0) {
		fprintf(stderr,
			"rblk %s: --log-level: '%s': expected error, warn, info or debug\n",
			cmd, arg);
		return -1;
	}
	log_set_level(lvl);
	return 0;
}

void cli_format_vol_id(const uint8_t id[16], char out[CLI_VOL_ID_STR_LEN])
{
	char *p = out;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		p += sprintf(p, "%02x", id[i]);
	}
}
