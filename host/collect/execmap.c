// SPDX-License-Identifier: MIT
/*
 * The interval index of the guest's executable mappings (execmap.h): the
 * mappings' ends sorted into elementary segments, each covered by the same
 * set of mappings; a segment keeps how many (0, 1, or 2 for "more") and,
 * for one, which.  Which one is found during the sweep without keeping the
 * set itself: while exactly one mapping is open, the sum of the open
 * mappings' indices is its index.  For two or more, whether they all map
 * one file at one load bias (start - pgoff: the same file offset for every
 * address) is found the same way over those keys: each mapping's key gets a
 * dense id, the sweep counts the open mappings per key, and while one key
 * is open the sum of the open keys' ids is its id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/execmap.h"
#include "lib/array.h"
#include "lib/sort.h"

struct xm_iv {
	const struct gstate_process *p;
	const struct gstate_mapping *m;
};

struct xm_ev {
	uint64_t at;
	uint32_t idx;
	int32_t delta;		/* +1 a mapping starts, -1 it ends */
};

struct xm_seg {
	uint64_t start;		/* up to the next segment's start */
	uint32_t count;		/* 0, 1, 2: two or more */
	uint32_t idx;		/* the mapping, when count is 1; when 2,
				 * 1 + one of the mappings if all agree on
				 * file and offset, else 0 */
};

/* A key: a file at a load bias.  Open addressing, 2x the mappings. */
struct xm_key {
	const struct gstate_cookie *c;	/* NULL: a free slot */
	uint64_t bias;
	uint32_t id;
};

struct execmap {
	size_t max;
	struct xm_iv *iv;
	size_t nr_iv, cap_iv;
	struct xm_ev *ev;
	size_t cap_ev;
	struct xm_seg *seg;
	size_t nr_seg, cap_seg;
	uint32_t *kid;			/* per mapping: its key's id */
	uint32_t *krep, *kopen;		/* per key: a mapping, open mappings */
	size_t cap_kid, cap_krep, cap_kopen;
	struct xm_key *kt;
	size_t cap_kt;
	bool off;		/* not built: lookups say EXECMAP_OFF */
	struct execmap_stats st;
};

struct execmap *execmap_new(size_t max_maps)
{
	struct execmap *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->max = max_maps ? max_maps : EXECMAP_DEFAULT_MAX;
	if (x->max > UINT32_MAX / 2)
		x->max = UINT32_MAX / 2;
	x->off = true;
	return x;
}

void execmap_free(struct execmap *x)
{
	if (!x)
		return;
	free(x->iv);
	free(x->ev);
	free(x->seg);
	free(x->kid);
	free(x->krep);
	free(x->kopen);
	free(x->kt);
	free(x);
}

struct xm_fill {
	struct execmap *x;
	const struct gstate *gs;
};

static int xm_add_maps(struct execmap *x, const struct gstate_process *owner,
		       const struct gstate_process *from)
{
	if (!from->nr_maps)
		return 0;
	if (from->nr_maps > x->max - x->nr_iv)
		return -E2BIG;
	if (ARRAY_GROW(x->iv, x->cap_iv, x->nr_iv + from->nr_maps, 256))
		return -ENOMEM;
	for (size_t i = 0; i < from->nr_maps; i++) {
		/* the model keeps start < end (gstate_mmap refuses others) */
		x->iv[x->nr_iv++] = (struct xm_iv){ owner, &from->maps[i] };
	}
	return 0;
}

static int xm_fill_proc(const struct gstate_process *p, void *arg)
{
	struct xm_fill *f = arg;
	const struct gstate_process *pp;

	if (p->nr_maps || !p->cr3 || !p->ppid || p->ppid == p->tgid)
		return xm_add_maps(f->x, p, p);
	/* an address space nobody described: a copy of its parent's */
	pp = gstate_proc_by_tgid(f->gs, p->ppid);
	return pp ? xm_add_maps(f->x, p, pp) : 0;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct xm_ev *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* Gives every mapping its key's id (x->kid), every key a mapping
 * (x->krep).  Anonymous mappings get a key each: no file to agree on. */
static void xm_keys(struct execmap *x)
{
	size_t slots = x->cap_kt, mask = slots - 1;
	uint32_t nk = 0;

	memset(x->kt, 0, slots * sizeof(*x->kt));
	for (size_t i = 0; i < x->nr_iv; i++) {
		const struct gstate_mapping *m = x->iv[i].m;
		uint64_t bias = m->start - m->pgoff;	/* wraps alike for all */
		size_t h = (size_t)((((uintptr_t)m->cookie >> 4) ^ bias) *
				    0x9e3779b97f4a7c15ull >> 20) & mask;

		while (m->cookie && x->kt[h].c &&
		       (x->kt[h].c != m->cookie || x->kt[h].bias != bias))
			h = (h + 1) & mask;
		if (m->cookie && x->kt[h].c) {
			x->kid[i] = x->kt[h].id;
			continue;
		}
		if (m->cookie)
			x->kt[h] = (struct xm_key){ m->cookie, bias, nk };
		x->krep[nk] = (uint32_t)i;
		x->kid[i] = nk++;
	}
	memset(x->kopen, 0, (size_t)nk * sizeof(*x->kopen));
}

/* Appends segment [at, next) covered by count mappings (sum: their
 * indices' sum; keys: how many keys are open, ksum: their ids' sum),
 * merged into the last one when it says the same. */
static void seg_add(struct execmap *x, uint64_t at, uint64_t count, uint64_t sum,
		    uint64_t keys, uint64_t ksum)
{
	struct xm_seg s = { at, count > 2 ? 2 : (uint32_t)count,
			    count == 1 ? (uint32_t)sum : 0 };

	if (count > 1 && keys == 1)
		s.idx = x->krep[ksum] + 1;
	struct xm_seg *last = x->nr_seg ? &x->seg[x->nr_seg - 1] : NULL;

	if (last && last->count == s.count && last->idx == s.idx)
		return;
	x->seg[x->nr_seg++] = s;
}

/* The sweep: events sorted by address, a segment at each distinct one. */
static void xm_sweep(struct execmap *x)
{
	size_t n = 2 * x->nr_iv;
	uint64_t count = 0, sum = 0, keys = 0, ksum = 0;

	for (size_t i = 0; i < x->nr_iv; i++) {
		x->ev[2 * i] = (struct xm_ev){ x->iv[i].m->start, (uint32_t)i, 1 };
		x->ev[2 * i + 1] = (struct xm_ev){ x->iv[i].m->end, (uint32_t)i, -1 };
	}
	qsort(x->ev, n, sizeof(*x->ev), ev_cmp);
	x->nr_seg = 0;
	for (size_t i = 0; i < n;) {
		uint64_t at = x->ev[i].at;

		for (; i < n && x->ev[i].at == at; i++) {
			uint32_t idx = x->ev[i].idx, k = x->kid[idx];

			if (x->ev[i].delta > 0) {
				count++;
				sum += idx;
				if (!x->kopen[k]++) {
					keys++;
					ksum += k;
				}
			} else {
				count--;
				sum -= idx;
				if (!--x->kopen[k]) {
					keys--;
					ksum -= k;
				}
			}
		}
		seg_add(x, at, count, sum, keys, ksum);
	}
}

/* The key table: a power of two, at least twice the mappings. */
static int xm_grow_keys(struct execmap *x)
{
	size_t want = 512;
	struct xm_key *kt;

	while (want < 2 * x->nr_iv)
		want <<= 1;
	if (want <= x->cap_kt)
		return 0;
	kt = realloc(x->kt, want * sizeof(*kt));
	if (!kt)
		return -ENOMEM;
	x->kt = kt;
	x->cap_kt = want;
	return 0;
}

int execmap_build(struct execmap *x, const struct gstate *gs)
{
	struct xm_fill f = { x, gs };
	int err;

	x->off = true;
	x->nr_iv = 0;
	x->nr_seg = 0;
	x->st.builds++;
	err = gstate_for_each_proc(gs, xm_fill_proc, &f);
	if (!err && (ARRAY_GROW(x->ev, x->cap_ev, 2 * x->nr_iv, 512) ||
		     ARRAY_GROW(x->seg, x->cap_seg, 2 * x->nr_iv, 512) ||
		     ARRAY_GROW(x->kid, x->cap_kid, x->nr_iv, 256) ||
		     ARRAY_GROW(x->krep, x->cap_krep, x->nr_iv, 256) ||
		     ARRAY_GROW(x->kopen, x->cap_kopen, x->nr_iv, 256) ||
		     xm_grow_keys(x)))
		err = -ENOMEM;
	if (err) {
		if (err == -E2BIG)
			x->st.over_cap++;
		x->nr_iv = 0;
		return err;
	}
	if (x->nr_iv) {		/* else no arrays yet, and no segment */
		xm_keys(x);
		xm_sweep(x);
	}
	x->st.mappings = x->nr_iv;
	x->st.segments = x->nr_seg;
	x->off = false;
	return 0;
}

enum execmap_answer execmap_lookup(const struct execmap *x, uint64_t ip,
				   const struct gstate_process **p,
				   const struct gstate_mapping **m)
{
	size_t lo;
	const struct xm_seg *s;

	if (x->off)
		return EXECMAP_OFF;
	/* the last segment starting at or below ip */
	lo = SORT_UPPER(x->seg, x->nr_seg, start, ip);
	if (!lo)
		return EXECMAP_NONE;
	s = &x->seg[lo - 1];
	if (s->count == 1) {
		*p = x->iv[s->idx].p;
		*m = x->iv[s->idx].m;
		return EXECMAP_ONE;
	}
	if (!s->count)
		return EXECMAP_NONE;
	*p = NULL;
	*m = s->idx ? x->iv[s->idx - 1].m : NULL;
	return EXECMAP_MANY;
}

void execmap_get_stats(const struct execmap *x, struct execmap_stats *out)
{
	*out = x->st;
}
