/* SPDX-License-Identifier: MIT */
/*
 * Which process's executable mapping holds a user address, for samples
 * that carry no CR3 (the perf sampler: host perf reports the guest's RIP
 * and its mode, nothing else).  ASLR puts each process's executable
 * mappings at its own addresses, so an address inside the mappings of
 * exactly one process names that process, its binary and the offset in it.
 * Where several processes map the address (a forked child, a non-PIE
 * executable run twice, a guest that lies) the answer is "ambiguous", never
 * a guess; where none does, "none".  An ambiguous address that every one
 * of those mappings maps to the same file at the same offset (forked
 * workers of one server, the same non-PIE program twice) still names the
 * binary and offset, not the process.
 *
 * The index is an interval index over every mapping of the guest-state
 * model (host/collect/gstate.h: the mappings opvm.ko or introspection
 * reported, which are the executable ones): the address line cut at every
 * mapping's start and end into elementary segments, each with how many
 * mappings cover it and, when one does, which.  Built in O(n log n) for n
 * mappings, looked up in O(log n); at most max_maps mappings (beyond that
 * the index refuses to answer rather than answer from a part).
 *
 * Pointers into the model: an index is valid for the model's generation it
 * was built at (gstate_generation()) and must be rebuilt after any mutator.
 * Not thread-safe (the collector's thread).
 */
#ifndef OPVM_EXECMAP_H
#define OPVM_EXECMAP_H

#include <stddef.h>
#include <stdint.h>

#include "host/collect/gstate.h"

struct execmap;

/* Mappings an index holds at most by default (a guest of 4096 processes
 * with 32 executable mappings each): 144 bytes each, 18 MiB of index. */
#define EXECMAP_DEFAULT_MAX	((size_t)1 << 17)

enum execmap_answer {
	EXECMAP_NONE = 0,	/* no process maps the address */
	EXECMAP_ONE = 1,	/* exactly one: *p and *m say which */
	EXECMAP_MANY = 2,	/* two or more mappings of processes hold it;
				 * *m one of them when all map the same file
				 * at the same offset there, else NULL */
	EXECMAP_OFF = 3,	/* the index is not built (over its cap) */
};

struct execmap_stats {
	uint64_t builds;	/* times built */
	uint64_t mappings;	/* mappings in the last build */
	uint64_t segments;	/* its elementary segments */
	uint64_t over_cap;	/* builds refused: more than max_maps */
};

/* max_maps 0: EXECMAP_DEFAULT_MAX.  NULL and errno on failure. */
struct execmap *execmap_new(size_t max_maps);
void execmap_free(struct execmap *x);	/* NULL-safe */

/*
 * Rebuilds the index from gs's mappings.  A process with an address space
 * (cr3) but no mappings of its own is taken to be a copy of its parent's
 * (a forked child the source has not described), as attribution does: the
 * parent's mappings then count for both, so their addresses are ambiguous.
 * Returns 0, -E2BIG (more than max_maps: every lookup says EXECMAP_OFF until
 * a build succeeds) or -ENOMEM (the same).
 */
int execmap_build(struct execmap *x, const struct gstate *gs);

/* What holds ip; on EXECMAP_ONE, *p and *m, on EXECMAP_MANY *m (NULL or
 * the binary all of them map there; *p NULL), valid until gs changes. */
enum execmap_answer execmap_lookup(const struct execmap *x, uint64_t ip,
				   const struct gstate_process **p,
				   const struct gstate_mapping **m);

void execmap_get_stats(const struct execmap *x, struct execmap_stats *out);

#endif /* OPVM_EXECMAP_H */
