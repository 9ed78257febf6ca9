/* SPDX-License-Identifier: MIT */
/*
 * Private to the `rblk map` framework (map.h): map.c (rblk map: options,
 * fork, waiting for the device), map_daemon.c (the daemon and the
 * contract with the front ends), map_record.c (the record files),
 * unmap.c and list.c (rblk unmap, rblk list).
 *
 * Records: RUN_DIR (${RBLK_RUN_DIR:-/run/rblk}) holds one file per
 * mapping, map-PID.rec, written only by its daemon (atomically: temp file
 * + rename) and removed by it on exit. It is one JSON object (json-c,
 * common/json.h): url, frontend, dev (null until the device exists),
 * dev_id (null likewise), queues, depth, pid, start (the daemon's start
 * time in clock ticks since boot, /proc/PID/stat field 22, so a recycled
 * pid is not taken for the daemon), state (starting, running, stopping),
 * log, and error: the last error the daemon or its front end reported
 * (map_set_error(), or any error line it logged), null when none; with
 * --path also paths (the URLs, the first one preferred) and active (the
 * index of the path in use, refreshed by the daemon about every second).
 * A record whose daemon died is removed by the next list/unmap when its
 * device is gone; when the device is still attached the record stays and
 * is shown with state "dead" (a front end that can recover keeps such a
 * device for `rblk map --recover`, whose new daemon drops the stale
 * record at map_ready()), and `rblk unmap` detaches it with
 * frontend->detach().
 */
#ifndef RBLK_INITIATOR_MAP_INTERNAL_H
#define RBLK_INITIATOR_MAP_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/json.h"

#include "initiator/map.h"

#define MAP_DEFAULT_RUN_DIR "/run/rblk"
#define MAP_STATUS_MAX 1024 /* one status line, daemon -> `rblk map` */
#define MAP_ERROR_MAX 512

/* One mapping as its record file describes it. */
struct map_record {
	char file[PATH_MAX]; /* the record's own path */
	char url[512];
	char vol_id[40]; /* UUID text; "" until connected */
	char frontend[16];
	char dev[128]; /* "" until the device exists */
	int dev_id;    /* -1 until the device exists */
	unsigned int queues;
	unsigned int depth;
	pid_t pid;
	unsigned long long start; /* /proc/PID/stat starttime */
	char state[16];
	char log[PATH_MAX];
	char error[MAP_ERROR_MAX];	 /* "" when none */
	char paths[RBLK_MAX_PATHS][512]; /* multipath; nr_paths 0 without */
	unsigned int nr_paths;
	unsigned int active; /* index into paths */
	/* the session's commands timed out / failed for good (all queues) */
	unsigned long long timeouts, io_failed;
	bool alive; /* not in the file: the daemon runs (records_load) */
};

struct map_ctx {
	const struct frontend_ops *fe;
	struct map_opts opts;
	bool foreground;
	int status_fd; /* pipe to `rblk map`; -1 once used, or in foreground */
	int stop_fd; /* eventfd; written once per stop request, never drained */
	int resize_fd; /* eventfd; written when the volume grew (map.h) */
	atomic_bool stop;
	atomic_bool ready;
	bool rec_removed;     /* the record is gone for good; under lock */
	pthread_mutex_t lock; /* rec and its file */
	struct map_record rec;
	struct rblk *session; /* while open; under lock (record refresh) */
};

/* ---- map.c ------------------------------------------------------------- */

/* Front ends in the order auto-selection tries them; NULL-terminated. */
extern const struct frontend_ops *const map_frontends[];
const struct frontend_ops *frontend_find(const char *name);

/* ---- map_daemon.c ------------------------------------------------------ */

/* SIGINT and SIGTERM: blocked in every thread, taken by the daemon's own. */
extern sigset_t map_stop_sigs;
/*
 * Body of the daemon (the forked child, or `rblk map --foreground`), with
 * map_stop_sigs blocked. Returns the exit code.
 */
int map_daemon(struct map_ctx *ctx);

/* ---- map_record.c ------------------------------------------------------ */

const char *run_dir(void);
int mkdir_p(const char *path, mode_t mode);
/* Start time of pid and whether it is a zombie; 0 or -ESRCH. */
int proc_start(pid_t pid, unsigned long long *start, bool *zombie);
/* Is the daemon of rec still running (not a zombie, not a recycled pid)? */
bool record_alive(const struct map_record *rec);
/* rec as its file holds it (a new JSON object, the caller's). */
struct json_object *record_json(const struct map_record *rec);
/* Write rec to rec->file atomically. Caller holds ctx->lock if shared. */
int record_write(const struct map_record *rec);
/* Is the device of rec still attached (present with a non-zero size)? */
bool record_device_present(const struct map_record *rec);
/*
 * The daemon of rec is gone and its device is still there: detach it with
 * the front end and remove the record. 0, or -errno (record kept).
 */
int record_detach_dead(const struct map_record *rec);
/*
 * Every record in the run directory, sorted by front end and device
 * number, each with .alive set. *out is malloc'd (caller frees); returns
 * the count or -errno.
 */
int records_load(struct map_record **out);
/*
 * Remove records of dead daemons whose device is gone; mark those whose
 * device stays "dead". Returns the new count.
 */
int records_prune(struct map_record *recs, int n);
/* Remove the records dead daemons of frontend left for dev_id. */
void records_drop_stale(const char *frontend, int dev_id);

#endif
