/* SPDX-License-Identifier: MIT */
/*
 * rblk authentication: per-host shared secrets and the HMAC-SHA256
 * challenge-response of docs/PROTOCOL.md ("Authentication"), on libsodium.
 *
 * Both sides compute
 *
 *   MAC = HMAC-SHA256(secret, "rblk-auth-v1" | role[16] | target_nonce[32]
 *                             | initiator_nonce[32] | host_name[128]
 *                             | export_name[128] | target_name[128])
 *
 * with every field fixed-size (names NUL-padded), so the input is never
 * ambiguous. role is "initiator" in AUTH_RESPONSE and "target" in
 * AUTH_RESULT: a MAC made by one side can never pass for the other's.
 * No I/O here except reading a secret file.
 */
#ifndef RBLK_COMMON_AUTH_H
#define RBLK_COMMON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define RBLK_AUTH_LABEL "rblk-auth-v1"
#define RBLK_AUTH_ROLE_LEN 16
#define RBLK_SECRET_MIN 16 /* bytes; shorter secrets are refused */
#define RBLK_SECRET_MAX 256

enum rblk_auth_role {
	RBLK_AUTH_ROLE_INITIATOR, /* "initiator": proves the host */
	RBLK_AUTH_ROLE_TARGET,	  /* "target": proves the target (mutual) */
};

/* Everything the MAC binds besides the role and the key. */
struct rblk_auth_ctx {
	uint8_t target_nonce[RBLK_AUTH_NONCE_LEN];
	uint8_t initiator_nonce[RBLK_AUTH_NONCE_LEN];
	char host_name[RBLK_NAME_MAX];
	char export_name[RBLK_NAME_MAX];
	char target_name[RBLK_NAME_MAX];
};

/* Initialise libsodium; 0 or -EIO. Safe to call many times, any thread. */
int rblk_auth_init(void);

/* A fresh random nonce (randombytes_buf). */
void rblk_auth_nonce(uint8_t nonce[RBLK_AUTH_NONCE_LEN]);

/* Size of the MAC input; exposed for the known-answer test. */
#define RBLK_AUTH_MAC_INPUT_LEN                                                \
	(sizeof(RBLK_AUTH_LABEL) - 1 + RBLK_AUTH_ROLE_LEN +                    \
	 2 * RBLK_AUTH_NONCE_LEN + 3 * RBLK_NAME_MAX)

/* Build the exact MAC input into buf (RBLK_AUTH_MAC_INPUT_LEN bytes). */
size_t rblk_auth_mac_input(uint8_t *buf, enum rblk_auth_role role,
			   const struct rblk_auth_ctx *ctx);

void rblk_auth_mac(const uint8_t *key, size_t key_len, enum rblk_auth_role role,
		   const struct rblk_auth_ctx *ctx,
		   uint8_t mac[RBLK_AUTH_MAC_LEN]);

/* 0 when mac is right for role/ctx (constant-time compare), else -EACCES. */
int rblk_auth_verify(const uint8_t *key, size_t key_len,
		     enum rblk_auth_role role, const struct rblk_auth_ctx *ctx,
		     const uint8_t mac[RBLK_AUTH_MAC_LEN]);

/*
 * The target's checks of an AUTH_RESPONSE before the MAC: -EACCES when the
 * initiator's nonce equals the target's (a reflected challenge) or is all
 * zero. 0 otherwise.
 */
int rblk_auth_check_nonces(const struct rblk_auth_ctx *ctx);

/* A secret given as text: RBLK_SECRET_MIN..MAX bytes. 0 or -EINVAL + err. */
int rblk_auth_check_secret(const char *secret, size_t len, char *err,
			   size_t errlen);

/*
 * Read a secret file: its contents less trailing newlines/whitespace,
 * RBLK_SECRET_MIN..MAX bytes. Refuses (-EPERM) a file that its group or
 * others may read, and anything but a regular file. On error returns
 * -errno with a sentence in err.
 */
int rblk_auth_load_secret(const char *path, uint8_t *secret, size_t *len,
			  char *err, size_t errlen);

/*
 * TLS pre-shared keys (docs/PROTOCOL.md, "TLS"). A host's TLS PSK comes
 * from the secret it already has, as NVMe/TCP derives its retained PSK,
 * so one key file serves both: HKDF-SHA256 (RFC 5869) with
 *
 *   PRK = HMAC-SHA256(RBLK_TLS_PSK_SALT, secret)
 *   PSK = HMAC-SHA256(PRK, RBLK_TLS_PSK_INFO | host_name | 0x01)
 *
 * (one output block: 32 bytes). The identity the initiator offers is
 * RBLK_TLS_ID_PREFIX followed by its host name.
 */
#define RBLK_TLS_PSK_LEN 32
#define RBLK_TLS_PSK_SALT "rblk-tls-psk-v1"
#define RBLK_TLS_PSK_INFO "rblk tls psk for host "
#define RBLK_TLS_ID_PREFIX "rblk1 "

void rblk_tls_psk(const uint8_t *secret, size_t secret_len, const char *host,
		  uint8_t psk[RBLK_TLS_PSK_LEN]);
/* The identity for host into buf (size >= RBLK_NAME_MAX + 8). */
void rblk_tls_identity(const char *host, char *buf, size_t size);
/* The host an identity names, or NULL when it is not an rblk identity. */
const char *rblk_tls_identity_host(const char *identity);

#endif
