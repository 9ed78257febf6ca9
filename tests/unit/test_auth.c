/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/auth.c and the AUTH_* messages of common/proto.c:
 * the MAC against known answers computed independently (Python's hmac
 * over the layout in docs/PROTOCOL.md), wrong secrets, role separation,
 * reflected and replayed nonces, every bound field, and secret files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/auth.h"
#include "common/proto.h"

static const uint8_t key[] = "0123456789abcdef0123456789abcdef";
#define KEY_LEN 32

static void hex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned int v;

		assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static void ctx_fill(struct rblk_auth_ctx *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < RBLK_AUTH_NONCE_LEN; i++) {
		c->target_nonce[i] = (uint8_t)i;
		c->initiator_nonce[i] = (uint8_t)(32 + i);
	}
	strcpy(c->host_name, "alpha");
	strcpy(c->export_name, "vol0");
	strcpy(c->target_name, "tgt1");
}

static int setup(void **state)
{
	(void)state;
	return rblk_auth_init();
}

static void test_mac_input_layout(void **state)
{
	struct rblk_auth_ctx c;
	uint8_t in[RBLK_AUTH_MAC_INPUT_LEN];

	(void)state;
	ctx_fill(&c);
	assert_int_equal(RBLK_AUTH_MAC_INPUT_LEN, 476);
	assert_int_equal(rblk_auth_mac_input(in, RBLK_AUTH_ROLE_INITIATOR, &c),
			 476);
	assert_memory_equal(in, "rblk-auth-v1", 12);
	assert_memory_equal(in + 12, "initiator\0\0\0\0\0\0\0", 16);
	assert_memory_equal(in + 28, c.target_nonce, 32);
	assert_memory_equal(in + 60, c.initiator_nonce, 32);
	assert_memory_equal(in + 92, "alpha", 6);
	assert_int_equal(in[92 + 5], 0); /* NUL-padded to 128 */
	assert_int_equal(in[219], 0);
	assert_memory_equal(in + 220, "vol0", 5);
	assert_memory_equal(in + 348, "tgt1", 5);
	rblk_auth_mac_input(in, RBLK_AUTH_ROLE_TARGET, &c);
	assert_memory_equal(in + 12, "target\0\0\0\0\0\0\0\0\0\0", 16);
}

static void test_mac_known_answer(void **state)
{
	struct rblk_auth_ctx c;
	uint8_t mac[32], want[32];

	(void)state;
	ctx_fill(&c);
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac);
	hex("31b1cf23a4825b5cd316928c3352e372dc3bb9eb3e14ca07273ca0b12e877b91",
	    want, 32);
	assert_memory_equal(mac, want, 32);
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, want),
	    0);
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_TARGET, &c, mac);
	hex("95145aad0fd60eb370d0a88e4edc9056052376df17176de8443958cf95f4904f",
	    want, 32);
	assert_memory_equal(mac, want, 32);
}

static void test_wrong_secret(void **state)
{
	static const uint8_t other[] = "0123456789abcdef0123456789abcdeF";
	struct rblk_auth_ctx c;
	uint8_t mac[32];

	(void)state;
	ctx_fill(&c);
	rblk_auth_mac(other, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac);
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac),
	    -EACCES);
	/* a prefix of the right key is a different key */
	rblk_auth_mac(key, KEY_LEN - 1, RBLK_AUTH_ROLE_INITIATOR, &c, mac);
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac),
	    -EACCES);
	/* one flipped bit of a right MAC */
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac);
	mac[31] ^= 1;
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac),
	    -EACCES);
}

/* An initiator's MAC never passes as the target's, and back. */
static void test_roles(void **state)
{
	struct rblk_auth_ctx c;
	uint8_t mac[32];

	(void)state;
	ctx_fill(&c);
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac);
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_TARGET, &c, mac),
	    -EACCES);
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_TARGET, &c, mac);
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac),
	    -EACCES);
}

/* Handing the target's nonce back as the initiator's is refused. */
static void test_reflected_nonce(void **state)
{
	struct rblk_auth_ctx c;

	(void)state;
	ctx_fill(&c);
	assert_int_equal(rblk_auth_check_nonces(&c), 0);
	memcpy(c.initiator_nonce, c.target_nonce, RBLK_AUTH_NONCE_LEN);
	assert_int_equal(rblk_auth_check_nonces(&c), -EACCES);
	memset(c.initiator_nonce, 0, RBLK_AUTH_NONCE_LEN);
	assert_int_equal(rblk_auth_check_nonces(&c), -EACCES);
}

/* A response computed for an older challenge fails on a fresh nonce. */
static void test_replay(void **state)
{
	struct rblk_auth_ctx old, now;
	uint8_t mac[32];

	(void)state;
	ctx_fill(&old);
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &old, mac);
	now = old;
	rblk_auth_nonce(now.target_nonce);
	assert_memory_not_equal(now.target_nonce, old.target_nonce, 32);
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &now, mac),
	    -EACCES);
	/* and nonces are fresh each time */
	{
		uint8_t a[32], b[32];

		rblk_auth_nonce(a);
		rblk_auth_nonce(b);
		assert_memory_not_equal(a, b, 32);
	}
}

/* Every identity and nonce is inside the MAC. */
static void test_every_field_bound(void **state)
{
	struct rblk_auth_ctx c, d;
	uint8_t mac[32];

	(void)state;
	ctx_fill(&c);
	rblk_auth_mac(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &c, mac);
	for (int f = 0; f < 5; f++) {
		d = c;
		switch (f) {
		case 0:
			d.target_nonce[5] ^= 0x80;
			break;
		case 1:
			d.initiator_nonce[0] ^= 1;
			break;
		case 2:
			strcpy(d.host_name, "alphb");
			break;
		case 3:
			strcpy(d.export_name, "vol1");
			break;
		case 4:
			strcpy(d.target_name, "tgt2");
			break;
		}
		assert_int_equal(rblk_auth_verify(key, KEY_LEN,
						  RBLK_AUTH_ROLE_INITIATOR, &d,
						  mac),
				 -EACCES);
	}
	/* fixed-size fields: moving a byte between names changes the MAC */
	d = c;
	strcpy(d.host_name, "alphav");
	strcpy(d.export_name, "ol0");
	assert_int_equal(
	    rblk_auth_verify(key, KEY_LEN, RBLK_AUTH_ROLE_INITIATOR, &d, mac),
	    -EACCES);
}

/* ---- secret files ------------------------------------------------------ */

static char *secret_file(const char *text, mode_t mode)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/rblk-key-XXXXXX",
		     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") < 0)
		fail_msg("asprintf");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

static void test_secret_file(void **state)
{
	uint8_t s[RBLK_SECRET_MAX];
	size_t len = 0;
	char err[512], *p;

	(void)state;
	p = secret_file("correct horse battery staple\n\n", 0600);
	assert_int_equal(rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
			 0);
	assert_int_equal(len, 28);
	assert_memory_equal(s, "correct horse battery staple", 28);
	assert_int_equal(chmod(p, 0400), 0);
	assert_int_equal(rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
			 0);
	/* readable by group or others: refused, with the reason */
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "accessible by group or others"));
	assert_non_null(strstr(err, "chmod 600"));
	assert_int_equal(chmod(p, 0604), 0);
	assert_int_equal(rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
			 -EPERM);
	unlink(p);
	free(p);

	p = secret_file("short\n", 0600);
	assert_int_equal(rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "at least 16"));
	unlink(p);
	assert_int_equal(rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
			 -ENOENT);
	free(p);

	{
		char big[RBLK_SECRET_MAX + 10];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		p = secret_file(big, 0600);
		assert_int_equal(
		    rblk_auth_load_secret(p, s, &len, err, sizeof(err)),
		    -EINVAL);
		assert_non_null(strstr(err, "longer than"));
		unlink(p);
		free(p);
	}
	assert_int_equal(rblk_auth_load_secret("/", s, &len, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
}

/* ---- wire messages ------------------------------------------------------ */

static void test_messages(void **state)
{
	uint8_t b[RBLK_MSG_MAX];
	struct rblk_auth_challenge ch = {0}, cho;
	struct rblk_auth_response r = {0}, ro;
	struct rblk_auth_result res = {0}, reso;

	(void)state;
	memset(ch.nonce, 0xab, sizeof(ch.nonce));
	strcpy(ch.target_name, "tgt1");
	assert_int_equal(rblk_auth_challenge_encode(b, &ch), 176);
	assert_int_equal(rblk_msg_type(b, 176), RBLK_MSG_AUTH_CHALLENGE);
	assert_int_equal(b[5], 5);
	assert_int_equal(b[6] | b[7] << 8, 176);
	assert_memory_equal(b + 16, ch.nonce, 32);
	assert_memory_equal(b + 48, "tgt1", 5);
	assert_int_equal(rblk_auth_challenge_decode(b, 176, &cho), RBLK_S_OK);
	assert_memory_equal(cho.nonce, ch.nonce, 32);
	assert_string_equal(cho.target_name, "tgt1");
	assert_int_equal(rblk_auth_challenge_decode(b, 175, &cho),
			 RBLK_S_INVALID);
	b[8] = 1; /* flags */
	assert_int_equal(rblk_auth_challenge_decode(b, 176, &cho),
			 RBLK_S_INVALID);
	b[8] = 0;
	memset(b + 48, 0, 128); /* empty target name */
	assert_int_equal(rblk_auth_challenge_decode(b, 176, &cho),
			 RBLK_S_INVALID);

	memset(r.nonce, 0x11, 32);
	memset(r.mac, 0x22, 32);
	assert_int_equal(rblk_auth_response_encode(b, &r), 80);
	assert_int_equal(b[5], 6);
	assert_memory_equal(b + 16, r.nonce, 32);
	assert_memory_equal(b + 48, r.mac, 32);
	assert_int_equal(rblk_auth_response_decode(b, 80, &ro), RBLK_S_OK);
	assert_memory_equal(ro.nonce, r.nonce, 32);
	assert_memory_equal(ro.mac, r.mac, 32);
	b[12] = 1; /* reserved */
	assert_int_equal(rblk_auth_response_decode(b, 80, &ro), RBLK_S_INVALID);
	/* a response is not a challenge */
	rblk_auth_response_encode(b, &r);
	assert_int_equal(rblk_auth_challenge_decode(b, 80, &cho),
			 RBLK_S_INVALID);

	memset(res.mac, 0x33, 32);
	assert_int_equal(rblk_auth_result_encode(b, &res), 48);
	assert_int_equal(b[5], 7);
	assert_memory_equal(b + 16, res.mac, 32);
	assert_int_equal(rblk_auth_result_decode(b, 48, &reso), RBLK_S_OK);
	assert_memory_equal(reso.mac, res.mac, 32);
	b[8] = 16; /* a non-zero status */
	assert_int_equal(rblk_auth_result_decode(b, 48, &reso), RBLK_S_INVALID);
}

/* HELLO takes the AUTH flag (0x04); other unknown bits stay refused. */
static void test_hello_auth_flag(void **state)
{
	uint8_t b[RBLK_MSG_MAX];
	struct rblk_hello h = {.queue_depth = 4, .max_io = 65536}, o;

	(void)state;
	strcpy(h.export_name, "vol0");
	h.flags = RBLK_HELLO_F_AUTH | RBLK_HELLO_F_READ_ONLY;
	rblk_hello_encode(b, &h);
	assert_int_equal(rblk_hello_decode(b, RBLK_HELLO_SIZE, &o), RBLK_S_OK);
	assert_int_equal(o.flags, RBLK_HELLO_F_AUTH | RBLK_HELLO_F_READ_ONLY);
	h.flags = RBLK_HELLO_F_ALL + 1; /* the first bit no flag uses */
	rblk_hello_encode(b, &h);
	assert_int_equal(rblk_hello_decode(b, RBLK_HELLO_SIZE, &o),
			 RBLK_S_INVALID);
	assert_string_equal(rblk_status_str(RBLK_S_AUTH_FAILED),
			    "authentication failed");
	assert_string_equal(rblk_status_str(RBLK_S_AUTH_REQUIRED),
			    "authentication required");
	assert_int_equal(RBLK_S_AUTH_FAILED, 16);
	assert_int_equal(RBLK_S_AUTH_REQUIRED, 17);
}

/*
 * The TLS PSK of a host (docs/PROTOCOL.md, "TLS"): HKDF-SHA256 of its
 * secret, one block; the answer computed independently with Python's
 * hmac module. Another host or secret gives another key.
 */
static void test_tls_psk(void **state)
{
	static const uint8_t want[RBLK_TLS_PSK_LEN] = {
	    0x7d, 0x00, 0xc1, 0xab, 0x8f, 0xf7, 0x57, 0x79, 0x24, 0x7a, 0x99,
	    0x8b, 0x8b, 0xea, 0x7e, 0x78, 0xd1, 0xdc, 0x1b, 0x00, 0x97, 0x20,
	    0xbd, 0xc8, 0x73, 0x64, 0xf6, 0x86, 0xe0, 0x0f, 0x0a, 0x61};
	static const uint8_t sec[] = "0123456789abcdef0123";
	uint8_t a[RBLK_TLS_PSK_LEN], b[RBLK_TLS_PSK_LEN];
	char id[RBLK_NAME_MAX + 16];

	(void)state;
	rblk_tls_psk(sec, sizeof(sec) - 1, "alpha", a);
	assert_memory_equal(a, want, sizeof(want));
	rblk_tls_psk(sec, sizeof(sec) - 1, "alphb", b);
	assert_memory_not_equal(a, b, sizeof(a));
	rblk_tls_psk(sec, sizeof(sec) - 2, "alpha", b);
	assert_memory_not_equal(a, b, sizeof(a));
	rblk_tls_identity("alpha", id, sizeof(id));
	assert_string_equal(id, "rblk1 alpha");
	assert_string_equal(rblk_tls_identity_host(id), "alpha");
	assert_null(rblk_tls_identity_host("rblk1 "));
	assert_null(rblk_tls_identity_host("NVMe0R01 alpha"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_psk),
	    cmocka_unit_test(test_mac_input_layout),
	    cmocka_unit_test(test_mac_known_answer),
	    cmocka_unit_test(test_wrong_secret),
	    cmocka_unit_test(test_roles),
	    cmocka_unit_test(test_reflected_nonce),
	    cmocka_unit_test(test_replay),
	    cmocka_unit_test(test_every_field_bound),
	    cmocka_unit_test(test_secret_file),
	    cmocka_unit_test(test_messages),
	    cmocka_unit_test(test_hello_auth_flag),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
