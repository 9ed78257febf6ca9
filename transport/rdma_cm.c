/* SPDX-License-Identifier: MIT */
/*
 * rdma_cm.c - the verbs transport: listener, passive and active connection
 * setup, rdma_cm events, connection teardown (see rdma_internal.h).
 */
#include "rdma_internal.h"

int xr_set_nonblock(int fd)
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
/* A non-blocking rdma_cm event channel, or NULL with errno set (logged). */
struct rdma_event_channel *xr_channel_create(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int ret;

	if (!ch) {
		log_err("rdma: rdma_create_event_channel: %s (is rdma_ucm "
			"loaded?)",
			strerror(errno));
		return NULL;
	}
	ret = xr_set_nonblock(ch->fd);
	if (ret) {
		rdma_destroy_event_channel(ch);
		errno = -ret;
		return NULL;
	}
	return ch;
}

int xr_check_devices(void)
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

int xr_listen(const char *host, uint16_t port, struct xp_listener **out)
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

	l->ch = xr_channel_create();
	if (!l->ch) {
		ret = neg_errno();
		goto out_free;
	}
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
 * Requests not yet taken by take_request() are destroyed with the
 * listening id (the kernel rejects them); taken ones are joined or
 * rejected before this (their ids are on l->ch until joined). Accepted
 * connections live on: their ids were migrated to channels of their own.
 */
void xr_listener_destroy(struct xp_listener *xl)
{
	struct xr_listener *l;

	if (!xl)
		return;
	l = to_listener(xl);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

int xr_listener_fd(struct xp_listener *xl)
{
	return to_listener(xl)->ch->fd;
}

/* ---- connection setup and teardown ------------------------------------ */

static void xr_conn_free(struct xr_conn *c)
{
	free(c->sq_slot);
	free(c->swr);
	free(c->aux);
	free(c->rq_wr_id);
	free(c);
}

/* The per-WR tables of c's queue, for attr. 0 or -ENOMEM. */
static int xr_conn_tables(struct xr_conn *c, const struct xp_conn_attr *attr)
{
	c->max_send_wr = attr->max_send_wr;
	c->max_recv_wr = attr->max_recv_wr;
	c->sq_slot = calloc(attr->max_send_wr, sizeof(*c->sq_slot));
	c->swr = calloc(attr->max_send_wr, sizeof(*c->swr));
	c->aux = calloc(attr->max_send_wr, sizeof(*c->aux));
	c->rq_wr_id = calloc(attr->max_recv_wr, sizeof(*c->rq_wr_id));
	if (!c->sq_slot || !c->swr || !c->aux || !c->rq_wr_id)
		return -ENOMEM; /* xr_conn_free() frees what there is */
	return 0;
}

/* A connection, with its tables for attr unless attr is NULL. */
static struct xr_conn *xr_conn_alloc(const struct xp_conn_attr *attr)
{
	struct xr_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base.ops = &xp_rdma_ops;
	if (attr && xr_conn_tables(c, attr)) {
		xr_conn_free(c);
		return NULL;
	}
	return c;
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

/*
 * Move to XP_CONN_ERROR and make sure the QP flushes: rdma_disconnect
 * tells the peer (DREQ on IB/RoCE, FIN on iWARP) and, on IB, moves the QP
 * to error; the explicit modify covers iWARP (where rdma_disconnect only
 * asks for SQD) and connections never accepted. Idempotent.
 */
void xr_shutdown(struct xr_conn *c)
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

/*
 * xr_shutdown() with the reason, kept if it is the first (conn_error()
 * gives it): the owner learns of the failure later, from a refused post
 * or a flush that says nothing of its cause.
 */
void xr_fail(struct xr_conn *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->why[0]) {
		va_start(ap, fmt);
		vsnprintf(c->why, sizeof(c->why), fmt, ap);
		va_end(ap);
	}
	xr_shutdown(c);
}

const char *xr_conn_error(struct xp_conn *xc)
{
	struct xr_conn *c = to_conn(xc);

	return c->why[0] ? c->why : NULL;
}

/* ---- passive side (listener thread until handed over) ----------------- */

/*
 * A taken CONNECT_REQUEST (already acked): the new cm id, still on the
 * listener's channel, and what the initiator asked for.
 */
struct xr_request {
	struct xp_request base;
	struct rdma_cm_id *id;
	uint8_t rd_atom, init_depth; /* the peer's responder/initiator depth */
	char name[XR_NAME_MAX];
};

static struct xr_request *to_xr_request(struct xp_request *r)
{
	return container_of(r, struct xr_request, base);
}

/*
 * Turn a request into a connection of group g (NULL: a private one),
 * moving its id onto g's channel. On failure the request is rejected and
 * the id destroyed.
 */
static int xr_take_request(struct xr_request *r, struct xr_group *g,
			   const struct xp_conn_attr *attr,
			   struct xr_conn **out)
{
	struct rdma_cm_id *id = r->id;
	struct xr_group *own = NULL;
	struct xr_conn *c;
	int ret;

	ret = attr ? xr_check_attr(attr) : 0;
	if (ret)
		goto out_reject;
	if (!g) {
		ret = xr_group_alloc(&own);
		if (ret)
			goto out_reject;
		g = own;
	}
	c = xr_conn_alloc(attr);
	if (!c) {
		ret = -ENOMEM;
		log_err("%s: out of memory for a connection", r->name);
		goto out_destroy_group;
	}
	c->id = id;
	memcpy(c->name, r->name, sizeof(c->name));
	c->req_rd_atom = r->rd_atom;
	c->req_init_depth = r->init_depth;
	ret = xr_group_bind_device(
	    g, id->verbs, attr ? attr->max_send_wr + attr->max_recv_wr : 0);
	if (ret)
		goto out_free_conn;
	ret = xr_conn_join(g, c);
	if (ret)
		goto out_free_conn;
	/*
	 * From here every event of this id (ESTABLISHED, DISCONNECTED...)
	 * is queued on the group's channel and read by the group's thread.
	 */
	id->context = c;
	if (rdma_migrate_id(id, g->ch)) {
		ret = neg_errno();
		log_err("%s: rdma_migrate_id: %s", c->name, strerror(-ret));
		goto out_leave_group;
	}
	ret = attr ? xr_setup_queue(c, attr) : 0; /* else setup_queue() */
	if (ret)
		goto out_leave_group;
	c->state = XP_CONN_REQUESTED;
	if (own)
		g->private_conn = c;
	*out = c;
	return 0;

out_leave_group:
	/* the id may live on g->ch by now: it goes before the channel */
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
	xr_conn_leave(c);
	xr_conn_free(c);
	if (own)
		xr_group_destroy(&own->base);
	return ret;
out_free_conn:
	xr_conn_free(c);
out_destroy_group:
	if (own)
		xr_group_destroy(&own->base);
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
 * The request's id stays on the listener's channel until it is joined
 * (rdma_migrate_id() then moves it, from the group's thread).
 */
int xr_take_request_op(struct xp_listener *xl, struct xp_request **out,
		       void *priv, size_t *priv_len)
{
	struct xr_listener *l = to_listener(xl);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct xr_request *r;
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
	id = ev->id;
	r = calloc(1, sizeof(*r));
	if (!r) {
		log_err("%s: out of memory for a connection request", l->name);
		rdma_reject(id, NULL, 0);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	r->base.ops = &xp_rdma_ops;
	r->id = id;
	fmt_sockaddr(rdma_get_peer_addr(r->id), r->name, sizeof(r->name));
	/* the event owns the private data: copy out before the ack */
	if (priv_len)
		*priv_len = 0;
	if (ev->param.conn.private_data && priv && priv_len) {
		*priv_len = MIN((size_t)ev->param.conn.private_data_len,
				(size_t)XP_PRIV_MAX);
		memcpy(priv, ev->param.conn.private_data, *priv_len);
	}
	r->rd_atom = ev->param.conn.responder_resources;
	r->init_depth = ev->param.conn.initiator_depth;
	rdma_ack_cm_event(ev);
	log_debug("%s: connection request", r->name);
	*out = &r->base;
	return 0;
}

const char *xr_request_peer_name(struct xp_request *xr)
{
	return to_xr_request(xr)->name;
}

/*
 * Any thread: the id has no context of ours yet and is destroyed here
 * (the listener's channel outlives it: see transport.h).
 */
void xr_request_reject(struct xp_request *xr, const void *priv, size_t priv_len)
{
	struct xr_request *r = to_xr_request(xr);

	if (priv_len > XP_PRIV_MAX)
		priv_len = XP_PRIV_MAX;
	if (rdma_reject(r->id, priv_len ? priv : NULL, (uint8_t)priv_len))
		log_warn("%s: rdma_reject: %s", r->name, strerror(errno));
	rdma_destroy_id(r->id);
	free(r);
}

/* g's thread: a request that cannot be set up is rejected (no data). */
int xr_request_join(struct xp_request *xr, struct xp_group *xg,
		    const struct xp_conn_attr *attr, struct xp_conn **out)
{
	struct xr_request *r = to_xr_request(xr);
	struct xr_conn *c;
	int ret;

	ret = xr_take_request(r, xg ? to_xr_group(xg) : NULL, attr, &c);
	free(r);
	if (ret)
		return ret;
	*out = &c->base;
	return 0;
}

/* Owner thread: the queue of a request taken without attr. */
int xr_setup_queue_op(struct xp_conn *xc, const struct xp_conn_attr *attr)
{
	struct xr_conn *c = to_conn(xc);
	int ret;

	if (c->state != XP_CONN_REQUESTED || c->qp || c->sq_slot)
		return -EINVAL;
	ret = xr_check_attr(attr);
	if (!ret)
		ret = xr_conn_tables(c, attr);
	if (!ret)
		ret = xr_setup_queue(c, attr);
	if (ret) { /* no tables without a queue: post() checks neither */
		free(c->sq_slot);
		free(c->swr);
		free(c->aux);
		free(c->rq_wr_id);
		c->sq_slot = NULL;
		c->swr = NULL;
		c->aux = NULL;
		c->rq_wr_id = NULL;
	}
	return ret;
}

/*
 * Owner thread. The QP is ready to send and receive when rdma_accept
 * returns (librdmacm moves it to RTR and RTS first), so the connection is
 * CONNECTED now; the ESTABLISHED event that follows on c->ch only
 * confirms it, and a failure to establish (CONNECT_ERROR, no RTU) moves
 * it to ERROR in poll().
 */
int xr_accept(struct xp_conn *xc, const void *priv, size_t priv_len)
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
		xr_fail(c, "rdma_accept: %s", strerror(-ret));
		return ret;
	}
	c->cm_connected = true;
	c->state = XP_CONN_CONNECTED;
	log_info("%s: accepted", c->name);
	return 0;
}

void xr_reject(struct xp_conn *xc, const void *priv, size_t priv_len)
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
 * rdma_get_cm_event() found nothing (errno says why): sleep on the
 * group's CM channel until it is readable or deadline (ms) has passed.
 * 0 (read again), or -errno (-ETIMEDOUT at the deadline).
 */
static int xr_cm_sleep(struct xr_conn *c, enum rdma_cm_event_type want,
		       uint64_t deadline)
{
	struct pollfd pfd = {.fd = c->g->ch->fd, .events = POLLIN};
	uint64_t now = now_ms();
	int ret;

	if (errno != EAGAIN && errno != EWOULDBLOCK) {
		ret = neg_errno();
		log_err("%s: rdma_get_cm_event: %s", c->name, strerror(-ret));
		return ret;
	}
	if (now >= deadline) {
		log_err("%s: connect timed out (at %s)", c->name,
			rdma_event_str(want));
		return -ETIMEDOUT;
	}
	ret = poll(&pfd, 1, (int)MIN(deadline - now, INT32_MAX));
	if (ret < 0 && errno != EINTR) {
		ret = neg_errno();
		log_err("%s: poll: %s", c->name, strerror(-ret));
		return ret;
	}
	return 0;
}

/*
 * A REJECTED event: the peer's private data into rej (when the reject is
 * the consumer's own), the reason logged. -ECONNREFUSED.
 */
static int xr_rejected(struct xr_conn *c, const struct rdma_cm_event *ev,
		       void *rej, size_t *rej_len)
{
	const struct rdma_conn_param *cp = &ev->param.conn;
	int status = ev->status;
	bool consumer;

	/*
	 * IB/RoCE: only the consumer-defined reason carries the peer's data
	 * (the REJ always has a private data area). iWARP: an MPA reject
	 * has data, a TCP RST not.
	 */
	if (c->id->verbs &&
	    c->id->verbs->device->transport_type == IBV_TRANSPORT_IB)
		consumer = status == XR_IB_CM_REJ_CONSUMER_DEFINED;
	else
		consumer = cp->private_data_len > 0;
	if (consumer && cp->private_data && rej && rej_len) {
		size_t n =
		    MIN((size_t)cp->private_data_len, (size_t)XP_PRIV_MAX);

		memcpy(rej, cp->private_data, n);
		*rej_len = n;
	}
	if (consumer)
		log_info("%s: connection rejected by the peer", c->name);
	else if (status == XR_IB_CM_REJ_INVALID_SERVICE_ID)
		log_warn("%s: connection refused: nothing listens on that port",
			 c->name);
	else
		log_warn("%s: connection refused (reason %d)", c->name, status);
	return -ECONNREFUSED;
}

/*
 * The -errno for an event of c's own that ends its connect (logged), or
 * 0 for one to ignore (ADDR_CHANGE).
 */
static int xr_connect_failed(struct xr_conn *c, const struct rdma_cm_event *ev,
			     enum rdma_cm_event_type want, void *rej,
			     size_t *rej_len)
{
	int status = ev->status;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
		log_err("%s: address resolution failed: %s", c->name,
			strerror(status < 0 ? -status : EHOSTUNREACH));
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		log_err("%s: route resolution failed: %s", c->name,
			strerror(status < 0 ? -status : ENETUNREACH));
		return -ENETUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE:
		log_err("%s: peer unreachable: %s", c->name,
			strerror(status < 0 ? -status : EHOSTUNREACH));
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_REJECTED:
		return xr_rejected(c, ev, rej, rej_len);
	case RDMA_CM_EVENT_CONNECT_ERROR:
		log_err("%s: connection failed: status %d", c->name, status);
		return -ECONNABORTED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		log_err("%s: RDMA device removed", c->name);
		return -ENODEV;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		return 0;
	default:
		log_err("%s: unexpected %s (status %d) waiting for %s", c->name,
			rdma_event_str(ev->event), status,
			rdma_event_str(want));
		return -EPROTO;
	}
}

/*
 * Wait on c->ch for the event that completes the current step of
 * connect(). Other outcomes become the errors transport.h lists.
 */
static int xr_wait_event(struct xr_conn *c, enum rdma_cm_event_type want,
			 uint64_t deadline, void *rej, size_t *rej_len)
{
	struct rdma_cm_event *ev;
	int ret;

	for (;;) {
		if (rdma_get_cm_event(c->g->ch, &ev)) {
			ret = xr_cm_sleep(c, want, deadline);
			if (ret)
				return ret;
			continue;
		}
		if (ev->id != c->id) {
			/* another connection of the group: its owner is us */
			enum rdma_cm_event_type type = ev->event;
			struct xr_conn *o = ev->id->context;
			int status = ev->status;

			rdma_ack_cm_event(ev);
			xr_cm_event(o, type, status);
			continue;
		}
		if (ev->event == want) {
			rdma_ack_cm_event(ev);
			return 0;
		}
		/* before the ack: a REJECTED event's private data is read */
		ret = xr_connect_failed(c, ev, want, rej, rej_len);
		rdma_ack_cm_event(ev);
		if (ret)
			return ret;
		/* ADDR_CHANGE: wait on */
	}
}

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 1 : (int)MIN(deadline - now, INT32_MAX);
}

/* Resolve c's address and route to dst (its id made). 0 or -errno. */
static int xr_resolve_path(struct xr_conn *c, struct sockaddr_storage *dst,
			   uint64_t deadline)
{
	int ret;

	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)dst,
			      remaining_ms(deadline))) {
		ret = neg_errno();
		log_err("%s: rdma_resolve_addr: %s", c->name, strerror(-ret));
		if (ret == -ENODEV || ret == -EADDRNOTAVAIL)
			ret = -EHOSTUNREACH;
		return ret;
	}
	ret =
	    xr_wait_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, NULL, NULL);
	if (ret)
		return ret;
	if (rdma_resolve_route(c->id, remaining_ms(deadline))) {
		ret = neg_errno();
		log_err("%s: rdma_resolve_route: %s", c->name, strerror(-ret));
		return ret;
	}
	ret = xr_wait_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, NULL,
			    NULL);
	if (ret)
		return ret;
	/* the resolved peer address (port included) names it from now on */
	fmt_sockaddr(rdma_get_peer_addr(c->id), c->name, sizeof(c->name));
	return 0;
}

/*
 * Connect c (its queue set up) with priv as the request's private data,
 * and wait for ESTABLISHED. 0 or -errno (a reject's data in rej).
 */
static int xr_cm_connect(struct xr_conn *c, const void *priv, size_t priv_len,
			 uint64_t deadline, void *rej, size_t *rej_len)
{
	struct rdma_conn_param p;
	int ret;

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
		return ret;
	}
	/* librdmacm moves the QP to RTR/RTS when it reads the reply */
	return xr_wait_event(c, RDMA_CM_EVENT_ESTABLISHED, deadline, rej,
			     rej_len);
}

int xr_group_connect(struct xp_group *xg, const char *host, uint16_t port,
		     const struct xp_conn_attr *attr, const void *priv,
		     size_t priv_len, int timeout_ms, struct xp_conn **out,
		     void *rej, size_t *rej_len)
{
	struct xr_group *g = xg ? to_xr_group(xg) : NULL, *own = NULL;
	struct sockaddr_storage dst;
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

	if (!g) {
		ret = xr_group_alloc(&own);
		if (ret)
			return ret;
		g = own;
	}
	ret = -ENOMEM;
	c = xr_conn_alloc(attr);
	if (!c)
		goto out_destroy_group;
	fmt_sockaddr((struct sockaddr *)&dst, c->name, sizeof(c->name));
	ret = xr_conn_join(g, c);
	if (ret)
		goto out_free_conn;
	/* on the group's channel: its events are read by its thread */
	if (rdma_create_id(g->ch, &c->id, c, RDMA_PS_TCP)) {
		ret = neg_errno();
		log_err("%s: rdma_create_id: %s", c->name, strerror(-ret));
		goto out_leave_group;
	}
	ret = xr_resolve_path(c, &dst, deadline);
	if (ret)
		goto out_destroy_id;

	ret = xr_group_bind_device(g, c->id->verbs,
				   attr->max_send_wr + attr->max_recv_wr);
	if (ret)
		goto out_destroy_id;
	ret = xr_setup_queue(c, attr);
	if (ret)
		goto out_destroy_id;

	ret = xr_cm_connect(c, priv, priv_len, deadline, rej, rej_len);
	if (ret)
		goto out_teardown_queue;
	c->cm_connected = true;
	c->state = XP_CONN_CONNECTED;
	if (own)
		g->private_conn = c;
	log_info("%s: connected", c->name);
	*out = &c->base;
	return 0;

out_teardown_queue:
	xr_teardown_queue(c);
out_destroy_id:
	rdma_destroy_id(c->id);
out_leave_group:
	xr_conn_leave(c);
out_free_conn:
	xr_conn_free(c);
out_destroy_group:
	if (own)
		xr_group_destroy(&own->base);
	return ret;
}

/* ---- connection ops (owner thread) ------------------------------------ */

/*
 * The QP goes first (its windows die with it), then the id; completions
 * of it still in the group's CQ are dropped by generation. A private
 * group goes with its connection.
 */
void xr_destroy(struct xp_conn *xc)
{
	struct xr_group *g;
	struct xr_conn *c;

	if (!xc)
		return;
	c = to_conn(xc);
	g = c->g;
	xr_shutdown(c);
	xr_teardown_queue(c);
	xr_conn_mws_reset(c);
	rdma_destroy_id(c->id);
	xr_conn_leave(c);
	xr_conn_free(c);
	if (g->private_conn == c) {
		g->private_conn = NULL;
		xr_group_destroy(&g->base);
	}
}

void xr_disconnect(struct xp_conn *xc)
{
	xr_fail(to_conn(xc), "disconnected by its owner");
}

enum xp_conn_state xr_state(struct xp_conn *xc)
{
	return to_conn(xc)->state;
}

const char *xr_peer_name(struct xp_conn *xc)
{
	return to_conn(xc)->name;
}

struct xp_group *xr_conn_group(struct xp_conn *xc)
{
	return &to_conn(xc)->g->base;
}

/* One rdma_cm event of connection c (already acked); never blocks. */
void xr_cm_event(struct xr_conn *c, enum rdma_cm_event_type type, int status)
{
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
			log_info("%s: disconnected by the peer", c->name);
		xr_fail(c, "the peer disconnected");
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		/* after a disconnect; one before it would end a live QP */
		if (c->shut)
			log_debug("%s: timewait exit", c->name);
		else
			log_warn(
			    "%s: the CM left time-wait on a live connection",
			    c->name);
		xr_fail(c, "the CM left time-wait (TIMEWAIT_EXIT)");
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		log_info("%s: address change", c->name);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		log_warn("%s: RDMA device removed", c->name);
		xr_fail(c, "RDMA device removed");
		break;
	default:
		/* CONNECT_ERROR, UNREACHABLE, REJECTED (no RTU) */
		log_warn("%s: %s (status %d)", c->name, rdma_event_str(type),
			 status);
		xr_fail(c, "CM event %s (status %d)", rdma_event_str(type),
			status);
		break;
	}
}
