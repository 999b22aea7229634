// SPDX-License-Identifier: MIT
/*
 * Call-graph output from the report's stacks (host/report/report.h):
 * `opvm report --callgraph` in opreport -c's layout (the JSON report's
 * "stacks" are in report-json.c).
 *
 * For each function F (image + symbol; an unresolved frame is its image):
 *   self     samples whose leaf is F
 *   total    samples with F anywhere on the stack (once per stack)
 *   callers  the frame above F's first appearance, with those samples
 *   callees  the frame below it (toward the leaf), with theirs
 * Blocks go by self samples, callers above F and callees below it, indented,
 * their percentages of F's total, as opreport -c prints them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/stats.h"
#include "host/report/report.h"
#include "lib/arith.h"

struct cg_edge {
	struct cg_node *to;
	uint64_t samples;
};

struct cg_node {
	const char *image, *symbol;	/* interned / the resolver's */
	uint64_t self, total;
	size_t seen;			/* stack index + 1 last counted in */
	struct cg_edge *callers, *callees;
	size_t nr_callers, nr_callees;
};

struct cg {
	struct cg_node **v;		/* open addressing by (image, symbol) */
	size_t cap, nr;
	struct cg_node **order;
};

static size_t node_hash(const char *image, const char *symbol, size_t cap)
{
	uint64_t h = (uintptr_t)image * 0x9e3779b97f4a7c15ull ^ (uintptr_t)symbol;

	return (size_t)((h ^ h >> 29) * 0xbf58476d1ce4e5b9ull >> 17) & (cap - 1);
}

static struct cg_node *node_get(struct cg *g, const struct report_frame *f)
{
	const char *sym = f->symbol;
	size_t h;

	if ((g->nr + 1) * 2 > g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 1024;
		struct cg_node **v = calloc(cap, sizeof(*v));

		if (!v)
			return NULL;
		for (size_t i = 0; i < g->cap; i++) {
			if (!g->v[i])
				continue;
			for (h = node_hash(g->v[i]->image, g->v[i]->symbol, cap); v[h];
			     h = (h + 1) & (cap - 1))
				;
			v[h] = g->v[i];
		}
		free(g->v);
		g->v = v;
		g->cap = cap;
	}
	for (h = node_hash(f->image, sym, g->cap); g->v[h]; h = (h + 1) & (g->cap - 1))
		if (g->v[h]->image == f->image && g->v[h]->symbol == sym)
			return g->v[h];
	g->v[h] = calloc(1, sizeof(**g->v));
	if (g->v[h]) {
		g->v[h]->image = f->image;
		g->v[h]->symbol = sym;
		g->nr++;
	}
	return g->v[h];
}

static int edge_add(struct cg_edge **e, size_t *n, struct cg_node *to, uint64_t samples)
{
	struct cg_edge *ne;

	for (size_t i = 0; i < *n; i++)
		if ((*e)[i].to == to) {
			(*e)[i].samples = arith_sat_add((*e)[i].samples, samples);
			return 0;
		}
	ne = realloc(*e, (*n + 1) * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	*e = ne;
	ne[(*n)++] = (struct cg_edge){ to, samples };
	return 0;
}

/* One stack into the graph; k is its index. */
static int cg_stack(struct cg *g, const struct report_stack *st, size_t k)
{
	struct cg_node *n[STORE_STACKS_MAX_FRAMES];

	for (unsigned i = 0; i < st->nr; i++)
		if (!(n[i] = node_get(g, &st->frames[i])))
			return -ENOMEM;
	n[0]->self = arith_sat_add(n[0]->self, st->samples);
	for (unsigned i = 0; i < st->nr; i++) {
		if (n[i]->seen == k + 1)
			continue;	/* recursion: F's first appearance only */
		n[i]->seen = k + 1;
		n[i]->total = arith_sat_add(n[i]->total, st->samples);
		if (i + 1 < st->nr &&
		    edge_add(&n[i]->callers, &n[i]->nr_callers, n[i + 1], st->samples))
			return -ENOMEM;
		if (i > 0 && edge_add(&n[i]->callees, &n[i]->nr_callees, n[i - 1], st->samples))
			return -ENOMEM;
	}
	return 0;
}

static int by_self(const void *a, const void *b)
{
	const struct cg_node *x = *(struct cg_node *const *)a, *y = *(struct cg_node *const *)b;

	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return strcmp(x->symbol ? x->symbol : x->image, y->symbol ? y->symbol : y->image);
}

static int by_samples(const void *a, const void *b)
{
	const struct cg_edge *x = a, *y = b;

	return x->samples == y->samples ? by_self(&x->to, &y->to) :
	       x->samples < y->samples ? 1 : -1;
}

static void cg_free(struct cg *g)
{
	for (size_t i = 0; i < g->cap; i++) {
		if (!g->v[i])
			continue;
		free(g->v[i]->callers);
		free(g->v[i]->callees);
		free(g->v[i]);
	}
	free(g->v);
	free(g->order);
}

static int cg_build(struct cg *g, const struct report *r)
{
	size_t k = 0;

	for (size_t i = 0; i < r->nr_stacks; i++)
		if (cg_stack(g, &r->stacks[i], i))
			return -ENOMEM;
	g->order = malloc((g->nr + 1) * sizeof(*g->order));
	if (!g->order)
		return -ENOMEM;
	for (size_t i = 0; i < g->cap; i++) {
		if (!g->v[i])
			continue;
		g->order[k++] = g->v[i];
		if (g->v[i]->nr_callers)	/* never qsort(NULL, 0): UBSan */
			qsort(g->v[i]->callers, g->v[i]->nr_callers, sizeof(struct cg_edge),
			      by_samples);
		if (g->v[i]->nr_callees)
			qsort(g->v[i]->callees, g->v[i]->nr_callees, sizeof(struct cg_edge),
			      by_samples);
	}
	qsort(g->order, k, sizeof(*g->order), by_self);
	return 0;
}

/* One line: indent 2 for callers and callees, name cut to fit. */
static void cg_line(FILE *f, const struct cg_node *n, uint64_t samples, double pct, int indent,
		    int width, const char *tag)
{
	char cnt[OPVM_COUNT_BUF], name[1024];
	int room = width - 2 - 9 - 9 - 17 - (int)strlen(tag);

	snprintf(name, sizeof(name), "%s", n->symbol ? n->symbol : NO_SYMBOLS);
	if (room < 8)
		room = 8;
	fprintf(f, "%*s%-*s %7.2f%% %-16.16s %.*s%s\n", indent, "", 9 - indent,
		stats_fmt_count(samples, cnt), pct, report_basename(n->image), room, name, tag);
}

int report_print_callgraph(FILE *f, const struct report *r, const struct report_print_opts *po)
{
	struct cg g = { 0 };
	char tot[OPVM_COUNT_BUF];
	int width = po && po->width ? po->width : 80;
	double thr = po ? po->threshold : 0;

	if (cg_build(&g, r)) {
		cg_free(&g);
		return -ENOMEM;
	}
	fprintf(f, "call graph: %s samples in %zu stacks; callers above each function,\n"
		"callees below, their %% of the function's samples with its callees\n\n",
		stats_fmt_count(r->stacks_total, tot), r->nr_stacks);
	fprintf(f, "%-9s %-8s %-16s %s\n", "samples", "%", "image name", "symbol name");
	for (size_t i = 0; i < g.nr; i++) {
		const struct cg_node *n = g.order[i];
		double self = r->stacks_total ? 100.0 * (double)n->self / (double)r->stacks_total : 0;

		if (!n->self || self < thr)
			continue;
		fprintf(f, "%.*s\n", width - 1, "-----------------------------------------------"
			"-------------------------------------------------------------------");
		for (size_t j = n->nr_callers; j-- > 0;)
			cg_line(f, n->callers[j].to, n->callers[j].samples,
				100.0 * (double)n->callers[j].samples / (double)n->total, 2, width, "");
		cg_line(f, n, n->self, self, 0, width, n->total > n->self ? "  [self]" : "");
		for (size_t j = 0; j < n->nr_callees; j++)
			cg_line(f, n->callees[j].to, n->callees[j].samples,
				100.0 * (double)n->callees[j].samples / (double)n->total, 2, width, "");
	}
	cg_free(&g);
	return ferror(f) ? -EIO : 0;
}
