// SPDX-License-Identifier: MIT
/*
 * Sync: rings -> attribution -> sample files.  The rules are in host/sync.h;
 * this file is mostly about doing them fast: at a few hundred samples per
 * second per vCPU nothing here matters, but a guest with many vCPUs under a
 * high-rate event, or a collector catching up after a stall, should drain
 * tens of millions of samples per second on one core.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/gstate.h"
#include "host/ring.h"
#include "host/store.h"
#include "host/sync.h"

#define SYNC_HOLD_MS_DEFAULT	2000
#define SYNC_HOLD_MAX_DEFAULT	65536
#define SC_BITS			12	/* sample-file cache: 4096 slots */
#define DRAIN_MAX		(1u << 24)	/* samples per ring per run */

enum { FILED = 0, HOLD = 1 };

/* Names that do not come from the guest.  Their addresses are the cache
 * identities of the images/apps they name. */
static const char NAME_VMLINUX[] = "vmlinux";
static const char NAME_ANON[] = "{anon}";
static const char NAME_KTHREAD[] = "{kthread}";
static const char NAME_IDLE[] = "{idle}";
static const char NAME_UNKNOWN[] = "{unknown}";
static const char TAG_ANON_CR3[] = "{anon-cr3}";	/* + skey.extra = cr3 */

/*
 * Identity of a sample file within one gstate generation: app and image
 * are pointers to strings that cannot change while the generation stays the
 * same (cookie paths, module names, process comms, the names above).
 */
struct skey {
	const void *app;
	const void *image;
	uint64_t extra;
	int64_t tgid, tid, cpu;
	uint32_t event;
	uint32_t kernel;
};

struct sc_ent {
	struct skey k;
	struct sfile *sf;	/* NULL: empty */
};

/* Per-vCPU last hit. */
struct vcache {
	/* address space -> process */
	uint64_t cr3n;
	const struct gstate_process *p;
	bool p_valid;
	/* user mapping last filed into */
	struct sfile *sf;	/* NULL: nothing cached */
	uint64_t lo, len, adj;	/* [lo, lo + len), offset = rip + adj */
	uint64_t ucr3n;
	uint32_t vcpu;
	uint8_t event;
	uint8_t slot_flags;
	uint32_t slot_tid, slot_tgid;
};

struct held {
	struct opvm_sample s;	/* chain dropped */
	uint64_t t;
};

struct sync {
	struct store *st;
	struct gstate *gs;
	struct ring **rings;
	unsigned nr_rings;
	unsigned sep;
	unsigned hold_ms;

	uint64_t gen;			/* generation the caches belong to */
	struct vcache *vc;
	unsigned vc_mask;
	struct sc_ent *sc;

	struct held *held;		/* ring buffer, oldest first */
	size_t hold_cap, hold_head, hold_nr;
	uint64_t held_gen;		/* generation of the last full retry */

	struct opvm_stats stats;
	uint64_t store_errors;
	int first_err;
};

struct sync *sync_new(struct store *st, struct gstate *gs,
		      struct ring *const *rings, unsigned nr_rings,
		      const struct sync_config *cfg)
{
	struct sync *s;
	unsigned nvc = 1;

	if (!st || !gs || (nr_rings && !rings)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->st = st;
	s->gs = gs;
	s->sep = store_separate(st);
	s->hold_ms = cfg ? cfg->hold_ms : SYNC_HOLD_MS_DEFAULT;
	s->hold_cap = cfg && cfg->hold_max ? cfg->hold_max : SYNC_HOLD_MAX_DEFAULT;
	while (nvc < nr_rings)
		nvc <<= 1;
	s->vc_mask = nvc - 1;
	s->vc = calloc(nvc, sizeof(*s->vc));
	s->sc = calloc((size_t)1 << SC_BITS, sizeof(*s->sc));
	s->held = calloc(s->hold_cap, sizeof(*s->held));
	if (nr_rings)
		s->rings = calloc(nr_rings, sizeof(*s->rings));
	if (!s->vc || !s->sc || !s->held || (nr_rings && !s->rings)) {
		sync_free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (nr_rings)
		memcpy(s->rings, rings, nr_rings * sizeof(*s->rings));
	s->nr_rings = nr_rings;
	s->gen = gstate_generation(gs);
	s->held_gen = s->gen;
	return s;
}

void sync_free(struct sync *s)
{
	if (!s)
		return;
	free(s->rings);
	free(s->vc);
	free(s->sc);
	free(s->held);
	free(s);
}

/* The model changed: every cached pointer may be stale. */
static void caches_drop(struct sync *s)
{
	memset(s->vc, 0, ((size_t)s->vc_mask + 1) * sizeof(*s->vc));
	memset(s->sc, 0, ((size_t)1 << SC_BITS) * sizeof(*s->sc));
	s->gen = gstate_generation(s->gs);
}

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static inline size_t skey_hash(const struct skey *k)
{
	uint64_t h = (uint64_t)(uintptr_t)k->app * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)(uintptr_t)k->image * 0xc2b2ae3d27d4eb4full;
	h ^= k->extra * 0x165667b19e3779f9ull;
	h ^= ((uint64_t)k->tgid << 32 ^ (uint64_t)k->tid) * 0x27d4eb2f165667c5ull;
	h ^= ((uint64_t)k->cpu << 16 ^ k->event << 1 ^ k->kernel);
	return (size_t)(mix(h) >> (64 - SC_BITS));
}

static inline bool skey_eq(const struct skey *a, const struct skey *b)
{
	return a->app == b->app && a->image == b->image && a->extra == b->extra &&
	       a->tgid == b->tgid && a->tid == b->tid && a->cpu == b->cpu &&
	       a->event == b->event && a->kernel == b->kernel;
}

static int note_err(struct sync *s, int err)
{
	s->store_errors++;
	if (!s->first_err)
		s->first_err = err;
	return err;
}

/*
 * The sample file for k.  app/image are the strings behind k->app and
 * k->image (image_buf for names built per sample).  Applies the separation
 * mask so the cache holds one entry per file.
 */
static struct sfile *sfile_for(struct sync *s, struct skey *k, const char *app,
			       const char *image, const struct gstate_cookie *c)
{
	struct store_key key;
	struct sc_ent *e;
	struct sfile *sf;
	size_t i;

	if (k->kernel ? !(s->sep & OPVM_SEP_KERNEL) : !(s->sep & OPVM_SEP_LIB)) {
		k->app = k->image;
		app = image;
	}
	if (!(s->sep & OPVM_SEP_THREAD))
		k->tgid = k->tid = -1;
	if (!(s->sep & OPVM_SEP_CPU))
		k->cpu = -1;
	i = skey_hash(k);
	e = &s->sc[i];
	if (e->sf && skey_eq(&e->k, k))
		return e->sf;
	e = &s->sc[i ^ 1];
	if (e->sf && skey_eq(&e->k, k))
		return e->sf;

	key = (struct store_key){
		.app = app,
		.image = image,
		.kernel = (int)k->kernel,
		.event = (uint8_t)k->event,
		.tgid = k->tgid,
		.tid = k->tid,
		.cpu = k->cpu,
		.build_id = c && c->build_id_len ? c->build_id : NULL,
		.build_id_len = c ? c->build_id_len : 0,
	};
	sf = store_get(s->st, &key);
	if (!sf)
		return NULL;
	/* two-way: the newest entry lives in the home slot, the one it
	 * displaces moves to the other way */
	e = &s->sc[i];
	if (e->sf)
		s->sc[i ^ 1] = *e;
	e->k = *k;
	e->sf = sf;
	return sf;
}

static int add(struct sync *s, struct sfile *sf, uint64_t offset)
{
	int err;

	if (!sf)
		return note_err(s, errno ? -errno : -EIO);
	err = sfile_add(sf, offset, 1);
	if (err)
		return note_err(s, err);
	return FILED;
}

static const char *proc_app(const struct gstate_process *p)
{
	return p->exe ? p->exe->path : p->comm;
}

static int file_kernel(struct sync *s, const struct opvm_sample *x)
{
	const struct gstate_module *m = gstate_module_find(s->gs, x->rip);
	const struct gstate_process *p = NULL;
	const char *app = NULL, *image;
	char name[48];
	struct skey k;
	uint64_t offset;
	bool slot = x->flags & OPVM_SAMPLE_SLOT;

	memset(&k, 0, sizeof(k));
	if (m) {
		image = m->name;
		offset = x->rip - m->base;
	} else {
		image = NAME_VMLINUX;
		offset = x->rip;
	}
	k.image = image;
	k.kernel = 1;
	k.event = x->event;
	k.cpu = x->vcpu;

	if (slot) {
		k.tgid = x->slot_tgid;
		k.tid = x->slot_tid;
		if (!(x->flags & OPVM_SAMPLE_KTHREAD) && x->slot_tgid)
			p = gstate_proc_by_tgid(s->gs, x->slot_tgid);
	} else {
		p = gstate_proc_by_cr3(s->gs, opvm_cr3_normalise(x->cr3));
		k.tgid = k.tid = p ? p->tgid : 0;
	}
	if (s->sep & OPVM_SEP_KERNEL) {
		if (slot && (x->flags & OPVM_SAMPLE_KTHREAD))
			app = NAME_KTHREAD;
		else if (slot && !x->slot_tgid)
			app = NAME_IDLE;
		else if (p)
			app = proc_app(p);
		else if (!gstate_get_hello(s->gs)) {
			snprintf(name, sizeof(name), "{anon-cr3:0x%llx}",
				 (unsigned long long)opvm_cr3_normalise(x->cr3));
			app = name;
			k.app = TAG_ANON_CR3;
			k.extra = opvm_cr3_normalise(x->cr3);
		} else {
			app = NAME_UNKNOWN;
		}
		if (!k.app)
			k.app = app;
	}
	s->stats.kernel++;
	return add(s, sfile_for(s, &k, app, image, NULL), offset);
}

static int file_anon_cr3(struct sync *s, const struct opvm_sample *x, uint64_t cr3n)
{
	char name[48];
	struct skey k = {
		.app = TAG_ANON_CR3,
		.image = TAG_ANON_CR3,
		.extra = cr3n,
		.event = x->event,
		.cpu = x->vcpu,
		.tgid = (x->flags & OPVM_SAMPLE_SLOT) ? x->slot_tgid : 0,
		.tid = (x->flags & OPVM_SAMPLE_SLOT) ? x->slot_tid : 0,
	};

	snprintf(name, sizeof(name), "{anon-cr3:0x%llx}", (unsigned long long)cr3n);
	s->stats.user++;
	return add(s, sfile_for(s, &k, name, name, NULL), x->rip);
}

static int file_user(struct sync *s, const struct opvm_sample *x, bool force)
{
	uint64_t cr3n = opvm_cr3_normalise(x->cr3);
	struct vcache *vc = &s->vc[x->vcpu & s->vc_mask];
	const struct gstate_process *p;
	const struct gstate_mapping *m;
	const char *image;
	struct sfile *sf;
	struct skey k;
	uint64_t offset;
	int ret;

	/* last hit: same address space, same mapping, same file */
	if (vc->sf && vc->ucr3n == cr3n && x->rip - vc->lo < vc->len &&
	    vc->event == x->event && vc->vcpu == x->vcpu &&
	    (!(s->sep & OPVM_SEP_THREAD) ||
	     (vc->slot_flags == (x->flags & OPVM_SAMPLE_SLOT) &&
	      vc->slot_tid == x->slot_tid && vc->slot_tgid == x->slot_tgid))) {
		s->stats.user++;
		return add(s, vc->sf, x->rip + vc->adj);
	}

	if (vc->p_valid && vc->cr3n == cr3n) {
		p = vc->p;
	} else {
		p = gstate_proc_by_cr3(s->gs, cr3n);
		vc->cr3n = cr3n;
		vc->p = p;
		vc->p_valid = true;
	}
	if (!p && (x->flags & OPVM_SAMPLE_SLOT) &&
	    !(x->flags & OPVM_SAMPLE_KTHREAD) && x->slot_tgid)
		p = gstate_proc_by_tgid(s->gs, x->slot_tgid);
	if (!p) {
		if (!gstate_get_hello(s->gs)) {
			s->stats.unresolved++;
			return file_anon_cr3(s, x, cr3n);
		}
		if (!force && s->hold_ms)
			return HOLD;
		s->stats.lost_no_process++;
		return file_anon_cr3(s, x, cr3n);
	}

	memset(&k, 0, sizeof(k));
	k.event = x->event;
	k.cpu = x->vcpu;
	k.tgid = p->tgid;
	k.tid = (x->flags & OPVM_SAMPLE_SLOT) && x->slot_tgid == p->tgid ?
		x->slot_tid : p->tgid;
	k.app = proc_app(p);

	m = gstate_map_find(p, x->rip);
	if (!m) {
		if (!force && s->hold_ms && gstate_get_hello(s->gs))
			return HOLD;
		s->stats.lost_no_mapping++;
		s->stats.user++;
		k.image = NAME_ANON;
		return add(s, sfile_for(s, &k, proc_app(p), NAME_ANON, NULL), x->rip);
	}
	if (m->cookie) {
		image = m->cookie->path;
		offset = x->rip - m->start + m->pgoff;
	} else {
		image = NAME_ANON;
		offset = x->rip;
	}
	k.image = image;
	sf = sfile_for(s, &k, proc_app(p), image, m->cookie);
	s->stats.user++;
	ret = add(s, sf, offset);
	if (ret == FILED) {
		vc->sf = sf;
		vc->ucr3n = cr3n;
		vc->lo = m->start;
		vc->len = m->end - m->start;
		vc->adj = offset - x->rip;
		vc->event = x->event;
		vc->vcpu = x->vcpu;
		vc->slot_flags = x->flags & OPVM_SAMPLE_SLOT;
		vc->slot_tid = x->slot_tid;
		vc->slot_tgid = x->slot_tgid;
	}
	return ret;
}

static inline int attribute(struct sync *s, const struct opvm_sample *x, bool force)
{
	if (__builtin_expect(s->gen != gstate_generation(s->gs), 0))
		caches_drop(s);
	if (x->cpl != 3)
		return file_kernel(s, x);
	return file_user(s, x, force);
}

/* Files the oldest held sample whatever its state. */
static void held_evict_one(struct sync *s)
{
	struct held *h = &s->held[s->hold_head];

	attribute(s, &h->s, true);
	s->hold_head = (s->hold_head + 1) % s->hold_cap;
	s->hold_nr--;
}

static void hold(struct sync *s, const struct opvm_sample *x, uint64_t now)
{
	struct held *h;

	if (s->hold_nr == s->hold_cap)
		held_evict_one(s);
	h = &s->held[(s->hold_head + s->hold_nr) % s->hold_cap];
	h->s = *x;
	h->s.nr_chain = 0;
	h->s.chain = NULL;
	h->t = now;
	s->hold_nr++;
}

static inline bool expired(const struct sync *s, const struct held *h, uint64_t now)
{
	return now >= h->t && now - h->t >= s->hold_ms;
}

/*
 * Retries held samples.  Nothing can resolve while the model is unchanged,
 * so then only expired ones (at the head: the queue is in time order) are
 * filed; after a change the whole queue is retried and compacted.
 */
static void held_retry(struct sync *s, uint64_t now, bool all)
{
	size_t i, kept = 0, n = s->hold_nr;

	if (!n)
		return;
	if (!all && s->held_gen == gstate_generation(s->gs)) {
		while (s->hold_nr && expired(s, &s->held[s->hold_head], now))
			held_evict_one(s);
		return;
	}
	for (i = 0; i < n; i++) {
		struct held *h = &s->held[(s->hold_head + i) % s->hold_cap];

		if (attribute(s, &h->s, all || expired(s, h, now)) == HOLD) {
			if (kept != i)
				s->held[(s->hold_head + kept) % s->hold_cap] = *h;
			kept++;
		}
	}
	s->hold_nr = kept;
	s->held_gen = gstate_generation(s->gs);
}

static inline void take(struct sync *s, const struct opvm_sample *x, uint64_t now)
{
	s->stats.received++;
	if (attribute(s, x, false) == HOLD)
		hold(s, x, now);
}

int sync_sample(struct sync *s, const struct opvm_sample *smp, uint64_t now_ms)
{
	int err;

	s->first_err = 0;
	take(s, smp, now_ms);
	err = s->first_err;
	s->first_err = 0;
	return err;
}

int sync_run(struct sync *s, uint64_t now_ms)
{
	struct opvm_sample x;
	unsigned r;
	int err;

	s->first_err = 0;
	held_retry(s, now_ms, false);
	for (r = 0; r < s->nr_rings; r++) {
		struct ring *ring = s->rings[r];
		unsigned n = 0;

		while (n++ < DRAIN_MAX && ring_pop(ring, &x, NULL))
			take(s, &x, now_ms);
	}
	err = s->first_err;
	s->first_err = 0;
	return err;
}

int sync_flush(struct sync *s, uint64_t now_ms)
{
	int err = sync_run(s, now_ms);

	s->first_err = 0;
	held_retry(s, now_ms, true);
	if (!err)
		err = s->first_err;
	s->first_err = 0;
	return err;
}

void sync_get_stats(const struct sync *s, struct opvm_stats *out)
{
	unsigned r;

	*out = s->stats;
	out->lost_overflow = 0;
	for (r = 0; r < s->nr_rings; r++)
		out->lost_overflow += ring_lost(s->rings[r]);
	out->guest_lost = gstate_get_stats(s->gs)->guest_lost;
}

size_t sync_nr_held(const struct sync *s)
{
	return s->hold_nr;
}

uint64_t sync_store_errors(const struct sync *s)
{
	return s->store_errors;
}
