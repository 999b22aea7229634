// SPDX-License-Identifier: MIT
/*
 * symbols/perfmap.c: perf maps as runtimes write them (hex with and
 * without 0x, names with spaces), the latest line winning over a reused
 * range, a last line still being written, and what a hostile guest
 * writes: lying ranges, giant and non-UTF-8 names, garbage, a map over
 * the file cap; and symres_jit_image() reading a session's map.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fs.h"
#include "symbols/perfmap.h"
#include "symbols/symres.h"
#include "tests/unit/tmpdir.h"

static struct perfmap *parse(const char *s)
{
	struct perfmap *pm = perfmap_parse(s, strlen(s));

	assert_non_null(pm);
	return pm;
}

static const char *name_at(const struct perfmap *pm, uint64_t addr)
{
	long i = perfmap_lookup(pm, addr);

	return i < 0 ? NULL : perfmap_sym(pm, (size_t)i)->name;
}

static void test_runtime_lines(void **state)
{
	struct perfmap *pm = parse("7f0000001000 40 LazyCompile:*work /srv/app.js:3\n"
				   "0x7f0000002000 0x100 py::f:/srv/a.py\n"
				   "7F0000003000\t10 Builtin:ArgumentsAdaptorTrampoline\r\n");

	(void)state;
	assert_int_equal(perfmap_nr(pm), 3);
	assert_string_equal(name_at(pm, 0x7f0000001000), "LazyCompile:*work /srv/app.js:3");
	assert_string_equal(name_at(pm, 0x7f000000103f), "LazyCompile:*work /srv/app.js:3");
	assert_null(name_at(pm, 0x7f0000001040));
	assert_string_equal(name_at(pm, 0x7f00000020ff), "py::f:/srv/a.py");
	assert_string_equal(name_at(pm, 0x7f0000003000), "Builtin:ArgumentsAdaptorTrampoline");
	assert_int_equal(perfmap_stats(pm)->entries, 3);
	assert_int_equal(perfmap_stats(pm)->bad, 0);
	perfmap_free(pm);
}

/* Code freed and its range reused: the later line names it; the older
 * entry keeps what nothing later covers. */
static void test_latest_wins(void **state)
{
	struct perfmap *pm = parse("1000 1000 old\n"
				   "1800 100 new\n"
				   "1000 10 newer\n"
				   "1000 10 newest\n");
	const struct perfmap_stats *st = perfmap_stats(pm);

	(void)state;
	assert_string_equal(name_at(pm, 0x1000), "newest");
	assert_string_equal(name_at(pm, 0x100f), "newest");
	assert_string_equal(name_at(pm, 0x1010), "old");
	assert_string_equal(name_at(pm, 0x1850), "new");
	assert_string_equal(name_at(pm, 0x1900), "old");
	assert_string_equal(name_at(pm, 0x1fff), "old");
	assert_null(name_at(pm, 0x2000));
	/* old split in three, overlapped; newer wholly hidden */
	assert_int_equal(st->overlapped, 2);
	assert_int_equal(st->hidden, 1);
	for (size_t i = 1; i < perfmap_nr(pm); i++)
		assert_true(perfmap_sym(pm, i - 1)->addr + perfmap_sym(pm, i - 1)->size <=
			    perfmap_sym(pm, i)->addr);
	perfmap_free(pm);
}

/* The runtime is writing its last line: not taken, not refused. */
static void test_partial_line(void **state)
{
	struct perfmap *pm = parse("1000 10 a\n2000 10 b");

	(void)state;
	assert_int_equal(perfmap_nr(pm), 1);
	assert_int_equal(perfmap_stats(pm)->partial, 1);
	assert_int_equal(perfmap_stats(pm)->bad, 0);
	assert_null(name_at(pm, 0x2000));
	perfmap_free(pm);
}

static void test_hostile(void **state)
{
	char *big = malloc(3 * PERFMAP_MAX_LINE), *p = big;
	struct perfmap *pm;
	const struct perfmap_stats *st;

	(void)state;
	assert_non_null(big);
	p += sprintf(p, "ffffffffffffff00 1000 wraps\n");		/* overflow */
	p += sprintf(p, "7ffffffff000 2000 past_user\n");		/* past the user half */
	p += sprintf(p, "ffff888000000000 10 kernel\n");
	p += sprintf(p, "1000 0 empty\n");
	p += sprintf(p, "1000 80000000 huge\n");			/* 2 GiB "function" */
	p += sprintf(p, "10000000000000000 10 seventeen_digits\n");
	p += sprintf(p, "zz 10 nothex\n1000 10\n1000\n\n 1000 10 lead\n");
	p += sprintf(p, "3000 10 ");					/* giant name */
	memset(p, 'A', 2 * PERFMAP_MAX_LINE);
	p += 2 * PERFMAP_MAX_LINE;
	p += sprintf(p, "\n4000 10 caf\xc3\xa9 \xff\xfe\x01x\x1b[31m\n5000 10 ok\n");
	pm = perfmap_parse(big, (size_t)(p - big));
	assert_non_null(pm);
	st = perfmap_stats(pm);
	assert_int_equal(st->bad_range, 5);
	assert_int_equal(st->bad, 6);
	assert_int_equal(st->long_lines, 1);
	assert_int_equal(st->entries, 2);
	assert_int_equal(st->fixed_names, 1);
	assert_null(name_at(pm, 0x3000));
	/* é kept, the bytes that are no UTF-8 and the controls made '?' */
	assert_string_equal(name_at(pm, 0x4000), "caf\xc3\xa9 ???x?[31m");
	assert_string_equal(name_at(pm, 0x5000), "ok");
	perfmap_free(pm);
	free(big);
}

/* Many entries at one address, each replacing the last: one symbol. */
static void test_reuse_storm(void **state)
{
	size_t n = 100000, len = 0;
	char *t = malloc(n * 32);
	struct perfmap *pm;

	(void)state;
	assert_non_null(t);
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(t + len, "1000 %zx f%zu\n", 0x10 + (i % 7), i);
	pm = perfmap_parse(t, len);
	assert_non_null(pm);
	assert_string_equal(name_at(pm, 0x1000), "f99999");
	assert_true(perfmap_nr(pm) <= 8);
	assert_int_equal(perfmap_stats(pm)->entries, n);
	perfmap_free(pm);
	free(t);
}

/* A session's map: <session>/guests/<guest>/perfmaps/<tgid>.map; none for
 * another pid, a link refused, a hostile guest name never a path. */
static void test_jit_image(void **state)
{
	char *dir = tmpdir_new(), path[4200];
	struct symres *r;
	struct simage *si;
	FILE *f;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps", dir);
	assert_int_equal(fs_mkdir_p(path), 0);
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps/42.map", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "7f0000001000 40 jit_a\n7f0000001040 40 jit_b\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/guests/g1/perfmaps/43.map", dir);
	assert_int_equal(symlink("42.map", path), 0);
	r = symres_new(&(struct symres_config){ .session_dir = dir, .no_debuginfod = 1,
						.no_host_kernel = 1 });
	assert_non_null(r);
	si = symres_jit_image(r, "g1", 42);
	assert_non_null(si);
	assert_int_equal(simage_state(si), SIMAGE_OK);
	assert_true(simage_is_jit(si));
	assert_ptr_equal(symres_jit_image(r, "g1", 42), si);	/* cached */
	assert_string_equal(simage_sym(si, (size_t)simage_lookup(si, 0x7f0000001050, NULL))->name,
			    "jit_b");
	si = symres_jit_image(r, "g1", 43);			/* a link */
	assert_int_equal(simage_state(si), SIMAGE_ANON);
	assert_false(simage_is_jit(si));
	assert_int_equal(simage_state(symres_jit_image(r, "g1", 7)), SIMAGE_ANON);
	assert_int_equal(simage_state(symres_jit_image(r, "..", 42)), SIMAGE_ANON);
	assert_int_equal(simage_state(symres_jit_image(r, "g1/../g1", 42)), SIMAGE_ANON);
	symres_free(r);
	tmpdir_free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtime_lines),
		cmocka_unit_test(test_latest_wins),
		cmocka_unit_test(test_partial_line),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_reuse_storm),
		cmocka_unit_test(test_jit_image),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
