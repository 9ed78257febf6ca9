/* SPDX-License-Identifier: MIT */
/*
 * librblk connection set-up shared by the data queues' login (lib.c) and
 * discovery (lib_discover.c): connecting, and waiting for a completion.
 */
#include <rblk/rblk.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/auth.h"
#include "../common/proto.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"

int lib_tls_open(const struct rblk_opts *o, const struct rblk_url *u,
		 const char *host_name, const uint8_t *secret,
		 size_t secret_len, struct xp_tls **out)
{
	struct xp_tls_opts to = {.server = false};
	char ident[RBLK_NAME_MAX + 16], err[512];
	uint8_t psk[RBLK_TLS_PSK_LEN];
	int ret;

	*out = NULL;
	if (o->opts_size <= offsetof(struct rblk_opts, tls) || !o->tls)
		return 0;
	if (strcmp(u->scheme, "tcp"))
		return lib_set_error(
		    -EPROTONOSUPPORT,
		    "TLS is for tcp:// (an RDMA fabric is protected by its partitions and the per-command keys; a unix socket by its file mode)");
	if (o->opts_size > offsetof(struct rblk_opts, tls_ca_file) &&
	    o->tls_ca_file) {
		to.ca_file = o->tls_ca_file;
		to.cert_file = o->tls_cert_file;
		to.key_file = o->tls_key_file;
	} else if (!secret_len) {
		return lib_set_error(
		    -ENOKEY,
		    "TLS needs a key file (its pre-shared key comes from the host's secret) or a CA file to check the target's certificate");
	} else {
		rblk_tls_identity(host_name, ident, sizeof(ident));
		rblk_tls_psk(secret, secret_len, host_name, psk);
		to.psk_identity = ident;
		to.psk = psk;
	}
	to.no_ktls = getenv("RBLK_TLS_NO_KTLS") != NULL;
	ret = xp_tls_create(&to, out, err, sizeof(err));
	memset(psk, 0, sizeof(psk));
	if (ret)
		return lib_set_error(ret, "%s", err);
	return 0;
}

int lib_connect(const struct xp_ops *ops, struct xp_group *g,
		const struct rblk_url *u, const struct xp_conn_attr *attr,
		struct xp_tls *tls, uint16_t queue_depth, int timeout_ms,
		struct xp_conn **out)
{
	char priv[RBLK_CM_REQ_SIZE], rej[XP_PRIV_MAX];
	struct xp_conn_attr a = *attr;
	size_t rej_len = sizeof(rej);
	int ret, st;

	a.tls = tls;
	ret = xp_connect(ops, g, u->host, u->port, &a, priv,
			 rblk_cm_req_encode(priv, queue_depth), timeout_ms, out,
			 rej, &rej_len);
	if (ret && tls && xp_tls_last_error()[0])
		return lib_set_error(ret == -ECONNRESET ? -ECONNREFUSED : ret,
				     "TLS handshake with %s failed: %s",
				     rblk_url_str(u), xp_tls_last_error());
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
