/* SPDX-License-Identifier: MIT */
/*
 * Private to host/collect/attribution*.c: the attribution state and what
 * its call-chain half (attribution-stacks.c) shares with the sample-file
 * half (attribution.c).
 */
#ifndef OPVM_ATTRIBUTION_PRIV_H
#define OPVM_ATTRIBUTION_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/sample.h"
#include "host/collect/execmap.h"
#include "host/collect/gstate.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"

/* The lower half of x86-64 addresses: a CPL-0 sample there ran before the
 * kernel's own mapping (firmware, boot loader, decompressor). */

/* Names that do not come from the guest.  Their addresses are the cache
 * identities of the images/apps they name (defined in attribution.c). */
extern const char NAME_VMLINUX[];
extern const char NAME_ANON[];
extern const char NAME_KTHREAD[];
extern const char NAME_IDLE[];
extern const char NAME_BOOT[];
extern const char NAME_UNKNOWN[];

/* A stack waiting for a binary (attribution.h, first-session stacks): the sample
 * with its own copies of the chain and the stack window after it. */
struct deferred {
	struct opvm_sample x;	/* x.chain, x.stack point into data[] */
	uint64_t t;		/* ms, when it first waited */
	uint64_t cr3n;		/* its process's address space then */
	uint32_t tgid;		/* ... and the process */
	size_t bytes;		/* of the whole allocation */
	uint64_t data[];
};

struct attribution {
	struct store *st;
	struct gstate *gs;
	struct ring **rings;
	unsigned nr_rings;
	unsigned sep;
	unsigned hold_ms;
	bool u_slot;			/* user cache entries depend on the slot */
	bool k_slot;			/* kernel ones do */
	bool k_cr3;			/* kernel ones depend on CR3 without a slot */

	uint64_t gen;			/* generation the caches belong to */
	uint32_t epoch;			/* cache entries of another epoch are
					 * stale: dropping them all is O(1) */
	struct vcache *vc;
	struct vproc *vp;		/* per vCPU: its last address space's
					 * process */
	unsigned vc_mask;
	struct cent *uc;		/* user mappings, 1 << UBITS */
	void *vc_mem, *uc_mem;		/* vc and uc as allocated (they are
					 * aligned on cache lines in them) */
	bool u_cpu;			/* user entries depend on the vCPU */
	struct sc_ent *sc;

	struct held *held;		/* ring buffer, oldest first */
	size_t hold_cap, hold_head, hold_nr;
	uint64_t held_gen;		/* generation of the last full retry */
	uint32_t force_tgid;		/* nonzero: file this process's samples
					 * whatever is missing (it is going) */
	bool chains;			/* -g: file chains (attribution_config) */
	int (*task_by_sp)(void *arg, uint64_t sp, uint32_t *tgid, bool *kthread);
	void *task_arg;
	void (*on_hold)(void *arg);	/* attribution_config.on_hold */
	struct stacktab *stk;		/* the stack table, opened on first use */
	bool stk_failed;
	/* -g dwarf: user stacks unwound here (attribution_config's host_file) */
	struct unwind_dwarf *dw;
	int (*host_file)(void *arg, const char *path, const uint8_t *bid, size_t bid_len,
			 char *out, size_t outlen);
	void *host_file_arg;
	uint8_t stack[OPVM_MAX_STACK];	/* the sample being taken's */
	struct attribution_dwarf_stats dws;
	int (*image_wait)(const struct gstate_cookie *c, void *arg);
	struct deferred **dq;		/* SYNC_DEFER_MAX, oldest first */
	size_t dq_head, dq_nr, dq_bytes;
	bool dq_kick;			/* a binary came: redo them all */
	char start_exec[64];		/* --from-exec name, "" once started */
	void (*image_used)(const struct gstate_cookie *c, void *arg);
	void *image_arg;
	void (*anon_used)(int64_t tgid, void *arg);
	uint64_t start_gen;		/* model generation last looked at */
	uint64_t started_ms;

	/*
	 * Sample files get dense ids (fid, from 1) so that samples can be
	 * queued per file, FBUF offsets a file, and added a run at a time:
	 * the file's table is then hot in the cache and TLB while its run
	 * goes in, instead of every sample touching a random page of a
	 * random file, and a run costs one call.
	 */
	struct sfile **fsf;		/* fid -> file */
#define FBUF	32
	uint64_t *fbuf;			/* fid -> FBUF queued offsets, each
					 * run aligned on its size */
	uint64_t **fpos;		/* fid -> where its next offset goes in
					 * its run, NULL: not in touched */
	uint32_t *touched;		/* fids queued since the last flush */
	uint32_t ntouched;
	uint32_t nr_f, cap_f;		/* fids used (incl. 0), allocated */
	struct fmap_ent {
		struct sfile *sf;
		uint32_t fid;
	} *fmap;			/* file -> fid, open addressing */
	unsigned fmap_bits;

	uint64_t chain[OPVM_MAX_CALLCHAIN];	/* the sample being taken's */
	/* drain()'s cursors, one per ring: a sample with a chain or a stack
	 * comes in rd[r].one, its chain in chain and its stack in stack
	 * (shared: one sample is taken at a time); rd[r].lost is ring r's
	 * lost_overflow */
	struct ring_reader *rd;

	/* user samples without a CR3: the interval index of the model's
	 * mappings, built on first use and again when the model changed */
	struct execmap *xm;
	uint64_t xm_gen;
	bool xm_built;
	bool no_cr3;			/* attribution_config's */
	struct attribution_bymap_stats bm;

	/* Python frames: the sampler's table, its indices' ids in the
	 * store's table (index -> id + 1, 0: none yet), that table */
	struct pynames *py;
	uint32_t *py_map;
	struct store_pytab *pyt;
	bool pyt_failed;

	struct opvm_stats stats;
	uint64_t boot_taken;		/* of stats.received: ring 0 below the
					 * kernel half (firmware, boot loader) */
	uint64_t store_errors;
	int first_err;
};

/* Shared by both halves; inline so that the stacks half calls only the
 * gstate model, not back into attribution.c. */

static inline const char *attribution_proc_app(const struct gstate_process *p)
{
	return p->exe ? p->exe->path : p->comm;
}

/* The process a user sample's slot names when CR3 names none: only one
 * whose address space the model does not know (one with another CR3 may
 * just have exec'd, and its old mappings would name the new image's
 * addresses).  NULL otherwise. */
static inline const struct gstate_process *attribution_slot_proc(struct attribution *s,
								 const struct opvm_sample *x)
{
	const struct gstate_process *q;

	if (!(x->flags & OPVM_SAMPLE_SLOT) || (x->flags & OPVM_SAMPLE_KTHREAD) || !x->slot_tgid)
		return NULL;
	q = gstate_proc_by_tgid(s->gs, x->slot_tgid);
	return q && !q->cr3 ? q : NULL;
}

/* p's mapping holding pc.  A forked child whose address space was never
 * described (the module skips a child that exec'd or exited before it got
 * to it) is still a copy of its parent's. */
static inline const struct gstate_mapping *attribution_map_of(struct attribution *s,
							      const struct gstate_process *p,
							      uint64_t pc)
{
	const struct gstate_mapping *m = p ? gstate_map_find(p, pc) : NULL;

	if (!m && p && !p->nr_maps && p->ppid && p->ppid != p->tgid) {
		const struct gstate_process *pp = gstate_proc_by_tgid(s->gs, p->ppid);

		m = pp ? gstate_map_find(pp, pc) : NULL;
	}
	return m;
}

/* attribution-python.c: x's Python frames (its chain's last nr_py), as
 * store ids, innermost first, into ids[0..max): how many (up to the first
 * that got none, counted in python_unnamed). */
unsigned attribution_py_ids(struct attribution *s, const struct opvm_sample *x, uint32_t *ids,
			    unsigned max);
/* A new store (a window's rotation): its frame table starts empty, and
 * every frame is defined there again when next met. */
void attribution_py_reset(struct attribution *s);
/* The interpreter image Python frames of p are filed under. */
const char *attribution_py_image(const struct gstate_process *p);

/* attribution-stacks.c */
void attribution_file_chain(struct attribution *s, const struct opvm_sample *x, uint64_t now);
void attribution_defer_retry(struct attribution *s, uint64_t now, bool all, uint32_t tgid);

#endif /* OPVM_ATTRIBUTION_PRIV_H */
