// SPDX-License-Identifier: MIT
/*
 * opvm: whole-guest profiler for KVM/QEMU virtual machines.
 * main(): global options, then git-style dispatch to a subcommand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/commands.h"
#include "lib/log.h"

#ifndef OPVM_VERSION
#define OPVM_VERSION "0.1"
#endif


struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{ "run",	  cmd_run,	    "boot a guest, profile it until it powers off" },
	{ "attach",	  cmd_attach,	    "profile running guests (libvirt domain or QMP socket)" },
	{ "report",	  cmd_report,	    "summarise a session: guests, apps, images, symbols" },
	{ "annotate",	  cmd_annotate,	    "disassembly and source with samples per line" },
	{ "export",	  cmd_export,	    "write pprof, folded stacks or an HTML flame graph" },
	{ "list-events",  cmd_list_events,  "events this host can sample, with their minimums" },
	{ "channel-dump", cmd_channel_dump, "decode a guest channel (socket or file) as text" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: opvm [-v] <command> [args]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\n'opvm <command> --help' describes each command.\n");
}

int main(int argc, char **argv)
{
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			opvm_verbose++;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("opvm %s\n", OPVM_VERSION);
			return 0;
		} else {
			pr_err("unknown option '%s'", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
		if (!strcmp(argv[i], commands[c].name))
			return commands[c].fn(argc - i, argv + i);
	pr_err("'%s' is not an opvm command; 'opvm --help' lists them", argv[i]);
	return 2;
}
