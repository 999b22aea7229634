/* SPDX-License-Identifier: MIT */
/*
 * A guest's CPython processes seen from a sampler (docs/runtimes.md): the
 * set the collector publishes (vmm/sampler.h's struct sampler_python), and
 * per address space the interpreter's symbols and struct layout, found
 * once through its page tables (unwind/pyframes.h), then each sample's
 * Python frames read in the sampler's stop.
 *
 * Threads: pyguest_publish() runs on the collector's thread, everything
 * else on the one sampling thread; a publication is handed over with one
 * atomic pointer exchange, never a lock.
 */
#ifndef OPVM_VMM_PYGUEST_H
#define OPVM_VMM_PYGUEST_H

#include <stdint.h>

#include "unwind/pyframes.h"
#include "unwind/unwind.h"
#include "vmm/sampler.h"

struct pyguest;

struct pyguest_stats {
	uint64_t samples;		/* user samples in a Python address space */
	uint64_t with_frames;		/* ... that got Python frames */
	uint64_t no_tid;		/* ... whose thread was not known */
	uint64_t unresolved;		/* ... whose interpreter was not found */
	uint64_t resolved, resolve_failed; /* address spaces */
	uint64_t resolve_retries;	/* tries that found its symbols unreadable */
	uint64_t spaces;		/* the most CPython address spaces known at once */
	uint64_t cost_ns;		/* the sampling thread's CPU time in the reads */
	struct pyframes_stats fr;
};

struct pyguest *pyguest_new(void);	/* NULL and errno */
void pyguest_free(struct pyguest *pg);	/* NULL-safe */

/* The collector's thread: the current set (copied). */
void pyguest_publish(struct pyguest *pg, const struct sampler_python *set);

/* The sampling thread: takes the newest publication, if any. */
void pyguest_take(struct pyguest *pg);

/* How many CPython address spaces the sampling thread knows now. */
unsigned pyguest_nr(const struct pyguest *pg);

/* Is cr3 (normalised) a Python address space? */
int pyguest_is_python(const struct pyguest *pg, uint64_t cr3);

/* Guest pages one read of a chain may fetch through a struct
 * guestmem_view: frames, code objects, names, tables. */
#define PYGUEST_PAGES	64

/*
 * The sampling thread, in a stop: the Python frames of thread tid (0: not
 * known) of the address space cr3, read through m (that address space's
 * memory), into out[0..max).  Returns how many; 0 for an address space
 * that runs no CPython.  check: the guest keeps running (the perf
 * sampler, the gdbstub's read after its stop): the chain is read again
 * and what changed dropped.  When m reads through a struct guestmem_view
 * (guestmem_view_read), the view is emptied before that second read
 * (PYGUEST_PAGES again): it must see guest memory, not the first read's
 * copies of its pages.
 */
unsigned pyguest_read(struct pyguest *pg, const struct unwind_mem *m, uint64_t cr3, uint32_t tid,
		      struct pyframe *out, unsigned max, int check);

void pyguest_get_stats(const struct pyguest *pg, struct pyguest_stats *out);

/* The summary's line: "python: ..." (empty when no Python ran). */
void pyguest_describe(const struct pyguest *pg, char *buf, size_t len);

#endif /* OPVM_VMM_PYGUEST_H */
