/* SPDX-License-Identifier: MIT */
/*
 * One sample, as a sampler backend takes it from a stopped or interrupted
 * vCPU and pushes it into that vCPU's ring (lib/ring.h).
 *
 * The guest is implied by the ring (one ring per vCPU per guest).  rip and
 * the slot fields are raw guest values; cr3 is raw as the sampler read it,
 * and normalised as it enters the ring (ring_push(), opvm_cr3_normalise()):
 * what sync (host/collect/attribution.c) reads is the address space the
 * guest module names, and sync decides what the values mean.
 */
#ifndef OPVM_SAMPLE_H
#define OPVM_SAMPLE_H

#include <stdint.h>

#include "lib/x86.h"

#define OPVM_MAX_CALLCHAIN	127	/* callers kept per sample, innermost
					 * first: with the sample's own ip, 128 */
#define OPVM_MAX_EVENTS		8	/* events counted at once in one session */

enum opvm_sample_flags {
	OPVM_SAMPLE_SLOT	= 1u << 0, /* slot_* fields are valid */
	OPVM_SAMPLE_KTHREAD	= 1u << 1, /* slot says: kernel thread */
	OPVM_SAMPLE_STACK	= 1u << 2, /* user_* and stack[] are valid */
	/* A kernel sample with no task (no slot: the kernel not found yet at
	 * boot): slot_cr3 holds its kernel stack pointer, which names the task
	 * once introspection can tell whose stack it is. */
	OPVM_SAMPLE_KSP		= 1u << 3,
	/* A user sample with no task (no SLOT) whose chain carries Python
	 * frames read for the task the kernel's current-task pointer named
	 * on its vCPU right after it (the perf sampler without opvm.ko):
	 * slot_tgid is that task's process.  Nothing confirmed it is the
	 * sample's: the frames are kept only where the sample's process,
	 * found by other means, is that one. */
	OPVM_SAMPLE_PYTASK	= 1u << 4,
};

/* -g dwarf: the most user stack a sample carries for the collector to
 * unwind (bytes from the user stack pointer up). */
#define OPVM_MAX_STACK		8192

struct opvm_sample {
	uint64_t rip;
	uint64_t cr3;		/* pushed: raw CR3; popped: normalised */
	uint64_t slot_cr3;	/* from the guest's current-task slot */
	uint32_t slot_tid;
	uint32_t slot_tgid;
	uint32_t vcpu;
	uint8_t cpl;		/* 0 kernel, 3 user */
	uint8_t event;		/* index into the session's event list */
	uint8_t flags;		/* enum opvm_sample_flags */
	uint8_t nr_chain;	/* entries used in chain[] (0: no call chain) */
	/* caller addresses, then (the last nr_py entries) Python frames as
	 * indices into the guest's lib/pynames.h table, innermost first;
	 * valid only during push/pop */
	const uint64_t *chain;
	/* OPVM_SAMPLE_STACK (-g dwarf): chain holds the kernel's callers
	 * only; the user part is unwound later from the user registers and
	 * a copy of the user stack (stack_len bytes from user_sp up). */
	uint64_t user_ip, user_sp, user_bp;
	uint16_t stack_len;
	uint8_t nr_py;		/* of nr_chain: Python frames (at chain's end) */
	const uint8_t *stack;	/* valid only during push/pop */
};

/*
 * Normalise a CR3 value into the address-space identity the guest module
 * reports (__pa(mm->pgd)): clear PCID (bits 0-11), the PTI user-copy bit 12
 * and the no-flush bit 63.
 */
static inline uint64_t opvm_cr3_normalise(uint64_t cr3)
{
	return cr3 & 0x7fffffffffffe000ull;
}

#endif /* OPVM_SAMPLE_H */
