// SPDX-License-Identifier: MIT
/*
 * pprof export of a report: gzip'd profile.proto through protobuf-c and
 * zlib (shared parts: host/report/report-export.c).
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
#include "host/report/export-priv.h"
#include "host/collect/stats.h"
#include "lib/cgroup.h"
#include "lib/array.h"
#include "lib/hex.h"
#include "lib/text.h"

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
	if (!text_utf8_valid(s))
		s = text_escape(esc, sizeof(esc), s);
	i = smap_get(&p->strs, s, p->nr_str, &added);

	if (i < 0)
		return -1;
	if (added) {
		if (ARRAY_GROW(p->strtab, p->cap_str, p->nr_str + 1, 256))
			return -1;
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
			hex_encode(id_bytes, len < 64 ? len : 64, hex);
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
	if (row->python && row->file) {
		/* a Python function: the guest's file name, as py-spy's */
		file = row->file;
		fn->start_line = row->first_line;
	} else if (pp_line(p, row, row->sym_addr, &l) && l.file) {
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
	if (row->python)	/* a location per sampled line */
		addr = row->line;
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
	if (row->python && row->line)
		loc->line[0]->line = row->line;
	else if (addr_known && pp_line(p, row, addr, &l))
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

enum { PP_GUEST, PP_PROCESS, PP_IMAGE, PP_TGID, PP_TID, PP_CPU, PP_CGROUP, PP_POD,
       PP_CONTAINER, PP_NR_KEYS };
static const char *const pp_keys[PP_NR_KEYS] = {
	"guest", "process", "image", "tgid", "tid", "cpu", "cgroup", "pod", "container",
};

/* A row's cgroup, and the pod and container its path names (lib/cgroup.h). */
static int pp_cgroup_labels(struct pp *p, Perftools__Profiles__Sample *s, const char *cgroup,
			    const int64_t *k)
{
	struct cgroup_ids ids;

	if (pp_label(s, k[PP_CGROUP], pp_str(p, cgroup), 0))
		return -ENOMEM;
	if (cgroup_ids_parse(cgroup, strlen(cgroup), &ids))
		return 0;
	if (ids.pod[0] && pp_label(s, k[PP_POD], pp_str(p, ids.pod), 0))
		return -ENOMEM;
	if (ids.container[0] && pp_label(s, k[PP_CONTAINER], pp_str(p, ids.container), 0))
		return -ENOMEM;
	return 0;
}

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
	if (row->cgroup && pp_cgroup_labels(p, s, row->cgroup, k))
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
				    .kernel = f->kernel, .python = f->python, .file = f->file,
				    .first_line = f->first_line, .line = f->line,
				    .tgid = -1, .tid = -1, .cpu = -1,
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

static int pprof_write(FILE *f, const struct export_in *in)
{
	return report_export_pprof(f, in->r, in->res);
}

const struct export_ops export_pprof_ops = {
	.name = "pprof",
	.ext = ".pb.gz",
	.help = "pprof: gzip'd pprof profile (go tool pprof -top FILE)",
	.flags = EXPORT_DETAILS | EXPORT_EMPTY | EXPORT_CGROUP,
	.write = pprof_write,
};
