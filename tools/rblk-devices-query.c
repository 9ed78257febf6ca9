/* SPDX-License-Identifier: MIT */
/*
 * rblk-devices: querying the devices. libibverbs for the device, its ports
 * and GIDs (the GID table ioctl, else one GID at a time with the types
 * from sysfs), sysfs for what verbs leave out, and RDMA netlink for the
 * port's netdev as `rdma link` shows it.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "common/util.h"
#include "tools/rblk-devices.h"

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
	struct timeval tv = {.tv_sec = 2};
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};

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
	struct nlattr *a =
	    (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

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
		for (left = (size_t)n; NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
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
	struct nl_devs nd = {.devs = devs, .nr = nr};
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
		p->phys_state = p->attr.phys_state
				    ? p->attr.phys_state
				    : sysfs_phys_state(d, p->num);
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

void free_device(struct dev_info *d)
{
	for (unsigned int i = 0; d->ports && i < d->nr_ports; i++)
		free(d->ports[i].gids);
	free(d->ports);
}

int query_all(struct ibv_device **list, int num, const char *only,
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
		for (unsigned int k = 0;
		     !devs[i].err[0] && k < devs[i].nr_ports; k++)
			if (!devs[i].ports[k].err)
				port_netdev(&devs[i], &devs[i].ports[k]);
	return nr;
}
