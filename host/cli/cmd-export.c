// SPDX-License-Identifier: MIT
/*
 * opvm export: the report's symbols for other tools, in a format of
 * host/report/export.c's registry (--format NAME; --help lists them).
 * What a format can do is asked of its struct export_ops, never of its
 * name: whether it may write to stdout (else -o FILE), draws against a
 * --diff baseline, writes an empty profile (--empty-ok), wants per-address
 * counts or cgroup rows.
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
#include "lib/numparse.h"
#include "host/report/report-cli.h"

struct export_args {
	struct report_cli cli;
	const struct export_ops *fmt;	/* --format, from the registry */
	const char *out, *title, *diff;
	int out_dash;			/* -o -: stdout, text formats only */
	int empty_ok;
};

/* --format's value and help, and which formats the other options serve,
 * come from the registry (export_options_fill). */
static char format_names[128], format_help[1024], usage[256];
static char out_help[256], diff_help[256], empty_help[256];

static int opt_format(void *base, const char *opt, char *arg, char *err, size_t errlen);
static int opt_output(void *base, const char *opt, char *arg, char *err, size_t errlen);

#define EA struct export_args
static const struct opt_def export_options[] = {
	{ .name = "format", .metavar = format_names, .help = format_help,
	  OPT_CALLBACK(opt_format) },
	{ .name = "output", .key = 'o', .metavar = "FILE", .help = out_help,
	  OPT_CALLBACK(opt_output) },
	{ .name = "title", .metavar = "TEXT", .help = "title of the HTML page",
	  OPT_STRING(EA, title) },
	{ .name = "diff", .metavar = "DIR|previous", .help = diff_help,
	  OPT_STRING(EA, diff) },
	{ .name = "empty-ok", .help = empty_help,
	  OPT_FLAG(EA, empty_ok) },
	{ 0 },
};
#undef EA

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

/* --format's metavar, its help, the usage line and the formats -o -,
 * --diff and --empty-ok serve, from the registry. */
static void export_options_fill(void)
{
	char n[128];

	export_names(format_names, sizeof(format_names), 0, "|", "|");
	export_help(format_help, sizeof(format_help));
	snprintf(out_help, sizeof(out_help), "where to write; - is stdout (%s: the default)",
		 export_names(n, sizeof(n), EXPORT_TEXT, ", ", ", "));
	snprintf(diff_help, sizeof(diff_help), "%s: differential flame graph, baseline "
		 "session DIR (or samples/previous): red grew, blue shrank",
		 export_names(n, sizeof(n), EXPORT_DIFF, ", ", ", "));
	snprintf(empty_help, sizeof(empty_help), "%s: a session that took no sample gives a "
		 "profile without samples, not an error",
		 export_names(n, sizeof(n), EXPORT_EMPTY, ", ", ", "));
	snprintf(usage, sizeof(usage), "usage: opvm export --format %s [-o FILE]\n"
		 "                   [PROFILE SPEC...] [options]\n\n", format_names);
}

/* --format NAME, from the registry. */
static int opt_format(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct export_args *a = base;
	char names[128];

	a->fmt = export_find(arg);
	if (a->fmt)
		return 0;
	num_bad_value(err, errlen, opt, arg, export_names(names, sizeof(names), 0, ", ", " or "));
	return -1;
}

/* -o FILE; "-": stdout, as every tool that takes -o reads it. */
static int opt_output(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct export_args *a = base;

	(void)opt, (void)err, (void)errlen;
	a->out = strcmp(arg, "-") ? arg : NULL;
	a->out_dash = !a->out;
	return 0;
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

	/* current/ first; else a window's (--since/--until over a store
	 * whose range holds none) or previous/ */
	snprintf(pat, sizeof(pat), "%s/guests/*/samples/current/session.json", dir);
	if (glob(pat, 0, NULL, &g) || !g.gl_pathc) {
		globfree(&g);
		memset(&g, 0, sizeof(g));
		snprintf(pat, sizeof(pat), "%s/guests/*/samples/*/session.json", dir);
		glob(pat, 0, NULL, &g);
	}
	if (g.gl_pathc)
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
			 text_escape(eb, sizeof(eb), r->stack_err));
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
static int write_out(const char *out, const struct export_ops *fmt,
		     const struct export_in *in)
{
	const struct report *r = in->r;
	char *tmp = NULL;
	FILE *f;
	int n;

	/* Text to stdout goes through the control-byte filter; files, and a
	 * binary format on a pipe (-o -), are written as they are. */
	f = out ? open_out(out, &tmp) : (fmt->flags & EXPORT_TEXT) ?
		report_cli_safe_stream(stdout) : fdopen(fcntl(1, F_DUPFD_CLOEXEC, 3), "w");
	if (!f) {
		log_err("cannot write %s: %s", out ? out : "to stdout", strerror(errno));
		free(tmp);
		return -1;
	}
	n = fmt->write(f, in);
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
static int write_empty(const struct export_ops *fmt, const char *dir, const char *out,
		       struct symres *res)
{
	char ev[64];
	uint64_t count;
	struct report none = { .event = ev };
	struct export_in in = { .r = &none, .res = res, .exporter = "opvm " OPVM_VERSION };

	if (empty_event(dir ? dir : "./opvm_data", ev, sizeof(ev), &count))
		return -1;
	none.event_count = count;
	return write_out(out, fmt, &in) ? 1 : 0;
}

/* The options and arguments: 0 to go on, else the exit code. */
static int export_parse(int argc, char **argv, struct export_args *a)
{
	const struct opt_group groups[] = {
		{ NULL, export_options, a }, { NULL, report_cli_options, &a->cli }, { 0 },
	};
	const struct opts_cmd cmd = { .name = "export", .usage = usage, .groups = groups };
	char err[512];
	int r = opts_parse(&cmd, argc, argv, NULL, NULL);

	if (r)
		return r == 1 ? -1 : r;
	if (report_cli_specs(&a->cli, argc, argv, optind, err, sizeof(err))) {
		log_err("%s", err);
		return 2;
	}
	if (!a->fmt) {
		char names[128];

		log_err("say which format: --format %s",
			export_names(names, sizeof(names), 0, ", ", " or "));
		opts_help(stderr, &cmd);
		return 2;
	}
	if (a->diff && !(a->fmt->flags & EXPORT_DIFF)) {
		char names[128];

		log_err("--diff draws a differential flame graph: use it with --format %s "
			"(for pprof, export both sessions and use go tool pprof -diff_base)",
			export_names(names, sizeof(names), EXPORT_DIFF, ", ", " or "));
		return 2;
	}
	if (!a->out && !(a->fmt->flags & EXPORT_TEXT) && !(a->out_dash && !isatty(1))) {
		/* the format's usual ending makes the example a name tools know */
		log_err("%s output is binary or a whole page: give -o FILE (e.g. -o profile%s)",
			a->fmt->name, a->fmt->ext);
		return 2;
	}
	return 0;
}

int cmd_export(int argc, char **argv)
{
	struct export_args a = { .fmt = NULL };
	struct report_cli *c = &a.cli;
	struct symres *res = NULL;
	struct report *r = NULL, *base = NULL;
	struct export_in in;
	char err[512];
	int ret, n;

	export_options_fill();
	report_cli_init(c);
	ret = export_parse(argc, argv, &a);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	report_cli_finish(c);
	res = cmd_symres_new(c);
	if (!res)
		goto out;
	c->ro.symbols = 1;
	c->ro.res = res;
	/* pprof: per-address counts, for lines and `go tool pprof -list` */
	c->ro.details = !!(a.fmt->flags & EXPORT_DETAILS);
	if (a.fmt->flags & EXPORT_CGROUP)
		c->ro.keep |= REPORT_KEEP_CGROUP;
	r = report_load(&c->ro, err, sizeof(err));
	if (!r && errno == ENOENT && a.empty_ok && (a.fmt->flags & EXPORT_EMPTY) &&
	    (n = write_empty(a.fmt, c->ro.session_dir, a.out, res)) >= 0) {
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
	in = (struct export_in){ .r = r, .base = base, .res = res, .title = a.title,
				 .exporter = "opvm " OPVM_VERSION };
	ret = write_out(a.out, a.fmt, &in) ? 1 : 0;
out:
	report_free(r);
	report_free(base);
	symres_free(res);
	report_cli_release(c);
	return ret;
}
