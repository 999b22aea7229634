// SPDX-License-Identifier: MIT
/* Unit tests for lib/arith: arith_sat_add(): counters saturate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/arith.h"

/* Counters saturate instead of wrapping. */
static void test_sat_add(void **state)
{
	assert_true(arith_sat_add(UINT64_MAX - 1, 5) == UINT64_MAX);
	assert_true(arith_sat_add(UINT64_MAX, UINT64_MAX) == UINT64_MAX);
	assert_int_equal(arith_sat_add(2, 3), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sat_add),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
