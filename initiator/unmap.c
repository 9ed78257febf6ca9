/* SPDX-License-Identifier: MIT */
/*
 * rblk unmap: SIGTERM to the mapping's daemon, then wait (bounded) for it
 * to exit; the daemon removes the device and its record itself. With
 * --force, or when the daemon is gone, the device is detached with
 * frontend->detach().
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "initiator/cli.h"
#include "initiator/map_internal.h"

#define UNMAP_WAIT_S 30	     /* `rblk unmap` waits this long for the daemon */
#define UNMAP_FORCE_WAIT_S 5 /* ... with --force, before SIGKILL */

static void unmap_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk unmap DEV|ID [--force] [--help]\n"
	    "Remove a device made by 'rblk map': DEV is its path (/dev/nbd0) or name\n"
	    "(nbd0), ID its device number. The daemon is asked to stop (SIGTERM): it\n"
	    "flushes the device, removes it and closes the session; unmap waits up to\n"
	    "%d s for it.\n\n"
	    "  -f, --force    unmap even if the device is mounted or held open; if the\n"
	    "                 daemon has not gone after %d s, kill it and detach the\n"
	    "                 device directly. Also detaches an rblk device that has\n"
	    "                 no record.\n"
	    "  -h, --help     show this help\n",
	    UNMAP_WAIT_S, UNMAP_FORCE_WAIT_S);
}

/* Does rec name the device arg (path, name, or number)? */
static bool record_matches(const struct map_record *rec, const char *arg,
			   const char *real)
{
	const char *base;
	char *end;
	long id;

	if (!rec->dev[0])
		return false;
	id = strtol(arg, &end, 10);
	if (*arg && !*end)
		return id == rec->dev_id;
	if (!strcmp(arg, rec->dev) || (real[0] && !strcmp(real, rec->dev)))
		return true;
	base = strrchr(rec->dev, '/');
	return base && !strcmp(arg, base + 1);
}

/* Wait up to secs for rec's daemon to be gone. */
static bool wait_daemon_exit(const struct map_record *rec, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		if (!record_alive(rec))
			return true;
		usleep(50 * 1000);
	}
	return !record_alive(rec);
}

/* Is dev mounted or held open exclusively? */
static bool device_busy(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0) {
		close(fd);
		return false;
	}
	return errno == EBUSY;
}

/*
 * DEV without a record: which front end and number does its name say
 * (frontend_ops.dev_prefix)? "/dev/nbd3" or "nbd3" -> nbd, 3.
 */
static const struct frontend_ops *dev_from_name(const char *arg, int *id)
{
	const char *base = strrchr(arg, '/');
	char *end;
	long v;

	base = base ? base + 1 : arg;
	for (size_t i = 0; map_frontends[i]; i++) {
		const char *prefix = map_frontends[i]->dev_prefix;
		size_t n = strlen(prefix);

		if (strncmp(base, prefix, n) ||
		    !isdigit((unsigned char)base[n]))
			continue;
		v = strtol(base + n, &end, 10);
		if (*end || v < 0 || v > INT_MAX)
			return NULL;
		*id = (int)v;
		return map_frontends[i];
	}
	return NULL;
}

/* No record names arg: with --force, detach it if its name is ours. */
static int unmap_unrecorded(const char *arg, const char *real, bool force)
{
	const struct frontend_ops *fe;
	int id, ret;

	fe = dev_from_name(real[0] ? real : arg, &id);
	if (!force || !fe) {
		fprintf(
		    stderr,
		    "rblk unmap: %s is not mapped by rblk (see 'rblk list')%s\n",
		    arg, fe ? "; --force detaches it anyway" : "");
		return 1;
	}
	ret = fe->detach(id);
	if (ret)
		fprintf(stderr,
			"rblk unmap: %s: detaching the %s device failed: %s\n",
			arg, fe->name, strerror(-ret));
	return ret ? 1 : 0;
}

/*
 * rec's daemon runs: ask it to stop and wait; with force, kill it and
 * detach the device when it does not go. Returns the exit code.
 */
static int unmap_daemon(const struct map_record *rec, bool force)
{
	if (!force && device_busy(rec->dev)) {
		fprintf(
		    stderr,
		    "rblk unmap: %s is in use (mounted or held open); unmount it first, or use --force\n",
		    rec->dev);
		return 1;
	}
	if (kill(rec->pid, SIGTERM) && errno != ESRCH) {
		fprintf(
		    stderr,
		    "rblk unmap: cannot signal the daemon (pid %d) of %s: %s\n",
		    (int)rec->pid, rec->dev, strerror(errno));
		return 1;
	}
	if (wait_daemon_exit(rec, force ? UNMAP_FORCE_WAIT_S : UNMAP_WAIT_S)) {
		/* the daemon removed the device and its record; make sure */
		unlink(rec->file);
		return 0;
	}
	if (!force) {
		fprintf(
		    stderr,
		    "rblk unmap: the daemon (pid %d) of %s did not exit within %d s (see %s); 'rblk unmap --force %s' kills it and detaches the device\n",
		    (int)rec->pid, rec->dev, UNMAP_WAIT_S,
		    rec->log[0] ? rec->log : "its log", rec->dev);
		return 1;
	}
	fprintf(
	    stderr,
	    "rblk unmap: the daemon (pid %d) of %s did not exit within %d s; killing it\n",
	    (int)rec->pid, rec->dev, UNMAP_FORCE_WAIT_S);
	kill(rec->pid, SIGKILL);
	wait_daemon_exit(rec, 5);
	if (record_device_present(rec))
		return record_detach_dead(rec) ? 1 : 0;
	unlink(rec->file);
	return 0;
}

int cmd_unmap(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct map_record *recs, *rec = NULL;
	char real[PATH_MAX] = "";
	bool force = false;
	const char *arg;
	int ch, n, nmatch = 0, ret = 0;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "fh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			force = true;
			break;
		case 'h':
			unmap_usage(stdout);
			return 0;
		default:
			return cli_usage_error("unmap", "unknown option '%s'",
					       argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_error("unmap", "missing the device");
	if (optind + 1 < argc)
		return cli_usage_error("unmap", "unexpected argument '%s'",
				       argv[optind + 1]);
	arg = argv[optind];
	if (!realpath(arg, real))
		real[0] = 0;

	n = records_load(&recs);
	if (n < 0) {
		fprintf(stderr, "rblk unmap: cannot read %s: %s\n", run_dir(),
			strerror(-n));
		return 1;
	}
	n = records_prune(recs, n);
	for (int i = 0; i < n; i++) {
		if (record_matches(&recs[i], arg, real)) {
			if (!rec)
				rec = &recs[i];
			nmatch++;
		}
	}
	if (nmatch > 1) {
		fprintf(stderr,
			"rblk unmap: '%s' names %d devices; give the "
			"device path\n",
			arg, nmatch);
		ret = 1;
		goto out_clean;
	}
	if (!rec)
		ret = unmap_unrecorded(arg, real, force);
	else if (!rec->alive) /* the daemon died and left the device */
		ret = record_detach_dead(rec) ? 1 : 0;
	else
		ret = unmap_daemon(rec, force);

out_clean:
	free(recs);
	return ret;
}
