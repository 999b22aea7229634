// SPDX-License-Identifier: MIT
/*
 * session.json, as the collector writes it (host/collect/collector.c calls
 * collector_write_session() at each sync and at the end): counters per
 * guest, symbols, call graph, kernel, introspection.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/collect/collector.h"
#include "host/collect/collector-priv.h"
#include "host/collect/decoder.h"
#include "host/collect/fetch.h"
#include "host/collect/gstate.h"
#include "lib/array.h"
#include "lib/json.h"
#include "lib/ring.h"
#include "lib/sample.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"
#include "vmm/introspect/introspect.h"
#include "vmm/sampler.h"
#include "lib/clock.h"

/* The collector's own members of session.json "introspect", beside
 * introspection's (introspect_to_json()): what it checked introspection
 * against, per walk (processes) and per sample (the current task against
 * opvm.ko's slot: the same tgid or not), and the current task's naming.
 * None without an introspector: nothing was checked.  Nonzero on ENOMEM. */
static int intro_json(const struct cguest *g, const struct sampler_stats *ss, json_t *o)
{
	int bad = 0;

	if (!g->intro)
		return 0;
	bad |= json_object_set_new(o, "crosscheck", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"walks", stats_json_count(g->xc_walks), "processes", stats_json_count(g->xc_seen),
		"agree", stats_json_count(g->xc_agree), "differ", stats_json_count(g->xc_differ),
		"missing", stats_json_count(g->xc_missing),
		"samples_agree", stats_json_count(ss->cur_agree),
		"samples_differ", stats_json_count(ss->cur_differ)));
	bad |= json_object_set_new(o, "current", json_pack("{s:b,s:o,s:o,s:o}",
		"known", g->cur_known,
		"samples_named", stats_json_count(ss->cur_named), "bad", stats_json_count(ss->cur_bad),
		"kernel_samples_without_task", stats_json_count(ss->kernel_no_task)));
	return bad;
}

/* ---- session.json -------------------------------------------------------- */

static void separate_str(unsigned sep, char *out, size_t len)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
		{ OPVM_SEP_LIB, "lib" }, { OPVM_SEP_KERNEL, "kernel" },
		{ OPVM_SEP_THREAD, "thread" }, { OPVM_SEP_CPU, "cpu" },
	};
	size_t i, o = 0;

	out[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		if (!(sep & names[i].bit))
			continue;
		o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", names[i].name);
		if (o >= len)
			break;
	}
	if (!out[0])
		snprintf(out, len, "none");
}

static int module_json(const struct gstate_module *m, void *arg)
{
	json_t *o = json_pack("{s:s}", "name", m->name);

	if (!o)
		return -ENOMEM;
	json_object_set_new(o, "base", json_u64(m->base));
	json_object_set_new(o, "size", json_u64(m->size));
	json_object_set_new(o, "base_hex", json_hex(m->base));
	return json_array_append_new(arg, o) ? -ENOMEM : 0;
}

void collector_guest_stats(const struct cguest *g, struct opvm_stats *st,
			struct sampler_stats *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (g->smp && g->smp->ops && g->smp->ops->get_stats)
		g->smp->ops->get_stats(g->smp, ss);
	attribution_get_stats(g->sy, st);
	st->throttled = ss->throttled;
}

/* "symbols": where report/annotate/export find this session's binaries
 * (docs/session-json.md); the build-id cache is <session>/.build-id. */
static json_t *symbols_json(const struct collector *c)
{
	const struct collector_symbols *s = &c->cfg.symbols;
	json_t *o = json_object(), *roots = json_array();
	char dir[PATH_MAX], cache[PATH_MAX + 16];
	int bad = !o || !roots;

	for (size_t i = 0; !bad && i < s->nr_roots && i < COLLECTOR_MAX_ROOTS; i++)
		bad |= json_array_append_new(roots, json_string(s->roots[i]));
	if (bad) {
		json_decref(roots);
		json_decref(o);
		return NULL;
	}
	bad |= json_object_set_new(o, "guest_roots", roots);
	bad |= json_object_set_new(o, "system_map", s->system_map ?
				   json_string(s->system_map) : json_null());
	bad |= json_object_set_new(o, "vmlinux", s->vmlinux ?
				   json_string(s->vmlinux) : json_null());
	if (realpath(c->session_dir, dir)) {
		snprintf(cache, sizeof(cache), "%s/.build-id", dir);
		bad |= json_object_set_new(o, "build_id_cache", json_string(cache));
	}
	bad |= json_object_set_new(o, "fetch_cache", c->cfg.fetch.cache_dir ?
				   json_string(c->cfg.fetch.cache_dir) : json_null());
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* -g: how the chains were taken; -g dwarf: what the unwinds cost.
 * Nonzero on ENOMEM. */
static int callgraph_json(struct collector *c, struct cguest *g, json_t *root)
{
	struct attribution_dwarf_stats d;
	int bad = json_object_set_new(root, "callgraph", json_string(c->cfg.callgraph));

	if (!c->cfg.host_file)
		return bad;
	attribution_get_dwarf_stats(g->sy, &d);
#define C(v) stats_json_count(v)
	return bad | json_object_set_new(root, "dwarf_unwind", json_pack(
		"{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"unwinds", C(d.unwinds), "frames", C(d.frames),
		"ns_avg", C(d.unwinds ? d.ns / d.unwinds : 0),
		"waited", C(d.waited), "redone", C(d.redone),
		"cut_missing_binary", C(d.cut_missing), "waiting", C(d.waiting),
		"waiting_peak", C(d.waiting_peak)));
#undef C
}

/* session.json "kernel": the HELLO's facts, or before any the kernel as
 * introspection found it (its "kernel": the release, to take
 * <guest>/kallsyms, and _text, _stext to check it against the running
 * kernel).  NULL: none known (errno 0), or ENOMEM. */
static json_t *kernel_json(const struct cguest *g, json_t *intro)
{
	const struct chan_hello *h = gstate_get_hello(g->gs);
	json_t *k;

	errno = 0;
	if (!h)
		return json_incref(json_object_get(intro, "kernel"));
	k = json_pack("{s:s,s:s,s:s}", "release", h->release, "anchor_name", h->anchor_name,
		      "source", "opvm.ko");
	if (!k) {
		errno = ENOMEM;
		return NULL;
	}
	json_object_set_new(k, "anchor_addr", json_u64(h->anchor_addr));
	json_object_set_new(k, "text_addr", json_u64(h->text_addr));
	json_object_set_new(k, "anchor_addr_hex", json_hex(h->anchor_addr));
	json_object_set_new(k, "text_addr_hex", json_hex(h->text_addr));
	json_object_set_new(k, "nr_cpus", json_integer(h->nr_cpus));
	return k;
}

/* session.json "events": the events sampled, in the store's order. */
static json_t *events_json(const struct collector *c)
{
	json_t *ev = json_array();

	for (size_t i = 0; ev && i < c->cfg.nr_events; i++) {
		const struct store_event *e = &c->cfg.events[i];
		char name[sizeof(e->name) + 1];

		memcpy(name, e->name, sizeof(e->name));
		name[sizeof(e->name)] = '\0';
		json_array_append_new(ev, json_pack("{s:s,s:o,s:I}", "name", name,
						    "count", stats_json_count(e->count),
						    "unit_mask", (json_int_t)e->unit_mask));
	}
	return ev;
}

/* session.json's counters, from "channel" to "meta_failures"; intro
 * (introspect_to_json()'s, taken) becomes "introspect".  Nonzero when a
 * member could not be built (ENOMEM). */
static int counters_json(struct collector *c, struct cguest *g,
			 const struct sampler_stats *sp, json_t *intro, json_t *root)
{
	const struct decoder_stats *ds = decoder_get_stats(g->dec);
	const struct gstate_stats *gst = gstate_get_stats(g->gs);
	const struct sampler_stats ss = *sp;
	struct attribution_bymap_stats bm;
	struct store_stats sst;
	struct store_limits lim;
	int bad = 0;

	/* counters come from the guest's doing: saturated, never negative */
#define C(v) stats_json_count(v)
	bad |= json_object_set_new(root, "channel", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"bytes", C(ds->bytes), "records", C(ds->records),
		"bad_records", C(ds->bad_records), "resyncs", C(ds->resyncs),
		"seq_gaps", C(ds->seq_gaps), "skipped_bytes", C(ds->skipped_bytes),
		"refused", C(ds->refused), "unknown_types", C(ds->unknown_types),
		"version_mismatch", C(ds->version_mismatch)));
	bad |= json_object_set_new(root, "sampler", json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o}",
		"backend", g->smp && g->smp->ops && g->smp->ops->name ? g->smp->ops->name : "none",
		"ticks", C(ss.ticks), "samples", C(ss.samples), "throttled", C(ss.throttled),
		"cost_ns_avg", C(ss.ticks ? ss.cost_ns_total / ss.ticks : 0),
		"exits", C(ss.exits),
		"python", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"samples", C(ss.py_samples), "kept", C(ss.py_kept),
			"changed", C(ss.py_changed), "switched", C(ss.py_switched),
			"stale", C(ss.py_stale), "bytes", C(ss.py_bytes),
			"cost_ns", C(ss.py_cost_ns))));
	bad |= json_object_set_new(root, "model", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"processes", C(gstate_nr_processes(g->gs)),
		"threads", C(gstate_nr_threads(g->gs)),
		"cookies", C(gstate_nr_cookies(g->gs)),
		"mappings", C(gstate_nr_mappings(g->gs)),
		"modules", C(gstate_nr_modules(g->gs)),
		"refused", C(gst->refused), "hellos", C(gst->hellos),
		"held", C(attribution_nr_held(g->sy)),
		"mem_bytes", C(gstate_mem_bytes(g->gs)), "max_bytes", C(c->cfg.model_max_bytes),
		"all_guests_bytes", C(c->model_budget.used), "nomem", C(gst->nomem)));
	store_get_stats(g->st, &sst);
	store_get_limits(g->st, &lim);
	bad |= json_object_set_new(root, "store", stats_store_to_json(&sst, &lim));
	bad |= json_object_set_new(root, "store_errors", C(attribution_store_errors(g->sy)));
	bad |= json_object_set_new(root, "fetch", fetch_to_json(g->fetch));
	bad |= intro_json(g, sp, intro);
	bad |= json_object_set_new(root, "introspect", intro);
	attribution_get_bymap_stats(g->sy, &bm);
	bad |= json_object_set_new(root, "by_mapping", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"attributed", C(bm.attributed), "ambiguous", C(bm.ambiguous),
		"unknown", C(bm.unknown), "index_builds", C(bm.index_builds),
		"index_mappings", C(bm.index_mappings),
		"index_over_cap", C(bm.index_over_cap),
		"python_unconfirmed", C(bm.py_unconfirmed)));
	bad |= json_object_set_new(root, "meta_failures", C(g->meta_failures));
#undef C
	return bad;
}

/* session.json's "start" and "duration_s", and a window's bounds.
 * Nonzero on ENOMEM. */
static int times_json(const struct collector *c, const struct cguest *g, uint64_t now,
		      json_t *root)
{
	char start[32];
	struct tm tm;
	int bad = 0;

	gmtime_r(&c->start_wall.tv_sec, &tm);
	strftime(start, sizeof(start), "%Y-%m-%dT%H:%M:%SZ", &tm);
	bad |= json_object_set_new(root, "start", json_string(start));
	/* a window's own time (collector-window.c), else the session's */
	bad |= json_object_set_new(root, "duration_s", json_real(c->cfg.window_ms ?
		(double)(clk_wall_ms() - g->win_start) / 1000.0 :
		(double)(now - c->start_ms) / 1000.0));
	if (c->cfg.window_ms) {	/* its window, so far (collector-window.c) */
		bad |= json_object_set_new(root, "window_start_ms", json_integer(g->win_start));
		bad |= json_object_set_new(root, "window_end_ms",
					   json_integer(clk_wall_ms()));
		bad |= json_object_set_new(root, "windows_sealed", json_integer((json_int_t)g->windows));
	}
	return bad;
}

static json_t *session_json(struct collector *c, struct cguest *g, uint64_t now)
{
	struct sampler_stats ss;
	struct opvm_stats st;
	char sep[64];
	json_t *root, *ev, *mods, *intro, *k = NULL;
	int bad = 0;

	collector_guest_stats(g, &st, &ss);
	separate_str(c->cfg.separate, sep, sizeof(sep));

	root = json_object();
	ev = events_json(c);
	mods = json_array();
	/* once, before "kernel": introspection's "kernel" is session.json's
	 * until opvm.ko says HELLO */
	intro = introspect_to_json(g->intro, g->intro_mode);
	if (!root || !ev || !mods || !intro)
		goto fail;
	if (!(k = kernel_json(g, intro)) && errno == ENOMEM)
		goto fail;
	if (gstate_for_each_module(g->gs, module_json, mods))
		goto fail;

	bad |= json_object_set_new(root, "version", json_integer(1));
	/* 2: sample files of processes in a cgroup under {cg}<path>
	 * (docs/sample-files.md); absent in sessions before it: 1 */
	bad |= json_object_set_new(root, "store_layout", json_integer(2));
	bad |= json_object_set_new(root, "guest", json_string(g->name));
	bad |= json_object_set_new(root, "mode", json_string(c->mode));
	bad |= json_object_set_new(root, "rate_hz", json_integer(c->cfg.rate_hz));
	bad |= json_object_set_new(root, "events", ev);
	ev = NULL;
	bad |= json_object_set_new(root, "vcpus", json_integer(g->nr_vcpus));
	bad |= json_object_set_new(root, "separate", json_string(sep));
	/* --no-python: a session without {py} rows says why */
	bad |= json_object_set_new(root, "no_python", json_boolean(c->cfg.python_off));
	bad |= times_json(c, g, now, root);
	if (c->cfg.callgraph)
		bad |= callgraph_json(c, g, root);
	if (c->cfg.start_exec) {
		uint64_t at;

		/* --from-exec: when the process came, seconds into the session */
		bad |= json_object_set_new(root, "from_exec", json_string(c->cfg.start_exec));
		bad |= json_object_set_new(root, "started_after_s",
			attribution_started(g->sy, &at) ?
			json_real((double)(at > c->start_ms ? at - c->start_ms : 0) / 1000.0) :
			json_null());
	}
	bad |= json_object_set_new(root, "stats", stats_to_json(&st));
	bad |= json_object_set_new(root, "kernel", k ? k : json_null());
	k = NULL;
	bad |= json_object_set_new(root, "modules", mods);
	mods = NULL;
	bad |= json_object_set_new(root, "symbols", symbols_json(c));
	bad |= counters_json(c, g, &ss, intro, root);
	intro = NULL;
	/* a member that could not be built (ENOMEM) would be missing */
	if (bad)
		goto fail;
	return root;
fail:
	json_decref(intro);
	json_decref(k);
	json_decref(ev);
	json_decref(mods);
	json_decref(root);
	return NULL;
}

static int write_session_once(struct collector *c, struct cguest *g, uint64_t now)
{
	json_t *j = session_json(c, g, now);
	char *txt;
	int err;

	if (!j)
		return -ENOMEM;
	txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (!txt)
		return -ENOMEM;
	err = store_write_meta(g->st, txt);
	free(txt);
	return err;
}

/* session.json must not lag the sample files: short of memory, the
 * reserve set aside at the start is given back and the write tried again;
 * the reserve is taken again once memory allows. */
int collector_write_session(struct collector *c, struct cguest *g, uint64_t now)
{
	int err = write_session_once(c, g, now);

	if (err == -ENOMEM && c->reserve) {
		free(c->reserve);
		c->reserve = NULL;
		err = write_session_once(c, g, now);
	}
	if (err) {
		if (g->meta_failures < UINT64_MAX)
			g->meta_failures++;
	} else if (!c->reserve) {
		c->reserve = malloc(RESERVE_BYTES);
	}
	return err;
}
