// SPDX-License-Identifier: MIT
/*
 * What the report model's files share: report.c (load, merge, sort),
 * report-sort.c (the sort itself), report-strings.c (the string pool) and
 * report-session.c (session.json).
 * Not for use outside host/report/.
 */
#ifndef OPVM_REPORT_PRIV_H
#define OPVM_REPORT_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "host/report/report.h"
#include "lib/strset.h"

struct sfile_reader;

struct strpool {
	struct strset set;	/* the interned strings, keyed by themselves */
	char **owned;		/* copies made by the pool */
	size_t nr_owned, cap_owned;
};

void strpool_free(struct strpool *p);
const char *strpool_intern(struct strpool *p, const char *s, int borrow);
void report_guest_load_meta(struct report_guest *g, const char *path);
/* rows[0..n) in report_sort()'s order (report-sort.c): 0, or -ENOMEM with
 * the rows as they were. */
int report_rows_sort(struct report_row *rows, size_t n, enum report_sort how);

/*
 * Sample files read, their images looked up and their samples counted per
 * symbol on worker threads (report-walk.c) while the caller merges the
 * counts into rows.  The images are looked up one at a time in list order
 * (the symbol resolver is not thread-safe; lookups in an image it returned
 * are read-only), and the jobs merged in list order, so the rows come out
 * as they would on one thread.
 */
struct walk_job {
	/* set by the caller before walk_push_open() */
	const char *path;		/* the sample file */
	size_t entry;			/* the caller's */
	struct report_guest *guest;	/* the caller's */
	struct report_row key;		/* the caller's */
	/* the reader (NULL: the file did not open); the walk's, valid
	 * until walk_pop() */
	struct sfile_reader *sr;
	struct sfile_reader *rd;	/* walk-private: the slot's reader,
					 * reopened for each of its files */
	/* set by the resolve function (walk_new()) */
	struct simage *img;
	size_t nsyms;
	int err;			/* its return */
	/* the counts (when img has symbols) */
	size_t *idx;			/* symbol index + 1 (0: none), in the
					 * order the file first touched them */
	uint64_t *cnt;
	size_t nr, cap;
	uint64_t total, outside;
	int bad;			/* a corrupt file: nothing counted */
	int nomem;
	int state;			/* walk-private */
};
struct walk;

/* A pool with a worker per processor but one (none on one processor: the
 * caller then does every job itself).  resolve(arg, j) sets j's img and
 * nsyms for its opened file (0 or -errno), one call at a time, in push
 * order.  NULL when out of memory. */
struct walk *walk_new(int (*resolve)(void *arg, struct walk_job *j), void *arg);
/* Workers of the next walk_new(): n (tests), or -1 for one per processor
 * but one. */
void walk_set_threads(int n);
/* Stops the workers, closes the slots' readers. */
void walk_free(struct walk *w);
/* The slot for the next job (zeroed but for its reader and count buffers), or NULL
 * when every slot is pending. */
struct walk_job *walk_slot(struct walk *w);
/* Publishes the slot walk_slot() gave: its sample file is to be read. */
void walk_push_open(struct walk *w);
/* The oldest pending job, done (the caller works on jobs meanwhile);
 * NULL when none is pending. */
struct walk_job *walk_oldest(struct walk *w);
/* Frees the oldest job's slot (its reader is the caller's to close). */
void walk_pop(struct walk *w);

#endif /* OPVM_REPORT_PRIV_H */
