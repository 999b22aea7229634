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

/* The module space, one 2 MiB page of it (xk_modules() maps it). */
#define XK_VA		0xffffffffc0000000ull
#define XK_PA		0x1600000ull

static inline void xi_put(struct ximage *x, uint64_t va, const void *p, size_t n)
{
	uint64_t pa = va >= XK_VA ? va - XK_VA + XK_PA : va - XI_KERNEL_VA + XI_KERNEL_PA;

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
/* The token table: 0x01..0x03 for xi_multi's strings, every other byte
 * for itself (0 for nothing); returns its length. */
static inline size_t xi_token_table(char table[1024], uint16_t idx[256])
{
	size_t tl = 0;

	for (unsigned t = 0; t < 256; t++) {
		const char *s = t < 4 ? xi_multi[t] : NULL;
		char one[2] = { (char)t, 0 };

		idx[t] = (uint16_t)tl;
		s = s ? s : one;
		memcpy(table + tl, s, strlen(s) + 1);
		tl += strlen(s) + 1;
	}
	return tl;
}

static inline void xi_kallsyms(struct ximage *x, const struct xi_sym *syms, uint32_t n)
{
	uint64_t va = XI_TABLES_VA, base = XI_KERNEL_VA;
	uint16_t idx[256];
	char table[1024];
	size_t tl = xi_token_table(table, idx);

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

/* ---- kallsyms as the kernel lays it out, for kallsyms_find() ----------- */

/* Where xi_kallsyms_image() put each table. */
struct xi_tables {
	uint64_t names, num_syms, markers, token_table, token_index, offsets, relative_base;
	uint64_t end;			/* first byte after the last table */
};

#define XI_ALIGN8(v)	(((v) + 7) & ~7ull)

/* One name, length byte(s) first; returns the bytes written at va. */
static inline size_t xi_name(struct ximage *x, uint64_t va, const struct xi_sym *s)
{
	uint8_t enc[1024];
	size_t l;

	enc[2] = (uint8_t)s->type;
	l = 1 + xi_encode(s->name, enc + 3);
	if (l < 0x80) {
		enc[1] = (uint8_t)l;
		xi_put(x, va, enc + 1, l + 1);
		return l + 1;
	}
	enc[0] = (uint8_t)(0x80 | (l & 0x7f));	/* two-byte length: ULEB128 */
	enc[1] = (uint8_t)(l >> 7);
	xi_put(x, va, enc, l + 2);
	return l + 2;
}

/* num_syms, names and u32 markers from va; returns the markers' end. */
static inline uint64_t xi_names_markers(struct ximage *x, uint64_t va, const struct xi_sym *syms,
					uint32_t n, struct xi_tables *t)
{
	t->num_syms = va;
	xi_put(x, va, &n, 4);
	t->names = va += 8;
	t->markers = t->names;
	for (uint32_t i = 0; i < n; i++)
		t->markers += xi_name(x, t->markers, &syms[i]);
	t->markers = XI_ALIGN8(t->markers);
	va = t->names;
	for (uint32_t i = 0, m = 0; i < n; i++) {
		if (!(i % 256)) {
			uint32_t off = (uint32_t)(va - t->names);

			xi_put(x, t->markers + 4 * m++, &off, 4);
		}
		va += xi_name(x, va, &syms[i]);
	}
	return t->markers + 4 * ((n + 255) / 256);
}

/* The token table (xi_token_table) and its index, from va; returns the
 * end. */
static inline uint64_t xi_tokens(struct ximage *x, uint64_t va, struct xi_tables *t)
{
	uint16_t idx[256];
	char table[1024];
	size_t tl = xi_token_table(table, idx);

	t->token_table = XI_ALIGN8(va);
	xi_put(x, t->token_table, table, tl);
	t->token_index = XI_ALIGN8(t->token_table + tl);
	xi_put(x, t->token_index, idx, sizeof(idx));
	return t->token_index + sizeof(idx);
}

/* s32 offsets (KALLSYMS_ABSOLUTE_PERCPU from base, or from _text when
 * from_text) and relative_base (unless from_text) from va. */
static inline uint64_t xi_offsets(struct ximage *x, uint64_t va, const struct xi_sym *syms,
				  uint32_t n, int from_text, struct xi_tables *t)
{
	uint64_t base = XI_KERNEL_VA;

	t->offsets = XI_ALIGN8(va);
	for (uint32_t i = 0; i < n; i++) {
		int32_t off = from_text ? (int32_t)(syms[i].addr - base) :
			      syms[i].addr >= base ? (int32_t)(base - 1 - syms[i].addr) :
			      (int32_t)syms[i].addr;

		xi_put(x, t->offsets + 4 * i, &off, 4);
	}
	va = XI_ALIGN8(t->offsets + 4 * (uint64_t)n);
	t->relative_base = from_text ? 0 : va;
	if (!from_text)
		xi_put(x, va, &base, 8);
	return from_text ? va : va + 8;
}

/*
 * The tables at va as scripts/kallsyms.c lays them out, each 8-byte
 * aligned: order 0 as before 6.4 (offsets, relative_base, num_syms, names,
 * markers, token_table, token_index), 1 as from 6.4 (num_syms, names,
 * markers, token_table, token_index, offsets, relative_base), 2 as 1
 * without relative_base (offsets from _text).  syms ascending.
 */
static inline void xi_kallsyms_image(struct ximage *x, uint64_t va, const struct xi_sym *syms,
				     uint32_t n, int order, struct xi_tables *t)
{
	memset(t, 0, sizeof(*t));
	if (order == 0)
		va = xi_offsets(x, va, syms, n, 0, t);
	va = xi_tokens(x, xi_names_markers(x, XI_ALIGN8(va), syms, n, t), t);
	if (order > 0)
		va = xi_offsets(x, va, syms, n, order == 2, t);
	t->end = va;
}

/* A VMCOREINFO without kallsyms lines (Linux before 6.0). */
static inline void xi_vmcoreinfo_old(struct ximage *x)
{
	char *p = (char *)x->ram + x->vmci_pa;

	memset(p, 0, 4096);
	snprintf(p, 4096,
		 "OSRELEASE=5.10.0-test\nPAGESIZE=4096\n"
		 "SYMBOL(swapper_pg_dir)=%" PRIx64 "\nSYMBOL(_stext)=%" PRIx64 "\n"
		 "NUMBER(phys_base)=%" PRId64 "\nSYMBOL(init_top_pgt)=%" PRIx64 "\n"
		 "NUMBER(pgtable_l5_enabled)=0\nKERNELOFFSET=0\n",
		 (uint64_t)(XI_MAP + XI_PGD_PA - XI_PHYS_BASE), (uint64_t)XI_KERNEL_VA,
		 (int64_t)XI_PHYS_BASE, (uint64_t)(XI_MAP + XI_PGD_PA - XI_PHYS_BASE));
}

/* ---- processes: a BTF of task_struct and mm_struct, and a task list ---- */

#include <bpf/btf.h>

/* Layout (the members the walk wants sit in an anonymous struct, as
 * 6.1's randomized_struct_fields put them): */
#define XT_SIZE		0x400
#define XT_ANON		0x10
#define XT_TASKS	(XT_ANON + 0x100)
#define XT_PID		(XT_ANON + 0x180)
#define XT_TGID		(XT_ANON + 0x184)
#define XT_PARENT	(XT_ANON + 0x188)
#define XT_MM		(XT_ANON + 0x1a0)
#define XT_COMM		0x300
#define XT_STACK	0x08		/* void *stack, outside the anonymous struct */
#define XT_STACK_VA	(XI_KERNEL_VA + 0x2000000)	/* task i's at + (i + 1) * 16 KiB */
#define XM_PGD		0x48
#define XT_BTF_VA	(XI_KERNEL_VA + 0x600000)
#define XT_INIT_VA	(XI_KERNEL_VA + 0x6f0000)
#define XT_TASK_VA	(XI_KERNEL_VA + 0x700000)	/* task i at + i * XT_SIZE */
#define XT_MM_VA	(XI_KERNEL_VA + 0x780000)	/* mm i at + i * 0x100 */
#define XT_PGD_VA	(XI_KERNEL_VA + 0x800000)	/* pgd i at + i * 4096 */
#define XT_MAX		120
/* per-CPU: __per_cpu_offset[XT_CPUS], CPU i's area at XT_PCPU_VA + i *
 * 0x40000, its current-task pointer XT_CUR_OFF into it (6.1's current_task
 * is about there) */
#define XT_CPUS		2
#define XT_PCPU_OFF_VA	(XI_KERNEL_VA + 0x6f8000)
#define XT_PCPU_VA	(XI_KERNEL_VA + 0x900000)
#define XT_CUR_OFF	0x1fbc0ull
#define XT_NSYMS	5		/* xt_syms() fills */

/* ---- mappings: the structs kvmas.h reads (mm_struct's members are added
 * to the one xt_btf() opens), laid out as below ---- */
#define XM_MAP_COUNT	0x50
#define XM_EXEC_VM	0x58
#define XM_MT		0x60		/* struct maple_tree; ma_root at +8 */
#define XVMA_START	0x00
#define XVMA_END	0x08
#define XVMA_NEXT	0x10		/* vm_next: the list (xt_vma_list) */
#define XVMA_FLAGS	0x20
#define XVMA_PGOFF	0x78
#define XVMA_FILE	0x80
#define XVMA_SIZE	0xc0
#define XF_PATH		0x10		/* struct path: mnt, dentry */
#define XD_PARENT	0x18
#define XD_NAME		0x20		/* qstr: len at +4, name at +8 */
#define XD_INODE	0x30
#define XD_SIZE		0xc0
#define XMNT_PARENT	0x10
#define XMNT_MOUNTPOINT	0x18
#define XMNT_MNT	0x20		/* struct vfsmount: mnt_root at +0 */

/* Set: the kernel before 6.1, mm->mmap (at XM_MT + 8) and vm_next instead
 * of the maple tree, in the BTF and in xv_proc(). */
static int xt_vma_list;
/* Set before xt_btf(): task_struct.cgroups and the structs the cgroup
 * walk reads (css_set.dfl_cgrp, cgroup.kn, kernfs_node.parent/name). */
static int xt_cgroups;
#define XT_CGROUPS	0x320		/* task_struct.cgroups */
#define XCS_DFL		0x10		/* css_set.dfl_cgrp */
#define XCG_KN		0x28		/* cgroup.kn */
#define XKN_PARENT	0x10		/* kernfs_node.parent */
#define XKN_NAME	0x18		/* kernfs_node.name */
#define XCG_VA		(XI_KERNEL_VA + 0xd00000)	/* cgroup objects: 1 MiB */

/* The types of the mappings; returns struct maple_tree's id. */
static inline int xv_btf(struct btf *b, int u64)
{
	int vp = btf__add_ptr(b, 0), u32 = btf__add_int(b, "unsigned int", 4, 0);
	int mt, hl, un, qs, path;

	mt = btf__add_struct(b, "maple_tree", 16);
	btf__add_field(b, "ma_flags", u32, 32, 0);
	btf__add_field(b, "ma_root", vp, 64, 0);
	btf__add_struct(b, "vm_area_struct", XVMA_SIZE);
	btf__add_field(b, "vm_start", u64, XVMA_START * 8, 0);
	btf__add_field(b, "vm_end", u64, XVMA_END * 8, 0);
	if (xt_vma_list)
		btf__add_field(b, "vm_next", vp, XVMA_NEXT * 8, 0);
	btf__add_field(b, "vm_flags", u64, XVMA_FLAGS * 8, 0);
	btf__add_field(b, "vm_pgoff", u64, XVMA_PGOFF * 8, 0);
	btf__add_field(b, "vm_file", vp, XVMA_FILE * 8, 0);
	path = btf__add_struct(b, "path", 16);
	btf__add_field(b, "mnt", vp, 0, 0);
	btf__add_field(b, "dentry", vp, 64, 0);
	btf__add_struct(b, "file", 0x100);
	btf__add_field(b, "f_path", path, XF_PATH * 8, 0);
	/* qstr: { union { struct { u32 hash, len; }; u64 hash_len; }; name } */
	hl = btf__add_struct(b, NULL, 8);
	btf__add_field(b, "hash", u32, 0, 0);
	btf__add_field(b, "len", u32, 32, 0);
	un = btf__add_union(b, NULL, 8);
	btf__add_field(b, NULL, hl, 0, 0);
	btf__add_field(b, "hash_len", u64, 0, 0);
	qs = btf__add_struct(b, "qstr", 16);
	btf__add_field(b, NULL, un, 0, 0);
	btf__add_field(b, "name", vp, 64, 0);
	btf__add_struct(b, "dentry", XD_SIZE);
	btf__add_field(b, "d_parent", vp, XD_PARENT * 8, 0);
	btf__add_field(b, "d_name", qs, XD_NAME * 8, 0);
	btf__add_field(b, "d_inode", vp, XD_INODE * 8, 0);
	btf__add_struct(b, "vfsmount", 16);
	btf__add_field(b, "mnt_root", vp, 0, 0);
	btf__add_struct(b, "mount", 0x80);
	btf__add_field(b, "mnt_parent", vp, XMNT_PARENT * 8, 0);
	btf__add_field(b, "mnt_mountpoint", vp, XMNT_MOUNTPOINT * 8, 0);
	btf__add_field(b, "mnt", vp, XMNT_MNT * 8, 0);
	return mt;
}

/* ---- modules: struct module as Debian 12's 6.1 kernel lays it out (its
 * BTF: core_layout) or, with xk_mem, as 6.4 and later do (mem[MOD_TEXT]),
 * and struct mod_kallsyms; module i at XK_MOD(i) in the module space
 * (one 2 MiB page, physical XK_PA), its text XK_TEXT_SIZE bytes at
 * XK_TEXT(i), its symbols after it:
 *   [0] ""                  'U' (the null symbol)
 *   [1] "mod<i>_start"      't' text + 0
 *   [2] "mod<i>_work"       'T' text + 0x100
 *   [3] "mod<i>_data"       'd' outside the text
 *   [4] "mod<i>_end"        't' text + 0x1f00
 * The list head `modules` at XK_HEAD_VA, in the kernel image. */
#define XK_PD_PA	0x5000ull
#define XK_HEAD_VA	(XI_KERNEL_VA + 0x6fc000)
#define XK_MOD(i)	(XK_VA + (uint64_t)(i) * 0x10000)
#define XK_TEXT(i)	(XK_MOD(i) + 0x1000)
#define XK_TEXT_SIZE	0x2000u
#define XK_KS(i)	(XK_MOD(i) + 0x4000)		/* struct mod_kallsyms */
#define XK_SYMTAB(i)	(XK_MOD(i) + 0x4100)
#define XK_STRTAB(i)	(XK_MOD(i) + 0x5000)
#define XK_TYPETAB(i)	(XK_MOD(i) + 0x5800)
#define XK_NSYMS	5u
#define XK_MAX		24u
/* 6.1 (Debian 12's BTF) and 6.4's offsets in struct module */
#define XK_NAME		24
#define XK_SIZE_61	896
#define XK_LAYOUT_61	320		/* core_layout: base +0, text_size +12 */
#define XK_KALLSYMS_61	544
#define XK_SIZE_64	768
#define XK_MEM_64	320		/* mem[7] of 16: base +0, size +12 */
#define XK_KALLSYMS_64	512

static int xk_mem;

static inline uint64_t xk_kallsyms_off(void)
{
	return xk_mem ? XK_KALLSYMS_64 : XK_KALLSYMS_61;
}

/* struct module and friends, in the layout xk_mem says. */
static inline void xk_btf(struct btf *b, int i32, int ch, int u64, int lh)
{
	int vp = btf__add_ptr(b, 0), u32 = btf__add_int(b, "unsigned int", 4, 0);
	int name = btf__add_array(b, i32, ch, 56), mks, pks, lay, st;

	st = btf__add_enum(b, "module_state", 4);
	btf__add_enum_value(b, "MODULE_STATE_LIVE", 0);
	btf__add_enum_value(b, "MODULE_STATE_UNFORMED", 3);
	mks = btf__add_struct(b, "mod_kallsyms", 32);
	btf__add_field(b, "symtab", vp, 0, 0);
	btf__add_field(b, "num_symtab", u32, 64, 0);
	btf__add_field(b, "strtab", vp, 128, 0);
	btf__add_field(b, "typetab", vp, 192, 0);
	if (xk_mem) {
		int mm = btf__add_struct(b, "module_memory", 16);

		btf__add_field(b, "base", vp, 0, 0);
		btf__add_field(b, "size", u32, 96, 0);
		lay = btf__add_array(b, i32, mm, 7);
		btf__add_enum(b, "mod_mem_type", 4);
		btf__add_enum_value(b, "MOD_TEXT", 0);
		btf__add_enum_value(b, "MOD_DATA", 1);
	} else {
		lay = btf__add_struct(b, "module_layout", 80);
		btf__add_field(b, "base", vp, 0, 0);
		btf__add_field(b, "size", u32, 64, 0);
		btf__add_field(b, "text_size", u32, 96, 0);
		btf__add_field(b, "ro_size", u32, 128, 0);
	}
	pks = btf__add_ptr(b, mks);
	btf__add_struct(b, "module", xk_mem ? XK_SIZE_64 : XK_SIZE_61);
	btf__add_field(b, "state", st, 0, 0);
	btf__add_field(b, "list", lh, 64, 0);
	btf__add_field(b, "name", name, XK_NAME * 8, 0);
	btf__add_field(b, xk_mem ? "mem" : "core_layout", lay, XK_LAYOUT_61 * 8, 0);
	btf__add_field(b, "kallsyms", pks, (uint32_t)xk_kallsyms_off() * 8, 0);
	btf__add_field(b, "core_kallsyms", mks, (uint32_t)(xk_kallsyms_off() + 8) * 8, 0);
	(void)u64;
}

/* The BTF bytes (malloc'd) into *len, or NULL. */
static inline void *xt_btf(uint32_t *len)
{
	struct btf *b = btf__new_empty();
	int i32, ch, arr, fwd_ts, fwd_mm, p_ts, p_mm, lh, p_lh, anon, u64, mt;
	const void *raw;
	void *out = NULL;

	if (!b)
		return NULL;
	i32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	ch = btf__add_int(b, "char", 1, BTF_INT_SIGNED);
	u64 = btf__add_int(b, "long unsigned int", 8, 0);
	arr = btf__add_array(b, i32, ch, 16);
	fwd_ts = btf__add_fwd(b, "task_struct", BTF_FWD_STRUCT);
	fwd_mm = btf__add_fwd(b, "mm_struct", BTF_FWD_STRUCT);
	p_ts = btf__add_ptr(b, fwd_ts);
	p_mm = btf__add_ptr(b, fwd_mm);
	lh = btf__add_struct(b, "list_head", 16);
	p_lh = btf__add_ptr(b, lh);
	btf__add_field(b, "next", p_lh, 0, 0);
	btf__add_field(b, "prev", p_lh, 64, 0);
	anon = btf__add_struct(b, NULL, 0x200);
	btf__add_field(b, "tasks", lh, 0x100 * 8, 0);
	btf__add_field(b, "pid", i32, 0x180 * 8, 0);
	btf__add_field(b, "tgid", i32, 0x184 * 8, 0);
	btf__add_field(b, "real_parent", p_ts, 0x188 * 8, 0);
	btf__add_field(b, "mm", p_mm, 0x1a0 * 8, 0);
	btf__add_struct(b, "task_struct", XT_SIZE);
	btf__add_field(b, "__state", i32, 0, 0);
	btf__add_field(b, "stack", u64, XT_STACK * 8, 0);
	btf__add_field(b, NULL, anon, XT_ANON * 8, 0);
	btf__add_field(b, "comm", arr, XT_COMM * 8, 0);
	if (xt_cgroups)
		btf__add_field(b, "cgroups", u64, XT_CGROUPS * 8, 0);
	mt = xv_btf(b, u64);
	xk_btf(b, i32, ch, u64, lh);
	if (xt_cgroups) {
		btf__add_struct(b, "css_set", 0x40);
		btf__add_field(b, "dfl_cgrp", u64, XCS_DFL * 8, 0);
		btf__add_struct(b, "cgroup", 0x100);
		btf__add_field(b, "kn", u64, XCG_KN * 8, 0);
		btf__add_struct(b, "kernfs_node", 0x80);
		btf__add_field(b, "parent", u64, XKN_PARENT * 8, 0);
		btf__add_field(b, "name", u64, XKN_NAME * 8, 0);
	}
	btf__add_struct(b, "mm_struct", 0x100);
	btf__add_field(b, "mmap_base", u64, 0, 0);
	btf__add_field(b, "pgd", u64, XM_PGD * 8, 0);
	btf__add_field(b, "map_count", i32, XM_MAP_COUNT * 8, 0);
	btf__add_field(b, "exec_vm", u64, XM_EXEC_VM * 8, 0);
	if (xt_vma_list)
		btf__add_field(b, "mmap", u64, (XM_MT + 8) * 8, 0);
	else
		btf__add_field(b, "mm_mt", mt, XM_MT * 8, 0);
	raw = btf__raw_data(b, len);
	if (raw && (out = malloc(*len)))
		memcpy(out, raw, *len);
	btf__free(b);
	return out;
}

/* Task i (tgid 100 + i, parent task 0 but for task 0 itself: init_task),
 * kernel threads (no mm) every 10th, linked from init_task in order. */
static inline void xt_task(struct ximage *x, unsigned i, unsigned n, const char *comm)
{
	uint64_t t = XT_TASK_VA + (uint64_t)i * XT_SIZE;
	uint64_t next = (i + 1 < n ? t + XT_SIZE : XT_INIT_VA) + XT_TASKS;
	uint64_t parent = i ? XT_TASK_VA : XT_INIT_VA;
	uint64_t mm = i % 10 == 9 ? 0 : XT_MM_VA + (uint64_t)i * 0x100;
	uint64_t pgd = XT_PGD_VA + (uint64_t)i * 4096;
	uint32_t tgid = 100 + i;
	uint64_t stack = XT_STACK_VA + (uint64_t)(i + 1) * 16384;
	char c[16] = { 0 };

	snprintf(c, sizeof(c), "%s", comm);
	xi_put(x, t + XT_STACK, &stack, 8);
	xi_put(x, t + XT_TASKS, &next, 8);
	xi_put(x, t + XT_PID, &tgid, 4);
	xi_put(x, t + XT_TGID, &tgid, 4);
	xi_put(x, t + XT_PARENT, &parent, 8);
	xi_put(x, t + XT_MM, &mm, 8);
	xi_put(x, t + XT_COMM, c, 16);
	if (mm)
		xi_put(x, mm + XM_PGD, &pgd, 8);
}

/* CPU cpu runs task (a task_struct address). */
static inline void xt_current(struct ximage *x, unsigned cpu, uint64_t task)
{
	uint64_t base = XT_PCPU_VA + (uint64_t)cpu * 0x40000;

	xi_put(x, XT_PCPU_OFF_VA + (uint64_t)cpu * 8, &base, 8);
	xi_put(x, base + XT_CUR_OFF, &task, 8);
}

/* n (<= XT_MAX) processes behind init_task, and the BTF: the image needs
 * RAM of at least 16 MiB and the symbols of xt_syms. */
static inline int xt_tasks(struct ximage *x, unsigned n)
{
	uint64_t first = (n ? XT_TASK_VA : XT_INIT_VA) + XT_TASKS;
	uint32_t len;
	void *btf = xt_btf(&len);
	char comm[16];

	if (!btf || n > XT_MAX)
		return -1;
	xi_put(x, XT_BTF_VA, btf, len);
	free(btf);
	xi_put(x, XT_INIT_VA + XT_TASKS, &first, 8);
	xi_put(x, XT_INIT_VA + XT_COMM, "swapper/0", 10);
	xi_put(x, XT_INIT_VA + XT_STACK, &(uint64_t){ XT_STACK_VA }, 8);
	for (unsigned i = 0; i < n; i++) {
		snprintf(comm, sizeof(comm), "proc%u", i);
		xt_task(x, i, n, comm);
	}
	/* CPU 0 idles (init_task: swapper/0), CPU 1 runs task 3 or idles */
	xt_current(x, 0, XT_INIT_VA);
	xt_current(x, 1, n > 3 ? XT_TASK_VA + 3 * XT_SIZE : XT_INIT_VA);
	return (int)len;
}

/* The XT_NSYMS symbols the walk finds through kallsyms (btf_len: xt_btf's);
 * the per-CPU one first, as its (absolute) address is the lowest. */
static inline void xt_syms(struct xi_sym *s, uint32_t btf_len)
{
	s[0] = (struct xi_sym){ "current_task", 'D', XT_CUR_OFF };
	s[1] = (struct xi_sym){ "__start_BTF", 'R', XT_BTF_VA };
	s[2] = (struct xi_sym){ "__stop_BTF", 'R', XT_BTF_VA + btf_len };
	s[3] = (struct xi_sym){ "init_task", 'D', XT_INIT_VA };
	s[4] = (struct xi_sym){ "__per_cpu_offset", 'D', XT_PCPU_OFF_VA };
}

/* ---- mappings: per process a maple tree (an arange_64 root over two
 * leaves) of six VMAs, two of them executable file mappings:
 *   [0x400000, 0x401000)        r--  /usr/bin/prog  offset 0 (ELF header)
 *   [0x401000, 0x500000)        r-x  /usr/bin/prog  offset 0x1000
 *   [0x7f0000000000, +0x1000)   r--  /lib/libc.so.6 offset 0
 *   [0x7f0000001000, +0x100000) r-x  /lib/libc.so.6 offset 0x1000
 *   [0x7f0000100000, +0x100000) rwx  anonymous
 *   [0x7ffff0000000, +0x1000)   rw-  anonymous
 * /usr is a mount of its own (the path crosses it); both files' first
 * 2 MiB are mapped by every process's page tables, with an ELF header, a
 * PT_NOTE and a GNU build-id (XV_BID_PROG, XV_BID_LIBC bytes, 20 of them). */
#define XV_VA		(XI_KERNEL_VA + 0xa00000)	/* process i: + i * 0x1000 */
#define XV_FS_VA	(XI_KERNEL_VA + 0xb00000)	/* files, dentries, mounts */
#define XV_UPT_VA	(XI_KERNEL_VA + 0xc00000)	/* user page tables */
#define XV_PROG_PA	0x1000000ull
#define XV_LIBC_PA	0x1200000ull
#define XV_RAM		(32u << 20)
#define XV_BID_PROG	0x11
#define XV_BID_LIBC	0x22
#define XV_FILE(k)	(XV_FS_VA + (uint64_t)(k) * 0x100)		/* k 0..1 */
#define XV_DENTRY(k)	(XV_FS_VA + 0x400 + (uint64_t)(k) * 0x100)	/* k 0..7 */
#define XV_MOUNT(k)	(XV_FS_VA + 0x2000 + (uint64_t)(k) * 0x100)	/* k 0..1 */
#define XV_NODE(i, k)	(XV_VA + (uint64_t)(i) * 0x1000 + (uint64_t)(k) * 0x100)
#define XV_VMA(i, k)	(XV_VA + (uint64_t)(i) * 0x1000 + 0x300 + (uint64_t)(k) * XVMA_SIZE)
#define XV_ENODE(node, type)	((node) | (uint64_t)(type) << 3)

static inline uint64_t xi_pa(uint64_t va)
{
	if (va >= XK_VA)
		return va - XK_VA + XK_PA;
	return va - XI_KERNEL_VA + XI_KERNEL_PA;
}

static inline void xi_put64(struct ximage *x, uint64_t va, uint64_t v)
{
	xi_put(x, va, &v, 8);
}

/* An ELF header with one PT_NOTE holding a GNU build-id of 20 bytes b. */
static inline void xv_elf(struct ximage *x, uint64_t pa, uint8_t b)
{
	uint8_t *e = x->ram + pa, *ph = e + 64, *n = e + 0x200;

	memcpy(e, "\177ELF\2\1\1", 7);
	e[16] = 3;				/* ET_DYN */
	e[32] = 64;				/* e_phoff */
	e[54] = 56;				/* e_phentsize */
	e[56] = 1;				/* e_phnum */
	ph[0] = 4;				/* PT_NOTE */
	ph[9] = 2;				/* p_offset 0x200 */
	ph[32] = 36;				/* p_filesz */
	n[0] = 4, n[4] = 20, n[8] = 3;
	memcpy(n + 12, "GNU", 4);
	memset(n + 16, b, 20);
}

static inline void xv_dentry(struct ximage *x, unsigned k, unsigned parent, const char *name)
{
	uint64_t d = XV_DENTRY(k), nm = XV_FS_VA + 0x1000 + (uint64_t)k * 0x40;
	uint32_t len = (uint32_t)strlen(name);

	xi_put(x, nm, name, len + 1);
	xi_put64(x, d + XD_PARENT, XV_DENTRY(parent));
	xi_put(x, d + XD_NAME + 4, &len, 4);
	xi_put64(x, d + XD_NAME + 8, nm);
	xi_put64(x, d + XD_INODE, XV_FS_VA + 0x3000 + (uint64_t)k * 8);
}

/* The file system: / (dentry 0), /usr (1) where the mount of /usr (its
 * root: dentry 2) hangs, /usr/bin (3), /usr/bin/prog (4), /lib (5),
 * /lib/libc.so.6 (6); file 0 is prog, file 1 libc. */
static inline void xv_files(struct ximage *x)
{
	static const struct { unsigned parent; const char *name; } d[] = {
		{ 0, "/" }, { 0, "usr" }, { 2, "/" }, { 2, "bin" }, { 3, "prog" }, { 0, "lib" },
		{ 5, "libc.so.6" },
	};

	for (unsigned k = 0; k < 7; k++)
		xv_dentry(x, k, d[k].parent, d[k].name);
	xi_put64(x, XV_MOUNT(0) + XMNT_PARENT, XV_MOUNT(0));
	xi_put64(x, XV_MOUNT(0) + XMNT_MNT, XV_DENTRY(0));
	xi_put64(x, XV_MOUNT(1) + XMNT_PARENT, XV_MOUNT(0));
	xi_put64(x, XV_MOUNT(1) + XMNT_MOUNTPOINT, XV_DENTRY(1));
	xi_put64(x, XV_MOUNT(1) + XMNT_MNT, XV_DENTRY(2));
	xi_put64(x, XV_FILE(0) + XF_PATH, XV_MOUNT(1) + XMNT_MNT);
	xi_put64(x, XV_FILE(0) + XF_PATH + 8, XV_DENTRY(4));
	xi_put64(x, XV_FILE(1) + XF_PATH, XV_MOUNT(0) + XMNT_MNT);
	xi_put64(x, XV_FILE(1) + XF_PATH + 8, XV_DENTRY(6));
	xv_elf(x, XV_PROG_PA, XV_BID_PROG);
	xv_elf(x, XV_LIBC_PA, XV_BID_LIBC);
	/* user page tables: 0x400000 -> prog, 0x7f0000000000 -> libc (2 MiB) */
	xi_put64(x, XV_UPT_VA + 0x0000, xi_pa(XV_UPT_VA + 0x1000) | 7);
	xi_put64(x, XV_UPT_VA + 0x1000 + 2 * 8, XV_PROG_PA | 0x87);
	xi_put64(x, XV_UPT_VA + 0x2000, xi_pa(XV_UPT_VA + 0x3000) | 7);
	xi_put64(x, XV_UPT_VA + 0x3000, XV_LIBC_PA | 0x87);
}

static inline void xv_vma(struct ximage *x, uint64_t va, uint64_t start, uint64_t end,
			  uint64_t flags, uint64_t pgoff, uint64_t file)
{
	xi_put64(x, va + XVMA_START, start);
	xi_put64(x, va + XVMA_END, end);
	xi_put64(x, va + XVMA_FLAGS, flags);
	xi_put64(x, va + XVMA_PGOFF, pgoff);
	xi_put64(x, va + XVMA_FILE, file);
}

/* A node's pivots (n of them) and slots (m); slots at +8 + npiv * 8. */
static inline void xv_node(struct ximage *x, uint64_t node, unsigned npiv, const uint64_t *piv,
			   unsigned n, const uint64_t *slot, unsigned m)
{
	for (unsigned k = 0; k < n; k++)
		xi_put64(x, node + 8 + k * 8, piv[k]);
	for (unsigned k = 0; k < m; k++)
		xi_put64(x, node + 8 + npiv * 8 + k * 8, slot[k]);
}

/* Process i's mm (task i must have one): its tree and page tables. */
static inline void xv_proc(struct ximage *x, unsigned i)
{
	uint64_t mm = XT_MM_VA + (uint64_t)i * 0x100, pgd = XT_PGD_VA + (uint64_t)i * 4096;
	const uint64_t root_piv[] = { 0x7effffffffffull, UINT64_MAX };
	const uint64_t root_slot[] = { XV_ENODE(XV_NODE(i, 1), 1), XV_ENODE(XV_NODE(i, 2), 1) };
	const uint64_t a_piv[] = { 0x3fffff, 0x400fff, 0x4fffff, 0x7effffffffffull };
	const uint64_t a_slot[] = { 0, XV_VMA(i, 0), XV_VMA(i, 1), 0 };
	const uint64_t b_piv[] = { 0x7f0000000fffull, 0x7f00000fffffull, 0x7f00001fffffull,
				   0x7fffefffffffull, 0x7ffff0000fffull, UINT64_MAX };
	const uint64_t b_slot[] = { XV_VMA(i, 2), XV_VMA(i, 3), XV_VMA(i, 4), 0, XV_VMA(i, 5), 0 };
	uint32_t six = 6;

	xv_vma(x, XV_VMA(i, 0), 0x400000, 0x401000, 0x1, 0, XV_FILE(0));
	xv_vma(x, XV_VMA(i, 1), 0x401000, 0x500000, 0x5, 1, XV_FILE(0));
	xv_vma(x, XV_VMA(i, 2), 0x7f0000000000ull, 0x7f0000001000ull, 0x1, 0, XV_FILE(1));
	xv_vma(x, XV_VMA(i, 3), 0x7f0000001000ull, 0x7f0000100000ull, 0x5, 1, XV_FILE(1));
	xv_vma(x, XV_VMA(i, 4), 0x7f0000100000ull, 0x7f0000200000ull, 0x7, 0, 0);
	xv_vma(x, XV_VMA(i, 5), 0x7ffff0000000ull, 0x7ffff0001000ull, 0x3, 0, 0);
	xv_node(x, XV_NODE(i, 0), 9, root_piv, 2, root_slot, 2);
	xv_node(x, XV_NODE(i, 1), 15, a_piv, 4, a_slot, 4);
	xv_node(x, XV_NODE(i, 2), 15, b_piv, 6, b_slot, 6);
	xi_put(x, mm + XM_MAP_COUNT, &six, 4);
	xi_put64(x, mm + XM_EXEC_VM, 0x1ff);
	xi_put64(x, mm + XM_MT + 8, XV_ENODE(XV_NODE(i, 0), 3) | 2);
	if (xt_vma_list) {	/* the same VMAs, linked */
		for (unsigned k = 0; k < 6; k++)
			xi_put64(x, XV_VMA(i, k) + XVMA_NEXT, k < 5 ? XV_VMA(i, k + 1) : 0);
		xi_put64(x, mm + XM_MT + 8, XV_VMA(i, 0));
	}
	xi_put64(x, pgd + 0, xi_pa(XV_UPT_VA) | 7);
	xi_put64(x, pgd + 254 * 8, xi_pa(XV_UPT_VA + 0x2000) | 7);
}

/* Mappings for the first n processes of xt_tasks() (RAM >= XV_RAM). */
static inline void xv_maps(struct ximage *x, unsigned n)
{
	xv_files(x);
	for (unsigned i = 0; i < n; i++)
		if (i % 10 != 9)
			xv_proc(x, i);
}

/* Module i (< XK_MAX) named name, its text and symbols; linked to next
 * (a struct module, or 0: the head). */
static inline void xk_module(struct ximage *x, unsigned i, const char *name, uint64_t next)
{
	static const char *const sfx[XK_NSYMS] = { NULL, "start", "work", "data", "end" };
	static const char types[XK_NSYMS] = { 'U', 't', 'T', 'd', 't' };
	const uint64_t at[XK_NSYMS] = { 0, 0, 0x100, 0x3000, 0x1f00 };
	uint64_t m = XK_MOD(i), link = next ? next + 8 : XK_HEAD_VA, str = 1;

	xi_put64(x, m + 8, link);
	xi_put(x, m + XK_NAME, name, strlen(name) + 1);
	xi_put64(x, m + XK_LAYOUT_61, XK_TEXT(i));
	xi_put(x, m + XK_LAYOUT_61 + 12, &(uint32_t){ XK_TEXT_SIZE }, 4);
	xi_put64(x, m + xk_kallsyms_off(), XK_KS(i));
	xi_put64(x, XK_KS(i), XK_SYMTAB(i));
	xi_put(x, XK_KS(i) + 8, &(uint32_t){ XK_NSYMS }, 4);
	xi_put64(x, XK_KS(i) + 16, XK_STRTAB(i));
	xi_put64(x, XK_KS(i) + 24, XK_TYPETAB(i));
	xi_put(x, XK_TYPETAB(i), types, XK_NSYMS);
	for (unsigned k = 1; k < XK_NSYMS; k++) {
		char n[64];
		uint64_t e = XK_SYMTAB(i) + k * 24, v = XK_TEXT(i) + at[k];
		int l = snprintf(n, sizeof(n), "mod%u_%s", i, sfx[k]);

		xi_put(x, XK_STRTAB(i) + str, n, (size_t)l + 1);
		xi_put(x, e, &(uint32_t){ (uint32_t)str }, 4);
		x->ram[xi_pa(e) + 4] = types[k] == 'T' ? 0x12 : types[k] == 't' ? 0x02 : 0x01;
		xi_put64(x, e + 8, v);
		str += (uint64_t)l + 1;
	}
}

/* n modules "mod0".."mod<n-1>" (RAM >= XV_RAM), the module space mapped. */
static inline void xk_modules(struct ximage *x, unsigned n)
{
	uint64_t *pdpt = (uint64_t *)(x->ram + 0x2000), *pd = (uint64_t *)(x->ram + XK_PD_PA);
	char name[16];

	pdpt[511] = XK_PD_PA | 3;
	pd[0] = XK_PA | 0x83;
	xi_put64(x, XK_HEAD_VA, n ? XK_MOD(0) + 8 : XK_HEAD_VA);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "mod%u", i);
		xk_module(x, i, name, i + 1 < n ? XK_MOD(i + 1) : 0);
	}
}

#endif /* OPVM_TEST_INTROSPECT_IMAGE_H */
