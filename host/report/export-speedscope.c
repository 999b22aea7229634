// SPDX-License-Identifier: MIT
/*
 * speedscope export of a report: its JSON file format, one sampled
 * profile per guest and event (shared parts: host/report/report-export.c).
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
#include "lib/text.h"

/* ---- speedscope ------------------------------------------------------------------ */

/* Frame index of name in the shared frames (added if new), or -errno. */
static long ss_frame(struct smap *idx, json_t *frames, const char *name)
{
	char buf[1024];
	const char *esc = text_escape(buf, sizeof(buf), name);
	int added;
	long i = smap_get(idx, esc, json_array_size(frames), &added);

	if (i >= 0 && added &&
	    json_array_append_new(frames, json_pack("{s:s}", "name", esc)))
		return -ENOMEM;
	return i;
}

/* The profile of guest in profiles (added if new), or NULL. */
static json_t *ss_profile(json_t *profiles, const char *guest, const char *event)
{
	size_t i;
	json_t *p;
	char name[512];

	json_array_foreach(profiles, i, p)
		if (!strcmp(json_string_value(json_object_get(p, "x-guest")), guest))
			return p;
	snprintf(name, sizeof(name), "guest %s, %s", guest, event);
	p = json_pack("{s:s, s:s, s:s, s:i, s:i, s:[], s:[], s:s}", "type", "sampled",
		      "name", name, "unit", "none", "startValue", 0, "endValue", 0,
		      "samples", "weights", "x-guest", guest);
	return p && !json_array_append_new(profiles, p) ? p : NULL;
}

/* One sample's stack (process, image, symbol; the guest is its profile),
 * weighted by the row's count; stacks sorted as in folded. */
static int ss_add(struct smap *idx, json_t *frames, json_t *prof, const struct report_row *row)
{
	char proc[512];
	long fr[3];
	json_t *stack;

	export_process_name(row, proc, sizeof(proc));
	fr[0] = ss_frame(idx, frames, proc);
	fr[1] = ss_frame(idx, frames, report_basename(row->image));
	fr[2] = ss_frame(idx, frames, row->symbol ? row->symbol : "[unknown]");
	if (fr[0] < 0 || fr[1] < 0 || fr[2] < 0)
		return -ENOMEM;
	stack = json_pack("[I, I, I]", (json_int_t)fr[0], (json_int_t)fr[1], (json_int_t)fr[2]);
	if (!stack || json_array_append_new(json_object_get(prof, "samples"), stack) ||
	    json_array_append_new(json_object_get(prof, "weights"),
				  json_integer((json_int_t)(row->samples > INT64_MAX ?
							    INT64_MAX : row->samples))))
		return -ENOMEM;
	json_object_set_new(prof, "endValue",
			    json_integer(json_integer_value(json_object_get(prof, "endValue")) +
					 (json_int_t)(row->samples > INT64_MAX ? 0 : row->samples)));
	return 0;
}

int report_export_speedscope(FILE *f, const struct report *r, const char *exporter)
{
	struct folded_line *v = calloc(r->nr_rows + r->nr_stacks + 1, sizeof(*v));
	json_t *frames = json_array(), *profiles = json_array(), *root = NULL, *p;
	struct smap idx = { 0 };
	size_t n = 0, i;
	int ret = -ENOMEM;

	if (!v || !frames || !profiles)
		goto out;
	for (i = 0; i < r->nr_rows; i++) {
		if (!r->rows[i].samples)
			continue;
		v[n].stack = folded_stack(&r->rows[i]);
		if (!v[n].stack)
			goto out;
		v[n].row = &r->rows[i];
		v[n++].samples = r->rows[i].samples;
	}
	qsort(v, n, sizeof(*v), folded_cmp);
	for (i = 0; i < n; i++) {
		p = ss_profile(profiles, v[i].row->guest, r->event);
		if (!p || ss_add(&idx, frames, p, v[i].row))
			goto out;
	}
	json_array_foreach(profiles, i, p)
		json_object_del(p, "x-guest");
	root = json_pack("{s:s, s:{s:O}, s:O, s:s, s:i, s:s}",
			 "$schema", "https://www.speedscope.app/file-format-schema.json",
			 "shared", "frames", frames, "profiles", profiles,
			 "name", r->event, "activeProfileIndex", 0, "exporter", exporter);
	if (!root)
		goto out;
	ret = json_dumpf(root, f, JSON_COMPACT) || fputc('\n', f) == EOF ? -EIO : 0;
out:
	for (i = 0; i < n; i++)
		free(v[i].stack);
	free(v);
	smap_free(&idx);
	json_decref(root);
	json_decref(frames);
	json_decref(profiles);
	return ret;
}

static int speedscope_write(FILE *f, const struct export_in *in)
{
	return report_export_speedscope(f, in->r, in->exporter);
}

const struct export_ops export_speedscope_ops = {
	.name = "speedscope",
	.ext = ".speedscope.json",
	.help = "speedscope: JSON for speedscope (https://www.speedscope.app)",
	.flags = EXPORT_TEXT,
	.write = speedscope_write,
};
