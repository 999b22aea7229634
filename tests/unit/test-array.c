// SPDX-License-Identifier: MIT
/* Unit tests for lib/array: ARRAY_GROW(): growth, and refusals that keep the array. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "lib/array.h"

/* Under AddressSanitizer an impossible allocation returns NULL, as in libc,
 * instead of aborting: test_grow checks the -ENOMEM path. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

static void test_grow(void **state)
{
	uint64_t *a = NULL;
	uint8_t *b;
	size_t cap = 0;

	assert_int_equal(ARRAY_GROW(a, cap, 1, 8), 0);
	assert_non_null(a);
	assert_int_equal(cap, 8);
	a[7] = 7;
	assert_int_equal(ARRAY_GROW(a, cap, 8, 8), 0);	/* fits: no change */
	assert_int_equal(cap, 8);
	assert_int_equal(ARRAY_GROW(a, cap, 9, 8), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(a[7], 7);
	assert_int_equal(ARRAY_GROW(a, cap, 100, 8), 0);
	assert_int_equal(cap, 128);
	/* need * size overflows: refused, array kept */
	assert_int_equal(ARRAY_GROW(a, cap, SIZE_MAX / 4, 8), -EOVERFLOW);
	assert_int_equal(cap, 128);
	assert_int_equal(a[7], 7);
	free(a);
	/* larger than any object (PTRDIFF_MAX): -ENOMEM, array kept */
	b = NULL;
	cap = 0;
	assert_int_equal(ARRAY_GROW(b, cap, 3, 0), 0);	/* from 1: 1, 2, 4 */
	assert_int_equal(cap, 4);
	b[3] = 3;
	assert_int_equal(ARRAY_GROW(b, cap, (size_t)PTRDIFF_MAX + 1, 0), -ENOMEM);
	assert_int_equal(cap, 4);
	assert_int_equal(b[3], 3);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
