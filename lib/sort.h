/* SPDX-License-Identifier: MIT */
/*
 * Sorted arrays: sorting keys by radix, and the binary search of the
 * tree, for arrays of structs sorted by a uint64_t field (an address, a
 * start), which is what every lookup by address searches.
 */
#ifndef OPVM_SORT_H
#define OPVM_SORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Sorts key[0..n) (n < 2^32) by their bits [lo, 64) (the bits below are
 * carried along: a payload such as an index), stably, by an LSD radix
 * sort of up to 11-bit digits (fewer for fewer keys) that passes over no
 * digit the same in every key.  tmp holds n keys too; the result is in
 * key or tmp, returned. */
uint64_t *sort_radix_u64(uint64_t *key, uint64_t *tmp, size_t n, unsigned lo);

/*
 * The number of elements of base[0..n) (each size bytes, a uint64_t at
 * byte off of each, non-decreasing) whose key is <= key (upper) or < key
 * (!upper): the index of the first element above key (upper) or at or
 * above it (!upper).  So with upper, the last element at or below key is
 * the one before the index returned, when that is not 0.
 *
 * Branch-free halving (the compiler makes it a conditional move): the
 * per-sample lookups (symbols, mappings, modules) take it.  Inline, and
 * size and off are constants at every call, so it costs what a search
 * written out for the one array would.
 */
static inline size_t sort_bound_u64(const void *base, size_t n, size_t size, size_t off,
				    uint64_t key, int upper)
{
	const char *b = base;
	size_t lo = 0;
	uint64_t k;

	if (!n)
		return 0;
	while (n > 1) {
		size_t half = n / 2;

		memcpy(&k, b + (lo + half) * size + off, sizeof(k));
		lo = (upper ? k <= key : k < key) ? lo + half : lo;
		n -= half;
	}
	memcpy(&k, b + lo * size + off, sizeof(k));
	return lo + (upper ? k <= key : k < key);
}

/* The same over the array arr of n structs by their uint64_t member
 * field: SORT_UPPER() counts those at or below key, SORT_LOWER() those
 * below it. */
#define SORT_UPPER(arr, n, field, key) \
	sort_bound_u64((arr), (n), sizeof(*(arr)), \
		       offsetof(__typeof__(*(arr)), field), (key), 1)
#define SORT_LOWER(arr, n, field, key) \
	sort_bound_u64((arr), (n), sizeof(*(arr)), \
		       offsetof(__typeof__(*(arr)), field), (key), 0)

#endif /* OPVM_SORT_H */
