// SPDX-License-Identifier: MIT
/*
 * Call chains of stopped vCPUs (vmm/guest/callgraph.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/channel.h"
#include "lib/clock.h"
#include "lib/x86.h"
#include "unwind/orc.h"
#include "vmm/guest/callgraph.h"
#include "vmm/guest/guestmem.h"

/* Pages one sample's walk may read: a 16 KiB kernel stack and a user
 * stack's deepest 8 frames rarely span more than 6. */
#define WALK_PAGES	16

struct callgraph {
	struct sampler_callgraph_cfg cfg;
	struct guestmem *mem;
	struct guestmem_view *view;

	/* The kernel's ORC tables as the collector's thread last published
	 * them (callgraph_hello(), callgraph_orc()): run-time addresses, 0
	 * while unknown, and the entry format. */
	atomic_uint hello_gen;		/* odd while being written */
	_Atomic uint64_t ip_start, ip_stop, orc_start;
	atomic_uint version;		/* ORC format; 0: release unknown */
	atomic_uint from_kallsyms;	/* the addresses came from the guest */
	unsigned loaded_gen;		/* the publication the table is from */
	uint64_t loaded_ip_start;	/* where the loaded table is */

	struct unwind_orc *orc;
	struct callgraph_stats st;
};

struct callgraph *callgraph_new(const struct sampler_callgraph_cfg *cfg, struct guestmem *mem)
{
	struct callgraph *cg = calloc(1, sizeof(*cg));

	if (!cg)
		return NULL;
	cg->view = malloc(sizeof(*cg->view));
	if (!cg->view) {
		free(cg);
		errno = ENOMEM;
		return NULL;
	}
	cg->cfg = *cfg;
	if (!cg->cfg.max_depth || cg->cfg.max_depth > UNWIND_MAX_DEPTH)
		cg->cfg.max_depth = UNWIND_MAX_DEPTH;
	cg->mem = mem;
	guestmem_view_init(cg->view, mem);
	return cg;
}

void callgraph_free(struct callgraph *cg)
{
	if (!cg)
		return;
	unwind_orc_free(cg->orc);
	free(cg->view);
	free(cg);
}

/* The slide HELLO's anchor gives against System.map's, or -ENOENT. */
static int hello_slide(const struct sampler_callgraph_cfg *cfg, const struct chan_hello *h,
		       uint64_t *slide)
{
	for (unsigned i = 0; i < SAMPLER_CG_ANCHORS; i++) {
		if (!cfg->anchors[i].addr || !h->anchor_addr ||
		    strcmp(cfg->anchors[i].name, h->anchor_name))
			continue;
		*slide = h->anchor_addr - cfg->anchors[i].addr;
		return 0;
	}
	return -ENOENT;
}

/* Publishes the tables' run-time addresses to the sampling thread, which
 * loads them in callgraph_idle(); version < 0 keeps the current one. */
static void orc_publish(struct callgraph *cg, uint64_t ip_start, uint64_t ip_stop,
			uint64_t orc_start, int version, unsigned from_kallsyms)
{
	unsigned gen = atomic_load_explicit(&cg->hello_gen, memory_order_relaxed);

	atomic_store_explicit(&cg->hello_gen, gen + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&cg->ip_start, ip_start, memory_order_relaxed);
	atomic_store_explicit(&cg->ip_stop, ip_stop, memory_order_relaxed);
	atomic_store_explicit(&cg->orc_start, orc_start, memory_order_relaxed);
	atomic_store_explicit(&cg->from_kallsyms, from_kallsyms, memory_order_relaxed);
	if (version >= 0)
		atomic_store_explicit(&cg->version, (unsigned)version, memory_order_relaxed);
	atomic_store_explicit(&cg->hello_gen, gen + 2, memory_order_release);
}

void callgraph_hello(struct callgraph *cg, const struct chan_hello *h)
{
	uint64_t slide = 0;
	int version = (int)unwind_orc_version(h->release);

	/* a new boot: System.map's tables moved by its slide, else none
	 * until its kallsyms locate them (callgraph_orc()) */
	if (cg->cfg.orc_ip_start && !hello_slide(&cg->cfg, h, &slide))
		orc_publish(cg, cg->cfg.orc_ip_start + slide, cg->cfg.orc_ip_stop + slide,
			    cg->cfg.orc_start + slide, version, 0);
	else
		orc_publish(cg, 0, 0, 0, version, 0);
}

void callgraph_orc(struct callgraph *cg, const struct sampler_orc *o)
{
	int version = o->release[0] ? (int)unwind_orc_version(o->release) : -1;

	orc_publish(cg, o->ip_start, o->ip_stop, o->orc_start, version, 1);
}

/* Reads for the table load: big, once, with the guest running. */
struct plain_read {
	struct guestmem *m;
	uint64_t cr3;
};

static int plain_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct plain_read *p = arg;

	return guestmem_read_virt(p->m, p->cr3, gva, buf, len) ? -EFAULT : 0;
}

void callgraph_idle(struct callgraph *cg, uint64_t kernel_cr3)
{
	unsigned g1 = atomic_load_explicit(&cg->hello_gen, memory_order_acquire), g2, version;
	struct plain_read pr = { cg->mem, kernel_cr3 & ~0x1fffull };
	struct unwind_mem um = { plain_read, &pr };
	uint64_t ip_start, ip_stop, orc_start;
	unsigned kallsyms;

	if (g1 == cg->loaded_gen || (g1 & 1) || !cg->mem || !kernel_cr3)
		return;
	ip_start = atomic_load_explicit(&cg->ip_start, memory_order_relaxed);
	ip_stop = atomic_load_explicit(&cg->ip_stop, memory_order_relaxed);
	orc_start = atomic_load_explicit(&cg->orc_start, memory_order_relaxed);
	kallsyms = atomic_load_explicit(&cg->from_kallsyms, memory_order_relaxed);
	version = atomic_load_explicit(&cg->version, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	g2 = atomic_load_explicit(&cg->hello_gen, memory_order_relaxed);
	if (g1 != g2)
		return;		/* rewritten meanwhile: next time */
	cg->loaded_gen = g1;
	if (cg->orc && ip_start == cg->loaded_ip_start)
		return;		/* the guest's kallsyms agree with System.map */
	if (!version || !ip_start) {
		if (cg->orc)	/* a new boot's tables are not known yet */
			unwind_orc_free(cg->orc);
		cg->orc = NULL;
		cg->st.orc_entries = 0;
		snprintf(cg->st.orc_error, sizeof(cg->st.orc_error), "%s",
			 !version ? "the guest kernel's release has no known ORC format" :
			 cg->cfg.orc_ip_start ? "the kernel's KASLR slide is not known "
			 "(HELLO's anchor is not in System.map)" :
			 "no System.map, and the guest's kallsyms did not locate the ORC "
			 "tables (is opvm-relay running, and as new as opvm?)");
		return;
	}
	unwind_orc_free(cg->orc);
	cg->orc = unwind_orc_load(&um, ip_start, ip_stop, orc_start, version, cg->st.orc_error,
				  sizeof(cg->st.orc_error));
	cg->st.orc_entries = cg->orc ? unwind_orc_nr(cg->orc) : 0;
	cg->loaded_ip_start = cg->orc ? ip_start : 0;
	if (cg->orc) {
		cg->st.orc_error[0] = '\0';
		cg->st.orc_from_kallsyms = kallsyms;
	}
}

/* The kernel part of a walk; *user gets the task's registers if it
 * reaches them.  Returns the callers added. */
static unsigned walk_kernel(struct callgraph *cg, const struct unwind_mem *um,
			    const struct unwind_regs *r, uint64_t *chain, unsigned max,
			    struct unwind_regs *user)
{
	uint64_t pcs[UNWIND_MAX_DEPTH];
	unsigned n;

	cg->st.kernel_walks++;
	if (!cg->orc) {
		cg->st.no_orc++;
		return 0;
	}
	n = unwind_orc(cg->orc, um, r, pcs, max + 1, user, NULL);
	if (n <= 1)
		return 0;
	memcpy(chain, pcs + 1, (n - 1) * sizeof(*pcs));
	return n - 1;
}

/* Copies the user stack from r->sp up, as far as it reads (a stack near
 * the top of its mapping ends early). */
static void copy_user(const struct unwind_mem *um, const struct unwind_regs *r,
		      struct callgraph_user *u)
{
	uint64_t at = r->sp;

	u->valid = 1;
	u->ip = r->ip;
	u->sp = r->sp;
	u->bp = r->bp;
	u->len = 0;
	while (u->len < sizeof(u->stack)) {
		size_t chunk = opvm_page_rest(at);

		if (chunk > sizeof(u->stack) - u->len)
			chunk = sizeof(u->stack) - u->len;
		if (um->read(um->arg, at, u->stack + u->len, chunk))
			break;
		u->len = (uint16_t)(u->len + chunk);
		at += chunk;
	}
}

unsigned callgraph_walk(struct callgraph *cg, const struct unwind_regs *r, uint64_t cr3,
			uint64_t *chain, unsigned max, struct callgraph_user *u)
{
	struct unwind_mem um = { guestmem_view_read, cg->view };
	struct unwind_regs user = { 0 };
	uint64_t pcs[UNWIND_MAX_DEPTH], t0 = (uint64_t)clk_now_ns(), before = cg->view->fetches;
	unsigned n = 0, k;

	if (u)
		u->valid = 0;
	if (!cg->mem || !max)
		return 0;
	if (max > cg->cfg.max_depth - 1)
		max = cg->cfg.max_depth - 1;
	guestmem_view_reset(cg->view, cr3, WALK_PAGES);
	cg->st.walks++;
	if (r->cpl != 3) {
		n = walk_kernel(cg, &um, r, chain, max, &user);
		if (!user.ip || n >= max)
			goto out;
		cg->st.kernel_to_user++;
		if (cg->cfg.mode == SAMPLER_CG_DWARF && u) {
			copy_user(&um, &user, u);
			goto out;
		}
		/* the task's own frame is a caller too: where it entered */
		chain[n++] = user.ip;
		r = &user;
	} else if (cg->cfg.mode == SAMPLER_CG_DWARF && u) {
		copy_user(&um, r, u);
		goto out;
	}
	k = unwind_fp(&um, r, pcs, max - n + 1, NULL);
	if (k > 1) {
		memcpy(chain + n, pcs + 1, (k - 1) * sizeof(*pcs));
		n += k - 1;
	}
out:
	cg->st.frames += n;
	cg->st.pages += cg->view->fetches - before;
	cg->st.cost_ns += (uint64_t)clk_now_ns() - t0;
	return n;
}

void callgraph_get_stats(const struct callgraph *cg, struct callgraph_stats *out)
{
	*out = cg->st;
}
