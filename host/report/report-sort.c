// SPDX-License-Identifier: MIT
/*
 * Sorting the report's rows (report_sort() in report.c).
 *
 * `report -l` on a large session sorts 100 k rows; qsort() with a
 * comparator that strcmp()s up to four names a call was a tenth of the
 * report's time.  Here every distinct name is ranked once (a sort of the
 * distinct names, a few hundred to a few thousand), each row gets a key of
 * integers, a radix sort orders the rows by their leading fields and a
 * merge sort each run of equal leading fields by the rest: the same order, stable
 * like glibc's qsort() (rows that compare equal, kernel and user rows of one
 * name, keep their load order).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/report/report-priv.h"
#include "lib/array.h"
#include "lib/signals.h"
#include "lib/sort.h"

/* One row's names as ranks (NULL symbol: after every name); the numbers
 * are read from the row itself.  Small: 100 k rows' keys are 2 MB. */
struct skey {
	uint32_t lead;		/* the --sort field's rank; 0 for samples */
	uint32_t sym, image, app, guest;
};

struct sortctx {
	const struct report_row *rows;
	const struct skey *k;
	unsigned rank_bits;	/* every rank (and none) < 1 << rank_bits */
};

#define RANK_NONE UINT32_MAX

/* Name -> id (the order names were first seen in), an open-addressing map
 * keyed by pointer; ranks by id once every name is in. */
struct rankmap {
	const char **key;
	uint32_t *id;		/* key[h]'s id */
	size_t cap, nr;
	const char **names;	/* by id */
	size_t names_cap;
};

static size_t ptr_hash(const char *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h;
}

static int rankmap_grow(struct rankmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	const char **k = calloc(cap, sizeof(*k));
	uint32_t *id = malloc(cap * sizeof(*id));

	if (!k || !id) {
		free(k);
		free(id);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t h;

		if (!m->key[i])
			continue;
		for (h = ptr_hash(m->key[i]) & (cap - 1); k[h]; h = (h + 1) & (cap - 1))
			;
		k[h] = m->key[i];
		id[h] = m->id[i];
	}
	free(m->key);
	free(m->id);
	m->key = k;
	m->id = id;
	m->cap = cap;
	return 0;
}

/* s's id (a name, not NULL), a new one if s is new; RANK_NONE on ENOMEM. */
static uint32_t rankmap_id(struct rankmap *m, const char *s)
{
	size_t h;

	if ((m->nr + 1) * 2 > m->cap && rankmap_grow(m))
		return RANK_NONE;
	for (h = ptr_hash(s) & (m->cap - 1); m->key[h]; h = (h + 1) & (m->cap - 1))
		if (m->key[h] == s)
			return m->id[h];
	if (ARRAY_GROW(m->names, m->names_cap, m->nr + 1, 1024))
		return RANK_NONE;
	m->key[h] = s;
	m->id[h] = (uint32_t)m->nr;
	m->names[m->nr] = s;
	return (uint32_t)m->nr++;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* The rank of each id: equal names (two copies of one string) get one
 * rank, so ranks compare as strcmp() does.  NULL on ENOMEM. */
static uint32_t *rankmap_ranks(const struct rankmap *m)
{
	const char **by = malloc((m->nr ? m->nr : 1) * sizeof(*by));
	const char ***ord = malloc((m->nr ? m->nr : 1) * sizeof(*ord));
	uint32_t *rank = malloc((m->nr ? m->nr : 1) * sizeof(*rank)), r = 0;

	if (!by || !ord || !rank) {
		free(by);
		free(ord);
		free(rank);
		return NULL;
	}
	/* sort pointers to the by-id array's slots: a slot's place there is
	 * its id */
	for (size_t i = 0; i < m->nr; i++) {
		by[i] = m->names[i];
		ord[i] = &by[i];
	}
	qsort(ord, m->nr, sizeof(*ord), name_cmp);
	for (size_t i = 0; i < m->nr; i++) {
		if (i && strcmp(*ord[i - 1], *ord[i]))
			r++;
		rank[ord[i] - by] = r;
	}
	free(by);
	free(ord);
	return rank;
}

static int cmp_u(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_s(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* report.c's cmp_tail() (samples, then symbol, image, app, guest, tgid,
 * tid, cpu) after the lead field, on ranks. */
static inline int skey_cmp(const struct sortctx *s, uint32_t a, uint32_t b)
{
	const struct skey *x = &s->k[a], *y = &s->k[b];
	const struct report_row *rx = &s->rows[a], *ry = &s->rows[b];
	int c;

	if (x->lead != y->lead)
		return x->lead < y->lead ? -1 : 1;
	if (rx->samples != ry->samples)
		return rx->samples > ry->samples ? -1 : 1;
	if ((c = cmp_u(x->sym, y->sym)) || (c = cmp_u(x->image, y->image)) ||
	    (c = cmp_u(x->app, y->app)) || (c = cmp_u(x->guest, y->guest)) ||
	    (c = cmp_s(rx->tgid, ry->tgid)) || (c = cmp_s(rx->tid, ry->tid)))
		return c;
	return cmp_s(rx->cpu, ry->cpu);
}

/* Stable merge sort of the row indices a[0..n) by their keys, using
 * tmp[0..n) (runs of rows with equal leading keys: short). */
static void idx_sort(const struct sortctx *k, uint32_t *a, uint32_t *tmp, size_t n)
{
	size_t mid = n / 2, i = 0, j = mid, o = 0;

	if (n < 2)
		return;
	if (n <= 8) {	/* insertion sort */
		for (size_t x = 1; x < n; x++) {
			uint32_t v = a[x];
			size_t y = x;

			for (; y && skey_cmp(k, v, a[y - 1]) < 0; y--)
				a[y] = a[y - 1];
			a[y] = v;
		}
		return;
	}
	idx_sort(k, a, tmp, mid);
	idx_sort(k, a + mid, tmp, n - mid);
	while (i < mid && j < n)
		tmp[o++] = skey_cmp(k, a[j], a[i]) < 0 ? a[j++] : a[i++];
	while (i < mid)
		tmp[o++] = a[i++];
	memcpy(a, tmp, o * sizeof(*a));
}

/* The leading 128 bits of a key, most significant word first: samples
 * (descending), symbol and image for the sort by samples; else the --sort
 * field's rank and the samples. */
static void lead128(const struct skey *k, uint64_t samples, enum report_sort how,
		    unsigned rank_bits, uint64_t *w)
{
	if (how == REPORT_SORT_SAMPLES) {
		w[0] = ~samples;
		w[1] = (uint64_t)k->sym << rank_bits | k->image;
	} else {
		w[0] = k->lead;
		w[1] = ~samples;
	}
}

/* One stable counting-sort pass of from[] (and its words w[]) by byte
 * shift/8 of word `word` into to[] and w2[]. */
static void radix_pass(size_t n, unsigned word, unsigned shift, const uint32_t *from,
		       uint32_t *to, const uint64_t (*w)[2], uint64_t (*w2)[2])
{
	size_t cnt[256] = { 0 }, sum = 0;

	for (size_t i = 0; i < n; i++)
		cnt[(w[i][word] >> shift) & 0xff]++;
	for (size_t b = 0; b < 256; b++) {
		size_t c = cnt[b];

		cnt[b] = sum;
		sum += c;
	}
	for (size_t i = 0; i < n; i++) {
		size_t d = cnt[(w[i][word] >> shift) & 0xff]++;

		to[d] = from[i];
		w2[d][0] = w[i][0];
		w2[d][1] = w[i][1];
	}
}

/*
 * The radix sort on one 64-bit word a row when the bits that differ
 * between the leading keys and a row index fit in it (nearly always: a
 * few bits of samples, of a symbol's rank and of an image's): key =
 * the varying low bits of w[i][0], then of w[i][1], then i.  The bits
 * above them are the same in every key, so this orders as the 128 bits
 * do, and i keeps equal keys in row order (stable).  sort_radix_u64()'s
 * digits of up to 11 bits: three or four passes of 8 bytes a row instead
 * of six of 20.
 * Returns the order (in out or tmp), or NULL when the bits do not fit.
 */
static uint32_t *rows_order64(const struct sortctx *k, size_t n, uint32_t *out, uint32_t *tmp,
			      const uint64_t (*w)[2], const uint64_t all[2], const uint64_t any[2],
			      uint64_t *key, uint64_t *key2)
{
	uint64_t v0 = all[0] ^ any[0], v1 = all[1] ^ any[1], m0, m1;
	unsigned b0 = v0 ? 64 - (unsigned)__builtin_clzll(v0) : 0;
	unsigned b1 = v1 ? 64 - (unsigned)__builtin_clzll(v1) : 0;
	unsigned ib = n > 1 ? 64 - (unsigned)__builtin_clzll((uint64_t)n - 1) : 1;

	if (b0 + b1 + ib > 64)
		return NULL;
	m0 = b0 ? (1ull << b0) - 1 : 0;
	m1 = b1 ? (1ull << b1) - 1 : 0;
	for (size_t i = 0; i < n; i++)
		key[i] = (w[i][0] & m0) << (b1 + ib) | (w[i][1] & m1) << ib | i;
	key = sort_radix_u64(key, key2, n, ib);
	for (size_t i = 0; i < n; i++)
		out[i] = (uint32_t)(key[i] & ((1ull << ib) - 1));
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && key[j] >> ib == key[i] >> ib; j++)
			;
		if (j - i > 1)
			idx_sort(k, out + i, tmp, j - i);
	}
	return out;
}

/*
 * The row indices in order, in out[0..n) or tmp[0..n) (the one returned):
 * an LSD radix sort on the leading 128 bits w (lead128(); all and any: the
 * AND and the OR of every w), stable, then each run of
 * rows equal in those by the whole key.  A byte that is the same in every
 * key (most of them: samples fit in a few) costs no pass; a pass goes from
 * one pair of buffers to the other, without copying back.
 */
static uint32_t *rows_order(const struct sortctx *k, size_t n, uint32_t *out, uint32_t *tmp,
			    uint64_t (*w)[2], uint64_t (*w2)[2], const uint64_t all[2],
			    const uint64_t any[2])
{
	uint32_t *done;

	/* w2 is free until the passes below: the packed keys' two buffers */
	done = rows_order64(k, n, out, tmp, (const uint64_t (*)[2])w, all, any,
			    (uint64_t *)(void *)w2, (uint64_t *)(void *)w2 + n);
	if (done)
		return done;
	for (size_t i = 0; i < n; i++)
		out[i] = (uint32_t)i;
	for (unsigned word = 2; word-- > 0;)
		for (unsigned shift = 0; shift < 64; shift += 8) {
			uint32_t *t = out;
			uint64_t (*tw)[2] = w;

			if (!(((all[word] ^ any[word]) >> shift) & 0xff))
				continue;	/* the same in every key */
			radix_pass(n, word, shift, out, tmp, (const uint64_t (*)[2])w, w2);
			out = tmp;
			tmp = t;
			w = w2;
			w2 = tw;
		}
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && w[j][0] == w[i][0] && w[j][1] == w[i][1]; j++)
			;
		if (j - i > 1)
			idx_sort(k, out + i, tmp, j - i);
	}
	return out;
}

static uint32_t lead_rank(const struct skey *k, enum report_sort how)
{
	switch (how) {
	case REPORT_SORT_SYMBOL:
		return k->sym;
	case REPORT_SORT_IMAGE:
		return k->image;
	case REPORT_SORT_APP:
		return k->app;
	case REPORT_SORT_CGROUP:	/* report_sort() qsorts these */
	case REPORT_SORT_SAMPLES:
		break;
	}
	return 0;
}

/* rows[i] = rows[order[i]] for every i, in place: a cycle at a time
 * (order is spent).  No copy of 100 k rows (12 MB of fresh pages). */
static void rows_permute(struct report_row *rows, uint32_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct report_row t;
		size_t j = i;

		if (order[i] == i)
			continue;
		t = rows[i];
		for (;;) {
			size_t src = order[j];

			order[j] = (uint32_t)j;
			if (src == i) {
				rows[j] = t;
				break;
			}
			rows[j] = rows[src];
			j = src;
		}
	}
}

static void rankmap_free(struct rankmap *m)
{
	free(m->key);
	free(m->id);
	free(m->names);
}

/* Rows [from, to)'s names as ids of m (RANK_NONE - 1: no symbol) into k,
 * their samples into lead[i][0]: one pass over the rows (12 MB per 100 k).
 * Rows come grouped by guest, app and image: a name like the last row's
 * has its id already.  0 or -ENOMEM. */
static int rows_ids(const struct report_row *rows, size_t from, size_t to, struct rankmap *m,
		    struct skey *k, uint64_t (*lead)[2])
{
	for (size_t i = from; i < to; i++) {
		const struct report_row *r = &rows[i], *p = &rows[i > from ? i - 1 : i];
		bool f = i == from;

		k[i] = (struct skey){
			.sym = !f && r->symbol == p->symbol ? k[i - 1].sym :
			       r->symbol ? rankmap_id(m, r->symbol) : RANK_NONE - 1,
			.image = !f && r->image == p->image ? k[i - 1].image : rankmap_id(m, r->image),
			.app = !f && r->app == p->app ? k[i - 1].app : rankmap_id(m, r->app),
			.guest = !f && r->guest == p->guest ? k[i - 1].guest : rankmap_id(m, r->guest),
		};
		if (k[i].sym == RANK_NONE || k[i].image == RANK_NONE || k[i].app == RANK_NONE ||
		    k[i].guest == RANK_NONE)
			return -ENOMEM;
		lead[i][0] = r->samples;
	}
	return 0;
}

struct ids_half {
	const struct report_row *rows;
	size_t from, to;
	struct rankmap m;
	struct skey *k;
	uint64_t (*lead)[2];
	int ret;
};

static void *ids_half_main(void *arg)
{
	struct ids_half *h = arg;

	h->ret = rows_ids(h->rows, h->from, h->to, &h->m, h->k, h->lead);
	return NULL;
}

/* The second half's ids (of h->m) as ids of m.  0 or -ENOMEM. */
static int ids_remap(struct rankmap *m, struct ids_half *h)
{
	uint32_t *map = malloc((h->m.nr ? h->m.nr : 1) * sizeof(*map));

	if (!map)
		return -ENOMEM;
	for (size_t id = 0; id < h->m.nr; id++) {
		map[id] = rankmap_id(m, h->m.names[id]);
		if (map[id] == RANK_NONE) {
			free(map);
			return -ENOMEM;
		}
	}
	for (size_t i = h->from; i < h->to; i++) {
		struct skey *x = &h->k[i];

		x->sym = x->sym == RANK_NONE - 1 ? x->sym : map[x->sym];
		x->image = map[x->image];
		x->app = map[x->app];
		x->guest = map[x->guest];
	}
	free(map);
	return 0;
}

/* rows_ids() of every row: a long listing's second half on a thread of
 * its own (with a map of its own, merged after), the first here. */
#define SORT_SPLIT_MIN	16384	/* rows */

static int rows_ids_all(const struct report_row *rows, size_t n, struct rankmap *m,
			struct skey *k, uint64_t (*lead)[2])
{
	struct ids_half h = { .rows = rows, .from = n / 2, .to = n, .k = k, .lead = lead };
	pthread_t th;
	bool split = n >= SORT_SPLIT_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1 &&
		     !signals_thread_start(&th, ids_half_main, &h);
	int ret = rows_ids(rows, 0, split ? h.from : n, m, k, lead);

	if (!split)
		return ret;
	pthread_join(th, NULL);
	if (!ret)
		ret = h.ret ? h.ret : ids_remap(m, &h);
	rankmap_free(&h.m);
	return ret;
}

int report_rows_sort(struct report_row *rows, size_t n, enum report_sort how)
{
	struct rankmap m = { 0 };
	struct skey *k = NULL;
	struct sortctx ctx;
	uint32_t *order = NULL, *tmp = NULL;
	uint64_t (*lead)[2] = NULL, (*lead2)[2] = NULL;
	uint64_t all[2] = { ~0ull, ~0ull }, any[2] = { 0, 0 };
	uint32_t *rank = NULL, none;
	unsigned rank_bits;
	int ret = -ENOMEM;

	if (n >= UINT32_MAX)
		return -EOVERFLOW;
	k = malloc(n * sizeof(*k));
	order = malloc(n * sizeof(*order));
	tmp = malloc(n * sizeof(*tmp));
	lead = malloc(n * sizeof(*lead));
	lead2 = malloc(n * sizeof(*lead2));
	if (!k || !order || !tmp || !lead || !lead2 || rows_ids_all(rows, n, &m, k, lead))
		goto out;
	rank = rankmap_ranks(&m);
	if (!rank || m.nr >= RANK_NONE - 1)
		goto out;
	/* no symbol: after every name, and as few bits as the names need
	 * (rows_order64()) */
	none = (uint32_t)m.nr;
	rank_bits = 64 - (unsigned)__builtin_clzll((uint64_t)none | 1);
	/* ids to ranks, and the leading keys, over the keys alone */
	for (size_t i = 0; i < n; i++) {
		uint64_t samples = lead[i][0];

		k[i].sym = k[i].sym == RANK_NONE - 1 ? none : rank[k[i].sym];
		k[i].image = rank[k[i].image];
		k[i].app = rank[k[i].app];
		k[i].guest = rank[k[i].guest];
		k[i].lead = lead_rank(&k[i], how);
		lead128(&k[i], samples, how, rank_bits, lead[i]);
		all[0] &= lead[i][0];
		all[1] &= lead[i][1];
		any[0] |= lead[i][0];
		any[1] |= lead[i][1];
	}
	ctx = (struct sortctx){ .rows = rows, .k = k, .rank_bits = rank_bits };
	rows_permute(rows, rows_order(&ctx, n, order, tmp, lead, lead2, all, any), n);
	ret = 0;
out:
	rankmap_free(&m);
	free(rank);
	free(k);
	free(order);
	free(tmp);
	free(lead);
	free(lead2);
	return ret;
}
