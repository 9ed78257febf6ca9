/* SPDX-License-Identifier: MIT */
/*
 * rblk-target as a whole: its exports, workers and engine, and the
 * control thread. See docs/ARCHITECTURE.md for the picture.
 *
 * Threads: the main thread owns the listeners, accepts connections and
 * hands each to a worker (worker.h). A worker owns its connections, their
 * requests (conn.h) and one I/O engine instance (engine.h) and runs them
 * to completion without locks. Exports (export.h, backend.h) are shared
 * by all; the control thread (ctl.c) may add and remove them at run
 * time: see struct export for the lifetime rules.
 */
#ifndef RBLK_TARGET_H
#define RBLK_TARGET_H

#include <pthread.h>
#include <stdatomic.h>

#include "../config/config.h"
#include "qos.h"

struct engine_ops;
struct export;
struct worker;
struct xp_tls;

struct target {
	struct cfg_target cfg;
	/* TLS server credentials of the tcp listeners (NULL: no TLS) */
	struct xp_tls *tls;
	/*
	 * Exports, in configuration order, added ones at the tail. The
	 * control thread adds and removes; workers look up at login. Both
	 * under exports_lock; the command path uses the connection's
	 * reference instead.
	 */
	pthread_mutex_t exports_lock;
	struct export *exports;
	unsigned int nr_exports;
	struct worker *workers;
	unsigned int nr_workers;
	const struct engine_ops *engine;
	atomic_uint_fast64_t next_conn_id;
	/* QoS of each [host] (cfg.hosts[i]), for all its sessions together */
	struct qos host_qos[CFG_MAX_HOSTS];
};

/* ---- control socket and metrics endpoint (ctl.c) ----------------------- */

struct ctl;
/*
 * Main thread: open the control socket and the metrics endpoint the
 * configuration asks for and start the control thread that serves them
 * (and closes removed exports). Returns 0 or -errno after logging why.
 */
int ctl_open(struct target *t, struct ctl **out);
/* Stop the control thread and close its sockets. */
void ctl_close(struct ctl *ctl);
/* `rblk-target ctl ...`: the command-line client; returns the exit code. */
int ctl_client_main(int argc, char **argv);

#endif
