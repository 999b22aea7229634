// SPDX-License-Identifier: MIT
/*
 * opvm top: every guest on this host, live (ncurses), or one snapshot
 * (--once, text or JSON).  The figures come from host/hoststats/hoststats.h.
 */
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "host/hoststats/hoststats.h"
#include "lib/log.h"
#include "lib/numparse.h"
#include "lib/signals.h"
#include "lib/text.h"
#include "host/cli/top.h"

static volatile sig_atomic_t top_stop;

/* What top's options set: its view's options and the command's own. */
struct top_args {
	struct top_opts o;
	int once, json;
};

static int opt_sort(void *base, const char *opt, char *arg, char *err, size_t errlen)
{
	struct top_args *a = base;
	int k = hs_sort_parse(arg);

	if (k >= 0) {
		a->o.sort = (enum hs_sort)k;
		return 0;
	}
	num_bad_value(err, errlen, opt, arg, "cpu, steal, exits, io or name");
	return -1;
}

static const struct opt_enum top_formats[] = { { "text", 0 }, { "json", 1 }, { 0 } };

#define TA struct top_args
static const struct opt_def top_options[] = {
	{ .name = "once", .help = "one snapshot (two readings, --delay apart), then exit",
	  OPT_FLAG(TA, once) },
	{ .name = "format", .metavar = "text|json", .help = "--once output (default text)",
	  OPT_ENUM(TA, json, top_formats) },
	{ .name = "delay", .key = 'd', .metavar = "S", .help = "refresh interval in seconds "
	  "(default 2; --once: 1)", OPT_DURATION(TA, o.delay_s, 0.1, 3600, 1000),
	  .want = "seconds, 0.1 to 3600" },
	{ .name = "sort", .key = 's', .metavar = "KEY", .help = "cpu, steal, exits, io or "
	  "name (default cpu)", OPT_CALLBACK(opt_sort) },
	{ .name = "filter", .key = 'f', .metavar = "TEXT", .help = "only guests whose name "
	  "contains TEXT", OPT_STRING(TA, o.filter) },
	{ .name = "connect", .key = 'c', .metavar = "URI", .help = "libvirt URI (default "
	  "$LIBVIRT_DEFAULT_URI, else qemu:///system)", OPT_STRING(TA, o.uri) },
	{ .name = "no-libvirt", .help = "only QEMU processes found in /proc",
	  OPT_FLAG(TA, o.no_libvirt) },
	{ .name = "profile-seconds", .metavar = "N", .help = "length of the p key's profile "
	  "(default 5)", OPT_DURATION(TA, o.profile_s, 1, 3600, 1000),
	  .want = "seconds, 1 to 3600" },
	{ .name = "guest-root", .metavar = "DIR", .help = "passed to opvm report for the p "
	  "key's symbols", OPT_STRING(TA, o.guest_root) },
	{ .name = "system-map", .metavar = "FILE", .help = "the same",
	  OPT_STRING(TA, o.system_map) },
	{ .name = "session-base", .metavar = "DIR", .help = "where the p key's sessions go "
	  "(default $TMPDIR or /tmp)", OPT_STRING(TA, o.session_base) },
	{ 0 },
};
#undef TA

static const char top_usage[] =
	"usage: opvm top [options]\n"
	"\n"
	"Every guest on this host: libvirt domains and bare QEMU processes, with CPU,\n"
	"guest-mode time, steal (run-queue delay), VM exits and their reasons, and\n"
	"disk/network rates.  Keys in the live view: arrows select, Enter shows vCPUs,\n"
	"c t x i n sort by cpu/steal/exits/io/name, / filter, + - interval,\n"
	"p profiles the selected guest with opvm attach and shows its top symbols,\n"
	"q quits.\n"
	"\n";

static void print_text(struct hoststats *h, const struct top_opts *o)
{
	struct hs_guest **gs;
	size_t n = hoststats_guests(h, o->sort, &gs), shown = 0;
	const char *hw = NULL;
	char reasons[19], exits[16], name[17];	/* 80 columns */
	char capped[96];

	printf("%-16s %-7s %4s %6s %6s %6s %8s  %s\n", "GUEST", "SOURCE", "VCPU", "CPU%",
	       "GUEST%", "STEAL%", "EXITS/s", "TOP EXITS/s");
	for (size_t i = 0; i < n; i++) {
		const struct hs_guest *g = gs[i];

		if (!top_match(o, g))
			continue;
		shown++;
		if (!g->has_hw && g->hw_why)
			hw = g->hw_why;
		if (g->has_exits)
			snprintf(exits, sizeof(exits), "%.0f", g->exits_ps);
		else
			snprintf(exits, sizeof(exits), "%s", top_dash());
		top_reasons_cell(g, reasons, sizeof(reasons));
		printf("%-16s %-7s %4u %6.1f %6.1f %6.1f %8s  %s\n",
		       top_name(name, sizeof(name), g->name), g->source,
		       g->nr_vcpus, g->cpu_pct, g->guest_pct, g->steal_pct, exits, reasons);
	}
	if (!shown)
		printf("(no guests%s)\n", o->filter ? " match the filter" : " on this host");
	printf("over %.1f s; CPU%%: 100 = one host CPU; STEAL%%: time a vCPU waited for a host CPU\n",
	       hoststats_interval(h));
	if (top_capped_cell(hoststats_capped(h), capped, sizeof(capped))[0])
		printf("%s (other users' processes in /proc: docs/usage.md)\n", capped);
	if (hw)
		printf("hardware counters: %s (%s)\n", top_dash(), hw);
	for (size_t i = 0; i < n; i++)
		if (top_match(o, gs[i]) && gs[i]->has_hw && !gs[i]->fresh)
			printf("%-16s guest mode: %.3g cycles/s, IPC %.2f, %.3g LLC misses/s\n",
			       top_name(name, sizeof(name), gs[i]->name),
			       gs[i]->hw_ps[PMC_CYCLES], gs[i]->ipc,
			       gs[i]->hw_ps[PMC_LLC_MISSES]);
	for (size_t i = 0; i < n; i++) {
		char full[4 * PS_NAME_MAX + 1];

		if (top_match(o, gs[i]) && gs[i]->stale)
			text_fprintf_wrapped(stdout, 2, "%s: not read: %s",
					     top_name(full, sizeof(full), gs[i]->name),
					     gs[i]->stale_why);
	}
	if (hoststats_libvirt_error(h)[0]) {
		char e[1024];

		text_fprintf_wrapped(stdout, 2, "libvirt: %s",
				     text_escape(e, sizeof(e), hoststats_libvirt_error(h)));
	}
}

static int top_once(struct hoststats *h, const struct top_opts *o, int json)
{
	struct timespec ts = { .tv_sec = (time_t)o->delay_s,
			       .tv_nsec = (long)((o->delay_s - (double)(time_t)o->delay_s) * 1e9) };
	int err = hoststats_refresh(h);

	if (!err && !top_stop) {
		while (nanosleep(&ts, &ts) && errno == EINTR && !top_stop)
			;
		err = hoststats_refresh(h);
	}
	if (err == -EINTR || top_stop)
		return 1;	/* SIGINT/SIGTERM: stop now, print nothing half-read */
	if (err) {
		log_err("cannot read the guests of this host: %s", strerror(-err));
		return 1;
	}
	if (json) {
		json_t *j = hoststats_json(h, o->sort);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2)) || putchar('\n') == EOF) {
			json_decref(j);
			log_err("cannot write the JSON snapshot");
			return 1;
		}
		json_decref(j);
		return 0;
	}
	print_text(h, o);
	return 0;
}

/* Parses argv into o; returns 2 for a usage error, 1 after --help, 0 to run. */
static int top_parse(int argc, char **argv, struct top_opts *o, int *once, int *json)
{
	struct top_args a = { *o, 0, 0 };
	const struct opt_group groups[] = { { NULL, top_options, &a }, { 0 } };
	const struct opts_cmd cmd = { .name = "top", .usage = top_usage, .groups = groups };
	int r = opts_parse(&cmd, argc, argv, NULL, NULL);

	if (r)
		return r;
	if (optind < argc) {
		log_err("unexpected argument '%s'; 'opvm top --help' lists the options",
			argv[optind]);
		return 2;
	}
	*o = a.o;
	*once = a.once;
	*json = a.json;
	return 0;
}

int cmd_top(int argc, char **argv)
{
	struct top_opts o = { .sort = HS_SORT_CPU, .profile_s = 5 };
	struct hs_config cfg = { 0 };
	struct hoststats *h;
	int once = 0, json = 0, r, ret;

	setlocale(LC_ALL, "");
	r = top_parse(argc, argv, &o, &once, &json);
	if (r)
		return r == 1 ? 0 : 2;
	if (json && !once) {
		log_err("--format json goes with --once (the live view is a screen)");
		return 2;
	}
	if (!o.delay_s)
		o.delay_s = once ? 1 : 2;
	if (!o.session_base)
		o.session_base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	cfg.uri = o.uri;
	cfg.no_libvirt = o.no_libvirt;
	cfg.filter = &o.filter;
	cfg.stop = &top_stop;	/* a silent QMP socket must not hold Ctrl-C */
	signals_stop_on(&top_stop);
	signal(SIGPIPE, SIG_IGN);
	h = hoststats_new(&cfg);
	if (!h) {
		log_err("out of memory");
		return 1;
	}
	if (once) {
		ret = top_once(h, &o, json);
	} else if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
		log_err("the live view needs a terminal; use --once (and --format json) in scripts");
		ret = 2;
	} else {
		ret = top_view_run(h, &o, &top_stop);
		if (ret)
			log_err("the live view stopped: %s", strerror(-ret));
		ret = ret ? 1 : 0;
	}
	hoststats_free(h);
	return ret;
}
