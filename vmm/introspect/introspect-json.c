// SPDX-License-Identifier: MIT
/*
 * Introspection's session.json "introspect" (vmm/introspect/introspect.h).
 * Its counters and what it found, described by introspection itself, so
 * that the collector writes them without reading its statistics.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/json.h"
#include "vmm/introspect/introspect.h"

/* "kernel": what the reports need to take <guest>/kallsyms (the release)
 * and check it against the running kernel (_text, _stext), in the shape of
 * session.json's own "kernel" (source "introspection"), so that the
 * collector can use it as is while opvm.ko has said no HELLO. */
static json_t *kernel_json(const struct introspect_stats *s)
{
	json_t *k = json_pack("{s:s,s:s,s:s}", "release", s->release, "anchor_name", "_stext",
			      "source", "introspection");
	int bad = !k;

	if (bad)
		return NULL;
	bad |= json_object_set_new(k, "anchor_addr", json_u64(s->stext));
	if (s->build_id[0])
		bad |= json_object_set_new(k, "build_id", json_string(s->build_id));
	bad |= json_object_set_new(k, "text_addr", json_u64(s->text_addr));
	bad |= json_object_set_new(k, "anchor_addr_hex", json_hex(s->stext));
	bad |= json_object_set_new(k, "text_addr_hex", json_hex(s->text_addr));
	if (bad) {
		json_decref(k);
		return NULL;
	}
	return k;
}

/* "mappings": each process's executable mappings (kvmas.h) */
static json_t *maps_json(const struct introspect_stats *s)
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
	if (o && json_object_update_new(o, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"tree_bad", json_u64(m->tree_bad), "tree_cut", json_u64(m->tree_cut),
			"vma_bad", json_u64(m->vma_bad), "path_bad", json_u64(m->path_bad),
			"buildid_missing", json_u64(m->buildid_missing),
			"buildid_late", json_u64(m->buildid_late),
			"files_full", json_u64(m->files_full), "refresh_us", json_u64(m->refresh_us))))
		goto fail;
	if (o && m->walk && json_object_set_new(o, "walk", json_string(m->walk)))
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* "modules": the loadable modules' list and symbols (kmods.h) */
static json_t *mods_json(const struct introspect_stats *s)
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
	if (o && json_object_update_new(o, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"syms_sent", json_u64(s->modsyms_sent), "sym_reads", json_u64(m->sym_reads),
			"syms", json_u64(m->syms), "syms_outside", json_u64(m->syms_outside),
			"syms_bad", json_u64(m->syms_bad), "syms_cut", json_u64(m->syms_cut),
			"tables_bad", json_u64(m->tables_bad),
			"pages_unread", json_u64(m->pages_unread),
			"walk_us", json_u64(s->modules_walk_us),
			"transfer_us", json_u64(s->modsyms_us)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "memsyms": user binaries' .dynsym read from memory */
static json_t *memsyms_json(const struct introspect_stats *s)
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

	if (o && m->last_refusal[0] &&
	    json_object_set_new(o, "last_refusal", json_string(m->last_refusal))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "processes": the process list's walks and their records, and (its
 * "when") when the lists were walked: the probe, the polls that did not
 * walk, and why the others did (introspect_poll()). */
static json_t *procs_json(const struct introspect_stats *s)
{
	json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"btf_bytes", json_u64(s->btf_bytes), "tasks", json_u64(s->tasks),
		"cgroups_sent", json_u64(s->cgroups_sent),
		"cgroups_bad", json_u64(s->cgroups_bad), "cgroups_cut", json_u64(s->cgroups_cut),
		"walks", json_u64(s->walks), "walks_cut", json_u64(s->walks_cut),
		"walks_bad_ptr", json_u64(s->walks_bad_ptr),
		"walk_failed", json_u64(s->walk_failed), "dups", json_u64(s->task_dups),
		"procs_sent", json_u64(s->procs_sent), "execs_sent", json_u64(s->execs_sent),
		"exits_sent", json_u64(s->exits_sent), "refresh_us", json_u64(s->refresh_us));

	if (o && json_object_set_new(o, "when", json_pack("{s:s?,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"probe", s->probe,
			"probe_bad", json_u64(s->probe_bad), "polls_quiet", json_u64(s->polls_quiet),
			"boot", json_u64(s->walks_boot), "unprobed", json_u64(s->walks_unprobed),
			"changed", json_u64(s->walks_changed), "wanted", json_u64(s->walks_wanted),
			"floor", json_u64(s->walks_floor)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The search and kallsyms: where the kernel was found and what its
 * symbol table gave. */
static json_t *search_json(const struct introspect_stats *s, enum introspect_mode mode)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"mode", introspect_mode_name(mode), "state", introspect_state_name(s->state),
		"release", s->release,
		"vmcoreinfo_gpa", json_hex(s->vmcoreinfo_gpa),
		"kernel_offset", json_hex(s->kernel_offset),
		"passes", json_u64(s->passes), "scanned_bytes", json_u64(s->scanned_bytes),
		"kallsyms_syms", json_u64(s->nr_syms), "ksyms_sent", json_u64(s->ksyms_sent),
		"ksyms_other", json_u64(s->ksyms_other), "ksyms_bad", json_u64(s->ksyms_bad),
		"ksyms_unsorted", json_u64(s->ksyms_unsorted),
		"bytes_read", json_u64(s->ksyms_bytes_read),
		"kallsyms_ms", json_u64(s->kallsyms_ms), "refused", json_u64(s->refused));
	int bad = !o;

	if (bad)
		return NULL;
	bad |= json_object_set_new(o, "kernel_text_hex", json_hex(s->text_addr));
	bad |= json_object_set_new(o, "reboots", json_u64(s->reboots));
	bad |= json_object_set_new(o, "memsyms", memsyms_json(s));
	if (s->kallsyms_from)
		bad |= json_object_set_new(o, "kallsyms_from", json_string(s->kallsyms_from));
	bad |= json_object_set_new(o, "kallsyms_search_bytes", json_u64(s->kallsyms_search_bytes));
	bad |= json_object_set_new(o, "kallsyms_search_candidates",
				   json_u64(s->kallsyms_search_candidates));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *introspect_to_json(const struct introspect *in, enum introspect_mode mode)
{
	const struct introspect_stats *s;
	json_t *o;
	int bad = 0;

	if (!in)
		return json_pack("{s:s}", "mode", introspect_mode_name(mode));
	s = introspect_get_stats(in);
	o = search_json(s, mode);
	if (!o)
		return NULL;
	bad |= json_object_set_new(o, "processes", procs_json(s));
	/* those named afterwards by their kernel stack (boot) */
	bad |= json_object_set_new(o, "by_stack", json_pack("{s:o,s:o,s:o,s:o}",
		"stacks", json_u64(s->stacks), "stacks_bad", json_u64(s->stacks_bad),
		"lookups", json_u64(s->sp_lookups), "named", json_u64(s->sp_named)));
	bad |= json_object_set_new(o, "mappings", maps_json(s));
	bad |= json_object_set_new(o, "modules", mods_json(s));
	if (s->last_error[0])
		bad |= json_object_set_new(o, "last_error", json_string(s->last_error));
	if (s->release[0])
		bad |= json_object_set_new(o, "kernel", kernel_json(s));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}
