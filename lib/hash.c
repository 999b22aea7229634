// SPDX-License-Identifier: MIT
/*
 * Hashing (lib/hash.h).
 */
#include <string.h>

#include "lib/hash.h"

uint64_t hash_str(const char *s)
{
	return hash_fnv1a(HASH_FNV_BASIS, s, strlen(s));
}
