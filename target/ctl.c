/* SPDX-License-Identifier: MIT */
/*
 * The control thread of rblk-target (started by ctl_open()): it serves the
 * control socket, one request per connection, clients side by side (the
 * commands: ctl_cmd.c; the protocol: docs/CONTROL.md), closes
 * removed exports (the reaper, export_put()), and cuts metrics clients
 * past their deadline (metrics.c, whose connections libmicrohttpd serves
 * on its own thread).
 *
 * Request: one line, the command and its arguments as the command line
 * gives them, separated by spaces; a backslash makes the next character
 * literal (so a path may hold spaces). Response: a first line "ok" or
 * "error: MESSAGE", then the body (text, or JSON with -o json), then the
 * server closes the connection.
 *
 * The main thread only accepts data connections, so no control or
 * metrics client can delay a login. A control client gets
 * CTL_IO_TIMEOUT_S in all to send its request, and again to take the
 * response (non-blocking socket, an absolute deadline); the thread serves
 * up to CTL_MAX_CLIENTS of them side by side from one epoll set, so a
 * stalled or trickling client delays no other (ten silent clients held
 * every command 20 s when they were served one at a time).
 * The control socket is mode 0600 by default, the metrics endpoint
 * listens on loopback unless told otherwise.
 */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#include "export.h"

#define REQ_MAX 8192
/* control clients served at once (the oldest silent one makes room) */
#define CTL_MAX_CLIENTS 64

struct ctl_client;

struct ctl {
	struct target *t;
	int unix_fd;		 /* -1: none */
	struct metrics *metrics; /* NULL: none */
	int epfd;		 /* the control thread's */
	int stop_fd;		 /* eventfd: end the thread */
	int reap_fd; /* eventfd: a removed export waits to be closed */
	pthread_t thread;
	bool started;
	char path[108]; /* unix socket we created, unlinked at close */
	struct ctl_client *clients; /* being served, oldest first */
	unsigned int nr_clients;
	/* their addresses are the epoll data */
	char unix_tag, stop_tag, reap_tag;
};

/* ---- sockets ----------------------------------------------------------- */

/*
 * Take one connection from lfd (non-blocking). -1 when none; out of file
 * descriptors is logged and slowed down, since the pending connection
 * keeps lfd readable.
 */
static int accept_one(int lfd, const char *what)
{
	static uint64_t last_warn;
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
	    errno == ENOMEM) {
		if (now_ms() - last_warn > 10000) {
			log_warn("%s: accept: %s; retrying", what,
				 strerror(errno));
			last_warn = now_ms();
		}
		usleep(100 * 1000);
	}
	return -1;
}

/*
 * A control client being served. Clients are served side by side, each
 * on its own deadline, so a silent or trickling one delays nobody else:
 * the thread never waits on one client's socket.
 */
struct ctl_client {
	int fd;
	bool writing;	   /* the request is answered; resp is going out */
	uint64_t deadline; /* to finish reading, then again to finish writing */
	char *req;	   /* REQ_MAX bytes */
	size_t req_len;
	char *resp;
	size_t resp_len, resp_off;
	struct ctl_client *next; /* ctl->clients, oldest first */
};

static void client_close(struct ctl *ctl, struct ctl_client *c)
{
	struct ctl_client **pp;

	for (pp = &ctl->clients; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	ctl->nr_clients--;
	close(c->fd); /* leaves the epoll set with it */
	free(c->resp);
	free(c->req);
	free(c);
}

/* Write what resp has left; true when c is done (sent or failed). */
static bool client_write(struct ctl_client *c)
{
	while (c->resp_off < c->resp_len) {
		ssize_t w = send(c->fd, c->resp + c->resp_off,
				 c->resp_len - c->resp_off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return false;
		if (w <= 0) {
			log_debug("ctl: client went away before the response");
			return true;
		}
		c->resp_off += (size_t)w;
	}
	return true;
}

/* Answer c: run its request (or say what was wrong with it), start writing. */
static void client_answer(struct ctl *ctl, struct ctl_client *c,
			  const char *error)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
	FILE *out = open_memstream(&c->resp, &c->resp_len);
	char *nl;

	if (!out) {
		client_close(ctl, c);
		return;
	}
	if (error) {
		fprintf(out, "error: %s\n", error);
	} else {
		nl = memchr(c->req, '\n', c->req_len);
		if (nl)
			*nl = 0;
		ctl_run(ctl->t, c->req, out);
	}
	fclose(out);
	c->writing = true;
	c->deadline = now_ms() + CTL_IO_TIMEOUT_S * 1000u;
	if (client_write(c) || epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &ev))
		client_close(ctl, c);
}

static void client_event(struct ctl *ctl, struct ctl_client *c)
{
	if (c->writing) {
		if (client_write(c))
			client_close(ctl, c);
		return;
	}
	for (;;) {
		ssize_t n;

		if (c->req_len == REQ_MAX - 1) {
			client_answer(ctl, c, "request too long");
			return;
		}
		n = read(c->fd, c->req + c->req_len, REQ_MAX - 1 - c->req_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* more to come */
		if (n < 0) {
			client_close(ctl, c);
			return;
		}
		c->req[c->req_len + (size_t)n] = 0;
		if (n == 0 || memchr(c->req + c->req_len, '\n', (size_t)n)) {
			c->req_len += (size_t)n;
			client_answer(ctl, c, NULL);
			return;
		}
		c->req_len += (size_t)n;
	}
}

/* Clients past their deadline: told so where they still read, closed. */
static void clients_expire(struct ctl *ctl)
{
	struct ctl_client *c = ctl->clients, *next;
	uint64_t now = now_ms();

	for (; c; c = next) {
		static const char msg[] =
		    "error: request unreadable or not in time\n";

		next = c->next;
		if (now < c->deadline)
			continue;
		if (!c->writing && send(c->fd, msg, sizeof(msg) - 1,
					MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("ctl: client went away");
		client_close(ctl, c);
	}
}

/* The earliest client deadline as an epoll timeout (-1: none). */
static int clients_timeout(const struct ctl *ctl)
{
	uint64_t first = UINT64_MAX, now = now_ms();

	for (const struct ctl_client *c = ctl->clients; c; c = c->next)
		first = MIN(first, c->deadline);
	if (first == UINT64_MAX)
		return -1;
	return first <= now ? 0 : (int)MIN(first - now, 60000u);
}

/*
 * Take every waiting connection. At CTL_MAX_CLIENTS the oldest client
 * still sending its request goes first: a crowd of silent clients then
 * cycles out in order instead of keeping the next one out.
 */
static void serve_ctl(struct ctl *ctl)
{
	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd = accept_one(ctl->unix_fd, "control socket");
		struct ctl_client *c, **pp;

		if (fd < 0)
			return;
		if (ctl->nr_clients >= CTL_MAX_CLIENTS) {
			for (c = ctl->clients; c && c->writing; c = c->next)
				;
			if (c) {
				log_ratelimited(
				    LOG_WARN,
				    "ctl: %u clients at once; dropping the oldest that has not sent its request",
				    ctl->nr_clients);
				client_close(ctl, c);
			}
		}
		c = calloc(1, sizeof(*c));
		if (c)
			c->req = malloc(REQ_MAX);
		if (!c || !c->req) {
			if (c)
				free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->deadline = now_ms() + CTL_IO_TIMEOUT_S * 1000u;
		ev.data.ptr = c;
		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			log_warn("ctl: epoll_ctl: %s", strerror(errno));
			free(c->req);
			free(c);
			close(fd);
			continue;
		}
		for (pp = &ctl->clients; *pp; pp = &(*pp)->next)
			;
		*pp = c;
		ctl->nr_clients++;
		client_event(ctl, c); /* the request may be there already */
	}
}

/*
 * The control thread: control clients side by side, a stop request,
 * removed exports to close, metrics clients to cut; nothing here waits
 * on one client.
 */
static void *ctl_thread(void *arg)
{
	struct ctl *ctl = arg;
	uint64_t v;

	export_reaper_set(ctl->reap_fd);
	for (;;) {
		struct epoll_event evs[16];
		/* with a metrics endpoint: wake each second to cut its
		 * tricklers */
		int tmo = clients_timeout(ctl), n;

		if (ctl->metrics && (tmo < 0 || tmo > 1000))
			tmo = 1000;
		n = epoll_wait(ctl->epfd, evs, 16, tmo);
		if (n < 0 && errno != EINTR) {
			log_err("ctl: epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &ctl->stop_tag)
				goto out;
			if (p == &ctl->reap_tag) {
				if (read(ctl->reap_fd, &v, sizeof(v)) < 0 &&
				    errno != EAGAIN)
					log_warn("ctl: read eventfd: %s",
						 strerror(errno));
				export_reap();
			} else if (p == &ctl->unix_tag) {
				serve_ctl(ctl);
			} else {
				/*
				 * A client. One closed by an earlier event
				 * of this batch (dropped as the oldest) was
				 * taken out of the epoll set by its close,
				 * but its event may still be in evs.
				 */
				struct ctl_client *c;

				for (c = ctl->clients; c && c != p; c = c->next)
					;
				if (c)
					client_event(ctl, c);
			}
		}
		clients_expire(ctl);
		metrics_expire(ctl->metrics);
	}
out:
	while (ctl->clients)
		client_close(ctl, ctl->clients);
	/* from now on the thread that drops the last reference closes */
	export_reaper_set(-1);
	export_reap();
	return NULL;
}

static int watch(struct ctl *ctl, int fd, void *tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

	return epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/*
 * Is path a live control socket? 1 yes, 0 stale socket (removed), -errno
 * when it is something else or cannot be checked.
 */
static int check_existing(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, ret;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (!ret)
		return 1;
	if (errno != ECONNREFUSED)
		return -errno;
	return unlink(path) ? -errno : 0;
}

static int open_unix(struct ctl *ctl, const struct cfg_target *cfg)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = cfg->ctl_socket;
	mode_t old;
	int fd, ret;

	if (!cfg->ctl_socket_set && !strcmp(path, CFG_DEFAULT_CTL_SOCKET) &&
	    mkdir("/run/rblk", 0755) && errno != EEXIST)
		return -errno;
	ret = check_existing(path);
	if (ret == 1)
		return -EADDRINUSE; /* another rblk-target serves it */
	if (ret < 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	old = umask(0177); /* no window with looser permissions */
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret) {
		ret = -errno;
		goto out_close;
	}
	if (chmod(path, cfg->ctl_socket_mode) || listen(fd, 16)) {
		ret = -errno;
		unlink(path);
		goto out_close;
	}
	ctl->unix_fd = fd;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	return 0;

out_close:
	close(fd);
	return ret;
}

int ctl_open(struct target *t, struct ctl **out)
{
	const struct cfg_target *cfg = &t->cfg;
	struct ctl *ctl;
	int ret;

	*out = NULL;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->t = t;
	ctl->unix_fd = -1;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctl->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ctl->reap_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->epfd < 0 || ctl->stop_fd < 0 || ctl->reap_fd < 0) {
		ret = -errno;
		log_err("ctl: epoll/eventfd: %s", strerror(errno));
		goto out_close;
	}
	ret = watch(ctl, ctl->stop_fd, &ctl->stop_tag);
	if (!ret)
		ret = watch(ctl, ctl->reap_fd, &ctl->reap_tag);
	if (ret)
		goto out_close;
	if (strcmp(cfg->ctl_socket, "none")) {
		ret = open_unix(ctl, cfg);
		if (ret && cfg->ctl_socket_set) {
			log_err("control socket %s: %s", cfg->ctl_socket,
				ret == -EADDRINUSE
				    ? "another rblk-target is serving it"
				    : strerror(-ret));
			goto out_close;
		}
		if (ret) {
			/* the default place: run without rather than fail */
			log_warn(
			    "control socket %s: %s; running without one (--ctl-socket PATH|none)",
			    cfg->ctl_socket,
			    ret == -EADDRINUSE
				? "another rblk-target is serving it"
				: strerror(-ret));
		} else {
			ret = watch(ctl, ctl->unix_fd, &ctl->unix_tag);
			if (ret)
				goto out_close;
			log_info("control socket %s (mode %04o)", ctl->path,
				 cfg->ctl_socket_mode);
		}
	}
	if (cfg->metrics[0]) {
		ret = metrics_open(t, cfg->metrics, &ctl->metrics);
		if (ret)
			goto out_close;
	}
	/* also without a socket: it closes removed exports off the workers */
	ret = -pthread_create(&ctl->thread, NULL, ctl_thread, ctl);
	if (ret) {
		log_err("ctl: starting its thread: %s", strerror(-ret));
		goto out_close;
	}
	ctl->started = true;
	*out = ctl;
	return 0;

out_close:
	ctl_close(ctl);
	return ret;
}

void ctl_close(struct ctl *ctl)
{
	uint64_t one = 1;

	if (!ctl)
		return;
	if (ctl->started) {
		if (write(ctl->stop_fd, &one, sizeof(one)) < 0)
			log_warn("ctl: stopping its thread: %s",
				 strerror(errno));
		pthread_join(ctl->thread, NULL);
	}
	if (ctl->unix_fd >= 0) {
		close(ctl->unix_fd);
		unlink(ctl->path);
	}
	metrics_close(ctl->metrics);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	if (ctl->stop_fd >= 0)
		close(ctl->stop_fd);
	if (ctl->reap_fd >= 0)
		close(ctl->reap_fd);
	free(ctl);
}
