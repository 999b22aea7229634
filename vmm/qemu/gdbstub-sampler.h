/* SPDX-License-Identifier: MIT */
/*
 * The "gdbstub" sampler backend: samples a QEMU guest (TCG or KVM) through
 * QEMU's gdbstub.  A tick thread, rate_hz times a second, sends in one
 * write: stop, read RIP, CS, CR0 and CR3 of every vCPU and the guest
 * module's current-task slots (guest-physical memory), resume; QEMU runs it
 * in one pass of its main loop.  Then it pushes one struct opvm_sample per
 * vCPU into that vCPU's ring.
 *
 * Where the slots are: the guest module announces the slot array's
 * guest-physical address in its HELLO record on the channel.  The channel
 * is the collector's (it alone reads and decodes it); the collector passes
 * each HELLO to the guest_hello op (vmm/sampler.h), which publishes the
 * slot address to the tick thread through a sequence-counted set of
 * atomics (one writer: the collector's thread).  The tick thread never
 * waits for it: a torn or changing publication just means one tick without
 * slots.
 *
 * A guest reset is seen by the tick thread itself: a vCPU with CR3 == 0 is
 * in firmware or early boot, which Linux never is once paging is up, so the
 * old slot address is dropped until the next HELLO.
 *
 * Being polite to the guest: a tick that overran its period, or ticks that
 * would take more than 1/5 of the guest's time, are skipped and counted in
 * throttled.  A guest paused by someone else (monitor "stop", libvirt
 * suspend) stays paused: the stub tells us about such a stop, and "\x03" to
 * a paused guest gets no answer; sampling resumes when the guest does.
 */
#ifndef OPVM_QEMU_SAMPLER_H
#define OPVM_QEMU_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/sampler.h"

#define QEMU_SAMPLER_DEFAULT_HZ	50	/* measured: 1-2 % guest overhead; 100 Hz: 2.4-3.7 % */

struct qemu_sampler_config {
	const char *gdb_addr;		/* "unix:/path", or NULL: */
	int gdb_fd;			/* a socket connected to the gdbstub
					 * (one end of a socket pair); the
					 * sampler takes it, even on failure */
	unsigned rate_hz;		/* 0: QEMU_SAMPLER_DEFAULT_HZ; at most 1000 */
	unsigned connect_timeout_ms;	/* 0: 5000 */
	int resume;			/* 1: start() resumes the guest (it was
					 * running before we connected, or was
					 * started with -S) */
	/* Call graphs: cg.mode SAMPLER_CG_FP walks each sample's stack in
	 * mem (QEMU's RAM, vmm/guest/guestmem.h), which the sampler takes, even
	 * on failure; mem may be NULL without call graphs.  mem also names
	 * the tasks of guest_current()'s pointers (none without it). */
	struct sampler_callgraph_cfg cg;
	struct guestmem *mem;
	/* 1: QEMU runs the guest with TCG (or may: an attached guest's
	 * accelerator is not known), so a vCPU looping on a stale int3 is
	 * watched for and ended (vmm/guest/int3loop.h); 0: KVM. */
	int tcg;
};

/*
 * Connects to the gdbstub (which stops the guest until start()).  Returns
 * NULL and sets errno; err (may be NULL) gets a one-line reason.
 */
struct sampler *qemu_sampler_new(const struct qemu_sampler_config *cfg,
				 char *err, size_t errlen);

/* vCPUs the gdbstub reports. */
unsigned qemu_sampler_nr_vcpus(struct sampler *s);

/* HELLOs the collector passed on, vCPUs stopped at least once, and ticks that
 * found the guest paused by someone else (for the summary). */
struct qemu_sampler_info {
	uint64_t hellos;
	uint64_t slot_reads;		/* slots accepted (even seq) */
	uint64_t slot_odd;		/* slots skipped: writer mid-update */
	uint64_t paused_ticks;
	uint64_t resets;		/* guest resets noticed (CR3 == 0) */
	uint64_t max_cost_ns;
	uint64_t late_stops;		/* our stop answered after the last tick:
					 * resumed on the way out */
	uint64_t restores;		/* pauses that landed mid-tick, restored */
	uint64_t int3_loops;		/* windows in which a vCPU looped on a
					 * stale int3 (int3loop.h) */
	uint64_t tb_flushes;		/* single steps that ended: QEMU's
					 * translated code dropped */
	uint64_t steps_late;		/* steps not answered in time */
	uint64_t step_ns;		/* host time those steps took */
};
void qemu_sampler_get_info(struct sampler *s, struct qemu_sampler_info *out);

/* The call-graph walker's figures (all 0 without call graphs). */
struct callgraph_stats;
void qemu_sampler_callgraph_stats(struct sampler *s, struct callgraph_stats *out);
/* What the Python frame reads found (docs/runtimes.md), lines for the
 * summary; empty when no sample was in a CPython process. */
void qemu_sampler_python_describe(struct sampler *s, char *buf, size_t len);

#endif /* OPVM_QEMU_SAMPLER_H */
