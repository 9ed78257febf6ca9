/* SPDX-License-Identifier: MIT */
/*
 * sock-pingpong.c - benchmark (not a test): what one request/response
 * round trip costs on this host over TCP loopback and over a unix stream
 * socket, with nothing else in the way. A client sends a 64-byte request
 * and reads a 4128-byte answer (a 4 KiB read's data plus headers, the
 * shape of an rblk or NBD 4k read at queue depth 1) from a server process
 * that answers each request; both block in read().
 *
 *   cc -O2 -o /tmp/sock-pingpong tools/bench/sock-pingpong.c
 *   /tmp/sock-pingpong [ROUND_TRIPS] [ROUNDS]
 *
 * Prints microseconds per round trip for tcp and unix, rounds interleaved,
 * and the median of the per-round tcp/unix ratios. rblk's tcp transport and
 * the fio rblk engine pay the tcp figure per read at QD1; nbdkit on a unix
 * socket pays the unix one (docs/BENCHMARKS.md, "Unix socket against TCP
 * loopback").
 * TCP_NODELAY on both ends, as rblk's transport sets it. Port 7699 on
 * 127.0.0.1 and a socket under /tmp.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQ 64
#define ANS (4096 + 32)
#define PORT 7699

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("setsockopt(TCP_NODELAY)");
}

/* One round: a server child, n round trips; returns us per round trip. */
static double one_round(int use_unix, long n)
{
	static char buf[ANS];
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	int lfd, fd, one = 1;
	double t0, us;
	pid_t pid;

	if (use_unix) {
		struct sockaddr_un *a = (struct sockaddr_un *)&ss;

		a->sun_family = AF_UNIX;
		snprintf(a->sun_path, sizeof(a->sun_path),
			 "/tmp/sock-pingpong.%d", (int)getpid());
		unlink(a->sun_path);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(PORT);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	if (!use_unix)
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&ss, sl) || listen(lfd, 1))
		die("bind/listen");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) { /* the server: answer every request */
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		if (!use_unix)
			nodelay(fd);
		while (read_all(fd, buf, REQ) == 0)
			if (write(fd, buf, ANS) != ANS)
				break;
		_exit(0);
	}
	close(lfd);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sl))
		die("connect");
	if (!use_unix)
		nodelay(fd);
	t0 = now_s();
	for (long i = 0; i < n; i++)
		if (write(fd, buf, REQ) != REQ || read_all(fd, buf, ANS))
			die("round trip");
	us = (now_s() - t0) / (double)n * 1e6;
	close(fd);
	waitpid(pid, NULL, 0);
	if (use_unix)
		unlink(((struct sockaddr_un *)&ss)->sun_path);
	return us;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	double ratio[64];

	if (n <= 0 || rounds <= 0 || rounds > 64) {
		fprintf(stderr, "usage: %s [ROUND_TRIPS > 0] [ROUNDS 1-64]\n",
			argv[0]);
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		double tcp = one_round(0, n), unx = one_round(1, n);

		ratio[r] = tcp / unx;
		printf("round %d: tcp %.1f us, unix %.1f us per round trip, "
		       "tcp/unix %.2f\n",
		       r + 1, tcp, unx, ratio[r]);
	}
	qsort(ratio, (size_t)rounds, sizeof(ratio[0]), cmp_double);
	printf("tcp/unix per round: median %.2f, min %.2f, max %.2f (%d "
	       "rounds of %ld round trips)\n",
	       ratio[rounds / 2], ratio[0], ratio[rounds - 1], rounds, n);
	return 0;
}
