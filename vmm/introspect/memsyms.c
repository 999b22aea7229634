// SPDX-License-Identifier: MIT
/*
 * Dynamic symbols from guest memory (vmm/introspect/memsyms.h): the ELF
 * headers read at the mapping, the tables found through PT_DYNAMIC and
 * checked against the segments, the PLT's stubs verified against its
 * relocations, then a small ELF file made of them.
 *
 * Reads are whole pages: small ones (headers, the dynamic section, hash
 * headers, a GNU hash chain) through a one-page cache, the symbol and
 * string tables, the relocation tables and the code scanned for the PLT
 * copied out whole with a mark per page that did not read.
 */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/array.h"
#include "lib/x86.h"
#include "vmm/introspect/memsyms.h"

#define GNU_BUCKETS_MAX	(1u << 20)
#define GNU_BLOOM_MAX	(1u << 20)
#define SYM_SIZE	sizeof(Elf64_Sym)

struct seg {
	uint64_t vaddr, off, filesz;
	bool exec;
	uint16_t shndx;			/* exec: its section in the ELF made */
};

struct ctx {
	const struct memsyms_mem *mem;
	struct memsyms_result *res;
	struct memsyms_limits lim;
	uint32_t pages_left;
	uint64_t bias;			/* run-time less link-time address */
	uint16_t type, machine;
	uint8_t osabi;			/* GNU for a binary with IFUNCs */
	struct seg segs[MEMSYMS_PHNUM_MAX];
	unsigned nr_segs, nr_exec;
	uint64_t dyn_vaddr, dyn_size;
	uint64_t cache_va;		/* the page in cache; 1: none */
	uint8_t cache[OPVM_PAGE_SIZE];
};

/* The tables PT_DYNAMIC names, link-time addresses. */
struct dyninfo {
	uint64_t symtab, strtab, strsz, syment, hash, gnu_hash;
	uint64_t pltgot, jmprel, pltrelsz, pltrel, rela, relasz, relaent, relacount;
};

/* A range of guest memory copied out; absent[i]: its i-th page did not read. */
struct region {
	uint8_t *b;
	uint64_t va, len;
	uint8_t *absent;
};

/* What goes into the ELF made. */
struct out {
	Elf64_Sym *syms;
	size_t nr, cap;
	char *str;
	size_t slen, scap;
};

static int refuse(struct ctx *c, const char *why)
{
	c->res->why = why;
	return -EINVAL;
}

/* ---- reading ---------------------------------------------------------------- */

static int page_get(struct ctx *c, uint64_t va, void *dst)
{
	int rc;

	if (!c->pages_left)
		return -E2BIG;
	c->pages_left--;
	rc = c->mem->read_page(c->mem->arg, va, dst);
	if (rc == -ENOENT) {
		c->res->pages_absent++;
		return -ENOENT;
	}
	if (rc)
		return -EFAULT;
	c->res->pages_read++;
	return 0;
}

/* len bytes at va, all of them, through the one-page cache.  0, -ENOENT
 * (a page not resident), -E2BIG, -EFAULT. */
static int cread(struct ctx *c, uint64_t va, void *buf, size_t len)
{
	uint8_t *d = buf;

	if (va >= OPVM_USER_TOP || len > OPVM_USER_TOP - va)
		return -EFAULT;
	while (len) {
		uint64_t pva = va & ~OPVM_PAGE_MASK, in = va - pva;
		size_t n = len < OPVM_PAGE_SIZE - in ? len : (size_t)(OPVM_PAGE_SIZE - in);
		int rc;

		if (c->cache_va != pva) {
			c->cache_va = 1;
			rc = page_get(c, pva, c->cache);
			if (rc)
				return rc;
			c->cache_va = pva;
		}
		memcpy(d, c->cache + in, n);
		d += n;
		va += n;
		len -= n;
	}
	return 0;
}

static void region_free(struct region *r)
{
	free(r->b);
	free(r->absent);
	r->b = r->absent = NULL;
}

/* [va, va + len) into r (len > 0, inside the user half: the caller's
 * checks).  A page that does not read is zeros and marked.  0 or -errno. */
static int region_read(struct ctx *c, uint64_t va, uint64_t len, struct region *r)
{
	uint64_t first = va & ~OPVM_PAGE_MASK;
	uint64_t np = ((va + len - 1) & ~OPVM_PAGE_MASK) / OPVM_PAGE_SIZE - first / OPVM_PAGE_SIZE + 1;
	uint8_t page[OPVM_PAGE_SIZE];

	r->va = va;
	r->len = len;
	r->b = malloc(len);
	r->absent = calloc(np, 1);
	if (!r->b || !r->absent) {
		region_free(r);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < np; i++) {
		uint64_t pva = first + i * OPVM_PAGE_SIZE, lo = pva < va ? va : pva;
		uint64_t hi = pva + OPVM_PAGE_SIZE < va + len ? pva + OPVM_PAGE_SIZE : va + len;
		int rc = page_get(c, pva, page);

		if (rc == -ENOENT) {
			r->absent[i] = 1;
			memset(r->b + (lo - va), 0, hi - lo);
			continue;
		}
		if (rc) {
			region_free(r);
			return rc;
		}
		memcpy(r->b + (lo - va), page + (lo - pva), hi - lo);
	}
	return 0;
}

/* Whether r's bytes [off, off + n) all read (off + n <= r->len). */
static bool region_ok(const struct region *r, uint64_t off, uint64_t n)
{
	uint64_t base = r->va & ~OPVM_PAGE_MASK;

	for (uint64_t p = (r->va + off) & ~OPVM_PAGE_MASK; p < r->va + off + n; p += OPVM_PAGE_SIZE)
		if (r->absent[(p - base) / OPVM_PAGE_SIZE])
			return false;
	return true;
}

/* ---- headers ------------------------------------------------------------------ */

/* The segment whose file-backed bytes hold link-time [v, v + len), or -1. */
static int seg_of(const struct ctx *c, uint64_t v, uint64_t len)
{
	for (unsigned i = 0; i < c->nr_segs; i++) {
		const struct seg *s = &c->segs[i];

		if (v >= s->vaddr && len <= s->filesz && v - s->vaddr <= s->filesz - len)
			return (int)i;
	}
	return -1;
}

/* One program header: PT_LOAD kept, PT_DYNAMIC noted. */
static int phdr_take(struct ctx *c, const Elf64_Phdr *p)
{
	uint64_t end;

	if (p->p_type == PT_DYNAMIC) {
		c->dyn_vaddr = p->p_vaddr;
		c->dyn_size = p->p_filesz;
		return 0;
	}
	if (p->p_type != PT_LOAD || !p->p_filesz)
		return 0;
	if (__builtin_add_overflow(p->p_vaddr, p->p_memsz, &end) || end > OPVM_USER_TOP ||
	    __builtin_add_overflow(p->p_offset, p->p_filesz, &end) ||
	    p->p_filesz > p->p_memsz ||
	    (p->p_vaddr & OPVM_PAGE_MASK) != (p->p_offset & OPVM_PAGE_MASK))
		return refuse(c, "a PT_LOAD header out of bounds");
	c->segs[c->nr_segs++] = (struct seg){ .vaddr = p->p_vaddr, .off = p->p_offset,
					      .filesz = p->p_filesz,
					      .exec = !!(p->p_flags & PF_X) };
	return 0;
}

/* The load bias from the executable mapping, checked: an executable
 * segment at its start and file offset, the segment of file offset 0
 * where the header was read. */
static int bias_find(struct ctx *c, const struct memsyms_map *x)
{
	uint64_t base = x->start - x->pgoff;
	bool found = false;

	for (unsigned i = 0; i < c->nr_segs && !found; i++) {
		const struct seg *s = &c->segs[i];

		if (s->exec && (s->off & ~OPVM_PAGE_MASK) == x->pgoff &&
		    (s->vaddr & ~OPVM_PAGE_MASK) <= x->start) {
			c->bias = x->start - (s->vaddr & ~OPVM_PAGE_MASK);
			found = true;
		}
	}
	if (!found)
		return refuse(c, "no executable segment where the mapping is");
	if (c->type == ET_EXEC && c->bias)
		return refuse(c, "an ET_EXEC mapped away from its addresses");
	for (unsigned i = 0; i < c->nr_segs; i++)
		if (c->segs[i].off < OPVM_PAGE_SIZE &&
		    c->segs[i].vaddr - c->segs[i].off + c->bias == base)
			return 0;
	return refuse(c, "file offset 0 is not where the headers say");
}

static int headers(struct ctx *c, const struct memsyms_map *x)
{
	uint64_t base = x->start - x->pgoff;
	Elf64_Phdr ph[MEMSYMS_PHNUM_MAX];
	Elf64_Ehdr eh;
	int rc;

	if (x->start > x->end || x->end > OPVM_USER_TOP || x->pgoff > x->start ||
	    (x->start & OPVM_PAGE_MASK) || (x->pgoff & OPVM_PAGE_MASK))
		return refuse(c, "a mapping out of bounds");
	rc = cread(c, base, &eh, sizeof(eh));
	if (rc)
		return rc;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
		return refuse(c, "not a 64-bit little-endian executable or shared object");
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || !eh.e_phnum || eh.e_phnum > MEMSYMS_PHNUM_MAX ||
	    eh.e_phoff > OPVM_PAGE_SIZE * 16)
		return refuse(c, "program headers out of bounds");
	rc = cread(c, base + eh.e_phoff, ph, eh.e_phnum * sizeof(ph[0]));
	if (rc)
		return rc;
	c->type = eh.e_type;
	c->machine = eh.e_machine;
	c->osabi = eh.e_ident[EI_OSABI];
	for (unsigned i = 0; i < eh.e_phnum; i++)
		if ((rc = phdr_take(c, &ph[i])))
			return rc;
	if (!c->dyn_size)
		return refuse(c, "no PT_DYNAMIC");
	return bias_find(c, x);
}

/* ---- the dynamic section -------------------------------------------------------- */

/* A table of len bytes that a d_ptr value v names: v taken as run-time
 * (relocated by ld.so) when v less the bias is in a segment, else as
 * link-time.  *lt: its link-time address.  false: in no segment either way
 * (ptr_link(): refused, -EINVAL). */
static bool ptr_find(struct ctx *c, uint64_t v, uint64_t len, uint64_t *lt)
{
	if (c->bias && v >= c->bias && seg_of(c, v - c->bias, len) >= 0) {
		*lt = v - c->bias;
		c->res->relocated = 1;
		return true;
	}
	if (seg_of(c, v, len) >= 0) {
		*lt = v;
		return true;
	}
	return false;
}

static int ptr_link(struct ctx *c, uint64_t v, uint64_t len, uint64_t *lt)
{
	return ptr_find(c, v, len, lt) ? 0 : refuse(c, "a dynamic table outside the file's segments");
}

static int dynamic(struct ctx *c, struct dyninfo *d)
{
	Elf64_Dyn dyn[MEMSYMS_DYN_MAX];
	uint64_t n = c->dyn_size / sizeof(dyn[0]);
	int rc;

	if (n > MEMSYMS_DYN_MAX)
		n = MEMSYMS_DYN_MAX;
	if (!n || seg_of(c, c->dyn_vaddr, n * sizeof(dyn[0])) < 0)
		return refuse(c, "PT_DYNAMIC outside the file's segments");
	rc = cread(c, c->dyn_vaddr + c->bias, dyn, n * sizeof(dyn[0]));
	if (rc)
		return rc;
	memset(d, 0, sizeof(*d));
	for (uint64_t i = 0; i < n && dyn[i].d_tag != DT_NULL; i++) {
		uint64_t v = dyn[i].d_un.d_val, *slot = NULL;

		switch (dyn[i].d_tag) {
		case DT_SYMTAB: slot = &d->symtab; break;
		case DT_STRTAB: slot = &d->strtab; break;
		case DT_STRSZ: slot = &d->strsz; break;
		case DT_SYMENT: slot = &d->syment; break;
		case DT_HASH: slot = &d->hash; break;
		case DT_GNU_HASH: slot = &d->gnu_hash; break;
		case DT_PLTGOT: slot = &d->pltgot; break;
		case DT_JMPREL: slot = &d->jmprel; break;
		case DT_PLTRELSZ: slot = &d->pltrelsz; break;
		case DT_PLTREL: slot = &d->pltrel; break;
		case DT_RELA: slot = &d->rela; break;
		case DT_RELASZ: slot = &d->relasz; break;
		case DT_RELAENT: slot = &d->relaent; break;
		case DT_RELACOUNT: slot = &d->relacount; break;
		default: break;
		}
		if (slot && !*slot)
			*slot = v;
	}
	if (!d->symtab || !d->strtab || !d->strsz)
		return refuse(c, "no DT_SYMTAB, DT_STRTAB or DT_STRSZ");
	if (d->syment && d->syment != SYM_SIZE)
		return refuse(c, "DT_SYMENT is not an Elf64_Sym");
	if (d->strsz > c->lim.max_str)
		return refuse(c, "DT_STRSZ over the cap");
	if (!d->hash && !d->gnu_hash)
		return refuse(c, "no DT_HASH or DT_GNU_HASH to count the symbols");
	return 0;
}

/* ---- how many symbols ------------------------------------------------------------- */

static int count_sysv(struct ctx *c, uint64_t v, uint32_t *n)
{
	uint32_t h[2];
	uint64_t lt;
	int rc = ptr_link(c, v, sizeof(h), &lt);

	if (!rc)
		rc = cread(c, lt + c->bias, h, sizeof(h));
	if (!rc)
		*n = h[1];	/* nchain: one entry per symbol */
	c->res->hash = rc ? NULL : "sysv";
	return rc;
}

/* The entry after the largest bucket's chain: the last with bit 0 set. */
static int gnu_chain_end(struct ctx *c, uint64_t chain_lt, uint32_t symoff, uint32_t from,
			 uint32_t *n)
{
	for (uint64_t i = from;; i++) {
		uint64_t at = chain_lt + (i - symoff) * 4;
		uint32_t h;
		int rc;

		if (i >= (uint64_t)c->lim.max_syms) {
			c->res->capped++;
			*n = c->lim.max_syms;
			return 0;
		}
		if (seg_of(c, at, 4) < 0)
			return refuse(c, "a GNU hash chain that does not end in its segment");
		if ((rc = cread(c, at + c->bias, &h, 4)))
			return rc;
		if (h & 1) {
			*n = (uint32_t)i + 1;
			return 0;
		}
	}
}

static int count_gnu(struct ctx *c, uint64_t v, uint32_t *n)
{
	uint32_t h[4], max = 0;
	uint64_t lt, blen;
	struct region b;
	int rc = ptr_link(c, v, sizeof(h), &lt);

	if (rc || (rc = cread(c, lt + c->bias, h, sizeof(h))))
		return rc;
	if (!h[0] || h[0] > GNU_BUCKETS_MAX || h[2] > GNU_BLOOM_MAX)
		return refuse(c, "a GNU hash table of impossible size");
	blen = (uint64_t)h[0] * 4;
	if (seg_of(c, lt, 16 + (uint64_t)h[2] * 8 + blen) < 0)
		return refuse(c, "GNU hash buckets outside their segment");
	rc = region_read(c, lt + 16 + (uint64_t)h[2] * 8 + c->bias, blen, &b);
	if (rc)
		return rc;
	for (uint64_t i = 0; i < h[0] && !rc; i++) {
		uint32_t x;

		if (!region_ok(&b, i * 4, 4))
			rc = -ENOENT;	/* the count would be a guess */
		memcpy(&x, b.b + i * 4, 4);
		max = x > max ? x : max;
	}
	region_free(&b);
	c->res->hash = "gnu";
	if (rc)
		return rc;
	if (!max) {		/* no bucket used: only the symbols before symoffset */
		*n = h[1];
		return 0;
	}
	if (max < h[1])
		return refuse(c, "a GNU hash bucket below its symoffset");
	return gnu_chain_end(c, lt + 16 + (uint64_t)h[2] * 8 + blen, h[1], max, n);
}

/* ---- symbols ----------------------------------------------------------------------- */

/* The exec segment holding link-time address v, or NULL. */
static const struct seg *code_of(const struct ctx *c, uint64_t v)
{
	int i = seg_of(c, v, 1);

	return i >= 0 && c->segs[i].exec ? &c->segs[i] : NULL;
}

/* The name at off of the string table: its length (1..NAME_MAX), 0 when
 * it does not end inside the table in time, -1 on a page not resident. */
static long name_len(const struct region *s, uint64_t off)
{
	for (uint64_t i = off; i < s->len && i - off <= MEMSYMS_NAME_MAX; i++) {
		if (((s->va + i) & OPVM_PAGE_MASK) == 0 || i == off)
			if (!region_ok(s, i, 1))
				return -1;
		if (!s->b[i])
			return (long)(i - off);
	}
	return 0;
}

/* A string table starts with the empty name (st_name 0). */
static int out_init(struct out *o)
{
	if (array_grow(&o->str, &o->scap, 1, 1, 16384))
		return -ENOMEM;
	o->str[0] = '\0';
	o->slen = 1;
	return 0;
}

static int out_add(struct out *o, const Elf64_Sym *s, const struct seg *code, const char *name,
		   size_t len)
{
	if (array_grow(&o->syms, &o->cap, o->nr + 1, sizeof(*o->syms), 1024) ||
	    array_grow(&o->str, &o->scap, o->slen + len + 1, 1, 16384))
		return -ENOMEM;
	o->syms[o->nr] = *s;
	o->syms[o->nr].st_name = (uint32_t)o->slen;
	o->syms[o->nr].st_shndx = code->shndx;
	o->nr++;
	/* names become report text: no control bytes */
	for (size_t i = 0; i < len; i++)
		o->str[o->slen + i] = (unsigned char)name[i] < 0x21 || name[i] == 0x7f ? '?' : name[i];
	o->slen += len;
	o->str[o->slen++] = '\0';
	return 0;
}

static int sym_one(struct ctx *c, const struct region *t, const struct region *s, uint32_t i,
		   struct out *o)
{
	struct memsyms_result *res = c->res;
	const struct seg *code;
	Elf64_Sym sym;
	long len;

	if (!region_ok(t, (uint64_t)i * SYM_SIZE, SYM_SIZE)) {
		res->absent++;
		return 0;
	}
	memcpy(&sym, t->b + (uint64_t)i * SYM_SIZE, SYM_SIZE);
	if ((ELF64_ST_TYPE(sym.st_info) != STT_FUNC && ELF64_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) ||
	    sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE ||
	    !(code = code_of(c, sym.st_value))) {
		res->skipped++;
		return 0;
	}
	len = sym.st_name < s->len ? name_len(s, sym.st_name) : 0;
	if (len < 0) {
		res->absent++;
		return 0;
	}
	if (!len) {
		res->bad++;
		return 0;
	}
	res->kept++;
	return out_add(o, &sym, code, (const char *)s->b + sym.st_name, (size_t)len);
}

static int symbols(struct ctx *c, const struct dyninfo *d, uint32_t n, struct out *o)
{
	struct region t = { 0 }, s = { 0 };
	uint64_t sym_lt, str_lt;
	int rc;

	if (n < 2)
		return -ENODATA;	/* entry 0 is the null symbol */
	if (n > c->lim.max_syms) {
		c->res->capped += n - c->lim.max_syms;
		n = c->lim.max_syms;
	}
	if ((rc = ptr_link(c, d->symtab, (uint64_t)n * SYM_SIZE, &sym_lt)) ||
	    (rc = ptr_link(c, d->strtab, d->strsz, &str_lt)))
		return rc;
	if (sym_lt < str_lt + d->strsz && str_lt < sym_lt + (uint64_t)n * SYM_SIZE)
		return refuse(c, "the symbol and string tables overlap");
	if ((rc = region_read(c, sym_lt + c->bias, (uint64_t)n * SYM_SIZE, &t)) ||
	    (rc = region_read(c, str_lt + c->bias, d->strsz, &s))) {
		region_free(&t);
		return rc;
	}
	for (uint32_t i = 1; i < n && !rc; i++)
		rc = sym_one(c, &t, &s, i, o);
	region_free(&t);
	region_free(&s);
	if (rc || o->nr)
		return rc;
	/* nothing kept: for want of pages, or none to keep */
	return c->res->absent ? -ENOENT : -ENODATA;
}

/* ---- the PLT (memsyms.h) ---------------------------------------------------------------- */

enum { PLT_LAZY, PLT_SEC, PLT_GOT };

struct plt_range {
	uint64_t addr, size;		/* link-time */
	unsigned kind;
};

/* The GOT slots a stub may jump through (link-time r_offsets) and the
 * ranges found. */
struct plt {
	uint64_t got;			/* DT_PLTGOT; 0: none */
	uint64_t *jidx;			/* DT_JMPREL's i-th entry's slot; 0: not taken */
	uint64_t *jslot, *gslot;	/* JUMP_SLOT or IRELATIVE, GLOB_DAT: sorted */
	uint32_t nidx, nj, ng;
	bool jmprel;			/* there is a DT_JMPREL, whether it lies or not */
	struct plt_range r[MEMSYMS_PLT_RANGES];
	unsigned nr;
};

static const uint8_t ENDBR64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool slot_in(const uint64_t *v, uint32_t n, uint64_t slot)
{
	return n && bsearch(&slot, v, n, sizeof(*v), u64_cmp);
}

static void plt_free(struct plt *p)
{
	free(p->jidx);
	free(p->jslot);
	free(p->gslot);
}

/*
 * The RELA table at d_ptr v of size bytes, from entry skip on (the RELATIVE
 * ones DT_RELACOUNT counts come first and are not wanted), at most
 * MEMSYMS_PLT_RELS entries: the r_offset of each resident entry of type t1
 * or t2 whose slot lies in a segment, sorted, into *slots (*ns); idx (may
 * be NULL): per entry its slot, 0 when not taken.  A table that lies is
 * counted and left unused.  0 or -errno.
 */
static int rels_read(struct ctx *c, uint64_t v, uint64_t size, uint64_t skip, uint32_t t1,
		     uint32_t t2, uint64_t **slots, uint32_t *ns, uint64_t **idx, uint32_t *nidx)
{
	uint64_t lt, n = size / sizeof(Elf64_Rela);
	struct region r;
	int rc;

	if (size % sizeof(Elf64_Rela) || !ptr_find(c, v, size, &lt)) {
		c->res->plt_refused++;
		return 0;
	}
	if (skip >= n)
		return 0;
	if (n - skip > MEMSYMS_PLT_RELS) {
		c->res->plt_refused++;
		n = skip + MEMSYMS_PLT_RELS;
	}
	n -= skip;
	rc = region_read(c, lt + skip * sizeof(Elf64_Rela) + c->bias, n * sizeof(Elf64_Rela), &r);
	if (rc)
		return rc;
	*slots = calloc(n, sizeof(**slots));
	if (idx)
		*idx = calloc(n, sizeof(**idx));
	if (!*slots || (idx && !*idx)) {
		region_free(&r);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		Elf64_Rela e;
		uint32_t t;

		if (!region_ok(&r, i * sizeof(e), sizeof(e)))
			continue;
		memcpy(&e, r.b + i * sizeof(e), sizeof(e));
		t = (uint32_t)ELF64_R_TYPE(e.r_info);
		if (t != t1 && t != t2)
			continue;
		if (!e.r_offset || seg_of(c, e.r_offset, 8) < 0) {
			c->res->plt_refused++;
			continue;
		}
		if (idx)
			(*idx)[i] = e.r_offset;
		(*slots)[(*ns)++] = e.r_offset;
	}
	if (idx)
		*nidx = (uint32_t)n;
	region_free(&r);
	qsort(*slots, *ns, sizeof(**slots), u64_cmp);
	return 0;
}

static int plt_tables(struct ctx *c, const struct dyninfo *d, struct plt *p)
{
	uint64_t got;
	int rc = 0;

	if (d->pltgot && ptr_find(c, d->pltgot, 24, &got))
		p->got = got;
	else if (d->pltgot)
		c->res->plt_refused++;
	p->jmprel = d->jmprel;
	if (d->jmprel && d->pltrel != DT_RELA)
		c->res->plt_refused++;
	else if (d->jmprel)
		rc = rels_read(c, d->jmprel, d->pltrelsz, 0, R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE,
			       &p->jslot, &p->nj, &p->jidx, &p->nidx);
	if (rc || !d->rela || !d->relasz)
		return rc;
	if (d->relaent && d->relaent != sizeof(Elf64_Rela)) {
		c->res->plt_refused++;
		return 0;
	}
	return rels_read(c, d->rela, d->relasz, d->relacount, R_X86_64_GLOB_DAT, R_X86_64_GLOB_DAT,
			 &p->gslot, &p->ng, NULL, NULL);
}

/* The target of a rip-relative rel32 at b in an instruction that ends at
 * link-time address next. */
static uint64_t rip_to(const uint8_t *b, uint64_t next)
{
	int32_t d;

	memcpy(&d, b, 4);
	return next + (uint64_t)(int64_t)d;
}

/* n bytes of window w (link-time lo) at a, all resident, or NULL. */
static const uint8_t *wat(const struct region *w, uint64_t lo, uint64_t a, uint64_t n)
{
	if (a < lo || a - lo > w->len || n > w->len - (a - lo) || !region_ok(w, a - lo, n))
		return NULL;
	return w->b + (a - lo);
}

/* PLT0 at a: `pushq GOT+8(%rip); [bnd] jmp *GOT+16(%rip)` and binutils'
 * padding. */
static bool is_plt0(const uint8_t *b, uint64_t a, uint64_t got)
{
	if (b[0] != 0xff || b[1] != 0x35 || rip_to(b + 2, a + 6) != got + 8)
		return false;
	if (b[6] == 0xff && b[7] == 0x25)
		return rip_to(b + 8, a + 12) == got + 16 && !memcmp(b + 12, "\x0f\x1f\x40\x00", 4);
	return b[6] == 0xf2 && b[7] == 0xff && b[8] == 0x25 && rip_to(b + 9, a + 13) == got + 16 &&
	       !memcmp(b + 13, "\x0f\x1f\x00", 3);
}

/*
 * A lazy entry at e of the PLT whose PLT0 is at p0: `jmp *slot; push idx;
 * jmp PLT0`, or IBT's `endbr64; push idx; [bnd] jmp PLT0` (its slot's jump
 * is in .plt.sec).  1 when it jumps to p0 and idx names a JMPREL
 * relocation whose slot is the one it jumps through; 0 a shape that does
 * not verify; -1 no such shape.
 */
static int lazy_entry(const struct plt *p, const uint8_t *b, uint64_t e, uint64_t p0)
{
	uint64_t slot = 0, to;
	uint32_t idx;

	if (b[0] == 0xff && b[1] == 0x25 && b[6] == 0x68 && b[11] == 0xe9) {
		slot = rip_to(b + 2, e + 6);
		memcpy(&idx, b + 7, 4);
		to = rip_to(b + 12, e + 16);
	} else if (!memcmp(b, ENDBR64, 4) && b[4] == 0x68 && b[9] == 0xe9 && b[14] == 0x66 &&
		   b[15] == 0x90) {
		memcpy(&idx, b + 5, 4);
		to = rip_to(b + 10, e + 14);
	} else if (!memcmp(b, ENDBR64, 4) && b[4] == 0x68 && b[9] == 0xf2 && b[10] == 0xe9 &&
		   b[15] == 0x90) {
		memcpy(&idx, b + 5, 4);
		to = rip_to(b + 11, e + 15);
	} else {
		return -1;
	}
	return to == p0 && idx < p->nidx && p->jidx[idx] && (!slot || slot == p->jidx[idx]);
}

/* `[endbr64;] [bnd] jmp *slot(%rip)` with binutils' padding, 16 bytes
 * (.plt.sec, IBT's .plt.got) or 8 (.plt.got): its slot and *len, or 0. */
static uint64_t jmp_stub(const struct region *w, uint64_t lo, uint64_t e, unsigned *len)
{
	const uint8_t *b = wat(w, lo, e, 16);

	*len = 16;
	if (b && !memcmp(b, ENDBR64, 4) && b[4] == 0xff && b[5] == 0x25 &&
	    !memcmp(b + 10, "\x66\x0f\x1f\x44\x00\x00", 6))
		return rip_to(b + 6, e + 10);
	if (b && !memcmp(b, ENDBR64, 4) && b[4] == 0xf2 && b[5] == 0xff && b[6] == 0x25 &&
	    !memcmp(b + 11, "\x0f\x1f\x44\x00\x00", 5))
		return rip_to(b + 7, e + 11);
	*len = 8;
	b = wat(w, lo, e, 8);
	if (b && b[0] == 0xff && b[1] == 0x25 && b[6] == 0x66 && b[7] == 0x90)
		return rip_to(b + 2, e + 6);
	return 0;
}

static void plt_add(struct ctx *c, struct plt *p, unsigned kind, uint64_t a, uint64_t end)
{
	if (p->nr == MEMSYMS_PLT_RANGES) {
		c->res->plt_refused++;
		return;
	}
	p->r[p->nr++] = (struct plt_range){ a, end - a, kind };
}

/* The lazy PLT from its PLT0 at a: the end of its verified entries.  A
 * PLT0 with none is taken only when there is no DT_JMPREL (-fno-plt). */
static uint64_t lazy_run(struct ctx *c, struct plt *p, const struct region *w, uint64_t lo,
			 uint64_t a)
{
	uint64_t e = a + 16;
	const uint8_t *b;
	int ok = -1;

	for (uint32_t k = 0; k < p->nidx && (b = wat(w, lo, e, 16)); k++, e += 16) {
		if ((ok = lazy_entry(p, b, e, a)) != 1)
			break;
		c->res->plt_stubs++;
	}
	c->res->plt_unverified += !ok;
	if (e > a + 16 || !p->jmprel)
		plt_add(c, p, PLT_LAZY, a, e);
	return e;
}

/* A run of jmp stubs from a of one size, each through a slot of the right
 * kind: .plt.sec's JMPREL slots, .plt.got's GLOB_DAT ones.  Its end, or a
 * when there is none. */
static uint64_t stub_run(struct ctx *c, struct plt *p, const struct region *w, uint64_t lo,
			 uint64_t a)
{
	unsigned len, first = 0, kind = PLT_SEC;
	uint64_t e = a, slot;

	while ((slot = jmp_stub(w, lo, e, &len)) && (!first || len == first) && !(e & (len - 1))) {
		bool sec = len == 16 && slot_in(p->jslot, p->nj, slot);
		bool got = slot_in(p->gslot, p->ng, slot);

		if (!first && (sec || got))
			kind = sec ? PLT_SEC : PLT_GOT;
		if (!(kind == PLT_SEC ? sec : got)) {
			c->res->plt_unverified += !sec && !got;	/* else: the next run */
			break;
		}
		first = len;
		c->res->plt_stubs++;
		e += len;
	}
	if (e > a)
		plt_add(c, p, kind, a, e);
	return e;
}

/* The first pages of an executable segment, where GNU ld puts the PLT:
 * enough for every relocation's entries, within *pages. */
static int plt_segment(struct ctx *c, struct plt *p, const struct seg *s, uint32_t *pages)
{
	uint64_t want = 256 + 32 * ((uint64_t)p->nidx + 1) + 16 * (uint64_t)p->ng, np;
	uint64_t room = (uint64_t)*pages * OPVM_PAGE_SIZE - (s->vaddr & OPVM_PAGE_MASK), a;
	struct region w;
	int rc;

	want = want < s->filesz ? want : s->filesz;
	want = want < room ? want : room;
	np = ((s->vaddr + want + OPVM_PAGE_MASK) & ~OPVM_PAGE_MASK) / OPVM_PAGE_SIZE -
	     s->vaddr / OPVM_PAGE_SIZE;
	*pages -= np < *pages ? (uint32_t)np : *pages;
	if (!want || (rc = region_read(c, s->vaddr + c->bias, want, &w)))
		return want ? rc : 0;
	for (a = (s->vaddr + 7) & ~7ull; a + 8 <= s->vaddr + want;) {
		const uint8_t *b = wat(&w, s->vaddr, a, 16);
		uint64_t next = 0;

		if (b && !(a & 15) && p->got && is_plt0(b, a, p->got))
			next = lazy_run(c, p, &w, s->vaddr, a);
		else
			next = stub_run(c, p, &w, s->vaddr, a);
		a = next > a ? next : a + 8;
	}
	region_free(&w);
	return 0;
}

/* The PLT's verified ranges into p; a read that fails leaves none.  0 or
 * -ENOMEM. */
static int plt_find(struct ctx *c, const struct dyninfo *d, struct plt *p)
{
	uint64_t before = c->res->pages_read;
	uint32_t pages = MEMSYMS_PLT_PAGES;
	int rc = 0;

	if (c->machine != EM_X86_64 || (!d->pltgot && !d->jmprel && !d->rela))
		return 0;
	rc = plt_tables(c, d, p);
	for (unsigned i = 0; !rc && i < c->nr_segs && pages && (p->got || p->nj || p->ng); i++)
		if (c->segs[i].exec)
			rc = plt_segment(c, p, &c->segs[i], &pages);
	c->res->plt_pages = (uint32_t)(c->res->pages_read - before);
	if (rc)
		p->nr = 0;
	c->res->plt_ranges = p->nr;
	return rc == -ENOMEM ? rc : 0;
}

/* ---- the ELF made --------------------------------------------------------------------- */

static const char SHSTR[] =
	"\0.text\0.dynsym\0.dynstr\0.note.gnu.build-id\0.shstrtab\0.plt\0.plt.sec\0.plt.got";
enum { SH_TEXT = 1, SH_DYNSYM = 7, SH_DYNSTR = 15, SH_NOTE = 23, SH_SHSTR = 42 };
/* by plt_range kind: the names the file's sections have */
static const uint32_t SH_PLT[] = { [PLT_LAZY] = 52, [PLT_SEC] = 57, [PLT_GOT] = 66 };

static uint64_t align8(uint64_t v)
{
	return (v + 7) & ~7ull;
}

static void shdr_set(Elf64_Shdr *sh, uint32_t name, uint32_t type, uint64_t flags, uint64_t addr,
		     uint64_t off, uint64_t size)
{
	*sh = (Elf64_Shdr){ .sh_name = name, .sh_type = type, .sh_flags = flags,
			    .sh_addr = addr, .sh_offset = off, .sh_size = size,
			    .sh_addralign = type == SHT_STRTAB ? 1 : 8 };
}

/* The segment holding link-time [a, a + n): its file offset there. */
static uint64_t file_off(const struct ctx *c, uint64_t a, uint64_t n)
{
	int i = seg_of(c, a, n);

	return i >= 0 ? c->segs[i].off + (a - c->segs[i].vaddr) : 0;
}

/* Layout: header, the PT_LOADs, the note, .dynsym, .dynstr, .shstrtab,
 * then the section headers: null, one .text per exec segment, .dynsym,
 * .dynstr, the note, .shstrtab, then the PLT's (SHT_NOBITS, as .text).
 * e_flags: MEMSYMS_VERSION. */
static int elf_make(const struct ctx *c, const struct out *o, const struct plt *p,
		    const uint8_t *bid, size_t bid_len, void **outp, size_t *out_len)
{
	uint64_t ph = sizeof(Elf64_Ehdr), note = align8(ph + c->nr_segs * sizeof(Elf64_Phdr));
	uint64_t nsz = 16 + align8(bid_len), sym = align8(note + nsz);
	uint64_t str = sym + (o->nr + 1) * SYM_SIZE, shs = str + o->slen;
	uint64_t sh = align8(shs + sizeof(SHSTR)), shnum = 1 + c->nr_exec + 4 + p->nr;
	uint8_t *b = calloc(1, sh + shnum * sizeof(Elf64_Shdr));
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	Elf64_Shdr *s;
	unsigned k = 1;

	if (!b)
		return -ENOMEM;
	*eh = (Elf64_Ehdr){ .e_type = c->type, .e_machine = c->machine, .e_version = EV_CURRENT,
			    .e_phoff = ph, .e_shoff = sh, .e_ehsize = sizeof(Elf64_Ehdr),
			    .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = (uint16_t)c->nr_segs,
			    .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = (uint16_t)shnum,
			    .e_shstrndx = (uint16_t)(1 + c->nr_exec + 3), .e_flags = MEMSYMS_VERSION };
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_ident[EI_OSABI] = c->osabi;
	for (unsigned i = 0; i < c->nr_segs; i++) {
		const struct seg *g = &c->segs[i];

		((Elf64_Phdr *)(b + ph))[i] = (Elf64_Phdr){
			.p_type = PT_LOAD, .p_flags = PF_R | (g->exec ? PF_X : 0),
			.p_offset = g->off, .p_vaddr = g->vaddr, .p_paddr = g->vaddr,
			.p_filesz = g->filesz, .p_memsz = g->filesz, .p_align = OPVM_PAGE_SIZE };
	}
	memcpy(b + note, &(uint32_t[3]){ 4, (uint32_t)bid_len, NT_GNU_BUILD_ID }, 12);
	memcpy(b + note + 12, "GNU", 4);
	memcpy(b + note + 16, bid, bid_len);
	if (o->nr)	/* none: a PLT alone */
		memcpy(b + sym + SYM_SIZE, o->syms, o->nr * SYM_SIZE);
	memcpy(b + str, o->str, o->slen);
	memcpy(b + shs, SHSTR, sizeof(SHSTR));
	s = (Elf64_Shdr *)(b + sh);
	for (unsigned i = 0; i < c->nr_segs; i++)
		if (c->segs[i].exec)
			shdr_set(&s[k++], SH_TEXT, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR,
				 c->segs[i].vaddr, c->segs[i].off, c->segs[i].filesz);
	shdr_set(&s[k], SH_DYNSYM, SHT_DYNSYM, SHF_ALLOC, 0, sym, (o->nr + 1) * SYM_SIZE);
	s[k].sh_link = k + 1;
	s[k].sh_info = 1;
	s[k++].sh_entsize = SYM_SIZE;
	shdr_set(&s[k++], SH_DYNSTR, SHT_STRTAB, SHF_ALLOC, 0, str, o->slen);
	shdr_set(&s[k++], SH_NOTE, SHT_NOTE, SHF_ALLOC, 0, note, nsz);
	shdr_set(&s[k++], SH_SHSTR, SHT_STRTAB, 0, 0, shs, sizeof(SHSTR));
	for (unsigned i = 0; i < p->nr; i++)
		shdr_set(&s[k++], SH_PLT[p->r[i].kind], SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR,
			 p->r[i].addr, file_off(c, p->r[i].addr, p->r[i].size), p->r[i].size);
	*outp = b;
	*out_len = sh + shnum * sizeof(Elf64_Shdr);
	return 0;
}

/* ---- the whole read ------------------------------------------------------------------- */

static void limits_set(struct ctx *c, const struct memsyms_limits *lim)
{
	if (lim)
		c->lim = *lim;
	if (!c->lim.max_syms || c->lim.max_syms > MEMSYMS_MAX_SYMS)
		c->lim.max_syms = MEMSYMS_MAX_SYMS;
	if (!c->lim.max_str || c->lim.max_str > MEMSYMS_MAX_STR)
		c->lim.max_str = MEMSYMS_MAX_STR;
	if (!c->lim.max_pages)
		c->lim.max_pages = MEMSYMS_MAX_PAGES;
	c->pages_left = c->lim.max_pages;
}

int memsyms_current(const void *head, size_t len)
{
	const Elf64_Ehdr *eh = head;

	return len >= sizeof(*eh) && !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
	       eh->e_flags == MEMSYMS_VERSION;
}

int memsyms_read(const struct memsyms_mem *mem, const struct memsyms_map *exec,
		 const uint8_t *bid, size_t bid_len, const struct memsyms_limits *lim,
		 void **out, size_t *out_len, struct memsyms_result *res)
{
	struct ctx *c = calloc(1, sizeof(*c));
	struct out o = { 0 };
	struct plt p = { 0 };
	struct dyninfo d;
	uint32_t n = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	*out = NULL;
	*out_len = 0;
	if (!c)
		return -ENOMEM;
	c->mem = mem;
	c->res = res;
	c->cache_va = 1;
	limits_set(c, lim);
	if (!bid_len || bid_len > 32)
		rc = refuse(c, "no build-id to name the symbols by");
	else if (!(rc = headers(c, exec)) && !(rc = dynamic(c, &d)))
		rc = d.hash ? count_sysv(c, d.hash, &n) : count_gnu(c, d.gnu_hash, &n);
	if (!rc) {
		res->nr_syms = n;
		for (unsigned i = 0; i < c->nr_segs; i++)
			if (c->segs[i].exec)
				c->segs[i].shndx = (uint16_t)(1 + c->nr_exec++);
		rc = out_init(&o);
		if (!rc)
			rc = symbols(c, &d, n, &o);
	}
	/* the PLT after the symbols: names for a binary that exports none too */
	if (!rc || rc == -ENODATA) {
		int prc = plt_find(c, &d, &p);

		rc = prc ? prc : rc == -ENODATA && p.nr ? 0 : rc;
	}
	if (!rc)
		rc = elf_make(c, &o, &p, bid, bid_len, out, out_len);
	plt_free(&p);
	free(o.syms);
	free(o.str);
	free(c);
	return rc;
}
