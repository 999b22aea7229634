/* SPDX-License-Identifier: MIT */
/*
 * A JIT runtime's perf map (perf's jit interface, /tmp/perf-PID.map in the
 * guest, fetched by the collector into the session: host/collect/fetch.h):
 * text lines "START SIZE name", START and SIZE in hex with or without 0x,
 * the name the rest of the line.  Runtimes append as they compile, and
 * reuse addresses when they free code: for a range named by several lines
 * the latest line wins (the code that lives there last; a sample file has
 * no time to tell which was there when).
 *
 * The text comes from a guest process: hostile.  Lines longer than
 * PERFMAP_MAX_LINE, ranges that wrap, are empty, end above the user half
 * or are larger than PERFMAP_MAX_RANGE, and lines past PERFMAP_MAX_ENTRIES
 * are refused and counted; bytes of a name that are controls or not UTF-8
 * become '?' (counted).  A last line without its newline is the runtime
 * still writing it: left for the next read, not refused.
 */
#ifndef OPVM_PERFMAP_H
#define OPVM_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/elfimage.h"

#define PERFMAP_MAX_LINE	4096
#define PERFMAP_MAX_RANGE	((uint64_t)1 << 30)	/* one JIT function */
#define PERFMAP_MAX_ENTRIES	((size_t)1 << 21)
/* Largest map read (the collector stores no more: FETCH_PERFMAP_MAX). */
#define PERFMAP_MAX_FILE	((size_t)64 << 20)

struct perfmap_stats {
	uint64_t lines;		/* complete lines read */
	uint64_t entries;	/* taken */
	uint64_t bad;		/* not "START SIZE name" */
	uint64_t long_lines;	/* over PERFMAP_MAX_LINE */
	uint64_t bad_range;	/* empty, wrapping, past the user half, huge */
	uint64_t capped;	/* past PERFMAP_MAX_ENTRIES */
	uint64_t fixed_names;	/* names with bytes made '?' */
	uint64_t overlapped;	/* entries a later one covered, in part or whole */
	uint64_t hidden;	/* ... of them wholly: no address left */
	uint64_t partial;	/* 1: a last line without its newline */
};

struct perfmap;

/* Parses len bytes of map text (not NUL-terminated).  NULL and errno
 * (ENOMEM) on failure; a text with no valid line makes an empty map. */
struct perfmap *perfmap_parse(const char *text, size_t len);
/* Reads the regular file name under dfd (not a link), at most
 * PERFMAP_MAX_FILE bytes of it (the rest counted as capped lines' worth:
 * st.capped += 1).  NULL and errno on failure. */
struct perfmap *perfmap_open(int dfd, const char *name);
void perfmap_free(struct perfmap *pm);	/* NULL-safe */

/* The symbols, sorted by address, none overlapping: each entry's part of
 * the address space that no later entry took (an entry split by a later
 * one shows as several symbols of one name). */
size_t perfmap_nr(const struct perfmap *pm);
const struct elfsym *perfmap_sym(const struct perfmap *pm, size_t i);
/* Index of the symbol containing addr, or -1. */
long perfmap_lookup(const struct perfmap *pm, uint64_t addr);
const struct perfmap_stats *perfmap_stats(const struct perfmap *pm);

#endif /* OPVM_PERFMAP_H */
