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
#include "host/hoststats/hoststats.h"
#include "lib/log.h"
#include "lib/util.h"
#include "host/cli/top.h"

static volatile sig_atomic_t top_stop;

static void top_usage(FILE *f)
{
	fprintf(f,
"usage: opvm top [options]\n"
"\n"
"Every guest on this host: libvirt domains and bare QEMU processes, with CPU,\n"
"guest-mode time, steal (run-queue delay), VM exits and their reasons, and\n"
"disk/network rates.  Keys in the live view: arrows select, Enter shows vCPUs,\n"
"c t x i n sort by cpu/steal/exits/io/name, / filter, + - interval,\n"
"p profiles the selected guest with opvm attach and shows its top symbols,\n"
"q quits.\n"
"\n"
"  --once              one snapshot (two readings, --delay apart), then exit\n"
"  --format text|json  --once output (default text)\n"
"  -d, --delay S       refresh interval in seconds (default 2; --once: 1)\n"
"  -s, --sort KEY      cpu, steal, exits, io or name (default cpu)\n"
"  -f, --filter TEXT   only guests whose name contains TEXT\n"
"  -c, --connect URI   libvirt URI (default $LIBVIRT_DEFAULT_URI, else\n"
"                      qemu:///system)\n"
"  --no-libvirt        only QEMU processes found in /proc\n"
"  --profile-seconds N length of the p key's profile (default 5)\n"
"  --guest-root DIR, --system-map FILE\n"
"                      passed to opvm report for the p key's symbols\n"
"  --session-base DIR  where the p key's sessions go (default $TMPDIR or /tmp)\n");
}

static void print_text(struct hoststats *h, const struct top_opts *o)
{
	struct hs_guest **gs;
	size_t n = hoststats_guests(h, o->sort, &gs), shown = 0;
	const char *hw = NULL;
	char reasons[19], exits[16], name[17];	/* 80 columns */

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
			util_fprintf_wrapped(stdout, 2, "%s: not read: %s",
					     top_name(full, sizeof(full), gs[i]->name),
					     gs[i]->stale_why);
	}
	if (hoststats_libvirt_error(h)[0]) {
		char e[1024];

		printf("libvirt: %s\n", util_text_escape(e, sizeof(e), hoststats_libvirt_error(h)));
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

/* Parses argv into o; returns -1 to exit with 2, 1 for --help, 0 to run. */
static int top_parse(int argc, char **argv, struct top_opts *o, int *once, int *json)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (!strcmp(a, "--once")) {
			*once = 1;
			continue;
		}
		if (!strcmp(a, "--no-libvirt")) {
			o->no_libvirt = 1;
			continue;
		}
		if (!v || a[0] != '-') {
			log_err("%s '%s'; 'opvm top --help' lists the options",
				a[0] == '-' ? "missing value for" : "unexpected argument", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "--format")) {
			if (strcmp(v, "json") && strcmp(v, "text")) {
				log_err("--format takes text or json, not '%s'", v);
				return -1;
			}
			*json = !strcmp(v, "json");
		} else if (!strcmp(a, "-d") || !strcmp(a, "--delay")) {
			o->delay_s = strtod(v, &end);
			if (*end || !(o->delay_s >= 0.1 && o->delay_s <= 3600)) {
				log_err("--delay wants seconds between 0.1 and 3600, not '%s'", v);
				return -1;
			}
		} else if (!strcmp(a, "-s") || !strcmp(a, "--sort")) {
			int k = hs_sort_parse(v);

			if (k < 0) {
				log_err("--sort takes cpu, steal, exits, io or name, not '%s'", v);
				return -1;
			}
			o->sort = (enum hs_sort)k;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--filter")) {
			o->filter = v;
		} else if (!strcmp(a, "-c") || !strcmp(a, "--connect")) {
			o->uri = v;
		} else if (!strcmp(a, "--profile-seconds")) {
			unsigned long s = strtoul(v, &end, 10);

			if (*end || !s || s > 3600) {
				log_err("--profile-seconds wants 1 to 3600, not '%s'", v);
				return -1;
			}
			o->profile_s = (unsigned)s;
		} else if (!strcmp(a, "--guest-root")) {
			o->guest_root = v;
		} else if (!strcmp(a, "--system-map")) {
			o->system_map = v;
		} else if (!strcmp(a, "--session-base")) {
			o->session_base = v;
		} else {
			log_err("unknown option '%s'; 'opvm top --help' lists them", a);
			return -1;
		}
	}
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
	if (r) {
		top_usage(r > 0 ? stdout : stderr);
		return r > 0 ? 0 : 2;
	}
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
	util_stop_on_signals(&top_stop);
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
