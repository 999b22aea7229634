/* SPDX-License-Identifier: MIT */
/*
 * A command's option table put to work (the tables: lib/optdef.h):
 * getopt_long built from it, each value parsed by its row into the field
 * the row binds (lib/optval.h), --help printed from it, and a hidden
 * --dump-options that lists it, parsers included, for the man-page,
 * completion and bad-value checks.  Every command takes -h/--help and
 * --dump-options without declaring them.
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
	const struct opt_group *groups;	/* parsed, each into its .base; ends
					 * with .opts == NULL */
	const struct opt_group *help_groups;	/* --help, --dump-options; NULL: groups */
	const char *footer;		/* --help's text after the options, or NULL */
	unsigned flags;			/* enum opts_cmd_flags */
};

/* What the rows cannot do: called with d NULL for an argument (with
 * OPTS_IN_ORDER; 0, or -1 after printing why it is bad), and, with
 * OPTS_QUIET, with each option's row and value instead of setting it. */
typedef int (*opts_fn)(void *ctx, const struct opt_def *d, char *arg);

/* Parses argv[1..] by c's table, each option's value by its row into its
 * group's base; fn (may be NULL) as above.  Returns 0 to go on (optind is
 * the first argument left), 1 after printing --help or --dump-options to
 * stdout (exit 0), 2 after a usage error (exit 2): an unknown option, a
 * missing value or a bad one is one line on stderr (a table written wrong
 * too, before anything is parsed). */
int opts_parse(const struct opts_cmd *c, int argc, char **argv, opts_fn fn, void *ctx);

/* c's help: usage, then each group's options, wrapped at 80 columns. */
void opts_help(FILE *f, const struct opts_cmd *c);

/* c's options one a line, "CMD<TAB>--NAME<TAB>-X<TAB>METAVAR<TAB>GROUP<TAB>
 * PARSER" ("-" for none; PARSER as optval_describe() says, "uint:40-1000"):
 * what scripts/mkman.sh, the completion and the tests read. */
void opts_dump(FILE *f, const struct opts_cmd *c);

#endif /* OPVM_CLI_OPTIONS_H */
