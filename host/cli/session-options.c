// SPDX-License-Identifier: MIT
/*
 * A session's command line (host/cli/session.h): the session's option rows,
 * bound to struct session_opts, and the parse of run's and attach's argv by
 * three tables at once, the command's, the chosen backend's and the
 * session's (the backend is named by an option that may come anywhere, so
 * a quiet first pass finds it).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/cli/options.h"
#include "host/cli/session.h"
#include "host/collect/fetch.h"
#include "host/collect/store.h"
#include "lib/array.h"
#include "lib/log.h"
#include "lib/numparse.h"
#include "vmm/backend.h"
#include "vmm/introspect/introspect.h"
#include "vmm/sampler.h"

/* -e SPEC, up to OPVM_MAX_EVENTS: each backend reads them in prepare(). */
static int opt_event(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct backend_common *c = &((struct session_opts *)base)->common;

	(void)opt;
	if (c->nr_event_specs >= OPVM_MAX_EVENTS) {
		snprintf(err, errlen, "at most %d events at once", OPVM_MAX_EVENTS);
		return -1;
	}
	c->event_specs[c->nr_event_specs++] = arg;
	return 0;
}

static int opt_separate(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct session_opts *o = base;

	if (store_parse_separate(arg, &o->separate)) {
		num_bad_value(err, errlen, opt, arg, "none, lib, kernel, thread, cpu or all");
		return -1;
	}
	o->separate_set = 1;
	return 0;
}

static int opt_from_exec(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct session_opts *o = base;

	if (!*arg || strchr(arg, '/') || strlen(arg) >= 64) {
		num_bad_value(err, errlen, opt, arg, "an executable's base name (abratio)");
		return -1;
	}
	o->from_exec = arg;
	return 0;
}

enum sym_kind { SYM_ROOT, SYM_MAP, SYM_VMLINUX };

/* --guest-root, --system-map, --vmlinux: kept as absolute paths, so a
 * report run from another directory finds them.  A path that is not there
 * is a usage error now rather than [unknown] symbols later. */
static int opt_symbols(struct session_opts *o, enum sym_kind k, const char *opt,
		       const char *arg, char *err, size_t errlen)
{
	static const char *const what[] = { "root file system (a directory)",
					    "System.map (or /proc/kallsyms copy)",
					    "kernel image (vmlinux or vmlinuz)" };
	const char *path = arg, *eq = strchr(arg, '=');
	char *buf, abs[PATH_MAX];
	int prefix = 0;

	if (k == SYM_ROOT && eq && eq > arg && !memchr(arg, '/', (size_t)(eq - arg))) {
		prefix = (int)(eq - arg) + 1;	/* GUEST=DIR */
		path = eq + 1;
	}
	if (k == SYM_ROOT && o->sym.nr_roots >= COLLECTOR_MAX_ROOTS) {
		snprintf(err, errlen, "at most %d --guest-root options", COLLECTOR_MAX_ROOTS);
		return -1;
	}
	if (o->sym_used >= ARRAY_SIZE(o->sym_buf) || prefix > 128 || !realpath(path, abs)) {
		snprintf(err, errlen, "%s %s: %s; give the guest's %s", opt, path,
			 o->sym_used >= ARRAY_SIZE(o->sym_buf) ? "too many symbol options" :
			 strerror(errno ? errno : EINVAL), what[k]);
		return -1;
	}
	buf = o->sym_buf[o->sym_used++];
	snprintf(buf, sizeof(o->sym_buf[0]), "%.*s%s", prefix, arg, abs);
	if (k == SYM_ROOT)
		o->sym.roots[o->sym.nr_roots++] = buf;
	else if (k == SYM_MAP)
		o->sym.system_map = buf;
	else
		o->sym.vmlinux = buf;
	return 0;
}

static int opt_guest_root(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	return opt_symbols(base, SYM_ROOT, opt, arg, err, errlen);
}

static int opt_system_map(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	return opt_symbols(base, SYM_MAP, opt, arg, err, errlen);
}

static int opt_vmlinux(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	return opt_symbols(base, SYM_VMLINUX, opt, arg, err, errlen);
}

static const struct opt_enum callgraph_modes[] = {
	{ "fp", SAMPLER_CG_FP }, { "dwarf", SAMPLER_CG_DWARF }, { 0 },
};
static const struct opt_enum introspect_modes[] = {
	{ "auto", INTROSPECT_AUTO }, { "off", INTROSPECT_OFF }, { "only", INTROSPECT_ONLY },
	{ 0 },
};

#define SO struct session_opts
/* The store's caps take a count with units (--max-files 64k) or a size. */
#define SO_COUNT(f)	OPT_SIZE(SO, f, 1, UINT64_MAX), .want = "a number (64k: k, M, G)"
#define SO_FETCH(f)	OPT_SIZE(SO, f, 4096, UINT64_MAX), .want = "4k or more (64M)"

const struct opt_def session_options[] = {
	{ .name = "rate", .key = 'F', .metavar = "HZ", .help = "samples per second per vCPU "
	  "(timer modes)", OPT_UINT(SO, common.rate, 1, 10000),
	  .want = "samples/s a vCPU, 1 to 10000" },
	{ .name = "event", .key = 'e', .metavar = "SPEC", .help = "event to sample ('opvm "
	  "list-events'), up to 8 with --vmm=kvm; the gdbstub takes TIMER[:period_us] only",
	  OPT_CALLBACK(opt_event) },
	{ .name = "session-dir", .key = 'd', .metavar = "DIR", .help = "where sample trees "
	  "go (default ./opvm_data)", OPT_STRING(SO, common.session_dir) },
	{ .key = 'g', .help = "the same as --call-graph fp",
	  OPT_SET(SO, callgraph.mode, SAMPLER_CG_FP) },
	{ .name = "call-graph", .metavar = "fp|dwarf", .help = "record each sample's call "
	  "chain: user stacks by frame pointers (-g, fp) or by the binaries' DWARF CFI from "
	  "an 8 KiB stack copy (dwarf: --guest-root), kernel stacks by the guest kernel's "
	  "ORC tables (its System.map); gdbstub and qemu backends only",
	  OPT_ENUM(SO, callgraph.mode, callgraph_modes) },
	{ .name = "separate", .metavar = "SPEC", .help = "none, lib, kernel, thread, cpu, all "
	  "(default lib,kernel: a process's kernel time under it; lib: OProfile's layout, the "
	  "kernel an application of its own)", OPT_CALLBACK(opt_separate) },
	{ .name = "duration", .metavar = "S", .help = "stop after S seconds (a guest opvm "
	  "booted is quit)", OPT_DURATION(SO, common.duration_ms, 0.001, 1e7, 1),
	  .want = "seconds, e.g. --duration 30" },
	{ .name = "window", .metavar = "S", .help = "seal the samples every S seconds (1 to "
	  "3600) as samples/w-START-END, a new window each (opvm exporter --continuous; "
	  "opvm report --since/--until read them)", OPT_DURATION(SO, window_s, 1, 3600, 1000),
	  .want = "1 to 3600 seconds" },
	{ .name = "append-samples", .help = "add to the current samples instead of starting "
	  "afresh", OPT_FLAG(SO, append) },
	{ .name = "from-exec", .metavar = "NAME", .help = "file samples from when a process "
	  "NAME starts (its executable's base name); earlier ones are counted",
	  OPT_CALLBACK(opt_from_exec) },
	{ .name = "from-workload", .help = "opvm run --workload W: the same as "
	  "--from-exec with W's name (the first's, without its arguments)",
	  OPT_FLAG(SO, from_workload) },
	{ .name = "max-files", .metavar = "N", .help = "sample files per guest (default "
	  "16384)", SO_COUNT(limits.max_files) },
	{ .name = "max-dirs", .metavar = "N", .help = "directories per guest (default 65536)",
	  SO_COUNT(limits.max_dirs) },
	{ .name = "max-disk", .metavar = "SIZE", .help = "bytes per guest, e.g. 2G (default "
	  "1G); past a cap, samples go to the {overflow} bucket, counted in the summary",
	  OPT_SIZE(SO, limits.max_disk, 1, UINT64_MAX), .want = "a size (bytes, k, M, G)" },
	{ .name = "max-mapped", .metavar = "N", .help = "sample files mapped at once per "
	  "guest (default 256)", SO_COUNT(limits.max_mapped) },
	{ .name = "max-model-mem", .metavar = "SIZE", .help = "memory for one guest's "
	  "processes, mappings and file names (default 64M; all guests together 512M)",
	  OPT_SIZE(SO, model_max_bytes, 1u << 20, UINT64_MAX), .want = "1M or more (128M)" },
	{ .name = "umask", .metavar = "MASK", .help = "session tree modes from MASK, e.g. 022 "
	  "(default: private, directories 0700 and files 0600)",
	  OPT_OCTAL(SO, umask, 0, 0777), .want = "an octal mask (022)" },
	{ .name = "guest-root", .metavar = "[GUEST=]DIR", .help = "the guest's root file "
	  "system, kept in session.json (as --system-map and --vmlinux) so report, annotate "
	  "and export find symbols without flags (default with the test image: "
	  "build/images/...)", OPT_CALLBACK(opt_guest_root) },
	{ .name = "system-map", .metavar = "FILE", .help = "the guest kernel's System.map",
	  OPT_CALLBACK(opt_system_map) },
	{ .name = "vmlinux", .metavar = "FILE", .help = "the guest kernel",
	  OPT_CALLBACK(opt_vmlinux) },
	{ .name = "no-image-symbols", .help = "not those test-image defaults: only what the "
	  "guest sends (its kallsyms) and what is named", OPT_FLAG(SO, no_image_symbols) },
	{ .name = "no-fetch", .help = "keep nothing the guest sends: neither its kernel "
	  "symbols nor its binaries (fetched by build-id for every image with samples, by "
	  "default)", OPT_FLAG(SO, no_fetch) },
	{ .name = "no-python", .help = "read no Python frames: the samplers are never "
	  "told of the guest's CPython processes (docs/runtimes.md)",
	  OPT_FLAG(SO, no_python) },
	{ .name = "fetch-cache", .metavar = "DIR", .help = "the guests' fetched binaries, "
	  "DIR/GUEST/xx/yyyy (default $XDG_CACHE_HOME/opvm/buildid, ~/.cache/opvm/buildid)",
	  OPT_STRING(SO, fetch_cache) },
	{ .name = "fetch-max-file", .metavar = "SIZE", .help = "largest binary taken "
	  "(default 256M)", SO_FETCH(fetch_max_file) },
	{ .name = "fetch-max-session", .metavar = "SIZE", .help = "all of one session "
	  "(default 1G)", SO_FETCH(fetch_max_session) },
	{ .name = "fetch-cache-max", .metavar = "SIZE", .help = "one guest's cache, all "
	  "sessions (default 2G): past it the least recently used files go",
	  SO_FETCH(fetch_max_cache) },
	{ .name = "fetch-max-ksyms", .metavar = "SIZE", .help = "the guest's kernel "
	  "symbols written at most (default and most 32M): the symbols past it are dropped, "
	  "counted (opvm exporter --continuous sets it: the room its store keeps)",
	  OPT_SIZE(SO, fetch_max_ksyms, 4096, FETCH_KSYMS_MAX_BYTES),
	  .want = "4k to 32M (4M)" },
	{ .name = "introspect", .metavar = "auto|off|only", .help = "read the guest kernel's "
	  "symbols from its memory (auto: unless opvm.ko sends them; only: and ignore "
	  "opvm.ko's channel); docs/introspection.md",
	  OPT_ENUM(SO, introspect, introspect_modes) },
	{ 0 },
};
#undef SO_FETCH
#undef SO_COUNT
#undef SO

void session_opts_init(struct session_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->common.session_dir = "./opvm_data";
	o->umask = -1;	/* not given: private */
}

#define CLI_MAX_GROUPS	(3 + 16)

/* The groups of cli's command: its own options, the backends' (all of its
 * kind, or only b, bound to bst), the session's (bound to o).  g has room
 * for 3 + nr_backends. */
static void cli_groups(const struct session_cli *cli, const struct backend_ops *b, void *bst,
		       struct session_opts *o, struct opt_group *g, char (*titles)[48])
{
	size_t n = 0;

	g[n++] = (struct opt_group){ NULL, cli->options, cli->arg };
	for (size_t i = 0; i < nr_backends; i++) {
		if (backends[i]->kind != cli->kind || !backends[i]->options ||
		    (b && backends[i] != b) || n + 2 >= CLI_MAX_GROUPS)
			continue;
		snprintf(titles[n], sizeof(titles[n]), "--%s=%s", cli->select,
			 backends[i]->name);
		g[n] = (struct opt_group){ titles[n], backends[i]->options, bst };
		n++;
	}
	g[n++] = (struct opt_group){ "session", session_options, o };
	g[n] = (struct opt_group){ NULL, NULL, NULL };
}

/* The usage text: cli's header and the backends it offers. */
static void cli_usage(const struct session_cli *cli, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%s\n--%s=NAME, one of:\n", cli->header,
				      cli->select);

	for (size_t i = 0; i < nr_backends && off < len; i++) {
		char name[32];

		if (backends[i]->kind != cli->kind)
			continue;
		/* attach picks its default by the guest (the header says how) */
		snprintf(name, sizeof(name), "%s%s", backends[i]->name,
			 cli->kind == BACKEND_LAUNCH &&
			 backends[i] == backend_find(cli->kind, NULL) ? " (default)" : "");
		off += (size_t)snprintf(buf + off, len - off, "  %-15s%s\n", name,
					backends[i]->help);
	}
	if (off < len)
		snprintf(buf + off, len - off, "\n");
}

/* What the first pass looks for: the select option's value. */
struct find_select {
	const char *select;
	const char *name;
};

static int note_select(void *ctx, const struct opt_def *d, char *arg)
{
	struct find_select *f = ctx;

	if (d && d->name && !strcmp(d->name, f->select))
		f->name = arg;
	return 0;
}

static int unknown_backend(const struct session_cli *cli, const char *name)
{
	char names[256] = "";

	for (size_t i = 0; i < nr_backends; i++) {
		if (backends[i]->kind != cli->kind)
			continue;
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s--%s=%s",
			 names[0] ? " or " : "", cli->select, backends[i]->name);
	}
	log_err("unknown %s '%s': use %s", cli->select, name, names);
	return 2;
}

/* An argument that is not an option, to the command. */
static int take_argument(void *ctx, const struct opt_def *d, char *arg)
{
	const struct session_cli *cli = ctx;

	(void)d;
	return cli->argument(cli->arg, arg);
}

int session_parse_argv(const struct session_cli *cli, int argc, char **argv,
		       struct session_opts *o, const struct backend_ops **b, void **bst)
{
	struct opt_group all[CLI_MAX_GROUPS], used[CLI_MAX_GROUPS];
	char titles[CLI_MAX_GROUPS][48], usage[2048];
	struct opts_cmd c = { .name = cli->command, .usage = usage, .groups = all,
			      .flags = OPTS_IN_ORDER | OPTS_QUIET };
	struct find_select f = { cli->select, NULL };
	int ret;

	cli_groups(cli, NULL, NULL, NULL, all, titles);
	cli_usage(cli, usage, sizeof(usage));
	/* the select option may come anywhere: a first pass finds it */
	opts_parse(&c, argc, argv, note_select, &f);
	*b = backend_find(cli->kind, f.name);
	*bst = NULL;
	if (!*b)
		return unknown_backend(cli, f.name);
	*bst = (*b)->new();
	if (!*bst) {
		log_err("out of memory");
		return 2;
	}
	cli_groups(cli, *b, *bst, o, used, titles);
	c.groups = used;
	c.help_groups = all;
	c.flags = OPTS_IN_ORDER;
	ret = opts_parse(&c, argc, argv, take_argument, (void *)cli);
	o->common.extra = argv + optind;
	o->common.nr_extra = (unsigned)(argc - optind);
	return ret;
}

void session_usage_print(FILE *f, const struct session_cli *cli)
{
	struct opt_group all[CLI_MAX_GROUPS];
	char titles[CLI_MAX_GROUPS][48], usage[2048];
	struct opts_cmd c = { .name = cli->command, .usage = usage, .groups = all };

	cli_groups(cli, NULL, NULL, NULL, all, titles);
	cli_usage(cli, usage, sizeof(usage));
	opts_help(f, &c);
}
