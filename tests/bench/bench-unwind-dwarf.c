// SPDX-License-Identifier: MIT
/*
 * The host time of one DWARF unwind (unwind/dwarf-cfi.c) of a real stack: a
 * libc qsort() callback's registers and 8 KiB window (this binary is built
 * with -fomit-frame-pointer, tests/unit/unwind-capture.h): 10 frames, from
 * the callback through libc's msort and qsort_r to main and libc's start.
 * The figure is the unwind alone, files cached, the same address space
 * sample after sample; copying the window out of the guest is the
 * sampler's and not in it.  The second line is the worst case of samples
 * alternating between address spaces: every unwind drops libdwfl's modules
 * and parses the CFI of each image again (files still cached).
 *
 * Prints:  callgraph-cost-dwarf-unwind: N us  (the unwind alone, a host stack)
 *          callgraph-cost-dwarf-switch: N us
 * Time is the process's CPU time (shared machines).
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "unwind/dwarf-cfi.h"
#include "tests/unit/unwind-capture.h"

#define ROUNDS		20000
#define SWITCH_ROUNDS	2000

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int find_nothing(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	return -ENOENT;
}

static unsigned unwind_once(struct unwind_dwarf *u, int (*find)(void *, uint64_t,
					struct unwind_dwarf_image *))
{
	uint64_t pcs[UNWIND_MAX_DEPTH];
	enum unwind_stop why;

	return unwind_dwarf(u, &cap.r, cap.stack, cap.len, find, &cap, pcs,
			    UNWIND_MAX_DEPTH, &why);
}

int main(void)
{
	struct unwind_dwarf *u;
	double t0, same, sw = 0;
	unsigned n;

	if (capture_through_qsort() || !(u = unwind_dwarf_new())) {
		fprintf(stderr, "bench-unwind-dwarf: no stack captured\n");
		return 1;
	}
	n = unwind_once(u, capture_find_image);	/* opens the files */
	if (n < 5) {
		fprintf(stderr, "bench-unwind-dwarf: only %u frames\n", n);
		return 1;
	}
	t0 = now_ns();
	for (int i = 0; i < ROUNDS; i++)
		if (unwind_once(u, capture_find_image) != n)
			return 1;
	same = (now_ns() - t0) / ROUNDS;
	for (int i = 0; i < SWITCH_ROUNDS; i++) {
		unwind_once(u, find_nothing);	/* another address space */
		t0 = now_ns();
		if (unwind_once(u, capture_find_image) != n)
			return 1;
		sw += now_ns() - t0;
	}
	unwind_dwarf_free(u);
	printf("callgraph-cost-dwarf-unwind: %.1f us\n", same / 1e3);
	printf("callgraph-cost-dwarf-switch: %.1f us\n", sw / SWITCH_ROUNDS / 1e3);
	return 0;
}
