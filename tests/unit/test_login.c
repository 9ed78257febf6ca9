/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the target's login decisions (target/login.c, linked as
 * it is): login_decide() on HELLOs encoded by common/proto.c (malformed,
 * discovery, unknown export, closed by default, negotiated limits, a
 * read-only request), login_reply(), login_vol_id() (configured uuid,
 * the export's own id, a stand-in flagged NO_IDENTITY only when asked),
 * login_auth_needed() and auth_decide() on AUTH_RESPONSEs MACed by
 * common/auth.c (right secret, wrong secret, unknown host, reflected and
 * zero nonces, allow and allow_ro lists, a response to another nonce).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/auth.h"
#include "common/proto.h"
#include "config/config.h"
#include "target/backend.h"
#include "target/export.h"
#include "target/login.h"

static struct cfg_export cfg_open, cfg_closed, cfg_list;
static struct export exp_open, exp_closed, exp_list;
static struct cfg_target tcfg;
static const uint8_t secret_a[] = "secret-of-host-a-0123456789";
static const uint8_t secret_b[] = "secret-of-host-b-0123456789";

static struct export *lookup(void *ctx, const char *name)
{
	struct export *list[] = {&exp_open, &exp_closed, &exp_list};

	assert_ptr_equal(ctx, &tcfg);
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		if (!strcmp(list[i]->name, name))
			return list[i];
	return NULL;
}

static void export_init(struct export *e, struct cfg_export *c,
			const char *name)
{
	memset(e, 0, sizeof(*e));
	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->size = 64ull << 20;
	e->block_size = 4096;
	e->features = RBLK_F_FLUSH | RBLK_F_TRIM;
	e->cfg = c;
}

static void host_add(const char *name, const uint8_t *secret, size_t len)
{
	struct cfg_host *h = &tcfg.hosts[tcfg.nr_hosts++];

	snprintf(h->name, sizeof(h->name), "%s", name);
	memcpy(h->secret, secret, len);
	h->secret_len = len;
}

static int setup(void **state)
{
	assert_int_equal(rblk_auth_init(), 0);
	memset(&tcfg, 0, sizeof(tcfg));
	snprintf(tcfg.name, sizeof(tcfg.name), "target-1");
	memset(&cfg_open, 0, sizeof(cfg_open));
	memset(&cfg_closed, 0, sizeof(cfg_closed));
	memset(&cfg_list, 0, sizeof(cfg_list));
	export_init(&exp_open, &cfg_open, "open");
	cfg_open.allow_any = true;
	export_init(&exp_closed, &cfg_closed, "closed");
	export_init(&exp_list, &cfg_list, "list");
	cfg_list.restricted = true;
	cfg_list.nr_allow = 2;
	snprintf(cfg_list.allow[0], RBLK_NAME_MAX, "host-a");
	snprintf(cfg_list.allow[1], RBLK_NAME_MAX, "host-b");
	cfg_list.allow_ro[1] = true;
	host_add("host-a", secret_a, sizeof(secret_a) - 1);
	host_add("host-b", secret_b, sizeof(secret_b) - 1);
	return 0;
}

static size_t hello(uint8_t *buf, const char *export, uint16_t qd,
		    uint32_t max_io, uint32_t flags)
{
	struct rblk_hello h = {
	    .queue_depth = qd, .max_io = max_io, .flags = flags};

	snprintf(h.export_name, sizeof(h.export_name), "%s", export);
	snprintf(h.host_name, sizeof(h.host_name), "host-a");
	return rblk_hello_encode(buf, &h);
}

static int decide(const uint8_t *buf, size_t len, uint16_t cm_qd,
		  uint32_t max_io, struct login_plan *p)
{
	return login_decide(buf, len, cm_qd, max_io, lookup, &tcfg, p);
}

/* ---- login_decide ------------------------------------------------------ */

static void test_grant(void **state)
{
	uint8_t buf[RBLK_MSG_MAX];
	struct login_plan p;
	struct rblk_login l;
	size_t n;

	/* the smaller of what each side offers */
	n = hello(buf, "open", 64, 1 << 20, 0);
	assert_int_equal(decide(buf, n, 32, 256 << 10, &p), RBLK_S_OK);
	assert_ptr_equal(p.exp, &exp_open);
	assert_false(p.discover);
	assert_int_equal(p.lim.queue_depth, 32);
	assert_int_equal(p.lim.max_io, 256 << 10);
	assert_int_equal(p.lim.block_size, 4096);
	assert_int_equal(p.lim.size, 64ull << 20);
	/* the export's features; push reads and READ_DONE in a CMD always */
	assert_int_equal(p.lim.features, RBLK_F_FLUSH | RBLK_F_TRIM |
					     RBLK_F_PUSH | RBLK_F_CMD_DONE);
	assert_string_equal(p.hello.host_name, "host-a");

	n = hello(buf, "open", 8, 64 << 10, 0);
	assert_int_equal(decide(buf, n, 128, 1 << 20, &p), RBLK_S_OK);
	assert_int_equal(p.lim.queue_depth, 8);
	assert_int_equal(p.lim.max_io, 64 << 10);

	login_reply(&p.lim, &l);
	assert_int_equal(l.status, RBLK_S_OK);
	assert_int_equal(l.queue_depth, 8);
	assert_int_equal(l.max_io, 64 << 10);
	assert_int_equal(l.block_size, 4096);
	assert_int_equal(l.size, 64ull << 20);
	assert_int_equal(l.features, p.lim.features);
	assert_int_equal(l.vol_rkey, 0);
}

static void test_read_only_request(void **state)
{
	uint8_t buf[RBLK_MSG_MAX];
	struct login_plan p;
	size_t n = hello(buf, "open", 16, 1 << 20, RBLK_HELLO_F_READ_ONLY);

	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_true(p.lim.features & RBLK_F_READ_ONLY);
}

/* PUSH_IMM only when asked (conn.c then drops it on tcp) */
static void test_push_imm(void **state)
{
	uint8_t buf[RBLK_MSG_MAX];
	struct login_plan p;
	size_t n = hello(buf, "open", 16, 1 << 20, RBLK_HELLO_F_PUSH_IMM);

	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_true(p.lim.features & RBLK_F_PUSH_IMM);
	n = hello(buf, "open", 16, 1 << 20, 0);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_false(p.lim.features & RBLK_F_PUSH_IMM);
}

static void test_refusals(void **state)
{
	uint8_t buf[RBLK_MSG_MAX];
	struct login_plan p;
	size_t n;

	/* truncated: the decoder's status, and a reason */
	n = hello(buf, "open", 16, 1 << 20, 0);
	assert_int_not_equal(decide(buf, n - 1, 16, 1 << 20, &p), RBLK_S_OK);
	assert_true(p.why[0]);
	assert_null(p.exp);

	/* garbage */
	memset(buf, 0xa5, sizeof(buf));
	assert_int_not_equal(decide(buf, 64, 16, 1 << 20, &p), RBLK_S_OK);

	n = hello(buf, "nosuch", 16, 1 << 20, 0);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_NO_EXPORT);
	assert_non_null(strstr(p.why, "nosuch"));

	/* no allow list and no allow=any: closed */
	n = hello(buf, "closed", 16, 1 << 20, 0);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_ACCESS_DENIED);
	assert_non_null(strstr(p.why, "no allow list"));

	/* an allow list: the login goes on to authentication */
	n = hello(buf, "list", 16, 1 << 20, RBLK_HELLO_F_AUTH);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_ptr_equal(p.exp, &exp_list);

	/* max I/O below the block size */
	n = hello(buf, "open", 16, 1 << 20, 0);
	exp_open.block_size = 8192;
	assert_int_equal(decide(buf, n, 16, 4096, &p), RBLK_S_INVALID);
	exp_open.block_size = 4096;
	assert_non_null(strstr(p.why, "block size"));
}

static void test_discover(void **state)
{
	uint8_t buf[RBLK_MSG_MAX];
	struct login_plan p;
	size_t n = hello(buf, "", 1, 1 << 20, RBLK_HELLO_F_DISCOVER);

	assert_int_equal(decide(buf, n, 1, 1 << 20, &p), RBLK_S_OK);
	assert_true(p.discover);
	assert_null(p.exp);
	assert_int_equal(p.lim.queue_depth, 0);
}

/* ---- volume ids -------------------------------------------------------- */

static void test_vol_id(void **state)
{
	uint8_t a[RBLK_VOL_ID_LEN];
	uint8_t buf[RBLK_MSG_MAX];
	struct login_plan p;
	size_t n;

	/* the export's own identity (volid_identify()) is reported */
	for (unsigned int i = 0; i < sizeof(exp_open.vol_id); i++)
		exp_open.vol_id[i] = (uint8_t)(0xa0 + i);
	exp_open.ident = VOL_IDENT_XATTR;
	assert_true(login_vol_id(&exp_open, a));
	assert_memory_equal(a, exp_open.vol_id, sizeof(a));

	/* a stand-in is reported too, but said to be one */
	exp_open.ident = VOL_IDENT_NONE;
	assert_false(login_vol_id(&exp_open, a));
	assert_memory_equal(a, exp_open.vol_id, sizeof(a));

	/* ... to an initiator that asked, and only to one that asked */
	n = hello(buf, "open", 16, 1 << 20, RBLK_HELLO_F_IDENTITY);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_true(p.lim.features & RBLK_F_NO_IDENTITY);
	n = hello(buf, "open", 16, 1 << 20, 0);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_false(p.lim.features & RBLK_F_NO_IDENTITY);
	exp_open.ident = VOL_IDENT_RUN;
	n = hello(buf, "open", 16, 1 << 20, RBLK_HELLO_F_IDENTITY);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_false(p.lim.features & RBLK_F_NO_IDENTITY);

	/* a configured uuid is reported as it is, and is an identity */
	exp_open.ident = VOL_IDENT_NONE;
	cfg_open.has_uuid = true;
	for (unsigned int i = 0; i < sizeof(cfg_open.uuid); i++)
		cfg_open.uuid[i] = (uint8_t)i;
	assert_true(login_vol_id(&exp_open, a));
	assert_memory_equal(a, cfg_open.uuid, sizeof(a));
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_false(p.lim.features & RBLK_F_NO_IDENTITY);
	cfg_open.has_uuid = false;
}

/* ---- the durability epoch (RBLK_F_EPOCH) ----------------------------- */

static void test_epoch(void **state)
{
	uint8_t buf[RBLK_MSG_MAX];
	struct rblk_login a = {0}, b = {0};
	struct export ram = exp_open;
	struct backend_ops ram_ops = {.name = "ram",
				      .flags = BACKEND_F_PROCESS_CACHE};
	struct login_plan p;
	size_t n;

	/* only to an initiator that asked */
	n = hello(buf, "open", 16, 1 << 20, 0);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_false(p.lim.features & RBLK_F_EPOCH);
	n = hello(buf, "open", 16, 1 << 20, RBLK_HELLO_F_EPOCH);
	assert_int_equal(decide(buf, n, 16, 1 << 20, &p), RBLK_S_OK);
	assert_true(p.lim.features & RBLK_F_EPOCH);

	/* every session of one run carries the same epoch in session_id */
	login_reply(&p.lim, &a);
	login_reply(&p.lim, &b);
	login_session_id(&exp_open, &a);
	login_session_id(&exp_open, &b);
	assert_int_equal(rblk_login_epoch(&a), login_epoch(&exp_open));
	assert_int_equal(rblk_login_epoch(&a), rblk_login_epoch(&b));
	assert_int_not_equal(a.session_id, b.session_id);

	/* a file's epoch is the boot's, a RAM volume's the run's */
	ram.ops = &ram_ops;
	assert_int_not_equal(login_epoch(&ram), login_epoch(&exp_open));
}

static void test_auth_needed(void **state)
{
	/* a restricted export, or a host with a secret */
	assert_true(login_auth_needed(&tcfg, &exp_list, "host-z"));
	assert_true(login_auth_needed(&tcfg, &exp_open, "host-a"));
	assert_false(login_auth_needed(&tcfg, &exp_open, "host-z"));
}

/* ---- auth_decide ------------------------------------------------------- */

struct auth_case {
	const char *host, *export;
	const uint8_t *key;
	size_t key_len;
	uint8_t nonce[RBLK_AUTH_NONCE_LEN];  /* the target's challenge */
	uint8_t inonce[RBLK_AUTH_NONCE_LEN]; /* the initiator's */
	struct rblk_hello hello;
	uint8_t buf[RBLK_MSG_MAX];
	size_t len;
};

/* An AUTH_RESPONSE as the initiator builds it, MACed over mac_nonce. */
static void respond(struct auth_case *c, const uint8_t *mac_nonce)
{
	struct rblk_auth_response r;
	struct rblk_auth_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.target_nonce, mac_nonce, RBLK_AUTH_NONCE_LEN);
	memcpy(ctx.initiator_nonce, c->inonce, RBLK_AUTH_NONCE_LEN);
	snprintf(ctx.host_name, sizeof(ctx.host_name), "%s", c->host);
	snprintf(ctx.export_name, sizeof(ctx.export_name), "%s", c->export);
	snprintf(ctx.target_name, sizeof(ctx.target_name), "%s", tcfg.name);
	memcpy(r.nonce, c->inonce, sizeof(r.nonce));
	rblk_auth_mac(c->key, c->key_len, RBLK_AUTH_ROLE_INITIATOR, &ctx,
		      r.mac);
	c->len = rblk_auth_response_encode(c->buf, &r);
	memset(&c->hello, 0, sizeof(c->hello));
	snprintf(c->hello.host_name, sizeof(c->hello.host_name), "%s", c->host);
	snprintf(c->hello.export_name, sizeof(c->hello.export_name), "%s",
		 c->export);
}

static void auth_case_init(struct auth_case *c, const char *host,
			   const char *export, const uint8_t *key,
			   size_t key_len)
{
	memset(c, 0, sizeof(*c));
	c->host = host;
	c->export = export;
	c->key = key;
	c->key_len = key_len;
	rblk_auth_nonce(c->nonce);
	rblk_auth_nonce(c->inonce);
	respond(c, c->nonce);
}

static int auth(struct auth_case *c, struct export *e, struct auth_plan *a)
{
	return auth_decide(c->buf, c->len, &tcfg, e, &c->hello, c->nonce, a);
}

static void test_auth_ok(void **state)
{
	struct auth_case c;
	struct auth_plan a;

	auth_case_init(&c, "host-a", "list", secret_a, sizeof(secret_a) - 1);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_OK);
	assert_string_equal(a.host->name, "host-a");
	assert_false(a.read_only);
	/* what the target's own MAC (AUTH_RESULT) will bind */
	assert_memory_equal(a.ctx.target_nonce, c.nonce, RBLK_AUTH_NONCE_LEN);
	assert_memory_equal(a.ctx.initiator_nonce, c.inonce,
			    RBLK_AUTH_NONCE_LEN);
	assert_string_equal(a.ctx.target_name, "target-1");

	/* allow_ro: a read-only grant */
	auth_case_init(&c, "host-b", "list", secret_b, sizeof(secret_b) - 1);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_OK);
	assert_true(a.read_only);

	/* an open export: a host with a secret proves it, read-write */
	auth_case_init(&c, "host-b", "open", secret_b, sizeof(secret_b) - 1);
	assert_int_equal(auth(&c, &exp_open, &a), RBLK_S_OK);
	assert_false(a.read_only);
}

static void test_auth_refused(void **state)
{
	static const uint8_t other[] = "not-the-secret-0123456789";
	struct auth_case c;
	struct auth_plan a;
	uint8_t stale[RBLK_AUTH_NONCE_LEN];

	auth_case_init(&c, "host-a", "list", other, sizeof(other) - 1);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_AUTH_FAILED);
	assert_null(a.host);
	assert_non_null(strstr(a.why, "wrong secret"));

	/* host-b's secret does not prove host-a */
	auth_case_init(&c, "host-a", "list", secret_b, sizeof(secret_b) - 1);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_AUTH_FAILED);

	auth_case_init(&c, "host-z", "list", other, sizeof(other) - 1);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_AUTH_FAILED);
	assert_non_null(strstr(a.why, "unknown host"));

	/* a response MACed over another connection's nonce (a replay) */
	auth_case_init(&c, "host-a", "list", secret_a, sizeof(secret_a) - 1);
	rblk_auth_nonce(stale);
	respond(&c, stale);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_AUTH_FAILED);

	/* our own nonce handed back, and an all-zero one */
	auth_case_init(&c, "host-a", "list", secret_a, sizeof(secret_a) - 1);
	memcpy(c.inonce, c.nonce, sizeof(c.inonce));
	respond(&c, c.nonce);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_AUTH_FAILED);
	assert_non_null(strstr(a.why, "reflected"));
	memset(c.inonce, 0, sizeof(c.inonce));
	respond(&c, c.nonce);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_AUTH_FAILED);

	/* proven, but not on the export's list */
	cfg_list.nr_allow = 1;
	auth_case_init(&c, "host-b", "list", secret_b, sizeof(secret_b) - 1);
	assert_int_equal(auth(&c, &exp_list, &a), RBLK_S_ACCESS_DENIED);
	cfg_list.nr_allow = 2;
	assert_null(a.host);
	assert_non_null(strstr(a.why, "allow list"));

	/* malformed */
	auth_case_init(&c, "host-a", "list", secret_a, sizeof(secret_a) - 1);
	c.len--;
	assert_int_not_equal(auth(&c, &exp_list, &a), RBLK_S_OK);
}

/*
 * What a stranger is told (login_hidden_refusal()): NO_EXPORT, a closed
 * export's ACCESS_DENIED and any refusal of an export that needs
 * authentication look like AUTH_REQUIRED, unless every export is open.
 */
static void test_hidden_refusal(void **state)
{
	(void)state;
	assert_true(login_hidden_refusal(RBLK_S_NO_EXPORT, NULL, false, false));
	assert_true(login_hidden_refusal(RBLK_S_ACCESS_DENIED, &exp_closed,
					 false, false));
	assert_true(
	    login_hidden_refusal(RBLK_S_INVALID, &exp_list, false, true));
	/* every export open: a typo is NO_EXPORT */
	assert_false(login_hidden_refusal(RBLK_S_NO_EXPORT, NULL, true, false));
	/* an open export has nothing to hide; a malformed HELLO neither */
	assert_false(
	    login_hidden_refusal(RBLK_S_INVALID, &exp_open, false, false));
	assert_false(login_hidden_refusal(RBLK_S_INVALID, NULL, false, false));
	assert_false(login_hidden_refusal(RBLK_S_OK, &exp_list, false, true));
}

/* ---- login_tls_decide --------------------------------------------------- */

static void test_tls_decide(void **state)
{
	struct xp_tls_peer off = {.mode = XP_TLS_OFF};
	struct xp_tls_peer psk_a = {.mode = XP_TLS_USER, .psk = true};
	struct xp_tls_peer cert_a = {.mode = XP_TLS_KTLS};
	struct xp_tls_peer anon = {.mode = XP_TLS_KTLS};
	char why[256];

	(void)state;
	snprintf(psk_a.name, sizeof(psk_a.name), "rblk1 host-a");
	snprintf(cert_a.name, sizeof(cert_a.name), "host-a");
	/* nothing required: plaintext and TLS alike */
	assert_int_equal(login_tls_decide(&tcfg, &exp_list, "host-a", &off, why,
					  sizeof(why)),
			 RBLK_S_OK);
	assert_int_equal(login_tls_decide(&tcfg, &exp_list, "host-a", &psk_a,
					  why, sizeof(why)),
			 RBLK_S_OK);
	/* a TLS session proven for host-a is host-a's only */
	assert_int_equal(login_tls_decide(&tcfg, &exp_list, "host-b", &psk_a,
					  why, sizeof(why)),
			 RBLK_S_AUTH_FAILED);
	assert_non_null(strstr(why, "PSK identity 'rblk1 host-a'"));
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "host-b", &cert_a,
					  why, sizeof(why)),
			 RBLK_S_AUTH_FAILED);
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "host-a", &cert_a,
					  why, sizeof(why)),
			 RBLK_S_OK);
	/* an anonymous X.509 client: any name, the login decides */
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "anyone", &anon,
					  why, sizeof(why)),
			 RBLK_S_OK);
	/* export requires: plaintext refused, TLS in */
	cfg_list.tls = CFG_TLS_REQUIRED;
	assert_int_equal(login_tls_decide(&tcfg, &exp_list, "host-a", &off, why,
					  sizeof(why)),
			 RBLK_S_TLS_REQUIRED);
	assert_non_null(strstr(why, "export list requires TLS"));
	assert_int_equal(login_tls_decide(&tcfg, &exp_list, "host-a", &psk_a,
					  why, sizeof(why)),
			 RBLK_S_OK);
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "host-a", &off, why,
					  sizeof(why)),
			 RBLK_S_OK);
	/* target requires; an export that says optional overrides it */
	tcfg.tls = CFG_TLS_REQUIRED;
	cfg_open.tls = CFG_TLS_OPTIONAL;
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "host-a", &off, why,
					  sizeof(why)),
			 RBLK_S_OK);
	assert_int_equal(login_tls_decide(&tcfg, &exp_closed, "host-a", &off,
					  why, sizeof(why)),
			 RBLK_S_TLS_REQUIRED);
	/* discovery follows the target's */
	assert_int_equal(
	    login_tls_decide(&tcfg, NULL, "host-a", &off, why, sizeof(why)),
	    RBLK_S_TLS_REQUIRED);
	assert_non_null(strstr(why, "discovery"));
	/* a host entry adds the requirement, whatever the export says */
	tcfg.tls = CFG_TLS_OPTIONAL;
	tcfg.hosts[1].tls = CFG_TLS_REQUIRED;
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "host-a", &off, why,
					  sizeof(why)),
			 RBLK_S_OK);
	assert_int_equal(login_tls_decide(&tcfg, &exp_open, "host-b", &off, why,
					  sizeof(why)),
			 RBLK_S_TLS_REQUIRED);
	cfg_list.tls = cfg_open.tls = CFG_TLS_UNSET;
	tcfg.hosts[1].tls = CFG_TLS_UNSET;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_tls_decide, setup),
	    cmocka_unit_test_setup(test_grant, setup),
	    cmocka_unit_test_setup(test_read_only_request, setup),
	    cmocka_unit_test_setup(test_push_imm, setup),
	    cmocka_unit_test_setup(test_refusals, setup),
	    cmocka_unit_test_setup(test_discover, setup),
	    cmocka_unit_test_setup(test_hidden_refusal, setup),
	    cmocka_unit_test_setup(test_vol_id, setup),
	    cmocka_unit_test_setup(test_epoch, setup),
	    cmocka_unit_test_setup(test_auth_needed, setup),
	    cmocka_unit_test_setup(test_auth_ok, setup),
	    cmocka_unit_test_setup(test_auth_refused, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
