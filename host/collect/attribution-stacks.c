// SPDX-License-Identifier: MIT
/*
 * Attribution's call chains (-g): each sample's chain, with a user stack
 * unwound here under -g dwarf, filed in the session's stack table; and the
 * stacks that wait for a binary the guest is still sending (attribution.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/attribution-priv.h"
#include "lib/clock.h"
#include "unwind/dwarf-cfi.h"

/* ---- call chains ---------------------------------------------------------- */

/* The process a chain belongs to: as file_user() and file_kernel() name
 * it (the slot's task in the kernel, the address space in user mode). */
static const struct gstate_process *chain_proc(struct attribution *s, const struct opvm_sample *x)
{
	const struct gstate_process *p;

	if (x->cpl != 3 && (x->flags & OPVM_SAMPLE_SLOT))
		return (x->flags & OPVM_SAMPLE_KTHREAD) ? NULL :
		       gstate_proc_by_tgid(s->gs, x->slot_tgid);
	p = gstate_proc_by_cr3(s->gs, x->cr3);
	return p ? p : attribution_slot_proc(s, x);
}

/* One frame at pc, named as a sample file would name it. */
static void chain_frame(struct attribution *s, const struct gstate_process *p, uint64_t pc,
			struct store_frame *f)
{
	const struct gstate_mapping *m;
	const struct gstate_module *mod;
	uint64_t lo, hi;

	*f = (struct store_frame){ .image = NAME_ANON, .offset = pc };
	if (pc >= OPVM_KERNEL_HALF) {
		mod = gstate_module_range(s->gs, pc, &lo, &hi);
		f->kernel = 1;
		f->image = mod ? mod->name : NAME_VMLINUX;
		f->offset = mod ? pc - mod->base : pc;
		return;
	}
	m = attribution_map_of(s, p, pc);
	if (m && m->cookie) {
		f->image = m->cookie->path;
		f->offset = pc - m->start + m->pgoff;
		f->build_id = m->cookie->build_id;
		f->build_id_len = m->cookie->build_id_len;
	} else if (p) {		/* anonymous: its process's, as the sample
				 * files keep it (store_key.own_tgid) */
		f->tgid = p->tgid;
	}
}

/* unwind_dwarf()'s find_image: the mapping of the chain's process that
 * holds pc, and the host copy of its file.  missing: the first image with
 * a build-id the host had no file for. */
struct dwarf_ctx {
	struct attribution *s;
	const struct gstate_process *p;
	const struct gstate_cookie *missing;
	char path[4096];
};

static int dwarf_image(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	struct dwarf_ctx *d = arg;
	const struct gstate_mapping *m = attribution_map_of(d->s, d->p, pc);

	if (!m || !m->cookie)
		return -ENOENT;
	if (d->s->host_file(d->s->host_file_arg, m->cookie->path, m->cookie->build_id,
			    m->cookie->build_id_len, d->path, sizeof(d->path))) {
		if (!d->missing && m->cookie->build_id_len)
			d->missing = m->cookie;
		return -ENOENT;
	}
	*out = (struct unwind_dwarf_image){ .path = d->path, .start = m->start, .end = m->end,
					    .pgoff = m->pgoff };
	return 0;
}

/* The whole chain of x, leaf first, into pcs: its own, and with a user
 * stack (-g dwarf, unless !unwind) the user part unwound from it.  Returns
 * how many; *missing: a binary the unwind needed and had no file for. */
static unsigned chain_pcs(struct attribution *s, const struct opvm_sample *x,
			  const struct gstate_process *p, uint64_t *pcs, bool unwind,
			  const struct gstate_cookie **missing)
{
	struct unwind_regs r = { .ip = x->user_ip, .sp = x->user_sp, .bp = x->user_bp, .cpl = 3 };
	struct dwarf_ctx d = { s, p, NULL, "" };
	unsigned n = 0, k;
	int64_t t0;

	*missing = NULL;
	pcs[n++] = x->rip;
	for (unsigned i = 0, nat = (unsigned)(x->nr_chain - x->nr_py);
	     i < nat && n < STORE_STACKS_MAX_FRAMES; i++)
		pcs[n++] = x->chain[i];		/* the Python frames are chain_python()'s */
	if (!(x->flags & OPVM_SAMPLE_STACK) || n >= STORE_STACKS_MAX_FRAMES)
		return n;
	if (!s->dw || !p || !unwind) {
		if (x->cpl != 3)	/* at least where the task was */
			pcs[n++] = x->user_ip;
		return n;
	}
	/* a user sample's own ip is the unwind's first pc */
	if (x->cpl == 3)
		n--;
	t0 = clk_now_ns();
	k = unwind_dwarf(s->dw, &r, x->stack, x->stack_len, dwarf_image, &d, pcs + n,
			 STORE_STACKS_MAX_FRAMES - n, NULL);
	s->dws.ns += (uint64_t)(clk_now_ns() - t0);
	s->dws.unwinds++;
	s->dws.frames += k;
	*missing = d.missing;
	return k ? n + k : n + (x->cpl == 3);
}

/*
 * x's Python frames (innermost first) after its nr native ones in f, the
 * native ones cut from the outside to leave them room: the new count.
 * The report puts them in place of the eval loop's frames (docs/runtimes.md).
 */
static unsigned chain_python(struct attribution *s, const struct opvm_sample *x,
			     const struct gstate_process *p, struct store_frame *f, unsigned nr)
{
	uint32_t ids[OPVM_MAX_CALLCHAIN];
	unsigned k;

	if (!p || !x->nr_chain || !s->py || x->cpl != 3)
		return nr;
	k = attribution_py_ids(s, x, ids, OPVM_MAX_CALLCHAIN);
	if (k > STORE_STACKS_MAX_FRAMES - 1)
		k = STORE_STACKS_MAX_FRAMES - 1;
	if (nr + k > STORE_STACKS_MAX_FRAMES)
		nr = STORE_STACKS_MAX_FRAMES - k;
	for (unsigned i = 0; i < k; i++)
		f[nr + i] = (struct store_frame){ .image = attribution_py_image(p), .python = 1,
						  .offset = ids[i] };
	return nr + k;
}

/* Files the chain pcs[0..nr) of x (leaf first) in the stack table, under
 * its process p, with its Python frames. */
static void chain_store(struct attribution *s, const struct opvm_sample *x,
			const struct gstate_process *p, const uint64_t *pcs, unsigned nr)
{
	struct store_frame f[STORE_STACKS_MAX_FRAMES];
	const char *app = p ? attribution_proc_app(p) : NAME_UNKNOWN;
	unsigned n = 0;

	if (x->rip < OPVM_KERNEL_HALF && x->cpl != 3)
		app = NAME_BOOT;
	else if (x->cpl != 3 && (x->flags & OPVM_SAMPLE_SLOT) && !x->slot_tgid)
		app = NAME_IDLE;
	else if (x->cpl != 3 && (x->flags & OPVM_SAMPLE_KTHREAD))
		app = NAME_KTHREAD;
	for (unsigned i = 0; i < nr; i++)
		chain_frame(s, p, pcs[i], &f[n++]);
	if (app == NAME_BOOT)	/* as file_kernel_own() files it */
		f[0] = (struct store_frame){ .image = NAME_VMLINUX, .kernel = 1, .offset = x->rip };
	n = chain_python(s, x, p, f, n);
	if (!s->stk && !s->stk_failed && !(s->stk = store_stacks_open(s->st)))
		s->stk_failed = true;
	if (s->stk)
		store_stack_add(s->stk, x->event, app, f, n);
	else
		store_stack_lost(s->st);
}

enum { CHAIN_WHOLE = 0, CHAIN_CUT = 1, CHAIN_WAIT = 2 };

/* Unwinds x's chain and files it, unless it met a binary the guest is
 * still sending and may_wait: CHAIN_WAIT, nothing filed.  A deferred x
 * (d) is unwound only in the process it was taken in. */
static int chain_try(struct attribution *s, const struct opvm_sample *x, const struct deferred *d,
		     bool may_wait)
{
	uint64_t pcs[STORE_STACKS_MAX_FRAMES];
	const struct gstate_process *p = chain_proc(s, x);
	const struct gstate_cookie *missing;
	bool same = !d || (p && p->tgid == d->tgid && p->cr3 == d->cr3n);
	unsigned nr = chain_pcs(s, x, same ? p : NULL, pcs, same, &missing);

	if (!same && p)		/* exec'd or gone: its frames cannot be named */
		p = NULL;
	if (missing && may_wait && s->image_wait && s->image_wait(missing, s->image_arg))
		return CHAIN_WAIT;
	if (missing || !same)
		s->dws.cut_missing++;
	chain_store(s, x, p, pcs, nr);
	return missing || !same ? CHAIN_CUT : CHAIN_WHOLE;
}

/* ---- stacks waiting for a binary (attribution.h) ------------------------------------ */

static void defer_free(struct attribution *s, struct deferred *d)
{
	s->dq_bytes -= d->bytes;
	free(d);
}

/* Files the oldest waiting stack with what there is. */
static void defer_evict_one(struct attribution *s)
{
	struct deferred *d = s->dq[s->dq_head];

	chain_try(s, &d->x, d, false);
	defer_free(s, d);
	s->dq_head = (s->dq_head + 1) % SYNC_DEFER_MAX;
	s->dq_nr--;
}

/* Queues x to be unwound again later; 0, or -ENOMEM (then x is filed). */
static int defer(struct attribution *s, const struct opvm_sample *x, uint64_t now)
{
	const struct gstate_process *p = chain_proc(s, x);
	size_t chain = (size_t)x->nr_chain * sizeof(uint64_t), bytes;
	struct deferred *d;

	bytes = sizeof(*d) + chain + x->stack_len;
	while (s->dq_nr && (s->dq_nr == SYNC_DEFER_MAX ||
			    s->dq_bytes + bytes > SYNC_DEFER_MAX_BYTES))
		defer_evict_one(s);
	d = p ? malloc(bytes) : NULL;
	if (!d)
		return -ENOMEM;
	d->x = *x;
	d->t = now;
	d->tgid = p->tgid;
	d->cr3n = p->cr3;
	d->bytes = bytes;
	d->x.chain = x->nr_chain ? memcpy(d->data, x->chain, chain) : NULL;
	d->x.stack = memcpy((uint8_t *)d->data + chain, x->stack, x->stack_len);
	s->dq[(s->dq_head + s->dq_nr) % SYNC_DEFER_MAX] = d;
	s->dq_nr++;
	s->dq_bytes += bytes;
	s->dws.waited++;
	if (s->dq_nr > s->dws.waiting_peak)
		s->dws.waiting_peak = s->dq_nr;
	return 0;
}

/*
 * The waiting stacks.  After a binary came (dq_kick), each is unwound
 * again and filed if whole (or too old), else kept in order; with all
 * (the end), each is filed with what there is; with tgid (the process is
 * about to be forgotten), its own are, the others wait on unless too old.
 * Otherwise only the expired ones at the head go.
 */
void attribution_defer_retry(struct attribution *s, uint64_t now, bool all, uint32_t tgid)
{
	size_t n = s->dq_nr, kept = 0;
	bool kick;

	if (!n)
		return;
	if (!all && !tgid && !s->dq_kick) {
		while (s->dq_nr && now - s->dq[s->dq_head]->t >= SYNC_DEFER_MS)
			defer_evict_one(s);
		return;
	}
	kick = s->dq_kick;
	if (!tgid)
		s->dq_kick = false;
	for (size_t i = 0; i < n; i++) {
		struct deferred *d = s->dq[(s->dq_head + i) % SYNC_DEFER_MAX];
		bool wait = !all && d->tgid != tgid && now - d->t < SYNC_DEFER_MS;
		int r = wait && !(kick && !tgid) ? CHAIN_WAIT : chain_try(s, &d->x, d, wait);

		if (r == CHAIN_WAIT) {
			s->dq[(s->dq_head + kept++) % SYNC_DEFER_MAX] = d;
			continue;
		}
		if (r == CHAIN_WHOLE)
			s->dws.redone++;
		defer_free(s, d);
	}
	s->dq_nr = kept;
	if (!kept)
		s->dq_head = 0;
}

void attribution_images_changed(struct attribution *s)
{
	s->dq_kick = s->dq_nr > 0;
}

size_t attribution_nr_deferred(const struct attribution *s)
{
	return s->dq_nr;
}

/* Files x's chain, or queues it to wait for a binary (attribution.h). */
void attribution_file_chain(struct attribution *s, const struct opvm_sample *x, uint64_t now)
{
	if (chain_try(s, x, NULL, s->dq != NULL) == CHAIN_WAIT && defer(s, x, now))
		chain_try(s, x, NULL, false);
}
