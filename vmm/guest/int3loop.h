/* SPDX-License-Identifier: MIT */
/*
 * A vCPU stuck on a stale int3 (QEMU TCG): the detector.
 *
 * Linux patches live kernel text with text_poke_bp(): an int3 goes in
 * first, then the new instruction, while other CPUs may run that code; a
 * CPU that hits the int3 after it was removed backs up and runs the
 * instruction again.  Under QEMU TCG (multi-threaded) the invalidation of a
 * translated block can be lost in that race: the vCPU keeps executing a
 * block that still holds the int3, the kernel's handler keeps finding no
 * int3 in memory, and the vCPU loops in the int3 entry path for ever (the
 * guest never finishes booting).  Dropping QEMU's translated code ends it.
 *
 * Normal guests spend microseconds in those functions, during patching; a
 * looping vCPU spends most of its time there.  The detector takes each
 * sample's RIP and says when one vCPU had more than half of its samples in
 * the int3 entry path (the address ranges the collector found in the
 * guest's kallsyms) over a window of at least INT3LOOP_SPAN_NS and
 * INT3LOOP_MIN_SAMPLES samples, at most once per INT3LOOP_GAP_NS.
 * Not thread-safe: one sampling thread; the ranges are copied in by it.
 */
#ifndef OPVM_INT3LOOP_H
#define OPVM_INT3LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/sampler.h"

#define INT3LOOP_SPAN_NS	2000000000ll	/* a window lasts at least this */
#define INT3LOOP_MIN_SAMPLES	32		/* ... and holds at least these */
#define INT3LOOP_GAP_NS		10000000000ll	/* verdicts at most this often */

struct int3loop;

struct int3loop *int3loop_new(unsigned nr_vcpus);
void int3loop_free(struct int3loop *d);		/* NULL-safe */
/* Where the int3 entry path is (run-time addresses; nr 0: not known, the
 * detector says nothing).  Open windows start again. */
void int3loop_set_ranges(struct int3loop *d, const struct sampler_int3 *r);
/* vCPU vcpu's sample at time now (ns, monotonic): 1 when this sample ends a
 * window in which that vCPU looped on int3 (drop the translated code now),
 * else 0. */
int int3loop_sample(struct int3loop *d, unsigned vcpu, uint64_t rip, int64_t now);
/* Whether a vmlinux symbol (name, len bytes) is part of the int3 entry
 * path: the entry, its C handler and the handlers it calls first. */
int int3loop_path_symbol(const char *name, size_t len);
/* Windows that found a loop (verdicts given or held back by the gap). */
uint64_t int3loop_loops(const struct int3loop *d);

#endif /* OPVM_INT3LOOP_H */
