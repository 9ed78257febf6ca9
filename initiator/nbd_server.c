/* SPDX-License-Identifier: MIT */
/*
 * rblk nbd - serve one rblk volume to NBD clients (qemu, libnbd's nbdcopy
 * and nbdinfo, fio's nbd engine, nbd-client) over a unix or TCP socket.
 * The options are nbd.c's, the handshake is nbd_handshake.c's, the
 * transmission phase is the engine's (nbd_conn.c).
 *
 * Threads and ownership:
 *   - The main thread opens the volume (rblk_open, N queues), listens, and
 *     runs the accept loop, which also watches a signalfd (SIGINT, SIGTERM)
 *     and an eventfd that connection threads poke when they finish.
 *   - Each accepted socket gets one connection thread. It runs the fixed
 *     newstyle handshake (nbd_handshake()); on NBD_OPT_GO or
 *     NBD_OPT_EXPORT_NAME it claims the lowest free rblk queue
 *     (nbd_server_attach()) and keeps it until the client leaves, so
 *     connection i drives queue i alone and the I/O path takes no locks.
 *     A client that arrives while every queue is taken is refused (GO:
 *     NBD_REP_ERR_TOO_BIG with a message; EXPORT_NAME: the socket is
 *     closed), and a log line says why.
 *   - srv->lock guards only the connection list and the queue claim flags;
 *     it is taken at connect, claim, release and exit, never per I/O.
 *
 * Abuse limits (defaults in docs/RELIABILITY.md):
 *   - --max-connections sockets at once. When full, the oldest socket still
 *     in its handshake is dropped to make room, so idle or slow sockets
 *     cannot lock clients out; only when every socket is serving is a
 *     newcomer refused. A handshake must finish within
 *     --handshake-timeout.
 *   - --idle-timeout (off by default): a serving client that moves no
 *     byte in either direction while nothing is in flight is dropped.
 *   - --max-client-buffer: heap bytes for request data (requests larger
 *     than a pool slot) one client may hold; beyond it its requests are
 *     not read until replies are sent (see nbd_conn.h max_buf).
 *
 * Buffers: each queue gets, on first use, one mapping of nslots slots of
 * min(max_io, NBD_SLOT_MAX) bytes (nslots = the granted queue depth,
 * capped at NBD_POOL_MAX bytes) registered once with
 * rblk_register_buffer(), so READ and WRITE data move by RDMA straight
 * between the target and the buffer the socket reads into or writes from.
 * The mapping outlives its connection and is reused by the next client of
 * that queue. Larger requests (or ones arriving when every slot is busy)
 * use a malloc'd buffer that the library bounces (lib_bounce.c).
 *
 * Protocol choices (see docs/man/rblk.8):
 *   - Fixed newstyle only; simple replies only (NBD_OPT_STRUCTURED_REPLY
 *     and every other unknown option get NBD_REP_ERR_UNSUP). Replies may
 *     leave out of order; clients match them by cookie.
 *   - Size constraints: minimum = volume block size, preferred =
 *     max(4096, block size), maximum payload = 32 MiB, always sent with
 *     NBD_INFO_BLOCK_SIZE. Requests not aligned to the block size fail with
 *     NBD_EINVAL (clients using NBD_OPT_EXPORT_NAME, or GO without asking
 *     for block sizes, are still served, and misaligned requests fail
 *     cleanly).
 *   - TRIM and WRITE_ZEROES may be longer than 32 MiB (no payload); the
 *     library splits them. NBD_CMD_FLAG_NO_HOLE is accepted and ignored:
 *     the target zeroes with fallocate(ZERO_RANGE), which keeps the range
 *     allocated on file systems that support it. FUA on READ, FLUSH and
 *     TRIM is accepted and ignored (only WRITE and WRITE_ZEROES carry
 *     RBLK_IO_FUA).
 *   - NBD_FLAG_CAN_MULTI_CONN is advertised: a FLUSH on the target is an
 *     fdatasync of the whole backend, so it covers completed writes from
 *     every connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rblk/rblk.h"
#include "common/log.h"
#include "common/url.h"
#include "common/util.h"
#include "initiator/cli.h"
#include "initiator/nbd_conn.h"
#include "initiator/nbd_pool.h"
#include "initiator/nbd_proto.h"
#include "initiator/nbd_server.h"

#define NBD_DRAIN_TIMEOUT_MS 10000 /* in-flight I/O at server shutdown */
#define NBD_SIZE_ASK_MS 2000 /* a new client waits this long for the size */
#define NBD_POOL_MAX (256u << 20) /* registered bytes per queue, at most */
/*
 * A pool slot: most clients' requests fit (qemu, nbdcopy and fio send
 * 64-256 KiB); larger ones take a heap buffer the library bounces. 64
 * tags pin 8 MiB a queue, where slots of max_io pinned 64 MiB.
 */
#define NBD_SLOT_MAX (128u << 10)
#define NBD_LISTEN_BACKLOG 128

/* ---- queue claim and buffer pool --------------------------------------- */

static void conn_release_queue(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;

	if (c->qidx < 0)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->qs[c->qidx].busy = false;
	pthread_mutex_unlock(&srv->lock);
	c->qidx = -1;
	c->q = NULL;
	c->qs = NULL;
}

/*
 * Claim the lowest free queue. 0, -EBUSY (all taken), -ECONNABORTED
 * (evicted meanwhile) or -ENOTCONN.
 */
static int conn_claim_queue(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;
	int ret = -EBUSY;

	pthread_mutex_lock(&srv->lock);
	if (c->evicted) /* its socket is shut down: the handshake ends */
		ret = -ECONNABORTED;
	for (unsigned int i = 0; i < srv->nqueues && !c->evicted; i++) {
		if (!srv->qs[i].busy) {
			srv->qs[i].busy = true;
			c->qidx = (int)i;
			c->negotiating = false; /* serving now: not evictable */
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	if (ret)
		return ret;
	c->qs = &srv->qs[c->qidx];
	c->q = rblk_get_queue(srv->r, (unsigned int)c->qidx);
	if (!c->q) {
		log_err("queue %d: rblk_get_queue: %s", c->qidx,
			rblk_last_error());
		conn_release_queue(c);
		return -ENOTCONN;
	}
	return 0;
}

/*
 * Map and register the claimed queue's pool on first use. A failed
 * registration is not fatal: the library then copies through its own
 * registered slots. Runs on the thread holding the claim.
 */
static int qslot_pool_init(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;
	struct nbd_qslot *qs = c->qs;
	size_t len = (size_t)srv->nslots * srv->slot_size;
	char who[32];

	if (qs->pool)
		return 0;
	snprintf(who, sizeof(who), "queue %d", c->qidx);
	qs->pool_len = len;
	return nbd_pool_map(c->q, len, who, &qs->pool, &qs->registered);
}

/* Claim a queue and prepare for transmission. 0, -EBUSY or -ENOMEM. */
int nbd_server_attach(struct nbd_conn *c)
{
	int ret;

	ret = conn_claim_queue(c);
	if (ret == -EBUSY) {
		log_warn("client %u (%s): refused: all %u queues are in use "
			 "(one NBD connection per queue; see --queues)",
			 c->id, c->peer, c->srv->nqueues);
		return ret;
	}
	ret = qslot_pool_init(c);
	if (ret) {
		conn_release_queue(c);
		return ret;
	}
	return 0;
}

uint64_t nbd_server_size(struct nbd_conn *c)
{
	int64_t n;

	if (c->q) {
		n = rblk_queue_refresh_size(c->q, NBD_SIZE_ASK_MS);
		if (n > 0)
			return c->size = (uint64_t)n;
		log_warn("client %u: asking the target for the volume's size: "
			 "%s",
			 c->id, rblk_last_error());
	}
	return c->size = rblk_get_size(c->srv->r);
}

/* ---- connection threads ------------------------------------------------ */

/* queue_lost callback of the engine; runs on the connection thread. */
static void conn_queue_lost(void *arg)
{
	struct nbd_conn *c = arg;

	log_warn("client %u: queue %d lost its connection to the target; "
		 "closing the client",
		 c->id, c->qidx);
}

/*
 * Serve the claimed queue with the shared transmission engine. Rules that
 * are ours: FUA accepted on every command and FLUSH flags checked (as
 * docs/man/rblk.8 says); a protocol error or a lost queue ends the
 * connection after what is in flight is answered (NBD_ESHUTDOWN for a
 * lost queue); shutdown (stop_fd) drains for NBD_DRAIN_TIMEOUT_MS.
 */
static void nbd_transmission(struct nbd_conn *c)
{
	struct nbd_server *srv = c->srv;
	struct nbd_conn_stats st;
	char name[128];
	struct nbd_conn_opts o = {
	    .fd = c->fd,
	    .q = c->q,
	    .name = name,
	    .size = c->size, /* as the handshake told the client */
	    .block_size = srv->block_size,
	    .tx_flags = srv->tflags,
	    .checks = NBD_CONN_FUA_ON_ALL,
	    .qlost = NBD_CONN_QLOST_CLOSE,
	    .nreqs = srv->nreqs,
	    .pool = c->qs->pool,
	    .slot_size = srv->slot_size,
	    .nslots = srv->nslots,
	    .abort_fd = srv->stop_fd,
	    .drain_ms = NBD_DRAIN_TIMEOUT_MS,
	    .max_buf = srv->max_client_buf,
	    .idle_ms = srv->idle_ms,
	    .spin_us = srv->spin_us,
	    .queue_lost = conn_queue_lost,
	    .arg = c,
	};

	snprintf(name, sizeof(name), "client %u (%s)", c->id, c->peer);
	nbd_conn_run(&o, &st);
	if (st.abandoned)
		c->qs->abandoned = true;
	log_info("client %u (%s): disconnected after %llu requests "
		 "(%llu failed)",
		 c->id, c->peer, (unsigned long long)st.requests,
		 (unsigned long long)st.errors);
}

static void *conn_thread(void *arg)
{
	struct nbd_conn *c = arg;
	struct nbd_server *srv = c->srv;
	uint64_t one = 1;
	int ret;

	c->deadline_ms = now_ms() + srv->handshake_ms;
	ret = nbd_handshake(c);
	if (ret == 1) {
		log_info("client %u (%s): connected on queue %d", c->id,
			 c->peer, c->qidx);
		nbd_transmission(c);
	} else if (ret == -ETIMEDOUT) {
		log_warn("client %u (%s): handshake not finished within %u ms; "
			 "dropped (--handshake-timeout)",
			 c->id, c->peer, srv->handshake_ms);
	} else if (ret < 0 && ret != -EPIPE && ret != -ESHUTDOWN &&
		   ret != -ECONNRESET) {
		log_debug("client %u (%s): handshake ended: %s", c->id, c->peer,
			  strerror(-ret));
	}
	conn_release_queue(c);

	pthread_mutex_lock(&srv->lock);
	c->finished = true;
	c->negotiating = false; /* the accept loop leaves c->fd alone now */
	if (!c->evicted)
		srv->nconns--;
	pthread_mutex_unlock(&srv->lock);
	close(c->fd);
	c->fd = -1;
	if (write(srv->reap_fd, &one, sizeof(one)) < 0)
		(void)0; /* the counter cannot overflow in practice */
	return NULL;
}

/* Join finished connection threads (all of them when all is set). */
static void reap_conns(struct nbd_server *srv, bool all)
{
	struct nbd_conn *done = NULL, **pp, *c;

	pthread_mutex_lock(&srv->lock);
	pp = &srv->conns;
	while ((c = *pp)) {
		if (all || c->finished) {
			*pp = c->next;
			c->next = done;
			done = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	while ((c = done)) {
		done = c->next;
		pthread_join(c->thread, NULL);
		free(c);
	}
}

static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN], port[8];

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) ||
	    ss.ss_family == AF_UNIX ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(out, len, "unix");
		return;
	}
	if (ss.ss_family == AF_INET6)
		snprintf(out, len, "[%s]:%s", host, port);
	else
		snprintf(out, len, "%s:%s", host, port);
}

/*
 * Make room for a newcomer: drop the oldest connection still in its
 * handshake (the list is newest first). Its thread sees the shut-down
 * socket, ends the handshake and closes it. Caller holds srv->lock.
 * Returns false when every connection is serving.
 */
static bool evict_negotiating(struct nbd_server *srv)
{
	struct nbd_conn *victim = NULL;

	for (struct nbd_conn *c = srv->conns; c; c = c->next)
		if (c->negotiating)
			victim = c;
	if (!victim)
		return false;
	victim->negotiating = false;
	victim->evicted = true;
	srv->nconns--;
	shutdown(victim->fd, SHUT_RDWR);
	log_warn(
	    "client %u (%s): dropped while still in its handshake to make "
	    "room for a new connection (%u connections, --max-connections)",
	    victim->id, victim->peer, srv->max_conns);
	return true;
}

/* Take one connection off the listener and start its thread. */
static void accept_one(struct nbd_server *srv, int lfd)
{
	struct nbd_conn *c;
	int fd, one = 1, ret;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			log_warn("accept: %s", strerror(errno));
			usleep(100 * 1000); /* let connections go away */
		} else if (errno != EAGAIN && errno != EINTR &&
			   errno != ECONNABORTED) {
			log_warn("accept: %s", strerror(errno));
		}
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	c = calloc(1, sizeof(*c));
	if (!c) {
		log_err("out of memory for a connection");
		close(fd);
		return;
	}
	c->srv = srv;
	c->fd = fd;
	c->qidx = -1;
	peer_name(fd, c->peer, sizeof(c->peer));

	pthread_mutex_lock(&srv->lock);
	if (srv->nconns >= srv->max_conns && !evict_negotiating(srv)) {
		pthread_mutex_unlock(&srv->lock);
		log_warn("refusing a connection from %s: %u clients connected "
			 "(--max-connections)",
			 c->peer, srv->max_conns);
		close(fd);
		free(c);
		return;
	}
	c->id = srv->next_id++;
	c->negotiating = true;
	srv->nconns++;
	c->next = srv->conns;
	srv->conns = c;
	ret = pthread_create(&c->thread, NULL, conn_thread, c);
	if (ret) {
		srv->conns = c->next;
		srv->nconns--;
		pthread_mutex_unlock(&srv->lock);
		log_err("pthread_create: %s", strerror(ret));
		close(fd);
		free(c);
		return;
	}
	pthread_mutex_unlock(&srv->lock);
	log_debug("client %u: connection from %s", c->id, c->peer);
}

/* ---- listeners ---------------------------------------------------------- */

/*
 * Bind a unix socket at path with mode 0600. A file already there is
 * replaced only if it is a socket nobody listens on.
 */
static int listen_unix(const char *path, int *out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		cli_error("nbd", "%s: socket path longer than %zu bytes", path,
			  sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		cli_error("nbd", "socket(AF_UNIX): %s", strerror(errno));
		return ret;
	}
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			cli_error("nbd", "%s exists and is not a socket", path);
			ret = -EEXIST;
			goto out_close;
		}
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
		    errno == EAGAIN) {
			cli_error("nbd",
				  "%s: another server is listening there",
				  path);
			ret = -EADDRINUSE;
			goto out_close;
		}
		close(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0) {
			ret = -errno;
			cli_error("nbd", "socket(AF_UNIX): %s",
				  strerror(errno));
			return ret;
		}
		if (unlink(path) && errno != ENOENT) {
			ret = -errno;
			cli_error("nbd", "unlink stale socket %s: %s", path,
				  strerror(errno));
			goto out_close;
		}
	}
	old = umask(0177);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret) {
		ret = -errno;
		cli_error("nbd", "bind %s: %s", path, strerror(errno));
		goto out_close;
	}
	if (listen(fd, NBD_LISTEN_BACKLOG)) {
		ret = -errno;
		cli_error("nbd", "listen %s: %s", path, strerror(errno));
		goto out_unlink;
	}
	*out = fd;
	return 0;

out_unlink:
	unlink(path);
out_close:
	close(fd);
	return ret;
}

/* Bind host:port (SO_REUSEADDR); the bound address goes to addr. */
static int listen_tcp(const struct rblk_url *u, int *out, char *addr,
		      size_t addrlen)
{
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char port[8];
	int fd = -1, one = 1, ret, err = 0;

	snprintf(port, sizeof(port), "%u", u->port);
	ret = getaddrinfo(u->host, port, &hints, &res);
	if (ret) {
		cli_error("nbd", "--listen: cannot resolve '%s': %s", u->host,
			  gai_strerror(ret));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) &&
		    !listen(fd, NBD_LISTEN_BACKLOG))
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		cli_error("nbd", "--listen %s:%u: %s", u->host, u->port,
			  strerror(err));
		return -err;
	}
	if (strchr(u->host, ':'))
		snprintf(addr, addrlen, "tcp://[%s]:%u", u->host, u->port);
	else
		snprintf(addr, addrlen, "tcp://%s:%u", u->host, u->port);
	*out = fd;
	return 0;
}

/* Percent-encode an export name for an nbd URI path. */
static void uri_escape(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s && o + 4 < len; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			out[o++] = (char)ch;
		} else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o] = 0;
}

/* Derive what we advertise from the volume. */
static void server_setup(struct nbd_server *srv, const struct nbd_serve_opts *o)
{
	const struct rblk_info *info = srv->info;
	uint32_t f = info->features;
	uint64_t pool_slots;

	srv->size = info->size;
	srv->block_size = info->block_size ? info->block_size : 1;
	srv->read_only = o->read_only || (f & RBLK_FEAT_READ_ONLY);
	srv->slot_size = MIN(info->max_io ? info->max_io : RBLK_DEFAULT_MAX_IO,
			     NBD_SLOT_MAX);
	srv->nreqs = info->queue_depth ? info->queue_depth : 1;
	pool_slots = NBD_POOL_MAX / srv->slot_size;
	srv->nslots = (uint32_t)MAX(1u, MIN((uint64_t)srv->nreqs, pool_slots));
	srv->nqueues = info->queues;

	srv->tflags = nbd_conn_tx_flags(f, srv->read_only);
	if (srv->block_size > 65536 || !IS_POW2(srv->block_size))
		log_warn("volume block size %u is not a power of two up to "
			 "64 KiB; NBD clients may refuse it",
			 srv->block_size);
}

/* Wait for SIGINT/SIGTERM while accepting; returns when asked to stop. */
static void accept_loop(struct nbd_server *srv, int lfd, int sfd)
{
	for (;;) {
		struct pollfd p[3] = {
		    {.fd = lfd, .events = POLLIN},
		    {.fd = sfd, .events = POLLIN},
		    {.fd = srv->reap_fd, .events = POLLIN},
		};
		struct signalfd_siginfo si;
		uint64_t v;

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s", strerror(errno));
			return;
		}
		if (p[1].revents) {
			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				log_info("%s: shutting down",
					 strsignal((int)si.ssi_signo));
			return;
		}
		if (p[2].revents) {
			if (read(srv->reap_fd, &v, sizeof(v)) < 0)
				(void)0;
			reap_conns(srv, false);
		}
		if (p[0].revents)
			accept_one(srv, lfd);
	}
}

/* ---- serving ------------------------------------------------------------ */

/*
 * Signals: blocked in every thread (the library's too, so before
 * rblk_open), read from a signalfd by the accept loop. SIGPIPE: sends use
 * MSG_NOSIGNAL, but a transport might not. Returns the signalfd or -1.
 */
static int block_signals(void)
{
	sigset_t mask;
	int sfd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0)
		cli_error("nbd", "signalfd: %s", strerror(errno));
	return sfd;
}

/* The eventfds, the volume and its queue slots. 0, or -1 (said why). */
static int server_open(struct nbd_server *srv, const struct nbd_serve_opts *o)
{
	srv->stop_fd = eventfd(0, EFD_CLOEXEC);
	srv->reap_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->stop_fd < 0 || srv->reap_fd < 0) {
		cli_error("nbd", "eventfd: %s", strerror(errno));
		return -1;
	}
	if (rblk_open(o->url, o->ropts, &srv->r) < 0) {
		srv->r = NULL;
		cli_error("nbd", "cannot open %s: %s", o->url,
			  rblk_last_error());
		return -1;
	}
	srv->info = rblk_get_info(srv->r);
	server_setup(srv, o);
	srv->qs = calloc(srv->nqueues, sizeof(*srv->qs));
	if (!srv->qs) {
		cli_error("nbd", "out of memory");
		return -1;
	}
	return 0;
}

/*
 * Listen where o says and tell the world: a log line and the ready line on
 * stdout. Returns the listening socket, or -1 (said why).
 */
static int server_listen(struct nbd_server *srv, const struct nbd_serve_opts *o)
{
	char addr[320], uri[1100], name[3 * RBLK_NAME_MAX];
	int lfd = -1;

	uri_escape(srv->export_name, name, sizeof(name));
	if (o->socket_path) {
		if (listen_unix(o->socket_path, &lfd))
			return -1;
		snprintf(addr, sizeof(addr), "unix:%s", o->socket_path);
		snprintf(uri, sizeof(uri), "nbd+unix:///%s?socket=%s", name,
			 o->socket_path);
	} else {
		if (listen_tcp(o->listen, &lfd, addr, sizeof(addr)))
			return -1;
		snprintf(uri, sizeof(uri), "nbd://%s/%s", addr + 6, name);
	}
	log_info("serving %s on %s (%llu bytes, block size %u, %u queues x "
		 "%u deep, max_io %u%s)",
		 o->url, addr, (unsigned long long)srv->size, srv->block_size,
		 srv->nqueues, srv->nreqs, srv->slot_size,
		 srv->read_only ? ", read-only" : "");
	printf("ready %s %s\n", addr, uri);
	fflush(stdout);
	return lfd;
}

/* After the accept loop: every connection drains and closes. */
static void server_stop(struct nbd_server *srv)
{
	uint64_t one = 1;

	if (write(srv->stop_fd, &one, sizeof(one)) < 0)
		(void)0;
	reap_conns(srv, true);
	for (unsigned int i = 0; i < srv->nqueues; i++) {
		struct nbd_qslot *qs = &srv->qs[i];

		if (qs->registered && !qs->abandoned)
			rblk_unregister_buffer(rblk_get_queue(srv->r, i),
					       qs->pool);
	}
}

/* Undo server_open(), however far it got. */
static void server_close(struct nbd_server *srv)
{
	/* pools are unmapped after rblk_close: abandoned I/O may target them */
	if (srv->r)
		rblk_close(srv->r);
	if (srv->qs) {
		for (unsigned int i = 0; i < srv->nqueues; i++)
			if (srv->qs[i].pool)
				munmap(srv->qs[i].pool, srv->qs[i].pool_len);
		free(srv->qs);
	}
	if (srv->reap_fd >= 0)
		close(srv->reap_fd);
	if (srv->stop_fd >= 0)
		close(srv->stop_fd);
}

int nbd_serve(const struct nbd_serve_opts *o)
{
	struct nbd_server srv = {
	    .stop_fd = -1,
	    .reap_fd = -1,
	    .max_conns = o->max_conns,
	    .handshake_ms = o->handshake_ms,
	    .idle_ms = o->idle_ms,
	    .spin_us = o->spin_us,
	    .max_client_buf = o->max_client_buf,
	};
	int sfd, lfd, rc = 1;

	snprintf(srv.url, sizeof(srv.url), "%s", o->url);
	snprintf(srv.export_name, sizeof(srv.export_name), "%s",
		 o->export_name);
	sfd = block_signals();
	if (sfd < 0)
		return 1;
	pthread_mutex_init(&srv.lock, NULL);
	if (!server_open(&srv, o)) {
		lfd = server_listen(&srv, o);
		if (lfd >= 0) {
			accept_loop(&srv, lfd, sfd);
			rc = 0;
			/* no new clients from here on */
			close(lfd);
			server_stop(&srv);
			if (o->socket_path)
				unlink(o->socket_path);
		}
	}
	server_close(&srv);
	pthread_mutex_destroy(&srv.lock);
	close(sfd);
	return rc;
}
