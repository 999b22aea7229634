/* SPDX-License-Identifier: MIT */
/*
 * What the report's outputs share, each output one file: the text report
 * (report-text.c), which owns the escaping of names and the sentences of
 * the warnings, the JSON report (report-json.c), which owns the JSON
 * forms of a row and a header, and the differential report in text and
 * JSON (report-diff.c).  Not for use outside host/report/.
 */
#ifndef OPVM_REPORT_OUT_H
#define OPVM_REPORT_OUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "host/report/report.h"

/* Longest escaped name shown (a name's buffer for report_esc()). */
#define REPORT_ESC_MAX		1024

/* ---- report-text.c ------------------------------------------------------- */

/* s escaped for text output (text_escape()) into buf[REPORT_ESC_MAX];
 * returns buf. */
const char *report_esc(char *buf, const char *s);
/* s (escaped already) cut to width columns into out[outlen], "..." at a
 * cut; returns out. */
const char *report_fit(const char *s, int width, char *out, size_t outlen);
/* path as the rows show it: whole with long_names, else its basename. */
const char *report_disp(const char *path, int long_names);
/* Whether row passes po's threshold (1 when po is NULL). */
int report_shown(const struct report_row *row, const struct report_print_opts *po);
/* The problems sorted by samples, most first, into a new array of *n the
 * caller frees (NULL when out of memory); frames: only the stripped
 * images named by their .eh_frame functions, else all. */
const struct report_problem **report_problems_sorted(const struct report *r, int frames,
						    size_t *n);
/* Guest g's kernel warning (its kallsyms against opvm.ko's HELLO), if it
 * has one, to emit(arg, text). */
void report_kernel_warning(const struct report *r, const struct report_guest *g,
			   void (*emit)(void *, const char *), void *arg);
/* The footer's warnings that are sentences, each to emit(arg, text): the
 * text footer prints them, the JSON report lists them. */
void report_footer_warnings(const struct report *r,
			    void (*emit)(void *, const char *), void *arg);

/* ---- report-json.c ------------------------------------------------------- */

/* s as a JSON string (escaped text where s is not UTF-8), or null. */
json_t *report_json_str(const char *s);
/* A count: saturated counts stay INT64_MAX. */
json_t *report_json_count(uint64_t v);
/* A percentage to 4 decimals, as the text shows it. */
double report_json_pct(double p);
/* One row's object, or NULL when out of memory. */
json_t *report_json_row(const struct report_row *row);
/* The report's header object (guests, counters, warnings), or NULL. */
json_t *report_json_header(const struct report *r);
/* Writes o (NULL: -ENOMEM) to f with a newline and drops it: 0, -EIO. */
int report_json_dump(FILE *f, json_t *o);

#endif /* OPVM_REPORT_OUT_H */
