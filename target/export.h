/* SPDX-License-Identifier: MIT */
/*
 * Exports: a volume a target serves under a name, its identity and its
 * lifetime (export.c, volid.c). How its storage is reached is its
 * backend's business (backend.h).
 */
#ifndef RBLK_TARGET_EXPORT_H
#define RBLK_TARGET_EXPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/proto.h"
#include "qos.h"

struct backend_ops;
struct cfg_export;
struct iostats;
struct stat;
struct target;

#define EXPORT_VOL_ID_LEN 16

/* Where an export's volume id comes from (volid.c). */
enum vol_ident {
	VOL_IDENT_NONE,	   /* a stand-in: LOGIN says RBLK_F_NO_IDENTITY */
	VOL_IDENT_CONFIG,  /* uuid = */
	VOL_IDENT_BACKEND, /* backend_ops.vol_id (rbd: the image) */
	VOL_IDENT_XATTR,   /* the file's user.rblk.uuid */
	VOL_IDENT_SIDECAR, /* .NAME.rblk-uuid beside the file */
	VOL_IDENT_DEVICE, /* the block device's wwid / serial / dm or md uuid */
	VOL_IDENT_RUN,	  /* ram: random, this run's volume only */
};

/*
 * Lifetime: an export is reference counted. The target's export list holds
 * one reference, and every connection that found it at login holds one
 * (taken under the list lock by export_lookup(), dropped when the
 * connection is freed), so the data path reaches c->exp without a lock and
 * an export outlives every session on it. Removing an export unlinks it,
 * sets removed and drops the list's reference; the last put closes and
 * frees it: on the control thread (ctl.c) for a removed export, so that a
 * long close never stalls a worker.
 */
struct cfg_retired {
	struct cfg_retired *next;
	struct cfg_export *cfg;
};

struct export
{
	char name[RBLK_NAME_MAX];
	char path[4096];
	const struct backend_ops *ops; /* its backend (backend_open()) */
	uint64_t size;
	uint32_t block_size;
	uint32_t features; /* RBLK_F_* offered */
	/* the volume's identity (volid_identify()), set at open, then read-only
	 */
	uint8_t vol_id[EXPORT_VOL_ID_LEN];
	enum vol_ident ident;
	char ident_src[320]; /* where vol_id came from, for the log */
	bool read_only;
	/* the backend's: open() sets them, close() releases them */
	int fd;		    /* buffered descriptor (files, block devices) */
	bool bdev;	    /* fd is a block device */
	int fd_odirect;	    /* O_DIRECT descriptor, or -1 when refused */
	uint32_t dio_align; /* offset/length alignment O_DIRECT needs */
	atomic_bool odirect_failed; /* O_DIRECT gave EINVAL once: stop using */
	/*
	 * The file lives in memory (tmpfs, ramfs): reads and writes are
	 * copies that never wait for a disk, done on the worker like RAM.
	 * (tmpfs has no non-blocking reads, so io_uring would hand every
	 * one to a kernel worker thread: two context switches per I/O.)
	 */
	bool mem_fs;
	void *mem; /* RAM volume's memory, or a direct-access file's MAP_SHARED
		      map */
	/* ram: bytes reserved at mem, the most it may grow to (mem_len) */
	uint64_t mem_len;
	/* RBLK_F_DIRECT: one-sided volume access, mem registered per connection
	 */
	bool direct;
	void *priv; /* the backend's own state (rbd: struct rbd_image) */
	atomic_uint sessions; /* live logins */
	atomic_uint refs;
	atomic_bool removed; /* unlinked; workers close its sessions */
	/*
	 * The definition e was opened from, owned by e (export_create()):
	 * path, options and the access list (allow, allow_ro). Logins read
	 * it without a lock; `rblk-target ctl set-hosts` publishes a new copy
	 * by an atomic store and keeps the old ones (retired) until e is
	 * freed, so a login reading the old one is never left dangling.
	 */
	struct cfg_export *_Atomic cfg;
	struct cfg_retired *retired; /* replaced definitions; ctl thread */
	struct iostats
	    *wstats;	/* one per worker, written by that worker only */
	struct qos qos; /* its limits, for all its sessions together */
	/* its reservations (pr.h); NULL with direct access: none offered */
	struct pr *pr;
	unsigned int nr_wstats;
	struct export *next; /* target's list, under exports_lock */
};

/*
 * An export on list, other than e, with e's volume id where one of the two
 * was configured (uuid =): two volumes must not share an identity. (Two
 * exports of one file share its stored id truthfully: not a clash.) NULL
 * when none; the caller holds whatever keeps list stable.
 */
const struct export *export_id_clash(const struct export *list,
				     const struct export *e);

/* e's volume identity (backend_ops.vol_id); false when it has none. */
bool export_vol_id(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN]);

/*
 * Volume identity (volid.c). volid_identify() sets e->vol_id, e->ident
 * and e->ident_src for an opened export (the backend's open has run) and
 * logs them; the rest are its steps, exported for tests/unit/test_volid.c.
 */
#define VOLID_XATTR "user.rblk.uuid"
void volid_identify(struct export *e, const struct cfg_export *cfg);
void volid_format(const uint8_t id[EXPORT_VOL_ID_LEN], char out[37]);
void volid_random(uint8_t id[EXPORT_VOL_ID_LEN]);
/*
 * The id stored in fd's user.rblk.uuid, or a new random one stored there
 * (*created). 0, -EINVAL (not a UUID), or -errno of the xattr calls
 * (-ENOTSUP: the file system has no user xattrs).
 */
int volid_xattr(int fd, uint8_t id[EXPORT_VOL_ID_LEN], bool *created);
/* The sidecar of path: .NAME.rblk-uuid in its directory. */
int volid_sidecar_path(const char *path, char *out, size_t outlen);
/* The id in path's sidecar (written to side), made there when absent. */
int volid_sidecar(const char *path, uint8_t id[EXPORT_VOL_ID_LEN],
		  bool *created, char *side, size_t sidelen);
/*
 * The identity of block device major:minor from sysfs under sysroot
 * ("/sys"): its wwid, serial, dm or md uuid, hashed; a partition adds its
 * start. 0 with src describing it, or -ENOENT when it has none.
 */
int volid_device(const char *sysroot, unsigned int major, unsigned int minor,
		 uint8_t id[EXPORT_VOL_ID_LEN], char *src, size_t srclen);
/* The stand-in for a volume without identity: machine, device, inode. */
void volid_local(const char *machine, const struct stat *st,
		 uint8_t id[EXPORT_VOL_ID_LEN]);
void volid_none(struct export *e, const struct stat *st);

/*
 * The volume's size now. It changes at run time (export_resize(), an RBD
 * image's header watch): read it with this anywhere but the thread that
 * sets it. Connections compare it with what they were told
 * (docs/PROTOCOL.md, "Live resize").
 */
static inline uint64_t export_size(const struct export *e)
{
	return __atomic_load_n(&e->size, __ATOMIC_ACQUIRE);
}

/* Publish size as e's (the only writer at a time: ctl thread, rbd watch). */
static inline uint64_t export_size_set(struct export *e, uint64_t size)
{
	return __atomic_exchange_n(&e->size, size, __ATOMIC_ACQ_REL);
}

/*
 * `ctl resize-export`: resize e to size bytes (0: take the size its
 * backing store has now), shrinking only with force, and publish it.
 * Control thread. 0 with *old_size and *new_size set, or -errno with err
 * written.
 */
int export_resize(struct export *e, uint64_t size, bool force,
		  uint64_t *old_size, uint64_t *new_size, char *err,
		  size_t errlen);

int export_open(struct export *e, const struct cfg_export *cfg, char *err,
		size_t errlen);
void export_close(struct export *e);
/*
 * May host (the HELLO's host name, possibly empty, never proven) see
 * export e in a discovery listing? Only when e is open to any host. The
 * one place that decides it; any thread.
 */
bool export_visible_to(const struct export *e, const char *host);
/*
 * Allocate and open an export for cfg with per-worker statistics for
 * nr_workers; holds one reference (the caller's). NULL on failure, logged
 * and said in err (e.g. "open /x: No such file or directory").
 */
struct export *export_create(const struct cfg_export *cfg,
			     unsigned int nr_workers, char *err, size_t errlen);
void export_get(struct export *e);
/*
 * Drop a reference; the last one closes and frees e: for a removed export
 * on the reaper thread (export_reaper_set()), else right here.
 */
void export_put(struct export *e);
/*
 * The calling thread becomes the reaper: removed exports whose last
 * reference goes elsewhere are queued and efd (an eventfd) written; the
 * reaper then calls export_reap(). efd -1: no reaper (close where put).
 */
void export_reaper_set(int efd);
void export_reap(void);

/* Find an export by name and take a reference; NULL when none. */
struct export *export_lookup(struct target *t, const char *name);
/* Every export is open to any host without authentication (any thread). */
bool exports_all_open(struct target *t);

#endif
