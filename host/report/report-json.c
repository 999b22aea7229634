// SPDX-License-Identifier: MIT
/*
 * The JSON report (docs/reports.md): the same rows and warnings as
 * the text report, names kept as they are where they are UTF-8.
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
#include "lib/cgroup.h"
#include "lib/hex.h"
#include "lib/text.h"

json_t *report_json_str(const char *s)
{
	char buf[REPORT_ESC_MAX];

	if (!s)
		return json_null();
	return json_string(text_utf8_valid(s) ? s : report_esc(buf, s));
}

/* A count for JSON: saturated counts stay INT64_MAX (lib/arith.h). */
json_t *report_json_count(uint64_t v)
{
	return stats_json_count(v);
}


static json_t *jint_or_null(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

/* Percentages to 4 decimals, as the text shows them. */
double report_json_pct(double p)
{
	return (double)(long long)(p * 10000.0 + 0.5) / 10000.0;
}

/* "cgroup", and "pod", "container" (and "runtime") where the path names
 * them (lib/cgroup.h): 0 or -1. */
static int row_json_cgroup(json_t *o, const char *cgroup)
{
	struct cgroup_ids ids;

	if (json_object_set_new(o, "cgroup", report_json_str(cgroup)))
		return -1;
	if (cgroup_ids_parse(cgroup, strlen(cgroup), &ids))
		return 0;
	if (ids.pod[0] && json_object_set_new(o, "pod", json_string(ids.pod)))
		return -1;
	if (ids.container[0] && (json_object_set_new(o, "container", json_string(ids.container)) ||
				 (ids.runtime[0] &&
				  json_object_set_new(o, "runtime", json_string(ids.runtime)))))
		return -1;
	return 0;
}

/* A row's symbol named by address from .eh_frame says so ("eh_frame":
 * true); other rows have no such key. */
json_t *report_json_row(const struct report_row *row)
{
	json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:f}",
			      "guest", report_json_str(row->guest),
			      "tgid", jint_or_null(row->tgid),
			      "tid", jint_or_null(row->tid),
			      "cpu", jint_or_null(row->cpu),
			      "app", report_json_str(row->app),
			      "image", report_json_str(row->image),
			      "kernel", row->kernel,
			      "symbol", report_json_str(row->symbol),
			      "samples", report_json_count(row->samples),
			      "percent", report_json_pct(row->percent));

	if (o && row->cgroup && row_json_cgroup(o, row->cgroup)) {
		json_decref(o);
		return NULL;
	}
	if (o && row->symbol && row->frame && json_object_set_new(o, "eh_frame", json_true())) {
		json_decref(o);
		return NULL;
	}
	if (o && row->python && (json_object_set_new(o, "python", json_true()) ||
				 (row->file && (json_object_set_new(o, "file", report_json_str(row->file)) ||
						json_object_set_new(o, "first_line",
								    json_integer(row->first_line)))))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The call chains of a -g session, leaf first (docs/reports.md). */
static json_t *stacks_json(const struct report *r)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < r->nr_stacks; i++) {
		const struct report_stack *st = &r->stacks[i];
		json_t *frames = json_array(), *o;

		for (unsigned j = 0; frames && j < st->nr; j++) {
			const struct report_frame *fr = &st->frames[j];

			json_t *fo = json_pack("{s:o, s:b, s:o, s:I}",
				"image", report_json_str(fr->image), "kernel", fr->kernel,
				"symbol", report_json_str(fr->symbol), "offset", (json_int_t)fr->offset);

			if (fo && fr->symbol && fr->frame)
				json_object_set_new(fo, "eh_frame", json_true());
			if (fo && fr->python) {
				json_object_set_new(fo, "python", json_true());
				if (fr->file) {
					json_object_set_new(fo, "file", report_json_str(fr->file));
					json_object_set_new(fo, "first_line",
							    json_integer(fr->first_line));
					json_object_set_new(fo, "line", json_integer(fr->line));
				}
			}
			json_array_append_new(frames, fo);
		}
		o = json_pack("{s:o, s:o, s:o, s:o}", "guest", report_json_str(st->guest),
			      "app", report_json_str(st->app), "samples", report_json_count(st->samples),
			      "frames", frames ? frames : json_null());
		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* The resolver's debuginfod counters (symbols/symres.h). */
static json_t *dbgd_json(const struct symres_dbgd_stats *d)
{
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			 "requests", report_json_count(d->asked), "found", report_json_count(d->found),
			 "not_found", report_json_count(d->not_found),
			 "refused_build_id", report_json_count(d->wrong_build),
			 "refused_size", report_json_count(d->too_big), "timed_out", report_json_count(d->timed_out),
			 "not_asked_after_timeout", report_json_count(d->skipped), "failed", report_json_count(d->failed),
			 "bytes", report_json_count(d->bytes));
}
/* "version" of the JSON report: raised when a key changes meaning or goes
 * (docs/reports.md); keys are only ever added within one version. */
#define REPORT_JSON_VERSION	1

static void json_warning(void *arr, const char *text)
{
	json_array_append_new(arr, report_json_str(text));
}

static const char *problem_state(enum simage_state st)
{
	switch (st) {
	case SIMAGE_OK:
		return "eh_frame";	/* stripped, named by address */
	case SIMAGE_NOT_FOUND:
		return "not_found";
	case SIMAGE_MISMATCH:
		return "build_id_mismatch";
	default:
		return "unusable";
	}
}

/* Every binary with samples no symbol names, most first: the footer's
 * lists, whole (docs/reports.md). */
static json_t *unnamed_json(const struct report *r)
{
	size_t n;
	const struct report_problem **v = report_problems_sorted(r, 0, &n);
	json_t *arr = v ? json_array() : NULL;

	for (size_t i = 0; arr && i < n; i++) {
		char hex[129];
		json_t *o;

		if (v[i]->build_id_len && v[i]->build_id_len <= 64)
			hex_encode(v[i]->build_id, v[i]->build_id_len, hex);
		o = json_pack("{s:o, s:o, s:o, s:s, s:o, s:o, s:o}",
			      "guest", report_json_str(v[i]->guest), "image", report_json_str(v[i]->image),
			      "build_id", v[i]->build_id_len && v[i]->build_id_len <= 64 ?
			      json_string(hex) : json_null(),
			      "state", problem_state(v[i]->state),
			      "samples", report_json_count(v[i]->samples),
			      "eh_frame_samples", report_json_count(v[i]->frame_samples),
			      "how_to_name", report_json_str(v[i]->reason));
		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			arr = NULL;
		}
	}
	free(v);
	return arr;
}

json_t *report_json_header(const struct report *r)
{
	json_t *o, *guests = json_array(), *warn = json_array();
	const char *mode = NULL;

	for (size_t i = 0; i < r->nr_guests; i++) {
		const struct report_guest *g = &r->guests[i];

		if (!g->total)
			continue;
		if (!mode)
			mode = g->mode;
		json_array_append_new(guests, json_pack(
			"{s:o, s:o, s:i, s:i, s:f, s:o, s:o, s:b}",
			"name", report_json_str(g->name),
			"mode", report_json_str(g->mode),
			"rate_hz", (int)g->rate_hz, "vcpus", (int)g->vcpus,
			"duration_s", g->duration_s,
			"kernel_release", report_json_str(g->kernel_release),
			"samples", report_json_count(g->total),
			"no_python", g->no_python));
	}
	for (size_t i = 0; i < r->nr_problems; i++) {
		char msg[1024];

		if (r->problems[i].state == SIMAGE_OK && r->frame_samples <= r->total / 10000)
			continue;	/* as the text footer: too few to warn of */
		snprintf(msg, sizeof(msg), "%s (guest %s): %s", r->problems[i].image,
			 r->problems[i].guest, r->problems[i].reason);
		json_array_append_new(warn, report_json_str(msg));
	}
	for (size_t i = 0; i < r->nr_guests; i++)
		report_kernel_warning(r, &r->guests[i], json_warning, warn);
	report_footer_warnings(r, json_warning, warn);
	o = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:{s:o, s:o}, "
		      "s:o, s:o, s:o}",
		      "version", REPORT_JSON_VERSION,
		      "mode", report_json_str(mode),
		      "event", report_json_str(r->event),
		      "event_count", report_json_count(r->event_count),
		      "total_samples", report_json_count(r->total),
		      "lost_samples", report_json_count(r->lost),
		      "throttled_samples", report_json_count(r->throttled),
		      "unresolved_samples", report_json_count(r->unresolved),
		      "eh_frame_samples", report_json_count(r->frame_samples),
		      "outside_kernel_samples", report_json_count(r->outside_kernel),
		      "build_id_mismatches", (int)r->mismatches,
		      "excluded_samples", "idle", report_json_count(r->excluded_idle),
		      "boot", report_json_count(r->excluded_boot),
		      "guests", guests,
		      "warnings", warn,
		      "unnamed", unnamed_json(r));
	if (o && r->dbgd.asked + r->dbgd.skipped)
		json_object_set_new(o, "debuginfod", dbgd_json(&r->dbgd));
	return o;
}

int report_json_dump(FILE *f, json_t *o)
{
	int ret;

	if (!o)
		return -ENOMEM;
	ret = json_dumpf(o, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	fputc('\n', f);
	json_decref(o);
	return ret ? -EIO : 0;
}

int report_print_json(FILE *f, const struct report *r, const struct report_print_opts *po)
{
	json_t *o = report_json_header(r), *syms = json_array();

	if (!o || !syms) {
		json_decref(o);
		json_decref(syms);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->nr_rows; i++) {
		json_t *row;

		if (!report_shown(&r->rows[i], po))
			continue;
		row = report_json_row(&r->rows[i]);
		if (!row || json_array_append_new(syms, row)) {
			json_decref(o);
			json_decref(syms);
			return -ENOMEM;
		}
	}
	json_object_set_new(o, "symbols", syms);
	if (r->stack_guests) {
		json_t *st = stacks_json(r);

		if (!st) {
			json_decref(o);
			return -ENOMEM;
		}
		json_object_set_new(o, "stacks", st);
		json_object_set_new(o, "stack_samples", report_json_count(r->stacks_total));
	}
	return report_json_dump(f, o);
}
