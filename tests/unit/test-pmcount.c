// SPDX-License-Identifier: MIT
/*
 * Counting perf groups on a thread: the software shape (task clock,
 * context switches, page faults) on this test's own thread counts what the
 * thread did; the hardware shape opens where the host has a PMU and fails
 * with a reason where it has none (this project's CI host: no PMU).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/hoststats/pmcount.h"

static volatile uint64_t sink;

static void burn(void)
{
	for (uint64_t i = 0; i < 20000000; i++)
		sink += i;
}

static void test_software(void **state)
{
	struct pmcount *p = pmcount_open(gettid(), PMC_SOFTWARE);
	uint64_t a[PMC_NR], b[PMC_NR];
	char *mem;

	(void)state;
	if (!p && (errno == EACCES || errno == EPERM)) {
		printf("SKIP: perf_event_open not allowed (perf_event_paranoid)\n");
		skip();
	}
	assert_non_null(p);
	/* Software events opened on the calling thread count
	 * from its next schedule on (measured: +0 faults or switches in 9
	 * of 20 runs without this sleep, 20 of 20 right with it). */
	usleep(1000);
	assert_int_equal(pmcount_read(p, a), 0);
	burn();
	/* Fresh pages: page faults.  mmap, not malloc: a sanitizer's
	 * allocator hands out memory it has already touched. */
	mem = mmap(NULL, 1 << 22, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	memset(mem, 1, 1 << 22);
	munmap(mem, 1 << 22);
	usleep(1000);			/* a context switch */
	assert_int_equal(pmcount_read(p, b), 0);
	printf("task-clock +%llu ns, switches +%llu, faults +%llu\n",
	       (unsigned long long)(b[0] - a[0]), (unsigned long long)(b[1] - a[1]),
	       (unsigned long long)(b[2] - a[2]));
	assert_true(b[PMC_CYCLES] - a[PMC_CYCLES] > 1000000);	/* > 1 ms of CPU */
	assert_true(b[PMC_INSTRUCTIONS] > a[PMC_INSTRUCTIONS]);
	assert_true(b[PMC_LLC_MISSES] > a[PMC_LLC_MISSES]);	/* huge pages: few */
	pmcount_close(p);
	pmcount_close(NULL);
}

static void test_hardware(void **state)
{
	struct pmcount *p = pmcount_open(gettid(), PMC_HARDWARE);
	int pmu = access("/sys/bus/event_source/devices/cpu", F_OK) == 0;
	uint64_t v[PMC_NR];

	(void)state;
	if (!p) {
		printf("hardware group: %s (host PMU %s)\n", strerror(errno), pmu ? "present" : "absent");
		assert_true(errno == ENOENT || errno == EOPNOTSUPP || errno == EINVAL ||
			    errno == EACCES || errno == EPERM || errno == ENODEV);
		return;
	}
	/* A PMU: guest-mode only counts of a host thread stay at zero. */
	burn();
	assert_int_equal(pmcount_read(p, v), 0);
	printf("hardware group on a host thread, guest mode only: cycles %llu\n",
	       (unsigned long long)v[PMC_CYCLES]);
	pmcount_close(p);
	assert_int_equal(pmcount_open(0x7ffffff0, PMC_HARDWARE) == NULL, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_software),
		cmocka_unit_test(test_hardware),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
