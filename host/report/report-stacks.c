// SPDX-License-Identifier: MIT
/*
 * Call chains into the report model (host/report/report.h): every guest's
 * stack table (host/collect/store.h) read, filtered like the rows and
 * resolved to symbols, for report --callgraph and the exports.
 */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "host/report/report.h"
#include "lib/arith.h"

struct load_ctx {
	struct report *r;
	const struct report_opts *o;
	struct report_guest *g;
	size_t win;			/* g->wins[win]: the table read */
	int err;
};

static int match(const char *const *pats, size_t n, const char *s)
{
	if (!n)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (!fnmatch(pats[i], s, 0) || !fnmatch(pats[i], report_basename(s), 0))
			return 1;
	return 0;
}

/* The symbol of one frame (a caller's at its return address - 1): 0 or
 * -ENOMEM. */
static int resolve(struct load_ctx *c, struct report_frame *f, const struct store_frame *sf,
		    int caller)
{
	long i;

	if (!c->o->symbols || !c->o->res)
		return 0;
	/* as the sample files' (report_image()): a JIT frame, leaf or
	 * caller, by its process's perf map and jitdump */
	f->img = report_image(c->o->res, c->g, sf->image, sf->kernel, sf->tgid, sf->build_id,
			      sf->build_id_len);
	if (!f->img || !simage_nr_syms(f->img))
		return 0;
	i = simage_lookup(f->img, sf->offset - (caller && sf->offset ? 1 : 0), &f->sym_addr);
	if (i < 0)
		return 0;
	f->symbol = simage_sym(f->img, (size_t)i)->name;
	f->frame = simage_sym_frame(f->img, simage_sym(f->img, (size_t)i));
	if (simage_is_jit(f->img))	/* the image rows name it by */
		f->image = report_intern(c->r, REPORT_IMAGE_JIT);
	return f->image ? 0 : -ENOMEM;
}

/* A Python frame (store.h, "Python frames"): named from the guest's
 * table; 0 or -ENOMEM. */
static int resolve_python(struct load_ctx *c, struct report_frame *f)
{
	const struct store_pyframe *pf = store_python_get(report_guest_python(c->g, c->win),
							  f->offset);
	char buf[STORE_PY_NAME_MAX * 4 + STORE_PY_FILE_MAX * 4 + 32];

	f->python = 1;
	if (!pf)
		return 0;
	f->symbol = report_intern(c->r, report_python_label(buf, sizeof(buf), pf));
	f->file = report_intern(c->r, pf->file);
	f->line = pf->line;
	f->first_line = pf->first_line;
	return f->symbol && f->file ? 0 : -ENOMEM;
}

/* The interpreter's eval loop: the frames the Python ones stand for. */
static int eval_frame(const struct report_frame *f)
{
	return !f->python && f->symbol && !strncmp(f->symbol, "_PyEval_EvalFrame", 17);
}

unsigned report_python_merge(struct report_frame *f, unsigned n)
{
	struct report_frame tmp[STORE_STACKS_MAX_FRAMES];
	unsigned nat = 0, in = UINT_MAX, out = 0, k = 0;

	while (nat < n && !f[nat].python)
		nat++;
	if (nat == n || n > STORE_STACKS_MAX_FRAMES)
		return n;
	for (unsigned i = 0; i < nat; i++) {
		if (eval_frame(&f[i])) {
			if (in == UINT_MAX)
				in = i;
			out = i;
		}
	}
	if (in == UINT_MAX)	/* the unwind stopped short of the eval loop:
				 * the Python frames call what it found */
		return n;
	/* native leaf part, the Python frames, what called the eval loop */
	memcpy(tmp, f, in * sizeof(*f));
	k = in;
	memcpy(tmp + k, f + nat, (n - nat) * sizeof(*f));
	k += n - nat;
	memcpy(tmp + k, f + out + 1, (nat - out - 1) * sizeof(*f));
	k += nat - out - 1;
	memcpy(f, tmp, k * sizeof(*f));
	return k;
}

/* Appends one stack of the table, if the report wants it. */
static int add_stack(const struct store_stack *s, void *arg)
{
	struct load_ctx *c = arg;
	struct report *r = c->r;
	const char *app = store_app_label(s->app);
	struct report_stack *st;
	unsigned ev;
	uint64_t n;

	for (ev = 0; ev < s->nr_events && strcmp(s->events[ev], r->event); ev++)
		;
	if (ev == s->nr_events || !(n = s->counts[ev]) || !s->nr ||
	    !match(c->o->filter.image, c->o->filter.nr_image, s->frames[0].image) ||
	    ((c->o->exclude & REPORT_EXCLUDE_IDLE) && !strcmp(app, REPORT_APP_IDLE)) ||
	    ((c->o->exclude & REPORT_EXCLUDE_BOOT) && !strcmp(app, REPORT_APP_BOOT)))
		return 0;
	st = realloc(r->stacks, (r->nr_stacks + 1) * sizeof(*st));
	if (!st)
		return -ENOMEM;
	r->stacks = st;
	st = &st[r->nr_stacks];
	*st = (struct report_stack){ .guest = report_intern(r, c->g->name),
				     .app = report_intern(r, app), .samples = n, .nr = s->nr };
	st->frames = calloc(s->nr, sizeof(*st->frames));
	if (!st->guest || !st->app || !st->frames) {
		free(st->frames);
		return -ENOMEM;
	}
	r->nr_stacks++;
	r->stacks_total = arith_sat_add(r->stacks_total, n);
	for (unsigned i = 0; i < s->nr; i++) {
		struct report_frame *f = &st->frames[i];

		f->image = report_intern(r, s->frames[i].image);
		if (!f->image)
			return -ENOMEM;
		f->kernel = s->frames[i].kernel;
		f->offset = s->frames[i].offset;
		if (!s->frames[i].python) {
			if (resolve(c, f, &s->frames[i], i > 0))
				return -ENOMEM;
		} else if (c->o->symbols && resolve_python(c, f))
			return -ENOMEM;
		else
			f->python = 1;
	}
	if (c->o->symbols)
		st->nr = report_python_merge(st->frames, st->nr);
	return 0;
}

/* The stack table of c's guest's window c->win: 1 (read, or read in
 * part: the error counted), 0 (none: no -g) or -ENOMEM. */
static int load_window(struct load_ctx *c)
{
	struct report *r = c->r;
	char err[128] = "", dir[PATH_MAX];
	int ret;

	if (!report_guest_window_dir(c->g, c->win, dir, sizeof(dir)))
		return 0;
	ret = store_stacks_read(dir, add_stack, c, err, sizeof(err));
	if (ret == -ENOMEM || ret == -ENOENT)
		return ret == -ENOMEM ? ret : 0;
	if (ret && !r->stack_errors++)
		snprintf(r->stack_err, sizeof(r->stack_err), "%s: %s", c->g->name,
			 err[0] ? err : strerror(-ret));
	return 1;
}

/* Every window's table, each frame of a Python kind named from its own
 * window's Python table. */
int report_stacks_load(struct report *r, const struct report_opts *o)
{
	for (size_t i = 0; i < r->nr_guests; i++) {
		struct load_ctx c = { r, o, &r->guests[i], 0, 0 };
		int read = 0, ret;

		if (!match(o->filter.guest, o->filter.nr_guest, c.g->name))
			continue;
		for (size_t k = 0; k < c.g->nr_wins; k++) {
			c.win = k;
			ret = load_window(&c);
			if (ret < 0)
				return ret;
			read |= ret;
		}
		r->stack_guests += read;
	}
	report_note_symres(r, o);
	return 0;
}
