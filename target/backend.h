/* SPDX-License-Identifier: MIT */
/*
 * Backends: the storage behind an export. A backend serves the volumes of
 * one kind of storage: it opens an export, runs its commands and closes
 * it. Each is a struct backend_ops in a file of its own (backend_*.c),
 * looked up by backend_open() in the table in backend.c: the path's
 * prefix ("ram:", "rbd:") picks a backend, and a path without one is a
 * file or block device (the file backend, or mmap where `direct` asks).
 * What a backend can do is said by its flags, never by testing which
 * backend it is.
 */
#ifndef RBLK_TARGET_BACKEND_H
#define RBLK_TARGET_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"

struct cfg_ceph;
struct cfg_export;
struct treq;
struct worker;

/* BACKEND_F_*: what a backend can do (struct backend_ops.flags). */
/* e->mem is the whole volume: it may offer direct access (RBLK_F_DIRECT) */
#define BACKEND_F_DIRECT (1u << 0)
/* e->mem is writable memory even for a read-only export (anonymous) */
#define BACKEND_F_MEM_WRITABLE (1u << 1)
/* nothing outlives the target: no identity can be stored with it */
#define BACKEND_F_VOLATILE (1u << 2)
/* its reads and writes go through the worker's I/O engine, from the slot
 * pool as the engine's fixed buffer (worker_pool_buf()) */
#define BACKEND_F_ENGINE (1u << 3)
/* honours cache=buffered (the page cache instead of O_DIRECT) */
#define BACKEND_F_BUFFERED (1u << 4)
/*
 * acknowledged writes may live in the target's process until it ends (the
 * volume's memory; librbd's write-back cache), not in the machine's page
 * or device cache: its durability epoch is the run's (login_epoch())
 */
#define BACKEND_F_PROCESS_CACHE (1u << 5)

/* open() returns this when the storage is better served by ->fallback */
#define BACKEND_FALLBACK 1
#define BACKEND_DEFAULT_BLOCK_SIZE 512u

struct backend_ops {
	const char *name; /* for the log: "file", "ram", "mmap", "rbd" */
	/* paths starting with it are this backend's ("ram:"); NULL: none */
	const char *prefix;
	unsigned int flags; /* BACKEND_F_* */
	/*
	 * Required; the thread adding the export (main or control). Open
	 * the storage named by cfg into e: size, block size, features and
	 * the backend's own fields (fd, mem, priv). Returns 0; -errno with
	 * the reason written to err; or BACKEND_FALLBACK when the storage
	 * cannot be served this way here but ->fallback can: e is then left
	 * open as ->fallback's open() would leave it, and ->fallback serves
	 * the export from here on (its close() closes it).
	 */
	int (*open)(struct export *e, const struct cfg_export *cfg, char *err,
		    size_t errlen);
	/*
	 * Required; whichever thread drops the last reference (export_put()):
	 * no session and no operation is left. Releases what open() took.
	 */
	void (*close)(struct export *e);
	/*
	 * Required; the worker thread that owns r. Start r's operation.
	 * Returns 0 when it was handed to the worker's engine (completion
	 * arrives through treq_backend_done()), 1 when it finished
	 * synchronously with r->result set, or -EBUSY when the engine has
	 * no room now: nothing was started, and the worker parks r
	 * (worker->busy_head) and calls submit again after completions.
	 */
	int (*submit)(struct worker *w, struct treq *r);
	/*
	 * Optional: the volume's identity, the same on every target that
	 * exports it (rbd: derived from the cluster fsid, pool, namespace and
	 * image id). Returns true with id filled; any thread after open.
	 * Callers use export_vol_id(), which answers false without the op.
	 */
	bool (*vol_id)(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN]);
	/*
	 * Optional: the backend keeps the export's reservation state (pr.h)
	 * itself, where every target exporting the volume reads it (rbd:
	 * the image's metadata); without them pr.c keeps a sidecar file.
	 * pr_load: the stored text into buf (len bytes, NUL-terminated);
	 * its length, 0 when none is stored, or -errno. pr_store: store
	 * text only if nothing was stored since the last pr_load
	 * (compare-and-set); 0, -ECANCELED (load again and retry), or
	 * -errno. Both block; pr.c calls them under its lock, any thread.
	 */
	int (*pr_load)(struct export *e, char *buf, size_t len);
	int (*pr_store)(struct export *e, const char *text);
	/*
	 * Optional (NULL: the export cannot change size): make the backing
	 * store *size bytes (a multiple of the block size), or with *size 0
	 * take the size it has now (a block device resized by its owner, an
	 * RBD image resized elsewhere); *size is then what the volume is.
	 * Shrinking is the caller's decision (export_resize() asks for
	 * --force). Control thread; the caller publishes the size. 0 or
	 * -errno with err written.
	 */
	int (*resize)(struct export *e, uint64_t *size, char *err,
		      size_t errlen);
	/* where open() may fall back to (BACKEND_FALLBACK); NULL: nowhere */
	const struct backend_ops *fallback;
};

/* A RAM export may grow to this many times its size at start, <= the cap */
#define RAM_GROW_FACTOR 4u
#define RAM_GROW_CAP (64ull << 30)

extern const struct backend_ops backend_file_ops; /* files and block devices */
extern const struct backend_ops backend_ram_ops;  /* ram:SIZE */
extern const struct backend_ops backend_mmap_ops; /* files exported direct */
extern const struct backend_ops backend_rbd_ops;  /* rbd:POOL/IMAGE */

/*
 * Choose the backend for cfg (the table in backend.c), refuse options it
 * does not honour, and open e with it (e->ops: the one serving e, its
 * fallback included). 0, or -errno with the reason in err.
 */
int backend_open(struct export *e, const struct cfg_export *cfg, char *err,
		 size_t errlen);
/*
 * The submit() of a volume that is memory (e->mem: ram, mmap): a copy
 * to or from the slot, or zeroes; done at once (returns 1).
 */
int backend_mem_submit(struct worker *w, struct treq *r);

/*
 * For backends' open(): say why opening failed into err (for the log and
 * the ctl client); returns ret.
 */
int open_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Test aid only (RBLK_TARGET_UNSAFE_ACK=flush|fua|flush,fua): a dishonest
 * target that answers FLUSH without syncing and/or does FUA writes without
 * making them durable, so durability tests can show that they catch it.
 * Read once at start by export_unsafe_ack_init(), which warns loudly.
 */
#define UNSAFE_ACK_FLUSH 0x1u
#define UNSAFE_ACK_FUA 0x2u
extern unsigned int export_unsafe_ack;
/* Whether the test aid says to lie about `what` (UNSAFE_ACK_*). */
static inline bool export_unsafe(unsigned int what)
{
	return export_unsafe_ack & what;
}
/* Parse RBLK_TARGET_UNSAFE_ACK; -EINVAL (logged) for a value it cannot. */
int export_unsafe_ack_init(void);

/*
 * Completions of backends whose I/O finishes on threads of their own
 * (librbd's callbacks) are queued per worker without locks and signalled
 * on the worker's engine eventfd (engine_ops.fd). Every engine's reap()
 * calls this after reading its eventfd, so they are delivered through
 * treq_backend_done() on the worker like the engine's own. Worker thread;
 * returns the number delivered. target/backend_rbd.c.
 */
int backend_remote_reap(struct worker *w);
/* Main thread, before exports open: the Ceph settings of rbd: exports. */
void backend_rbd_setup(const struct cfg_ceph *ceph);

#endif
