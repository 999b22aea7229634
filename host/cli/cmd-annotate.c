// SPDX-License-Identifier: MIT
/*
 * opvm annotate: opannotate for guests.
 *   opvm annotate --assembly [--source] [SYMBOL|image:PATH...] [options]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/commands.h"
#include "lib/log.h"
#include "host/report/report-cli.h"
#include "lib/util.h"

enum { OPT_MAX_BYTES = 0x200 };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: opvm annotate [--assembly] [--source] [SYMBOL] [PROFILE SPEC...]\n"
		"                     [options]\n"
		"\n"
		"  -a, --assembly         disassembly with samples per instruction (default)\n"
		"  -s, --source           source lines with samples (DWARF); with --assembly,\n"
		"                         interleaved\n"
		"  --max-bytes N          longest code shown per symbol (default 65536)\n"
		"  SYMBOL                 only this symbol (default: every sampled symbol)\n"
		REPORT_CLI_HELP);
}

static void note(const char *msg, void *arg)
{
	int *count = arg;
	char safe[1024];

	/* Symbol and image names come from the guest. */
	(*count)++;
	log_warn("%s", util_text_escape(safe, sizeof(safe), msg));
}

/* The arguments after the options: profile specs and at most one symbol.
 * 0, or -1 after printing. */
static int annotate_args(struct report_cli *cli, int argc, char **argv, const char **symbol)
{
	char err[512];

	for (; optind < argc; optind++) {
		char *a = argv[optind];

		/* A profile spec has a known "kind:"; anything else is a symbol
		 * (C++ names contain "::", so look at the prefix only). */
		if (!strncmp(a, "guest:", 6) || !strncmp(a, "image:", 6) ||
		    !strncmp(a, "tgid:", 5) || !strncmp(a, "tid:", 4) ||
		    !strncmp(a, "cpu:", 4) || !strncmp(a, "event:", 6)) {
			if (report_cli_spec(cli, a, err, sizeof(err))) {
				log_err("%s", err);
				return -1;
			}
		} else if (!*symbol) {
			*symbol = a;
		} else {
			log_err("one symbol at a time ('%s' and '%s'); use image:PATH for a whole image",
				*symbol, a);
			return -1;
		}
	}
	return 0;
}

/* Only the symbol's rows are annotated.  0, or -1 after printing. */
static int keep_symbol(struct report *r, const char *symbol)
{
	size_t keep = 0;

	for (size_t i = 0; i < r->nr_rows; i++)
		if (r->rows[i].symbol && !strcmp(r->rows[i].symbol, symbol))
			r->rows[keep++] = r->rows[i];
		else
			free(r->rows[i].addrs);
	r->nr_rows = keep;
	if (!keep) {
		log_err("no samples in a symbol called '%s': 'opvm report -l' lists the "
			"sampled symbols", symbol);
		return -1;
	}
	return 0;
}

int cmd_annotate(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "assembly", no_argument, NULL, 'a' },
		{ "source", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
		REPORT_CLI_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct annotate_opts ao = { 0 };
	struct report_cli cli;
	struct symres *res = NULL;
	struct report *r = NULL;
	const char *symbol = NULL;
	FILE *out = NULL;
	char err[512];
	int opt, ret = 2, notes = 0;
	long n;

	report_cli_init(&cli);
	optind = 0;	/* 0: a full reset (main() parsed its own options with "+") */
	while ((opt = getopt_long(argc, argv, "ashd:t:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'a':
			ao.assembly = 1;
			break;
		case 's':
			ao.source = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_MAX_BYTES:
			ao.max_bytes = strtoul(optarg, NULL, 0);
			if (!ao.max_bytes || ao.max_bytes > (16u << 20)) {
				log_err("--max-bytes '%s': use 1 to 16777216", optarg);
				return 2;
			}
			break;
		default:
			n = report_cli_opt(&cli, opt, optarg, err, sizeof(err));
			if (n < 0) {
				log_err("%s", err);
				return 2;
			}
			if (n == 0) {
				usage(stderr);
				return 2;
			}
		}
	}
	if (annotate_args(&cli, argc, argv, &symbol))
		return 2;
	if (!ao.assembly && !ao.source)
		ao.assembly = 1;
	ao.threshold = cli.threshold;

	ret = 1;
	report_cli_finish(&cli);
	res = symres_new(&cli.sc);
	if (!res) {
		log_err("cannot set up symbol lookup: %s", strerror(errno));
		goto out;
	}
	cli.ro.symbols = 1;
	cli.ro.details = 1;
	cli.ro.only_symbol = symbol;
	cli.ro.res = res;
	r = report_load(&cli.ro, err, sizeof(err));
	if (!r) {
		log_err("%s", err);
		goto out;
	}
	if (symbol && keep_symbol(r, symbol))
		goto out;
	out = report_cli_safe_stream(stdout);
	if (!out) {
		log_err("cannot set up output: %s", strerror(errno));
		goto out;
	}
	n = report_annotate(out, r, res, &ao, note, &notes);
	if (n < 0) {
		log_err("annotate: %s", strerror((int)-n));
		goto out;
	}
	if (n == 0) {
		log_err("nothing to annotate%s", notes ? " (see the warnings above)" :
			": no sampled symbol has a binary; give --guest-root DIR");
		goto out;
	}
	ret = 0;
out:
	if (out && fclose(out) && !ret)
		ret = 1;
	report_free(r);
	symres_free(res);
	report_cli_release(&cli);
	if (fflush(stdout) && !ret)
		ret = 1;
	return ret;
}
