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
	struct smap strs, funcs, maps;
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
	/* Addresses are link-time: the mapping covers all of them. */
	m->memory_start = 0;
	m->memory_limit = UINT64_MAX;
	pr->mapping[pr->n_mapping++] = m;
	return m->filename < 0 ? -ENOMEM : id;
}

/* Location id for the row's symbol (one location per function). */
static long pp_location(struct pp *p, const struct report_row *row)
{
	Perftools__Profiles__Profile *pr = &p->prof;
	Perftools__Profiles__Function *fn;
	Perftools__Profiles__Location *loc;
	char key[2048], name[1024];
	long id, map;
	int added;

	if (row->symbol)
		snprintf(name, sizeof(name), "%s", row->symbol);
	else
		snprintf(name, sizeof(name), NO_SYMBOLS " %s", report_basename(row->image));
	snprintf(key, sizeof(key), "%s\1%s\1%s", row->guest, row->image, name);
	id = smap_get(&p->funcs, key, pr->n_function + 1, &added);
	if (id < 0 || !added)
		return id;
	map = pp_mapping(p, row);
	if (map < 0)
		return map;
	fn = malloc(sizeof(*fn));
	loc = malloc(sizeof(*loc));
	if (!fn || !loc) {
		free(fn);
		free(loc);
		return -ENOMEM;
	}
	perftools__profiles__function__init(fn);
	perftools__profiles__location__init(loc);
	loc->line = calloc(1, sizeof(*loc->line));
	if (!loc->line || !(loc->line[0] = malloc(sizeof(**loc->line)))) {
		free(loc->line);
		free(loc);
		free(fn);
		return -ENOMEM;
	}
	fn->id = (uint64_t)id;
	fn->name = fn->system_name = pp_str(p, name);
	fn->filename = pp_str(p, row->image);
	pr->function[pr->n_function++] = fn;

	perftools__profiles__line__init(loc->line[0]);
	loc->line[0]->function_id = fn->id;
	loc->n_line = 1;
	loc->id = (uint64_t)id;
	loc->mapping_id = (uint64_t)map;
	loc->address = row->symbol ? row->sym_addr : 0;
	pr->location[pr->n_location++] = loc;
	return fn->name < 0 || fn->filename < 0 ? -ENOMEM : id;
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

int report_export_pprof(FILE *f, const struct report *r)
{
	Perftools__Profiles__Profile *pr;
	struct pp p = { .prof = PERFTOOLS__PROFILES__PROFILE__INIT };
	const struct report_guest *g0 = NULL;
	int64_t k_guest, k_process, k_tgid, k_tid, k_cpu, k_image;
	uint8_t *buf = NULL;
	size_t n = r->nr_rows, len;
	char evname[64];
	const char *unit;
	int ret = -ENOMEM;

	pr = &p.prof;
	if (pp_str(&p, "") != 0)	/* string_table[0] must be "" */
		goto out;
	for (size_t i = 0; i < r->nr_guests; i++)
		if (r->guests[i].total && !g0)
			g0 = &r->guests[i];
	snprintf(evname, sizeof(evname), "%s", r->event);
	for (char *c = evname; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');

	pr->sample_type = calloc(2, sizeof(*pr->sample_type));
	pr->sample = calloc(n + 1, sizeof(*pr->sample));
	pr->location = calloc(n + 1, sizeof(*pr->location));
	pr->function = calloc(n + 1, sizeof(*pr->function));
	pr->mapping = calloc(n + 1, sizeof(*pr->mapping));
	if (!pr->sample_type || !pr->sample || !pr->location || !pr->function || !pr->mapping)
		goto out;
	/* values: samples, and samples x period in the event's unit
	 * (timer/microseconds: pprof shows time). */
	unit = count_unit(r->event);
	if (!(pr->sample_type[0] = pp_vt(&p, "samples", "count")))
		goto out;
	pr->n_sample_type = 1;
	if (!(pr->sample_type[1] = pp_vt(&p, evname, unit)))
		goto out;
	pr->n_sample_type = 2;
	if (!(pr->period_type = pp_vt(&p, evname, unit)))
		goto out;
	pr->period = (int64_t)(r->event_count ? r->event_count : 1);
	/* pprof shows the last sample type unless told: samples first. */
	pr->default_sample_type = pp_str(&p, "samples");
	if (g0 && g0->duration_s > 0)
		pr->duration_nanos = (int64_t)(g0->duration_s * 1e9);
	k_guest = pp_str(&p, "guest");
	k_process = pp_str(&p, "process");
	k_tgid = pp_str(&p, "tgid");
	k_tid = pp_str(&p, "tid");
	k_cpu = pp_str(&p, "cpu");
	k_image = pp_str(&p, "image");
	if (k_guest < 0 || k_process < 0 || k_tgid < 0 || k_tid < 0 || k_cpu < 0 || k_image < 0)
		goto out;

	for (size_t i = 0; i < n; i++) {
		const struct report_row *row = &r->rows[i];
		Perftools__Profiles__Sample *s;
		long loc;

		if (!row->samples)
			continue;
		loc = pp_location(&p, row);
		if (loc < 0)
			goto out;
		s = calloc(1, sizeof(*s));
		if (!s)
			goto out;
		perftools__profiles__sample__init(s);
		pr->sample[pr->n_sample++] = s;
		s->location_id = malloc(sizeof(*s->location_id));
		s->value = malloc(2 * sizeof(*s->value));
		s->label = calloc(6, sizeof(*s->label));
		if (!s->location_id || !s->value || !s->label)
			goto out;
		s->location_id[0] = (uint64_t)loc;
		s->n_location_id = 1;
		s->value[0] = (int64_t)row->samples;
		s->value[1] = (int64_t)(row->samples * (r->event_count ? r->event_count : 1));
		s->n_value = 2;
		if (pp_label(s, k_guest, pp_str(&p, row->guest), 0) ||
		    pp_label(s, k_process, pp_str(&p, row->app), 0) ||
		    pp_label(s, k_image, pp_str(&p, row->image), 0))
			goto out;
		if (row->tgid >= 0 && pp_label(s, k_tgid, 0, row->tgid))
			goto out;
		if (row->tid >= 0 && pp_label(s, k_tid, 0, row->tid))
			goto out;
		if (row->cpu >= 0 && pp_label(s, k_cpu, 0, row->cpu))
			goto out;
		for (size_t j = 0; j < s->n_label; j++)
			if (s->label[j]->str < 0)
				goto out;
	}
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

/* Sorted by stack, one line per stack: tools that draw lines in file
 * order (speedscope's "left heavy" aside) then keep a stack in one block,
 * and rows that differ only in what folded does not show (thread, cpu)
 * are merged. */
int report_export_folded(FILE *f, const struct report *r)
{
	struct folded_line *v = calloc(r->nr_rows + 1, sizeof(*v));
	size_t n = 0;
	int ret = -ENOMEM;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < r->nr_rows; i++) {
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

/* Adds r's rows to the tree under root, counts in key ("v": the profile
 * drawn, "b": the baseline of a differential graph). */
static int tree_add(json_t *root, const struct report *r, const char *key)
{
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

int report_export_html(FILE *f, const struct report *r, const struct report *base,
		       const char *title)
{
	json_t *root = json_pack("{s:s, s:o}", "n", "all", "v", stats_json_count(r->total));
	char *js = NULL, cnt[OPVM_COUNT_BUF];
	size_t shown = 0;
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
		     json_object_set_new(root, "b", stats_json_count(base->total))))
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
	fputs("</div>\n<div id=\"bar\"><input id=\"q\" placeholder=\"search symbols\">"
	      " <button id=\"reset\">reset zoom</button> <span id=\"st\"></span></div>\n"
	      "<div id=\"path\"></div>\n<div id=\"fg\"></div>\n"
	      "<p>Levels: guest, process, image, symbol.  Click a frame to zoom in, "
	      "click the top frame to zoom out.</p>\n"
	      "<h2>Top symbols</h2>\n<table id=\"top\"><tr><th>samples</th><th>%</th>"
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
