/* SPDX-License-Identifier: MIT */
/*
 * opvm subcommands.  Each is main()-like: it parses its own arguments
 * (argv[0] is the subcommand name), prints its own messages and returns the
 * process exit code (0 ok, 1 failure, 2 usage).  The registry is the table in
 * host/cli/opvm.c.
 */
#ifndef OPVM_COMMANDS_H
#define OPVM_COMMANDS_H

#include <stdint.h>

/* The Makefile passes VERSION's contents; other builds (fuzz targets
 * linking the commands) get this. */
#ifndef OPVM_VERSION
#define OPVM_VERSION "unknown"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

int cmd_run(int argc, char **argv);		/* host/cli/cmd-run.c */
int cmd_attach(int argc, char **argv);		/* host/cli/cmd-attach.c */
int cmd_report(int argc, char **argv);		/* host/cli/cmd-report.c */
/* The symbol lookup of report, annotate and export, from c's settings
 * (report_cli_finish() done), with a line on stderr for each second of a
 * long debuginfod transfer (host/cli/cmd-report.c).  NULL: said. */
struct report_cli;
struct symres *cmd_symres_new(struct report_cli *c);
int cmd_annotate(int argc, char **argv);	/* host/cli/cmd-annotate.c */
int cmd_export(int argc, char **argv);		/* host/cli/cmd-export.c */
int cmd_list_events(int argc, char **argv);	/* host/cli/cmd-list-events.c */
int cmd_channel_dump(int argc, char **argv);	/* host/cli/cmd-channel-dump.c */
int cmd_top(int argc, char **argv);		/* host/cli/cmd-top.c */
int cmd_exporter(int argc, char **argv);	/* host/cli/cmd-exporter.c */

/* One record as channel-dump prints it (a text or JSON line), for a record
 * the decoder passed its callback (host/collect/decoder.h); the fuzz target
 * and the tests drive the printer through it.  Not thread-safe (one scratch
 * area). */
struct opvm_rec_hdr;
void channel_dump_record(FILE *out, bool json, const struct opvm_rec_hdr *rec,
			 size_t len);

#endif /* OPVM_COMMANDS_H */
