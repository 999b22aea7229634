// SPDX-License-Identifier: MIT
/*
 * Exports of a report, the part they share: the string -> index map and
 * the folded stacks ("guest;process;image;symbol"), which the formats
 * build on.  One file per format, each a struct export_ops in export.c's
 * registry: export-folded.c, export-pprof.c (gzip'd profile.proto through
 * protobuf-c and zlib), export-speedscope.c and export-html.c (a
 * self-contained flame graph, also differential: widths from the new
 * profile, red for growth and blue for shrink against a baseline, as in
 * Brendan Gregg's differential flame graphs).
 *
 * Without call chains in the sample files a "stack" is the attribution
 * path guest -> process -> image -> symbol: that is what the folded lines
 * and the flame graph show, and what pprof gets as labels (guest, process,
 * tgid, tid) on one location per symbol.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "events/events.h"
#include "host/report/profile.pb-c.h"
#include "host/report/report.h"
#include "host/report/export-priv.h"
#include "host/collect/stats.h"
#include "lib/arith.h"
#include "lib/hash.h"
#include "lib/text.h"

/* ---- a string -> index map (pprof's string table, functions, mappings) ----- */

void smap_free(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys ? m->keys[i] : NULL);
	free(m->keys);
	free(m->vals);
}

/* Index of key; *added says whether it is new (then its value is val). */
long smap_get(struct smap *m, const char *key, size_t val, int *added)
{
	size_t h;

	*added = 0;
	if ((m->nr + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		char **k = calloc(cap, sizeof(*k));
		size_t *v = calloc(cap, sizeof(*v));

		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->keys[i])
				continue;
			for (h = hash_str(m->keys[i]) & (cap - 1); k[h]; h = (h + 1) & (cap - 1))
				;
			k[h] = m->keys[i];
			v[h] = m->vals[i];
		}
		free(m->keys);
		free(m->vals);
		m->keys = k;
		m->vals = v;
		m->cap = cap;
	}
	for (h = hash_str(key) & (m->cap - 1); m->keys[h]; h = (h + 1) & (m->cap - 1))
		if (!strcmp(m->keys[h], key))
			return (long)m->vals[h];
	m->keys[h] = strdup(key);
	if (!m->keys[h])
		return -ENOMEM;
	m->vals[h] = val;
	m->nr++;
	*added = 1;
	return (long)val;
}

/* ---- folded --------------------------------------------------------------------- */

/* A frame for folded stacks: ';' separates frames and '\n' lines; names
 * from guests are escaped (text_escape()). */
static void frame(FILE *f, const char *raw)
{
	char buf[1024];

	for (const char *s = text_escape(buf, sizeof(buf), raw); *s; s++)
		fputc(*s == ';' ? ':' : *s, f);
}

void export_process_name(const struct report_row *row, char *out, size_t len)
{
	if (row->tgid >= 0)
		snprintf(out, len, "%s[%" PRId64 "]", report_basename(row->app), row->tgid);
	else
		snprintf(out, len, "%s", report_basename(row->app));
}

int folded_cmp(const void *a, const void *b)
{
	return strcmp(((const struct folded_line *)a)->stack,
		      ((const struct folded_line *)b)->stack);
}

/* The row's "guest;process;image;symbol" in a new string, or NULL. */
char *folded_stack(const struct report_row *row)
{
	char proc[512], *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	export_process_name(row, proc, sizeof(proc));
	frame(m, row->guest);
	fputc(';', m);
	frame(m, proc);
	fputc(';', m);
	frame(m, report_basename(row->image));
	fputc(';', m);
	if (row->symbol)
		frame(m, row->symbol);
	else
		fputs("[unknown]", m);
	if (fclose(m) || !buf) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* A stack frame's name in folded stacks and the flame graph: its symbol,
 * else its image in brackets, as perf's folded output has it. */
const char *export_frame_name(const struct report_frame *f, char *buf, size_t len)
{
	if (f->symbol)
		return f->symbol;
	snprintf(buf, len, "[%s]", report_basename(f->image));
	return buf;
}

/* The stack's "guest;process;root;...;leaf" in a new string, or NULL. */
char *folded_chain(const struct report_stack *st)
{
	char *buf = NULL, name[1024];
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	frame(m, st->guest);
	fputc(';', m);
	frame(m, report_basename(st->app));
	for (unsigned i = st->nr; i-- > 0;) {
		fputc(';', m);
		frame(m, export_frame_name(&st->frames[i], name, sizeof(name)));
	}
	if (fclose(m) || !buf) {
		free(buf);
		return NULL;
	}
	return buf;
}
