/* SPDX-License-Identifier: MIT */
/*
 * rblk-target internals: exports, workers, connections, requests, I/O
 * engines. See docs/ARCHITECTURE.md for the picture.
 *
 * Threads: the main thread owns the listeners, accepts connections and
 * hands each to a worker. A worker owns its connections, their requests
 * and one I/O engine instance (an io_uring or a libaio context) and runs
 * them to completion without locks. Exports are shared by all; the
 * control thread (ctl.c) may add and remove them at run time: see
 * struct export for the lifetime rules.
 */
#ifndef RBLK_TARGET_H
#define RBLK_TARGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../common/auth.h"
#include "../common/proto.h"
#include "../common/qp.h"
#include "../common/slot_pool.h"
#include "../common/spin.h"
#include "../config/config.h"
#include "../transport/transport.h"
#include "qos.h"
#include "stats.h"

struct worker;
struct tconn;
struct host_share;
struct treq;
struct conn_handoff;

/* ---- exports and their backends ------------------------------------- */

enum export_kind {
	EXPORT_FILE,
	EXPORT_BDEV,
	EXPORT_RAM,
	EXPORT_RBD,
};

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
	enum export_kind kind;
	const struct backend_ops *ops;
	uint64_t size;
	uint32_t block_size;
	uint32_t features; /* RBLK_F_* offered */
	/* the volume's identity (volid_identify()), set at open, then read-only
	 */
	uint8_t vol_id[EXPORT_VOL_ID_LEN];
	enum vol_ident ident;
	char ident_src[320]; /* where vol_id came from, for the log */
	bool read_only;
	int fd;		    /* buffered descriptor (files, block devices) */
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
	void *mem; /* EXPORT_RAM memory, or a direct-access file's MAP_SHARED
		      map */
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
	unsigned int nr_wstats;
	struct export *next; /* target's list, under exports_lock */
};

/*
 * A backend executes a request's storage operation on one export.
 * Called on the worker thread that owns the request.
 */
struct backend_ops {
	const char *name;
	/*
	 * Open the storage named by cfg into e (size, block size, features).
	 * On failure returns -errno with the reason in err.
	 */
	int (*open)(struct export *e, const struct cfg_export *cfg, char *err,
		    size_t errlen);
	void (*close)(struct export *e);
	/*
	 * Start r's operation. Returns 0 when it was handed to the worker's
	 * engine (completion arrives through treq_backend_done()), 1 when
	 * it finished synchronously with r->result set, or -EBUSY when the
	 * engine has no room now: nothing was started, and the worker parks
	 * r (worker->busy_head) and calls submit again after completions.
	 */
	int (*submit)(struct worker *w, struct treq *r);
	/*
	 * Optional: the volume's identity, the same on every target that
	 * exports it (rbd: derived from the cluster fsid, pool, namespace and
	 * image id). Returns true with id filled; any thread after open.
	 * Callers use export_vol_id(), which answers false without the op.
	 */
	bool (*vol_id)(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN]);
};

extern const struct backend_ops backend_file_ops; /* files and block devices */
extern const struct backend_ops backend_ram_ops;
extern const struct backend_ops backend_map_ops; /* files exported direct */
extern const struct backend_ops backend_rbd_ops; /* rbd:POOL/IMAGE */

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
struct stat;
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
/* Parse RBLK_TARGET_UNSAFE_ACK; -EINVAL (logged) for a value it cannot. */
int export_unsafe_ack_init(void);

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

/* ---- I/O engines ----------------------------------------------------- */

/*
 * An engine does asynchronous file I/O for one worker. All ops are
 * required and run on the worker thread, except init() and fini() and
 * what worker_start() registers between them and the thread's start
 * (main thread).
 */
struct engine_ops {
	const char *name; /* "io_uring", "libaio" */
	int (*init)(struct worker *w, unsigned int depth);
	/*
	 * On the worker's thread, first: init() and register_buf() ran on
	 * the main thread, and io_uring enables its ring here so that the
	 * worker is its only issuer (no submission or registration from
	 * another thread after this). 0 or -errno.
	 */
	int (*enable)(struct worker *w);
	void (*fini)(struct worker *w);
	/* Readable (eventfd) when completions are ready. */
	int (*fd)(struct worker *w);
	/*
	 * Register a buffer the engine may use for I/O without pinning per
	 * request (io_uring fixed buffers). Returns an index >= 0, or -errno
	 * when unsupported/exhausted (callers then pass index -1).
	 */
	int (*register_buf)(struct worker *w, void *addr, size_t len);
	void (*unregister_buf)(struct worker *w, int index);
	/*
	 * Queue ops for r; nothing reaches the kernel before submit().
	 * 0, -EBUSY when the engine's queue is full (nothing queued: the
	 * backend returns -EBUSY from its own submit), or another -errno.
	 */
	int (*queue_rw)(struct worker *w, struct treq *r, int fd, bool write,
			void *buf, uint32_t len, uint64_t off, int rw_flags,
			int buf_index);
	int (*queue_fdatasync)(struct worker *w, struct treq *r, int fd);
	int (*submit)(struct worker *w);
	/* Complete finished ops through treq_backend_done(); returns count. */
	int (*reap)(struct worker *w);
	/*
	 * Optional: are completions waiting, seen without a system call (the
	 * io_uring CQ ring)? Lets the worker complete I/O the kernel finished
	 * inside submit() in the same turn. NULL: the worker waits for fd().
	 */
	bool (*ready)(struct worker *w);
};

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

extern const struct engine_ops engine_uring_ops;
extern const struct engine_ops engine_aio_ops;
const struct engine_ops *engine_find(const char *name);

/* ---- requests -------------------------------------------------------- */

/*
 * One tag of a connection. States (docs/PROTOCOL.md, "The flows"):
 */
enum treq_state {
	TREQ_FREE,     /* tag not in use */
	TREQ_THROTTLE, /* over a QoS limit: on its conn's qos FIFO (qos.h) */
	TREQ_SLOT,  /* READ/WRITE: waiting for pool space (worker->slot_wait) */
	TREQ_GRANT, /* WRITE: bind a write window and send GRANT (credits) */
	TREQ_DATA,  /* WRITE: GRANT out; waiting for WRITE_DATA */
	TREQ_EXEC,  /* start the backend operation */
	TREQ_BACKEND, /* engine operation in flight */
	TREQ_RESPOND, /* result known; waiting for send-queue credits */
	TREQ_PULLED,  /* pull READ: RESP + window out; waiting for READ_DONE */
};

struct treq {
	struct tconn *conn;
	/* cmd.tag is the tag's index (c->reqs[], c->mw[], work request ids) */
	struct rblk_cmd cmd;
	/* the tag as the command carried it, echoed in its answers */
	uint16_t wire_tag;
	enum treq_state state;
	int result;	    /* 0 or -errno from the backend */
	int status;	    /* RBLK_S_* to send back */
	bool odirect;	    /* current attempt used the O_DIRECT descriptor */
	uint64_t t_recv_ns; /* when the command arrived, for latency stats */
	/*
	 * The command's run of the worker's slot pool (READ/WRITE), from
	 * TREQ_SLOT until its window is dead and nothing reads it: NULL
	 * otherwise. Backends read and write the data here.
	 */
	void *slot;
	/* a push READ's slot: the NIC reads it until its RESP completes */
	void *sent_slot;
	void *resp_buf; /* this tag's response capsule buffer */
	/*
	 * A push READ on a RBLK_F_PUSH_IMM connection (refused or not): its
	 * answer is a SEND_WITH_INV of cmd.rkey, its data a WRITE WITH
	 * IMMEDIATE naming that key (treq_post_response()).
	 */
	bool push_inv;
	/*
	 * An inline WRITE waiting in TREQ_SLOT keeps its receive buffer
	 * (cmd.data points into it) until a slot takes the data: its index
	 * + 1, else 0.
	 */
	unsigned int held_recv;
	struct treq *next_wait; /* on conn's send-credit wait list */
	struct treq *next_slot; /* on its connection's slot_head FIFO */
	struct treq *next_qos;	/* on its connection's qos_head FIFO */
	/*
	 * worker->now_ms when r last changed state: in the states where its
	 * slot waits on the peer (GRANT, DATA, RESPOND, PULLED) this is how
	 * long the peer has held it (slot_held_too_long(), io.c).
	 */
	uint64_t state_ms;
	/* conn->flushes + 1 while this tag's response waits in the batch:
	 * a command on the tag before that batch is posted is a violation */
	uint64_t resp_batch;
};

/* Called by engines (worker thread) when r's operation finished. */
void treq_backend_done(struct treq *r, int res);

/* ---- connections ----------------------------------------------------- */

enum tconn_state {
	TCONN_LOGIN,   /* accepted; waiting for HELLO */
	TCONN_LIVE,    /* logged in; serving commands */
	TCONN_CLOSING, /* failed or finished; waiting for backend I/O to end */
};

struct tconn {
	struct xp_conn *xc;
	struct worker *worker;
	enum tconn_state state;
	uint64_t id; /* for logs */
	char peer[96];
	uint16_t cm_qd; /* queue depth asked for in the connect request */
	/* in-capsule bytes its receives hold (login_inline_cap()) */
	uint32_t inline_cap;
	struct export *exp;
	struct rblk_limits lim; /* what commands are validated against */

	/*
	 * Message buffers and send credits (common/qp.h). The send area:
	 * a response buffer per tag, LOGIN's, then auth_buf. Responses (and
	 * push-read RDMA WRITEs) built since the last flush sit in qp's
	 * batch, posted as one chain (one doorbell, one sendmsg) by
	 * tconn_flush_sends() at the end of the worker's loop iteration.
	 */
	struct qp qp;

	struct wgroup *wg; /* the worker's poll group c is in */
	/* one type-2 window per tag, bound per command (LIVE only) */
	struct xp_mw **mw;
	/* RBLK_F_DIRECT: a window over the volume, bound at login */
	struct vol_reg *vol;
	struct xp_mw *vol_mw;

	struct treq *reqs;		    /* qd of them */
	struct treq *wait_head, *wait_tail; /* waiting for credits */
	uint64_t flushes;	  /* batches posted (or dropped) so far */
	struct tconn *next_flush; /* on worker->flush_head while nr_batch */
	unsigned int backend_inflight;
	bool login_sent_close; /* close once the LOGIN refusal is sent */
	/* shown by the control socket; written under worker->conns_lock */
	char host[RBLK_NAME_MAX]; /* host name from HELLO */
	uint16_t queue_id;
	uint64_t login_ms;    /* now_ms() at login */
	struct iostats stats; /* written by the owning worker only */

	uint64_t login_deadline_ms; /* TCONN_LOGIN: fail if still here then */
	/*
	 * Authentication, in TCONN_LOGIN (so the login deadline covers it):
	 * the HELLO is kept while AUTH_CHALLENGE is out; nothing is
	 * allocated or registered for slots until the response verifies.
	 */
	bool auth_wait; /* AUTH_CHALLENGE sent; only AUTH_RESPONSE is valid */
	void *auth_buf; /* send buffer of AUTH_* messages, in msg_mem */
	struct rblk_hello hello;
	uint8_t auth_nonce[RBLK_AUTH_NONCE_LEN];
	/*
	 * A refusal kept from a stranger (login_hidden_refusal()): answered
	 * AUTH_REQUIRED or AUTH_FAILED, or with this status once the host
	 * authenticated; c->exp is NULL. 0: none.
	 */
	int hidden_st;
	char hidden_why[256];

	struct tconn *next;	    /* worker's list */
	unsigned int push_inflight; /* push READ responses not completed */
	uint64_t push_progress_ms;  /* last push completed, or first posted */
	/*
	 * Slot pool share (docs/PROTOCOL.md, "What a session may hold"):
	 * the bytes of pool runs its commands hold (push slots included),
	 * its host's share on this worker, and its commands waiting for a
	 * slot (FIFO), served round-robin with other connections' from
	 * worker->slot_conns while on it (slot_queued).
	 */
	uint64_t held;
	struct host_share *hs;
	struct treq *slot_head, *slot_tail;
	struct tconn *next_slot_conn;
	bool slot_queued, slot_parked;
	/*
	 * QoS (qos.h): the limits its commands draw from (its export's, its
	 * host's; NULL: none), and its commands waiting for them (FIFO), on
	 * worker->qos_conns while there are any.
	 */
	struct qos *qos[2];
	struct treq *qos_head, *qos_tail;
	struct tconn *next_qos_conn;
	bool qos_listed;
	struct lim_conn *adm; /* its admission (limits_admit()); owned */
	uint64_t accepted_ms; /* when worker_accept() took it */
	bool talked;	      /* TCONN_LOGIN: a first message came */
	uint64_t last_rx_ms;  /* worker->now_ms of the last message */
	uint64_t closing_ms;  /* when it became TCONN_CLOSING */
};

/* ---- workers --------------------------------------------------------- */

struct target;

/*
 * A worker's poll group for one transport (docs/ARCHITECTURE.md): one PD,
 * one CQ, one fd; every connection of that transport on the worker is in
 * it, and the slot pool is registered in it (local write + MW bind only).
 */
struct wgroup {
	const struct xp_ops *ops;
	struct xp_group *g;
	struct xp_mr *pool_mr; /* the whole pool; NULL with block_mr */
	/*
	 * Only where a window reaches its whole region (the group's
	 * mw_reaches_region, rxe): the pool has no region of its own there
	 * but one per buddy block (order o, index i: pool page i << o), made
	 * while that block exists (the pool's keep mode, worker.c) and never
	 * overlapping. A window then covers one block's region, so the key
	 * reaches that command's run only (docs/ARCHITECTURE.md "Slot pool").
	 * NULL where registering failed (retried when the block is lent).
	 */
	struct xp_mr **block_mr[SLOT_MAX_ORDER + 1];
};

/* A DIRECT volume registered on one of a worker's groups (MW bind only). */
struct vol_reg {
	struct export *exp;
	struct wgroup *wg;
	struct xp_mr *mr;
	unsigned int refs; /* connections with a window on it */
	struct vol_reg *next;
};

#define WORKER_MAX_GROUPS 2 /* tcp, rdma */

struct worker {
	struct target *tgt;
	unsigned int index;
	pthread_t thread;
	int epfd; /* the one place it sleeps: groups, mailbox, engine */
	/* the worker's thread is the only one that touches them */
	struct wgroup groups[WORKER_MAX_GROUPS];
	unsigned int nr_groups;
	/* the slot pool: pool_len bytes, registered in every group */
	void *pool_mem;
	size_t pool_len;
	struct slot_pool pool;
	/* engine registration (worker_pool_buf()), -1, or POOL_BUF_UNTRIED */
	int pool_buf_index;
	/*
	 * Connections with commands waiting for a slot, served round-robin
	 * one command a turn (a connection over its share waits parked
	 * until it or its host frees some); page_owner[i]: the connection whose
	 * data pool page i may hold (0: unknown), so a window never shows
	 * one connection another's bytes (io.c, slot_scrub()).
	 */
	struct tconn *slot_conns_head, *slot_conns_tail;
	struct tconn *slot_parked; /* over a share, waiting for their own */
	bool serving_slots;
	uint64_t *page_owner;
	uint64_t share_session, share_host; /* caps on held, per worker */
	struct host_share *shares; /* per source address, with holders */
	uint64_t window_timeout_ms;
	struct vol_reg *vols;
	int mailbox_fd; /* eventfd: new connections, stop, the checks below */
	/* connection requests from the main thread, newest first (worker.c) */
	_Atomic(struct conn_handoff *) inbox;
	/* taken from the inbox, not joined yet: oldest first (worker.c) */
	struct conn_handoff *joins, *joins_tail;
	bool reap_more;	     /* closed connections left for the next turn */
	struct tconn *conns; /* owned */
	unsigned int nr_conns;
	/*
	 * Held by the worker while it links or unlinks conns or changes a
	 * connection's state or login fields, and by the control socket while
	 * it walks conns. Never taken on the command path.
	 */
	pthread_mutex_t conns_lock;
	atomic_bool stop;
	atomic_bool
	    check_removed; /* an export was removed: close its sessions */
	atomic_bool check_evicted; /* limits evicted a pending connection */

	const struct engine_ops *engine;
	void *engine_priv;
	struct treq *busy_head, *busy_tail; /* waiting for engine room */
	struct tconn *flush_head; /* connections with a batch to post */
	struct tconn *qos_conns;  /* with commands waiting on QoS limits */
	uint64_t qos_wake_ns;	  /* earliest a waiting one may go; 0: none */
	unsigned int spin_us;	  /* poll before sleeping (0: sleep at once) */
	struct spin_backoff spin;
	uint64_t now_ms; /* at the start of this turn */
};

struct target {
	struct cfg_target cfg;
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

/* Find an export by name and take a reference; NULL when none. */
struct export *export_lookup(struct target *t, const char *name);
/* Control thread: tell every worker to close sessions of removed exports. */
void workers_check_removed(struct target *t);

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

/* What login_decide() settles for an accepted HELLO. */
struct login_plan {
	struct rblk_hello hello; /* as decoded */
	bool discover;		/* a DISCOVER HELLO: list exports, then close */
	struct export *exp;	/* the export logged in to (lookup's result) */
	struct rblk_limits lim; /* granted: commands are validated against it */
	char why[256];		/* refusal reason, for the log */
};

/*
 * Decide the answer to the HELLO in buf (len bytes) on a connection that
 * asked for cm_qd at connect time: RBLK_S_OK with p filled, or the status
 * to refuse with (p->why says why). Pure: no I/O, allocation or logging;
 * the caller does the side effects. target/login.c.
 *
 * lookup(ctx, name) finds the export (the target's takes a reference: see
 * export_lookup()). Whatever it returned is in p->exp even when the HELLO
 * is refused afterwards, so the caller can drop that reference.
 */
typedef struct export *(*login_lookup_fn)(void *ctx, const char *name);
int login_decide(const void *buf, size_t len, uint16_t cm_qd,
		 uint32_t cfg_max_io, login_lookup_fn lookup, void *ctx,
		 struct login_plan *p);

/*
 * In-capsule WRITE data (docs/PROTOCOL.md, "In-capsule data"): the most a
 * connection with nr_recv receives (tconn_attr() of its queue depth) may
 * be granted, which its receive buffers are sized for when it is
 * accepted: cfg->inline_data when set, else (auto) the largest power of
 * two from 512 to RBLK_INLINE_DEFAULT that keeps its receive ring
 * (nr_recv receives, each RBLK_CMD_SIZE + inline bytes) within
 * INLINE_RING_PINNED where registering pins memory (rdma), INLINE_RING_UNPINNED
 * where it does not (tcp); 0 when none fits. Pure; any thread.
 */
#define INLINE_RING_PINNED (256u << 10)
#define INLINE_RING_UNPINNED (1u << 20)
uint32_t login_inline_cap(const struct cfg_target *cfg, unsigned int nr_recv,
			  bool pinned);
/* The LOGIN granting lim (volume fields and ids are the caller's). */
void login_reply(const struct rblk_limits *lim, struct rblk_login *l);
/*
 * The volume identity of export e: its configured uuid, else the one
 * volid_identify() took from the backing store (e->vol_id). False when it
 * is a stand-in (VOL_IDENT_NONE): LOGIN then says RBLK_F_NO_IDENTITY to an
 * initiator that asked (login_decide()).
 */
bool login_vol_id(const struct export *e, uint8_t id[RBLK_VOL_ID_LEN]);
/*
 * The durability epoch of e (RBLK_F_EPOCH): it stays the same as long as
 * every write the target acknowledged on e survives. A file or a block
 * device keeps them in the page cache or the device's cache while the
 * machine runs, however often the target restarts: the machine's boot
 * (a hash of its boot_id). RBD (librbd's write-back cache) and RAM keep
 * them in the process: a random value per target run.
 */
uint32_t login_epoch(const struct export *e);
/*
 * A LOGIN's session_id: random, its high 32 bits the export's durability
 * epoch (login_epoch()) where l->features has RBLK_F_EPOCH.
 */
void login_session_id(const struct export *e, struct rblk_login *l);

/*
 * The authentication rule (docs/man/rblk-target.conf.5): a host with a
 * [host] section must always authenticate, so nobody can use its name
 * without its secret; an export with allow/allow_ro admits only the hosts
 * listed, authenticated. target/login.c.
 */
bool login_auth_needed(const struct cfg_target *cfg, const struct export *e,
		       const char *host);

/*
 * Before authentication a stranger is not told which exports exist
 * (docs/PROTOCOL.md, "What a stranger learns"): a HELLO refused with st
 * (e: the export found, or NULL) is answered like one for an export that
 * needs authentication - AUTH_REQUIRED, or a challenge when it offers a
 * secret, the real status only once the host has proven itself - when
 * st is NO_EXPORT, ACCESS_DENIED (a closed export), or any refusal of an
 * export that needs authentication (auth_needed: login_auth_needed()).
 * Not when every export is open to any host (all_open): then there is
 * nothing to hide, and a typo in a name is answered NO_EXPORT. Pure.
 */
bool login_hidden_refusal(int st, const struct export *e, bool all_open,
			  bool auth_needed);
/* Every export is open to any host without authentication (any thread). */
bool exports_all_open(struct target *t);

/* What auth_decide() settles for an AUTH_RESPONSE. */
struct auth_plan {
	struct rblk_auth_ctx ctx;    /* what the MACs bind (for AUTH_RESULT) */
	const struct cfg_host *host; /* the host proven, on RBLK_S_OK */
	bool read_only;		     /* an allow_ro grant */
	char why[320];		     /* refusal reason, for the log */
};

/*
 * Verify the AUTH_RESPONSE in buf (len bytes) to the challenge nonce sent
 * for hello on export e: decode, refuse a reflected or zero nonce, verify
 * the MAC with the host's secret (a dummy key for an unknown host, so the
 * work is the same), then e's allow list (e NULL: a hidden refusal, no
 * list to check). RBLK_S_OK with a filled, or the
 * status to refuse with (a->why says why). Pure like login_decide(); the
 * caller sends AUTH_RESULT (MAC over a->ctx) and the LOGIN.
 */
int auth_decide(const void *buf, size_t len, const struct cfg_target *cfg,
		const struct export *e, const struct rblk_hello *hello,
		const uint8_t nonce[RBLK_AUTH_NONCE_LEN], struct auth_plan *a);

/*
 * Limits (target/limits.c; any thread). limits_admit(): may a connection
 * from peer (xp_peer_name()) be accepted on worker w? Its admission
 * (counted as pending), or NULL: refuse it BUSY. A full pending table
 * evicts an older pending connection for it (the comment in limits.c
 * says which): marked for its worker, which is told by
 * worker_kick_evicted() and closes the ones limits_evicted() says.
 * limits_talking(): c sent its first message. limits_login(): turn c's
 * pending count into a session, or RBLK_S_BUSY with why set.
 * limits_release(): give back what c held and free it (NULL: nothing).
 * limits_pressure(): the pending table is three quarters full; pending
 * connections get LOGIN_PRESSURE_MS, not the full login limit.
 */
struct lim_conn;
struct lim_conn *limits_admit(const struct cfg_target *cfg, const char *peer,
			      struct worker *w);
void limits_talking(struct lim_conn *c);
bool limits_evicted(const struct lim_conn *c);
bool limits_pressure(void);
uint64_t limits_evictions(void); /* since start */
int limits_login(const struct cfg_target *cfg, struct lim_conn *c, char *why,
		 size_t whylen);
void limits_release(const struct cfg_target *cfg, struct lim_conn *c);
/* Any thread: tell w to close its evicted pending connections. */
void worker_kick_evicted(struct worker *w);
/* The host part of a peer name ("tcp 192.0.2.1:41234" -> "192.0.2.1",
 * a unix peer -> "unix uid U"). */
void limits_host_of(const char *peer, char *out, size_t len);

int worker_start(struct worker *w, struct target *t, unsigned int index);
void worker_stop(struct worker *w);
#define POOL_BUF_UNTRIED (-2)
/*
 * The engine's registration of w's pool (a fixed buffer index), or -1
 * where the engine has none. Made at worker start (before its thread
 * runs), except where every export at start is in RAM: then on the
 * worker's first disk I/O (worker thread), so a target that serves RAM
 * exports only never pins its pool a second time for the engine (VmPin
 * counts every registration of the same pages).
 */
int worker_pool_buf(struct worker *w);

/*
 * Main thread: take the next connection request on listener l, check its
 * private data, admit it (limits) and hand it to w through w's mailbox;
 * w joins it to its poll group, sets it up (message buffers, receives
 * posted), accepts it and links it in, on its own thread. Returns 0
 * (handed over, or refused here), -EAGAIN when no request is pending, or
 * another -errno from the transport. Every request handed to w is
 * settled by worker_stop(), so stop the workers before the listeners.
 */
int worker_accept(struct worker *w, struct xp_listener *l, const char *url);
/* Transport sizes for a connection of queue depth qd. */
void tconn_attr(uint16_t qd, uint32_t max_io, struct xp_conn_attr *attr);

/*
 * Fault injection for the initiator's tests (tests/vm/tests/25, 26): only
 * in the test build build/tests/rblk-target-fault (-DRBLK_FAULTS), where
 * the environment's RBLK_FAULT names how the target misbehaves once a
 * session has logged in (the modes of tests/e2e/rblk_rogue.py: silent,
 * break, push-nodata, push-wrongtag, write-zero, write-early, size0,
 * size63), or with "@FILE" the file that names it, read at each use so a
 * test can change it while sessions run. Compiled out of rblk-target.
 */
#ifdef RBLK_FAULTS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static inline bool target_fault(const char *mode)
{
	const char *f = getenv("RBLK_FAULT");
	char buf[32] = "";
	FILE *fp;

	if (f && f[0] == '@' && (fp = fopen(f + 1, "r"))) {
		if (fgets(buf, sizeof(buf), fp))
			buf[strcspn(buf, "\n")] = 0;
		fclose(fp);
		f = buf;
	}
	return f && !strcmp(f, mode);
}
#else
#define target_fault(mode) false
#endif

#endif
