/* SPDX-License-Identifier: MIT */
/*
 * librblk discovery: rblk_discover() asks a target which exports this host
 * may see. Each page is one short connection: CM request (queue depth 1),
 * HELLO with RBLK_HELLO_F_DISCOVER and queue_id = first index wanted, one
 * DISCOVER_REPLY back, disconnect. Pages follow until the list is complete.
 * Nothing is registered on the target for these connections.
 */
#include <rblk/rblk.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/auth.h"
#include "../common/proto.h"
#include "../common/url.h"
#include "../common/util.h"
#include "../transport/transport.h"
#include "lib_internal.h"

_Static_assert(sizeof(((struct rblk_export_entry *)0)->name) == RBLK_NAME_MAX,
	       "public export name holds any wire name");

enum { WR_RECV = 1, WR_HELLO = 2 };

struct disc_ctx {
	const struct rblk_url *url;
	const struct xp_ops *ops;
	const char *host_name;
	int timeout_ms;
	struct xp_tls *tls; /* opts.tls: TLS credentials, else NULL */
};

/* Wait for the one message the target sends back; copy it into out. */
static int wait_reply(struct xp_conn *xc, const void *rbuf, int timeout_ms,
		      void *out, uint32_t *out_len)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	struct xp_wc wc;
	int n;

	for (;;) {
		n = lib_wait_wc(xc, &wc, deadline);
		if (n)
			return n;
		if (wc.status != XP_WC_SUCCESS)
			return -ECONNRESET;
		if (wc.wr_id != WR_RECV)
			continue;
		*out_len = MIN(wc.byte_len, (uint32_t)RBLK_MSG_MAX);
		memcpy(out, rbuf, *out_len);
		return 0;
	}
}

/* Fetch the page of exports starting at index first. */
static int discover_page(const struct disc_ctx *d, uint16_t first,
			 struct rblk_disc_reply *reply)
{
	const struct rblk_url *u = d->url;
	uint8_t msg[RBLK_MSG_MAX];
	struct xp_conn_attr attr = {.max_send_wr = 2, .max_recv_wr = 2};
	struct rblk_hello hello = {0};
	struct xp_send_wr wr = {0}, *bad;
	struct xp_sge sge;
	struct xp_conn *xc;
	struct xp_mr *mr;
	struct rblk_login login;
	uint32_t msg_len = 0;
	void *mem = NULL;
	int ret, st;

	ret =
	    lib_connect(d->ops, NULL, u, &attr, d->tls, 1, d->timeout_ms, &xc);
	if (ret)
		return ret;
	/* one receive buffer, then the HELLO */
	if (posix_memalign(&mem, 4096, 2 * RBLK_MSG_MAX)) {
		mem = NULL;
		ret = lib_set_error(-ENOMEM, "out of memory");
		goto out_destroy;
	}
	memset(mem, 0, 2 * RBLK_MSG_MAX);
	ret = xp_reg_mr(xc, mem, 2 * RBLK_MSG_MAX, XP_ACCESS_LOCAL_WRITE, &mr);
	if (ret) {
		lib_set_error(ret, "registering message buffers: %s",
			      strerror(-ret));
		goto out_destroy;
	}
	sge = (struct xp_sge){.addr = mem, .length = RBLK_MSG_MAX, .mr = mr};
	ret = xp_post_recv(xc, WR_RECV, &sge);
	if (ret) {
		lib_set_error(ret, "posting a receive: %s", strerror(-ret));
		goto out_destroy;
	}
	hello.queue_depth = 1;
	hello.queue_id = first;
	hello.max_io = RBLK_MIN_MAX_IO;
	hello.flags = RBLK_HELLO_F_DISCOVER;
	snprintf(hello.host_name, sizeof(hello.host_name), "%s", d->host_name);
	wr.wr_id = WR_HELLO;
	wr.opcode = XP_WR_SEND;
	wr.flags = XP_SEND_SIGNALED;
	wr.sge.addr = (char *)mem + RBLK_MSG_MAX;
	wr.sge.length = (uint32_t)rblk_hello_encode(wr.sge.addr, &hello);
	wr.sge.mr = mr;
	ret = xp_post_send(xc, &wr, &bad);
	if (ret) {
		lib_set_error(ret, "sending HELLO: %s", strerror(-ret));
		goto out_destroy;
	}
	ret = wait_reply(xc, mem, d->timeout_ms, msg, &msg_len);
	if (ret == -ETIMEDOUT) {
		lib_set_error(ret, "%s: no discovery answer within %d ms",
			      rblk_url_str(u), d->timeout_ms);
		goto out_destroy;
	}
	if (ret) {
		lib_set_error(ret, "%s: connection lost during discovery",
			      rblk_url_str(u));
		goto out_destroy;
	}
	if (rblk_msg_type(msg, msg_len) == RBLK_MSG_LOGIN &&
	    !rblk_login_decode(msg, msg_len, &login) && login.status) {
		/*
		 * A target from before discovery reads the HELLO as a login
		 * with a flag it does not know (INVALID) or as a message it
		 * did not expect (BAD_STATE).
		 */
		if (login.status == RBLK_S_INVALID ||
		    login.status == RBLK_S_BAD_STATE) {
			ret = lib_set_error(
			    -EOPNOTSUPP,
			    "%s: target does not support discovery (older rblk-target?): %s",
			    rblk_url_str(u),
			    rblk_status_str((int)login.status));
			goto out_destroy;
		}
		/* refused: denied, shutting down, ... */
		ret = lib_set_error(rblk_status_to_errno((int)login.status),
				    "%s refused discovery: %s", rblk_url_str(u),
				    rblk_status_str((int)login.status));
		goto out_destroy;
	}
	st = rblk_disc_reply_decode(msg, msg_len, reply);
	if (st || reply->first != first) {
		ret = lib_set_error(-EPROTO, "%s: malformed discovery answer",
				    rblk_url_str(u));
		goto out_destroy;
	}
	ret = 0;
out_destroy:
	xp_destroy(xc); /* deregisters mr */
	free(mem);
	return ret;
}

static int discover_tls(const struct rblk_opts *o, struct disc_ctx *d);
static int discover_list(struct disc_ctx *d, struct rblk_export_entry **out);

int rblk_discover(const char *url, const struct rblk_opts *opts,
		  struct rblk_export_entry **out)
{
	struct rblk_url u;
	struct disc_ctx d = {.url = &u, .timeout_ms = 10000};
	char host[RBLK_NAME_MAX], err[256];
	int ret;

	lib_clear_error();
	*out = NULL;
	if (opts && opts->opts_size >= offsetof(struct rblk_opts, flags) &&
	    opts->opts_size <= sizeof(*opts)) {
		if (opts->timeout_ms > 0)
			d.timeout_ms = opts->timeout_ms;
		d.host_name = opts->host_name;
	} else if (opts) {
		return lib_set_error(
		    -EINVAL, "rblk_opts: bad opts_size (use rblk_opts_init)");
	}
	if (rblk_url_parse(url, RBLK_DEFAULT_PORT, &u, err, sizeof(err)))
		return lib_set_error(-EINVAL, "%s", err);
	if (u.export_name[0])
		return lib_set_error(
		    -EINVAL, "'%s': discovery takes no export name (want %s)",
		    url, rblk_url_form(u.scheme, false));
	d.ops = xp_find(u.scheme);
	if (!d.ops)
		return lib_set_error(
		    -EPROTONOSUPPORT,
		    "'%s': unknown transport '%s' (tcp, rdma, unix)", url,
		    u.scheme);
	if (!d.host_name) {
		if (gethostname(host, sizeof(host) - 1))
			snprintf(host, sizeof(host), "unknown");
		host[sizeof(host) - 1] = 0;
		d.host_name = host;
	}
	if (opts && opts->opts_size > offsetof(struct rblk_opts, tls) &&
	    opts->tls) {
		ret = discover_tls(opts, &d);
		if (ret)
			return ret;
	}
	ret = discover_list(&d, out);
	xp_tls_destroy(d.tls);
	return ret;
}

/* TLS credentials for discovery: the key file read for its PSK. */
static int discover_tls(const struct rblk_opts *o, struct disc_ctx *d)
{
	uint8_t secret[RBLK_SECRET_MAX];
	size_t len = 0;
	char err[320];
	int ret;

	if (o->key_file &&
	    !(o->opts_size > offsetof(struct rblk_opts, tls_ca_file) &&
	      o->tls_ca_file)) {
		if (rblk_auth_init())
			return lib_set_error(-EIO,
					     "libsodium failed to initialise");
		if (rblk_auth_load_secret(o->key_file, secret, &len, err,
					  sizeof(err)))
			return lib_set_error(-EINVAL, "%s", err);
	}
	ret = lib_tls_open(o, d->url, d->host_name, secret, len, &d->tls);
	memset(secret, 0, sizeof(secret));
	return ret;
}

static int discover_list(struct disc_ctx *d, struct rblk_export_entry **out)
{
	struct rblk_export_entry *list = NULL;
	struct rblk_disc_reply reply;
	unsigned int total = 0, have = 0;
	int ret;

	/*
	 * Exports can come and go between pages. The target appends new ones
	 * at the tail, so a total that changed means an earlier page may be
	 * stale: start over, a few times at most.
	 */
	for (int tries = 0;; tries++) {
		bool restart = false;

		free(list);
		list = NULL;
		have = 0;
		do {
			ret = discover_page(d, (uint16_t)have, &reply);
			if (ret)
				goto out_free;
			if (!list) {
				total = reply.total;
				if (!total)
					return 0;
				list = calloc(total, sizeof(*list));
				if (!list)
					return lib_set_error(-ENOMEM,
							     "out of memory");
			} else if (reply.total != total) {
				restart = true;
				break;
			}
			/* count 0 at first == total: the end of the list */
			for (unsigned int i = 0;
			     i < reply.count && have < total; i++) {
				struct rblk_export_entry *x = &list[have++];

				snprintf(x->name, sizeof(x->name), "%s",
					 reply.entry[i].name);
				x->size = reply.entry[i].size;
				x->block_size = reply.entry[i].block_size;
				x->features = reply.entry[i].features;
			}
		} while (reply.count && have < total);
		if (!restart || tries == 2)
			break;
	}
	if (!have) {
		free(list);
		return 0;
	}
	*out = list;
	return (int)have;

out_free:
	free(list);
	return ret;
}
