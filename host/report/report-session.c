// SPDX-License-Identifier: MIT
/*
 * The report side of session.json: what a guest's session.json says about
 * its kernel, symbols and counters, read into struct report_guest for the
 * report model (host/report/report.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/collect/stats.h"
#include "host/report/report.h"
#include "host/report/report-priv.h"
#include "host/collect/store.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/hex.h"

static char *jstrdup(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? strndup(s, 256) : NULL;
}

static uint64_t jnum(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return json_integer_value(v) < 0 ? 0 : (uint64_t)json_integer_value(v);
	/* 2^64 and above do not fit: treat as unknown. */
	if (json_is_real(v))
		return json_real_value(v) < 0 || json_real_value(v) >= 18446744073709551616.0
		       ? 0 : (uint64_t)json_real_value(v);
	return 0;
}

/* session.json kernel.build_id (hex, from introspection) into g. */
static void kernel_build_id(struct report_guest *g, const char *hex)
{
	size_t n = hex ? strlen(hex) : 0;

	g->kernel_build_id_len = 0;
	if (n < 2 || n % 2 || n / 2 > sizeof(g->kernel_build_id))
		return;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hex_val((unsigned char)hex[i]), lo = hex_val((unsigned char)hex[i + 1]);

		if (hi < 0 || lo < 0)
			return;
		g->kernel_build_id[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	g->kernel_build_id_len = n / 2;
}

/* An address: "<key>_hex" (exact) if present, else the number, which the
 * collector writes as a real above INT64_MAX. */
static uint64_t jaddr(json_t *o, const char *key)
{
	char hkey[64];
	const char *h;

	snprintf(hkey, sizeof(hkey), "%s_hex", key);
	h = json_string_value(json_object_get(o, hkey));
	if (h) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(h, &end, 16);
		if (!errno && end != h && !*end)
			return v;
	}
	return jnum(o, key);
}

void report_guest_load_meta(struct report_guest *g, const char *path)
{
	json_error_t jerr;
	json_t *root = NULL, *ev, *k, *st;
	int fd = fs_open_regular(path, O_NOFOLLOW);

	/* Only a regular file, never through a symlink, and without blocking
	 * (a FIFO there once hung the report). */
	if (fd < 0) {
		if (fd != -ENOENT)
			errbuf_set(g->meta_err, sizeof(g->meta_err), "session.json %s",
				    fd == -EINVAL ? "is not a regular file" :
				    fd == -ELOOP ? "is a symlink" : strerror(-fd));
		return;
	}
	root = stats_json_loadfd(fd, 0, &jerr);
	/* Integers past INT64_MAX (a hand-written kernel address) only load
	 * as reals. */
	if (!root && lseek(fd, 0, SEEK_SET) == 0)
		root = stats_json_loadfd(fd, JSON_DECODE_INT_AS_REAL, &jerr);
	close(fd);
	if (!root || !json_is_object(root)) {
		errbuf_set(g->meta_err, sizeof(g->meta_err), "session.json does not parse");
		goto out;
	}
	g->mode = jstrdup(root, "mode");
	g->separate = jstrdup(root, "separate");
	g->rate_hz = (unsigned)jnum(root, "rate_hz");
	g->vcpus = (unsigned)jnum(root, "vcpus");
	g->no_python = json_is_true(json_object_get(root, "no_python"));
	g->start = jstrdup(root, "start");
	{
		json_t *d = json_object_get(root, "duration_s");

		g->duration_s = json_is_number(d) ? json_number_value(d) : 0;
		g->from_exec = jstrdup(root, "from_exec");
		d = json_object_get(root, "started_after_s");
		g->started_after_s = json_is_number(d) ? json_number_value(d) : -1;
	}
	ev = json_array_get(json_object_get(root, "events"), 0);
	if (json_is_object(ev)) {
		g->event = jstrdup(ev, "name");
		g->event_count = jnum(ev, "count");
	}
	st = json_object_get(root, "stats");
	if (json_is_object(st) && !stats_from_json(st, &g->stats))
		g->have_stats = 1;
	k = json_object_get(root, "kernel");
	if (json_is_object(k)) {
		g->kernel_release = jstrdup(k, "release");
		g->anchor_name = jstrdup(k, "anchor_name");
		g->anchor_addr = jaddr(k, "anchor_addr");
		g->text_addr = jaddr(k, "text_addr");
		kernel_build_id(g, json_string_value(json_object_get(k, "build_id")));
	}
	/* the collector's own check of the kallsyms against HELLO */
	g->ksyms_mismatch = stats_json_get(json_object_get(json_object_get(root, "fetch"),
							   "ksyms"), "slide_mismatch");
out:
	json_decref(root);
}
