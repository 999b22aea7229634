/* SPDX-License-Identifier: MIT */
/*
 * jitmap [seconds [a b c [late [p q]]]]: a tiny JIT runtime.  It copies one
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
 * and jit_late itself (the callers a call graph must name).
 *
 * It also writes a jitdump as perf's agents do (perf's jitdump format,
 * tools/perf/Documentation/jitdump-specification.txt in the Linux tree):
 * /tmp/.debug/jit/jitmap-PID/jit-PID.dump, not /tmp/jit-PID.dump, mapped
 * PROT_EXEC so that a profiler finds it by the mapping; jdump_p and
 * jdump_q (p and q units a round, default 20 and 40; 0 0: no dump) are
 * named by it alone, never by the perf map, each JIT_CODE_LOAD after a
 * JIT_CODE_DEBUG_INFO a reader skips; jdump_q is then moved to another
 * slot (JIT_CODE_MOVE) before it runs, so that only the move names where
 * it runs; with jit_late comes jdump_late, a load appended to the dump
 * while the host profiles (10 units a round).  Static, like the other
 * workloads.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

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

/* ---- the jitdump ---------------------------------------------------------- */

static int jd_fd = -1;
static char *jd_code;	/* the dump's code area: 4 slots */

static void jd_put(const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(jd_fd, c, n);

		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void jd_u32(uint32_t v)
{
	jd_put(&v, sizeof(v));
}

static void jd_u64(uint64_t v)
{
	jd_put(&v, sizeof(v));
}

/* A record's header: its id and total size (the header's 16 bytes with
 * payload bytes after them). */
static void jd_rec(uint32_t id, size_t payload)
{
	jd_u32(id);
	jd_u32((uint32_t)(16 + payload));
	jd_u64(now_ns());
}

/* The dump, its header written and its first page mapped executable (how
 * perf's agents tell perf record where the dump is): 0 or -1. */
static int jd_open(char *path, size_t len)
{
	int pid = (int)getpid();

	snprintf(path, len, "/tmp/.debug/jit/jitmap-%d", pid);
	mkdir("/tmp/.debug", 0755);
	mkdir("/tmp/.debug/jit", 0755);
	mkdir(path, 0755);
	snprintf(path, len, "/tmp/.debug/jit/jitmap-%d/jit-%d.dump", pid, pid);
	jd_fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
	if (jd_fd < 0)
		return -1;
	jd_u32(0x4A695444);	/* "JiTD" */
	jd_u32(1);		/* version */
	jd_u32(40);		/* the header's size */
	jd_u32(62);		/* EM_X86_64 */
	jd_u32(0);
	jd_u32((uint32_t)pid);
	jd_u64(now_ns());
	jd_u64(0);		/* flags */
	return mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, jd_fd, 0) == MAP_FAILED ?
	       -1 : 0;
}

/* "Compiles" function i of the dump's code area: a debug-info record
 * with no entries (the spec puts it first), then its JIT_CODE_LOAD with
 * its name and code bytes. */
static unit_fn jd_load(char *jcode, int i, const char *name, uint64_t index)
{
	size_t n = (size_t)(jit_unit_end - jit_unit_start), nl = strlen(name) + 1;
	char *at = jcode + (size_t)i * SLOT;

	memcpy(at, jit_unit_start, n);
	jd_rec(2, 16);
	jd_u64((uint64_t)(uintptr_t)at);
	jd_u64(0);
	jd_rec(0, 40 + nl + n);
	jd_u32((uint32_t)getpid());
	jd_u32((uint32_t)opvm_gettid());
	jd_u64((uint64_t)(uintptr_t)at);	/* vma */
	jd_u64((uint64_t)(uintptr_t)at);	/* code_addr */
	jd_u64(n);
	jd_u64(index);
	jd_put(name, nl);
	jd_put(at, n);
	return (unit_fn)(void *)at;
}

/* Moves function `from` of the dump's area to slot `to` (JIT_CODE_MOVE
 * of its code_index), the old copy made a trap: only the move names
 * where it runs now. */
static unit_fn jd_move(char *jcode, int from, int to, uint64_t index)
{
	size_t n = (size_t)(jit_unit_end - jit_unit_start);
	char *old = jcode + (size_t)from * SLOT, *at = jcode + (size_t)to * SLOT;

	memcpy(at, old, n);
	memset(old, 0xcc, n);
	jd_rec(1, 48);
	jd_u32((uint32_t)getpid());
	jd_u32((uint32_t)opvm_gettid());
	jd_u64((uint64_t)(uintptr_t)at);	/* vma */
	jd_u64((uint64_t)(uintptr_t)old);
	jd_u64((uint64_t)(uintptr_t)at);
	jd_u64(n);
	jd_u64(index);
	return (unit_fn)(void *)at;
}

/* The dump's two functions, jdump_q moved once: 0, or -1 (no dump). */
static int jd_setup(unit_fn *fp, unit_fn *fq)
{
	char path[96], *jcode;

	jcode = jd_code = mmap(NULL, 4 * SLOT, PROT_READ | PROT_WRITE | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (jcode == MAP_FAILED || jd_open(path, sizeof(path)))
		return -1;
	*fp = jd_load(jcode, 0, "jdump_p", 1);
	jd_load(jcode, 1, "jdump_q", 2);
	*fq = jd_move(jcode, 1, 2, 2);
	TRUTH("jitmap jitdump path=%s code=%#lx jdump_p=slot0 jdump_q=slot2 (moved from "
	      "slot1)\n", path, (unsigned long)jcode);
	return 0;
}

int main(int argc, char **argv)
{
	double secs = arg_double(argc, argv, 1, 6.0);
	long a = arg_long(argc, argv, 2, 10), b = arg_long(argc, argv, 3, 30);
	long c = arg_long(argc, argv, 4, 60);
	long late = arg_long(argc, argv, 5, 50);
	long p = arg_long(argc, argv, 6, 20), q = arg_long(argc, argv, 7, 40);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9);
	uint64_t late_at = t0 + (end - t0) / 100 * (uint64_t)(late < 0 || late > 100 ? 50 : late);
	uint64_t x = 1, rounds = 0, late_round = 0;
	unit_fn fa, fb, fc, fl = NULL, fp = NULL, fq = NULL, fdl = NULL;
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
	if (p < 0 || q < 0 || p + q > 1000)
		p = 20, q = 40;
	if ((p || q) && jd_setup(&fp, &fq))
		perror("jitmap: jitdump");
	TRUTH("jitmap pid=%d seconds=%.1f code=%#lx\n", getpid(), secs, (unsigned long)code);
	TRUTH("jitmap units jdump_p=%ld jdump_q=%ld jdump_late=10\n", fp ? p : 0, fq ? q : 0);
	TRUTH("jitmap units jit_a=%ld jit_b=%ld jit_c=%ld jit_late=10\n", a, b, c);
	TRUTH("jitmap callers jit_a=jit_via_a jit_b=jit_via_b jit_c=main jit_late=main\n");
	do {
		x = va(x, (unsigned int)a, fa);
		x = vb(x, (unsigned int)b, fb);
		x = fc(x, (unsigned int)c);
		if (fp) {
			x = fp(x, (unsigned int)p);
			x = fq(x, (unsigned int)q);
		}
		if (fl) {
			x = fl(x, 10);
			x = fdl ? fdl(x, 10) : x;
		} else if (now_ns() >= late_at) {
			fl = compile(code, 3, "jit_late");
			fdl = fp ? jd_load(jd_code, 3, "jdump_late", 3) : NULL;
			late_round = rounds;
			TRUTH("jitmap late round=%llu\n", (unsigned long long)rounds);
		}
		rounds++;
	} while (now_ns() < end);
	TRUTH("jitmap done rounds=%llu late_rounds=%llu x=%llx\n", (unsigned long long)rounds,
	      (unsigned long long)(rounds - late_round), (unsigned long long)x);
	fclose(map);
	if (jd_fd >= 0)
		jd_rec(3, 0);	/* JIT_CODE_CLOSE */
	return 0;
}
