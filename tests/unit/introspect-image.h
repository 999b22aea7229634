/* SPDX-License-Identifier: MIT */
/*
 * A synthetic Linux guest memory image for the introspection tests, its
 * benchmark and fuzz target: RAM with x86-64 page tables (2 MiB pages)
 * mapping the kernel at 0xffffffff81000000 (physical 0x200000, so
 * phys_base is negative as under KASLR), a VMCOREINFO page, and kallsyms
 * tables in the layout of Linux 6.1 (token table and index, names with
 * one- or two-byte lengths, s32 offsets under KALLSYMS_ABSOLUTE_PERCPU from
 * kallsyms_relative_base).  Written from the kernel's documented format,
 * not from its code.  Header-only, as the other test helpers.
 */
#ifndef OPVM_TEST_INTROSPECT_IMAGE_H
#define OPVM_TEST_INTROSPECT_IMAGE_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XI_KERNEL_VA	0xffffffff81000000ull	/* _text */
#define XI_KERNEL_PA	0x200000ull
#define XI_MAP		0xffffffff80000000ull	/* __START_KERNEL_map */
#define XI_PHYS_BASE	(XI_KERNEL_PA - (XI_KERNEL_VA - XI_MAP))	/* wraps */
#define XI_PGD_PA	0x1000ull
#define XI_TABLES_VA	(XI_KERNEL_VA + 0x100000)	/* where the tables start */

struct xi_sym {
	const char *name;
	char type;
	uint64_t addr;
};

struct ximage {
	uint8_t *ram;
	size_t size;			/* bytes of RAM, a multiple of 2 MiB */
	/* the tables' addresses, as VMCOREINFO lists them */
	uint64_t names, num_syms, token_table, token_index, offsets, relative_base;
	uint64_t end_va;		/* first byte after the tables */
	uint64_t vmci_pa;
};

static inline void xi_put(struct ximage *x, uint64_t va, const void *p, size_t n)
{
	uint64_t pa = va - XI_KERNEL_VA + XI_KERNEL_PA;

	if (pa + n <= x->size)
		memcpy(x->ram + pa, p, n);
}

/* Tokens: bytes 0x01..0x03 stand for common substrings, every other byte
 * for itself (0 for nothing). */
static const char *const xi_multi[] = { "", "_do_", "sys_", "startup" };

static inline size_t xi_encode(const char *s, uint8_t *out)
{
	size_t n = 0;

	while (*s) {
		unsigned t = 0;

		for (unsigned i = 1; i < 4; i++)
			if (!strncmp(s, xi_multi[i], strlen(xi_multi[i])))
				t = i;
		out[n++] = t ? (uint8_t)t : (uint8_t)*s;
		s += t ? strlen(xi_multi[t]) : 1;
	}
	return n;
}

/* The page tables: PD[7] maps the low 2 MiB where the kernel map would
 * put phys 0 (so the PGD is reachable through its own VA), PD[8..] the
 * kernel from XI_KERNEL_PA on. */
static inline void xi_page_tables(struct ximage *x)
{
	uint64_t *pml4 = (uint64_t *)(x->ram + XI_PGD_PA);
	uint64_t *pdpt = (uint64_t *)(x->ram + 0x2000);
	uint64_t *pd = (uint64_t *)(x->ram + 0x3000);

	pml4[511] = 0x2000 | 3;
	pdpt[510] = 0x3000 | 3;
	pd[7] = 0 | 0x83;
	for (uint64_t i = 0; XI_KERNEL_PA + (i << 21) < x->size && 8 + i < 512; i++)
		pd[8 + i] = (XI_KERNEL_PA + (i << 21)) | 0x83;
}

static inline void xi_vmcoreinfo(struct ximage *x)
{
	char *p = (char *)x->ram + x->vmci_pa;

	snprintf(p, 4096,
		 "OSRELEASE=6.1.0-test\nPAGESIZE=4096\n"
		 "SYMBOL(swapper_pg_dir)=%" PRIx64 "\nSYMBOL(_stext)=%" PRIx64 "\n"
		 "SYMBOL(kallsyms_names)=%" PRIx64 "\nSYMBOL(kallsyms_num_syms)=%" PRIx64 "\n"
		 "SYMBOL(kallsyms_token_table)=%" PRIx64 "\nSYMBOL(kallsyms_token_index)=%" PRIx64 "\n"
		 "SYMBOL(kallsyms_offsets)=%" PRIx64 "\nSYMBOL(kallsyms_relative_base)=%" PRIx64 "\n"
		 "NUMBER(phys_base)=%" PRId64 "\nSYMBOL(init_top_pgt)=%" PRIx64 "\n"
		 "NUMBER(pgtable_l5_enabled)=0\nKERNELOFFSET=%" PRIx64 "\n",
		 (uint64_t)(XI_MAP + XI_PGD_PA - XI_PHYS_BASE), (uint64_t)XI_KERNEL_VA, x->names, x->num_syms,
		 x->token_table, x->token_index, x->offsets, x->relative_base,
		 (int64_t)XI_PHYS_BASE, (uint64_t)(XI_MAP + XI_PGD_PA - XI_PHYS_BASE),
		 (uint64_t)0);
}

/* The kallsyms tables for syms[0..n) (addresses ascending). */
static inline void xi_kallsyms(struct ximage *x, const struct xi_sym *syms, uint32_t n)
{
	uint64_t va = XI_TABLES_VA, base = XI_KERNEL_VA;
	uint16_t idx[256];
	char table[1024];
	size_t tl = 0;

	for (unsigned t = 0; t < 256; t++) {
		const char *s = t < 4 ? xi_multi[t] : NULL;
		char one[2] = { (char)t, 0 };

		idx[t] = (uint16_t)tl;
		s = s ? s : one;
		memcpy(table + tl, s, strlen(s) + 1);
		tl += strlen(s) + 1;
	}
	x->num_syms = va;
	xi_put(x, va, &n, 4);
	x->relative_base = va + 8;
	xi_put(x, va + 8, &base, 8);
	x->token_index = va + 16;
	xi_put(x, va + 16, idx, sizeof(idx));
	x->token_table = va + 16 + sizeof(idx);
	xi_put(x, x->token_table, table, tl);
	x->offsets = (x->token_table + tl + 7) & ~7ull;
	va = x->offsets;
	for (uint32_t i = 0; i < n; i++, va += 4) {
		int32_t off = syms[i].addr >= base ? (int32_t)(base - 1 - syms[i].addr) :
			      (int32_t)syms[i].addr;

		xi_put(x, va, &off, 4);
	}
	x->names = va;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t enc[1024];
		size_t l;

		enc[2] = (uint8_t)syms[i].type;
		l = 1 + xi_encode(syms[i].name, enc + 3);
		if (l < 0x80) {
			enc[1] = (uint8_t)l;
			xi_put(x, va, enc + 1, l + 1);
			va += l + 1;
		} else {	/* two-byte length: ULEB128 */
			enc[0] = (uint8_t)(0x80 | (l & 0x7f));
			enc[1] = (uint8_t)(l >> 7);
			xi_put(x, va, enc, l + 2);
			va += l + 2;
		}
	}
	x->end_va = va;
}

/* RAM of size bytes (>= 4 MiB, a multiple of 2 MiB) with syms and the
 * VMCOREINFO page at vmci_pa.  0, or -1 when out of memory. */
static inline int ximage_build(struct ximage *x, size_t size, const struct xi_sym *syms,
			       uint32_t n, uint64_t vmci_pa)
{
	memset(x, 0, sizeof(*x));
	x->ram = aligned_alloc(4096, size);
	if (!x->ram)
		return -1;
	memset(x->ram, 0, size);
	x->size = size;
	x->vmci_pa = vmci_pa;
	xi_page_tables(x);
	xi_kallsyms(x, syms, n);
	xi_vmcoreinfo(x);
	return 0;
}

static inline void ximage_free(struct ximage *x)
{
	free(x->ram);
	x->ram = NULL;
}

#endif /* OPVM_TEST_INTROSPECT_IMAGE_H */
