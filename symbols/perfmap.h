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
 *
 * A runtime's jitdump (perf's binary format, /tmp/jit-PID.dump; the spec
 * is tools/perf/Documentation/jitdump-specification.txt in the Linux tree)
 * reads into the same symbols (symbols/jitdump.c): each JIT_CODE_LOAD an
 * entry with its name, range and code bytes, each JIT_CODE_MOVE the
 * loaded function of its code_index again at its new address; records of
 * other kinds are skipped by their size.  Hostile as the map: a header
 * that is not version 1 of x86-64 in this byte order reads nothing; a
 * record smaller than its header ends the read; loads and moves too short
 * for their fields, names unterminated or over PERFMAP_MAX_LINE, and the
 * map's range rules refuse the record; every case counted
 * (struct jitdump_stats).  A map and a dump of one process read together
 * (perfmap_load()): the dump's entries after the map's lines, so that
 * where both name a range the dump's name (and code) holds.
 */
#ifndef OPVM_PERFMAP_H
#define OPVM_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/elfimage.h"

/* PERFMAP_MAX_LINE, PERFMAP_MAX_RANGE and PERFMAP_MAX_ENTRIES are the
 * builder's (symbols/pmbuild.h), that the jitdump reader shares; the
 * JITDUMP_* constants and struct jitdump_stats are symbols/jitdump.h's. */
#include "symbols/jitdump.h"
#include "symbols/pmbuild.h"

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
	struct jitdump_stats jd;	/* the jitdump's, when one was read */
};

struct perfmap;

/* Parses len bytes of map text (not NUL-terminated).  NULL and errno
 * (ENOMEM) on failure; a text with no valid line makes an empty map. */
struct perfmap *perfmap_parse(const char *text, size_t len);
/* Reads the regular file name under dfd (not a link), at most
 * PERFMAP_MAX_FILE bytes of it (the rest counted as capped lines' worth:
 * st.capped += 1).  NULL and errno on failure. */
struct perfmap *perfmap_open(int dfd, const char *name);
/* A jitdump's len bytes (copied) into a map: NULL and errno (ENOMEM). */
struct perfmap *perfmap_parse_jitdump(const uint8_t *buf, size_t len);
/* The process's perf map map_name and jitdump dump_name under dfd (either
 * NULL or absent), regular files and not links, PERFMAP_MAX_FILE bytes of
 * each at most, into one map.  NULL and errno: ENOENT when neither is
 * there, ENOMEM. */
struct perfmap *perfmap_load(int dfd, const char *map_name, const char *dump_name);
void perfmap_free(struct perfmap *pm);	/* NULL-safe */

/* The symbols, sorted by address, none overlapping: each entry's part of
 * the address space that no later entry took (an entry split by a later
 * one shows as several symbols of one name). */
size_t perfmap_nr(const struct perfmap *pm);
const struct elfsym *perfmap_sym(const struct perfmap *pm, size_t i);
/* Index of the symbol containing addr, or -1. */
long perfmap_lookup(const struct perfmap *pm, uint64_t addr);
/* Up to len of the code bytes at addr, of the symbol that holds it (a
 * jitdump's load): how many were copied, or -1 (no symbol, no code). */
long perfmap_code(const struct perfmap *pm, uint64_t addr, uint8_t *buf, size_t len);
const struct perfmap_stats *perfmap_stats(const struct perfmap *pm);

#endif /* OPVM_PERFMAP_H */
