/* SPDX-License-Identifier: MIT */
/*
 * `rblk-target ctl`: the command-line client of the control socket. It
 * quotes its arguments into one request line (backslash before space, tab
 * and backslash), sends it, and prints the body of an "ok" answer to
 * stdout or the message of an "error: " answer to stderr (exit 1).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/util.h"
#include "target.h"

#define CLIENT_TIMEOUT_S 30 /* above remove-export --wait's 20 s */

static void client_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: rblk-target ctl [--socket PATH] COMMAND [ARGS] [-o json]\n"
	    "Talk to a running rblk-target through its control socket\n"
	    "(default %s).\n"
	    "\n"
	    "Commands:\n"
	    "  list-exports                       exports: name, path, size, block size, sessions\n"
	    "  list-sessions [--export NAME]      sessions: peer, host, export, queue, worker, state, tls\n"
	    "  add-export NAME PATH [--read-only] [--block-size N] [--allow H,..] [--allow-ro H,..]\n"
	    "             [--cache direct|buffered] [--uuid UUID]\n"
	    "                                     export a file, block device or ram:SIZE now\n"
	    "  remove-export NAME [--force [--wait]]\n"
	    "                                     stop exporting; --force closes its sessions,\n"
	    "                                     --wait until they are closed and the file released\n"
	    "  resize-export NAME [SIZE] [--force]\n"
	    "                                     grow a file or ram export to SIZE (10G), or take\n"
	    "                                     a device's or image's size now; live sessions\n"
	    "                                     are told; shrinking needs --force\n"
	    "  set-hosts EXPORT [--allow H,..] [--allow-ro H,..] | --open\n"
	    "                                     replace an export's host allow lists\n"
	    "  set-qos EXPORT KEY=VALUE... | --host NAME KEY=VALUE...\n"
	    "                                     change QoS limits live: iops, read_iops,\n"
	    "                                     write_iops, bps, read_bps, write_bps (50M =\n"
	    "                                     50 MiB/s), burst_ms; 0 lifts one, off all\n"
	    "  stats [EXPORT]                     I/O counters, latency, QoS limits and time\n"
	    "                                     throttled per export, host and session\n"
	    "  list-reservations [EXPORT]         persistent reservations: type, holder,\n"
	    "                                     registrants and keys (rblk pr)\n"
	    "\n"
	    "  -s, --socket PATH   the control socket\n"
	    "  -o json             JSON output (any command)\n"
	    "Errors go to stderr and the exit status is 1 (2 for usage errors).\n",
	    CFG_DEFAULT_CTL_SOCKET);
}

/*
 * The request line for argv (quoted as the server splits it), malloc'd
 * into *line. 0, or the exit code (2: a newline in an argument).
 */
static int build_line(int argc, char **argv, char **line, size_t *len)
{
	FILE *lf = open_memstream(line, len);

	if (!lf)
		return 1;
	for (int j = 0; j < argc; j++) {
		if (strchr(argv[j], '\n')) {
			fprintf(stderr,
				"rblk-target ctl: newline in argument\n");
			fclose(lf);
			free(*line);
			*line = NULL;
			return 2;
		}
		if (j)
			fputc(' ', lf);
		for (const char *p = argv[j]; *p; p++) {
			if (*p == ' ' || *p == '\t' || *p == '\\')
				fputc('\\', lf);
			fputc(*p, lf);
		}
	}
	fputc('\n', lf);
	return fclose(lf) ? 1 : 0;
}

/* Read the whole response from fd into *resp (NUL-terminated). */
static int read_response(int fd, const char *path, char **resp, size_t *len)
{
	size_t cap = 0;

	*resp = NULL;
	*len = 0;
	for (;;) {
		ssize_t n;

		if (cap - *len < 4096) {
			char *p = realloc(*resp, cap + 65536);

			if (!p)
				return -ENOMEM;
			*resp = p;
			cap += 65536;
		}
		n = read(fd, *resp + *len, cap - *len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			fprintf(
			    stderr,
			    "rblk-target ctl: %s: no answer from the target within %d s\n",
			    path, CLIENT_TIMEOUT_S);
			return -ETIMEDOUT;
		}
		if (n < 0) {
			fprintf(stderr, "rblk-target ctl: reading: %s\n",
				strerror(errno));
			return -errno;
		}
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	(*resp)[*len] = 0;
	return 0;
}

/* Send line to the socket at path and print the answer; the exit code. */
static int exchange(const char *path, const char *line, size_t line_len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	char *resp = NULL;
	size_t resp_len;
	int fd, ret = 1;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "rblk-target ctl: %s: %s\n", path,
			strerror(errno));
		goto out;
	}
	/* a target that accepts but never answers must not hang us */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (write_full(fd, line, line_len)) {
		if (errno == EAGAIN)
			fprintf(
			    stderr,
			    "rblk-target ctl: %s: no answer from the target within %d s\n",
			    path, CLIENT_TIMEOUT_S);
		else
			fprintf(stderr, "rblk-target ctl: sending: %s\n",
				strerror(errno));
		goto out;
	}
	shutdown(fd, SHUT_WR);
	if (read_response(fd, path, &resp, &resp_len))
		goto out;
	if (!strncmp(resp, "ok\n", 3)) {
		fwrite(resp + 3, 1, resp_len - 3, stdout);
		ret = fflush(stdout) ? 1 : 0;
	} else if (!strncmp(resp, "error: ", 7)) {
		fprintf(stderr, "rblk-target ctl: %s", resp + 7);
	} else if (!resp_len) {
		fprintf(stderr, "rblk-target ctl: no response\n");
	} else {
		fprintf(stderr, "rblk-target ctl: malformed response\n");
	}
out:
	if (fd >= 0)
		close(fd);
	free(resp);
	return ret;
}

int ctl_client_main(int argc, char **argv)
{
	struct sockaddr_un sa;
	const char *path = CFG_DEFAULT_CTL_SOCKET;
	char *line = NULL;
	size_t line_len = 0;
	int i, ret;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if ((!strcmp(argv[i], "-s") || !strcmp(argv[i], "--socket")) &&
		    i + 1 < argc) {
			path = argv[++i];
		} else if (!strncmp(argv[i], "--socket=", 9)) {
			path = argv[i] + 9;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			client_usage(stdout);
			return 0;
		} else {
			fprintf(stderr,
				"rblk-target ctl: unknown option '%s'\n",
				argv[i]);
			client_usage(stderr);
			return 2;
		}
	}
	if (i == argc) {
		client_usage(stderr);
		return 2;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "rblk-target ctl: socket path too long\n");
		return 2;
	}
	ret = build_line(argc - i, argv + i, &line, &line_len);
	if (!ret)
		ret = exchange(path, line, line_len);
	free(line);
	return ret;
}
