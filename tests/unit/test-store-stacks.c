// SPDX-License-Identifier: MIT
/*
 * The stack table (host/collect/store-stacks.c): chains round trip with
 * their counts per event, each distinct chain once; the bounds drop and
 * count; a torn last record (a writer killed mid-write) reads as the
 * table before it; a hostile table is an error, never a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/collect/store.h"
#include "tmpdir.h"

static const struct store_event ev2[] = {
	{ .name = "TIMER", .count = 1000 },
	{ .name = "cycles", .count = 100000 },
};

struct seen {
	unsigned stacks;
	uint64_t timer, cycles;
	unsigned deepest;
	char app[64], leaf[64], root[64];
};

static int seen_cb(const struct store_stack *s, void *arg)
{
	struct seen *v = arg;

	assert_int_equal(s->nr_events, 2);
	assert_string_equal(s->events[1], "cycles");
	v->stacks++;
	v->timer += s->counts[0];
	v->cycles += s->counts[1];
	if (s->nr > v->deepest) {
		v->deepest = s->nr;
		snprintf(v->app, sizeof(v->app), "%s", s->app);
		snprintf(v->leaf, sizeof(v->leaf), "%s", s->frames[0].image);
		snprintf(v->root, sizeof(v->root), "%s", s->frames[s->nr - 1].image);
	}
	return 0;
}

static char *cur_dir(const char *d)
{
	char *p;

	assert_true(asprintf(&p, "%s/guests/g/samples/current", d) > 0);
	return p;
}

static void test_round_trip(void **state)
{
	char *d = tmpdir_new(), *cur, err[128] = "";
	struct store *st = store_open(d, "g", ev2, 2, 0, 0);
	struct stacktab *tab = st ? store_stacks_open(st) : NULL;
	static const uint8_t bid[20] = { 1, 2, 3 };
	struct store_frame f[3] = {
		{ .image = "vmlinux", .kernel = 1, .offset = 0xffffffff81000010ull },
		{ .image = "/usr/bin/app", .build_id = bid, .build_id_len = 20, .offset = 0x1234 },
		{ .image = "/lib/libc.so.6\x01", .offset = 0x29d90 },
	};
	struct store_stats ss;
	struct seen v = { 0 };

	assert_non_null(st);
	assert_non_null(tab);
	for (int i = 0; i < 10; i++)
		assert_int_equal(store_stack_add(tab, 0, "/usr/bin/app", f, 3), 0);
	assert_int_equal(store_stack_add(tab, 1, "/usr/bin/app", f, 3), 0);
	assert_int_equal(store_stack_add(tab, 0, "/usr/bin/app", f + 1, 2), 0);
	assert_int_equal(store_stack_add(tab, 0, "{idle}", f, 1), 0);
	/* the same frames in another app: another stack */
	assert_int_equal(store_stack_add(tab, 0, "/usr/bin/other", f, 3), 0);
	assert_int_equal(store_stack_add(tab, 2, "/usr/bin/app", f, 3), -ENOSPC);
	assert_int_equal(store_stack_add(tab, 0, "/usr/bin/app", f, 0), -ENOSPC);
	store_stack_lost(st);
	store_get_stats(st, &ss);
	assert_int_equal(ss.stacks, 14);
	assert_int_equal(ss.stacks_dropped, 3);
	store_stacks_close(tab);
	store_close(st);
	cur = cur_dir(d);
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), 0);
	assert_int_equal(v.stacks, 4);
	assert_int_equal(v.timer, 13);
	assert_int_equal(v.cycles, 1);
	assert_int_equal(v.deepest, 3);
	assert_string_equal(v.leaf, "vmlinux");
	assert_string_equal(v.root, "/lib/libc.so.6?");	/* control bytes shown as '?' */
	free(cur);
	tmpdir_free(d);
}

static int tgid_cb(const struct store_stack *s, void *arg)
{
	uint64_t *v = arg;

	assert_int_equal(s->nr, 2);
	assert_string_equal(s->frames[0].image, "{anon}");
	assert_int_equal(s->frames[1].tgid, 0);		/* not anonymous */
	v[s->frames[0].tgid == 42 ? 0 : s->frames[0].tgid == 43 ? 1 : 2] += s->counts[0];
	return 0;
}

/* An {anon} frame keeps its process: the same address in two processes
 * is two stacks, each read back with its tgid (the report names it by
 * that process's perf map). */
static void test_anon_tgid(void **state)
{
	char *d = tmpdir_new(), *cur, err[128] = "";
	struct store *st = store_open(d, "g", ev2, 2, 0, 0);
	struct stacktab *tab = st ? store_stacks_open(st) : NULL;
	struct store_frame f[2] = {
		{ .image = "{anon}", .offset = 0x7f0000001000ull, .tgid = 42 },
		{ .image = "/usr/bin/app", .offset = 0x1234 },
	};
	uint64_t v[3] = { 0 };

	assert_non_null(tab);
	assert_int_equal(store_stack_add(tab, 0, "/usr/bin/app", f, 2), 0);
	assert_int_equal(store_stack_add(tab, 0, "/usr/bin/app", f, 2), 0);
	f[0].tgid = 43;
	assert_int_equal(store_stack_add(tab, 0, "/usr/bin/app", f, 2), 0);
	store_stacks_close(tab);
	store_close(st);
	cur = cur_dir(d);
	assert_int_equal(store_stacks_read(cur, tgid_cb, v, err, sizeof(err)), 0);
	assert_int_equal(v[0], 2);
	assert_int_equal(v[1], 1);
	assert_int_equal(v[2], 0);
	free(cur);
	tmpdir_free(d);
	(void)state;
}

/* A writer killed mid-record: the table reads up to the torn record. */
static void test_torn_and_hostile(void **state)
{
	char *d = tmpdir_new(), *cur, path[1024], err[128] = "";
	struct store *st = store_open(d, "g", ev2, 2, 0, 0);
	struct stacktab *tab = st ? store_stacks_open(st) : NULL;
	struct store_frame f = { .image = "x", .offset = 1 };
	struct seen v = { 0 };
	struct stat sb;
	int fd;

	assert_non_null(st);
	assert_non_null(tab);
	for (int i = 0; i < 100; i++) {
		f.offset = (uint64_t)i;
		assert_int_equal(store_stack_add(tab, 0, "app", &f, 1), 0);
	}
	store_stacks_close(tab);
	store_close(st);
	cur = cur_dir(d);
	snprintf(path, sizeof(path), "%s/stacks.def", cur);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(truncate(path, sb.st_size - 5), 0);
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), 0);
	assert_int_equal(v.stacks, 99);
	/* a frame naming a name that does not exist */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, sb.st_size - 32), 0);	/* the last stack */
	{
		uint32_t rec[4] = { 2, 16, 99, 0 }, fr[4] = { 12345, 0, 7, 0 };

		assert_int_equal(write(fd, rec, sizeof(rec)), sizeof(rec));
		assert_int_equal(write(fd, fr, sizeof(fr)), sizeof(fr));
	}
	close(fd);
	memset(&v, 0, sizeof(v));
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "corrupt"));
	/* not a table at all */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "garbage!garbage!", 16), 16);
	close(fd);
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), -EBADMSG);
	free(cur);
	tmpdir_free(d);
}

/* A FIFO planted as stacks.def or stacks.cnt (issue 25): read fails at
 * once with a message, it does not wait for a writer.  alarm(): a hang
 * fails the test instead of stalling it. */
static void test_fifo(void **state)
{
	char *d = tmpdir_new(), *cur, def[1024], cnt[1024], keep[1024], err[128] = "";
	struct store *st = store_open(d, "g", ev2, 2, 0, 0);
	struct stacktab *tab = st ? store_stacks_open(st) : NULL;
	struct store_frame f = { .image = "x", .offset = 1 };
	struct seen v = { 0 };

	(void)state;
	assert_non_null(tab);
	assert_int_equal(store_stack_add(tab, 0, "app", &f, 1), 0);
	store_stacks_close(tab);
	store_close(st);
	cur = cur_dir(d);
	snprintf(def, sizeof(def), "%s/stacks.def", cur);
	snprintf(cnt, sizeof(cnt), "%s/stacks.cnt", cur);
	snprintf(keep, sizeof(keep), "%s/keep", cur);
	alarm(10);
	assert_int_equal(rename(def, keep), 0);
	assert_int_equal(mkfifo(def, 0600), 0);
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "stacks.def is not a regular file"));
	assert_int_equal(rename(keep, def), 0);
	assert_int_equal(unlink(cnt), 0);
	assert_int_equal(mkfifo(cnt, 0600), 0);
	err[0] = '\0';
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "stacks.cnt"));
	/* a link is refused like a FIFO */
	assert_int_equal(unlink(cnt), 0);
	assert_int_equal(symlink("/dev/zero", cnt), 0);
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), -EBADMSG);
	alarm(0);
	free(cur);
	tmpdir_free(d);
}

/* Past STORE_STACKS_MAX distinct stacks, new ones are dropped and
 * counted; known ones still count. */
static void test_bounds(void **state)
{
	char *d = tmpdir_new(), *cur, err[128] = "";
	struct store *st = store_open(d, "g", ev2, 2, 0, 0);
	struct stacktab *tab = st ? store_stacks_open(st) : NULL;
	struct store_frame f = { .image = "x" };
	struct store_stats ss;
	struct seen v = { 0 };

	assert_non_null(st);
	assert_non_null(tab);
	for (uint64_t i = 0; i < STORE_STACKS_MAX + 10; i++) {
		f.offset = i;
		store_stack_add(tab, 0, "app", &f, 1);
	}
	f.offset = 0;
	assert_int_equal(store_stack_add(tab, 0, "app", &f, 1), 0);
	store_get_stats(st, &ss);
	assert_int_equal(ss.stacks, STORE_STACKS_MAX + 1);
	assert_int_equal(ss.stacks_dropped, 10);
	store_stacks_close(tab);
	store_close(st);
	cur = cur_dir(d);
	assert_int_equal(store_stacks_read(cur, seen_cb, &v, err, sizeof(err)), 0);
	assert_int_equal(v.stacks, STORE_STACKS_MAX);
	assert_int_equal(v.timer, STORE_STACKS_MAX + 1);
	free(cur);
	tmpdir_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_anon_tgid),
		cmocka_unit_test(test_torn_and_hostile),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_fifo),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
