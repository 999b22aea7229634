/* SPDX-License-Identifier: MIT */
/*
 * A runtime's jitdump read into the perf map builder (symbols/pmbuild.h):
 * the format's constants, what a read counts, and the reader that
 * symbols/perfmap.c calls.  The format and its hostile cases are told in
 * symbols/perfmap.h, the face users include (it includes this file).
 */
#ifndef OPVM_JITDUMP_H
#define OPVM_JITDUMP_H

#include <stddef.h>
#include <stdint.h>

#define JITDUMP_MAGIC		0x4A695444u	/* "JiTD" */
#define JITDUMP_VERSION		1
#define JITDUMP_MAX_HEADER	4096	/* a header's total_size at most */

struct jitdump_stats {
	uint64_t records;	/* complete records read */
	uint64_t loads, moves;	/* taken */
	uint64_t skipped;	/* of other kinds: debug info, unwinding info,
				 * close, and ids the spec does not define */
	uint64_t unknown;	/* ... of which: ids the spec does not define */
	uint64_t bad;		/* loads and moves too short, names
				 * unterminated or too long */
	uint64_t bad_range;	/* empty, wrapping, past the user half, huge */
	uint64_t capped;	/* past PERFMAP_MAX_ENTRIES, or the file past
				 * PERFMAP_MAX_FILE */
	uint64_t unmatched;	/* moves of no loaded code_index */
	uint64_t fixed_names;	/* names with bytes made '?' */
	uint64_t code_bytes;	/* code bytes of the loads taken */
	uint8_t bad_header;	/* 1: not a jitdump this host reads: nothing */
	uint8_t bad_size;	/* 1: a record smaller than its header: the
				 * rest is not read */
	uint8_t partial;	/* 1: a last record not yet whole */
};

struct pmbuild;

/* A jitdump's len bytes (kept by the caller as long as the map) into b,
 * counted in st: 0 or -ENOMEM.  For symbols/perfmap.c: users read dumps
 * through perfmap_parse_jitdump() and perfmap_load(). */
int jitdump_take(struct pmbuild *b, const uint8_t *buf, size_t len, struct jitdump_stats *st);

#endif /* OPVM_JITDUMP_H */
