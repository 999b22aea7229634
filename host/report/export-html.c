// SPDX-License-Identifier: MIT
/*
 * HTML flame graph export of a report: one self-contained page, also
 * differential (widths from the new profile, red for growth and blue for
 * shrink against a baseline, as in Brendan Gregg's differential flame
 * graphs).  Shared parts: host/report/report-export.c.
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
#include "lib/arith.h"
#include "lib/text.h"

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
		json_object_set_new(node, key, stats_json_count(arith_sat_add(
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

		names[d] = text_escape(esc[d], sizeof(esc[d]), st->guest), d++;
		names[d] = text_escape(esc[d], sizeof(esc[d]), report_basename(st->app)), d++;
		for (unsigned j = st->nr; j-- > 0; d++)
			names[d] = text_escape(esc[d], sizeof(esc[d]),
						    export_frame_name(&st->frames[j], tmp, sizeof(tmp)));
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
		export_process_name(row, proc, sizeof(proc));
		/* JSON keys and strings must be UTF-8: names from guests go
		 * escaped (text_escape()), as in text output */
		text_escape(sym, sizeof(sym), row->symbol ? row->symbol : NO_SYMBOLS);
		text_escape(gname, sizeof(gname), row->guest);
		text_escape(pname, sizeof(pname), proc);
		text_escape(iname, sizeof(iname), report_basename(row->image));
		names[0] = gname;
		names[1] = pname;
		names[2] = iname;
		names[3] = sym;
		for (size_t d = 0; d < 4; d++) {
			node = tree_child(node, names[d]);
			if (!node)
				return -ENOMEM;
			json_object_set_new(node, key, stats_json_count(arith_sat_add(
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
		export_process_name(row, proc, sizeof(proc));
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

static int html_write(FILE *f, const struct export_in *in)
{
	return report_export_html(f, in->r, in->base, in->title);
}

const struct export_ops export_html_ops = {
	.name = "html",
	.ext = ".html",
	.help = "html: self-contained interactive flame graph",
	.flags = EXPORT_DIFF,
	.write = html_write,
};
