// SPDX-License-Identifier: MIT
/*
 * opvm report: opreport for guests.  Summary by guest, application and
 * image; -l symbols; --details per-instruction samples; JSON; differential
 * reports between two sessions.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "lib/array.h"
#include "lib/log.h"
#include "lib/numparse.h"
#include "host/report/report-cli.h"

struct report_args {
	struct report_cli cli;
	int symbols, details, json, long_names, width, depth, callgraph;
	enum report_sort sort;
	const char *diff;
	const char *imports[16];
	size_t nr_imports;
};

static int opt_sort(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct report_args *a = base;

	if (!report_parse_sort(arg, &a->sort))
		return 0;
	num_bad_value(err, errlen, opt, arg, "samples, symbol, image, app or cgroup");
	return -1;
}

static int opt_import(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct report_args *a = base;

	(void)opt;
	if (a->nr_imports < ARRAY_SIZE(a->imports)) {
		a->imports[a->nr_imports++] = arg;
		return 0;
	}
	snprintf(err, errlen, "at most %zu --import options", ARRAY_SIZE(a->imports));
	return -1;
}

static const struct opt_enum report_by[] = {
	{ "guest", 1 }, { "app", 2 }, { "image", 3 }, { 0 },
};
static const struct opt_enum report_formats[] = { { "text", 0 }, { "json", 1 }, { 0 } };

#define RA struct report_args
static const struct opt_def report_options[] = {
	{ .name = "symbols", .key = 'l', .help = "list symbols", OPT_FLAG(RA, symbols) },
	{ .name = "details", .help = "per-instruction samples for each symbol",
	  OPT_FLAG(RA, details) },
	{ .name = "callgraph", .key = 'c', .help = "callers and callees of each symbol, as "
	  "opreport -c (sessions recorded with -g)", OPT_FLAG(RA, callgraph) },
	{ .name = "long-filenames", .key = 'f', .help = "full paths instead of basenames",
	  OPT_FLAG(RA, long_names) },
	{ .name = "sort", .metavar = "KEY", .help = "samples (default), symbol, image, app, "
	  "cgroup", OPT_CALLBACK(opt_sort) },
	{ .name = "by", .metavar = "guest|app|image", .help = "summary down to guests, "
	  "applications or images (default image)", OPT_ENUM(RA, depth, report_by) },
	{ .name = "format", .metavar = "text|json", .help = "json: one object (see "
	  "docs/reports.md)", OPT_ENUM(RA, json, report_formats) },
	{ .name = "diff", .metavar = "DIR|previous", .help = "compare against session DIR "
	  "(or samples/previous)", OPT_STRING(RA, diff) },
	{ .name = "width", .metavar = "N", .help = "columns (default 80)",
	  OPT_UINT(RA, width, 40, 1000), .want = "40 to 1000 columns" },
	{ .name = "import", .metavar = "FILE", .help = "add a binary to the session's "
	  "build-id cache (SESSION/.build-id), where reports look first",
	  OPT_CALLBACK(opt_import) },
	{ 0 },
};
#undef RA

static const char report_usage[] =
	"usage: opvm report [options] [PROFILE SPEC...]\n"
	"       opvm report [options] { A options } { B options }   (differential)\n"
	"\n";

/* Parses argv into a; returns 0, -1 after --help, or the exit code for a
 * usage error. */
static int parse(int argc, char **argv, struct report_args *a)
{
	const struct opt_group groups[] = {
		{ NULL, report_options, a }, { NULL, report_cli_options, &a->cli }, { 0 },
	};
	const struct opts_cmd cmd = { .name = "report", .usage = report_usage,
				      .groups = groups };
	char err[256];
	int r = opts_parse(&cmd, argc, argv, NULL, NULL);

	if (r)
		return r == 1 ? -1 : r;
	/* each of these lists symbols */
	a->symbols |= a->details | a->callgraph;
	if (report_cli_specs(&a->cli, argc, argv, optind, err, sizeof(err))) {
		log_err("%s", err);
		return 2;
	}
	return 0;
}

static struct report *load(struct report_args *a, struct symres *res)
{
	char err[512];
	struct report *r;

	a->cli.ro.symbols = a->symbols;
	a->cli.ro.details = a->details;
	a->cli.ro.res = res;
	a->cli.ro.sort = a->sort;	/* sorted once, as loaded */
	if (a->sort == REPORT_SORT_CGROUP)
		a->cli.ro.keep |= REPORT_KEEP_CGROUP;	/* rows per cgroup */
	r = report_load(&a->cli.ro, err, sizeof(err));
	if (!r) {
		log_err("%s", err);
		return NULL;
	}
	/* the call chains of a -g session: --callgraph, and JSON's stacks */
	if ((a->callgraph || a->json) && report_stacks_load(r, &a->cli.ro)) {
		log_err("out of memory for the call chains");
		report_free(r);
		return NULL;
	}
	return r;
}

/* Splits "{ A... } { B... }" into two argument vectors that each start
 * with the common arguments.  Returns 1 if braces were found, 0 if not,
 * -1 on a malformed use. */
static int split_groups(int argc, char **argv, char ***va, int *na, char ***vb, int *nb)
{
	int group = -1, seen = 0;

	*va = calloc((size_t)argc + 1, sizeof(char *));
	*vb = calloc((size_t)argc + 1, sizeof(char *));
	if (!*va || !*vb)
		return -1;
	(*va)[0] = (*vb)[0] = argv[0];
	*na = *nb = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "{")) {
			if (group != -1 || seen >= 2)
				return -1;
			group = seen++;
		} else if (!strcmp(argv[i], "}")) {
			if (group == -1)
				return -1;
			group = -1;
		} else if (group == 0) {
			(*va)[(*na)++] = argv[i];
		} else if (group == 1) {
			(*vb)[(*nb)++] = argv[i];
		} else {
			(*va)[(*na)++] = argv[i];
			(*vb)[(*nb)++] = argv[i];
		}
	}
	if (group != -1 || (seen != 0 && seen != 2))
		return -1;
	return seen == 2;
}

/* --import FILE...: copies them into the session's build-id cache.  0, or
 * -1 after printing. */
static int import_files(const struct report_args *a)
{
	for (size_t i = 0; i < a->nr_imports; i++) {
		char where[4096];
		int r = symres_import(a->cli.ro.session_dir, a->imports[i], where, sizeof(where));

		if (r) {
			log_err("--import %s: %s", a->imports[i],
				r == -ENOEXEC ? "not an ELF file opvm can read" :
				r == -ENODATA ? "no build-id note (link with -Wl,--build-id)" :
				strerror(-r));
			return -1;
		}
		log_info("imported %s as %s", a->imports[i], where);
	}
	return 0;
}

/* The text report: header, summary, symbols or call graph, footer.
 * 0, or 1 after an error message. */
static int print_text(FILE *out, const struct report_args *a, const struct report *ra,
		      const struct report_print_opts *po)
{
	report_print_header(out, ra);
	fputc('\n', out);
	if (a->callgraph && !ra->stack_guests) {
		log_err("--callgraph: this session has no call chains; record with -g "
			"(opvm run -g, opvm attach -g)");
		return 1;
	}
	if (a->callgraph) {
		if (report_print_callgraph(out, ra, po)) {
			log_err("cannot write the call graph: %s", strerror(errno));
			return 1;
		}
	} else if (a->symbols) {
		report_print_symbols(out, ra, po);
	} else {
		report_print_summary(out, ra, po);
	}
	report_print_footer(out, ra);
	return 0;
}

/* argv into a, and into b for a differential report ({ A } { B }, or
 * --diff: b is then the session, a the baseline).  0 to go on, else the
 * exit code. */
static int parse_all(int argc, char **argv, struct report_args *a, struct report_args *b,
		     int *diff)
{
	char **va = NULL, **vb = NULL;
	int na, nb, ret;

	*diff = split_groups(argc, argv, &va, &na, &vb, &nb);
	if (*diff < 0) {
		log_err("a differential report takes two groups: { A options } { B options }");
		ret = 2;
		goto out;
	}
	*b = *a;
	ret = parse(*diff ? na : argc, *diff ? va : argv, a);
	if (!ret && *diff) {
		ret = parse(nb, vb, b);
	} else if (!ret && a->diff) {
		/* --diff DIR: DIR is the baseline (A), the session is B. */
		*b = *a;
		if (!strcmp(a->diff, "previous"))
			a->cli.ro.which = "previous";
		else
			a->cli.ro.session_dir = a->diff;
		*diff = 1;
	}
	if (ret < 0)
		ret = -1;	/* --help */
out:
	free(va);
	free(vb);
	return ret;
}

/*
 * A report's rows, images and symbols are freed one by one only where a
 * leak checker looks (sanitized builds): the process ends right after, the
 * kernel takes its memory back at once, and freeing 100 k rows and 300 ELF
 * images piece by piece took 5 % of a large report's time.
 */
#if defined(__SANITIZE_ADDRESS__)
#define FREE_AT_EXIT	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FREE_AT_EXIT	1
#endif
#endif
#ifndef FREE_AT_EXIT
#define FREE_AT_EXIT	0
#endif

/* Loads the session(s) and writes the report to out: 0, or 1 after
 * printing. */
static int report_write(FILE *out, struct report_args *a, struct report_args *b, int diff,
			struct symres *res)
{
	struct report_print_opts po = {
		.threshold = a->cli.threshold, .width = a->width, .long_names = a->long_names,
		.details = a->details, .depth = a->depth,
	};
	struct report *ra, *rb = NULL;
	int ret = 1;

	ra = load(a, res);
	if (!ra)
		return 1;
	if (diff) {
		b->symbols = a->symbols;
		b->details = 0;
		rb = load(b, res);
		if (rb && a->json)
			ret = report_print_diff_json(out, ra, rb, &po) ? 1 : 0;
		else if (rb)
			ret = (report_print_diff(out, ra, rb, &po), 0);
	} else if (a->json) {
		ret = report_print_json(out, ra, &po) ? 1 : 0;
		if (ret)
			log_err("cannot write JSON: %s", strerror(errno));
	} else {
		ret = print_text(out, a, ra, &po);
	}
	if (FREE_AT_EXIT) {
		report_free(ra);
		report_free(rb);
	}
	return ret;
}

int cmd_report(int argc, char **argv)
{
	struct report_args a = { .width = 80 }, b;
	struct symres *res = NULL;
	FILE *out = NULL;
	int diff, ret;

	report_cli_init(&a.cli);
	ret = parse_all(argc, argv, &a, &b, &diff);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	if (a.json)
		a.symbols = b.symbols = 1;
	if (import_files(&a))
		goto out;
	report_cli_finish(&a.cli);
	if (a.symbols && !(res = cmd_symres_new(&a.cli)))
		goto out;
	out = report_cli_safe_stream(stdout);
	if (!out) {
		log_err("cannot set up output: %s", strerror(errno));
		goto out;
	}
	ret = report_write(out, &a, &b, diff, res);
out:
	if (out && fclose(out) && !ret) {
		log_err("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	if (FREE_AT_EXIT || ret) {
		symres_free(res);
		report_cli_release(&a.cli);
	}
	if (fflush(stdout) && !ret) {
		log_err("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	return ret;
}

static void dbgd_progress(void *arg, const char *build_id, uint64_t done, uint64_t total)
{
	if (total)
		log_info("debuginfod: %.16s...: %.1f of %.1f MB", build_id, done / 1e6, total / 1e6);
	else
		log_info("debuginfod: %.16s...: %.1f MB", build_id, done / 1e6);
}

struct symres *cmd_symres_new(struct report_cli *c)
{
	struct symres *res;

	c->sc.progress = dbgd_progress;
	res = symres_new(&c->sc);
	if (!res)
		log_err("cannot set up symbol lookup: %s", strerror(errno));
	return res;
}
