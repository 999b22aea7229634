/* SPDX-License-Identifier: MIT */
/*
 * Command-line option tables: each option declared once, with its long
 * name, short letter, value and help text.  One table drives a command's
 * parsing (getopt_long), its --help, its man page (help2man reads --help)
 * and the bash completion (`opvm CMD --dump-options`), as perf's
 * parse-options does.  Shared groups (the report options, a backend's
 * options) are declared once, by their owner, and included by the commands
 * that take them.  Data only: host/cli/options.c parses and prints.
 */
#ifndef OPVM_OPTDEF_H
#define OPVM_OPTDEF_H

/* Keys at or above this are long-only options; below, the short letter. */
#define OPTS_LONG_ONLY	0x100

enum opt_flags {
	OPTS_POSITIONAL = 1,	/* help line for an argument, not an option */
};

struct opt_def {
	const char *name;	/* long name without "--"; NULL ends a table */
	int key;		/* short letter, or OPTS_LONG_ONLY + n */
	const char *metavar;	/* the value's name in help; NULL: no value */
	const char *help;	/* one paragraph, wrapped by the printer */
	unsigned flags;		/* enum opt_flags */
};

struct opt_group {
	const char *title;	/* heading in --help, NULL: none */
	const struct opt_def *opts;	/* NULL: ends a list of groups */
};

#endif /* OPVM_OPTDEF_H */
