// SPDX-License-Identifier: MIT
/* Unit tests for lib/fs: the file-system helpers: the binary's directory, mkdir -p, names, regular files. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/fs.h"
#include "tmpdir.h"

static int is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_self_dir(void **state)
{
	char dir[PATH_MAX], exe[PATH_MAX], small[4];
	ssize_t n;

	(void)state;
	assert_int_equal(fs_self_dir(dir, sizeof(dir)), 0);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	/* The binary's directory plus its own name is the binary. */
	assert_int_equal(strncmp(exe, dir, strlen(dir)), 0);
	assert_string_equal(exe + strlen(dir), "/test-fs");
	assert_int_equal(fs_self_dir(small, sizeof(small)), -ENAMETOOLONG);
}

static void test_mkdir_p(void **state)
{
	char *d = tmpdir_new(), path[1024], big[PATH_MAX + 8];

	assert_non_null(d);
	snprintf(path, sizeof(path), "%s/a/b//c/", d);
	assert_int_equal(fs_mkdir_p(path), 0);
	snprintf(path, sizeof(path), "%s/a/b/c", d);
	assert_true(is_dir(path));
	assert_int_equal(fs_mkdir_p(path), 0);	/* existing: fine */
	assert_int_equal(fs_mkdir_p(""), -ENOENT);

	/* A file in the way. */
	snprintf(path, sizeof(path), "%s/f", d);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	snprintf(path, sizeof(path), "%s/f/g", d);
	assert_int_equal(fs_mkdir_p(path), -ENOTDIR);

	/* Too long: refused before anything is made. */
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(path, sizeof(path), "%s/long/", d);
	memcpy(big, path, strlen(path));
	assert_int_equal(fs_mkdir_p(big), -ENAMETOOLONG);
	snprintf(path, sizeof(path), "%s/long", d);
	assert_false(is_dir(path));
	tmpdir_free(d);
}

static void test_valid_name(void **state)
{
	char long_name[66];

	assert_true(fs_valid_name("guest"));
	assert_true(fs_valid_name("a.b-c_D9"));
	assert_false(fs_valid_name(""));
	assert_false(fs_valid_name("."));
	assert_false(fs_valid_name(".."));
	assert_false(fs_valid_name("a/b"));
	assert_false(fs_valid_name("a b"));
	memset(long_name, 'n', 64);
	long_name[64] = '\0';
	assert_true(fs_valid_name(long_name));
	long_name[64] = 'n';
	long_name[65] = '\0';
	assert_false(fs_valid_name(long_name));
}

/* Only regular files, never through a symlink, never blocking on a FIFO. */
static void test_open_regular(void **state)
{
	char *d = tmpdir_new(), path[1024], link[1024];
	int fd;

	assert_non_null(d);
	snprintf(path, sizeof(path), "%s/f", d);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	fd = fs_open_regular(path, O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);	/* blocking again */
	close(fd);
	snprintf(link, sizeof(link), "%s/l", d);
	assert_int_equal(symlink("f", link), 0);
	assert_int_equal(fs_open_regular(link, O_NOFOLLOW), -ELOOP);
	fd = fs_open_regular(link, 0);	/* followed when asked */
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/fifo", d);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(30);
	assert_int_equal(fs_open_regular(path, 0), -EINVAL);
	alarm(0);
	assert_int_equal(fs_open_regular(d, 0), -EINVAL);
	snprintf(path, sizeof(path), "%s/none", d);
	assert_int_equal(fs_open_regular(path, 0), -ENOENT);
	tmpdir_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_dir),
		cmocka_unit_test(test_mkdir_p),
		cmocka_unit_test(test_valid_name),
		cmocka_unit_test(test_open_regular),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
