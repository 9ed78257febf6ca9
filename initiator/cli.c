/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the `rblk` subcommands: parsing the options several of
 * them take (-o, -t, -L, --path, --failback), their error messages and the
 * volume id as text.
 * JSON output goes through common/json.h.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "cli.h"

static void cli_vmsg(const char *cmd, const char *fmt, va_list ap)
{
	fprintf(stderr, "rblk %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_vmsg(cmd, fmt, ap);
	va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_vmsg(cmd, fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try 'rblk %s --help'.\n", cmd);
	return 2;
}

int cli_parse_output(const char *cmd, const char *arg, bool *json)
{
	if (!strcmp(arg, "json")) {
		*json = true;
	} else if (strcmp(arg, "text")) {
		fprintf(stderr,
			"rblk %s: unknown output format '%s' (text, json)\n",
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
		fprintf(
		    stderr,
		    "rblk %s: --log-level: '%s': expected error, warn, info or debug\n",
		    cmd, arg);
		return -1;
	}
	log_set_level(lvl);
	return 0;
}

int cli_path_opt(const char *cmd, int ch, const char *arg, struct cli_paths *p)
{
	char *end;
	double v;

	switch (ch) {
	case CLI_OPT_PATH:
		if (p->n == RBLK_MAX_PATHS - 1) {
			fprintf(stderr, "rblk %s: at most %d --path options\n",
				cmd, RBLK_MAX_PATHS - 1);
			return -1;
		}
		p->v[p->n++] = arg;
		return 1;
	case CLI_OPT_FAILBACK:
		v = strtod(arg, &end);
		if (*end || end == arg || !(v >= 0 && v <= 86400)) {
			fprintf(
			    stderr,
			    "rblk %s: --failback: '%s' is not a number of seconds\n",
			    cmd, arg);
			return -1;
		}
		p->failback_ms = (int)(v * 1000 + 0.5);
		return 1;
	}
	return 0;
}

int cli_io_opt(const char *cmd, int ch, const char *arg, struct cli_io *c)
{
	char *end;
	double v;
	long n;

	switch (ch) {
	case CLI_OPT_IO_TIMEOUT:
		v = strtod(arg, &end);
		if (*end || end == arg || !(v >= 0 && v <= 86400)) {
			fprintf(
			    stderr,
			    "rblk %s: --io-timeout: '%s' is not a number of seconds (0..86400)\n",
			    cmd, arg);
			return -1;
		}
		c->timeout_ms = (int)(v * 1000 + 0.5);
		if (v > 0 && !c->timeout_ms)
			c->timeout_ms = 1;
		c->has_timeout = true;
		return 1;
	case CLI_OPT_IO_RETRIES:
		n = strtol(arg, &end, 10);
		if (*end || end == arg || n < -1 || n > 1000) {
			fprintf(
			    stderr,
			    "rblk %s: --io-retries: '%s' is not a number from -1 to 1000\n",
			    cmd, arg);
			return -1;
		}
		c->retries = (int)n;
		c->has_retries = true;
		return 1;
	}
	return 0;
}

void cli_io_apply(const struct cli_io *c, struct rblk_opts *o)
{
	if (c->has_timeout)
		o->io_timeout_ms = c->timeout_ms;
	if (c->has_retries)
		o->io_retries = c->retries;
}

void cli_paths_apply(const struct cli_paths *p, struct rblk_opts *o)
{
	o->paths = p->n ? p->v : NULL;
	o->nr_paths = p->n;
	if (p->failback_ms >= 0)
		o->failback_ms = p->failback_ms;
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
