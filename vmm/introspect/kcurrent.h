/* SPDX-License-Identifier: MIT */
/*
 * Each vCPU's current task, for a sampler that stops the guest: what
 * introspection found (vmm/introspect/introspect.h) handed to the sampler
 * as plain data, and a cache that names a task pointer.
 *
 * The sampler reads, in the same stop as the registers, one 8-byte word
 * per vCPU: the kernel's per-CPU current-task pointer, at slot_pa[cpu]
 * (guest-physical; the per-CPU areas do not move while the kernel runs).
 * The pointer is then named (tid, tgid, kernel thread, mm->pgd) from a
 * cache keyed by the pointer.  A task_struct is freed and taken by a new
 * task all the time (fork and exit, in the same second), so a hit costs
 * one 8-byte read: pid and tgid, at their physical address (the direct
 * map does not move), compared with the cached ones.  A miss, an entry
 * older than max_age (exec changes mm, not pid), or a kernel thread seen
 * in user mode (it exec'd: init does) reads the task_struct through the
 * kernel's page tables (a handful of small reads).  The guest runs
 * meanwhile, which is fine: pid and tgid do not change while a task lives.
 *
 * Guest memory is hostile: the pointer and every field are checked as in
 * ktasks.h; the cache is fixed-size (a pointer only evicts another).
 *
 * Threads: a struct kcurrent is one thread's (the sampler's tick thread).
 */
#ifndef OPVM_KCURRENT_H
#define OPVM_KCURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm/introspect/kbtf.h"
#include "vmm/introspect/ktasks.h"

#define KCURRENT_MAX_CPUS	256u	/* the gdbstub's vCPUs (GDBSTUB_MAX_THREADS) */
#define KCURRENT_CACHE_BITS	10
#define KCURRENT_CACHE		(1u << KCURRENT_CACHE_BITS)	/* task pointers named at once */

struct guestmem;

/* What introspection found, for the sampler (copied by it). */
struct kcurrent_info {
	uint32_t nr;			/* CPUs in slot_pa (0: none known) */
	uint64_t pgd_gpa;		/* the kernel's page-table root */
	struct kbtf_offsets off;	/* task_struct, mm_struct */
	/* CPU i's current-task pointer, guest-physical, 8-aligned; 0: that
	 * CPU's could not be read */
	uint64_t slot_pa[KCURRENT_MAX_CPUS];
};

struct kcurrent_stats {
	uint64_t hits, misses;		/* cache lookups */
	uint64_t bad;			/* pointers that did not name a task */
};

struct kcurrent;

/* A cache over m (borrowed) for the kernel in ci.  NULL and errno. */
struct kcurrent *kcurrent_new(struct guestmem *m, const struct kcurrent_info *ci,
			      uint64_t max_age_ns);
void kcurrent_free(struct kcurrent *k);		/* NULL-safe */

/* Names the task at pointer task (as read from a slot, host byte order),
 * sampled in user mode or not, at time now_ns.  Returns 0, -EINVAL (not a
 * kernel pointer) or -EFAULT (its fields do not read); both counted in
 * bad. */
int kcurrent_task(struct kcurrent *k, uint64_t task, bool user, uint64_t now_ns,
		  struct ktask_cur *out);

const struct kcurrent_stats *kcurrent_get_stats(const struct kcurrent *k);

#endif /* OPVM_KCURRENT_H */
