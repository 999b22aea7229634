// SPDX-License-Identifier: MIT
/*
 * What the export formats share (host/report/report-export.c): the string
 * -> index map and the folded stack lines (export-folded.c writes them,
 * the other formats build on them).  Not for use outside
 * host/report/.
 */
#ifndef OPVM_EXPORT_PRIV_H
#define OPVM_EXPORT_PRIV_H

#include <stddef.h>

#include "host/report/report.h"

struct smap {
	char **keys;
	size_t *vals;
	size_t cap, nr;
};

struct folded_line {
	char *stack;
	uint64_t samples;
	const struct report_row *row;
};

void smap_free(struct smap *m);
long smap_get(struct smap *m, const char *key, size_t val, int *added);
void export_process_name(const struct report_row *row, char *out, size_t len);
int folded_cmp(const void *a, const void *b);
char *folded_stack(const struct report_row *row);
/* The chain's "guest;process;root;...;leaf" in a new string, or NULL. */
char *folded_chain(const struct report_stack *st);
const char *export_frame_name(const struct report_frame *f, char *buf, size_t len);

#endif /* OPVM_EXPORT_PRIV_H */
