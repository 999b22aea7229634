// SPDX-License-Identifier: MIT
/*
 * The export formats' registry (host/report/report.h: struct export_ops).
 * Each format is one file defining its ops; this list names them once,
 * in the order --help shows them.  `opvm export` asks the ops what a
 * format can do (stdout, --diff, --empty-ok, per-address counts) and never
 * compares names.
 */
#include <stdio.h>
#include <string.h>

#include "host/report/report.h"

/* Adding a format: its file, and its name here. */
#define EXPORT_FORMATS(X) X(pprof) X(folded) X(html) X(speedscope)

#define EXPORT_DECLARE(n) extern const struct export_ops export_##n##_ops;
#define EXPORT_ENTRY(n) &export_##n##_ops,

EXPORT_FORMATS(EXPORT_DECLARE)

const struct export_ops *const export_formats[] = { EXPORT_FORMATS(EXPORT_ENTRY) NULL };

const struct export_ops *export_find(const char *name)
{
	for (size_t i = 0; export_formats[i]; i++)
		if (!strcmp(export_formats[i]->name, name))
			return export_formats[i];
	return NULL;
}

/* Appends s to buf[len] at *at, truncating. */
static void put(char *buf, size_t len, size_t *at, const char *s)
{
	int n = snprintf(buf + *at, len - *at, "%s", s);

	if (n > 0)
		*at += (size_t)n < len - *at ? (size_t)n : len - *at - 1;
}

/* The formats' names (or help clauses) joined by sep, the last two by last. */
static const char *join(char *buf, size_t len, int help, const char *sep, const char *last)
{
	size_t at = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; export_formats[i]; i++) {
		if (i)
			put(buf, len, &at, export_formats[i + 1] ? sep : last);
		put(buf, len, &at, help ? export_formats[i]->help : export_formats[i]->name);
	}
	return buf;
}

const char *export_names(char *buf, size_t len, const char *sep, const char *last)
{
	return join(buf, len, 0, sep, last);
}

const char *export_help(char *buf, size_t len)
{
	return join(buf, len, 1, "; ", "; ");
}
