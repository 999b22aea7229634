// SPDX-License-Identifier: MIT
/*
 * The folded format (host/report/report.h: export_folded_ops): one
 * "guest;process;image;symbol count" line per stack, the input of
 * flamegraph.pl and of most flame graph tools.  With call chains (-g) the
 * chains are the stacks; without, the attribution path is.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/report/export-priv.h"
#include "host/report/report.h"
#include "lib/arith.h"

/* Sorted by stack, one line per stack: tools that draw lines in file
 * order (speedscope's "left heavy" aside) then keep a stack in one block,
 * and rows that differ only in what folded does not show (thread, cpu)
 * are merged. */
int report_export_folded(FILE *f, const struct report *r)
{
	struct folded_line *v = calloc(r->nr_rows + r->nr_stacks + 1, sizeof(*v));
	size_t n = 0;
	int ret = -ENOMEM;

	if (!v)
		return -ENOMEM;
	/* with call chains (-g), the stacks are the lines */
	for (size_t i = 0; i < r->nr_stacks; i++) {
		v[n].stack = folded_chain(&r->stacks[i]);
		if (!v[n].stack)
			goto out;
		v[n++].samples = r->stacks[i].samples;
	}
	for (size_t i = 0; i < r->nr_rows && !r->stack_guests; i++) {
		if (!r->rows[i].samples)
			continue;
		v[n].stack = folded_stack(&r->rows[i]);
		if (!v[n].stack)
			goto out;
		v[n++].samples = r->rows[i].samples;
	}
	qsort(v, n, sizeof(*v), folded_cmp);
	for (size_t i = 0; i < n; i++) {
		uint64_t sum = v[i].samples;

		while (i + 1 < n && !strcmp(v[i].stack, v[i + 1].stack))
			sum = arith_sat_add(sum, v[++i].samples);
		/* folded counts are plain numbers: a saturated one stays the cap */
		fprintf(f, "%s %" PRIu64 "\n", v[i].stack, sum);
	}
	ret = ferror(f) ? -EIO : 0;
out:
	for (size_t i = 0; i < n; i++)
		free(v[i].stack);
	free(v);
	return ret;
}

static int folded_write(FILE *f, const struct export_in *in)
{
	return report_export_folded(f, in->r);
}

const struct export_ops export_folded_ops = {
	.name = "folded",
	.ext = ".folded",
	.help = "folded: guest;process;image;symbol count (flamegraph.pl)",
	.flags = EXPORT_TEXT,
	.write = folded_write,
};
