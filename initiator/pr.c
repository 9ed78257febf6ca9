/* SPDX-License-Identifier: MIT */
/*
 * `rblk pr ACTION URL`: persistent reservations from the command line,
 * one librblk call each (rblk_pr_*(), include/rblk/rblk.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rblk/rblk.h>

#include "../common/json.h"
#include "cli.h"

enum {
	OPT_KEY = 0x4100,
	OPT_OLD_KEY,
	OPT_VICTIM_KEY,
	OPT_TYPE,
	OPT_ABORT,
	OPT_IGNORE_KEY,
};

static const struct {
	const char *name, *alias;
	enum rblk_pr_type type;
} types[] = {
    {"write-exclusive", "we", RBLK_PR_WRITE_EXCLUSIVE},
    {"exclusive-access", "ea", RBLK_PR_EXCLUSIVE_ACCESS},
    {"write-exclusive-reg-only", "we-ro", RBLK_PR_WRITE_EXCLUSIVE_REG_ONLY},
    {"exclusive-access-reg-only", "ea-ro", RBLK_PR_EXCLUSIVE_ACCESS_REG_ONLY},
    {"write-exclusive-all-regs", "we-ar", RBLK_PR_WRITE_EXCLUSIVE_ALL_REGS},
    {"exclusive-access-all-regs", "ea-ar", RBLK_PR_EXCLUSIVE_ACCESS_ALL_REGS},
};

static void pr_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk pr ACTION [options] URL\n"
	    "Persistent reservations (NVMe semantics) of the volume at URL, as\n"
	    "this host (--host-name). A conflict fails with 'reservation\n"
	    "conflict' (EBADE) and exit status 3.\n"
	    "Actions:\n"
	    "  register    --key K [--old-key K] [--ignore-key]\n"
	    "              register K (or replace the old key with K)\n"
	    "  unregister  --key K [--ignore-key]\n"
	    "  reserve     --key K --type T     acquire a reservation of type T\n"
	    "  release     --key K --type T\n"
	    "  preempt     --key K --victim-key V --type T [--abort]\n"
	    "              remove the registrants holding V (and take the\n"
	    "              reservation if V is the holder's); --abort also\n"
	    "              fails their commands not yet started\n"
	    "  clear       --key K              remove every registration\n"
	    "  report                           show registrants and holder\n"
	    "Types: write-exclusive (we), exclusive-access (ea),\n"
	    "  write-exclusive-reg-only (we-ro), exclusive-access-reg-only\n"
	    "  (ea-ro), write-exclusive-all-regs (we-ar),\n"
	    "  exclusive-access-all-regs (ea-ar)\n"
	    "Keys: decimal or 0x hexadecimal, non-zero, 64 bits.\n"
	    "Options:\n"
	    "  -o, --output FORMAT  text (default) or json\n"
	    "  -t, --timeout MS     connect/login timeout (default 10000)\n"
	    "  -L, --log-level L    error, warn (default), info, debug\n" CLI_PATH_HELP
		CLI_AUTH_HELP "  -h, --help           show this help\n");
}

static int parse_key(const char *arg, uint64_t *key)
{
	char *end;

	errno = 0;
	*key = strtoull(arg, &end, 0);
	if (errno || !*arg || *end || arg[0] == '-')
		return cli_usage_error("pr", "bad key '%s'", arg);
	return 0;
}

static int parse_type(const char *arg, int *type)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (!strcmp(arg, types[i].name) ||
		    !strcmp(arg, types[i].alias)) {
			*type = (int)types[i].type;
			return 0;
		}
	}
	return cli_usage_error("pr", "unknown reservation type '%s'", arg);
}

struct pr_args {
	const char *action;
	uint64_t key, old_key, victim;
	bool has_key, has_victim, abort, ignore;
	int type;
	bool json;
};

static void print_report(const char *url, const struct rblk_pr_status *s,
			 bool json)
{
	const char *tn = s->type ? rblk_pr_type_name(s->type) : "none";

	if (json) {
		struct json_object *o = json_object_new_object();
		struct json_object *a = json_object_new_array();
		const char *holder = NULL;

		rjson_add_str(o, "url", url);
		rjson_add_u64(o, "generation", s->generation);
		rjson_add_str(o, "type", tn);
		for (unsigned int i = 0; i < s->nr_registrants; i++) {
			const struct rblk_pr_registrant *g = &s->registrants[i];
			struct json_object *e = json_object_new_object();
			char key[24];

			snprintf(key, sizeof(key), "0x%" PRIx64, g->key);
			rjson_add_str(e, "host", g->host);
			rjson_add_str(e, "key", key);
			rjson_add_bool(e, "holder", g->holder);
			json_object_array_add(a, e);
			if (g->holder && !holder)
				holder = g->host;
		}
		rjson_add_str(o, "holder", holder);
		rjson_add(o, "registrants", a);
		rjson_print(stdout, o);
		return;
	}
	printf("generation:  %" PRIu32 "\n", s->generation);
	printf("reservation: %s\n", tn);
	printf("registrants: %u\n", s->nr_registrants);
	for (unsigned int i = 0; i < s->nr_registrants; i++)
		printf("  key 0x%016" PRIx64 "  host %s%s\n",
		       s->registrants[i].key, s->registrants[i].host,
		       s->registrants[i].holder ? "  (holder)" : "");
}

/* Run a's action on r: 0, or -errno. */
static int run_action(struct rblk *r, const struct pr_args *a, const char *url)
{
	const char *act = a->action;
	unsigned int fl = a->ignore ? RBLK_PR_IGNORE_KEY : 0;
	struct rblk_pr_status *s;
	int ret;

	if (!strcmp(act, "register"))
		return rblk_pr_register(r, a->old_key, a->key, fl);
	if (!strcmp(act, "unregister"))
		return rblk_pr_register(r, a->key, 0, fl);
	if (!strcmp(act, "reserve"))
		return rblk_pr_reserve(r, a->key, a->type);
	if (!strcmp(act, "release"))
		return rblk_pr_release(r, a->key, a->type);
	if (!strcmp(act, "preempt"))
		return rblk_pr_preempt(r, a->key, a->victim, a->type, a->abort);
	if (!strcmp(act, "clear"))
		return rblk_pr_clear(r, a->key);
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	ret = rblk_pr_report(r, s);
	if (!ret)
		print_report(url, s, a->json);
	free(s);
	return ret;
}

/* The options each action needs; a usage error (2) when one is missing. */
static int check_args(const struct pr_args *a)
{
	const char *act = a->action;
	bool typed = !strcmp(act, "reserve") || !strcmp(act, "release") ||
		     !strcmp(act, "preempt");

	if (strcmp(act, "register") && strcmp(act, "unregister") &&
	    strcmp(act, "report") && strcmp(act, "clear") && !typed)
		return cli_usage_error("pr", "unknown action '%s'", act);
	if (strcmp(act, "report") && (!a->has_key || !a->key))
		return cli_usage_error("pr", "%s needs --key (non-zero)", act);
	if (typed && !a->type)
		return cli_usage_error("pr", "%s needs --type", act);
	if (!strcmp(act, "preempt") && !a->has_victim)
		return cli_usage_error("pr", "preempt needs --victim-key");
	return 0;
}

int cmd_pr(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"timeout", required_argument, NULL, 't'},
	    {"log-level", required_argument, NULL, 'L'},
	    {"key", required_argument, NULL, OPT_KEY},
	    {"old-key", required_argument, NULL, OPT_OLD_KEY},
	    {"victim-key", required_argument, NULL, OPT_VICTIM_KEY},
	    {"type", required_argument, NULL, OPT_TYPE},
	    {"abort", no_argument, NULL, OPT_ABORT},
	    {"ignore-key", no_argument, NULL, OPT_IGNORE_KEY},
	    {"help", no_argument, NULL, 'h'},
	    CLI_AUTH_LONGOPTS,
	    CLI_PATH_LONGOPTS,
	    {0},
	};
	struct cli_auth auth = {0};
	struct cli_paths paths = {.failback_ms = -1};
	struct pr_args a = {0};
	struct rblk_opts o;
	struct rblk *r;
	const char *url;
	int c, ret;

	if (argc >= 2 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		pr_usage(stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		pr_usage(stderr);
		return 2;
	}
	a.action = argv[1];
	argc--;
	argv++;
	rblk_opts_init(&o);
	while ((c = getopt_long(argc, argv, "o:t:L:h", opts, NULL)) != -1) {
		if (cli_auth_opt(c, optarg, &auth))
			continue;
		ret = cli_path_opt("pr", c, optarg, &paths);
		if (ret < 0)
			return 2;
		if (ret)
			continue;
		switch (c) {
		case 'o':
			if (cli_parse_output("pr", optarg, &a.json))
				return 2;
			break;
		case 't':
			if (cli_parse_timeout("pr", optarg, &o.timeout_ms))
				return 2;
			break;
		case 'L':
			if (cli_parse_log_level("pr", optarg))
				return 2;
			break;
		case OPT_KEY:
			if (parse_key(optarg, &a.key))
				return 2;
			a.has_key = true;
			break;
		case OPT_OLD_KEY:
			if (parse_key(optarg, &a.old_key))
				return 2;
			break;
		case OPT_VICTIM_KEY:
			if (parse_key(optarg, &a.victim))
				return 2;
			a.has_victim = true;
			break;
		case OPT_TYPE:
			if (parse_type(optarg, &a.type))
				return 2;
			break;
		case OPT_ABORT:
			a.abort = true;
			break;
		case OPT_IGNORE_KEY:
			a.ignore = true;
			break;
		case 'h':
			pr_usage(stdout);
			return 0;
		default:
			pr_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		pr_usage(stderr);
		return 2;
	}
	if (check_args(&a))
		return 2;
	url = argv[optind];
	/* one command at a time, no data but a report: the smallest queue */
	o.queue_depth = 4;
	o.max_io = 64 << 10;
	o.inline_data = -1;
	o.direct = RBLK_DIRECT_OFF;
	cli_auth_apply(&auth, &o);
	cli_paths_apply(&paths, &o);
	ret = rblk_open(url, &o, &r);
	if (!ret) {
		ret = run_action(r, &a, url);
		rblk_close(r);
	}
	if (ret) {
		if (a.json) {
			struct json_object *j = json_object_new_object();

			rjson_add_str(j, "url", url);
			rjson_add_str(j, "action", a.action);
			rjson_add_bool(j, "ok", 0);
			rjson_add_str(j, "errno",
				      ret == -EBADE ? "EBADE"
						    : strerrorname_np(-ret));
			rjson_add_str(j, "error", rblk_last_error());
			rjson_print(stdout, j);
		}
		cli_error("pr", "%s", rblk_last_error());
		return ret == -EBADE ? 3 : 1;
	}
	if (a.json && strcmp(a.action, "report")) {
		struct json_object *j = json_object_new_object();

		rjson_add_str(j, "url", url);
		rjson_add_str(j, "action", a.action);
		rjson_add_bool(j, "ok", 1);
		rjson_print(stdout, j);
	}
	return 0;
}
