/* SPDX-License-Identifier: MIT */
/*
 * `rblk discover URL`: list the exports a target lets this host see, and
 * `rblk version`.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rblk/rblk.h>

#include "../common/json.h"
#include "../common/proto.h"
#include "../common/util.h"
#include "../common/version.h"
#include "cli.h"

static void discover_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk discover URL [-o text|json] [--timeout MS] [--host-name NAME]\n"
	    "List the exports the target at URL (tcp://HOST[:PORT] or\n"
	    "rdma://HOST[:PORT], default port 7441) lets this host see, with\n"
	    "size, block size, read-only and features.\n\n"
	    "  -o, --output FORMAT  text (default) or json:\n"
	    "                       {\"url\", \"exports\": [{\"name\", \"size\",\n"
	    "                       \"block_size\", \"read_only\", \"features\": [...]}]}\n"
	    "  -t, --timeout MS     connect/answer timeout (default 10000)\n"
	    "  -H, --host-name NAME name this host to the target (default: hostname)\n"
	    "  -L, --log-level L    error, warn (default), info, debug\n"
	    "      --tls            TLS 1.3 on tcp://: a PSK from --key-file's\n"
	    "                       secret, or X.509 with --tls-ca FILE\n"
	    "      --key-file PATH  this host's secret (for the PSK)\n"
	    "      --tls-ca FILE    CA the target's certificate must chain to\n"
	    "      --tls-cert FILE, --tls-key FILE  this host's certificate\n"
	    "  -h, --help           show this help\n\n"
	    "Exit status: 0 listed (possibly none), 1 error, 2 usage error.\n");
}

static const struct {
	unsigned int bit;
	const char *name;
} feature_names[] = {
    {RBLK_FEAT_FLUSH, "flush"}, {RBLK_FEAT_FUA, "fua"},
    {RBLK_FEAT_TRIM, "trim"},	{RBLK_FEAT_ZEROES, "write-zeroes"},
    {RBLK_FEAT_PUSH, "push"},
};

static void print_json(const char *url, const struct rblk_export_entry *l,
		       int n)
{
	struct json_object *o = json_object_new_object();
	struct json_object *list = json_object_new_array();

	rjson_add_str(o, "url", url);
	for (int i = 0; i < n; i++) {
		struct json_object *x = json_object_new_object();
		struct json_object *feats = json_object_new_array();

		rjson_add_str(x, "name", l[i].name);
		rjson_add_u64(x, "size", l[i].size);
		rjson_add_u64(x, "block_size", l[i].block_size);
		rjson_add_bool(x, "read_only",
			       l[i].features & RBLK_FEAT_READ_ONLY);
		for (size_t f = 0; f < ARRAY_SIZE(feature_names); f++)
			if (l[i].features & feature_names[f].bit)
				json_object_array_add(
				    feats, rjson_str(feature_names[f].name));
		rjson_add(x, "features", feats);
		json_object_array_add(list, x);
	}
	rjson_add(o, "exports", list);
	rjson_print(stdout, o);
}

static void print_text(const struct rblk_export_entry *l, int n)
{
	if (!n) {
		printf("no exports visible to this host\n");
		return;
	}
	printf("%-24s %16s %6s %-3s %s\n", "EXPORT", "SIZE", "BS", "RO",
	       "FEATURES");
	for (int i = 0; i < n; i++) {
		char feats[96] = "";

		for (size_t f = 0;
		     f < sizeof(feature_names) / sizeof(feature_names[0]);
		     f++) {
			if (!(l[i].features & feature_names[f].bit))
				continue;
			if (feats[0])
				strcat(feats, ",");
			strcat(feats, feature_names[f].name);
		}
		printf("%-24s %16llu %6u %-3s %s\n", l[i].name,
		       (unsigned long long)l[i].size, l[i].block_size,
		       l[i].features & RBLK_FEAT_READ_ONLY ? "yes" : "no",
		       feats[0] ? feats : "-");
	}
}

int cmd_discover(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"timeout", required_argument, NULL, 't'},
	    {"host-name", required_argument, NULL, 'H'},
	    {"log-level", required_argument, NULL, 'L'},
	    {"help", no_argument, NULL, 'h'},
	    {"key-file", required_argument, NULL, CLI_OPT_KEY_FILE},
	    {"tls", no_argument, NULL, CLI_OPT_TLS},
	    {"tls-ca", required_argument, NULL, CLI_OPT_TLS_CA},
	    {"tls-cert", required_argument, NULL, CLI_OPT_TLS_CERT},
	    {"tls-key", required_argument, NULL, CLI_OPT_TLS_KEY},
	    {0},
	};
	struct rblk_export_entry *list;
	struct cli_auth auth = {0};
	struct rblk_opts o;
	bool json = false;
	int c, n;

	rblk_opts_init(&o);
	while ((c = getopt_long(argc, argv, "o:t:H:L:h", opts, NULL)) != -1) {
		if (cli_auth_opt(c, optarg, &auth))
			continue;
		switch (c) {
		case 'o':
			if (cli_parse_output("discover", optarg, &json))
				return 2;
			break;
		case 't':
			if (cli_parse_timeout("discover", optarg,
					      &o.timeout_ms))
				return 2;
			break;
		case 'H':
			o.host_name = optarg;
			break;
		case 'L':
			if (cli_parse_log_level("discover", optarg))
				return 2;
			break;
		case 'h':
			discover_usage(stdout);
			return 0;
		default:
			discover_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		discover_usage(stderr);
		return 2;
	}
	auth.host_name = o.host_name;
	cli_auth_apply(&auth, &o);
	n = rblk_discover(argv[optind], &o, &list);
	if (n < 0) {
		fprintf(stderr, "rblk discover: %s\n", rblk_last_error());
		return 1;
	}
	if (json)
		print_json(argv[optind], list, n);
	else
		print_text(list, n);
	free(list);
	return 0;
}

int cmd_version(int argc, char **argv)
{
	if (argc > 1 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf(
		    "Usage: rblk version\nPrint the version of rblk and librblk.\n");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "Usage: rblk version\n");
		return 2;
	}
	printf("rblk %s (protocol %d)\n", rblk_version(), RBLK_PROTO_VERSION);
	return 0;
}
