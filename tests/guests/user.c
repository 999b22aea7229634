// SPDX-License-Identifier: MIT
/*
 * Ring-3 program of the synthetic guest.  Process A (rdi = 0) runs func_a
 * for n loop iterations per time slice, process B (rdi = 1) runs func_b for
 * 3n: with identical loop bodies, A:B time is 1:3.  Each slice ends with
 * a ud2 trap ("yield"), which makes the guest kernel do its own work and
 * switch to the other address space.
 */
#define LOOP(n) asm volatile("1: dec %0\n\tjnz 1b" : "+r"(n) : : "cc")

__attribute__((noinline)) void func_a(unsigned long n)
{
	LOOP(n);
}

__attribute__((noinline)) void func_b(unsigned long n)
{
	LOOP(n);
}

__attribute__((noreturn, section(".text.start"))) void _start(unsigned long which,
							       unsigned long n)
{
	for (;;) {
		if (which == 0)
			func_a(n);
		else
			func_b(3 * n);
		asm volatile("ud2" : : : "memory");	/* yield: see entry.S */
	}
}
