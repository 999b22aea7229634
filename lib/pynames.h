/* SPDX-License-Identifier: MIT */
/*
 * Python frame names on their way from a sampler to the collector: the
 * sampling thread interns each frame it read (qualified name, file, first
 * line, line) in one table per guest and pushes the frame's index at the
 * end of the sample's chain, counted in its nr_py (lib/sample.h); the
 * collector reads the names of the indices it meets and files them
 * (host/collect/store.h, "Python frames").
 *
 * One producer (the sampler's thread), one consumer (the collector's): an
 * entry is written whole before the count that covers it is published
 * (release), and never written again; the consumer reads the count
 * (acquire) and only entries below it.  No lock, no allocation after
 * pynames_new() (a table of PYNAMES_MAX entries, untouched pages stay
 * unresident).  A full table refuses new names and counts them: their
 * samples keep the frames that have an index.
 *
 * Names are guest bytes: stored NUL-terminated and cut to their fields,
 * never used as paths.
 */
#ifndef OPVM_PYNAMES_H
#define OPVM_PYNAMES_H

#include <stdatomic.h>
#include <stdint.h>

#define PYNAMES_MAX		16384	/* distinct frames per guest and session */
#define PYNAMES_NAME_MAX	128	/* bytes of a qualified name, NUL included */
#define PYNAMES_FILE_MAX	192	/* bytes of a file name, NUL included */

struct pyname {
	char name[PYNAMES_NAME_MAX];
	char file[PYNAMES_FILE_MAX];
	uint32_t first_line;		/* the function's (co_firstlineno); 0: not known */
	uint32_t line;			/* the sampled instruction's; 0: not known */
};

struct pynames;

struct pynames *pynames_new(void);	/* NULL and errno */
void pynames_free(struct pynames *t);	/* NULL-safe */

/* Producer: the index of this frame, added if new (name and file cut to
 * their fields).  0, or -ENOSPC (the table is full: counted). */
int pynames_intern(struct pynames *t, const char *name, const char *file, uint32_t first_line,
		   uint32_t line, uint32_t *idx);

/* Consumer: how many entries may be read; entry idx (< that count), or
 * NULL past it. */
uint32_t pynames_count(const struct pynames *t);
const struct pyname *pynames_get(const struct pynames *t, uint32_t idx);

/* Names refused because the table was full (either thread). */
uint64_t pynames_refused(const struct pynames *t);

#endif /* OPVM_PYNAMES_H */
