/* SPDX-License-Identifier: MIT */
/*
 * Command-line options shared by `opvm report`, `annotate` and `export`:
 * where the session is, where guest binaries are, what to merge and which
 * samples to keep.  Parsing only; the commands print the messages.
 */
#ifndef OPVM_REPORT_CLI_H
#define OPVM_REPORT_CLI_H

#include "host/report/report.h"
#include "lib/optdef.h"

#define REPORT_CLI_MAX_ROOTS	16

/* The shared options' table (lib/optdef.h), included by report, annotate
 * and export, its rows bound to a struct report_cli (the group's base);
 * ends with the PROFILE SPEC argument's help. */
extern const struct opt_def report_cli_options[];

struct report_cli {
	struct report_opts ro;
	struct symres_root roots[REPORT_CLI_MAX_ROOTS];
	size_t nr_roots;
	struct symres_config sc;
	double threshold;
	char *owned[REPORT_CLI_MAX_ROOTS + 2];	/* paths from session.json */
	size_t nr_owned;
	char *range_which;	/* --since/--until: the window symbols came from */
};

void report_cli_init(struct report_cli *c);
/* A positional argument: a profile-spec term.  0 or -EINVAL (+ err). */
int report_cli_spec(struct report_cli *c, char *arg, char *err, size_t errlen);
/* report_cli_spec() for each of argv[first..argc): 0, or -EINVAL (+ err)
 * at the first that is not a profile-spec term. */
int report_cli_specs(struct report_cli *c, int argc, char **argv, int first,
		     char *err, size_t errlen);
/* Fills c->sc from the options (call before symres_new()), and what they
 * leave out (guest roots, System.map, vmlinux) from the "symbols" run or
 * attach kept in the session's session.json files: after `opvm run` no
 * symbol flags are needed, and flags still override. */
void report_cli_finish(struct report_cli *c);
/* Frees what report_cli_finish() read (after the last use of c->sc). */
void report_cli_release(struct report_cli *c);

/* A stream over f that writes every control byte but '\n' and '\t' as '?':
 * symbol names, paths and source lines come from guests and must not
 * drive the user's terminal.  fclose() it (f stays open).  NULL + errno. */
FILE *report_cli_safe_stream(FILE *f);

#endif /* OPVM_REPORT_CLI_H */
