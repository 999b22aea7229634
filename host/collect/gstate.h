/* SPDX-License-Identifier: MIT */
/*
 * Guest-state model: what the host knows about one guest's processes,
 * address spaces, mapped files, kernel modules and kernel placement.
 *
 * Fed by the channel decoder (host/collect/decoder.c) with values that came from the
 * guest and are therefore hostile: every string is bounded and copied, every
 * range checked, and every table bounded by struct gstate_limits; a mutator
 * that would exceed a bound refuses with -ENOSPC and counts the refusal in
 * gstate_stats.  Read by sync (host/collect/attribution.c) on the hot path: lookups are
 * O(log n) or better.
 *
 * Not thread-safe: the collector's main loop both decodes and syncs.
 *
 * Lifetimes: pointers returned by lookups stay valid until the next mutator
 * call on the same gstate (exit/exec/munmap may free them).  Strings in
 * returned structs are NUL-terminated copies owned by the gstate.
 */
#ifndef OPVM_GSTATE_H
#define OPVM_GSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/channel.h"

struct gstate;

/* Bytes of heap that several models together may hold (attach --all: one
 * budget for every guest).  Owned by the caller; it must outlive the
 * gstates that charge it.  Not thread-safe (one collector thread). */
struct gstate_budget {
	size_t limit;
	size_t used;
};

struct gstate_limits {
	size_t max_processes;		/* default 65536 */
	size_t max_threads;		/* default 262144 */
	size_t max_mappings_per_proc;	/* default 4096 */
	size_t max_mappings;		/* all processes, default 1 << 20 */
	size_t max_cookies;		/* default 65536 */
	size_t max_modules;		/* default 4096 */
	size_t max_cgroups;		/* distinct cgroup paths, default 16384 */
	/* Heap this model may hold (tables, paths, mapping arrays), whatever
	 * the counts above allow: default OPVM_MODEL_MAX_BYTES (0 here means
	 * the default).  shared, if non-NULL, is charged too. */
	size_t max_bytes;
	struct gstate_budget *shared;
};
#define OPVM_MODEL_MAX_BYTES	((size_t)64 << 20)
/* The default limits (with max_bytes filled in). */
void gstate_default_limits(struct gstate_limits *out);

struct gstate_cookie {
	uint64_t id;
	char *path;			/* sanitised for display; never a host path */
	uint8_t build_id[32];
	uint8_t build_id_len;
	uint8_t described;		/* 0: a placeholder no COOKIE record named yet */
};

struct gstate_mapping {
	uint64_t start, end;		/* [start, end) */
	uint64_t pgoff;			/* file offset of start */
	const struct gstate_cookie *cookie; /* NULL: anonymous */
};

struct gstate_process {
	uint32_t tgid;
	uint32_t ppid;
	uint64_t cr3;			/* normalised */
	char comm[16 + 1];
	const struct gstate_cookie *exe; /* NULL if unknown */
	/* Its cgroup (v2) path, sanitised and interned: one string per
	 * distinct path, equal pointers for equal paths, valid until the
	 * next HELLO.  NULL: not said (no CGROUP record, an old module). */
	const char *cgroup;
	/* mappings sorted by start, non-overlapping */
	const struct gstate_mapping *maps;
	size_t nr_maps;
};

struct gstate_module {
	char name[56 + 1];
	uint64_t base, size;
};

struct gstate_stats {
	uint64_t records;		/* records applied */
	uint64_t refused;		/* mutations refused (bounds, bad values) */
	uint64_t guest_lost;		/* LOST counts reported by the guest */
	uint64_t hellos;		/* HELLOs seen (resets = hellos - 1) */
	uint64_t cr3_shared;		/* processes announced on an address
					 * space another live one had */
	uint64_t nomem;			/* allocations refused: the memory
					 * budget, or malloc itself */
};

/* limits may be NULL for the defaults.  Returns NULL and sets errno. */
struct gstate *gstate_new(const struct gstate_limits *limits);
void gstate_free(struct gstate *gs);

/* ---- mutators (decoder side); return 0 or -errno --------------------- */
/* A HELLO resets the model (a rebooted guest starts from nothing). */
int gstate_hello(struct gstate *gs, const struct chan_hello *h);
const struct chan_hello *gstate_get_hello(const struct gstate *gs); /* NULL before HELLO */
/* Introspection walked the guest's process list (vmm/introspect/): the
 * model knows its processes, as after a HELLO and the module's walk. */
void gstate_set_procs_walked(struct gstate *gs);
/* Introspection is still looking for the guest's kernel early in the
 * session: user samples of an address space nobody named yet are held (for
 * the sync's hold time) as after a walk, not filed without a process. */
void gstate_set_procs_expected(struct gstate *gs, bool expected);
bool gstate_procs_expected(const struct gstate *gs);
/* Whether some source announces processes (a HELLO, or a walk): a sample
 * of an address space the model does not know is then worth holding. */
bool gstate_procs_announced(const struct gstate *gs);
/* Introspection also reads each process's mappings (at every walk): a user
 * sample outside every known mapping of its process is worth holding for
 * the next walk, as after a HELLO (the module sends MMAP as it happens). */
void gstate_set_maps_walked(struct gstate *gs);
/* Whether some source sends mappings: a HELLO, or that. */
bool gstate_maps_announced(const struct gstate *gs);
/* Introspection's walks so far (0: none, or no introspection): a sample
 * waiting for a process or mapping that only a walk can send waits for the
 * next walk, not only for a time (attribution's hold). */
void gstate_set_walks(struct gstate *gs, uint64_t walks);
uint64_t gstate_walks(const struct gstate *gs);

/* Process appears (initial walk or fork), or replaces its image (exec:
 * mappings dropped, cr3/comm/exe updated). cr3 is normalised here. */
int gstate_proc(struct gstate *gs, uint32_t tgid, uint32_t ppid, uint64_t cr3,
		const char *comm, size_t comm_len, uint64_t exe_cookie);
int gstate_exec(struct gstate *gs, uint32_t tgid, uint64_t cr3,
		const char *comm, size_t comm_len, uint64_t exe_cookie);
int gstate_proc_exit(struct gstate *gs, uint32_t tgid);
int gstate_thread(struct gstate *gs, uint32_t tid, uint32_t tgid,
		  const char *comm, size_t comm_len);
int gstate_thread_exit(struct gstate *gs, uint32_t tid);
/* Process tgid is in cgroup path (path_len raw guest bytes, cut at 1024
 * and sanitised; it must start with '/').  The same cgroup again changes
 * nothing (no new generation). */
int gstate_cgroup(struct gstate *gs, uint32_t tgid, const char *path, size_t path_len);

/* path is path_len raw guest bytes (not terminated); sanitised on copy. */
int gstate_cookie(struct gstate *gs, uint64_t id, const char *path,
		  size_t path_len, const uint8_t *build_id, size_t build_id_len);
/* Whether gstate_cookie() with these arguments would give cookie id, already
 * described by the guest, another path or build-id: samples taken under the
 * old name must be filed before it changes.  0 for a new id or a
 * placeholder being filled in. */
int gstate_cookie_renames(const struct gstate *gs, uint64_t id, const char *path,
			  size_t path_len, const uint8_t *build_id, size_t build_id_len);
/* Overlapping older mappings are trimmed/replaced, as mmap(MAP_FIXED) does. */
int gstate_mmap(struct gstate *gs, uint32_t tgid, uint64_t start, uint64_t end,
		uint64_t pgoff, uint64_t cookie);
int gstate_munmap(struct gstate *gs, uint32_t tgid, uint64_t start, uint64_t end);
int gstate_module(struct gstate *gs, const char *name, size_t name_len,
		  uint64_t base, uint64_t size);
int gstate_module_free(struct gstate *gs, const char *name, size_t name_len);
void gstate_lost(struct gstate *gs, uint64_t count);

/* ---- lookups (sync side) ------------------------------------------------ */
const struct gstate_process *gstate_proc_by_cr3(const struct gstate *gs, uint64_t cr3_norm);
const struct gstate_process *gstate_proc_by_tgid(const struct gstate *gs, uint32_t tgid);
/* tgid of thread tid, or 0 if unknown */
uint32_t gstate_thread_tgid(const struct gstate *gs, uint32_t tid);
const char *gstate_thread_comm(const struct gstate *gs, uint32_t tid); /* NULL if unknown */
const struct gstate_mapping *gstate_map_find(const struct gstate_process *p, uint64_t addr);
const struct gstate_module *gstate_module_find(const struct gstate *gs, uint64_t addr);
/* As gstate_module_find(), and sets [*lo, *hi) to the widest range of
 * addresses around addr with the same answer (the module's text, or the gap
 * between modules), so that callers can cache it. */
const struct gstate_module *gstate_module_range(const struct gstate *gs, uint64_t addr,
						uint64_t *lo, uint64_t *hi);
const struct gstate_cookie *gstate_cookie_find(const struct gstate *gs, uint64_t id);
/* The module called name (raw guest bytes, sanitised as gstate_module()
 * does), or NULL. */
const struct gstate_module *gstate_module_by_name(const struct gstate *gs,
						  const char *name, size_t name_len);
/* Whether [start, end) overlaps any mapping of p / any module: a new
 * mapping or module there replaces something. */
int gstate_map_overlaps(const struct gstate_process *p, uint64_t start, uint64_t end);
int gstate_module_overlaps(const struct gstate *gs, uint64_t start, uint64_t end);

/* Generation number, bumped by every mutator: lets per-vCPU caches in sync
 * know their cached pointers may be stale. */
uint64_t gstate_generation(const struct gstate *gs);

/* Table sizes, for tests and the status line. */
size_t gstate_nr_processes(const struct gstate *gs);
size_t gstate_nr_threads(const struct gstate *gs);
size_t gstate_nr_cookies(const struct gstate *gs);
size_t gstate_nr_modules(const struct gstate *gs);
size_t gstate_nr_mappings(const struct gstate *gs);
size_t gstate_nr_cgroups(const struct gstate *gs);	/* distinct paths */
const struct gstate_stats *gstate_get_stats(const struct gstate *gs);
/* Heap the model holds now, as charged to its budgets. */
size_t gstate_mem_bytes(const struct gstate *gs);

/* How many live processes are on address space cr3_norm (0: none).
 * Shared address spaces are reference counted: one process's exit leaves
 * the others found by gstate_proc_by_cr3() (the one announced last). */
size_t gstate_cr3_refs(const struct gstate *gs, uint64_t cr3_norm);
/* Hash-table slots visited so far by lookups and mutators: lets tests
 * check that an operation costs O(1) rather than O(table size). */
uint64_t gstate_work(const struct gstate *gs);

/* Iteration (reports of live state, tests): calls fn for each; stops and
 * returns fn's value when nonzero. */
int gstate_for_each_proc(const struct gstate *gs,
			 int (*fn)(const struct gstate_process *p, void *arg), void *arg);
int gstate_for_each_module(const struct gstate *gs,
			   int (*fn)(const struct gstate_module *m, void *arg), void *arg);

#endif /* OPVM_GSTATE_H */
