/* SPDX-License-Identifier: MIT */
/*
 * pltcall [seconds]: dynamically linked; calls one of libc's smallest
 * functions, isalpha() (in parentheses: the function, not the macro, whose
 * __ctype_b_loc() call gcc hoists out of the loop), in a loop, every call
 * through this binary's PLT stub (`jmp *GOT`): perf on the host finds 37 %
 * of its samples in isalpha@plt, opvm under TCG 3.9 to 10.6 % in its
 * [.plt], the stubs a report must name from guest memory as from the file
 * (tests/integration/introspect-memsyms.sh).
 */
#include <ctype.h>
#include "common.h"

static volatile uint64_t sink;

static void __attribute__((noinline)) calls(unsigned n)
{
	uint64_t x = 0;

	for (unsigned i = 0; i < n; i++)
		x += (uint64_t)!!(isalpha)((int)(i & 127));
	sink += x;
}

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 3.0);
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9), n = 0;

	TRUTH("pltcall pid=%d seconds=%.1f\n", getpid(), secs);
	do {
		calls(100000);
		n += 100000;
	} while (now_ns() < end);
	TRUTH("pltcall plt_calls=%llu\n", (unsigned long long)n);
	return 0;
}
