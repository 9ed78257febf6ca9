/* SPDX-License-Identifier: MIT */
/*
 * The target's answer to a HELLO, as a pure function: no I/O, no
 * allocation, no logging. worker.c calls it and then does the side effects
 * (slot region, registration, LOGIN send); tests/fuzz/fuzz_login.c calls
 * the same function with arbitrary bytes. auth_decide() does the same for
 * an AUTH_RESPONSE.
 */
#include "login.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../config/config.h"

#include "backend.h"
#include "export.h"

int login_decide(const void *buf, size_t len, uint16_t cm_qd,
		 uint32_t cfg_max_io, login_lookup_fn lookup, void *ctx,
		 struct login_plan *p)
{
	uint8_t id[RBLK_VOL_ID_LEN];
	const struct cfg_export *ecfg;
	struct export *e;
	int st;

	memset(p, 0, sizeof(*p));
	st = rblk_hello_decode(buf, len, &p->hello);
	if (st) {
		snprintf(p->why, sizeof(p->why), "%s", rblk_status_str(st));
		return st;
	}
	if (p->hello.flags & RBLK_HELLO_F_DISCOVER) {
		p->discover = true; /* no export, nothing granted */
		return RBLK_S_OK;
	}
	e = lookup(ctx, p->hello.export_name);
	if (!e) {
		snprintf(p->why, sizeof(p->why), "no export named '%s'",
			 p->hello.export_name);
		return RBLK_S_NO_EXPORT;
	}
	p->exp = e;
	ecfg = e->cfg;
	if (ecfg && !ecfg->restricted && !ecfg->allow_any) {
		/* closed by default: no allow list and no allow=any */
		snprintf(
		    p->why, sizeof(p->why),
		    "export %.64s has no allow list (host '%.64s' refused; the target needs allow=HOST or allow=any)",
		    e->name, p->hello.host_name);
		return RBLK_S_ACCESS_DENIED;
	}
	p->lim.queue_depth = MIN(p->hello.queue_depth, cm_qd);
	p->lim.max_io = MIN(p->hello.max_io, cfg_max_io);
	if (p->lim.max_io < e->block_size) {
		snprintf(p->why, sizeof(p->why),
			 "max I/O %u below export %s's block size %u",
			 p->lim.max_io, e->name, e->block_size);
		return RBLK_S_INVALID;
	}
	p->lim.block_size = e->block_size;
	p->lim.size = export_size(e);
	/* every export takes push reads and READ_DONE in a command */
	p->lim.features = e->features | RBLK_F_PUSH | RBLK_F_CMD_DONE;
	if (p->hello.flags & RBLK_HELLO_F_READ_ONLY)
		p->lim.features |= RBLK_F_READ_ONLY;
	/* tag generations, where the initiator numbers its tags' uses */
	if (p->hello.flags & RBLK_HELLO_F_TAG_GEN)
		p->lim.features |= RBLK_F_TAG_GEN;
	/* only to an initiator that knows the bit: older ones refuse it */
	if ((p->hello.flags & RBLK_HELLO_F_IDENTITY) && !login_vol_id(e, id))
		p->lim.features |= RBLK_F_NO_IDENTITY;
	/* as asked; the caller drops it where the transport cannot carry it */
	if (p->hello.flags & RBLK_HELLO_F_PUSH_IMM)
		p->lim.features |= RBLK_F_PUSH_IMM;
	if (p->hello.flags & RBLK_HELLO_F_EPOCH)
		p->lim.features |= RBLK_F_EPOCH;
	/* reservations: not on a direct export (e->pr NULL: pr.h) */
	if ((p->hello.flags & RBLK_HELLO_F_PR) && e->pr)
		p->lim.features |= RBLK_F_PR;
	/* size changes told in answers, where the initiator follows them */
	if (p->hello.flags & RBLK_HELLO_F_RESIZE)
		p->lim.features |= RBLK_F_RESIZE;
	return RBLK_S_OK;
}

uint32_t login_inline_cap(const struct cfg_target *cfg, unsigned int nr_recv,
			  bool pinned)
{
	if (cfg->inline_data != CFG_INLINE_AUTO)
		return (uint32_t)cfg->inline_data;
	return rblk_inline_fit(nr_recv, pinned ? INLINE_RING_PINNED
					       : INLINE_RING_UNPINNED);
}

void login_reply(const struct rblk_limits *lim, struct rblk_login *l)
{
	memset(l, 0, sizeof(*l));
	l->status = RBLK_S_OK;
	l->queue_depth = lim->queue_depth;
	l->inline_data = (uint16_t)lim->inline_max;
	l->max_io = lim->max_io;
	l->block_size = lim->block_size;
	l->size = lim->size;
	l->features = lim->features;
}

static uint32_t epoch_boot, epoch_run;
static pthread_once_t epoch_once = PTHREAD_ONCE_INIT;

static void epoch_init(void)
{
	char id[64];
	uint32_t h = 2166136261u; /* FNV-1a */

	if (read_small_file("/proc/sys/kernel/random/boot_id", id, sizeof(id)) >
	    0) {
		for (const char *c = id; *c; c++)
			h = (h ^ (uint8_t)*c) * 16777619u;
		epoch_boot = h;
	} else {
		/* no boot id: every run may have lost what the last acked */
		random_bytes(&epoch_boot, sizeof(epoch_boot));
		log_warn(
		    "cannot read /proc/sys/kernel/random/boot_id: the durability epoch of files and devices changes with every run");
	}
	random_bytes(&epoch_run, sizeof(epoch_run));
}

uint32_t login_epoch(const struct export *e)
{
	pthread_once(&epoch_once, epoch_init);
	if (e->ops && (e->ops->flags & BACKEND_F_PROCESS_CACHE))
		return epoch_run;
	return epoch_boot;
}

void login_session_id(const struct export *e, struct rblk_login *l)
{
	random_bytes(&l->session_id, sizeof(l->session_id));
	if (l->features & RBLK_F_EPOCH)
		l->session_id =
		    (uint64_t)login_epoch(e) << 32 | (uint32_t)l->session_id;
}

bool login_vol_id(const struct export *e, uint8_t id[RBLK_VOL_ID_LEN])
{
	const struct cfg_export *ecfg = e->cfg;

	_Static_assert(RBLK_VOL_ID_LEN == EXPORT_VOL_ID_LEN,
		       "a backend's volume id is the wire's");
	if (ecfg && ecfg->has_uuid) {
		memcpy(id, ecfg->uuid, RBLK_VOL_ID_LEN);
		return true;
	}
	memcpy(id, e->vol_id, RBLK_VOL_ID_LEN);
	return e->ident != VOL_IDENT_NONE;
}

bool login_hidden_refusal(int st, const struct export *e, bool all_open,
			  bool auth_needed)
{
	if (!st || all_open)
		return false;
	return st == RBLK_S_NO_EXPORT || st == RBLK_S_ACCESS_DENIED ||
	       (e && auth_needed);
}

bool login_auth_needed(const struct cfg_target *cfg, const struct export *e,
		       const char *host)
{
	const struct cfg_export *ecfg = e->cfg;

	return (ecfg && ecfg->restricted) || cfg_find_host(cfg, host);
}

/*
 * One AUTH_RESPONSE per connection, to the nonce of this connection's
 * challenge, so a response recorded on another connection (a replay) fails
 * the MAC. A response that hands our own nonce back is a reflection.
 */
int auth_decide(const void *buf, size_t len, const struct cfg_target *cfg,
		const struct export *e, const struct rblk_hello *hello,
		const uint8_t nonce[RBLK_AUTH_NONCE_LEN], struct auth_plan *a)
{
	const struct cfg_export *ecfg = e ? e->cfg : NULL;
	struct rblk_auth_response resp;
	int allow = 0, st;

	memset(a, 0, sizeof(*a));
	st = rblk_auth_response_decode(buf, len, &resp);
	if (st) {
		snprintf(a->why, sizeof(a->why), "malformed AUTH_RESPONSE");
		return st;
	}
	memcpy(a->ctx.target_nonce, nonce, sizeof(a->ctx.target_nonce));
	memcpy(a->ctx.initiator_nonce, resp.nonce,
	       sizeof(a->ctx.initiator_nonce));
	snprintf(a->ctx.host_name, sizeof(a->ctx.host_name), "%s",
		 hello->host_name);
	snprintf(a->ctx.export_name, sizeof(a->ctx.export_name), "%s",
		 hello->export_name);
	snprintf(a->ctx.target_name, sizeof(a->ctx.target_name), "%s",
		 cfg->name);
	if (rblk_auth_check_nonces(&a->ctx)) {
		snprintf(
		    a->why, sizeof(a->why),
		    "authentication failed for host '%s': reflected or empty nonce",
		    a->ctx.host_name);
		return RBLK_S_AUTH_FAILED;
	}
	a->host = cfg_find_host(cfg, a->ctx.host_name);
	if (!a->host) {
		/* the same work as a wrong secret, so timing tells nothing */
		static const uint8_t no_key[RBLK_SECRET_MIN];

		rblk_auth_verify(no_key, sizeof(no_key),
				 RBLK_AUTH_ROLE_INITIATOR, &a->ctx, resp.mac);
		snprintf(a->why, sizeof(a->why),
			 "authentication failed: unknown host '%s'",
			 a->ctx.host_name);
		return RBLK_S_AUTH_FAILED;
	}
	if (rblk_auth_verify(a->host->secret, a->host->secret_len,
			     RBLK_AUTH_ROLE_INITIATOR, &a->ctx, resp.mac)) {
		snprintf(
		    a->why, sizeof(a->why),
		    "authentication failed for host '%s': wrong secret or stale response",
		    a->ctx.host_name);
		a->host = NULL;
		return RBLK_S_AUTH_FAILED;
	}
	if (ecfg && ecfg->restricted) {
		allow = cfg_export_allows(ecfg, a->ctx.host_name);
		if (allow < 0) {
			snprintf(a->why, sizeof(a->why),
				 "host '%s' is not in export %s's allow list",
				 a->ctx.host_name, e->name);
			a->host = NULL;
			return RBLK_S_ACCESS_DENIED;
		}
	}
	a->read_only = allow == 1;
	return RBLK_S_OK;
}

int login_tls_decide(const struct cfg_target *cfg, const struct export *e,
		     const char *host, const struct xp_tls_peer *tp, char *why,
		     size_t whylen)
{
	const struct cfg_export *ecfg = e ? e->cfg : NULL;
	const char *proven = NULL;

	if (tp->mode != XP_TLS_OFF && tp->name[0]) {
		/* a PSK names its host in the identity, a certificate its CN */
		proven = tp->psk ? rblk_tls_identity_host(tp->name) : tp->name;
		if (!proven || strcmp(proven, host)) {
			snprintf(
			    why, whylen,
			    "host '%.64s' logged in over a TLS session proven by %s '%.64s'",
			    host, tp->psk ? "PSK identity" : "certificate",
			    tp->name);
			return RBLK_S_AUTH_FAILED;
		}
	}
	if (tp->mode == XP_TLS_OFF &&
	    cfg_tls_required(cfg, ecfg, cfg_find_host(cfg, host))) {
		if (e)
			snprintf(
			    why, whylen,
			    "export %.64s requires TLS; host '%.64s' logged in without it",
			    e->name, host);
		else
			snprintf(
			    why, whylen,
			    "the target requires TLS; host '%.64s' asked for discovery without it",
			    host);
		return RBLK_S_TLS_REQUIRED;
	}
	return RBLK_S_OK;
}
