// SPDX-License-Identifier: MIT
/*
 * opvm list-events: OProfile's ophelp.  Which CPU CPUID says this is, which
 * events file describes it, whether the host has a PMU, and every event with
 * its minimum count, unit masks and description; --check validates one -e
 * spec, --json feeds scripts.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "events/events.h"
#include "host/cli/commands.h"
#include "host/cli/options.h"
#include "lib/log.h"
#include "vmm/qemu/gdbstub-sampler.h"

#define WIDTH 80

struct list_args {
	const char *family, *check;
	int all, json;
};

#define LA struct list_args
static const struct opt_def list_options[] = {
	{ .name = "all", .key = 'a', .help = "every family opvm knows, not only this CPU's",
	  OPT_FLAG(LA, all) },
	{ .name = "family", .key = 'f', .metavar = "ID", .help = "describe family ID "
	  "instead of this CPU (see --all)", OPT_STRING(LA, family) },
	{ .name = "json", .key = 'j', .help = "machine-readable output", OPT_FLAG(LA, json) },
	{ .name = "check", .key = 'c', .metavar = "SPEC", .help = "validate an event spec: "
	  "exit 0 if it can be used here (with another CPU's --family: if valid there), "
	  "else 1", OPT_STRING(LA, check) },
	{ 0 },
};
#undef LA

static const char list_usage[] =
	"usage: opvm list-events [--all] [--family ID] [--json]\n"
	"       opvm list-events [--family ID] --check SPEC\n"
	"\n"
	"Lists the events this host's CPU can sample, for\n"
	"-e NAME[:count[:unitmask[:kernel[:user]]]] (docs/events.md).\n";

static const char list_footer[] =
	"Environment: OPVM_EVENTS_DIR (event files), OPVM_NO_PMU=1 (act as if\n"
	"there were no hardware PMU).  docs/events.md describes the files.\n";

/* Prints text word-wrapped to WIDTH, every line starting at column indent,
 * the first line continuing from column col. */
static void wrap(FILE *f, const char *text, int col, int indent)
{
	const char *p = text;

	while (*p) {
		const char *w = p;
		int len;

		while (*w == ' ')
			w++;
		len = (int)strcspn(w, " ");
		if (col > indent && col + 1 + len > WIDTH) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", len, w);
		col += len;
		p = w + len;
	}
	fputc('\n', f);
}

static const char *unit_abbrev(const struct opvm_event *ev)
{
	switch (ev->unit) {
	case OPVM_UNIT_US:
		return " us";
	case OPVM_UNIT_NS:
		return " ns";
	case OPVM_UNIT_EVENTS:
		break;
	}
	return "";
}

static const char *um_type_name(enum opvm_um_type t)
{
	switch (t) {
	case OPVM_UM_MANDATORY:
		return "mandatory";
	case OPVM_UM_EXCLUSIVE:
		return "exclusive";
	case OPVM_UM_BITMASK:
		return "bitmask";
	}
	return "?";
}

static void print_event(FILE *f, const struct opvm_event *ev)
{
	const struct opvm_unit_mask *um = ev->um;
	char counts[96];
	int n;

	snprintf(counts, sizeof(counts), "min %llu%s, default %llu%s",
		 (unsigned long long)ev->min_count, unit_abbrev(ev),
		 (unsigned long long)ev->default_count, unit_abbrev(ev));
	n = fprintf(f, "  %s", ev->name);
	if (n + 1 + (int)strlen(counts) > WIDTH)
		fprintf(f, "\n%*s\n", WIDTH, counts);
	else
		fprintf(f, "%*s\n", WIDTH - n, counts);
	fprintf(f, "      ");
	wrap(f, ev->desc, 6, 6);
	/* A mandatory zero mask is "no unit mask": nothing to choose. */
	if (um->type == OPVM_UM_MANDATORY && !um->default_value)
		return;
	fprintf(f, "      unit mask %s (%s, default 0x%02x):\n", um->name,
		um_type_name(um->type), um->default_value);
	for (size_t i = 0; i < um->nr_values; i++) {
		const struct opvm_um_value *v = &um->values[i];

		n = fprintf(f, "        0x%02x %-15s", v->value,
			    v->name ? v->name : "");
		wrap(f, v->desc, n, 29);
	}
}

static void print_header(FILE *f, const struct opvm_cpu_id *cpu, int cpu_ok,
			 const char *host_family, int has_pmu,
			 const struct events_db *db)
{
	struct opvm_event_spec def;
	char spec[OPVM_EVENT_SPEC_MAX];

	if (cpu_ok)
		fprintf(f, "CPU (by CPUID): %s family %u (0x%x) model %u (0x%x) stepping %u%s",
			cpu->vendor, cpu->family, cpu->family, cpu->model,
			cpu->model, cpu->stepping,
			cpu->arch_perfmon_version ? "" : "\n");
	else
		fprintf(f, "CPU: not identified (no CPUID on this architecture)\n");
	if (cpu_ok && cpu->arch_perfmon_version)
		fprintf(f, ", perfmon v%d\n", cpu->arch_perfmon_version);
	fprintf(f, "events file: %s (%s)\n", host_family,
		db ? events_db_source(db) : "?");
	if (has_pmu)
		fprintf(f, "hardware PMU: yes, hardware and software events can be sampled\n");
	else
		fprintf(f, "no hardware PMU on this host: only TIMER and software events can be sampled\n");
	/* what run and attach really use: the gdbstub's own default unless
	 * --vmm=kvm or --sampler=perf take the events file's */
	fprintf(f, "default: run and attach sample at %u/s per vCPU (QEMU's gdbstub; "
		"-F HZ)\n", QEMU_SAMPLER_DEFAULT_HZ);
	if (db && !events_default(db, has_pmu, &def)) {
		fprintf(f, "default with --vmm=kvm or --sampler=perf: %s",
			events_spec_format(&def, spec, sizeof(spec)));
		if (events_spec_rate_hz(&def))
			fprintf(f, " (%u/s)", events_spec_rate_hz(&def));
		fputc('\n', f);
	}
}

static const char *family_desc(const char *id)
{
	const struct opvm_event_family *fams;
	size_t n = events_families(&fams);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(fams[i].id, id))
			return fams[i].desc;
	return "";
}

/* Events grouped by the file they came from, each group headed by whether
 * it can be used here. */
/* show_usable: 1 for this host's events, 0 for another CPU's. */
static void print_db(FILE *f, const struct events_db *db, int has_pmu,
		     int show_usable)
{
	const char *cur = NULL;

	for (size_t i = 0; i < events_db_count(db); i++) {
		const struct opvm_event *ev = events_db_get(db, i);

		if (!cur || strcmp(cur, ev->family)) {
			cur = ev->family;
			fprintf(f, "\n%s:", cur);
			wrap(f, family_desc(cur), (int)strlen(cur) + 1, 4);
			if (!show_usable)
				fprintf(f, "  (another CPU's events: not usable on this host)\n");
			else if (!events_usable(ev, has_pmu))
				fprintf(f, "  (not usable here: needs a hardware PMU)\n");
		}
		print_event(f, ev);
	}
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *event_json(const struct opvm_event *ev, int has_pmu)
{
	const struct opvm_unit_mask *um = ev->um;
	static const char *const units[] = { "events", "us", "ns" };
	json_t *o, *vals;

	vals = json_array();
	for (size_t i = 0; i < um->nr_values; i++) {
		const struct opvm_um_value *v = &um->values[i];

		json_array_append_new(vals, json_pack("{s:i, s:s?, s:s}",
			"value", (json_int_t)v->value, "name", v->name,
			"description", v->desc));
	}
	o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:i, s:I, s:b, s:b, s:b, s:b, s:s, s:{s:s, s:s, s:I, s:o}}",
		"name", ev->name, "family", ev->family,
		"code", (json_int_t)ev->code,
		"min_count", (json_int_t)ev->min_count,
		"default_count", (json_int_t)ev->default_count,
		"count_unit", units[ev->unit],
		"perf_type", (int)ev->perf_type,
		"perf_config", (json_int_t)ev->perf_config,
		"hardware", !!(ev->flags & OPVM_EV_HARDWARE),
		"timer", !!(ev->flags & OPVM_EV_TIMER),
		"default", !!(ev->flags & OPVM_EV_DEFAULT),
		"usable", events_usable(ev, has_pmu),
		"description", ev->desc,
		"unit_mask", "name", um->name, "type", um_type_name(um->type),
		"default", (json_int_t)um->default_value, "values", vals);
	return o;
}

static json_t *db_events_json(const struct events_db *db, int has_pmu)
{
	json_t *a = json_array();

	for (size_t i = 0; i < events_db_count(db); i++)
		json_array_append_new(a, event_json(events_db_get(db, i), has_pmu));
	return a;
}

/* ---- --check --------------------------------------------------------------- */

static int check_spec(const struct events_db *db, const char *spec,
		      int has_pmu, int other_family)
{
	struct opvm_event_spec s;
	char err[512], buf[OPVM_EVENT_SPEC_MAX];
	int r;

	r = events_parse_spec(db, spec, &s, err, sizeof(err));
	if (r) {
		log_err("%s", err);
		return 1;
	}
	events_spec_format(&s, buf, sizeof(buf));
	if (!other_family && !events_usable(s.event, has_pmu)) {
		log_err("%s is a valid spec, but %s needs a hardware PMU and this host has none; sample with TIMER instead (e.g. -e TIMER:4000)",
			spec, s.event->name);
		return 1;
	}
	if (s.event->unit != OPVM_UNIT_EVENTS)
		printf("%s: ok (a sample every %llu%s, %u samples/s per vCPU)\n",
		       buf, (unsigned long long)s.count, unit_abbrev(s.event),
		       events_spec_rate_hz(&s));
	else
		printf("%s: ok (perf type %u config 0x%llx, a sample every %llu events)\n",
		       buf, s.event->perf_type,
		       (unsigned long long)events_perf_config(&s),
		       (unsigned long long)s.count);
	return 0;
}

/* Every family's events, as JSON (--json --all); NULL after printing. */
static json_t *families_json(int has_pmu)
{
	const struct opvm_event_family *fams;
	size_t nfam = events_families(&fams);
	json_t *fa = json_array();
	char err[512];

	for (size_t i = 0; fa && i < nfam; i++) {
		struct events_db *fdb;

		fdb = events_db_load(fams[i].id, OPVM_EVDB_FAMILY_ONLY, err, sizeof(err));
		if (!fdb) {
			log_err("%s", err);
			json_decref(fa);
			return NULL;
		}
		json_array_append_new(fa, json_pack("{s:s, s:s, s:o}",
			"id", fams[i].id, "description", fams[i].desc,
			"events", db_events_json(fdb, has_pmu)));
		events_db_free(fdb);
	}
	return fa;
}

/* --json: the host, the default event, the events of db (and with all,
 * of every family).  The exit code. */
static int list_json(struct events_db *db, const struct opvm_cpu_id *cpu,
		     const char *host_family, int has_pmu, int all)
{
	json_t *root, *cj, *fa;
	struct opvm_event_spec def;
	char spec[OPVM_EVENT_SPEC_MAX];

	cj = cpu ? json_pack("{s:s, s:i, s:i, s:i, s:i}", "vendor", cpu->vendor,
			     "family", (int)cpu->family, "model", (int)cpu->model,
			     "stepping", (int)cpu->stepping,
			     "arch_perfmon_version", cpu->arch_perfmon_version) :
		   json_null();
	root = json_pack("{s:o, s:s, s:s, s:s, s:b}", "cpu", cj,
			 "host_family", host_family,
			 "family", events_db_family(db),
			 "source", events_db_source(db),
			 "has_pmu", has_pmu);
	if (root) {
		json_object_set_new(root, "gdbstub_rate_hz",
				    json_integer(QEMU_SAMPLER_DEFAULT_HZ));
		if (!events_default(db, has_pmu, &def))
			json_object_set_new(root, "default_event",
				json_string(events_spec_format(&def, spec, sizeof(spec))));
		json_object_set_new(root, "events", db_events_json(db, has_pmu));
	}
	if (root && all) {
		fa = families_json(has_pmu);
		if (!fa) {
			json_decref(root);
			return 1;
		}
		json_object_set_new(root, "families", fa);
	}
	if (!root || json_dumpf(root, stdout, JSON_INDENT(2)) < 0) {
		log_err("cannot write JSON: out of memory?");
		json_decref(root);
		return 1;
	}
	putchar('\n');
	json_decref(root);
	return 0;
}

/* --all as text: every family, this host's marked usable. */
static int list_families_text(const char *host_family, int has_pmu)
{
	const struct opvm_event_family *fams;
	size_t nfam = events_families(&fams);
	char err[512];

	for (size_t i = 0; i < nfam; i++) {
		struct events_db *fdb;

		fdb = events_db_load(fams[i].id, OPVM_EVDB_FAMILY_ONLY, err, sizeof(err));
		if (!fdb) {
			log_err("%s", err);
			return 1;
		}
		print_db(stdout, fdb, has_pmu, !strcmp(fams[i].id, host_family) ||
			 !strcmp(fams[i].id, "generic") ||
			 !strcmp(fams[i].id, "software"));
		events_db_free(fdb);
	}
	return 0;
}

/* The listing or the check the options ask for: the exit code. */
static int list_run(const struct list_args *a)
{
	const char *family = a->family, *host_family;
	struct opvm_cpu_id cpu;
	struct events_db *db;
	char err[512];
	int cpu_ok, has_pmu, ret;

	cpu_ok = !events_host_cpu(&cpu);
	host_family = events_family_for_cpu(cpu_ok ? &cpu : NULL);
	has_pmu = events_host_has_pmu();

	db = events_db_load(family ? family : host_family, 0, err, sizeof(err));
	if (!db) {
		log_err("%s", err);
		if (getenv("OPVM_EVENTS_DIR") && (errno == EINVAL || errno == ENOENT))
			log_info("OPVM_EVENTS_DIR=%s: fix its files, or unset it to use opvm's own",
				 getenv("OPVM_EVENTS_DIR"));
		return 1;
	}
	if (a->check) {
		ret = check_spec(db, a->check, has_pmu,
				 family && strcmp(family, host_family));
		goto out;
	}

	if (a->json) {
		ret = list_json(db, cpu_ok ? &cpu : NULL, host_family, has_pmu, a->all);
		goto out;
	}

	print_header(stdout, &cpu, cpu_ok, host_family, has_pmu, db);
	if (family && strcmp(family, host_family))
		printf("listing family %s, not this host's (%s)\n", family,
		       host_family);
	if (!a->all) {
		print_db(stdout, db, has_pmu, !family || !strcmp(family, host_family));
		printf("\nSample with -e NAME[:count[:unitmask[:kernel[:user]]]];\n"
		       "'opvm list-events --all' shows every family, --check SPEC tests a spec.\n");
		ret = 0;
		goto out;
	}
	ret = list_families_text(host_family, has_pmu);
out:
	events_db_free(db);
	return ret;
}

int cmd_list_events(int argc, char **argv)
{
	struct list_args a = { 0 };
	const struct opt_group groups[] = { { NULL, list_options, &a }, { 0 } };
	const struct opts_cmd cmd = { .name = "list-events", .usage = list_usage,
				      .groups = groups, .footer = list_footer };
	int r = opts_parse(&cmd, argc, argv, NULL, NULL);

	if (r)
		return r == 1 ? 0 : 2;
	if (optind < argc) {
		log_err("unexpected argument '%s'; 'opvm list-events --help' shows the options",
			argv[optind]);
		return 2;
	}
	return list_run(&a);
}
