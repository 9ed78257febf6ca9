/* SPDX-License-Identifier: MIT */
/*
 * rblk list: the mappings' records (map_internal.h) as a table or JSON,
 * with each one's latest error; records of dead daemons whose device is
 * gone are removed on the way.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "initiator/cli.h"
#include "initiator/map_internal.h"

static void list_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk list [-o text|json|url|vol_id] [DEV] [--help]\n"
	    "Show the devices made by 'rblk map': device, front end, queues, depth,\n"
	    "state, daemon pid, the memory the daemon pins (VmPin) and volume URL.\n"
	    "States: starting, running, stopping, and dead: the daemon died and left\n"
	    "the device, whose I/O fails (nbd) or waits (ublk) until 'rblk unmap DEV'\n"
	    "(or, ublk, 'rblk map --recover N').\n"
	    "Records of dead daemons whose device is gone are removed. With DEV\n"
	    "(/dev/ublkb0 or ublkb0), only that device's mapping; exit 1 if none.\n\n"
	    "  -o, --output FORMAT  text (default; nothing when there are no mappings),\n"
	    "                       json: {\"mappings\": [{\"dev\", \"dev_id\",\n"
	    "                       \"frontend\", \"url\", \"vol_id\", \"queues\",\n"
	    "                       \"depth\", \"state\", \"pid\", \"error\",\n"
	    "                       \"timeouts\", \"io_failed\",\n"
	    "                       \"pinned_bytes\" (while the daemon lives)}, ...]};\n"
	    "                       with --path also \"paths\" (URLs, the first\n"
	    "                       preferred) and \"active\" (index in use);\n"
	    "                       url: each mapping's volume URL on a line, or\n"
	    "                       vol_id: each one's volume id (UUID; \"-\" until\n"
	    "                       connected)\n"
	    "  -h, --help           show this help\n");
}

/*
 * What the mapping's daemon pins (its VmPin: the front end's registered
 * buffers, librblk's message and bounce buffers), in bytes; -1 when the
 * daemon is gone or its status unreadable.
 */
static long long daemon_pinned(const struct map_record *r)
{
	unsigned long long kb;
	char path[64], line[128];
	long long ret = -1;
	FILE *f;

	if (!r->alive || r->pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)r->pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %llu kB", &kb) == 1) {
			ret = (long long)(kb << 10);
			break;
		}
	fclose(f);
	return ret;
}

static void list_json(const struct map_record *recs, int n)
{
	struct json_object *o = json_object_new_object();
	struct json_object *list = json_object_new_array();

	for (int i = 0; i < n; i++) {
		struct json_object *x = record_json(&recs[i]);

		/* the daemon's own bookkeeping: not part of the listing */
		json_object_object_del(x, "start");
		json_object_object_del(x, "log");
		if (daemon_pinned(&recs[i]) >= 0)
			rjson_add_u64(x, "pinned_bytes",
				      (uint64_t)daemon_pinned(&recs[i]));
		json_object_array_add(list, x);
	}
	rjson_add(o, "mappings", list);
	rjson_print(stdout, o);
}

static void list_text(const struct map_record *recs, int n)
{
	if (!n)
		return;
	printf("%-14s %-8s %6s %5s %-9s %7s %7s  %s\n", "DEVICE", "FRONTEND",
	       "QUEUES", "DEPTH", "STATE", "PID", "PINNED", "URL");
	for (int i = 0; i < n; i++) {
		const struct map_record *r = &recs[i];
		long long pin = daemon_pinned(r);
		char pinned[32] = "-";

		if (pin >= 0)
			snprintf(pinned, sizeof(pinned), "%.1fM",
				 (double)pin / (1 << 20));
		printf("%-14s %-8s %6u %5u %-9s %7d %7s  %s\n",
		       r->dev[0] ? r->dev : "-", r->frontend, r->queues,
		       r->depth, r->state, (int)r->pid, pinned, r->url);
		/* commands the target left unanswered (--io-timeout) */
		if (r->timeouts || r->io_failed)
			printf(
			    "%63s %llu command timeouts, %llu commands failed\n",
			    "", r->timeouts, r->io_failed);
		/* multipath: one line per path, the one in use marked */
		for (unsigned int p = 0; p < r->nr_paths; p++)
			printf("%63s path %u: %s%s\n", "", p, r->paths[p],
			       p == r->active ? " (active)" : "");
	}
}

/* One field of each mapping on a line: its URL or its volume id. */
static void list_field(const struct map_record *recs, int n, bool vol_id)
{
	for (int i = 0; i < n; i++) {
		if (vol_id)
			printf("%s\n",
			       recs[i].vol_id[0] ? recs[i].vol_id : "-");
		else
			printf("%s\n", recs[i].url);
	}
}

/* Keep only the records of device DEV ("/dev/" optional); how many. */
static int list_filter(struct map_record *recs, int n, const char *dev)
{
	int kept = 0;

	if (!strncmp(dev, "/dev/", 5))
		dev += 5;
	for (int i = 0; i < n; i++) {
		const char *d = recs[i].dev;

		if (!strncmp(d, "/dev/", 5))
			d += 5;
		if (d[0] && !strcmp(d, dev))
			recs[kept++] = recs[i];
	}
	return kept;
}

/* On stderr: what to do about each mapping whose daemon died. */
static void list_warn_dead(const struct map_record *recs, int n)
{
	for (int i = 0; i < n; i++) {
		const struct map_record *r = &recs[i];
		const struct frontend_ops *fe = frontend_find(r->frontend);

		if (r->alive)
			continue;
		fprintf(
		    stderr,
		    "rblk list: the daemon of %s died%s%s; its I/O fails until 'rblk unmap %s'%s\n",
		    r->dev, r->error[0] ? " (last error: " : "",
		    r->error[0] ? r->error : "", r->dev,
		    fe && fe->recover_queues ? " or 'rblk map --recover ID'"
					     : "");
	}
}

int cmd_list(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	enum { OUT_TEXT, OUT_JSON, OUT_URL, OUT_VOL_ID } out = OUT_TEXT;
	struct map_record *recs;
	const char *dev = NULL;
	int ch, n;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			if (!strcmp(optarg, "url")) {
				out = OUT_URL;
			} else if (!strcmp(optarg, "vol_id")) {
				out = OUT_VOL_ID;
			} else if (!strcmp(optarg, "json")) {
				out = OUT_JSON;
			} else if (!strcmp(optarg, "text")) {
				out = OUT_TEXT;
			} else {
				fprintf(
				    stderr,
				    "rblk list: unknown output format '%s' (text, json, url, vol_id)\n",
				    optarg);
				return 2;
			}
			break;
		case 'h':
			list_usage(stdout);
			return 0;
		case ':':
			return cli_usage_error("list",
					       "option '%s' needs a value",
					       argv[optind - 1]);
		default:
			return cli_usage_error("list", "unknown option '%s'",
					       argv[optind - 1]);
		}
	}
	if (optind < argc)
		dev = argv[optind++];
	if (optind < argc)
		return cli_usage_error("list", "unexpected argument '%s'",
				       argv[optind]);
	n = records_load(&recs);
	if (n < 0) {
		fprintf(stderr, "rblk list: cannot read %s: %s\n", run_dir(),
			strerror(-n));
		return 1;
	}
	n = records_prune(recs, n);
	if (dev)
		n = list_filter(recs, n, dev);
	list_warn_dead(recs, n);
	if (out == OUT_JSON)
		list_json(recs, n);
	else if (out == OUT_URL || out == OUT_VOL_ID)
		list_field(recs, n, out == OUT_VOL_ID);
	else
		list_text(recs, n);
	free(recs);
	return dev && !n ? 1 : 0;
}
