/* SPDX-License-Identifier: MIT */
/*
 * rblk nbd: the fixed newstyle handshake of one client, on its connection
 * thread: the greeting, then options until NBD_OPT_GO or
 * NBD_OPT_EXPORT_NAME claims a queue (nbd_server_attach()) or the client
 * leaves. Every read and write waits at most until the connection's
 * handshake deadline (--handshake-timeout) and gives up at shutdown. What
 * is offered and refused: "Protocol choices" in nbd_server.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/util.h"
#include "initiator/nbd_proto.h"
#include "initiator/nbd_server.h"

#define NBD_MAX_OPTIONS 32    /* options per handshake */
#define NBD_OPT_DATA_MAX 8192 /* longest option payload we read */

/* ---- handshake I/O ----------------------------------------------------- */

/* Wait for ev on the socket until the handshake deadline or shutdown. */
static int hs_wait(struct nbd_conn *c, short ev)
{
	struct pollfd p[2] = {
	    {.fd = c->fd, .events = ev},
	    {.fd = c->srv->stop_fd, .events = POLLIN},
	};
	uint64_t now = now_ms();
	int ret;

	if (now >= c->deadline_ms)
		return -ETIMEDOUT;
	ret = poll(p, 2, (int)MIN(c->deadline_ms - now, (uint64_t)INT32_MAX));
	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	if (ret == 0)
		return -ETIMEDOUT;
	if (p[1].revents)
		return -ESHUTDOWN;
	return 0;
}

static int hs_read(struct nbd_conn *c, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(c->fd, p, len, MSG_DONTWAIT);
		int ret;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = hs_wait(c, POLLIN);
		if (ret)
			return ret;
	}
	return 0;
}

static int hs_write(struct nbd_conn *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		int ret;

		if (n >= 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = hs_wait(c, POLLOUT);
		if (ret)
			return ret;
	}
	return 0;
}

/* One option reply: header, then len bytes of data. */
static int opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t type,
		     const void *data, uint32_t len)
{
	unsigned char hdr[NBD_OPT_REPLY_HDR_SIZE];
	int ret;

	nbd_put64(hdr, NBD_OPT_REPLY_MAGIC);
	nbd_put32(hdr + 8, opt);
	nbd_put32(hdr + 12, type);
	nbd_put32(hdr + 16, len);
	ret = hs_write(c, hdr, sizeof(hdr));
	if (!ret && len)
		ret = hs_write(c, data, len);
	return ret;
}

static int opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type,
		     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An error reply carrying a message for the user. */
static int opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type,
		     const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	log_debug("client %u: option %u: error 0x%x: %s", c->id, opt, type,
		  msg);
	return opt_reply(c, opt, type, msg, (uint32_t)n);
}

/* ---- handshake --------------------------------------------------------- */

static bool export_name_ok(const struct nbd_server *srv, const char *name,
			   uint32_t len)
{
	return len == 0 || (len == strlen(srv->export_name) &&
			    !memcmp(name, srv->export_name, len));
}

/* Printable copy of a client-supplied name, for logs and messages. */
static void name_for_log(char *out, size_t outlen, const char *name,
			 uint32_t len)
{
	size_t n = MIN((size_t)len, outlen - 1);

	for (size_t i = 0; i < n; i++)
		out[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	out[n] = 0;
}

static int info_send_export(struct nbd_conn *c, uint32_t opt)
{
	unsigned char b[NBD_INFO_EXPORT_SIZE];

	nbd_put16(b, NBD_INFO_EXPORT);
	nbd_put64(b + 2, nbd_server_size(c));
	nbd_put16(b + 10, c->srv->tflags);
	return opt_reply(c, opt, NBD_REP_INFO, b, sizeof(b));
}

static int info_send_block_size(struct nbd_conn *c, uint32_t opt)
{
	unsigned char b[NBD_INFO_BLOCK_SIZE_SIZE];
	uint32_t bs = c->srv->block_size;

	nbd_put16(b, NBD_INFO_BLOCK_SIZE);
	nbd_put32(b + 2, bs);
	nbd_put32(b + 6, MAX(4096u, bs));
	nbd_put32(b + 10, NBD_MAX_PAYLOAD);
	return opt_reply(c, opt, NBD_REP_INFO, b, sizeof(b));
}

/* NBD_INFO_NAME or NBD_INFO_DESCRIPTION: a type and a string. */
static int info_send_string(struct nbd_conn *c, uint32_t opt, uint16_t type,
			    const char *s)
{
	unsigned char b[2 + 600];
	size_t n = MIN(strlen(s), sizeof(b) - 2);

	nbd_put16(b, type);
	memcpy(b + 2, s, n);
	return opt_reply(c, opt, NBD_REP_INFO, b, (uint32_t)(2 + n));
}

static void describe(const struct nbd_server *srv, char *out, size_t len)
{
	snprintf(out, len, "rblk volume %s (%s)", srv->url,
		 srv->read_only ? "read-only" : "read-write");
}

/*
 * NBD_OPT_INFO and NBD_OPT_GO. Returns 0 to keep negotiating, 1 to enter
 * transmission (GO succeeded: a queue is claimed), <0 to close.
 */
static int opt_info_go(struct nbd_conn *c, uint32_t opt,
		       const unsigned char *data, uint32_t len)
{
	struct nbd_server *srv = c->srv;
	bool want_name = false, want_desc = false;
	char shown[64], desc[600];
	uint32_t namelen;
	uint16_t nreq;
	int ret;

	if (len < 6)
		return opt_error(c, opt, NBD_REP_ERR_INVALID,
				 "option data too short");
	namelen = nbd_get32(data);
	if (namelen > len - 6)
		return opt_error(c, opt, NBD_REP_ERR_INVALID,
				 "export name length exceeds the option");
	nreq = nbd_get16(data + 4 + namelen);
	if (len != 6 + namelen + 2u * nreq)
		return opt_error(c, opt, NBD_REP_ERR_INVALID,
				 "option length does not match its contents");
	name_for_log(shown, sizeof(shown), (const char *)data + 4, namelen);
	if (!export_name_ok(srv, (const char *)data + 4, namelen)) {
		log_info("client %u: unknown export '%s'", c->id, shown);
		return opt_error(c, opt, NBD_REP_ERR_UNKNOWN,
				 "unknown export '%s'; this server has '%s'",
				 shown, srv->export_name);
	}
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = nbd_get16(data + 6 + namelen + 2u * i);

		if (t == NBD_INFO_NAME)
			want_name = true;
		else if (t == NBD_INFO_DESCRIPTION)
			want_desc = true;
		/* NBD_INFO_BLOCK_SIZE is sent whether asked or not */
	}
	if (opt == NBD_OPT_GO) {
		ret = nbd_server_attach(c);
		if (ret == -EBUSY) {
			opt_error(c, opt, NBD_REP_ERR_TOO_BIG,
				  "all %u connections of this rblk nbd server "
				  "are in use; try again later",
				  srv->nqueues);
			return ret;
		}
		if (ret) {
			opt_error(c, opt, NBD_REP_ERR_SHUTDOWN,
				  "cannot set up the connection: %s",
				  strerror(-ret));
			return ret;
		}
	}
	ret = info_send_export(c, opt);
	if (!ret)
		ret = info_send_block_size(c, opt);
	if (!ret && want_name)
		ret = info_send_string(c, opt, NBD_INFO_NAME, srv->export_name);
	if (!ret && want_desc) {
		describe(srv, desc, sizeof(desc));
		ret = info_send_string(c, opt, NBD_INFO_DESCRIPTION, desc);
	}
	if (!ret)
		ret = opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
	if (ret)
		return ret; /* the caller releases a claimed queue */
	return opt == NBD_OPT_GO ? 1 : 0;
}

/* NBD_OPT_EXPORT_NAME: no error reply is possible, only a close. */
static int opt_export_name(struct nbd_conn *c, const unsigned char *data,
			   uint32_t len)
{
	unsigned char b[NBD_EXPORT_NAME_REPLY_SIZE + NBD_EXPORT_NAME_PAD];
	char shown[64];
	int ret;

	if (!export_name_ok(c->srv, (const char *)data, len)) {
		name_for_log(shown, sizeof(shown), (const char *)data, len);
		log_info("client %u: unknown export '%s'; closing", c->id,
			 shown);
		return -ENOENT;
	}
	ret = nbd_server_attach(c);
	if (ret)
		return ret;
	memset(b, 0, sizeof(b));
	nbd_put64(b, nbd_server_size(c));
	nbd_put16(b + 8, c->srv->tflags);
	ret = hs_write(c, b,
		       c->no_zeroes ? NBD_EXPORT_NAME_REPLY_SIZE : sizeof(b));
	return ret ? ret : 1;
}

static int opt_list(struct nbd_conn *c, uint32_t len)
{
	unsigned char b[4 + RBLK_NAME_MAX + 600];
	size_t n = strlen(c->srv->export_name);
	char desc[600];
	size_t d;
	int ret;

	if (len)
		return opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				 "NBD_OPT_LIST takes no data");
	describe(c->srv, desc, sizeof(desc));
	d = MIN(strlen(desc), sizeof(b) - 4 - n);
	nbd_put32(b, (uint32_t)n);
	memcpy(b + 4, c->srv->export_name, n);
	memcpy(b + 4 + n, desc, d);
	ret = opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, b,
			(uint32_t)(4 + n + d));
	if (!ret)
		ret = opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
	return ret;
}

/*
 * Run the fixed newstyle handshake. Returns 1 when the client entered the
 * transmission phase (a queue is claimed and set up), 0 when it ended the
 * negotiation politely (NBD_OPT_ABORT or a close between options), or a
 * negative errno; the caller closes the socket in every case but 1.
 */
int nbd_handshake(struct nbd_conn *c)
{
	unsigned char hello[NBD_HELLO_SIZE], hdr[NBD_OPT_HDR_SIZE];
	unsigned char data[NBD_OPT_DATA_MAX];
	uint32_t cflags, opt, len;
	int ret;

	nbd_put64(hello, NBD_MAGIC);
	nbd_put64(hello + 8, NBD_IHAVEOPT);
	nbd_put16(hello + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	ret = hs_write(c, hello, sizeof(hello));
	if (ret)
		return ret;
	ret = hs_read(c, data, 4);
	if (ret)
		return ret;
	cflags = nbd_get32(data);
	if (cflags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		log_warn("client %u (%s): unknown client flags 0x%x; closing",
			 c->id, c->peer, cflags);
		return -EPROTO;
	}
	c->fixed = cflags & NBD_FLAG_C_FIXED_NEWSTYLE;
	c->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

	for (unsigned int n = 0;; n++) {
		if (n == NBD_MAX_OPTIONS) {
			log_warn(
			    "client %u (%s): more than %d options; closing",
			    c->id, c->peer, NBD_MAX_OPTIONS);
			return -EPROTO;
		}
		ret = hs_read(c, hdr, sizeof(hdr));
		if (ret == -EPIPE && n > 0)
			return 0; /* gone between options, e.g. after LIST */
		if (ret)
			return ret;
		if (nbd_get64(hdr) != NBD_IHAVEOPT) {
			log_warn("client %u (%s): bad option magic; closing",
				 c->id, c->peer);
			return -EPROTO;
		}
		opt = nbd_get32(hdr + 8);
		len = nbd_get32(hdr + 12);
		log_debug("client %u: option %u, %u bytes", c->id, opt, len);
		if (!c->fixed && opt != NBD_OPT_EXPORT_NAME) {
			log_warn("client %u (%s): option %u without fixed "
				 "newstyle; closing",
				 c->id, c->peer, opt);
			return -EPROTO;
		}
		if (len > NBD_OPT_DATA_MAX) {
			log_warn("client %u (%s): option %u carries %u bytes "
				 "(limit %d); closing",
				 c->id, c->peer, opt, len, NBD_OPT_DATA_MAX);
			if (opt != NBD_OPT_EXPORT_NAME)
				opt_error(c, opt, NBD_REP_ERR_TOO_BIG,
					  "option data longer than %d bytes",
					  NBD_OPT_DATA_MAX);
			return -E2BIG;
		}
		ret = hs_read(c, data, len);
		if (ret)
			return ret;

		switch (opt) {
		case NBD_OPT_EXPORT_NAME:
			ret = opt_export_name(c, data, len);
			break;
		case NBD_OPT_GO:
		case NBD_OPT_INFO:
			ret = opt_info_go(c, opt, data, len);
			break;
		case NBD_OPT_LIST:
			ret = opt_list(c, len);
			break;
		case NBD_OPT_ABORT:
			opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
			log_debug("client %u: aborted the handshake", c->id);
			return 0;
		default: /* STRUCTURED_REPLY, STARTTLS, META_CONTEXT, ... */
			ret = opt_error(c, opt, NBD_REP_ERR_UNSUP,
					"option %u is not supported", opt);
			break;
		}
		if (ret)
			return ret;
	}
}
