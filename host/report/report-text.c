// SPDX-License-Identifier: MIT
/*
 * The text report (opreport's layout, 80 columns by default): header,
 * footer, summary and symbol rows, and the escaping and warnings the
 * JSON and differential outputs share (host/report/report-out.h).
 * Output only; the model is built by host/report/report.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/report/report.h"
#include "host/report/report-out.h"
#include "host/collect/stats.h"
#include "lib/arith.h"
#include "lib/hex.h"
#include "lib/signals.h"
#include "lib/text.h"

/*
 * Every name in text output may come from a guest (paths, comms, module
 * and symbol names, session.json fields): it is escaped (\n, \t, \xNN:
 * text_escape()) so that it can neither plant a row nor drive the
 * terminal.  JSON output keeps the names (jansson escapes them) unless they
 * are not UTF-8, which JSON cannot carry: then the escaped text goes.
 */
const char *report_esc(char *buf, const char *s)
{
	return text_escape(buf, REPORT_ESC_MAX, s);
}

/* report_esc() for the rows: the name itself when it needs no escaping (most are
 * printable ASCII and short: a report shows three a row, 100 k rows), else
 * its escaped copy in buf.  Use the return value. */
static const char *esc_row(char *buf, const char *s)
{
	size_t i = 0;

	/* Most names are printable ASCII and short: shown as they are, with
	 * no copy (a report escapes three names a row, 100 k rows). */
	while (s && i < REPORT_ESC_MAX - 1) {
		unsigned char c = (unsigned char)s[i];

		/* one test for NUL and every other byte outside 0x20..0x7e */
		if ((unsigned char)(c - 0x20) >= 0x5f || c == '\\') {
			if (!c)
				return s;
			break;
		}
		i++;
	}
	return text_escape(buf, REPORT_ESC_MAX, s);
}

/* ---- helpers --------------------------------------------------------------- */

/* Copies s (escaped already) into out cut to width columns: a cut name
 * ends in "..." so that a reader never takes a prefix for the whole name. */
const char *report_fit(const char *s, int width, char *out, size_t outlen)
{
	size_t n = strlen(s);

	if (!outlen)
		return out;
	if (width < 4 || n <= (size_t)width || outlen < (size_t)width + 1) {
		n = n < outlen - 1 ? n : outlen - 1;
		memcpy(out, s, n);
		out[n] = '\0';
		return out;
	}
	memcpy(out, s, (size_t)width - 3);
	memcpy(out + width - 3, "...", 4);
	return out;
}

/*
 * One output line built by hand: `report -l` prints a row per symbol
 * (100 k rows on a large session), and printf's format parsing was a
 * third of the report's time.  The appenders keep printf's "%-*s" and
 * "%.4f" output byte for byte.
 */
struct line {
	char b[4096];
	size_t n;
};

static void line_put(struct line *l, const char *s, size_t n)
{
	if (n > sizeof(l->b) - l->n)
		n = sizeof(l->b) - l->n;
	memcpy(l->b + l->n, s, n);
	l->n += n;
}

/* "%-*s" then the separator c (0: none). */
static void line_pad(struct line *l, const char *s, int width, char c)
{
	size_t n = strlen(s);

	line_put(l, s, n);
	for (; (int)n < width && l->n < sizeof(l->b); n++)
		l->b[l->n++] = ' ';
	if (c && l->n < sizeof(l->b))
		l->b[l->n++] = c;
}

/* "%.4f" of a percentage.  The fast path rounds p * 10^4 itself; a value
 * within 10^-6 of a rounding tie, where that product's own rounding could
 * disagree with printf's exact decimal, is left to printf. */
static const char *fmt_pct4(double p, char *out, size_t len)
{
	double t = p * 10000.0, frac;
	uint64_t k, ip;
	char tmp[32];
	int i = (int)sizeof(tmp);

	if (!(p >= 0.0 && p < 1e12)) {
		snprintf(out, len, "%.4f", p);
		return out;
	}
	k = (uint64_t)t;
	frac = t - (double)k;
	if (frac > 0.5 - 1e-6 && frac < 0.5 + 1e-6) {
		snprintf(out, len, "%.4f", p);
		return out;
	}
	k += frac > 0.5;
	ip = k / 10000;
	k %= 10000;
	tmp[--i] = '\0';
	for (int d = 0; d < 4; d++, k /= 10)
		tmp[--i] = (char)('0' + k % 10);
	tmp[--i] = '.';
	do {
		tmp[--i] = (char)('0' + ip % 10);
		ip /= 10;
	} while (ip);
	if ((size_t)(sizeof(tmp) - (size_t)i) > len)
		i = (int)(sizeof(tmp) - len);	/* never: callers pass 32 */
	memcpy(out, tmp + i, sizeof(tmp) - (size_t)i);
	out[len - 1] = '\0';
	return out;
}

/* Decimal digits of v. */
static unsigned ndigits(uint64_t v)
{
	unsigned d = 1;

	for (; v >= 10000; v /= 10000)
		d += 4;
	return d + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* v's d digits at b. */
static void put_digits(char *b, uint64_t v, unsigned d)
{
	while (d--) {
		b[d] = (char)('0' + v % 10);
		v /= 10;
	}
}

/*
 * The samples and % columns ("%-8s %-8s " of stats_fmt_count() and
 * fmt_pct4()) written in place, over spaces laid down first: no string
 * to measure and copy, a third of a row's formatting.  0 when the line
 * lacks room or a value takes printf's path: the caller then formats
 * them the general way.
 */
static int num_cols(struct line *l, uint64_t samples, double pct)
{
	static const char spaces[48] = "                                                ";
	double t = pct * 10000.0, frac;
	unsigned dc, dp;
	uint64_t k, ip;
	char *b;

	if (sizeof(l->b) - l->n < sizeof(spaces) || samples >= OPVM_COUNT_SATURATED ||
	    !(pct >= 0.0 && pct < 1e12))
		return 0;
	k = (uint64_t)t;
	frac = t - (double)k;
	if (frac > 0.5 - 1e-6 && frac < 0.5 + 1e-6)
		return 0;	/* a tie: printf's exact decimal decides */
	k += frac > 0.5;
	ip = k / 10000;
	b = l->b + l->n;
	memcpy(b, spaces, sizeof(spaces));
	dc = ndigits(samples);
	put_digits(b, samples, dc);
	b += (dc > 8 ? dc : 8) + 1;
	dp = ndigits(ip);
	put_digits(b, ip, dp);
	b[dp] = '.';
	put_digits(b + dp + 1, k % 10000, 4);
	b += (dp + 5 > 8 ? dp + 5 : 8) + 1;
	l->n = (size_t)(b - l->b);
	return 1;
}

const char *report_disp(const char *path, int long_names)
{
	return long_names ? path : report_basename(path);
}

/* A non-negative id in decimal; buf holds 24 bytes. */
static const char *fmt_i64(int64_t v, char *buf)
{
	return stats_fmt_count((uint64_t)v, buf);
}

/* "app", "app[tgid]", "app[tgid/tid]", plus "@cpu".  By hand, as the rows
 * are (struct line). */
static void app_label(const struct report_row *row, int long_names, char *out, size_t len)
{
	char a[REPORT_ESC_MAX], num[24];
	size_t w = len > 48 ? len - 48 : 1;	/* room for [tgid/tid]@cpu */
	const char *app = esc_row(a, report_disp(row->app, long_names));
	struct line l;

	l.n = 0;
	line_put(&l, app, strnlen(app, w));
	if (row->tgid >= 0) {
		line_put(&l, "[", 1);
		line_pad(&l, fmt_i64(row->tgid, num), 0, 0);
		if (row->tid >= 0 && row->tid != row->tgid) {
			line_put(&l, "/", 1);
			line_pad(&l, fmt_i64(row->tid, num), 0, 0);
		}
		line_put(&l, "]", 1);
	}
	if (row->cpu >= 0) {
		line_put(&l, "@", 1);
		line_pad(&l, fmt_i64(row->cpu, num), 0, 0);
	}
	if (row->cgroup) {	/* "app <cgroup>": rows kept apart by cgroup */
		const char *cg = esc_row(a, row->cgroup);

		line_put(&l, " <", 2);
		line_put(&l, cg, strnlen(cg, len > l.n + 3 ? len - l.n - 3 : 0));
		line_put(&l, ">", 1);
	}
	if (l.n >= len)
		l.n = len - 1;
	memcpy(out, l.b, l.n);
	out[l.n] = '\0';
}

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

int report_shown(const struct report_row *row, const struct report_print_opts *po)
{
	return !po || row->percent >= po->threshold;
}

/* ---- header and footer ------------------------------------------------------ */

/* One guest's line of the header: how it was sampled, for how long. */
static void guest_line(FILE *f, const struct report *r, const struct report_guest *g)
{
	char b1[REPORT_ESC_MAX], b2[REPORT_ESC_MAX];

	fprintf(f, "guest %s: ", report_esc(b1, g->name));
	if (!g->mode) {
		fprintf(f, "sampling mode unknown (%s)",
			g->meta_err[0] ? g->meta_err : "no readable session.json");
		return;
	}
	if (g->rate_hz)
		fprintf(f, "%s at %u Hz", report_esc(b1, g->mode), g->rate_hz);
	else
		fprintf(f, "%s sampling, one sample every %" PRIu64 " %s events",
			report_esc(b1, g->mode), g->event_count ? g->event_count : r->event_count,
			report_esc(b2, g->event ? g->event : r->event));
	if (g->vcpus)
		fprintf(f, ", %u vCPU%s", g->vcpus, g->vcpus == 1 ? "" : "s");
	if (g->duration_s > 0)
		fprintf(f, ", %.1f s", g->duration_s);
	if (g->from_exec && g->started_after_s >= 0)
		fprintf(f, ", filed from %s's start (%.1f s in)", report_esc(b1, g->from_exec),
			g->started_after_s);
	else if (g->from_exec)
		fprintf(f, ", %s never started: nothing filed", report_esc(b1, g->from_exec));
	if (g->kernel_release)
		fprintf(f, ", kernel %s", report_esc(b1, g->kernel_release));
	if (g->no_python)
		fprintf(f, ", Python frames off (--no-python)");
}

static void print_warning(void *f, const char *text)
{
	text_fprintf_wrapped(f, 2, "warning: %s", text);
}

/* A guest whose kallsyms disagreed with opvm.ko's HELLO (issue 25): said
 * under its header line, and among JSON's warnings. */
void report_kernel_warning(const struct report *r, const struct report_guest *g,
			   void (*emit)(void *, const char *), void *arg)
{
	char m[640], gb[REPORT_ESC_MAX], eb[sizeof(g->kernel_warn) * 4];

	(void)r;
	if (g->kernel_warn[0])
		snprintf(m, sizeof(m), "guest %s: %s", report_esc(gb, g->name),
			 text_escape(eb, sizeof(eb), g->kernel_warn));
	else if (g->ksyms_mismatch)
		snprintf(m, sizeof(m), "guest %s: the guest's kallsyms disagreed with opvm.ko's "
			 "HELLO on where the kernel is (%llu symbols, session.json "
			 "fetch.ksyms): opvm.ko's addresses were kept", report_esc(gb, g->name),
			 (unsigned long long)g->ksyms_mismatch);
	else
		return;
	emit(arg, m);
}

void report_print_header(FILE *f, const struct report *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nr_guests; i++)
		n += r->guests[i].total > 0;
	char b1[REPORT_ESC_MAX], cnt[OPVM_COUNT_BUF];

	fprintf(f, "opvm report: event %s, %s samples, %zu guest%s\n",
		report_esc(b1, r->event), stats_fmt_count(r->total, cnt), n,
		n == 1 ? "" : "s");
	for (size_t i = 0; i < r->nr_guests; i++) {
		char *line = NULL;
		size_t len = 0;
		FILE *m;

		if (!r->guests[i].total)
			continue;
		/* built whole, then wrapped to the terminal's 80 columns */
		m = open_memstream(&line, &len);
		if (!m) {
			guest_line(f, r, &r->guests[i]);
			fputc('\n', f);
			continue;
		}
		guest_line(m, r, &r->guests[i]);
		if (!fclose(m))
			text_fprintf_wrapped(f, 2, "%s", line);
		free(line);
		report_kernel_warning(r, &r->guests[i], print_warning, f);
	}
	if (r->excluded_idle || r->excluded_boot)
		fprintf(f, "left out (--exclude): %s %s, %s %s samples\n", REPORT_APP_IDLE,
			stats_fmt_count(r->excluded_idle, cnt), REPORT_APP_BOOT,
			stats_fmt_count(r->excluded_boot, b1));
	for (size_t i = 0; i < r->nr_other_events; i++)
		text_fprintf_wrapped(f, 2, "(samples of event %s not shown: select them with "
				     "event:%s)", report_esc(b1, r->other_events[i]), b1);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

#define FOOTER_MAX_PROBLEMS	10

static int problem_cmp(const void *pa, const void *pb)
{
	const struct report_problem *a = *(const struct report_problem *const *)pa;
	const struct report_problem *b = *(const struct report_problem *const *)pb;

	if (a->samples != b->samples)
		return a->samples > b->samples ? -1 : 1;
	return strcmp(a->image, b->image);
}

/* The images without symbols (or, mismatches set, with another build-id),
 * most samples first, at most FOOTER_MAX_PROBLEMS of them. */
static void print_problems(FILE *f, const struct report *r, int mismatches)
{
	const struct report_problem **v = malloc((r->nr_problems + 1) * sizeof(*v));
	size_t n = 0;

	if (!v)
		return;
	for (size_t i = 0; i < r->nr_problems; i++)
		if ((r->problems[i].state == SIMAGE_MISMATCH) == mismatches &&
		    r->problems[i].state != SIMAGE_OK)
			v[n++] = &r->problems[i];
	if (n)
		qsort(v, n, sizeof(*v), problem_cmp);
	for (size_t i = 0; i < n && i < FOOTER_MAX_PROBLEMS; i++) {
		char b1[REPORT_ESC_MAX], b2[REPORT_ESC_MAX], b3[REPORT_ESC_MAX], cnt[OPVM_COUNT_BUF];

		report_esc(b1, v[i]->image);
		report_esc(b2, v[i]->guest);
		report_esc(b3, v[i]->reason);
		if (mismatches)
			text_fprintf_wrapped(f, 4, "  %s (guest %s): %s", b1, b2, b3);
		else
			text_fprintf_wrapped(f, 4, "  %s (guest %s, %s samples): %s", b1, b2,
					     stats_fmt_count(v[i]->samples, cnt), b3);
	}
	if (n > FOOTER_MAX_PROBLEMS)
		fprintf(f, "  ... and %zu more (--format json lists them all)\n",
			n - FOOTER_MAX_PROBLEMS);
	free(v);
}

/* The problems sorted by samples, most first, into a new array of *n
 * (NULL when out of memory); frames: only the stripped images named by
 * their .eh_frame functions, else all. */
const struct report_problem **report_problems_sorted(const struct report *r, int frames,
						    size_t *n)
{
	const struct report_problem **v = malloc((r->nr_problems + 1) * sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < r->nr_problems; i++)
		if (!frames || r->problems[i].state == SIMAGE_OK)
			v[(*n)++] = &r->problems[i];
	if (*n)
		qsort(v, *n, sizeof(*v), problem_cmp);
	return v;
}

/* The stripped binaries whose functions are named by address, most
 * samples first, with their build-ids and what would name them. */
static void print_frame_images(FILE *f, const struct report *r)
{
	size_t n;
	const struct report_problem **v = report_problems_sorted(r, 1, &n);
	char c1[OPVM_COUNT_BUF];

	if (!v)
		return;
	text_fprintf_wrapped(f, 2, "warning: %s samples (%.2f%%) are in stripped binaries, "
			     "in functions named by address (IMAGE+0xADDR, their bounds "
			     "from .eh_frame); what would name them:",
			     stats_fmt_count(r->frame_samples, c1), pct(r->frame_samples, r->total));
	for (size_t i = 0; i < n && i < FOOTER_MAX_PROBLEMS; i++) {
		char b1[REPORT_ESC_MAX], b2[REPORT_ESC_MAX], b3[REPORT_ESC_MAX], hex[129] = "none";

		if (v[i]->build_id_len && v[i]->build_id_len <= 64)
			hex_encode(v[i]->build_id, v[i]->build_id_len, hex);
		text_fprintf_wrapped(f, 4, "  %s (guest %s, %s samples, build-id %s): %s",
				     report_esc(b1, v[i]->image), report_esc(b2, v[i]->guest),
				     stats_fmt_count(v[i]->samples, c1), hex,
				     report_esc(b3, v[i]->reason));
	}
	if (n > FOOTER_MAX_PROBLEMS)
		fprintf(f, "  ... and %zu more (--format json lists them all)\n",
			n - FOOTER_MAX_PROBLEMS);
	free(v);
}

/* The footer's warnings that are sentences (losses, throttling, unreadable
 * files, unreadable session.json), each to emit(arg, text): the text
 * footer prints them, the JSON report lists them. */
void report_footer_warnings(const struct report *r,
			    void (*emit)(void *, const char *), void *arg)
{
	uint64_t taken, received = 0, lost_nomap = 0, lost_noproc = 0, noproc;
	char m[512], gb[REPORT_ESC_MAX];

	for (size_t i = 0; i < r->nr_guests; i++) {
		if (!r->guests[i].total)
			continue;
		received = arith_sat_add(received, r->guests[i].stats.received);
		lost_nomap = arith_sat_add(lost_nomap, r->guests[i].stats.lost_no_mapping);
		lost_noproc = arith_sat_add(lost_noproc, r->guests[i].stats.lost_no_process);
		if (r->guests[i].meta_err[0]) {
			snprintf(m, sizeof(m), "guest %s: %s: its counters are not shown",
				 report_esc(gb, r->guests[i].name), r->guests[i].meta_err);
			emit(arg, m);
		}
	}
	/* Losses are session-wide: weigh them against everything the guests'
	 * samplers took, not against what a filter kept. */
	taken = arith_sat_add(arith_sat_add(received > r->total ? received : r->total, r->lost),
			     r->throttled);
	noproc = arith_sat_add(lost_nomap, lost_noproc);
	if (r->bad_files || r->skipped_files) {
		snprintf(m, sizeof(m), "%zu sample file%s could not be read and %zu were "
			 "skipped", r->bad_files, r->bad_files == 1 ? "" : "s", r->skipped_files);
		emit(arg, m);
	}
	if (r->res_warn[0])
		emit(arg, r->res_warn);
	if (r->stack_errors) {
		char eb[sizeof(r->stack_err) * 4];

		snprintf(m, sizeof(m), "the call stacks of %zu guest%s could not be read, "
			 "they have no call chains here: %s", r->stack_errors,
			 r->stack_errors == 1 ? "" : "s",
			 text_escape(eb, sizeof(eb), r->stack_err));
		emit(arg, m);
	}
	/* Past 0.01 % of what was taken, a loss is worth a line. */
	if (taken && r->lost > taken / 10000) {
		snprintf(m, sizeof(m), "%.2f%% of samples were lost (ring overflow): lower "
			 "the rate or raise the sync frequency", pct(r->lost, taken));
		emit(arg, m);
	}
	if (taken && r->throttled > taken / 10000) {
		snprintf(m, sizeof(m), "%.2f%% of samples were throttled by the rate cap",
			 pct(r->throttled, taken));
		emit(arg, m);
	}
	if (taken && noproc > taken / 10000) {
		snprintf(m, sizeof(m), "%.2f%% of samples had no process or mapping (filed "
			 "under {anon}); is opvm.ko loaded in the guest?", pct(noproc, taken));
		emit(arg, m);
	}
}

/* Images without symbols, for the footer's list (not mismatches: their
 * own list; not the stripped ones split by .eh_frame: theirs). */
static size_t unnamed_images(const struct report *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nr_problems; i++)
		n += r->problems[i].state != SIMAGE_MISMATCH && r->problems[i].state != SIMAGE_OK;
	return n;
}

void report_print_footer(FILE *f, const struct report *r)
{
	char c1[OPVM_COUNT_BUF], c2[OPVM_COUNT_BUF], c3[OPVM_COUNT_BUF];

	fprintf(f, "\ntotal %s samples, lost %s, throttled %s\n",
		stats_fmt_count(r->total, c1), stats_fmt_count(r->lost, c2),
		stats_fmt_count(r->throttled, c3));
	if (r->symbols)
		fprintf(f, "unresolved %s samples (%.2f%%), build-id mismatches %zu\n",
			stats_fmt_count(r->unresolved, c1), pct(r->unresolved, r->total),
			r->mismatches);
	report_footer_warnings(r, print_warning, f);
	if (r->symbols && r->total && r->unresolved > r->total / 10000 &&
	    (r->outside_kernel || unnamed_images(r))) {
		/* the share is on the "unresolved" line above */
		fprintf(f, "warning: samples without a symbol:\n");
		if (r->outside_kernel)
			text_fprintf_wrapped(f, 4, "  vmlinux: %s samples (%.2f%%) ran below the "
					     "kernel's addresses (firmware, boot loader, "
					     "decompressor)",
				stats_fmt_count(r->outside_kernel, c1),
				pct(r->outside_kernel, r->total));
		print_problems(f, r, 0);
	}
	if (r->symbols && r->total && r->frame_samples > r->total / 10000)
		print_frame_images(f, r);
	if (r->mismatches) {
		/* their count is on the "unresolved" line above */
		text_fprintf_wrapped(f, 2, "warning: images with another build-id (%.2f%% of "
				     "samples), not used:", pct(r->mismatch_samples, r->total));
		print_problems(f, r, 1);
	}
}

/* ---- summary: guest -> application -> image (always full paths) --------------- */

struct snode {
	const struct report_row *first;	/* a row of the group, for names */
	uint64_t samples;
	size_t child, nr_child;		/* range in the next level */
};

static int same_app(const struct report_row *a, const struct report_row *b)
{
	return !strcmp(a->app, b->app) && a->tgid == b->tgid && a->tid == b->tid &&
	       a->cpu == b->cpu;
}

static int row_group_cmp(const void *pa, const void *pb)
{
	const struct report_row *a = *(const struct report_row *const *)pa;
	const struct report_row *b = *(const struct report_row *const *)pb;
	int c;

	if ((c = strcmp(a->guest, b->guest)) || (c = strcmp(a->app, b->app)))
		return c;
	if (a->tgid != b->tgid)
		return a->tgid < b->tgid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->cpu != b->cpu)
		return a->cpu < b->cpu ? -1 : 1;
	if (a->kernel != b->kernel)
		return a->kernel - b->kernel;
	return strcmp(a->image, b->image);
}

static int snode_cmp(const void *pa, const void *pb)
{
	const struct snode *a = pa, *b = pb;

	if (a->samples != b->samples)
		return a->samples > b->samples ? -1 : 1;
	return 0;
}

/* The summary's tree: guests > applications > images, in arrays where a
 * node's children are [child, child + nr_child) of the next level. */
struct stree {
	struct snode *guests, *apps, *images;
	size_t ng, na, ni;
};

/* v (sorted by group) folded into t, each level sorted by samples.  Rows
 * of one image (different symbols) fold into one image node. */
static void stree_build(struct stree *t, const struct report_row *const *v, size_t n)
{
	struct snode *guests = t->guests, *apps = t->apps, *images = t->images;
	size_t ng = 0, na = 0, ni = 0;

	for (size_t i = 0; i < n; i++) {
		const struct report_row *row = v[i];
		int new_guest = !ng || strcmp(guests[ng - 1].first->guest, row->guest);
		int new_app = new_guest || !same_app(apps[na - 1].first, row);
		int new_image = new_app || strcmp(images[ni - 1].first->image, row->image) ||
				images[ni - 1].first->kernel != row->kernel;

		if (new_guest)
			guests[ng++] = (struct snode){ .first = row, .child = na };
		if (new_app) {
			apps[na++] = (struct snode){ .first = row, .child = ni };
			guests[ng - 1].nr_child++;
		}
		if (new_image) {
			images[ni++] = (struct snode){ .first = row };
			apps[na - 1].nr_child++;
		}
		images[ni - 1].samples = arith_sat_add(images[ni - 1].samples, row->samples);
		apps[na - 1].samples = arith_sat_add(apps[na - 1].samples, row->samples);
		guests[ng - 1].samples = arith_sat_add(guests[ng - 1].samples, row->samples);
	}
	for (size_t i = 0; i < na; i++)
		qsort(images + apps[i].child, apps[i].nr_child, sizeof(*images), snode_cmp);
	for (size_t i = 0; i < ng; i++)
		qsort(apps + guests[i].child, guests[i].nr_child, sizeof(*apps), snode_cmp);
	qsort(guests, ng, sizeof(*guests), snode_cmp);
	t->ng = ng;
	t->na = na;
	t->ni = ni;
}

/* Application a's line, and its images' at depth 3. */
static void print_app(FILE *f, const struct report *r, const struct report_print_opts *po,
		      int depth, const struct stree *t, size_t a)
{
	const struct snode *app = &t->apps[a];
	double ap = pct(app->samples, r->total);
	char cnt[OPVM_COUNT_BUF], b1[REPORT_ESC_MAX], label[512];

	if (po && ap < po->threshold)
		return;
	app_label(app->first, 1, label, sizeof(label));
	fprintf(f, "%8s %8.4f    %s\n", stats_fmt_count(app->samples, cnt), ap, label);
	for (size_t k = app->child; depth > 2 && k < app->child + app->nr_child; k++) {
		const struct snode *img = &t->images[k];
		double ip = pct(img->samples, r->total);

		if (po && ip < po->threshold)
			continue;
		/* an application that is its one image: one line */
		if (app->nr_child == 1 && !strcmp(label, report_esc(b1, report_disp(img->first->image, 1))))
			continue;
		fprintf(f, "%8s %8.4f      %s\n", stats_fmt_count(img->samples, cnt), ip,
			report_esc(b1, report_disp(img->first->image, 1)));
	}
}

void report_print_summary(FILE *f, const struct report *r, const struct report_print_opts *po)
{
	const struct report_row **v = malloc((r->nr_rows ? r->nr_rows : 1) * sizeof(*v));
	struct stree t = {
		.guests = calloc(r->nr_rows + 1, sizeof(*t.guests)),
		.apps = calloc(r->nr_rows + 1, sizeof(*t.apps)),
		.images = calloc(r->nr_rows + 1, sizeof(*t.images)),
	};
	int depth;

	if (!v || !t.guests || !t.apps || !t.images)
		goto out;
	for (size_t i = 0; i < r->nr_rows; i++)
		v[i] = &r->rows[i];
	qsort(v, r->nr_rows, sizeof(*v), row_group_cmp);
	stree_build(&t, v, r->nr_rows);

	depth = po && po->depth > 0 ? po->depth : 3;
	fprintf(f, "%8s %8s  %s\n", "samples", "%",
		depth == 1 ? "guest" : depth == 2 ? "guest / application" :
		"guest / application / image");
	for (size_t g = 0; g < t.ng; g++) {
		const struct snode *guest = &t.guests[g];
		double gp = pct(guest->samples, r->total);
		char cnt[OPVM_COUNT_BUF], b1[REPORT_ESC_MAX];

		if (po && gp < po->threshold)
			continue;
		fprintf(f, "%8s %8.4f  %s\n", stats_fmt_count(guest->samples, cnt),
			gp, report_esc(b1, guest->first->guest));
		for (size_t a = guest->child; depth > 1 && a < guest->child + guest->nr_child; a++)
			print_app(f, r, po, depth, &t, a);
	}
out:
	free(v);
	free(t.guests);
	free(t.apps);
	free(t.images);
}

/* ---- symbols (-l, -d) ----------------------------------------------------------- */

struct cols {
	int guest;		/* 0: no guest column */
	int image, app, symbol;
};

/*
 * The image and app columns of a row repeat over the rows (a few hundred
 * images, 100 k rows): a direct-mapped cache keyed by the row's name
 * pointer (and its ids) remembers what the column printed, or its width.
 * Sized for a few hundred names with few collisions: rows sorted by
 * samples cycle through the images, and with 256 slots two thirds of
 * bench-report's rows missed.  Calloc'ed, so only the slots used are
 * ever touched.
 */
#define COL_SLOTS	4096
#define COL_TEXT	96	/* longer columns are not remembered */

struct colslot {
	const char *p;		/* NULL: empty */
	int64_t tgid, tid, cpu;
	int len;		/* width (layout_part()) or length of text */
	char text[COL_TEXT];
};

static struct colslot *col_slot(struct colslot *cache, const char *p, int64_t tgid,
				int64_t tid, int64_t cpu, int *hit)
{
	uint64_t h = (uint64_t)(uintptr_t)p ^ (uint64_t)tgid * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)tid * 0xbf58476d1ce4e5b9ull ^ (uint64_t)cpu * 0x94d049bb133111ebull;
	struct colslot *c;

	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	c = &cache[(h >> 32) % COL_SLOTS];
	*hit = c->p == p && c->tgid == tgid && c->tid == tid && c->cpu == cpu;
	if (!*hit) {
		c->p = p;
		c->tgid = tgid;
		c->tid = tid;
		c->cpu = cpu;
		c->len = -1;
	}
	return c;
}

/* col_slot(), the last row's slot first (*last): neighbouring rows share
 * their app and, sorted by samples, often their symbol's name. */
static inline struct colslot *col_slot_mru(struct colslot *cache, struct colslot **last,
					   const char *p, int64_t tgid, int64_t tid, int64_t cpu,
					   int *hit)
{
	struct colslot *c = *last;

	if (c && c->p == p && c->tgid == tgid && c->tid == tid && c->cpu == cpu) {
		*hit = 1;
		return c;
	}
	return *last = col_slot(cache, p, tgid, tid, cpu, hit);
}

/* strlen() of a name as a row shows it, remembered in cache (if any). */
static int name_width(struct colslot *cache, const char *name)
{
	char b[REPORT_ESC_MAX];
	struct colslot *c;
	int hit;

	if (!cache)
		return (int)strlen(esc_row(b, name));
	c = col_slot(cache, name, 0, 0, 0, &hit);
	if (!hit)
		c->len = (int)strlen(esc_row(b, name));
	return c->len;
}

static int label_width(struct colslot *cache, const struct report_row *row, int long_names)
{
	char label[512];
	struct colslot *c;
	int hit;

	/* the cache keys on the app and ids: a row's cgroup is not in it */
	if (!cache || row->cgroup) {
		app_label(row, long_names, label, sizeof(label));
		return (int)strlen(label);
	}
	c = col_slot(cache, row->app, row->tgid, row->tid, row->cpu, &hit);
	if (!hit) {
		app_label(row, long_names, label, sizeof(label));
		c->len = (int)strlen(label);
	}
	return c->len;
}

/* Widths of the image column by image (interned: one pointer a name), so
 * that the layout's pass over 100 k rows finds most in one probe: a few
 * hundred images do not fit the direct-mapped column caches. */
#define WMAP_SLOTS	2048	/* at most half of them used */

struct wmap {
	const char *key[WMAP_SLOTS];
	int len[WMAP_SLOTS];
	size_t nr;
};

static int image_width(struct wmap *m, const char *image, int long_names)
{
	char b[REPORT_ESC_MAX];
	uint64_t h = (uint64_t)(uintptr_t)image * 0x9e3779b97f4a7c15ull;
	size_t k = (size_t)(h >> 40) & (WMAP_SLOTS - 1);
	int len;

	while (m && m->key[k] && m->key[k] != image)
		k = (k + 1) & (WMAP_SLOTS - 1);
	if (m && m->key[k])
		return m->len[k];
	len = (int)strlen(esc_row(b, report_disp(image, long_names)));
	if (m && m->nr < WMAP_SLOTS / 2) {
		m->key[k] = image;
		m->len[k] = len;
		m->nr++;
	}
	return len;
}

/* What rows [from, to) need of each column, and their guests: 0 (none),
 * 1 (one, guest) or 2 (more than one; counted over every row, shown or
 * not, as the guest column shows when the report has two). */
struct lpart {
	int mg, mi, ma;
	const char *guest;
	int guests;
};

static void layout_part(const struct report *r, const struct report_print_opts *po, size_t from,
			size_t to, struct lpart *p)
{
	int long_names = po ? po->long_names : 0;
	struct colslot *names = calloc(COL_SLOTS, sizeof(*names));
	struct colslot *labels = calloc(COL_SLOTS, sizeof(*labels));
	struct wmap *images = calloc(1, sizeof(*images));
	const struct report_row *prev = NULL;

	*p = (struct lpart){ 0 };
	for (size_t i = from; i < to; i++) {
		const struct report_row *row = &r->rows[i];

		/* (names are interned: mostly one pointer) */
		if (!p->guests)
			p->guest = row->guest, p->guests = 1;
		else if (p->guests == 1 && row->guest != p->guest && strcmp(p->guest, row->guest))
			p->guests = 2;
		if (!report_shown(row, po))
			continue;
		/* a guest or app like the last row's has its width counted */
		if (!prev || row->guest != prev->guest)
			p->mg = clampi(name_width(names, row->guest), p->mg, 64);
		p->mi = clampi(image_width(images, row->image, long_names), p->mi, 200);
		if (!prev || row->app != prev->app || row->tgid != prev->tgid ||
		    row->tid != prev->tid || row->cpu != prev->cpu)
			p->ma = clampi(label_width(labels, row, long_names), p->ma, 200);
		prev = row;
	}
	free(names);
	free(labels);
	free(images);
}

/* The columns from the parts of the rows (b may be NULL). */
static void layout_finish(const struct report_print_opts *po, const struct lpart *a,
			  const struct lpart *b, struct cols *c)
{
	int width = po && po->width > 0 ? po->width : 80;
	struct lpart m = *a;
	int used;

	if (b) {
		m.mg = m.mg > b->mg ? m.mg : b->mg;
		m.mi = m.mi > b->mi ? m.mi : b->mi;
		m.ma = m.ma > b->ma ? m.ma : b->ma;
		if (b->guests > 1 || (m.guests && b->guests && strcmp(m.guest, b->guest)))
			m.guests = 2;
		else if (!m.guests)
			m.guests = b->guests;
	}
	c->guest = m.guests > 1 ? clampi(m.mg, 5, 12) : 0;
	c->image = clampi(m.mi, 10, 20);
	c->app = clampi(m.ma, 8, 16);
	used = 9 + 9 + (c->guest ? c->guest + 1 : 0) + c->image + 1 + c->app + 1;
	c->symbol = width - used;
	if (c->symbol < 12)
		c->symbol = 12;
}

/* Appends what line_pad(l, report_fit(s...), width, ' ') appends, from the cache
 * when slot c already holds it. */
/* A remembered column's text: one copy of the whole slot's text when the
 * line has room (a fixed size: a few vector moves, not a call), then
 * only its length counted. */
static void line_put_slot(struct line *l, const struct colslot *c)
{
	if (sizeof(l->b) - l->n >= COL_TEXT) {
		memcpy(l->b + l->n, c->text, COL_TEXT);
		l->n += (size_t)c->len;
	} else {
		line_put(l, c->text, (size_t)c->len);
	}
}

static void col_put(struct line *l, struct colslot *c, int hit, const char *s, int width)
{
	char b[256];
	struct line t;

	if (hit) {
		line_put_slot(l, c);
		return;
	}
	t.n = 0;
	line_pad(&t, report_fit(s, width, b, sizeof(b)), width, ' ');
	if (c && t.n <= COL_TEXT) {
		memcpy(c->text, t.b, t.n);
		c->len = (int)t.n;
	}
	line_put(l, t.b, t.n);
}

/* The symbol column and the newline, remembered by name in cache (if any):
 * the same function of 300 copies of a library is one name. */
static void sym_put(struct line *l, struct colslot *cache, struct colslot **last,
		    const char *name, int width)
{
	char b[256], e[REPORT_ESC_MAX];
	struct colslot *c = NULL;
	struct line t;
	int hit = 0;

	if (cache)
		c = col_slot_mru(cache, last, name, 0, 0, 0, &hit);
	if (hit && c->len >= 0) {
		line_put_slot(l, c);
		return;
	}
	t.n = 0;
	line_pad(&t, report_fit(esc_row(e, name), width, b, sizeof(b)), 0, '\n');
	if (c && t.n <= COL_TEXT) {
		memcpy(c->text, t.b, t.n);
		c->len = (int)t.n;
	}
	line_put(l, t.b, t.n);
}

/* Row's line.  caches: NULL, or COL_SLOTS slots for each of the image, app
 * and symbol columns in turn, last[] their last slots. */
static void print_row(struct line *l, const struct report_row *row, const struct cols *c,
		      int long_names, struct colslot *caches, struct colslot *last[3])
{
	struct colslot *images = caches, *apps = caches ? caches + COL_SLOTS : NULL;
	struct colslot *syms = caches ? caches + 2 * COL_SLOTS : NULL;
	char b[256], label[512], cnt[OPVM_COUNT_BUF], p[32], e[REPORT_ESC_MAX];
	struct colslot *slot = NULL;
	int hit = 0;

	if (!num_cols(l, row->samples, row->percent)) {
		line_pad(l, stats_fmt_count(row->samples, cnt), 8, ' ');
		line_pad(l, fmt_pct4(row->percent, p, sizeof(p)), 8, ' ');
	}
	if (c->guest)
		line_pad(l, report_fit(esc_row(e, row->guest), c->guest, b, sizeof(b)), c->guest, ' ');
	/* hit: the slot holds the column's text (a long one is not kept) */
	if (images)
		slot = col_slot_mru(images, &last[0], row->image, 0, 0, 0, &hit);
	hit = hit && slot->len >= 0;
	col_put(l, slot, hit, hit ? NULL : esc_row(e, report_disp(row->image, long_names)), c->image);
	slot = NULL;
	hit = 0;
	if (apps && !row->cgroup)	/* as label_width() */
		slot = col_slot_mru(apps, &last[1], row->app, row->tgid, row->tid, row->cpu, &hit);
	hit = hit && slot->len >= 0;
	if (!hit)
		app_label(row, long_names, label, sizeof(label));
	col_put(l, slot, hit, hit ? NULL : label, c->app);
	sym_put(l, syms, &last[2], row->symbol ? row->symbol : NO_SYMBOLS, c->symbol);
}

/* Rows gathered into 64 KiB writes: one fwrite() a row was a seventh of
 * printing 100 k rows. */
struct outbuf {
	FILE *f;
	size_t n;
	char b[65536];
};

static void out_flush(struct outbuf *o)
{
	if (o->n)
		fwrite(o->b, 1, o->n, o->f);
	o->n = 0;
}

static void out_put(struct outbuf *o, const char *s, size_t n)
{
	if (n > sizeof(o->b) - o->n)
		out_flush(o);
	if (n > sizeof(o->b)) {
		fwrite(s, 1, n, o->f);
		return;
	}
	memcpy(o->b + o->n, s, n);
	o->n += n;
}

/* Rows [from, to) printed through out (or f when out is NULL), with -d's
 * addresses. */
static void print_rows(FILE *f, struct outbuf *out, const struct report *r,
		       const struct report_print_opts *po, const struct cols *c,
		       size_t from, size_t to, struct colslot *caches)
{
	int long_names = po ? po->long_names : 0;
	struct colslot *last[3] = { NULL, NULL, NULL };
	struct line l;

	for (size_t i = from; i < to; i++) {
		const struct report_row *row = &r->rows[i];

		if (!report_shown(row, po))
			continue;
		l.n = 0;	/* not "= { 0 }": that would clear 4 KiB a row */
		print_row(&l, row, c, long_names, caches, last);
		if (out)
			out_put(out, l.b, l.n);
		else
			fwrite(l.b, 1, l.n, f);
		if (!po || !po->details)
			continue;
		if (out)
			out_flush(out);
		for (size_t j = 0; j < row->nr_addrs; j++) {
			char cnt[OPVM_COUNT_BUF];

			fprintf(f, "  %s%016" PRIx64 " %-8s %.4f\n",
				row->unresolved_offsets ? "+" : " ", row->addrs[j].addr,
				stats_fmt_count(row->addrs[j].count, cnt),
				pct(row->addrs[j].count, row->samples));
		}
	}
}

/*
 * The second half of a long listing (no -d) is formatted into memory on
 * a thread while the caller prints the first half: the same bytes (the
 * column caches only save work), in half the time on two processors.
 */
#define ROWTEXT_MIN	8192	/* rows; fewer are printed on one thread */

struct rowtext {
	const struct report *r;
	const struct report_print_opts *po;
	struct cols *c;
	size_t from, to;
	char *b;
	size_t n, cap;
	int failed;
	/* the layout of its half (part), handed over under mu, and the
	 * columns of the whole (c) handed back */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lpart part;
	int part_done, cols_done;
};

static int rowtext_put(struct rowtext *t, const char *s, size_t n)
{
	if (t->n + n > t->cap) {
		size_t cap = t->cap ? t->cap : 1 << 20;
		char *b;

		while (cap < t->n + n)
			cap *= 2;
		b = realloc(t->b, cap);
		if (!b)
			return -ENOMEM;
		t->b = b;
		t->cap = cap;
	}
	memcpy(t->b + t->n, s, n);
	t->n += n;
	return 0;
}

static void *rowtext_main(void *arg)
{
	struct rowtext *t = arg;
	struct colslot *caches = calloc(3 * COL_SLOTS, sizeof(*caches));
	struct colslot *last[3] = { NULL, NULL, NULL };
	int long_names = t->po ? t->po->long_names : 0;
	struct lpart part;
	struct line l;

	/* its half's layout first (a pass over 6 MB of rows per 50 k), then
	 * the whole's columns from the caller */
	layout_part(t->r, t->po, t->from, t->to, &part);
	pthread_mutex_lock(&t->mu);
	t->part = part;
	t->part_done = 1;
	pthread_cond_signal(&t->cv);
	while (!t->cols_done)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
	t->failed = !caches;
	for (size_t i = t->from; i < t->to && !t->failed; i++) {
		const struct report_row *row = &t->r->rows[i];

		if (!report_shown(row, t->po))
			continue;
		l.n = 0;
		print_row(&l, row, t->c, long_names, caches, last);
		t->failed = rowtext_put(t, l.b, l.n) != 0;
	}
	free(caches);
	return NULL;
}

/* Starts t on a thread for the second half of r's rows: 1, or 0 when the
 * listing is short, has -d addresses, or no thread could start. */
static int rowtext_start(struct rowtext *t, pthread_t *th)
{
	int err;

	if (t->r->nr_rows < ROWTEXT_MIN || (t->po && t->po->details) ||
	    sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return 0;
	t->from = t->r->nr_rows / 2;
	t->to = t->r->nr_rows;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	err = signals_thread_start(th, rowtext_main, t);	/* signals stay with the caller's */
	if (err) {
		pthread_cond_destroy(&t->cv);
		pthread_mutex_destroy(&t->mu);
	}
	return !err;
}

/* The columns (the first half's layout here, the second's on t's thread
 * when threaded), handed to the thread. */
static void layout_rows(const struct report *r, const struct report_print_opts *po,
			struct rowtext *t, int threaded, struct cols *c)
{
	struct lpart a;

	layout_part(r, po, 0, threaded ? t->from : r->nr_rows, &a);
	if (!threaded) {
		layout_finish(po, &a, NULL, c);
		return;
	}
	pthread_mutex_lock(&t->mu);
	while (!t->part_done)
		pthread_cond_wait(&t->cv, &t->mu);
	layout_finish(po, &a, &t->part, c);
	t->cols_done = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void report_print_symbols(FILE *f, const struct report *r, const struct report_print_opts *po)
{
	struct colslot *caches = calloc(3 * COL_SLOTS, sizeof(*caches));
	struct outbuf *out = malloc(sizeof(*out));
	struct rowtext t = { .r = r, .po = po };
	struct cols c;
	pthread_t th;
	int threaded;

	t.c = &c;
	threaded = out && rowtext_start(&t, &th);
	layout_rows(r, po, &t, threaded, &c);
	fprintf(f, "%-8s %-8s ", "samples", "%");
	if (c.guest)
		fprintf(f, "%-*s ", c.guest, "guest");
	fprintf(f, "%-*s %-*s %s\n", c.image, "image name", c.app, "app name", "symbol name");
	if (out) {
		out->f = f;
		out->n = 0;
	}
	print_rows(f, out, r, po, &c, 0, threaded ? t.from : r->nr_rows, caches);
	if (threaded) {
		pthread_join(th, NULL);
		pthread_cond_destroy(&t.cv);
		pthread_mutex_destroy(&t.mu);
		if (t.failed)	/* out of memory there: here, then */
			print_rows(f, out, r, po, &c, t.from, r->nr_rows, caches);
		else
			out_put(out, t.b, t.n);
		free(t.b);
	}
	if (out)
		out_flush(out);
	free(out);
	free(caches);
}
