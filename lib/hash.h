/* SPDX-License-Identifier: MIT */
/*
 * The hash of the tree: 64-bit FNV-1a, over bytes or a string, and a
 * finaliser that spreads its bits.  For in-memory hash tables and for the
 * store's names alike: the directory names of long images carry
 * hash_bytes() (host/collect/store-mangle.c), so its value is part of the
 * sample files' format and never changes.
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

/* A 64-bit finaliser (MurmurHash3's fmix64): every input bit moves every
 * output bit, for tables indexed by a hash's low bits. */
static inline uint64_t hash_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* p[0..n) hashed for a table (or a name): FNV-1a from the basis xor
 * seed, its length folded in, finalised.  Two seeds give two independent
 * hashes of the same bytes. */
static inline uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	return hash_mix64(hash_fnv1a(HASH_FNV_BASIS ^ seed, p, n) ^ n);
}

#endif /* OPVM_HASH_H */
