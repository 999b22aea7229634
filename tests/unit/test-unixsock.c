// SPDX-License-Identifier: MIT
/* Unit tests for lib/unixsock: unix-socket connects with deadlines, and the peer's pid. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/clock.h"
#include "lib/unixsock.h"
#include "tmpdir.h"

/* A unix socket listening at path with backlog (never accepting by
 * itself); the test is skipped when path does not fit sun_path. */
static int listen_at(const char *path, int backlog)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int srv;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -1;
	strcpy(sun.sun_path, path);
	srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(srv >= 0);
	assert_int_equal(bind(srv, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(srv, backlog), 0);
	return srv;
}

static void test_connect_unix(void **state)
{
	char *d = tmpdir_new(), path[1024], big[200];
	int srv, fd, acc;

	assert_non_null(d);
	if (!d)
		return;
	memset(big, 's', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(unixsock_connect(big, 1000), -ENAMETOOLONG);

	snprintf(path, sizeof(path), "%s/sock", d);
	assert_int_equal(unixsock_connect(path, 1000), -ENOENT);
	srv = listen_at(path, 1);
	if (srv < 0) {
		tmpdir_free(d);
		skip();
	}
	fd = unixsock_connect(path, 1000);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	acc = accept(srv, NULL, NULL);
	assert_true(acc >= 0);
	assert_int_equal(write(acc, "hi", 2), 2);
	{
		char b[2];

		assert_int_equal(read(fd, b, 2), 2);
		assert_memory_equal(b, "hi", 2);
	}
	close(acc);
	close(fd);
	close(srv);
	tmpdir_free(d);
}

/* A listener that never accepts, its accept queue full (backlog 0 holds
 * one connection): the connect gives up at its deadline instead of
 * blocking for ever, and the fd it made is closed. */
static void test_connect_unix_full(void **state)
{
	char *d = tmpdir_new(), path[1024];
	int srv, first, fd, fds_before, fds_after;
	int64_t t0;

	assert_non_null(d);
	if (!d)
		return;
	snprintf(path, sizeof(path), "%s/full", d);
	srv = listen_at(path, 0);
	if (srv < 0) {
		tmpdir_free(d);
		skip();
	}
	first = unixsock_connect(path, 1000);
	assert_true(first >= 0);
	fds_before = dup(0);
	close(fds_before);
	t0 = clk_now_ms();
	fd = unixsock_connect(path, 200);
	assert_int_equal(fd, -ETIMEDOUT);
	assert_true(clk_now_ms() - t0 >= 150);		/* it did wait for room */
	assert_true(clk_now_ms() - t0 < 30000);	/* and gave up */
	fds_after = dup(0);
	close(fds_after);
	assert_int_equal(fds_after, fds_before);	/* no fd leaked */
	assert_int_equal(unixsock_connect(path, 0), -ETIMEDOUT);
	assert_int_equal(clk_ms_left(clk_now_ms() - 5), 0);
	assert_true(clk_ms_left(clk_now_ms() + 10000) > 5000);
	close(first);
	close(srv);
	tmpdir_free(d);
}

/* The peer of a connection is the process that listened: a child; no
 * socket, no peer. */
static void test_peer_pid(void **state)
{
	char *d = tmpdir_new(), path[1024], c;
	pid_t child;
	int up[2], down[2], fd, fd_null;

	(void)state;
	assert_non_null(d);
	snprintf(path, sizeof(path), "%s/sock", d);
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	child = fork();
	if (!child) {
		int srv = listen_at(path, 1);

		_exit(srv < 0 || write(up[1], "l", 1) != 1 || read(down[0], &c, 1) < 0);
	}
	assert_true(child > 0);
	assert_int_equal(read(up[0], &c, 1), 1);
	fd = unixsock_connect(path, 1000);
	assert_true(fd >= 0);
	assert_int_equal(unixsock_peer_pid(fd), child);
	assert_int_equal(write(down[1], "x", 1), 1);
	waitpid(child, NULL, 0);
	close(fd);
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
	tmpdir_free(d);
	fd_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(unixsock_peer_pid(fd_null) < 0);	/* no socket */
	close(fd_null);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_unix),
		cmocka_unit_test(test_connect_unix_full),
		cmocka_unit_test(test_peer_pid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
