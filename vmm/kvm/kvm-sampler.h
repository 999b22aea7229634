/* SPDX-License-Identifier: MIT */
/*
 * The "kvm" sampler backend: per-vCPU perf-overflow sampling of the built-in
 * VMM's guests (vmm/kvm/kvm.h).
 *
 * Each vCPU thread opens one perf event per session event on itself
 * (pid = its tid, cpu = -1): a hardware event with exclude_host=1 where the
 * host has a PMU, a software task-clock event (timer mode) otherwise.  The
 * overflow signal is routed to that same thread (F_SETOWN_EX/F_OWNER_TID +
 * F_SETSIG + O_ASYNC), so KVM_RUN returns -EINTR; the run loop's after_run()
 * hook then reads RIP, CR3 and CS.DPL, the guest's current-task slot straight
 * from guest RAM, and pushes one struct opvm_sample per overflowed event into
 * the vCPU's ring before re-entering the guest.  No allocation and no locks
 * on that path; a per-vCPU rate cap (token bucket) throttles and counts.
 *
 * Python frames (docs/runtimes.md): a user sample in an address space the
 * collector named as CPython's (guest_python) gets its thread's frames,
 * read there through the VMM's own mapping of guest RAM (each vCPU thread
 * its own view and interpreter table; the thread is the slot's).  The one
 * lock: the name table (lib/pynames.h) takes one producer at a time, so
 * the vCPU threads take turns with a mutex while they intern a sample's
 * frames.
 */
#ifndef OPVM_KVM_SAMPLER_H
#define OPVM_KVM_SAMPLER_H

#include <linux/perf_event.h>
#include <stddef.h>

#include "lib/sample.h"
#include "vmm/sampler.h"

struct kvm_vm;

struct kvm_sampler_event {
	/* type, config and sample_period (the count, already checked against
	 * the event's minimum); the sampler sets the rest. */
	struct perf_event_attr attr;
	int kernel;		/* 1: keep samples taken in guest CPL 0 */
	int user;		/* 1: keep samples taken in guest CPL 3 */
};

struct kvm_sampler_config {
	struct kvm_vm *vm;	/* not owned; must outlive the sampler */
	struct kvm_sampler_event events[OPVM_MAX_EVENTS];
	unsigned nr_events;	/* 1..OPVM_MAX_EVENTS */
	unsigned max_rate;	/* samples/s per vCPU cap; 0: 10000 */
};

/* Returns NULL and sets errno (EINVAL: bad configuration). */
struct sampler *kvm_sampler_new(const struct kvm_sampler_config *cfg);

/* "kvm-pmu" when any event is a hardware event, else "kvm-timer". */
const char *kvm_sampler_mode(const struct sampler *s);

/* Samples dropped because the guest was in a CPL the event excludes. */
uint64_t kvm_sampler_filtered(struct sampler *s);

#endif /* OPVM_KVM_SAMPLER_H */
