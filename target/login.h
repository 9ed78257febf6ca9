/* SPDX-License-Identifier: MIT */
/*
 * Logins (login.c): what the target answers to a HELLO and to an
 * AUTH_RESPONSE, decided without side effects (fuzzed:
 * tests/fuzz/fuzz_login.c), and the sizes a login grants.
 */
#ifndef RBLK_TARGET_LOGIN_H
#define RBLK_TARGET_LOGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/auth.h"
#include "../common/proto.h"
#include "../transport/transport.h"

struct cfg_host;
struct cfg_target;
struct export;

/* What login_decide() settles for an accepted HELLO. */
struct login_plan {
	struct rblk_hello hello; /* as decoded */
	bool discover;		/* a DISCOVER HELLO: list exports, then close */
	struct export *exp;	/* the export logged in to (lookup's result) */
	struct rblk_limits lim; /* granted: commands are validated against it */
	char why[256];		/* refusal reason, for the log */
};

/*
 * Decide the answer to the HELLO in buf (len bytes) on a connection that
 * asked for cm_qd at connect time: RBLK_S_OK with p filled, or the status
 * to refuse with (p->why says why). Pure: no I/O, allocation or logging;
 * the caller does the side effects. target/login.c.
 *
 * lookup(ctx, name) finds the export (the target's takes a reference: see
 * export_lookup()). Whatever it returned is in p->exp even when the HELLO
 * is refused afterwards, so the caller can drop that reference.
 */
typedef struct export *(*login_lookup_fn)(void *ctx, const char *name);
int login_decide(const void *buf, size_t len, uint16_t cm_qd,
		 uint32_t cfg_max_io, login_lookup_fn lookup, void *ctx,
		 struct login_plan *p);

/*
 * In-capsule WRITE data (docs/PROTOCOL.md, "In-capsule data"): the most a
 * connection with nr_recv receives (tconn_attr() of its queue depth) may
 * be granted, which its receive buffers are sized for when it is
 * accepted: cfg->inline_data when set, else (auto) the largest power of
 * two from 512 to RBLK_INLINE_DEFAULT that keeps its receive ring
 * (nr_recv receives, each RBLK_CMD_SIZE + inline bytes) within
 * INLINE_RING_PINNED where registering pins memory (rdma), INLINE_RING_UNPINNED
 * where it does not (tcp); 0 when none fits. Pure; any thread.
 */
#define INLINE_RING_PINNED (256u << 10)
#define INLINE_RING_UNPINNED (1u << 20)
uint32_t login_inline_cap(const struct cfg_target *cfg, unsigned int nr_recv,
			  bool pinned);
/* The LOGIN granting lim (volume fields and ids are the caller's). */
void login_reply(const struct rblk_limits *lim, struct rblk_login *l);
/*
 * The volume identity of export e: its configured uuid, else the one
 * volid_identify() took from the backing store (e->vol_id). False when it
 * is a stand-in (VOL_IDENT_NONE): LOGIN then says RBLK_F_NO_IDENTITY to an
 * initiator that asked (login_decide()).
 */
bool login_vol_id(const struct export *e, uint8_t id[RBLK_VOL_ID_LEN]);
/*
 * The durability epoch of e (RBLK_F_EPOCH): it stays the same as long as
 * every write the target acknowledged on e survives. A file or a block
 * device keeps them in the page cache or the device's cache while the
 * machine runs, however often the target restarts: the machine's boot
 * (a hash of its boot_id). RBD (librbd's write-back cache) and RAM keep
 * them in the process: a random value per target run.
 */
uint32_t login_epoch(const struct export *e);
/*
 * A LOGIN's session_id: random, its high 32 bits the export's durability
 * epoch (login_epoch()) where l->features has RBLK_F_EPOCH.
 */
void login_session_id(const struct export *e, struct rblk_login *l);

/*
 * The authentication rule (docs/man/rblk-target.conf.5): a host with a
 * [host] section must always authenticate, so nobody can use its name
 * without its secret; an export with allow/allow_ro admits only the hosts
 * listed, authenticated. target/login.c.
 */
bool login_auth_needed(const struct cfg_target *cfg, const struct export *e,
		       const char *host);

/*
 * Before authentication a stranger is not told which exports exist
 * (docs/PROTOCOL.md, "What a stranger learns"): a HELLO refused with st
 * (e: the export found, or NULL) is answered like one for an export that
 * needs authentication - AUTH_REQUIRED, or a challenge when it offers a
 * secret, the real status only once the host has proven itself - when
 * st is NO_EXPORT, ACCESS_DENIED (a closed export), or any refusal of an
 * export that needs authentication (auth_needed: login_auth_needed()).
 * Not when every export is open to any host (all_open): then there is
 * nothing to hide, and a typo in a name is answered NO_EXPORT. Pure.
 */
bool login_hidden_refusal(int st, const struct export *e, bool all_open,
			  bool auth_needed);
/* What auth_decide() settles for an AUTH_RESPONSE. */
struct auth_plan {
	struct rblk_auth_ctx ctx;    /* what the MACs bind (for AUTH_RESULT) */
	const struct cfg_host *host; /* the host proven, on RBLK_S_OK */
	bool read_only;		     /* an allow_ro grant */
	char why[320];		     /* refusal reason, for the log */
};

/*
 * Verify the AUTH_RESPONSE in buf (len bytes) to the challenge nonce sent
 * for hello on export e: decode, refuse a reflected or zero nonce, verify
 * the MAC with the host's secret (a dummy key for an unknown host, so the
 * work is the same), then e's allow list (e NULL: a hidden refusal, no
 * list to check). RBLK_S_OK with a filled, or the
 * status to refuse with (a->why says why). Pure like login_decide(); the
 * caller sends AUTH_RESULT (MAC over a->ctx) and the LOGIN.
 */
int auth_decide(const void *buf, size_t len, const struct cfg_target *cfg,
		const struct export *e, const struct rblk_hello *hello,
		const uint8_t nonce[RBLK_AUTH_NONCE_LEN], struct auth_plan *a);

/*
 * TLS policy of a login (docs/PROTOCOL.md, "TLS"), once the host is
 * known (authenticated, or an open export): host of the HELLO, e its
 * export (NULL: discovery), tp what protects the connection. A TLS
 * session proven by a PSK or a client certificate is that host's only:
 * another host name in the HELLO is refused AUTH_FAILED. A plaintext
 * login that cfg_tls_required() says must not be is refused
 * RBLK_S_TLS_REQUIRED. RBLK_S_OK otherwise; why says why not. Pure.
 */
int login_tls_decide(const struct cfg_target *cfg, const struct export *e,
		     const char *host, const struct xp_tls_peer *tp, char *why,
		     size_t whylen);

#endif
