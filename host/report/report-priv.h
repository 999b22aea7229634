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

#include "host/report/report.h"

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

#endif /* OPVM_REPORT_PRIV_H */
