/* SPDX-License-Identifier: MIT */
/*
 * Arithmetic that must not wrap: counters saturate.
 */
#ifndef OPVM_ARITH_H
#define OPVM_ARITH_H

#include <stdint.h>

/* a + b, or UINT64_MAX where the sum would wrap: counters saturate (and
 * print as such: stats_fmt_count() in host/collect/stats.h). */
static inline uint64_t arith_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

#endif /* OPVM_ARITH_H */
