// SPDX-License-Identifier: MIT
/*
 * The summary a session prints when it ends (host/cli/session.c calls it):
 * samples per target and app, store, fetch, DWARF and introspection counters,
 * read back from session.json and the sample store.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/collector.h"
#include "host/cli/session.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "lib/array.h"
#include "lib/log.h"
#include "symbols/ksyms.h"
#include "symbols/symres.h"
#include "lib/safepath.h"
#include "lib/clock.h"
#include "lib/fs.h"
#include "lib/text.h"
#include "symbols/symres.h"
#include "vmm/backend.h"
#include "vmm/guest/monitor.h"
#include "vmm/sampler.h"

struct app_sum {
	size_t target;
	char app[512];
	uint64_t samples;
};

#define SUMMARY_MAX_WINDOWS	16384	/* a session's windows read back */

struct sum_ctx {
	const struct backend_target *t;
	size_t n;
	struct app_sum *apps;
	size_t nr, cap;
	uint64_t *totals;
	size_t bad;
	char last[STORE_WINDOW_NAME_MAX];	/* --window: the last window, or "" */
};

/* The app's row of target ti, added if new; NULL on ENOMEM. */
static struct app_sum *app_row(struct sum_ctx *sc, size_t ti, const char *app)
{
	size_t k;

	for (k = 0; k < sc->nr; k++)
		if (sc->apps[k].target == ti && !strcmp(sc->apps[k].app, app))
			return &sc->apps[k];
	if (ARRAY_GROW(sc->apps, sc->cap, sc->nr + 1, 64))
		return NULL;
	sc->apps[k].target = ti;
	snprintf(sc->apps[k].app, sizeof(sc->apps[k].app), "%s", app);
	sc->apps[k].samples = 0;
	sc->nr++;
	return &sc->apps[k];
}

static int sum_file(const struct store_entry *e, void *arg)
{
	struct sum_ctx *sc = arg;
	struct sfile_reader *r;
	struct app_sum *row;
	uint64_t total;
	size_t ti;

	for (ti = 0; ti < sc->n; ti++)
		if (e->guest && !strcmp(e->guest, sc->t[ti].name))
			break;
	if (ti == sc->n)
		return 0;
	r = sfile_reader_open(e->path, NULL, 0);
	if (!r) {
		sc->bad++;
		return 0;
	}
	total = sfile_reader_info(r)->total;
	sfile_reader_close(r);
	row = app_row(sc, ti, e->app ? e->app : "?");
	if (!row)
		return -ENOMEM;
	row->samples += total;
	sc->totals[ti] += total;
	return 0;
}

static int cmp_app(const void *a, const void *b)
{
	const struct app_sum *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return strcmp(x->app, y->app);
}

/* A guest's session.json (samples/<which>/), or NULL. */
static json_t *load_session(const char *session_dir, const char *guest, const char *which)
{
	char mangled[OPVM_MANGLE_MAX], path[4096];
	json_t *j;
	int fd;

	store_mangle(guest, strlen(guest), mangled);
	snprintf(path, sizeof(path), "%s/guests/%s/samples/%s/session.json",
		 session_dir, mangled, which);
	/* a regular file only, not through a symlink, without blocking */
	fd = fs_open_regular(path, O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	j = stats_json_loadfd(fd, 0, NULL);
	close(fd);
	return j;
}

/* What the store did, when it is worth a line: caps reached, samples that
 * could not be filed. */
static void store_summary(json_t *root)
{
	json_t *so = json_object_get(root, "store"), *lim = json_object_get(so, "limits");
	uint64_t ovf = stats_json_get(so, "overflow_samples");
	uint64_t errs = stats_json_get(root, "store_errors");
	char a[OPVM_COUNT_BUF], b[OPVM_COUNT_BUF], c[OPVM_COUNT_BUF];

	if (!so)
		return;
	text_fprintf_wrapped(stdout, 4, "  store: %s files, %s directories, %.1f MB on disk, "
			     "at most %llu mapped at once",
	       stats_fmt_count(stats_json_get(so, "files"), a),
	       stats_fmt_count(stats_json_get(so, "dirs"), b),
	       stats_json_get(so, "disk_bytes") / 1e6,
	       (unsigned long long)stats_json_get(so, "mapped_peak"));
	if (ovf)
		text_fprintf_wrapped(stdout, 4, "  %s samples went to the {overflow} bucket: "
		       "the guest named more files than "
		       "the caps allow (files %llu, directories %llu, disk %.0f MB; raise them with "
		       "--max-files, --max-dirs, --max-disk)", stats_fmt_count(ovf, c),
		       (unsigned long long)stats_json_get(lim, "max_files"),
		       (unsigned long long)stats_json_get(lim, "max_dirs"),
		       stats_json_get(lim, "max_disk") / 1e6);
	if (errs)
		text_fprintf_wrapped(stdout, 4, "  %s samples could not be filed (out of memory "
		       "or disk); they are counted, "
		       "not in the files", stats_fmt_count(errs, c));
}

/* What the guest sent for the reports (docs/protocol.md, KSYMS, FETCH),
 * when it sent anything or something was refused. */
static void fetch_summary(json_t *root)
{
	json_t *f = json_object_get(root, "fetch"), *k = json_object_get(f, "ksyms"),
	       *b = json_object_get(f, "binaries");
	static const char *const refusals[] = { "guest_refused", "mismatch", "not_elf",
		"too_big", "session_cap", "bad_order", "stray", "timeouts" };
	const char *why = json_string_value(json_object_get(b, "cache_error"));
	uint64_t refused = 0;

	const char *lie = json_string_value(json_object_get(k, "slide_conflict"));

	if (why)
		text_fprintf_wrapped(stdout, 4, "  the guest's build-id cache was refused, no "
				     "binary fetched: %s", why);
	if (stats_json_get(k, "slide_mismatch"))
		text_fprintf_wrapped(stdout, 4, "  warning: the guest's kallsyms disagrees with "
				     "opvm.ko's HELLO (%s%s%llu symbols): the reports name kernel "
				     "samples with opvm.ko's addresses (session.json "
				     "fetch.ksyms)", lie ? lie : "", lie ? "; " : "",
				     (unsigned long long)stats_json_get(k, "slide_mismatch"));
	if (stats_json_get(k, "capped"))
		text_fprintf_wrapped(stdout, 4, "  %llu of the guest's kernel symbols were past "
				     "the cap on its kallsyms (%.1f MB, --fetch-max-ksyms) and are "
				     "not kept (session.json fetch.ksyms.capped)",
				     (unsigned long long)stats_json_get(k, "capped"),
				     stats_json_get(k, "max_bytes") / 1e6);
	for (size_t i = 0; i < ARRAY_SIZE(refusals); i++)
		refused += stats_json_get(b, refusals[i]);
	if (!stats_json_get(k, "syms") && !stats_json_get(b, "files") &&
	    !stats_json_get(b, "cached") && !refused)
		return;
	text_fprintf_wrapped(stdout, 4, "  from the guest: %llu kernel symbols; %llu binaries "
			     "fetched by build-id (%.1f MB), %llu already cached, %llu "
			     "transfers refused (session.json \"fetch\")",
			     (unsigned long long)stats_json_get(k, "syms"),
			     (unsigned long long)stats_json_get(b, "files"),
			     stats_json_get(b, "bytes") / 1e6,
			     (unsigned long long)stats_json_get(b, "cached"),
			     (unsigned long long)refused);
}

/* -g dwarf: user stacks that waited for a binary the guest was sending,
 * and those filed cut short for want of one (docs/callgraphs.md). */
static void dwarf_summary(json_t *root)
{
	json_t *d = json_object_get(root, "dwarf_unwind");
	uint64_t waited = stats_json_get(d, "waited"), cut = stats_json_get(d, "cut_missing_binary");
	char a[OPVM_COUNT_BUF], b[OPVM_COUNT_BUF], c[OPVM_COUNT_BUF];

	if (!d || (!waited && !cut))
		return;
	text_fprintf_wrapped(stdout, 4, "  user stacks (dwarf): %s waited for a binary the guest "
			     "was sending, %s of them whole once it came; %s cut short for a "
			     "missing binary (session.json \"dwarf_unwind\")",
			     stats_fmt_count(waited, a),
			     stats_fmt_count(stats_json_get(d, "redone"), b),
			     stats_fmt_count(cut, c));
}

/* Each sample's current task as introspection read it in the stop: the
 * samples it named, and its agreement with opvm.ko's slots. */
static void introspect_current_summary(json_t *i)
{
	json_t *cur = json_object_get(i, "current"), *xc = json_object_get(i, "crosscheck");
	uint64_t named = stats_json_get(cur, "samples_named");
	uint64_t agree = stats_json_get(xc, "samples_agree");
	uint64_t both = agree + stats_json_get(xc, "samples_differ");
	char a[OPVM_COUNT_BUF], b[OPVM_COUNT_BUF];

	if (!json_is_true(json_object_get(cur, "known")) && !named && !both)
		return;
	if (named)
		text_fprintf_wrapped(stdout, 4, "  introspection named the task of %s samples "
				     "(each vCPU's current task, read in the sampler's stop); "
				     "%s kernel samples were taken before it knew where to read it "
				     "(boot)", stats_fmt_count(named, a),
				     stats_fmt_count(stats_json_get(cur, "kernel_samples_without_task"),
						     b));
	if (both)
		text_fprintf_wrapped(stdout, 4, "  introspection and opvm.ko name the same "
				     "process for %s of %s samples (%.2f %%)",
				     stats_fmt_count(agree, a), stats_fmt_count(both, b),
				     100.0 * (double)agree / (double)both);
}

/* Which source named what: introspection's line (docs/introspection.md). */
static void introspect_summary(json_t *root)
{
	json_t *i = json_object_get(root, "introspect"), *p = json_object_get(i, "processes");
	json_t *m = json_object_get(i, "modules");
	const char *state = json_string_value(json_object_get(i, "state"));
	const char *why = json_string_value(json_object_get(i, "last_error"));
	json_t *k = json_object_get(root, "kernel");
	const char *src = json_string_value(json_object_get(k, "source"));

	if (!state)
		return;		/* --introspect off, or no guest memory */
	if (strcmp(state, "ready")) {
		text_fprintf_wrapped(stdout, 4, "  introspection: no kernel found in guest memory "
				     "(%llu scans of its RAM)%s%s", (unsigned long long)
				     stats_json_get(i, "passes"), why ? ": " : "", why ? why : "");
		return;
	}
	text_fprintf_wrapped(stdout, 4, "  introspection: kernel %s read from guest memory "
			     "(KASLR offset %s); it sent %llu kernel symbols and %llu symbols of %llu "
			     "modules; processes from %s (%llu in the last walk)%s%s",
			     json_string_value(json_object_get(i, "release")),
			     json_string_value(json_object_get(i, "kernel_offset")),
			     (unsigned long long)stats_json_get(i, "ksyms_sent"),
			     (unsigned long long)stats_json_get(m, "syms_sent"),
			     (unsigned long long)stats_json_get(m, "modules"),
			     src && !strcmp(src, "opvm.ko") ? "opvm.ko" :
			     stats_json_get(p, "walks") ? "it" : "none",
			     (unsigned long long)stats_json_get(p, "tasks"),
			     why ? "; " : "", why ? why : "");
	introspect_current_summary(i);
}

/* User samples without a CR3 (the perf sampler) filed by mapping: how many
 * named their process, how many were ambiguous or in no known mapping. */
static void bymap_summary(json_t *root)
{
	json_t *b = json_object_get(root, "by_mapping");
	uint64_t one = stats_json_get(b, "attributed"), many = stats_json_get(b, "ambiguous");
	uint64_t none = stats_json_get(b, "unknown");
	char x[OPVM_COUNT_BUF], y[OPVM_COUNT_BUF], z[OPVM_COUNT_BUF];

	if (!one && !many && !none)
		return;
	text_fprintf_wrapped(stdout, 4, "  user samples without a CR3, by executable mapping: "
			     "%s in the one process that maps their address, %s ambiguous "
			     "(several do: {ambiguous}), %s in no known mapping ({unmapped})",
			     stats_fmt_count(one, x), stats_fmt_count(many, y),
			     stats_fmt_count(none, z));
	if (stats_json_get(b, "index_over_cap"))
		text_fprintf_wrapped(stdout, 4, "  the guest had too many mappings for the index "
				     "(%s refused builds): their samples are in {unmapped}",
				     stats_fmt_count(stats_json_get(b, "index_over_cap"), x));
}

static void count(json_t *st, const char *key, struct backend_count *out)
{
	char buf[OPVM_COUNT_BUF];

	out->n = stats_json_get(st, key);
	snprintf(out->s, sizeof(out->s), "%s", stats_fmt_count(out->n, buf));
}

static void totals_from_json(json_t *root, uint64_t samples, uint64_t elapsed_ns,
			     struct backend_totals *tot)
{
	json_t *st = json_object_get(root, "stats");

	tot->samples = samples;
	tot->elapsed_ns = elapsed_ns;
	count(st, "kernel", &tot->kernel);
	count(st, "user", &tot->user);
	count(st, "lost_overflow", &tot->lost_overflow);
	count(st, "lost_no_process", &tot->lost_no_process);
	count(st, "lost_no_mapping", &tot->lost_no_mapping);
	count(st, "guest_lost", &tot->guest_lost);
}

static void top_apps(const struct sum_ctx *sc, size_t i)
{
	int shown = 0;

	for (size_t k = 0; k < sc->nr && shown < 8; k++) {
		if (sc->apps[k].target != i || !sc->totals[i])
			continue;
		if (!shown++)
			printf("  top applications:\n");
		printf("    %6.2f%%  %8llu  %s\n", 100.0 * sc->apps[k].samples / sc->totals[i],
		       (unsigned long long)sc->apps[k].samples, store_app_label(sc->apps[k].app));
	}
}

/* --from-exec: when the process came and what was taken before it. */
static void start_summary(json_t *root)
{
	const char *name = json_string_value(json_object_get(root, "from_exec"));
	json_t *at = json_object_get(root, "started_after_s");
	uint64_t before = stats_json_get(json_object_get(root, "stats"), "before_start");
	char c[OPVM_COUNT_BUF];

	if (!name)
		return;
	if (json_is_number(at))
		text_fprintf_wrapped(stdout, 4, "  filed from %s's start, %.1f s in; %s samples "
				     "taken before it were counted, not filed", name,
				     json_number_value(at), stats_fmt_count(before, c));
	else
		text_fprintf_wrapped(stdout, 4, "  %s never started: none of %s samples was "
				     "filed (is it the executable's base name?)", name,
				     stats_fmt_count(before, c));
}

/* attach --window: the windows this session sealed (from its start on),
 * their last one's name in sc->last for the guests' session.json. */
static void walk_windows(const char *dir, uint64_t elapsed_ns, struct sum_ctx *sc)
{
	char (*names)[STORE_WINDOW_NAME_MAX] = calloc(SUMMARY_MAX_WINDOWS, sizeof(*names));
	int64_t since = clk_wall_ms() - (int64_t)(elapsed_ns / 1000000) - 1000;
	int n = names ? store_windows(dir, since, INT64_MAX, names, SUMMARY_MAX_WINDOWS) : 0;

	if (n > SUMMARY_MAX_WINDOWS)
		n = SUMMARY_MAX_WINDOWS;
	for (int i = 0; i < n; i++)
		store_walk(dir, names[i], sum_file, sc, NULL);
	if (n > 0)
		memcpy(sc->last, names[n - 1], sizeof(sc->last));
	free(names);
}

/* Per guest: the backend's lines, the store's, the top applications; then
 * where the session is and how to read it. */
void session_summary(const struct backend_ops *b, void *bst,
		     const struct session_opts *o,
		     const struct backend_setup *setup,
		     const struct backend_target *t, size_t n, uint64_t elapsed_ns)
{
	const char *dir = o->common.session_dir;
	struct sum_ctx sc = { .t = t, .n = n };

	sc.totals = calloc(n ? n : 1, sizeof(*sc.totals));
	if (!sc.totals)
		return;
	if (o->window_s)
		walk_windows(dir, elapsed_ns, &sc);
	else
		store_walk(dir, "current", sum_file, &sc, NULL);
	if (sc.nr)	/* none filed (--from-exec that never came): no array */
		qsort(sc.apps, sc.nr, sizeof(*sc.apps), cmp_app);
	for (size_t i = 0; i < n; i++) {
		json_t *root = load_session(dir, t[i].name, sc.last[0] ? sc.last : "current");
		struct backend_totals tot = { 0 };

		totals_from_json(root, sc.totals[i], elapsed_ns, &tot);
		b->summary(bst, &t[i], &tot, stdout);
		if (o->no_python)	/* the sampler was told of no CPython */
			printf("python: Python frames off (--no-python)\n");
		start_summary(root);
		store_summary(root);
		fetch_summary(root);
		dwarf_summary(root);
		introspect_summary(root);
		bymap_summary(root);
		top_apps(&sc, i);
		json_decref(root);
	}
	if (sc.bad)
		printf("(%zu sample files could not be read)\n", sc.bad);
	/* the session's symbol sources are in its session.json: no flags */
	printf("session: %s\nnext: opvm report --session-dir %s\n", dir, dir);
	fflush(stdout);
	free(sc.apps);
	free(sc.totals);
}

