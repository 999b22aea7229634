// SPDX-License-Identifier: MIT
/*
 * Attribution: rings -> attribution -> sample files.  The rules are in host/collect/attribution.h;
 * this file is mostly about doing them fast: at a few hundred samples per
 * second per vCPU nothing here matters, but a guest with many vCPUs under a
 * high-rate event, or a collector catching up after a stall, should drain
 * tens of millions of samples per second on one core.  Call chains (-g)
 * are filed by attribution-stacks.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/gstate.h"
#include "lib/ring.h"
#include "lib/x86.h"
#include "host/collect/store.h"
#include "host/collect/attribution.h"
#include "host/collect/attribution-priv.h"
#include "unwind/dwarf-cfi.h"

#define SYNC_HOLD_MS_DEFAULT	2000
#define SYNC_HOLD_MAX_DEFAULT	65536
#define SC_BITS			12	/* sample-file cache: 4096 slots */
#define DRAIN_MAX		(1u << 24)	/* samples per ring per run */
#define READ_BATCH		256	/* flat entries in place, one tail
					 * publication: 12 KiB of ring */

enum { FILED = 0, HOLD = 1 };

/* Names that do not come from the guest (attribution-priv.h). */
const char NAME_VMLINUX[] = "vmlinux";
const char NAME_ANON[] = "{anon}";
const char NAME_KTHREAD[] = "{kthread}";
const char NAME_IDLE[] = "{idle}";
const char NAME_BOOT[] = "{boot}";
const char NAME_UNKNOWN[] = "{unknown}";
static const char NAME_AMBIGUOUS[] = "{ambiguous}";
static const char NAME_UNMAPPED[] = "{unmapped}";
static const char TAG_ANON_CR3[] = "{anon-cr3}";	/* + skey.extra = cr3 */

/*
 * Identity of a sample file within one gstate generation: app and image
 * are pointers to strings that cannot change while the generation stays the
 * same (cookie paths, module names, process comms, the names above).
 */
struct skey {
	const void *app;
	const void *image;
	const char *cgroup;	/* the process's (gstate interns it), or NULL */
	uint64_t extra;
	int64_t tgid, tid, cpu;
	uint32_t event;
	uint32_t kernel;	/* 1, or SKEY_PYTHON: Python frames ({py}) */
	uint32_t own_app;	/* app kept whatever the separation */
};
#define SKEY_PYTHON	2

struct sc_ent {
	struct skey k;
	uint32_t fid;
	uint32_t epoch;		/* valid while == sync.epoch */
};

/*
 * Caches of recently used mappings (user, one for all vCPUs) and kernel
 * ranges (per vCPU: a module's text, or the stretch of vmlinux between
 * modules), indexed by the megabyte of the address (and the address space),
 * each with its sample file and the offset adjustment: a hit files a sample
 * with a few compares and one sfile_add().  An entry also records what else
 * went into choosing its file (event, vCPU, slot contents, address space)
 * and is only used when those match (the vCPU only under OPVM_SEP_CPU for
 * user entries).
 *
 * What must match is decided when an entry is filled, from the separation
 * and from how its process was found: the entry keeps the sample's two
 * words (slot_tid, slot_tgid) and (vcpu, cpl, event, flags, nr_chain), as a
 * flat ring entry holds them, with a mask of what in each must be equal, so
 * that a match is the range, three XORs and no branch on the conditions.
 * The second word's unused bytes (cpl: the caches are per mode already;
 * nr_chain: the pusher's garbage) hold the low 16 bits of the epoch
 * instead, so that a stale entry fails the same compare.  One entry is one
 * cache line.
 */
#define UBITS	14	/* 16384 user entries for all vCPUs, direct-mapped:
			 * a process's mappings stay cached while it runs
			 * elsewhere or waits its turn (4096 missed one
			 * sample in ten with 200 processes of 30 mappings) */
#define KBITS	6	/* 64 kernel entries (per vCPU): vmlinux and a guest's
			 * busy modules (a module is a megabyte of its own) */

struct cent {
	_Alignas(64) uint64_t lo;	/* [lo, lo + len) */
	uint64_t len;
	uint64_t adj;		/* offset = rip + adj */
	uint64_t cr3n;
	uint64_t ids;		/* (slot_tid, slot_tgid) as filled */
	uint64_t rest;		/* (vcpu, cpl, event, flags, nr_chain) as filled,
				 * masked by rmask, epoch bits in cpl, nr_chain */
	uint64_t rmask;		/* what of rest must match */
	uint32_t fid;
	int32_t imask;		/* 0 or -1: ids must match */
};

_Static_assert(sizeof(struct cent) == 64, "a cache entry is a cache line");

/* A power of two in size, so that a vCPU's is a shift away. */
struct vcache {
	struct cent k[1u << KBITS];
};

/* address space -> process */
struct vproc {
	uint64_t cr3n;
	const struct gstate_process *p;
	uint32_t p_epoch;	/* p valid while == sync.epoch */
};

struct held {
	struct opvm_sample s;	/* its stack window dropped */
	uint64_t t;
	uint64_t walks;		/* introspection's walks when it was held */
	bool leaf_only;		/* -g, no chain walked: its leaf is filed */
	uint64_t *chain;	/* s.chain: the frame-pointer chain kept, or NULL */
};


/* calloc() of n elements aligned on a cache line; *mem: what to free().
 * calloc(): pages of a large array that are never used stay unresident. */
static void *calloc_lines(size_t n, size_t size, void **mem)
{
	uintptr_t p;

	*mem = calloc(1, n * size + 63);
	if (!*mem)
		return NULL;
	p = ((uintptr_t)*mem + 63) & ~(uintptr_t)63;
	return (void *)p;
}

struct attribution *attribution_new(struct store *st, struct gstate *gs,
		      struct ring *const *rings, unsigned nr_rings,
		      const struct attribution_config *cfg)
{
	struct attribution *s;
	unsigned nvc = 1;

	if (!st || !gs || (nr_rings && !rings)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->st = st;
	s->gs = gs;
	s->sep = store_separate(st);
	s->u_slot = s->sep & OPVM_SEP_THREAD;
	s->k_slot = s->sep & (OPVM_SEP_THREAD | OPVM_SEP_KERNEL);
	s->k_cr3 = s->sep & OPVM_SEP_KERNEL;
	s->u_cpu = s->sep & OPVM_SEP_CPU;
	s->hold_ms = cfg ? cfg->hold_ms : SYNC_HOLD_MS_DEFAULT;
	if (cfg && cfg->start_exec)
		snprintf(s->start_exec, sizeof(s->start_exec), "%s", cfg->start_exec);
	if (cfg) {
		s->image_used = cfg->image_used;
		s->anon_used = cfg->anon_used;
		s->image_arg = cfg->image_arg;
		s->image_wait = cfg->image_wait;
	}
	s->start_gen = UINT64_MAX;
	s->hold_cap = cfg && cfg->hold_max ? cfg->hold_max : SYNC_HOLD_MAX_DEFAULT;
	s->chains = cfg && cfg->chains;
	s->task_by_sp = cfg ? cfg->task_by_sp : NULL;
	s->task_arg = cfg ? cfg->task_arg : NULL;
	s->on_hold = cfg ? cfg->on_hold : NULL;
	s->no_cr3 = cfg && cfg->no_cr3;
	s->py = cfg ? cfg->py : NULL;
	if (cfg && cfg->host_file) {
		s->host_file = cfg->host_file;
		s->host_file_arg = cfg->host_file_arg;
		s->dw = unwind_dwarf_new();	/* NULL: user stacks stop early */
		if (s->image_wait)
			s->dq = calloc(SYNC_DEFER_MAX, sizeof(*s->dq));
	}
	while (nvc < nr_rings)
		nvc <<= 1;
	s->vc_mask = nvc - 1;
	s->vc = calloc_lines(nvc, sizeof(*s->vc), &s->vc_mem);
	s->vp = calloc(nvc, sizeof(*s->vp));
	s->sc = calloc((size_t)1 << SC_BITS, sizeof(*s->sc));
	s->uc = calloc_lines((size_t)1 << UBITS, sizeof(*s->uc), &s->uc_mem);
	s->held = calloc(s->hold_cap, sizeof(*s->held));
	if (nr_rings) {
		s->rings = calloc(nr_rings, sizeof(*s->rings));
		s->rd = calloc(nr_rings, sizeof(*s->rd));
	}
	s->fmap_bits = 8;
	s->fmap = calloc((size_t)1 << s->fmap_bits, sizeof(*s->fmap));
	s->nr_f = 1;		/* fid 0 means "none" */
	if (!s->vc || !s->vp || !s->sc || !s->uc || !s->held ||
	    (nr_rings && (!s->rings || !s->rd)) ||
	    (s->image_wait && s->host_file && !s->dq) ||
	    !s->fmap) {
		attribution_free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (nr_rings)
		memcpy(s->rings, rings, nr_rings * sizeof(*s->rings));
	for (unsigned r = 0; r < nr_rings; r++) {
		s->rd[r].chain = s->chain;
		s->rd[r].stack = s->stack;
	}
	s->nr_rings = nr_rings;
	s->gen = gstate_generation(gs);
	s->held_gen = s->gen;
	s->epoch = 1;
	return s;
}

void attribution_free(struct attribution *s)
{
	if (!s)
		return;
	unwind_dwarf_free(s->dw);
	execmap_free(s->xm);
	store_stacks_close(s->stk);
	store_python_close(s->pyt);
	free(s->py_map);
	for (size_t i = 0; i < s->dq_nr; i++)
		free(s->dq[(s->dq_head + i) % SYNC_DEFER_MAX]);
	free(s->dq);
	free(s->rings);
	free(s->rd);
	free(s->vc_mem);
	free(s->vp);
	free(s->sc);
	free(s->uc_mem);
	for (size_t i = 0; s->held && i < s->hold_nr; i++)
		free(s->held[(s->hold_head + i) % s->hold_cap].chain);
	free(s->held);
	free(s->fbuf);
	free(s->fmap);
	free(s->fsf);
	free(s->fpos);
	free(s->touched);
	free(s);
}

/* The model changed: every cached pointer may be stale.  A guest that
 * forks all the time changes it at every record, so this must be cheap. */
static void caches_drop(struct attribution *s)
{
	if (!(++s->epoch & 0xffff)) {
		/* the range caches keep 16 bits of it (struct cent): when
		 * those wrap, entries of the epoch they had might still be
		 * around; and those of the file cache at a wrap of all 32 */
		memset(s->vc, 0, ((size_t)s->vc_mask + 1) * sizeof(*s->vc));
		memset(s->vp, 0, ((size_t)s->vc_mask + 1) * sizeof(*s->vp));
		memset(s->uc, 0, ((size_t)1 << UBITS) * sizeof(*s->uc));
		if (!s->epoch)
			memset(s->sc, 0, ((size_t)1 << SC_BITS) * sizeof(*s->sc));
		s->epoch++;
	}
	s->gen = gstate_generation(s->gs);
}

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static inline size_t skey_hash(const struct skey *k)
{
	uint64_t h = (uint64_t)(uintptr_t)k->app * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)(uintptr_t)k->image * 0xc2b2ae3d27d4eb4full;
	h ^= (uint64_t)(uintptr_t)k->cgroup * 0x94d049bb133111ebull;
	h ^= k->extra * 0x165667b19e3779f9ull;
	h ^= ((uint64_t)k->tgid << 32 ^ (uint64_t)k->tid) * 0x27d4eb2f165667c5ull;
	h ^= ((uint64_t)k->cpu << 16 ^ k->event << 1 ^ k->kernel);
	return (size_t)(mix(h) >> (64 - SC_BITS));
}

static inline bool skey_eq(const struct skey *a, const struct skey *b)
{
	return a->app == b->app && a->image == b->image && a->cgroup == b->cgroup &&
	       a->extra == b->extra &&
	       a->tgid == b->tgid && a->tid == b->tid && a->cpu == b->cpu &&
	       a->event == b->event && a->kernel == b->kernel && a->own_app == b->own_app;
}

static int note_err(struct attribution *s, int err)
{
	s->store_errors++;
	if (!s->first_err)
		s->first_err = err;
	return err;
}

static inline size_t fmap_hash(const struct sfile *sf, unsigned bits)
{
	return (size_t)(((uint64_t)(uintptr_t)sf * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static int fmap_grow(struct attribution *s)
{
	unsigned bits = s->fmap_bits + 1;
	struct fmap_ent *n = calloc((size_t)1 << bits, sizeof(*n));
	size_t i, mask = ((size_t)1 << bits) - 1;

	if (!n)
		return -ENOMEM;
	for (i = 0; i < ((size_t)1 << s->fmap_bits); i++) {
		size_t j;

		if (!s->fmap[i].sf)
			continue;
		for (j = fmap_hash(s->fmap[i].sf, bits); n[j].sf; j = (j + 1) & mask)
			;
		n[j] = s->fmap[i];
	}
	free(s->fmap);
	s->fmap = n;
	s->fmap_bits = bits;
	return 0;
}

/* Room for twice the fids.  fbuf moves (runs queued in it included, and
 * fpos with them): aligned, so that add_to() sees a full run from its
 * position alone. */
static int fbuf_grow(struct attribution *s)
{
	uint32_t cap = s->cap_f ? s->cap_f * 2 : 256, *nt;
	struct sfile **nsf = realloc(s->fsf, cap * sizeof(*nsf));
	uint64_t **npos, *nb;

	if (!nsf)
		return -ENOMEM;
	s->fsf = nsf;
	npos = realloc(s->fpos, cap * sizeof(*npos));
	if (!npos)
		return -ENOMEM;
	s->fpos = npos;
	memset(s->fpos + s->cap_f, 0, (cap - s->cap_f) * sizeof(*npos));
	nt = realloc(s->touched, cap * sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	s->touched = nt;
	if (posix_memalign((void **)&nb, FBUF * sizeof(*nb), (size_t)cap * FBUF * sizeof(*nb)))
		return -ENOMEM;
	if (s->fbuf)
		memcpy(nb, s->fbuf, (size_t)s->cap_f * FBUF * sizeof(*nb));
	for (uint32_t t = 0; t < s->ntouched; t++) {
		uint32_t fid = s->touched[t];

		s->fpos[fid] = nb + (s->fpos[fid] - s->fbuf);
	}
	free(s->fbuf);
	s->fbuf = nb;
	s->cap_f = cap;
	return 0;
}

/* The fid of sf, assigned on first sight.  0 and errno on ENOMEM. */
static uint32_t fid_of(struct attribution *s, struct sfile *sf)
{
	size_t mask = ((size_t)1 << s->fmap_bits) - 1, j;

	for (j = fmap_hash(sf, s->fmap_bits); s->fmap[j].sf; j = (j + 1) & mask)
		if (s->fmap[j].sf == sf)
			return s->fmap[j].fid;
	if (s->nr_f == UINT32_MAX) {
		errno = ENOSPC;
		return 0;
	}
	if (s->nr_f >= s->cap_f) {
		if (fbuf_grow(s)) {
			errno = ENOMEM;
			return 0;
		}
	}
	if ((size_t)s->nr_f * 2 > mask + 1) {
		if (fmap_grow(s))
			return 0;
		mask = ((size_t)1 << s->fmap_bits) - 1;
	}
	for (j = fmap_hash(sf, s->fmap_bits); s->fmap[j].sf; j = (j + 1) & mask)
		;
	s->fmap[j].sf = sf;
	s->fmap[j].fid = s->nr_f;
	s->fsf[s->nr_f] = sf;
	return s->nr_f++;
}

/* Adds fid's queued run (n offsets) to its file. */
static void run_add(struct attribution *s, uint32_t fid, size_t n)
{
	int err = 0;
	size_t failed = sfile_add_many(s->fsf[fid], s->fbuf + (size_t)fid * FBUF, n, &err);

	if (failed) {
		s->store_errors += failed;
		if (!s->first_err)
			s->first_err = err;
	}
}

/*
 * Adds every queued sample to its file.  Called before attribution_run()/
 * attribution_sample() return, so nothing stays queued between calls.
 */
static void flush(struct attribution *s)
{
	uint32_t t, nt = s->ntouched;

	for (t = 0; t < nt; t++) {
		uint32_t fid = s->touched[t];
		size_t n = (size_t)(s->fpos[fid] - (s->fbuf + (size_t)fid * FBUF));

		if (n)
			run_add(s, fid, n);
		s->fpos[fid] = NULL;
	}
	s->ntouched = 0;
}

/* Queues a sample at offset of file fid (0: the file could not be had,
 * errno says why); a file's full run goes in at once.  The order of a
 * file's samples is kept: the file ends up byte for byte as with one
 * sfile_add() per sample. */
static inline void add_to(struct attribution *s, uint64_t **fpos, uint32_t fid,
			  uint64_t offset)
{
	uint64_t *p = fpos[fid];

	if (__builtin_expect(!p, 0)) {
		s->touched[s->ntouched++] = fid;
		p = s->fbuf + (size_t)fid * FBUF;
	}
	*p++ = offset;
	/* runs are aligned on their size: p at a boundary is a full run */
	if (__builtin_expect(!((uintptr_t)p & (FBUF * sizeof(*p) - 1)), 0)) {
		p -= FBUF;
		run_add(s, fid, FBUF);
	}
	fpos[fid] = p;
}

static inline int add(struct attribution *s, uint32_t fid, uint64_t offset)
{
	if (__builtin_expect(!fid, 0))
		return note_err(s, errno ? -errno : -EIO);
	add_to(s, s->fpos, fid, offset);
	return FILED;
}

/*
 * The fid of the sample file for k.  app/image are the strings that
 * k->app/k->image stand for (k may hold a tag instead, for names built per
 * sample).  Applies the separation mask first so that the cache holds one
 * entry per file.  0 (errno set) if the store cannot open the file.
 */
static uint32_t sfile_for(struct attribution *s, struct skey *k, const char *app,
			       const char *image, const struct gstate_cookie *c)
{
	struct store_key key;
	struct sc_ent *e;
	struct sfile *sf;
	uint32_t fid;
	size_t i;

	if (!k->own_app &&
	    (k->kernel == 1 ? !(s->sep & OPVM_SEP_KERNEL) : !(s->sep & OPVM_SEP_LIB))) {
		k->app = k->image;
		app = image;
	}
	/* a process's anonymous memory keeps its tgid (store_key.own_tgid) */
	if (!(s->sep & OPVM_SEP_THREAD)) {
		k->tid = -1;
		if (image != NAME_ANON)
			k->tgid = -1;
	}
	if (!(s->sep & OPVM_SEP_CPU))
		k->cpu = -1;
	i = skey_hash(k);
	e = &s->sc[i];
	if (e->epoch == s->epoch && skey_eq(&e->k, k))
		return e->fid;
	e = &s->sc[i ^ 1];
	if (e->epoch == s->epoch && skey_eq(&e->k, k))
		return e->fid;

	key = (struct store_key){
		.app = app,
		.image = image,
		.kernel = k->kernel == 1,
		.python = k->kernel == SKEY_PYTHON,
		.own_app = (int)k->own_app,
		.own_tgid = image == NAME_ANON,
		.event = (uint8_t)k->event,
		.tgid = k->tgid,
		.tid = k->tid,
		.cpu = k->cpu,
		.cgroup = k->cgroup,
		.build_id = c && c->build_id_len ? c->build_id : NULL,
		.build_id_len = c ? c->build_id_len : 0,
	};
	sf = store_get(s->st, &key);
	if (!sf)
		return 0;
	if (c && c->build_id_len && s->image_used)
		s->image_used(c, s->image_arg);
	if (image == NAME_ANON && k->tgid > 0 && s->anon_used)
		s->anon_used(k->tgid, s->image_arg);
	fid = fid_of(s, sf);
	if (!fid)
		return 0;
	/* two-way: the newest entry lives in the home slot, the one it
	 * displaces moves to the other way */
	e = &s->sc[i];
	if (e->epoch == s->epoch)
		s->sc[i ^ 1] = *e;
	e->k = *k;
	e->fid = fid;
	e->epoch = s->epoch;
	return fid;
}

/*
 * What the cache hit paths read of a sample: struct opvm_sample's first
 * fields, in its layout, which a flat ring entry repeats after its header
 * (lib/ring.h).  The hit paths read either in place through this type:
 * drain() files a hit with no copy of the entry, and reads only the fields
 * the match needs.
 */
struct sview {
	uint64_t rip, cr3, slot_cr3;
	union {
		struct {
			uint32_t slot_tid, slot_tgid;
		};
		uint64_t ids;
	};
	union {
		struct {
			uint32_t vcpu;
			uint8_t cpl, event, flags;
			uint8_t nr_chain;	/* in a ring entry: not to be read */
		};
		uint64_t rest;
	};
};

#define SVIEW_AT(f) (offsetof(struct sview, f) == offsetof(struct opvm_sample, f) && \
		     offsetof(struct sview, f) + offsetof(struct ring_entry, rip) == \
		     offsetof(struct ring_entry, f))
_Static_assert(SVIEW_AT(rip) && SVIEW_AT(cr3) && SVIEW_AT(slot_cr3) && SVIEW_AT(slot_tid) &&
	       SVIEW_AT(slot_tgid) && SVIEW_AT(vcpu) && SVIEW_AT(cpl) && SVIEW_AT(event) &&
	       SVIEW_AT(flags) && SVIEW_AT(nr_chain),
	       "struct sview is the start of a sample and of a ring entry");

/* The rest word (struct sview) with these fields, the others 0. */
static inline uint64_t rest_word(uint32_t vcpu, uint8_t cpl, uint8_t event, uint8_t flags,
				 uint8_t nr_chain)
{
	struct sview v = { .vcpu = vcpu, .cpl = cpl, .event = event, .flags = flags,
			   .nr_chain = nr_chain };

	return v.rest;
}

/* The epoch's bits in a cache entry's rest word (struct cent). */
static inline uint64_t cent_epoch_bits(uint32_t epoch)
{
	return rest_word(0, (uint8_t)epoch, 0, 0, (uint8_t)(epoch >> 8));
}

static inline const struct sview *sview_of(const struct opvm_sample *x)
{
	return (const struct sview *)x;
}

static inline const struct sview *sview_of_entry(const struct ring_entry *e)
{
	return (const struct sview *)&e->rip;
}

/*
 * What the cache hit paths read of the attribution state, copied into a
 * local where a run of samples starts: locals stay in registers, where
 * s's fields would be loaded again after every store (the build has
 * -fno-strict-aliasing).  Stale once anything but a hit ran (fid_of() may
 * move fpos): built again then.
 */
struct hitctx {
	struct attribution *s;
	struct cent *uc;
	struct vcache *vc;
	uint64_t **fpos;
	uint64_t epoch_bits;
	unsigned vc_mask;
	bool k_cr3;
};

static inline struct hitctx hitctx_of(struct attribution *s)
{
	return (struct hitctx){ .s = s, .uc = s->uc, .vc = s->vc, .fpos = s->fpos,
				.epoch_bits = cent_epoch_bits(s->epoch), .vc_mask = s->vc_mask,
				.k_cr3 = s->k_cr3 };
}

/* x matches e: its address in e's range, what e's masks name equal, the
 * same address space (cr3n: 0 where it does not count) and e of this
 * epoch. */
static inline bool cent_match(uint64_t epoch_bits, const struct cent *e,
			      const struct sview *x, uint64_t cr3n)
{
	uint64_t d = (((x->rest & e->rmask) | epoch_bits) ^ e->rest) |
		     ((x->ids ^ e->ids) & (uint64_t)(int64_t)e->imask) | (cr3n ^ e->cr3n);

	return x->rip - e->lo < e->len && !d;
}

/*
 * Fills e for x's file.  slot: the entry depends on x's slot (its flags,
 * slot_tid and slot_tgid); cpu: on x's vCPU.  Whatever else x carries (a
 * KSP stack pointer) must be as in x too: an entry is never used for what
 * it was not made from.
 */
static void cent_fill(const struct attribution *s, struct cent *e, uint32_t fid, uint64_t lo,
		      uint64_t len, uint64_t adj, uint64_t cr3n, const struct opvm_sample *x,
		      bool slot, bool cpu)
{
	const struct sview *v = sview_of(x);

	e->fid = fid;
	e->lo = lo;
	e->len = len;
	e->adj = adj;
	e->cr3n = cr3n;
	e->rmask = rest_word(cpu ? UINT32_MAX : 0, 0, UINT8_MAX,
			     slot ? UINT8_MAX : OPVM_SAMPLE_KSP, 0);
	e->rest = (v->rest & e->rmask) | cent_epoch_bits(s->epoch);
	e->imask = slot ? -1 : 0;
	e->ids = v->ids;
}

static inline unsigned cent_index(uint64_t rip, uint64_t cr3n, unsigned bits)
{
	return (unsigned)((((rip >> 20) ^ (cr3n >> 13)) * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/*
 * x86-64 module space (lib/x86.h's OPVM_MODULES_*): a kernel address there
 * that no module covers belongs to a module whose MODULE record is late, so
 * it is held like a user sample, then filed under vmlinux if none comes.
 */

/*
 * Idle (pid 0 by the current-task slot) and boot code are applications of
 * their own whatever the separation, so a report tells them from work
 * (docs/reports.md: "(idle)", "(firmware/boot)").  Not cached per range:
 * the range caches key on the task only where the separation needs it.
 */
static int file_kernel_own(struct attribution *s, const struct opvm_sample *x, const char *app)
{
	uint64_t lo, hi;
	const struct gstate_module *m = gstate_module_range(s->gs, x->rip, &lo, &hi);
	struct skey k;

	memset(&k, 0, sizeof(k));
	k.app = app;
	k.image = m ? m->name : NAME_VMLINUX;
	k.kernel = 1;
	k.own_app = 1;
	k.event = x->event;
	k.cpu = x->vcpu;
	s->stats.kernel++;
	return add(s, sfile_for(s, &k, app, k.image, NULL), m ? x->rip - m->base : x->rip);
}

/*
 * A kernel sample's task, into k's tgid/tid and *p (its process, NULL for a
 * kernel thread or none).  By opvm.ko's slot when the sample has one, else
 * by CR3.  Returns HOLD when the task should be waited for, else 0.
 */
static int kernel_task(struct attribution *s, const struct opvm_sample *x, bool force,
		       struct skey *k, const struct gstate_process **p)
{
	const struct gstate_process *tp;
	bool hold;

	if (!(x->flags & OPVM_SAMPLE_SLOT)) {
		*p = gstate_proc_by_cr3(s->gs, x->cr3);
		k->tgid = k->tid = *p ? (*p)->tgid : 0;
		return 0;
	}
	/*
	 * The slot is guest memory: a task the model does not know (yet) is
	 * held when it would name a file, so that neither a late PROC/THREAD
	 * record nor a hostile slot can make files per made-up id; on expiry
	 * it is merged ("all").
	 */
	k->tgid = x->slot_tgid;	/* not 0: idle went before */
	k->tid = x->slot_tid;
	tp = gstate_proc_by_tgid(s->gs, x->slot_tgid);
	hold = !force && s->hold_ms && gstate_get_hello(s->gs) &&
	       !(tp && tp->tgid == s->force_tgid);
	if (!tp && s->k_slot) {
		if (hold)
			return HOLD;
		k->tgid = k->tid = -1;
	} else if (tp && (s->sep & OPVM_SEP_THREAD) && x->slot_tid != x->slot_tgid &&
		   gstate_thread_tgid(s->gs, x->slot_tid) != x->slot_tgid) {
		if (hold)
			return HOLD;
		k->tid = k->tgid;
	}
	*p = x->flags & OPVM_SAMPLE_KTHREAD ? NULL : tp;
	return 0;
}

/* The application a kernel sample is filed under when kernel samples are
 * separated by process. */
static const char *kernel_app(struct attribution *s, const struct opvm_sample *x,
			      const struct gstate_process *p, const char *image)
{
	if ((x->flags & OPVM_SAMPLE_SLOT) && (x->flags & OPVM_SAMPLE_KTHREAD))
		return NAME_KTHREAD;
	if (p)
		return attribution_proc_app(p);
	/* no module has spoken: no process to name (boot, mostly), the
	 * kernel's own, as without the separation */
	if (!gstate_get_hello(s->gs))
		return image;
	return NAME_UNKNOWN;
}

/* file_kernel() when its range cache misses (ce: x's entry, to fill). */
static int __attribute__((noinline)) file_kernel_miss(struct attribution *s,
						      const struct opvm_sample *x, bool force,
						      uint64_t cr3n, struct cent *ce)
{
	const struct gstate_process *p = NULL;
	const struct gstate_module *m;
	const char *app = NULL, *image;
	uint64_t offset, lo, hi;
	uint32_t fid;
	struct skey k;
	int ret;

	m = gstate_module_range(s->gs, x->rip, &lo, &hi);
	memset(&k, 0, sizeof(k));
	if (m) {
		image = m->name;
		offset = x->rip - m->base;
	} else {
		bool modspace = x->rip >= OPVM_MODULES_START && x->rip < OPVM_MODULES_END;

		if (modspace && !force && s->hold_ms && gstate_get_hello(s->gs))
			return HOLD;
		if (modspace) {
			s->stats.lost_no_mapping++;
			lo = hi = 0;	/* not cached: the module may come */
		} else if (hi > OPVM_MODULES_START) {
			hi = OPVM_MODULES_START;
		}
		image = NAME_VMLINUX;
		offset = x->rip;
	}
	k.image = image;
	k.kernel = 1;
	k.event = x->event;
	k.cpu = x->vcpu;

	if (kernel_task(s, x, force, &k, &p))
		return HOLD;
	/* a process's kernel time is in its cgroup where the range cache
	 * keys on the task anyway (OPVM_SEP_KERNEL), not at a cost here */
	if (s->sep & OPVM_SEP_KERNEL) {
		app = kernel_app(s, x, p, image);
		if (!k.app)
			k.app = app;
		k.cgroup = p ? p->cgroup : NULL;
	}
	fid = sfile_for(s, &k, app, image, NULL);
	s->stats.kernel++;
	ret = add(s, fid, offset);
	/* never below the kernel's half: kernel_hit() leaves boot code
	 * (rip < OPVM_KERNEL_HALF) to file_kernel() by never matching it */
	if (lo < OPVM_KERNEL_HALF)
		lo = OPVM_KERNEL_HALF;
	if (ret == FILED && hi > lo)
		cent_fill(s, ce, fid, lo, hi - lo, offset - x->rip, cr3n, x, s->k_slot, true);
	return ret;
}

/* A kernel sample's range cache entry, and its CR3 as the entry keys it. */
static inline struct cent *kernel_cent(const struct hitctx *c, const struct sview *x,
				       uint64_t *cr3n)
{
	*cr3n = c->k_cr3 && !(x->flags & OPVM_SAMPLE_SLOT) ? x->cr3 : 0;
	return &c->vc[x->vcpu & c->vc_mask].k[cent_index(x->rip, 0, KBITS)];
}

/* The hot path: a range cache hit is a few compares and a queued (file,
 * offset); the caller counts it in stats.kernel.  False: not a hit (boot
 * and idle samples never are: no entry covers boot code, and idle is
 * checked here; nor KSP ones, by the entry's mask). */
static inline bool kernel_hit(const struct hitctx *c, const struct sview *x,
			      const struct cent *ce, uint64_t cr3n)
{
	if (((x->flags & OPVM_SAMPLE_SLOT) && !x->slot_tgid) ||
	    !cent_match(c->epoch_bits, ce, x, cr3n))
		return false;
	/* cached fids are never 0 */
	add_to(c->s, c->fpos, ce->fid, x->rip + ce->adj);
	return true;
}

static inline int file_kernel(struct attribution *s, const struct opvm_sample *x, bool force)
{
	struct hitctx c = hitctx_of(s);
	uint64_t cr3n;
	struct cent *ce = kernel_cent(&c, sview_of(x), &cr3n);

	if (__builtin_expect(kernel_hit(&c, sview_of(x), ce, cr3n), 1)) {
		s->stats.kernel++;
		return FILED;
	}
	if (x->rip < OPVM_KERNEL_HALF)
		return file_kernel_own(s, x, NAME_BOOT);
	if ((x->flags & OPVM_SAMPLE_SLOT) && !x->slot_tgid)
		return file_kernel_own(s, x, NAME_IDLE);
	return file_kernel_miss(s, x, force, cr3n, ce);
}

static int file_anon_cr3(struct attribution *s, const struct opvm_sample *x, uint64_t cr3n)
{
	char name[48];
	struct skey k = {
		.app = TAG_ANON_CR3,
		.image = TAG_ANON_CR3,
		.extra = cr3n,
		.event = x->event,
		.cpu = x->vcpu,
		.tgid = (x->flags & OPVM_SAMPLE_SLOT) ? x->slot_tgid : 0,
		.tid = (x->flags & OPVM_SAMPLE_SLOT) ? x->slot_tid : 0,
	};

	snprintf(name, sizeof(name), "{anon-cr3:0x%llx}", (unsigned long long)cr3n);
	s->stats.user++;
	return add(s, sfile_for(s, &k, name, name, NULL), x->rip);
}

/* A user sample's process: by its CR3 (the vCPU's last one cached), else
 * by the task opvm.ko's slot names (*via_slot set). */
static const struct gstate_process *user_proc(struct attribution *s,
					      const struct opvm_sample *x, uint64_t cr3n,
					      bool *via_slot)
{
	struct vproc *vc = &s->vp[x->vcpu & s->vc_mask];
	const struct gstate_process *p;

	if (vc->p_epoch == s->epoch && vc->cr3n == cr3n) {
		p = vc->p;
	} else {
		p = gstate_proc_by_cr3(s->gs, cr3n);
		vc->cr3n = cr3n;
		vc->p = p;
		vc->p_epoch = s->epoch;
	}
	if (!p && (p = attribution_slot_proc(s, x)))
		*via_slot = true;
	return p;
}

/* What the interval index says of ip, the index rebuilt first if the model
 * changed since it was built. */
static enum execmap_answer bymap_lookup(struct attribution *s, uint64_t ip,
					const struct gstate_process **p,
					const struct gstate_mapping **m)
{
	uint64_t gen = gstate_generation(s->gs);

	if (!s->xm && !(s->xm = execmap_new(0)))
		return EXECMAP_OFF;
	if (!s->xm_built || s->xm_gen != gen) {
		execmap_build(s->xm, s->gs);	/* failed: EXECMAP_OFF, counted */
		s->xm_gen = gen;
		s->xm_built = true;
	}
	return execmap_lookup(s->xm, ip, p, m);
}

/* A user sample with no CR3 and no task (the perf sampler): by the one
 * process whose mapping holds its address, else an explicit bucket. */
static int file_user_by_map(struct attribution *s, const struct opvm_sample *x, bool force)
{
	const struct gstate_process *p = NULL;
	const struct gstate_mapping *m = NULL;
	enum execmap_answer a = bymap_lookup(s, x->rip, &p, &m);
	const char *name = a == EXECMAP_MANY ? NAME_AMBIGUOUS : NAME_UNMAPPED;
	const struct gstate_cookie *c = m ? m->cookie : NULL;
	uint64_t offset = x->rip;
	struct skey k;

	/* a process or a mapping younger than the last walk may still come */
	if (a == EXECMAP_NONE && !force && s->hold_ms &&
	    (gstate_procs_announced(s->gs) || gstate_maps_announced(s->gs)))
		return HOLD;
	memset(&k, 0, sizeof(k));
	k.event = x->event;
	k.cpu = x->vcpu;
	s->stats.user++;
	if (c)
		offset = x->rip - m->start + m->pgoff;
	if (a != EXECMAP_ONE) {
		if (a == EXECMAP_MANY)
			s->bm.ambiguous++;
		else
			s->bm.unknown++;
		/* no one process; the binary when all that map rip agree */
		k.app = name;
		k.image = c ? c->path : name;
		k.own_app = 1;
		k.tgid = k.tid = -1;
		return add(s, sfile_for(s, &k, name, k.image, c), offset);
	}
	s->bm.attributed++;
	k.tgid = k.tid = p->tgid;
	k.app = attribution_proc_app(p);
	k.cgroup = p->cgroup;
	k.image = c ? c->path : NAME_ANON;
	return add(s, sfile_for(s, &k, k.app, k.image, c), offset);
}

/* file_user() when its mapping cache misses (ce: x's entry, to fill). */
static int __attribute__((noinline)) file_user_miss(struct attribution *s,
						    const struct opvm_sample *x, bool force,
						    uint64_t cr3n, struct cent *ce)
{
	const struct gstate_process *p;
	const struct gstate_mapping *m;
	const char *image;
	uint32_t fid;
	struct skey k;
	uint64_t offset;
	bool via_slot = false, exiting = false;
	int ret;

	if (!cr3n && !(x->flags & OPVM_SAMPLE_SLOT))
		return file_user_by_map(s, x, force);
	p = user_proc(s, x, cr3n, &via_slot);
	if (!p) {
		if (!gstate_procs_announced(s->gs)) {
			s->stats.unresolved++;
			return file_anon_cr3(s, x, cr3n);
		}
		if (!force && s->hold_ms)
			return HOLD;
		s->stats.lost_no_process++;
		return file_anon_cr3(s, x, cr3n);
	}

	if (s->force_tgid && p->tgid == s->force_tgid) {
		exiting = !force;
		force = true;
	}
	memset(&k, 0, sizeof(k));
	k.event = x->event;
	k.cpu = x->vcpu;
	k.tgid = p->tgid;
	k.tid = p->tgid;
	if ((s->sep & OPVM_SEP_THREAD) && (x->flags & OPVM_SAMPLE_SLOT) &&
	    x->slot_tgid == p->tgid && x->slot_tid != p->tgid) {
		/* a thread the model does not know yet (or a made-up id in a
		 * hostile slot): hold, then merge into the process */
		if (gstate_thread_tgid(s->gs, x->slot_tid) == p->tgid)
			k.tid = x->slot_tid;
		else if (!force && s->hold_ms && gstate_get_hello(s->gs))
			return HOLD;
	}
	k.app = attribution_proc_app(p);
	k.cgroup = p->cgroup;

	m = attribution_map_of(s, p, x->rip);
	if (!m) {
		/* a mapping made since the module's MMAP or introspection's
		 * last walk of the mappings may still come.  A process that
		 * introspection saw exit may have left its page-table root to
		 * the process the same walk names next: a sample outside the
		 * exited one's mappings is likely that one's and waits on */
		if ((!force || (exiting && !gstate_get_hello(s->gs))) && s->hold_ms &&
		    gstate_maps_announced(s->gs))
			return HOLD;
		s->stats.lost_no_mapping++;
		s->stats.user++;
		k.image = NAME_ANON;
		return add(s, sfile_for(s, &k, attribution_proc_app(p), NAME_ANON, NULL), x->rip);
	}
	if (m->cookie) {
		image = m->cookie->path;
		offset = x->rip - m->start + m->pgoff;
	} else {
		image = NAME_ANON;
		offset = x->rip;
	}
	k.image = image;
	fid = sfile_for(s, &k, attribution_proc_app(p), image, m->cookie);
	s->stats.user++;
	ret = add(s, fid, offset);
	if (ret == FILED) {
		cent_fill(s, ce, fid, m->start, m->end - m->start, offset - x->rip, cr3n, x,
			  s->u_slot || via_slot, s->u_cpu);
	}
	return ret;
}

/*
 * A kernel sample that carries its stack pointer instead of a task (boot,
 * before the kernel was found, lib/sample.h): made a sample of the task
 * whose stack holds it, as if the task had been read in the stop, or of
 * no task when none does; left as it is (attribute() holds it) while
 * introspection is still looking for the kernel.  Before attribute(), so
 * that its chain is filed under the same task.
 */
static void ksp_resolve(struct attribution *s, struct opvm_sample *x, bool force)
{
	const struct gstate_process *p;
	uint32_t tgid;
	bool kth;

	if (s->task_by_sp && !s->task_by_sp(s->task_arg, x->slot_cr3, &tgid, &kth)) {
		p = kth ? NULL : gstate_proc_by_tgid(s->gs, tgid);
		x->flags |= OPVM_SAMPLE_SLOT | (kth ? OPVM_SAMPLE_KTHREAD : 0);
		x->slot_tid = x->slot_tgid = tgid;
		x->slot_cr3 = p ? p->cr3 : 0;
	} else if (s->task_by_sp && !force && s->hold_ms &&
		   (gstate_procs_expected(s->gs) || gstate_walks(s->gs))) {
		/* the kernel not found yet, or the task younger than the
		 * last walk (a short-lived modprobe): the next walk names it */
		return;
	} else {
		x->slot_cr3 = 0;
	}
	x->flags &= (uint8_t)~OPVM_SAMPLE_KSP;
}

/* As kernel_cent() and kernel_hit(), for user samples (stats.user). */
static inline struct cent *user_cent(const struct hitctx *c, const struct sview *x,
				     uint64_t *cr3n)
{
	*cr3n = x->cr3;
	return &c->uc[cent_index(x->rip, *cr3n, UBITS)];
}

static inline bool user_hit(const struct hitctx *c, const struct sview *x,
			    const struct cent *ce, uint64_t cr3n)
{
	if (!cent_match(c->epoch_bits, ce, x, cr3n))
		return false;
	add_to(c->s, c->fpos, ce->fid, x->rip + ce->adj);
	return true;
}

static inline int file_user(struct attribution *s, const struct opvm_sample *x, bool force)
{
	struct hitctx c = hitctx_of(s);
	uint64_t cr3n;
	struct cent *ce = user_cent(&c, sview_of(x), &cr3n);

	if (__builtin_expect(user_hit(&c, sview_of(x), ce, cr3n), 1)) {
		s->stats.user++;
		return FILED;
	}
	return file_user_miss(s, x, force, cr3n, ce);
}

/* The thread a user sample of p is filed under, as file_user_miss()
 * names it (without holding for a thread the model does not know). */
static int64_t user_tid(struct attribution *s, const struct opvm_sample *x,
			const struct gstate_process *p)
{
	if ((s->sep & OPVM_SEP_THREAD) && (x->flags & OPVM_SAMPLE_SLOT) &&
	    x->slot_tgid == p->tgid && x->slot_tid != p->tgid &&
	    gstate_thread_tgid(s->gs, x->slot_tid) == p->tgid)
		return x->slot_tid;
	return p->tgid;
}

/* Whether p, found for x, is x's process as the model will still say once
 * the records in flight are in: x's address in one of its mappings (where
 * mappings are announced).  The module's slot names only a process whose
 * page-table root the model does not know (attribution_slot_proc()), so
 * the mappings are what tell a process that exec'd since. */
static bool py_owner(struct attribution *s, const struct opvm_sample *x,
		     const struct gstate_process *p)
{
	return attribution_map_of(s, p, x->rip) || !gstate_maps_announced(s->gs);
}

/* x filed under p's interpreter's {py} at Python frame id. */
static int file_python_as(struct attribution *s, const struct opvm_sample *x,
			  const struct gstate_process *p, uint32_t id)
{
	struct skey k;

	memset(&k, 0, sizeof(k));
	k.event = x->event;
	k.cpu = x->vcpu;
	k.tgid = p->tgid;
	k.tid = user_tid(s, x, p);
	k.app = attribution_proc_app(p);
	k.cgroup = p->cgroup;
	k.image = attribution_py_image(p);
	k.kernel = SKEY_PYTHON;
	s->stats.user++;
	s->stats.python++;
	return add(s, sfile_for(s, &k, k.app, k.image, NULL), id);
}

/*
 * A user sample whose chain carries Python frames (lib/pynames.h): filed
 * under its innermost Python frame, {py} of the interpreter, at the
 * frame's id, whatever native function the vCPU was in (which Python
 * function ran; the native frames stay in its stack).  A sample whose
 * process is not known yet, or whose frames got no id, is filed as any
 * user sample.  One the process found may not own (py_owner()) waits:
 * named by the module's slot before its EXEC came (a shell that execs the
 * interpreter), the process is still the old program; filed at once,
 * qemu-python313 once put 384 python3.13 samples, two seconds of them,
 * under the shell's name.
 */
static int __attribute__((noinline)) file_python(struct attribution *s,
						 const struct opvm_sample *x, bool force)
{
	uint64_t cr3n = x->cr3;
	const struct gstate_process *p;
	bool via_slot = false;
	uint32_t id;

	p = cr3n || (x->flags & OPVM_SAMPLE_SLOT) ? user_proc(s, x, cr3n, &via_slot) : NULL;
	if (p && !force && s->hold_ms && !py_owner(s, x, p))
		return HOLD;
	if (!p || !attribution_py_ids(s, x, &id, 1))
		return file_user(s, x, force);
	return file_python_as(s, x, p, id);
}

/*
 * A user sample with no task and no CR3 whose Python frames were read for
 * the process in slot_tgid (OPVM_SAMPLE_PYTASK: the perf sampler without
 * opvm.ko): its own process is the one its executable mapping names, and
 * the frames go with it only when that is the process they were read for.
 * Otherwise (another process, several or none map its address, or no
 * tgid came with the frames) they are dropped, counted, and the sample is
 * filed by mapping as any: never Python frames under a wrong process.
 */
static int __attribute__((noinline)) file_python_by_map(struct attribution *s,
							const struct opvm_sample *x, bool force)
{
	const struct gstate_process *p = NULL;
	const struct gstate_mapping *m = NULL;
	uint32_t id;
	int r;

	if ((x->flags & OPVM_SAMPLE_PYTASK) && x->slot_tgid &&
	    bymap_lookup(s, x->rip, &p, &m) == EXECMAP_ONE && p->tgid == x->slot_tgid &&
	    attribution_py_ids(s, x, &id, 1)) {
		s->bm.attributed++;
		return file_python_as(s, x, p, id);
	}
	r = file_user_by_map(s, x, force);
	if (r != HOLD)
		s->bm.py_unconfirmed++;
	return r;
}

/* Callers make sure the caches belong to the current generation first. */
static inline int attribute(struct attribution *s, const struct opvm_sample *x, bool force)
{
	if (x->cpl != 3)
		return __builtin_expect(x->flags & OPVM_SAMPLE_KSP, 0) ? HOLD :
		       file_kernel(s, x, force);
	if (__builtin_expect(x->nr_py && s->py, 0))
		return !x->cr3 && !(x->flags & OPVM_SAMPLE_SLOT) ?
		       file_python_by_map(s, x, force) : file_python(s, x, force);
	return file_user(s, x, force);
}

/* A held sample just filed: its kept chain into the stack table. */
static void held_chain_file(struct attribution *s, struct held *h, uint64_t now)
{
	if (!h->chain && !h->leaf_only)
		return;
	h->leaf_only = false;
	if (s->chains)		/* else a chain of Python frames only */
		attribution_file_chain(s, &h->s, now);
	free(h->chain);
	h->chain = NULL;
	h->s.chain = NULL;
	h->s.nr_chain = h->s.nr_py = 0;
}

/* Files the oldest held sample whatever its state. */
static void held_evict_one(struct attribution *s, uint64_t now)
{
	struct held *h = &s->held[s->hold_head];

	if (h->s.flags & OPVM_SAMPLE_KSP)
		ksp_resolve(s, &h->s, true);
	attribute(s, &h->s, true);
	held_chain_file(s, h, now);
	s->hold_head = (s->hold_head + 1) % s->hold_cap;
	/* An empty queue starts again at the front, as held_retry() does:
	 * the pages the queue touches are then those the most samples ever
	 * held at once needed, not every page of hold_cap over a long session. */
	if (!--s->hold_nr)
		s->hold_head = 0;
}

/*
 * Holds x for the guest state it waits for.  A frame-pointer chain (its
 * pcs, resolved when filed, as the sample itself is) is kept with it; a
 * stack window for the DWARF unwind is not (kilobytes a sample).  Returns
 * whether the chain was kept.
 */
static bool hold(struct attribution *s, const struct opvm_sample *x, uint64_t now)
{
	struct held *h;

	if (s->hold_nr == s->hold_cap)
		held_evict_one(s, now);
	h = &s->held[(s->hold_head + s->hold_nr) % s->hold_cap];
	h->s = *x;
	h->chain = NULL;
	/* Python frames are kept with it too (with a DWARF stack window,
	 * its chain is the kernel's callers and those) */
	if (x->nr_chain && ((s->chains && !(x->flags & OPVM_SAMPLE_STACK)) ||
			    (s->py && x->nr_py)) &&
	    (h->chain = malloc((size_t)x->nr_chain * sizeof(*h->chain))))
		memcpy(h->chain, x->chain, (size_t)x->nr_chain * sizeof(*h->chain));
	/* a chain of its leaf alone (none walked: boot) is filed as such */
	h->leaf_only = s->chains && !x->nr_chain && !(x->flags & OPVM_SAMPLE_STACK);
	h->s.chain = h->chain;
	h->s.nr_chain = h->chain ? x->nr_chain : 0;
	h->s.nr_py = h->chain ? x->nr_py : 0;
	h->s.flags &= (uint8_t)~OPVM_SAMPLE_STACK;
	h->s.stack = NULL;
	h->s.stack_len = 0;
	h->t = now;
	h->walks = gstate_walks(s->gs);
	s->hold_nr++;
	if (s->on_hold)
		s->on_hold(s->task_arg);
	return h->chain != NULL || h->leaf_only;
}

/* How many hold times a sample may wait for introspection's next walk. */
#define HOLD_WALK_FACTOR	5
/* How long a boot sample may wait for introspection to find the kernel
 * (it looks once a second for 10 passes after the OS starts, then less
 * and less often: a slow boot's VMCOREINFO may come tens of seconds in). */
#define HOLD_BOOT_MS		60000

static inline uint64_t held_age(const struct held *h, uint64_t now)
{
	return now >= h->t ? now - h->t : 0;
}

/*
 * A held sample expires after the hold time.  Where introspection is what
 * names processes and mappings (no HELLO), only its next walk can bring
 * what the sample waits for, and on a loaded host that walk can come later
 * than the hold time: the sample then also waits for one walk after it was
 * held (a walk runs on this thread, so it read the guest after the sample
 * was taken), up to HOLD_WALK_FACTOR hold times if walks stopped.  One
 * held before the first walk waits for the second (below).
 */
static inline bool expired(const struct attribution *s, const struct held *h, uint64_t now)
{
	uint64_t age = held_age(h, now);

	if (age < s->hold_ms)
		return false;
	/* boot: a kernel sample named by its stack once the kernel is found */
	if ((h->s.flags & OPVM_SAMPLE_KSP) && age < HOLD_BOOT_MS && !gstate_get_hello(s->gs) &&
	    gstate_procs_expected(s->gs))
		return false;
	if (gstate_walks(s->gs) && gstate_walks(s->gs) == h->walks &&
	    !gstate_get_hello(s->gs) && age < (uint64_t)HOLD_WALK_FACTOR * s->hold_ms)
		return false;
	/* a user sample held before introspection's first walk (a guest
	 * booting on a loaded host, its kernel still searched for): that walk
	 * can name the process before the next has its mappings, so the
	 * sample waits for a second walk, as long as a boot sample would */
	if (!h->walks && h->s.rip < OPVM_KERNEL_HALF && gstate_walks(s->gs) < 2 &&
	    !gstate_get_hello(s->gs) && age < HOLD_BOOT_MS)
		return false;
	return true;
}

/*
 * Retries held samples.  Nothing can resolve while the model is unchanged,
 * so then only expired ones (at the head: the queue is in time order) are
 * filed; after a change the whole queue is retried and compacted.
 */
static void held_retry(struct attribution *s, uint64_t now, bool all, bool full)
{
	size_t i, kept = 0, n = s->hold_nr, base;

	if (!n)
		return;
	if (!all && !full && s->held_gen == gstate_generation(s->gs)) {
		while (s->hold_nr && expired(s, &s->held[s->hold_head], now))
			held_evict_one(s, now);
		return;
	}
	/* Compact towards the front of the array when the queue does not wrap
	 * (a write at kept never passes the read at head + i then): see
	 * held_evict_one() for why. */
	base = s->hold_head + n <= s->hold_cap ? 0 : s->hold_head;
	for (i = 0; i < n; i++) {
		struct held *h = &s->held[(s->hold_head + i) % s->hold_cap];
		bool force = all || expired(s, h, now);

		if (h->s.flags & OPVM_SAMPLE_KSP)
			ksp_resolve(s, &h->s, force);
		if (attribute(s, &h->s, force) == HOLD) {
			struct held *to = &s->held[(base + kept) % s->hold_cap];

			if (to != h)
				*to = *h;
			kept++;
		} else {
			held_chain_file(s, h, now);
		}
	}
	s->hold_head = kept ? base : 0;
	s->hold_nr = kept;
	s->held_gen = gstate_generation(s->gs);
}

static int start_match(const struct gstate_process *p, void *arg)
{
	const char *name = arg, *base = p->exe ? strrchr(p->exe->path, '/') : NULL;

	if (base && !strcmp(base + 1, name))
		return 1;
	/* comm holds 15 bytes of the name */
	return !strncmp(p->comm, name, sizeof(p->comm) - 2) && strlen(name) >= strlen(p->comm);
}

/* --from-exec: looks for the process when the model changed since the last
 * look (a walk over the processes, only until it is found). */
static void start_check(struct attribution *s, uint64_t now_ms)
{
	uint64_t gen = gstate_generation(s->gs);

	if (gen == s->start_gen)
		return;
	s->start_gen = gen;
	if (gstate_for_each_proc(s->gs, start_match, s->start_exec) > 0) {
		s->start_exec[0] = '\0';
		s->started_ms = now_ms;
	}
}

int attribution_started(const struct attribution *s, uint64_t *at_ms)
{
	*at_ms = s->started_ms;
	return !s->start_exec[0];
}

static inline void take(struct attribution *s, const struct opvm_sample *x, uint64_t now)
{
	struct opvm_sample y;

	if (s->no_cr3 && x->cpl == 3) {
		y = *x;
		y.cr3 = y.slot_cr3 = 0;
		y.slot_tid = y.slot_tgid = 0;
		y.flags &= (uint8_t)~(OPVM_SAMPLE_SLOT | OPVM_SAMPLE_KTHREAD);
		x = &y;
	}
	if (__builtin_expect(x->flags & OPVM_SAMPLE_KSP, 0) && x->cpl != 3) {
		y = *x;
		ksp_resolve(s, &y, false);
		x = &y;
	}
	s->stats.received++;
	if (x->cpl != 3 && x->rip < OPVM_KERNEL_HALF)
		s->boot_taken++;
	if (s->start_exec[0]) {
		start_check(s, now);
		if (s->start_exec[0]) {
			s->stats.before_start++;
			return;
		}
	}
	if (attribute(s, x, false) == HOLD) {
		/* held without its chain (a DWARF stack window, or no
		 * memory): counted, so that the stack table and the drops
		 * add up to the samples */
		if (!hold(s, x, now) && s->chains)
			store_stack_lost(s->st);
	} else if (s->chains) {
		attribution_file_chain(s, x, now);
	}
}

static inline void caches_check(struct attribution *s)
{
	if (s->gen != gstate_generation(s->gs))
		caches_drop(s);
}

int attribution_sample(struct attribution *s, const struct opvm_sample *smp, uint64_t now_ms)
{
	/* as ring_push() and a pop would leave it */
	struct opvm_sample x = *smp;
	int err;

	x.cr3 = opvm_cr3_normalise(x.cr3);
	x.nr_py = x.nr_py <= x.nr_chain ? x.nr_py : x.nr_chain;
	caches_check(s);
	s->first_err = 0;
	take(s, &x, now_ms);
	flush(s);
	err = s->first_err;
	s->first_err = 0;
	return err;
}

/*
 * take() of a flat ring entry read in place.  fast: take() would go
 * straight to attribute() (no --from-exec wait, no -g, CR3s used); a cache
 * hit is then filed from the entry's words (n[0] counts the kernel ones),
 * anything else goes through take() as a struct opvm_sample (counted in
 * n[1], and c is built again).  Inlined by force: take_entries() runs it
 * in two loops, and a call per entry costs more than the match.
 */
static inline __attribute__((always_inline)) void
take_entry(struct hitctx *c, const struct ring_entry *e, uint64_t now, bool fast, uint64_t n[2])
{
	const struct sview *v = sview_of_entry(e);
	struct opvm_sample x;
	struct cent *ce;
	uint64_t cr3n;

	/* a KSP sample never matches an entry (cent_fill()): take() has it */
	if (fast) {
		if (v->cpl != 3) {
			ce = kernel_cent(c, v, &cr3n);
			if (__builtin_expect(kernel_hit(c, v, ce, cr3n), 1)) {
				n[0]++;
				return;
			}
		} else {
			ce = user_cent(c, v, &cr3n);
			if (__builtin_expect(user_hit(c, v, ce, cr3n), 1))
				return;
		}
	}
	n[1]++;
	ring_entry_sample(e, &x);
	take(c->s, &x, now);
	*c = hitctx_of(c->s);
}

/* A run of flat entries read in place. */
static void take_entries(struct attribution *s, const struct ring_entry *e, size_t n,
			 uint64_t now)
{
	bool fast = !s->no_cr3 && !s->start_exec[0] && !s->chains;
	struct hitctx c = hitctx_of(s);
	const struct ring_entry *end = e + n;
	uint64_t k[2] = { 0, 0 };

	/* two loops: fast is then a constant in each */
	if (fast)
		for (; e < end; e++)
			take_entry(&c, e, now, true, k);
	else
		for (; e < end; e++)
			take_entry(&c, e, now, false, k);
	/* take() counted what went through it; the rest were hits */
	s->stats.kernel += k[0];
	s->stats.user += n - k[1] - k[0];
	s->stats.received += n - k[1];
}

/* Each ring through its reader: runs of flat entries read in place (one
 * tail publication a run); a sample with a chain or a stack comes alone,
 * copied.  The loop ends on a call that gives the last run back (the ring
 * empty, or max 0 at DRAIN_MAX): the producer has all its room again. */
static void drain(struct attribution *s, uint64_t now_ms)
{
	unsigned r;

	for (r = 0; r < s->nr_rings; r++) {
		struct ring_reader *rd = &s->rd[r];
		const struct ring_entry *e;
		size_t n, done = 0;

		while ((n = ring_read(s->rings[r], rd, &e,
				      DRAIN_MAX - done < READ_BATCH ? DRAIN_MAX - done : READ_BATCH))) {
			if (e)
				take_entries(s, e, n, now_ms);
			else
				take(s, &rd->one, now_ms);
			done += n;
		}
	}
	flush(s);
}

int attribution_run(struct attribution *s, uint64_t now_ms)
{
	int err;

	/* the model only changes between runs (one thread decodes and syncs) */
	caches_check(s);
	s->first_err = 0;
	held_retry(s, now_ms, false, false);
	drain(s, now_ms);
	attribution_defer_retry(s, now_ms, false, 0);
	err = s->first_err;
	s->first_err = 0;
	return err;
}

/*
 * A window ends: the held samples past their hold time are filed now, into
 * the closing window: each into the first window to end after its hold
 * time (its own, when it was held early enough in it).  Their longer waits
 * (introspection still searching for the kernel, or its next walk:
 * expired()) would file them windows later than their own: a KVM guest
 * that is not Linux held its samples for the whole 30 s search and then
 * 60 s each, its windows empty and a later one holding them all.  Younger
 * ones wait on.
 */
int attribution_window_end(struct attribution *s, uint64_t now_ms)
{
	int err;

	caches_check(s);
	s->first_err = 0;
	while (s->hold_nr && held_age(&s->held[s->hold_head], now_ms) >= s->hold_ms)
		held_evict_one(s, now_ms);	/* in time order: the oldest first */
	flush(s);
	err = s->first_err;
	s->first_err = 0;
	return err;
}

int attribution_forget_process(struct attribution *s, uint32_t tgid, uint64_t now_ms)
{
	int err;

	caches_check(s);
	s->first_err = 0;
	held_retry(s, now_ms, false, false);
	drain(s, now_ms);
	if (tgid && s->hold_nr) {
		s->force_tgid = tgid;
		held_retry(s, now_ms, false, true);
		s->force_tgid = 0;
		flush(s);
	}
	/* its waiting stacks need its mappings, which are about to go */
	if (tgid)
		attribution_defer_retry(s, now_ms, false, tgid);
	err = s->first_err;
	s->first_err = 0;
	return err;
}

int attribution_drain(struct attribution *s, uint64_t now_ms)
{
	int err;

	caches_check(s);
	s->first_err = 0;
	drain(s, now_ms);
	err = s->first_err;
	s->first_err = 0;
	return err;
}

int attribution_flush(struct attribution *s, uint64_t now_ms)
{
	int err = attribution_run(s, now_ms);

	caches_check(s);
	s->first_err = 0;
	held_retry(s, now_ms, true, true);
	flush(s);
	attribution_defer_retry(s, now_ms, true, 0);
	if (!err)
		err = s->first_err;
	s->first_err = 0;
	return err;
}

void attribution_os_counts(const struct attribution *s, uint64_t *os, uint64_t *boot)
{
	/* range cache hits are never boot code (no entry covers it) */
	*boot = s->boot_taken;
	*os = s->stats.received - s->boot_taken;
}

void attribution_get_stats(const struct attribution *s, struct opvm_stats *out)
{
	unsigned r;

	*out = s->stats;
	/* the drops each reader saw with what it read: every sync drains
	 * (and ends on an empty ring, which brings the count up to date)
	 * before its stats are written, the last one after sampling stopped */
	out->lost_overflow = 0;
	for (r = 0; r < s->nr_rings; r++)
		out->lost_overflow += s->rd[r].lost;
	out->guest_lost = gstate_get_stats(s->gs)->guest_lost;
}

void attribution_get_dwarf_stats(const struct attribution *s, struct attribution_dwarf_stats *out)
{
	*out = s->dws;
	out->waiting = s->dq_nr;
}

void attribution_get_bymap_stats(const struct attribution *s,
				 struct attribution_bymap_stats *out)
{
	struct execmap_stats xs = { 0 };

	*out = s->bm;
	if (s->xm)
		execmap_get_stats(s->xm, &xs);
	out->index_builds = xs.builds;
	out->index_mappings = xs.mappings;
	out->index_over_cap = xs.over_cap;
}

size_t attribution_nr_held(const struct attribution *s)
{
	return s->hold_nr;
}

uint64_t attribution_store_errors(const struct attribution *s)
{
	return s->store_errors;
}

int attribution_set_store(struct attribution *s, struct store *st)
{
	if (!s || !st || store_separate(st) != s->sep)
		return -EINVAL;
	flush(s);
	store_stacks_close(s->stk);
	s->stk = NULL;
	s->stk_failed = false;
	attribution_py_reset(s);
	/* every cache holds file ids of the old store's files */
	memset(s->vc, 0, ((size_t)s->vc_mask + 1) * sizeof(*s->vc));
	memset(s->vp, 0, ((size_t)s->vc_mask + 1) * sizeof(*s->vp));
	memset(s->uc, 0, ((size_t)1 << UBITS) * sizeof(*s->uc));
	memset(s->sc, 0, ((size_t)1 << SC_BITS) * sizeof(*s->sc));
	memset(s->fmap, 0, ((size_t)1 << s->fmap_bits) * sizeof(*s->fmap));
	s->nr_f = 1;
	caches_drop(s);
	s->st = st;
	return 0;
}
