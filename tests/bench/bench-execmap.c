// SPDX-License-Identifier: MIT
/*
 * The interval index of executable mappings (host/collect/execmap.c), which
 * files the perf sampler's user samples (no CR3) by mapping: one build for
 * a guest of 1000 processes with 20 executable mappings each at their own
 * ASLR addresses (20000 mappings; rebuilt at the first such sample after
 * the model changed), and one lookup (a binary search over its segments,
 * per sample).  Time is the process's CPU time (shared machines).
 *
 * Prints:  execmap-build-20k: N us
 *          execmap-lookup: N ns
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "host/collect/execmap.h"
#include "host/collect/gstate.h"

#define NR_PROCS	1000
#define MAPS		20
#define BUILDS		20
#define LOOKUPS		2000000

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static struct gstate *guest(void)
{
	struct gstate *gs = gstate_new(NULL);
	unsigned seed = 1;
	int err = !gs;

	for (uint64_t c = 1; !err && c <= MAPS; c++)
		err |= gstate_cookie(gs, c, "/usr/lib/x", 10, NULL, 0);
	for (uint32_t p = 1; !err && p <= NR_PROCS; p++) {
		/* a PIE and its libraries at a random 47-bit base each */
		uint64_t base = ((uint64_t)rand_r(&seed) << 24 ^ (uint64_t)rand_r(&seed) << 12) &
				0x7ffffffff000ull;

		err |= gstate_proc(gs, p + 1, 1, (uint64_t)p << 13, "p", 1, 1);
		for (uint64_t m = 0; m < MAPS; m++)
			err |= gstate_mmap(gs, p + 1, base + m * 0x200000,
					   base + m * 0x200000 + 0x100000, 0, m + 1);
	}
	if (err) {
		gstate_free(gs);
		return NULL;
	}
	return gs;
}

int main(void)
{
	struct gstate *gs = guest();
	struct execmap *x = execmap_new(0);
	const struct gstate_process *p;
	const struct gstate_mapping *m;
	unsigned seed = 7, found = 0;
	double t0, build, look;

	if (!gs || !x) {
		fprintf(stderr, "bench-execmap: cannot build the model\n");
		return 1;
	}
	t0 = now_ns();
	for (int i = 0; i < BUILDS; i++) {
		if (execmap_build(x, gs)) {
			fprintf(stderr, "bench-execmap: the build failed\n");
			return 1;
		}
	}
	build = (now_ns() - t0) / BUILDS;
	t0 = now_ns();
	for (int i = 0; i < LOOKUPS; i++) {
		uint64_t ip = ((uint64_t)rand_r(&seed) << 24 ^ (uint64_t)rand_r(&seed)) &
			      0x7fffffffffffull;

		found += execmap_lookup(x, ip, &p, &m) == EXECMAP_ONE;
	}
	look = (now_ns() - t0) / LOOKUPS;
	printf("execmap-build-20k: %.0f us\n", build / 1000.0);
	printf("execmap-lookup: %.0f ns\n", look);
	fprintf(stderr, "(%u of %d random addresses in a mapping)\n", found, LOOKUPS);
	execmap_free(x);
	gstate_free(gs);
	return 0;
}
