/* SPDX-License-Identifier: MIT */
/*
 * jitmap [seconds [a b c [late]]]: a tiny JIT runtime.  It copies one
 * function's machine code (jit_unit below, no relocations) three times
 * into anonymous executable memory, names the copies jit_a, jit_b and
 * jit_c in /tmp/perf-PID.map as perf's jit interface has runtimes do
 * ("START SIZE name" lines), and runs them a, b and c units (default 10,
 * 30 and 60) of identical work per round: the known split of its JIT
 * samples.  After `late` percent of the run (default 50) it "compiles" a
 * fourth copy, jit_late, appends its line to the map and runs it 10 units
 * a round too: a map that grows while the host profiles, and a function
 * the host can only name from what it read of the map after the session
 * started.  The map also carries an entry that a later one replaces
 * (jit_a's range first named jit_old): the latest line wins.  JIT code
 * calls JIT code: main calls jit_a through jit_via_a and jit_b through
 * jit_via_b, two more compiled functions with frame pointers, and jit_c
 * and jit_late itself (the callers a call graph must name).  Static,
 * like the other workloads.
 */
#include <string.h>
#include <sys/mman.h>

#include "common.h"

/* uint64_t jit_unit(uint64_t x, unsigned units): units rounds of 2000
 * dependency-chained multiply-adds (split3's unit), position-independent
 * and free of relocations, so that its bytes run anywhere.  It keeps a
 * frame pointer, as runtimes' JIT code does for perf: a stack unwound by
 * frame pointers finds its caller. */
__asm__(".text\n"
	".globl jit_unit_start\n"
	".globl jit_unit_end\n"
	"jit_unit_start:\n"
	"	pushq %rbp\n"
	"	movq %rsp, %rbp\n"
	"	movq %rdi, %rax\n"
	"	movabsq $6364136223846793005, %rcx\n"
	"	testl %esi, %esi\n"
	"	jz 3f\n"
	"1:	xorl %edx, %edx\n"
	"2:	imulq %rcx, %rax\n"
	"	addq %rdx, %rax\n"
	"	incl %edx\n"
	"	cmpl $2000, %edx\n"
	"	jb 2b\n"
	"	decl %esi\n"
	"	jnz 1b\n"
	"3:	popq %rbp\n"
	"	ret\n"
	"jit_unit_end:\n");
extern const char jit_unit_start[], jit_unit_end[];

/* uint64_t jit_via(uint64_t x, unsigned units, unit_fn f): calls f(x,
 * units) in a frame of its own: JIT code calling JIT code, the callers a
 * call graph names from the map. */
__asm__(".text\n"
	".globl jit_via_start\n"
	".globl jit_via_end\n"
	"jit_via_start:\n"
	"	pushq %rbp\n"
	"	movq %rsp, %rbp\n"
	"	call *%rdx\n"
	"	popq %rbp\n"
	"	ret\n"
	"jit_via_end:\n");
extern const char jit_via_start[], jit_via_end[];

typedef uint64_t (*unit_fn)(uint64_t x, unsigned int units);
typedef uint64_t (*via_fn)(uint64_t x, unsigned int units, unit_fn f);

#define SLOT	256	/* bytes per compiled function */
#define NR_SLOTS 6

static FILE *map;

/* "Compiles" the code [from, to) as function i of the code area and
 * names it in the map: its address. */
static void *compile_code(char *code, int i, const char *from, const char *to, const char *name)
{
	size_t n = (size_t)(to - from);
	char *at = code + (size_t)i * SLOT;

	memcpy(at, from, n);
	fprintf(map, "%lx %zx %s\n", (unsigned long)at, n, name);
	fflush(map);
	return at;
}

static unit_fn compile(char *code, int i, const char *name)
{
	return (unit_fn)compile_code(code, i, jit_unit_start, jit_unit_end, name);
}

static via_fn compile_via(char *code, int i, const char *name)
{
	return (via_fn)compile_code(code, i, jit_via_start, jit_via_end, name);
}

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 6.0);
	long a = arg_long(argc, argv, 2, 10), b = arg_long(argc, argv, 3, 30);
	long c = arg_long(argc, argv, 4, 60);
	long late = arg_long(argc, argv, 5, 50);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9);
	uint64_t late_at = t0 + (end - t0) / 100 * (uint64_t)(late < 0 || late > 100 ? 50 : late);
	uint64_t x = 1, rounds = 0, late_round = 0;
	unit_fn fa, fb, fc, fl = NULL;
	via_fn va, vb;
	char path[64], *code;

	if (a < 1 || b < 1 || c < 1 || a + b + c > 1000)
		a = 10, b = 30, c = 60;
	code = mmap(NULL, NR_SLOTS * SLOT, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	map = fopen(path, "w");
	if (code == MAP_FAILED || !map) {
		perror("jitmap");
		return 1;
	}
	/* a range named twice: the later line (jit_a) is the one that holds */
	fprintf(map, "%lx %x jit_old\n", (unsigned long)code, SLOT);
	fa = compile(code, 0, "jit_a");
	fb = compile(code, 1, "jit_b");
	fc = compile(code, 2, "jit_c");
	va = compile_via(code, 4, "jit_via_a");
	vb = compile_via(code, 5, "jit_via_b");
	TRUTH("jitmap pid=%d seconds=%.1f code=%#lx\n", getpid(), secs, (unsigned long)code);
	TRUTH("jitmap units jit_a=%ld jit_b=%ld jit_c=%ld jit_late=10\n", a, b, c);
	TRUTH("jitmap callers jit_a=jit_via_a jit_b=jit_via_b jit_c=main jit_late=main\n");
	do {
		x = va(x, (unsigned int)a, fa);
		x = vb(x, (unsigned int)b, fb);
		x = fc(x, (unsigned int)c);
		if (fl) {
			x = fl(x, 10);
		} else if (now_ns() >= late_at) {
			fl = compile(code, 3, "jit_late");
			late_round = rounds;
			TRUTH("jitmap late round=%llu\n", (unsigned long long)rounds);
		}
		rounds++;
	} while (now_ns() < end);
	TRUTH("jitmap done rounds=%llu late_rounds=%llu x=%llx\n", (unsigned long long)rounds,
	      (unsigned long long)(rounds - late_round), (unsigned long long)x);
	fclose(map);
	return 0;
}
