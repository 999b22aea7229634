// SPDX-License-Identifier: MIT
/* Unit tests for lib/hash: the FNV-1a hashes, pinned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/hash.h"

static void test_hash_str(void **state)
{
	/* Pinned: the hash report, export and symres each had their own copy of. */
	/* FNV-1a: the basis and prime of the 64-bit variant */
	assert_true(hash_str("") == 0xcbf29ce484222325ull);
	assert_true(hash_str("a") == ((0xcbf29ce484222325ull ^ 'a') * 0x100000001b3ull));
	assert_true(hash_fnv1a(hash_fnv1a(HASH_FNV_BASIS, "fu", 2), "nc_a", 4) == hash_str("func_a"));
	/* hash_bytes() names long images on disk: its value is fixed */
	assert_true(hash_bytes("abc", 3, 0) == 0xec56ac5ddf8b1126ull);
	assert_true(hash_str("func_a") != hash_str("func_b"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_str),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
