/* SPDX-License-Identifier: MIT */
/*
 * A forged guest for the samplers' Python frame reads (vmm/guest/pyguest.h,
 * vmm/perf/perf-python.h): guest RAM in this process, read the way a
 * sampler reads a guest (struct guestmem over /proc/self/mem, page walks
 * through 4-level page tables), holding
 *   - opvm.ko's current-task slots (PYIMG_SLOTS, one per vCPU), each
 *     naming thread PYIMG_TID of the address space PYIMG_CR3;
 *   - at PYIMG_VA (a 2 MiB user page) a CPython 3.11 executable as the
 *     readers see it: an ELF header, PT_DYNAMIC, a .gnu.hash, .dynsym and
 *     .dynstr exporting _PyRuntime, PyCode_Type, PyUnicode_Type,
 *     PyBytes_Type and Py_Version, then the runtime, one interpreter, the
 *     thread state of PYIMG_TID and its frame chain, in 3.11's layout
 *     (the reader's own table);
 *   - on request (pyimg_kernel()), a kernel's direct map, task_structs
 *     and per-CPU current-task pointers, for a sampler without opvm.ko.
 * Header-only, for one test or bench binary each.
 */
#ifndef OPVM_TESTS_PYGUEST_IMAGE_H
#define OPVM_TESTS_PYGUEST_IMAGE_H

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest-kmod/opvm_proto.h"
#include "unwind/pyframes.h"
#include "vmm/guest/guestmem.h"
#include "vmm/introspect/kcurrent.h"
#include "vmm/sampler.h"

#define PYIMG_RAM	(4u << 20)
#define PYIMG_CR3	0x2000ull	/* PML4; 0x3000 PDPT, 0x4000 PD */
#define PYIMG_SLOTS	0x8000ull
#define PYIMG_GPA	0x200000ull	/* the 2 MiB page of the image */
#define PYIMG_VA	0x10000000ull
#define PYIMG_TID	42
#define PYIMG_VERSION	0x030b02f0ull	/* 3.11.2 */
#define PYIMG_MAX_FRAMES 16

struct pyimg {
	uint8_t *ram;			/* PYIMG_RAM bytes, guest-physical 0 */
	struct guestmem *m;		/* reads ram through /proc/self/mem */
	uint64_t brk;			/* next free guest-virtual byte */
	struct pyframes_target t;
	struct pyframes_layout l;
	uint64_t ts;
	unsigned depth;
	uint64_t frames[PYIMG_MAX_FRAMES];	/* innermost first */
	uint64_t codes[PYIMG_MAX_FRAMES];
};

static inline uint8_t *pyimg_at(struct pyimg *im, uint64_t va)
{
	return im->ram + PYIMG_GPA + (va - PYIMG_VA);
}

static inline void pyimg_put(struct pyimg *im, uint64_t va, const void *v, size_t len)
{
	memcpy(pyimg_at(im, va), v, len);
}

static inline void pyimg_put64(struct pyimg *im, uint64_t va, uint64_t v)
{
	/* one store: another thread may change a pointer while it is read */
	__atomic_store_n((uint64_t *)(void *)pyimg_at(im, va), v, __ATOMIC_RELAXED);
}

static inline void pyimg_put32(struct pyimg *im, uint64_t va, uint32_t v)
{
	pyimg_put(im, va, &v, 4);
}

static inline uint64_t pyimg_alloc(struct pyimg *im, size_t len)
{
	uint64_t at = im->brk;

	im->brk += (len + 15) & ~15ull;
	if (im->brk - PYIMG_VA > (2u << 20))
		abort();
	return at;
}

/* The readers' callback straight on the image (for pyframes_layout()). */
static inline int pyimg_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct pyimg *im = arg;

	if (gva < PYIMG_VA || gva - PYIMG_VA > (2u << 20) || len > (2u << 20) - (gva - PYIMG_VA))
		return -1;
	memcpy(buf, pyimg_at(im, gva), len);
	return 0;
}

/* The executable at PYIMG_VA: headers, .gnu.hash, .dynsym, .dynstr. */
static inline void pyimg_elf(struct pyimg *im)
{
	static const char *const names[] = { "_PyRuntime", "PyCode_Type", "PyUnicode_Type",
					     "PyBytes_Type", "Py_Version" };
	const uint64_t dyn = PYIMG_VA + 0x200, hash = PYIMG_VA + 0x300;
	const uint64_t sym = PYIMG_VA + 0x400, str = PYIMG_VA + 0x600;
	Elf64_Ehdr eh = { .e_type = ET_EXEC, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
			  .e_phoff = sizeof(Elf64_Ehdr), .e_ehsize = sizeof(Elf64_Ehdr),
			  .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 2 };
	Elf64_Phdr ph[2] = {
		{ .p_type = PT_LOAD, .p_vaddr = PYIMG_VA, .p_filesz = 2u << 20,
		  .p_memsz = 2u << 20 },
		{ .p_type = PT_DYNAMIC, .p_vaddr = dyn, .p_memsz = 6 * sizeof(Elf64_Dyn) },
	};
	Elf64_Dyn d[6] = { { DT_GNU_HASH, { hash } }, { DT_SYMTAB, { sym } },
			   { DT_STRTAB, { str } }, { DT_STRSZ, { 256 } },
			   { DT_SYMENT, { sizeof(Elf64_Sym) } }, { DT_NULL, { 0 } } };
	uint64_t at[5] = { im->t.runtime, im->t.code_type, im->t.unicode_type,
			   im->t.bytes_type, pyimg_alloc(im, 8) };
	uint32_t hdr[4] = { 1, 1, 1, 0 }, one = 1, off = 1;

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	pyimg_put(im, PYIMG_VA, &eh, sizeof(eh));
	pyimg_put(im, PYIMG_VA + sizeof(eh), ph, sizeof(ph));
	pyimg_put(im, dyn, d, sizeof(d));
	pyimg_put(im, hash, hdr, sizeof(hdr));		/* one bucket, symbols from 1 */
	pyimg_put(im, hash + 24, &one, 4);		/* after an 8-byte bloom word */
	pyimg_put64(im, at[4], im->t.version);
	for (unsigned i = 0; i < 5; i++) {
		Elf64_Sym s = { .st_name = off, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT),
				.st_shndx = 1, .st_value = at[i], .st_size = 8 };
		uint32_t h = 5381;

		for (const char *c = names[i]; *c; c++)
			h = h * 33 + (uint8_t)*c;
		h = (h & ~1u) | (i == 4);		/* the chain's last ends it */
		pyimg_put(im, hash + 28 + 4 * i, &h, 4);
		pyimg_put(im, sym + sizeof(s) * (i + 1), &s, sizeof(s));
		pyimg_put(im, str + off, names[i], strlen(names[i]) + 1);
		off += (uint32_t)strlen(names[i]) + 1;
	}
}

static inline uint64_t pyimg_str(struct pyimg *im, const char *s)
{
	size_t n = strlen(s);
	uint64_t o = pyimg_alloc(im, im->l.str_ascii_size + n + 1);

	pyimg_put64(im, o + im->l.ob_type, im->t.unicode_type);
	pyimg_put64(im, o + im->l.str_length, n);
	pyimg_put32(im, o + im->l.str_state, 1u << 2 | 1u << 5 | 1u << 6); /* compact ASCII */
	pyimg_put(im, o + im->l.str_ascii_size, s, n + 1);
	return o;
}

/* A code object of ninstr instructions, one line each from first. */
static inline uint64_t pyimg_code(struct pyimg *im, const char *name, int first, unsigned ninstr)
{
	uint64_t c = pyimg_alloc(im, im->l.co_code + 2 * ninstr);
	uint64_t lt = pyimg_alloc(im, im->l.bytes_sval + 3 * ninstr);

	pyimg_put64(im, c + im->l.ob_type, im->t.code_type);
	pyimg_put64(im, c + im->l.co_qualname, pyimg_str(im, name));
	pyimg_put64(im, c + im->l.co_filename, pyimg_str(im, "/srv/app.py"));
	pyimg_put32(im, c + im->l.co_firstlineno, (uint32_t)first);
	pyimg_put64(im, c + im->l.co_linetable, lt);
	pyimg_put64(im, lt + im->l.ob_type, im->t.bytes_type);
	pyimg_put64(im, lt + im->l.bytes_size, 3 * ninstr);
	for (unsigned i = 0; i < ninstr; i++) {
		uint8_t e[3] = { (uint8_t)(0x80 | (i ? 11 : 10) << 3), 0, 0 };

		pyimg_put(im, lt + im->l.bytes_sval + 3 * i, e, 3);
	}
	return c;
}

/* The instruction pointer of instruction i of code c. */
static inline uint64_t pyimg_instr(const struct pyimg *im, uint64_t c, unsigned i)
{
	return c + im->l.co_code + 2 * i;
}

/* The image with the chain names[0..n) (innermost first; function k's
 * first line 10 * (k + 1), each frame at its instruction 3) and nr_slots
 * slots; im->m reads it.  0, or -1 (no /proc/self/mem). */
static inline int pyimg_build(struct pyimg *im, const char *const *names, unsigned n,
			      unsigned nr_slots)
{
	struct unwind_mem um = { pyimg_read, im };
	struct pyframes_stats st = { 0 };
	uint64_t *pt, interp, cf, prev = 0;

	memset(im, 0, sizeof(*im));
	if (n > PYIMG_MAX_FRAMES || !(im->ram = aligned_alloc(4096, PYIMG_RAM)))
		return -1;
	memset(im->ram, 0, PYIMG_RAM);
	pt = (uint64_t *)(void *)im->ram;
	pt[PYIMG_CR3 / 8] = 0x3000 | 7;			/* P, W, U */
	pt[0x3000 / 8] = 0x4000 | 7;
	pt[0x4000 / 8 + (PYIMG_VA >> 21 & 511)] = PYIMG_GPA | 7 | 0x80;	/* 2 MiB */
	for (unsigned i = 0; i < nr_slots; i++) {
		struct opvm_slot s = { .seq = 2, .pid = PYIMG_TID, .tgid = PYIMG_TID,
				       .cr3 = PYIMG_CR3 };

		memcpy(im->ram + PYIMG_SLOTS + i * sizeof(s), &s, sizeof(s));
	}
	im->brk = PYIMG_VA + 0x1000;
	im->t.runtime = pyimg_alloc(im, 4096);
	im->t.code_type = pyimg_alloc(im, 64);
	im->t.unicode_type = pyimg_alloc(im, 64);
	im->t.bytes_type = pyimg_alloc(im, 64);
	im->t.version = PYIMG_VERSION;
	if (pyframes_layout(&um, &im->t, &im->l, &st))
		return -1;
	pyimg_elf(im);
	interp = pyimg_alloc(im, 4096);
	im->ts = pyimg_alloc(im, 1024);
	cf = pyimg_alloc(im, 64);
	pyimg_put64(im, im->t.runtime + im->l.rt_interp_head, interp);
	pyimg_put64(im, interp + im->l.is_threads_head, im->ts);
	pyimg_put64(im, im->ts + im->l.ts_interp, interp);
	pyimg_put64(im, im->ts + im->l.ts_native_tid, PYIMG_TID);
	pyimg_put64(im, im->ts + im->l.ts_frame, cf);
	for (unsigned k = n; k-- > 0;) {
		uint64_t f = pyimg_alloc(im, 80);

		im->codes[k] = pyimg_code(im, names[k], 10 * (int)(k + 1), 8);
		pyimg_put64(im, f + im->l.fr_code, im->codes[k]);
		pyimg_put64(im, f + im->l.fr_previous, prev);
		pyimg_put64(im, f + im->l.fr_instr, pyimg_instr(im, im->codes[k], 3));
		im->frames[k] = prev = f;
	}
	im->depth = n;
	pyimg_put64(im, cf + im->l.cf_current, n ? im->frames[0] : 0);
	im->m = guestmem_open(getpid());
	if (!im->m || guestmem_add_range(im->m, 0, PYIMG_RAM, (uint64_t)(uintptr_t)im->ram))
		return -1;
	return 0;
}

static inline void pyimg_free(struct pyimg *im)
{
	guestmem_close(im->m);
	free(im->ram);
	im->m = NULL;
	im->ram = NULL;
}

/* The set the collector would publish for the image's process. */
static inline void pyimg_set(struct sampler_python *set)
{
	memset(set, 0, sizeof(*set));
	set->nr = 1;
	set->as[0].cr3 = PYIMG_CR3;
	set->as[0].exe_base = PYIMG_VA;
	set->as[0].version = 0x030b0000;
}

/*
 * A kernel for a sampler without opvm.ko (pyimg_kernel()): the image's
 * page tables also map the kernel's direct map (PYIMG_KDIRECT, 2 MiB of
 * RAM from guest-physical 0); CPU i's current-task pointer is the word at
 * PYIMG_CUR_PA + 8 i; the task_structs (their fields at pyimg_koff's
 * offsets) are PYIMG_TID's, whose mm's pgd is PYIMG_CR3, PYIMG_CLONES
 * other task_structs of that thread (as if freed and taken again), task
 * 43 in another address space and a kernel thread.
 */
#define PYIMG_KDIRECT		0xffff888000000000ull
#define PYIMG_KPDPT		0xa000ull
#define PYIMG_KPD		0xb000ull
#define PYIMG_CUR_PA		0xc000ull
#define PYIMG_TASK_A		0x10000ull	/* PYIMG_TID */
#define PYIMG_TASK_OTHER	0x11000ull	/* 43, not a CPython address space */
#define PYIMG_TASK_KTHREAD	0x12000ull
#define PYIMG_MM_A		0x13000ull
#define PYIMG_MM_OTHER		0x13800ull
#define PYIMG_TASK_CLONES	0x20000ull	/* PYIMG_CLONES, PYIMG_TASK_SIZE apart */
#define PYIMG_CLONES		256u
#define PYIMG_TASK_SIZE		0x400ull

static const struct kbtf_offsets pyimg_koff = {
	.task_size = PYIMG_TASK_SIZE, .task_pid = 0x100, .task_tgid = 0x104,
	.task_comm = 0x108, .task_mm = 0x120, .mm_size = 0x100, .mm_pgd = 0x50,
};

static inline void pyimg_kput64(struct pyimg *im, uint64_t pa, uint64_t v)
{
	__atomic_store_n((uint64_t *)(void *)(im->ram + pa), v, __ATOMIC_RELAXED);
}

static inline void pyimg_ktask(struct pyimg *im, uint64_t pa, uint32_t pid, uint64_t mm)
{
	memcpy(im->ram + pa + pyimg_koff.task_pid, &pid, 4);
	memcpy(im->ram + pa + pyimg_koff.task_tgid, &pid, 4);
	memcpy(im->ram + pa + pyimg_koff.task_comm, "python3", 8);
	pyimg_kput64(im, pa + pyimg_koff.task_mm, mm ? PYIMG_KDIRECT + mm : 0);
}

/* CPU i runs the task_struct at guest-physical task. */
static inline void pyimg_kcur_set(struct pyimg *im, unsigned i, uint64_t task)
{
	pyimg_kput64(im, PYIMG_CUR_PA + 8 * i, PYIMG_KDIRECT + task);
}

/* The kernel for nr_cpus CPUs, each running PYIMG_TID, and what
 * introspection would hand a sampler of it. */
static inline void pyimg_kernel(struct pyimg *im, unsigned nr_cpus, struct kcurrent_info *ci)
{
	memset(ci, 0, sizeof(*ci));
	ci->nr = nr_cpus;
	ci->pgd_gpa = PYIMG_CR3;
	ci->off = pyimg_koff;
	pyimg_kput64(im, PYIMG_CR3 + 8 * (PYIMG_KDIRECT >> 39 & 511), PYIMG_KPDPT | 3);
	pyimg_kput64(im, PYIMG_KPDPT, PYIMG_KPD | 3);
	pyimg_kput64(im, PYIMG_KPD, 0x83);			/* 2 MiB at 0 */
	pyimg_kput64(im, PYIMG_MM_A + pyimg_koff.mm_pgd, PYIMG_KDIRECT + PYIMG_CR3);
	pyimg_kput64(im, PYIMG_MM_OTHER + pyimg_koff.mm_pgd, PYIMG_KDIRECT + 0x6000);
	pyimg_ktask(im, PYIMG_TASK_A, PYIMG_TID, PYIMG_MM_A);
	pyimg_ktask(im, PYIMG_TASK_OTHER, 43, PYIMG_MM_OTHER);
	pyimg_ktask(im, PYIMG_TASK_KTHREAD, 2, 0);
	for (unsigned k = 0; k < PYIMG_CLONES; k++)
		pyimg_ktask(im, PYIMG_TASK_CLONES + k * PYIMG_TASK_SIZE, PYIMG_TID, PYIMG_MM_A);
	for (unsigned i = 0; i < nr_cpus && i < KCURRENT_MAX_CPUS; i++) {
		pyimg_kcur_set(im, i, PYIMG_TASK_A);
		ci->slot_pa[i] = PYIMG_CUR_PA + 8 * i;
	}
}

#endif /* OPVM_TESTS_PYGUEST_IMAGE_H */
