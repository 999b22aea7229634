// SPDX-License-Identifier: MIT
/* Unit tests for lib/numparse: strict number and time parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/array.h"
#include "lib/numparse.h"

/* Strict numbers: decimal digits to the end, in range, nothing else. */
static void test_numparse(void **state)
{
	static const char *const bad[] = {
		"", " 5", "+5", "-1", "5 ", "100x", "1x", "0x10", "1e3", "nan", "inf", "5\n",
	};
	uint64_t v = 7;
	unsigned u;
	double d;
	char err[160];

	(void)state;
	assert_int_equal(num_parse_u64("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(num_parse_u64("010", 0, 100, &v), 0);
	assert_int_equal(v, 10);	/* decimal, never octal */
	assert_int_equal(num_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(num_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_u64("99999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_uint("11", 1, 10, &u), -ERANGE);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		v = 7;
		assert_int_equal(num_parse_u64(bad[i], 0, UINT64_MAX, &v), -EINVAL);
		assert_int_equal(v, 7);
		assert_int_not_equal(num_parse_decimal(bad[i], 0, 1e9, &d), 0);
	}
	assert_int_equal(num_parse_decimal("0.5", 0.1, 1, &d), 0);
	assert_true(d == 0.5);
	assert_int_equal(num_parse_decimal("2.", 0, 3, &d), 0);
	assert_int_equal(num_parse_decimal(".5", 0, 1, &d), -EINVAL);
	assert_int_equal(num_parse_decimal("1.2.3", 0, 9, &d), -EINVAL);
	assert_int_equal(num_parse_decimal("0.05", 0.1, 1, &d), -ERANGE);
	assert_string_equal(num_bad_value(err, sizeof(err), "--width", "1234567890123456",
					  "40 to 1000"),
			    "--width '123456789012...': use 40 to 1000");
	assert_string_equal(num_bad_value(err, sizeof(err), "-F", "\x1b[2J", "1 to 9"),
			    "-F '\\x1b[2J': use 1 to 9");
}

/* Times: Unix seconds, RFC 3339 with its offsets, and what is none. */
static void test_parse_time(void **state)
{
	int64_t ms;

	(void)state;
	assert_int_equal(num_parse_time("1764645000", &ms), 0);
	assert_true(ms == 1764645000000LL);
	assert_int_equal(num_parse_time("1764645000.250", &ms), 0);
	assert_true(ms == 1764645000250LL);
	assert_int_equal(num_parse_time("2025-12-02T03:10:00Z", &ms), 0);
	assert_true(ms == 1764645000000LL);
	assert_int_equal(num_parse_time("2025-12-02T04:10:00.5+01:00", &ms), 0);
	assert_true(ms == 1764645000500LL);
	assert_int_equal(num_parse_time("2025-12-02T02:10:00-01:00", &ms), 0);
	assert_true(ms == 1764645000000LL);
	assert_int_equal(num_parse_time("03:10", &ms), 0);
	assert_int_equal(num_parse_time("2025-12-02T03:10:00", &ms), -EINVAL);
	assert_int_equal(num_parse_time("2025-13-02T03:10:00Z", &ms), -EINVAL);
	assert_int_equal(num_parse_time("1960-01-01T00:00:00Z", &ms), -ERANGE);
	assert_int_equal(num_parse_time("-5", &ms), -EINVAL);
	assert_int_equal(num_parse_time("", &ms), -EINVAL);
	assert_int_equal(num_parse_time("yesterday", &ms), -EINVAL);
	assert_int_equal(num_parse_time("25:00", &ms), -EINVAL);
	assert_int_equal(num_parse_time("1e9", &ms), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numparse),
		cmocka_unit_test(test_parse_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
