// SPDX-License-Identifier: MIT
/* Option tables to getopt_long, --help and --dump-options (host/cli/options.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/options.h"
#include "lib/log.h"
#include "lib/optval.h"

/* getopt_long's values for the options every command has, and the first
 * value of the rows' long options (row i is OPTS_VAL_ROW + i). */
#define OPTS_KEY_HELP	'h'
#define OPTS_KEY_DUMP	0x7fff0000
#define OPTS_VAL_ROW	0x10000

/* The column option help starts at, and the widest option column. */
#define OPTS_HELP_COL	25

static const struct opt_def builtin[] = {
	{ .name = "help", .key = OPTS_KEY_HELP, .help = "this text" },
	{ 0 },
};

/* A table ends with a zeroed entry; an entry without a long name is a
 * short letter alone (-g). */
#define DEF_END(d)	(!(d)->name && !(d)->key)

/* A row parsed, and the struct its field is in. */
struct opts_row {
	const struct opt_def *d;
	void *base;
};

/* getopt's tables and the rows they lead back to. */
struct opts_tables {
	struct option *lo;		/* getopt_long's, ends zeroed */
	struct opts_row *rows;		/* by OPTS_VAL_ROW + index */
	size_t nr_lo, nr_rows;
	char shorts[128];
};

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

/* One row into the getopt tables: its long name leads to the row, its
 * short letter is looked up (row_of_short). */
static void add_opt(struct opts_tables *t, const struct opt_def *d, void *base)
{
	char *s = t->shorts;

	t->rows[t->nr_rows] = (struct opts_row){ d, base };
	if (d->name && !have_long(t->lo, t->nr_lo, d->name))
		t->lo[t->nr_lo++] = (struct option){ d->name, d->metavar ? required_argument :
						     no_argument, NULL,
						     OPTS_VAL_ROW + (int)t->nr_rows };
	t->nr_rows++;
	if (is_short(d->key) && !strchr(s, d->key) && strlen(s) + 3 < sizeof(t->shorts)) {
		size_t l = strlen(s);

		s[l++] = (char)d->key;
		if (d->metavar)
			s[l++] = ':';
		s[l] = '\0';
	}
}

/* The first row with short letter key. */
static const struct opts_row *row_of_short(const struct opts_tables *t, int key)
{
	for (size_t i = 0; i < t->nr_rows; i++)
		if (t->rows[i].d->key == key)
			return &t->rows[i];
	return NULL;
}

/* Every row of c's groups checked (optval_check): a table written wrong
 * says so at once, whatever the command line.  0, or 2 after printing. */
static int check_tables(const struct opts_cmd *c)
{
	const struct opt_group *g = c->help_groups ? c->help_groups : c->groups;
	char err[160];

	for (int pass = 0; pass < 2; pass++, g = c->groups)
		for (; g && g->opts; g++)
			for (const struct opt_def *d = g->opts; !DEF_END(d); d++)
				if (optval_check(d, err, sizeof(err))) {
					log_err("%s", err);
					return 2;
				}
	return 0;
}

/* getopt_long's tables from c's groups: 0, or -ENOMEM. */
static int build(const struct opts_cmd *c, struct opts_tables *t)
{
	size_t n = count_opts(c->groups) + 3;

	memset(t, 0, sizeof(*t));
	t->lo = calloc(n, sizeof(*t->lo));
	t->rows = calloc(n, sizeof(*t->rows));
	if (!t->lo || !t->rows)
		return -ENOMEM;
	snprintf(t->shorts, sizeof(t->shorts), "%s:", c->flags & OPTS_IN_ORDER ? "-" :
		 c->flags & OPTS_STOP ? "+" : "");
	add_opt(t, &builtin[0], NULL);
	t->lo[t->nr_lo++] = (struct option){ "dump-options", no_argument, NULL, OPTS_KEY_DUMP };
	for (const struct opt_group *g = c->groups; g && g->opts; g++)
		for (const struct opt_def *d = g->opts; !DEF_END(d); d++)
			if (!(d->flags & OPTS_POSITIONAL))
				add_opt(t, d, g->base);
	return 0;
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

/* The row getopt_long's opt leads to, or NULL (an argument in order). */
static const struct opts_row *row_of(const struct opts_tables *t, int opt)
{
	if (opt >= OPTS_VAL_ROW && (size_t)(opt - OPTS_VAL_ROW) < t->nr_rows)
		return &t->rows[opt - OPTS_VAL_ROW];
	return is_short(opt) ? row_of_short(t, opt) : NULL;
}

/* One option or argument getopt_long returned: 0 to go on, else what
 * opts_parse() returns. */
static int take(const struct opts_cmd *c, const struct opts_tables *t, int opt, char **argv,
		opts_fn fn, void *ctx)
{
	const struct opts_row *r = row_of(t, opt);
	char what[64], err[512];

	if (c->flags & OPTS_QUIET) {
		if (r && r->d != &builtin[0] && fn)
			fn(ctx, r->d, optarg);
		return 0;
	}
	if (opt == '?' || opt == ':')
		return usage_error(c, argv, opt);
	if (opt == OPTS_KEY_DUMP || (r && r->d == &builtin[0])) {
		(opt == OPTS_KEY_DUMP ? opts_dump : opts_help)(stdout, c);
		return 1;
	}
	if (!r)		/* an argument, in order (OPTS_IN_ORDER) */
		return fn && fn(ctx, NULL, optarg) ? 2 : 0;
	if (!r->base)
		return 0;	/* a table only listed: nothing to set */
	/* the option as written: -F, or --rate however shortened */
	if (is_short(opt))
		snprintf(what, sizeof(what), "-%c", opt);
	else
		snprintf(what, sizeof(what), "--%s", r->d->name);
	if (!optval_set(r->d, r->base, what, optarg, err, sizeof(err)))
		return 0;
	log_err("%s", err);
	return 2;
}

int opts_parse(const struct opts_cmd *c, int argc, char **argv, opts_fn fn, void *ctx)
{
	struct opts_tables t = { 0 };
	int opt, ret = check_tables(c);

	if (!ret && build(c, &t)) {
		log_err("out of memory");
		ret = 2;
	}
	if (ret) {
		free(t.lo);
		free(t.rows);
		return ret;
	}
	opterr = 0;
	optind = 0;	/* 0: a full reset (main() parsed its own options with "+") */
	while (!ret && (opt = getopt_long(argc, argv, t.shorts, t.lo, NULL)) != -1)
		ret = take(c, &t, opt, argv, fn, ctx);
	free(t.lo);
	free(t.rows);
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
	char type[256];

	fprintf(f, "%s\t%s%s\t", cmd, d->name ? "--" : "-", d->name ? d->name : "");
	if (is_short(d->key))
		fprintf(f, "-%c", d->key);
	else
		fputc('-', f);
	fprintf(f, "\t%s\t%s\t%s\n", d->metavar ? d->metavar : "-", group ? group : "-",
		d == &builtin[0] ? "help" : optval_describe(d, type, sizeof(type)));
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
