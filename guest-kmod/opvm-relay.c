// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * opvm-relay: copies records from /dev/opvm to the virtio-serial port.
 *
 * In Linux 6.1 a virtio-serial port has no write_iter, so the module cannot
 * kernel_write() to it; this tiny static program, started by the guest's init
 * after opvm.ko is loaded, does the copying.  /dev/opvm's read() returns
 * whole records only.
 *
 * Host sessions: the port reports POLLHUP while no host end is connected.
 * Records read meanwhile are dropped (no host would know what they refer
 * to), and when a host connects the relay writes "sync" to /dev/opvm: the
 * module starts again with HELLO and a walk of everything that exists, so
 * every host session, first or later, starts from a complete picture.  A
 * host already connected when the relay starts gets what the module has
 * buffered since it was loaded (HELLO first).
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
		stopping = 2;		/* hard stop */
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

/* Is a host connected to the port?  virtio_console says POLLHUP if not. */
static int host_connected(int port)
{
	struct pollfd pfd = { .fd = port, .events = POLLOUT };

	if (poll(&pfd, 1, 0) < 0)
		return 1;	/* EINTR: assume nothing changed */
	return !(pfd.revents & POLLHUP);
}

/*
 * Write all of p to the (non-blocking) port.  Returns 0, -EPIPE when the
 * host went away (the rest is dropped), or another -errno.
 */
static int write_all(int port, const char *p, size_t len)
{
	while (len) {
		struct pollfd pfd = { .fd = port, .events = POLLOUT };
		ssize_t n;

		if (stopping > 1)
			return -EINTR;
		if (poll(&pfd, 1, 500) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd.revents & POLLHUP)
			return -EPIPE;
		if (!(pfd.revents & POLLOUT))
			continue;
		n = write(port, p, len);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
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
	unsigned long long total = 0, dropped = 0, sessions = 0;
	int in, out, ret, connected;
	char *buf;

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
	in = open(src, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (in < 0) {
		fprintf(stderr, "opvm-relay: %s: %s (is opvm.ko loaded?)\n",
			src, strerror(errno));
		return 1;
	}
	out = open(port, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (out < 0) {
		fprintf(stderr, "opvm-relay: %s: %s\n", port, strerror(errno));
		close(in);
		return 1;
	}
	buf = malloc(BUF_SIZE);
	if (!buf) {
		fprintf(stderr, "opvm-relay: out of memory\n");
		close(out);
		close(in);
		return 1;
	}
	connected = host_connected(out);
	sessions = connected;
	while (stopping < 2) {
		/* The port is polled for POLLHUP only: a host leaving. */
		struct pollfd pfd[2] = {
			{ .fd = in, .events = POLLIN },
			{ .fd = connected ? out : -1, .events = 0 },
		};
		int timeout = !connected ? 200 : stopping ? 300 : -1;
		ssize_t n;

		ret = poll(pfd, 2, timeout);
		if (ret < 0 && errno != EINTR)
			break;
		if (connected && (pfd[1].revents & POLLHUP))
			connected = 0;	/* resync when a host is back */
		if (!connected) {
			if (stopping)
				break;	/* nobody to drain to */
			if (host_connected(out)) {
				/* New host session: start it with HELLO. */
				if (write(in, "sync", 4) != 4)
					fprintf(stderr, "opvm-relay: cannot ask %s for a resync: %s\n",
						src, strerror(errno));
				connected = 1;
				sessions++;
			}
		} else if (ret == 0 && stopping) {
			break;		/* drained */
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
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
		if (!connected) {
			dropped += (unsigned long long)n;
			continue;
		}
		ret = write_all(out, buf, (size_t)n);
		if (ret == -EPIPE) {
			connected = 0;
			dropped += (unsigned long long)n;
			continue;
		}
		if (ret) {
			if (ret != -EINTR)
				fprintf(stderr, "opvm-relay: write %s: %s\n",
					port, strerror(-ret));
			break;
		}
		total += (unsigned long long)n;
		/*
		 * A trickle of records: let more gather before the next
		 * wake-up.  Fewer, larger writes cost the guest less (each is
		 * a virtqueue kick); the host holds samples of unknown
		 * mappings far longer than this.
		 */
		if (n < 16384 && !stopping)
			usleep(10000);
	}
	fprintf(stderr, "opvm-relay: relayed %llu bytes in %llu host session(s), dropped %llu while no host was connected\n",
		total, sessions, dropped);
	free(buf);
	close(out);
	close(in);
	return 0;
}
