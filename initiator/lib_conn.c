/* SPDX-License-Identifier: MIT */
/*
 * librblk connection set-up shared by the data queues' login (lib.c) and
 * discovery (lib_discover.c): connecting, and waiting for a completion.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>

#include "../common/proto.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"

int lib_connect(const struct xp_ops *ops, struct xp_group *g,
		const struct rblk_url *u, const struct xp_conn_attr *attr,
		uint16_t queue_depth, int timeout_ms, struct xp_conn **out)
{
	char priv[RBLK_CM_REQ_SIZE], rej[XP_PRIV_MAX];
	size_t rej_len = sizeof(rej);
	int ret, st;

	ret = xp_connect(ops, g, u->host, u->port, attr, priv,
			 rblk_cm_req_encode(priv, queue_depth), timeout_ms, out,
			 rej, &rej_len);
	if (ret == -ECONNREFUSED && rej_len) {
		st = rblk_cm_rej_decode(rej, rej_len);
		if (st == RBLK_S_BAD_VERSION)
			return lib_set_error(
			    -EPROTONOSUPPORT,
			    "%s speaks rblk protocol version %d, this initiator speaks %d: upgrade one side",
			    rblk_url_str(u), rblk_cm_rej_version(rej, rej_len),
			    RBLK_PROTO_VERSION);
		return lib_set_error(st == RBLK_S_BAD_VERSION ? -EPROTONOSUPPORT
							      : -ECONNREFUSED,
				     "%s refused the connection: %s",
				     rblk_url_str(u), rblk_status_str(st));
	}
	if (ret)
		return lib_set_error(ret, "cannot connect to %s: %s",
				     rblk_url_str(u), strerror(-ret));
	return 0;
}

/*
 * Sleep until fd is readable, a signal, or deadline: 0 (poll the CQ again),
 * -ETIMEDOUT once past deadline, or a negative errno from poll().
 */
static int wait_readable(int fd, uint64_t deadline)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint64_t now = now_ms();

	if (now >= deadline)
		return -ETIMEDOUT;
	if (poll(&pfd, 1, (int)(deadline - now)) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

int lib_wait_wc(struct xp_conn *xc, struct xp_wc *wc, uint64_t deadline)
{
	bool armed = false;
	int n;

	for (;;) {
		n = xp_poll(xc, wc, 1);
		if (n < 0)
			return n;
		if (n == 1 && wc->opcode == XP_WC_FD_READY)
			/* a watched fd: the caller's, after the wait */
			continue;
		if (n == 1)
			return 0;
		if (!armed) {
			/* arm, then poll once more before sleeping */
			armed = xp_arm(xc) <= 0;
			continue;
		}
		n = wait_readable(xp_fd(xc), deadline);
		if (n)
			return n;
		armed = false;
	}
}
