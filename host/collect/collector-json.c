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
#include "lib/ring.h"
#include "lib/sample.h"
#include "host/collect/stats.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"
#include "vmm/introspect/introspect.h"
#include "vmm/sampler.h"
#include "lib/clock.h"

static json_t *json_u64(uint64_t v);
static json_t *json_hex(uint64_t v);

/* session.json "kernel" from introspection while opvm.ko has said no
 * HELLO: what the reports need to take <guest>/kallsyms (the release) and
 * check it against the running kernel (_text, _stext).  NULL: nothing
 * known yet (errno 0), or ENOMEM. */
static json_t *intro_kernel_json(const struct cguest *g)
{
	const struct introspect_stats *s = g->intro ? introspect_get_stats(g->intro) : NULL;
	json_t *k;

	errno = 0;
	if (!s || !s->release[0])
		return NULL;
	k = json_pack("{s:s,s:s,s:s}", "release", s->release, "anchor_name", "_stext",
		      "source", "introspection");
	if (!k) {
		errno = ENOMEM;
		return NULL;
	}
	json_object_set_new(k, "anchor_addr", json_u64(s->stext));
	if (s->build_id[0])
		json_object_set_new(k, "build_id", json_string(s->build_id));
	json_object_set_new(k, "text_addr", json_u64(s->text_addr));
	json_object_set_new(k, "anchor_addr_hex", json_hex(s->stext));
	json_object_set_new(k, "text_addr_hex", json_hex(s->text_addr));
	errno = 0;
	return k;
}

/* introspect.mappings: each process's executable mappings (kvmas.h) */
static json_t *intro_maps_json(const struct introspect_stats *s)
{
	const struct kvmas_stats *m = s->maps;
	json_t *o;

	if (!m)
		return json_pack("{s:b,s:s}", "read", 0, "why",
				 s->maps_error[0] ? s->maps_error : "no kernel offsets yet");
	o = json_pack("{s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "read", 1,
		"refreshes", json_u64(m->refreshes), "procs_read", json_u64(m->procs_read),
		"procs_unchanged", json_u64(m->procs_unchanged),
		"procs_deferred", json_u64(m->procs_deferred), "nodes", json_u64(m->nodes),
		"vmas", json_u64(m->vmas), "exec_maps", json_u64(m->exec_maps),
		"maps_sent", json_u64(m->maps_sent), "munmaps_sent", json_u64(m->munmaps_sent),
		"cookies_sent", json_u64(m->cookies_sent));
	if (o)
		json_object_update_new(o, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"tree_bad", json_u64(m->tree_bad), "tree_cut", json_u64(m->tree_cut),
			"vma_bad", json_u64(m->vma_bad), "path_bad", json_u64(m->path_bad),
			"buildid_missing", json_u64(m->buildid_missing),
			"buildid_late", json_u64(m->buildid_late),
			"files_full", json_u64(m->files_full), "refresh_us", json_u64(m->refresh_us)));
	if (o && m->walk)
		json_object_set_new(o, "walk", json_string(m->walk));
	return o;
}

/* introspect.modules: the loadable modules' list and symbols (kmods.h) */
static json_t *intro_mods_json(const struct introspect_stats *s)
{
	const struct kmods_stats *m = s->modules;
	json_t *o;

	if (!m)
		return json_pack("{s:b,s:s}", "read", 0, "why",
				 s->modules_error[0] ? s->modules_error : "no kernel offsets yet");
	o = json_pack("{s:b,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "read", 1,
		"layout", s->modules_layout ? s->modules_layout : "",
		"modules", json_u64(s->nr_modules), "walks", json_u64(m->walks),
		"cut", json_u64(m->cut), "bad_ptr", json_u64(m->bad_ptr),
		"refused", json_u64(m->refused), "unformed", json_u64(m->unformed),
		"dups", json_u64(s->module_dups), "sent", json_u64(s->modules_sent),
		"freed", json_u64(s->modules_freed),
		"transfers", json_u64(s->modsyms_transfers));
	if (o)
		json_object_update_new(o, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"syms_sent", json_u64(s->modsyms_sent), "sym_reads", json_u64(m->sym_reads),
			"syms", json_u64(m->syms), "syms_outside", json_u64(m->syms_outside),
			"syms_bad", json_u64(m->syms_bad), "syms_cut", json_u64(m->syms_cut),
			"tables_bad", json_u64(m->tables_bad),
			"pages_unread", json_u64(m->pages_unread)));
	if (o)
		json_object_update_new(o, json_pack("{s:o,s:o}",
			"walk_us", json_u64(s->modules_walk_us),
			"transfer_us", json_u64(s->modsyms_us)));
	return o;
}

/* introspect.memsyms: user binaries' .dynsym read from memory */
static json_t *intro_memsyms_json(const struct introspect_stats *s)
{
	const struct introspect_memsyms *m = &s->memsyms;
	json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"files", json_u64(m->files), "refused", json_u64(m->refused),
		"absent", json_u64(m->absent), "empty", json_u64(m->empty),
		"budget", json_u64(m->budget),
		"syms", json_u64(m->syms), "syms_absent", json_u64(m->syms_absent),
		"syms_bad", json_u64(m->syms_bad), "plt", json_u64(m->plt),
		"plt_stubs", json_u64(m->plt_stubs), "plt_refused", json_u64(m->plt_refused),
		"pages", json_u64(m->pages),
		"pages_absent", json_u64(m->pages_absent), "us", json_u64(m->us));

	if (o && m->last_refusal[0])
		json_object_set_new(o, "last_refusal", json_string(m->last_refusal));
	return o;
}

/* When the lists were walked: the probe, the polls that did not walk,
 * and why the others did (introspect_poll()). */
static json_t *intro_when_json(const struct introspect_stats *s)
{
	return json_pack("{s:s?,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "probe", s->probe,
		"probe_bad", json_u64(s->probe_bad), "polls_quiet", json_u64(s->polls_quiet),
		"boot", json_u64(s->walks_boot), "unprobed", json_u64(s->walks_unprobed),
		"changed", json_u64(s->walks_changed), "wanted", json_u64(s->walks_wanted),
		"floor", json_u64(s->walks_floor));
}

static json_t *intro_json(const struct cguest *g)
{
	const struct introspect_stats *s;
	json_t *o;

	if (!g->intro)
		return json_pack("{s:s}", "mode", introspect_mode_name(g->intro_mode));
	s = introspect_get_stats(g->intro);
	o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"mode", introspect_mode_name(g->intro_mode), "state",
		introspect_state_name(s->state),
		"release", s->release,
		"vmcoreinfo_gpa", json_hex(s->vmcoreinfo_gpa),
		"kernel_offset", json_hex(s->kernel_offset),
		"passes", json_u64(s->passes), "scanned_bytes", json_u64(s->scanned_bytes),
		"kallsyms_syms", json_u64(s->nr_syms), "ksyms_sent", json_u64(s->ksyms_sent),
		"ksyms_other", json_u64(s->ksyms_other), "ksyms_bad", json_u64(s->ksyms_bad),
		"ksyms_unsorted", json_u64(s->ksyms_unsorted),
		"bytes_read", json_u64(s->ksyms_bytes_read),
		"kallsyms_ms", json_u64(s->kallsyms_ms), "refused", json_u64(s->refused));
	if (o) {
		json_object_set_new(o, "kernel_text_hex", json_hex(s->text_addr));
		json_object_set_new(o, "reboots", json_u64(s->reboots));
		json_object_set_new(o, "memsyms", intro_memsyms_json(s));
		if (s->kallsyms_from)
			json_object_set_new(o, "kallsyms_from", json_string(s->kallsyms_from));
		json_object_set_new(o, "kallsyms_search_bytes", json_u64(s->kallsyms_search_bytes));
		json_object_set_new(o, "kallsyms_search_candidates",
				    json_u64(s->kallsyms_search_candidates));
		json_object_set_new(o, "processes", json_pack(
			"{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"btf_bytes", json_u64(s->btf_bytes), "tasks", json_u64(s->tasks),
			"cgroups_sent", json_u64(s->cgroups_sent),
			"cgroups_bad", json_u64(s->cgroups_bad), "cgroups_cut", json_u64(s->cgroups_cut),
			"walks", json_u64(s->walks), "walks_cut", json_u64(s->walks_cut),
			"walks_bad_ptr", json_u64(s->walks_bad_ptr),
			"walk_failed", json_u64(s->walk_failed), "dups", json_u64(s->task_dups),
			"procs_sent", json_u64(s->procs_sent), "execs_sent", json_u64(s->execs_sent),
			"exits_sent", json_u64(s->exits_sent), "refresh_us", json_u64(s->refresh_us)));
		json_object_set_new(json_object_get(o, "processes"), "when", intro_when_json(s));
		struct sampler_stats ss = { 0 };

		if (g->smp && g->smp->ops && g->smp->ops->get_stats)
			g->smp->ops->get_stats(g->smp, &ss);
		/* per walk (processes) and per sample (the current task
		 * against opvm.ko's slot: the same tgid or not) */
		json_object_set_new(o, "crosscheck", json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"walks", json_u64(g->xc_walks), "processes", json_u64(g->xc_seen),
			"agree", json_u64(g->xc_agree), "differ", json_u64(g->xc_differ),
			"missing", json_u64(g->xc_missing),
			"samples_agree", json_u64(ss.cur_agree),
			"samples_differ", json_u64(ss.cur_differ)));
		json_object_set_new(o, "current", json_pack("{s:b,s:o,s:o,s:o}",
			"known", g->cur_known,
			"samples_named", json_u64(ss.cur_named), "bad", json_u64(ss.cur_bad),
			"kernel_samples_without_task", json_u64(ss.kernel_no_task)));
		/* those named afterwards by their kernel stack (boot) */
		json_object_set_new(o, "by_stack", json_pack("{s:o,s:o,s:o,s:o}",
			"stacks", json_u64(s->stacks), "stacks_bad", json_u64(s->stacks_bad),
			"lookups", json_u64(s->sp_lookups), "named", json_u64(s->sp_named)));
	}
	if (o)
		json_object_set_new(o, "mappings", intro_maps_json(s));
	if (o)
		json_object_set_new(o, "modules", intro_mods_json(s));
	if (o && s->last_error[0])
		json_object_set_new(o, "last_error", json_string(s->last_error));
	return o;
}

/* ---- session.json -------------------------------------------------------- */

static json_t *json_u64(uint64_t v)
{
	/* jansson integers are signed 64-bit; kernel addresses are not.  Larger
	 * values go out as reals (exact for 2 MiB-aligned kernel addresses),
	 * and callers add a "_hex" string that is always exact. */
	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	return json_real((double)v);
}

static json_t *json_hex(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
	return json_string(b);
}

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

/* session.json "kernel": the HELLO's facts, or introspection's before
 * any.  NULL: none known (errno 0), or ENOMEM. */
static json_t *kernel_json(const struct cguest *g)
{
	const struct chan_hello *h = gstate_get_hello(g->gs);
	json_t *k;

	if (!h)
		return intro_kernel_json(g);
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
						    "count", json_u64(e->count),
						    "unit_mask", (json_int_t)e->unit_mask));
	}
	return ev;
}

/* session.json's counters, from "channel" to "meta_failures".  Nonzero
 * when a member could not be built (ENOMEM). */
static int counters_json(struct collector *c, struct cguest *g,
			 const struct sampler_stats *sp, json_t *root)
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
	bad |= json_object_set_new(root, "introspect", intro_json(g));
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

static json_t *session_json(struct collector *c, struct cguest *g, uint64_t now)
{
	struct sampler_stats ss;
	struct opvm_stats st;
	char sep[64], start[32];
	json_t *root, *ev, *mods, *k = NULL;
	struct tm tm;
	int bad = 0;

	collector_guest_stats(g, &st, &ss);
	separate_str(c->cfg.separate, sep, sizeof(sep));
	gmtime_r(&c->start_wall.tv_sec, &tm);
	strftime(start, sizeof(start), "%Y-%m-%dT%H:%M:%SZ", &tm);

	root = json_object();
	ev = events_json(c);
	mods = json_array();
	if (!root || !ev || !mods)
		goto fail;
	if (!(k = kernel_json(g)) && errno == ENOMEM)
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
	bad |= counters_json(c, g, &ss, root);
	/* a member that could not be built (ENOMEM) would be missing */
	if (bad)
		goto fail;
	return root;
fail:
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
