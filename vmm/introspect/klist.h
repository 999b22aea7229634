/* SPDX-License-Identifier: MIT */
/*
 * Walking a guest kernel's data by its pointers: what a pointer the
 * walkers follow must look like, and the loop check of a list walk.  One
 * definition each for the walks of the task list (ktasks.c), the module
 * list (kmods.c) and the address spaces (kvmas.c).  The guest is
 * untrusted: a list may point anywhere, or loop without passing its head.
 */
#ifndef OPVM_KLIST_H
#define OPVM_KLIST_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/x86.h"

/* A pointer worth following: in the kernel half, 8-aligned, and span
 * bytes past it (the most a walker reads there) not wrapping past the
 * top of the address space. */
static inline bool klist_ptr(uint64_t p, uint64_t span)
{
	return p >= OPVM_KERNEL_HALF && !(p & 7) && p < UINT64_MAX - span;
}

/*
 * Brent's cycle finding over a list walk: a list that loops without
 * coming back to its head is caught within twice its loop's start and
 * length, not at the walk's cap, and in constant memory.  Start at the
 * head; ask at each element before following it.
 */
struct klist_loop {
	uint64_t mark, power, lam;
};

static inline struct klist_loop klist_loop_start(uint64_t head)
{
	return (struct klist_loop){ .mark = head, .power = 1 };
}

/* Whether next was met before (the walk has come round a loop). */
static inline bool klist_loop_seen(struct klist_loop *l, uint64_t next)
{
	if (next == l->mark)
		return true;
	if (++l->lam == l->power) {
		l->mark = next;
		l->power *= 2;
		l->lam = 0;
	}
	return false;
}

#endif /* OPVM_KLIST_H */
