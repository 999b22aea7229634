/* SPDX-License-Identifier: MIT */
/*
 * What the perf map's builder (symbols/perfmap.c) and the jitdump reader
 * (symbols/jitdump.c) share: entries in the order they were taken, a later
 * one winning where they overlap.  Not for use outside symbols/perfmap.c
 * and symbols/jitdump.c.
 */
#ifndef OPVM_PERFMAP_PRIV_H
#define OPVM_PERFMAP_PRIV_H

#include "symbols/perfmap.h"

struct pment {
	uint64_t start, end;
	size_t name;		/* offset in names */
	size_t seq;		/* order taken: later wins */
	uint64_t painted;	/* bytes it kept */
	const uint8_t *code;	/* its code bytes (jitdump), or NULL */
};

struct pmbuild {
	struct perfmap *pm;
	struct pment *e;
	size_t nr, cap;
	size_t nlen, ncap;
};

/* 1 for a range an entry may have: not empty, not wrapping, inside the
 * user half, at most PERFMAP_MAX_RANGE. */
int pmbuild_range_ok(uint64_t start, uint64_t size);

enum { PMB_TAKEN = 0, PMB_FIXED = 1, PMB_CAPPED = 2 };
/* Takes the entry [start, start + size) (a range pmbuild_range_ok()
 * passed), named by n bytes of name (controls and bytes that are not
 * UTF-8 become '?': PMB_FIXED), code its size bytes or NULL: PMB_TAKEN,
 * PMB_FIXED, PMB_CAPPED (past PERFMAP_MAX_ENTRIES, not taken) or
 * -ENOMEM. */
int pmbuild_add(struct pmbuild *b, uint64_t start, uint64_t size, const char *name, size_t n,
		const uint8_t *code);

/* A jitdump's len bytes (kept by the caller as long as the map) into b,
 * counted in st: 0 or -ENOMEM. */
int jitdump_take(struct pmbuild *b, const uint8_t *buf, size_t len, struct jitdump_stats *st);

#endif /* OPVM_PERFMAP_PRIV_H */
