// SPDX-License-Identifier: MIT
/*
 * Guest-state model: the cost of a process exit in a busy guest, before and
 * after two processes have shared one address space (vfork).  Shared CR3s
 * are reference counted, so both should cost the same; the model once made
 * every exit after the first shared CR3 scan the whole process table (88x
 * slower at 20000 processes).
 *
 * Each round: 20000 processes on distinct CR3s, then all exit.  The
 * "shared" rounds first announce a second process on the first one's CR3
 * and let it exit.  Time is the process's CPU time (shared machines).
 *
 * Prints:  gstate-exit: N ns
 *          gstate-exit-after-shared-cr3: N ns
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/collect/gstate.h"

#define NR_PROCS	20000
#define ROUNDS		20

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per exit over ROUNDS rounds; -1 on a model error. */
static double exits(int shared)
{
	struct chan_hello h = { .version = 1, .nr_cpus = 1 };
	double spent = 0;

	for (int r = 0; r < ROUNDS; r++) {
		struct gstate *gs = gstate_new(NULL);
		double t0;
		int err = 0;

		if (!gs || gstate_hello(gs, &h))
			return -1;
		for (uint32_t i = 1; i <= NR_PROCS; i++)
			err |= gstate_proc(gs, i, 1, (uint64_t)i << 13, "p", 1, 0);
		if (shared) {
			err |= gstate_proc(gs, NR_PROCS + 1, 1, 1 << 13, "vfork", 5, 0);
			err |= gstate_proc_exit(gs, NR_PROCS + 1);
		}
		t0 = now_ns();
		for (uint32_t i = 1; i <= NR_PROCS; i++)
			err |= gstate_proc_exit(gs, i);
		spent += now_ns() - t0;
		gstate_free(gs);
		if (err)
			return -1;
	}
	return spent / ((double)ROUNDS * NR_PROCS);
}

int main(void)
{
	double plain = exits(0), shared = exits(1);

	if (plain < 0 || shared < 0) {
		fprintf(stderr, "bench-gstate: the model refused a record\n");
		return 1;
	}
	printf("gstate-exit: %.0f ns\n", plain);
	printf("gstate-exit-after-shared-cr3: %.0f ns\n", shared);
	return 0;
}
