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

/* The registry: one line per format, in --help order.  Each X(NAME)
 * declares the format file's `export_NAME_ops` and lists it, so that a new
 * format is its file and one line here, nothing more. */
#define EXPORT_FORMATS(X)	\
	X(pprof)		\
	X(folded)		\
	X(html)			\
	X(speedscope)		\
	/* a new format: X(NAME) above this line */

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

/* The names (or help clauses) of the formats whose flags hold all of
 * flags, joined by sep, the last two by last. */
static const char *join(char *buf, size_t len, unsigned flags, int help, const char *sep,
			const char *last)
{
	size_t at = 0, n = 0, k = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; export_formats[i]; i++)
		n += (export_formats[i]->flags & flags) == flags;
	for (size_t i = 0; export_formats[i]; i++) {
		const struct export_ops *f = export_formats[i];

		if ((f->flags & flags) != flags)
			continue;
		if (k++)
			put(buf, len, &at, k == n ? last : sep);
		put(buf, len, &at, help ? f->help : f->name);
	}
	return buf;
}

const char *export_names(char *buf, size_t len, unsigned flags, const char *sep,
			 const char *last)
{
	return join(buf, len, flags, 0, sep, last);
}

const char *export_help(char *buf, size_t len)
{
	return join(buf, len, 0, 1, "; ", "; ");
}
