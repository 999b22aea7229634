/* SPDX-License-Identifier: MIT */
/*
 * split3 [seconds [a b c]]: three functions doing a, b and c units
 * (default 20, 30 and 50) of identical work per round.  The image ships
 * it stripped, as distributions ship their binaries, and keeps the
 * unstripped build outside the guest root (images/Makefile): the known
 * answer is func_a a %, func_b b %, func_c c % of the samples in this
 * binary, which opvm can only split by its .eh_frame function bounds.
 */
#include "common.h"

static volatile uint64_t sink;

/* One unit: a fixed, dependency-chained integer loop (abratio's). */
#define UNIT_ITERS 2000

#define WORK_FN(name)							\
	static void __attribute__((noinline)) name(unsigned int units)	\
	{								\
		uint64_t x = sink;					\
									\
		for (unsigned int u = 0; u < units; u++)		\
			for (unsigned int i = 0; i < UNIT_ITERS; i++)	\
				x = x * 6364136223846793005ull + i;	\
		sink = x;						\
	}

WORK_FN(func_a)
WORK_FN(func_b)
WORK_FN(func_c)

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 3.0);
	long a = arg_long(argc, argv, 2, 20), b = arg_long(argc, argv, 3, 30);
	long c = arg_long(argc, argv, 4, 50);
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9), rounds = 0;

	if (a < 1 || b < 1 || c < 1 || a + b + c > 1000)
		a = 20, b = 30, c = 50;
	TRUTH("split3 pid=%d seconds=%.1f\n", getpid(), secs);
	TRUTH("split3 units func_a=%ld func_b=%ld func_c=%ld\n", a, b, c);
	do {
		func_a((unsigned int)a);
		func_b((unsigned int)b);
		func_c((unsigned int)c);
		rounds++;
	} while (now_ns() < end);
	TRUTH("split3 done rounds=%llu\n", (unsigned long long)rounds);
	return 0;
}
