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
#include "host/cli/options.h"
#include "lib/log.h"
#include "lib/numparse.h"
#include "host/report/report-cli.h"
#include "lib/text.h"

struct annotate_args {
	struct report_cli cli;
	struct annotate_opts ao;
};

#define AA struct annotate_args
static const struct opt_def annotate_options[] = {
	{ .name = "assembly", .key = 'a', .help = "disassembly with samples per instruction "
	  "(default)", OPT_FLAG(AA, ao.assembly) },
	{ .name = "source", .key = 's', .help = "source lines with samples (DWARF); with "
	  "--assembly, interleaved", OPT_FLAG(AA, ao.source) },
	{ .name = "max-bytes", .metavar = "N", .help = "longest code shown per symbol "
	  "(default 65536)", OPT_UINT(AA, ao.max_bytes, 1, 16u << 20) },
	{ .name = "SYMBOL", .help = "only this symbol (default: every sampled symbol)",
	  .flags = OPTS_POSITIONAL },
	{ 0 },
};
#undef AA

static const char annotate_usage[] =
	"usage: opvm annotate [--assembly] [--source] [SYMBOL] [PROFILE SPEC...]\n"
	"                     [options]\n"
	"\n";

static void note(const char *msg, void *arg)
{
	int *count = arg;
	char safe[1024];

	/* Symbol and image names come from the guest. */
	(*count)++;
	log_warn("%s", text_escape(safe, sizeof(safe), msg));
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

/* Loads the session and annotates it to stdout: 0, or 1 after printing. */
static int annotate_run(struct annotate_args *a, const char *symbol)
{
	struct report_cli *c = &a->cli;
	struct symres *res = NULL;
	struct report *r = NULL;
	FILE *out = NULL;
	char err[512];
	int ret = 1, notes = 0;
	long n;

	report_cli_finish(c);
	res = cmd_symres_new(c);
	if (!res)
		goto out;
	c->ro.symbols = 1;
	c->ro.details = 1;
	c->ro.only_symbol = symbol;
	c->ro.res = res;
	r = report_load(&c->ro, err, sizeof(err));
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
	n = report_annotate(out, r, res, &a->ao, note, &notes);
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
	report_cli_release(c);
	if (fflush(stdout) && !ret)
		ret = 1;
	return ret;
}

int cmd_annotate(int argc, char **argv)
{
	struct annotate_args a = { 0 };
	const struct opt_group groups[] = {
		{ NULL, annotate_options, &a }, { NULL, report_cli_options, &a.cli }, { 0 },
	};
	const struct opts_cmd cmd = { .name = "annotate", .usage = annotate_usage,
				      .groups = groups };
	const char *symbol = NULL;
	int r;

	report_cli_init(&a.cli);
	r = opts_parse(&cmd, argc, argv, NULL, NULL);
	if (r)
		return r == 1 ? 0 : 2;
	if (annotate_args(&a.cli, argc, argv, &symbol))
		return 2;
	if (!a.ao.assembly && !a.ao.source)
		a.ao.assembly = 1;
	a.ao.threshold = a.cli.threshold;
	return annotate_run(&a, symbol);
}
