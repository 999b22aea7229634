// SPDX-License-Identifier: MIT
/*
 * Hostile names and planted links: guest paths become single safe path
 * components, and nothing is created, changed or removed outside the session
 * directory.  Each test keeps a sentinel directory next to the session and
 * checks it is untouched.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/store.h"

static const struct store_event ev = { .name = "TIMER", .count = 1000 };

struct env {
	char *top;		/* tmp dir */
	char sess[512];		/* top/session */
	char sent[512];		/* top/sentinel */
};

static int setup(void **state)
{
	const char *b = getenv("BUILD");
	struct env *e = calloc(1, sizeof(*e));
	char base[512];

	snprintf(base, sizeof(base), "%s/tmp", b ? b : "build");
	mkdir(b ? b : "build", 0755);
	mkdir(base, 0755);
	if (asprintf(&e->top, "%s/test-mangle.XXXXXX", base) < 0 || !mkdtemp(e->top))
		return -1;
	snprintf(e->sess, sizeof(e->sess), "%s/session", e->top);
	snprintf(e->sent, sizeof(e->sent), "%s/sentinel", e->top);
	if (mkdir(e->sent, 0755))
		return -1;
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->top);
	if (system(cmd)) {}
	free(e->top);
	free(e);
	return 0;
}

/* Entries below dir, recursively, links not followed. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char p[2048];
		struct stat sb;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (!lstat(p, &sb) && S_ISDIR(sb.st_mode))
			n += count_entries(p);
	}
	closedir(d);
	return n;
}

/* The top dir holds only session/ and sentinel/, and sentinel is empty. */
static void assert_contained(const struct env *e, int sentinel_entries)
{
	DIR *d = opendir(e->top);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "session") || !strcmp(de->d_name, "sentinel"))
			continue;
		fail_msg("stray entry next to the session: %s", de->d_name);
	}
	closedir(d);
	assert_int_equal(count_entries(e->sent), sentinel_entries);
	/* nothing escaped to the parent of the tmp dir either */
	assert_int_equal(access("etc", F_OK), -1);
}

static void check_component(const char *m)
{
	size_t n = strlen(m);

	assert_true(n > 0 && n <= 200);
	assert_null(strchr(m, '/'));
	assert_string_not_equal(m, ".");
	assert_string_not_equal(m, "..");
	assert_true(m[0] != '.' && m[0] != '{');
	for (size_t i = 0; i < n; i++)
		assert_true((unsigned char)m[i] >= 0x20 && m[i] != 0x7f);
}

/* mangle + unmangle give the bytes back exactly */
static void round_trip(const char *in, size_t len)
{
	char m[OPVM_MANGLE_MAX], u[8192];
	int r;

	store_mangle(in, len, m);
	check_component(m);
	r = store_unmangle(m, u, sizeof(u));
	assert_int_equal(r, (int)len);
	assert_memory_equal(u, in, len);
}

struct seen {
	int n;
	char app[8192], image[8192], guest[8192];
	size_t skipped;
};

static int seen_cb(const struct store_entry *en, void *arg)
{
	struct seen *s = arg;

	s->n++;
	snprintf(s->app, sizeof(s->app), "%s", en->app);
	snprintf(s->image, sizeof(s->image), "%s", en->image);
	snprintf(s->guest, sizeof(s->guest), "%s", en->guest);
	return 0;
}

/* Files a sample under a hostile app, image and guest name, then checks the
 * tree stayed inside the session and reads the names back. */
static void hostile_store(struct env *e, const char *name, bool exact)
{
	struct store_key k = { .app = name, .image = name, .tgid = -1,
			       .tid = -1, .cpu = -1 };
	struct seen s = { 0 };
	struct store *st;
	struct sfile *sf;
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->sess);
	assert_int_equal(system(cmd), 0);
	st = store_open(e->sess, name, &ev, 1, OPVM_SEP_LIB, 0);
	assert_non_null(st);
	sf = store_get(st, &k);
	assert_non_null(sf);
	assert_int_equal(sfile_add(sf, 0x400000, 3), 0);
	k.kernel = 1;
	assert_non_null(store_get(st, &k));
	assert_int_equal(store_write_meta(st, "{}"), 0);
	store_close(st);
	assert_contained(e, 0);
	assert_int_equal(store_walk(e->sess, "current", seen_cb, &s, &s.skipped), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.skipped, 0);
	if (exact) {
		assert_string_equal(s.app, name);
		assert_string_equal(s.image, name);
		assert_string_equal(s.guest, name);
	}
}

static void test_dotdot(void **state)
{
	round_trip("..", 2);
	hostile_store(*state, "..", true);
}

static void test_dot(void **state)
{
	round_trip(".", 1);
	round_trip(".hidden", 7);
	hostile_store(*state, ".", true);
}

static void test_traversal(void **state)
{
	const char *n = "../../etc/x";

	round_trip(n, strlen(n));
	hostile_store(*state, n, true);
	hostile_store(*state, "/../../../../../../../../tmp/x/..", true);
}

static void test_absolute(void **state)
{
	char m[OPVM_MANGLE_MAX];

	assert_string_equal(store_mangle("/usr/lib/libc.so.6", 18, m),
			    "^usr^lib^libc.so.6");
	round_trip("/etc/passwd", 11);
	hostile_store(*state, "/etc/passwd", true);
}

static void test_embedded_nul(void **state)
{
	const char n[] = "/bin/a\0/../../b";
	char m[OPVM_MANGLE_MAX], m2[OPVM_MANGLE_MAX];

	round_trip(n, sizeof(n) - 1);
	store_mangle(n, sizeof(n) - 1, m);
	store_mangle(n, 6, m2);
	assert_string_not_equal(m, m2);	/* the bytes after NUL count */
	assert_non_null(strstr(m, "%00"));
	/* through store_get a C string ends at the NUL */
	hostile_store(*state, n, true);
}

static void test_control_bytes(void **state)
{
	char n[64];
	char m[OPVM_MANGLE_MAX];

	for (int i = 0; i < 32; i++)
		n[i] = (char)(i + 1);
	n[31] = 0x7f;
	n[32] = '\n';
	n[33] = '\0';
	round_trip(n, 33);
	store_mangle(n, 33, m);
	check_component(m);
	hostile_store(*state, n, true);
	hostile_store(*state, "\x1b[31mred\x1b[0m\r\n", true);
}

static void test_long_names(void **state)
{
	char a[4097], b[4097], ma[OPVM_MANGLE_MAX], mb[OPVM_MANGLE_MAX];
	char u[8192];

	memset(a, 'a', 4096);
	a[4096] = '\0';
	memcpy(b, a, sizeof(a));
	b[4095] = 'b';			/* differ only at the very end */
	store_mangle(a, 4096, ma);
	store_mangle(b, 4096, mb);
	check_component(ma);
	check_component(mb);
	assert_string_not_equal(ma, mb);
	assert_true(store_unmangle(ma, u, sizeof(u)) > 0);
	assert_int_equal(strncmp(u, "aaaa", 4), 0);
	assert_non_null(strstr(u, "...~"));
	/* escapes near the cut are never split */
	for (int i = 0; i < 4096; i++)
		a[i] = (i % 3) ? '%' : 'x';
	for (size_t len = 150; len < 260; len++) {
		store_mangle(a, len, ma);
		check_component(ma);
		assert_true(store_unmangle(ma, u, sizeof(u)) >= 0);
	}
	memset(a, '/', 4096);
	store_mangle(a, 4096, ma);
	check_component(ma);
	hostile_store(*state, a, false);
	memset(b, 'q', 4096);
	b[4096] = '\0';
	hostile_store(*state, b, false);
}

static void test_braces(void **state)
{
	char m[OPVM_MANGLE_MAX];

	store_mangle("{dep}", 5, m);
	assert_string_not_equal(m, "{dep}");
	round_trip("{dep}", 5);
	round_trip("{root}", 6);
	round_trip("{kern}", 6);
	round_trip("^%~^", 4);
	round_trip("a%2Fb", 5);
	hostile_store(*state, "{dep}", true);
	hostile_store(*state, "{kern}", true);
}

static void test_empty(void **state)
{
	char m[OPVM_MANGLE_MAX], u[16];

	store_mangle("", 0, m);
	check_component(m);
	assert_int_equal(store_unmangle(m, u, sizeof(u)), 0);
	assert_string_equal(u, "");
	hostile_store(*state, "", true);
}

static void test_unmangle_rejects(void **state)
{
	char u[64];

	assert_int_equal(store_unmangle("%", u, sizeof(u)), -EINVAL);
	assert_int_equal(store_unmangle("%4", u, sizeof(u)), -EINVAL);
	assert_int_equal(store_unmangle("%zz", u, sizeof(u)), -EINVAL);
	assert_int_equal(store_unmangle("a%~12", u, sizeof(u)), -EINVAL);
	assert_int_equal(store_unmangle("abcdef", u, 4), -ENAMETOOLONG);
}

/* Every byte value alone and in pairs round trips to a safe component. */
static void test_all_bytes(void **state)
{
	char n[2];

	for (int a = 0; a < 256; a++) {
		n[0] = (char)a;
		round_trip(n, 1);
		for (int b = 0; b < 256; b += 7) {
			n[1] = (char)b;
			round_trip(n, 2);
		}
	}
}

/* ---- planted links ------------------------------------------------------- */

static struct store *open_one(struct env *e, const char *app, unsigned flags)
{
	struct store_key k = { .app = app, .image = "/lib/x.so", .tgid = -1,
			       .tid = -1, .cpu = -1 };
	struct store *st = store_open(e->sess, "g", &ev, 1, OPVM_SEP_LIB, flags);

	if (!st)
		return NULL;
	if (!store_get(st, &k)) {
		int err = errno;

		store_close(st);
		errno = err;
		return NULL;
	}
	return st;
}

static void test_symlink_current(void **state)
{
	struct env *e = *state;
	char p[1024];

	store_close(open_one(e, "/bin/a", 0));
	snprintf(p, sizeof(p), "%s/guests/g/samples/current", e->sess);
	{
		char cmd[2048];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(symlink(e->sent, p), 0);
	/* rotate and append both refuse, and write nothing there */
	assert_null(open_one(e, "/bin/a", 0));
	assert_int_equal(errno, ELOOP);
	assert_null(open_one(e, "/bin/a", STORE_APPEND));
	assert_int_equal(errno, ELOOP);
	assert_contained(e, 0);
	/* the link itself is left for the user to look at */
	struct stat sb;

	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
}

static void test_symlink_upper_levels(void **state)
{
	struct env *e = *state;
	const char *levels[] = { "guests", "guests/g", "guests/g/samples" };

	for (size_t i = 0; i < 3; i++) {
		char p[1024], cmd[2048];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->sess);
		assert_int_equal(system(cmd), 0);
		store_close(open_one(e, "/bin/a", 0));
		snprintf(p, sizeof(p), "%s/%s", e->sess, levels[i]);
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
		assert_int_equal(system(cmd), 0);
		assert_int_equal(symlink(e->sent, p), 0);
		assert_null(open_one(e, "/bin/a", 0));
		assert_int_equal(errno, ELOOP);
		assert_null(open_one(e, "/bin/a", STORE_APPEND));
		assert_contained(e, 0);
	}
}

static void test_symlink_app_dir(void **state)
{
	struct env *e = *state;
	char p[1024], cmd[2048];
	struct store *st;

	store_close(open_one(e, "/bin/a", 0));
	snprintf(p, sizeof(p), "%s/guests/g/samples/current/{root}/^bin^a", e->sess);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(symlink(e->sent, p), 0);
	/* append: the store opens, the file under the link is refused */
	st = store_open(e->sess, "g", &ev, 1, OPVM_SEP_LIB, STORE_APPEND);
	assert_non_null(st);
	{
		struct store_key k = { .app = "/bin/a", .image = "/lib/x.so",
				       .tgid = -1, .tid = -1, .cpu = -1 };

		assert_null(store_get(st, &k));
		assert_int_equal(errno, ELOOP);
		k.app = "/bin/b";	/* other apps still work */
		assert_non_null(store_get(st, &k));
	}
	store_close(st);
	assert_contained(e, 0);
	/* the walk does not follow it either */
	{
		struct seen s = { 0 };

		assert_int_equal(store_walk(e->sess, "current", seen_cb, &s, &s.skipped), 0);
		assert_int_equal(s.n, 1);
		assert_int_equal(s.skipped, 1);
	}
}

/* Rotation removes the old previous/ without following links inside it:
 * a file in the sentinel survives. */
static void test_symlink_in_previous(void **state)
{
	struct env *e = *state;
	char p[1024], canary[1024];
	int fd;

	snprintf(canary, sizeof(canary), "%s/canary", e->sent);
	fd = open(canary, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	store_close(open_one(e, "/bin/a", 0));
	store_close(open_one(e, "/bin/a", 0));	/* now previous/ exists */
	snprintf(p, sizeof(p), "%s/guests/g/samples/previous/{root}/link", e->sess);
	assert_int_equal(symlink(e->sent, p), 0);
	snprintf(p, sizeof(p), "%s/guests/g/samples/previous/{root}/^bin^a/{dep}/flink", e->sess);
	assert_int_equal(symlink(canary, p), 0);
	store_close(open_one(e, "/bin/a", 0));	/* removes previous/ */
	assert_contained(e, 1);
	assert_int_equal(access(canary, R_OK), 0);
	/* a previous/ that is itself a link is refused, not removed through */
	snprintf(p, sizeof(p), "%s/guests/g/samples/previous", e->sess);
	{
		char cmd[2048];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(symlink(e->sent, p), 0);
	assert_null(open_one(e, "/bin/a", 0));
	assert_int_equal(errno, ELOOP);
	assert_contained(e, 1);
}

static void test_symlink_sample_file(void **state)
{
	struct env *e = *state;
	char p[1024], target[1024];
	struct store *st;

	store_close(open_one(e, "/bin/a", 0));
	snprintf(p, sizeof(p),
		 "%s/guests/g/samples/current/{root}/^bin^a/{dep}/{root}/^lib^x.so/TIMER.1000.0.all.all.all",
		 e->sess);
	assert_int_equal(unlink(p), 0);
	snprintf(target, sizeof(target), "%s/victim", e->sent);
	assert_int_equal(symlink(target, p), 0);
	st = open_one(e, "/bin/a", STORE_APPEND);
	assert_null(st);
	assert_int_equal(errno, ELOOP);
	assert_contained(e, 0);
	/* a hard link to a file outside is not written through */
	int fd = open(target, O_RDWR | O_CREAT, 0644);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(link(target, p), 0);
	assert_null(open_one(e, "/bin/a", STORE_APPEND));
	assert_int_equal(errno, EPERM);
	struct stat sb;

	assert_int_equal(stat(target, &sb), 0);
	assert_int_equal(sb.st_size, 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_dotdot),
		T(test_dot),
		T(test_traversal),
		T(test_absolute),
		T(test_embedded_nul),
		T(test_control_bytes),
		T(test_long_names),
		T(test_braces),
		T(test_empty),
		T(test_unmangle_rejects),
		T(test_all_bytes),
		T(test_symlink_current),
		T(test_symlink_upper_levels),
		T(test_symlink_app_dir),
		T(test_symlink_in_previous),
		T(test_symlink_sample_file),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
