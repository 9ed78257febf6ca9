/* SPDX-License-Identifier: MIT */
/*
 * rdma.c - the verbs transport: libibverbs + librdmacm.
 *
 * One code path for InfiniBand, RoCE (rdma_rxe included) and iWARP (siw):
 * addresses are IP addresses resolved by rdma_cm, connections are RC QPs.
 *
 * Objects per connection, in setup order:
 *   event channel  rdma_cm events of this connection only (a passive-side
 *                  id is migrated onto it off the listener's channel, so
 *                  every later event is read by the connection's owner)
 *   cm id          the rdma_cm identifier (RDMA_PS_TCP)
 *   PD             a protection domain of its own: an rkey registered on
 *                  one connection is refused on every other QP
 *   comp channel   CQ notifications (O_NONBLOCK)
 *   CQ             one for send and receive, max_send_wr + max_recv_wr
 *   QP             RC, one SGE each way, sq_sig_all 0
 *   epoll fd       holds the comp channel fd and the cm event channel fd;
 *                  this is what fd() hands out
 *
 * Work request ids: the wr_id given to the HCA is not the caller's. Send
 * and receive requests each get a sequence number; the caller's wr_id and
 * opcode are kept in a ring slot indexed by it. RC completes each queue in
 * posting order, so a completion for sequence n retires every earlier
 * slot of its queue (unsignaled sends included), and an error completion,
 * whose ibv_wc.opcode is undefined, still reports the right xp opcode.
 * The rings also enforce max_send_wr/max_recv_wr, so the CQ, sized for
 * both, cannot overflow.
 *
 * Threads: as transport.h says; nothing here is shared between connections
 * except the read-only device context librdmacm keeps per device and one
 * atomic counter spreading CQs over completion vectors.
 */
#include "transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../common/log.h"
#include "../common/util.h"

/*
 * Outstanding RDMA READs per QP, each direction. ConnectX parts advertise
 * 16; more only grows per-QP responder state on devices that allow it,
 * and READs beyond the limit simply wait in the send queue.
 */
#define XR_RD_ATOM_CAP 16
/* Ask for this much inline send data; fall back to none if refused. */
#define XR_INLINE_WANT 64
/* transport retries (lost packets, ACK timeouts) before IBV_WC_RETRY_EXC */
#define XR_RETRY_COUNT 7
/*
 * RNR retries. transport.h makes a SEND with no receive posted fatal for
 * the connection (XP_WC_RNR_ERR), as on tcp and iWARP. 7 would mean
 * "retry forever" and turn that into a silent hang; 6 retries at the CM's
 * minimum RNR timer (encoding 0: 655 ms) fail it after about 4 s, which
 * still rides over a receive that is merely reposted late.
 */
#define XR_RNR_RETRY 6
#define XR_LISTEN_BACKLOG 128
/* connect() timeout when the caller passes <= 0 */
#define XR_DEFAULT_TIMEOUT_MS 30000
/* Ack CQ events in batches: each ack takes a mutex in libibverbs. */
#define XR_CQ_ACK_BATCH 16
#define XR_POLL_BATCH 16
/* wr_id bit marking a receive; the rest is the sequence number */
#define XR_RECV_BIT (1ull << 63)
/*
 * IB CM reject reason for a reject issued by the remote consumer
 * (rdma_reject); anything else (no listener: "invalid service id", stale
 * connection, timeout) carries no private data of the peer's.
 */
#define XR_IB_CM_REJ_CONSUMER_DEFINED 28
#define XR_IB_CM_REJ_INVALID_SERVICE_ID 8 /* no listener on the port */

#define XR_NAME_MAX 80

struct xr_listener {
	struct xp_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char name[XR_NAME_MAX];
};

struct xr_mr {
	struct xp_mr base;
	struct ibv_mr *mr;
	struct xr_mr *prev, *next; /* conn's list, for destroy() */
};

/* What a send-queue sequence number stands for. */
struct xr_sq_slot {
	uint64_t wr_id;
	enum xp_wc_opcode opcode;
};

struct xr_conn {
	struct xp_conn base;
	struct xp_group grp; /* private group (compatibility path) */
	enum xp_conn_state state;
	bool cm_connected; /* accepted or established: rdma_disconnect owed */
	bool shut;	   /* xr_shutdown() ran */
	bool err_logged;   /* the one warning about a failed completion */
	bool iwarp;

	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int epfd;
	unsigned int cq_unacked; /* CQ events read but not yet acked */

	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_inline;
	uint8_t rd_atom;	/* our responder resources (device, capped) */
	uint8_t init_depth;	/* our initiator depth (device, capped) */
	uint8_t req_rd_atom;	/* passive: peer's responder resources */
	uint8_t req_init_depth; /* passive: peer's initiator depth */

	/* send queue: seq sq_head..sq_tail-1 outstanding */
	uint64_t sq_head, sq_tail;
	struct xr_sq_slot *sq_slot; /* [max_send_wr] */
	struct ibv_send_wr *swr;    /* [max_send_wr], built per post_send */
	struct ibv_sge *ssge;	    /* [max_send_wr] */
	/* receive queue: seq rq_head..rq_tail-1 outstanding */
	uint64_t rq_head, rq_tail;
	uint64_t *rq_wr_id; /* [max_recv_wr] */

	struct xr_mr *mrs;	/* registered and not yet deregistered */
	char name[XR_NAME_MAX]; /* "rdma 192.0.2.1:7441" */
};

static inline struct xr_conn *to_conn(struct xp_conn *xc)
{
	return container_of(xc, struct xr_conn, base);
}

static inline struct xr_conn *grp_to_conn(struct xp_group *g)
{
	return container_of(g, struct xr_conn, grp);
}

static inline struct xr_listener *to_listener(struct xp_listener *xl)
{
	return container_of(xl, struct xr_listener, base);
}

/* errno of a librdmacm/libibverbs call that returned -1/NULL, as -errno. */
static int neg_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/*
 * libibverbs calls return a positive errno (the documented convention),
 * -1 with errno set, or (some providers) a negative errno. Normalise.
 */
static int verbs_ret(int ret)
{
	if (ret > 0)
		return -ret;
	if (ret == -1)
		return neg_errno();
	return ret;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int ret = neg_errno();

		log_err("rdma: fcntl(O_NONBLOCK): %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/*
 * librdmacm refuses to work without a device and says so on stderr in its
 * own words; say it in ours first, with what to do about it.
 */
static int xr_check_devices(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (!list || n == 0) {
		log_err("no RDMA device: load rdma_rxe or siw (rdma link add "
			"NAME type rxe netdev DEV), or use tcp://");
		return -ENODEV;
	}
	return 0;
}

static void fmt_sockaddr(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "rdma %s:%u", ip, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "rdma [%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "rdma ?");
	}
}

/* Resolve host:port to one address (the first getaddrinfo gives). */
static int xr_resolve(const char *host, uint16_t port, bool passive,
		      struct sockaddr_storage *ss)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res;
	char serv[8];
	int rc;

	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	snprintf(serv, sizeof(serv), "%u", port);
	rc = getaddrinfo(host, serv, &hints, &res);
	if (rc) {
		log_err("rdma: getaddrinfo(%s): %s", host ? host : "*",
			gai_strerror(rc));
		return rc == EAI_SYSTEM ? neg_errno() : -EHOSTUNREACH;
	}
	memcpy(ss, res->ai_addr, MIN((size_t)res->ai_addrlen, sizeof(*ss)));
	freeaddrinfo(res);
	return 0;
}

/* ---- listener (listener thread) --------------------------------------- */

static int xr_bind_any(struct xr_listener *l, uint16_t port)
{
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6,
				   .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_ANY_INIT};
	struct sockaddr_in in = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_ANY)};

	/* [::] takes IPv4 too unless net.ipv6.bindv6only says otherwise */
	if (!rdma_bind_addr(l->id, (struct sockaddr *)&in6))
		return 0;
	log_debug("rdma: rdma_bind_addr([::]:%u): %s; trying 0.0.0.0", port,
		  strerror(errno));
	if (!rdma_bind_addr(l->id, (struct sockaddr *)&in))
		return 0;
	return neg_errno();
}

static int xr_listen(const char *host, uint16_t port, struct xp_listener **out)
{
	struct sockaddr_storage ss;
	struct xr_listener *l;
	int ret;

	ret = xr_check_devices();
	if (ret)
		return ret;
	if (host) {
		ret = xr_resolve(host, port, true, &ss);
		if (ret)
			return ret;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.ops = &xp_rdma_ops;
	snprintf(l->name, sizeof(l->name), "rdma %s:%u", host ? host : "*",
		 port);

	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		ret = neg_errno();
		log_err("rdma: rdma_create_event_channel: %s (is rdma_ucm "
			"loaded?)",
			strerror(-ret));
		goto out_free;
	}
	ret = set_nonblock(l->ch->fd);
	if (ret)
		goto out_destroy_channel;
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		ret = neg_errno();
		log_err("rdma: rdma_create_id: %s", strerror(-ret));
		goto out_destroy_channel;
	}
	if (host)
		ret = rdma_bind_addr(l->id, (struct sockaddr *)&ss)
			  ? neg_errno()
			  : 0;
	else
		ret = xr_bind_any(l, port);
	if (ret) {
		log_err("rdma: rdma_bind_addr(%s): %s", l->name,
			strerror(-ret));
		goto out_destroy_id;
	}
	if (rdma_listen(l->id, XR_LISTEN_BACKLOG)) {
		ret = neg_errno();
		log_err("rdma: rdma_listen(%s): %s", l->name, strerror(-ret));
		goto out_destroy_id;
	}
	log_info("listening on %s", l->name);
	*out = &l->base;
	return 0;

out_destroy_id:
	rdma_destroy_id(l->id);
out_destroy_channel:
	rdma_destroy_event_channel(l->ch);
out_free:
	free(l);
	return ret;
}

/*
 * Requests not yet taken by get_request() are destroyed with the listening
 * id (the kernel rejects them). Accepted connections live on: their ids
 * were migrated to channels of their own.
 */
static void xr_listener_destroy(struct xp_listener *xl)
{
	struct xr_listener *l;

	if (!xl)
		return;
	l = to_listener(xl);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

static int xr_listener_fd(struct xp_listener *xl)
{
	return to_listener(xl)->ch->fd;
}

/* ---- connection setup and teardown ------------------------------------ */

static struct xr_conn *xr_conn_alloc(const struct xp_conn_attr *attr)
{
	struct xr_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base.ops = &xp_rdma_ops;
	c->grp.ops = &xp_rdma_ops;
	c->epfd = -1;
	c->max_send_wr = attr->max_send_wr;
	c->max_recv_wr = attr->max_recv_wr;
	c->sq_slot = calloc(attr->max_send_wr, sizeof(*c->sq_slot));
	c->swr = calloc(attr->max_send_wr, sizeof(*c->swr));
	c->ssge = calloc(attr->max_send_wr, sizeof(*c->ssge));
	c->rq_wr_id = calloc(attr->max_recv_wr, sizeof(*c->rq_wr_id));
	if (!c->sq_slot || !c->swr || !c->ssge || !c->rq_wr_id) {
		free(c->sq_slot);
		free(c->swr);
		free(c->ssge);
		free(c->rq_wr_id);
		free(c);
		return NULL;
	}
	return c;
}

static void xr_conn_free(struct xr_conn *c)
{
	free(c->sq_slot);
	free(c->swr);
	free(c->ssge);
	free(c->rq_wr_id);
	free(c);
}

static int xr_check_attr(const struct xp_conn_attr *attr)
{
	if (!attr || !attr->max_send_wr || !attr->max_recv_wr ||
	    attr->max_send_wr > INT32_MAX / 2 ||
	    attr->max_recv_wr > INT32_MAX / 2) {
		log_err("rdma: invalid connection attributes");
		return -EINVAL;
	}
	return 0;
}

static int xr_epoll_add(int epfd, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int ret = neg_errno();

		log_err("rdma: epoll_ctl(ADD): %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/*
 * Create PD, completion channel, CQ, QP and the epoll fd for c->id, whose
 * route is resolved (active side) or which came from a request (passive
 * side). c->ch must exist. All or nothing.
 */
static int xr_setup_queue(struct xr_conn *c, const struct xp_conn_attr *attr)
{
	static unsigned int next_vector;
	struct ibv_context *verbs = c->id->verbs;
	struct ibv_qp_init_attr qa;
	struct ibv_device_attr da;
	uint32_t cqe = attr->max_send_wr + attr->max_recv_wr;
	int vector, ret;

	if (!verbs) {
		log_err("%s: no device bound to the cm id", c->name);
		return -ENODEV;
	}
	ret = verbs_ret(ibv_query_device(verbs, &da));
	if (ret) {
		log_err("%s: ibv_query_device: %s", c->name, strerror(-ret));
		return ret;
	}
	if (attr->max_send_wr > (uint32_t)da.max_qp_wr ||
	    attr->max_recv_wr > (uint32_t)da.max_qp_wr ||
	    cqe > (uint32_t)da.max_cqe) {
		log_err("%s: queue depth %u/%u exceeds device %s limits "
			"(max_qp_wr %d, max_cqe %d)",
			c->name, attr->max_send_wr, attr->max_recv_wr,
			ibv_get_device_name(verbs->device), da.max_qp_wr,
			da.max_cqe);
		return -EINVAL;
	}
	c->rd_atom = (uint8_t)MIN(MAX(da.max_qp_rd_atom, 0), XR_RD_ATOM_CAP);
	c->init_depth =
	    (uint8_t)MIN(MAX(da.max_qp_init_rd_atom, 0), XR_RD_ATOM_CAP);
	c->iwarp = verbs->device->transport_type == IBV_TRANSPORT_IWARP;

	c->pd = ibv_alloc_pd(verbs);
	if (!c->pd) {
		ret = neg_errno();
		log_err("%s: ibv_alloc_pd: %s", c->name, strerror(-ret));
		return ret;
	}
	c->cc = ibv_create_comp_channel(verbs);
	if (!c->cc) {
		ret = neg_errno();
		log_err("%s: ibv_create_comp_channel: %s", c->name,
			strerror(-ret));
		goto out_dealloc_pd;
	}
	ret = set_nonblock(c->cc->fd);
	if (ret)
		goto out_destroy_comp_channel;
	/* spread connections over the device's interrupt vectors */
	vector =
	    verbs->num_comp_vectors > 0
		? (int)(__atomic_fetch_add(&next_vector, 1, __ATOMIC_RELAXED) %
			(unsigned int)verbs->num_comp_vectors)
		: 0;
	c->cq = ibv_create_cq(verbs, (int)cqe, c, c->cc, vector);
	if (!c->cq) {
		ret = neg_errno();
		log_err("%s: ibv_create_cq(%u): %s", c->name, cqe,
			strerror(-ret));
		goto out_destroy_comp_channel;
	}
	ret = verbs_ret(ibv_req_notify_cq(c->cq, 0));
	if (ret) {
		log_err("%s: ibv_req_notify_cq: %s", c->name, strerror(-ret));
		goto out_destroy_cq;
	}

	memset(&qa, 0, sizeof(qa));
	qa.qp_context = c;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = attr->max_send_wr;
	qa.cap.max_recv_wr = attr->max_recv_wr;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = XR_INLINE_WANT;
	if (rdma_create_qp(c->id, c->pd, &qa)) {
		log_debug("%s: rdma_create_qp with %u bytes inline: %s; "
			  "retrying without",
			  c->name, XR_INLINE_WANT, strerror(errno));
		qa.cap.max_send_wr = attr->max_send_wr;
		qa.cap.max_recv_wr = attr->max_recv_wr;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(c->id, c->pd, &qa)) {
			ret = neg_errno();
			log_err("%s: rdma_create_qp(%u/%u): %s", c->name,
				attr->max_send_wr, attr->max_recv_wr,
				strerror(-ret));
			goto out_destroy_cq;
		}
	}
	c->qp = c->id->qp;
	c->max_inline = qa.cap.max_inline_data;

	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0) {
		ret = neg_errno();
		log_err("%s: epoll_create1: %s", c->name, strerror(-ret));
		goto out_destroy_qp;
	}
	ret = xr_epoll_add(c->epfd, c->cc->fd);
	if (ret)
		goto out_close_epoll;
	ret = xr_epoll_add(c->epfd, c->ch->fd);
	if (ret)
		goto out_close_epoll;
	return 0;

out_close_epoll:
	close(c->epfd);
	c->epfd = -1;
out_destroy_qp:
	rdma_destroy_qp(c->id);
	c->qp = NULL;
out_destroy_cq:
	ibv_destroy_cq(c->cq);
	c->cq = NULL;
out_destroy_comp_channel:
	ibv_destroy_comp_channel(c->cc);
	c->cc = NULL;
out_dealloc_pd:
	ibv_dealloc_pd(c->pd);
	c->pd = NULL;
	return ret;
}

/*
 * Undo xr_setup_queue() and every registration made since. The QP goes
 * first so the HCA stops touching memory before anything else is freed.
 */
static void xr_teardown_queue(struct xr_conn *c)
{
	int ret;

	rdma_destroy_qp(c->id);
	c->qp = NULL;
	if (c->cq_unacked)
		ibv_ack_cq_events(c->cq, c->cq_unacked);
	c->cq_unacked = 0;
	ret = verbs_ret(ibv_destroy_cq(c->cq));
	if (ret)
		log_warn("%s: ibv_destroy_cq: %s", c->name, strerror(-ret));
	ret = verbs_ret(ibv_destroy_comp_channel(c->cc));
	if (ret)
		log_warn("%s: ibv_destroy_comp_channel: %s", c->name,
			 strerror(-ret));
	while (c->mrs) {
		struct xr_mr *m = c->mrs;

		c->mrs = m->next;
		ret = verbs_ret(ibv_dereg_mr(m->mr));
		if (ret)
			log_warn("%s: ibv_dereg_mr: %s", c->name,
				 strerror(-ret));
		free(m);
	}
	ret = verbs_ret(ibv_dealloc_pd(c->pd));
	if (ret)
		log_warn("%s: ibv_dealloc_pd: %s", c->name, strerror(-ret));
	close(c->epfd);
	c->epfd = -1;
}

/*
 * Move to XP_CONN_ERROR and make sure the QP flushes: rdma_disconnect
 * tells the peer (DREQ on IB/RoCE, FIN on iWARP) and, on IB, moves the QP
 * to error; the explicit modify covers iWARP (where rdma_disconnect only
 * asks for SQD) and connections never accepted. Idempotent.
 */
static void xr_shutdown(struct xr_conn *c)
{
	struct ibv_qp_attr qpa = {.qp_state = IBV_QPS_ERR};
	int ret;

	c->state = XP_CONN_ERROR;
	if (c->shut)
		return;
	c->shut = true;
	if (c->cm_connected && rdma_disconnect(c->id))
		log_debug("%s: rdma_disconnect: %s", c->name, strerror(errno));
	if (c->qp) {
		ret = verbs_ret(ibv_modify_qp(c->qp, &qpa, IBV_QP_STATE));
		if (ret)
			log_debug("%s: ibv_modify_qp(ERR): %s", c->name,
				  strerror(-ret));
	}
}

/* ---- passive side (listener thread until handed over) ----------------- */

/*
 * Turn a CONNECT_REQUEST (already acked; id is the new cm id) into a
 * connection. On failure the request is rejected and the id destroyed.
 */
static int xr_take_request(struct xr_listener *l, struct rdma_cm_id *id,
			   uint8_t peer_rd_atom, uint8_t peer_init_depth,
			   const struct xp_conn_attr *attr,
			   struct xr_conn **out)
{
	struct xr_conn *c;
	int ret;

	ret = xr_check_attr(attr);
	if (ret)
		goto out_reject;
	c = xr_conn_alloc(attr);
	if (!c) {
		ret = -ENOMEM;
		log_err("%s: out of memory for a connection", l->name);
		goto out_reject;
	}
	c->id = id;
	id->context = c;
	fmt_sockaddr(rdma_get_peer_addr(id), c->name, sizeof(c->name));
	c->req_rd_atom = peer_rd_atom;
	c->req_init_depth = peer_init_depth;

	c->ch = rdma_create_event_channel();
	if (!c->ch) {
		ret = neg_errno();
		log_err("%s: rdma_create_event_channel: %s", c->name,
			strerror(-ret));
		goto out_free_conn;
	}
	ret = set_nonblock(c->ch->fd);
	if (ret)
		goto out_destroy_id;
	/*
	 * From here every event of this id (ESTABLISHED, DISCONNECTED...)
	 * is queued on c->ch and read by whichever thread owns c.
	 */
	if (rdma_migrate_id(id, c->ch)) {
		ret = neg_errno();
		log_err("%s: rdma_migrate_id: %s", c->name, strerror(-ret));
		goto out_destroy_id;
	}
	ret = xr_setup_queue(c, attr);
	if (ret)
		goto out_destroy_id;
	c->state = XP_CONN_REQUESTED;
	*out = c;
	return 0;

out_destroy_id:
	/* the id may live on c->ch by now: it goes before its channel */
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(c->ch);
	xr_conn_free(c);
	return ret;
out_free_conn:
	xr_conn_free(c);
out_reject:
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
	return ret;
}

/* An event on the listener's channel that is not a request. */
static void xr_listener_event(struct xr_listener *l, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		log_warn("%s: RDMA device removed under the listener", l->name);
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		log_info("%s: address change", l->name);
		break;
	default:
		log_debug("%s: ignoring %s (status %d)", l->name,
			  rdma_event_str(ev->event), ev->status);
		break;
	}
}

/*
 * Listener thread. Reads the listener channel without blocking. On IB and
 * RoCE the request's private data arrives zero-padded to the CM's fixed
 * size, so *priv_len is XP_PRIV_MAX there; iWARP gives the exact length.
 * A request that cannot be set up is rejected (no private data) and its
 * error returned; the listener stays usable.
 */
static int xr_get_request(struct xp_listener *xl,
			  const struct xp_conn_attr *attr, struct xp_conn **out,
			  void *priv, size_t *priv_len)
{
	struct xr_listener *l = to_listener(xl);
	uint8_t data[XP_PRIV_MAX];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint8_t rd_atom, init_depth;
	struct xr_conn *c;
	size_t n;
	int ret;

	for (;;) {
		if (rdma_get_cm_event(l->ch, &ev)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			ret = neg_errno();
			log_err("%s: rdma_get_cm_event: %s", l->name,
				strerror(-ret));
			return ret;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		xr_listener_event(l, ev);
		rdma_ack_cm_event(ev);
	}

	/* the event owns the private data: copy out before the ack */
	id = ev->id;
	n = 0;
	if (ev->param.conn.private_data) {
		n = MIN((size_t)ev->param.conn.private_data_len, sizeof(data));
		memcpy(data, ev->param.conn.private_data, n);
	}
	rd_atom = ev->param.conn.responder_resources;
	init_depth = ev->param.conn.initiator_depth;
	rdma_ack_cm_event(ev);

	ret = xr_take_request(l, id, rd_atom, init_depth, attr, &c);
	if (ret)
		return ret;
	if (priv && n)
		memcpy(priv, data, n);
	if (priv_len)
		*priv_len = n;
	log_debug("%s: connection request", c->name);
	*out = &c->base;
	return 0;
}

/*
 * Owner thread. The QP is ready to send and receive when rdma_accept
 * returns (librdmacm moves it to RTR and RTS first), so the connection is
 * CONNECTED now; the ESTABLISHED event that follows on c->ch only
 * confirms it, and a failure to establish (CONNECT_ERROR, no RTU) moves
 * it to ERROR in poll().
 */
static int xr_accept(struct xp_conn *xc, const void *priv, size_t priv_len)
{
	struct xr_conn *c = to_conn(xc);
	struct rdma_conn_param p;
	int ret;

	if (c->state != XP_CONN_REQUESTED)
		return -EINVAL;
	if (priv_len > XP_PRIV_MAX)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	p.private_data = priv_len ? priv : NULL;
	p.private_data_len = (uint8_t)priv_len;
	/* our READ responder depth to its READ issue depth, and back */
	p.responder_resources = MIN(c->rd_atom, c->req_init_depth);
	p.initiator_depth = MIN(c->init_depth, c->req_rd_atom);
	p.retry_count = XR_RETRY_COUNT;
	p.rnr_retry_count = XR_RNR_RETRY;
	if (rdma_accept(c->id, &p)) {
		ret = neg_errno();
		log_err("%s: rdma_accept: %s", c->name, strerror(-ret));
		xr_shutdown(c);
		return ret;
	}
	c->cm_connected = true;
	c->state = XP_CONN_CONNECTED;
	log_info("%s: accepted", c->name);
	return 0;
}

static void xr_destroy(struct xp_conn *xc);

static void xr_reject(struct xp_conn *xc, const void *priv, size_t priv_len)
{
	struct xr_conn *c = to_conn(xc);

	if (priv_len > XP_PRIV_MAX)
		priv_len = XP_PRIV_MAX;
	if (c->state == XP_CONN_REQUESTED &&
	    rdma_reject(c->id, priv_len ? priv : NULL, (uint8_t)priv_len))
		log_warn("%s: rdma_reject: %s", c->name, strerror(errno));
	/* nothing was connected: destroy must not disconnect */
	c->state = XP_CONN_ERROR;
	c->shut = true;
	xr_destroy(xc);
}

/* ---- active side (caller's thread) ------------------------------------ */

/*
 * Wait on c->ch for the event that completes the current step of
 * connect(). Other outcomes become the errors transport.h lists.
 */
static int xr_wait_event(struct xr_conn *c, enum rdma_cm_event_type want,
			 uint64_t deadline, void *rej, size_t *rej_len)
{
	struct rdma_cm_event *ev;
	struct pollfd pfd = {.fd = c->ch->fd, .events = POLLIN};
	int ret, status;

	for (;;) {
		if (rdma_get_cm_event(c->ch, &ev)) {
			uint64_t now = now_ms();

			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				ret = neg_errno();
				log_err("%s: rdma_get_cm_event: %s", c->name,
					strerror(-ret));
				return ret;
			}
			if (now >= deadline) {
				log_err("%s: connect timed out (at %s)",
					c->name, rdma_event_str(want));
				return -ETIMEDOUT;
			}
			ret =
			    poll(&pfd, 1, (int)MIN(deadline - now, INT32_MAX));
			if (ret < 0 && errno != EINTR) {
				ret = neg_errno();
				log_err("%s: poll: %s", c->name,
					strerror(-ret));
				return ret;
			}
			continue;
		}
		status = ev->status;
		if (ev->event == want) {
			rdma_ack_cm_event(ev);
			return 0;
		}
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_ERROR:
			log_err("%s: address resolution failed: %s", c->name,
				strerror(status < 0 ? -status : EHOSTUNREACH));
			ret = -EHOSTUNREACH;
			break;
		case RDMA_CM_EVENT_ROUTE_ERROR:
			log_err("%s: route resolution failed: %s", c->name,
				strerror(status < 0 ? -status : ENETUNREACH));
			ret = -ENETUNREACH;
			break;
		case RDMA_CM_EVENT_UNREACHABLE:
			log_err("%s: peer unreachable: %s", c->name,
				strerror(status < 0 ? -status : EHOSTUNREACH));
			ret = -EHOSTUNREACH;
			break;
		case RDMA_CM_EVENT_REJECTED: {
			const struct rdma_conn_param *cp = &ev->param.conn;
			bool consumer;

			/*
			 * IB/RoCE: only the consumer-defined reason carries
			 * the peer's data (the REJ always has a private data
			 * area). iWARP: an MPA reject has data, a TCP RST not.
			 */
			if (c->id->verbs &&
			    c->id->verbs->device->transport_type ==
				IBV_TRANSPORT_IB)
				consumer =
				    status == XR_IB_CM_REJ_CONSUMER_DEFINED;
			else
				consumer = cp->private_data_len > 0;
			if (consumer && cp->private_data && rej && rej_len) {
				size_t n = MIN((size_t)cp->private_data_len,
					       (size_t)XP_PRIV_MAX);

				memcpy(rej, cp->private_data, n);
				*rej_len = n;
			}
			if (consumer)
				log_info("%s: connection rejected by the peer",
					 c->name);
			else if (status == XR_IB_CM_REJ_INVALID_SERVICE_ID)
				log_warn("%s: connection refused: nothing "
					 "listens on that port",
					 c->name);
			else
				log_warn("%s: connection refused (reason %d)",
					 c->name, status);
			ret = -ECONNREFUSED;
			break;
		}
		case RDMA_CM_EVENT_CONNECT_ERROR:
			log_err("%s: connection failed: status %d", c->name,
				status);
			ret = -ECONNABORTED;
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			log_err("%s: RDMA device removed", c->name);
			ret = -ENODEV;
			break;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			rdma_ack_cm_event(ev);
			continue;
		default:
			log_err("%s: unexpected %s (status %d) waiting for %s",
				c->name, rdma_event_str(ev->event), status,
				rdma_event_str(want));
			ret = -EPROTO;
			break;
		}
		rdma_ack_cm_event(ev);
		return ret;
	}
}

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 1 : (int)MIN(deadline - now, INT32_MAX);
}

static int xr_connect(const char *host, uint16_t port,
		      const struct xp_conn_attr *attr, const void *priv,
		      size_t priv_len, int timeout_ms, struct xp_conn **out,
		      void *rej, size_t *rej_len)
{
	struct sockaddr_storage dst;
	struct rdma_conn_param p;
	struct xr_conn *c;
	uint64_t deadline;
	int ret;

	if (rej_len)
		*rej_len = 0;
	if (priv_len > XP_PRIV_MAX || !host)
		return -EINVAL;
	ret = xr_check_attr(attr);
	if (ret)
		return ret;
	ret = xr_check_devices();
	if (ret)
		return ret;
	if (timeout_ms <= 0)
		timeout_ms = XR_DEFAULT_TIMEOUT_MS;
	deadline = now_ms() + (uint64_t)timeout_ms;
	ret = xr_resolve(host, port, false, &dst);
	if (ret)
		return ret;

	c = xr_conn_alloc(attr);
	if (!c)
		return -ENOMEM;
	fmt_sockaddr((struct sockaddr *)&dst, c->name, sizeof(c->name));

	c->ch = rdma_create_event_channel();
	if (!c->ch) {
		ret = neg_errno();
		log_err("%s: rdma_create_event_channel: %s (is rdma_ucm "
			"loaded?)",
			c->name, strerror(-ret));
		goto out_free_conn;
	}
	ret = set_nonblock(c->ch->fd);
	if (ret)
		goto out_destroy_channel;
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP)) {
		ret = neg_errno();
		log_err("%s: rdma_create_id: %s", c->name, strerror(-ret));
		goto out_destroy_channel;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst,
			      remaining_ms(deadline))) {
		ret = neg_errno();
		log_err("%s: rdma_resolve_addr: %s", c->name, strerror(-ret));
		if (ret == -ENODEV || ret == -EADDRNOTAVAIL)
			ret = -EHOSTUNREACH;
		goto out_destroy_id;
	}
	ret =
	    xr_wait_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, NULL, NULL);
	if (ret)
		goto out_destroy_id;
	if (rdma_resolve_route(c->id, remaining_ms(deadline))) {
		ret = neg_errno();
		log_err("%s: rdma_resolve_route: %s", c->name, strerror(-ret));
		goto out_destroy_id;
	}
	ret = xr_wait_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, NULL,
			    NULL);
	if (ret)
		goto out_destroy_id;
	/* the resolved peer address (port included) names it from now on */
	fmt_sockaddr(rdma_get_peer_addr(c->id), c->name, sizeof(c->name));

	ret = xr_setup_queue(c, attr);
	if (ret)
		goto out_destroy_id;

	memset(&p, 0, sizeof(p));
	p.private_data = priv_len ? priv : NULL;
	p.private_data_len = (uint8_t)priv_len;
	p.responder_resources = c->rd_atom;
	p.initiator_depth = c->init_depth;
	p.retry_count = XR_RETRY_COUNT;
	p.rnr_retry_count = XR_RNR_RETRY;
	if (rdma_connect(c->id, &p)) {
		ret = neg_errno();
		log_err("%s: rdma_connect: %s", c->name, strerror(-ret));
		goto out_teardown_queue;
	}
	/* librdmacm moves the QP to RTR/RTS when it reads the reply */
	ret =
	    xr_wait_event(c, RDMA_CM_EVENT_ESTABLISHED, deadline, rej, rej_len);
	if (ret)
		goto out_teardown_queue;
	c->cm_connected = true;
	c->state = XP_CONN_CONNECTED;
	log_info("%s: connected", c->name);
	*out = &c->base;
	return 0;

out_teardown_queue:
	xr_teardown_queue(c);
out_destroy_id:
	rdma_destroy_id(c->id);
out_destroy_channel:
	rdma_destroy_event_channel(c->ch);
out_free_conn:
	xr_conn_free(c);
	return ret;
}

/* ---- connection ops (owner thread) ------------------------------------ */

static void xr_destroy(struct xp_conn *xc)
{
	struct xr_conn *c;

	if (!xc)
		return;
	c = to_conn(xc);
	xr_shutdown(c);
	xr_teardown_queue(c);
	rdma_destroy_id(c->id);
	rdma_destroy_event_channel(c->ch);
	xr_conn_free(c);
}

static void xr_disconnect(struct xp_conn *xc)
{
	xr_shutdown(to_conn(xc));
}

static enum xp_conn_state xr_state(struct xp_conn *xc)
{
	return to_conn(xc)->state;
}

static const char *xr_peer_name(struct xp_conn *xc)
{
	return to_conn(xc)->name;
}

static int xr_fd(struct xp_conn *xc)
{
	return to_conn(xc)->epfd;
}

static int xr_arm(struct xp_conn *xc)
{
	struct xr_conn *c = to_conn(xc);
	int ret = verbs_ret(ibv_req_notify_cq(c->cq, 0));

	if (ret)
		log_err("%s: ibv_req_notify_cq: %s", c->name, strerror(-ret));
	return ret;
}

/* Drain this connection's rdma_cm events; never blocks. */
static void xr_cm_events(struct xr_conn *c)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	int status;

	while (!rdma_get_cm_event(c->ch, &ev)) {
		type = ev->event;
		status = ev->status;
		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			log_debug("%s: established", c->name);
			if (c->state == XP_CONN_REQUESTED)
				c->state = XP_CONN_CONNECTED;
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (c->shut)
				log_debug("%s: disconnected", c->name);
			else
				log_info("%s: disconnected by the peer",
					 c->name);
			xr_shutdown(c);
			break;
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			log_debug("%s: timewait exit", c->name);
			xr_shutdown(c);
			break;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			log_info("%s: address change", c->name);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			log_warn("%s: RDMA device removed", c->name);
			xr_shutdown(c);
			break;
		default:
			/* CONNECT_ERROR, UNREACHABLE, REJECTED (no RTU) */
			log_warn("%s: %s (status %d)", c->name,
				 rdma_event_str(type), status);
			xr_shutdown(c);
			break;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && !c->shut) {
		log_err("%s: rdma_get_cm_event: %s", c->name, strerror(errno));
		xr_shutdown(c);
	}
}

/* Read and ack CQ notifications; never blocks. */
static void xr_cq_events(struct xr_conn *c)
{
	struct ibv_cq *cq;
	void *ctx;

	while (!ibv_get_cq_event(c->cc, &cq, &ctx)) {
		if (++c->cq_unacked >= XR_CQ_ACK_BATCH) {
			ibv_ack_cq_events(c->cq, c->cq_unacked);
			c->cq_unacked = 0;
		}
	}
}

/*
 * Service whatever the epoll fd says is pending: cm events first (a
 * DISCONNECTED flushes the QP, and the flushes are then polled), then CQ
 * notifications. One non-blocking epoll_wait, so that an idle poll() costs
 * one system call and a busy one none.
 */
static void xr_service(struct xr_conn *c)
{
	struct epoll_event ev[2];
	bool cm = false, cq = false;
	int n;

	n = epoll_wait(c->epfd, ev, 2, 0);
	for (int i = 0; i < n; i++) {
		if (ev[i].data.fd == c->ch->fd)
			cm = true;
		else
			cq = true;
	}
	if (cm)
		xr_cm_events(c);
	if (cq)
		xr_cq_events(c);
}

static enum xp_wc_status xr_wc_status(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return XP_WC_SUCCESS;
	case IBV_WC_WR_FLUSH_ERR:
		return XP_WC_FLUSH_ERR;
	case IBV_WC_REM_ACCESS_ERR:
		return XP_WC_REM_ACCESS_ERR;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_LOC_QP_OP_ERR:
	case IBV_WC_LOC_EEC_OP_ERR:
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_LOC_RDD_VIOL_ERR:
		return XP_WC_LOC_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return XP_WC_RNR_ERR;
	default:
		return XP_WC_FATAL;
	}
}

static const char *xr_wc_opname(enum xp_wc_opcode op)
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
		break;
	}
	return "?";
}

/* The first failed completion says why the connection failed. */
static void xr_wc_failed(struct xr_conn *c, const struct ibv_wc *iw,
			 const struct xp_wc *w)
{
	if (!c->err_logged && c->state != XP_CONN_ERROR) {
		c->err_logged = true;
		if (iw->status == IBV_WC_WR_FLUSH_ERR)
			log_debug("%s: %s flushed", c->name,
				  xr_wc_opname(w->opcode));
		else
			log_warn("%s: %s failed: %s (vendor error 0x%x)",
				 c->name, xr_wc_opname(w->opcode),
				 ibv_wc_status_str(iw->status), iw->vendor_err);
	}
	xr_shutdown(c);
}

static void xr_translate(struct xr_conn *c, const struct ibv_wc *iw,
			 struct xp_wc *w)
{
	uint64_t seq;

	if (iw->wr_id & XR_RECV_BIT) {
		seq = iw->wr_id & ~XR_RECV_BIT;
		w->wr_id = c->rq_wr_id[seq % c->max_recv_wr];
		w->opcode = XP_WC_RECV;
		c->rq_head = seq + 1;
	} else {
		const struct xr_sq_slot *s;

		seq = iw->wr_id;
		s = &c->sq_slot[seq % c->max_send_wr];
		w->wr_id = s->wr_id;
		w->opcode = s->opcode;
		/* RC: this retires every earlier (unsignaled) request too */
		c->sq_head = seq + 1;
	}
	w->status = xr_wc_status(iw->status);
	w->byte_len = iw->status == IBV_WC_SUCCESS ? iw->byte_len : 0;
	if (unlikely(iw->status != IBV_WC_SUCCESS))
		xr_wc_failed(c, iw, w);
}

static int xr_poll_cq(struct xr_conn *c, struct xp_wc *wc, int max)
{
	struct ibv_wc iw[XR_POLL_BATCH];
	int done = 0;

	while (done < max) {
		int want = MIN(max - done, XR_POLL_BATCH);
		int n = ibv_poll_cq(c->cq, want, iw);

		if (unlikely(n < 0)) {
			log_err("%s: ibv_poll_cq failed", c->name);
			xr_shutdown(c);
			return done ? done : -EIO;
		}
		for (int i = 0; i < n; i++)
			xr_translate(c, &iw[i], &wc[done + i]);
		done += n;
		if (n < want)
			break;
	}
	return done;
}

/*
 * Completions first: a busy connection polls the CQ without a system
 * call. Only when it is empty are the cm and comp channels serviced, and
 * the CQ polled again for what that produced (flushes after a disconnect,
 * completions that raced with arm()).
 */
static int xr_poll(struct xp_conn *xc, struct xp_wc *wc, int max)
{
	struct xr_conn *c = to_conn(xc);
	int n;

	if (max <= 0)
		return 0;
	n = xr_poll_cq(c, wc, max);
	if (n)
		return n;
	xr_service(c);
	return xr_poll_cq(c, wc, max);
}

static int xr_reg_mr(struct xp_group *g, void *addr, size_t len, int access,
		     struct xp_mr **out)
{
	struct xr_conn *c = grp_to_conn(g);
	int flags = 0, ret;
	struct xr_mr *m;

	if (access & XP_ACCESS_LOCAL_WRITE)
		flags |= IBV_ACCESS_LOCAL_WRITE;
	/* verbs: remote write requires local write */
	if (access & XP_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	if (access & XP_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	/*
	 * iWARP places RDMA READ responses as tagged writes: a READ sink
	 * must be remotely writable. The rkey is valid on this connection
	 * only (own PD), so this widens nothing beyond its peer.
	 */
	if (c->iwarp && (flags & IBV_ACCESS_LOCAL_WRITE))
		flags |= IBV_ACCESS_REMOTE_WRITE;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->mr = ibv_reg_mr(c->pd, addr, len, flags);
	if (!m->mr) {
		ret = neg_errno();
		log_err("%s: ibv_reg_mr(%zu bytes): %s", c->name, len,
			strerror(-ret));
		free(m);
		return ret;
	}
	m->base.addr = addr;
	m->base.length = len;
	m->base.lkey = m->mr->lkey;
	m->base.rkey = m->mr->rkey;
	m->base.access = access;
	m->base.group = g;
	m->next = c->mrs;
	if (c->mrs)
		c->mrs->prev = m;
	c->mrs = m;
	*out = &m->base;
	return 0;
}

static void xr_dereg_mr(struct xp_mr *xm)
{
	struct xr_mr *m = container_of(xm, struct xr_mr, base);
	struct xr_conn *c = grp_to_conn(xm->group);
	int ret;

	if (m->prev)
		m->prev->next = m->next;
	else
		c->mrs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	ret = verbs_ret(ibv_dereg_mr(m->mr));
	if (ret)
		log_warn("%s: ibv_dereg_mr: %s", c->name, strerror(-ret));
	free(m);
}

static struct xp_send_wr *nth_wr(struct xp_send_wr *wr, size_t n)
{
	while (n--)
		wr = wr->next;
	return wr;
}

/*
 * The whole chain goes to the HCA in one ibv_post_send (one doorbell),
 * built in the per-connection array: no allocation per call. Requests
 * that do not fit the send queue, or are malformed, end the chain there
 * with *bad pointing at them; those before are posted, as verbs does.
 */
static int xr_post_send(struct xp_conn *xc, struct xp_send_wr *wr,
			struct xp_send_wr **bad)
{
	struct xr_conn *c = to_conn(xc);
	uint64_t seq0 = c->sq_tail;
	struct xp_send_wr *w;
	struct ibv_send_wr *ibad;
	uint32_t n = 0;
	int ret = 0;

	if (unlikely(c->state != XP_CONN_CONNECTED)) {
		*bad = wr;
		return -ENOTCONN;
	}
	for (w = wr; w; w = w->next) {
		struct ibv_send_wr *iw = &c->swr[n];
		struct ibv_sge *sg = &c->ssge[n];
		struct xr_sq_slot *s;

		if (unlikely(c->sq_tail - c->sq_head >= c->max_send_wr)) {
			ret = -ENOMEM;
			break;
		}
		if (unlikely(w->sge.length && !w->sge.mr)) {
			ret = -EINVAL;
			break;
		}
		memset(iw, 0, sizeof(*iw));
		switch (w->opcode) {
		case XP_WR_SEND:
			iw->opcode = IBV_WR_SEND;
			break;
		case XP_WR_RDMA_WRITE:
			iw->opcode = IBV_WR_RDMA_WRITE;
			iw->wr.rdma.remote_addr = w->remote_addr;
			iw->wr.rdma.rkey = w->rkey;
			break;
		case XP_WR_RDMA_READ:
			iw->opcode = IBV_WR_RDMA_READ;
			iw->wr.rdma.remote_addr = w->remote_addr;
			iw->wr.rdma.rkey = w->rkey;
			break;
		default:
			ret = -EINVAL;
			break;
		}
		if (ret)
			break;
		if (w->sge.length) {
			sg->addr = (uintptr_t)w->sge.addr;
			sg->length = w->sge.length;
			sg->lkey = w->sge.mr->lkey;
			iw->sg_list = sg;
			iw->num_sge = 1;
		}
		if (w->flags & XP_SEND_SIGNALED)
			iw->send_flags |= IBV_SEND_SIGNALED;
		/* the payload is copied at post time; no lkey needed */
		if (w->opcode != XP_WR_RDMA_READ && w->sge.length &&
		    w->sge.length <= c->max_inline)
			iw->send_flags |= IBV_SEND_INLINE;
		s = &c->sq_slot[c->sq_tail % c->max_send_wr];
		s->wr_id = w->wr_id;
		s->opcode = w->opcode == XP_WR_SEND	    ? XP_WC_SEND
			    : w->opcode == XP_WR_RDMA_WRITE ? XP_WC_RDMA_WRITE
							    : XP_WC_RDMA_READ;
		iw->wr_id = c->sq_tail++;
		if (n)
			c->swr[n - 1].next = iw;
		n++;
	}
	if (n) {
		int rc;

		c->swr[n - 1].next = NULL;
		rc = ibv_post_send(c->qp, c->swr, &ibad);
		if (unlikely(rc)) {
			size_t idx = (size_t)(ibad - c->swr);

			if (idx >= n)
				idx = 0;
			c->sq_tail = seq0 + idx;
			ret = verbs_ret(rc);
			log_err("%s: ibv_post_send: %s", c->name,
				strerror(-ret));
			*bad = nth_wr(wr, idx);
			return ret;
		}
	}
	if (unlikely(ret)) {
		/* a full queue is the caller's flow control, not an error */
		if (ret == -ENOMEM)
			log_debug("%s: send queue full (%u outstanding)",
				  c->name, c->max_send_wr);
		else
			log_err("%s: malformed send request", c->name);
		*bad = w;
	}
	return ret;
}

/* Allowed from XP_CONN_REQUESTED on: receives go in before accept(). */
static int xr_post_recv(struct xp_conn *xc, uint64_t wr_id,
			const struct xp_sge *sge)
{
	struct xr_conn *c = to_conn(xc);
	struct ibv_recv_wr rw, *rbad;
	struct ibv_sge sg;
	int ret;

	if (unlikely(c->state == XP_CONN_ERROR))
		return -ENOTCONN;
	if (unlikely(c->rq_tail - c->rq_head >= c->max_recv_wr)) {
		log_debug("%s: receive queue full (%u outstanding)", c->name,
			  c->max_recv_wr);
		return -ENOMEM;
	}
	if (unlikely(!sge || (sge->length && !sge->mr)))
		return -EINVAL;
	memset(&rw, 0, sizeof(rw));
	if (sge->length) {
		sg.addr = (uintptr_t)sge->addr;
		sg.length = sge->length;
		sg.lkey = sge->mr->lkey;
		rw.sg_list = &sg;
		rw.num_sge = 1;
	}
	rw.wr_id = c->rq_tail | XR_RECV_BIT;
	c->rq_wr_id[c->rq_tail % c->max_recv_wr] = wr_id;
	ret = ibv_post_recv(c->qp, &rw, &rbad);
	if (unlikely(ret)) {
		ret = verbs_ret(ret);
		log_err("%s: ibv_post_recv: %s", c->name, strerror(-ret));
		return ret;
	}
	c->rq_tail++;
	return 0;
}

/* ---- groups and windows (first step: private groups only) ------------ */

static int xr_group_create(struct xp_group **out)
{
	return -ENOSYS;
}

static void xr_group_destroy(struct xp_group *g)
{
}

static int xr_group_fd(struct xp_group *g)
{
	return xr_fd(&grp_to_conn(g)->base);
}

static int xr_group_arm(struct xp_group *g)
{
	return xr_arm(&grp_to_conn(g)->base);
}

static int xr_group_poll(struct xp_group *g, struct xp_wc *wc, int max)
{
	struct xp_conn *xc = &grp_to_conn(g)->base;
	int n = xr_poll(xc, wc, max);

	for (int i = 0; i < n; i++) {
		wc[i].conn = xc;
		wc[i].flags = 0;
		wc[i].invalidated_rkey = 0;
	}
	return n;
}

static int xr_group_watch(struct xp_group *g, int fd, uint64_t cookie)
{
	return -ENOSYS;
}

static int xr_group_unwatch(struct xp_group *g, int fd)
{
	return -ENOSYS;
}

static struct xp_group *xr_conn_group(struct xp_conn *xc)
{
	return &to_conn(xc)->grp;
}

static int xr_group_get_request(struct xp_listener *xl, struct xp_group *g,
			   const struct xp_conn_attr *attr,
			   struct xp_conn **out, void *priv, size_t *priv_len)
{
	if (g)
		return -ENOSYS;
	return xr_get_request(xl, attr, out, priv, priv_len);
}

static int xr_group_connect(struct xp_group *g, const char *host,
			       uint16_t port, const struct xp_conn_attr *attr,
			       const void *priv, size_t priv_len, int timeout_ms,
			       struct xp_conn **out, void *rej, size_t *rej_len)
{
	if (g)
		return -ENOSYS;
	return xr_connect(host, port, attr, priv, priv_len, timeout_ms, out,
			 rej, rej_len);
}

static int xr_alloc_mw(struct xp_group *g, struct xp_mw **out)
{
	return -ENOSYS;
}

static void xr_dealloc_mw(struct xp_mw *mw)
{
}

const struct xp_ops xp_rdma_ops = {
    .name = "rdma",
    .listen = xr_listen,
    .listener_destroy = xr_listener_destroy,
    .listener_fd = xr_listener_fd,
    .get_request = xr_get_request,
    .accept = xr_accept,
    .reject = xr_reject,
    .connect = xr_connect,
    .destroy = xr_destroy,
    .disconnect = xr_disconnect,
    .state = xr_state,
    .peer_name = xr_peer_name,
    .conn_group = xr_conn_group,
    .group_create = xr_group_create,
    .group_destroy = xr_group_destroy,
    .group_fd = xr_group_fd,
    .group_arm = xr_group_arm,
    .group_poll = xr_group_poll,
    .group_watch = xr_group_watch,
    .group_unwatch = xr_group_unwatch,
    .group_get_request = xr_group_get_request,
    .group_connect = xr_group_connect,
    .alloc_mw = xr_alloc_mw,
    .dealloc_mw = xr_dealloc_mw,
    .reg_mr = xr_reg_mr,
    .dereg_mr = xr_dereg_mr,
    .post_send = xr_post_send,
    .post_recv = xr_post_recv,
};
