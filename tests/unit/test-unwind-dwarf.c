// SPDX-License-Identifier: MIT
/*
 * unwind/dwarf.c on a real stack: this binary is built with
 * -fomit-frame-pointer (Makefile), a libc qsort() callback captures its
 * registers and 8 KiB of stack (tests/unit/unwind-capture.h), and the
 * DWARF unwinder, over that copy alone, must reach main through libc's
 * qsort_r and libcmocka.  Then: the cost per unwind, a truncated window,
 * the depth cap, an address-space switch (stale modules dropped, the walk
 * redone), and hostile stacks: random bytes, a frame-pointer loop, a
 * window larger than allowed, files that are not ELF.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <elfutils/libdwfl.h>

#include "unwind/dwarf.h"
#include "tests/unit/unwind-capture.h"

static uint64_t pcs[UNWIND_MAX_DEPTH];
static unsigned nr_pcs;
static enum unwind_stop why;

/* Names for this process's pcs, from its own files (libdwfl, /proc). */
static Dwfl *names;

static const char *name_of(uint64_t pc)
{
	Dwfl_Module *m = dwfl_addrmodule(names, pc);
	const char *s = m ? dwfl_module_addrname(m, pc) : NULL;

	return s ? s : "?";
}

static const char *image_of(uint64_t pc)
{
	struct unwind_dwarf_image im;

	if (capture_find_image(&cap, pc, &im))
		return "?";
	return strrchr(im.path, '/') ? strrchr(im.path, '/') + 1 : im.path;
}

static int setup(void **state)
{
	static const Dwfl_Callbacks cbs = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
	};

	if (capture_through_qsort())
		return -1;
	names = dwfl_begin(&cbs);
	if (!names || dwfl_linux_proc_report(names, getpid()) ||
	    dwfl_report_end(names, NULL, NULL))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	dwfl_end(names);
	return 0;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned unwind_cap(struct unwind_dwarf *u, size_t len, unsigned max)
{
	return unwind_dwarf(u, &cap.r, cap.stack, len, capture_find_image, &cap, pcs, max, &why);
}

/* Index of the first frame at or after from named name, or -1. */
static int frame_named(unsigned from, const char *name)
{
	for (unsigned i = from; i < nr_pcs; i++)
		if (!strcmp(name_of(i ? pcs[i] - 1 : pcs[i]), name))
			return (int)i;
	return -1;
}

static void test_reaches_main(void **state)
{
	struct unwind_dwarf *u = unwind_dwarf_new();
	struct unwind_dwarf_stats st;
	int q, t, m;
	double t0, cold, warm;
	const int rounds = 2000;

	assert_non_null(u);
	t0 = now_ns();
	nr_pcs = unwind_cap(u, cap.len, UNWIND_MAX_DEPTH);
	cold = now_ns() - t0;
	for (unsigned i = 0; i < nr_pcs; i++)
		print_message("  #%u %#llx %s %s\n", i, (unsigned long long)pcs[i],
			      image_of(pcs[i]), name_of(i ? pcs[i] - 1 : pcs[i]));
	print_message("  stop %d after %u frames, window %zu bytes\n", why, nr_pcs, cap.len);
	assert_int_equal(pcs[0], cap.r.ip);
	assert_string_equal(name_of(pcs[0]), "capture_cmp");
	/* the callback's caller is libc (msort_with_tmp, qsort_r), ... */
	assert_true(nr_pcs > 2);
	assert_string_equal(image_of(pcs[1]), "libc.so.6");
	q = frame_named(1, "qsort_r");
	assert_true(q > 0);
	for (int i = 1; i <= q; i++)
		assert_string_equal(image_of(pcs[i]), "libc.so.6");
	/* ... which returns into this binary, then cmocka, then main */
	t = frame_named((unsigned)q, "capture_through_qsort");
	assert_int_equal(t, q + 1);
	m = frame_named((unsigned)t, "main");
	assert_true(m > t);
	/* and past main into libc's start code: the CFI ends the walk */
	assert_true((unsigned)m + 1 < nr_pcs);
	assert_int_equal(why, UNWIND_END);

	t0 = now_ns();
	for (int i = 0; i < rounds; i++)
		assert_int_equal(unwind_cap(u, cap.len, UNWIND_MAX_DEPTH), nr_pcs);
	warm = (now_ns() - t0) / rounds;
	unwind_dwarf_get_stats(u, &st);
	assert_int_equal(st.unwinds, rounds + 1);
	assert_int_equal(st.restarts, 0);
	assert_int_equal(st.cut, 0);
	print_message("RESULT unwind-dwarf: %u frames from a qsort callback to main and past it "
		      "(qsort_r at #%d, main at #%d), %.0f ns per unwind (%d rounds), "
		      "first unwind %.0f ns (files opened)\n", nr_pcs, q, m, warm, rounds, cold);
	unwind_dwarf_free(u);
}

/* A window cut short: the walk goes as far as the copy reaches. */
static void test_truncated(void **state)
{
	struct unwind_dwarf *u = unwind_dwarf_new();
	uint64_t full[UNWIND_MAX_DEPTH];
	unsigned nfull, n;

	assert_non_null(u);
	nfull = unwind_cap(u, cap.len, UNWIND_MAX_DEPTH);
	memcpy(full, pcs, sizeof(full));
	n = unwind_cap(u, 64, UNWIND_MAX_DEPTH);
	assert_true(n >= 1 && n < nfull);
	assert_int_equal(why, UNWIND_UNREADABLE);
	assert_memory_equal(pcs, full, n * sizeof(pcs[0]));
	n = unwind_cap(u, 0, UNWIND_MAX_DEPTH);
	assert_true(n >= 1 && n < nfull);
	/* larger than allowed: nothing is read */
	n = unwind_dwarf(u, &cap.r, cap.stack, UNWIND_DWARF_MAX_WINDOW + 8,
			 capture_find_image, &cap, pcs, UNWIND_MAX_DEPTH, &why);
	assert_true(n < nfull);
	/* depth caps */
	assert_int_equal(unwind_cap(u, cap.len, 3), 3);
	assert_int_equal(why, UNWIND_DEPTH);
	assert_memory_equal(pcs, full, 3 * sizeof(pcs[0]));
	assert_int_equal(unwind_cap(u, cap.len, 0), 0);
	assert_int_equal(unwind_cap(u, cap.len, 100000), nfull);
	unwind_dwarf_free(u);
}

/* Another process maps other things at the same addresses: the first
 * context's modules are stale, and must be dropped, not used. */
static int find_nothing(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	return -ENOENT;
}

static int find_shifted(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	int err = capture_find_image(arg, pc, out);

	out->pgoff += 0x1000;	/* the same files, loaded one page lower */
	return err;
}

static void test_address_space_switch(void **state)
{
	struct unwind_dwarf *u = unwind_dwarf_new();
	struct unwind_dwarf_stats st;
	uint64_t full[UNWIND_MAX_DEPTH];
	unsigned nfull;

	assert_non_null(u);
	nfull = unwind_cap(u, cap.len, UNWIND_MAX_DEPTH);
	memcpy(full, pcs, sizeof(full));
	unwind_dwarf(u, &cap.r, cap.stack, cap.len, find_nothing, NULL, pcs,
		     UNWIND_MAX_DEPTH, &why);
	unwind_dwarf(u, &cap.r, cap.stack, cap.len, find_shifted, &cap, pcs,
		     UNWIND_MAX_DEPTH, &why);
	assert_int_equal(unwind_cap(u, cap.len, UNWIND_MAX_DEPTH), nfull);
	assert_memory_equal(pcs, full, nfull * sizeof(pcs[0]));
	unwind_dwarf_get_stats(u, &st);
	assert_true(st.restarts >= 2);
	print_message("  restarts %llu, no_image %llu, cut %llu\n",
		      (unsigned long long)st.restarts, (unsigned long long)st.no_image,
		      (unsigned long long)st.cut);
	unwind_dwarf_free(u);
}

/* Random stack bytes and registers: any answer, bounded, never a crash. */
static void test_garbage(void **state)
{
	struct unwind_dwarf *u = unwind_dwarf_new();
	static uint8_t junk[UNWIND_DWARF_WINDOW];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned n;

	assert_non_null(u);
	for (int round = 0; round < 200; round++) {
		struct unwind_regs r = cap.r;

		for (size_t i = 0; i < sizeof(junk); i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			junk[i] = (uint8_t)(seed >> 56);
		}
		/* half the time aim the frames at the stack and code */
		if (round & 1) {
			for (size_t i = 0; i + 16 <= sizeof(junk); i += 16) {
				uint64_t bp = r.sp + (seed % sizeof(junk)), ip = cap.map[0].start +
					      (seed >> 20) % 0x4000;

				memcpy(junk + i, &bp, 8);
				memcpy(junk + i + 8, &ip, 8);
				seed = seed * 6364136223846793005ull + 1;
			}
			r.bp = r.sp + (seed % sizeof(junk));
		} else {
			r.bp = seed;
			r.ip = cap.map[seed % cap.nmap].start + (seed >> 32) % 0x10000;
		}
		n = unwind_dwarf(u, &r, junk, sizeof(junk), capture_find_image, &cap, pcs,
				 UNWIND_MAX_DEPTH, &why);
		assert_true(n >= 1 && n <= UNWIND_MAX_DEPTH);
		assert_int_equal(pcs[0], r.ip);
	}
	unwind_dwarf_free(u);
}

/* A frame-pointer chain that points at itself, in code with no image:
 * libdwfl's rbp fallback would go round forever; the walk is cut. */
static void test_fp_loop(void **state)
{
	struct unwind_dwarf *u = unwind_dwarf_new();
	struct unwind_regs r = { .ip = 0x1000, .sp = 0x7ffff000, .cpl = 3 };
	uint64_t stack[4];

	assert_non_null(u);
	r.bp = r.sp;
	stack[0] = r.sp;	/* saved rbp: this frame again */
	stack[1] = 0x2000;	/* return address */
	stack[2] = stack[3] = 0;
	nr_pcs = unwind_dwarf(u, &r, (uint8_t *)stack, sizeof(stack), find_nothing, NULL,
			      pcs, UNWIND_MAX_DEPTH, &why);
	assert_true(nr_pcs <= 3);
	assert_int_equal(why, UNWIND_BAD_FRAME);
	/* kernel addresses are not user return addresses */
	stack[0] = r.sp + 16;
	stack[1] = 0xffffffff81000000ull;
	nr_pcs = unwind_dwarf(u, &r, (uint8_t *)stack, sizeof(stack), find_nothing, NULL,
			      pcs, UNWIND_MAX_DEPTH, &why);
	assert_int_equal(nr_pcs, 1);
	assert_int_equal(why, UNWIND_BAD_FRAME);
	unwind_dwarf_free(u);
}

/* find_image names files that are not usable ELF: refused, counted once. */
static int find_bad_file(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	int err = capture_find_image(&cap, pc, out);

	out->path = arg;
	return err;
}

static void test_bad_files(void **state)
{
	static const char *const bad[] = { "/proc/self/maps", "/dev/null", "/", "/nonexistent",
					   "/etc/passwd" };
	struct unwind_dwarf *u = unwind_dwarf_new();
	struct unwind_dwarf_stats st;

	assert_non_null(u);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (int k = 0; k < 3; k++) {
			nr_pcs = unwind_dwarf(u, &cap.r, cap.stack, cap.len, find_bad_file,
					      (void *)bad[i], pcs, UNWIND_MAX_DEPTH, &why);
			assert_true(nr_pcs >= 1);
		}
	unwind_dwarf_get_stats(u, &st);
	assert_int_equal(st.bad_image, sizeof(bad) / sizeof(bad[0]));
	unwind_dwarf_free(u);
	unwind_dwarf_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reaches_main),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_address_space_switch),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_fp_loop),
		cmocka_unit_test(test_bad_files),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
