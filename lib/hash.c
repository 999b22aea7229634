// SPDX-License-Identifier: MIT
/*
 * Hashing (lib/hash.h).
 */
#include "lib/hash.h"

/* hash_fnv1a() over the string, in one pass (no strlen() first): the
 * report's string pool hashes every name it interns. */
uint64_t hash_str(const char *s)
{
	uint64_t h = HASH_FNV_BASIS;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * HASH_FNV_PRIME;
	return h;
}
