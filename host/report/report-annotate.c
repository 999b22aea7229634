// SPDX-License-Identifier: MIT
/*
 * opannotate for guests: capstone disassembly of each sampled symbol with
 * samples per instruction, DWARF source lines with samples per line, or
 * both interleaved.
 *
 *   samples        % : address/line : instruction or source
 *
 * Percentages are of the report's total, as opannotate's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/report/report.h"
#include "host/collect/stats.h"
#include "lib/array.h"
#include "lib/arith.h"
#include "lib/text.h"
#include "lib/sort.h"
#include "symbols/disasm.h"

#define ANNOTATE_MAX_BYTES	(64u << 10)
#define SRC_MAX_LINES		200000
#define SRC_MAX_LINE_LEN	4096
#define ESC_MAX			1024	/* longest escaped name shown */

/* A source file's lines, read once per annotate call. */
struct srcfile {
	char *path;		/* as DWARF names it */
	char **lines;		/* NULL when the file was not found */
	size_t nr;
	char *from;		/* host file read, or why none was */
	int noted;		/* from shown */
	struct srcfile *next;
};

struct actx {
	FILE *f;
	const struct report *r;
	const struct report_row *row;
	struct symres *res;
	struct elfimage *elf;
	const struct annotate_opts *ao;
	struct srcfile *files;
	/* interleaving state */
	const char *cur_file;
	uint32_t cur_line;
	int have_lines;
};

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

static void src_free(struct srcfile *s)
{
	while (s) {
		struct srcfile *n = s->next;

		for (size_t i = 0; i < s->nr; i++)
			free(s->lines[i]);
		free(s->lines);
		free(s->path);
		free(s->from);
		free(s);
		s = n;
	}
}

static struct srcfile *src_get(struct actx *c, const char *path)
{
	struct srcfile *s;
	char *line = NULL, from[4096];
	size_t cap = 0, lcap = 0;
	ssize_t n;
	FILE *in;

	for (s = c->files; s; s = s->next)
		if (!strcmp(s->path, path))
			return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->path = strdup(path);
	if (!s->path) {
		free(s);
		return NULL;
	}
	s->next = c->files;
	c->files = s;
	in = symres_open_source(c->res, c->row->guest, path, from, sizeof(from));
	s->from = strdup(from);
	if (!in)
		return s;
	while (s->nr < SRC_MAX_LINES && (n = getline(&line, &lcap, in)) >= 0) {
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n > SRC_MAX_LINE_LEN)
			line[SRC_MAX_LINE_LEN] = '\0';
		if (ARRAY_GROW(s->lines, cap, s->nr + 1, 256))
			break;
		s->lines[s->nr] = strdup(line);
		if (!s->lines[s->nr])
			break;
		s->nr++;
	}
	free(line);
	fclose(in);
	if (!s->lines)
		s->lines = calloc(1, sizeof(*s->lines));	/* found but empty */
	return s;
}

/* Says once per file where its lines come from, or why they do not. */
static void src_note(struct actx *c, const char *file)
{
	struct srcfile *s = src_get(c, file);
	char b1[ESC_MAX], b2[ESC_MAX];

	if (!s || s->noted)
		return;
	s->noted = 1;
	/* the DWARF path is the guest's, the host path may hold anything */
	text_escape(b1, sizeof(b1), file);
	text_escape(b2, sizeof(b2), s->from ? s->from : s->lines ? "?" : "out of memory");
	if (s->lines)
		text_fprintf_wrapped(c->f, 20, "%8s %8s : (source %s: %s)", "", "", b1, b2);
	else
		text_fprintf_wrapped(c->f, 20, "%8s %8s : (source %s not found: %s; give "
				     "--guest-root or --source-dir)", "", "", b1, b2);
}

static const char *src_text(struct actx *c, const char *file, uint32_t line)
{
	struct srcfile *s = src_get(c, file);

	if (!s || !s->lines)
		return NULL;
	if (line == 0 || line > s->nr)
		return "";
	return s->lines[line - 1];
}

/* Samples at addresses in [lo, hi) of the row (addrs are sorted). */
static uint64_t samples_in(const struct report_row *row, uint64_t lo, uint64_t hi)
{
	uint64_t sum = 0;
	size_t a = SORT_LOWER(row->addrs, row->nr_addrs, addr, lo);

	for (; a < row->nr_addrs && row->addrs[a].addr < hi; a++)
		sum = arith_sat_add(sum, row->addrs[a].count);
	return sum;
}

static void print_count(FILE *f, uint64_t n, uint64_t total)
{
	char cnt[OPVM_COUNT_BUF];

	if (n)
		fprintf(f, "%8s %8.4f : ", stats_fmt_count(n, cnt), pct(n, total));
	else
		fprintf(f, "%8s %8s : ", "", "");
}

/* ---- per-line sums ------------------------------------------------------------ */

struct lsum {
	const char *file;
	uint32_t line;
	uint64_t samples;
};

struct lsums {
	struct lsum *v;
	size_t nr, cap;
};

static struct lsum *lsum_get(struct lsums *ls, const char *file, uint32_t line)
{
	for (size_t i = 0; i < ls->nr; i++)
		if (ls->v[i].line == line && !strcmp(ls->v[i].file, file))
			return &ls->v[i];
	if (ARRAY_GROW(ls->v, ls->cap, ls->nr + 1, 64))
		return NULL;
	ls->v[ls->nr] = (struct lsum){ .file = file, .line = line };
	return &ls->v[ls->nr++];
}

static uint64_t lsum_of(const struct lsums *ls, const char *file, uint32_t line)
{
	for (size_t i = 0; i < ls->nr; i++)
		if (ls->v[i].line == line && !strcmp(ls->v[i].file, file))
			return ls->v[i].samples;
	return 0;
}

/* Rows of the line table inside the symbol: which lines it spans. */
struct span_ctx {
	struct lsums *ls;
	int err;
};

static int span_cb(const struct elfline *l, void *arg)
{
	struct span_ctx *s = arg;

	if (!lsum_get(s->ls, l->file, l->line))
		s->err = -ENOMEM;
	return s->err;
}

static int collect_lines(struct actx *c, struct lsums *ls)
{
	const struct report_row *row = c->row;
	struct span_ctx s = { .ls = ls };

	if (elfimage_lines(c->elf, row->sym_addr, row->sym_addr + row->sym_size, span_cb, &s) < 0)
		return -ENOENT;
	if (s.err)
		return s.err;
	for (size_t i = 0; i < row->nr_addrs; i++) {
		struct elfline l;
		struct lsum *e;

		if (elfimage_line(c->elf, row->addrs[i].addr, &l))
			continue;
		e = lsum_get(ls, l.file, l.line);
		if (!e)
			return -ENOMEM;
		e->samples = arith_sat_add(e->samples, row->addrs[i].count);
	}
	return 0;
}

/* Source only: each file's lines from the first to the last the symbol
 * spans, with samples. */
static void print_source(struct actx *c, struct lsums *ls)
{
	char b[ESC_MAX];
	const char *done[64];
	size_t nr_done = 0;

	for (size_t i = 0; i < ls->nr; i++) {
		const char *file = ls->v[i].file;
		uint32_t lo = UINT32_MAX, hi = 0;
		int seen = 0;

		for (size_t k = 0; k < nr_done; k++)
			if (!strcmp(done[k], file))
				seen = 1;
		if (seen || nr_done == 64)
			continue;
		done[nr_done++] = file;
		for (size_t j = 0; j < ls->nr; j++) {
			if (strcmp(ls->v[j].file, file) || !ls->v[j].line)
				continue;
			if (ls->v[j].line < lo)
				lo = ls->v[j].line;
			if (ls->v[j].line > hi)
				hi = ls->v[j].line;
		}
		if (lo > hi)
			continue;
		fprintf(c->f, "%8s %8s : %s\n", "", "", text_escape(b, sizeof(b), file));
		src_note(c, file);
		for (uint32_t line = lo; line <= hi; line++) {
			const char *t = src_text(c, file, line);
			uint64_t n = lsum_of(ls, file, line);

			if (!t && !n)
				continue;
			print_count(c->f, n, c->r->total);
			fprintf(c->f, "%6u  %s\n", line, t ? t : "");
		}
	}
}

/* ---- assembly ------------------------------------------------------------------- */

struct insn_ctx {
	struct actx *c;
	struct lsums *ls;
};

static int insn_cb(const struct disasm_insn *insn, void *arg)
{
	struct insn_ctx *ic = arg;
	struct actx *c = ic->c;
	uint64_t n = samples_in(c->row, insn->addr, insn->addr + insn->size);

	if (c->ao->source && c->have_lines) {
		struct elfline l;

		if (!elfimage_line(c->elf, insn->addr, &l) &&
		    (l.line != c->cur_line || !c->cur_file || strcmp(l.file, c->cur_file))) {
			char b[ESC_MAX];
			const char *t;

			src_note(c, l.file);
			t = src_text(c, l.file, l.line);

			c->cur_file = l.file;
			c->cur_line = l.line;
			print_count(c->f, lsum_of(ic->ls, l.file, l.line), c->r->total);
			fprintf(c->f, "%s:%u  %s\n",
				text_escape(b, sizeof(b), report_basename(l.file)), l.line,
				t ? t : "");
		}
	}
	print_count(c->f, n, c->r->total);
	fprintf(c->f, "  %8" PRIx64 ":  %s\n", insn->addr, insn->text);
	return 0;
}

/* The row's header comment: symbol, samples, share, image, app, guest. */
static void annotate_head(struct actx *c, const struct report_row *row)
{
	char b1[ESC_MAX], b2[ESC_MAX], b3[ESC_MAX], b4[ESC_MAX], cnt[OPVM_COUNT_BUF];

	text_escape(b1, sizeof(b1), row->symbol);
	text_escape(b2, sizeof(b2), row->image);
	text_escape(b3, sizeof(b3), row->app);
	text_escape(b4, sizeof(b4), row->guest);
	fputc('\n', c->f);
	/* an image that is its own application is named once */
	if (!strcmp(b2, b3))
		text_fprintf_wrapped(c->f, 3, "/* %s: %s samples, %.4f%%; %s, guest %s */",
				     b1, stats_fmt_count(row->samples, cnt), row->percent,
				     b2, b4);
	else
		text_fprintf_wrapped(c->f, 3, "/* %s: %s samples, %.4f%%; image %s, app "
				     "%s, guest %s */", b1,
				     stats_fmt_count(row->samples, cnt), row->percent,
				     b2, b3, b4);
}

/* The symbol's instructions, each with its samples (and lines, if any). */
static int annotate_asm(struct actx *c, struct disasm *d, const struct annotate_opts *ao,
			struct lsums *ls, char *why, size_t whylen)
{
	const struct report_row *row = c->row;
	size_t want = row->sym_size;
	uint8_t *buf;
	long got;
	char b[ESC_MAX];
	struct insn_ctx ic = { .c = c, .ls = ls };

	if (want > (ao->max_bytes ? ao->max_bytes : ANNOTATE_MAX_BYTES))
		want = ao->max_bytes ? ao->max_bytes : ANNOTATE_MAX_BYTES;
	buf = malloc(want ? want : 1);
	if (!buf)
		return -ENOMEM;
	got = c->elf ? elfimage_read(c->elf, row->sym_addr, buf, want) :
		       simage_jit_code(row->img, row->sym_addr, buf, want);
	if (got <= 0) {
		snprintf(why, whylen, "%s: no code bytes in %s at 0x%" PRIx64, row->symbol,
			 simage_path(row->img) ? simage_path(row->img) : row->image,
			 row->sym_addr);
		free(buf);
		return -ENOENT;
	}
	fprintf(c->f, "%8s %8s :  %016" PRIx64 " <%s>:\n", "", "", row->sym_addr,
		text_escape(b, sizeof(b), row->symbol));
	c->cur_file = NULL;
	c->cur_line = 0;
	disasm_range(d, buf, (size_t)got, row->sym_addr, insn_cb, &ic);
	if ((size_t)got < row->sym_size)
		fprintf(c->f, "%8s %8s :  ... (%" PRIu64 " more bytes not shown)\n", "", "",
			row->sym_size - (uint64_t)got);
	free(buf);
	return 0;
}

/* A JIT function: its instructions from its jitdump's code bytes, no
 * source lines (a jitdump's debug records are not read). */
static int annotate_jit(struct actx *c, struct disasm *d, const struct annotate_opts *ao,
			char *why, size_t whylen)
{
	struct lsums ls = { 0 };
	uint8_t probe;

	c->elf = NULL;
	c->have_lines = 0;
	if (simage_jit_code(c->row->img, c->row->sym_addr, &probe, 1) <= 0) {
		snprintf(why, whylen, "%s: no code bytes for this JIT function (its runtime's "
			 "perf map names it; run the runtime with its jitdump on, which carries "
			 "the code)", c->row->symbol);
		return -ENOENT;
	}
	if (!ao->assembly) {
		snprintf(why, whylen, "%s: JIT code has no source lines here (annotate "
			 "--assembly shows its instructions when its runtime wrote a jitdump)",
			 c->row->symbol);
		return -ENOENT;
	}
	annotate_head(c, c->row);
	return annotate_asm(c, d, ao, &ls, why, whylen);
}

static int annotate_row(struct actx *c, struct disasm *d, const struct annotate_opts *ao,
			char *why, size_t whylen)
{
	const struct report_row *row = c->row;
	struct lsums ls = { 0 };
	int ret = 0;

	if (simage_is_jit(row->img))
		return annotate_jit(c, d, ao, why, whylen);
	symres_want_code(c->res, row->img);
	c->elf = simage_code(row->img);
	if (!c->elf) {
		snprintf(why, whylen, "%s: no binary with code for %s (give --vmlinux FILE, a "
			 "vmlinux or the guest's vmlinuz, for the kernel; --guest-root DIR for "
			 "user images)", row->symbol, row->image);
		return -ENOENT;
	}
	/* Lines only from a binary that also gave the symbols. */
	c->have_lines = ao->source && simage_elf(row->img) &&
			symres_want_lines(c->res, row->img, row->guest) == 0;
	if (ao->source && !c->have_lines && !ao->assembly) {
		snprintf(why, whylen, "%s: %s has no DWARF line table (install its debug info "
			 "or set DEBUGINFOD_URLS)", row->symbol, row->image);
		return -ENOENT;
	}
	annotate_head(c, row);
	if (c->have_lines) {
		ret = collect_lines(c, &ls);
		if (ret == -ENOMEM)
			goto out;
		ret = 0;
	}
	if (!ao->assembly) {
		print_source(c, &ls);
		goto out;
	}
	ret = annotate_asm(c, d, ao, &ls, why, whylen);
out:
	free(ls.v);
	return ret;
}

long report_annotate(FILE *f, struct report *r, struct symres *res,
		     const struct annotate_opts *ao,
		     void (*note)(const char *msg, void *arg), void *arg)
{
	struct actx c = { .f = f, .r = r, .res = res, .ao = ao };
	const struct simage *noted[64];
	size_t nr_noted = 0;
	struct disasm *d = NULL;
	long done = 0;
	char why[512];

	if (ao->assembly) {
		d = disasm_new();
		if (!d)
			return -errno;
	}
	for (size_t i = 0; i < r->nr_rows; i++) {
		const struct report_row *row = &r->rows[i];
		int ret;

		/* Rows without per-address samples were not asked for
		 * (report_opts.only_symbol). */
		if (!row->symbol || !row->img || !row->nr_addrs ||
		    row->percent < ao->threshold)
			continue;
		c.row = row;
		why[0] = '\0';
		ret = annotate_row(&c, d, ao, why, sizeof(why));
		if (ret == -ENOMEM) {
			done = ret;
			break;
		}
		if (ret) {
			int seen = 0;

			/* One note per image: a kernel without code would
			 * otherwise say so for each of its symbols. */
			for (size_t k = 0; k < nr_noted; k++)
				seen |= noted[k] == row->img;
			if (note && why[0] && !seen)
				note(why, arg);
			if (!seen && nr_noted < ARRAY_SIZE(noted))
				noted[nr_noted++] = row->img;
			continue;
		}
		done++;
	}
	src_free(c.files);
	disasm_free(d);
	return done;
}
