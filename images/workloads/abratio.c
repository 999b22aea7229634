/* SPDX-License-Identifier: MIT */
/*
 * abratio [seconds [a_units]]: two functions doing a_units (default 1) and
 * 100 - a_units units of identical work per round.  Known answer: func_a gets
 * a_units % and func_b the rest of the samples in this binary (static, so all
 * of it is in one image).  Two runs with different splits are the known
 * answer of a differential profile.
 */
#include "common.h"

static volatile uint64_t sink;

/* One unit: a fixed, dependency-chained integer loop. */
#define UNIT_ITERS 2000

static void __attribute__((noinline)) func_a(unsigned int units)
{
	uint64_t x = sink;

	for (unsigned int u = 0; u < units; u++)
		for (unsigned int i = 0; i < UNIT_ITERS; i++)
			x = x * 6364136223846793005ull + i;
	sink = x;
}

static void __attribute__((noinline)) func_b(unsigned int units)
{
	uint64_t x = sink;

	for (unsigned int u = 0; u < units; u++)
		for (unsigned int i = 0; i < UNIT_ITERS; i++)
			x = x * 6364136223846793005ull + i;
	sink = x;
}

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 3.0);
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
	long a = arg_long(argc, argv, 2, 1);
	uint64_t rounds = 0;

	if (a < 1 || a > 99)
		a = 1;

	TRUTH("abratio pid=%d seconds=%.1f\n", getpid(), secs);
	TRUTH("abratio share func_a=%.2f func_b=%.2f\n", a / 100.0, (100 - a) / 100.0);
	do {
		func_a((unsigned int)a);
		func_b((unsigned int)(100 - a));
		rounds++;
	} while (now_ns() < end);
	TRUTH("abratio done rounds=%llu\n", (unsigned long long)rounds);
	return 0;
}
