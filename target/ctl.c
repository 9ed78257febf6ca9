/* SPDX-License-Identifier: MIT */
/*
 * The control thread of rblk-target (started by ctl_open()): it serves the
 * control socket, one request per connection and one connection at a
 * time (the commands: ctl_cmd.c; the protocol: docs/CONTROL.md), closes
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
 * response (non-blocking socket, poll against an absolute deadline): a
 * stalled or trickling client holds the control thread that long at most.
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

#define REQ_MAX 8192

struct ctl {
	struct target *t;
	int unix_fd; /* -1: none */
	struct metrics *metrics; /* NULL: none */
	int epfd; /* the control thread's */
	int stop_fd; /* eventfd: end the thread */
	int reap_fd; /* eventfd: a removed export waits to be closed */
	pthread_t thread;
	bool started;
	char path[108]; /* unix socket we created, unlinked at close */
	/* their addresses are the epoll data */
	char unix_tag, stop_tag, reap_tag;
};

/* ---- sockets ----------------------------------------------------------- */

/* Wait until fd is ready for events, or deadline (now_ms()) passes. */
static int wait_until(int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		uint64_t now = now_ms();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)MIN(deadline - now, 60000u));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			return 0;
	}
}

/* Write all of p to the non-blocking fd by deadline; -1 when not. */
static int write_by(int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			if (wait_until(fd, POLLOUT, deadline))
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Read from the non-blocking fd into buf until a line end, EOF or
 * deadline. Returns the length, -1 (timeout, error) or -2 (longer than
 * cap - 1).
 */
static ssize_t read_request(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t len = 0;

	buf[0] = 0;
	for (;;) {
		ssize_t n;

		if (len == cap - 1)
			return -2;
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (wait_until(fd, POLLIN, deadline))
				return -1;
			continue;
		}
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		if (memchr(buf + len - (size_t)n, '\n', (size_t)n))
			break;
	}
	buf[len] = 0;
	return (ssize_t)len;
}

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

static void serve_ctl(struct ctl *ctl)
{
	int fd = accept_one(ctl->unix_fd, "control socket");
	char *req, *resp = NULL, *nl;
	size_t resp_len = 0;
	ssize_t len;
	FILE *out;

	if (fd < 0)
		return;
	req = malloc(REQ_MAX);
	len = req ? read_request(fd, req, REQ_MAX,
				 now_ms() + CTL_IO_TIMEOUT_S * 1000u) :
		    -1;
	if (len < 0) {
		char msg[128];
		int n = snprintf(msg, sizeof(msg), "error: %s\n",
				 len == -2 ? "request too long" :
					     "request unreadable or not in time");

		if (write_by(fd, msg, (size_t)n, now_ms() + CTL_IO_TIMEOUT_S * 1000u))
			log_debug("ctl: client went away");
		goto out;
	}
	nl = strchr(req, '\n');
	if (nl)
		*nl = 0;
	out = open_memstream(&resp, &resp_len);
	if (!out)
		goto out;
	ctl_run(ctl->t, req, out);
	fclose(out);
	if (write_by(fd, resp, resp_len, now_ms() + CTL_IO_TIMEOUT_S * 1000u))
		log_debug("ctl: client went away before the response");
out:
	free(resp);
	free(req);
	close(fd);
}

/*
 * The control thread: one connection per event, so that a stop request
 * or a removed export to close is never queued behind many clients.
 */
static void *ctl_thread(void *arg)
{
	struct ctl *ctl = arg;
	uint64_t v;

	export_reaper_set(ctl->reap_fd);
	for (;;) {
		struct epoll_event evs[4];
		/* with a metrics endpoint: wake each second to cut its tricklers */
		int n = epoll_wait(ctl->epfd, evs, 4, ctl->metrics ? 1000 : -1);

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
			}
		}
		metrics_expire(ctl->metrics);
	}
out:
	/* from now on the thread that drops the last reference closes */
	export_reaper_set(-1);
	export_reap();
	return NULL;
}

static int watch(struct ctl *ctl, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/*
 * Is path a live control socket? 1 yes, 0 stale socket (removed), -errno
 * when it is something else or cannot be checked.
 */
static int check_existing(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
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
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
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
				ret == -EADDRINUSE ?
					"another rblk-target is serving it" :
					strerror(-ret));
			goto out_close;
		}
		if (ret) {
			/* the default place: run without rather than fail */
			log_warn("control socket %s: %s; running without one (--ctl-socket PATH|none)",
				 cfg->ctl_socket,
				 ret == -EADDRINUSE ?
					 "another rblk-target is serving it" :
					 strerror(-ret));
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

