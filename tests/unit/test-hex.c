// SPDX-License-Identifier: MIT
/* Unit tests for lib/hex: hex digits: one, and bytes encoded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/hex.h"

static void test_hexval(void **state)
{
	assert_int_equal(hex_val('0'), 0);
	assert_int_equal(hex_val('9'), 9);
	assert_int_equal(hex_val('a'), 10);
	assert_int_equal(hex_val('F'), 15);
	assert_int_equal(hex_val('g'), -1);
	assert_int_equal(hex_val('/'), -1);
	assert_int_equal(hex_val(0), -1);
	assert_int_equal(hex_val(0xff), -1);
}

static void test_hex(void **state)
{
	static const uint8_t id[] = { 0x00, 0x0f, 0xa5, 0xff };
	char out[2 * sizeof(id) + 1];
	char empty[1] = "x";

	(void)state;
	hex_encode(id, sizeof(id), out);
	assert_string_equal(out, "000fa5ff");
	hex_encode(id, 0, empty);
	assert_string_equal(empty, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hexval),
		cmocka_unit_test(test_hex),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
