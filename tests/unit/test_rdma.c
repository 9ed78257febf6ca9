/* SPDX-License-Identifier: MIT */
/*
 * test_rdma.c - the rdma transport (transport/rdma*.c) over a real device:
 * what is rdma_cm's own (private data on connect, accept and reject, no
 * listener, the wildcard listener, an unreachable address), each
 * connection in a private group (a NULL one). The data-path contract both
 * transports share is tests/unit/test_xp.c (run with "rdma").
 *
 * Needs an RDMA device (rdma_rxe or siw will do) and an IP address on it:
 *   RBLK_TEST_RDMA_ADDR=192.0.2.1 build/tests/test_rdma
 * Without either it exits 77 (skip) saying why. The VM suite (tests/vm/)
 * is where it runs. RBLK_TEST_LOG=debug shows the transport's log.
 *
 * Both ends live in this process: connect() blocks until the handshake is
 * done, so it runs on a helper thread while the main thread plays the
 * listener. Every wait goes through the transport's sleep protocol (poll,
 * arm, poll, wait for fd()), so that is tested as well.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "common/log.h"
#include "common/util.h"
#include "transport/transport.h"

#define BUF_SIZE (4u << 20)
#define MIB (1u << 20)
#define RECV_OFF (3u << 20) /* receive slots; below is one-sided space */
#define RECV_SLOT 4096u
#define NRECV 16u
#define WAIT_MS 10000

static const struct xp_ops *X = &xp_rdma_ops;
static const struct xp_conn_attr attr = {.max_send_wr = 32,
					 .max_recv_wr = NRECV};
static const char *addr;
static uint16_t port;
static struct xp_listener *lst;

struct side {
	struct xp_conn *c;
	uint8_t *buf;
	struct xp_mr *mr;
};

struct pair {
	struct side cli, srv;
};

struct conn_args {
	uint16_t port;
	const void *priv;
	size_t priv_len;
	struct xp_conn *c;
	int ret;
	uint8_t rej[XP_PRIV_MAX];
	size_t rej_len;
	pthread_t thread;
};

static void *connect_thread(void *arg)
{
	struct conn_args *a = arg;

	a->ret = xp_connect(X, NULL, addr, a->port, &attr, a->priv, a->priv_len,
			    WAIT_MS, &a->c, a->rej, &a->rej_len);
	return NULL;
}

static void start_connect(struct conn_args *a, uint16_t p, const char *priv)
{
	memset(a, 0, sizeof(*a));
	a->port = p;
	a->priv = priv;
	a->priv_len = priv ? strlen(priv) : 0;
	assert_int_equal(pthread_create(&a->thread, NULL, connect_thread, a),
			 0);
}

static void join_connect(struct conn_args *a)
{
	assert_int_equal(pthread_join(a->thread, NULL), 0);
}

/* Listener thread's side: the next request, within WAIT_MS. */
static struct xp_conn *wait_request(void *priv, size_t *priv_len)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct xp_conn *c = NULL;
	int ret;

	for (;;) {
		struct pollfd pfd = {.fd = X->listener_fd(lst),
				     .events = POLLIN};

		ret = xp_get_request(lst, NULL, &attr, &c, priv, priv_len);
		if (ret == 0)
			return c;
		assert_int_equal(ret, -EAGAIN);
		assert_true(now_ms() < deadline);
		poll(&pfd, 1, 100);
	}
}

static void post_recv_slot(struct side *s, unsigned int i)
{
	struct xp_sge sge = {.addr = s->buf + RECV_OFF + i * RECV_SLOT,
			     .length = RECV_SLOT,
			     .mr = s->mr};

	assert_int_equal(xp_post_recv(s->c, i, &sge), 0);
}

/* Memory and receives for one end; RECV wr_id is the slot number. */
static void side_setup(struct side *s)
{
	s->buf = aligned_alloc(4096, BUF_SIZE);
	assert_non_null(s->buf);
	memset(s->buf, 0, BUF_SIZE);
	assert_int_equal(xp_reg_mr(s->c, s->buf, BUF_SIZE,
				   XP_ACCESS_LOCAL_WRITE |
				       XP_ACCESS_REMOTE_READ |
				       XP_ACCESS_REMOTE_WRITE,
				   &s->mr),
			 0);
	assert_ptr_equal(s->mr->group, xp_conn_group(s->c));
	for (unsigned int i = 0; i < NRECV; i++)
		post_recv_slot(s, i);
}

static void side_close(struct side *s)
{
	xp_destroy(s->c); /* deregisters s->mr */
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

static void pair_open(struct pair *p, const char *priv)
{
	uint8_t got[XP_PRIV_MAX];
	size_t got_len = 0;
	struct conn_args a;

	memset(p, 0, sizeof(*p));
	start_connect(&a, port, priv);
	p->srv.c = wait_request(got, &got_len);
	assert_int_equal(xp_state(p->srv.c), XP_CONN_REQUESTED);
	if (priv) {
		/* IB/RoCE pad the CM private data with zeros */
		assert_true(got_len >= strlen(priv));
		assert_true(got_len <= XP_PRIV_MAX);
		assert_memory_equal(got, priv, strlen(priv));
	}
	side_setup(&p->srv); /* receives before accept */
	assert_int_equal(X->accept(p->srv.c, "ok", 2), 0);
	join_connect(&a);
	assert_int_equal(a.ret, 0);
	p->cli.c = a.c;
	side_setup(&p->cli);
	assert_int_equal(xp_state(p->cli.c), XP_CONN_CONNECTED);
	assert_int_equal(xp_state(p->srv.c), XP_CONN_CONNECTED);
}

static void pair_close(struct pair *p)
{
	side_close(&p->cli);
	side_close(&p->srv);
}

/*
 * One completion within WAIT_MS, by the sleep protocol of transport.h.
 * 0, or -ETIMEDOUT.
 */
static int wait_wc(struct xp_conn *c, struct xp_wc *wc)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct pollfd pfd = {.fd = xp_fd(c), .events = POLLIN};
	int n;

	for (;;) {
		n = xp_poll(c, wc, 1);
		assert_true(n >= 0);
		if (n)
			return 0;
		assert_int_equal(xp_arm(c), 0);
		n = xp_poll(c, wc, 1);
		assert_true(n >= 0);
		if (n)
			return 0;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		poll(&pfd, 1, (int)(deadline - now_ms()));
	}
}

static void expect_wc(struct xp_conn *c, uint64_t wr_id, enum xp_wc_opcode op,
		      enum xp_wc_status st)
{
	struct xp_wc wc;

	assert_int_equal(wait_wc(c, &wc), 0);
	if (wc.status != st)
		fprintf(stderr, "completion status: %s\n",
			xp_wc_status_str(wc.status));
	assert_int_equal(wc.status, st);
	assert_int_equal(wc.opcode, op);
	assert_int_equal(wc.wr_id, wr_id);
}

static void send_msg(struct side *from, size_t off, const char *msg,
		     uint64_t wr_id)
{
	struct xp_send_wr wr = {
	    .wr_id = wr_id, .opcode = XP_WR_SEND, .flags = XP_SEND_SIGNALED};
	struct xp_send_wr *bad = NULL;

	memcpy(from->buf + off, msg, strlen(msg));
	wr.sge.addr = from->buf + off;
	wr.sge.length = (uint32_t)strlen(msg);
	wr.sge.mr = from->mr;
	assert_int_equal(xp_post_send(from->c, &wr, &bad), 0);
}

static void expect_recv(struct side *to, const char *msg)
{
	struct xp_wc wc;

	assert_int_equal(wait_wc(to->c, &wc), 0);
	assert_int_equal(wc.status, XP_WC_SUCCESS);
	assert_int_equal(wc.opcode, XP_WC_RECV);
	assert_true(wc.wr_id < NRECV);
	assert_int_equal(wc.byte_len, strlen(msg));
	assert_memory_equal(to->buf + RECV_OFF + wc.wr_id * RECV_SLOT, msg,
			    strlen(msg));
	post_recv_slot(to, (unsigned int)wc.wr_id);
}

/* A round trip both ways on a connection that must still work. */
static void ping_pong(struct pair *p)
{
	send_msg(&p->cli, 0, "ping", 1);
	expect_recv(&p->srv, "ping");
	expect_wc(p->cli.c, 1, XP_WC_SEND, XP_WC_SUCCESS);
	send_msg(&p->srv, 0, "pong!", 2);
	expect_recv(&p->cli, "pong!");
	expect_wc(p->srv.c, 2, XP_WC_SEND, XP_WC_SUCCESS);
}

/* ---- tests ------------------------------------------------------------ */

static void test_connect_accept_priv(void **state)
{
	struct pair p;

	pair_open(&p, "rblk-hello-1");
	assert_memory_equal(xp_peer_name(p.cli.c), "rdma ", 5);
	assert_memory_equal(xp_peer_name(p.srv.c), "rdma ", 5);
	assert_non_null(strstr(xp_peer_name(p.cli.c), addr));
	assert_true(xp_fd(p.cli.c) >= 0);
	assert_true(xp_fd(p.srv.c) >= 0);
	pair_close(&p);
}

static void test_reject_priv(void **state)
{
	struct conn_args a;
	struct xp_conn *c;
	uint8_t got[XP_PRIV_MAX];
	size_t got_len;

	start_connect(&a, port, "let me in");
	c = wait_request(got, &got_len);
	X->reject(c, "go away", 7);
	join_connect(&a);
	assert_int_equal(a.ret, -ECONNREFUSED);
	assert_true(a.rej_len >= 7);
	assert_memory_equal(a.rej, "go away", 7);
	/* the listener still takes connections */
	{
		struct pair p;

		pair_open(&p, NULL);
		pair_close(&p);
	}
}

static void test_no_listener(void **state)
{
	struct conn_args a;

	start_connect(&a, (uint16_t)(port + 1), "anyone?");
	join_connect(&a);
	assert_int_equal(a.ret, -ECONNREFUSED);
	assert_int_equal(a.rej_len, 0);
}

static void test_send_recv(void **state)
{
	struct pair p;

	pair_open(&p, "x");
	for (int i = 0; i < 3 * (int)NRECV; i++)
		ping_pong(&p);
	pair_close(&p);
}

/* A listener on the wildcard address takes connections to addr. */
static void test_listen_any(void **state)
{
	struct xp_listener *saved = lst;
	uint16_t saved_port = port;
	struct pair p;

	port = (uint16_t)(port + 3);
	assert_int_equal(X->listen(NULL, port, &lst), 0);
	pair_open(&p, "any");
	ping_pong(&p);
	pair_close(&p);
	X->listener_destroy(lst);
	lst = saved;
	port = saved_port;
}

/*
 * An address on the RDMA subnet that nobody has: connect() gives up within
 * its timeout (how depends on the link: no ARP reply, or no CM reply).
 */
static void test_unreachable(void **state)
{
	struct in_addr in;
	char host[INET_ADDRSTRLEN];
	struct xp_conn *c = NULL;
	uint64_t t0;
	int ret;

	if (inet_pton(AF_INET, addr, &in) != 1)
		skip();
	in.s_addr ^= htonl(0x40);
	inet_ntop(AF_INET, &in, host, sizeof(host));
	t0 = now_ms();
	ret = xp_connect(X, NULL, host, port, &attr, NULL, 0, 2000, &c, NULL,
			 NULL);
	if (ret != -ETIMEDOUT && ret != -EHOSTUNREACH)
		fprintf(stderr, "connect(%s): %s\n", host, strerror(-ret));
	assert_true(ret == -ETIMEDOUT || ret == -EHOSTUNREACH);
	assert_true(now_ms() - t0 < 2000 + 1500);
}

static int group_setup(void **state)
{
	int ret = -EADDRINUSE;

	/* port + 1: nobody listens (test_no_listener); + 3: test_listen_any */
	port = (uint16_t)(20000 + getpid() % 20000);
	for (int i = 0; i < 20 && ret == -EADDRINUSE; i++, port += 4)
		ret = X->listen(addr, port, &lst);
	if (ret)
		fprintf(stderr, "listen on %s: %s\n", addr, strerror(-ret));
	else
		port -= 4;
	return ret ? -1 : 0;
}

static int group_teardown(void **state)
{
	X->listener_destroy(lst);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connect_accept_priv),
	    cmocka_unit_test(test_reject_priv),
	    cmocka_unit_test(test_no_listener),
	    cmocka_unit_test(test_send_recv),
	    cmocka_unit_test(test_listen_any),
	    cmocka_unit_test(test_unreachable),
	};
	struct ibv_device **list;
	const char *lvl;
	int n = 0;

	lvl = getenv("RBLK_TEST_LOG");
	if (lvl && log_parse_level(lvl) >= 0)
		log_set_level(log_parse_level(lvl));
	addr = getenv("RBLK_TEST_RDMA_ADDR");
	if (!addr || !*addr) {
		printf("skip: RBLK_TEST_RDMA_ADDR is not set (an IP address "
		       "on an RDMA device, e.g. 192.0.2.1 on rxe0)\n");
		return 77;
	}
	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (!list || n == 0) {
		printf("skip: no RDMA device (load rdma_rxe or siw)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown) ? 1
									  : 0;
}
