// SPDX-License-Identifier: MIT
/* Option tables to getopt_long, --help and --dump-options (host/cli/options.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/options.h"
#include "lib/text.h"

/* getopt_long's values for the options every command has. */
#define OPTS_KEY_HELP	'h'
#define OPTS_KEY_DUMP	0x7fff0000

/* The column option help starts at, and the widest option column. */
#define OPTS_HELP_COL	25

static const struct opt_def builtin[] = {
	{ "help", OPTS_KEY_HELP, NULL, "this text", 0 },
	{ 0 },
};

/* A table ends with a zeroed entry; an entry without a long name is a
 * short letter alone (-g). */
#define DEF_END(d)	(!(d)->name && !(d)->key)

static int is_short(int key)
{
	return key > ' ' && key < 0x7f;
}

static size_t count_opts(const struct opt_group *g)
{
	size_t n = 0;

	for (; g && g->opts; g++)
		for (const struct opt_def *d = g->opts; !DEF_END(d); d++)
			n += !(d->flags & OPTS_POSITIONAL);
	return n;
}

/* Whether lo[0..n) has the long name already: the first entry stays (a
 * name two backends share). */
static int have_long(const struct option *lo, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(lo[i].name, name))
			return 1;
	return 0;
}

/* One option into the getopt tables. */
static void add_opt(const struct opt_def *d, struct option *lo, size_t *n, char *s,
		    size_t slen)
{
	if (d->name && !have_long(lo, *n, d->name))
		lo[(*n)++] = (struct option){ d->name, d->metavar ? required_argument :
					      no_argument, NULL, d->key };
	if (is_short(d->key) && !strchr(s, d->key) && strlen(s) + 3 < slen) {
		size_t l = strlen(s);

		s[l++] = (char)d->key;
		if (d->metavar)
			s[l++] = ':';
		s[l] = '\0';
	}
}

/* getopt_long's long table (malloc'd) and short string from c's groups. */
static struct option *build(const struct opts_cmd *c, char *s, size_t slen)
{
	struct option *lo = calloc(count_opts(c->groups) + 3, sizeof(*lo));
	size_t n = 0;

	if (!lo)
		return NULL;
	snprintf(s, slen, "%s:", c->flags & OPTS_IN_ORDER ? "-" :
		 c->flags & OPTS_STOP ? "+" : "");
	add_opt(&builtin[0], lo, &n, s, slen);
	lo[n++] = (struct option){ "dump-options", no_argument, NULL, OPTS_KEY_DUMP };
	for (const struct opt_group *g = c->groups; g && g->opts; g++)
		for (const struct opt_def *d = g->opts; !DEF_END(d); d++)
			if (!(d->flags & OPTS_POSITIONAL))
				add_opt(d, lo, &n, s, slen);
	return lo;
}

/* The option as the user wrote it, for a message: "-x" or "--name". */
static void culprit(char *out, size_t len, int optopt_, char **argv)
{
	const char *a = argv[optind - 1];

	if (optopt_ && is_short(optopt_) && !(a[0] == '-' && a[1] == '-'))
		snprintf(out, len, "-%c", optopt_);
	else
		snprintf(out, len, "%.*s", (int)strcspn(a, "="), a);
}

static int usage_error(const struct opts_cmd *c, char **argv, int opt)
{
	char what[64];

	if (c->flags & OPTS_QUIET)
		return 0;
	culprit(what, sizeof(what), optopt, argv);
	/* One line, whatever its length: scripts read the first line. */
	if (opt == ':')
		fprintf(stderr, "opvm: error: option '%s' needs a value; 'opvm %s --help' "
			"lists the options\n", what, c->name);
	else
		fprintf(stderr, "opvm: error: unknown option '%s'; 'opvm %s --help' lists "
			"them\n", what, c->name);
	return 2;
}

int opts_parse(const struct opts_cmd *c, int argc, char **argv, opts_fn fn, void *ctx)
{
	char shorts[128];
	struct option *lo = build(c, shorts, sizeof(shorts));
	int opt, ret = 0;

	if (!lo) {
		fprintf(stderr, "opvm: error: out of memory\n");
		return 2;
	}
	opterr = 0;
	optind = 0;	/* 0: a full reset (main() parsed its own options with "+") */
	while (!ret && (opt = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c->flags & OPTS_QUIET) {
			if (opt != '?' && opt != ':' && opt != OPTS_KEY_HELP &&
			    opt != OPTS_KEY_DUMP)
				fn(ctx, opt, optarg);
			continue;
		}
		if (opt == '?' || opt == ':') {
			ret = usage_error(c, argv, opt);
		} else if (opt == OPTS_KEY_HELP) {
			opts_help(stdout, c);
			ret = 1;
		} else if (opt == OPTS_KEY_DUMP) {
			opts_dump(stdout, c);
			ret = 1;
		} else if (fn(ctx, opt, optarg)) {
			ret = 2;
		}
	}
	free(lo);
	return ret;
}

/* The left column of an option's help line. */
static void left_column(char *out, size_t len, const struct opt_def *d)
{
	const char *sp = d->metavar ? " " : "", *mv = d->metavar ? d->metavar : "";

	if (d->flags & OPTS_POSITIONAL)
		snprintf(out, len, "  %s", d->name);
	else if (!d->name)
		snprintf(out, len, "  -%c%s%s", d->key, sp, mv);
	else if (is_short(d->key))
		snprintf(out, len, "  -%c, --%s%s%s", d->key, d->name, sp, mv);
	else
		snprintf(out, len, "  --%s%s%s", d->name, sp, mv);
}

/* text word-wrapped from column col to TEXT_COLUMNS - 1, continuation
 * lines starting at OPTS_HELP_COL. */
static void wrap(FILE *f, size_t col, const char *text)
{
	const char *p = text + strspn(text, " ");
	int first = 1;

	while (*p) {
		size_t w = strcspn(p, " ");

		if (!first && col + 1 + w >= TEXT_COLUMNS) {
			fprintf(f, "\n%*s", OPTS_HELP_COL, "");
			col = OPTS_HELP_COL;
		} else if (!first) {
			fputc(' ', f);
			col++;
		}
		first = 0;
		fwrite(p, 1, w, f);
		col += w;
		p += w;
		p += strspn(p, " ");
	}
	fputc('\n', f);
}

static void help_line(FILE *f, const struct opt_def *d)
{
	char left[128];
	size_t l;

	left_column(left, sizeof(left), d);
	l = strlen(left);
	fputs(left, f);
	if (l + 2 <= OPTS_HELP_COL) {
		fprintf(f, "%*s", (int)(OPTS_HELP_COL - l), "");
		l = OPTS_HELP_COL;
	} else {
		fputs("  ", f);
		l += 2;
	}
	wrap(f, l, d->help ? d->help : "");
}

void opts_help(FILE *f, const struct opts_cmd *c)
{
	const struct opt_group *g = c->help_groups ? c->help_groups : c->groups;

	fputs(c->usage, f);
	for (; g && g->opts; g++) {
		if (g->title)
			fprintf(f, "\n%s:\n", g->title);
		for (const struct opt_def *d = g->opts; !DEF_END(d); d++)
			help_line(f, d);
	}
	fputc('\n', f);
	help_line(f, &builtin[0]);
	if (c->footer)
		fprintf(f, "\n%s", c->footer);
}

static void dump_line(FILE *f, const char *cmd, const struct opt_def *d, const char *group)
{
	fprintf(f, "%s\t%s%s\t", cmd, d->name ? "--" : "-", d->name ? d->name : "");
	if (is_short(d->key))
		fprintf(f, "-%c", d->key);
	else
		fputc('-', f);
	fprintf(f, "\t%s\t%s\n", d->metavar ? d->metavar : "-", group ? group : "-");
}

void opts_dump(FILE *f, const struct opts_cmd *c)
{
	const struct opt_group *g = c->help_groups ? c->help_groups : c->groups;

	for (; g && g->opts; g++)
		for (const struct opt_def *d = g->opts; !DEF_END(d); d++)
			if (!(d->flags & OPTS_POSITIONAL))
				dump_line(f, c->name, d, g->title);
	dump_line(f, c->name, &builtin[0], NULL);
}
