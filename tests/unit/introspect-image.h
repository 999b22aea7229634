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

/* The BTF bytes (malloc'd) into *len, or NULL. */
static inline void *xt_btf(uint32_t *len)
{
	struct btf *b = btf__new_empty();
	int i32, ch, arr, fwd_ts, fwd_mm, p_ts, p_mm, lh, p_lh, anon, u64;
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
	btf__add_field(b, NULL, anon, XT_ANON * 8, 0);
	btf__add_field(b, "comm", arr, XT_COMM * 8, 0);
	btf__add_struct(b, "mm_struct", 0x100);
	btf__add_field(b, "mmap_base", u64, 0, 0);
	btf__add_field(b, "pgd", u64, XM_PGD * 8, 0);
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
	char c[16] = { 0 };

	snprintf(c, sizeof(c), "%s", comm);
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

#endif /* OPVM_TEST_INTROSPECT_IMAGE_H */
