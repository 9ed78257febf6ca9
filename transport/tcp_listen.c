/* SPDX-License-Identifier: MIT */
/*
 * tcp_listen.c - tcp transport: listener, handshake, connect (see
 * tcp_internal.h for the frame format and the progress engine; its ops
 * table is in tcp.c).
 */
#include "tcp_internal.h"

/* ---- addresses --------------------------------------------------------- */

/*
 * A connected socket's peer, for messages: "tcp HOST:PORT"; for a unix
 * socket the path it connected to, or for an accepted one (unnamed) the
 * peer process's credentials.
 */
void tcp_format_addr(int sock, const struct sockaddr_storage *ss, char *buf,
		     size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
	const struct sockaddr_un *sun = (const struct sockaddr_un *)ss;
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(buf, size, "tcp %s:%u", host, ntohs(sin->sin_port));
	} else if (ss->ss_family == AF_INET6 &&
		   IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
		inet_ntop(AF_INET, &sin6->sin6_addr.s6_addr[12], host,
			  sizeof(host));
		snprintf(buf, size, "tcp %s:%u", host, ntohs(sin6->sin6_port));
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "tcp [%s]:%u", host,
			 ntohs(sin6->sin6_port));
	} else if (ss->ss_family == AF_UNIX) {
		/*
		 * The credentials first: the target's limits count unix
		 * peers by uid. A bind path is the client's to choose (a
		 * newline, an escape sequence): sanitized, and last.
		 */
		char path[4 * sizeof(sun->sun_path) + 1] = "";
		int n = 0;

		if (sun->sun_path[0])
			str_sanitize(path, sizeof(path), sun->sun_path,
				     sizeof(sun->sun_path));
		if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
			n = snprintf(buf, size, "unix pid %d uid %u",
				     (int)cr.pid, (unsigned int)cr.uid);
		else
			n = snprintf(buf, size, "unix ?");
		if (path[0] && n > 0 && (size_t)n < size)
			snprintf(buf + n, size - (size_t)n, " path %s", path);
	} else {
		snprintf(buf, size, "%s ?",
			 ss->ss_family == AF_UNIX ? "unix" : "tcp");
	}
}

/* An absolute path names a unix socket (url.h: unix:///?socket=PATH). */
static bool tcp_is_unix(const char *host)
{
	return host && host[0] == '/';
}

/* sockaddr_un for path; false if it does not fit. */
static bool tcp_unix_addr(const char *path, struct sockaddr_un *sun,
			  socklen_t *sl)
{
	size_t n = strlen(path);

	if (n >= sizeof(sun->sun_path))
		return false;
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, n);
	*sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return true;
}

static int tcp_resolve(const char *host, uint16_t port, bool passive,
		       struct addrinfo **res)
{
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	char service[8];
	int ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = getaddrinfo(host, service, &hints, res);
	if (ret == 0)
		return 0;
	log_err("getaddrinfo(%s, %s): %s", host ? host : "*", service,
		ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
	if (ret == EAI_SYSTEM)
		return -errno;
	if (ret == EAI_MEMORY)
		return -ENOMEM;
	return -EHOSTUNREACH;
}

/* ---- handshake helpers ------------------------------------------------- */

static int tcp_remaining_ms(uint64_t deadline)
{
	uint64_t now;

	if (deadline == UINT64_MAX)
		return -1;
	now = now_ms();
	return now >= deadline ? 0
			       : (int)MIN(deadline - now, (uint64_t)INT32_MAX);
}

/* Move exactly len bytes on a non-blocking socket before deadline. */
static int tcp_io_timed(int fd, void *buf, size_t len, bool wr,
			uint64_t deadline)
{
	char *p = buf;

	while (len) {
		ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
			       : recv(fd, p, len, MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd pfd = {
			    .fd = fd,
			    .events = wr ? POLLOUT : POLLIN,
			};
			int ms = tcp_remaining_ms(deadline), r;

			if (ms == 0)
				return -ETIMEDOUT;
			r = poll(&pfd, 1, ms);
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r == 0)
				return -ETIMEDOUT;
			continue;
		}
		return -errno;
	}
	return 0;
}

/* Non-blocking connect to one address, waiting until deadline. */
static int tcp_connect_one(const struct addrinfo *ai, uint64_t deadline,
			   int *out)
{
	int fd, err = 0;
	socklen_t el = sizeof(err);

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0) {
		err = errno;
		log_err("tcp: socket: %s", strerror(err));
		return -err;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto out_connected;
	if (errno != EINPROGRESS) {
		err = errno;
		goto out_close_socket;
	}
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int r = poll(&pfd, 1, tcp_remaining_ms(deadline));

		if (r > 0)
			break;
		if (r == 0) {
			err = ETIMEDOUT;
			goto out_close_socket;
		}
		if (errno != EINTR) {
			err = errno;
			goto out_close_socket;
		}
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err)
		goto out_close_socket;
out_connected:
	*out = fd;
	return 0;

out_close_socket:
	close(fd);
	return -err;
}

/* tcp_io_timed() on a connection: through TLS where records are ours. */
static int tcp_conn_io_timed(struct tcp_conn *c, void *buf, size_t len, bool wr,
			     uint64_t deadline)
{
	if (c->tls_user)
		return tcp_tls_io_timed(c->tls, buf, len, wr, deadline);
	return tcp_io_timed(c->sock, buf, len, wr, deadline);
}

/*
 * A client's TLS handshake on the connected fd, then the record layer to
 * the kernel where it can take it. -EACCES (refused credentials),
 * -ECONNRESET, -ETIMEDOUT; the reason is logged and kept for
 * xp_tls_last_error().
 */
static int tcp_client_tls(int fd, struct xp_tls *creds, const char *host,
			  uint16_t port, uint64_t deadline,
			  struct tcp_tls **out)
{
	struct tcp_tls *t;
	int ret;

	ret = tcp_tls_new(creds, fd, host, &t);
	if (ret)
		return ret;
	ret = tcp_tls_handshake(t, deadline);
	if (ret) {
		log_err("tcp %s:%u: TLS handshake failed: %s", host, port,
			tcp_tls_why(t));
		goto out_free;
	}
	ret = tcp_tls_ktls(t);
	if (ret)
		goto out_free;
	log_debug("tcp %s:%u: TLS 1.3 (%s), records: %s", host, port,
		  tcp_tls_peer(t)->psk ? "PSK" : "X.509",
		  xp_tls_mode_str(tcp_tls_peer(t)->mode));
	*out = t;
	return 0;

out_free:
	tcp_tls_free(t);
	return ret;
}

int tcp_group_connect(struct xp_group *g, const char *host, uint16_t port,
		      const struct xp_conn_attr *attr, const void *priv,
		      size_t priv_len, int timeout_ms, struct xp_conn **out,
		      void *rej, size_t *rej_len)
{
	uint8_t frame[TCP_HDR_LEN + XP_PRIV_MAX];
	uint64_t deadline =
	    timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
	struct addrinfo *res, *ai;
	struct tcp_tls *tls = NULL;
	struct tcp_conn *c;
	struct tcp_hdr h;
	int ret, fd = -1;

	if (rej_len)
		*rej_len = 0;
	if (priv_len > XP_PRIV_MAX || (priv_len && !priv)) {
		log_err("tcp: connect: %zu bytes of private data (max %d)",
			priv_len, XP_PRIV_MAX);
		return -EINVAL;
	}
	ret = tcp_attr_check(attr);
	if (ret)
		return ret;
	if (tcp_is_unix(host)) {
		struct sockaddr_un sun;
		struct addrinfo uai = {.ai_family = AF_UNIX,
				       .ai_socktype = SOCK_STREAM,
				       .ai_addr = (struct sockaddr *)&sun};

		ret = tcp_unix_addr(host, &sun, &uai.ai_addrlen)
			  ? tcp_connect_one(&uai, deadline, &fd)
			  : -ENAMETOOLONG;
		if (ret) {
			log_err("tcp: connect(unix %s): %s", host,
				strerror(-ret));
			return ret;
		}
	} else {
		ret = tcp_resolve(host, port, false, &res);
		if (ret)
			return ret;
		ret = -EHOSTUNREACH;
		for (ai = res; ai; ai = ai->ai_next) {
			ret = tcp_connect_one(ai, deadline, &fd);
			if (!ret || ret == -ETIMEDOUT)
				break;
		}
		freeaddrinfo(res);
		if (ret) {
			log_err("tcp: connect(%s:%u): %s", host, port,
				strerror(-ret));
			return ret;
		}
	}
	if (attr->tls) {
		ret = tcp_client_tls(fd, attr->tls, host, port, deadline, &tls);
		if (ret)
			goto out_close_socket;
	}
	ret = tcp_conn_create(fd, g, attr, XP_CONN_REQUESTED, &c);
	if (ret) {
		tcp_tls_free(tls);
		goto out_close_socket;
	}
	tcp_conn_set_tls(c, tls);

	tcp_hdr_encode(frame, TCP_F_CONNECT, (uint32_t)priv_len, 0, 0, 0,
		       TCP_VERSION);
	if (priv_len)
		memcpy(frame + TCP_HDR_LEN, priv, priv_len);
	ret =
	    tcp_conn_io_timed(c, frame, TCP_HDR_LEN + priv_len, true, deadline);
	if (ret) {
		log_err("%s: send(CONNECT): %s", c->peer, strerror(-ret));
		goto out_destroy_conn;
	}
	/* exactly the answer frame: what follows it belongs to poll() */
	ret = tcp_conn_io_timed(c, frame, TCP_HDR_LEN, false, deadline);
	if (!ret && tcp_hdr_decode(frame, &h))
		ret = -EPROTO;
	if (!ret && h.type != TCP_F_ACCEPT && h.type != TCP_F_REJECT)
		ret = -EPROTO;
	if (!ret && h.len)
		ret = tcp_conn_io_timed(c, frame + TCP_HDR_LEN, h.len, false,
					deadline);
	if (ret) {
		log_err("%s: waiting for ACCEPT: %s", c->peer, strerror(-ret));
		goto out_destroy_conn;
	}
	if (h.type == TCP_F_REJECT) {
		if (rej && rej_len) {
			memcpy(rej, frame + TCP_HDR_LEN, h.len);
			*rej_len = h.len;
		}
		log_debug("%s: connection rejected", c->peer);
		ret = -ECONNREFUSED;
		goto out_destroy_conn;
	}
	c->state = XP_CONN_CONNECTED;
	*out = &c->base;
	return 0;

out_destroy_conn:
	tcp_destroy(&c->base); /* closes fd */
	return ret;
out_close_socket:
	close(fd);
	return ret;
}

/* ---- listener ---------------------------------------------------------- */

static int tcp_listen_one(int family, const struct sockaddr *sa, socklen_t sl,
			  bool dual)
{
	int fd, one = 1, zero = 0, err;

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		log_warn("tcp: setsockopt(SO_REUSEADDR): %s", strerror(errno));
	if (dual &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		log_warn("tcp: setsockopt(IPV6_V6ONLY): %s", strerror(errno));
	if (bind(fd, sa, sl) < 0 || listen(fd, SOMAXCONN) < 0) {
		err = errno;
		goto out_close_socket;
	}
	return fd;

out_close_socket:
	close(fd);
	return -err;
}

/* A unix listening socket whose file only its owner may connect to. */
static int tcp_listen_owner_only(const struct sockaddr_un *sun, socklen_t sl)
{
	mode_t old = umask(0177);
	int fd =
	    tcp_listen_one(AF_UNIX, (const struct sockaddr *)sun, sl, false);

	umask(old);
	return fd;
}

/*
 * Listen on the unix socket path. A socket file left by a process that
 * is gone (connect() refused) is replaced; one that a live process
 * serves is not. The file is made owner-only (umask 0177 around the
 * bind, so there is no moment with the process's own umask, which might
 * let anyone in); the caller gives it the mode it is configured with
 * (rblk-target: unix_socket_mode, default 0660).
 */
static int tcp_listen_unix(const char *path)
{
	struct sockaddr_un sun;
	struct stat st;
	socklen_t sl;
	int fd, probe, ret;

	if (!tcp_unix_addr(path, &sun, &sl))
		return -ENAMETOOLONG;
	fd = tcp_listen_owner_only(&sun, sl);
	if (fd != -EADDRINUSE)
		return fd;
	/* never remove what is not a socket (a mistyped volume path) */
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		log_err("tcp: %s exists and is not a socket", path);
		return -EEXIST;
	}
	/* non-blocking: a live listener with a full backlog says EAGAIN */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	ret = connect(probe, (struct sockaddr *)&sun, sl) ? -errno : 0;
	close(probe);
	if (ret != -ECONNREFUSED) {
		log_err("tcp: unix socket %s is in use by another process",
			path);
		return -EADDRINUSE;
	}
	log_info("tcp: replacing stale unix socket %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return tcp_listen_owner_only(&sun, sl);
}

int tcp_listen(const char *host, uint16_t port, struct xp_listener **out)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct tcp_listener *l;
	int fd = -EAFNOSUPPORT, ret;

	if (tcp_is_unix(host)) {
		fd = tcp_listen_unix(host);
	} else if (!host || !*host || !strcmp(host, "0.0.0.0") ||
		   !strcmp(host, "::")) {
		/* any: dual-stack IPv6 socket, IPv4 where there is no IPv6 */
		struct sockaddr_in6 sin6 = {
		    .sin6_family = AF_INET6,
		    .sin6_port = htons(port),
		    .sin6_addr = IN6ADDR_ANY_INIT,
		};
		struct sockaddr_in sin = {
		    .sin_family = AF_INET,
		    .sin_port = htons(port),
		    .sin_addr.s_addr = htonl(INADDR_ANY),
		};

		fd = tcp_listen_one(AF_INET6, (struct sockaddr *)&sin6,
				    sizeof(sin6), true);
		if (fd == -EAFNOSUPPORT)
			fd = tcp_listen_one(AF_INET, (struct sockaddr *)&sin,
					    sizeof(sin), false);
	} else {
		struct addrinfo *res, *ai;

		ret = tcp_resolve(host, port, true, &res);
		if (ret)
			return ret;
		for (ai = res; ai; ai = ai->ai_next) {
			fd = tcp_listen_one(ai->ai_family, ai->ai_addr,
					    ai->ai_addrlen, false);
			if (fd >= 0)
				break;
		}
		freeaddrinfo(res);
	}
	if (fd < 0) {
		if (tcp_is_unix(host))
			log_err("tcp: listen(unix %s): %s", host,
				strerror(-fd));
		else
			log_err("tcp: listen(%s:%u): %s", host ? host : "*",
				port, strerror(-fd));
		return fd;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		ret = -ENOMEM;
		log_err("tcp: calloc(listener): %s", strerror(ENOMEM));
		goto out_close_socket;
	}
	l->base.ops = &xp_tcp_ops;
	l->lfd = fd;
	if (tcp_is_unix(host))
		snprintf(l->unix_path, sizeof(l->unix_path), "%s", host);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		ret = -errno;
		log_err("tcp: epoll_create1: %s", strerror(errno));
		goto out_free_listener;
	}
	ev.data.fd = fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		log_err("tcp: epoll_ctl(ADD): %s", strerror(errno));
		goto out_close_epoll;
	}
	/* wakes the listener's owner so silent handshakes expire on time */
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->tfd < 0) {
		ret = -errno;
		log_err("tcp: timerfd_create: %s", strerror(errno));
		goto out_close_epoll;
	}
	ev.data.fd = l->tfd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
		ret = -errno;
		log_err("tcp: epoll_ctl(ADD timerfd): %s", strerror(errno));
		goto out_close_timer;
	}
	*out = &l->base;
	return 0;

out_close_timer:
	close(l->tfd);
out_close_epoll:
	close(l->epfd);
out_free_listener:
	free(l);
out_close_socket:
	close(fd);
	if (tcp_is_unix(host))
		unlink(host);
	return ret;
}

static void tcp_pending_drop(struct tcp_listener *l, unsigned int i)
{
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->pend[i].fd, NULL);
	/* a TLS alert sent must not be lost to an RST: FIN after it */
	if (l->pend[i].tls)
		tcp_sock_close(l->pend[i].fd);
	else
		close(l->pend[i].fd);
	tcp_tls_free(l->pend[i].tls);
	l->pend[i] = l->pend[--l->npend];
}

void tcp_listener_destroy(struct xp_listener *xl)
{
	struct tcp_listener *l;

	if (!xl)
		return;
	l = to_tcp_listener(xl);
	while (l->npend)
		tcp_pending_drop(l, l->npend - 1);
	close(l->tfd);
	close(l->epfd);
	close(l->lfd);
	if (l->unix_path[0])
		unlink(l->unix_path); /* ours: made by tcp_listen_unix() */
	free(l);
}

int tcp_listener_fd(struct xp_listener *xl)
{
	return to_tcp_listener(xl)->epfd;
}

/*
 * Stop polling the listening socket: while accept4() fails for lack of
 * fds (until now + backoff) or while the handshake table is full of
 * clients that have all sent something (until a slot frees, ms = 0).
 * Otherwise the level-triggered listener fd would spin its owner.
 */
static void tcp_listen_pause(struct tcp_listener *l, uint64_t until)
{
	l->pause_until = until;
	if (l->lfd_paused)
		return;
	if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->lfd, NULL) < 0)
		log_warn("tcp: epoll_ctl(DEL listener): %s", strerror(errno));
	l->lfd_paused = true;
}

static void tcp_listen_resume(struct tcp_listener *l)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = l->lfd};

	if (!l->lfd_paused)
		return;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->lfd, &ev) < 0)
		log_warn("tcp: epoll_ctl(ADD listener): %s", strerror(errno));
	l->lfd_paused = false;
	l->pause_until = 0;
}

/* Nothing arrived on it yet: not a byte read, none waiting. */
static bool tcp_pending_silent(const struct tcp_pending *p)
{
	int unread = 0;

	return p->got == 0 && !p->tls && ioctl(p->fd, FIONREAD, &unread) == 0 &&
	       unread == 0;
}

/*
 * The pending handshake to drop for a new one: the oldest that has sent
 * nothing for TCP_EVICT_GRACE_MS. -1 when there is none; *retry_ms is
 * then when one may be (0: not before a slot frees). A client that is
 * sending its CONNECT is never dropped for a newcomer.
 */
static int tcp_pending_victim(const struct tcp_listener *l, uint64_t now,
			      uint64_t *retry_ms)
{
	int old = -1;

	*retry_ms = 0;
	for (unsigned int i = 0; i < l->npend; i++) {
		uint64_t ok = l->pend[i].deadline_ms - TCP_HANDSHAKE_MS +
			      TCP_EVICT_GRACE_MS;

		if (!tcp_pending_silent(&l->pend[i]))
			continue;
		if (now < ok) {
			if (!*retry_ms || ok < *retry_ms)
				*retry_ms = ok;
			continue;
		}
		if (old < 0 || l->pend[i].deadline_ms <
				   l->pend[(unsigned int)old].deadline_ms)
			old = (int)i;
	}
	return old;
}

/* Accept what the kernel has queued into the pending table. */
static void tcp_accept_pending(struct tcp_listener *l, uint64_t now)
{
	if (l->lfd_paused) {
		if (!l->pause_until || now < l->pause_until)
			return;
		tcp_listen_resume(l);
	}
	for (int n = 0; n < TCP_PENDING_MAX; n++) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct tcp_pending *p;
		int fd, victim = -1;

		if (l->npend == TCP_PENDING_MAX) {
			uint64_t retry;

			victim = tcp_pending_victim(l, now, &retry);
			if (victim < 0) {
				/* all sending or new: the backlog waits */
				tcp_listen_pause(l, retry);
				return;
			}
		}
		fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				l->backoff_ms = l->backoff_ms
						    ? MIN(2 * l->backoff_ms,
							  TCP_BACKOFF_MAX_MS)
						    : TCP_BACKOFF_MIN_MS;
				log_ratelimited(
				    LOG_WARN,
				    "tcp: accept4: %s; not accepting "
				    "for %u ms",
				    strerror(errno), l->backoff_ms);
				tcp_listen_pause(l, now + l->backoff_ms);
				return;
			}
			log_ratelimited(LOG_WARN, "tcp: accept4: %s",
					strerror(errno));
			return;
		}
		l->backoff_ms = 0;
		if (victim >= 0) {
			log_ratelimited(LOG_WARN,
					"tcp: %u handshakes pending, dropping "
					"the oldest silent one",
					l->npend);
			tcp_pending_drop(l, (unsigned int)victim);
		}
		ev.data.fd = fd;
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			log_warn("tcp: epoll_ctl(ADD): %s", strerror(errno));
			close(fd);
			continue;
		}
		p = &l->pend[l->npend++];
		p->fd = fd;
		p->deadline_ms = now + TCP_HANDSHAKE_MS;
		p->got = 0;
		p->tls = NULL;
		p->tls_done = false;
	}
}

/*
 * The first byte of a new socket: a TLS handshake record (22) starts a
 * TLS session when the listener has credentials. 0 go on (plain or TLS
 * set up), -errno drop it. Nothing is consumed.
 */
static int tcp_pending_sniff(struct tcp_listener *l, struct tcp_pending *p)
{
	uint8_t b;
	ssize_t n = recv(p->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	int ret;

	if (n <= 0)
		return n == 0 ? -ECONNRESET
		       : errno == EAGAIN || errno == EWOULDBLOCK ||
			       errno == EINTR
			   ? -EAGAIN
			   : -errno;
	if (b != 22)
		return 0;
	if (!l->tls) {
		log_ratelimited(
		    LOG_WARN,
		    "tcp: refusing a TLS handshake: this target does not take TLS (tls=off)");
		return -EPROTONOSUPPORT;
	}
	ret = tcp_tls_new(l->tls, p->fd, NULL, &p->tls);
	return ret;
}

/* The server's TLS handshake: 1 done, 0 not yet, -errno drop it. */
static int tcp_pending_tls(struct tcp_pending *p)
{
	int ret = tcp_tls_handshake_step(p->tls);

	if (ret <= 0) {
		if (ret < 0) {
			char peer[96];
			struct sockaddr_storage ss = {0};
			socklen_t sl = sizeof(ss);

			if (getpeername(p->fd, (struct sockaddr *)&ss, &sl))
				snprintf(peer, sizeof(peer), "tcp ?");
			else
				tcp_format_addr(p->fd, &ss, peer, sizeof(peer));
			log_ratelimited(LOG_WARN,
					"%s: TLS handshake failed: %s", peer,
					tcp_tls_why(p->tls));
			return -ECONNABORTED;
		}
		return 0;
	}
	ret = tcp_tls_ktls(p->tls);
	if (ret)
		return ret;
	p->tls_done = true;
	/*
	 * The CONNECT frame gets its own deadline: the first kTLS set-up
	 * may load crypto modules for seconds (6 s in the TCG guest).
	 */
	p->deadline_ms = now_ms() + TCP_HANDSHAKE_MS;
	return 1;
}

/* Read more of a CONNECT frame: 1 complete, 0 not yet, -errno drop it. */
static int tcp_pending_read(struct tcp_listener *l, struct tcp_pending *p)
{
	int ret;

	if (p->got == 0 && !p->tls) {
		ret = tcp_pending_sniff(l, p);
		if (ret == -EAGAIN)
			return 0;
		if (ret)
			return ret;
	}
	if (p->tls && !p->tls_done) {
		ret = tcp_pending_tls(p);
		if (ret <= 0)
			return ret;
	}
	for (;;) {
		size_t need = TCP_HDR_LEN;
		struct iovec iov;
		ssize_t n;

		if (p->got >= TCP_HDR_LEN)
			need += p->hdr.len;
		if (p->got == need)
			return 1;
		iov.iov_base = p->buf + p->got;
		iov.iov_len = need - p->got;
		if (p->tls && tcp_tls_peer(p->tls)->mode == XP_TLS_USER)
			n = tcp_tls_readv(p->tls, &iov, 1);
		else
			n = recv(p->fd, iov.iov_base, iov.iov_len,
				 MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		p->got += (size_t)n;
		if (p->got == TCP_HDR_LEN && (tcp_hdr_decode(p->buf, &p->hdr) ||
					      p->hdr.type != TCP_F_CONNECT))
			return -EPROTO;
	}
}

/* A taken request: a socket whose CONNECT came, in no group yet. */
struct tcp_request {
	struct xp_request base;
	int sock;
	struct tcp_tls *tls; /* its TLS session, or NULL */
	char peer[sizeof(((struct tcp_conn *)0)->peer)];
};

static struct tcp_request *to_tcp_request(struct xp_request *r)
{
	return container_of(r, struct tcp_request, base);
}

/* A request for sock (and tls), owned from now on (freed on failure). */
static int tcp_request_new(int sock, struct tcp_tls *tls,
			   struct xp_request **out)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = sizeof(ss);
	struct tcp_request *r;

	r = calloc(1, sizeof(*r));
	if (!r) {
		log_err("tcp: calloc(request): %s", strerror(ENOMEM));
		close(sock);
		tcp_tls_free(tls);
		return -ENOMEM;
	}
	r->base.ops = &xp_tcp_ops;
	r->sock = sock;
	r->tls = tls;
	if (getpeername(sock, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_addr(sock, &ss, r->peer, sizeof(r->peer));
	else
		snprintf(r->peer, sizeof(r->peer), "tcp ?");
	log_debug("%s: connection request", r->peer);
	*out = &r->base;
	return 0;
}

/*
 * Progress the pending handshakes: drop the failed and the expired, and
 * take the oldest whose CONNECT is complete. 0 with *out, or -EAGAIN.
 */
static int tcp_pending_scan(struct tcp_listener *l, struct xp_request **out,
			    void *priv, size_t *priv_len, uint64_t now)
{
	struct tcp_pending *p;
	struct tcp_tls *tls;
	unsigned int i = 0;
	int ret, fd, best = -1;

	while (i < l->npend) {
		p = &l->pend[i];
		ret = tcp_pending_read(l, p);
		if (ret == 0 && now >= p->deadline_ms)
			ret = -ETIMEDOUT;
		if (ret < 0) {
			if (ret != -ECONNABORTED) /* TLS: logged */
				log_ratelimited(
				    LOG_WARN,
				    "tcp: dropping incoming connection: %s",
				    ret == -EPROTO ? "not an rblk tcp CONNECT"
						   : strerror(-ret));
			tcp_pending_drop(l, i);
			continue;
		}
		if (ret == 1 &&
		    (best < 0 ||
		     p->deadline_ms < l->pend[(unsigned int)best].deadline_ms))
			best = (int)i;
		i++;
	}
	/* a slot is free again (an fd shortage waits out its backoff) */
	if (l->lfd_paused && !l->backoff_ms && l->npend < TCP_PENDING_MAX)
		tcp_listen_resume(l);
	if (best < 0)
		return -EAGAIN;
	p = &l->pend[(unsigned int)best];
	if (priv)
		memcpy(priv, p->buf + TCP_HDR_LEN, p->hdr.len);
	if (priv_len)
		*priv_len = p->hdr.len;
	fd = p->fd;
	tls = p->tls;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	*p = l->pend[--l->npend];
	if (l->lfd_paused && !l->backoff_ms)
		tcp_listen_resume(l);
	return tcp_request_new(fd, tls, out);
}

/*
 * Non-blocking: sockets that have not sent their CONNECT frame wait in a
 * table (at most TCP_PENDING_MAX, each for at most TCP_HANDSHAKE_MS), so a
 * silent client never stalls the listener thread. Clients already in the
 * table whose CONNECT is complete are served before anything new is
 * accepted, oldest first. A timerfd in the listener's epoll set makes
 * listener_fd() readable at the earliest deadline (or the end of an
 * accept pause), so expiry needs no polling by the owner.
 */
static int tcp_take_pending(struct tcp_listener *l, struct xp_request **out,
			    void *priv, size_t *priv_len)
{
	uint64_t now = now_ms();
	int ret;

	ret = tcp_pending_scan(l, out, priv, priv_len, now);
	if (ret != -EAGAIN)
		return ret;
	tcp_accept_pending(l, now);
	return tcp_pending_scan(l, out, priv, priv_len, now);
}

/* Arm the timer for the earliest deadline or pause end, or disarm it. */
static void tcp_arm_handshake_timer(struct tcp_listener *l)
{
	struct itimerspec its = {0};
	uint64_t first = UINT64_MAX;
	uint64_t exp;

	while (read(l->tfd, &exp, sizeof(exp)) > 0)
		; /* drain expirations */
	for (unsigned int i = 0; i < l->npend; i++)
		first = MIN(first, l->pend[i].deadline_ms);
	if (l->lfd_paused && l->pause_until)
		first = MIN(first, l->pause_until);
	if (first != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(first / 1000);
		its.it_value.tv_nsec = (long)(first % 1000) * 1000000;
	}
	if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL))
		log_warn("tcp: timerfd_settime: %s", strerror(errno));
}

int tcp_take_request(struct xp_listener *xl, struct xp_request **out,
		     void *priv, size_t *priv_len)
{
	struct tcp_listener *l = to_tcp_listener(xl);
	int ret = tcp_take_pending(l, out, priv, priv_len);

	tcp_arm_handshake_timer(l);
	return ret;
}

const char *tcp_request_peer_name(struct xp_request *xr)
{
	return to_tcp_request(xr)->peer;
}

/*
 * Any thread: a REJECT frame straight on the socket (a fresh socket takes
 * 80 bytes at once), then close it.
 */
void tcp_request_reject(struct xp_request *xr, const void *priv,
			size_t priv_len)
{
	struct tcp_request *r = to_tcp_request(xr);
	uint8_t f[TCP_HDR_LEN + XP_PRIV_MAX];
	size_t len;
	ssize_t n;

	priv_len = priv ? MIN(priv_len, (size_t)XP_PRIV_MAX) : 0;
	tcp_hdr_encode(f, TCP_F_REJECT, (uint32_t)priv_len, 0, 0, 0, 0);
	if (priv_len)
		memcpy(f + TCP_HDR_LEN, priv, priv_len);
	len = TCP_HDR_LEN + priv_len;
	if (r->tls && tcp_tls_peer(r->tls)->mode == XP_TLS_USER) {
		struct iovec iov = {.iov_base = f, .iov_len = len};

		n = tcp_tls_sendv(r->tls, &iov, 1);
		if (n == (ssize_t)len && tcp_tls_out_pending(r->tls))
			n = 0; /* a fresh socket takes it all; never seen */
	} else {
		n = send(r->sock, f, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	if (n != (ssize_t)len)
		log_warn("%s: send(REJECT): %s", r->peer,
			 n < 0 ? strerror(errno) : "short send");
	tcp_sock_close(r->sock);
	tcp_tls_free(r->tls);
	free(r);
}

/* g's thread: the socket joins g (its epoll set) as a connection. */
int tcp_request_join(struct xp_request *xr, struct xp_group *g,
		     const struct xp_conn_attr *attr, struct xp_conn **out)
{
	struct tcp_request *r = to_tcp_request(xr);
	struct tcp_conn *c;
	int ret;

	/* no attr: the largest, until setup_queue() lowers it */
	ret = tcp_conn_create(r->sock, g, attr ? attr : &tcp_attr_max,
			      XP_CONN_REQUESTED, &c);
	if (ret) {
		tcp_request_reject(xr, NULL, 0);
		return ret;
	}
	tcp_conn_set_tls(c, r->tls);
	free(r);
	*out = &c->base;
	return 0;
}

static int tcp_send_handshake(struct tcp_conn *c, uint8_t type,
			      const void *priv, size_t priv_len)
{
	struct tcp_frame f = {.seq = TCP_NO_SEQ, .copy = true};

	if (priv_len > XP_PRIV_MAX || (priv_len && !priv)) {
		log_err("%s: %zu bytes of private data (max %d)", c->peer,
			priv_len, XP_PRIV_MAX);
		return -EINVAL;
	}
	tcp_hdr_encode(f.hdr, type, (uint32_t)priv_len, 0, 0, 0,
		       type == TCP_F_REJECT ? 0 : TCP_VERSION);
	f.payload = priv;
	f.len = (uint32_t)priv_len;
	return tcp_send_frames(c, &f, 1);
}

int tcp_accept(struct xp_conn *xc, const void *priv, size_t priv_len)
{
	struct tcp_conn *c = to_tcp(xc);
	int ret;

	if (c->state != XP_CONN_REQUESTED) {
		log_err("%s: accept: connection not in REQUESTED state",
			c->peer);
		return -EINVAL;
	}
	ret = tcp_send_handshake(c, TCP_F_ACCEPT, priv, priv_len);
	if (ret) {
		log_err("%s: send(ACCEPT): %s", c->peer, strerror(-ret));
		return ret;
	}
	c->state = XP_CONN_CONNECTED;
	return 0;
}

void tcp_reject(struct xp_conn *xc, const void *priv, size_t priv_len)
{
	struct tcp_conn *c = to_tcp(xc);
	int ret;

	ret = tcp_send_handshake(c, TCP_F_REJECT, priv, priv_len);
	if (!ret && tcp_out_queued(c))
		ret = -EAGAIN; /* a fresh socket takes 80 bytes; never seen */
	if (ret)
		log_warn("%s: send(REJECT): %s", c->peer, strerror(-ret));
	tcp_destroy(xc);
}

int tcp_listener_tls(struct xp_listener *xl, struct xp_tls *t)
{
	to_tcp_listener(xl)->tls = t;
	return 0;
}
