/* SPDX-License-Identifier: MIT */
/*
 * cpuloop [iterations] [reps]: a fixed CPU-bound loop; prints each of
 * `reps` timings and their median after the first as
 * "OPVM-BENCH cpuloop ns=N" (module overhead benchmark).
 */
#include "common.h"
#include "median.h"

static volatile uint64_t sink;

int main(int argc, char **argv)
{
	long iters = arg_long(argc, argv, 1, 20000000);
	long reps = arg_long(argc, argv, 2, 5);
	double v[64];

	if (reps < 1 || reps > 64)
		reps = 5;
	for (long r = 0; r < reps; r++) {
		uint64_t t0 = now_ns(), x = 1;
		double ns;

		for (long i = 0; i < iters; i++)
			x = x * 6364136223846793005ull + (uint64_t)i;
		sink = x;
		ns = (double)(now_ns() - t0);
		printf("OPVM-BENCH cpuloop rep=%ld ns=%.0f\n", r, ns);
		v[r] = ns;
	}
	printf("OPVM-BENCH cpuloop ns=%.0f\n", median_after_warmup(v, reps));
	return 0;
}
