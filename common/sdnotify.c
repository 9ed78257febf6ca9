/* SPDX-License-Identifier: MIT */
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sd_notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n, len = strlen(state);
	socklen_t salen;
	ssize_t sent;
	int fd, ret;

	if (!path || !path[0])
		return 0;
	/* "@name" is an abstract socket: a leading NUL in sun_path */
	if (path[0] != '/' && path[0] != '@')
		return -EAFNOSUPPORT;
	n = strlen(path);
	if (n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
			    (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent =
	    sendto(fd, state, len, MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	ret = sent == (ssize_t)len ? 1 : -errno;
	close(fd);
	return ret;
}
