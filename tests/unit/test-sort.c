// SPDX-License-Identifier: MIT
/* Unit tests for lib/sort: radix sort and the sorted-array bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/array.h"
#include "lib/sort.h"

/* sort_radix_u64() against a stable reference: the order of the bits
 * [lo, 64), ties in their first order; for few keys (narrow digits), many
 * (11-bit ones), keys alike in most bits, and a single key. */
static int radix_ref_lo;

static int radix_ref_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	uint64_t hx = radix_ref_lo < 64 ? x >> radix_ref_lo : 0;
	uint64_t hy = radix_ref_lo < 64 ? y >> radix_ref_lo : 0;

	if (hx != hy)
		return hx < hy ? -1 : 1;
	return (x & 0xffff) < (y & 0xffff) ? -1 : (x & 0xffff) > (y & 0xffff);
}

static void test_radix_u64(void **state)
{
	static const size_t ns[] = { 1, 7, 700, 20000 };
	static const unsigned los[] = { 16, 16, 40 };
	static const uint64_t masks[] = { ~0ull, 0x00000fff000fffffull, 0x0000ff0000000000ull };
	uint64_t seed = 7;

	(void)state;
	for (size_t a = 0; a < ARRAY_SIZE(ns); a++)
		for (size_t b = 0; b < ARRAY_SIZE(los); b++) {
			size_t n = ns[a];
			uint64_t *k = malloc(n * sizeof(*k)), *t = malloc(n * sizeof(*t));
			uint64_t *ref = malloc(n * sizeof(*ref)), *got;

			assert_non_null(k);
			assert_non_null(t);
			assert_non_null(ref);
			for (size_t i = 0; i < n; i++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				/* the low 16 bits: the key's first place */
				k[i] = ((seed & masks[b]) & ~0xffffull) | i;
			}
			memcpy(ref, k, n * sizeof(*k));
			radix_ref_lo = (int)los[b];
			qsort(ref, n, sizeof(*ref), radix_ref_cmp);
			got = sort_radix_u64(k, t, n, los[b]);
			for (size_t i = 0; i < n; i++)
				assert_true((got[i] >> los[b]) == (ref[i] >> los[b]) &&
					    (got[i] & 0xffff) == (ref[i] & 0xffff));
			free(k);
			free(t);
			free(ref);
		}
}

/* sort_bound_u64() against a count by hand, over sorted arrays with runs
 * of equal keys, every key and its neighbours, of every size to 40. */
static void test_sort_bound(void **state)
{
	struct item {
		uint32_t pad;
		uint64_t key;
	} a[40];

	(void)state;
	assert_int_equal(SORT_UPPER(a, 0, key, 5), 0);
	for (size_t n = 1; n <= ARRAY_SIZE(a); n++) {
		for (size_t i = 0; i < n; i++)
			a[i].key = 10 + 2 * (i / 3);	/* runs of three */
		for (uint64_t k = 8; k <= 12 + n; k++) {
			size_t le = 0, lt = 0;

			for (size_t i = 0; i < n; i++) {
				le += a[i].key <= k;
				lt += a[i].key < k;
			}
			assert_int_equal(SORT_UPPER(a, n, key, k), le);
			assert_int_equal(SORT_LOWER(a, n, key, k), lt);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_radix_u64),
		cmocka_unit_test(test_sort_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
