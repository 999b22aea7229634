// SPDX-License-Identifier: MIT
/*
 * opvm: whole-guest profiler for KVM/QEMU virtual machines.
 * main(): global options, then git-style dispatch to a subcommand.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/commands.h"
#include "lib/array.h"
#include "lib/log.h"


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
	{ "top",	  cmd_top,	    "every guest on this host, live: CPU, steal, exits, I/O" },
	{ "exporter",	  cmd_exporter,	    "the same figures as Prometheus metrics over HTTP" },
	{ "list-events",  cmd_list_events,  "events this host can sample, with their minimums" },
	{ "channel-dump", cmd_channel_dump, "decode a guest channel (socket or file) as text" },
};

#define NR_COMMANDS (ARRAY_SIZE(commands))

static void usage(FILE *f)
{
	fprintf(f, "usage: opvm [-v] <command> [args]\n\ncommands:\n");
	for (size_t i = 0; i < NR_COMMANDS; i++)
		fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "  %-13s %s\n", "help", "this list, or 'opvm help CMD': CMD's options");
	fprintf(f, "  %-13s %s\n", "version", "print opvm's version");
	fprintf(f, "\n-v, --verbose  more detail on stderr (repeat for debug messages)\n"
		   "'opvm <command> --help' or 'man opvm-<command>' describes each command.\n");
}

static const struct command *command_find(const char *name)
{
	for (size_t c = 0; c < NR_COMMANDS; c++)
		if (!strcmp(name, commands[c].name))
			return &commands[c];
	return NULL;
}

/* `opvm help [CMD]`: CMD's own --help, so the text lives in one place. */
static int cmd_help(int argc, char **argv)
{
	const struct command *c;
	char *args[] = { NULL, "--help", NULL };

	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	c = command_find(argv[1]);
	if (!c) {
		log_err("'%s' is not an opvm command; 'opvm help' lists them", argv[1]);
		return 2;
	}
	args[0] = (char *)c->name;
	return c->fn(2, args);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	int i, opt;

	/* "+": the first word that is not an option is the command; the
	 * command parses the rest. */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'v':
			opvm_verbose++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("opvm %s\n", OPVM_VERSION);
			return 0;
		default:
			log_err("unknown option '%s'; 'opvm --help' lists them",
				argv[optind - 1]);
			return 2;
		}
	}
	i = optind;
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[i], "help"))
		return cmd_help(argc - i, argv + i);
	if (!strcmp(argv[i], "version")) {
		printf("opvm %s\n", OPVM_VERSION);
		return 0;
	}
	if (command_find(argv[i]))
		return command_find(argv[i])->fn(argc - i, argv + i);
	log_err("'%s' is not an opvm command; 'opvm --help' lists them", argv[i]);
	return 2;
}
