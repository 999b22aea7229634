// SPDX-License-Identifier: MIT
/*
 * lib/safepath: the directories opvm writes outside a session.  A link
 * where opvm names the component, a directory of another user (root only:
 * the test chowns to nobody), one others may write, are refused with a
 * message naming them, and nothing outside is touched (modes, mtimes,
 * contents of the targets); a link the user made in the part of the path
 * they chose is followed; missing directories are made; a sticky shared
 * directory (/tmp) is fine as an ancestor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/safepath.h"
#include "tmpdir.h"

#define NOBODY	65534

static char *tmp;

static void path(char *out, size_t len, const char *rel)
{
	snprintf(out, len, "%s/%s", tmp, rel);
}

static void mk(const char *rel, mode_t mode)
{
	char p[PATH_MAX];

	path(p, sizeof(p), rel);
	assert_int_equal(mkdir(p, mode), 0);
	assert_int_equal(chmod(p, mode), 0);	/* past the umask */
}

static void ln(const char *target, const char *rel)
{
	char p[PATH_MAX], t[2 * PATH_MAX], abs[PATH_MAX];

	path(p, sizeof(p), rel);
	assert_non_null(realpath(tmp, abs));	/* a link's target is absolute */
	snprintf(t, sizeof(t), "%s/%s", abs, target);
	assert_int_equal(symlink(t, p), 0);
}

static struct stat st_of(const char *rel)
{
	char p[PATH_MAX];
	struct stat sb;

	path(p, sizeof(p), rel);
	assert_int_equal(lstat(p, &sb), 0);
	return sb;
}

static int setup(void **state)
{
	(void)state;
	tmp = tmpdir_new();
	return tmp ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tmpdir_free(tmp);
	return 0;
}

static void test_create_and_reopen(void **state)
{
	char p[PATH_MAX], real[PATH_MAX], err[512] = "";
	int fd, sub;

	(void)state;
	path(p, sizeof(p), "home/.cache");
	fd = safepath_open_base(p, 0700, SAFEPATH_CREATE, real, sizeof(real), err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(real[0], '/');
	assert_non_null(strstr(real, "/home/.cache"));
	sub = safepath_open_sub(fd, real, "opvm/buildid", 0700,
				SAFEPATH_CREATE | SAFEPATH_PRIVATE, err, sizeof(err));
	assert_true(sub >= 0);
	close(sub);
	assert_int_equal(st_of("home/.cache/opvm/buildid").st_mode & 07777, 0700);
	/* an existing one of ours, too open: made private through its fd */
	assert_int_equal(chmod(strcat(p, "/opvm/buildid"), 0755), 0);
	sub = safepath_open_sub(fd, real, "opvm/buildid", 0700, SAFEPATH_PRIVATE, err,
				sizeof(err));
	assert_true(sub >= 0);
	close(sub);
	assert_int_equal(st_of("home/.cache/opvm/buildid").st_mode & 07777, 0700);
	/* without SAFEPATH_CREATE a missing one is -ENOENT */
	assert_int_equal(safepath_open_sub(fd, real, "nope", 0700, 0, err, sizeof(err)),
			 -ENOENT);
	assert_int_equal(safepath_open_sub(fd, real, "a/../b", 0700, SAFEPATH_CREATE, err,
					   sizeof(err)), -EINVAL);
	close(fd);
}

/* ~/.cache/opvm/buildid -> a victim directory: refused, not chmod'ed,
 * nothing made in it. */
static void test_link_refused(void **state)
{
	char p[PATH_MAX], real[PATH_MAX], err[512] = "";
	struct stat before, after;
	int fd;

	(void)state;
	mk("l", 0755);
	mk("l/victim", 0755);
	mk("l/.cache", 0700);
	mk("l/.cache/opvm", 0700);
	ln("l/victim", "l/.cache/opvm/buildid");
	before = st_of("l/victim");
	path(p, sizeof(p), "l/.cache");
	fd = safepath_open_base(p, 0700, SAFEPATH_CREATE, real, sizeof(real), err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(safepath_open_sub(fd, real, "opvm/buildid/guest", 0700,
					   SAFEPATH_CREATE | SAFEPATH_PRIVATE, err, sizeof(err)),
			 -ELOOP);
	close(fd);
	assert_non_null(strstr(err, "opvm/buildid is a symbolic link"));
	assert_non_null(strstr(err, "remove the link"));
	after = st_of("l/victim");
	assert_int_equal(after.st_mode, before.st_mode);
	assert_int_equal(after.st_nlink, 2);		/* no guest directory in it */
	assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
}

/* A guest directory of another user, 0777, holding xx -> elsewhere. */
static void test_foreign_refused(void **state)
{
	char p[PATH_MAX], err[512] = "";
	struct stat before, after;
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip();		/* chown needs root (CI runs as root) */
	mk("f", 0700);
	mk("f/elsewhere", 0755);
	mk("f/guest", 0777);
	ln("f/elsewhere", "f/guest/ab");
	path(p, sizeof(p), "f/guest");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	before = st_of("f/elsewhere");
	path(p, sizeof(p), "f");
	fd = safepath_open_base(p, 0700, 0, NULL, 0, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(safepath_open_sub(fd, p, "guest", 0700,
					   SAFEPATH_CREATE | SAFEPATH_PRIVATE, err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "/f/guest belongs to uid 65534"));
	assert_int_equal(st_of("f/guest").st_mode & 07777, 0777);	/* not chmod'ed */
	assert_int_equal(st_of("f/guest").st_uid, NOBODY);
	/* nor as a base: not this user's nor root's */
	path(p, sizeof(p), "f/guest");
	assert_int_equal(safepath_open_base(p, 0700, 0, NULL, 0, err, sizeof(err)), -EPERM);
	/* the xx link inside is refused on its own too */
	path(p, sizeof(p), "f/guest");
	assert_int_equal(chown(p, 0, 0), 0);
	assert_int_equal(chmod(p, 0700), 0);
	assert_int_equal(safepath_open_sub(fd, "f", "guest/ab", 0700, SAFEPATH_CREATE, err,
					   sizeof(err)), -ELOOP);
	close(fd);
	after = st_of("f/elsewhere");
	assert_int_equal(after.st_mode, before.st_mode);
	assert_int_equal(after.st_nlink, 2);
}

/* Writable by others: refused (sticky is fine for an ancestor). */
static void test_shared_dirs(void **state)
{
	char p[PATH_MAX], err[512] = "";
	int fd;

	(void)state;
	mk("w", 0777);
	path(p, sizeof(p), "w/session/x");
	assert_int_equal(safepath_open_base(p, 0700, SAFEPATH_CREATE, NULL, 0, err,
					    sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "writable by others (mode 0777)"));
	assert_non_null(strstr(err, "chmod go-w"));
	path(p, sizeof(p), "w/session");
	assert_int_equal(access(p, F_OK), -1);		/* nothing made */
	mk("s", 01777);
	path(p, sizeof(p), "s/session/x");
	fd = safepath_open_base(p, 0700, SAFEPATH_CREATE, NULL, 0, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* but opvm's own components may not be shared, sticky or not */
	path(p, sizeof(p), "s");
	fd = safepath_open_base(p, 0700, 0, NULL, 0, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(safepath_open_sub(fd, p, ".", 0700, 0, err, sizeof(err)), -EINVAL);
	mk("s/opvm", 01777);
	assert_int_equal(safepath_open_sub(fd, p, "opvm", 0700, 0, err, sizeof(err)), -EPERM);
	close(fd);
}

/* A link the user made in the part they chose (~/.cache -> a disk of
 * theirs) is theirs: followed once, then walked without links. */
static void test_user_link_followed(void **state)
{
	char p[PATH_MAX], real[PATH_MAX], want[PATH_MAX], err[512] = "";
	int fd;

	(void)state;
	mk("u", 0700);
	mk("u/disk", 0700);
	ln("u/disk", "u/.cache");
	path(p, sizeof(p), "u/.cache/opvm");
	fd = safepath_open_base(p, 0700, SAFEPATH_CREATE, real, sizeof(real), err, sizeof(err));
	if (fd < 0)
		print_error("%s\n", err);
	assert_true(fd >= 0);
	close(fd);
	path(p, sizeof(p), "u/disk/opvm");
	assert_non_null(realpath(p, want));
	assert_string_equal(real, want);
	/* a file where a directory should be */
	path(p, sizeof(p), "u/file");
	close(open(p, O_CREAT | O_WRONLY, 0600));
	path(p, sizeof(p), "u");
	fd = safepath_open_base(p, 0700, 0, NULL, 0, err, sizeof(err));
	assert_int_equal(safepath_open_sub(fd, p, "file", 0700, SAFEPATH_CREATE, err,
					   sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "is not a directory"));
	close(fd);
}

/* A session directory: this user's, writable by no one else, sticky or
 * not; guests/NAME never through a link; files made from the fd only as
 * regular files of one link, truncated, never blocking on a FIFO. */
static void test_session_dir(void **state)
{
	char p[PATH_MAX], err[512], q[PATH_MAX];
	struct stat sb;
	int fd, g, f;

	(void)state;
	path(p, sizeof(p), "sess/new");
	fd = safepath_open_session(p, 0755, SAFEPATH_CREATE, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	mk("s777", 0777);
	path(p, sizeof(p), "s777");
	assert_int_equal(safepath_open_session(p, 0755, SAFEPATH_CREATE, err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "is writable by others"));
	mk("s1777", 01777);
	path(p, sizeof(p), "s1777");
	assert_int_equal(safepath_open_session(p, 0755, 0, err, sizeof(err)), -EPERM);
	/* guests/g a link to a victim directory: refused, the victim empty */
	mk("victim", 0700);
	mk("own", 0700);
	mk("own/guests", 0700);
	ln("victim", "own/guests/g");
	path(p, sizeof(p), "own");
	assert_int_equal(safepath_open_guest(p, "g", err, sizeof(err)), -ELOOP);
	assert_non_null(strstr(err, "is a symbolic link"));
	g = safepath_open_guest(p, "h", err, sizeof(err));
	assert_true(g >= 0);
	/* files: a link, a hard link, a FIFO refused; a regular one truncated */
	path(q, sizeof(q), "victim/log");
	f = open(q, O_WRONLY | O_CREAT, 0600);
	assert_int_equal(write(f, "root", 4), 4);
	close(f);
	assert_int_equal(symlinkat(q, g, "sym"), 0);
	assert_int_equal(safepath_create_file(g, "sym", 0644, 0), -ELOOP);
	assert_int_equal(linkat(AT_FDCWD, q, g, "hard", 0), 0);
	assert_int_equal(safepath_create_file(g, "hard", 0644, 0), -EMLINK);
	assert_int_equal(mkfifoat(g, "fifo", 0600), 0);
	assert_true(safepath_create_file(g, "fifo", 0644, 0) < 0);
	assert_int_equal(stat(q, &sb), 0);
	assert_int_equal(sb.st_size, 4);
	f = safepath_create_file(g, "console.log", 0644, 0);
	assert_true(f >= 0);
	assert_int_equal(write(f, "xy", 2), 2);
	close(f);
	f = safepath_create_file(g, "console.log", 0644, 0);
	assert_true(f >= 0);
	assert_int_equal(fstat(f, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	close(f);
	close(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_and_reopen),
		cmocka_unit_test(test_link_refused),
		cmocka_unit_test(test_foreign_refused),
		cmocka_unit_test(test_shared_dirs),
		cmocka_unit_test(test_user_link_followed),
		cmocka_unit_test(test_session_dir),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
