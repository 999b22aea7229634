/* SPDX-License-Identifier: MIT */
/*
 * The builder that perf map lines (symbols/perfmap.c) and jitdump records
 * (symbols/jitdump.c) both feed: entries in the order they were taken, a
 * later one winning where they overlap, and the names they carry.  Its own
 * file so that both readers stand on it and neither on the other.  The
 * limits are public (symbols/perfmap.h includes this file for them); the
 * builder is not for use outside symbols/.
 */
#ifndef OPVM_PMBUILD_H
#define OPVM_PMBUILD_H

#include <stddef.h>
#include <stdint.h>

/* What a guest's map or dump may make the builder hold.  Public through
 * symbols/perfmap.h; here so that the readers need not include it. */
#define PERFMAP_MAX_LINE	4096	/* a map line, a dump's name */
#define PERFMAP_MAX_RANGE	((uint64_t)1 << 30)	/* one JIT function */
#define PERFMAP_MAX_ENTRIES	((size_t)1 << 21)

struct pment {
	uint64_t start, end;
	size_t name;		/* offset in names */
	size_t seq;		/* order taken: later wins */
	uint64_t painted;	/* bytes it kept */
	const uint8_t *code;	/* its code bytes (jitdump), or NULL */
};

/* Zeroed to start; e and names are malloc'd: the caller frees e, and
 * frees names or hands them on (entries point into them by offset). */
struct pmbuild {
	struct pment *e;
	size_t nr, cap;
	char *names;		/* each entry's name, NUL-terminated */
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

#endif /* OPVM_PMBUILD_H */
