/* SPDX-License-Identifier: MIT */
/*
 * rblk-devices: what the program learns about a device and how
 * (rblk-devices-query.c: verbs, sysfs, RDMA netlink), for the printers
 * and main() in rblk-devices.c.
 */
#ifndef RBLK_TOOLS_RBLK_DEVICES_H
#define RBLK_TOOLS_RBLK_DEVICES_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define PROG "rblk-devices"
#define SYSFS_IB "/sys/class/infiniband"

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
	int64_t nl_index;   /* RDMA netlink device index, -1 when unknown */
	char err[160]; /* why the device could not be queried, "" if fine */
	struct ibv_device_attr attr;
	struct port_info *ports;
	unsigned int nr_ports;
};

static inline bool is_ib(const struct dev_info *d, const struct port_info *p)
{
	return p->attr.link_layer == IBV_LINK_LAYER_INFINIBAND ||
	       (p->attr.link_layer == IBV_LINK_LAYER_UNSPECIFIED &&
		d->transport == IBV_TRANSPORT_IB);
}

/*
 * Query the devices of list (only the one named only, when given) into
 * devs, with their netdevs; returns how many, and sets *failed when one
 * could not be queried.
 */
int query_all(struct ibv_device **list, int num, const char *only,
	      struct dev_info *devs, bool *failed);
void free_device(struct dev_info *d);

#endif
