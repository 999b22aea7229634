// SPDX-License-Identifier: MIT
/* Unit tests for lib/strset: the string set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "lib/strset.h"

/* strset: strings keyed by themselves and objects by a member, through
 * several growths; a missing key is not found. */
static void test_strset(void **state)
{
	struct named {
		int n;
		char *key;
	} obj[1000];
	struct strset self = { 0 }, by = { .key_off = STRSET_MEMBER(struct named, key) };
	char keys[1000][16];

	(void)state;
	assert_null(strset_find(&self, "x"));
	for (int i = 0; i < 1000; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		obj[i].n = i;
		obj[i].key = keys[i];
		assert_int_equal(strset_add(&self, keys[i]), 0);
		assert_int_equal(strset_add(&by, &obj[i]), 0);
	}
	assert_int_equal(self.nr, 1000);
	for (int i = 0; i < 1000; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		assert_ptr_equal(strset_find(&self, k), keys[i]);
		assert_ptr_equal(strset_find(&by, k), &obj[i]);
	}
	assert_null(strset_find(&self, "k1000"));
	assert_null(strset_find(&by, ""));
	strset_free(&self);
	strset_free(&by);
	assert_null(strset_find(&by, "k1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
