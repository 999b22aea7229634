/* SPDX-License-Identifier: MIT */
/*
 * A real stack for unwind/dwarf-cfi.c, as a sampler would copy it from a
 * guest: registers taken inside a libc qsort() callback (so the stack runs
 * through libc.so.6, built without frame pointers), the stack window above
 * sp copied, and the images of this process from /proc/self/maps as
 * find_image.  Shared by tests/unit/test-unwind-dwarf.c and
 * tests/bench/bench-unwind-dwarf.c, both built with -fomit-frame-pointer
 * (Makefile): only CFI leads from the callback back to main.
 */
#ifndef OPVM_TESTS_UNWIND_CAPTURE_H
#define OPVM_TESTS_UNWIND_CAPTURE_H

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/dwarf-cfi.h"

#define CAPTURE_MAPS	512

struct capture_map {
	uint64_t start, end, pgoff;
	char path[256];
};

struct capture {
	struct unwind_regs r;
	uint8_t stack[UNWIND_DWARF_WINDOW];
	size_t len;
	uint64_t stack_end;			/* of [stack], from the maps */
	struct capture_map map[CAPTURE_MAPS];	/* file-backed mappings */
	unsigned nmap;
	int done;
};

static struct capture cap;

/* This process's file-backed mappings, and the end of its [stack]. */
static int capture_read_maps(struct capture *c)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	if (!f)
		return -errno;
	c->nmap = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e, off;
		char path[256] = "";

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %255s", &s, &e, &off, path) < 3)
			continue;
		if (!strcmp(path, "[stack]"))
			c->stack_end = e;
		if (path[0] != '/' || c->nmap == CAPTURE_MAPS)
			continue;
		c->map[c->nmap] = (struct capture_map){ s, e, off, "" };
		snprintf(c->map[c->nmap].path, sizeof(c->map[0].path), "%s", path);
		c->nmap++;
	}
	fclose(f);
	return c->stack_end ? 0 : -ENOENT;
}

/* find_image over the maps read above. */
static int capture_find_image(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	const struct capture *c = arg;

	for (unsigned i = 0; i < c->nmap; i++) {
		if (pc < c->map[i].start || pc >= c->map[i].end)
			continue;
		*out = (struct unwind_dwarf_image){ c->map[i].path, c->map[i].start,
						    c->map[i].end, c->map[i].pgoff };
		return 0;
	}
	return -ENOENT;
}

/* Word by word, unseen by AddressSanitizer: the window holds other frames'
 * redzones, which a sampler reading guest memory does not know about. */
__attribute__((noinline, no_sanitize_address))
static void capture_copy(uint8_t *dst, uint64_t sp, size_t len)
{
	const volatile uint64_t *src = (const volatile uint64_t *)(uintptr_t)sp;

	for (size_t i = 0; i < len / 8; i++) {
		uint64_t w = src[i];

		memcpy(dst + i * 8, &w, 8);
	}
}

/* The registers at this point of the caller, DWARF order; the ip is the
 * instruction after the lea, sp the caller's own. */
#define CAPTURE_REGS(r) __asm__ volatile(					\
	"movq %%rax, %c[g0](%[p])\n\t"						\
	"movq %%rdx, %c[g1](%[p])\n\t"						\
	"movq %%rcx, %c[g2](%[p])\n\t"						\
	"movq %%rbx, %c[g3](%[p])\n\t"						\
	"movq %%rsi, %c[g4](%[p])\n\t"						\
	"movq %%rdi, %c[g5](%[p])\n\t"						\
	"movq %%rbp, %c[g6](%[p])\n\t"						\
	"movq %%rbp, %c[bp](%[p])\n\t"						\
	"movq %%rsp, %c[g7](%[p])\n\t"						\
	"movq %%rsp, %c[sp](%[p])\n\t"						\
	"movq %%r8, %c[g8](%[p])\n\t"						\
	"movq %%r9, %c[g9](%[p])\n\t"						\
	"movq %%r10, %c[g10](%[p])\n\t"						\
	"movq %%r11, %c[g11](%[p])\n\t"						\
	"movq %%r12, %c[g12](%[p])\n\t"						\
	"movq %%r13, %c[g13](%[p])\n\t"						\
	"movq %%r14, %c[g14](%[p])\n\t"						\
	"movq %%r15, %c[g15](%[p])\n\t"						\
	"leaq 0(%%rip), %%rax\n\t"						\
	"movq %%rax, %c[ip](%[p])\n\t"						\
	: : [p] "r"(r),								\
	  [ip] "i"(offsetof(struct unwind_regs, ip)),				\
	  [sp] "i"(offsetof(struct unwind_regs, sp)),				\
	  [bp] "i"(offsetof(struct unwind_regs, bp)),				\
	  [g0] "i"(offsetof(struct unwind_regs, gpr[0])),			\
	  [g1] "i"(offsetof(struct unwind_regs, gpr[1])),			\
	  [g2] "i"(offsetof(struct unwind_regs, gpr[2])),			\
	  [g3] "i"(offsetof(struct unwind_regs, gpr[3])),			\
	  [g4] "i"(offsetof(struct unwind_regs, gpr[4])),			\
	  [g5] "i"(offsetof(struct unwind_regs, gpr[5])),			\
	  [g6] "i"(offsetof(struct unwind_regs, gpr[6])),			\
	  [g7] "i"(offsetof(struct unwind_regs, gpr[7])),			\
	  [g8] "i"(offsetof(struct unwind_regs, gpr[8])),			\
	  [g9] "i"(offsetof(struct unwind_regs, gpr[9])),			\
	  [g10] "i"(offsetof(struct unwind_regs, gpr[10])),			\
	  [g11] "i"(offsetof(struct unwind_regs, gpr[11])),			\
	  [g12] "i"(offsetof(struct unwind_regs, gpr[12])),			\
	  [g13] "i"(offsetof(struct unwind_regs, gpr[13])),			\
	  [g14] "i"(offsetof(struct unwind_regs, gpr[14])),			\
	  [g15] "i"(offsetof(struct unwind_regs, gpr[15]))			\
	: "rax", "memory")

/* The qsort() callback: captures once, then compares. */
__attribute__((noinline))
static int capture_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (!cap.done) {
		uint64_t room;

		CAPTURE_REGS(&cap.r);
		cap.r.cpl = 3;
		room = cap.stack_end - cap.r.sp;
		cap.len = room < sizeof(cap.stack) ? (size_t)room & ~(size_t)7 :
			  sizeof(cap.stack);
		capture_copy(cap.stack, cap.r.sp, cap.len);
		cap.done = 1;
	}
	return (x > y) - (x < y);
}

/* Sorts through libc with capture_cmp: cap then holds the stack of its
 * first comparison.  libc's own qsort, by its handle: AddressSanitizer's
 * interceptor would make the first comparisons itself.  0, or -errno. */
__attribute__((noinline))
static int capture_through_qsort(void)
{
	void (*libc_qsort)(void *, size_t, size_t, int (*)(const void *, const void *));
	int v[8] = { 5, 2, 7, 1, 6, 3, 8, 4 };
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	int err = capture_read_maps(&cap);

	if (!libc)
		return -ENOENT;
	*(void **)&libc_qsort = dlsym(libc, "qsort");
	dlclose(libc);
	if (err || !libc_qsort)
		return err ? err : -ENOENT;
	cap.done = 0;
	libc_qsort(v, 8, sizeof(v[0]), capture_cmp);
	return cap.done ? 0 : -EINVAL;
}

#endif /* OPVM_TESTS_UNWIND_CAPTURE_H */
