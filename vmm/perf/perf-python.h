/* SPDX-License-Identifier: MIT */
/*
 * Python frames for the perf sampler, read right after each sample.
 * (docs/runtimes.md, "A guest that keeps running".)  The guest is never
 * stopped, and a perf sample carries no task, which the switch-ring timeline names tens of milliseconds later
 * - too late to read the frames the sample was in.  So the read happens
 * right after the sample, for the task that runs on the vCPU then, and is
 * confirmed when the timeline answers:
 *
 *  1. read: while a CPython process is known, each sample's overflow
 *     wakes the drain thread (at most one pass a PERF_PYTHON_GAP_MS when
 *     samples come faster), which sees each guest-user sample at most a
 *     few milliseconds late (older ones are not read: stale).  It reads
 *     the vCPU's current-task slot (opvm.ko's, HELLO's slot_pa: its seq
 *     even, pid, cr3); when that address space runs CPython (the set the
 *     collector publishes, vmm/sampler.h's struct sampler_python) it reads
 *     the thread's frame chain through the address space's page tables,
 *     reads the chain again (pyframes_validate(): frames that changed are
 *     dropped and counted), then the slot's seq again (changed: the task
 *     switched during the read, everything dropped).  The names are
 *     interned (lib/pynames.h) and held with the guest TSC of the read's
 *     end.
 *  2. confirm: the sample's task from the timeline, and the task at the
 *     read's end: the frames go with the sample only when both are the
 *     same run (one switch-ring entry) of the task the read was for;
 *     otherwise they are dropped and counted (switched), never filed under
 *     another sample's task.
 *
 * Without opvm.ko (no slots, no timeline) the task comes from the guest
 * kernel itself, where introspection found each CPU's current-task
 * pointer (vmm/introspect/kcurrent.h, the collector's guest_current):
 *
 *  1'. read: the same, with the task the pointer of the sample's vCPU
 *     names (its pid, tgid and mm's page-table root, from this thread's
 *     own struct kcurrent); after the second read of the chain the
 *     pointer is read and named again: another pointer, or the same one
 *     with another pid or tgid (the task_struct freed and taken), drops
 *     everything (switched).  A pointer that names no task is counted
 *     (task_bad).
 *  2'. no timeline confirms it: the frames go with the sample with the
 *     tgid they were read for (perf_python_chain()'s *tgid), and the
 *     filing keeps them only when the process it names for the sample by
 *     other means (its address's executable mapping) is that one
 *     (host/collect/attribution.c).
 *
 * Threads: perf_python_publish(), perf_python_set_slots() and
 * perf_python_set_current() run on the collector's thread,
 * perf_python_get_stats() on any; everything else on the drain thread,
 * the only reader of guest memory here, the only user of its struct
 * kcurrent and the only producer of the name table.
 */
#ifndef OPVM_PERF_PYTHON_H
#define OPVM_PERF_PYTHON_H

#include <stdint.h>

#include "vmm/guest/pyguest.h"
#include "vmm/guest/timeline.h"
#include "vmm/perf/guest-tsc.h"
#include "vmm/sampler.h"

struct guestmem;
struct kcurrent_info;
struct pynames;
struct perf_python;

#define PERF_PYTHON_GAP_MS	1		/* a pass that soon after a sample, at most */
#define PERF_PYTHON_MAX_AGE_NS	5000000ull	/* older samples are not read */
#define PERF_PYTHON_HELD	256		/* reads waiting for the timeline, per vCPU */

struct perf_python_stats {
	uint64_t reads;			/* samples of a CPython task read */
	uint64_t stale;			/* user samples seen too late to read */
	uint64_t slot_busy;		/* the slot odd or unreadable (no slot:
					 * the current-task pointer unreadable) */
	uint64_t task_bad;		/* no slot: the pointer named no task */
	uint64_t switched;		/* dropped: the task switched between sample and read */
	uint64_t unconfirmed;		/* dropped: the sample got no task */
	uint64_t held_full;		/* not read: PERF_PYTHON_HELD reads waiting */
	uint64_t kept;			/* samples filed with Python frames */
	uint64_t cost_ns;		/* drain-thread CPU time of the reads */
	struct pyguest_stats py;	/* the reads themselves (pyguest_read) */
};

struct perf_python *perf_python_new(unsigned nr_vcpus);	/* NULL and errno */
void perf_python_free(struct perf_python *pp);		/* NULL-safe */

/* The collector's thread: the CPython address spaces (copied); where the
 * current-task slots are (HELLO: slot_pa 0 for none; a slot_size smaller
 * than struct opvm_slot is refused). */
void perf_python_publish(struct perf_python *pp, const struct sampler_python *set);
void perf_python_set_slots(struct perf_python *pp, uint64_t slot_pa, uint32_t slot_size,
			   uint32_t nr_slots);

/* The collector's thread: where the guest CPUs' current-task pointers are
 * (introspection; copied; NULL or ci->nr 0: not known).  Used while no
 * slots are. */
void perf_python_set_current(struct perf_python *pp, const struct kcurrent_info *ci);

enum {
	PERF_PYTHON_OFF = 0,		/* no CPython address space, or no task source */
	PERF_PYTHON_SLOT = 1,		/* the slots name the task (the timeline
					 * confirms it) */
	PERF_PYTHON_CURRENT = 2,	/* the current-task pointers name it */
};

/* The drain thread: takes what was published; m: the guest memory reads
 * will go through (the current-task pointers are named over it).
 * Returns whether, and how, reads are on (PERF_PYTHON_*). */
int perf_python_take(struct perf_python *pp, struct guestmem *m);

/*
 * The drain thread, right after a guest-user sample of vcpu: the frames of
 * the task its slot (or, with none, its current-task pointer) names, read
 * through m, interned in names and held.
 * Returns the read's handle (give it to perf_python_chain()), or 0 when
 * nothing is held (not a CPython task, nothing read, dropped: counted).
 */
uint32_t perf_python_read(struct perf_python *pp, struct guestmem *m, struct pynames *names,
			  unsigned vcpu, const struct guest_tsc *clk);

/* Counts a user sample seen too late to be read. */
void perf_python_stale(struct perf_python *pp);

/* The guest TSC at which read h of vcpu ended (0: no such read): the
 * caller looks the task up there. */
uint64_t perf_python_read_end(const struct perf_python *pp, unsigned vcpu, uint32_t h);

/*
 * The sample of read h is filed: its task from the timeline (at_sample;
 * NULL: none) and the task at the read's end (at_end; NULL: not known).
 * The held frames as chain words (lib/pynames.h indices, innermost first) into
 * w[0..PYFRAMES_MAX_DEPTH) when both are the same run of the task the
 * read was for; else none, counted.  A read named by the current-task
 * pointer has no timeline to confirm it (at_sample NULL): its words, and
 * in *tgid the process they were read for, which the sample's filing must
 * confirm (else 0).  Frees h (and any older read of vcpu).  Returns the
 * words.
 */
unsigned perf_python_chain(struct perf_python *pp, unsigned vcpu, uint32_t h,
			   const struct timeline_task *at_sample,
			   const struct timeline_task *at_end, uint64_t *w, uint32_t *tgid);

/* The drain thread publishes its counters (after a pass); any thread
 * reads the last ones published. */
void perf_python_publish_stats(struct perf_python *pp);
void perf_python_get_stats(struct perf_python *pp, struct perf_python_stats *out);

#endif /* OPVM_PERF_PYTHON_H */
