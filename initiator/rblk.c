/* SPDX-License-Identifier: MIT */
/*
 * rblk: the initiator command line. Subcommands live in their own files and
 * are listed in the table below.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rblk/rblk.h>

#include "../common/json.h"
#include "../common/log.h"
#include "../common/proto.h"
#include "cli.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
    {"info", cmd_info, "show a volume's size, block size and features"},
    {"nbd", cmd_nbd, "serve a volume to NBD clients (unix or TCP socket)"},
    {"map", cmd_map, "present a volume as a local block device (ublk, nbd)"},
    {"unmap", cmd_unmap, "remove a device made by 'rblk map'"},
    {"list", cmd_list, "show the devices made by 'rblk map'"},
    {"discover", cmd_discover, "list the exports a target lets this host see"},
    {"pr", cmd_pr, "persistent reservations: register, reserve, preempt, ..."},
    {"version", cmd_version, "show the version"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: rblk COMMAND [OPTIONS] [URL|DEV]\n"
		   "Use rblk volumes exported by rblk-target.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]);
	     i++)
		fprintf(f, "  %-9s %s\n", subcommands[i].name,
			subcommands[i].summary);
	fprintf(
	    f,
	    "\nURL is tcp://HOST[:PORT]/EXPORT or rdma://HOST[:PORT]/EXPORT"
	    " (default port 7441;\n'rblk discover' takes the URL without /EXPORT),"
	    " or unix:///EXPORT?socket=PATH for a\ntarget's unix socket on this host.\n"
	    "'rblk COMMAND --help' describes each command.\n"
	    "  -h, --help     show this help\n"
	    "  -V, --version  show the version\n");
}

static void info_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk info URL [--path URL]... [-o text|json] [--timeout MS]\n"
	    "                [--direct|--no-direct]\n"
	    "Connect to URL, log in, and print the volume's geometry and features, and\n"
	    "the largest queue depth and I/O size the target grants a queue.\n"
	    "With --path, log in to each path too: they must be the same volume.\n\n"
	    "  -o, --output FORMAT  text (default) or json\n"
	    "      --direct         require direct volume access (fail if not offered)\n"
	    "      --no-direct      do not use direct volume access\n"
	    "  -t, --timeout MS     connect/login timeout (default 10000)\n"
	    "  -L, --log-level L    error, warn (default), info, debug\n" CLI_PATH_HELP
		CLI_AUTH_HELP "  -h, --help           show this help\n");
}

/* Paths of r, the active one marked: JSON array of {url, active}. */
static struct json_object *paths_json(const struct rblk *r)
{
	struct json_object *a = json_object_new_array();

	for (unsigned int i = 0; i < rblk_path_count(r); i++) {
		struct json_object *p = json_object_new_object();

		rjson_add_str(p, "url", rblk_path_url(r, i));
		rjson_add_bool(p, "active", i == rblk_path_active(r));
		json_object_array_add(a, p);
	}
	return a;
}

static void print_info_json(const char *url, const struct rblk *r)
{
	const struct rblk_info *info = rblk_get_info(r);
	struct json_object *o = json_object_new_object();
	uint32_t f = info->features;
	char id[CLI_VOL_ID_STR_LEN];

	rjson_add_str(o, "url", url);
	rjson_add_str(o, "transport", info->transport);
	rjson_add_str(o, "export", info->export_name);
	cli_format_vol_id(info->vol_id, id);
	rjson_add_str(o, "vol_id", id);
	rjson_add_bool(o, "identity", !(f & RBLK_FEAT_NO_IDENTITY));
	rjson_add_u64(o, "size", info->size);
	rjson_add_u64(o, "block_size", info->block_size);
	rjson_add_u64(o, "max_io", info->max_io);
	rjson_add_u64(o, "queue_depth", info->queue_depth);
	rjson_add_u64(o, "pinned_bytes", rblk_pinned_bytes(r));
	rjson_add_bool(o, "read_only", f & RBLK_FEAT_READ_ONLY);
	rjson_add_bool(o, "flush", f & RBLK_FEAT_FLUSH);
	rjson_add_bool(o, "fua", f & RBLK_FEAT_FUA);
	rjson_add_bool(o, "trim", f & RBLK_FEAT_TRIM);
	rjson_add_bool(o, "write_zeroes", f & RBLK_FEAT_ZEROES);
	rjson_add_bool(o, "direct", f & RBLK_FEAT_DIRECT);
	rjson_add_bool(o, "reservations", f & RBLK_FEAT_PR);
	rjson_add(o, "paths", paths_json(r));
	rjson_print(stdout, o);
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"timeout", required_argument, NULL, 't'},
	    {"log-level", required_argument, NULL, 'L'},
	    {"direct", no_argument, NULL, 'D'},
	    {"no-direct", no_argument, NULL, 'N'},
	    {"help", no_argument, NULL, 'h'},
	    CLI_AUTH_LONGOPTS,
	    CLI_PATH_LONGOPTS,
	    {0},
	};
	struct cli_auth auth = {0};
	struct cli_paths paths = {.failback_ms = -1};
	const struct rblk_info *info;
	char id[CLI_VOL_ID_STR_LEN];
	struct rblk_opts o;
	struct rblk *r;
	bool json = false;
	int c, ret;

	rblk_opts_init(&o);
	while ((c = getopt_long(argc, argv, "o:t:L:h", opts, NULL)) != -1) {
		if (cli_auth_opt(c, optarg, &auth))
			continue;
		ret = cli_path_opt("info", c, optarg, &paths);
		if (ret < 0)
			return 2;
		if (ret)
			continue;
		switch (c) {
		case 'o':
			if (cli_parse_output("info", optarg, &json))
				return 2;
			break;
		case 't':
			if (cli_parse_timeout("info", optarg, &o.timeout_ms))
				return 2;
			break;
		case 'L':
			if (cli_parse_log_level("info", optarg))
				return 2;
			break;
		case 'D':
			o.direct = RBLK_DIRECT_ON;
			break;
		case 'N':
			o.direct = RBLK_DIRECT_OFF;
			break;
		case 'h':
			info_usage(stdout);
			return 0;
		default:
			info_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		info_usage(stderr);
		return 2;
	}
	/*
	 * Ask for the most the protocol allows: the LOGIN grants the
	 * target's maxima (min(asked, its limit)). Costs nothing sized by
	 * them here: bounce buffers come with I/O, and this session does none.
	 */
	o.queue_depth = RBLK_MAX_QD;
	o.max_io = RBLK_MAX_MAX_IO;
	cli_auth_apply(&auth, &o);
	cli_paths_apply(&paths, &o);
	ret = rblk_open(argv[optind], &o, &r);
	if (ret) {
		fprintf(stderr, "rblk info: %s\n", rblk_last_error());
		return 1;
	}
	info = rblk_get_info(r);
	if (json) {
		print_info_json(argv[optind], r);
	} else {
		printf("url:         %s\n", argv[optind]);
		printf("transport:   %s\n", info->transport);
		printf("export:      %s\n", info->export_name);
		cli_format_vol_id(info->vol_id, id);
		printf(
		    "volume id:   %s%s\n", id,
		    info->features & RBLK_FEAT_NO_IDENTITY
			? " (a stand-in: the volume has no identity of its own)"
			: "");
		printf("size:        %llu bytes (%.2f GiB)\n",
		       (unsigned long long)info->size,
		       (double)info->size / (1 << 30));
		printf("block size:  %u\n", info->block_size);
		printf("max I/O:     %u (the most the target grants)\n",
		       info->max_io);
		printf("queue depth: %u (the most the target grants a queue)\n",
		       info->queue_depth);
		printf(
		    "pinned:      %zu bytes (this session's registered memory)\n",
		    rblk_pinned_bytes(r));
		printf("features:   %s%s%s%s%s%s%s\n",
		       info->features & RBLK_FEAT_READ_ONLY ? " read-only"
							    : " read-write",
		       info->features & RBLK_FEAT_FLUSH ? " flush" : "",
		       info->features & RBLK_FEAT_FUA ? " fua" : "",
		       info->features & RBLK_FEAT_TRIM ? " trim" : "",
		       info->features & RBLK_FEAT_ZEROES ? " write-zeroes" : "",
		       info->features & RBLK_FEAT_DIRECT ? " direct" : "",
		       info->features & RBLK_FEAT_PR ? " reservations" : "");
		for (unsigned int i = 0; paths.n && i < rblk_path_count(r); i++)
			printf("path %u:      %s%s\n", i, rblk_path_url(r, i),
			       i == rblk_path_active(r) ? " (active)" : "");
	}
	rblk_close(r);
	return 0;
}

int main(int argc, char **argv)
{
	log_set_prefix("rblk");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		return cmd_version(1, argv + 1);
		return 0;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]);
	     i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "rblk: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
