// SPDX-License-Identifier: MIT
/* Unit tests for lib/size: size_parse(): counts and sizes with units. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/size.h"

static void test_parse_size(void **state)
{
	uint64_t v;

	assert_int_equal(size_parse("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(size_parse("64k", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(size_parse("2G", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	assert_int_equal(size_parse("128MiB", &v), 0);
	assert_int_equal(v, 128ULL << 20);
	assert_int_equal(size_parse("1M", &v), 0);
	assert_int_equal(v, 1ULL << 20);
	assert_int_equal(size_parse("", &v), -EINVAL);
	assert_int_equal(size_parse("-1", &v), -EINVAL);
	assert_int_equal(size_parse("12x", &v), -EINVAL);
	assert_int_equal(size_parse("1B", &v), -EINVAL);
	assert_int_equal(size_parse("99999999999T", &v), -EINVAL);
	assert_int_equal(size_parse("99999999999999999999", &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
