// SPDX-License-Identifier: MIT
/*
 * Sorting (lib/sort.h).
 */
#include <string.h>

#include "lib/sort.h"

#define RADIX_DIGIT_MAX	11

uint64_t *sort_radix_u64(uint64_t *key, uint64_t *tmp, size_t n, unsigned lo)
{
	uint64_t kall = ~0ull, kany = 0, v;
	unsigned bits, passes, d, lg = n > 1 ? 64 - (unsigned)__builtin_clzll((uint64_t)n - 1) : 1;
	/* digits no wider than the keys are many (at least 8 bits): a pass
	 * costs its buckets as well as its keys */
	unsigned dmax = lg >= RADIX_DIGIT_MAX ? RADIX_DIGIT_MAX : lg > 8 ? lg : 8;
	uint32_t cnt[1u << RADIX_DIGIT_MAX];

	for (size_t i = 0; i < n; i++) {
		kall &= key[i];
		kany |= key[i];
	}
	v = lo < 64 ? (kall ^ kany) >> lo : 0;
	bits = v ? 64 - (unsigned)__builtin_clzll(v) : 0;
	passes = (bits + dmax - 1) / dmax;
	d = passes ? (bits + passes - 1) / passes : 0;
	for (unsigned p = 0; p < passes; p++) {
		unsigned shift = lo + p * d;
		uint64_t dm = (1ull << d) - 1, *t = key;
		uint32_t sum = 0;

		if (!(((kall ^ kany) >> shift) & dm))
			continue;	/* the same in every key */
		memset(cnt, 0, ((size_t)1 << d) * sizeof(*cnt));
		for (size_t i = 0; i < n; i++)
			cnt[(key[i] >> shift) & dm]++;
		for (size_t b = 0; b <= dm; b++) {
			uint32_t x = cnt[b];

			cnt[b] = sum;
			sum += x;
		}
		for (size_t i = 0; i < n; i++)
			tmp[cnt[(key[i] >> shift) & dm]++] = key[i];
		key = tmp;
		tmp = t;
	}
	return key;
}
