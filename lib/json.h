/* SPDX-License-Identifier: MIT */
/*
 * Unsigned 64-bit values in JSON (jansson), for session.json's writers in
 * every room: jansson integers are signed 64-bit, kernel addresses are
 * not.  Larger values go out as reals (exact for 2 MiB-aligned kernel
 * addresses), and writers add a "_hex" string (json_hex()) that is always
 * exact.  Counts that saturate instead are stats_json_count()'s
 * (host/collect/stats.h).
 */
#ifndef OPVM_LIB_JSON_H
#define OPVM_LIB_JSON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* v as a JSON number: an integer up to INT64_MAX, a real above.  NULL on
 * ENOMEM. */
static inline json_t *json_u64(uint64_t v)
{
	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	return json_real((double)v);
}

/* v as a JSON string "0x...".  NULL on ENOMEM. */
static inline json_t *json_hex(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
	return json_string(b);
}

#endif /* OPVM_LIB_JSON_H */
