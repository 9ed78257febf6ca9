/* SPDX-License-Identifier: MIT */
/*
 * I/O as one host, for the reservation tests (36-39): what a command got
 * is printed as its errno's name, so a test can tell a reservation
 * conflict (EBADE) from any other failure.
 *
 *   rblk_prtest write  URL HOST KEYFILE OFF LEN BYTE
 *   rblk_prtest read   URL HOST KEYFILE OFF LEN BYTE   (BYTE -1: any data)
 *   rblk_prtest writer URL HOST KEYFILE OFF LEN BYTE SECS
 *
 * write/read: one I/O; "ok" (exit 0), "EBADE" (exit 3), another errno's
 * name (exit 1), or "mismatch" (read data not all BYTE: exit 4).
 * writer: keeps 16 writes of 64 KiB (BYTE) in flight over [OFF, OFF+LEN)
 * until one fails or SECS pass; prints "ready" once its first write
 * completed, then "writes N ok, first failure NAME, M failed" and exits
 * 3 when the failures were EBADE, 0 when none failed, 1 otherwise.
 * KEYFILE "-" is none. RBLK_PRTEST_QUEUES=N: open N queues, and write
 * and read do their I/O on each of them in turn: the verdict is one
 * queue's only when every queue got it, else "mixed: ..." (exit 1), so a
 * test covers every connection of a session.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rblk/rblk.h>

#define CHUNK (64u << 10)
#define DEPTH 16

static const char *errname(int err)
{
	const char *n = strerrorname_np(err);

	return n ? n : "unknown";
}

static int open_as(const char *url, const char *host, const char *key,
		   struct rblk **r)
{
	struct rblk_opts o;
	int ret;

	rblk_opts_init(&o);
	o.host_name = host;
	o.key_file = strcmp(key, "-") ? key : NULL;
	o.direct = RBLK_DIRECT_OFF;
	o.ctrl_loss_timeout_s = 5;
	if (getenv("RBLK_PRTEST_QUEUES"))
		o.queues = (unsigned int)atoi(getenv("RBLK_PRTEST_QUEUES"));
	ret = rblk_open(url, &o, r);
	if (ret)
		fprintf(stderr, "open: %s\n", rblk_last_error());
	return ret;
}

static int verdict(int ret)
{
	if (!ret) {
		printf("ok\n");
		return 0;
	}
	printf("%s\n", errname(-ret));
	fprintf(stderr, "%s\n", rblk_last_error());
	return ret == -EBADE ? 3 : 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int writer(struct rblk *r, uint64_t off, uint64_t len, int byte,
		  double secs)
{
	struct rblk_queue *q = rblk_get_queue(r, 0);
	char *buf = aligned_alloc(4096, CHUNK);
	struct rblk_completion c[DEPTH];
	uint64_t next = 0, ok = 0, failed = 0;
	int first = 0, inflight = 0, other = 0;
	double end = now_s() + secs;
	bool ready = false;

	if (!buf)
		return 1;
	memset(buf, byte, CHUNK);
	for (;;) {
		while (!first && inflight < DEPTH && now_s() < end) {
			if (rblk_submit(q, RBLK_IO_WRITE, buf, off + next,
					CHUNK, 0, NULL))
				break;
			inflight++;
			next = (next + CHUNK) % len;
		}
		if (!inflight)
			break;
		int n = rblk_poll(q, c, DEPTH, 1000);

		if (n < 0) {
			first = first ? first : n;
			break;
		}
		for (int i = 0; i < n; i++) {
			inflight--;
			if (!c[i].result) {
				ok++;
				continue;
			}
			failed++;
			if (!first)
				first = c[i].result;
			if (c[i].result != -EBADE)
				other++;
		}
		if (ok && !ready) {
			printf("ready\n");
			fflush(stdout);
			ready = true;
		}
	}
	printf("writes %llu ok, first failure %s, %llu failed\n",
	       (unsigned long long)ok, first ? errname(-first) : "none",
	       (unsigned long long)failed);
	free(buf);
	if (!first)
		return 0;
	return first == -EBADE && !other ? 3 : 1;
}

#define MIXED 1 /* some queues succeeded, some failed: said already */

/*
 * The I/O on every queue in turn: 0 when all succeeded, the error when
 * all failed with one, MIXED (printed) otherwise.
 */
static int each_queue(struct rblk *r, bool write, char *buf, uint64_t off,
		      uint64_t len)
{
	unsigned int n = rblk_get_info(r)->queues, ok = 0;
	int first = 0, ret;

	for (unsigned int i = 0; i < n; i++) {
		ret = rblk_queue_io(rblk_get_queue(r, i),
				    write ? RBLK_IO_WRITE : RBLK_IO_READ, buf,
				    off, len, 0);
		if (!ret)
			ok++;
		else if (!first)
			first = ret;
		else if (ret != first)
			ok = n + 1; /* two different errors */
	}
	if (ok == n)
		return 0;
	if (!ok)
		return first;
	printf("mixed: %u of %u queues succeeded, first error %s\n",
	       ok > n ? 0 : ok, n, errname(-first));
	return MIXED;
}

int main(int argc, char **argv)
{
	struct rblk *r;
	uint64_t off, len;
	char *buf;
	int byte, ret;

	if (argc < 8 || (!strcmp(argv[1], "writer") && argc < 9)) {
		fprintf(stderr,
			"usage: see the top of tests/e2e/rblk_prtest.c\n");
		return 2;
	}
	off = strtoull(argv[5], NULL, 0);
	len = strtoull(argv[6], NULL, 0);
	byte = atoi(argv[7]);
	if (open_as(argv[2], argv[3], argv[4], &r))
		return 1;
	if (!strcmp(argv[1], "writer")) {
		ret = writer(r, off, len, byte, atof(argv[8]));
		rblk_close(r);
		return ret;
	}
	buf = aligned_alloc(4096, len);
	if (!buf)
		return 1;
	if (!strcmp(argv[1], "write"))
		memset(buf, byte, len);
	ret = each_queue(r, !strcmp(argv[1], "write"), buf, off, len);
	if (ret == MIXED) {
		rblk_close(r);
		return 1;
	}
	if (!ret && strcmp(argv[1], "write") && byte >= 0) {
		for (uint64_t i = 0; i < len; i++) {
			if ((unsigned char)buf[i] != byte) {
				printf("mismatch at %llu: %d\n",
				       (unsigned long long)(off + i),
				       (unsigned char)buf[i]);
				rblk_close(r);
				return 4;
			}
		}
	}
	ret = verdict(ret);
	free(buf);
	rblk_close(r);
	return ret;
}
