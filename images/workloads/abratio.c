/* SPDX-License-Identifier: MIT */
/*
 * abratio [seconds]: two functions doing 1 and 99 units of identical work per
 * round.  Known answer: func_a gets 1 % and func_b 99 % of the samples in this
 * binary (static, so all of it is in one image).
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
	uint64_t rounds = 0;

	TRUTH("abratio pid=%d seconds=%.1f\n", getpid(), secs);
	TRUTH("abratio share func_a=0.01 func_b=0.99\n");
	do {
		func_a(1);
		func_b(99);
		rounds++;
	} while (now_ns() < end);
	TRUTH("abratio done rounds=%llu\n", (unsigned long long)rounds);
	return 0;
}
