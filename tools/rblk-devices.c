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
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rblk/rblk.h"
#include "common/json.h"
#include "common/util.h"
#include "common/version.h"
#include "tools/rblk-devices.h"

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
	    [1] = "SLEEP",    [2] = "POLLING", [3] = "DISABLED",
	    [4] = "TRAINING", [5] = "LINK_UP", [6] = "LINK_ERROR_RECOVERY",
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
		return d->transport == IBV_TRANSPORT_IB ? "InfiniBand"
							: "unspecified";
	}
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
	    {1, "SDR", 2.5},	{2, "DDR", 5.0},     {4, "QDR", 10.0},
	    {8, "FDR10", 10.0}, {16, "FDR", 14.0},   {32, "EDR", 25.0},
	    {64, "HDR", 50.0},	{128, "NDR", 100.0},
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
		 (unsigned)(guid >> 32) & 0xffff,
		 (unsigned)(guid >> 16) & 0xffff, (unsigned)guid & 0xffff);
}

static void format_gid(char *buf, size_t len, const union ibv_gid *gid)
{
	if (!inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
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
	       d->attr.fw_ver[0] ? d->attr.fw_ver : "(none)", d->attr.vendor_id,
	       d->attr.vendor_part_id, d->attr.hw_ver, d->nr_ports,
	       d->nr_ports == 1 ? "" : "s");
	printf(
	    "    max_qp %d, max_qp_wr %d, max_sge %d, max_mr %d, max_mr_size %" PRIu64
	    ", max_qp_rd_atom %d, max_qp_init_rd_atom %d\n",
	    d->attr.max_qp, d->attr.max_qp_wr, d->attr.max_sge, d->attr.max_mr,
	    (uint64_t)d->attr.max_mr_size, d->attr.max_qp_rd_atom,
	    d->attr.max_qp_init_rd_atom);

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
		printf("\n    active MTU %d (max %d)",
		       mtu_bytes(p->attr.active_mtu),
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
		fprintf(
		    stderr,
		    PROG
		    ": the kernel has RDMA devices (%s) but libibverbs sees none.\n"
		    "Load the user-space verbs interface (modprobe ib_uverbs) and make sure\n"
		    "rdma-core's ibverbs providers for the driver are installed\n"
		    "(Debian: ibverbs-providers).\n",
		    kdevs);
		return;
	}
	fprintf(
	    stderr, PROG
	    ": no RDMA devices found.\n"
	    "To get a software device:\n"
	    "  modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0   (RoCE)\n"
	    "  modprobe siw && rdma link add siw0 type siw netdev eth0        (iWARP)\n"
	    "(replace eth0 with a network interface of this host);\n"
	    "rdma-core's ibverbs providers must be installed (Debian: ibverbs-providers).\n");
}

static void usage(FILE *f)
{
	fprintf(
	    f,
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
	    {"output", required_argument, NULL, 'o'},
	    {"device", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "o:d:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
				fprintf(
				    stderr,
				    PROG
				    ": unknown output format '%s' (text or json)\n",
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
			fprintf(stderr,
				PROG ": no RDMA device named '%s'; there are:",
				only);
			for (int i = 0; i < num; i++)
				fprintf(stderr, " %s",
					ibv_get_device_name(list[i]));
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
