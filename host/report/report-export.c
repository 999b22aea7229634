// SPDX-License-Identifier: MIT
/*
 * Exports of a report: pprof (gzip'd profile.proto through protobuf-c and
 * zlib), folded stacks ("guest;process;image;symbol count") and a
 * self-contained HTML flame graph, also differential (widths from the new
 * profile, red for growth and blue for shrink against a baseline, as in
 * Brendan Gregg's differential flame graphs).
 *
 * Without call chains in the sample files a "stack" is the attribution
 * path guest -> process -> image -> symbol: that is what the folded lines
 * and the flame graph show, and what pprof gets as labels (guest, process,
 * tgid, tid) on one location per symbol.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "events/events.h"
#include "host/report/profile.pb-c.h"
#include "host/report/report.h"
#include "host/collect/stats.h"
#include "lib/util.h"

#define NO_SYMBOLS	"(no symbols)"

/* ---- a string -> index map (pprof's string table, functions, mappings) ----- */

struct smap {
	char **keys;
	size_t *vals;
	size_t cap, nr;
};

static void smap_free(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys ? m->keys[i] : NULL);
	free(m->keys);
	free(m->vals);
}

/* Index of key; *added says whether it is new (then its value is val). */
static long smap_get(struct smap *m, const char *key, size_t val, int *added)
{
	size_t h;

	*added = 0;
	if ((m->nr + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		char **k = calloc(cap, sizeof(*k));
		size_t *v = calloc(cap, sizeof(*v));

		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->keys[i])
				continue;
			for (h = util_hash_str(m->keys[i]) & (cap - 1); k[h]; h = (h + 1) & (cap - 1))
				;
			k[h] = m->keys[i];
			v[h] = m->vals[i];
		}
		free(m->keys);
		free(m->vals);
		m->keys = k;
		m->vals = v;
		m->cap = cap;
	}
	for (h = util_hash_str(key) & (m->cap - 1); m->keys[h]; h = (h + 1) & (m->cap - 1))
		if (!strcmp(m->keys[h], key))
			return (long)m->vals[h];
	m->keys[h] = strdup(key);
	if (!m->keys[h])
		return -ENOMEM;
	m->vals[h] = val;
	m->nr++;
	*added = 1;
	return (long)val;
}

/* ---- pprof -------------------------------------------------------------------- */

struct pp {
	Perftools__Profiles__Profile prof;
	struct symres *res;		/* for DWARF lines and sources; may be NULL */
	struct smap strs, funcs, locs, maps;
	char **strtab;
	size_t nr_str, cap_str;
};

static int64_t pp_str(struct pp *p, const char *s)
{
	char esc[1024];
	int added;
	long i;

	/* protobuf strings must be UTF-8 (go tool pprof refuses a profile
	 * otherwise): names from guests that are not go escaped */
	if (!util_utf8_valid(s))
		s = util_text_escape(esc, sizeof(esc), s);
	i = smap_get(&p->strs, s, p->nr_str, &added);

	if (i < 0)
		return -1;
	if (added) {
		if (p->nr_str == p->cap_str) {
			size_t nc = p->cap_str ? p->cap_str * 2 : 256;
			char **t = realloc(p->strtab, nc * sizeof(*t));

			if (!t)
				return -1;
			p->strtab = t;
			p->cap_str = nc;
		}
		p->strtab[p->nr_str] = strdup(s);
		if (!p->strtab[p->nr_str])
			return -1;
		p->nr_str++;
	}
	return i;
}

static void pp_free(struct pp *p)
{
	Perftools__Profiles__Profile *pr = &p->prof;

	for (size_t i = 0; i < pr->n_sample; i++) {
		for (size_t j = 0; j < pr->sample[i]->n_label; j++)
			free(pr->sample[i]->label[j]);
		free(pr->sample[i]->label);
		free(pr->sample[i]->value);
		free(pr->sample[i]->location_id);
		free(pr->sample[i]);
	}
	free(pr->sample);
	for (size_t i = 0; i < pr->n_location; i++) {
		free(pr->location[i]->line[0]);
		free(pr->location[i]->line);
		free(pr->location[i]);
	}
	free(pr->location);
	for (size_t i = 0; i < pr->n_function; i++)
		free(pr->function[i]);
	free(pr->function);
	for (size_t i = 0; i < pr->n_mapping; i++)
		free(pr->mapping[i]);
	free(pr->mapping);
	for (size_t i = 0; i < pr->n_sample_type; i++)
		free(pr->sample_type[i]);
	free(pr->sample_type);
	free(pr->period_type);
	for (size_t i = 0; i < p->nr_str; i++)
		free(p->strtab[i]);
	free(p->strtab);
	smap_free(&p->strs);
	smap_free(&p->funcs);
	smap_free(&p->locs);
	smap_free(&p->maps);
}

static Perftools__Profiles__ValueType *pp_vt(struct pp *p, const char *type, const char *unit)
{
	Perftools__Profiles__ValueType *vt = malloc(sizeof(*vt));

	if (!vt)
		return NULL;
	perftools__profiles__value_type__init(vt);
	vt->type = pp_str(p, type);
	vt->unit = pp_str(p, unit);
	if (vt->type < 0 || vt->unit < 0) {
		free(vt);
		return NULL;
	}
	return vt;
}

static int pp_label(Perftools__Profiles__Sample *s, int64_t key, int64_t str, int64_t num)
{
	Perftools__Profiles__Label *l = malloc(sizeof(*l));

	if (!l)
		return -ENOMEM;
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = str;
	l->num = num;
	s->label[s->n_label++] = l;
	return 0;
}

/*
 * Locations carry link-time image addresses (the store keeps offsets in
 * the image, not where each process mapped it), so a mapping is the image
 * as linked: its executable segments and their file offset, from the ELF;
 * else the span of its symbols; else (nothing known) all addresses.
 */
static void pp_mapping_range(const struct report_row *row, Perftools__Profiles__Mapping *m)
{
	struct elfimage *elf = row->img ? simage_elf(row->img) : NULL;
	size_t n = row->img ? simage_nr_syms(row->img) : 0;
	uint64_t start, end, off;

	m->memory_start = 0;
	m->memory_limit = UINT64_MAX;
	if (elf && !elfimage_exec_span(elf, &start, &end, &off)) {
		m->memory_start = start;
		m->memory_limit = end;
		m->file_offset = off;
	} else if (n) {
		const struct elfsym *first = simage_sym(row->img, 0);
		const struct elfsym *last = simage_sym(row->img, n - 1);

		m->memory_start = first->addr;
		m->memory_limit = last->addr + (last->size ? last->size : 1);
	}
}

/* Mapping id for the row's image (1-based). */
static long pp_mapping(struct pp *p, const struct report_row *row)
{
	Perftools__Profiles__Profile *pr = &p->prof;
	Perftools__Profiles__Mapping *m;
	char key[1024];
	int added;
	long id;

	snprintf(key, sizeof(key), "%s\1%s", row->guest, row->image);
	id = smap_get(&p->maps, key, pr->n_mapping + 1, &added);
	if (id < 0 || !added)
		return id;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	perftools__profiles__mapping__init(m);
	m->id = (uint64_t)id;
	m->filename = pp_str(p, row->image);
	m->has_functions = 1;
	m->has_filenames = m->has_line_numbers = row->img && simage_elf(row->img);
	if (row->img && simage_elf(row->img)) {
		size_t len;
		const uint8_t *id_bytes = elfimage_build_id(simage_elf(row->img), &len);
		char hex[2 * 64 + 1] = "";

		if (id_bytes)
			util_hex(id_bytes, len < 64 ? len : 64, hex);
		m->build_id = pp_str(p, hex);
	}
	pp_mapping_range(row, m);
	pr->mapping[pr->n_mapping++] = m;
	return m->filename < 0 || m->build_id < 0 ? -ENOMEM : id;
}

/* The DWARF line of addr in the row's image, or 0 (no line table). */
static int pp_line(struct pp *p, const struct report_row *row, uint64_t addr,
		   struct elfline *l)
{
	struct elfimage *elf = row->img ? simage_elf(row->img) : NULL;

	if (!p->res || !elf || !row->symbol || symres_want_lines(p->res, row->img, row->guest))
		return 0;
	return elfimage_line(elf, addr, l) == 0 && l->line;
}

/* Function id for the row's symbol.  Its file is the host copy of its
 * source found by symres_open_source() (guest roots, --source-dir, never
 * the guest's path itself), so `go tool pprof -list` reads it; else the
 * DWARF path without its leading '/' (for -source_path), else the image. */
static long pp_function(struct pp *p, const struct report_row *row, const char *name)
{
	Perftools__Profiles__Profile *pr = &p->prof;
	Perftools__Profiles__Function *fn;
	char key[2048], used[4096];
	const char *file = row->image;
	struct elfline l;
	int added;
	long id;

	snprintf(key, sizeof(key), "%s\1%s\1%s", row->guest, row->image, name);
	id = smap_get(&p->funcs, key, pr->n_function + 1, &added);
	if (id < 0 || !added)
		return id;
	fn = malloc(sizeof(*fn));
	if (!fn)
		return -ENOMEM;
	perftools__profiles__function__init(fn);
	fn->id = (uint64_t)id;
	if (pp_line(p, row, row->sym_addr, &l) && l.file) {
		FILE *src = symres_open_source(p->res, row->guest, l.file, used, sizeof(used));

		if (src) {
			fclose(src);
			file = used;
		} else {
			for (file = l.file; *file == '/'; file++)
				;
		}
		fn->start_line = l.line;
	}
	fn->name = fn->system_name = pp_str(p, name);
	fn->filename = pp_str(p, file);
	pr->function[pr->n_function++] = fn;
	return fn->name < 0 || fn->filename < 0 ? -ENOMEM : id;
}

/* Location id for an address of the row's symbol (addr_known: addr is an
 * image address from the details; else one location for the symbol). */
static long pp_location(struct pp *p, const struct report_row *row, uint64_t addr,
			int addr_known)
{
	Perftools__Profiles__Profile *pr = &p->prof;
	Perftools__Profiles__Location *loc;
	char key[2048], name[1024];
	struct elfline l;
	long id, map, fn;
	int added;

	if (row->symbol)
		snprintf(name, sizeof(name), "%s", row->symbol);
	else
		snprintf(name, sizeof(name), NO_SYMBOLS " %s", report_basename(row->image));
	if (!addr_known)
		addr = row->symbol ? row->sym_addr : 0;
	snprintf(key, sizeof(key), "%s\1%s\1%s\1%" PRIx64, row->guest, row->image, name, addr);
	id = smap_get(&p->locs, key, pr->n_location + 1, &added);
	if (id < 0 || !added)
		return id;
	map = pp_mapping(p, row);
	fn = map < 0 ? map : pp_function(p, row, name);
	if (fn < 0)
		return fn;
	loc = malloc(sizeof(*loc));
	if (!loc)
		return -ENOMEM;
	perftools__profiles__location__init(loc);
	loc->line = calloc(1, sizeof(*loc->line));
	if (!loc->line || !(loc->line[0] = malloc(sizeof(**loc->line)))) {
		free(loc->line);
		free(loc);
		return -ENOMEM;
	}
	perftools__profiles__line__init(loc->line[0]);
	loc->line[0]->function_id = (uint64_t)fn;
	if (addr_known && pp_line(p, row, addr, &l))
		loc->line[0]->line = l.line;
	else
		loc->line[0]->line = pr->function[fn - 1]->start_line;
	loc->n_line = 1;
	loc->id = (uint64_t)id;
	loc->mapping_id = (uint64_t)map;
	loc->address = addr;
	pr->location[pr->n_location++] = loc;
	return id;
}

static int gzip_write(FILE *f, const uint8_t *buf, size_t len)
{
	z_stream z = { 0 };
	uint8_t out[65536];
	int zr;

	/* windowBits 15 + 16: a gzip header, as pprof expects. */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)buf;
	z.avail_in = (uInt)len;
	do {
		z.next_out = out;
		z.avail_out = sizeof(out);
		zr = deflate(&z, Z_FINISH);
		if (zr == Z_STREAM_ERROR)
			break;
		if (fwrite(out, 1, sizeof(out) - z.avail_out, f) != sizeof(out) - z.avail_out) {
			deflateEnd(&z);
			return -EIO;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	return zr == Z_STREAM_END ? 0 : -EIO;
}

/* The unit of an event's count, named as pprof names units: TIMER counts
 * microseconds, cpu-clock nanoseconds, hardware events occurrences. */
static const char *count_unit(const char *event)
{
	struct events_db *db = events_db_load("generic", 0, NULL, 0);
	const struct opvm_event *e = db ? events_find(db, event) : NULL;
	const char *unit = "events";

	if (e && e->unit == OPVM_UNIT_US)
		unit = "microseconds";
	else if (e && e->unit == OPVM_UNIT_NS)
		unit = "nanoseconds";
	events_db_free(db);
	return unit;
}

enum { PP_GUEST, PP_PROCESS, PP_IMAGE, PP_TGID, PP_TID, PP_CPU, PP_NR_KEYS };
static const char *const pp_keys[PP_NR_KEYS] = {
	"guest", "process", "image", "tgid", "tid", "cpu",
};

/* One sample of count at locations locs[0..n) (leaf first), labelled. */
static int pp_sample_at(struct pp *p, const struct report *r, const struct report_row *row,
			const uint64_t *locs, size_t n, uint64_t count, const int64_t *k)
{
	Perftools__Profiles__Profile *pr = &p->prof;
	Perftools__Profiles__Sample *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	perftools__profiles__sample__init(s);
	pr->sample[pr->n_sample++] = s;
	s->location_id = malloc(n * sizeof(*s->location_id));
	s->value = malloc(2 * sizeof(*s->value));
	s->label = calloc(PP_NR_KEYS, sizeof(*s->label));
	if (!s->location_id || !s->value || !s->label)
		return -ENOMEM;
	memcpy(s->location_id, locs, n * sizeof(*locs));
	s->n_location_id = n;
	s->value[0] = (int64_t)count;
	s->value[1] = (int64_t)(count * (r->event_count ? r->event_count : 1));
	s->n_value = 2;
	if (pp_label(s, k[PP_GUEST], pp_str(p, row->guest), 0) ||
	    pp_label(s, k[PP_PROCESS], pp_str(p, row->app), 0) ||
	    pp_label(s, k[PP_IMAGE], pp_str(p, row->image), 0))
		return -ENOMEM;
	if (row->tgid >= 0 && pp_label(s, k[PP_TGID], 0, row->tgid))
		return -ENOMEM;
	if (row->tid >= 0 && pp_label(s, k[PP_TID], 0, row->tid))
		return -ENOMEM;
	if (row->cpu >= 0 && pp_label(s, k[PP_CPU], 0, row->cpu))
		return -ENOMEM;
	for (size_t j = 0; j < s->n_label; j++)
		if (s->label[j]->str < 0)
			return -ENOMEM;
	return 0;
}

/* One sample of count at location loc (or loc's -errno), labelled. */
static int pp_sample(struct pp *p, const struct report *r, const struct report_row *row,
		     long loc, uint64_t count, const int64_t *k)
{
	uint64_t id = (uint64_t)loc;

	return loc < 0 ? (int)loc : pp_sample_at(p, r, row, &id, 1, count, k);
}

/* A frame as the one-frame code sees a row (its own symbol and image). */
static void frame_row(const struct report_stack *st, const struct report_frame *f,
		      struct report_row *row)
{
	*row = (struct report_row){ .guest = st->guest, .app = st->app, .image = f->image,
				    .kernel = f->kernel, .tgid = -1, .tid = -1, .cpu = -1,
				    .symbol = f->symbol, .sym_addr = f->sym_addr,
				    .img = f->img, .samples = st->samples };
}

/* One stack: a Location per frame, at the frame's image address (a
 * caller's at its call instruction, return address - 1) for lines. */
static int pp_stack(struct pp *p, const struct report *r, const struct report_stack *st,
		    const int64_t *k)
{
	uint64_t locs[STORE_STACKS_MAX_FRAMES];
	struct report_row row;

	for (unsigned i = 0; i < st->nr; i++) {
		const struct report_frame *f = &st->frames[i];
		uint64_t addr = 0;
		int known = f->symbol && f->img &&
			    !simage_addr(f->img, f->offset - (i && f->offset ? 1 : 0), &addr);
		long loc;

		frame_row(st, f, &row);
		loc = pp_location(p, &row, addr, known);
		if (loc < 0)
			return (int)loc;
		locs[i] = (uint64_t)loc;
	}
	frame_row(st, &st->frames[0], &row);
	return pp_sample_at(p, r, &row, locs, st->nr, st->samples, k);
}

/* The profile's arrays, sized for every row's and stack's locations. */
static int pp_alloc(Perftools__Profiles__Profile *pr, const struct report *r)
{
	size_t n = r->nr_rows, n_loc = 0;

	pr->sample_type = calloc(2, sizeof(*pr->sample_type));
	for (size_t i = 0; i < r->nr_rows; i++)
		n_loc += r->rows[i].nr_addrs ? r->rows[i].nr_addrs : 1;
	for (size_t i = 0; i < r->nr_stacks; i++)
		n_loc += r->stacks[i].nr + 1;
	n += n_loc;
	pr->sample = calloc(n_loc + 1, sizeof(*pr->sample));
	pr->location = calloc(n_loc + 1, sizeof(*pr->location));
	pr->function = calloc(n + 1, sizeof(*pr->function));
	pr->mapping = calloc(n + 1, sizeof(*pr->mapping));
	if (!pr->sample_type || !pr->sample || !pr->location || !pr->function || !pr->mapping)
		return -ENOMEM;
	return 0;
}

/* Sample and period types, default type, duration; label keys into k. */
static int pp_types(struct pp *p, const struct report *r, int64_t k[PP_NR_KEYS])
{
	Perftools__Profiles__Profile *pr = &p->prof;
	const struct report_guest *g0 = NULL;
	const char *unit = count_unit(r->event);
	char evname[64];

	for (size_t i = 0; i < r->nr_guests; i++)
		if (r->guests[i].total && !g0)
			g0 = &r->guests[i];
	snprintf(evname, sizeof(evname), "%s", r->event);
	for (char *c = evname; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	/* values: samples, and samples x period in the event's unit
	 * (timer/microseconds: pprof shows time). */
	if (!(pr->sample_type[0] = pp_vt(p, "samples", "count")))
		return -ENOMEM;
	pr->n_sample_type = 1;
	if (!(pr->sample_type[1] = pp_vt(p, evname, unit)))
		return -ENOMEM;
	pr->n_sample_type = 2;
	if (!(pr->period_type = pp_vt(p, evname, unit)))
		return -ENOMEM;
	pr->period = (int64_t)(r->event_count ? r->event_count : 1);
	/* pprof shows the last sample type unless told: samples first. */
	pr->default_sample_type = pp_str(p, "samples");
	if (g0 && g0->duration_s > 0)
		pr->duration_nanos = (int64_t)(g0->duration_s * 1e9);
	for (size_t i = 0; i < PP_NR_KEYS; i++)
		if ((k[i] = pp_str(p, pp_keys[i])) < 0)
			return -ENOMEM;
	return 0;
}

/* Without call chains, one sample per row, or per address when the report
 * kept details (lines for pprof's -list). */
static int pp_rows(struct pp *p, const struct report *r, const int64_t k[PP_NR_KEYS])
{
	for (size_t i = 0; i < r->nr_rows && !r->stack_guests; i++) {
		const struct report_row *row = &r->rows[i];

		if (!row->samples)
			continue;
		if (!row->nr_addrs || row->unresolved_offsets) {
			if (pp_sample(p, r, row, pp_location(p, row, 0, 0), row->samples, k))
				return -ENOMEM;
			continue;
		}
		for (size_t j = 0; j < row->nr_addrs; j++)
			if (row->addrs[j].count &&
			    pp_sample(p, r, row, pp_location(p, row, row->addrs[j].addr, 1),
				      row->addrs[j].count, k))
				return -ENOMEM;
	}
	return 0;
}

int report_export_pprof(FILE *f, const struct report *r, struct symres *res)
{
	Perftools__Profiles__Profile *pr;
	struct pp p = { .prof = PERFTOOLS__PROFILES__PROFILE__INIT };
	int64_t k[PP_NR_KEYS];
	uint8_t *buf = NULL;
	size_t len;
	int ret = -ENOMEM;

	pr = &p.prof;
	p.res = res;
	if (pp_str(&p, "") != 0)	/* string_table[0] must be "" */
		goto out;
	if (pp_alloc(pr, r) || pp_types(&p, r, k))
		goto out;
	/* with call chains, the stacks are the samples: one Location a frame */
	for (size_t i = 0; i < r->nr_stacks; i++)
		if (pp_stack(&p, r, &r->stacks[i], k))
			goto out;
	if (pp_rows(&p, r, k))
		goto out;
	pr->string_table = p.strtab;
	pr->n_string_table = p.nr_str;

	len = perftools__profiles__profile__get_packed_size(pr);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto out;
	perftools__profiles__profile__pack(pr, buf);
	ret = gzip_write(f, buf, len);
out:
	pr->string_table = NULL;
	pr->n_string_table = 0;
	free(buf);
	pp_free(&p);
	return ret;
}

/* ---- folded --------------------------------------------------------------------- */

/* A frame for folded stacks: ';' separates frames and '\n' lines; names
 * from guests are escaped (util_text_escape()). */
static void frame(FILE *f, const char *raw)
{
	char buf[1024];

	for (const char *s = util_text_escape(buf, sizeof(buf), raw); *s; s++)
		fputc(*s == ';' ? ':' : *s, f);
}

static void process_name(const struct report_row *row, char *out, size_t len)
{
	if (row->tgid >= 0)
		snprintf(out, len, "%s[%" PRId64 "]", report_basename(row->app), row->tgid);
	else
		snprintf(out, len, "%s", report_basename(row->app));
}

struct folded_line {
	char *stack;
	uint64_t samples;
	const struct report_row *row;
};

static int folded_cmp(const void *a, const void *b)
{
	return strcmp(((const struct folded_line *)a)->stack,
		      ((const struct folded_line *)b)->stack);
}

/* The row's "guest;process;image;symbol" in a new string, or NULL. */
static char *folded_stack(const struct report_row *row)
{
	char proc[512], *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	process_name(row, proc, sizeof(proc));
	frame(m, row->guest);
	fputc(';', m);
	frame(m, proc);
	fputc(';', m);
	frame(m, report_basename(row->image));
	fputc(';', m);
	if (row->symbol)
		frame(m, row->symbol);
	else
		fputs("[unknown]", m);
	if (fclose(m) || !buf) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* A stack frame's name in folded stacks and the flame graph: its symbol,
 * else its image in brackets, as perf's folded output has it. */
static const char *frame_name(const struct report_frame *f, char *buf, size_t len)
{
	if (f->symbol)
		return f->symbol;
	snprintf(buf, len, "[%s]", report_basename(f->image));
	return buf;
}

/* The stack's "guest;process;root;...;leaf" in a new string, or NULL. */
static char *folded_chain(const struct report_stack *st)
{
	char *buf = NULL, name[1024];
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	frame(m, st->guest);
	fputc(';', m);
	frame(m, report_basename(st->app));
	for (unsigned i = st->nr; i-- > 0;) {
		fputc(';', m);
		frame(m, frame_name(&st->frames[i], name, sizeof(name)));
	}
	if (fclose(m) || !buf) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Sorted by stack, one line per stack: tools that draw lines in file
 * order (speedscope's "left heavy" aside) then keep a stack in one block,
 * and rows that differ only in what folded does not show (thread, cpu)
 * are merged. */
int report_export_folded(FILE *f, const struct report *r)
{
	struct folded_line *v = calloc(r->nr_rows + r->nr_stacks + 1, sizeof(*v));
	size_t n = 0;
	int ret = -ENOMEM;

	if (!v)
		return -ENOMEM;
	/* with call chains (-g), the stacks are the lines */
	for (size_t i = 0; i < r->nr_stacks; i++) {
		v[n].stack = folded_chain(&r->stacks[i]);
		if (!v[n].stack)
			goto out;
		v[n++].samples = r->stacks[i].samples;
	}
	for (size_t i = 0; i < r->nr_rows && !r->stack_guests; i++) {
		if (!r->rows[i].samples)
			continue;
		v[n].stack = folded_stack(&r->rows[i]);
		if (!v[n].stack)
			goto out;
		v[n++].samples = r->rows[i].samples;
	}
	qsort(v, n, sizeof(*v), folded_cmp);
	for (size_t i = 0; i < n; i++) {
		uint64_t sum = v[i].samples;

		while (i + 1 < n && !strcmp(v[i].stack, v[i + 1].stack))
			sum = util_sat_add(sum, v[++i].samples);
		/* folded counts are plain numbers: a saturated one stays the cap */
		fprintf(f, "%s %" PRIu64 "\n", v[i].stack, sum);
	}
	ret = ferror(f) ? -EIO : 0;
out:
	for (size_t i = 0; i < n; i++)
		free(v[i].stack);
	free(v);
	return ret;
}

/* ---- speedscope ------------------------------------------------------------------ */

/* Frame index of name in the shared frames (added if new), or -errno. */
static long ss_frame(struct smap *idx, json_t *frames, const char *name)
{
	char buf[1024];
	const char *esc = util_text_escape(buf, sizeof(buf), name);
	int added;
	long i = smap_get(idx, esc, json_array_size(frames), &added);

	if (i >= 0 && added &&
	    json_array_append_new(frames, json_pack("{s:s}", "name", esc)))
		return -ENOMEM;
	return i;
}

/* The profile of guest in profiles (added if new), or NULL. */
static json_t *ss_profile(json_t *profiles, const char *guest, const char *event)
{
	size_t i;
	json_t *p;
	char name[512];

	json_array_foreach(profiles, i, p)
		if (!strcmp(json_string_value(json_object_get(p, "x-guest")), guest))
			return p;
	snprintf(name, sizeof(name), "guest %s, %s", guest, event);
	p = json_pack("{s:s, s:s, s:s, s:i, s:i, s:[], s:[], s:s}", "type", "sampled",
		      "name", name, "unit", "none", "startValue", 0, "endValue", 0,
		      "samples", "weights", "x-guest", guest);
	return p && !json_array_append_new(profiles, p) ? p : NULL;
}

/* One sample's stack (process, image, symbol; the guest is its profile),
 * weighted by the row's count; stacks sorted as in folded. */
static int ss_add(struct smap *idx, json_t *frames, json_t *prof, const struct report_row *row)
{
	char proc[512];
	long fr[3];
	json_t *stack;

	process_name(row, proc, sizeof(proc));
	fr[0] = ss_frame(idx, frames, proc);
	fr[1] = ss_frame(idx, frames, report_basename(row->image));
	fr[2] = ss_frame(idx, frames, row->symbol ? row->symbol : "[unknown]");
	if (fr[0] < 0 || fr[1] < 0 || fr[2] < 0)
		return -ENOMEM;
	stack = json_pack("[I, I, I]", (json_int_t)fr[0], (json_int_t)fr[1], (json_int_t)fr[2]);
	if (!stack || json_array_append_new(json_object_get(prof, "samples"), stack) ||
	    json_array_append_new(json_object_get(prof, "weights"),
				  json_integer((json_int_t)(row->samples > INT64_MAX ?
							    INT64_MAX : row->samples))))
		return -ENOMEM;
	json_object_set_new(prof, "endValue",
			    json_integer(json_integer_value(json_object_get(prof, "endValue")) +
					 (json_int_t)(row->samples > INT64_MAX ? 0 : row->samples)));
	return 0;
}

int report_export_speedscope(FILE *f, const struct report *r, const char *exporter)
{
	struct folded_line *v = calloc(r->nr_rows + r->nr_stacks + 1, sizeof(*v));
	json_t *frames = json_array(), *profiles = json_array(), *root = NULL, *p;
	struct smap idx = { 0 };
	size_t n = 0, i;
	int ret = -ENOMEM;

	if (!v || !frames || !profiles)
		goto out;
	for (i = 0; i < r->nr_rows; i++) {
		if (!r->rows[i].samples)
			continue;
		v[n].stack = folded_stack(&r->rows[i]);
		if (!v[n].stack)
			goto out;
		v[n].row = &r->rows[i];
		v[n++].samples = r->rows[i].samples;
	}
	qsort(v, n, sizeof(*v), folded_cmp);
	for (i = 0; i < n; i++) {
		p = ss_profile(profiles, v[i].row->guest, r->event);
		if (!p || ss_add(&idx, frames, p, v[i].row))
			goto out;
	}
	json_array_foreach(profiles, i, p)
		json_object_del(p, "x-guest");
	root = json_pack("{s:s, s:{s:O}, s:O, s:s, s:i, s:s}",
			 "$schema", "https://www.speedscope.app/file-format-schema.json",
			 "shared", "frames", frames, "profiles", profiles,
			 "name", r->event, "activeProfileIndex", 0, "exporter", exporter);
	if (!root)
		goto out;
	ret = json_dumpf(root, f, JSON_COMPACT) || fputc('\n', f) == EOF ? -EIO : 0;
out:
	for (i = 0; i < n; i++)
		free(v[i].stack);
	free(v);
	smap_free(&idx);
	json_decref(root);
	json_decref(frames);
	json_decref(profiles);
	return ret;
}

/* ---- HTML flame graph ------------------------------------------------------------- */

static void html_esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

/* {"n": name, "v": value, "k": {child name: node}} while building. */
static json_t *tree_child(json_t *node, const char *name)
{
	json_t *kids = json_object_get(node, "k"), *c;

	if (!kids) {
		kids = json_object();
		if (!kids || json_object_set_new(node, "k", kids))
			return NULL;
	}
	c = json_object_get(kids, name);
	if (c)
		return c;
	c = json_pack("{s:s, s:I}", "n", name, "v", (json_int_t)0);
	if (!c || json_object_set_new(kids, name, c))
		return NULL;
	return c;
}

static int node_cmp(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "v"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "v"));

	return x > y ? -1 : x < y;
}

/* "k" objects become "c" arrays, largest first. */
static int tree_finish(json_t *node)
{
	json_t *kids = json_object_get(node, "k"), *arr, **v, *c;
	const char *key;
	size_t n = 0;

	if (!kids)
		return 0;
	v = calloc(json_object_size(kids) + 1, sizeof(*v));
	arr = json_array();
	if (!v || !arr) {
		free(v);
		json_decref(arr);
		return -ENOMEM;
	}
	json_object_foreach(kids, key, c) {
		v[n++] = c;
		if (tree_finish(c)) {
			free(v);
			json_decref(arr);
			return -ENOMEM;
		}
	}
	qsort(v, n, sizeof(*v), node_cmp);
	for (size_t i = 0; i < n; i++)
		json_array_append(arr, v[i]);
	free(v);
	json_object_set_new(node, "c", arr);
	json_object_del(node, "k");
	return 0;
}

static const char html_head[] =
"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
"<meta name=\"viewport\" content=\"width=device-width\">\n<title>";

static const char html_style[] =
"</title>\n<style>\n"
"body{font:13px/1.4 system-ui,sans-serif;margin:12px;color:#222}\n"
"h1{font-size:18px;margin:0 0 6px}h2{font-size:15px;margin:18px 0 6px}\n"
"#info{color:#555;margin-bottom:8px;white-space:pre-wrap}\n"
"#bar{margin:6px 0}#bar input{width:260px}\n"
"#fg{position:relative;width:100%;min-height:20px;overflow:hidden}\n"
".f{position:absolute;height:18px;line-height:18px;overflow:hidden;white-space:nowrap;"
"box-sizing:border-box;border:1px solid #fff;padding-left:3px;cursor:pointer;"
"font-size:12px;border-radius:2px}\n"
".f:hover{border-color:#333}.f.hl{background:#d0f !important;color:#fff}\n"
"#path{color:#555;margin:4px 0}\n"
"table{border-collapse:collapse}td,th{padding:1px 10px 1px 0;text-align:left}"
"td.n{text-align:right}\n"
"</style></head><body>\n";

static const char html_script[] =
"<script>\n"
"(function(){\n"
"var fg=document.getElementById('fg'),st=document.getElementById('st'),"
"pathEl=document.getElementById('path'),q=document.getElementById('q'),H=19;\n"
"var zoom=[data];\n"
"function hash(s){var h=0;for(var i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))>>>0;return h;}\n"
"var D=data.b!==undefined,B=data.b||1,V=data.v||1,M=0;\n"
"function delta(n){return n.v/V-(n.b||0)/B;}\n"
"(function mx(n){if(!n.c)M=Math.max(M,Math.abs(delta(n)));(n.c||[]).forEach(mx);})(data);\n"
"function color(n,d,o){if(D){var k=M?Math.min(1,Math.abs(delta(o))/M):0,c=Math.round(255*(1-k));"
"return delta(o)>0?'rgb(255,'+c+','+c+')':delta(o)<0?'rgb('+c+','+c+',255)':'rgb(255,255,255)';}"
"var h=hash(n);if(d==0)return'#bbb';"
"return'hsl('+(10+h%45)+','+(65+h%25)+'%,'+(58+h%14)+'%)';}\n"
"function tip(n){var t=n.n+': '+n.v+' samples, '+(100*n.v/V).toFixed(2)+'%';"
"if(D){var d=100*delta(n);t+='; baseline '+(n.b||0)+' samples, '+(100*(n.b||0)/B).toFixed(2)+'%; "
"delta '+(d>=0?'+':'')+d.toFixed(2)+' pp';}return t;}\n"
"function depth(n){var d=0;(n.c||[]).forEach(function(c){d=Math.max(d,1+depth(c));});return d;}\n"
"function render(){\n"
" var root=zoom[zoom.length-1],W=fg.clientWidth||1200,tot=root.v||1;\n"
" while(fg.firstChild)fg.removeChild(fg.firstChild);\n"
" fg.style.height=((depth(root)+1)*H)+'px';\n"
" (function draw(n,x,d){\n"
"  var w=n.v/tot;if(d>0&&w*W<2)return;\n"
"  var e=document.createElement('div');e.className='f';\n"
"  e.style.left=(x*100)+'%';e.style.width=(w*100)+'%';e.style.top=(d*H)+'px';\n"
"  e.style.background=color(n.n,d,n);e.textContent=n.n;e.title=tip(n);\n"
"  e.onclick=function(){if(n!==root){zoom.push(n);}else if(zoom.length>1){zoom.pop();}render();};\n"
"  fg.appendChild(e);var cx=x;\n"
"  (n.c||[]).forEach(function(c){draw(c,cx,d+1);cx+=c.v/tot;});\n"
" })(root,0,0);\n"
" pathEl.textContent=zoom.map(function(n){return n.n;}).join(' \\u203a ');\n"
" search();\n"
"}\n"
"function search(){var s=q.value,m=0;\n"
" Array.prototype.forEach.call(fg.children,function(e){var on=!!s&&e.textContent.indexOf(s)>=0;"
"e.classList.toggle('hl',on);if(on)m++;});\n"
" st.textContent=s?(m+' match'+(m==1?'':'es')):'';}\n"
"q.oninput=search;\n"
"document.getElementById('reset').onclick=function(){zoom=[data];render();};\n"
"window.addEventListener('resize',render);render();\n"
"})();\n"
"</script>\n</body></html>\n";

/* Adds one path of names under root, count n in key. */
static int tree_path(json_t *root, const char *const *names, size_t depth, const char *key,
		     uint64_t n)
{
	json_t *node = root;

	for (size_t d = 0; d < depth; d++) {
		node = tree_child(node, names[d]);
		if (!node)
			return -ENOMEM;
		json_object_set_new(node, key, stats_json_count(util_sat_add(
			stats_json_get(node, key), n)));
	}
	return 0;
}

/* Adds r's stacks: guest, process, then the chain root to leaf. */
static int tree_add_stacks(json_t *root, const struct report *r, const char *key)
{
	static char esc[2 + STORE_STACKS_MAX_FRAMES][512];
	const char *names[2 + STORE_STACKS_MAX_FRAMES];
	char tmp[512];

	for (size_t i = 0; i < r->nr_stacks; i++) {
		const struct report_stack *st = &r->stacks[i];
		size_t d = 0;

		names[d] = util_text_escape(esc[d], sizeof(esc[d]), st->guest), d++;
		names[d] = util_text_escape(esc[d], sizeof(esc[d]), report_basename(st->app)), d++;
		for (unsigned j = st->nr; j-- > 0; d++)
			names[d] = util_text_escape(esc[d], sizeof(esc[d]),
						    frame_name(&st->frames[j], tmp, sizeof(tmp)));
		if (tree_path(root, names, d, key, st->samples))
			return -ENOMEM;
	}
	return 0;
}

/* Adds r's rows to the tree under root, counts in key ("v": the profile
 * drawn, "b": the baseline of a differential graph). */
static int tree_add(json_t *root, const struct report *r, const char *key)
{
	if (r->stack_guests)
		return tree_add_stacks(root, r, key);
	for (size_t i = 0; i < r->nr_rows; i++) {
		const struct report_row *row = &r->rows[i];
		json_t *node = root;
		char proc[512], sym[1024], gname[256], pname[1024], iname[1024];
		const char *names[4];

		if (!row->samples)
			continue;
		process_name(row, proc, sizeof(proc));
		/* JSON keys and strings must be UTF-8: names from guests go
		 * escaped (util_text_escape()), as in text output */
		util_text_escape(sym, sizeof(sym), row->symbol ? row->symbol : NO_SYMBOLS);
		util_text_escape(gname, sizeof(gname), row->guest);
		util_text_escape(pname, sizeof(pname), proc);
		util_text_escape(iname, sizeof(iname), report_basename(row->image));
		names[0] = gname;
		names[1] = pname;
		names[2] = iname;
		names[3] = sym;
		for (size_t d = 0; d < 4; d++) {
			node = tree_child(node, names[d]);
			if (!node)
				return -ENOMEM;
			json_object_set_new(node, key, stats_json_count(util_sat_add(
				stats_json_get(node, key), row->samples)));
		}
	}
	return 0;
}

/* The info line: event, samples, each guest's sampling, the baseline. */
static void html_info(FILE *f, const struct report *r, const struct report *base)
{
	char cnt[OPVM_COUNT_BUF];

	fputs("event ", f);
	html_esc(f, r->event);
	fprintf(f, ", %s samples", stats_fmt_count(r->total, cnt));
	for (size_t i = 0; i < r->nr_guests; i++) {
		const struct report_guest *g = &r->guests[i];

		if (!g->total)
			continue;
		fputs("\nguest ", f);
		html_esc(f, g->name);
		if (g->mode) {
			fputs(": ", f);
			html_esc(f, g->mode);
			if (g->rate_hz)
				fprintf(f, " at %u Hz", g->rate_hz);
			if (g->vcpus)
				fprintf(f, ", %u vCPUs", g->vcpus);
			if (g->duration_s > 0)
				fprintf(f, ", %.1f s", g->duration_s);
		}
	}
	if (base)
		fprintf(f, "\ndifferential: widths are this profile's; red frames grew, blue "
			"shrank against a baseline of %s samples (share of all samples)",
			stats_fmt_count(base->total, cnt));
}

/* The table of the top 50 symbols under the flame graph. */
static void html_top(FILE *f, const struct report *r)
{
	char cnt[OPVM_COUNT_BUF];
	size_t shown = 0;

	fputs("<h2>Top symbols</h2>\n<table id=\"top\"><tr><th>samples</th><th>%</th>"
	      "<th>symbol</th><th>image</th><th>process</th><th>guest</th></tr>\n", f);
	for (size_t i = 0; i < r->nr_rows && shown < 50; i++) {
		const struct report_row *row = &r->rows[i];
		char proc[512];

		if (!row->samples)
			continue;
		shown++;
		process_name(row, proc, sizeof(proc));
		fprintf(f, "<tr><td class=\"n\">%s</td><td class=\"n\">%.2f</td><td>",
			stats_fmt_count(row->samples, cnt), row->percent);
		html_esc(f, row->symbol ? row->symbol : NO_SYMBOLS);
		fputs("</td><td>", f);
		html_esc(f, row->image);
		fputs("</td><td>", f);
		html_esc(f, proc);
		fputs("</td><td>", f);
		html_esc(f, row->guest);
		fputs("</td></tr>\n", f);
	}
}

int report_export_html(FILE *f, const struct report *r, const struct report *base,
		       const char *title)
{
	json_t *root = json_pack("{s:s, s:o}", "n", "all", "v", stats_json_count(
		r->stack_guests ? r->stacks_total : r->total));
	char *js = NULL;
	int ret = -ENOMEM;

	if (!root)
		return -ENOMEM;
	if (tree_add(root, r, "v"))
		goto out;
	/* Differential: widths stay the new profile's; "b" carries the
	 * baseline's counts for colour (saturated at the largest change of
	 * a symbol's share) and tooltips (a stack only in the
	 * baseline has width 0 and is not drawn, as in flamegraph.pl). */
	if (base && (tree_add(root, base, "b") ||
		     json_object_set_new(root, "b", stats_json_count(
			     base->stack_guests ? base->stacks_total : base->total))))
		goto out;
	if (tree_finish(root))
		goto out;
	js = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!js)
		goto out;

	fputs(html_head, f);
	html_esc(f, title ? title : "opvm flame graph");
	fputs(html_style, f);
	fputs("<h1>", f);
	html_esc(f, title ? title : "opvm flame graph");
	fputs("</h1>\n<div id=\"info\">", f);
	html_info(f, r, base);
	fputs("</div>\n<div id=\"bar\"><input id=\"q\" placeholder=\"search symbols\">"
	      " <button id=\"reset\">reset zoom</button> <span id=\"st\"></span></div>\n"
	      "<div id=\"path\"></div>\n<div id=\"fg\"></div>\n", f);
	fprintf(f, "<p>Levels: guest, process, then %s.  Click a frame to zoom in, "
		"click the top frame to zoom out.</p>\n", r->stack_guests ?
		"each call chain from its root to the sampled function" : "image, symbol");
	html_top(f, r);
	fputs("</table>\n<script>var data=", f);
	/* Inside <script>, "</script>" in a name would end the block: every
	 * '<' goes out escaped (JSON strings only, so this is exact). */
	for (const char *c = js; *c; c++) {
		if (*c == '<')
			fputs("\\u003c", f);
		else
			fputc(*c, f);
	}
	fputs(";</script>\n", f);
	fputs(html_script, f);
	ret = ferror(f) ? -EIO : 0;
out:
	free(js);
	json_decref(root);
	return ret;
}
