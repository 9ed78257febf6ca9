/* SPDX-License-Identifier: MIT */
/*
 * Ceph RBD backend: exports named rbd:POOL/IMAGE, rbd:POOL/NAMESPACE/IMAGE
 * or ...IMAGE@SNAP (read-only), served with librbd's asynchronous calls.
 *
 * Connections: the target opens at most rbd_cluster_connections rados
 * cluster handles (one by default), lazily, and spreads images over them
 * round robin; each handle keeps one ioctx per pool and namespace. Both
 * are reference counted by the images and closed with the last one, so a
 * handle the cluster blocklisted is replaced by the next add-export.
 *
 * Completions: librbd calls back on its own threads. The callback queues
 * the request's op on its worker's queue (a lock-free LIFO: a CAS push,
 * an exchange to take everything) and, when the queue was empty, writes
 * the worker's engine eventfd; the engine's reap() calls
 * backend_remote_reap(), which hands each op to treq_backend_done() on
 * the worker thread. The data path takes no lock.
 *
 * Fencing: a writable export of an image with the exclusive-lock feature
 * holds the lock (rbd_lock_acquire, which librbd never hands over on
 * request) from the first write-class command until its sessions are
 * gone. Acquiring it runs on the image's lock thread; commands that need
 * it wait there. With rbd_takeover (the default) a lock held by another
 * client is broken first: librbd blocklists that client at the OSDs, so a
 * stalled gateway's late writes are refused. A target blocklisted that
 * way fails every later write-class command of the export with EIO.
 * docs/ARCHITECTURE.md, "RBD fencing", says what is guaranteed.
 */
#include "backend.h"

#include <errno.h>
#include <inttypes.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/fifo.h"
#include "../common/log.h"
#include "../common/util.h"

#include "conn.h"
#include "engine.h"
#include "target.h"
#include "worker.h"

/* what the OSDs answer a blocklisted client (ceph's include/rados.h) */
#ifndef EBLOCKLISTED
#define EBLOCKLISTED ESHUTDOWN
#endif

/* ---- settings ------------------------------------------------------------ */

static struct cfg_ceph ceph_cfg = {
    .id = "admin",
    .connections = 1,
    .takeover = true,
    .timeout_s = 20,
};

void backend_rbd_setup(const struct cfg_ceph *ceph)
{
	ceph_cfg = *ceph;
}

/* ---- cluster connections and pools (open and close only) ---------------- */

struct rbd_pool {
	struct rbd_pool *next;
	char name[128];
	char nspace[128];
	rados_ioctx_t ioctx;
	int64_t pool_id;
	unsigned int refs;
};

struct rbd_conn {
	rados_t rados;
	char fsid[64];
	unsigned int refs; /* images */
	struct rbd_pool *pools;
	/* librados' op budget (objecter_inflight_ops, _op_bytes): see gate */
	uint64_t budget_ops, budget_bytes;
};

/* Guards conns[] and every pool list; taken by open and close only. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rbd_conn *conns[64];
static unsigned int next_conn;

/* A name for librados' error codes that users meet at open. */
static const char *rados_why(int ret)
{
	switch (ret) {
	case -ETIMEDOUT:
		return "timed out: cluster unreachable (mon address, ceph.conf) or not healthy";
	case -EACCES:
	case -EPERM:
		return "permission denied: wrong key or client id, or missing caps";
	case -ENOENT:
		return "no such file or object";
	default:
		return strerror(-ret);
	}
}

static int conf_set(rados_t r, const char *key, const char *val, char *err,
		    size_t errlen)
{
	int ret = rados_conf_set(r, key, val);

	if (ret)
		return open_fail(err, errlen, ret, "rados_conf_set(%s=%s): %s",
				 key, val, strerror(-ret));
	return 0;
}

/* A numeric librados option, or def if it cannot be read. */
static uint64_t conf_u64(rados_t r, const char *key, uint64_t def)
{
	char buf[32], *end;
	unsigned long long v;

	if (rados_conf_get(r, key, buf, sizeof(buf)))
		return def;
	errno = 0;
	v = strtoull(buf, &end, 10);
	return errno || end == buf || !v ? def : v;
}

/* Connect a new cluster handle; conns_lock held. */
static int conn_create(struct rbd_conn **out, char *err, size_t errlen)
{
	struct rbd_conn *c = calloc(1, sizeof(*c));
	char tmo[16];
	int ret;

	if (!c)
		return open_fail(err, errlen, -ENOMEM, "out of memory");
	ret = rados_create(&c->rados, ceph_cfg.id);
	if (ret) {
		open_fail(err, errlen, ret, "rados_create(client.%s): %s",
			  ceph_cfg.id, strerror(-ret));
		goto out_free;
	}
	/*
	 * Defaults that ceph.conf may override. rbd_non_blocking_aio off:
	 * rbd_aio_read/write build and send their OSD ops in the calling
	 * worker instead of handing each to librbd's io_context_pool thread,
	 * one thread wake-up less per I/O. The hand-off guards against
	 * blocking in librbd's cache, which the target keeps off, and in the
	 * Objecter's op budget, which librados makes a blocking throttle: a
	 * worker never submits past its share of that budget (the gate).
	 */
	ret = conf_set(c->rados, "rbd_non_blocking_aio", "false", err, errlen);
	if (ret)
		goto out_shutdown;
	ret = rados_conf_read_file(c->rados,
				   ceph_cfg.conf[0] ? ceph_cfg.conf : NULL);
	if (ret) {
		open_fail(err, errlen, ret, "reading %s: %s",
			  ceph_cfg.conf[0]
			      ? ceph_cfg.conf
			      : "ceph.conf ($CEPH_CONF, /etc/ceph/ceph.conf)",
			  strerror(-ret));
		goto out_shutdown;
	}
	snprintf(tmo, sizeof(tmo), "%u", ceph_cfg.timeout_s);
	/*
	 * Bounded waits: an unreachable cluster fails the open instead of
	 * hanging it, and an OSD op that cannot finish fails with EIO. No
	 * librbd cache: a write is acknowledged once the OSDs have it, which
	 * the takeover guarantee depends on. No admin socket: two targets
	 * (or a target and fio) with one client name would fight over it.
	 */
	if ((ceph_cfg.keyring[0] &&
	     (ret = conf_set(c->rados, "keyring", ceph_cfg.keyring, err,
			     errlen))) ||
	    (ret = conf_set(c->rados, "client_mount_timeout", tmo, err,
			    errlen)) ||
	    (ret = conf_set(c->rados, "rados_mon_op_timeout", tmo, err,
			    errlen)) ||
	    (ret = conf_set(c->rados, "rados_osd_op_timeout", tmo, err,
			    errlen)) ||
	    (ret = conf_set(c->rados, "rbd_cache", "false", err, errlen)) ||
	    (ret = conf_set(c->rados, "admin_socket", "", err, errlen)))
		goto out_shutdown;
	ret = rados_connect(c->rados);
	if (ret) {
		open_fail(err, errlen, ret,
			  "connecting to the cluster as client.%s: %s",
			  ceph_cfg.id, rados_why(ret));
		goto out_shutdown;
	}
	ret = rados_cluster_fsid(c->rados, c->fsid, sizeof(c->fsid));
	if (ret < 0) {
		open_fail(err, errlen, ret, "rados_cluster_fsid: %s",
			  strerror(-ret));
		goto out_shutdown;
	}
	c->budget_ops = conf_u64(c->rados, "objecter_inflight_ops", 1024);
	c->budget_bytes =
	    conf_u64(c->rados, "objecter_inflight_op_bytes", 100u << 20);
	*out = c;
	return 0;

out_shutdown:
	rados_shutdown(c->rados);
out_free:
	free(c);
	return ret;
}

/* Take a connection (round robin over the configured number); locked. */
static int conn_get(struct rbd_conn **out, char *err, size_t errlen)
{
	unsigned int n = MIN(MAX(ceph_cfg.connections, 1u), ARRAY_SIZE(conns));
	unsigned int i = next_conn++ % n;
	int ret;

	if (!conns[i]) {
		ret = conn_create(&conns[i], err, errlen);
		if (ret)
			return ret;
		log_info(
		    "rbd: connected to cluster %s as client.%s (connection %u of %u, op budget %" PRIu64
		    " ops, %" PRIu64 " bytes)",
		    conns[i]->fsid, ceph_cfg.id, i + 1, n, conns[i]->budget_ops,
		    conns[i]->budget_bytes);
	}
	conns[i]->refs++;
	*out = conns[i];
	return 0;
}

static void conn_put(struct rbd_conn *c)
{
	if (--c->refs)
		return;
	for (unsigned int i = 0; i < ARRAY_SIZE(conns); i++)
		if (conns[i] == c)
			conns[i] = NULL;
	rados_shutdown(c->rados);
	free(c);
}

static int pool_get(struct rbd_conn *c, const char *name, const char *nspace,
		    struct rbd_pool **out, char *err, size_t errlen)
{
	struct rbd_pool *p;
	int ret;

	for (p = c->pools; p; p = p->next) {
		if (!strcmp(p->name, name) && !strcmp(p->nspace, nspace)) {
			p->refs++;
			*out = p;
			return 0;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return open_fail(err, errlen, -ENOMEM, "out of memory");
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->nspace, sizeof(p->nspace), "%s", nspace);
	ret = rados_ioctx_create(c->rados, name, &p->ioctx);
	if (ret) {
		free(p);
		return open_fail(err, errlen, ret, "pool '%s': %s", name,
				 ret == -ENOENT ? "no such pool"
						: rados_why(ret));
	}
	rados_ioctx_set_namespace(p->ioctx, nspace);
	p->pool_id = rados_ioctx_get_id(p->ioctx);
	p->refs = 1;
	p->next = c->pools;
	c->pools = p;
	*out = p;
	return 0;
}

static void pool_put(struct rbd_conn *c, struct rbd_pool *p)
{
	struct rbd_pool **pp;

	if (--p->refs)
		return;
	for (pp = &c->pools; *pp != p; pp = &(*pp)->next)
		;
	*pp = p->next;
	rados_ioctx_destroy(p->ioctx);
	free(p);
}

/* ---- images ----------------------------------------------------------------
 */

/* The exclusive lock, as this target sees it. */
enum rbd_lock_state {
	LOCK_NONE,     /* read-only export or no exclusive-lock feature */
	LOCK_UNLOCKED, /* not held; the next write-class command takes it */
	LOCK_HELD,     /* held: write-class commands go straight to librbd */
	LOCK_FENCED,   /* another gateway took it over: writes fail */
};

struct rbd_op;

struct rbd_image {
	struct export *e;
	struct rbd_conn *conn;
	struct rbd_pool *pool;
	rbd_image_t image;
	char spec[1024]; /* pool/[ns/]image[@snap] for logs */
	char id[64];	 /* the image id */
	uint64_t watch_handle;
	bool watching;
	uint8_t vol_id[EXPORT_VOL_ID_LEN];
	/*
	 * Reservations (pr.h) live in the image's metadata, key
	 * PR_META_KEY, on its header object: pr_io is an ioctx of our own
	 * (rados_get_last_version() is per ioctx) and pr_ver the header's
	 * version at the last load, for the compare-and-set of a store.
	 * Both under the export's pr lock.
	 */
	rados_ioctx_t pr_io;
	char header_oid[96];
	uint64_t pr_ver;

	uint64_t obj_size;	/* bytes per RADOS object */
	_Atomic int lock_state; /* enum rbd_lock_state */
	atomic_uint inflight;	/* ops in librbd */
	/*
	 * The lock thread: acquires the lock for parked write-class ops,
	 * releases it once no session is left. parked and want are under
	 * mu; the data path takes mu only while the lock is not held.
	 */
	pthread_t lock_thread;
	bool lock_thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct rbd_op *parked; /* waiting for the lock, newest first */
	bool stop;
};

/* ---- per-worker completion queue ------------------------------------------
 */

struct rbd_wq {
	struct rbd_op *_Atomic head; /* pushed by librbd threads */
	int efd; /* the worker's engine eventfd; 0: not set up yet */
	struct worker *w;
	/*
	 * The gate. librados throttles its Objecter: an op submitted while
	 * objecter_inflight_ops ops or objecter_inflight_op_bytes bytes are
	 * in flight on the cluster connection waits in rbd_aio_*() for
	 * earlier ones to finish (up to rbd_timeout with an unreachable
	 * cluster). With rbd_non_blocking_aio off that would stall the
	 * worker and everyone it serves, so each worker keeps its ops within
	 * 1 / (2 * workers) of the budget (counted here from issue to reap,
	 * an op weighing the objects it touches) and holds the rest in
	 * over_head, oldest first, until its own completions make room.
	 * Counted by any thread that issues (the lock thread too), so atomic.
	 */
	atomic_ullong ops, bytes;
	struct rbd_op *over_head, *over_tail;
	uint64_t waits; /* ops held at the gate since the last log line */
	uint64_t waits_logged_ms;
	/* ops that took RBD_SLOW_MS or more since the last note (slow_note) */
	uint64_t slow, slow_max_ms, slow_logged_ms;
};

/*
 * An op the cluster took this long to answer is worth telling the
 * operator about: an OSD that died stalls the I/O of its placement groups
 * until the monitors mark it down and peering ends (seconds), a lost
 * monitor quorum longer. Noted at most once per RBD_SLOW_NOTE_MS per
 * worker, with the count and the longest, so a thrashed cluster leaves a
 * trace in the target's log without flooding it.
 */
#define RBD_SLOW_MS 1000
#define RBD_SLOW_NOTE_MS 5000

/* Lives as long as its worker thread, which drains it before exiting. */
static __thread struct rbd_wq tls_wq;

enum rbd_stage {
	STAGE_IO,	 /* the command's own operation */
	STAGE_FUA_FLUSH, /* a FUA write's flush after the write */
};

struct rbd_op {
	struct rbd_op *next;
	struct treq *r;
	struct rbd_image *img;
	struct rbd_wq *wq;
	enum rbd_stage stage;
	int res;
	uint64_t start_ms; /* worker clock at submit */
	/* what it counts against the gate while issued */
	uint64_t weight_ops, weight_bytes;
};

static void wq_push(struct rbd_op *op)
{
	struct rbd_wq *q = op->wq;
	struct rbd_op *head =
	    atomic_load_explicit(&q->head, memory_order_relaxed);
	uint64_t one = 1;

	do {
		op->next = head;
	} while (!atomic_compare_exchange_weak_explicit(
	    &q->head, &head, op, memory_order_release, memory_order_relaxed));
	/* the consumer drains after reading the eventfd: wake on the
	 * empty -> non-empty edge only */
	if (!head && write(q->efd, &one, sizeof(one)) < 0)
		log_warn("rbd: waking worker %u: %s", q->w->index,
			 strerror(errno));
}

static void op_done_cb(rbd_completion_t c, void *arg)
{
	struct rbd_op *op = arg;

	op->res = (int)rbd_aio_get_return_value(c);
	rbd_aio_release(c);
	atomic_fetch_sub_explicit(&op->img->inflight, 1, memory_order_relaxed);
	wq_push(op);
}

static bool is_write_class(uint8_t opcode)
{
	return opcode == RBLK_OP_WRITE || opcode == RBLK_OP_TRIM ||
	       opcode == RBLK_OP_WRITE_ZEROES || opcode == RBLK_OP_FLUSH;
}

/* The Objecter ops (objects touched) and bytes of op's stage. */
static void op_weigh(struct rbd_op *op)
{
	const struct rblk_cmd *cmd = &op->r->cmd;
	uint64_t osz = op->img->obj_size;

	if (op->stage == STAGE_FUA_FLUSH || cmd->opcode == RBLK_OP_FLUSH ||
	    !cmd->length || !osz) {
		op->weight_ops = 1;
		op->weight_bytes = 0;
		return;
	}
	op->weight_ops =
	    (cmd->offset + cmd->length - 1) / osz - cmd->offset / osz + 1;
	op->weight_bytes =
	    cmd->opcode == RBLK_OP_READ || cmd->opcode == RBLK_OP_WRITE
		? cmd->length
		: 0;
}

/*
 * Hand op's stage to librbd (weighed: gate_open() for STAGE_IO, the reap
 * for the FUA flush); any thread. On a synchronous failure the op is
 * completed through its queue like any other.
 */
static void op_issue(struct rbd_op *op)
{
	struct rbd_image *img = op->img;
	const struct rblk_cmd *cmd = &op->r->cmd;
	rbd_completion_t c;
	int ret;

	atomic_fetch_add_explicit(&op->wq->ops, op->weight_ops,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&op->wq->bytes, op->weight_bytes,
				  memory_order_relaxed);
	ret = rbd_aio_create_completion(op, op_done_cb, &c);
	if (ret) {
		op->res = ret;
		wq_push(op);
		return;
	}
	atomic_fetch_add_explicit(&img->inflight, 1, memory_order_relaxed);
	if (op->stage == STAGE_FUA_FLUSH) {
		ret = rbd_aio_flush(img->image, c);
	} else {
		switch (cmd->opcode) {
		case RBLK_OP_READ:
			ret = rbd_aio_read(img->image, cmd->offset, cmd->length,
					   op->r->slot, c);
			break;
		case RBLK_OP_WRITE:
			ret = rbd_aio_write(img->image, cmd->offset,
					    cmd->length, op->r->slot, c);
			break;
		case RBLK_OP_FLUSH:
			ret = rbd_aio_flush(img->image, c);
			break;
		case RBLK_OP_TRIM:
		case RBLK_OP_WRITE_ZEROES:
			/*
			 * Both must read back as zeroes. rbd_aio_discard
			 * skips ranges smaller than its granularity;
			 * write_zeroes deallocates whole objects and zeroes
			 * the partial ones, so it serves both.
			 */
			ret = rbd_aio_write_zeroes(img->image, cmd->offset,
						   cmd->length, c, 0, 0);
			break;
		default:
			ret = -EOPNOTSUPP;
			break;
		}
	}
	if (ret < 0) {
		atomic_fetch_sub_explicit(&img->inflight, 1,
					  memory_order_relaxed);
		rbd_aio_release(c);
		op->res = ret;
		wq_push(op);
	}
}

/* Tell the lock thread to act (acquire for parked ops, or release). */
static void lock_thread_kick(struct rbd_image *img)
{
	pthread_cond_signal(&img->cond);
}

/*
 * Start op (stage STAGE_IO) on the worker: issue it, or park it for the
 * lock thread. False: the image is fenced, op was not started.
 */
static bool op_start(struct rbd_op *op)
{
	struct rbd_image *img = op->img;
	int state;

	state = atomic_load_explicit(&img->lock_state, memory_order_acquire);
	if (state == LOCK_NONE || state == LOCK_HELD ||
	    !is_write_class(op->r->cmd.opcode)) {
		op_issue(op);
		return true;
	}
	if (state == LOCK_FENCED)
		return false;
	/* slow path: wait for the lock thread to take the lock */
	pthread_mutex_lock(&img->mu);
	state = atomic_load_explicit(&img->lock_state, memory_order_acquire);
	if (state == LOCK_HELD) {
		pthread_mutex_unlock(&img->mu);
		op_issue(op);
		return true;
	}
	op->next = img->parked;
	img->parked = op;
	lock_thread_kick(img);
	pthread_mutex_unlock(&img->mu);
	return true;
}

/* The divisor of a connection's budget that gives one worker's share. */
static unsigned int gate_share(const struct rbd_wq *q)
{
	return 2 * MAX(q->w->tgt->nr_workers, 1u);
}

/*
 * Whether op may be issued now (the gate, see struct rbd_wq); weighs op. An op
 * alone on its worker always may, whatever it weighs: nothing else would make
 * room for it.
 */
static bool gate_open(const struct rbd_wq *q, struct rbd_op *op)
{
	const struct rbd_conn *c = op->img->conn;
	unsigned int share = gate_share(q);
	uint64_t ops = atomic_load_explicit(&q->ops, memory_order_relaxed);
	uint64_t bytes = atomic_load_explicit(&q->bytes, memory_order_relaxed);

	op_weigh(op);
	return !ops || (ops + op->weight_ops <= c->budget_ops / share &&
			bytes + op->weight_bytes <= c->budget_bytes / share);
}

/*
 * Count an op held at the gate; say so at most once a minute per worker,
 * so an operator learns that the budget, not the cluster, sets the pace.
 */
static void gate_note_wait(struct rbd_wq *q, const struct rbd_conn *c)
{
	unsigned int share = gate_share(q);

	q->waits++;
	if (q->waits_logged_ms && q->w->now_ms - q->waits_logged_ms < 60000)
		return;
	log_info(
	    "rbd: worker %u: %" PRIu64
	    " I/O%s waited for the worker's share of the cluster connection's op budget (%" PRIu64
	    " ops, %" PRIu64 " bytes of objecter_inflight_ops %" PRIu64
	    ", objecter_inflight_op_bytes %" PRIu64
	    "); raise those in ceph.conf if this repeats",
	    q->w->index, q->waits, q->waits == 1 ? "" : "s",
	    c->budget_ops / share, c->budget_bytes / share, c->budget_ops,
	    c->budget_bytes);
	q->waits = 0;
	q->waits_logged_ms = q->w->now_ms ? q->w->now_ms : 1;
}

/* Issue what waits at the gate while it lets ops through; worker. */
static void gate_drain(struct rbd_wq *q)
{
	struct rbd_op *op;

	while ((op = q->over_head) && gate_open(q, op)) {
		(void)FIFO_POP(q->over_head, q->over_tail, next);
		if (!op_start(op)) {
			/* fenced meanwhile; never issued, so never counted */
			op->weight_ops = op->weight_bytes = 0;
			op->res = -EIO;
			wq_push(op);
		}
	}
}

static int rbd_submit(struct worker *w, struct treq *r)
{
	struct rbd_op *op;

	if (unlikely(!tls_wq.efd)) {
		tls_wq.efd = w->engine->fd(w);
		tls_wq.w = w;
	}
	if (r->cmd.opcode == RBLK_OP_FLUSH &&
	    (export_unsafe_ack & UNSAFE_ACK_FLUSH)) {
		r->result = 0; /* the test aid's lie */
		return 1;
	}
	op = malloc(sizeof(*op));
	if (!op) {
		r->result = -ENOMEM;
		return 1;
	}
	op->r = r;
	op->img = r->conn->exp->priv;
	op->wq = &tls_wq;
	op->stage = STAGE_IO;
	op->res = 0;
	op->start_ms = w->now_ms;
	if (tls_wq.over_head || !gate_open(&tls_wq, op)) {
		FIFO_PUSH(tls_wq.over_head, tls_wq.over_tail, op, next);
		gate_note_wait(&tls_wq, op->img->conn);
		return 0;
	}
	if (op_start(op))
		return 0;
	free(op);
	r->result = -EIO;
	return 1;
}

/* A write-class op failed because the cluster refused this client. */
static bool is_fencing_error(int res)
{
	return res == -EBLOCKLISTED || res == -EROFS;
}

/*
 * The cluster refused this target (res, a fencing error): write-class
 * commands fail from now on. Said once, whichever thread saw it first: a
 * write refused in librbd, or the lock thread failing to take the lock
 * (blocklisted while it had released the lock idle).
 */
static void fence(struct rbd_image *img, int res)
{
	if (atomic_exchange(&img->lock_state, LOCK_FENCED) != LOCK_FENCED)
		log_err(
		    "export %s: rbd %s: the cluster refuses this target's writes (%s): another gateway took the image's lock over; write-class commands fail from now on (remove and re-add the export once this target should serve it again)",
		    img->e->name, img->spec, strerror(-res));
}

/* Count a slow op (see RBD_SLOW_MS); say so at most every RBD_SLOW_NOTE_MS. */
static void slow_note(struct rbd_wq *q, const struct rbd_op *op, uint64_t now,
		      int res)
{
	uint64_t ms = now - op->start_ms;

	if (!op->start_ms || ms < RBD_SLOW_MS)
		return;
	q->slow++;
	q->slow_max_ms = MAX(q->slow_max_ms, ms);
	if (q->slow_logged_ms && now - q->slow_logged_ms < RBD_SLOW_NOTE_MS)
		return;
	log_warn("export %s: rbd: worker %u: %" PRIu64
		 " I/O%s took %u ms or more (longest %" PRIu64
		 " ms, the last %s at %" PRIu64
		 ": %s): the cluster was slow to answer (an OSD down, peering, "
		 "a monitor election?)",
		 op->img->e->name, q->w->index, q->slow,
		 q->slow == 1 ? "" : "s", RBD_SLOW_MS, q->slow_max_ms,
		 rblk_opcode_str(op->r->cmd.opcode), op->r->cmd.offset,
		 res < 0 ? strerror(-res) : "done");
	q->slow = q->slow_max_ms = 0;
	q->slow_logged_ms = now;
}

int backend_remote_reap(struct worker *w)
{
	struct rbd_op *op, *next, *list = NULL;
	int n = 0;

	if (!atomic_load_explicit(&tls_wq.head, memory_order_relaxed))
		return 0;
	op = atomic_exchange_explicit(&tls_wq.head, NULL, memory_order_acquire);
	/* oldest first */
	for (; op; op = next) {
		next = op->next;
		op->next = list;
		list = op;
	}
	for (op = list; op; op = next) {
		struct treq *r = op->r;
		struct rbd_image *img = op->img;
		int res = op->res;

		next = op->next;
		atomic_fetch_sub_explicit(&tls_wq.ops, op->weight_ops,
					  memory_order_relaxed);
		atomic_fetch_sub_explicit(&tls_wq.bytes, op->weight_bytes,
					  memory_order_relaxed);
		if (res < 0 || op->stage != STAGE_IO ||
		    r->cmd.opcode != RBLK_OP_WRITE ||
		    !(r->cmd.flags & RBLK_CMD_F_FUA))
			slow_note(&tls_wq, op, now_ms(), res);
		if (res >= 0 && op->stage == STAGE_IO &&
		    r->cmd.opcode == RBLK_OP_WRITE &&
		    (r->cmd.flags & RBLK_CMD_F_FUA) &&
		    !(export_unsafe_ack & UNSAFE_ACK_FUA)) {
			/* FUA: durable once a flush after it returns */
			op->stage = STAGE_FUA_FLUSH;
			op_weigh(op);
			op_issue(op);
			continue;
		}
		/* librbd answers 0 for a write and the length for a read;
		 * treq_backend_done() wants the length of either */
		if (res >= 0)
			res = (int)r->cmd.length;
		if (res < 0 && is_write_class(r->cmd.opcode) &&
		    is_fencing_error(res) && img->lock_state != LOCK_NONE)
			fence(img, res);
		if (res < 0) {
			log_debug("export %s: rbd %s at %" PRIu64 ": %s",
				  img->e->name, rblk_opcode_str(r->cmd.opcode),
				  r->cmd.offset, strerror(-res));
			/* EROFS would say read-only to the initiator */
			res = -EIO;
		}
		free(op);
		treq_backend_done(r, res);
		n++;
	}
	gate_drain(&tls_wq);
	return n;
}

/* ---- the exclusive lock
 * ------------------------------------------------------ */

/*
 * Take the lock; lock thread. With takeover, break another client's lock
 * first: librbd blocklists it (rbd_blocklist_on_break_lock), so its writes
 * still in flight or sent later are refused by the OSDs.
 */
static int lock_take(struct rbd_image *img)
{
	rbd_lock_mode_t mode;
	char *owners[4];
	size_t nr = ARRAY_SIZE(owners);
	int ret, mine = 0;

	/*
	 * librbd may hold the lock for us already (a write that raced the
	 * release took it the cooperative way): never break our own.
	 */
	if (rbd_is_exclusive_lock_owner(img->image, &mine))
		mine = 0;
	if (ceph_cfg.takeover && !mine) {
		ret = rbd_lock_get_owners(img->image, &mode, owners, &nr);
		if (ret == 0 && nr > 0) {
			log_warn(
			    "export %s: rbd %s: taking the exclusive lock over from %s (blocklisting it)",
			    img->e->name, img->spec, owners[0]);
			ret = rbd_lock_break(
			    img->image, RBD_LOCK_MODE_EXCLUSIVE, owners[0]);
			if (ret)
				log_warn("export %s: rbd_lock_break(%s): %s",
					 img->e->name, owners[0],
					 strerror(-ret));
			rbd_lock_get_owners_cleanup(owners, nr);
		} else if (ret && ret != -ENOENT) {
			log_warn("export %s: rbd_lock_get_owners: %s",
				 img->e->name, strerror(-ret));
		}
	}
	ret = rbd_lock_acquire(img->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (ret)
		log_err(
		    "export %s: rbd %s: cannot take the exclusive lock: %s%s",
		    img->e->name, img->spec, strerror(-ret),
		    ceph_cfg.takeover
			? ""
			: " (another gateway holds it; rbd_takeover is off)");
	else
		log_info("export %s: rbd %s: exclusive lock held", img->e->name,
			 img->spec);
	return ret;
}

static void *lock_thread_main(void *arg)
{
	struct rbd_image *img = arg;
	unsigned int idle = 0;

	pthread_setname_np(pthread_self(), "rblk-rbdlock");
	pthread_mutex_lock(&img->mu);
	while (!img->stop) {
		struct rbd_op *ops, *next;
		struct timespec ts;
		int ret;

		if (img->parked) {
			int state = atomic_load(&img->lock_state);

			pthread_mutex_unlock(&img->mu);
			ret = state == LOCK_FENCED ? -EIO
			      : state == LOCK_HELD ? 0
						   : lock_take(img);
			pthread_mutex_lock(&img->mu);
			if (!ret && state != LOCK_FENCED)
				atomic_store(&img->lock_state, LOCK_HELD);
			else if (is_fencing_error(ret))
				fence(img, ret);
			ops = img->parked;
			img->parked = NULL;
			pthread_mutex_unlock(&img->mu);
			/* oldest first; the issue order of one worker holds */
			for (struct rbd_op *rev = NULL; ops || rev;) {
				if (ops) {
					next = ops->next;
					ops->next = rev;
					rev = ops;
					ops = next;
					continue;
				}
				next = rev->next;
				if (ret) {
					rev->res = ret == -EROFS ? -EIO : ret;
					/* never issued: nothing to take off
					 * the gate at the reap */
					rev->weight_ops = rev->weight_bytes = 0;
					wq_push(rev);
				} else {
					op_issue(rev);
				}
				rev = next;
			}
			pthread_mutex_lock(&img->mu);
			idle = 0;
			continue;
		}
		/*
		 * Release the lock once no session is left (twice in a row,
		 * a second apart), so that a peer takes it without
		 * blocklisting a target that merely lost its initiator.
		 */
		if (atomic_load(&img->lock_state) == LOCK_HELD &&
		    !atomic_load(&img->e->sessions) &&
		    !atomic_load(&img->inflight) && ++idle >= 2) {
			/*
			 * Unlocked before the release: a session's first
			 * write from now on parks and waits for the lock
			 * thread to take the lock again. One that read HELD
			 * just before (a session logging in between the
			 * check above and this store) still reaches librbd
			 * and may meet EROFS, which fences this target: an
			 * EROFS write is taken for a fence, as it must be.
			 */
			atomic_store(&img->lock_state, LOCK_UNLOCKED);
			pthread_mutex_unlock(&img->mu);
			ret = rbd_lock_release(img->image);
			pthread_mutex_lock(&img->mu);
			if (!ret)
				log_info(
				    "export %s: rbd %s: exclusive lock released (no session)",
				    img->e->name, img->spec);
			else /* blocklisted, or librbd lost it already */
				log_warn(
				    "export %s: rbd %s: releasing the exclusive lock (no session): %s (the next write asks for it again)",
				    img->e->name, img->spec, strerror(-ret));
			idle = 0;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&img->cond, &img->mu, &ts);
	}
	pthread_mutex_unlock(&img->mu);
	return NULL;
}

/* ---- resize
 * ------------------------------------------------------------------ */

/* librbd thread: the image header changed (resize among others). */
static void update_cb(void *arg)
{
	struct rbd_image *img = arg;
	uint64_t size, old;

	if (rbd_get_size(img->image, &size))
		return;
	size -= size % img->e->block_size;
	if (!size)
		return; /* an image below one block: nothing to serve */
	old = export_size_set(img->e, size);
	if (old < size)
		log_info("export %s: rbd %s resized: %" PRIu64 " -> %" PRIu64
			 " bytes (sessions are told)",
			 img->e->name, img->spec, old, size);
	else if (old > size)
		log_warn("export %s: rbd %s shrunk: %" PRIu64 " -> %" PRIu64
			 " bytes: I/O past the new end fails (OUT_OF_RANGE); "
			 "mapped devices keep their size",
			 img->e->name, img->spec, old, size);
}

/*
 * `ctl resize-export`: rbd_resize the image (librbd hands it to the
 * exclusive lock's owner when another gateway holds it), or with *size 0
 * read its size; the header watch above publishes it too.
 */
static int rbd_resize_export(struct export *e, uint64_t *size, char *err,
			     size_t errlen)
{
	struct rbd_image *img = e->priv;
	uint64_t now;
	int ret;

	if (*size && e->read_only)
		return open_fail(
		    err, errlen, -EROFS,
		    "export %s is read-only (or a snapshot): rbd %s is not changed",
		    e->name, img->spec);
	if (*size && (ret = rbd_resize2(img->image, *size, true, NULL, NULL)))
		return open_fail(err, errlen, ret, "rbd_resize %s to %llu: %s",
				 img->spec, (unsigned long long)*size,
				 strerror(-ret));
	ret = rbd_get_size(img->image, &now);
	if (ret)
		return open_fail(err, errlen, ret, "rbd_get_size %s: %s",
				 img->spec, strerror(-ret));
	*size = now - now % e->block_size;
	return 0;
}

/* ---- reservations
 * ---------------------------------------------------------------- */

/*
 * librbd keeps image metadata in the header object's omap under
 * "metadata_" + the key (cls_rbd), so `rbd image-meta get POOL/IMAGE
 * rblk.pr` shows this state. It is read and written here with librados
 * rather than rbd_metadata_set() because a store must be a
 * compare-and-set: two gateways may run reservation commands at once,
 * and the header's version (rados_write_op_assert_version()) makes the
 * later one load again and retry instead of overwriting.
 */
#define PR_META_KEY "metadata_rblk.pr"

static int rbd_pr_load(struct export *e, char *buf, size_t len)
{
	struct rbd_image *img = e->priv;
	const char *keys[] = {PR_META_KEY};
	size_t key_lens[] = {sizeof(PR_META_KEY) - 1};
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	char *key = NULL, *val = NULL;
	size_t klen = 0, vlen = 0;
	int prval = 0, ret;

	if (!op)
		return -ENOMEM;
	rados_read_op_omap_get_vals_by_keys2(op, keys, 1, key_lens, &it,
					     &prval);
	ret = rados_read_op_operate(op, img->pr_io, img->header_oid, 0);
	if (!ret)
		ret = prval;
	if (!ret) {
		img->pr_ver = rados_get_last_version(img->pr_io);
		if (!rados_omap_get_next2(it, &key, &val, &klen, &vlen) &&
		    key && vlen) {
			if (vlen >= len) {
				ret = -EFBIG;
			} else {
				memcpy(buf, val, vlen);
				buf[vlen] = 0;
				ret = (int)vlen;
			}
		}
	}
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return ret;
}

static int rbd_pr_store(struct export *e, const char *text)
{
	struct rbd_image *img = e->priv;
	const char *keys[] = {PR_META_KEY};
	const char *vals[] = {text};
	size_t key_lens[] = {sizeof(PR_META_KEY) - 1};
	size_t val_lens[] = {strlen(text)};
	rados_write_op_t op = rados_create_write_op();
	int ret;

	if (!op)
		return -ENOMEM;
	rados_write_op_assert_version(op, img->pr_ver);
	rados_write_op_omap_set2(op, keys, vals, key_lens, val_lens, 1);
	ret = rados_write_op_operate(op, img->pr_io, img->header_oid, NULL, 0);
	rados_release_write_op(op);
	if (ret == -ERANGE || ret == -EOVERFLOW)
		return -ECANCELED; /* the header changed since the load */
	if (!ret)
		img->pr_ver = rados_get_last_version(img->pr_io);
	return ret;
}

/* The ioctx reservations use: img's pool and namespace, its own. */
static int img_pr_setup(struct rbd_image *img, const char *nspace, char *err,
			size_t errlen)
{
	int ret = rados_ioctx_create2(img->conn->rados, img->pool->pool_id,
				      &img->pr_io);

	if (ret)
		return open_fail(err, errlen, ret, "rbd %s: rados ioctx: %s",
				 img->spec, rados_why(ret));
	rados_ioctx_set_namespace(img->pr_io, nspace);
	snprintf(img->header_oid, sizeof(img->header_oid), "rbd_header.%s",
		 img->id);
	return 0;
}

/* ---- open and close
 * -------------------------------------------------------------- */

struct rbd_spec {
	char pool[128], nspace[128], image[256], snap[256];
};

/* "rbd:POOL/IMAGE", "rbd:POOL/NS/IMAGE", either with "@SNAP". */
static int parse_spec(const char *path, struct rbd_spec *s, char *err,
		      size_t errlen)
{
	char buf[1024], *parts[4], *at, *p;
	int n = 0;

	memset(s, 0, sizeof(*s));
	if (strlen(path + 4) >= sizeof(buf))
		return open_fail(err, errlen, -EINVAL, "rbd spec too long");
	snprintf(buf, sizeof(buf), "%s", path + 4);
	for (p = buf; n < 4; n++) {
		parts[n] = strsep(&p, "/");
		if (!p) {
			n++;
			break;
		}
	}
	if (p || n < 2 || n > 3)
		goto bad;
	at = strchr(parts[n - 1], '@');
	if (at) {
		*at++ = 0;
		if (!*at || strlen(at) >= sizeof(s->snap))
			goto bad;
		snprintf(s->snap, sizeof(s->snap), "%s", at);
	}
	for (int i = 0; i < n; i++)
		if (!*parts[i] || strlen(parts[i]) >= sizeof(s->nspace))
			goto bad;
	snprintf(s->pool, sizeof(s->pool), "%s", parts[0]);
	if (n == 3)
		snprintf(s->nspace, sizeof(s->nspace), "%s", parts[1]);
	snprintf(s->image, sizeof(s->image), "%s", parts[n - 1]);
	return 0;
bad:
	return open_fail(
	    err, errlen, -EINVAL,
	    "bad rbd spec '%s' (want rbd:POOL/IMAGE, rbd:POOL/NAMESPACE/IMAGE, optionally @SNAP)",
	    path);
}

static void make_vol_id(struct rbd_image *img, const struct rbd_spec *s)
{
	uint8_t h[crypto_hash_sha256_BYTES];
	char text[512];
	int n;

	/* the same on every target: cluster, pool, namespace, image, snap */
	n = snprintf(text, sizeof(text),
		     "rblk-rbd\n%s\n%" PRId64 "\n%s\n%s\n%s", img->conn->fsid,
		     img->pool->pool_id, s->nspace, img->id, s->snap);
	crypto_hash_sha256(
	    h, (const unsigned char *)text,
	    (unsigned long long)MIN((size_t)n, sizeof(text) - 1));
	memcpy(img->vol_id, h, sizeof(img->vol_id));
}

/* Drop img's references on its pool and its cluster connection. */
static void img_put_pool(struct rbd_image *img)
{
	pthread_mutex_lock(&conns_lock);
	pool_put(img->conn, img->pool);
	conn_put(img->conn);
	pthread_mutex_unlock(&conns_lock);
}

/*
 * Take a cluster connection and the pool of s, open image s (read-only,
 * at its snapshot if any, when read_only) and read its size and features.
 * On failure nothing is held.
 */
static int image_obj_size(struct rbd_image *img)
{
	rbd_image_info_t info;
	int ret = rbd_stat(img->image, &info, sizeof(info));

	if (!ret)
		img->obj_size = info.obj_size;
	return ret;
}

static int img_open(struct rbd_image *img, const struct rbd_spec *s,
		    bool read_only, uint64_t *size, uint64_t *features,
		    char *err, size_t errlen)
{
	int ret;

	pthread_mutex_lock(&conns_lock);
	ret = conn_get(&img->conn, err, errlen);
	if (!ret) {
		ret = pool_get(img->conn, s->pool, s->nspace, &img->pool, err,
			       errlen);
		if (ret)
			conn_put(img->conn);
	}
	pthread_mutex_unlock(&conns_lock);
	if (ret)
		return ret;

	if (read_only)
		ret =
		    rbd_open_read_only(img->pool->ioctx, s->image, &img->image,
				       s->snap[0] ? s->snap : NULL);
	else
		ret = rbd_open(img->pool->ioctx, s->image, &img->image, NULL);
	if (ret) {
		open_fail(err, errlen, ret, "rbd image %s: %s", img->spec,
			  ret == -ENOENT ? "no such image (or snapshot)"
					 : rados_why(ret));
		goto out_put_pool;
	}
	if ((ret = rbd_get_size(img->image, size)) ||
	    (ret = rbd_get_id(img->image, img->id, sizeof(img->id))) ||
	    (ret = rbd_get_features(img->image, features)) ||
	    (ret = image_obj_size(img))) {
		open_fail(err, errlen, ret,
			  "rbd image %s: reading its header: %s", img->spec,
			  strerror(-ret));
		goto out_close_image;
	}
	return 0;

out_close_image:
	rbd_close(img->image);
out_put_pool:
	img_put_pool(img);
	return ret;
}

/*
 * Fencing: a writable image with the exclusive-lock feature gets the lock
 * thread (which takes the lock on first write); otherwise no lock is
 * used. On failure img's mutex and condition are destroyed again.
 */
static int img_lock_setup(struct export *e, struct rbd_image *img,
			  uint64_t features, char *err, size_t errlen)
{
	int ret;

	if (e->read_only) {
		atomic_init(&img->lock_state, LOCK_NONE);
	} else if (!(features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
		atomic_init(&img->lock_state, LOCK_NONE);
		log_warn(
		    "export %s: rbd %s has no exclusive-lock feature: no fencing against another gateway (rbd feature enable %s exclusive-lock)",
		    e->name, img->spec, img->spec);
	} else {
		atomic_init(&img->lock_state, LOCK_UNLOCKED);
	}
	pthread_mutex_init(&img->mu, NULL);
	pthread_cond_init(&img->cond, NULL);
	if (atomic_load(&img->lock_state) == LOCK_NONE)
		return 0;
	ret = -pthread_create(&img->lock_thread, NULL, lock_thread_main, img);
	if (ret) {
		open_fail(err, errlen, ret, "pthread_create: %s",
			  strerror(-ret));
		pthread_cond_destroy(&img->cond);
		pthread_mutex_destroy(&img->mu);
		return ret;
	}
	img->lock_thread_started = true;
	return 0;
}

/* Notice resizes through a header watch; best effort. */
static void img_watch(struct export *e, struct rbd_image *img)
{
	int ret =
	    rbd_update_watch(img->image, &img->watch_handle, update_cb, img);

	if (ret)
		log_warn(
		    "export %s: rbd_update_watch: %s (resizes will not be noticed)",
		    e->name, strerror(-ret));
	else
		img->watching = true;
}

static int rbd_open_export(struct export *e, const struct cfg_export *cfg,
			   char *err, size_t errlen)
{
	struct rbd_image *img;
	struct rbd_spec s;
	uint64_t size, features = 0;
	int ret;

	ret = parse_spec(cfg->path, &s, err, errlen);
	if (ret)
		return ret;
	if (cfg->direct == CFG_DIRECT_YES)
		return open_fail(
		    err, errlen, -EINVAL,
		    "direct access is not offered for rbd exports (the volume is not memory here)");
	img = calloc(1, sizeof(*img));
	if (!img)
		return open_fail(err, errlen, -ENOMEM, "out of memory");
	img->e = e;
	snprintf(img->spec, sizeof(img->spec), "%s/%s%s%s%s%s", s.pool,
		 s.nspace, s.nspace[0] ? "/" : "", s.image,
		 s.snap[0] ? "@" : "", s.snap);
	if (s.snap[0])
		e->read_only = true;

	ret = img_open(img, &s, e->read_only, &size, &features, err, errlen);
	if (ret)
		goto out_free;
	e->block_size = cfg->block_size ? cfg->block_size : 512;
	e->size = size - size % e->block_size;
	if (!e->size) {
		ret =
		    open_fail(err, errlen, -EINVAL,
			      "rbd image %s is smaller than the block size %u",
			      img->spec, e->block_size);
		goto out_close_image;
	}
	/* no volatile cache (rbd_cache off), yet FLUSH is cheap and honest */
	e->features = e->read_only ? 0
				   : RBLK_F_FLUSH | RBLK_F_FUA | RBLK_F_TRIM |
					 RBLK_F_ZEROES;
	make_vol_id(img, &s);

	ret = img_pr_setup(img, s.nspace, err, errlen);
	if (ret)
		goto out_close_image;
	ret = img_lock_setup(e, img, features, err, errlen);
	if (ret)
		goto out_destroy_pr_io;
	e->priv = img;
	img_watch(e, img);
	log_info(
	    "export %s: rbd image %s, id %s, %s", e->name, img->spec, img->id,
	    atomic_load(&img->lock_state) == LOCK_NONE ? "no exclusive lock"
	    : ceph_cfg.takeover
		? "exclusive lock on first write, taken over if another gateway holds it"
		: "exclusive lock on first write, never taken over");
	return 0;

out_destroy_pr_io:
	rados_ioctx_destroy(img->pr_io);
out_close_image:
	rbd_close(img->image);
	img_put_pool(img);
out_free:
	free(img);
	return ret;
}

/* Last reference: no session, no op in flight (worker.c waits for them). */
static void rbd_close_export(struct export *e)
{
	struct rbd_image *img = e->priv;

	if (!img)
		return;
	if (img->lock_thread_started) {
		pthread_mutex_lock(&img->mu);
		img->stop = true;
		lock_thread_kick(img);
		pthread_mutex_unlock(&img->mu);
		pthread_join(img->lock_thread, NULL);
	}
	if (img->watching)
		rbd_update_unwatch(img->image, img->watch_handle);
	if (atomic_load(&img->lock_state) == LOCK_HELD &&
	    rbd_lock_release(img->image))
		log_warn("export %s: releasing the exclusive lock failed",
			 e->name);
	rbd_close(img->image);
	rados_ioctx_destroy(img->pr_io);
	pthread_cond_destroy(&img->cond);
	pthread_mutex_destroy(&img->mu);
	img_put_pool(img);
	free(img);
	e->priv = NULL;
}

static bool rbd_vol_id(const struct export *e, uint8_t id[EXPORT_VOL_ID_LEN])
{
	const struct rbd_image *img = e->priv;

	memcpy(id, img->vol_id, EXPORT_VOL_ID_LEN);
	return true;
}

const struct backend_ops backend_rbd_ops = {
    .name = "rbd",
    .prefix = "rbd:",
    .flags = BACKEND_F_PROCESS_CACHE,
    .open = rbd_open_export,
    .close = rbd_close_export,
    .submit = rbd_submit,
    .vol_id = rbd_vol_id,
    .pr_load = rbd_pr_load,
    .pr_store = rbd_pr_store,
    .resize = rbd_resize_export,
};
