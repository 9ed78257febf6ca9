/* SPDX-License-Identifier: MIT */
/*
 * Subcommands of the `rblk` command line. Each takes argv starting at the
 * subcommand name (argv[0] == "nbd", ...) and returns the process exit code.
 */
#ifndef RBLK_INITIATOR_CLI_H
#define RBLK_INITIATOR_CLI_H

#include <stdio.h>
#include <stdbool.h>
#include <rblk/rblk.h>

/*
 * Authentication options, shared by info, nbd and map: add
 * CLI_AUTH_LONGOPTS to the getopt table, pass every option to
 * cli_auth_opt(), and cli_auth_apply() the result to the rblk_opts.
 */
enum {
	CLI_OPT_HOST_NAME = 0x4000,
	CLI_OPT_KEY_FILE,
	CLI_OPT_MUTUAL_AUTH,
	CLI_OPT_TLS,
	CLI_OPT_TLS_CA,
	CLI_OPT_TLS_CERT,
	CLI_OPT_TLS_KEY,
};

/* clang-format off */
#define CLI_AUTH_LONGOPTS                                                      \
	{"host-name", required_argument, NULL, CLI_OPT_HOST_NAME},             \
	{"key-file", required_argument, NULL, CLI_OPT_KEY_FILE},               \
	{"mutual-auth", no_argument, NULL, CLI_OPT_MUTUAL_AUTH},               \
	{"tls", no_argument, NULL, CLI_OPT_TLS},                               \
	{"tls-ca", required_argument, NULL, CLI_OPT_TLS_CA},                   \
	{"tls-cert", required_argument, NULL, CLI_OPT_TLS_CERT},               \
	{"tls-key", required_argument, NULL, CLI_OPT_TLS_KEY}
/* clang-format on */

#define CLI_AUTH_HELP                                                                  \
	"      --host-name NAME      who we are to the target (default: hostname)\n"   \
	"      --key-file PATH       this host's shared secret (mode 0600)\n"          \
	"      --mutual-auth         refuse a target that does not prove the secret\n" \
	"      --tls                 TLS 1.3 on tcp://: a PSK from --key-file's\n"     \
	"                            secret, or X.509 with --tls-ca\n"                 \
	"      --tls-ca FILE         CA the target's certificate must chain to\n"      \
	"      --tls-cert FILE, --tls-key FILE  this host's certificate (PEM)\n"

struct cli_auth {
	const char *host_name;
	const char *key_file;
	bool mutual;
	bool tls;
	const char *tls_ca, *tls_cert, *tls_key;
};

/* Records ch if it is an authentication option; returns whether it was. */
static inline bool cli_auth_opt(int ch, const char *arg, struct cli_auth *a)
{
	switch (ch) {
	case CLI_OPT_HOST_NAME:
		a->host_name = arg;
		return true;
	case CLI_OPT_KEY_FILE:
		a->key_file = arg;
		return true;
	case CLI_OPT_MUTUAL_AUTH:
		a->mutual = true;
		return true;
	case CLI_OPT_TLS:
		a->tls = true;
		return true;
	case CLI_OPT_TLS_CA:
		a->tls_ca = arg;
		a->tls = true; /* a CA means TLS */
		return true;
	case CLI_OPT_TLS_CERT:
		a->tls_cert = arg;
		return true;
	case CLI_OPT_TLS_KEY:
		a->tls_key = arg;
		return true;
	}
	return false;
}

static inline void cli_auth_apply(const struct cli_auth *a, struct rblk_opts *o)
{
	if (a->host_name)
		o->host_name = a->host_name;
	o->key_file = a->key_file;
	if (a->mutual)
		o->flags |= RBLK_OPEN_MUTUAL_AUTH;
	o->tls = a->tls;
	o->tls_ca_file = a->tls_ca;
	o->tls_cert_file = a->tls_cert;
	o->tls_key_file = a->tls_key;
}

/*
 * Multipath options, shared by info, nbd and map: CLI_PATH_LONGOPTS (and
 * for nbd and map CLI_FAILBACK_LONGOPT) in the getopt table, every option
 * through cli_path_opt(), then cli_paths_apply() to the rblk_opts.
 */
enum {
	CLI_OPT_PATH = 0x4010,
	CLI_OPT_FAILBACK,
};

#define CLI_PATH_LONGOPTS                                                      \
	{                                                                      \
		"path", required_argument, NULL, CLI_OPT_PATH                  \
	}
#define CLI_FAILBACK_LONGOPT                                                   \
	{                                                                      \
		"failback", required_argument, NULL, CLI_OPT_FAILBACK          \
	}

#define CLI_PATH_HELP                                                                \
	"      --path URL            another path to the same volume (repeatable,\n" \
	"                            up to 7): used when the active one fails\n"
#define CLI_FAILBACK_HELP                                                          \
	"      --failback SEC        while not on the first path, probe it this\n" \
	"                            often and move back once it answers\n"        \
	"                            (default 5; 0: never)\n"

struct cli_paths {
	const char *v[RBLK_MAX_PATHS - 1];
	unsigned int n;
	int failback_ms; /* -1: the library's default */
};

/*
 * Take ch if it is a multipath option: 1 taken, 0 not one, -1 bad value
 * (printed as "rblk CMD: ...").
 */
int cli_path_opt(const char *cmd, int ch, const char *arg, struct cli_paths *p);
void cli_paths_apply(const struct cli_paths *p, struct rblk_opts *o);

/*
 * Command deadline options, shared by nbd and map: CLI_IO_LONGOPTS in the
 * getopt table, every option through cli_io_opt(), then cli_io_apply().
 * A zeroed struct cli_io keeps the library's defaults.
 */
enum {
	CLI_OPT_IO_TIMEOUT = 0x4020,
	CLI_OPT_IO_RETRIES,
};

#define CLI_IO_LONGOPTS                                                        \
	{"io-timeout", required_argument, NULL, CLI_OPT_IO_TIMEOUT},           \
	{                                                                      \
		"io-retries", required_argument, NULL, CLI_OPT_IO_RETRIES      \
	}

#define CLI_IO_HELP                                                                   \
	"      --io-timeout SEC      a command the target has not answered in SEC\n"  \
	"                            seconds drops the connection, which is\n"        \
	"                            reconnected (default 30; 0: no deadline)\n"      \
	"      --io-retries N        a command whose connection failed N + 1 times\n" \
	"                            fails: ETIMEDOUT, or EIO (default 3; -1: no\n"   \
	"                            limit)\n"

struct cli_io {
	bool has_timeout, has_retries; /* false: the library's default */
	int timeout_ms;
	int retries;
};

/* Take ch if it is a deadline option: 1 taken, 0 not one, -1 bad value. */
int cli_io_opt(const char *cmd, int ch, const char *arg, struct cli_io *c);
void cli_io_apply(const struct cli_io *c, struct rblk_opts *o);

int cmd_info(int argc, char **argv);
int cmd_nbd(int argc, char **argv);	 /* initiator/nbd.c */
int cmd_map(int argc, char **argv);	 /* initiator/map.c */
int cmd_unmap(int argc, char **argv);	 /* initiator/unmap.c */
int cmd_list(int argc, char **argv);	 /* initiator/list.c */
int cmd_discover(int argc, char **argv); /* initiator/discover.c */
int cmd_version(int argc, char **argv);	 /* initiator/discover.c */
int cmd_pr(int argc, char **argv);	 /* initiator/pr.c */

/*
 * Option parsers shared by the subcommands (initiator/cli.c). Each
 * returns 0, or prints "rblk CMD: ..." to stderr and returns -1 on a bad
 * argument (the caller then exits with 2).
 */
int cli_parse_output(const char *cmd, const char *arg, bool *json); /* -o */
int cli_parse_timeout(const char *cmd, const char *arg, int *timeout_ms);
int cli_parse_log_level(const char *cmd, const char *arg); /* sets it */

/*
 * The subcommands' way of failing: "rblk CMD: <message>" on stderr. The
 * usage form adds "Try 'rblk CMD --help'." and returns 2, the exit status
 * of a usage error.
 */
__attribute__((format(printf, 2, 3))) void cli_error(const char *cmd,
						     const char *fmt, ...);
__attribute__((format(printf, 2, 3))) int cli_usage_error(const char *cmd,
							  const char *fmt, ...);

/* A volume id (rblk_info.vol_id) as UUID text, 8-4-4-4-12 lower-case hex. */
#define CLI_VOL_ID_STR_LEN 37
void cli_format_vol_id(const uint8_t id[16], char out[CLI_VOL_ID_STR_LEN]);

#endif
