/* SPDX-License-Identifier: MIT */
#include "transport.h"
#include "xp_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "../common/log.h"
#include "../common/util.h"

static const struct xp_ops *const transports[] = {
    &xp_tcp_ops,
    &xp_rdma_ops,
};

const struct xp_ops *xp_find(const char *name)
{
	/* a unix socket on this host: the socket transport without TCP */
	if (!strcmp(name, "unix"))
		return &xp_tcp_ops;
	for (size_t i = 0; i < ARRAY_SIZE(transports); i++)
		if (!strcmp(transports[i]->name, name))
			return transports[i];
	return NULL;
}

const char *xp_wc_status_str(enum xp_wc_status st)
{
	switch (st) {
	case XP_WC_SUCCESS:
		return "success";
	case XP_WC_FLUSH_ERR:
		return "flushed";
	case XP_WC_REM_ACCESS_ERR:
		return "remote access error";
	case XP_WC_LOC_ERR:
		return "local protection/length error";
	case XP_WC_RNR_ERR:
		return "receiver not ready";
	case XP_WC_FATAL:
		return "transport failure";
	}
	return "unknown";
}

const char *xp_wc_opcode_str(enum xp_wc_opcode op)
{
	switch (op) {
	case XP_WC_SEND:
		return "SEND";
	case XP_WC_RDMA_WRITE:
		return "RDMA WRITE";
	case XP_WC_RDMA_READ:
		return "RDMA READ";
	case XP_WC_RECV:
		return "RECV";
	case XP_WC_BIND_MW:
		return "BIND_MW";
	case XP_WC_LOCAL_INV:
		return "LOCAL_INV";
	case XP_WC_FD_READY:
		return "FD_READY";
	}
	return "?";
}

int xp_group_watch(struct xp_group *g, int fd, uint64_t cookie)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct xp_watch *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->cookie = cookie;
	ev.data.u64 = (uintptr_t)w | XP_WATCH_TAG;
	if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		log_err("group_watch: epoll_ctl(ADD %d): %s", fd,
			strerror(errno));
		free(w);
		return ret;
	}
	w->next = g->watches;
	g->watches = w;
	return 0;
}

int xp_group_unwatch(struct xp_group *g, int fd)
{
	struct xp_watch **pp = &g->watches, *w;

	while (*pp && (*pp)->fd != fd)
		pp = &(*pp)->next;
	w = *pp;
	if (!w)
		return -ENOENT;
	*pp = w->next;
	if (epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
		log_debug("group_unwatch: epoll_ctl(DEL %d): %s", fd,
			  strerror(errno));
	free(w);
	return 0;
}

void xp_watch_free_all(struct xp_watch **list)
{
	while (*list) {
		struct xp_watch *w = *list;

		*list = w->next;
		free(w);
	}
}

struct xp_wc xp_watch_wc(uint64_t data)
{
	const struct xp_watch *w =
	    (const struct xp_watch *)(uintptr_t)(data & ~XP_WATCH_TAG);

	return (struct xp_wc){.wr_id = w->cookie, .opcode = XP_WC_FD_READY};
}

enum xp_wc_opcode xp_wr_wc_opcode(enum xp_wr_opcode op)
{
	switch (op) {
	case XP_WR_RDMA_WRITE:
	case XP_WR_RDMA_WRITE_WITH_IMM:
		return XP_WC_RDMA_WRITE;
	case XP_WR_RDMA_READ:
		return XP_WC_RDMA_READ;
	case XP_WR_BIND_MW:
		return XP_WC_BIND_MW;
	case XP_WR_LOCAL_INV:
		return XP_WC_LOCAL_INV;
	case XP_WR_SEND:
	case XP_WR_SEND_WITH_INV:
		break;
	}
	return XP_WC_SEND;
}
