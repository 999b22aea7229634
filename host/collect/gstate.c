// SPDX-License-Identifier: MIT
/*
 * Guest-state model (see host/collect/gstate.h for the contract).
 *
 * Tables:
 *   tgid -> process, normalised cr3 -> process, tid -> thread,
 *   cookie id -> cookie: open-addressing hash tables with linear probing and
 *   backward-shift deletion (no tombstones, so a guest that forks and reaps
 *   processes forever keeps probe lengths and table sizes where they were).
 *   Key 0 marks an empty slot; 0 is never a valid tgid, tid, cookie or
 *   address-space key (kernel threads have cr3 0 and are not in the cr3 map).
 *   Per process: mappings in an array sorted by start, non-overlapping.
 *   Modules: an array sorted by base, non-overlapping.
 *
 * Every value comes from the guest: ranges are checked for overflow, strings
 * are copied bounded and sanitised, and every table has a limit.
 */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "host/collect/gstate.h"
#include "lib/hash.h"
#include "lib/text.h"
#include "lib/sample.h"
#include "lib/sort.h"

#define HT_MIN_BITS		6
#define OPVM_COMM_MAX		16	/* TASK_COMM_LEN */
#define OPVM_MODNAME_MAX	56	/* MODULE_NAME_LEN */
#define OPVM_PATH_MAX_HOST	4096	/* longest guest path kept */
#define OPVM_CGROUP_MAX_HOST	1024	/* longest cgroup path kept */

struct ht_ent {
	uint64_t key;		/* 0: empty */
	void *val;
};

struct gstate;

struct ht {
	struct ht_ent *ents;
	unsigned bits;
	size_t count;
	uint64_t *work;		/* the gstate's slot-visit counter */
	struct gstate *gs;	/* charged for ents */
};

struct thread;

struct proc {
	struct gstate_process pub;
	struct gstate_mapping *maps;	/* == pub.maps */
	size_t maps_cap;
	struct thread *threads;		/* non-main threads of this tgid */
	/* The processes on one address space (see cr3_link()) */
	struct proc *cr3_prev, *cr3_next;
	bool cr3_linked;
};

struct thread {
	uint32_t tid;
	uint32_t tgid;
	char comm[OPVM_COMM_MAX + 1];
	struct proc *owner;		/* NULL: process unknown */
	struct thread *prev, *next;	/* owner's thread list */
};

struct gstate {
	struct gstate_limits lim;
	struct ht by_tgid;		/* -> struct proc */
	struct ht by_cr3;		/* -> struct proc */
	struct ht threads;		/* -> struct thread */
	struct ht cookies;		/* -> struct gstate_cookie */
	struct ht cgroups;		/* path hash -> interned char * */
	struct gstate_module *mods;
	size_t nr_mods, mods_cap;
	size_t nr_maps;			/* all processes */
	uint64_t work;			/* hash-table slots visited */
	bool have_hello;
	bool procs_walked;		/* introspection announced the processes */
	bool procs_expected;		/* ... and is about to: hold, do not guess */
	bool maps_walked;		/* introspection sends mappings too */
	uint64_t walks;			/* introspection's walks so far */
	struct chan_hello hello;
	uint64_t gen;
	struct gstate_stats stats;
	size_t mem;			/* heap charged (malloc_usable_size) */
};

/* ---- memory ------------------------------------------------------------- */

/*
 * Every block the model keeps is charged to its own limit and to the shared
 * budget, by its usable size; past either the block is given back and the
 * allocation fails like malloc's (-ENOMEM), counted in stats.nomem.  A
 * guest can then make the model refuse records, never grow it further.
 */
static void *mem_charge(struct gstate *gs, void *p)
{
	struct gstate_budget *b = gs->lim.shared;
	size_t n;

	if (!p) {
		gs->stats.nomem++;
		return NULL;
	}
	n = malloc_usable_size(p);
	if (n > gs->lim.max_bytes - gs->mem || (b && (b->used > b->limit ||
						      n > b->limit - b->used))) {
		free(p);
		gs->stats.nomem++;
		errno = ENOMEM;
		return NULL;
	}
	gs->mem += n;
	if (b)
		b->used += n;
	return p;
}

static void mem_free(struct gstate *gs, void *p)
{
	size_t n;

	if (!p)
		return;
	n = malloc_usable_size(p);
	gs->mem -= n;
	if (gs->lim.shared)
		gs->lim.shared->used -= n;
	free(p);
}

static void *mem_alloc(struct gstate *gs, size_t n)
{
	return mem_charge(gs, malloc(n));
}

static void *mem_zalloc(struct gstate *gs, size_t nmemb, size_t size)
{
	return mem_charge(gs, calloc(nmemb, size));
}

/* realloc() for charged blocks: a new block is charged before the old one
 * is given back, so a budget is never exceeded in between. */
static void *mem_grow(struct gstate *gs, void *old, size_t old_n, size_t n)
{
	void *p = mem_alloc(gs, n);

	if (p && old) {
		memcpy(p, old, old_n < n ? old_n : n);
		mem_free(gs, old);
	}
	return p;
}

size_t gstate_mem_bytes(const struct gstate *gs)
{
	return gs->mem;
}

/* ---- strings ------------------------------------------------------------ */

/*
 * Copies at most in_len bytes of in (stopping at a NUL) into out[cap], NUL
 * terminated.  Control bytes and malformed UTF-8 become '?': the result is
 * safe to print, to put in JSON and to hand to store_mangle().  Returns the
 * length written.
 */
static size_t str_sanitise(char *out, size_t cap, const char *in, size_t in_len)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0;

	if (!cap)
		return 0;
	if (!in)
		in_len = 0;
	while (i < in_len && s[i] && o + 1 < cap) {
		size_t n = text_utf8_char(in + i, in_len - i);

		if (n == 1) {
			out[o++] = (s[i] < 0x20 || s[i] == 0x7f) ? '?' : (char)s[i];
			i++;
			continue;
		}
		if (n) {
			if (o + n >= cap)
				break;	/* no room for the whole character */
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		out[o++] = '?';
		i++;
	}
	out[o] = '\0';
	return o;
}

/* ---- hash tables -------------------------------------------------------- */

static inline size_t ht_hash(uint64_t key, unsigned bits)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static int ht_init(struct ht *t, struct gstate *gs)
{
	t->bits = HT_MIN_BITS;
	t->count = 0;
	t->work = &gs->work;
	t->gs = gs;
	t->ents = mem_zalloc(gs, (size_t)1 << t->bits, sizeof(*t->ents));
	return t->ents ? 0 : -ENOMEM;
}

static void ht_fini(struct ht *t)
{
	if (t->gs)
		mem_free(t->gs, t->ents);
	t->ents = NULL;
	t->count = 0;
}

static void *ht_get(const struct ht *t, uint64_t key)
{
	size_t mask = ((size_t)1 << t->bits) - 1;
	size_t i;

	if (!key)
		return NULL;
	for (i = ht_hash(key, t->bits);; i = (i + 1) & mask) {
		(*t->work)++;
		if (t->ents[i].key == key)
			return t->ents[i].val;
		if (!t->ents[i].key)
			return NULL;
	}
}

static void ht_place(struct ht_ent *ents, unsigned bits, uint64_t key, void *val)
{
	size_t mask = ((size_t)1 << bits) - 1;
	size_t i;

	for (i = ht_hash(key, bits); ents[i].key; i = (i + 1) & mask)
		;
	ents[i].key = key;
	ents[i].val = val;
}

static int ht_resize(struct ht *t, unsigned bits)
{
	struct ht_ent *n = mem_zalloc(t->gs, (size_t)1 << bits, sizeof(*n));
	size_t i, old = (size_t)1 << t->bits;

	if (!n)
		return -ENOMEM;
	*t->work += old;
	for (i = 0; i < old; i++)
		if (t->ents[i].key)
			ht_place(n, bits, t->ents[i].key, t->ents[i].val);
	mem_free(t->gs, t->ents);
	t->ents = n;
	t->bits = bits;
	return 0;
}

/* Inserts or replaces.  Load factor stays <= 1/2. */
static int ht_put(struct ht *t, uint64_t key, void *val)
{
	size_t mask = ((size_t)1 << t->bits) - 1;
	size_t i;

	for (i = ht_hash(key, t->bits); t->ents[i].key; i = (i + 1) & mask) {
		(*t->work)++;
		if (t->ents[i].key == key) {
			t->ents[i].val = val;
			return 0;
		}
	}
	if ((t->count + 1) * 2 > ((size_t)1 << t->bits)) {
		int err = ht_resize(t, t->bits + 1);

		if (err)
			return err;
		ht_place(t->ents, t->bits, key, val);
	} else {
		t->ents[i].key = key;
		t->ents[i].val = val;
	}
	t->count++;
	return 0;
}

/* Backward-shift deletion: later members of the probe run move up so no
 * tombstone is needed. */
static void ht_del(struct ht *t, uint64_t key)
{
	size_t mask = ((size_t)1 << t->bits) - 1;
	size_t i, j;

	if (!key)
		return;
	for (i = ht_hash(key, t->bits);; i = (i + 1) & mask) {
		(*t->work)++;
		if (!t->ents[i].key)
			return;
		if (t->ents[i].key == key)
			break;
	}
	j = i;
	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		(*t->work)++;
		if (!t->ents[j].key)
			break;
		home = ht_hash(t->ents[j].key, t->bits);
		/* move j into the hole at i unless its home lies in (i, j] */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && (home <= i && home > j))) {
			t->ents[i] = t->ents[j];
			i = j;
		}
	}
	t->ents[i].key = 0;
	t->ents[i].val = NULL;
	t->count--;
	/* give memory back after a burst, keeping hysteresis */
	if (t->bits > HT_MIN_BITS && t->count * 8 < ((size_t)1 << t->bits))
		ht_resize(t, t->bits - 1);	/* failure just keeps it big */
}

/* ---- lifetime ------------------------------------------------------------ */

static const struct gstate_limits default_limits = {
	.max_processes = 65536,
	.max_threads = 262144,
	.max_mappings_per_proc = 4096,
	.max_mappings = 1u << 20,
	.max_cookies = 65536,
	.max_modules = 4096,
	.max_cgroups = 16384,
};

void gstate_default_limits(struct gstate_limits *out)
{
	*out = default_limits;
	out->max_bytes = OPVM_MODEL_MAX_BYTES;
}

static void proc_destroy(struct gstate *gs, struct proc *p)
{
	struct thread *t = p->threads;

	while (t) {
		struct thread *next = t->next;

		ht_del(&gs->threads, t->tid);
		mem_free(gs, t);
		t = next;
	}
	gs->nr_maps -= p->pub.nr_maps;
	mem_free(gs, p->maps);
	mem_free(gs, p);
}

static void cookie_destroy(struct gstate *gs, struct gstate_cookie *c)
{
	if (c)
		mem_free(gs, c->path);
	mem_free(gs, c);
}

static void model_clear(struct gstate *gs)
{
	size_t i, n;

	n = (size_t)1 << gs->by_tgid.bits;
	for (i = 0; i < n; i++)
		if (gs->by_tgid.ents[i].key)
			proc_destroy(gs, gs->by_tgid.ents[i].val);
	/* threads whose process was never known */
	n = (size_t)1 << gs->threads.bits;
	for (i = 0; i < n; i++)
		if (gs->threads.ents[i].key)
			mem_free(gs, gs->threads.ents[i].val);
	n = (size_t)1 << gs->cookies.bits;
	for (i = 0; i < n; i++)
		if (gs->cookies.ents[i].key)
			cookie_destroy(gs, gs->cookies.ents[i].val);
	n = (size_t)1 << gs->cgroups.bits;
	for (i = 0; i < n; i++)
		if (gs->cgroups.ents[i].key)
			mem_free(gs, gs->cgroups.ents[i].val);
	ht_fini(&gs->by_tgid);
	ht_fini(&gs->by_cr3);
	ht_fini(&gs->threads);
	ht_fini(&gs->cookies);
	ht_fini(&gs->cgroups);
	mem_free(gs, gs->mods);
	gs->mods = NULL;
	gs->nr_mods = gs->mods_cap = 0;
	gs->nr_maps = 0;
}

static int model_init(struct gstate *gs)
{
	if (ht_init(&gs->by_tgid, gs) || ht_init(&gs->by_cr3, gs) ||
	    ht_init(&gs->threads, gs) || ht_init(&gs->cookies, gs) ||
	    ht_init(&gs->cgroups, gs)) {
		ht_fini(&gs->by_tgid);
		ht_fini(&gs->by_cr3);
		ht_fini(&gs->threads);
		ht_fini(&gs->cookies);
		ht_fini(&gs->cgroups);
		return -ENOMEM;
	}
	return 0;
}

struct gstate *gstate_new(const struct gstate_limits *limits)
{
	struct gstate *gs = calloc(1, sizeof(*gs));

	if (!gs)
		return NULL;
	gs->lim = limits ? *limits : default_limits;
	if (!gs->lim.max_bytes)
		gs->lim.max_bytes = OPVM_MODEL_MAX_BYTES;
	if (!gs->lim.max_cgroups)
		gs->lim.max_cgroups = default_limits.max_cgroups;
	if (model_init(gs)) {
		free(gs);
		errno = ENOMEM;
		return NULL;
	}
	return gs;
}

void gstate_free(struct gstate *gs)
{
	if (!gs)
		return;
	model_clear(gs);
	free(gs);
}

/* A refused mutation may still have changed something (a module reload that
 * cleared its old range), so it moves the generation too. */
static int refuse(struct gstate *gs, int err)
{
	gs->stats.refused++;
	gs->gen++;
	return err;
}

static int applied(struct gstate *gs)
{
	gs->stats.records++;
	gs->gen++;
	return 0;
}

/* ---- HELLO ----------------------------------------------------------------- */

int gstate_hello(struct gstate *gs, const struct chan_hello *h)
{
	struct ht nt[5] = { { 0 } };
	struct chan_hello c;
	int i;

	if (!h)
		return refuse(gs, -EINVAL);
	c = *h;
	str_sanitise(c.anchor_name, sizeof(c.anchor_name), h->anchor_name,
		     strnlen(h->anchor_name, sizeof(h->anchor_name)));
	str_sanitise(c.release, sizeof(c.release), h->release,
		     strnlen(h->release, sizeof(h->release)));
	/* A new HELLO means a new kernel: nothing we knew still holds.  The
	 * new tables come first, so that running out of memory leaves the old
	 * model whole. */
	if (ht_init(&nt[0], gs) || ht_init(&nt[1], gs) ||
	    ht_init(&nt[2], gs) || ht_init(&nt[3], gs) || ht_init(&nt[4], gs)) {
		for (i = 0; i < 5; i++)
			ht_fini(&nt[i]);
		return -ENOMEM;
	}
	model_clear(gs);
	gs->by_tgid = nt[0];
	gs->by_cr3 = nt[1];
	gs->threads = nt[2];
	gs->cookies = nt[3];
	gs->cgroups = nt[4];
	gs->hello = c;
	gs->have_hello = true;
	gs->stats.hellos++;
	return applied(gs);
}

const struct chan_hello *gstate_get_hello(const struct gstate *gs)
{
	return gs && gs->have_hello ? &gs->hello : NULL;
}

void gstate_set_procs_walked(struct gstate *gs)
{
	gs->procs_walked = true;
}

void gstate_set_procs_expected(struct gstate *gs, bool expected)
{
	gs->procs_expected = expected;
}

bool gstate_procs_expected(const struct gstate *gs)
{
	return gs && gs->procs_expected;
}

bool gstate_procs_announced(const struct gstate *gs)
{
	return gs && (gs->have_hello || gs->procs_walked || gs->procs_expected);
}

void gstate_set_maps_walked(struct gstate *gs)
{
	gs->maps_walked = true;
}

bool gstate_maps_announced(const struct gstate *gs)
{
	return gs && (gs->have_hello || gs->maps_walked);
}

void gstate_set_walks(struct gstate *gs, uint64_t walks)
{
	gs->walks = walks;
}

uint64_t gstate_walks(const struct gstate *gs)
{
	return gs ? gs->walks : 0;
}

/* ---- cookies --------------------------------------------------------------- */

/* Replaces c's path; an empty one is named after the id so that every
 * cookie has a printable, nonempty name. */
/* The name a cookie gets for path: sanitised, or a placeholder named after
 * the id.  NULL on ENOMEM. */
static char *cookie_name(uint64_t id, const char *path, size_t path_len)
{
	size_t cap = (path_len < 40 ? 40 : path_len) + 1;
	char *np = malloc(cap);

	if (np && !str_sanitise(np, cap, path, path_len))
		snprintf(np, cap, "{cookie-%llx}", (unsigned long long)id);
	return np;
}

static int cookie_set_path(struct gstate *gs, struct gstate_cookie *c,
			   const char *path, size_t path_len)
{
	char *np = mem_charge(gs, cookie_name(c->id, path, path_len));

	if (!np)
		return -ENOMEM;
	mem_free(gs, c->path);
	c->path = np;
	return 0;
}

static struct gstate_cookie *cookie_new(struct gstate *gs, uint64_t id,
					const char *path, size_t path_len)
{
	struct gstate_cookie *c;

	if (gs->cookies.count >= gs->lim.max_cookies)
		return NULL;
	c = mem_zalloc(gs, 1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	if (cookie_set_path(gs, c, path, path_len) || ht_put(&gs->cookies, id, c)) {
		cookie_destroy(gs, c);
		return NULL;
	}
	return c;
}

/*
 * The cookie for id, or a placeholder named after the id if the guest has
 * not described it (yet): a later COOKIE record fills the placeholder in
 * place, so mappings that point to it pick the name up.  NULL for id 0 or
 * when the cookie table is full.
 */
static const struct gstate_cookie *cookie_ref(struct gstate *gs, uint64_t id)
{
	struct gstate_cookie *c;

	if (!id)
		return NULL;
	c = ht_get(&gs->cookies, id);
	if (c)
		return c;
	c = cookie_new(gs, id, NULL, 0);
	if (!c)
		gs->stats.refused++;
	return c;
}

int gstate_cookie(struct gstate *gs, uint64_t id, const char *path,
		  size_t path_len, const uint8_t *build_id, size_t build_id_len)
{
	struct gstate_cookie *c;

	if (!id || (path_len && !path) || build_id_len > sizeof(c->build_id) ||
	    (build_id_len && !build_id))
		return refuse(gs, -EINVAL);
	if (path_len > OPVM_PATH_MAX_HOST)
		path_len = OPVM_PATH_MAX_HOST;
	c = ht_get(&gs->cookies, id);
	if (c) {
		/* update in place: mappings hold the pointer */
		if (cookie_set_path(gs, c, path, path_len))
			return -ENOMEM;
	} else {
		if (gs->cookies.count >= gs->lim.max_cookies)
			return refuse(gs, -ENOSPC);
		c = cookie_new(gs, id, path, path_len);
		if (!c)
			return -ENOMEM;
	}
	memset(c->build_id, 0, sizeof(c->build_id));
	if (build_id_len)
		memcpy(c->build_id, build_id, build_id_len);
	c->build_id_len = (uint8_t)build_id_len;
	c->described = 1;
	return applied(gs);
}

int gstate_cookie_renames(const struct gstate *gs, uint64_t id, const char *path,
			  size_t path_len, const uint8_t *build_id, size_t build_id_len)
{
	const struct gstate_cookie *c = ht_get(&gs->cookies, id);
	char *np;
	int ret;

	if (!c || !c->described || (path_len && !path) || build_id_len > sizeof(c->build_id) ||
	    (build_id_len && !build_id))
		return 0;	/* a new name, a placeholder filled in, or refused */
	if (build_id_len != c->build_id_len ||
	    (build_id_len && memcmp(build_id, c->build_id, build_id_len)))
		return 1;
	if (path_len > OPVM_PATH_MAX_HOST)
		path_len = OPVM_PATH_MAX_HOST;
	np = cookie_name(id, path, path_len);
	if (!np)
		return 1;	/* cannot tell: assume it does */
	ret = strcmp(np, c->path) != 0;
	free(np);
	return ret;
}

const struct gstate_cookie *gstate_cookie_find(const struct gstate *gs, uint64_t id)
{
	return ht_get(&gs->cookies, id);
}

/* ---- processes ------------------------------------------------------------- */

/*
 * Address spaces shared by several live processes (vfork children, or a
 * guest announcing two tgids on one CR3) are reference counted: the
 * processes on one cr3 form a list whose head, the one announced last, is
 * what by_cr3 names; the list's length is the count.  Linking and
 * unlinking are O(1), so an exit never searches the process table however
 * many address spaces were ever shared.
 */
static void cr3_unlink(struct gstate *gs, struct proc *p)
{
	if (!p->cr3_linked)
		return;
	if (p->cr3_next)
		p->cr3_next->cr3_prev = p->cr3_prev;
	if (p->cr3_prev)
		p->cr3_prev->cr3_next = p->cr3_next;
	else if (p->cr3_next)
		ht_put(&gs->by_cr3, p->pub.cr3, p->cr3_next);	/* replaces: cannot fail */
	else
		ht_del(&gs->by_cr3, p->pub.cr3);
	p->cr3_prev = p->cr3_next = NULL;
	p->cr3_linked = false;
}

static void cr3_link(struct gstate *gs, struct proc *p)
{
	struct proc *old;

	if (!p->pub.cr3)
		return;
	old = ht_get(&gs->by_cr3, p->pub.cr3);
	if (old == p)
		return;
	cr3_unlink(gs, p);	/* announced again on its cr3: to the head */
	if (old) {
		gs->stats.cr3_shared++;
		ht_put(&gs->by_cr3, p->pub.cr3, p);		/* replaces: cannot fail */
		old->cr3_prev = p;
	} else if (ht_put(&gs->by_cr3, p->pub.cr3, p)) {
		return;		/* no memory to grow: lookups fall back to the tgid */
	}
	p->cr3_next = old;
	p->cr3_linked = true;
}

size_t gstate_cr3_refs(const struct gstate *gs, uint64_t cr3_norm)
{
	size_t n = 0;

	for (const struct proc *p = ht_get(&gs->by_cr3, cr3_norm); p; p = p->cr3_next)
		n++;
	return n;
}

uint64_t gstate_work(const struct gstate *gs)
{
	return gs->work;
}

static void maps_drop(struct gstate *gs, struct proc *p)
{
	gs->nr_maps -= p->pub.nr_maps;
	p->pub.nr_maps = 0;
	mem_free(gs, p->maps);
	p->maps = NULL;
	p->pub.maps = NULL;
	p->maps_cap = 0;
}

static int maps_reserve(struct gstate *gs, struct proc *p, size_t n)
{
	struct gstate_mapping *m;
	size_t cap = p->maps_cap ? p->maps_cap : 8;

	if (n <= p->maps_cap)
		return 0;
	while (cap < n)
		cap *= 2;
	m = mem_grow(gs, p->maps, p->maps_cap * sizeof(*m), cap * sizeof(*m));
	if (!m)
		return -ENOMEM;
	p->maps = m;
	p->pub.maps = m;
	p->maps_cap = cap;
	return 0;
}

static void proc_set_image(struct gstate *gs, struct proc *p, uint64_t cr3,
			   const char *comm, size_t comm_len, uint64_t exe)
{
	str_sanitise(p->pub.comm, sizeof(p->pub.comm), comm,
		     comm_len > OPVM_COMM_MAX ? OPVM_COMM_MAX : comm_len);
	p->pub.exe = cookie_ref(gs, exe);
	if (p->pub.cr3 != cr3) {
		cr3_unlink(gs, p);
		p->pub.cr3 = cr3;
	}
	cr3_link(gs, p);
}

int gstate_proc(struct gstate *gs, uint32_t tgid, uint32_t ppid, uint64_t cr3,
		const char *comm, size_t comm_len, uint64_t exe_cookie)
{
	struct proc *p, *parent;

	if (!tgid || (comm_len && !comm))
		return refuse(gs, -EINVAL);
	cr3 = opvm_cr3_normalise(cr3);
	p = ht_get(&gs->by_tgid, tgid);
	if (p) {
		/* Same address space announced again (initial walk racing a
		 * fork): keep what we know.  Otherwise the tgid was reused
		 * after an exit we missed: start afresh. */
		if (!(cr3 && cr3 == p->pub.cr3))
			maps_drop(gs, p);
		p->pub.ppid = ppid;
		proc_set_image(gs, p, cr3, comm, comm_len, exe_cookie);
		return applied(gs);
	}
	/* A forked child starts empty: the module describes its whole address
	 * space right after the PROC record (docs/protocol.md). */
	if (gs->by_tgid.count >= gs->lim.max_processes)
		return refuse(gs, -ENOSPC);
	p = mem_zalloc(gs, 1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pub.tgid = tgid;
	p->pub.ppid = ppid;
	/* a child starts in its parent's cgroup; CGROUP records say more */
	if (ppid && (parent = ht_get(&gs->by_tgid, ppid)))
		p->pub.cgroup = parent->pub.cgroup;
	if (ht_put(&gs->by_tgid, tgid, p)) {
		mem_free(gs, p);
		return -ENOMEM;
	}
	proc_set_image(gs, p, cr3, comm, comm_len, exe_cookie);
	return applied(gs);
}

int gstate_exec(struct gstate *gs, uint32_t tgid, uint64_t cr3,
		const char *comm, size_t comm_len, uint64_t exe_cookie)
{
	struct proc *p;

	if (!tgid || (comm_len && !comm))
		return refuse(gs, -EINVAL);
	p = ht_get(&gs->by_tgid, tgid);
	if (!p)
		return gstate_proc(gs, tgid, 0, cr3, comm, comm_len, exe_cookie);
	maps_drop(gs, p);
	proc_set_image(gs, p, opvm_cr3_normalise(cr3), comm, comm_len, exe_cookie);
	return applied(gs);
}

int gstate_proc_exit(struct gstate *gs, uint32_t tgid)
{
	struct proc *p = ht_get(&gs->by_tgid, tgid);

	if (!p) {
		/* a thread exit sent as a process exit, or a process we never
		 * saw: drop the thread if there is one */
		if (ht_get(&gs->threads, tgid))
			return gstate_thread_exit(gs, tgid);
		return refuse(gs, -ENOENT);
	}
	cr3_unlink(gs, p);
	ht_del(&gs->by_tgid, tgid);
	proc_destroy(gs, p);
	return applied(gs);
}

/* ---- cgroups --------------------------------------------------------------- */

/* The sanitised path's hash, never 0 (the empty-slot key). */
static uint64_t cgroup_key(const char *s)
{
	uint64_t h = hash_str(s);

	return h ? h : 1;
}

/*
 * The interned copy of path (sanitised), made on first use: every process
 * in one cgroup points to the same string, which lives until the next
 * HELLO, so that attribution can key sample files on the pointer.  NULL
 * (errno) past max_cgroups, on a hash collision (counted as refused) or
 * ENOMEM.
 */
static const char *cgroup_intern(struct gstate *gs, const char *path, size_t path_len)
{
	char buf[OPVM_CGROUP_MAX_HOST + 1], *c;
	uint64_t key;

	if (!str_sanitise(buf, sizeof(buf), path, path_len) || buf[0] != '/') {
		errno = EINVAL;
		return NULL;
	}
	key = cgroup_key(buf);
	c = ht_get(&gs->cgroups, key);
	if (c) {
		if (strcmp(c, buf))
			errno = EEXIST;
		return strcmp(c, buf) ? NULL : c;
	}
	if (gs->cgroups.count >= gs->lim.max_cgroups) {
		errno = ENOSPC;
		return NULL;
	}
	c = mem_alloc(gs, strlen(buf) + 1);
	if (!c)
		return NULL;
	strcpy(c, buf);
	if (ht_put(&gs->cgroups, key, c)) {
		mem_free(gs, c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

int gstate_cgroup(struct gstate *gs, uint32_t tgid, const char *path, size_t path_len)
{
	struct proc *p = ht_get(&gs->by_tgid, tgid);
	const char *c;

	if (!p)
		return refuse(gs, -ENOENT);
	c = cgroup_intern(gs, path, path_len);
	if (!c)
		return refuse(gs, errno == ENOMEM ? -ENOMEM : -errno);
	if (p->pub.cgroup == c) {
		gs->stats.records++;	/* the same again: caches stay */
		return 0;
	}
	p->pub.cgroup = c;
	return applied(gs);
}

size_t gstate_nr_cgroups(const struct gstate *gs)
{
	return gs->cgroups.count;
}

const struct gstate_process *gstate_proc_by_cr3(const struct gstate *gs, uint64_t cr3_norm)
{
	struct proc *p = ht_get(&gs->by_cr3, cr3_norm);

	return p ? &p->pub : NULL;
}

const struct gstate_process *gstate_proc_by_tgid(const struct gstate *gs, uint32_t tgid)
{
	struct proc *p = ht_get(&gs->by_tgid, tgid);

	return p ? &p->pub : NULL;
}

/* ---- threads --------------------------------------------------------------- */

static void thread_unlink(struct thread *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else if (t->owner)
		t->owner->threads = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
	t->owner = NULL;
}

int gstate_thread(struct gstate *gs, uint32_t tid, uint32_t tgid,
		  const char *comm, size_t comm_len)
{
	struct thread *t;
	struct proc *p;

	if (!tid || !tgid || (comm_len && !comm))
		return refuse(gs, -EINVAL);
	t = ht_get(&gs->threads, tid);
	if (!t) {
		if (gs->threads.count >= gs->lim.max_threads)
			return refuse(gs, -ENOSPC);
		t = mem_zalloc(gs, 1, sizeof(*t));
		if (!t)
			return -ENOMEM;
		if (ht_put(&gs->threads, tid, t)) {
			mem_free(gs, t);
			return -ENOMEM;
		}
		t->tid = tid;
	}
	thread_unlink(t);
	t->tgid = tgid;
	str_sanitise(t->comm, sizeof(t->comm), comm,
		     comm_len > OPVM_COMM_MAX ? OPVM_COMM_MAX : comm_len);
	p = ht_get(&gs->by_tgid, tgid);
	if (p) {
		t->owner = p;
		t->next = p->threads;
		if (p->threads)
			p->threads->prev = t;
		p->threads = t;
	}
	return applied(gs);
}

int gstate_thread_exit(struct gstate *gs, uint32_t tid)
{
	struct thread *t = ht_get(&gs->threads, tid);

	if (!t) {
		if (ht_get(&gs->by_tgid, tid))
			return gstate_proc_exit(gs, tid);
		return refuse(gs, -ENOENT);
	}
	thread_unlink(t);
	ht_del(&gs->threads, tid);
	mem_free(gs, t);
	return applied(gs);
}

uint32_t gstate_thread_tgid(const struct gstate *gs, uint32_t tid)
{
	struct thread *t = ht_get(&gs->threads, tid);

	if (t)
		return t->tgid;
	return ht_get(&gs->by_tgid, tid) ? tid : 0;
}

const char *gstate_thread_comm(const struct gstate *gs, uint32_t tid)
{
	struct thread *t = ht_get(&gs->threads, tid);
	struct proc *p;

	if (t)
		return t->comm;
	p = ht_get(&gs->by_tgid, tid);
	return p ? p->pub.comm : NULL;
}

/* ---- mappings -------------------------------------------------------------- */

/* First index whose end > addr (mappings are sorted and disjoint). */
static size_t maps_lower(const struct gstate_mapping *m, size_t n, uint64_t addr)
{
	return SORT_UPPER(m, n, end, addr);
}

/*
 * Replaces whatever lies in [start, end) of p with ins (if non-NULL), the
 * way mmap(MAP_FIXED)/munmap do: mappings straddling a boundary are trimmed
 * (a right-hand remainder keeps its file offset in step), a mapping that
 * contains the whole range is split in two.
 */
static int maps_replace(struct gstate *gs, struct proc *p, uint64_t start,
			uint64_t end, const struct gstate_mapping *ins)
{
	size_t n = p->pub.nr_maps, i, k, nr_ov, nr_new;
	struct gstate_mapping left, right;
	bool has_left = false, has_right = false;
	ssize_t delta;

	i = maps_lower(p->maps, n, start);
	for (k = i; k < n && p->maps[k].start < end; k++)
		;
	nr_ov = k - i;		/* maps[i, k) overlap [start, end) */
	if (nr_ov && p->maps[i].start < start) {
		left = p->maps[i];
		left.end = start;
		has_left = true;
	}
	if (nr_ov && p->maps[k - 1].end > end) {
		right = p->maps[k - 1];
		right.pgoff += end - right.start;
		right.start = end;
		has_right = true;
	}
	nr_new = (size_t)has_left + (ins != NULL) + (size_t)has_right;
	if (!nr_ov && !ins)
		return 0;
	delta = (ssize_t)nr_new - (ssize_t)nr_ov;
	if (delta > 0) {
		if (n + (size_t)delta > gs->lim.max_mappings_per_proc ||
		    gs->nr_maps + (size_t)delta > gs->lim.max_mappings)
			return -ENOSPC;
		if (maps_reserve(gs, p, n + (size_t)delta))
			return -ENOMEM;
	}
	memmove(p->maps + i + nr_new, p->maps + k, (n - k) * sizeof(*p->maps));
	if (has_left)
		p->maps[i++] = left;
	if (ins)
		p->maps[i++] = *ins;
	if (has_right)
		p->maps[i++] = right;
	p->pub.nr_maps = (size_t)((ssize_t)n + delta);
	gs->nr_maps = (size_t)((ssize_t)gs->nr_maps + delta);
	return 0;
}

int gstate_mmap(struct gstate *gs, uint32_t tgid, uint64_t start, uint64_t end,
		uint64_t pgoff, uint64_t cookie)
{
	struct gstate_mapping m;
	struct proc *p;
	uint64_t top;
	int err;

	if (start >= end || __builtin_add_overflow(pgoff, end - start, &top))
		return refuse(gs, -EINVAL);
	p = ht_get(&gs->by_tgid, tgid);
	if (!p)
		return refuse(gs, -ENOENT);
	m.start = start;
	m.end = end;
	m.pgoff = pgoff;
	m.cookie = cookie_ref(gs, cookie);
	if (cookie && !m.cookie)
		return refuse(gs, -ENOSPC);
	err = maps_replace(gs, p, start, end, &m);
	if (err)
		return err == -ENOSPC ? refuse(gs, err) : err;
	return applied(gs);
}

int gstate_munmap(struct gstate *gs, uint32_t tgid, uint64_t start, uint64_t end)
{
	struct proc *p;
	int err;

	if (start >= end)
		return refuse(gs, -EINVAL);
	p = ht_get(&gs->by_tgid, tgid);
	if (!p)
		return refuse(gs, -ENOENT);
	err = maps_replace(gs, p, start, end, NULL);
	if (err)
		return err == -ENOSPC ? refuse(gs, err) : err;
	return applied(gs);
}

/* Hot path of every user sample: a branch-free search (the comparison
 * becomes a conditional move), then one range check. */
const struct gstate_mapping *gstate_map_find(const struct gstate_process *p, uint64_t addr)
{
	size_t i;

	if (!p)
		return NULL;
	i = SORT_UPPER(p->maps, p->nr_maps, start, addr);
	return i && addr < p->maps[i - 1].end ? &p->maps[i - 1] : NULL;
}

/* ---- modules --------------------------------------------------------------- */

static size_t mods_lower(const struct gstate *gs, uint64_t addr)
{
	size_t lo = 0, hi = gs->nr_mods;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (gs->mods[mid].base + gs->mods[mid].size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void mods_remove(struct gstate *gs, size_t i)
{
	memmove(gs->mods + i, gs->mods + i + 1,
		(gs->nr_mods - i - 1) * sizeof(*gs->mods));
	gs->nr_mods--;
}

static ssize_t mods_by_name(const struct gstate *gs, const char *name)
{
	size_t i;

	for (i = 0; i < gs->nr_mods; i++)
		if (!strcmp(gs->mods[i].name, name))
			return (ssize_t)i;
	return -1;
}

int gstate_module(struct gstate *gs, const char *name, size_t name_len,
		  uint64_t base, uint64_t size)
{
	struct gstate_module m;
	uint64_t top;
	ssize_t old;
	size_t i;

	if (!name || !name_len || !size || __builtin_add_overflow(base, size, &top))
		return refuse(gs, -EINVAL);
	memset(&m, 0, sizeof(m));
	str_sanitise(m.name, sizeof(m.name), name,
		     name_len > OPVM_MODNAME_MAX ? OPVM_MODNAME_MAX : name_len);
	if (!m.name[0])
		return refuse(gs, -EINVAL);
	m.base = base;
	m.size = size;
	/* a reload replaces the old instance; whatever it overlaps is gone */
	old = mods_by_name(gs, m.name);
	if (old >= 0)
		mods_remove(gs, (size_t)old);
	i = mods_lower(gs, base);
	while (i < gs->nr_mods && gs->mods[i].base < top)
		mods_remove(gs, i);
	if (gs->nr_mods >= gs->lim.max_modules)
		return refuse(gs, -ENOSPC);
	if (gs->nr_mods == gs->mods_cap) {
		size_t cap = gs->mods_cap ? gs->mods_cap * 2 : 64;
		struct gstate_module *n = mem_grow(gs, gs->mods, gs->mods_cap * sizeof(*n),
						   cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		gs->mods = n;
		gs->mods_cap = cap;
	}
	memmove(gs->mods + i + 1, gs->mods + i, (gs->nr_mods - i) * sizeof(*gs->mods));
	gs->mods[i] = m;
	gs->nr_mods++;
	return applied(gs);
}

int gstate_module_free(struct gstate *gs, const char *name, size_t name_len)
{
	char n[OPVM_MODNAME_MAX + 1];
	ssize_t i;

	if (!name || !name_len)
		return refuse(gs, -EINVAL);
	str_sanitise(n, sizeof(n), name,
		     name_len > OPVM_MODNAME_MAX ? OPVM_MODNAME_MAX : name_len);
	i = mods_by_name(gs, n);
	if (i < 0)
		return refuse(gs, -ENOENT);
	mods_remove(gs, (size_t)i);
	return applied(gs);
}

const struct gstate_module *gstate_module_find(const struct gstate *gs, uint64_t addr)
{
	size_t i = SORT_UPPER(gs->mods, gs->nr_mods, base, addr);
	const struct gstate_module *m = i ? &gs->mods[i - 1] : NULL;

	return m && addr - m->base < m->size ? m : NULL;
}

const struct gstate_module *gstate_module_range(const struct gstate *gs, uint64_t addr,
						uint64_t *lo, uint64_t *hi)
{
	size_t i = mods_lower(gs, addr);

	if (i < gs->nr_mods && gs->mods[i].base <= addr) {
		*lo = gs->mods[i].base;
		*hi = gs->mods[i].base + gs->mods[i].size;
		return &gs->mods[i];
	}
	*lo = i ? gs->mods[i - 1].base + gs->mods[i - 1].size : 0;
	*hi = i < gs->nr_mods ? gs->mods[i].base : UINT64_MAX;
	return NULL;
}

const struct gstate_module *gstate_module_by_name(const struct gstate *gs,
						  const char *name, size_t name_len)
{
	char n[OPVM_MODNAME_MAX + 1];
	ssize_t i;

	if (!name || !name_len)
		return NULL;
	str_sanitise(n, sizeof(n), name,
		     name_len > OPVM_MODNAME_MAX ? OPVM_MODNAME_MAX : name_len);
	i = mods_by_name(gs, n);
	return i < 0 ? NULL : &gs->mods[i];
}

int gstate_map_overlaps(const struct gstate_process *p, uint64_t start, uint64_t end)
{
	size_t i;

	if (!p || start >= end)
		return 0;
	i = maps_lower(p->maps, p->nr_maps, start);
	return i < p->nr_maps && p->maps[i].start < end;
}

int gstate_module_overlaps(const struct gstate *gs, uint64_t start, uint64_t end)
{
	size_t i;

	if (start >= end)
		return 0;
	i = mods_lower(gs, start);
	return i < gs->nr_mods && gs->mods[i].base < end;
}

void gstate_lost(struct gstate *gs, uint64_t count)
{
	if (__builtin_add_overflow(gs->stats.guest_lost, count, &gs->stats.guest_lost))
		gs->stats.guest_lost = UINT64_MAX;
	gs->stats.records++;
}

/* ---- accessors ------------------------------------------------------------- */

uint64_t gstate_generation(const struct gstate *gs)
{
	return gs->gen;
}

size_t gstate_nr_processes(const struct gstate *gs)
{
	return gs->by_tgid.count;
}

size_t gstate_nr_threads(const struct gstate *gs)
{
	return gs->threads.count;
}

size_t gstate_nr_cookies(const struct gstate *gs)
{
	return gs->cookies.count;
}

size_t gstate_nr_modules(const struct gstate *gs)
{
	return gs->nr_mods;
}

size_t gstate_nr_mappings(const struct gstate *gs)
{
	return gs->nr_maps;
}

const struct gstate_stats *gstate_get_stats(const struct gstate *gs)
{
	return &gs->stats;
}

int gstate_for_each_proc(const struct gstate *gs,
			 int (*fn)(const struct gstate_process *p, void *arg), void *arg)
{
	size_t i, n = (size_t)1 << gs->by_tgid.bits;

	for (i = 0; i < n; i++) {
		if (gs->by_tgid.ents[i].key) {
			const struct proc *p = gs->by_tgid.ents[i].val;
			int r = fn(&p->pub, arg);

			if (r)
				return r;
		}
	}
	return 0;
}

int gstate_for_each_module(const struct gstate *gs,
			   int (*fn)(const struct gstate_module *m, void *arg), void *arg)
{
	size_t i;

	for (i = 0; i < gs->nr_mods; i++) {
		int r = fn(&gs->mods[i], arg);

		if (r)
			return r;
	}
	return 0;
}
