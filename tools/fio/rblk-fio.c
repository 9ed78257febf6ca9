/* SPDX-License-Identifier: MIT */
/*
 * rblk-fio.so: a fio ioengine that drives an rblk volume through librblk.
 *
 *   fio --ioengine=external:build/rblk-fio.so --uri=tcp://HOST/EXPORT ...
 *
 * (engine options must follow --ioengine on the command line.)
 *
 * Each fio job (thread or process) opens its own rblk session with ONE queue
 * and uses it from its own thread only, as librblk wants. fio's I/O buffers
 * (td->orig_buffer, which holds every io_u buffer) are allocated here,
 * page aligned, and registered once with rblk_register_buffer(), so data
 * moves by RDMA (or the tcp transport's one-sided ops) straight into and
 * out of them.
 *
 * fio calls us in this order, each from the job's own thread unless noted:
 *   setup()       size of the "file": by default runs in fio's main process
 *                 BEFORE the job forks or starts (create_serialize=1), so a
 *                 child process connects, reads the volume size and exits
 *                 (RDMA resources must never cross fork());
 *                 with create_serialize=0 it runs after init() and uses the
 *                 session init() opened
 *   init()        opens the session (one queue)
 *   iomem_alloc() allocates and registers the I/O buffers
 *   queue()       stashes an io_u; commit() submits the stashed ones
 *   getevents()   reaps completions with rblk_poll(); event() hands them out
 *   iomem_free(), cleanup()  in that order
 *
 * Builds against a configured fio source tree of the installed fio version
 * (tools/fio/fio.mk); only the symbol `ioengine` is exported
 * (tools/fio/rblk-fio.map), so librblk's internals never collide with fio's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rblk/rblk.h>

#include "fio.h"
#include "optgroup.h"

#define RBLK_FIO_FILE_NAME "rblk"

enum read_mode {
	READ_MODE_AUTO = 0, /* librblk's default: the transport's preference */
	READ_MODE_PULL = 1, /* target answers, we RDMA READ its slot */
	READ_MODE_PUSH = 2, /* the target RDMA WRITEs into our buffer */
};

enum poll_mode {
	POLL_EVENT = 0,	   /* sleep on the queue's descriptor */
	POLL_BUSY = 1,	   /* never sleep: rblk_poll(timeout 0) in a loop */
	POLL_ADAPTIVE = 2, /* spin poll_spin_us, then sleep (librblk) */
};

/* Engine options; fio fills this (td->eo). The first member belongs to fio. */
struct rblk_fio_opts {
	void *pad;
	char *uri;
	unsigned int queue_depth; /* 0: the job's iodepth */
	unsigned int read_mode;	  /* enum read_mode */
	unsigned long long max_io;
	char *hostname;
	char *keyfile;
	unsigned int mutual_auth;
	unsigned int direct_access; /* enum rblk_direct */
	unsigned int poll_mode;	    /* enum poll_mode */
	unsigned int poll_spin_us;
	char *reconnect_delay;	  /* seconds, fractions allowed */
	int ctrl_loss_tmo;	  /* seconds; -1 never; -2 library default */
	unsigned int max_queued;  /* rblk_opts.max_queued; 0: see fill_opts() */
	unsigned int inline_data; /* 1: librblk's default; 0: off */
	char *path;	  /* more URLs of the volume, separated by ',' */
	char *failback;	  /* seconds, fractions allowed; 0 never */
	char *keepalive;  /* seconds, fractions allowed; 0 off */
	char *io_timeout; /* seconds, fractions allowed; 0 none */
	int io_retries;	  /* -1 no limit; -2 library default */
	unsigned int tls; /* rblk_opts.tls */
	char *tls_ca;
	char *tls_cert;
	char *tls_key;
};

/* rblk_opts.paths of a job: path= split at ',' (URLs hold ':'). */
struct path_list {
	char buf[4096];
	const char *v[RBLK_MAX_PATHS];
};

/* Per-job state (td->io_ops_data); used by the job's thread only. */
struct rblk_fio {
	struct rblk *r;
	struct rblk_queue *q;
	unsigned int qd; /* granted by the target: most I/Os in rblk at once */
	unsigned int iodepth;	  /* fio's: most io_us in flight at once */
	uint32_t features;	  /* RBLK_FEAT_* of the volume */
	unsigned int write_flags; /* RBLK_IO_FUA with --sync=1 */
	bool busy_poll;		  /* poll=busy */

	void *mem; /* fio's I/O buffers (td->orig_buffer), ours to free */
	size_t mem_len;
	bool mem_registered;

	/*
	 * queue() submits to rblk at once, under a plug that commit() pulls:
	 * the batch goes out in one post. rblk keeps the backlog beyond its
	 * queue depth itself; -EAGAIN (max_queued reached) is FIO_Q_BUSY.
	 */
	bool plugged;
	unsigned int nr_submitted; /* since the last commit() */
	/* finished without reaching rblk (refused, or a no-op flush) */
	struct io_u **done_local;
	unsigned int nr_done_local;
	/* reaped by the last getevents(), handed out by event() */
	struct io_u **events;
	struct rblk_completion *comps;
	/*
	 * fio asked the job to stop (td->terminate) while I/O was in flight:
	 * when (ns); after ABANDON_NS the session is closed and that I/O
	 * completes with ECANCELED, so a target that never answers cannot
	 * keep fio from exiting.
	 */
	uint64_t term_at;
};

#define ABANDON_NS (1000ull * 1000000)
/* longest single wait in getevents(): how soon td->terminate is seen */
#define WAIT_SLICE_MS 100

static struct fio_option options[] = {
    {
	.name = "uri",
	.lname = "rblk URI",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, uri),
	.help =
	    "Volume to use: tcp://HOST[:PORT]/EXPORT or rdma://HOST[:PORT]/EXPORT",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "queue_depth",
	.lname = "rblk queue depth",
	.type = FIO_OPT_INT,
	.off1 = offsetof(struct rblk_fio_opts, queue_depth),
	.def = "0",
	.minval = 0,
	.maxval = 65535,
	.help = "Queue depth to ask the target for (0: the job's iodepth)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "read_mode",
	.lname = "rblk read mode",
	.type = FIO_OPT_STR,
	.off1 = offsetof(struct rblk_fio_opts, read_mode),
	.def = "auto",
	.help = "How read data moves",
	.posval =
	    {
		{
		    .ival = "auto",
		    .oval = READ_MODE_AUTO,
		    .help =
			"the transport's preference: push on tcp, pull on rdma",
		},
		{
		    .ival = "pull",
		    .oval = READ_MODE_PULL,
		    .help = "the initiator RDMA READs the target's slot",
		},
		{
		    .ival = "push",
		    .oval = READ_MODE_PUSH,
		    .help = "the target RDMA WRITEs into the I/O buffer",
		},
	    },
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "inline",
	.lname = "rblk in-capsule write data",
	.type = FIO_OPT_STR,
	.off1 = offsetof(struct rblk_fio_opts, inline_data),
	.def = "auto",
	.help = "Small writes carry their data in the command",
	.posval =
	    {
		{
		    .ival = "auto",
		    .oval = 1,
		    .help = "as much as the target grants (librblk asks 4k)",
		},
		{
		    .ival = "off",
		    .oval = 0,
		    .help = "every write waits for the target's window (GRANT)",
		},
	    },
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "max_io",
	.lname = "rblk max I/O",
	.type = FIO_OPT_STR_VAL,
	.off1 = offsetof(struct rblk_fio_opts, max_io),
	.def = "1M",
	.help =
	    "Largest command to ask the target for (power of two, 4k..8M); larger I/Os are split",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	/* not "direct": that is fio's own option (O_DIRECT) */
	.name = "direct_access",
	.lname = "rblk direct volume access",
	.type = FIO_OPT_STR,
	.off1 = offsetof(struct rblk_fio_opts, direct_access),
	.def = "auto",
	.help =
	    "RDMA READ/WRITE the target's registered volume in place (RAM and direct exports)",
	.posval =
	    {
		{
		    .ival = "auto",
		    .oval = RBLK_DIRECT_AUTO,
		    .help = "when the export offers it",
		},
		{
		    .ival = "on",
		    .oval = RBLK_DIRECT_ON,
		    .help = "required: fail if the export does not offer it",
		},
		{
		    .ival = "off",
		    .oval = RBLK_DIRECT_OFF,
		    .help = "always through the target's slots",
		},
	    },
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "hostname",
	.lname = "rblk host name",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, hostname),
	.help = "Name to log in with (default: this host's name)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "keyfile",
	.lname = "rblk key file",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, keyfile),
	.help =
	    "File with this host's shared secret (mode 0600) for authentication",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "reconnect_delay",
	.lname = "rblk reconnect delay",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, reconnect_delay),
	.help =
	    "Seconds between reconnect attempts after a lost connection (doubling up to 10; default 1)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "poll",
	.lname = "rblk completion polling",
	.type = FIO_OPT_STR,
	.off1 = offsetof(struct rblk_fio_opts, poll_mode),
	.def = "adaptive",
	.help = "How getevents waits for completions (default adaptive)",
	.posval =
	    {
		{
		    .ival = "event",
		    .oval = POLL_EVENT,
		    .help = "sleep on the queue's descriptor until woken",
		},
		{
		    .ival = "busy",
		    .oval = POLL_BUSY,
		    .help =
			"poll the transport without ever sleeping (one CPU per job)",
		},
		{
		    .ival = "adaptive",
		    .oval = POLL_ADAPTIVE,
		    .help =
			"poll for poll_spin_us, then sleep; after a spin that finds nothing, the next 1, 2 ... 64 waits do not spin",
		},
	    },
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "mutual_auth",
	.lname = "rblk mutual authentication",
	.type = FIO_OPT_BOOL,
	.off1 = offsetof(struct rblk_fio_opts, mutual_auth),
	.def = "0",
	.help = "Refuse a target that does not prove the shared secret",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "tls",
	.lname = "rblk TLS",
	.type = FIO_OPT_BOOL,
	.off1 = offsetof(struct rblk_fio_opts, tls),
	.def = "0",
	.help =
	    "TLS 1.3 on tcp://: a PSK from keyfile's secret, or X.509 with tls_ca",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "tls_ca",
	.lname = "rblk TLS CA file",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, tls_ca),
	.help = "CA file (PEM) the target's certificate must chain to",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "tls_cert",
	.lname = "rblk TLS certificate",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, tls_cert),
	.help = "This host's certificate (PEM), with tls_key",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "tls_key",
	.lname = "rblk TLS key",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, tls_key),
	.help = "The key (PEM) of tls_cert",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "poll_spin_us",
	.lname = "rblk adaptive poll spin",
	.type = FIO_OPT_INT,
	.off1 = offsetof(struct rblk_fio_opts, poll_spin_us),
	.def = "50",
	.minval = 0,
	.maxval = 1000000,
	.help =
	    "poll=adaptive: microseconds to poll before sleeping (default 50)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "ctrl_loss_tmo",
	.lname = "rblk controller loss timeout",
	.type = FIO_OPT_INT,
	.off1 = offsetof(struct rblk_fio_opts, ctrl_loss_tmo),
	.def = "-2",
	.minval = -2,
	.maxval = 86400,
	.help =
	    "Seconds without a connection before I/O fails (0: at once, -1: never; default 60)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "max_queued",
	.lname = "rblk backlog limit",
	.type = FIO_OPT_INT,
	.off1 = offsetof(struct rblk_fio_opts, max_queued),
	.def = "0",
	.minval = 0,
	.maxval = RBLK_MAX_QUEUED,
	.help =
	    "I/Os librblk accepts beyond what is reaped (0: the job's iodepth); more makes queue() answer busy",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "path",
	.lname = "rblk more paths",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, path),
	.help =
	    "More URLs of the same volume (multipath failover), separated by ','",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "failback",
	.lname = "rblk failback interval",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, failback),
	.help =
	    "Seconds between probes of the first path while on another (0: never fail back; default 5)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "keepalive",
	.lname = "rblk keep-alive interval",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, keepalive),
	.help =
	    "Seconds of silence before a KEEPALIVE probe; a target silent for 3x this is dropped (default 5; 0: off)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "io_timeout",
	.lname = "rblk command timeout",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct rblk_fio_opts, io_timeout),
	.help =
	    "Seconds a command may go unanswered before the connection is dropped and the command retried (default 30; 0: no deadline)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "io_retries",
	.lname = "rblk command retries",
	.type = FIO_OPT_INT,
	.off1 = offsetof(struct rblk_fio_opts, io_retries),
	.def = "-2",
	.minval = -2,
	.maxval = 1000,
	.help =
	    "Times a command is retried after its connection failed before it fails (ETIMEDOUT/EIO; -1: no limit; default 3)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = NULL,
    },
};

/* "1.5" seconds into ms (0 .. 1 day); -EINVAL, logged, when not one. */
static int parse_secs(const char *name, const char *s, int *ms)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || end == s || !(v >= 0 && v <= 86400)) {
		log_err("rblk: %s=%s is not a number of seconds\n", name, s);
		return -EINVAL;
	}
	*ms = (int)(v * 1000 + 0.5);
	return 0;
}

/* path=URL[,URL...] into ro->paths, pointing into pl. */
static int fill_paths(const char *path, struct rblk_opts *ro,
		      struct path_list *pl)
{
	char *save, *tok;

	if (!path || !path[0])
		return 0;
	if (strlen(path) >= sizeof(pl->buf)) {
		log_err("rblk: path= is too long\n");
		return -EINVAL;
	}
	strcpy(pl->buf, path);
	ro->nr_paths = 0;
	for (tok = strtok_r(pl->buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (ro->nr_paths == RBLK_MAX_PATHS - 1) {
			log_err("rblk: path= holds more than %d URLs\n",
				RBLK_MAX_PATHS - 1);
			return -EINVAL;
		}
		pl->v[ro->nr_paths++] = tok;
	}
	ro->paths = pl->v;
	return 0;
}

/*
 * librblk's opts.on_resize, on the job's thread inside rblk_poll(): the
 * volume grew live (rblk-target ctl resize-export). fio sized its file at
 * setup and keeps that size for the job; a later job sees the new one.
 */
static void rblk_fio_resized(struct rblk *r, uint64_t old_size,
			     uint64_t new_size, void *arg)
{
	struct thread_data *td = arg;

	(void)r;
	log_info("rblk: %s: the volume grew from %llu to %llu bytes; this job "
		 "keeps its size, a new job sees the new one\n",
		 td->o.name, (unsigned long long)old_size,
		 (unsigned long long)new_size);
}

/* Fill rblk_opts from the engine options for a session of one queue. */
static int fill_opts(struct thread_data *td, unsigned int qd,
		     struct rblk_opts *ro, struct path_list *pl)
{
	struct rblk_fio_opts *o = td->eo;

	if (!o->uri || !o->uri[0]) {
		log_err(
		    "rblk: the uri option is required (--uri=tcp://HOST/EXPORT)\n");
		return -EINVAL;
	}
	if (o->max_io > UINT32_MAX) {
		log_err("rblk: max_io=%llu is too large\n", o->max_io);
		return -EINVAL;
	}
	rblk_opts_init(ro);
	if (o->reconnect_delay && o->reconnect_delay[0] &&
	    parse_secs("reconnect_delay", o->reconnect_delay,
		       &ro->reconnect_delay_ms))
		return -EINVAL;
	if (o->failback && o->failback[0] &&
	    parse_secs("failback", o->failback, &ro->failback_ms))
		return -EINVAL;
	if (o->keepalive && o->keepalive[0] &&
	    parse_secs("keepalive", o->keepalive, &ro->keepalive_ms))
		return -EINVAL;
	if (o->io_timeout && o->io_timeout[0] &&
	    parse_secs("io_timeout", o->io_timeout, &ro->io_timeout_ms))
		return -EINVAL;
	if (o->io_retries != -2)
		ro->io_retries = o->io_retries;
	if (fill_paths(o->path, ro, pl))
		return -EINVAL;
	if (o->ctrl_loss_tmo != -2)
		ro->ctrl_loss_timeout_s = o->ctrl_loss_tmo;
	ro->queues = 1;
	ro->queue_depth = qd;
	ro->on_resize = rblk_fio_resized;
	ro->on_resize_arg = td;
	ro->max_io = (unsigned int)o->max_io;
	ro->host_name = o->hostname;
	if (o->keyfile && o->keyfile[0])
		ro->key_file = o->keyfile;
	if (o->mutual_auth)
		ro->flags |= RBLK_OPEN_MUTUAL_AUTH;
	ro->tls = o->tls || (o->tls_ca && o->tls_ca[0]);
	if (o->tls_ca && o->tls_ca[0])
		ro->tls_ca_file = o->tls_ca;
	if (o->tls_cert && o->tls_cert[0])
		ro->tls_cert_file = o->tls_cert;
	if (o->tls_key && o->tls_key[0])
		ro->tls_key_file = o->tls_key;
	ro->direct = (int)o->direct_access;
	if (o->read_mode == READ_MODE_PUSH)
		ro->flags |= RBLK_OPEN_PUSH_READS;
	else if (o->read_mode == READ_MODE_PULL)
		ro->flags |= RBLK_OPEN_PULL_READS;
	if (!td_write(td) && !td_trim(td))
		ro->flags |= RBLK_OPEN_READ_ONLY;
	if (o->poll_mode == POLL_ADAPTIVE)
		ro->poll_spin_us = o->poll_spin_us;
	/* by default fio's iodepth always fits: queue() never answers busy */
	ro->max_queued = o->max_queued;
	ro->inline_data = o->inline_data ? 0 : -1;
	if (!ro->max_queued)
		ro->max_queued = td->o.iodepth < RBLK_MAX_QUEUED
				     ? td->o.iodepth
				     : RBLK_MAX_QUEUED;
	return 0;
}

/*
 * Give every file of the job the volume's size, after checking that the
 * job's block sizes suit the volume. Returns 0 or 1 (fio's convention).
 */
static int size_files(struct thread_data *td, const struct rblk_info *info)
{
	struct fio_file *f;
	unsigned int i;
	int d;

	for (d = DDIR_READ; d <= DDIR_TRIM; d++) {
		if (td->o.min_bs[d] % info->block_size ||
		    td->o.max_bs[d] % info->block_size || td->o.bs_unaligned) {
			log_err(
			    "rblk: %s block sizes must be multiples of the volume's block size (%u)\n",
			    io_ddir_name(d), info->block_size);
			return 1;
		}
	}
	for_each_file(td, f, i)
	{
		f->real_file_size = info->size;
		fio_file_set_size_known(f);
	}
	return 0;
}

/*
 * Open a session in a child process and send back the volume's geometry
 * through a pipe; the caller's process never initialises RDMA. 0 or -errno
 * (the child logs why).
 */
static int query_info(const char *uri, const struct rblk_opts *ro,
		      struct rblk_info *info)
{
	struct {
		int ret;
		uint64_t size;
		uint32_t block_size;
	} msg = {.ret = -EIO};
	int fds[2], status;
	pid_t pid;

	if (pipe(fds)) {
		log_err("rblk: pipe: %s\n", strerror(errno));
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		log_err("rblk: fork: %s\n", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -EAGAIN;
	}
	if (pid == 0) {
		struct rblk *r;

		close(fds[0]);
		msg.ret = rblk_open(uri, ro, &r);
		if (msg.ret) {
			log_err("rblk: %s\n", rblk_last_error());
		} else {
			msg.size = rblk_get_info(r)->size;
			msg.block_size = rblk_get_info(r)->block_size;
			rblk_close(r);
		}
		_exit(write(fds[1], &msg, sizeof(msg)) == sizeof(msg) ? 0 : 1);
	}
	close(fds[1]);
	if (read(fds[0], &msg, sizeof(msg)) != sizeof(msg))
		msg.ret = -EIO;
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (msg.ret)
		return msg.ret;
	memset(info, 0, sizeof(*info));
	info->size = msg.size;
	info->block_size = msg.block_size;
	return 0;
}

static int rblk_fio_setup(struct thread_data *td)
{
	struct rblk_fio *d = td->io_ops_data;
	struct rblk_info info;
	struct rblk_opts ro;
	struct path_list pl;
	int ret;

	/* No --filename: one pseudo file stands for the volume. */
	if (!td->files_index) {
		if (add_file(td, RBLK_FIO_FILE_NAME, 0, 0) < 0)
			return 1;
		td->o.nr_files = td->o.nr_files ?: 1;
		td->o.open_files++;
	}

	/* create_serialize=0: init() ran first, in this thread */
	if (d && d->r)
		return size_files(td, rblk_get_info(d->r));

	/*
	 * Usually this runs in fio's main process before the job forks.
	 * Learn the size in a short-lived child process: librdmacm opens
	 * verbs contexts once per process and caches them, and a uverbs file
	 * descriptor used after fork() fails with EACCES (the kernel refuses
	 * it under the child's credentials), so fio's main process must never
	 * touch RDMA itself.
	 */
	if (fill_opts(td, 1, &ro, &pl))
		return 1;
	ret = query_info(((struct rblk_fio_opts *)td->eo)->uri, &ro, &info);
	if (ret)
		return 1;
	return size_files(td, &info);
}

static void rblk_fio_cleanup(struct thread_data *td)
{
	struct rblk_fio *d = td->io_ops_data;

	if (!d)
		return;
	if (d->r) {
		struct rblk_queue_stats st;

		rblk_queue_stats(d->q, &st);
		if (st.timeouts || st.io_failed || st.conn_lost)
			log_info(
			    "rblk: %s: %llu command timeouts, %llu commands failed, %llu connections lost, %llu reconnects\n",
			    td->o.name, (unsigned long long)st.timeouts,
			    (unsigned long long)st.io_failed,
			    (unsigned long long)st.conn_lost,
			    (unsigned long long)st.reconnects);
	}
	rblk_close(d->r); /* deregisters what is still registered */
	free(d->mem);	  /* only if iomem_free() did not run */
	free(d->done_local);
	free(d->events);
	free(d->comps);
	free(d);
	td->io_ops_data = NULL;
}

static int rblk_fio_init(struct thread_data *td)
{
	struct rblk_fio_opts *o = td->eo;
	const struct rblk_info *info;
	struct rblk_fio *d;
	struct rblk_opts ro;
	struct path_list pl;
	unsigned int depth = td->o.iodepth ?: 1;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d) {
		td_verror(td, ENOMEM, "calloc");
		return 1;
	}
	td->io_ops_data = d;
	d->iodepth = depth;
	d->done_local = calloc(depth, sizeof(*d->done_local));
	d->events = calloc(depth, sizeof(*d->events));
	d->comps = calloc(depth, sizeof(*d->comps));
	if (!d->done_local || !d->events || !d->comps) {
		td_verror(td, ENOMEM, "calloc");
		return 1; /* fio calls cleanup() */
	}

	if (fill_opts(td, o->queue_depth ?: depth, &ro, &pl))
		return 1;
	ret = rblk_open(o->uri, &ro, &d->r);
	if (ret) {
		d->r = NULL;
		log_err("rblk: %s\n", rblk_last_error());
		td_verror(td, -ret, "rblk_open");
		return 1;
	}
	d->q = rblk_get_queue(d->r, 0);
	info = rblk_get_info(d->r);
	d->qd = info->queue_depth;
	d->features = info->features;
	d->busy_poll = o->poll_mode == POLL_BUSY;
	if (o->read_mode == READ_MODE_PUSH &&
	    !(info->features & RBLK_FEAT_PUSH)) {
		log_err(
		    "rblk: read_mode=push: the target does not offer push reads\n");
		return 1;
	}
	/* --sync=1 (O_SYNC): every write durable on completion */
	if (td->o.sync_io && (info->features & RBLK_FEAT_FUA))
		d->write_flags = RBLK_IO_FUA;
	dprint(
	    FD_IO,
	    "rblk: %s: queue depth %u (iodepth %u), max_io %u, %s, poll %u\n",
	    o->uri, d->qd, depth, info->max_io,
	    (info->features & RBLK_FEAT_DIRECT) ? "direct access"
	    : (info->features & RBLK_FEAT_PUSH) ? "push reads"
						: "pull reads",
	    o->poll_mode);
	return 0;
}

/*
 * fio's I/O buffers: size bytes, all io_u buffers inside. Runs after init(),
 * on the job's thread. Page aligned, and registered once with the queue so
 * every I/O on them is zero copy.
 */
static int rblk_fio_iomem_alloc(struct thread_data *td, size_t size)
{
	struct rblk_fio *d = td->io_ops_data;
	long pg = sysconf(_SC_PAGESIZE);
	int ret;

	if (posix_memalign(&d->mem, pg > 0 ? (size_t)pg : 4096, size)) {
		d->mem = NULL;
		log_err("rblk: cannot allocate %zu bytes of I/O buffers\n",
			size);
		return 1;
	}
	d->mem_len = size;
	ret = rblk_register_buffer(d->q, d->mem, size);
	if (ret) {
		log_err("rblk: %s\n", rblk_last_error());
		free(d->mem);
		d->mem = NULL;
		return 1;
	}
	d->mem_registered = true;
	td->orig_buffer = d->mem;
	return 0;
}

/* Runs before cleanup(), with no I/O in flight. */
static void rblk_fio_iomem_free(struct thread_data *td)
{
	struct rblk_fio *d = td->io_ops_data;

	if (!d || !d->mem)
		return;
	if (d->mem_registered && d->r && rblk_unregister_buffer(d->q, d->mem))
		log_err("rblk: %s\n", rblk_last_error());
	d->mem_registered = false;
	free(d->mem);
	d->mem = NULL;
	td->orig_buffer = NULL;
}

/* Complete io_u without rblk: it shows up at the next getevents(). */
static void done_local(struct rblk_fio *d, struct io_u *io_u, int err)
{
	io_u->error = err;
	d->done_local[d->nr_done_local++] = io_u;
}

/* Map io_u to an rblk submission; io_u is the user_data. 0 or -errno. */
static int submit_one(struct thread_data *td, struct rblk_fio *d,
		      struct io_u *io_u)
{
	switch (io_u->ddir) {
	case DDIR_READ:
		return rblk_submit(d->q, RBLK_IO_READ, io_u->xfer_buf,
				   io_u->offset, io_u->xfer_buflen, 0, io_u);
	case DDIR_WRITE:
		return rblk_submit(d->q, RBLK_IO_WRITE, io_u->xfer_buf,
				   io_u->offset, io_u->xfer_buflen,
				   d->write_flags, io_u);
	case DDIR_TRIM:
		return rblk_submit(d->q, RBLK_IO_TRIM, NULL, io_u->offset,
				   io_u->xfer_buflen, 0, io_u);
	case DDIR_SYNC:
	case DDIR_DATASYNC:
	case DDIR_SYNC_FILE_RANGE:
		/*
		 * A volume without FLUSH has no volatile cache: what
		 * completed is durable already.
		 */
		if (!(d->features & RBLK_FEAT_FLUSH)) {
			done_local(d, io_u, 0);
			return 0;
		}
		return rblk_submit(d->q, RBLK_IO_FLUSH, NULL, 0, 0, 0, io_u);
	default:
		log_err("rblk: cannot do %s\n", io_ddir_name(io_u->ddir));
		return -EOPNOTSUPP;
	}
}

/*
 * Hand io_u to rblk now, under a plug that commit() pulls (one post per
 * batch). rblk queues beyond its queue depth itself; FIO_Q_BUSY only when
 * it already holds max_queued unreaped I/Os (fio then commits, reaps and
 * queues io_u again). A submission rblk refuses completes with its error
 * at the next getevents().
 */
static enum fio_q_status rblk_fio_queue(struct thread_data *td,
					struct io_u *io_u)
{
	struct rblk_fio *d = td->io_ops_data;
	int ret;

	fio_ro_check(td, io_u);
	if (!d->q) { /* abandoned (below): nothing goes out any more */
		done_local(d, io_u, ECANCELED);
		return FIO_Q_QUEUED;
	}
	if (!d->plugged) {
		rblk_queue_plug(d->q);
		d->plugged = true;
	}
	if (fio_fill_issue_time(td)) {
		fio_gettime(&io_u->issue_time, NULL);
		if (td->o.read_iolog_file)
			td->last_issue = io_u->issue_time;
	}
	ret = submit_one(td, d, io_u);
	if (ret == -EAGAIN)
		return FIO_Q_BUSY;
	if (ret) {
		if (ret != -EOPNOTSUPP)
			log_err("rblk: %s\n", rblk_last_error());
		done_local(d, io_u, -ret);
		return FIO_Q_QUEUED;
	}
	if (fio_fill_issue_time(td))
		io_u_queued(td, io_u); /* submission latency sample */
	d->nr_submitted++;
	return FIO_Q_QUEUED;
}

/* Post what queue() held: one doorbell / one sendmsg for the lot. */
static void unplug(struct rblk_fio *d)
{
	if (d->plugged && d->q) {
		d->plugged = false;
		rblk_queue_unplug(d->q);
	}
}

/*
 * The batch goes out in one post - but not yet while completions already
 * reaped wait for getevents(). fio by default reaps one completion and
 * commits one I/O per round (iodepth_batch and iodepth_batch_complete_max
 * are 1), which would cost a post per I/O; holding the plug until the
 * ready completions run out sends the I/Os queued meanwhile together. None
 * waits on more than fio's own work: getevents() unplugs before it polls
 * or sleeps, and fio reaps before it sleeps (thinktime, rate) or stops.
 */
static int rblk_fio_commit(struct thread_data *td)
{
	struct rblk_fio *d = td->io_ops_data;

	if (d->nr_submitted)
		io_u_mark_submit(td, d->nr_submitted);
	d->nr_submitted = 0;
	if (!d->q || !rblk_queue_ready(d->q))
		unplug(d);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int timeout_ms(const struct timespec *t)
{
	long long ms;

	if (!t)
		return -1;
	ms = (long long)t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/*
 * fio stops the job (SIGTERM, SIGINT, runtime) while a target leaves
 * I/O unanswered: close the session, which drops the connection so the
 * target can reach none of our buffers any more, and complete every I/O
 * still in flight with ECANCELED, so fio, which waits for them before it
 * exits, does not wait for the command timeouts.
 */
static void abandon(struct thread_data *td, struct rblk_fio *d)
{
	struct io_u *io_u;
	unsigned int i;

	log_err("rblk: %s: stopping with %u I/Os unanswered; abandoning them\n",
		td->o.name, rblk_queue_inflight(d->q));
	rblk_close(d->r); /* deregisters fio's buffers too */
	d->r = NULL;
	d->q = NULL;
	d->plugged = false;
	d->mem_registered = false;
	io_u_qiter(&td->io_u_all, io_u, i)
	{
		bool local = false;

		if (!(io_u->flags & IO_U_F_FLIGHT))
			continue;
		for (unsigned int k = 0; k < d->nr_done_local; k++)
			local |= d->done_local[k] == io_u;
		if (!local)
			done_local(d, io_u, ECANCELED);
	}
}

/*
 * Reap between min and max completions into d->events, waiting up to t
 * (NULL: forever) for min of them. Returns the count or -errno. Waits
 * in slices of WAIT_SLICE_MS so a stop request (td->terminate) is seen;
 * I/O still unanswered ABANDON_NS after it is abandoned.
 */
static int rblk_fio_getevents(struct thread_data *td, unsigned int min,
			      unsigned int max, const struct timespec *t)
{
	struct rblk_fio *d = td->io_ops_data;
	int wait = timeout_ms(t);
	uint64_t deadline = 0;
	unsigned int n = 0, i;
	int got;

	if (max > d->iodepth)
		max = d->iodepth;
	if (min > max)
		min = max;
	if (wait > 0)
		deadline = now_ns() + (uint64_t)wait * 1000000;

	while (n < max) {
		bool need;
		int w = 0;

		while (d->nr_done_local && n < max)
			d->events[n++] = d->done_local[--d->nr_done_local];
		if (n == max || !d->q)
			break;
		/* wait only while short of min and something can complete */
		need = n < min && rblk_queue_inflight(d->q);
		if (need && td->terminate) {
			if (!d->term_at)
				d->term_at = now_ns();
			if (now_ns() - d->term_at >= ABANDON_NS) {
				abandon(td, d);
				continue;
			}
		}
		if (need) {
			w = wait;
			if (wait > 0) {
				uint64_t now = now_ns();

				if (now >= deadline)
					break;
				w = (int)((deadline - now + 999999) / 1000000);
			}
			if (w < 0 || w > WAIT_SLICE_MS)
				w = WAIT_SLICE_MS;
		}
		if (rblk_queue_ready(d->q) < max - n)
			unplug(d); /* rblk_poll() will post and poll */
		/*
		 * poll=busy: the same loop, but rblk_poll() never sleeps;
		 * w != 0 keeps us looping until min or the deadline.
		 */
		got = rblk_poll(d->q, d->comps, (int)(max - n),
				d->busy_poll ? 0 : w);
		if (got < 0) {
			if (n)
				break;
			log_err("rblk: %s\n", rblk_last_error());
			return got;
		}
		for (i = 0; i < (unsigned int)got; i++) {
			struct io_u *io_u = d->comps[i].user_data;

			io_u->error = -d->comps[i].result;
			d->events[n++] = io_u;
		}
		if (!got && w == 0 && !d->nr_done_local)
			break;
	}
	return (int)n;
}

static struct io_u *rblk_fio_event(struct thread_data *td, int event)
{
	struct rblk_fio *d = td->io_ops_data;

	return d->events[event];
}

/* The "file" is the volume: nothing to open, close or invalidate. */
static int rblk_fio_open_file(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

static int rblk_fio_close_file(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

static int rblk_fio_invalidate(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

/* fio looks this symbol up by name after dlopen(). */
struct ioengine_ops ioengine = {
    .name = "rblk",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL | FIO_MEMALIGN |
	     FIO_ASYNCIO_SETS_ISSUE_TIME,
    .setup = rblk_fio_setup,
    .init = rblk_fio_init,
    .queue = rblk_fio_queue,
    .commit = rblk_fio_commit,
    .getevents = rblk_fio_getevents,
    .event = rblk_fio_event,
    .cleanup = rblk_fio_cleanup,
    .open_file = rblk_fio_open_file,
    .close_file = rblk_fio_close_file,
    .invalidate = rblk_fio_invalidate,
    .iomem_alloc = rblk_fio_iomem_alloc,
    .iomem_free = rblk_fio_iomem_free,
    .options = options,
    .option_struct_size = sizeof(struct rblk_fio_opts),
};
