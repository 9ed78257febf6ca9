/* SPDX-License-Identifier: MIT */
/*
 * The record files of `rblk map` (map_internal.h says what they hold) and
 * the process checks that tell a live daemon from a dead one.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "initiator/map_internal.h"

const char *run_dir(void)
{
	const char *d = getenv("RBLK_RUN_DIR");

	return d && *d ? d : MAP_DEFAULT_RUN_DIR;
}

/* mkdir -p for the run directory (one or two levels in practice). */
int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * Start time (clock ticks after boot) of pid, and whether it is a zombie.
 * 0, or -ESRCH when there is no such process.
 */
int proc_start(pid_t pid, unsigned long long *start, bool *zombie)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	/* "pid (comm) S ppid ..."; comm may hold spaces and parentheses */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -ESRCH;
	p += 2;
	*zombie = *p == 'Z' || *p == 'X';
	/* p is at field 3 (state); starttime is field 22 */
	for (field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return -ESRCH;
	v = strtoull(p, NULL, 10);
	*start = v;
	return 0;
}

/* Is the daemon of rec still running (not a zombie, not a recycled pid)? */
bool record_alive(const struct map_record *rec)
{
	unsigned long long start;
	bool zombie;

	if (rec->pid <= 0 || proc_start(rec->pid, &start, &zombie))
		return false;
	return !zombie && (!rec->start || start == rec->start);
}

/* ---- record files ------------------------------------------------------- */

struct json_object *record_json(const struct map_record *rec)
{
	struct json_object *o = json_object_new_object();

	rjson_add_str(o, "url", rec->url);
	rjson_add(o, "vol_id", rec->vol_id[0] ? rjson_str(rec->vol_id) : NULL);
	rjson_add_str(o, "frontend", rec->frontend);
	rjson_add(o, "dev", rec->dev[0] ? rjson_str(rec->dev) : NULL);
	rjson_add(o, "dev_id",
		  rec->dev_id >= 0 ? json_object_new_int(rec->dev_id) : NULL);
	rjson_add_u64(o, "queues", rec->queues);
	rjson_add_u64(o, "depth", rec->depth);
	rjson_add_i64(o, "pid", rec->pid);
	rjson_add_u64(o, "start", rec->start);
	rjson_add_str(o, "state", rec->state);
	rjson_add_str(o, "log", rec->log);
	rjson_add(o, "error", rec->error[0] ? rjson_str(rec->error) : NULL);
	rjson_add_u64(o, "timeouts", rec->timeouts);
	rjson_add_u64(o, "io_failed", rec->io_failed);
	if (rec->nr_paths) {
		struct json_object *a = json_object_new_array();

		for (unsigned int i = 0; i < rec->nr_paths; i++)
			json_object_array_add(a, rjson_str(rec->paths[i]));
		rjson_add(o, "paths", a);
		rjson_add_u64(o, "active", rec->active);
	}
	return o;
}

/* Write rec to rec->file atomically (temp file + rename). */
int record_write(const struct map_record *rec)
{
	struct json_object *o = record_json(rec);
	char tmp[PATH_MAX + 8];
	FILE *f;
	int ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", rec->file);
	f = fopen(tmp, "we");
	if (!f) {
		ret = -errno;
		json_object_put(o);
		log_err("cannot write the record %s: %s", tmp, strerror(-ret));
		return ret;
	}
	ret = rjson_print(f, o);
	if (fflush(f) && !ret)
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, rec->file))
		ret = -errno;
	if (ret) {
		log_err("cannot write the record %s: %s", rec->file,
			strerror(-ret));
		unlink(tmp);
	}
	return ret;
}

static void copy_field(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/*
 * A record in the key=value lines of rblk before 0.2 (a daemon started
 * before an upgrade): url, frontend, dev, dev_id, queues, depth, pid,
 * start, state, log. 0, or -EINVAL when it is not one.
 */
static int record_read_legacy(FILE *f, struct map_record *rec)
{
	char line[1024];

	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, '=');

		line[strcspn(line, "\n")] = 0;
		if (!v)
			continue;
		*v++ = 0;
		if (!strcmp(line, "url"))
			copy_field(rec->url, sizeof(rec->url), v);
		else if (!strcmp(line, "frontend"))
			copy_field(rec->frontend, sizeof(rec->frontend), v);
		else if (!strcmp(line, "dev"))
			copy_field(rec->dev, sizeof(rec->dev), v);
		else if (!strcmp(line, "dev_id"))
			rec->dev_id = atoi(v);
		else if (!strcmp(line, "queues"))
			rec->queues = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(line, "depth"))
			rec->depth = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(line, "pid"))
			rec->pid = (pid_t)atoi(v);
		else if (!strcmp(line, "start"))
			rec->start = strtoull(v, NULL, 10);
		else if (!strcmp(line, "state"))
			copy_field(rec->state, sizeof(rec->state), v);
		else if (!strcmp(line, "log"))
			copy_field(rec->log, sizeof(rec->log), v);
	}
	return rec->pid > 0 && rec->frontend[0] ? 0 : -EINVAL;
}

/* The multipath fields, when the record has them. */
static void record_read_paths(struct json_object *o, struct map_record *rec)
{
	struct json_object *a;
	size_t n;

	if (!json_object_object_get_ex(o, "paths", &a) ||
	    !json_object_is_type(a, json_type_array))
		return;
	n = json_object_array_length(a);
	for (size_t i = 0; i < n && rec->nr_paths < RBLK_MAX_PATHS; i++)
		copy_field(
		    rec->paths[rec->nr_paths++], sizeof(rec->paths[0]),
		    json_object_get_string(json_object_array_get_idx(a, i)));
	rec->active = (unsigned int)rjson_get_i64(o, "active", 0);
	if (rec->active >= rec->nr_paths)
		rec->active = 0;
}

/* Parse a record file. 0, or -EINVAL when it is not a record. */
static int record_read(const char *path, struct map_record *rec)
{
	struct json_object *o;
	char err[PATH_MAX + 64];
	FILE *f;
	int c, ret;

	memset(rec, 0, sizeof(*rec));
	rec->dev_id = -1;
	copy_field(rec->file, sizeof(rec->file), path);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	c = fgetc(f);
	if (c != '{') {
		ungetc(c, f);
		ret = record_read_legacy(f, rec);
		fclose(f);
		return ret;
	}
	fclose(f);
	o = rjson_read_file(path, 64 * 1024, err, sizeof(err));
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return -EINVAL;
	}
	copy_field(rec->url, sizeof(rec->url), rjson_get_str(o, "url"));
	copy_field(rec->vol_id, sizeof(rec->vol_id),
		   rjson_get_str(o, "vol_id"));
	copy_field(rec->frontend, sizeof(rec->frontend),
		   rjson_get_str(o, "frontend"));
	copy_field(rec->dev, sizeof(rec->dev), rjson_get_str(o, "dev"));
	rec->dev_id = (int)rjson_get_i64(o, "dev_id", -1);
	rec->queues = (unsigned int)rjson_get_i64(o, "queues", 0);
	rec->depth = (unsigned int)rjson_get_i64(o, "depth", 0);
	rec->pid = (pid_t)rjson_get_i64(o, "pid", 0);
	rec->start = (unsigned long long)rjson_get_i64(o, "start", 0);
	copy_field(rec->state, sizeof(rec->state), rjson_get_str(o, "state"));
	copy_field(rec->log, sizeof(rec->log), rjson_get_str(o, "log"));
	copy_field(rec->error, sizeof(rec->error), rjson_get_str(o, "error"));
	rec->timeouts = (unsigned long long)rjson_get_i64(o, "timeouts", 0);
	rec->io_failed = (unsigned long long)rjson_get_i64(o, "io_failed", 0);
	record_read_paths(o, rec);
	json_object_put(o);
	return rec->pid > 0 && rec->frontend[0] ? 0 : -EINVAL;
}

/* Is the device of rec still attached (present with a non-zero size)? */
bool record_device_present(const struct map_record *rec)
{
	const char *base = strrchr(rec->dev, '/');
	char path[256], buf[32];

	if (rec->dev_id < 0 || !base || !base[1])
		return false;
	snprintf(path, sizeof(path), "/sys/block/%s/size", base + 1);
	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return false;
	return strtoull(buf, NULL, 10) > 0;
}

/*
 * The daemon of rec is gone and its device is still there: detach the
 * device with the front end and remove the record. 0, or -errno (the
 * record is then kept, so that `rblk unmap --force` can try again).
 */
int record_detach_dead(const struct map_record *rec)
{
	const struct frontend_ops *fe = frontend_find(rec->frontend);
	int ret;

	if (!fe) {
		fprintf(stderr,
			"rblk: %s was made by the %s front end, which "
			"is not built into this rblk\n",
			rec->dev, rec->frontend);
		return -EOPNOTSUPP;
	}
	ret = fe->detach(rec->dev_id);
	if (ret == -ENODEV || ret == -ENOENT)
		ret = 0; /* no driver or no such device: nothing to detach */
	if (ret) {
		fprintf(stderr,
			"rblk: detaching %s (its daemon, pid %d, is "
			"gone) failed: %s\n",
			rec->dev, (int)rec->pid, strerror(-ret));
		return ret;
	}
	unlink(rec->file);
	return 0;
}

/*
 * Records of dead daemons: one whose device is gone (or never came) is
 * removed; one whose device is still attached stays, with state "dead",
 * until `rblk unmap` detaches it or `rblk map --recover` takes it over.
 * Leaves only such records and live ones in recs; returns the new count.
 */
int records_prune(struct map_record *recs, int n)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		struct map_record *r = &recs[i];

		if (!r->alive && !record_device_present(r)) {
			fprintf(stderr,
				"rblk: the daemon (pid %d) of %s is "
				"gone; removed its record\n",
				(int)r->pid, r->dev[0] ? r->dev : r->url);
			unlink(r->file);
			continue;
		}
		if (!r->alive)
			copy_field(r->state, sizeof(r->state), "dead");
		if (k != i)
			recs[k] = *r;
		k++;
	}
	return k;
}

static int record_cmp(const void *a, const void *b)
{
	const struct map_record *x = a, *y = b;

	if (strcmp(x->frontend, y->frontend))
		return strcmp(x->frontend, y->frontend);
	if (x->dev_id != y->dev_id)
		return x->dev_id < y->dev_id ? -1 : 1;
	return (int)x->pid - (int)y->pid;
}

/*
 * Read every record in the run directory, sorted by front end and device
 * number, each with .alive set. *out is malloc'd (caller frees); returns
 * the count or -errno.
 */
int records_load(struct map_record **out)
{
	struct map_record *recs = NULL, rec;
	const char *dir = run_dir();
	struct dirent *de;
	int n = 0, cap = 0;
	DIR *d;

	*out = NULL;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		size_t len = strlen(de->d_name);

		if (strncmp(de->d_name, "map-", 4) || len < 5 ||
		    strcmp(de->d_name + len - 4, ".rec"))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     de->d_name) >= sizeof(path))
			continue;
		if (record_read(path, &rec))
			continue;
		rec.alive = record_alive(&rec);
		if (n == cap) {
			struct map_record *p;

			cap = cap ? 2 * cap : 8;
			p = realloc(recs, (size_t)cap * sizeof(*recs));
			if (!p) {
				free(recs);
				closedir(d);
				return -ENOMEM;
			}
			recs = p;
		}
		recs[n++] = rec;
	}
	closedir(d);
	if (n > 1)
		qsort(recs, (size_t)n, sizeof(*recs), record_cmp);
	*out = recs;
	return n;
}

/*
 * The device now belongs to this daemon: records that dead daemons left
 * for it (before `rblk map --recover`) are stale.
 */
void records_drop_stale(const char *frontend, int dev_id)
{
	struct map_record *recs;
	int n = records_load(&recs);

	for (int i = 0; i < n; i++)
		if (!recs[i].alive && recs[i].dev_id == dev_id &&
		    !strcmp(recs[i].frontend, frontend))
			unlink(recs[i].file);
	free(recs);
}
