// SPDX-License-Identifier: MIT
/*
 * Hashing (lib/hash.h).
 */

#include "lib/hash.h"

uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}
