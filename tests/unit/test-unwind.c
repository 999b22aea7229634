// SPDX-License-Identifier: MIT
/*
 * unwind/fp.c: a real frame chain (this test's own stack, functions built
 * with frame pointers), a chain in "guest RAM" reached through page tables
 * and vmm/guest/guestmem.c (frames straddling two non-adjacent pages), and
 * hostile chains: loops, frames going down the stack, misaligned or
 * unreadable frames, return addresses of the wrong half, huge depths.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cmocka.h>

#include "unwind/unwind.h"
#include "vmm/guest/guestmem.h"

/* ---- this process's own stack --------------------------------------------- */

/* Reads this process's memory; unmapped bytes fail, never fault. */
static int self_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)gva, len };

	(void)arg;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ?
	       0 : -EFAULT;
}

static void *ret_into[3];	/* each level's return address, innermost first */
static uint64_t got[8];
static unsigned nr_got;
static enum unwind_stop got_why;

#define FP __attribute__((noinline, optimize("no-omit-frame-pointer")))

static FP void level3(void)
{
	struct unwind_mem m = { self_read, NULL };
	struct unwind_regs r = { .cpl = 3 };
	volatile char here;

	ret_into[0] = __builtin_return_address(0);
	r.ip = (uint64_t)(uintptr_t)&level3;
	r.bp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
	r.sp = (uint64_t)(uintptr_t)&here;
	nr_got = unwind_fp(&m, &r, got, 4, &got_why);
	__asm__ volatile("" ::: "memory");	/* not a tail call */
}

static FP void level2(void)
{
	ret_into[1] = __builtin_return_address(0);
	level3();
	__asm__ volatile("" ::: "memory");
}

static FP void level1(void)
{
	ret_into[2] = __builtin_return_address(0);
	level2();
	__asm__ volatile("" ::: "memory");
}

static void test_own_stack(void **state)
{
	(void)state;
	level1();
	assert_int_equal(nr_got, 4);
	assert_int_equal(got_why, UNWIND_DEPTH);
	for (int i = 0; i < 3; i++)
		assert_int_equal(got[i + 1], (uint64_t)(uintptr_t)ret_into[i]);
}

/* ---- a stack in a buffer ---------------------------------------------------- */

#define STK_BASE	0x7ffd00000000ull	/* the buffer's guest address */
#define STK_WORDS	4096

struct stk {
	uint64_t w[STK_WORDS];
	size_t budget;		/* bytes the reader may still read */
};

static int stk_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct stk *s = arg;

	if (gva < STK_BASE || gva - STK_BASE > sizeof(s->w) ||
	    len > sizeof(s->w) - (gva - STK_BASE) || len > s->budget)
		return -EFAULT;
	s->budget -= len;
	memcpy(buf, (char *)s->w + (gva - STK_BASE), len);
	return 0;
}

/* Frame i at word 2 * i: saved bp -> frame i + 1, return address pc. */
static void chain(struct stk *s, unsigned frames)
{
	for (unsigned i = 0; i < frames; i++) {
		s->w[2 * i] = i + 1 < frames ? STK_BASE + 16ull * (i + 1) : 0;
		s->w[2 * i + 1] = 0x401000 + i;
	}
}

static unsigned walk(struct stk *s, uint64_t bp, uint8_t cpl, uint64_t *pcs, unsigned max,
		     enum unwind_stop *why)
{
	struct unwind_mem m = { stk_read, s };
	struct unwind_regs r = { .ip = 0x400100, .sp = STK_BASE, .bp = bp, .cpl = cpl };

	s->budget = sizeof(s->w);
	return unwind_fp(&m, &r, pcs, max, why);
}

static void test_hostile(void **state)
{
	static struct stk s;
	uint64_t pcs[UNWIND_MAX_DEPTH + 8];
	enum unwind_stop why;

	(void)state;
	/* a clean chain of 10 frames ends at the null frame pointer */
	memset(&s, 0, sizeof(s));
	chain(&s, 10);
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 11);
	assert_int_equal(why, UNWIND_END);
	assert_int_equal(pcs[0], 0x400100);
	assert_int_equal(pcs[10], 0x401009);

	/* a 1000-frame chain is cut at the depth asked, and at 128 whatever
	 * is asked */
	chain(&s, 1000);
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 50, &why), 50);
	assert_int_equal(why, UNWIND_DEPTH);
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, UNWIND_MAX_DEPTH + 8, &why),
			 UNWIND_MAX_DEPTH);
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 0, &why), 0);

	/* a loop: frame 3 points back at frame 1 */
	chain(&s, 10);
	s.w[6] = STK_BASE + 16;
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 5);
	assert_int_equal(why, UNWIND_BAD_FRAME);
	/* a frame pointing at itself */
	s.w[0] = STK_BASE;
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 2);
	assert_int_equal(why, UNWIND_BAD_FRAME);

	/* misaligned, below sp, beyond the stack's reach */
	chain(&s, 10);
	s.w[2] = STK_BASE + 16 * 2 + 4;
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 3);
	assert_int_equal(why, UNWIND_BAD_FRAME);
	assert_int_equal(walk(&s, STK_BASE - 16, 3, pcs, 64, &why), 1);
	assert_int_equal(why, UNWIND_BAD_FRAME);
	chain(&s, 10);
	s.w[0] = STK_BASE + UNWIND_STACK_REACH + 16;
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 2);
	assert_int_equal(why, UNWIND_BAD_FRAME);

	/* unreadable: the chain leaves the buffer, or the read budget ends */
	chain(&s, 10);
	s.w[4] = STK_BASE + sizeof(s.w) + 64;
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 4);
	assert_int_equal(why, UNWIND_UNREADABLE);

	/* return addresses of the wrong half for the privilege level */
	chain(&s, 10);
	s.w[5] = 0xffffffff81000000ull;
	assert_int_equal(walk(&s, STK_BASE, 3, pcs, 64, &why), 3);
	assert_int_equal(why, UNWIND_BAD_FRAME);
	assert_int_equal(walk(&s, STK_BASE, 0, pcs, 64, &why), 1);
	assert_int_equal(why, UNWIND_BAD_FRAME);
}

/* ---- through page tables, with vmm/guest/guestmem.c ------------------------------- */

#define MIB (1024ull * 1024)

struct virt {
	struct guestmem *m;
	uint64_t cr3;
};

static int virt_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct virt *v = arg;

	return guestmem_read_virt(v->m, v->cr3, gva, buf, len) ? -EFAULT : 0;
}

static void test_guest_pages(void **state)
{
	/* user stack pages 0x7ffd_0000_0000 (gpa 0x20000) and +4K (gpa 0x10000:
	 * below the first, so a read that assumed contiguity would miss) */
	const uint64_t va = 0x7ffd00000000ull;
	uint64_t *ram = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct virt v = { .cr3 = 0x1000 };
	struct unwind_mem m = { virt_read, &v };
	struct unwind_regs r = { .ip = 0x400100, .cpl = 3 };
	uint64_t pcs[16], frame_va = va + 4096 - 8, next_va = va + 4096 + 64;
	enum unwind_stop why;
	unsigned n;

	(void)state;
	assert_true(ram != MAP_FAILED);
	v.m = guestmem_open(getpid());
	assert_non_null(v.m);
	assert_int_equal(guestmem_add_range(v.m, 0, 4 * MIB, (uint64_t)(uintptr_t)ram), 0);
	/* PML4 0x1000[255] -> PDPT 0x2000[500] -> PD 0x3000[0] -> PT 0x4000 */
	ram[0x1000 / 8 + ((va >> 39) & 511)] = 0x2000 | 7;
	ram[0x2000 / 8 + ((va >> 30) & 511)] = 0x3000 | 7;
	ram[0x3000 / 8 + ((va >> 21) & 511)] = 0x4000 | 7;
	ram[0x4000 / 8 + ((va >> 12) & 511)] = 0x20000 | 7;
	ram[0x4000 / 8 + (((va >> 12) + 1) & 511)] = 0x10000 | 7;
	/* frame 0 straddles the pages: saved bp in the first, return address
	 * in the second; frame 1 in the second page ends the chain */
	ram[(0x20000 + 4096 - 8) / 8] = next_va;
	ram[0x10000 / 8] = 0x401234;
	ram[(0x10000 + 64) / 8] = 0;
	ram[(0x10000 + 72) / 8] = 0x405678;
	r.sp = va + 4096 - 64;
	r.bp = frame_va;
	n = unwind_fp(&m, &r, pcs, 16, &why);
	assert_int_equal(n, 3);
	assert_int_equal(pcs[1], 0x401234);
	assert_int_equal(pcs[2], 0x405678);
	assert_int_equal(why, UNWIND_END);
	/* the next page is not mapped: unreadable, no host fault */
	ram[(0x10000 + 64) / 8] = va + 8192;
	n = unwind_fp(&m, &r, pcs, 16, &why);
	assert_int_equal(n, 3);
	assert_int_equal(why, UNWIND_UNREADABLE);
	guestmem_close(v.m);
	munmap(ram, 4 * MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_stack),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_guest_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
