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
 * thread).  Memory is bounded: a mirror of at most `entries` switches per
 * vCPU is kept.
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
};

/* Rings described by HELLO's switch tail.  Returns NULL and sets errno
 * (EINVAL for a geometry that fails the bounds checks). */
struct timeline *timeline_new(uint32_t nr_vcpus, uint64_t switch_pa,
			      uint32_t stride, uint32_t entries);
void timeline_free(struct timeline *t);	/* NULL-safe */

/* Reads new entries of every ring.  now_tsc: the guest TSC just before the
 * read began; lookups up to it are final afterwards.  Returns 0 or -errno. */
int timeline_refresh(struct timeline *t, struct guestmem *m, uint64_t now_tsc);

/* The task running on vcpu at guest TSC tsc.  Returns 0, -ENOENT (before the
 * oldest entry kept), -EAGAIN (after the last refresh: ask again later). */
int timeline_lookup(struct timeline *t, uint32_t vcpu, uint64_t tsc,
		    struct timeline_task *out);

void timeline_get_stats(const struct timeline *t, struct timeline_stats *out);

#endif /* OPVM_TIMELINE_H */
