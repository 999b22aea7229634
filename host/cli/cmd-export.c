// SPDX-License-Identifier: MIT
/*
 * opvm export: the report's symbols for other tools.
 *   --format pprof  -o FILE   gzip'd profile.proto (go tool pprof)
 *   --format folded [-o FILE] "guest;process;image;symbol count" lines
 *   --format html   -o FILE   one self-contained page with a flame graph
 *   --format speedscope [-o FILE]  speedscope's JSON file format
 *   --diff DIR|previous       html: differential against that baseline
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "lib/log.h"
#include "host/report/report-cli.h"

enum { OPT_TITLE = RCLI_END, OPT_DIFF, OPT_EMPTY_OK, OPT_FORMAT };
enum fmt { FMT_NONE, FMT_PPROF, FMT_FOLDED, FMT_HTML, FMT_SPEEDSCOPE };

struct export_args {
	struct report_cli cli;
	enum fmt fmt;
	const char *out, *title, *diff;
	int empty_ok;
};

static const struct opt_def export_options[] = {
	{ "format", OPT_FORMAT, "pprof|folded|html|speedscope", "pprof: gzip'd pprof profile "
	  "(go tool pprof -top FILE); folded: guest;process;image;symbol count "
	  "(flamegraph.pl); html: self-contained interactive flame graph; speedscope: "
	  "JSON for speedscope (https://www.speedscope.app)", 0 },
	{ "output", 'o', "FILE", "where to write (folded, speedscope: default stdout)", 0 },
	{ "title", OPT_TITLE, "TEXT", "title of the HTML page", 0 },
	{ "diff", OPT_DIFF, "DIR|previous", "html: differential flame graph, baseline "
	  "session DIR (or samples/previous): red grew, blue shrank", 0 },
	{ "empty-ok", OPT_EMPTY_OK, NULL, "pprof: a session that took no sample gives a "
	  "profile without samples, not an error", 0 },
	{ 0 },
};

static const struct opts_cmd export_cmd = {
	.name = "export",
	.usage = "usage: opvm export --format pprof|folded|html|speedscope [-o FILE]\n"
		 "                   [PROFILE SPEC...] [options]\n"
		 "\n",
	.groups = (const struct opt_group[]){
		{ NULL, export_options }, { NULL, report_cli_options }, { NULL } },
};

/*
 * Whether -o path is written in place rather than replaced: what is there
 * and is not a file (a FIFO, a terminal, /dev/stdout and the like) is
 * written through (truncated, as a shell's > does, where it leads to one); renamed over, it would be replaced by a file
 * (/dev/stdout, as root) and the temporary would land beside it (in /dev).
 * Only what root or the caller owns: a link or FIFO another local user
 * planted at the path is replaced, as a file is, never followed.
 */
static bool in_place(const char *path)
{
	struct stat l;

	return !lstat(path, &l) && !S_ISREG(l.st_mode) && !S_ISDIR(l.st_mode) &&
	       (l.st_uid == 0 || l.st_uid == geteuid());
}

/* Writes to a temporary file next to path and renames it into place, so
 * that a failed export never leaves half a file under the final name; or
 * in place (*tmp NULL), as in_place() says. */
static FILE *open_out(const char *path, char **tmp)
{
	int fd;

	*tmp = NULL;
	if (in_place(path)) {
		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
		return fd < 0 ? NULL : fdopen(fd, "w");
	}
	if (asprintf(tmp, "%s.tmpXXXXXX", path) < 0) {
		*tmp = NULL;
		return NULL;
	}
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		free(*tmp);
		*tmp = NULL;
		return NULL;
	}
	fchmod(fd, 0644);
	return fdopen(fd, "w");
}

/* --format NAME, or FMT_NONE after printing. */
static enum fmt parse_format(const char *name)
{
	if (!strcmp(name, "pprof"))
		return FMT_PPROF;
	if (!strcmp(name, "folded"))
		return FMT_FOLDED;
	if (!strcmp(name, "html"))
		return FMT_HTML;
	if (!strcmp(name, "speedscope"))
		return FMT_SPEEDSCOPE;
	log_err("--format '%s': use pprof, folded, html or speedscope", name);
	return FMT_NONE;
}

static int write_format(FILE *f, enum fmt fmt, const struct report *r,
			const struct report *base, struct symres *res, const char *title)
{
	switch (fmt) {
	case FMT_PPROF:
		return report_export_pprof(f, r, res);
	case FMT_FOLDED:
		return report_export_folded(f, r);
	case FMT_HTML:
		return report_export_html(f, r, base, title);
	case FMT_SPEEDSCOPE:
		return report_export_speedscope(f, r, "opvm " OPVM_VERSION);
	default:
		return -EINVAL;
	}
}

/* --empty-ok: the event a session without sample files was recorded with
 * (its first guest's session.json), for a profile without samples.  0, or
 * -1 when there is none to tell. */
static int empty_event(const char *dir, char *name, size_t len, uint64_t *count)
{
	char pat[PATH_MAX];
	glob_t g = { 0 };
	json_t *root = NULL, *ev;
	int ret = -1;

	snprintf(pat, sizeof(pat), "%s/guests/*/samples/current/session.json", dir);
	if (!glob(pat, 0, NULL, &g) && g.gl_pathc)
		root = json_load_file(g.gl_pathv[0], 0, NULL);
	ev = json_array_get(json_object_get(root, "events"), 0);
	if (json_is_string(json_object_get(ev, "name"))) {
		snprintf(name, len, "%s", json_string_value(json_object_get(ev, "name")));
		*count = (uint64_t)json_integer_value(json_object_get(ev, "count"));
		ret = 0;
	}
	json_decref(root);
	globfree(&g);
	return ret;
}

/* The call chains of a -g session (real stacks); a table that does not
 * read is said, and the export goes on without it.  0 or -ENOMEM. */
static int stacks_load(struct report *r, const struct report_opts *o)
{
	char eb[sizeof(r->stack_err) * 4];

	if (report_stacks_load(r, o))
		return -ENOMEM;
	if (r->stack_errors)
		log_warn("the call stacks of %zu guest%s could not be read, exported without "
			 "their call chains: %s", r->stack_errors, r->stack_errors == 1 ? "" : "s",
			 util_text_escape(eb, sizeof(eb), r->stack_err));
	return 0;
}

/* --diff DIR: DIR (or samples/previous) is the baseline.  NULL after
 * printing why. */
static struct report *load_base(const struct report_opts *ro, const char *diff)
{
	struct report_opts bo = *ro;
	struct report *base;
	char err[512];

	if (!strcmp(diff, "previous"))
		bo.which = "previous";
	else
		bo.session_dir = diff;
	base = report_load(&bo, err, sizeof(err));
	if (base && stacks_load(base, &bo)) {
		report_free(base);
		base = NULL;
		snprintf(err, sizeof(err), "out of memory for the call chains");
	}
	if (!base)
		log_err("baseline %s: %s", diff, err);
	return base;
}

/* --threshold drops small rows from every format. */
static void drop_below(struct report *r, double threshold)
{
	size_t keep = 0;

	if (threshold <= 0)
		return;
	for (size_t i = 0; i < r->nr_rows; i++)
		if (r->rows[i].percent >= threshold)
			r->rows[keep++] = r->rows[i];
		else
			free(r->rows[i].addrs);
	r->nr_rows = keep;
}

/* The export to out (a temporary file renamed into place) or stdout.
 * 0, or -1 after saying what failed. */
static int write_out(const char *out, enum fmt fmt, const struct report *r,
		     const struct report *base, struct symres *res, const char *title)
{
	char *tmp = NULL;
	FILE *f;
	int n;

	/* Folded text to a terminal goes through the control-byte filter;
	 * files are written as they are (names stay exact). */
	f = out ? open_out(out, &tmp) : report_cli_safe_stream(stdout);
	if (!f) {
		log_err("cannot write %s: %s", out ? out : "to stdout", strerror(errno));
		free(tmp);
		return -1;
	}
	n = write_format(f, fmt, r, base, res, title);
	if (fclose(f) && !n)
		n = -errno;
	if (tmp) {
		if (!n && rename(tmp, out))
			n = -errno;
		if (n)
			unlink(tmp);
	}
	free(tmp);
	if (n) {
		log_err("cannot write %s: %s", out ? out : "the export", strerror(-n));
		return -1;
	}
	if (out)
		log_info("wrote %s: %zu symbols, %llu samples", out, r->nr_rows,
			 (unsigned long long)r->total);
	return 0;
}

/* --empty-ok, a session without sample files: a pprof profile of its event
 * without samples.  The exit code, or -1 if the event is not known. */
static int write_empty(const char *dir, const char *out, struct symres *res)
{
	char ev[64];
	uint64_t count;
	struct report none = { .event = ev };

	if (empty_event(dir ? dir : "./opvm_data", ev, sizeof(ev), &count))
		return -1;
	none.event_count = count;
	return write_out(out, FMT_PPROF, &none, NULL, res, NULL) ? 1 : 0;
}

/* One option of export_cmd: 0, or -1 after printing. */
static int export_opt(void *ctx, int key, char *arg)
{
	struct export_args *a = ctx;
	char err[256];
	int r;

	switch (key) {
	case OPT_FORMAT:
		a->fmt = parse_format(arg);
		return a->fmt == FMT_NONE ? -1 : 0;
	case 'o':
		a->out = arg;
		return 0;
	case OPT_TITLE:
		a->title = arg;
		return 0;
	case OPT_DIFF:
		a->diff = arg;
		return 0;
	case OPT_EMPTY_OK:
		a->empty_ok = 1;
		return 0;
	}
	r = report_cli_opt(&a->cli, key, arg, err, sizeof(err));
	if (r < 0)
		log_err("%s", err);
	return r < 0 ? -1 : 0;
}

/* The options and arguments: 0 to go on, else the exit code. */
static int export_parse(int argc, char **argv, struct export_args *a)
{
	char err[512];
	int r = opts_parse(&export_cmd, argc, argv, export_opt, a);

	if (r)
		return r == 1 ? -1 : r;
	if (report_cli_specs(&a->cli, argc, argv, optind, err, sizeof(err))) {
		log_err("%s", err);
		return 2;
	}
	if (a->fmt == FMT_NONE) {
		log_err("say which format: --format pprof, folded, html or speedscope");
		opts_help(stderr, &export_cmd);
		return 2;
	}
	if (a->diff && a->fmt != FMT_HTML) {
		log_err("--diff draws a differential flame graph: use it with --format html "
			"(for pprof, export both sessions and use go tool pprof -diff_base)");
		return 2;
	}
	if (!a->out && a->fmt != FMT_FOLDED && a->fmt != FMT_SPEEDSCOPE) {
		log_err("%s output is binary or a whole page: give -o FILE",
			a->fmt == FMT_PPROF ? "pprof" : "html");
		return 2;
	}
	return 0;
}

int cmd_export(int argc, char **argv)
{
	struct export_args a = { .fmt = FMT_NONE };
	struct report_cli *c = &a.cli;
	struct symres *res = NULL;
	struct report *r = NULL, *base = NULL;
	char err[512];
	int ret, n;

	report_cli_init(c);
	ret = export_parse(argc, argv, &a);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	report_cli_finish(c);
	c->sc.progress = cmd_dbgd_progress;
	res = symres_new(&c->sc);
	if (!res) {
		log_err("cannot set up symbol lookup: %s", strerror(errno));
		goto out;
	}
	c->ro.symbols = 1;
	c->ro.res = res;
	/* pprof: per-address counts, for lines and `go tool pprof -list` */
	c->ro.details = a.fmt == FMT_PPROF;
	r = report_load(&c->ro, err, sizeof(err));
	if (!r && errno == ENOENT && a.empty_ok && a.fmt == FMT_PPROF &&
	    (n = write_empty(c->ro.session_dir, a.out, res)) >= 0) {
		ret = n;
		goto out;
	}
	if (!r) {
		log_err("%s", err);
		goto out;
	}
	if (stacks_load(r, &c->ro)) {
		log_err("out of memory for the call chains");
		goto out;
	}
	if (a.diff && !(base = load_base(&c->ro, a.diff)))
		goto out;
	drop_below(r, c->threshold);
	ret = write_out(a.out, a.fmt, r, base, res, a.title) ? 1 : 0;
out:
	report_free(r);
	report_free(base);
	symres_free(res);
	report_cli_release(c);
	return ret;
}
