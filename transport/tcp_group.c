/* SPDX-License-Identifier: MIT */
/*
 * tcp_group.c - tcp transport: poll groups (see tcp_internal.h).
 *
 * A group is one epoll set over its connections' sockets and the fds the
 * owner watches, the key table, and a FIFO ("ready list") of connections
 * with work the epoll set cannot show: completions queued by post_send()
 * or by a failure, input parsed only in part because the caller's array
 * was full, a read stopped by the per-call byte budget. group_poll()
 * serves the ready list, asks epoll (without blocking) which sockets have
 * something, and serves those, round robin, up to max completions.
 *
 * A private group (a connection made with a NULL group) with no watched
 * fds skips epoll_wait altogether: its one connection is polled the way
 * the per-connection transport always did (rx_skip, see tcp_conn).
 */
#include "../common/dlist.h"
#include "tcp_internal.h"

int tcp_group_create(struct xp_group **out)
{
	struct tcp_group *g = calloc(1, sizeof(*g));

	if (!g) {
		log_err("tcp: calloc(group): %s", strerror(errno));
		return -ENOMEM;
	}
	g->base.ops = &xp_tcp_ops;
	g->base.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g->base.epfd < 0) {
		int ret = -errno;

		log_err("tcp: epoll_create1: %s", strerror(errno));
		free(g);
		return ret;
	}
	*out = &g->base;
	return 0;
}

/* Connections first (their windows), then regions and windows, then fds. */
void tcp_group_destroy(struct xp_group *xg)
{
	struct tcp_group *g;

	if (!xg)
		return;
	g = to_tcp_group(xg);
	while (g->conns) {
		g->private_conn = NULL; /* destroy() must not recurse here */
		tcp_destroy(&g->conns->base);
	}
	tcp_keys_free(g);
	free(g->sbuf);
	free(g->ob);
	xp_watch_free_all(&g->base.watches);
	close(g->base.epfd);
	free(g);
}

int tcp_group_add(struct tcp_group *g, struct tcp_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uintptr_t)c};

	if (epoll_ctl(g->base.epfd, EPOLL_CTL_ADD, c->sock, &ev) < 0) {
		int ret = -errno;

		log_err("%s: epoll_ctl(ADD): %s", c->peer, strerror(errno));
		return ret;
	}
	c->in_epoll = true;
	DLIST_PUSH(g->conns, c, gprev, gnext);
	return 0;
}

void tcp_group_remove(struct tcp_group *g, struct tcp_conn *c)
{
	tcp_epoll_del(c);
	DLIST_UNLINK(g->conns, c, gprev, gnext);
	if (c->on_ready) {
		struct tcp_conn **pp = &g->ready, *prev = NULL;

		while (*pp != c) {
			prev = *pp;
			pp = &(*pp)->rnext;
		}
		*pp = c->rnext;
		if (g->ready_tail == c)
			g->ready_tail = prev;
		c->on_ready = false;
	}
}

/* Put c at the end of its group's ready list (once). */
void tcp_ready(struct tcp_conn *c)
{
	struct tcp_group *g = c->g;

	if (c->on_ready || c->serving)
		return; /* tcp_serve_ready() decides once it is done */
	c->on_ready = true;
	c->rnext = NULL;
	if (g->ready_tail)
		g->ready_tail->rnext = c;
	else
		g->ready = c;
	g->ready_tail = c;
}

static struct tcp_conn *tcp_ready_pop(struct tcp_group *g)
{
	struct tcp_conn *c = g->ready;

	g->ready = c->rnext;
	if (!g->ready)
		g->ready_tail = NULL;
	c->on_ready = false;
	return c;
}

/*
 * Nothing to arm: the epoll set is level-triggered and the ready list is
 * empty whenever group_poll() returned 0. A poll that came back short of
 * max with its epoll set drained (every socket epoll showed was read to
 * the end, nothing left on the ready list) makes the next poll skip
 * epoll_wait, and the poll after the next arm too: the caller sleeps on
 * the fd next, which wakes at once for anything that came since. So the
 * "poll until 0, arm, poll, sleep" of a wake-up for one socket costs one
 * epoll_wait (it was three: the one that found the socket, the one that
 * found the set empty, none after the arm).
 */
int tcp_group_arm(struct xp_group *xg)
{
	struct tcp_group *g = to_tcp_group(xg);

	if (g->private_conn && !g->base.watches)
		return tcp_conn_arm(g->private_conn);
	if (g->ep_arm_skip) {
		g->ep_arm_skip = false;
		g->ep_skip = true;
	}
	return 0;
}

/* Serve the connections on the ready list now, each once, in order. */
static int tcp_serve_ready(struct tcp_group *g, struct xp_wc *wc, int max)
{
	struct tcp_conn *last = g->ready_tail;
	int n = 0;

	while (g->ready && n < max) {
		struct tcp_conn *c = tcp_ready_pop(g);
		bool stop = c == last, may_read = c->rx_ready;

		/* read only what epoll reported; staged input is parsed */
		c->rx_skip = !may_read;
		c->serving = true;
		n += tcp_conn_poll(c, wc + n, max - n);
		c->serving = false;
		/*
		 * Readable still only if this read stopped short of EAGAIN (a
		 * budget, a full array). A parse-only pass learnt nothing of
		 * the socket: epoll says when it has more (a read here would
		 * be an EAGAIN per command).
		 */
		c->rx_ready =
		    c->state == XP_CONN_CONNECTED && may_read && !c->rx_skip;
		/*
		 * Staged input the parser did not reach (the array filled
		 * with queued completions first) shows on no fd: serve it
		 * on the next poll.
		 */
		if (c->cq_count || c->rx_ready || tcp_rx_pending(c))
			tcp_ready(c);
		if (stop)
			break;
	}
	return n;
}

int tcp_group_poll(struct xp_group *xg, struct xp_wc *wc, int max)
{
	struct tcp_group *g = to_tcp_group(xg);
	struct epoll_event ev[TCP_EP_EVENTS];
	bool watched = false;
	int n, k;

	if (max < 0)
		return -EINVAL;
	if (g->private_conn && !g->base.watches)
		return tcp_conn_poll(g->private_conn, wc, max);
	n = tcp_serve_ready(g, wc, max);
	if (n == max)
		goto out;
	if (g->ep_skip) {
		/* drained just before: see tcp_group_arm() */
		g->ep_skip = false;
		return n;
	}
	k = epoll_wait(g->base.epfd, ev, TCP_EP_EVENTS, 0);
	if (k < 0 && errno != EINTR) {
		int ret = -errno;

		log_err("tcp: epoll_wait: %s", strerror(errno));
		return n ? n : ret;
	}
	for (int i = 0; i < k; i++) {
		uint64_t d = ev[i].data.u64;

		if (d & XP_WATCH_TAG) {
			/* level-triggered: one left out shows again */
			if (n < max)
				wc[n++] = xp_watch_wc(d);
			watched = true; /* and the next poll looks */
			continue;
		}
		struct tcp_conn *c = (struct tcp_conn *)(uintptr_t)d;

		if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
			c->rx_ready = true;
		tcp_ready(c);
	}
	if (n < max)
		n += tcp_serve_ready(g, wc + n, max - n);
	/* the set was drained just now: see tcp_group_arm() */
	g->ep_skip = g->ep_arm_skip =
	    n < max && k >= 0 && k < TCP_EP_EVENTS && !watched && !g->ready;
	return n;
out:
	g->ep_skip = g->ep_arm_skip = false;
	return n;
}
