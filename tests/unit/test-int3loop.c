// SPDX-License-Identifier: MIT
/* Unit tests for vmm/guest/int3loop: a vCPU looping on a stale int3 is
 * found, a normal idle or busy guest never is, verdicts are rate-limited. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vmm/guest/int3loop.h"

#define MS	1000000ll
#define ASM_EXC_INT3	0xffffffff81a01000ull	/* 0x40 bytes */
#define EXC_INT3	0xffffffff819f0000ull	/* 0x100 bytes */
#define PATCHED_SITE	0xffffffff81100010ull	/* the instruction re-run */
#define HLT_IDLE	0xffffffff819f8000ull	/* default_idle's hlt */

static struct int3loop *new_detector(unsigned nr)
{
	struct sampler_int3 r = { .nr = 3 };
	struct int3loop *d = int3loop_new(nr);

	assert_non_null(d);
	r.r[0].start = ASM_EXC_INT3;
	r.r[0].end = ASM_EXC_INT3 + 0x40;
	r.r[1].start = EXC_INT3;
	r.r[1].end = EXC_INT3 + 0x100;
	r.r[2].start = 5;		/* inverted (guest data): dropped */
	r.r[2].end = 4;
	int3loop_set_ranges(d, &r);
	return d;
}

/* What a looping vCPU shows: the int3 path, now and then the patched
 * instruction it backs up to. */
static uint64_t looping_rip(unsigned k)
{
	if (k % 6 == 5)
		return PATCHED_SITE;
	return k % 2 ? ASM_EXC_INT3 + 0x10 : EXC_INT3 + 0x80;
}

/* n samples of vCPU vcpu at 50 Hz from *t; returns the verdicts. */
static int feed(struct int3loop *d, unsigned vcpu, int64_t *t, unsigned n,
		uint64_t (*rip)(unsigned))
{
	int said = 0;

	for (unsigned k = 0; k < n; k++, *t += 20 * MS)
		said += int3loop_sample(d, vcpu, rip(k), *t);
	return said;
}

static uint64_t idle_rip(unsigned k)
{
	return HLT_IDLE;
}

/* A busy guest with the odd int3 (a patch, a kprobe) among its samples. */
static uint64_t busy_rip(unsigned k)
{
	return k % 50 == 7 ? EXC_INT3 : 0x401000 + k * 16;
}

static void test_loop_found(void **state)
{
	struct int3loop *d = new_detector(2);
	int64_t t = 1000 * MS;

	/* 2 s at 50 Hz: 100 samples, the window closes at the 101st */
	assert_int_equal(feed(d, 1, &t, 101, looping_rip), 1);
	assert_int_equal(int3loop_loops(d), 1);
	/* the other vCPU is idle: nothing */
	assert_int_equal(feed(d, 0, &t, 300, idle_rip), 0);
	int3loop_free(d);
}

static void test_normal_guest_never(void **state)
{
	struct int3loop *d = new_detector(2);
	int64_t t = 1000 * MS;

	assert_int_equal(feed(d, 0, &t, 5000, idle_rip), 0);
	assert_int_equal(feed(d, 1, &t, 5000, busy_rip), 0);
	assert_int_equal(int3loop_loops(d), 0);
	int3loop_free(d);
}

static void test_rate_limited(void **state)
{
	struct int3loop *d = new_detector(1);
	int64_t t = 1000 * MS;

	/* 30 s of looping: windows find it every 2 s, verdicts every 10 s */
	assert_int_equal(feed(d, 0, &t, 1500, looping_rip), 3);
	assert_true(int3loop_loops(d) >= 14);
	int3loop_free(d);
}

/* Too few samples (a throttled sampler): the window waits for more
 * rather than judge on a handful. */
static void test_count_aware(void **state)
{
	struct int3loop *d = new_detector(1);
	int64_t t = 1000 * MS;
	int said = 0;

	for (unsigned k = 0; k < INT3LOOP_MIN_SAMPLES - 1; k++, t += 500 * MS)
		said += int3loop_sample(d, 0, ASM_EXC_INT3, t);
	assert_int_equal(said, 0);
	assert_int_equal(int3loop_sample(d, 0, ASM_EXC_INT3, t), 1);
	int3loop_free(d);
}

/* No ranges (no kallsyms), or a vCPU beyond the detector's: silent. */
static void test_no_ranges(void **state)
{
	struct int3loop *d = int3loop_new(1);
	struct sampler_int3 none = { 0 };
	int64_t t = 1000 * MS;

	assert_int_equal(feed(d, 0, &t, 500, looping_rip), 0);
	int3loop_set_ranges(d, &none);
	assert_int_equal(feed(d, 0, &t, 500, looping_rip), 0);
	int3loop_free(d);
	d = new_detector(1);
	assert_int_equal(feed(d, 3, &t, 500, looping_rip), 0);
	assert_int_equal(int3loop_sample(NULL, 0, ASM_EXC_INT3, t), 0);
	int3loop_free(d);
}

static void test_path_symbols(void **state)
{
	assert_true(int3loop_path_symbol("asm_exc_int3", 12));
	assert_true(int3loop_path_symbol("kprobe_int3_handler", 19));
	assert_true(int3loop_path_symbol("exc_int3x", 8));
	assert_false(int3loop_path_symbol("exc_int3x", 9));
	assert_false(int3loop_path_symbol("sched_clock_idle_wakeup_event", 29));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop_found),
		cmocka_unit_test(test_normal_guest_never),
		cmocka_unit_test(test_rate_limited),
		cmocka_unit_test(test_count_aware),
		cmocka_unit_test(test_no_ranges),
		cmocka_unit_test(test_path_symbols),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
