/* SPDX-License-Identifier: MIT */
/*
 * Task timeline: which guest task ran on which vCPU when, from opvm.ko's
 * per-vCPU task-switch rings (guest-kmod/opvm_proto.h, struct opvm_switch),
 * read from a running guest through struct guestmem.
 *
 * This is OProfile's per-CPU buffer of task switches and samples, split
 * across the VM boundary: the host samples a vCPU (RIP and a time, no CR3),
 * the guest logs its switches, and the join by guest TSC names the task.
 *
 * Threads: one thread owns a timeline (refresh and lookup from the same
 * thread).  Memory is bounded: a mirror of at most 4096 switches per vCPU
 * is kept (the host's history, which may be longer than the guest's ring).
 */
#ifndef OPVM_TIMELINE_H
#define OPVM_TIMELINE_H

#include <stdint.h>

struct guestmem;
struct timeline;

struct timeline_task {
	uint64_t tsc;		/* guest TSC at which it started running */
	uint32_t pid, tgid;
	uint64_t cr3;		/* raw, as the guest wrote it */
	uint32_t flags;		/* OPVM_SLOT_KTHREAD */
};

struct timeline_stats {
	uint64_t switches;	/* entries read and accepted */
	uint64_t overrun;	/* entries overwritten before the host read them */
	uint64_t torn;		/* entries whose seq changed under the read */
	uint64_t refreshes, read_errors;
	uint64_t before_first;	/* lookups older than the oldest entry kept */
	uint64_t after_last;	/* lookups newer than the last refresh */
	uint64_t unknown;	/* lookups in a gap left by overrun/torn entries */
	uint64_t resets;	/* a ring's head or TSC went back: mirror restarted */
};

/* The bounds checks on HELLO's switch tail, shared with the channel
 * decoder: 1..OPVM_SWITCH_MAX_CPUS rings, entries a power of two in
 * 2..OPVM_SWITCH_MAX_ENTRIES, stride a multiple of 8 that holds the header
 * and the entries, 8-aligned switch_pa, no overflow of switch_pa +
 * nr_vcpus * stride.  Returns 0 or -EINVAL. */
int timeline_check_geometry(uint32_t nr_vcpus, uint64_t switch_pa,
			    uint32_t stride, uint32_t entries);

/* Rings described by HELLO's switch tail; nr_vcpus should be the guest's
 * real vCPU count (at most HELLO's nr_cpus): each costs a mirror of up to
 * 4096 switches (160 KiB).  Returns NULL and sets errno (EINVAL for a
 * geometry that fails timeline_check_geometry()). */
struct timeline *timeline_new(uint32_t nr_vcpus, uint64_t switch_pa,
			      uint32_t stride, uint32_t entries);
void timeline_free(struct timeline *t);	/* NULL-safe */

/* Reads new entries of every ring.  now_tsc: the guest TSC just before the
 * read began; lookups up to it are final afterwards (per vCPU: not if a
 * switch was being written at that moment; the next refresh moves it).
 * Returns 0 or the first -errno (the other rings are still read). */
int timeline_refresh(struct timeline *t, struct guestmem *m, uint64_t now_tsc);

/* The task running on vcpu at guest TSC tsc.  Returns 0, -ENOENT (before the
 * oldest entry kept, or in a gap of lost entries), -EAGAIN (after the last
 * refresh: ask again later), -EINVAL (no such vCPU). */
int timeline_lookup(struct timeline *t, uint32_t vcpu, uint64_t tsc,
		    struct timeline_task *out);

void timeline_get_stats(const struct timeline *t, struct timeline_stats *out);

#endif /* OPVM_TIMELINE_H */
