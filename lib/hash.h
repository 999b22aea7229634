/* SPDX-License-Identifier: MIT */
/*
 * The hash of the tree: 64-bit FNV-1a, over bytes or a string, and a
 * finaliser that spreads its bits.  For in-memory hash tables and for the
 * store's names alike; what is stored (host/collect/store-mangle.c) keeps
 * its seed and finaliser fixed, so the functions here never change.
 */
#ifndef OPVM_HASH_H
#define OPVM_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV_BASIS	0xcbf29ce484222325ull
#define HASH_FNV_PRIME	0x100000001b3ull

/* FNV-1a of p[0..n) continued from h (HASH_FNV_BASIS to start one). */
static inline uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * HASH_FNV_PRIME;
	return h;
}

/* FNV-1a of the NUL-terminated s. */
uint64_t hash_str(const char *s);

/* A 64-bit finaliser (splitmix64's): every input bit moves every output
 * bit, for tables indexed by a hash's low bits. */
static inline uint64_t hash_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#endif /* OPVM_HASH_H */
