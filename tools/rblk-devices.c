/* SPDX-License-Identifier: MIT */
/*
 * rblk-devices: the RDMA device inventory in one view, what ibv_devinfo and
 * `rdma link` tell together. For every device: name, node GUID, transport,
 * firmware and the limits rblk cares about; for every port: state, physical
 * state, link layer, MTU, LID (InfiniBand), speed, netdev, and the GID table
 * with each GID's type (IB, RoCE v1, RoCE v2) and netdev.
 *
 *   rblk-devices [-o text|json] [-d DEVICE] [--help] [--version]
 *
 * Exit status: 0 when every device listed could be queried, 1 when there is
 * no device (or not the one asked for) or one could not be queried, 2 on a
 * usage error.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "rblk/rblk.h"
#include "common/json.h"
#include "common/util.h"
#include "common/version.h"

#define PROG "rblk-devices"
#define SYSFS_IB "/sys/class/infiniband"

/* ---- what we learn about a device -------------------------------------- */

struct gid_info {
	uint32_t index;
	union ibv_gid gid;
	int type; /* enum ibv_gid_type, or -1 when unknown */
	char netdev[IF_NAMESIZE];
};

struct port_info {
	uint32_t num;
	int err; /* -errno from ibv_query_port, 0 when attr is valid */
	struct ibv_port_attr attr;
	uint8_t phys_state; /* attr.phys_state, or from sysfs */
	char netdev[IF_NAMESIZE];
	struct gid_info *gids;
	size_t nr_gids;
};

struct dev_info {
	char name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
	enum ibv_transport_type transport;
	enum ibv_node_type node_type;
	uint64_t node_guid; /* host order */
	int64_t nl_index; /* RDMA netlink device index, -1 when unknown */
	char err[160]; /* why the device could not be queried, "" if fine */
	struct ibv_device_attr attr;
	struct port_info *ports;
	unsigned int nr_ports;
};

/* ---- names for numbers ------------------------------------------------- */

static const char *transport_str(enum ibv_transport_type t)
{
	switch (t) {
	case IBV_TRANSPORT_IB:
		return "InfiniBand";
	case IBV_TRANSPORT_IWARP:
		return "iWARP";
	case IBV_TRANSPORT_USNIC:
		return "usNIC";
	case IBV_TRANSPORT_USNIC_UDP:
		return "usNIC UDP";
	case IBV_TRANSPORT_UNSPECIFIED:
		return "unspecified";
	default:
		return "unknown";
	}
}

static const char *node_type_str(enum ibv_node_type t)
{
	switch (t) {
	case IBV_NODE_CA:
		return "CA";
	case IBV_NODE_SWITCH:
		return "switch";
	case IBV_NODE_ROUTER:
		return "router";
	case IBV_NODE_RNIC:
		return "RNIC";
	case IBV_NODE_USNIC:
		return "usNIC";
	case IBV_NODE_USNIC_UDP:
		return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED:
		return "unspecified";
	default:
		return "unknown";
	}
}

/* The names `rdma link` uses. */
static const char *port_state_str(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP:
		return "NOP";
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "UNKNOWN";
	}
}

static const char *phys_state_str(uint8_t s)
{
	static const char *const names[] = {
		[1] = "SLEEP",	  [2] = "POLLING",
		[3] = "DISABLED", [4] = "TRAINING",
		[5] = "LINK_UP",  [6] = "LINK_ERROR_RECOVERY",
		[7] = "PHY_TEST",
	};

	if (s < ARRAY_SIZE(names) && names[s])
		return names[s];
	return "UNKNOWN";
}

static const char *link_layer_str(const struct dev_info *d,
				  const struct port_info *p)
{
	switch (p->attr.link_layer) {
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet";
	default:
		/* old kernels leave it unspecified on InfiniBand ports */
		return d->transport == IBV_TRANSPORT_IB ? "InfiniBand" :
							  "unspecified";
	}
}

static bool is_ib(const struct dev_info *d, const struct port_info *p)
{
	return p->attr.link_layer == IBV_LINK_LAYER_INFINIBAND ||
	       (p->attr.link_layer == IBV_LINK_LAYER_UNSPECIFIED &&
		d->transport == IBV_TRANSPORT_IB);
}

static int mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

static const char *gid_type_str(const struct dev_info *d, int t)
{
	if (d->transport == IBV_TRANSPORT_IWARP)
		return "iWARP";
	switch (t) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCE v2";
	default:
		return "unknown";
	}
}

static const char *width_str(uint8_t w)
{
	switch (w) {
	case 1:
		return "1X";
	case 2:
		return "4X";
	case 4:
		return "8X";
	case 8:
		return "12X";
	case 16:
		return "2X";
	default:
		return NULL;
	}
}

static int width_lanes(uint8_t w)
{
	switch (w) {
	case 1:
		return 1;
	case 2:
		return 4;
	case 4:
		return 8;
	case 8:
		return 12;
	case 16:
		return 2;
	default:
		return 0;
	}
}

/* Name and usable Gb/s per lane of ibv_port_attr.active_speed. */
static const char *speed_str(uint8_t s, double *lane_gbps)
{
	static const struct {
		uint8_t code;
		const char *name;
		double gbps;
	} speeds[] = {
		{ 1, "SDR", 2.5 },    { 2, "DDR", 5.0 },    { 4, "QDR", 10.0 },
		{ 8, "FDR10", 10.0 }, { 16, "FDR", 14.0 },  { 32, "EDR", 25.0 },
		{ 64, "HDR", 50.0 },  { 128, "NDR", 100.0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(speeds); i++) {
		if (speeds[i].code == s) {
			*lane_gbps = speeds[i].gbps;
			return speeds[i].name;
		}
	}
	*lane_gbps = 0;
	return NULL;
}

static void format_guid(char *buf, size_t len, uint64_t guid)
{
	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48),
		 (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
		 (unsigned)guid & 0xffff);
}

static void format_gid(char *buf, size_t len, const union ibv_gid *gid)
{
	if (!inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* ---- sysfs ------------------------------------------------------------- */

/* Read the first line of a small sysfs file, without its newline. */
static int sysfs_read(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int sysfs_read(char *buf, size_t len, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	FILE *f;
	int ret = 0;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		ret = ferror(f) ? -EIO : -ENODATA;
	else
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
	return ret;
}

/* "5: LinkUp" -> 5 */
static uint8_t sysfs_phys_state(const struct dev_info *d, uint32_t port)
{
	char buf[64];

	if (sysfs_read(buf, sizeof(buf), "%s/ports/%u/phys_state",
		       d->ibdev_path, port))
		return 0;
	return (uint8_t)strtoul(buf, NULL, 10);
}

/*
 * The netdev of a port: from its GIDs when it has RoCE ones, else the
 * device's PCI function's netdev whose dev_port matches (mlx4 has two
 * ports per function), else the only one there is.
 */
static void port_netdev(const struct dev_info *d, struct port_info *p)
{
	char path[512], buf[32], only[IF_NAMESIZE] = "";
	struct dirent *de;
	unsigned int n = 0;
	DIR *dir;

	if (p->netdev[0])
		return; /* RDMA netlink told us */
	for (size_t i = 0; i < p->nr_gids; i++) {
		if (p->gids[i].netdev[0]) {
			snprintf(p->netdev, sizeof(p->netdev), "%s",
				 p->gids[i].netdev);
			return;
		}
	}
	snprintf(path, sizeof(path), "%s/device/net", d->ibdev_path);
	dir = opendir(path);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= IF_NAMESIZE)
			continue;
		n++;
		memcpy(only, de->d_name, strlen(de->d_name) + 1);
		if (!sysfs_read(buf, sizeof(buf), "%s/%s/dev_port", path,
				de->d_name) &&
		    strtoul(buf, NULL, 0) + 1 == p->num) {
			memcpy(p->netdev, only, sizeof(only));
			break;
		}
	}
	closedir(dir);
	if (!p->netdev[0] && n == 1)
		snprintf(p->netdev, sizeof(p->netdev), "%s", only);
}

/* ---- RDMA netlink: the port's netdev as `rdma link` shows it --------- */

struct nl_sock {
	int fd;
	uint32_t seq;
	char buf[32768];
};

static int nl_open(struct nl_sock *nl)
{
	struct timeval tv = { .tv_sec = 2 };
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (nl->fd < 0)
		return -errno;
	if (setsockopt(nl->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int ret = -errno;

		close(nl->fd);
		return ret;
	}
	nl->seq = (uint32_t)getpid();
	return 0;
}

static void nl_put_u32(struct nlmsghdr *h, uint16_t type, uint32_t v)
{
	struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + sizeof(v);
	memcpy((char *)a + NLA_HDRLEN, &v, sizeof(v));
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* Attributes of one RDMA netlink message, by type (first one wins). */
static void nl_parse(const struct nlmsghdr *h, const struct nlattr **tb,
		     int max)
{
	const char *p = NLMSG_DATA(h);
	const char *end = (const char *)h + h->nlmsg_len;

	memset(tb, 0, sizeof(*tb) * (size_t)max);
	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const struct nlattr *)p;
		int type = a->nla_type & NLA_TYPE_MASK;

		if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
			break;
		if (type < max && !tb[type])
			tb[type] = a;
		p += NLA_ALIGN(a->nla_len);
	}
}

static const char *nl_str(const struct nlattr *a)
{
	const char *s = (const char *)a + NLA_HDRLEN;
	size_t len = a->nla_len - NLA_HDRLEN;

	if (!len || !memchr(s, 0, len))
		return NULL;
	return s;
}

static bool nl_u32(const struct nlattr *a, uint32_t *v)
{
	if (!a || a->nla_len < NLA_HDRLEN + sizeof(*v))
		return false;
	memcpy(v, (const char *)a + NLA_HDRLEN, sizeof(*v));
	return true;
}

/*
 * Send one RDMA_NLDEV request and call cb for every answer until the dump
 * ends (or the single answer came). Returns 0 or -errno.
 */
static int nl_call(struct nl_sock *nl, struct nlmsghdr *req,
		   void (*cb)(const struct nlattr **tb, void *arg), void *arg)
{
	const struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	bool dump = req->nlmsg_flags & NLM_F_DUMP;
	uint32_t seq = ++nl->seq;

	req->nlmsg_seq = seq;
	if (send(nl->fd, req, req->nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(nl->fd, nl->buf, sizeof(nl->buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)nl->buf;
		size_t left;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (left = (size_t)n; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error;
			}
			nl_parse(h, tb, RDMA_NLDEV_ATTR_MAX);
			cb(tb, arg);
			if (!dump)
				return 0;
		}
	}
}

struct nl_devs {
	struct dev_info *devs;
	int nr;
};

static void nl_dev_cb(const struct nlattr **tb, void *arg)
{
	struct nl_devs *nd = arg;
	const char *name;
	uint32_t index;

	if (!tb[RDMA_NLDEV_ATTR_DEV_NAME] ||
	    !nl_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX], &index))
		return;
	name = nl_str(tb[RDMA_NLDEV_ATTR_DEV_NAME]);
	for (int i = 0; name && i < nd->nr; i++)
		if (!strcmp(nd->devs[i].name, name))
			nd->devs[i].nl_index = index;
}

static void nl_port_cb(const struct nlattr **tb, void *arg)
{
	struct port_info *p = arg;
	const char *ndev;

	if (!tb[RDMA_NLDEV_ATTR_NDEV_NAME])
		return;
	ndev = nl_str(tb[RDMA_NLDEV_ATTR_NDEV_NAME]);
	if (ndev && strlen(ndev) < sizeof(p->netdev))
		memcpy(p->netdev, ndev, strlen(ndev) + 1);
}

/* Fill each port's netdev from RDMA netlink; quietly does nothing on error. */
static void nl_netdevs(struct dev_info *devs, int nr)
{
	struct nl_devs nd = { .devs = devs, .nr = nr };
	struct {
		struct nlmsghdr h;
		char attrs[64];
	} req;
	struct nl_sock *nl;

	nl = malloc(sizeof(*nl));
	if (!nl)
		return;
	if (nl_open(nl))
		goto out_free;
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(0);
	req.h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	if (nl_call(nl, &req.h, nl_dev_cb, &nd))
		goto out_close;
	for (int i = 0; i < nr; i++) {
		struct dev_info *d = &devs[i];

		if (d->nl_index < 0 || d->err[0])
			continue;
		for (unsigned int k = 0; k < d->nr_ports; k++) {
			struct port_info *p = &d->ports[k];

			if (p->err)
				continue;
			memset(&req, 0, sizeof(req));
			req.h.nlmsg_len = NLMSG_LENGTH(0);
			req.h.nlmsg_type = RDMA_NL_GET_TYPE(
				RDMA_NL_NLDEV, RDMA_NLDEV_CMD_PORT_GET);
			req.h.nlmsg_flags = NLM_F_REQUEST;
			nl_put_u32(&req.h, RDMA_NLDEV_ATTR_DEV_INDEX,
				   (uint32_t)d->nl_index);
			nl_put_u32(&req.h, RDMA_NLDEV_ATTR_PORT_INDEX, p->num);
			if (nl_call(nl, &req.h, nl_port_cb, p))
				break;
		}
	}
out_close:
	close(nl->fd);
out_free:
	free(nl);
}

/* ---- querying ---------------------------------------------------------- */

static bool gid_is_zero(const union ibv_gid *gid)
{
	static const uint8_t zero[16];

	return !memcmp(gid->raw, zero, sizeof(zero));
}

/* The whole GID table in one call (rdma-core >= 32, kernels >= 5.10). */
static int query_gids_table(struct ibv_context *ctx, struct dev_info *d)
{
	struct ibv_gid_entry *ents;
	size_t max = 0;
	ssize_t n;

	for (unsigned int i = 0; i < d->nr_ports; i++)
		if (!d->ports[i].err && d->ports[i].attr.gid_tbl_len > 0)
			max += (size_t)d->ports[i].attr.gid_tbl_len;
	if (!max)
		return 0;
	ents = calloc(max, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	n = ibv_query_gid_table(ctx, ents, max, 0);
	if (n < 0) {
		free(ents);
		return (int)n;
	}
	for (unsigned int i = 0; i < d->nr_ports; i++) {
		struct port_info *p = &d->ports[i];
		size_t cnt = 0;

		for (ssize_t j = 0; j < n; j++)
			cnt += ents[j].port_num == p->num;
		if (!cnt)
			continue;
		p->gids = calloc(cnt, sizeof(*p->gids));
		if (!p->gids) {
			free(ents);
			return -ENOMEM;
		}
		for (ssize_t j = 0; j < n; j++) {
			struct gid_info *g;

			if (ents[j].port_num != p->num)
				continue;
			g = &p->gids[p->nr_gids++];
			g->index = ents[j].gid_index;
			g->gid = ents[j].gid;
			g->type = (int)ents[j].gid_type;
			if (ents[j].ndev_ifindex &&
			    !if_indextoname(ents[j].ndev_ifindex, g->netdev))
				g->netdev[0] = 0;
		}
	}
	free(ents);
	return 0;
}

/* Fallback: ibv_query_gid per index plus sysfs gid_attrs for type and ndev. */
static int query_gids_sysfs(struct ibv_context *ctx, struct dev_info *d,
			    struct port_info *p)
{
	int len = p->attr.gid_tbl_len;
	char buf[64];

	if (len <= 0)
		return 0;
	p->gids = calloc((size_t)len, sizeof(*p->gids));
	if (!p->gids)
		return -ENOMEM;
	for (int i = 0; i < len; i++) {
		struct gid_info *g = &p->gids[p->nr_gids];

		if (ibv_query_gid(ctx, (uint8_t)p->num, i, &g->gid))
			continue;
		if (gid_is_zero(&g->gid))
			continue;
		g->index = (uint32_t)i;
		g->type = -1;
		if (is_ib(d, p)) {
			g->type = IBV_GID_TYPE_IB;
		} else if (!sysfs_read(buf, sizeof(buf),
				       "%s/ports/%u/gid_attrs/types/%d",
				       d->ibdev_path, p->num, i)) {
			if (strstr(buf, "v2"))
				g->type = IBV_GID_TYPE_ROCE_V2;
			else if (strstr(buf, "v1"))
				g->type = IBV_GID_TYPE_ROCE_V1;
		}
		if (sysfs_read(g->netdev, sizeof(g->netdev),
			       "%s/ports/%u/gid_attrs/ndevs/%d", d->ibdev_path,
			       p->num, i))
			g->netdev[0] = 0;
		p->nr_gids++;
	}
	return 0;
}

static void dev_fail(struct dev_info *d, const char *call, int err)
{
	snprintf(d->err, sizeof(d->err), "%s: %s", call, strerror(-err));
}

/* Fill d from dev. Returns 0, or -errno with d->err saying what failed. */
static int query_device(struct ibv_device *dev, struct dev_info *d)
{
	struct ibv_context *ctx;
	int ret;

	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
	snprintf(d->ibdev_path, sizeof(d->ibdev_path), "%s", dev->ibdev_path);
	d->transport = dev->transport_type;
	d->node_type = dev->node_type;
	d->node_guid = be64toh(ibv_get_device_guid(dev));
	d->nl_index = -1;

	ctx = ibv_open_device(dev);
	if (!ctx) {
		ret = errno ? -errno : -ENODEV;
		dev_fail(d, "ibv_open_device", ret);
		return ret;
	}
	ret = ibv_query_device(ctx, &d->attr);
	if (ret) {
		ret = ret > 0 ? -ret : -EIO;
		dev_fail(d, "ibv_query_device", ret);
		goto out_close;
	}
	d->nr_ports = d->attr.phys_port_cnt;
	d->ports = calloc(d->nr_ports ? d->nr_ports : 1, sizeof(*d->ports));
	if (!d->ports) {
		ret = -ENOMEM;
		dev_fail(d, "calloc", ret);
		goto out_close;
	}
	for (unsigned int i = 0; i < d->nr_ports; i++) {
		struct port_info *p = &d->ports[i];

		p->num = i + 1;
		ret = ibv_query_port(ctx, (uint8_t)p->num, &p->attr);
		if (ret) {
			p->err = ret > 0 ? -ret : -EIO;
			continue;
		}
		p->phys_state = p->attr.phys_state ?
					p->attr.phys_state :
					sysfs_phys_state(d, p->num);
	}
	/*
	 * The GID table ioctl, else (old kernels, or iWARP devices, which
	 * have no GID cache) one GID at a time.
	 */
	ret = query_gids_table(ctx, d);
	if (ret == -ENOMEM) {
		dev_fail(d, "calloc", ret);
		goto out_close;
	}
	for (unsigned int i = 0; i < d->nr_ports; i++) {
		if (d->ports[i].err || d->ports[i].nr_gids)
			continue;
		free(d->ports[i].gids);
		d->ports[i].gids = NULL;
		ret = query_gids_sysfs(ctx, d, &d->ports[i]);
		if (ret) {
			dev_fail(d, "calloc", ret);
			goto out_close;
		}
	}
	ret = 0;
out_close:
	ibv_close_device(ctx);
	return ret;
}

static void free_device(struct dev_info *d)
{
	for (unsigned int i = 0; d->ports && i < d->nr_ports; i++)
		free(d->ports[i].gids);
	free(d->ports);
}

/* ---- text output ------------------------------------------------------- */

static void print_text(const struct dev_info *d)
{
	char guid[32], gid[INET6_ADDRSTRLEN];

	format_guid(guid, sizeof(guid), d->node_guid);
	printf("%s: %s (%s), node GUID %s\n", d->name,
	       transport_str(d->transport), node_type_str(d->node_type), guid);
	if (d->err[0]) {
		printf("    error: %s\n", d->err);
		return;
	}
	printf("    firmware %s, vendor 0x%04x part %u hw %u, %u port%s\n",
	       d->attr.fw_ver[0] ? d->attr.fw_ver : "(none)",
	       d->attr.vendor_id, d->attr.vendor_part_id, d->attr.hw_ver,
	       d->nr_ports, d->nr_ports == 1 ? "" : "s");
	printf("    max_qp %d, max_qp_wr %d, max_sge %d, max_mr %d, max_mr_size %" PRIu64
	       ", max_qp_rd_atom %d, max_qp_init_rd_atom %d\n",
	       d->attr.max_qp, d->attr.max_qp_wr, d->attr.max_sge,
	       d->attr.max_mr, (uint64_t)d->attr.max_mr_size,
	       d->attr.max_qp_rd_atom, d->attr.max_qp_init_rd_atom);

	for (unsigned int i = 0; i < d->nr_ports; i++) {
		const struct port_info *p = &d->ports[i];
		const char *w, *s;
		double lane;

		if (p->err) {
			printf("  port %u: error: ibv_query_port: %s\n", p->num,
			       strerror(-p->err));
			continue;
		}
		printf("  port %u: %s (%s), link layer %s", p->num,
		       port_state_str(p->attr.state),
		       phys_state_str(p->phys_state), link_layer_str(d, p));
		printf(", netdev %s", p->netdev[0] ? p->netdev : "-");
		printf("\n    active MTU %d (max %d)", mtu_bytes(p->attr.active_mtu),
		       mtu_bytes(p->attr.max_mtu));
		if (is_ib(d, p))
			printf(", LID %u, SM LID %u, LMC %u", p->attr.lid,
			       p->attr.sm_lid, p->attr.lmc);
		w = width_str(p->attr.active_width);
		s = speed_str(p->attr.active_speed, &lane);
		if (w && s)
			printf(", %s %s (%g Gb/s)", w, s,
			       lane * width_lanes(p->attr.active_width));
		printf("\n");
		if (!p->nr_gids)
			printf("    no GIDs\n");
		for (size_t j = 0; j < p->nr_gids; j++) {
			const struct gid_info *g = &p->gids[j];

			format_gid(gid, sizeof(gid), &g->gid);
			printf("    GID[%3u] %-39s %-7s %s\n", g->index, gid,
			       gid_type_str(d, g->type),
			       g->netdev[0] ? g->netdev : "-");
		}
	}
}

/* ---- JSON output (json-c, common/json.h) ------------------------------ */

static void json_port(struct json_object *o, const struct dev_info *d,
		      const struct port_info *p)
{
	struct json_object *gids;
	char gid[INET6_ADDRSTRLEN];
	const char *w, *s;
	double lane;

	rjson_add_u64(o, "port", p->num);
	if (p->err) {
		char msg[128];

		snprintf(msg, sizeof(msg), "ibv_query_port: %s",
			 strerror(-p->err));
		rjson_add_str(o, "error", msg);
		return;
	}
	rjson_add_str(o, "state", port_state_str(p->attr.state));
	rjson_add_str(o, "phys_state", phys_state_str(p->phys_state));
	rjson_add_str(o, "link_layer", link_layer_str(d, p));
	rjson_add_u64(o, "active_mtu", (uint64_t)mtu_bytes(p->attr.active_mtu));
	rjson_add_u64(o, "max_mtu", (uint64_t)mtu_bytes(p->attr.max_mtu));
	if (is_ib(d, p)) {
		rjson_add_u64(o, "lid", p->attr.lid);
		rjson_add_u64(o, "sm_lid", p->attr.sm_lid);
		rjson_add_u64(o, "lmc", p->attr.lmc);
	}
	w = width_str(p->attr.active_width);
	s = speed_str(p->attr.active_speed, &lane);
	if (w && s) {
		rjson_add_str(o, "width", w);
		rjson_add_str(o, "speed", s);
		rjson_add(o, "rate_gbps",
			  json_object_new_double(
				  lane * width_lanes(p->attr.active_width)));
	}
	if (p->netdev[0])
		rjson_add_str(o, "netdev", p->netdev);
	gids = json_object_new_array();
	for (size_t k = 0; k < p->nr_gids; k++) {
		const struct gid_info *g = &p->gids[k];
		struct json_object *x = json_object_new_object();

		rjson_add_u64(x, "index", g->index);
		format_gid(gid, sizeof(gid), &g->gid);
		rjson_add_str(x, "gid", gid);
		rjson_add_str(x, "type", gid_type_str(d, g->type));
		if (g->netdev[0])
			rjson_add_str(x, "netdev", g->netdev);
		json_object_array_add(gids, x);
	}
	rjson_add(o, "gids", gids);
}

static struct json_object *json_device(const struct dev_info *d)
{
	struct json_object *o = json_object_new_object(), *ports;
	char guid[32];

	rjson_add_str(o, "name", d->name);
	format_guid(guid, sizeof(guid), d->node_guid);
	rjson_add_str(o, "node_guid", guid);
	rjson_add_str(o, "node_type", node_type_str(d->node_type));
	rjson_add_str(o, "transport", transport_str(d->transport));
	if (d->err[0]) {
		rjson_add_str(o, "error", d->err);
		return o;
	}
	rjson_add_str(o, "fw_ver", d->attr.fw_ver);
	rjson_add_u64(o, "vendor_id", d->attr.vendor_id);
	rjson_add_u64(o, "vendor_part_id", d->attr.vendor_part_id);
	rjson_add_u64(o, "hw_ver", d->attr.hw_ver);
	rjson_add_u64(o, "max_qp", (uint64_t)d->attr.max_qp);
	rjson_add_u64(o, "max_qp_wr", (uint64_t)d->attr.max_qp_wr);
	rjson_add_u64(o, "max_sge", (uint64_t)d->attr.max_sge);
	rjson_add_u64(o, "max_mr", (uint64_t)d->attr.max_mr);
	rjson_add_u64(o, "max_mr_size", d->attr.max_mr_size);
	rjson_add_u64(o, "max_qp_rd_atom", (uint64_t)d->attr.max_qp_rd_atom);
	rjson_add_u64(o, "max_qp_init_rd_atom",
		      (uint64_t)d->attr.max_qp_init_rd_atom);
	rjson_add_u64(o, "phys_port_cnt", d->nr_ports);
	ports = json_object_new_array();
	for (unsigned int i = 0; i < d->nr_ports; i++) {
		struct json_object *p = json_object_new_object();

		json_port(p, d, &d->ports[i]);
		json_object_array_add(ports, p);
	}
	rjson_add(o, "ports", ports);
	return o;
}

/* {"devices": [...]} on stdout */
static void print_json(const struct dev_info *devs, int nr)
{
	struct json_object *o = json_object_new_object();
	struct json_object *list = json_object_new_array();

	for (int i = 0; i < nr; i++)
		json_object_array_add(list, json_device(&devs[i]));
	rjson_add(o, "devices", list);
	if (rjson_print_pretty(stdout, o))
		fprintf(stderr, PROG ": writing JSON: out of memory\n");
}

/* ---- main -------------------------------------------------------------- */

/* Kernel RDMA devices, as a comma-separated list, for the hint. */
static void kernel_devices(char *buf, size_t len)
{
	struct dirent *de;
	size_t n = 0;
	DIR *dir;

	buf[0] = 0;
	dir = opendir(SYSFS_IB);
	if (!dir)
		return;
	while ((de = readdir(dir)) && n + 2 < len) {
		if (de->d_name[0] == '.')
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
				      de->d_name);
	}
	closedir(dir);
}

static void explain_no_device(void)
{
	char kdevs[256];

	kernel_devices(kdevs, sizeof(kdevs));
	if (kdevs[0]) {
		fprintf(stderr,
			PROG ": the kernel has RDMA devices (%s) but libibverbs sees none.\n"
			"Load the user-space verbs interface (modprobe ib_uverbs) and make sure\n"
			"rdma-core's ibverbs providers for the driver are installed\n"
			"(Debian: ibverbs-providers).\n",
			kdevs);
		return;
	}
	fprintf(stderr,
		PROG ": no RDMA devices found.\n"
		"To get a software device:\n"
		"  modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0   (RoCE)\n"
		"  modprobe siw && rdma link add siw0 type siw netdev eth0        (iWARP)\n"
		"(replace eth0 with a network interface of this host);\n"
		"rdma-core's ibverbs providers must be installed (Debian: ibverbs-providers).\n");
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [-o text|json] [-d DEVICE]\n"
		"List RDMA devices, their ports and GIDs.\n"
		"\n"
		"  -o, --output FORMAT   text (default) or json\n"
		"  -d, --device DEVICE   only this device (e.g. rxe0, mlx5_0)\n"
		"  -h, --help            show this help\n"
		"  -V, --version         show the version\n"
		"\n"
		"Exit status: 0 success, 1 no device (or one could not be queried),\n"
		"2 usage error.\n");
}

/* Options into *json and *only; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bool *json, const char **only)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "device", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "o:d:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
				fprintf(stderr,
					PROG ": unknown output format '%s' (text or json)\n",
					optarg);
				return 2;
			}
			*json = !strcmp(optarg, "json");
			break;
		case 'd':
			*only = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf(PROG " %s\n", rblk_version());
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

/*
 * Query the devices of list (only the one named only, when given) into
 * devs, with their netdevs; returns how many, and sets *failed when one
 * could not be queried.
 */
static int query_all(struct ibv_device **list, int num, const char *only,
		     struct dev_info *devs, bool *failed)
{
	int nr = 0;

	for (int i = 0; i < num; i++) {
		if (only && strcmp(ibv_get_device_name(list[i]), only))
			continue;
		if (query_device(list[i], &devs[nr]))
			*failed = true;
		for (unsigned int k = 0; k < devs[nr].nr_ports; k++)
			if (devs[nr].ports[k].err)
				*failed = true;
		nr++;
	}
	if (nr)
		nl_netdevs(devs, nr);
	for (int i = 0; i < nr; i++)
		for (unsigned int k = 0; !devs[i].err[0] && k < devs[i].nr_ports;
		     k++)
			if (!devs[i].ports[k].err)
				port_netdev(&devs[i], &devs[i].ports[k]);
	return nr;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct dev_info *devs = NULL;
	const char *only = NULL;
	bool json = false, failed = false;
	int num = 0, nr = 0, list_errno, ret;

	ret = parse_args(argc, argv, &json, &only);
	if (ret >= 0)
		return ret;
	errno = 0;
	list = ibv_get_device_list(&num);
	list_errno = errno;
	if (!list && list_errno != ENOSYS && list_errno != ENOENT &&
	    list_errno != 0) {
		/* ENOSYS: no /sys/class/infiniband, i.e. no device at all */
		fprintf(stderr, PROG ": ibv_get_device_list: %s\n",
			strerror(list_errno));
		if (json)
			print_json(NULL, 0);
		return 1;
	}
	if (list && num > 0) {
		devs = calloc((size_t)num, sizeof(*devs));
		if (!devs) {
			fprintf(stderr, PROG ": out of memory\n");
			ibv_free_device_list(list);
			return 1;
		}
		nr = query_all(list, num, only, devs, &failed);
	}

	if (!nr) {
		if (num > 0 && only) {
			fprintf(stderr, PROG ": no RDMA device named '%s'; there are:",
				only);
			for (int i = 0; i < num; i++)
				fprintf(stderr, " %s", ibv_get_device_name(list[i]));
			fprintf(stderr, "\n");
		} else {
			explain_no_device();
		}
		if (json)
			print_json(devs, 0);
		failed = true;
	} else if (json) {
		print_json(devs, nr);
	} else {
		for (int i = 0; i < nr; i++) {
			if (i)
				printf("\n");
			print_text(&devs[i]);
		}
	}
	for (int i = 0; i < nr; i++) {
		if (devs[i].err[0])
			fprintf(stderr, PROG ": %s: %s\n", devs[i].name,
				devs[i].err);
		free_device(&devs[i]);
	}
	free(devs);
	if (list)
		ibv_free_device_list(list);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, PROG ": error writing output\n");
		return 1;
	}
	return failed ? 1 : 0;
}
