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

struct sfile_reader;

struct strpool {
	const char **slots;
	size_t cap, nr;
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
 * Sample files read and counted per symbol on worker threads
 * (report-walk.c) while the caller looks up their images (the symbol
 * resolver is not thread-safe: only lookups, read-only once symres_image()
 * returned, run on the workers) and merges the counts into rows.  Jobs are
 * resolved and merged in the order they were pushed, so the rows come out
 * as they would on one thread.
 */
struct walk_job {
	/* set by the caller before walk_push_open() */
	const char *path;		/* the sample file */
	size_t entry;			/* the caller's */
	/* after walk_opened(): the reader (NULL: the file did not open) */
	struct sfile_reader *sr;
	/* set by the caller before walk_resolved() */
	struct simage *img;		/* only looked up in by the workers */
	size_t nsyms;
	struct report_guest *guest;	/* the caller's */
	struct report_row key;		/* the caller's */
	int skip;			/* the caller's: nothing to merge */
	/* the counts, after walk_oldest() (when resolved with count) */
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
 * caller then does every job itself).  NULL when out of memory. */
struct walk *walk_new(void);
/* Workers of the next walk_new(): n (tests), or -1 for one per processor
 * but one. */
void walk_set_threads(int n);
/* Stops the workers, closes the readers of jobs not popped. */
void walk_free(struct walk *w);
/* The slot for the next job (zeroed but for its count buffers), or NULL
 * when every slot is pending. */
struct walk_job *walk_slot(struct walk *w);
/* Publishes the slot walk_slot() gave: its sample file is to be opened. */
void walk_push_open(struct walk *w);
/* The oldest job not yet resolved, its file opened; NULL when there is
 * none, or (wait 0) when it is not opened yet. */
struct walk_job *walk_opened(struct walk *w, int wait);
/* That job resolved; count: count its file per symbol. */
void walk_resolved(struct walk *w, int count);
/* The oldest resolved job, counted; NULL when there is none, or (wait 0)
 * when it is not counted yet. */
struct walk_job *walk_oldest(struct walk *w, int wait);
/* Frees the oldest job's slot (its reader is the caller's to close). */
void walk_pop(struct walk *w);

#endif /* OPVM_REPORT_PRIV_H */
