/* SPDX-License-Identifier: MIT */
/*
 * callpaths [seconds]: dynamically linked; one function, hot_leaf, reached
 * along three call paths that do 20, 30 and 50 % of its work:
 *
 *   path_a: main -> path_a -> hot_leaf
 *   path_b: main -> path_b -> mid_b -> hot_leaf
 *   path_c: main -> path_c -> qsort (libc.so.6) -> cmp_c -> hot_leaf
 *
 * The known answer of a call-graph profile: hot_leaf's samples split
 * 20/30/50 by caller chain.  The split holds in CPU time because the work
 * is counted, not timed: qsort of the same array makes the same comparisons
 * every round (counted once at start), each comparison calls
 * hot_leaf(LEAF_ITERS), and path_a and path_b are given exactly 2/5 and 3/5
 * of path_c's iterations.  Rounds are whole: the clock is read only between
 * them.  libc's qsort (qsort_r) is built without frame pointers: a
 * frame-pointer walk from hot_leaf breaks in it, a DWARF unwind does not.
 */
#include <string.h>
#include "common.h"

#define NKEYS		16
#define LEAF_ITERS	5000ull		/* a multiple of 5: 2/5 and 3/5 exact */

#define NOINLINE __attribute__((noinline, noclone))

static volatile uint64_t sink;
static unsigned int ncmp;		/* comparisons made by one qsort */
static int counting;

/* The leaf all three paths reach: a dependency-chained integer loop.  The
 * volatile local gives it a stack frame: gcc keeps no frame pointer in a
 * leaf that needs no stack, even with -fno-omit-frame-pointer, and a
 * frame-pointer walk would then skip hot_leaf's caller. */
static void NOINLINE hot_leaf(uint64_t iters)
{
	volatile uint64_t start = sink;
	uint64_t x = start;

	for (uint64_t i = 0; i < iters; i++)
		x = x * 6364136223846793005ull + i;
	sink = x;
}

static void NOINLINE path_a(uint64_t iters)
{
	hot_leaf(iters);
	sink++;			/* not a tail call: path_a stays on the stack */
}

static void NOINLINE mid_b(uint64_t iters)
{
	hot_leaf(iters);
	sink++;
}

static void NOINLINE path_b(uint64_t iters)
{
	mid_b(iters);
	sink++;
}

static int NOINLINE cmp_c(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (counting)
		ncmp++;
	else
		hot_leaf(LEAF_ITERS);
	return (x > y) - (x < y);
}

static void NOINLINE path_c(void)
{
	/* A fixed permutation: the same comparisons every round. */
	static const int keys[NKEYS] = {
		11, 3, 14, 7, 0, 9, 15, 4, 12, 1, 8, 13, 5, 10, 2, 6,
	};
	int v[NKEYS];

	memcpy(v, keys, sizeof(v));
	qsort(v, NKEYS, sizeof(v[0]), cmp_c);
	sink += (uint64_t)v[0];
}

/* The file-backed mappings, for tests that unwind this process's stack
 * from the host without the guest channel (tests/unit/test-unwind-dwarf). */
static void print_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (strchr(line, '/'))
			TRUTH("callpaths map %s", line);
	fclose(f);
}

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 5.0);
	uint64_t end, rounds = 0, iters_c, iters_a, iters_b;

	counting = 1;
	path_c();
	counting = 0;
	iters_c = (uint64_t)ncmp * LEAF_ITERS;
	iters_a = iters_c * 2 / 5;
	iters_b = iters_c * 3 / 5;

	TRUTH("callpaths pid=%d seconds=%.1f\n", getpid(), secs);
	TRUTH("callpaths share path_a=%.2f path_b=%.2f path_c=%.2f\n",
	      (double)iters_a / (double)(iters_a + iters_b + iters_c),
	      (double)iters_b / (double)(iters_a + iters_b + iters_c),
	      (double)iters_c / (double)(iters_a + iters_b + iters_c));
	print_maps();
	TRUTH("callpaths leaf=hot_leaf per_round a=%llu b=%llu c=%llu qsort_cmps=%u\n",
	      (unsigned long long)iters_a, (unsigned long long)iters_b,
	      (unsigned long long)iters_c, ncmp);
	end = now_ns() + (uint64_t)(secs * 1e9);
	do {
		path_a(iters_a);
		path_b(iters_b);
		path_c();
		rounds++;
	} while (now_ns() < end);
	TRUTH("callpaths done rounds=%llu\n", (unsigned long long)rounds);
	return 0;
}
