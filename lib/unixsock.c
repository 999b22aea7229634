// SPDX-License-Identifier: MIT
/*
 * Unix stream sockets (lib/unixsock.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/unixsock.h"

/*
 * A unix stream connect has no "in progress" state to poll: non-blocking,
 * it fails with EAGAIN at once when the accept queue is full.  Blocking, the
 * kernel waits for room for at most SO_SNDTIMEO (unix_stream_connect), and
 * a signal interrupts the wait: so the deadline is that timeout, set for
 * the connect only.
 */
int unixsock_connect(const char *path, unsigned timeout_ms)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	static const struct timeval none;
	int fd, err;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (!timeout_ms)
		tv.tv_usec = 1;		/* 0 would mean "wait forever" */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		goto fail;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		if (errno == EAGAIN || errno == EINPROGRESS)
			errno = ETIMEDOUT;
		goto fail;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)))
		goto fail;
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

pid_t unixsock_peer_pid(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len))
		return -errno;
	return uc.pid > 0 ? uc.pid : -ESRCH;
}
