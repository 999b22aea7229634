// SPDX-License-Identifier: MIT
/* Unit tests for option rows and their parsers (lib/optdef.h, lib/optval.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lib/array.h"
#include "lib/optval.h"

struct fields {
	int flag, mode, pid;
	unsigned count, mask, secs;
	uint64_t bytes, ms;
	int64_t when;
	double pct, interval;
	const char *name;
	char bad;
	int cb_calls;
};

static int cb_upper(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct fields *f = base;

	f->cb_calls++;
	if (arg[0] >= 'A' && arg[0] <= 'Z')
		return 0;
	snprintf(err, errlen, "%s '%s': use a capital", opt, arg);
	return -1;
}

static const struct opt_enum modes[] = { { "fp", 1 }, { "dwarf", 2 }, { "lbr", 3 }, { 0 } };

#define F struct fields
static const struct opt_def rows[] = {
	{ .name = "flag", OPT_FLAG(F, flag) },
	{ .name = "count", .metavar = "N", OPT_UINT(F, count, 1, 1000) },
	{ .name = "pid", .metavar = "PID", OPT_UINT(F, pid, 1, INT32_MAX), .want = "a pid" },
	{ .name = "umask", .metavar = "MASK", OPT_OCTAL(F, mask, 0, 0777) },
	{ .name = "bytes", .metavar = "SIZE", OPT_SIZE(F, bytes, 4096, 1ull << 40) },
	{ .name = "pct", .metavar = "PCT", OPT_DECIMAL(F, pct, 0, 100) },
	{ .name = "duration", .metavar = "S", OPT_DURATION(F, ms, 0.001, 1e7, 1) },
	{ .name = "window", .metavar = "S", OPT_DURATION(F, secs, 1, 86400, 1000) },
	{ .name = "interval", .metavar = "S", OPT_DURATION(F, interval, 0, 3600, 1000) },
	{ .name = "since", .metavar = "TIME", OPT_TIME(F, when) },
	{ .name = "mode", .metavar = "M", OPT_ENUM(F, mode, modes) },
	{ .name = "name", .metavar = "NAME", OPT_STRING(F, name) },
	{ .name = "upper", .metavar = "X", OPT_CALLBACK(cb_upper) },
	{ 0 },
};
#undef F

static const struct opt_def *row(const char *name)
{
	for (const struct opt_def *d = rows; d->name; d++)
		if (!strcmp(d->name, name))
			return d;
	fail_msg("no row %s", name);
	return NULL;
}

/* Sets --name to arg (copied: callbacks may cut it): 0 or -EINVAL. */
static int set(struct fields *f, const char *name, const char *arg, char *err, size_t len)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%s", arg ? arg : "");
	return optval_set(row(name), f, name, arg ? buf : NULL, err, len);
}

static void test_rows_check(void **state)
{
	char err[160];

	(void)state;
	for (const struct opt_def *d = rows; d->name; d++)
		assert_int_equal(optval_check(d, err, sizeof(err)), 0);
}

/* A row whose field its parser cannot write is caught before parsing. */
static void test_rows_wrong(void **state)
{
	const struct opt_def bad[] = {
		{ .name = "a", .metavar = "N", OPT_UINT(struct fields, name, 0, 1) },
		{ .name = "b", .metavar = "N", OPT_UINT(struct fields, count, 0, UINT64_MAX) },
		{ .name = "c", .metavar = "N", OPT_UINT(struct fields, bad, 0, 1) },
		{ .name = "d", OPT_STRING(struct fields, count) },
		{ .name = "e", .metavar = "X", OPT_FLAG(struct fields, flag) },
		{ .name = "f", .metavar = "S", OPT_DURATION(struct fields, secs, 1, 1e12, 1) },
		{ .name = "g", .metavar = "T", OPT_TIME(struct fields, ms) },
		{ .name = "h", .metavar = "X" },
	};
	char err[160];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(optval_check(&bad[i], err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "table is wrong"));
	}
}

/* The must-show values, and more, on every numeric row: the same one line,
 * the field untouched. */
static void test_bad_numbers(void **state)
{
	static const char *const vals[] = { "100x", "1x", "-1", "99999999999999999999", "",
					    " 5", "0x10", "nan", "1e3", "+5", "5 " };
	static const char *const numeric[] = { "count", "pid", "umask", "bytes", "pct",
					       "duration", "window", "interval", "since" };
	struct fields f, before;
	char err[256], head[64];

	(void)state;
	memset(&f, 0x5a, sizeof(f));
	before = f;
	for (size_t i = 0; i < ARRAY_SIZE(numeric); i++) {
		assert_true(optval_numeric(row(numeric[i])));
		for (size_t k = 0; k < ARRAY_SIZE(vals); k++) {
			assert_int_equal(set(&f, numeric[i], vals[k], err, sizeof(err)), -EINVAL);
			snprintf(head, sizeof(head), "%s '", numeric[i]);
			assert_memory_equal(err, head, strlen(head));
			assert_non_null(strstr(err, "': use "));
			assert_null(strchr(err, '\n'));
			assert_memory_equal(&f, &before, sizeof(f));
		}
	}
	assert_int_equal(set(&f, "pid", "0", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "pid '0': use a pid");
	assert_int_equal(set(&f, "count", "1001", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "count '1001': use 1 to 1000");
	assert_int_equal(set(&f, "bytes", "4095", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "bytes '4095': use a size, 4k to 1T (k, M, G)");
	assert_int_equal(set(&f, "umask", "0778", err, sizeof(err)), -EINVAL);
	assert_int_equal(set(&f, "window", "1.5", err, sizeof(err)), -EINVAL);
	assert_int_equal(set(&f, "duration", "0.0015", err, sizeof(err)), -EINVAL);
	assert_int_equal(set(&f, "window", "25h", err, sizeof(err)), -EINVAL);
	assert_memory_equal(&f, &before, sizeof(f));
}

static void test_good_values(void **state)
{
	struct fields f = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(set(&f, "flag", NULL, err, sizeof(err)), 0);
	assert_int_equal(f.flag, 1);
	assert_int_equal(set(&f, "count", "1000", err, sizeof(err)), 0);
	assert_int_equal(f.count, 1000);
	assert_int_equal(set(&f, "pid", "2147483647", err, sizeof(err)), 0);
	assert_int_equal(f.pid, INT32_MAX);
	assert_int_equal(set(&f, "umask", "022", err, sizeof(err)), 0);
	assert_int_equal(f.mask, 022);
	assert_int_equal(set(&f, "bytes", "64M", err, sizeof(err)), 0);
	assert_int_equal(f.bytes, 64 << 20);
	assert_int_equal(set(&f, "pct", "0.5", err, sizeof(err)), 0);
	assert_true(f.pct == 0.5);
	assert_int_equal(set(&f, "duration", "2.5", err, sizeof(err)), 0);
	assert_int_equal(f.ms, 2500);
	assert_int_equal(set(&f, "duration", "2m", err, sizeof(err)), 0);
	assert_int_equal(f.ms, 120000);
	assert_int_equal(set(&f, "window", "1.5h", err, sizeof(err)), 0);
	assert_int_equal(f.secs, 5400);
	assert_int_equal(set(&f, "interval", "0.25", err, sizeof(err)), 0);
	assert_true(f.interval == 0.25);
	assert_int_equal(set(&f, "since", "1764645000.250", err, sizeof(err)), 0);
	assert_int_equal(f.when, 1764645000250);
	assert_int_equal(set(&f, "mode", "dwarf", err, sizeof(err)), 0);
	assert_int_equal(f.mode, 2);
	assert_int_equal(set(&f, "name", "x y", err, sizeof(err)), 0);
	assert_string_equal(f.name, "x y");
}

static void test_enum_and_callback(void **state)
{
	struct fields f = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(set(&f, "mode", "frame", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "mode 'frame': use fp, dwarf or lbr");
	assert_int_equal(f.mode, 0);
	assert_int_equal(set(&f, "upper", "Yes", err, sizeof(err)), 0);
	assert_int_equal(set(&f, "upper", "no", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "upper 'no': use a capital");
	assert_int_equal(f.cb_calls, 2);
}

static void test_describe(void **state)
{
	char buf[128];

	(void)state;
	assert_string_equal(optval_describe(row("count"), buf, sizeof(buf)), "uint:1-1000");
	assert_string_equal(optval_describe(row("duration"), buf, sizeof(buf)),
			    "duration:0.001-10000000");
	assert_string_equal(optval_describe(row("mode"), buf, sizeof(buf)), "enum:fp|dwarf|lbr");
	assert_string_equal(optval_describe(row("flag"), buf, sizeof(buf)), "flag");
	assert_string_equal(optval_describe(row("upper"), buf, sizeof(buf)), "callback");
	assert_false(optval_numeric(row("mode")));
	assert_false(optval_numeric(row("upper")));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_check),
		cmocka_unit_test(test_rows_wrong),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_good_values),
		cmocka_unit_test(test_enum_and_callback),
		cmocka_unit_test(test_describe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
