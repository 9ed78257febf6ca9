/* SPDX-License-Identifier: MIT */
/*
 * test_rdma.c - the rdma transport (transport/rdma.c) over a real device.
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

	a->ret = X->connect(addr, a->port, &attr, a->priv, a->priv_len, WAIT_MS,
			    &a->c, a->rej, &a->rej_len);
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

		ret = X->get_request(lst, &attr, &c, priv, priv_len);
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

/*
 * Poll c, sleeping on its fd, until it is in XP_CONN_ERROR and has
 * flushed `recvs` receives (RECV, FLUSH_ERR, wr_ids 0, 1, ...).
 */
static void wait_error(struct xp_conn *c, unsigned int recvs)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct pollfd pfd = {.fd = xp_fd(c), .events = POLLIN};
	unsigned int n = 0;
	struct xp_wc wc;

	for (;;) {
		int got = xp_poll(c, &wc, 1);

		assert_true(got >= 0);
		if (!got) {
			assert_int_equal(xp_arm(c), 0);
			got = xp_poll(c, &wc, 1);
			assert_true(got >= 0);
		}
		if (got) {
			assert_int_equal(wc.status, XP_WC_FLUSH_ERR);
			assert_int_equal(wc.opcode, XP_WC_RECV);
			assert_int_equal(wc.wr_id, n);
			n++;
			continue;
		}
		if (xp_state(c) == XP_CONN_ERROR && n == recvs)
			break;
		assert_true(now_ms() < deadline);
		poll(&pfd, 1, (int)(deadline - now_ms()));
	}
	assert_int_equal(n, recvs);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
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

static void one_sided(struct side *s, enum xp_wr_opcode op, size_t loff,
		      uint32_t len, uint64_t raddr, uint32_t rkey,
		      uint64_t wr_id)
{
	struct xp_send_wr wr = {.wr_id = wr_id,
				.opcode = op,
				.flags = XP_SEND_SIGNALED,
				.remote_addr = raddr,
				.rkey = rkey};
	struct xp_send_wr *bad = NULL;

	wr.sge.addr = s->buf + loff;
	wr.sge.length = len;
	wr.sge.mr = s->mr;
	assert_int_equal(xp_post_send(s->c, &wr, &bad), 0);
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

/* RC ordering: the WRITE's data is in place when the SEND's RECV is seen. */
static void test_write_then_send(void **state)
{
	struct xp_send_wr w = {.wr_id = 10, .opcode = XP_WR_RDMA_WRITE};
	struct xp_send_wr s = {
	    .wr_id = 11, .opcode = XP_WR_SEND, .flags = XP_SEND_SIGNALED};
	struct xp_send_wr *bad = NULL;
	const uint32_t len = 256 * 1024;
	struct pair p;
	struct xp_wc wc;

	pair_open(&p, NULL);
	fill(p.cli.buf, len, 1);
	w.sge = (struct xp_sge){p.cli.buf, len, p.cli.mr};
	w.remote_addr = (uintptr_t)p.srv.buf + 4096;
	w.rkey = p.srv.mr->rkey;
	w.next = &s;
	memcpy(p.cli.buf + len, "capsule", 7);
	s.sge = (struct xp_sge){p.cli.buf + len, 7, p.cli.mr};
	assert_int_equal(xp_post_send(p.cli.c, &w, &bad), 0);

	assert_int_equal(wait_wc(p.srv.c, &wc), 0);
	assert_int_equal(wc.status, XP_WC_SUCCESS);
	assert_int_equal(wc.opcode, XP_WC_RECV);
	assert_int_equal(wc.byte_len, 7);
	assert_memory_equal(p.srv.buf + 4096, p.cli.buf, len);
	/* the unsignaled WRITE completes silently with the SEND */
	expect_wc(p.cli.c, 11, XP_WC_SEND, XP_WC_SUCCESS);
	pair_close(&p);
}

static void test_rdma_read(void **state)
{
	const uint32_t len = 64 * 1024;
	struct pair p;

	pair_open(&p, NULL);
	fill(p.srv.buf + 8192, len, 2);
	one_sided(&p.cli, XP_WR_RDMA_READ, 0, len, (uintptr_t)p.srv.buf + 8192,
		  p.srv.mr->rkey, 20);
	expect_wc(p.cli.c, 20, XP_WC_RDMA_READ, XP_WC_SUCCESS);
	assert_memory_equal(p.cli.buf, p.srv.buf + 8192, len);
	ping_pong(&p);
	pair_close(&p);
}

static void test_1mib(void **state)
{
	struct pair p;

	pair_open(&p, NULL);
	/* initiator -> target */
	fill(p.cli.buf, MIB, 3);
	one_sided(&p.cli, XP_WR_RDMA_WRITE, 0, MIB, (uintptr_t)p.srv.buf,
		  p.srv.mr->rkey, 30);
	expect_wc(p.cli.c, 30, XP_WC_RDMA_WRITE, XP_WC_SUCCESS);
	assert_memory_equal(p.srv.buf, p.cli.buf, MIB);
	/* target -> initiator */
	fill(p.srv.buf + MIB, MIB, 4);
	one_sided(&p.cli, XP_WR_RDMA_READ, MIB, MIB, (uintptr_t)p.srv.buf + MIB,
		  p.srv.mr->rkey, 31);
	expect_wc(p.cli.c, 31, XP_WC_RDMA_READ, XP_WC_SUCCESS);
	assert_memory_equal(p.cli.buf + MIB, p.srv.buf + MIB, MIB);
	/* the target writes into the initiator too */
	fill(p.srv.buf, MIB, 5);
	one_sided(&p.srv, XP_WR_RDMA_WRITE, 0, MIB, (uintptr_t)p.cli.buf + MIB,
		  p.cli.mr->rkey, 32);
	expect_wc(p.srv.c, 32, XP_WC_RDMA_WRITE, XP_WC_SUCCESS);
	assert_memory_equal(p.cli.buf + MIB, p.srv.buf, MIB);
	pair_close(&p);
}

/*
 * After a failure on b's initiator: the failing request reports err, the
 * receives still posted flush (with their own wr_ids and the RECV
 * opcode), posts are refused, and b's target end goes to ERROR too,
 * flushing the srv_recvs receives it still has.
 */
static void expect_failed(struct pair *b, uint64_t wr_id, enum xp_wc_opcode op,
			  enum xp_wc_status err, unsigned int srv_recvs)
{
	struct xp_send_wr wr = {.opcode = XP_WR_SEND};
	struct xp_send_wr *bad = NULL;
	struct xp_sge sge = {b->cli.buf, 16, b->cli.mr};
	unsigned int recvs = 0;
	bool failed = false;
	struct xp_wc wc;

	while (!failed || recvs < NRECV) {
		assert_int_equal(wait_wc(b->cli.c, &wc), 0);
		if (wc.opcode == XP_WC_RECV) {
			assert_int_equal(wc.status, XP_WC_FLUSH_ERR);
			assert_int_equal(wc.wr_id, recvs);
			recvs++;
			continue;
		}
		assert_false(failed);
		if (wc.status != err)
			fprintf(stderr, "completion status: %s\n",
				xp_wc_status_str(wc.status));
		assert_int_equal(wc.status, err);
		assert_int_equal(wc.opcode, op);
		assert_int_equal(wc.wr_id, wr_id);
		failed = true;
	}
	assert_int_equal(xp_state(b->cli.c), XP_CONN_ERROR);
	assert_int_equal(xp_poll(b->cli.c, &wc, 1), 0);
	wr.sge = sge;
	assert_int_equal(xp_post_send(b->cli.c, &wr, &bad), -ENOTCONN);
	assert_ptr_equal(bad, &wr);
	assert_int_equal(xp_post_recv(b->cli.c, 99, &sge), -ENOTCONN);

	wait_error(b->srv.c, srv_recvs);
}

static void test_rkey_of_other_conn(void **state)
{
	struct pair a, b;

	pair_open(&a, "A");
	pair_open(&b, "B");
	fill(b.cli.buf, 4096, 6);
	/* A's target region, A's rkey, on B's QP (B's PD): refused */
	one_sided(&b.cli, XP_WR_RDMA_WRITE, 0, 4096, (uintptr_t)a.srv.buf,
		  a.srv.mr->rkey, 40);
	expect_failed(&b, 40, XP_WC_RDMA_WRITE, XP_WC_REM_ACCESS_ERR, NRECV);
	/* nothing landed in A's memory; A is unaffected */
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(a.srv.buf[i], 0);
	ping_pong(&a);
	fill(a.srv.buf, 4096, 7);
	one_sided(&a.cli, XP_WR_RDMA_READ, 0, 4096, (uintptr_t)a.srv.buf,
		  a.srv.mr->rkey, 41);
	expect_wc(a.cli.c, 41, XP_WC_RDMA_READ, XP_WC_SUCCESS);
	assert_memory_equal(a.cli.buf, a.srv.buf, 4096);
	pair_close(&b);
	pair_close(&a);
}

static void test_read_out_of_bounds(void **state)
{
	struct pair a, b;

	pair_open(&a, "A");
	pair_open(&b, "B");
	/* last 4 KiB of the region plus 4 KiB beyond it */
	one_sided(&b.cli, XP_WR_RDMA_READ, 0, 8192,
		  (uintptr_t)b.srv.buf + BUF_SIZE - 4096, b.srv.mr->rkey, 50);
	expect_failed(&b, 50, XP_WC_RDMA_READ, XP_WC_REM_ACCESS_ERR, NRECV);
	ping_pong(&a);
	pair_close(&b);
	pair_close(&a);
}

/* A disconnect flushes both ends; destroy after it is clean. */
static void test_disconnect(void **state)
{
	struct xp_wc wc;
	struct pair p;

	pair_open(&p, NULL);
	xp_disconnect(p.cli.c);
	xp_disconnect(p.cli.c); /* idempotent */
	assert_int_equal(xp_state(p.cli.c), XP_CONN_ERROR);
	for (unsigned int i = 0; i < NRECV; i++) {
		assert_int_equal(wait_wc(p.cli.c, &wc), 0);
		assert_int_equal(wc.status, XP_WC_FLUSH_ERR);
		assert_int_equal(wc.opcode, XP_WC_RECV);
		assert_int_equal(wc.wr_id, i);
	}
	wait_error(p.srv.c, NRECV);
	pair_close(&p);
}

/* A chain longer than the send queue: what fits is posted, *bad is next. */
static void test_send_queue_full(void **state)
{
	struct xp_send_wr wr[40];
	struct xp_send_wr *bad = NULL;
	struct pair p;
	int ret;

	pair_open(&p, NULL);
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 40; i++) {
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].opcode = XP_WR_RDMA_WRITE;
		wr[i].sge = (struct xp_sge){p.cli.buf + i * 64, 64, p.cli.mr};
		wr[i].remote_addr = (uintptr_t)p.srv.buf + (uint64_t)i * 64;
		wr[i].rkey = p.srv.mr->rkey;
		wr[i].next = i < 39 ? &wr[i + 1] : NULL;
	}
	wr[attr.max_send_wr - 1].flags = XP_SEND_SIGNALED;
	fill(p.cli.buf, 40 * 64, 8);
	ret = xp_post_send(p.cli.c, wr, &bad);
	assert_int_equal(ret, -ENOMEM);
	assert_ptr_equal(bad, &wr[attr.max_send_wr]);
	expect_wc(p.cli.c, 100 + attr.max_send_wr - 1, XP_WC_RDMA_WRITE,
		  XP_WC_SUCCESS);
	assert_memory_equal(p.srv.buf, p.cli.buf, attr.max_send_wr * 64);
	/* the queue is free again */
	ping_pong(&p);
	pair_close(&p);
}

/*
 * A SEND with no receive posted at the peer fails the connection with
 * XP_WC_RNR_ERR after the transport's RNR retries (about 4 s).
 */
static void test_rnr(void **state)
{
	struct xp_wc wc;
	struct pair p;

	pair_open(&p, NULL);
	for (unsigned int i = 0; i <= NRECV; i++)
		send_msg(&p.cli, i * 64, "more", 60 + i);
	for (unsigned int i = 0; i < NRECV; i++) {
		expect_wc(p.cli.c, 60 + i, XP_WC_SEND, XP_WC_SUCCESS);
		assert_int_equal(wait_wc(p.srv.c, &wc), 0);
		assert_int_equal(wc.status, XP_WC_SUCCESS);
		assert_int_equal(wc.wr_id, i);
	}
	expect_failed(&p, 60 + NRECV, XP_WC_SEND, XP_WC_RNR_ERR, 0);
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
	ret = X->connect(host, port, &attr, NULL, 0, 2000, &c, NULL, NULL);
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
	    cmocka_unit_test(test_write_then_send),
	    cmocka_unit_test(test_rdma_read),
	    cmocka_unit_test(test_1mib),
	    cmocka_unit_test(test_rkey_of_other_conn),
	    cmocka_unit_test(test_read_out_of_bounds),
	    cmocka_unit_test(test_disconnect),
	    cmocka_unit_test(test_send_queue_full),
	    cmocka_unit_test(test_rnr),
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
