// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * opvm-relay: copies records from /dev/opvm to the virtio-serial port.
 *
 * In Linux 6.1 a virtio-serial port has no write_iter, so the module cannot
 * kernel_write() to it; this tiny static program, started by the guest's init
 * after opvm.ko is loaded, does the copying.  /dev/opvm's read() returns
 * whole records only, so each write() carries whole records and nothing is
 * split between two reads.
 *
 * Usage: opvm-relay [SOURCE [PORT]]
 *   SOURCE defaults to /dev/opvm; PORT defaults to the virtio port named
 *   org.opvm.0 (found through /sys/class/virtio-ports/ * /name).
 *
 * SIGTERM/SIGINT: stop after draining what the module has buffered (the
 * buffer counts as drained once a read would block for 300 ms), and in any
 * case 3 s later: the guest keeps producing records, and the host may have
 * stopped reading.
 *
 * Built with: gcc -static -O2 -o opvm-relay opvm-relay.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PORT_NAME	"org.opvm.0"
#define BUF_SIZE	(256 * 1024)

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	if (sig == SIGALRM) {
		stopping = 2;		/* hard stop: interrupts a blocked write */
	} else if (!stopping) {
		stopping = 1;
		alarm(3);
	}
}

static int find_port(char *out, size_t outlen)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *de;
	int ret = -ENOENT;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[512], name[64];
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n <= 0)
			continue;
		name[n] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, PORT_NAME) == 0) {
			snprintf(out, outlen, "/dev/%s", de->d_name);
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			/* Hard stop while the host is not reading: give up. */
			if (errno == EINTR && stopping < 2)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *src = argc > 1 ? argv[1] : "/dev/opvm";
	char portbuf[300];
	const char *port = argc > 2 ? argv[2] : NULL;
	struct sigaction sa;
	unsigned long long total = 0;
	char *buf;
	int in, out, ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);

	if (!port) {
		ret = find_port(portbuf, sizeof(portbuf));
		if (ret) {
			fprintf(stderr, "opvm-relay: no virtio port named %s: %s; start the VM with -device virtserialport,name=%s\n",
				PORT_NAME, strerror(-ret), PORT_NAME);
			return 1;
		}
		port = portbuf;
	}
	buf = malloc(BUF_SIZE);
	in = open(src, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (in < 0) {
		fprintf(stderr, "opvm-relay: %s: %s (is opvm.ko loaded?)\n",
			src, strerror(errno));
		return 1;
	}
	out = open(port, O_WRONLY | O_CLOEXEC);
	if (!buf || out < 0) {
		fprintf(stderr, "opvm-relay: %s: %s\n", port, strerror(errno));
		return 1;
	}
	for (;;) {
		struct pollfd pfd = { .fd = in, .events = POLLIN };
		ssize_t n;

		if (stopping > 1)
			break;
		ret = poll(&pfd, 1, stopping ? 300 : -1);
		if (ret < 0 && errno != EINTR)
			break;
		if (ret == 0 && stopping)
			break;
		n = read(in, buf, BUF_SIZE);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			fprintf(stderr, "opvm-relay: read %s: %s\n", src,
				strerror(errno));
			break;
		}
		if (n == 0)
			break;
		ret = write_all(out, buf, (size_t)n);
		if (ret) {
			fprintf(stderr, "opvm-relay: write %s: %s\n", port,
				strerror(-ret));
			break;
		}
		total += (unsigned long long)n;
	}
	fprintf(stderr, "opvm-relay: relayed %llu bytes\n", total);
	free(buf);
	close(out);
	close(in);
	return 0;
}
