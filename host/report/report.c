// SPDX-License-Identifier: MIT
/*
 * Report model: reads a session's sample files into merged, resolved rows.
 *
 * Cost model (tests/bench/bench-report.c): one pass over every sample file
 * entry; per entry one bucket-index lookup in the image's sorted symbols
 * and one array add (per-file scratch counters indexed by symbol), then one
 * hash insert per (file, symbol) with samples, skipped for the next file of
 * the same image and key (row_cache_for()).  Strings are interned so that
 * row keys compare by pointer; the sort ranks them (report-sort.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/report/report.h"
#include "host/report/report-priv.h"
#include "host/collect/store.h"
#include "lib/array.h"
#include "lib/sample.h"
#include "lib/arith.h"
#include "lib/errbuf.h"
#include "lib/text.h"

/* ---- private state -------------------------------------------------------- */

struct entry {
	const char *path, *guest, *app, *image, *event;
	const char *which;		/* its window: samples/<which> */
	size_t win;			/* that window in its guest's wins */
	const char *cgroup;		/* NULL: none */
	int kernel;
	int python;
	uint64_t count;
	int64_t tgid, tid, cpu;
};

struct report_priv {
	struct strpool pool;
	const char *which;		/* samples/<which> */
	int range;			/* which is the last window of a range */
	double range_s;			/* the windows' time, summed */
	size_t *rowhash;	/* row index + 1, 0 empty */
	size_t rowhash_cap;
	size_t rows_cap;
	struct entry *entries;
	size_t nr_entries, cap_entries;
	const char *session_dir;
	/* The rows of the last image's files (row_cache_for()): a session
	 * holds a file per thread of each image, one after the other, whose
	 * rows are the same when threads are merged. */
	struct simage *cache_img;
	struct report_row cache_key;
	size_t *cache_row;	/* [symbol + 1]: row index + 1, 0 unknown */
	size_t *cache_set;	/* cache_row indices that are set */
	size_t nr_cache_set, cache_cap;
};

/* ---- options ---------------------------------------------------------------- */

int report_parse_keep(const char *spec, unsigned *out)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{ "guest", REPORT_KEEP_GUEST }, { "lib", REPORT_KEEP_LIB },
		{ "library", REPORT_KEEP_LIB }, { "kernel", REPORT_KEEP_KERNEL },
		{ "thread", REPORT_KEEP_THREAD }, { "tgid", REPORT_KEEP_THREAD },
		{ "tid", REPORT_KEEP_THREAD }, { "cpu", REPORT_KEEP_CPU },
		{ "cgroup", REPORT_KEEP_CGROUP },
		{ "all", REPORT_KEEP_ALL }, { "none", 0 },
	};
	unsigned mask = 0;
	const char *p = spec;

	if (!spec || !*spec)
		return -EINVAL;
	while (*p) {
		size_t n = strcspn(p, ",");
		int found = 0;

		for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
			if (strlen(names[i].name) == n && !strncmp(p, names[i].name, n)) {
				mask |= names[i].bit;
				found = 1;
			}
		}
		if (!found)
			return -EINVAL;
		p += n;
		if (*p == ',')
			p++;
	}
	*out = mask;
	return 0;
}

int report_parse_sort(const char *s, enum report_sort *out)
{
	if (!strcmp(s, "samples") || !strcmp(s, "sample"))
		*out = REPORT_SORT_SAMPLES;
	else if (!strcmp(s, "symbol"))
		*out = REPORT_SORT_SYMBOL;
	else if (!strcmp(s, "image"))
		*out = REPORT_SORT_IMAGE;
	else if (!strcmp(s, "app") || !strcmp(s, "app-name"))
		*out = REPORT_SORT_APP;
	else if (!strcmp(s, "cgroup"))
		*out = REPORT_SORT_CGROUP;
	else
		return -EINVAL;
	return 0;
}

static int parse_int64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

int report_filter_add(struct report_filter *f, char *term)
{
	char *colon = strchr(term, ':');
	char *val, *tok, *save = NULL;
	const char **sarr = NULL;
	int64_t *iarr = NULL;
	size_t *nr;

	if (!colon || colon == term || !colon[1])
		return -EINVAL;
	*colon = '\0';
	val = colon + 1;
	if (!strcmp(term, "guest")) {
		sarr = f->guest;
		nr = &f->nr_guest;
	} else if (!strcmp(term, "image")) {
		sarr = f->image;
		nr = &f->nr_image;
	} else if (!strcmp(term, "event")) {
		sarr = f->event;
		nr = &f->nr_event;
	} else if (!strcmp(term, "tgid")) {
		iarr = f->tgid;
		nr = &f->nr_tgid;
	} else if (!strcmp(term, "tid")) {
		iarr = f->tid;
		nr = &f->nr_tid;
	} else if (!strcmp(term, "cpu")) {
		iarr = f->cpu;
		nr = &f->nr_cpu;
	} else {
		*colon = ':';
		return -EINVAL;
	}
	for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*nr >= REPORT_MAX_FILTERS)
			return -EINVAL;
		if (sarr) {
			sarr[(*nr)++] = tok;
		} else {
			if (parse_int64(tok, &iarr[*nr]))
				return -EINVAL;
			(*nr)++;
		}
	}
	return 0;
}

const char *report_basename(const char *path)
{
	const char *s;

	if (!path)
		return "";
	/* "(firmware/boot)" and the like name no file */
	if (path[0] == '(')
		return path;
	s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

static int match_str(const char *const *pats, size_t n, const char *s, int basename_too)
{
	if (!n)
		return 1;
	for (size_t i = 0; i < n; i++) {
		if (!fnmatch(pats[i], s, 0))
			return 1;
		if (basename_too && !fnmatch(pats[i], report_basename(s), 0))
			return 1;
	}
	return 0;
}

static int match_int(const int64_t *vals, size_t n, int64_t v)
{
	if (!n)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (vals[i] == v)
			return 1;
	return 0;
}

/* ---- collecting entries ------------------------------------------------------ */

int report_parse_exclude(const char *list, unsigned *out)
{
	char buf[128], *tok, *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return -EINVAL;
	*out = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "idle"))
			*out |= REPORT_EXCLUDE_IDLE;
		else if (!strcmp(tok, "boot"))
			*out |= REPORT_EXCLUDE_BOOT;
		else
			return -EINVAL;
	}
	return *out ? 0 : -EINVAL;
}

static int collect_cb(const struct store_entry *e, void *arg)
{
	struct report *r = arg;
	struct report_priv *p = r->priv;
	struct entry *n;

	if (ARRAY_GROW(p->entries, p->cap_entries, p->nr_entries + 1, 256))
		return -ENOMEM;
	n = &p->entries[p->nr_entries];
	n->path = strpool_intern(&p->pool, e->path, 0);
	n->guest = strpool_intern(&p->pool, e->guest, 0);
	n->app = strpool_intern(&p->pool, e->app && *e->app ? store_app_label(e->app) : e->image, 0);
	n->image = strpool_intern(&p->pool, e->image, 0);
	n->event = strpool_intern(&p->pool, e->event, 0);
	n->cgroup = e->cgroup ? strpool_intern(&p->pool, e->cgroup, 0) : NULL;
	n->which = p->which;	/* interned: walk_windows(), report_open() */
	if (!n->path || !n->guest || !n->app || !n->image || !n->event ||
	    (e->cgroup && !n->cgroup))
		return -ENOMEM;
	n->kernel = e->kernel;
	n->python = e->python;
	n->count = e->count;
	n->tgid = e->tgid;
	n->tid = e->tid;
	n->cpu = e->cpu;
	p->nr_entries++;
	return 0;
}

const char *report_intern(struct report *r, const char *s)
{
	return strpool_intern(&r->priv->pool, s, 0);
}

static struct report_guest *guest_get(struct report *r, const struct entry *e)
{
	struct report_priv *p = r->priv;
	struct report_guest *g;
	const char *rest;
	char path[4096];
	size_t n;

	for (size_t i = 0; i < r->nr_guests; i++)
		if (!strcmp(r->guests[i].name, e->guest))
			return &r->guests[i];
	g = realloc(r->guests, (r->nr_guests + 1) * sizeof(*g));
	if (!g)
		return NULL;
	r->guests = g;
	g = &r->guests[r->nr_guests++];
	memset(g, 0, sizeof(*g));
	g->name = strdup(e->guest);
	if (!g->name)
		return NULL;
	/* <session>/guests/<mangled guest>/samples/<which>/...: the guest's
	 * directory name is taken from the file's own path. */
	n = strlen(p->session_dir);
	if (strncmp(e->path, p->session_dir, n) || strncmp(e->path + n, "/guests/", 8))
		return g;
	rest = e->path + n + 8;
	n = strcspn(rest, "/");
	if (snprintf(path, sizeof(path), "%s/guests/%.*s/samples/%s/session.json",
		     p->session_dir, (int)n, rest, p->range ? p->which : "current") <
	    (int)sizeof(path))
		report_guest_load_meta(g, path);
	if (snprintf(path, sizeof(path), "%s/guests/%.*s/samples", p->session_dir, (int)n,
		     rest) < (int)sizeof(path))
		g->samples = strdup(path);
	return g;
}

/* e's window among its guest's, its index into e->win (the entries come
 * window by window, oldest first).  0 or -ENOMEM. */
static int guest_window(struct report_guest *g, struct entry *e)
{
	struct report_gwin *w;

	e->win = g->nr_wins ? g->nr_wins - 1 : 0;
	if (g->nr_wins && g->wins[e->win].which == e->which)
		return 0;
	e->win = g->nr_wins;
	w = realloc(g->wins, (g->nr_wins + 1) * sizeof(*w));
	if (!w)
		return -ENOMEM;
	g->wins = w;
	g->wins[g->nr_wins++] = (struct report_gwin){ .which = e->which };
	return 0;
}

/* ---- rows --------------------------------------------------------------------- */

/* Each field times its own odd constant, summed, then mixed once: the
 * fields are independent multiplies (a chain of seven dependent mixes was
 * 3 % of a report's instructions, rehashing included). */
static uint64_t row_hash(const struct report_row *k)
{
	uint64_t h = (uintptr_t)k->guest * 0x9e3779b97f4a7c15ull +
		     (uintptr_t)k->app * 0xc2b2ae3d27d4eb4full +
		     (uintptr_t)k->image * 0x165667b19e3779f9ull +
		     (uint64_t)k->tgid * 0xd6e8feb86659fd93ull +
		     (uint64_t)k->tid * 0xff51afd7ed558ccdull +
		     (uint64_t)k->cpu * 0xc4ceb9fe1a85ec53ull +
		     (uintptr_t)k->symbol * 0x94d049bb133111ebull +
		     (uintptr_t)k->cgroup * 0x9fb21c651e98df25ull;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}

static int row_eq(const struct report_row *a, const struct report_row *b)
{
	return a->guest == b->guest && a->app == b->app && a->image == b->image &&
	       a->tgid == b->tgid && a->tid == b->tid && a->cpu == b->cpu &&
	       a->symbol == b->symbol && a->kernel == b->kernel && a->python == b->python &&
	       a->cgroup == b->cgroup;
}

static int rowhash_grow(struct report *r)
{
	struct report_priv *p = r->priv;
	size_t cap = p->rowhash_cap ? p->rowhash_cap * 2 : 4096;
	size_t *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < r->nr_rows; i++) {
		size_t h;

		for (h = row_hash(&r->rows[i]) & (cap - 1); t[h]; h = (h + 1) & (cap - 1))
			;
		t[h] = i + 1;
	}
	free(p->rowhash);
	p->rowhash = t;
	p->rowhash_cap = cap;
	return 0;
}

/* The row for key (inserted with 0 samples if new), or NULL on ENOMEM. */
static struct report_row *row_get(struct report *r, const struct report_row *key)
{
	struct report_priv *p = r->priv;
	size_t h;

	if ((r->nr_rows + 1) * 2 > p->rowhash_cap && rowhash_grow(r))
		return NULL;
	for (h = row_hash(key) & (p->rowhash_cap - 1); p->rowhash[h];
	     h = (h + 1) & (p->rowhash_cap - 1)) {
		struct report_row *row = &r->rows[p->rowhash[h] - 1];

		if (row_eq(row, key))
			return row;
	}
	if (ARRAY_GROW(r->rows, p->rows_cap, r->nr_rows + 1, 1024))
		return NULL;
	r->rows[r->nr_rows] = *key;
	r->rows[r->nr_rows].samples = 0;
	r->rows[r->nr_rows].addrs = NULL;
	r->rows[r->nr_rows].nr_addrs = 0;
	p->rowhash[h] = ++r->nr_rows;
	return &r->rows[r->nr_rows - 1];
}

static int row_add_addr(struct report_row *row, uint64_t addr, uint64_t count)
{
	/* No capacity field: the array holds the next power of two of
	 * nr_addrs, so it grows when nr_addrs reaches one (0, 1, 2, 4...). */
	size_t n = row->nr_addrs;

	if ((n & (n - 1)) == 0) {
		size_t nc = n ? n * 2 : 1;
		struct report_addr *t = realloc(row->addrs, nc * sizeof(*t));

		if (!t)
			return -ENOMEM;
		row->addrs = t;
	}
	row->addrs[n] = (struct report_addr){ .addr = addr, .count = count };
	row->nr_addrs = n + 1;
	return 0;
}

static int addr_cmp(const void *a, const void *b)
{
	const struct report_addr *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return 0;
}

static void row_fold_addrs(struct report_row *row)
{
	size_t out = 0;

	if (!row->nr_addrs)
		return;
	qsort(row->addrs, row->nr_addrs, sizeof(*row->addrs), addr_cmp);
	for (size_t i = 0; i < row->nr_addrs; i++) {
		if (out && row->addrs[out - 1].addr == row->addrs[i].addr)
			row->addrs[out - 1].count = arith_sat_add(row->addrs[out - 1].count,
							   row->addrs[i].count);
		else
			row->addrs[out++] = row->addrs[i];
	}
	row->nr_addrs = out;
}

/* ---- reading one sample file ------------------------------------------------------ */

struct file_ctx {
	struct report *r;
	struct simage *img;
	uint64_t total;
	uint64_t outside;	/* unresolved kernel samples outside the kernel */
	uint64_t frame, none;	/* file_by_symbol(): samples in .eh_frame
				 * functions, in no symbol */
	int details;
	const char *only_symbol;
	struct report_row *key;	/* merged key without symbol */
	int err;
	int bad;		/* file_by_symbol(): the file is corrupt */
	const struct store_pyread *py;	/* file_python(): the guest's table */
};

static int file_sum_cb(uint64_t offset, uint64_t count, void *arg)
{
	struct file_ctx *c = arg;

	(void)offset;
	c->total = arith_sat_add(c->total, count);
	return 0;
}

/* The key of a row named by a perf map: image REPORT_IMAGE_JIT (a
 * function of JIT code has no binary), else the file's key as it is. */
static struct report_row *jit_key(struct report *r, const struct simage *img,
				  const struct elfsym *s, struct report_row *key,
				  struct report_row *jit)
{
	if (!s || !img || !simage_is_jit(img))
		return key;
	*jit = *key;
	jit->image = strpool_intern(&r->priv->pool, REPORT_IMAGE_JIT, 0);
	if (!key->kernel && key->app == key->image)
		jit->app = jit->image;
	return jit->image ? jit : key;
}

/* Details pass: only when asked, for the rows that want them. */
static int file_detail_cb(uint64_t offset, uint64_t count, void *arg)
{
	struct file_ctx *c = arg;
	struct report *r = c->r;
	struct report_priv *p = r->priv;
	struct report_row key, jit, *row;
	uint64_t addr = offset;
	long i = c->img ? simage_lookup(c->img, offset, &addr) : -1;
	const struct elfsym *s = i >= 0 ? simage_sym(c->img, (size_t)i) : NULL;

	key = *jit_key(r, c->img, s, c->key, &jit);

	if (s) {
		if (c->only_symbol && strcmp(c->only_symbol, s->name))
			return 0;
		key.symbol = strpool_intern(&p->pool, s->name, 1);
	} else {
		if (c->only_symbol)
			return 0;
		key.symbol = NULL;
		addr = offset;
	}
	row = row_get(r, &key);
	if (!row || row_add_addr(row, addr, count)) {
		c->err = -ENOMEM;
		return -ENOMEM;
	}
	if (!s)
		row->unresolved_offsets = 1;
	return 0;
}

static struct report_problem *problem_get(struct report *r, const char *guest,
					  const char *image, struct simage *img)
{
	struct report_problem *pr;

	for (size_t i = 0; i < r->nr_problems; i++)
		if (r->problems[i].guest == guest && r->problems[i].image == image)
			return &r->problems[i];
	pr = realloc(r->problems, (r->nr_problems + 1) * sizeof(*pr));
	if (!pr)
		return NULL;
	r->problems = pr;
	pr = &r->problems[r->nr_problems++];
	*pr = (struct report_problem){
		.guest = guest, .image = image, .state = simage_state(img),
		.reason = simage_reason(img),
	};
	pr->build_id = simage_build_id(img, &pr->build_id_len);
	if (pr->state == SIMAGE_MISMATCH)
		r->mismatches++;
	return pr;
}

/* The row cache for img's files under key (its symbol aside), emptied
 * when either changed; NULL when out of memory for it (rows are then found
 * by hash alone). */
static size_t *row_cache_for(struct report_priv *p, struct simage *img,
			     const struct report_row *key, size_t nsyms)
{
	struct report_row k = *key;

	k.symbol = p->cache_key.symbol = NULL;
	if (img != p->cache_img || !row_eq(&k, &p->cache_key)) {
		for (size_t i = 0; i < p->nr_cache_set; i++)
			p->cache_row[p->cache_set[i]] = 0;
		p->nr_cache_set = 0;
		p->cache_img = img;
		p->cache_key = k;
	}
	if (nsyms + 1 > p->cache_cap) {
		size_t *t = realloc(p->cache_row, (nsyms + 1) * sizeof(*t));

		if (!t)
			return NULL;
		memset(t + p->cache_cap, 0, (nsyms + 1 - p->cache_cap) * sizeof(*t));
		p->cache_row = t;
		t = realloc(p->cache_set, (nsyms + 1) * sizeof(*t));
		if (!t)
			return NULL;
		p->cache_set = t;
		p->cache_cap = nsyms + 1;
	}
	return p->cache_row;
}

/* The row of symbol index i (0: none) of the file's image. */
static struct report_row *file_row(struct report *r, struct file_ctx *c, size_t *cache,
				   size_t i, const struct elfsym *s)
{
	struct report_priv *p = r->priv;
	struct report_row *row, jit, *key = jit_key(r, c->img, s, c->key, &jit);

	if (cache && cache[i])
		return &r->rows[cache[i] - 1];
	key->symbol = s ? strpool_intern(&p->pool, s->name, 1) : NULL;
	row = (s && !key->symbol) ? NULL : row_get(r, key);
	if (row && cache) {
		cache[i] = (size_t)(row - r->rows) + 1;
		p->cache_set[p->nr_cache_set++] = i;
	}
	return row;
}

/* A file of an image with symbols, counted per symbol (j): one row each.
 * -ENOMEM, or 0 (c->bad set for a corrupt file, which adds nothing). */
static int file_by_symbol(struct report *r, struct file_ctx *c, const struct walk_job *j)
{
	struct report_priv *p = r->priv;
	struct report_row *row;
	size_t *cache;
	int frames;

	if (j->nomem)
		return -ENOMEM;
	c->total = j->total;
	c->outside = j->outside;
	c->bad = j->bad;
	if (j->bad)
		return 0;
	cache = row_cache_for(p, c->img, c->key, j->nsyms);
	frames = simage_nr_frames(c->img) > 0;
	for (size_t t = 0; t < j->nr; t++) {
		size_t i = j->idx[t];
		const struct elfsym *s = i ? simage_sym(c->img, i - 1) : NULL;
		uint64_t n = j->cnt[t];

		row = file_row(r, c, cache, i, s);
		if (!row)
			return -ENOMEM;
		row->samples = arith_sat_add(row->samples, n);
		row->img = c->img;
		if (s) {
			row->sym_addr = s->addr;
			row->sym_size = s->size;
			row->frame = frames && simage_sym_frame(c->img, s);
			if (row->frame)
				c->frame = arith_sat_add(c->frame, n);
		} else {
			r->unresolved = arith_sat_add(r->unresolved, n);
			c->none = arith_sat_add(c->none, n);
		}
	}
	return 0;
}

/* What the walk's resolve function needs. */
struct resolve_ctx {
	const struct report *r;
	const struct report_opts *o;
};

/* The image of j's file (opened) with its symbols, when symbols are
 * wanted: 0 or -ENOMEM.  On any thread, one call at a time (walk_new()):
 * it touches the resolver and j only. */
struct simage *report_image(struct symres *res, const struct report_guest *g, const char *image,
			    int kernel, int64_t tgid, const uint8_t *bid, size_t bid_len)
{
	struct symres_kernel k = {
		.release = g->kernel_release, .text_addr = g->text_addr,
		.anchor_name = g->anchor_name, .anchor_addr = g->anchor_addr,
		.build_id = g->kernel_build_id, .build_id_len = g->kernel_build_id_len,
	};

	/* a process's anonymous memory: its JIT code (the store keeps the
	 * tgid of these files and stack frames whatever the separation) */
	if (!kernel && tgid > 0 && !strcmp(image, REPORT_IMAGE_ANON))
		return symres_jit_image(res, g->name, tgid);
	return symres_image(res, g->name, image, kernel, bid_len ? bid : NULL, bid_len, &k);
}

static int file_image(void *arg, struct walk_job *j)
{
	const struct resolve_ctx *x = arg;
	const struct entry *e = &x->r->priv->entries[j->entry];
	const struct sfile_info *info = sfile_reader_info(j->sr);

	if (!x->o->symbols || !x->o->res || e->python)
		return 0;
	j->img = report_image(x->o->res, j->guest, e->image, e->kernel, e->tgid,
			      info->build_id, info->build_id_len);
	if (!j->img)
		return -ENOMEM;
	j->nsyms = simage_nr_syms(j->img);
	return 0;
}

/* A file without symbols to split it by: its total on one row.  0, 1 for
 * a bad file (counted), or -ENOMEM. */
static int file_sum(struct report *r, struct file_ctx *c, struct sfile_reader *sr,
		    const struct report_opts *o, struct report_row *key)
{
	struct report_row *row;

	if (sfile_reader_foreach(sr, file_sum_cb, c)) {
		r->bad_files++;
		return 1;
	}
	key->symbol = NULL;
	row = row_get(r, key);
	if (!row)
		return -ENOMEM;
	row->samples = arith_sat_add(row->samples, c->total);
	row->img = c->img;
	if (o->symbols)
		r->unresolved = arith_sat_add(r->unresolved, c->total);
	return 0;
}

/* An image whose symbols could not be read, or a stripped one named by
 * its .eh_frame functions: its unnamed samples on the problem list.  0 or
 * -ENOMEM. */
static int file_problem(struct report *r, const struct file_ctx *c, const struct entry *e)
{
	enum simage_state st = c->img ? simage_state(c->img) : SIMAGE_ANON;
	struct report_problem *pr;

	if (st == SIMAGE_ANON || (st == SIMAGE_OK && (!simage_nr_frames(c->img) ||
						      !(c->frame || c->none))))
		return 0;
	pr = problem_get(r, e->guest, e->image, c->img);
	if (!pr)
		return -ENOMEM;
	if (st == SIMAGE_OK) {
		pr->samples = arith_sat_add(pr->samples, arith_sat_add(c->frame, c->none));
		pr->frame_samples = arith_sat_add(pr->frame_samples, c->frame);
		r->frame_samples = arith_sat_add(r->frame_samples, c->frame);
		return 0;
	}
	pr->samples = arith_sat_add(pr->samples, c->total);
	if (pr->state == SIMAGE_MISMATCH)
		r->mismatch_samples = arith_sat_add(r->mismatch_samples, c->total);
	return 0;
}

const char *report_guest_window_dir(const struct report_guest *g, size_t win, char *buf,
				    size_t len)
{
	if (!g->samples || win >= g->nr_wins ||
	    snprintf(buf, len, "%s/%s", g->samples, g->wins[win].which) >= (int)len)
		return NULL;
	return buf;
}

const struct store_pyread *report_guest_python(struct report_guest *g, size_t win)
{
	char dir[PATH_MAX];
	struct report_gwin *w = win < g->nr_wins ? &g->wins[win] : NULL;

	if (w && !w->py_loaded && report_guest_window_dir(g, win, dir, sizeof(dir))) {
		w->py_loaded = 1;
		w->py = store_python_load(dir, NULL, 0);
	}
	return w ? w->py : NULL;
}

const char *report_python_label(char *buf, size_t len, const struct store_pyframe *f)
{
	if (f->first_line)
		snprintf(buf, len, "%s (%s:%u)", f->name, f->file, f->first_line);
	else
		snprintf(buf, len, "%s (%s)", f->name, f->file);
	return buf;
}

/* A Python frame id and its count into the row of its name. */
static int py_cb(uint64_t offset, uint64_t count, void *arg)
{
	struct file_ctx *c = arg;
	const struct store_pyframe *f = store_python_get(c->py, offset);
	struct report_row key = *c->key, *row;
	char buf[STORE_PY_NAME_MAX * 4 + STORE_PY_FILE_MAX * 4 + 32];

	key.symbol = f ? strpool_intern(&c->r->priv->pool,
					 report_python_label(buf, sizeof(buf), f), 0) : NULL;
	row = (f && !key.symbol) ? NULL : row_get(c->r, &key);
	if (!row) {
		c->err = -ENOMEM;
		return -ENOMEM;
	}
	row->samples = arith_sat_add(row->samples, count);
	c->total = arith_sat_add(c->total, count);
	if (f && !row->file) {
		row->file = strpool_intern(&c->r->priv->pool, f->file, 0);
		row->first_line = f->first_line;
	}
	if (!f)		/* an id its table does not define */
		c->r->unresolved = arith_sat_add(c->r->unresolved, count);
	return 0;
}

/* A file of Python frames ({py}) with symbols wanted: a row per Python
 * function, named from the guest's Python frame table.  0, 1 for a bad
 * file (counted), or -ENOMEM. */
static int file_python(struct report *r, struct file_ctx *c, struct walk_job *j)
{
	c->py = report_guest_python(j->guest, r->priv->entries[j->entry].win);
	if (sfile_reader_foreach(j->sr, py_cb, c)) {
		if (c->err)
			return c->err;
		r->bad_files++;
		return 1;
	}
	return 0;
}

/* The file of j (counted per symbol if it has symbols) into rows, in the
 * order the files were listed.  0 or -ENOMEM. */
static int read_end(struct report *r, const struct report_opts *o, const struct entry *e,
		    struct walk_job *j)
{
	struct file_ctx c = { .r = r, .key = &j->key, .only_symbol = o->only_symbol,
			      .img = j->img };
	struct report_guest *g = j->guest;
	uint64_t unresolved0 = r->unresolved;
	int ret = 0;

	if (!j->sr) {
		r->bad_files++;		/* did not open */
		return 0;
	}
	if (j->err) {
		ret = j->err;
		goto out;
	}
	if (c.img && simage_warning(c.img) && !g->kernel_warn[0])
		snprintf(g->kernel_warn, sizeof(g->kernel_warn), "%s", simage_warning(c.img));
	if (e->python && o->symbols) {
		ret = file_python(r, &c, j);
		if (ret) {
			ret = ret < 0 ? ret : 0;
			goto out;
		}
		goto counted;
	} else if (c.img && j->nsyms) {
		ret = file_by_symbol(r, &c, j);
		if (!ret && c.bad)
			r->bad_files++;
		if (ret || c.bad)
			goto out;
	} else {
		ret = file_sum(r, &c, j->sr, o, &j->key);
		if (ret) {
			ret = ret < 0 ? ret : 0;
			goto out;
		}
	}
	ret = file_problem(r, &c, e);
	if (ret)
		goto out;
	if (o->details && !e->python) {
		c.details = 1;
		ret = sfile_reader_foreach(j->sr, file_detail_cb, &c);
		if (ret)
			ret = c.err;
	}
counted:
	if (e->kernel && !strcmp(e->app, REPORT_APP_BOOT)) {
		/* its own line says what it is: not "unresolved", no warning
		 * (sessions from before (firmware/boot) still get one) */
		r->unresolved = unresolved0;
		c.outside = 0;
	}
	g->total = arith_sat_add(g->total, c.total);
	r->total = arith_sat_add(r->total, c.total);
	r->outside_kernel = arith_sat_add(r->outside_kernel, c.outside);
	r->files++;
	ret = ret < 0 ? ret : 0;
out:
	j->sr = NULL;	/* the walk's */
	return ret;
}

/* ---- load ------------------------------------------------------------------ */

static const char *pick_event(struct report *r, const struct report_opts *o)
{
	struct report_priv *p = r->priv;
	const char *best = NULL;

	if (o->filter.nr_event) {
		for (size_t i = 0; i < p->nr_entries; i++)
			if (match_str(o->filter.event, o->filter.nr_event, p->entries[i].event, 0))
				return p->entries[i].event;
		return NULL;
	}
	/* The first event of the first guest's session.json that has samples,
	 * else the alphabetically first. */
	for (size_t gi = 0; gi < r->nr_guests; gi++) {
		const char *ev = r->guests[gi].event;

		for (size_t i = 0; ev && i < p->nr_entries; i++)
			if (!strcmp(p->entries[i].event, ev))
				return p->entries[i].event;
	}
	for (size_t i = 0; i < p->nr_entries; i++)
		if (!best || strcmp(p->entries[i].event, best) < 0)
			best = p->entries[i].event;
	return best;
}

static int note_other_event(struct report *r, const char *ev)
{
	char **t;

	for (size_t i = 0; i < r->nr_other_events; i++)
		if (!strcmp(r->other_events[i], ev))
			return 0;
	t = realloc(r->other_events, (r->nr_other_events + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	r->other_events = t;
	t[r->nr_other_events] = strdup(ev);
	if (!t[r->nr_other_events])
		return -ENOMEM;
	r->nr_other_events++;
	return 0;
}

/* The row key a file's samples go under: its fields, merged as --merge
 * (keep) says.  key->guest is NULL when out of memory. */
static void entry_key(struct report *r, unsigned keep, const struct entry *e,
		      struct report_row *key)
{
	int is_lib = !e->kernel && e->app != e->image;
	/* idle and boot keep their own line whatever is merged */
	int own = e->kernel && (!strcmp(e->app, REPORT_APP_IDLE) ||
				!strcmp(e->app, REPORT_APP_BOOT));

	key->guest = e->guest;
	key->app = e->app;
	key->image = e->image;
	key->kernel = e->kernel;
	key->python = e->python;
	key->tgid = e->tgid;
	key->tid = e->tid;
	key->cpu = e->cpu;
	key->cgroup = keep & REPORT_KEEP_CGROUP ? e->cgroup : NULL;
	if (!(keep & REPORT_KEEP_GUEST))
		key->guest = strpool_intern(&r->priv->pool, "all", 0);
	if ((is_lib && !(keep & REPORT_KEEP_LIB)) ||
	    (e->kernel && !own && !(keep & REPORT_KEEP_KERNEL)))
		key->app = e->image;
	if (!(keep & REPORT_KEEP_THREAD))
		key->tgid = key->tid = -1;
	if (!(keep & REPORT_KEEP_CPU))
		key->cpu = -1;
}

/* After every file: losses of the guests that contributed, percentages,
 * folded addresses. */
static void report_totals(struct report *r)
{
	/* Guests that had samples only of other events or filtered out stay in
	 * the header only if they contributed. */
	for (size_t i = 0; i < r->nr_guests; i++) {
		struct report_guest *g = &r->guests[i];

		if (!g->total || !g->have_stats)
			continue;
		r->lost = arith_sat_add(r->lost, g->stats.lost_overflow);
		r->throttled = arith_sat_add(r->throttled, g->stats.throttled);
	}
	/* One pass: 100 k rows are 12 MB, read from memory each pass. */
	for (size_t i = 0; i < r->nr_rows; i++) {
		struct report_row *row = &r->rows[i];

		row_fold_addrs(row);
		/* Detail-only rows (symbol filter without -l rows) keep their
		 * sums. */
		if (!row->samples)
			for (size_t j = 0; j < row->nr_addrs; j++)
				row->samples = arith_sat_add(row->samples, row->addrs[j].count);
		row->percent = r->total ? 100.0 * (double)row->samples / (double)r->total : 0;
	}
}

static int sum_cb(uint64_t offset, uint64_t count, void *arg)
{
	uint64_t *sum = arg;

	(void)offset;
	*sum = arith_sat_add(*sum, count);
	return 0;
}

/* Whether --exclude leaves e out; if so its samples are counted apart. */
static int excluded(struct report *r, const struct report_opts *o, const struct entry *e)
{
	uint64_t *sum;
	struct sfile_reader *sr;

	if ((o->exclude & REPORT_EXCLUDE_IDLE) && e->kernel && !strcmp(e->app, REPORT_APP_IDLE))
		sum = &r->excluded_idle;
	else if ((o->exclude & REPORT_EXCLUDE_BOOT) && e->kernel &&
		 !strcmp(e->app, REPORT_APP_BOOT))
		sum = &r->excluded_boot;
	else
		return 0;
	sr = sfile_reader_open(e->path, NULL, 0);
	if (!sr) {
		r->bad_files++;
		return 1;
	}
	sfile_reader_foreach(sr, sum_cb, sum);
	sfile_reader_close(sr);
	return 1;
}

/* A guest:NAME that names no guest of the session is a mistake to say,
 * not an empty report: 0, or -ENOENT with the guests there are in err. */
static int check_guest_filter(const struct report *r, const struct report_filter *f,
			      char *err, size_t errlen)
{
	char names[512] = "";
	size_t n = 0;

	for (size_t k = 0; k < f->nr_guest; k++) {
		size_t i;

		for (i = 0; i < r->nr_guests; i++)
			if (match_str(&f->guest[k], 1, r->guests[i].name, 0))
				break;
		if (i < r->nr_guests)
			continue;
		for (i = 0; i < r->nr_guests && n < sizeof(names); i++) {
			char e[128];	/* tree names: escaped for the terminal */

			text_escape(e, sizeof(e), r->guests[i].name);
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",
					      i ? ", " : "", e);
		}
		errbuf_set(err, errlen, "no guest '%s' in %s: its guests are %s", f->guest[k],
			    r->priv->session_dir, names[0] ? names : "(none)");
		return -ENOENT;
	}
	return 0;
}

/* --separate thread or cpu on a session that did not record them would
 * silently change nothing: 0, or -ENOENT with what to do in err.  (all
 * asks for whatever there is.) */
static int check_recorded(const struct report *r, unsigned keep, char *err, size_t errlen)
{
	static const struct {
		unsigned bit;
		const char *name;
	} kinds[] = { { REPORT_KEEP_THREAD, "thread" }, { REPORT_KEEP_CPU, "cpu" } };

	if (keep == REPORT_KEEP_ALL)
		return 0;
	for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
		const char *rec = NULL;
		size_t i;

		if (!(keep & kinds[k].bit))
			continue;
		for (i = 0; i < r->nr_guests; i++) {
			if (!r->guests[i].separate || strstr(r->guests[i].separate, kinds[k].name))
				break;	/* unknown, or recorded: let it be */
			rec = r->guests[i].separate;
		}
		if (i < r->nr_guests || !rec)
			continue;
		errbuf_set(err, errlen, "--separate %s: the session was recorded with "
			    "--separate %s, so its samples are not split by %s; record again "
			    "with 'opvm run --separate %s' (or attach)", kinds[k].name, rec,
			    kinds[k].name, kinds[k].name);
		return -ENOENT;
	}
	return 0;
}

/* Every window of o's range walked (store_walk()), oldest first; the last
 * one's name left in r->priv->which.  0, or as store_walk(); -E2BIG (err
 * set) for more windows than a report reads. */
static int walk_windows(struct report *r, const struct report_opts *o, size_t *skipped,
			char err[], size_t errlen)
{
	char (*names)[STORE_WINDOW_NAME_MAX] = calloc(REPORT_MAX_WINDOWS, sizeof(*names));
	int n, ret = 0;

	if (!names)
		return -ENOMEM;
	n = store_windows(r->priv->session_dir, o->since_ms, o->until_ms, names,
			  REPORT_MAX_WINDOWS);
	if (n > REPORT_MAX_WINDOWS) {
		errbuf_set(err, errlen, "the range holds %d windows, more than the %d a "
			    "report reads: ask a shorter one", n, REPORT_MAX_WINDOWS);
		ret = -E2BIG;
	} else if (n < 0) {
		ret = n;
	}
	r->priv->range = 1;
	for (int i = 0; !ret && i < n; i++) {
		size_t sk = 0;
		int64_t s, e;

		if (!store_window_parse(names[i], &s, &e))
			r->priv->range_s += (double)(e - s) / 1000.0;
		r->priv->which = report_intern(r, names[i]);
		ret = r->priv->which ? store_walk(r->priv->session_dir, names[i], collect_cb,
						  r, &sk) : -ENOMEM;
		*skipped += sk;
	}
	if (!ret && n == 0)
		r->priv->which = "(no window in the range)";
	free(names);
	return ret;
}

/* The session's sample files listed (r->priv->entries), its guests' headers
 * read, and the event picked.  0, or -errno with err set (-ENOMEM: not). */
static int load_entries(struct report *r, const struct report_opts *o, char *err,
			size_t errlen)
{
	const char *which = r->priv->which;
	size_t skipped = 0;
	int ret;

	ret = o->range ? walk_windows(r, o, &skipped, err, errlen) :
	      store_walk(r->priv->session_dir, which, collect_cb, r, &skipped);
	which = r->priv->which;
	r->skipped_files = skipped;
	if (ret == -E2BIG)
		return -ENOENT;
	if (ret == -ENOENT) {
		errbuf_set(err, errlen, "%s holds no samples (no guests/ directory): "
			    "profile with 'opvm run' or 'opvm attach', or give --session-dir DIR",
			    r->priv->session_dir);
		return ret;
	}
	if (ret) {
		errbuf_set(err, errlen, "%s: %s", r->priv->session_dir, strerror(-ret));
		return ret;
	}
	if (!r->priv->nr_entries) {
		errbuf_set(err, errlen, "%s holds no sample files for samples/%s",
			    r->priv->session_dir, which);
		return -ENOENT;
	}
	/* Header data of every guest first: the event choice looks at it. */
	for (size_t i = 0; i < r->priv->nr_entries; i++) {
		struct report_guest *g = guest_get(r, &r->priv->entries[i]);

		if (!g || guest_window(g, &r->priv->entries[i]))
			return -ENOMEM;
	}
	for (size_t i = 0; r->priv->range && i < r->nr_guests; i++)
		r->guests[i].duration_s = r->priv->range_s;	/* not the last window's */
	if (check_guest_filter(r, &o->filter, err, errlen) ||
	    check_recorded(r, o->keep, err, errlen))
		return -ENOENT;
	r->event = pick_event(r, o);
	if (!r->event) {
		errbuf_set(err, errlen, "no samples of the event asked for");
		return -ENOENT;
	}
	return 0;
}

/* Whether the filter and --exclude leave e in (the excluded counted). */
static int entry_wanted(struct report *r, const struct report_opts *o, const struct entry *e)
{
	const struct report_filter *f = &o->filter;

	if (!match_str(f->guest, f->nr_guest, e->guest, 0) ||
	    !match_str(f->image, f->nr_image, e->image, 1) ||
	    !match_int(f->tgid, f->nr_tgid, e->tgid) ||
	    !match_int(f->tid, f->nr_tid, e->tid) ||
	    !match_int(f->cpu, f->nr_cpu, e->cpu))
		return 0;
	r->event_count = e->count;
	return !excluded(r, o, e);
}

/* The next listed files of the event that pass the filter, from *next on,
 * pushed to be opened while the walk has free slots.  0 or -ENOMEM. */
static int walk_fill(struct report *r, const struct report_opts *o, struct walk *w,
		     size_t *next)
{
	struct walk_job *j;

	while (*next < r->priv->nr_entries && (j = walk_slot(w))) {
		const struct entry *e = &r->priv->entries[(*next)++];

		if (e->event != r->event) {
			if (note_other_event(r, e->event))
				return -ENOMEM;
			continue;
		}
		if (!entry_wanted(r, o, e))
			continue;
		j->entry = (size_t)(e - r->priv->entries);
		j->path = e->path;
		j->guest = guest_get(r, e);
		entry_key(r, o->keep, e, &j->key);
		if (!j->guest || !j->key.guest)
			return -ENOMEM;
		walk_push_open(w);
	}
	return 0;
}

/* Every listed file of the event that passes the filter, read into rows:
 * opened, resolved and counted per symbol by the walk (on its workers and
 * this thread), merged here in list order.  0, or -errno with err set. */
static int load_files(struct report *r, const struct report_opts *o, char *err,
		      size_t errlen)
{
	struct resolve_ctx x = { .r = r, .o = o };
	struct walk *w = walk_new(file_image, &x);
	struct walk_job *j;
	size_t next = 0;
	int ret = 0;

	if (!w)
		return -ENOMEM;
	while (!ret) {
		ret = walk_fill(r, o, w, &next);
		if (ret || !(j = walk_oldest(w)))
			break;	/* out of memory, or every file read */
		ret = read_end(r, o, &r->priv->entries[j->entry], j);
		if (ret)
			errbuf_set(err, errlen, "%s: %s", r->priv->entries[j->entry].path,
				    strerror(-ret));
		walk_pop(w);
	}
	walk_free(w);
	return ret;
}

void report_note_symres(struct report *r, const struct report_opts *o)
{
	const char *w = o->symbols ? symres_warning(o->res) : NULL;

	if (w && !r->res_warn[0])
		snprintf(r->res_warn, sizeof(r->res_warn), "%s", w);
	if (o->symbols && o->res)
		r->dbgd = *symres_dbgd_stats(o->res);
}

struct report *report_load(const struct report_opts *o, char *err, size_t errlen)
{
	struct report *r = calloc(1, sizeof(*r));
	int ret = -ENOMEM;

	if (!r || !(r->priv = calloc(1, sizeof(*r->priv))))
		goto fail;
	r->priv->session_dir = o->session_dir ? o->session_dir : "./opvm_data";
	r->priv->which = o->which ? o->which : "current";
	r->keep = o->keep;
	r->symbols = o->symbols;
	ret = load_entries(r, o, err, errlen);
	if (!ret)
		ret = load_files(r, o, err, errlen);
	if (ret)
		goto fail;
	report_totals(r);
	report_note_symres(r, o);
	if (r->event)
		r->event = strdup(r->event);
	if (!r->event) {
		ret = -ENOMEM;
		goto fail;
	}
	/* The rows' strings live in the pool; entries are no longer needed. */
	free(r->priv->entries);
	r->priv->entries = NULL;
	r->priv->nr_entries = 0;
	report_sort(r, o->sort);
	return r;
fail:
	if (ret == -ENOMEM)
		errbuf_set(err, errlen, "out of memory");
	if (r && r->priv) {
		/* r->event still points into the pool: do not free it. */
		r->event = NULL;
	}
	report_free(r);
	errno = -ret;
	return NULL;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nr_rows; i++)
		free(r->rows[i].addrs);
	free(r->rows);
	for (size_t i = 0; i < r->nr_stacks; i++)
		free(r->stacks[i].frames);
	free(r->stacks);
	for (size_t i = 0; i < r->nr_guests; i++) {
		struct report_guest *g = &r->guests[i];

		free(g->name);
		free(g->samples);
		for (size_t k = 0; k < g->nr_wins; k++)
			store_python_free(g->wins[k].py);
		free(g->wins);
		free(g->mode);
		free(g->separate);
		free(g->start);
		free(g->from_exec);
		free(g->event);
		free(g->kernel_release);
		free(g->anchor_name);
	}
	free(r->guests);
	free(r->problems);
	for (size_t i = 0; i < r->nr_other_events; i++)
		free(r->other_events[i]);
	free(r->other_events);
	free((char *)r->event);
	if (r->priv) {
		strpool_free(&r->priv->pool);
		free(r->priv->rowhash);
		free(r->priv->entries);
		free(r->priv->cache_row);
		free(r->priv->cache_set);
		free(r->priv);
	}
	free(r);
}

/* ---- sorting ------------------------------------------------------------------ */

static int strcmp_null(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (!a)
		return 1;	/* unresolved after named */
	if (!b)
		return -1;
	return strcmp(a, b);
}

static int cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_tail(const struct report_row *x, const struct report_row *y)
{
	int c;

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	if ((c = strcmp_null(x->symbol, y->symbol)))
		return c;
	if ((c = strcmp(x->image, y->image)))
		return c;
	if ((c = strcmp(x->app, y->app)))
		return c;
	if ((c = strcmp(x->guest, y->guest)))
		return c;
	if ((c = cmp_i64(x->tgid, y->tgid)) || (c = cmp_i64(x->tid, y->tid)))
		return c;
	return cmp_i64(x->cpu, y->cpu);
}

static int cmp_samples(const void *a, const void *b)
{
	return cmp_tail(a, b);
}

static int cmp_symbol(const void *a, const void *b)
{
	const struct report_row *x = a, *y = b;
	int c = strcmp_null(x->symbol, y->symbol);

	return c ? c : cmp_tail(x, y);
}

static int cmp_image(const void *a, const void *b)
{
	const struct report_row *x = a, *y = b;
	int c = strcmp(x->image, y->image);

	return c ? c : cmp_tail(x, y);
}

static int cmp_app(const void *a, const void *b)
{
	const struct report_row *x = a, *y = b;
	int c = strcmp(x->app, y->app);

	return c ? c : cmp_tail(x, y);
}

/* By cgroup path, rows of no cgroup last. */
static int cmp_cgroup(const void *a, const void *b)
{
	const struct report_row *x = a, *y = b;
	int c = strcmp_null(x->cgroup, y->cgroup);

	return c ? c : cmp_tail(x, y);
}

/* Already in that order (report_load() sorts by samples, and most callers
 * ask for that again): one pass instead of a sort of 100 k rows. */
static int rows_sorted(const struct report *r, int (*cmp)(const void *, const void *))
{
	for (size_t i = 1; i < r->nr_rows; i++)
		if (cmp(&r->rows[i - 1], &r->rows[i]) > 0)
			return 0;
	return 1;
}

void report_sort(struct report *r, enum report_sort how)
{
	int (*cmp)(const void *, const void *) = cmp_samples;

	switch (how) {
	case REPORT_SORT_SYMBOL:
		cmp = cmp_symbol;
		break;
	case REPORT_SORT_IMAGE:
		cmp = cmp_image;
		break;
	case REPORT_SORT_APP:
		cmp = cmp_app;
		break;
	case REPORT_SORT_CGROUP:
		cmp = cmp_cgroup;
		break;
	case REPORT_SORT_SAMPLES:
		break;
	}
	/* qsort() only when out of memory for the sort by ranks (which has
	 * no cgroup rank: few rows have one): the same order, at a few times
	 * the cost. */
	if (r->nr_rows && !rows_sorted(r, cmp) &&
	    (how == REPORT_SORT_CGROUP || report_rows_sort(r->rows, r->nr_rows, how)))
		qsort(r->rows, r->nr_rows, sizeof(*r->rows), cmp);
	/* The row hash holds indices: it is stale after sorting, and rows are
	 * not added after load. */
	free(r->priv->rowhash);
	r->priv->rowhash = NULL;
	r->priv->rowhash_cap = 0;
}
