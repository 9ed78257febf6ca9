/* SPDX-License-Identifier: MIT */
/*
 * test_tcp.c - the tcp transport driven through real loopback sockets:
 * what only tcp has (its handshake and private data, the framing, its
 * wake-ups: short reads, EPOLLOUT, WRITE_ACK, READ_RESP copies, batched
 * frames, post-time sge checks), over private groups. The transport
 * contract both transports share (RC ordering, isolation, access errors,
 * RNR, short receives, disconnects, send-queue accounting, large
 * transfers) is tests/unit/test_xp.c's, run on tcp and on rdma.
 *
 * Each test builds connection pairs with listen/xp_get_request/accept on a
 * thread and connect on the test thread, then drives both ends from the
 * test thread with the sleep protocol of transport.h (poll until 0, arm,
 * poll, wait on fd()); a wait that sees no fd become readable while a
 * completion is due fails the test, so the fd() contract is checked too.
 * Listeners bind 127.0.0.1 only, on a random port in 20000-32767: below
 * Linux's ephemeral range, so no outgoing socket holds it and a connect to
 * a closed port cannot end up connected to itself.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "transport/transport.h"

#define WAIT_MS 10000 /* longest wait for any single event */
#define STASH 8192    /* completions kept per endpoint */

static const struct xp_ops *T = &xp_tcp_ops;

/* One end of a connection plus the completions reaped but not consumed. */
struct ep {
	struct xp_conn *c;
	struct xp_wc wc[STASH];
	unsigned int head;
	unsigned int n;
};

struct pair {
	struct ep srv;
	struct ep cli;
	uint16_t port;
};

static const struct xp_conn_attr small_attr = {.max_send_wr = 64,
					       .max_recv_wr = 64};

static uint16_t random_port(void)
{
	uint32_t r;

	random_bytes(&r, sizeof(r));
	return (uint16_t)(20000 + r % 12768);
}

static struct xp_listener *listen_loopback(uint16_t *port)
{
	struct xp_listener *l = NULL;

	for (int i = 0; i < 200; i++) {
		int ret;

		*port = random_port();
		ret = T->listen("127.0.0.1", *port, &l);
		if (!ret)
			return l;
		assert_int_equal(ret, -EADDRINUSE);
	}
	fail_msg("no free port found");
	return NULL;
}

/* ---- passive side of the handshake, on its own thread ------------------ */

struct srv_args {
	struct xp_listener *l;
	const struct xp_conn_attr *attr;
	bool reject;
	const void *reply;
	size_t reply_len;
	/* results */
	struct xp_conn *conn;
	char priv[XP_PRIV_MAX];
	size_t priv_len;
	int ret;
};

static void *srv_main(void *arg)
{
	struct srv_args *a = arg;
	uint64_t deadline = now_ms() + WAIT_MS;
	struct xp_conn *c;

	for (;;) {
		struct pollfd pfd = {.fd = T->listener_fd(a->l),
				     .events = POLLIN};

		a->ret = xp_get_request(a->l, NULL, a->attr, &c, a->priv,
					&a->priv_len);
		if (a->ret != -EAGAIN)
			break;
		if (now_ms() > deadline) {
			a->ret = -ETIMEDOUT;
			return NULL;
		}
		poll(&pfd, 1, 100);
	}
	if (a->ret)
		return NULL;
	if (xp_state(c) != XP_CONN_REQUESTED) {
		a->ret = -EPROTO;
		xp_destroy(c);
		return NULL;
	}
	if (a->reject) {
		T->reject(c, a->reply, a->reply_len);
		return NULL;
	}
	a->ret = T->accept(c, a->reply, a->reply_len);
	if (a->ret)
		xp_destroy(c);
	else
		a->conn = c;
	return NULL;
}

static void make_pair_attr(struct pair *p, const struct xp_conn_attr *cattr,
			   const struct xp_conn_attr *sattr)
{
	struct srv_args a = {.attr = sattr};
	struct xp_listener *l;
	pthread_t th;
	int ret;

	memset(p, 0, sizeof(*p));
	l = listen_loopback(&p->port);
	a.l = l;
	assert_int_equal(pthread_create(&th, NULL, srv_main, &a), 0);
	ret = xp_connect(T, NULL, "127.0.0.1", p->port, cattr, "hi", 2, WAIT_MS,
			 &p->cli.c, NULL, NULL);
	pthread_join(th, NULL);
	T->listener_destroy(l);
	assert_int_equal(ret, 0);
	assert_int_equal(a.ret, 0);
	p->srv.c = a.conn;
	assert_int_equal(xp_state(p->cli.c), XP_CONN_CONNECTED);
	assert_int_equal(xp_state(p->srv.c), XP_CONN_CONNECTED);
}

static void make_pair(struct pair *p)
{
	make_pair_attr(p, &small_attr, &small_attr);
}

static void destroy_pair(struct pair *p)
{
	xp_destroy(p->cli.c);
	xp_destroy(p->srv.c);
	p->cli.c = p->srv.c = NULL;
}

static struct pair *new_pair(void)
{
	struct pair *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	make_pair(p);
	return p;
}

static void free_pair(struct pair *p)
{
	destroy_pair(p);
	free(p);
}

/* ---- driving connections ----------------------------------------------- */

static int reap(struct ep *e)
{
	struct xp_wc wc[64];
	int r;

	if (!e || !e->c)
		return 0;
	r = xp_poll(e->c, wc, 64);
	assert_true(r >= 0);
	for (int i = 0; i < r; i++) {
		assert_true(e->n < STASH);
		e->wc[(e->head + e->n++) % STASH] = wc[i];
	}
	return r;
}

/*
 * One round of progress on every endpoint; sleeps on their fds (as
 * transport.h prescribes) when none has anything. Returns false if that
 * sleep ran the whole sleep_ms without any fd becoming readable.
 */
static bool pump(struct ep **eps, int n, int sleep_ms)
{
	struct pollfd pfd[8];
	int got = 0, i;

	for (i = 0; i < n; i++)
		got += reap(eps[i]);
	if (got)
		return true;
	for (i = 0; i < n; i++)
		if (eps[i] && eps[i]->c)
			assert_int_equal(xp_arm(eps[i]->c), 0);
	for (i = 0; i < n; i++)
		got += reap(eps[i]);
	if (got)
		return true;
	for (i = 0; i < n; i++) {
		pfd[i].fd = eps[i] && eps[i]->c ? xp_fd(eps[i]->c) : -1;
		pfd[i].events = POLLIN;
	}
	return poll(pfd, (nfds_t)n, sleep_ms) != 0;
}

/*
 * Both ends are driven from this thread and loopback delivers data within
 * the sender's system call, so while something is due an fd must become
 * readable: a long silent sleep means the fd() contract is broken.
 */
static void pump_due(struct ep **eps, int n, uint64_t deadline)
{
	if (now_ms() > deadline)
		fail_msg("nothing happened within %d ms", WAIT_MS);
	if (!pump(eps, n, 2000))
		fail_msg("work was due but no fd() became readable");
}

/* Next completion of `me`, while `other` (may be NULL) keeps progressing. */
static struct xp_wc wait_wc(struct ep *me, struct ep *other)
{
	struct ep *eps[2] = {me, other};
	uint64_t deadline = now_ms() + WAIT_MS;
	struct xp_wc wc;

	while (!me->n)
		pump_due(eps, other ? 2 : 1, deadline);
	wc = me->wc[me->head];
	me->head = (me->head + 1) % STASH;
	me->n--;
	return wc;
}

static void expect_wc(struct ep *me, struct ep *other, uint64_t wr_id,
		      enum xp_wc_status st, enum xp_wc_opcode op)
{
	struct xp_wc wc = wait_wc(me, other);

	if (wc.wr_id != wr_id || wc.status != st || wc.opcode != op)
		fail_msg("completion wr_id %llu status %s opcode %d, expected "
			 "wr_id %llu status %s opcode %d",
			 (unsigned long long)wc.wr_id,
			 xp_wc_status_str(wc.status), wc.opcode,
			 (unsigned long long)wr_id, xp_wc_status_str(st), op);
}

/* No further completion shows up on e within ms (driving both ends). */
static void expect_quiet(struct ep *e, struct ep *other, int ms)
{
	struct ep *eps[2] = {e, other};
	uint64_t deadline = now_ms() + (uint64_t)ms;

	while (now_ms() < deadline)
		pump(eps, other ? 2 : 1, 5);
	assert_int_equal(e->n, 0);
}

static void fill(void *buf, size_t len, uint32_t seed)
{
	uint32_t *p = buf;

	for (size_t i = 0; i < len / 4; i++)
		p[i] = seed * 2654435761u + (uint32_t)i;
}

static struct xp_mr *reg(struct xp_conn *c, void *buf, size_t len, int acc)
{
	struct xp_mr *mr = NULL;

	assert_int_equal(xp_reg_mr(c, buf, len, acc, &mr), 0);
	assert_non_null(mr);
	assert_int_not_equal(mr->rkey, 0);
	return mr;
}

static void post_recv(struct xp_conn *c, uint64_t id, struct xp_mr *mr,
		      void *addr, uint32_t len)
{
	struct xp_sge sge = {.addr = addr, .length = len, .mr = mr};

	assert_int_equal(xp_post_recv(c, id, &sge), 0);
}

static struct xp_send_wr mkwr(uint64_t id, enum xp_wr_opcode op, bool signaled,
			      struct xp_mr *mr, void *addr, uint32_t len,
			      uint64_t raddr, uint32_t rkey)
{
	struct xp_send_wr wr = {
	    .wr_id = id,
	    .opcode = op,
	    .flags = signaled ? XP_SEND_SIGNALED : 0,
	    .sge = {.addr = addr, .length = len, .mr = mr},
	    .remote_addr = raddr,
	    .rkey = rkey,
	};

	return wr;
}

static void post1(struct xp_conn *c, struct xp_send_wr wr)
{
	struct xp_send_wr *bad = NULL;

	wr.next = NULL;
	assert_int_equal(xp_post_send(c, &wr, &bad), 0);
}

static uint64_t raddr(struct xp_mr *mr, size_t off)
{
	return (uint64_t)(uintptr_t)mr->addr + off;
}

#define LOCAL XP_ACCESS_LOCAL_WRITE
#define RW                                                                     \
	(XP_ACCESS_LOCAL_WRITE | XP_ACCESS_REMOTE_READ | XP_ACCESS_REMOTE_WRITE)

/* ---- handshake --------------------------------------------------------- */

/*
 * One connect with priv through a fresh loopback listener that srv_main(a)
 * serves; the listener is gone on return. The connect's result.
 */
static int handshake(struct srv_args *a, const void *priv, size_t priv_len,
		     struct xp_conn **c, char *back, size_t *back_len,
		     uint16_t *port)
{
	pthread_t th;
	int ret;

	a->l = listen_loopback(port);
	assert_true(T->listener_fd(a->l) >= 0);
	assert_int_equal(pthread_create(&th, NULL, srv_main, a), 0);
	ret = xp_connect(T, NULL, "127.0.0.1", *port, &small_attr, priv,
			 priv_len, WAIT_MS, c, back, back_len);
	pthread_join(th, NULL);
	T->listener_destroy(a->l);
	return ret;
}

static void test_connect_accept_priv(void **state)
{
	static const char req[] = "initiator private data, 40 bytes long...";
	static const char acc[] = "target says welcome";
	struct srv_args a = {
	    .attr = &small_attr, .reply = acc, .reply_len = sizeof(acc)};
	struct xp_conn *c = NULL;
	char back[XP_PRIV_MAX];
	size_t back_len = 99;
	uint16_t port;

	assert_int_equal(
	    handshake(&a, req, sizeof(req), &c, back, &back_len, &port), 0);
	assert_int_equal(a.ret, 0);
	/* initiator -> target */
	assert_int_equal(a.priv_len, sizeof(req));
	assert_memory_equal(a.priv, req, sizeof(req));
	/* an accept fills nothing: rej/rej_len are for rejects only */
	assert_int_equal(back_len, 0);

	assert_int_equal(xp_state(c), XP_CONN_CONNECTED);
	assert_int_equal(xp_state(a.conn), XP_CONN_CONNECTED);
	assert_true(xp_fd(c) >= 0);
	assert_true(xp_fd(a.conn) >= 0);
	assert_int_equal(strncmp(xp_peer_name(c), "tcp 127.0.0.1:", 14), 0);
	assert_int_equal(strncmp(xp_peer_name(a.conn), "tcp 127.0.0.1:", 14),
			 0);
	{
		char want[32];

		snprintf(want, sizeof(want), "tcp 127.0.0.1:%u", port);
		assert_string_equal(xp_peer_name(c), want);
	}
	assert_ptr_equal(xp_find("tcp"), &xp_tcp_ops);
	xp_destroy(c);
	xp_destroy(a.conn);
}

static void test_reject_priv(void **state)
{
	static const char rej[] = "no such export";
	struct srv_args a = {.attr = &small_attr,
			     .reject = true,
			     .reply = rej,
			     .reply_len = sizeof(rej)};
	struct xp_conn *c = NULL;
	char back[XP_PRIV_MAX];
	size_t back_len = 99;
	uint16_t port;
	int ret;

	ret = handshake(&a, "x", 1, &c, back, &back_len, &port);
	assert_int_equal(a.ret, 0);
	assert_int_equal(ret, -ECONNREFUSED);
	assert_null(c);
	assert_int_equal(back_len, sizeof(rej));
	assert_memory_equal(back, rej, sizeof(rej));
}

static void test_connect_closed_port(void **state)
{
	struct xp_listener *l;
	struct xp_conn *c = NULL;
	char back[XP_PRIV_MAX];
	size_t back_len = 99;
	uint16_t port;

	l = listen_loopback(&port);
	T->listener_destroy(l); /* the port is closed now */
	assert_int_equal(xp_connect(T, NULL, "127.0.0.1", port, &small_attr,
				    NULL, 0, WAIT_MS, &c, back, &back_len),
			 -ECONNREFUSED);
	assert_int_equal(back_len, 0);
	assert_null(c);
}

/* A client that never sends CONNECT does not hold up the listener. */
static void test_silent_client(void **state)
{
	struct srv_args a = {.attr = &small_attr};
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct xp_listener *l;
	struct xp_conn *c = NULL, *req;
	pthread_t th;
	uint16_t port;
	uint64_t t0;
	int silent, junk, ret;

	l = listen_loopback(&port);
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	silent = socket(AF_INET, SOCK_STREAM, 0);
	junk = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(silent >= 0 && junk >= 0);
	assert_int_equal(connect(silent, (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	assert_int_equal(connect(junk, (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	assert_int_equal(
	    write(junk, "GET / HTTP/1.0\r\n\r\n-------------------", 37), 37);
	usleep(20000);
	t0 = now_ms();
	assert_int_equal(xp_get_request(l, NULL, &small_attr, &req, NULL, NULL),
			 -EAGAIN);
	assert_true(now_ms() - t0 < 1000);

	a.l = l;
	assert_int_equal(pthread_create(&th, NULL, srv_main, &a), 0);
	ret = xp_connect(T, NULL, "127.0.0.1", port, &small_attr, NULL, 0,
			 WAIT_MS, &c, NULL, NULL);
	pthread_join(th, NULL);
	assert_int_equal(ret, 0);
	assert_int_equal(a.ret, 0);
	assert_int_equal(a.priv_len, 0);
	xp_destroy(c);
	xp_destroy(a.conn);
	T->listener_destroy(l);
	close(silent);
	close(junk);
}

/* ---- data path --------------------------------------------------------- */

/*
 * Both ways over private groups (xp_poll/xp_arm, each connection its own),
 * a zero-length SEND (a frame with no payload), and tcp's post-time check
 * of an sge against its region (verbs report that as a completion).
 */
static void test_send_recv(void **state)
{
	struct pair *p = new_pair();
	char sbuf[256], cbuf[256];
	struct xp_mr *smr, *cmr;
	struct xp_wc wc;

	smr = reg(p->srv.c, sbuf, sizeof(sbuf), LOCAL);
	cmr = reg(p->cli.c, cbuf, sizeof(cbuf), LOCAL);

	post_recv(p->srv.c, 1, smr, sbuf, sizeof(sbuf));
	strcpy(cbuf, "ping");
	post1(p->cli.c, mkwr(10, XP_WR_SEND, true, cmr, cbuf, 5, 0, 0));
	expect_wc(&p->cli, &p->srv, 10, XP_WC_SUCCESS, XP_WC_SEND);
	wc = wait_wc(&p->srv, &p->cli);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.status, XP_WC_SUCCESS);
	assert_int_equal(wc.opcode, XP_WC_RECV);
	assert_int_equal(wc.byte_len, 5);
	assert_string_equal(sbuf, "ping");

	/* and back, into a recv posted before the reply was sent */
	post_recv(p->cli.c, 2, cmr, cbuf, sizeof(cbuf));
	strcpy(sbuf + 128, "pong!");
	post1(p->srv.c, mkwr(11, XP_WR_SEND, true, smr, sbuf + 128, 6, 0, 0));
	wc = wait_wc(&p->cli, &p->srv);
	assert_int_equal(wc.wr_id, 2);
	assert_int_equal(wc.status, XP_WC_SUCCESS);
	assert_int_equal(wc.byte_len, 6);
	assert_string_equal(cbuf, "pong!");
	expect_wc(&p->srv, &p->cli, 11, XP_WC_SUCCESS, XP_WC_SEND);

	/* zero-length SEND */
	post_recv(p->srv.c, 3, smr, sbuf, sizeof(sbuf));
	post1(p->cli.c, mkwr(12, XP_WR_SEND, true, NULL, NULL, 0, 0, 0));
	wc = wait_wc(&p->srv, &p->cli);
	assert_int_equal(wc.wr_id, 3);
	assert_int_equal(wc.byte_len, 0);
	expect_wc(&p->cli, &p->srv, 12, XP_WC_SUCCESS, XP_WC_SEND);

	/* a bad sge is refused at post time */
	{
		struct xp_send_wr w =
		    mkwr(13, XP_WR_SEND, true, cmr, cbuf + 200, 100, 0, 0);
		struct xp_send_wr *bad = NULL;

		assert_int_equal(xp_post_send(p->cli.c, &w, &bad), -EINVAL);
		assert_ptr_equal(bad, &w);
	}
	expect_quiet(&p->cli, &p->srv, 50);
	assert_int_equal(p->srv.n, 0);
	free_pair(p);
}

/* ---- TLS ---------------------------------------------------------------- */

static const uint8_t psk_good[XP_TLS_PSK_LEN] =
    "0123456789abcdef0123456789abcde";

static int psk_lookup(void *arg, const char *identity,
		      uint8_t key[XP_TLS_PSK_LEN])
{
	(void)arg;
	if (strcmp(identity, "rblk1 alpha"))
		return -ENOENT;
	memcpy(key, psk_good, XP_TLS_PSK_LEN);
	return 0;
}

static struct xp_tls *tls_creds(bool server, const uint8_t *psk)
{
	struct xp_tls_opts o = {
	    .server = server,
	    .psk_identity = "rblk1 alpha",
	    .psk = psk,
	    .psk_lookup = server ? psk_lookup : NULL,
	};
	struct xp_tls *t = NULL;
	char err[256];

	if (xp_tls_create(&o, &t, err, sizeof(err)))
		fail_msg("xp_tls_create: %s", err);
	return t;
}

/*
 * A TLS pair (PSK): the client's connect() returns what it returns; on 0
 * both ends are connected, TLS and told so.
 */
static int make_tls_pair(struct pair *p, struct xp_tls *stls,
			 struct xp_tls *ctls)
{
	struct srv_args a = {.attr = &small_attr};
	struct xp_conn_attr cattr = small_attr;
	struct xp_listener *l;
	pthread_t th;
	int ret;

	memset(p, 0, sizeof(*p));
	cattr.tls = ctls;
	l = listen_loopback(&p->port);
	assert_int_equal(xp_listener_tls(l, stls), 0);
	a.l = l;
	assert_int_equal(pthread_create(&th, NULL, srv_main, &a), 0);
	ret = xp_connect(T, NULL, "127.0.0.1", p->port, &cattr, "hi", 2,
			 WAIT_MS, &p->cli.c, NULL, NULL);
	if (ret)
		pthread_cancel(
		    th); /* it waits for a CONNECT that never comes */
	pthread_join(th, NULL);
	T->listener_destroy(l);
	if (ret)
		return ret;
	assert_int_equal(a.ret, 0);
	p->srv.c = a.conn;
	assert_string_equal(a.priv, "hi");
	return 0;
}

/*
 * SEND/RECV both ways, a 1 MiB signaled RDMA WRITE and a 1 MiB RDMA READ
 * through TLS records; both ends say TLS (PSK, the server names the
 * identity). A wrong key and an unknown identity fail the handshake with
 * -EACCES and a reason.
 */
static void test_tls_psk(void **state)
{
	struct xp_tls *stls = tls_creds(true, NULL);
	struct xp_tls *ctls = tls_creds(false, psk_good);
	const size_t big = 1u << 20;
	char *sbuf = malloc(big), *cbuf = malloc(big), *back = malloc(big);
	struct xp_mr *smr, *cmr, *bmr;
	struct xp_tls_peer tp;
	struct pair p;
	struct xp_wc wc;
	uint8_t wrong[XP_TLS_PSK_LEN];

	assert_non_null(sbuf);
	assert_non_null(cbuf);
	assert_non_null(back);
	assert_int_equal(make_tls_pair(&p, stls, ctls), 0);
	xp_conn_tls(p.srv.c, &tp);
	assert_int_not_equal(tp.mode, XP_TLS_OFF);
	assert_true(tp.psk);
	assert_string_equal(tp.name, "rblk1 alpha");
	xp_conn_tls(p.cli.c, &tp);
	assert_int_not_equal(tp.mode, XP_TLS_OFF);

	smr = reg(p.srv.c, sbuf, big, RW);
	cmr = reg(p.cli.c, cbuf, big, LOCAL);
	bmr = reg(p.cli.c, back, big, LOCAL);
	post_recv(p.srv.c, 1, smr, sbuf, 256);
	strcpy(cbuf, "ping");
	post1(p.cli.c, mkwr(10, XP_WR_SEND, true, cmr, cbuf, 5, 0, 0));
	expect_wc(&p.cli, &p.srv, 10, XP_WC_SUCCESS, XP_WC_SEND);
	wc = wait_wc(&p.srv, &p.cli);
	assert_int_equal(wc.byte_len, 5);
	assert_string_equal(sbuf, "ping");

	fill(cbuf, big, 7);
	post1(p.cli.c, mkwr(11, XP_WR_RDMA_WRITE, true, cmr, cbuf,
			    (uint32_t)big, raddr(smr, 0), smr->rkey));
	expect_wc(&p.cli, &p.srv, 11, XP_WC_SUCCESS, XP_WC_RDMA_WRITE);
	assert_memory_equal(sbuf, cbuf, big);
	fill(sbuf, big, 9);
	post1(p.cli.c, mkwr(12, XP_WR_RDMA_READ, true, bmr, back, (uint32_t)big,
			    raddr(smr, 0), smr->rkey));
	expect_wc(&p.cli, &p.srv, 12, XP_WC_SUCCESS, XP_WC_RDMA_READ);
	assert_memory_equal(back, sbuf, big);
	destroy_pair(&p);
	xp_tls_destroy(ctls);

	memcpy(wrong, psk_good, sizeof(wrong));
	wrong[5] ^= 1;
	ctls = tls_creds(false, wrong);
	assert_int_equal(make_tls_pair(&p, stls, ctls), -EACCES);
	assert_non_null(strstr(xp_tls_last_error(), "pre-shared key"));
	xp_tls_destroy(ctls);
	free(sbuf);
	free(cbuf);
	free(back);
	xp_tls_destroy(stls);
}

/*
 * After a short read the transport may skip reading in the next poll()
 * and in the one after arm() (the socket was just found empty), but data
 * that arrives meanwhile must show on fd() at once, and a caller that
 * never sleeps must still get it within three poll() calls.
 */
static void test_skip_read_wakeup(void **state)
{
	struct pair *p = new_pair();
	char sbuf[64], cbuf[64];
	struct xp_mr *smr, *cmr;
	struct pollfd pfd;
	struct xp_wc wc;
	int n = 0, i;

	smr = reg(p->srv.c, sbuf, sizeof(sbuf), LOCAL);
	cmr = reg(p->cli.c, cbuf, sizeof(cbuf), LOCAL);
	post_recv(p->srv.c, 1, smr, sbuf, 16);
	post_recv(p->srv.c, 2, smr, sbuf + 32, 16);
	strcpy(cbuf, "one");
	strcpy(cbuf + 32, "two");
	post1(p->cli.c, mkwr(10, XP_WR_SEND, true, cmr, cbuf, 4, 0, 0));
	wc = wait_wc(&p->srv, &p->cli); /* a short read on the server */
	assert_int_equal(wc.wr_id, 1);

	/* loopback: the bytes are in the server's socket when this returns */
	post1(p->cli.c, mkwr(11, XP_WR_SEND, true, cmr, cbuf + 32, 4, 0, 0));
	n = xp_poll(p->srv.c, &wc, 1);
	if (!n) {
		assert_int_equal(xp_arm(p->srv.c), 0);
		n = xp_poll(p->srv.c, &wc, 1);
	}
	if (!n) {
		/* about to sleep: the fd must already be readable */
		pfd.fd = xp_fd(p->srv.c);
		pfd.events = POLLIN;
		assert_int_equal(poll(&pfd, 1, 0), 1);
		n = xp_poll(p->srv.c, &wc, 1);
	}
	assert_int_equal(n, 1);
	assert_int_equal(wc.wr_id, 2);
	assert_int_equal(wc.byte_len, 4);
	assert_string_equal(sbuf + 32, "two");

	/* never sleeping, without arm(): still within three polls */
	post_recv(p->srv.c, 3, smr, sbuf, 16);
	post1(p->cli.c, mkwr(12, XP_WR_SEND, true, cmr, cbuf, 4, 0, 0));
	for (i = 0, n = 0; i < 3 && !n; i++)
		n = xp_poll(p->srv.c, &wc, 1);
	assert_int_equal(n, 1);
	assert_int_equal(wc.wr_id, 3);
	for (i = 10; i <= 12; i++)
		expect_wc(&p->cli, &p->srv, (uint64_t)i, XP_WC_SUCCESS,
			  XP_WC_SEND);
	free_pair(p);
}

/*
 * A signaled RDMA WRITE completes only once the peer has placed the data
 * (WRITE_ACK), as on an RC QP: while the passive side makes no progress
 * there is no completion, and when it arrives the bytes are in the region.
 */
static void test_signaled_write_acked(void **state)
{
	enum { LEN = 192 * 1024 };
	struct pair *p = new_pair();
	char *region = calloc(1, LEN), *src = malloc(LEN);
	struct xp_mr *rmr, *smr;
	struct xp_send_wr w;
	struct xp_wc wc;

	assert_non_null(region);
	assert_non_null(src);
	rmr = reg(p->srv.c, region, LEN, RW);
	smr = reg(p->cli.c, src, LEN, 0);
	for (uint32_t round = 0; round < 3; round++) {
		fill(src, LEN, round + 11);
		w = mkwr(7 + round, XP_WR_RDMA_WRITE, true, smr, src, LEN,
			 raddr(rmr, 0), rmr->rkey);
		assert_int_equal(xp_post_send(p->cli.c, &w, NULL), 0);
		expect_quiet(&p->cli, NULL, 30); /* server not polled: no ack */
		wc = wait_wc(&p->cli, &p->srv);
		assert_int_equal(wc.wr_id, 7 + round);
		assert_int_equal(wc.status, XP_WC_SUCCESS);
		assert_int_equal(wc.opcode, XP_WC_RDMA_WRITE);
		assert_memory_equal(region, src, LEN);
	}
	/* the passive side reports nothing */
	expect_quiet(&p->srv, &p->cli, 20);
	free_pair(p);
	free(region);
	free(src);
}

/*
 * A READ_RESP still being sent when the passive side deregisters and frees
 * the region: the unsent bytes were copied out, the issuer gets the data
 * as it was (ASan would catch a reference into the freed region).
 */
static void test_dereg_during_read(void **state)
{
	enum { LEN = 8 << 20 };
	struct pair *p = new_pair();
	char *region = malloc(LEN), *want = malloc(LEN), *dst = calloc(1, LEN);
	struct xp_mr *rmr, *dmr;
	struct xp_wc wc[4];

	assert_true(region && want && dst);
	fill(region, LEN, 9);
	memcpy(want, region, LEN);
	rmr = reg(p->srv.c, region, LEN, XP_ACCESS_REMOTE_READ);
	dmr = reg(p->cli.c, dst, LEN, LOCAL);
	post1(p->cli.c, mkwr(1, XP_WR_RDMA_READ, true, dmr, dst, LEN,
			     raddr(rmr, 0), rmr->rkey));
	/* let the server take the request and start answering */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(xp_poll(p->srv.c, wc, 4), 0);
		usleep(1000);
	}
	xp_dereg_mr(rmr);
	memset(region, 0xee, LEN);
	free(region);
	expect_wc(&p->cli, &p->srv, 1, XP_WC_SUCCESS, XP_WC_RDMA_READ);
	assert_memory_equal(dst, want, LEN);
	assert_int_equal(xp_state(p->srv.c), XP_CONN_CONNECTED);
	free_pair(p);
	free(want);
	free(dst);
}

/*
 * max_read_bytes bounds the READ responses the passive side holds unsent:
 * two 1 MiB READs within a 2 MiB bound are answered; three that arrive
 * together (parsed in one poll, before any is flushed) fail the
 * connection rather than queue a third, and every READ of the issuer
 * fails with it (issue 25).
 */
static void test_read_limit(void **state)
{
	enum { LEN = 1 << 20 };
	const struct xp_conn_attr sattr = {
	    .max_send_wr = 64, .max_recv_wr = 64, .max_read_bytes = 2 * LEN};
	char *region = malloc(3 * LEN), *dst = calloc(1, 3 * LEN);
	struct xp_mr *rmr, *dmr;
	struct xp_wc wc[4];
	struct pair p;

	assert_true(region && dst);
	make_pair_attr(&p, &small_attr, &sattr);
	fill(region, 3 * LEN, 5);
	rmr = reg(p.srv.c, region, 3 * LEN, XP_ACCESS_REMOTE_READ);
	dmr = reg(p.cli.c, dst, 3 * LEN, LOCAL);
	for (int i = 0; i < 2; i++)
		post1(p.cli.c,
		      mkwr(1 + i, XP_WR_RDMA_READ, true, dmr, dst + i * LEN,
			   LEN, raddr(rmr, i * LEN), rmr->rkey));
	expect_wc(&p.cli, &p.srv, 1, XP_WC_SUCCESS, XP_WC_RDMA_READ);
	expect_wc(&p.cli, &p.srv, 2, XP_WC_SUCCESS, XP_WC_RDMA_READ);
	assert_memory_equal(dst, region, 2 * LEN);

	for (int i = 0; i < 3; i++)
		post1(p.cli.c,
		      mkwr(3 + i, XP_WR_RDMA_READ, true, dmr, dst + i * LEN,
			   LEN, raddr(rmr, i * LEN), rmr->rkey));
	usleep(20000); /* all three frames are in the server's socket */
	for (int i = 0; i < 100 && xp_state(p.srv.c) != XP_CONN_ERROR; i++) {
		assert_true(xp_poll(p.srv.c, wc, 4) >= 0);
		usleep(1000);
	}
	assert_int_equal(xp_state(p.srv.c), XP_CONN_ERROR);
	for (int i = 0; i < 3; i++) {
		struct xp_wc w = wait_wc(&p.cli, NULL);

		assert_int_equal(w.wr_id, 3 + i);
		assert_int_not_equal(w.status, XP_WC_SUCCESS);
	}
	xp_dereg_mr(rmr);
	xp_dereg_mr(dmr);
	destroy_pair(&p);
	free(region);
	free(dst);
}

/* The server binds mw over [0, len) of mr for remote write. */
static void bind_for_write(struct pair *p, struct xp_mw *mw, struct xp_mr *mr,
			   uint32_t len, uint64_t id)
{
	struct xp_send_wr wr = {
	    .wr_id = id,
	    .opcode = XP_WR_BIND_MW,
	    .flags = XP_SEND_SIGNALED,
	    .bind = {.mw = mw,
		     .mr = mr,
		     .addr = raddr(mr, 0),
		     .length = len,
		     .access = XP_ACCESS_REMOTE_WRITE,
		     .rkey = xp_mw_next_rkey(mw)},
	};

	post1(p->srv.c, wr);
	expect_wc(&p->srv, &p->cli, id, XP_WC_SUCCESS, XP_WC_BIND_MW);
}

/* The client RDMA WRITEs [off, off + len) of the window, acknowledged. */
static void write_window(struct pair *p, struct xp_mr *smr, char *src,
			 struct xp_mw *mw, struct xp_mr *wmr, uint32_t off,
			 uint32_t len, uint64_t id)
{
	post1(p->cli.c, mkwr(id, XP_WR_RDMA_WRITE, true, smr, src + off, len,
			     raddr(wmr, off), mw->rkey));
	expect_wc(&p->cli, &p->srv, id, XP_WC_SUCCESS, XP_WC_RDMA_WRITE);
}

/*
 * mw_placed(): the bytes the peer's WRITEs covered from the bind's start
 * without a gap (overlaps fine); kept through the invalidation; reset by
 * the next bind (a WRITE_DATA on a window written in part must not make
 * the target write the slot's older bytes).
 */
static void test_mw_placed(void **state)
{
	enum { LEN = 64 * 1024, HALF = LEN / 2 };
	struct pair *p = new_pair();
	char *win = calloc(1, LEN), *src = malloc(LEN);
	struct xp_mr *wmr, *smr;
	struct xp_mw *mw = NULL;
	struct xp_send_wr inv = {
	    .wr_id = 90, .opcode = XP_WR_LOCAL_INV, .flags = XP_SEND_SIGNALED};

	assert_true(win && src);
	fill(src, LEN, 3);
	wmr = reg(p->srv.c, win, LEN, LOCAL | XP_ACCESS_MW_BIND);
	smr = reg(p->cli.c, src, LEN, 0);
	assert_int_equal(xp_alloc_mw(xp_conn_group(p->srv.c), &mw), 0);

	bind_for_write(p, mw, wmr, LEN, 80);
	assert_true(xp_mw_placed(mw) < LEN);
	write_window(p, smr, src, mw, wmr, 0, HALF, 1);
	assert_true(xp_mw_placed(mw) < LEN);
	write_window(p, smr, src, mw, wmr, 4096, HALF, 2); /* overlaps */
	assert_true(xp_mw_placed(mw) < LEN);
	write_window(p, smr, src, mw, wmr, HALF, HALF, 3);
	assert_int_equal(xp_mw_placed(mw), LEN);
	assert_memory_equal(win, src, LEN);
	inv.invalidate_rkey = mw->rkey;
	post1(p->srv.c, inv);
	expect_wc(&p->srv, &p->cli, 90, XP_WC_SUCCESS, XP_WC_LOCAL_INV);
	assert_int_equal(xp_mw_placed(mw),
			 LEN); /* kept past the invalidation */

	/* a fresh bind starts from nothing; a gap is not filled later */
	bind_for_write(p, mw, wmr, LEN, 81);
	assert_true(xp_mw_placed(mw) < LEN);
	write_window(p, smr, src, mw, wmr, HALF, HALF, 4);
	write_window(p, smr, src, mw, wmr, 0, HALF - 4096, 5);
	assert_true(xp_mw_placed(mw) < LEN);

	xp_dealloc_mw(mw);
	xp_dereg_mr(wmr);
	xp_dereg_mr(smr);
	free_pair(p);
	free(win);
	free(src);
}

/* Keeps the passive side progressing on its own thread until told to stop. */
struct driver {
	struct ep *ep;
	atomic_bool stop;
};

static void *driver_main(void *arg)
{
	struct driver *d = arg;
	struct ep *eps[1] = {d->ep};

	while (!atomic_load(&d->stop))
		pump(eps, 1, 10);
	return NULL;
}

/*
 * The issuer sleeps on its own fd only, with more output queued than the
 * socket takes: it must be woken by EPOLLOUT to push the rest.
 */
static void test_epollout_wakeup(void **state)
{
	enum { LEN = 16 << 20 };
	struct pair *p = new_pair();
	char *region = calloc(1, LEN), *src = malloc(LEN);
	struct driver d = {.ep = &p->srv};
	struct xp_mr *rmr, *smr;
	pthread_t th;

	assert_true(region && src);
	fill(src, LEN, 21);
	rmr = reg(p->srv.c, region, LEN, RW);
	smr = reg(p->cli.c, src, LEN, 0);
	assert_int_equal(pthread_create(&th, NULL, driver_main, &d), 0);
	for (int i = 0; i < 2; i++) {
		post1(p->cli.c, mkwr(1, XP_WR_RDMA_WRITE, true, smr, src, LEN,
				     raddr(rmr, 0), rmr->rkey));
		expect_wc(&p->cli, NULL, 1, XP_WC_SUCCESS, XP_WC_RDMA_WRITE);
	}
	/* a READ completes only once the server answered: data all placed */
	post1(p->cli.c, mkwr(2, XP_WR_RDMA_READ, true, smr, src, 0,
			     raddr(rmr, 0), rmr->rkey));
	expect_wc(&p->cli, NULL, 2, XP_WC_SUCCESS, XP_WC_RDMA_READ);
	atomic_store(&d.stop, true);
	pthread_join(th, NULL);
	assert_memory_equal(region, src, LEN);
	assert_int_equal(p->srv.n, 0);
	free_pair(p);
	free(region);
	free(src);
}

/* ---- load -------------------------------------------------------------- */

/*
 * 256 WRITE + SEND pairs in one post, four rounds: frames batched into
 * sendmsg() calls (TCP_BATCH, TCP_IOV) and parsed back in order, receives
 * completing in order with each WRITE placed before its SEND.
 */
static void test_many_outstanding(void **state)
{
	enum { N = 256, SLOT = 4096, ROUNDS = 4 };
	const struct xp_conn_attr cattr = {.max_send_wr = 2 * N,
					   .max_recv_wr = 4};
	const struct xp_conn_attr sattr = {.max_send_wr = 4, .max_recv_wr = N};
	struct pair *p = calloc(1, sizeof(*p));
	char *slots = calloc(N, SLOT), *src = malloc((size_t)N * SLOT);
	uint32_t *msgs = calloc(N, sizeof(uint32_t) * 4);
	uint32_t *rmsgs = calloc(N, sizeof(uint32_t) * 4);
	struct xp_send_wr *w = calloc(2 * N, sizeof(*w));
	struct xp_mr *slm, *srm, *smr, *mmr;
	bool *seen = calloc(N, sizeof(bool));

	assert_true(p && slots && src && msgs && rmsgs && w && seen);
	make_pair_attr(p, &cattr, &sattr);
	slm = reg(p->srv.c, slots, (size_t)N * SLOT, RW);
	srm = reg(p->srv.c, rmsgs, (size_t)N * 16, LOCAL);
	smr = reg(p->cli.c, src, (size_t)N * SLOT, 0);
	mmr = reg(p->cli.c, msgs, (size_t)N * 16, 0);

	for (uint32_t round = 0; round < ROUNDS; round++) {
		uint32_t len = SLOT - round * 1000;

		memset(seen, 0, N * sizeof(bool));
		for (uint32_t i = 0; i < N; i++) {
			post_recv(p->srv.c, i, srm, rmsgs + 4 * i, 16);
			fill(src + (size_t)i * SLOT, SLOT, round * N + i + 1);
			msgs[4 * i] = i;
			msgs[4 * i + 1] = round;
			w[2 * i] =
			    mkwr(1000 + i, XP_WR_RDMA_WRITE, false, smr,
				 src + (size_t)i * SLOT, len,
				 raddr(slm, (size_t)i * SLOT), slm->rkey);
			w[2 * i + 1] = mkwr(2000 + i, XP_WR_SEND, true, mmr,
					    msgs + 4 * i, 16, 0, 0);
			w[2 * i].next = &w[2 * i + 1];
			w[2 * i + 1].next = i + 1 < N ? &w[2 * i + 2] : NULL;
		}
		/* the send queue is full: one more is refused */
		assert_int_equal(xp_post_send(p->cli.c, w, NULL), 0);
		{
			struct xp_send_wr extra =
			    mkwr(9, XP_WR_SEND, true, mmr, msgs, 16, 0, 0);
			struct xp_send_wr *bad = NULL;

			assert_int_equal(xp_post_send(p->cli.c, &extra, &bad),
					 -ENOMEM);
			assert_ptr_equal(bad, &extra);
		}
		for (uint32_t k = 0; k < N; k++) {
			struct xp_wc wc = wait_wc(&p->srv, &p->cli);
			uint32_t i = (uint32_t)wc.wr_id;

			assert_int_equal(wc.status, XP_WC_SUCCESS);
			assert_int_equal(wc.opcode, XP_WC_RECV);
			assert_int_equal(wc.byte_len, 16);
			assert_true(i < N);
			assert_int_equal(i, k); /* receives complete in order */
			assert_int_equal(rmsgs[4 * i], i);
			assert_int_equal(rmsgs[4 * i + 1], round);
			assert_false(seen[i]);
			seen[i] = true;
			/* the WRITE before this SEND has landed */
			assert_memory_equal(slots + (size_t)i * SLOT,
					    src + (size_t)i * SLOT, len);
		}
		for (uint32_t k = 0; k < N; k++)
			expect_wc(&p->cli, &p->srv, 2000 + k, XP_WC_SUCCESS,
				  XP_WC_SEND);
	}
	free_pair(p);
	free(slots);
	free(src);
	free(msgs);
	free(rmsgs);
	free(w);
	free(seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connect_accept_priv),
	    cmocka_unit_test(test_reject_priv),
	    cmocka_unit_test(test_connect_closed_port),
	    cmocka_unit_test(test_silent_client),
	    cmocka_unit_test(test_send_recv),
	    cmocka_unit_test(test_tls_psk),
	    cmocka_unit_test(test_skip_read_wakeup),
	    cmocka_unit_test(test_signaled_write_acked),
	    cmocka_unit_test(test_dereg_during_read),
	    cmocka_unit_test(test_read_limit),
	    cmocka_unit_test(test_mw_placed),
	    cmocka_unit_test(test_epollout_wakeup),
	    cmocka_unit_test(test_many_outstanding),
	};

	/* expected failures in these tests log warnings; keep errors only */
	log_set_level(getenv("RBLK_TEST_VERBOSE") ? LOG_DEBUG : LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
