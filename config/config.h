/* SPDX-License-Identifier: MIT */
/*
 * rblk-target configuration: the INI file (parsed with libinih) and the
 * equivalent command-line options. See docs/man/rblk-target.conf.5.
 */
#ifndef RBLK_CONFIG_H
#define RBLK_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/auth.h"
#include "../common/proto.h"

#define CFG_MAX_LISTEN 16
#define CFG_MAX_EXPORTS 256
#define CFG_MAX_HOSTS 64
#define CFG_MAX_ALLOW 16 /* hosts named by one export's allow + allow_ro */

/*
 * Quality of service: token buckets for an export or a host entry
 * (target/qos.c). limit[k]: I/Os or bytes per second, 0 = no limit; the
 * bucket holds burst_ms worth of it (at least one I/O of max_io). Keys in
 * the file, on --export and in `ctl set-qos`: iops, read_iops,
 * write_iops, bps, read_bps, write_bps (sizes: 50M = 50 MiB/s), burst_ms.
 */
enum cfg_qos_kind {
	CFG_QOS_IOPS,
	CFG_QOS_READ_IOPS,
	CFG_QOS_WRITE_IOPS,
	CFG_QOS_BPS,
	CFG_QOS_READ_BPS,
	CFG_QOS_WRITE_BPS,
	CFG_QOS_NR,
};
#define CFG_QOS_DEFAULT_BURST_MS 100
#define CFG_QOS_MAX_BURST_MS 60000

struct cfg_qos {
	uint64_t limit[CFG_QOS_NR];
	uint32_t burst_ms; /* 0: CFG_QOS_DEFAULT_BURST_MS */
};

/* The key name of limit k ("iops", "read_bps", ...). */
const char *cfg_qos_key(enum cfg_qos_kind k);
/*
 * Set one QoS key (a limit or burst_ms) from text: 0, -ENOENT when key is
 * not a QoS key, else -EINVAL with the reason in why.
 */
int cfg_qos_set(struct cfg_qos *q, const char *key, const char *value,
		char *why, size_t whylen);
/* Any limit set. */
bool cfg_qos_any(const struct cfg_qos *q);
/* Limits and direct=yes exclude each other: 0, or -EINVAL and why. */
struct cfg_export;
int cfg_check_export_qos(const struct cfg_export *e, char *why, size_t whylen);

/*
 * TLS on tcp listeners (docs/PROTOCOL.md, "TLS"): `tls` of [target]
 * (--tls), of an export and of a host entry. The target's value says
 * whether its tcp listeners take TLS (off: no; optional, the default
 * when it has credentials: both; required: a plaintext login is refused
 * with RBLK_S_TLS_REQUIRED). An export's value overrides the target's
 * for logins to it; a host entry's can only add the requirement.
 */
enum cfg_tls {
	CFG_TLS_UNSET = 0,
	CFG_TLS_OFF,
	CFG_TLS_OPTIONAL,
	CFG_TLS_REQUIRED,
};
/* "off", "optional", "required": 0, or -EINVAL */
int cfg_parse_tls(const char *s, enum cfg_tls *out);
const char *cfg_tls_str(enum cfg_tls t);

/* A host that authenticates with a shared secret ([host NAME]). */
struct cfg_host {
	char name[RBLK_NAME_MAX];
	uint8_t secret[RBLK_SECRET_MAX];
	size_t secret_len;
	struct cfg_qos qos; /* limits on all its sessions together */
	uint8_t tls;	    /* enum cfg_tls: required refuses plaintext */
};

/* cfg_export.direct: register the volume itself for each connection */
enum cfg_direct {
	CFG_DIRECT_DEFAULT = 0, /* RAM volumes: yes; files: no */
	CFG_DIRECT_NO,
	CFG_DIRECT_YES, /* files are mmap'd MAP_SHARED; block devices refused */
};

struct cfg_export {
	char name[RBLK_NAME_MAX];
	/* A file or block device path, or "ram:SIZE" (e.g. ram:1G). */
	char path[PATH_MAX];
	bool read_only;
	uint32_t block_size; /* 0: choose (device logical block size or 512) */
	/*
	 * Access list. With allow/allow_ro, only the hosts named, each after
	 * authenticating; allow_ro ones get a read-only login. Without them
	 * every host is refused unless allow_any is set (allow=any, or the
	 * target's allow_any_host): then any host may log in (hosts with a
	 * [host] section must still authenticate).
	 */
	bool restricted; /* allow or allow_ro given */
	bool allow_any;	 /* allow=any: open to every host (not with a list) */
	bool overcommit; /* ram:SIZE beyond the memory available is accepted */
	unsigned int nr_allow;
	char allow[CFG_MAX_ALLOW][RBLK_NAME_MAX];
	bool allow_ro[CFG_MAX_ALLOW];
	enum cfg_direct direct;
	/*
	 * cache=buffered: file and block-device I/O through the page cache
	 * (read-ahead, write-back) instead of O_DIRECT, as nvmet's
	 * buffered_io; flush and FUA still reach the disk.
	 */
	bool cache_buffered;
	/* uuid = / uuid=: the volume identity LOGIN reports (vol_id) */
	bool has_uuid;
	uint8_t uuid[16];
	/* limits on all its sessions together; a limited export is not direct
	 */
	struct cfg_qos qos;
	/*
	 * pr_file = / pr_file=: where its reservations are kept (a file
	 * or block device export; "": the default, target/pr.c).
	 */
	char pr_file[PATH_MAX];
	uint8_t tls; /* enum cfg_tls; unset: the target's */
};

/* Ceph settings shared by the rbd: exports (target/backend_rbd.c). */
struct cfg_ceph {
	char conf[PATH_MAX];	  /* ceph.conf; "": $CEPH_CONF, /etc/ceph/... */
	char id[RBLK_NAME_MAX];	  /* client name without "client.": "admin" */
	char keyring[PATH_MAX];	  /* "": what ceph.conf says */
	unsigned int connections; /* rados cluster connections, default 1 */
	bool takeover; /* break another gateway's lock (blocklist); yes */
	unsigned int timeout_s; /* mon, mount and OSD op timeout, 20 s */
};

struct cfg_target {
	char listen[CFG_MAX_LISTEN]
		   [256]; /* URLs: tcp://host:port, rdma://... */
	unsigned int nr_listen;
	struct cfg_export exports[CFG_MAX_EXPORTS];
	unsigned int nr_exports;
	unsigned int workers;	      /* 0: one per online CPU */
	char engine[16];	      /* "io_uring" (default) or "libaio" */
	int log_level;		      /* enum log_level; -1: not set */
	unsigned int max_queue_depth; /* cap on what initiators may request */
	uint32_t max_io;	      /* cap on max_io, power of two */
	/* slot pool bytes for the whole target, split over the workers */
	uint64_t slot_pool;
	/*
	 * Most in-capsule WRITE bytes granted per command, a multiple of
	 * 512 up to 16K (0: off); CFG_INLINE_AUTO: the depth-dependent
	 * default of login_inline_cap() (docs/PROTOCOL.md, "In-capsule data").
	 */
	int inline_data;
	/*
	 * Limits (docs/RELIABILITY.md): connections not yet logged in, in
	 * all and per source address; live sessions, in all and per source
	 * address; a session that sends nothing for idle_timeout seconds is
	 * dropped (0: never).
	 */
	unsigned int max_pending, max_pending_per_host;
	unsigned int max_sessions, max_sessions_per_host;
	unsigned int idle_timeout;
	/*
	 * The slot pool a session may hold (docs/PROTOCOL.md, "What a
	 * session may hold"): session_pool_share percent of its worker's
	 * pool (the sessions of one source address together twice that),
	 * each window for at most window_timeout seconds.
	 */
	unsigned int session_pool_share, window_timeout;
	/*
	 * A worker whose sessions all went quiet polls them for this long
	 * (microseconds, 0..1000) before it sleeps, so a command that comes
	 * within it costs no wake-up; 0 (default): sleep at once.
	 */
	unsigned int poll_spin_us;
	/* control socket: a unix socket path, or "none" */
	char ctl_socket[108];
	/* given explicitly: failing to create it is fatal */
	bool ctl_socket_set;
	unsigned int ctl_socket_mode; /* permission bits, default 0600 */
	/* permission bits of unix data sockets (listen unix:), default 0660 */
	unsigned int unix_socket_mode;
	char metrics[256]; /* "tcp://HOST:PORT" for GET /metrics, or "" */
	char name[RBLK_NAME_MAX]; /* identity in authentication; "": hostname */
	struct cfg_host hosts[CFG_MAX_HOSTS];
	unsigned int nr_hosts;
	struct cfg_ceph ceph; /* rbd:POOL/IMAGE exports */
	/* exports without an allow list are open to any host (default no) */
	bool allow_any_host;
	/*
	 * TLS (enum cfg_tls; see above) and the X.509 files, PEM: the
	 * target's certificate and key, and the CA that client certificates
	 * must chain to (optional; a client certificate's CN names a host).
	 */
	uint8_t tls;
	char tls_cert[PATH_MAX], tls_key[PATH_MAX], tls_ca[PATH_MAX];
};

/* A configuration file larger than this is refused (it is not one). */
#define CFG_MAX_FILE_SIZE (1024 * 1024)

#define CFG_DEFAULT_CTL_SOCKET "/run/rblk/target.sock"

#define CFG_DEFAULT_SLOT_POOL (256ull << 20)
#define CFG_DEFAULT_MAX_PENDING 1024
#define CFG_DEFAULT_MAX_PENDING_PER_HOST 256
#define CFG_DEFAULT_MAX_SESSIONS 4096
/* a quarter of the total: no fewer than four addresses fill it */
#define CFG_DEFAULT_MAX_SESSIONS_PER_HOST 1024
#define CFG_DEFAULT_IDLE_TIMEOUT 300
#define CFG_DEFAULT_SESSION_POOL_SHARE 25
#define CFG_DEFAULT_WINDOW_TIMEOUT 5

/* Defaults: no listeners, no exports, workers 0, engine io_uring,
 * log_level -1, max_queue_depth 128, max_io 1 MiB, control socket
 * /run/rblk/target.sock with mode 0600, no metrics endpoint. */
void cfg_init(struct cfg_target *cfg);

/*
 * Parse an INI file into cfg (on top of what is there). On error returns
 * -errno (-ENOENT, -EINVAL, ...) with "FILE:LINE: reason" in err.
 *
 *   [target]
 *   listen = tcp://0.0.0.0:7441      ; may repeat
 *   workers = 2
 *   engine = io_uring | libaio
 *   log_level = error | warn | info | debug
 *   max_queue_depth = 128
 *   max_io = 1M
 *   ctl_socket = /run/rblk/target.sock | none
 *   ctl_socket_mode = 0600
 *   unix_socket_mode = 0660          ; listen = unix:///?socket=PATH
 *   metrics = tcp://127.0.0.1:9441
 *   ceph_conf = /etc/ceph/ceph.conf ; for path = rbd:POOL/IMAGE exports
 *   ceph_id = admin                  ; client.ID; ceph_keyring = PATH
 *   rbd_cluster_connections = 1      ; rados connections, images spread
 *   rbd_takeover = yes               ; break a stale gateway's lock
 *   rbd_timeout = 20                 ; s: cluster ops fail, never hang
 *   allow_any_host = no              ; yes: exports without allow lists
 *                                    ; are open to every host
 *
 *   [export NAME]
 *   path = /srv/vol0.img | /dev/sdb | ram:1G
 *   read_only = yes | no
 *   block_size = 512 | 4096 ...
 *   allow = host1, host2             ; only these hosts, authenticated
 *   allow = any                      ; or: every host (no list: none)
 *   allow_ro = host3                 ; read-only for these
 *   overcommit = no                  ; ram:SIZE beyond MemAvailable
 *
 *   [host NAME]
 *   secret_file = /etc/rblk/NAME.key ; mode 0600 or stricter
 *   secret = TEXT                    ; or the secret inline
 *   direct = yes | no                ; RAM: yes unless no; files: no
 */
int cfg_load(struct cfg_target *cfg, const char *path, char *err,
	     size_t errlen);

/*
 * Parse "NAME=PATH[,ro][,bs=N][,direct|,nodirect]" (the --export option)
 * and add it.
 */
int cfg_add_export_arg(struct cfg_target *cfg, const char *arg, char *err,
		       size_t errlen);

/*
 * Parse "NAME:secret-file=PATH" (the --host option): read the secret file
 * and add the host.
 */
int cfg_add_host_arg(struct cfg_target *cfg, const char *arg, char *err,
		     size_t errlen);

/* The [host] entry named name, or NULL. */
const struct cfg_host *cfg_find_host(const struct cfg_target *cfg,
				     const char *name);

/*
 * Where e's access list puts host name: -1 not listed, 0 read-write,
 * 1 read-only. Only meaningful when e->restricted.
 */
int cfg_export_allows(const struct cfg_export *e, const char *name);
/*
 * Replace e's access list: allow and allow_ro are comma-separated host
 * lists (NULL or "" for none); allow may be "any" alone (open to every
 * host). Both empty leaves e without a list: closed, unless cfg has
 * allow_any_host. Every host named must have a [host] section in cfg.
 * -errno with the reason in err.
 */
int cfg_export_set_access(const struct cfg_target *cfg, struct cfg_export *e,
			  const char *allow, const char *allow_ro, char *err,
			  size_t errlen);

/* Add a listen URL after checking it parses; -EINVAL with reason. */
int cfg_add_listen(struct cfg_target *cfg, const char *url, char *err,
		   size_t errlen);

/*
 * Check one export definition as the file and --export do (name, path or
 * ram:SIZE, block size); for exports added at run time.
 */
int cfg_check_export(const struct cfg_export *e, char *err, size_t errlen);

/* A UUID as 8-4-4-4-12 hex digits into out; -EINVAL when it is not one. */
int cfg_parse_uuid(const char *s, uint8_t out[16]);

/* Set the control socket ("none" disables); -EINVAL with reason. */
int cfg_set_ctl_socket(struct cfg_target *cfg, const char *path, char *err,
		       size_t errlen);
/* Parse an octal mode such as 0600 or 660; -EINVAL with reason. */
int cfg_set_ctl_socket_mode(struct cfg_target *cfg, const char *mode, char *err,
			    size_t errlen);
/* The same for unix data sockets (any mode that lets the owner in). */
int cfg_set_unix_socket_mode(struct cfg_target *cfg, const char *mode,
			     char *err, size_t errlen);
/*
 * Set the metrics endpoint: tcp://HOST:PORT, or a bare PORT meaning
 * tcp://127.0.0.1:PORT; -EINVAL with reason.
 */
/*
 * A numeric key (max_pending, max_pending_per_host, max_sessions,
 * max_sessions_per_host, idle_timeout, poll_spin_us) by name: 1..1000000
 * (idle_timeout 0..86400, poll_spin_us 0..1000). 0, -ENOENT for another
 * key, or -EINVAL with err set.
 */
int cfg_set_limit(struct cfg_target *cfg, const char *key, const char *value,
		  char *err, size_t errlen);
#define CFG_INLINE_AUTO (-1)
/* inline_data = SIZE|auto / --inline-data. 0 or -EINVAL with err set. */
int cfg_set_inline_data(struct cfg_target *cfg, const char *value, char *err,
			size_t errlen);
/* slot_pool = SIZE / --slot-pool: 1M..1T. 0 or -EINVAL with err set. */
int cfg_set_slot_pool(struct cfg_target *cfg, const char *value, char *err,
		      size_t errlen);
int cfg_set_metrics(struct cfg_target *cfg, const char *url, char *err,
		    size_t errlen);

/*
 * Final checks: at least one export and listener, unique export names.
 * Then, with allow_any_host, opens every export without an allow list
 * (sets its allow_any).
 */
int cfg_validate(struct cfg_target *cfg, char *err, size_t errlen);

/*
 * A TLS key of [target] (tls, tls_cert, tls_key, tls_ca; the same names
 * as --tls, --tls-cert, ...): 0, -ENOENT for another key, or -EINVAL
 * with why set.
 */
int cfg_set_tls_key(struct cfg_target *cfg, const char *key, const char *value,
		    char *why, size_t whylen);
/* Whether the tcp listeners take TLS handshakes (after cfg_validate()). */
bool cfg_tls_accepted(const struct cfg_target *cfg);
/*
 * Whether a login of host (its entry, NULL: none) to export e (NULL:
 * discovery) must come over TLS.
 */
bool cfg_tls_required(const struct cfg_target *cfg, const struct cfg_export *e,
		      const struct cfg_host *h);

/* An export's cache= value: "direct" (the default: O_DIRECT where the file
 * system allows it) or "buffered" (the page cache); 0 or -EINVAL. */
int cfg_parse_cache(const char *s, bool *buffered);

#endif
