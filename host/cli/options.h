/* SPDX-License-Identifier: MIT */
/*
 * A command's option table put to work (the tables: lib/optdef.h):
 * getopt_long built from it, --help printed from it, and a hidden
 * --dump-options that lists it for the man-page and completion checks.
 * Every command takes -h/--help and --dump-options without declaring them.
 */
#ifndef OPVM_CLI_OPTIONS_H
#define OPVM_CLI_OPTIONS_H

#include <stdio.h>

#include "lib/optdef.h"

enum opts_cmd_flags {
	OPTS_IN_ORDER = 1,	/* arguments come to the handler in order, key 1 */
	OPTS_STOP = 2,		/* options end at the first argument */
	OPTS_QUIET = 4,		/* a look-ahead pass: no messages, no help */
};

struct opts_cmd {
	const char *name;		/* "report": messages say 'opvm report --help' */
	const char *usage;		/* usage lines and description, before the options */
	const struct opt_group *groups;	/* parsed; ends with .opts == NULL */
	const struct opt_group *help_groups;	/* --help, --dump-options; NULL: groups */
	const char *footer;		/* --help's text after the options, or NULL */
	unsigned flags;			/* enum opts_cmd_flags */
};

/* Called once per option with its key (lib/optdef.h) and value (NULL when
 * it takes none): 0, or -1 after printing why the value is bad. */
typedef int (*opts_fn)(void *ctx, int key, char *arg);

/* Parses argv[1..] by c's table, calling fn for each option.  Returns 0 to
 * go on (optind is the first argument left), 1 after printing --help or
 * --dump-options to stdout (exit 0), 2 after a usage error (exit 2): an
 * unknown option or a missing value is one line on stderr. */
int opts_parse(const struct opts_cmd *c, int argc, char **argv, opts_fn fn, void *ctx);

/* c's help: usage, then each group's options, wrapped at 80 columns. */
void opts_help(FILE *f, const struct opts_cmd *c);

/* c's options one a line, "CMD<TAB>--NAME<TAB>-X<TAB>METAVAR<TAB>GROUP"
 * ("-" for none): what scripts/mkman.sh, the completion and the tests read. */
void opts_dump(FILE *f, const struct opts_cmd *c);

#endif /* OPVM_CLI_OPTIONS_H */
