// SPDX-License-Identifier: MIT
/*
 * The differential report (opvm report --diff): two sessions' rows
 * paired by their key, in text and in JSON.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/report/report.h"
#include "host/report/report-out.h"
#include "host/collect/stats.h"

struct dpair {
	const struct report_row *a, *b;
	double delta;		/* percent b - percent a */
};

static int strcmp_null_key(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (!a)
		return 1;
	if (!b)
		return -1;
	return strcmp(a, b);
}

static int row_key_cmp(const struct report_row *x, const struct report_row *y)
{
	int c;

	if ((c = strcmp(x->guest, y->guest)) || (c = strcmp(x->app, y->app)) ||
	    (c = strcmp(x->image, y->image)) || (c = strcmp_null_key(x->symbol, y->symbol)))
		return c;
	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return 0;
}

static int rowp_key_cmp(const void *pa, const void *pb)
{
	return row_key_cmp(*(const struct report_row *const *)pa,
			   *(const struct report_row *const *)pb);
}

static int dpair_cmp(const void *pa, const void *pb)
{
	const struct dpair *a = pa, *b = pb;
	uint64_t sa = a->b ? a->b->samples : 0, sb = b->b ? b->b->samples : 0;
	uint64_t ta = a->a ? a->a->samples : 0, tb = b->a ? b->a->samples : 0;

	if (sa != sb)
		return sa > sb ? -1 : 1;
	if (ta != tb)
		return ta > tb ? -1 : 1;
	return row_key_cmp(a->a ? a->a : a->b, b->a ? b->a : b->b);
}

/* Pairs rows of a and b with the same key (either side may be missing). */
static struct dpair *diff_pairs(const struct report *a, const struct report *b, size_t *nr)
{
	const struct report_row **va = malloc((a->nr_rows + 1) * sizeof(*va));
	const struct report_row **vb = malloc((b->nr_rows + 1) * sizeof(*vb));
	struct dpair *out = calloc(a->nr_rows + b->nr_rows + 1, sizeof(*out));
	size_t i = 0, j = 0, n = 0;

	if (!va || !vb || !out) {
		free(out);
		out = NULL;
		goto done;
	}
	for (size_t k = 0; k < a->nr_rows; k++)
		va[k] = &a->rows[k];
	for (size_t k = 0; k < b->nr_rows; k++)
		vb[k] = &b->rows[k];
	qsort(va, a->nr_rows, sizeof(*va), rowp_key_cmp);
	qsort(vb, b->nr_rows, sizeof(*vb), rowp_key_cmp);
	while (i < a->nr_rows || j < b->nr_rows) {
		int c = i >= a->nr_rows ? 1 : j >= b->nr_rows ? -1 : row_key_cmp(va[i], vb[j]);

		if (c < 0)
			out[n++] = (struct dpair){ .a = va[i++] };
		else if (c > 0)
			out[n++] = (struct dpair){ .b = vb[j++] };
		else
			out[n++] = (struct dpair){ .a = va[i++], .b = vb[j++] };
		out[n - 1].delta = (out[n - 1].b ? out[n - 1].b->percent : 0) -
				   (out[n - 1].a ? out[n - 1].a->percent : 0);
	}
	qsort(out, n, sizeof(*out), dpair_cmp);
	*nr = n;
done:
	free(va);
	free(vb);
	return out;
}

static int dpair_shown(const struct dpair *d, const struct report_print_opts *po)
{
	double m = d->a ? d->a->percent : 0;

	if (d->b && d->b->percent > m)
		m = d->b->percent;
	return !po || m >= po->threshold;
}

void report_print_diff(FILE *f, const struct report *a, const struct report *b,
		       const struct report_print_opts *po)
{
	int long_names = po ? po->long_names : 0;
	struct dpair *d;
	size_t n = 0;

	char ca[OPVM_COUNT_BUF], cb[OPVM_COUNT_BUF], be[REPORT_ESC_MAX], be2[REPORT_ESC_MAX];

	fprintf(f, "differential report: A = %s samples, B = %s samples of %s\n",
		stats_fmt_count(a->total, ca), stats_fmt_count(b->total, cb),
		report_esc(be, b->event));
	d = diff_pairs(a, b, &n);
	if (!d)
		return;
	fprintf(f, "%-8s %-8s %-8s %-8s %-8s %-16s %s\n", "samplesA", "%A", "samplesB",
		"%B", "diff%", "image name", "symbol name");
	for (size_t i = 0; i < n; i++) {
		const struct report_row *k = d[i].b ? d[i].b : d[i].a;
		char b1[256], b2[256];

		if (!dpair_shown(&d[i], po))
			continue;
		fprintf(f, "%-8s %-8.4f %-8s %-8.4f %+-8.4f %-16s %s\n",
			stats_fmt_count(d[i].a ? d[i].a->samples : 0, ca),
			d[i].a ? d[i].a->percent : 0.0,
			stats_fmt_count(d[i].b ? d[i].b->samples : 0, cb),
			d[i].b ? d[i].b->percent : 0.0,
			d[i].delta, report_fit(report_esc(be, report_disp(k->image, long_names)), 16, b1, sizeof(b1)),
			report_fit(report_esc(be2, k->symbol ? k->symbol : NO_SYMBOLS), 80 - 63, b2, sizeof(b2)));
	}
	free(d);
}

int report_print_diff_json(FILE *f, const struct report *a, const struct report *b,
			   const struct report_print_opts *po)
{
	json_t *o = report_json_header(b), *syms = json_array();
	struct dpair *d;
	size_t n = 0;

	d = diff_pairs(a, b, &n);
	if (!o || !syms || !d) {
		json_decref(o);
		json_decref(syms);
		free(d);
		return -ENOMEM;
	}
	json_object_set_new(o, "baseline_total_samples", report_json_count(a->total));
	for (size_t i = 0; i < n; i++) {
		const struct report_row *k = d[i].b ? d[i].b : d[i].a;
		json_t *row;

		if (!dpair_shown(&d[i], po))
			continue;
		row = report_json_row(k);
		if (!row)
			continue;
		json_object_set_new(row, "samples", report_json_count(d[i].b ? d[i].b->samples : 0));
		json_object_set_new(row, "percent", json_real(d[i].b ? report_json_pct(d[i].b->percent) : 0));
		json_object_set_new(row, "baseline_samples",
				    report_json_count(d[i].a ? d[i].a->samples : 0));
		json_object_set_new(row, "baseline_percent", json_real(d[i].a ? report_json_pct(d[i].a->percent) : 0));
		json_object_set_new(row, "delta_percent", json_real(report_json_pct(d[i].delta + 100.0) - 100.0));
		json_array_append_new(syms, row);
	}
	free(d);
	json_object_set_new(o, "symbols", syms);
	return report_json_dump(f, o);
}
