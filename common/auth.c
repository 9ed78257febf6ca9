/* SPDX-License-Identifier: MIT */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

_Static_assert(crypto_auth_hmacsha256_BYTES == RBLK_AUTH_MAC_LEN, "MAC size");

int rblk_auth_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

void rblk_auth_nonce(uint8_t nonce[RBLK_AUTH_NONCE_LEN])
{
	randombytes_buf(nonce, RBLK_AUTH_NONCE_LEN);
}

static uint8_t *put_name(uint8_t *p, const char *name)
{
	memset(p, 0, RBLK_NAME_MAX);
	memcpy(p, name, strnlen(name, RBLK_NAME_MAX - 1));
	return p + RBLK_NAME_MAX;
}

size_t rblk_auth_mac_input(uint8_t *buf, enum rblk_auth_role role,
			   const struct rblk_auth_ctx *ctx)
{
	const char *r = role == RBLK_AUTH_ROLE_TARGET ? "target" : "initiator";
	uint8_t *p = buf;

	memcpy(p, RBLK_AUTH_LABEL, sizeof(RBLK_AUTH_LABEL) - 1);
	p += sizeof(RBLK_AUTH_LABEL) - 1;
	memset(p, 0, RBLK_AUTH_ROLE_LEN);
	memcpy(p, r, strlen(r));
	p += RBLK_AUTH_ROLE_LEN;
	memcpy(p, ctx->target_nonce, RBLK_AUTH_NONCE_LEN);
	p += RBLK_AUTH_NONCE_LEN;
	memcpy(p, ctx->initiator_nonce, RBLK_AUTH_NONCE_LEN);
	p += RBLK_AUTH_NONCE_LEN;
	p = put_name(p, ctx->host_name);
	p = put_name(p, ctx->export_name);
	p = put_name(p, ctx->target_name);
	return (size_t)(p - buf);
}

void rblk_auth_mac(const uint8_t *key, size_t key_len, enum rblk_auth_role role,
		   const struct rblk_auth_ctx *ctx,
		   uint8_t mac[RBLK_AUTH_MAC_LEN])
{
	uint8_t in[RBLK_AUTH_MAC_INPUT_LEN];
	crypto_auth_hmacsha256_state st;
	size_t n = rblk_auth_mac_input(in, role, ctx);

	crypto_auth_hmacsha256_init(&st, key, key_len);
	crypto_auth_hmacsha256_update(&st, in, n);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
}

int rblk_auth_verify(const uint8_t *key, size_t key_len,
		     enum rblk_auth_role role, const struct rblk_auth_ctx *ctx,
		     const uint8_t mac[RBLK_AUTH_MAC_LEN])
{
	uint8_t want[RBLK_AUTH_MAC_LEN];
	int ret;

	rblk_auth_mac(key, key_len, role, ctx, want);
	ret = sodium_memcmp(want, mac, RBLK_AUTH_MAC_LEN) ? -EACCES : 0;
	sodium_memzero(want, sizeof(want));
	return ret;
}

int rblk_auth_check_nonces(const struct rblk_auth_ctx *ctx)
{
	if (sodium_is_zero(ctx->initiator_nonce, RBLK_AUTH_NONCE_LEN))
		return -EACCES;
	if (!sodium_memcmp(ctx->initiator_nonce, ctx->target_nonce,
			   RBLK_AUTH_NONCE_LEN))
		return -EACCES;
	return 0;
}

/* format into the caller's err buffer (when given), return ret */
#define fail errbuf_printf

int rblk_auth_check_secret(const char *secret, size_t len, char *err,
			   size_t errlen)
{
	if (len < RBLK_SECRET_MIN)
		return fail(err, errlen, -EINVAL,
			    "secret is %zu bytes; at least %d are needed", len,
			    RBLK_SECRET_MIN);
	if (len > RBLK_SECRET_MAX)
		return fail(err, errlen, -EINVAL,
			    "secret is longer than %d bytes", RBLK_SECRET_MAX);
	if (memchr(secret, 0, len))
		return fail(err, errlen, -EINVAL, "secret holds a NUL byte");
	return 0;
}

int rblk_auth_load_secret(const char *path, uint8_t *secret, size_t *len,
			  char *err, size_t errlen)
{
	char buf[RBLK_SECRET_MAX + 2];
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd, ret;

	/* a FIFO must not make us wait: it is refused below */
	fd = open_user_path(path, O_RDONLY | O_NOFOLLOW, &st);
	if (fd < 0)
		return fail(err, errlen, fd, "secret file %s: %s", path,
			    strerror(-fd));
	if (!S_ISREG(st.st_mode)) {
		ret = fail(err, errlen, -EINVAL,
			   "secret file %s is not a regular file", path);
		goto out_close;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		ret = fail(
		    err, errlen, -EPERM,
		    "secret file %s is accessible by group or others (mode %04o); chmod 600 it",
		    path, (unsigned int)(st.st_mode & 07777));
		goto out_close;
	}
	while (got < sizeof(buf)) {
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = fail(err, errlen, -errno, "secret file %s: %s",
				   path, strerror(errno));
			goto out_wipe;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	while (got && (buf[got - 1] == '\n' || buf[got - 1] == '\r' ||
		       buf[got - 1] == ' ' || buf[got - 1] == '\t'))
		got--;
	ret = rblk_auth_check_secret(buf, got, NULL, 0);
	if (ret) {
		char why[128];

		rblk_auth_check_secret(buf, got, why, sizeof(why));
		fail(err, errlen, ret, "secret file %s: %s", path, why);
		goto out_wipe;
	}
	memcpy(secret, buf, got);
	*len = got;
	ret = 0;
out_wipe:
	sodium_memzero(buf, sizeof(buf));
out_close:
	close(fd);
	return ret;
}

void rblk_tls_psk(const uint8_t *secret, size_t secret_len, const char *host,
		  uint8_t psk[RBLK_TLS_PSK_LEN])
{
	uint8_t prk[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_state st;
	const uint8_t one = 1;

	_Static_assert(crypto_auth_hmacsha256_BYTES == RBLK_TLS_PSK_LEN,
		       "one HKDF block is the PSK");
	crypto_auth_hmacsha256_init(&st, (const uint8_t *)RBLK_TLS_PSK_SALT,
				    sizeof(RBLK_TLS_PSK_SALT) - 1);
	crypto_auth_hmacsha256_update(&st, secret, secret_len);
	crypto_auth_hmacsha256_final(&st, prk);
	crypto_auth_hmacsha256_init(&st, prk, sizeof(prk));
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)RBLK_TLS_PSK_INFO,
				      sizeof(RBLK_TLS_PSK_INFO) - 1);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)host,
				      strnlen(host, RBLK_NAME_MAX - 1));
	crypto_auth_hmacsha256_update(&st, &one, 1);
	crypto_auth_hmacsha256_final(&st, psk);
	sodium_memzero(prk, sizeof(prk));
	sodium_memzero(&st, sizeof(st));
}

void rblk_tls_identity(const char *host, char *buf, size_t size)
{
	snprintf(buf, size, "%s%.*s", RBLK_TLS_ID_PREFIX, RBLK_NAME_MAX - 1,
		 host);
}

const char *rblk_tls_identity_host(const char *identity)
{
	size_t n = sizeof(RBLK_TLS_ID_PREFIX) - 1;

	if (strncmp(identity, RBLK_TLS_ID_PREFIX, n) || !identity[n])
		return NULL;
	return identity + n;
}
