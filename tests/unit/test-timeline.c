// SPDX-License-Identifier: MIT
/*
 * Task timeline (vmm/guest/timeline.c): switch rings written in this process's
 * memory by the guest-side protocol of opvm_proto.h, read back through
 * guestmem (/proc/self/mem) as from a running guest.  Geometry checks,
 * lookups at interval edges, the horizon (-EAGAIN), overrun, torn and
 * hostile entries, and a writer thread racing the reader with every answer
 * checked against the writer's own log.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>
#include <cmocka.h>

#include "guest-kmod/opvm_proto.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/timeline.h"

#define GPA	0x100000ull

struct rings {
	uint32_t nr, entries, stride;
	uint8_t *mem;
	struct guestmem *m;
};

static void rings_init(struct rings *r, uint32_t nr, uint32_t entries)
{
	r->nr = nr;
	r->entries = entries;
	r->stride = (uint32_t)(sizeof(struct opvm_switch_ring_hdr) +
			       entries * sizeof(struct opvm_switch));
	r->mem = calloc(nr, r->stride);
	assert_non_null(r->mem);
	r->m = guestmem_open(getpid());
	assert_non_null(r->m);
	assert_int_equal(guestmem_add_range(r->m, GPA, (uint64_t)nr * r->stride,
					    (uint64_t)(uintptr_t)r->mem), 0);
}

static void rings_fini(struct rings *r)
{
	guestmem_close(r->m);
	free(r->mem);
}

static struct opvm_switch_ring_hdr *ring_hdr(struct rings *r, uint32_t cpu)
{
	return (void *)(r->mem + (size_t)cpu * r->stride);
}

static struct opvm_switch *ring_ent(struct rings *r, uint32_t cpu, uint64_t n)
{
	return (struct opvm_switch *)(ring_hdr(r, cpu) + 1) + (n & (r->entries - 1));
}

/* The fields of switch n, so that a torn copy shows. */
static uint32_t pid_of(uint64_t n)
{
	return (uint32_t)(n * 2654435761u) | 1;
}

/* The writer side of opvm_proto.h, as opvm.ko runs it at sched_switch.
 * tsc 0: stamp with the TSC, read after seq = 2n + 1 is visible.  Returns
 * the stamp. */
static uint64_t ring_write(struct rings *r, uint32_t cpu, uint64_t tsc)
{
	struct opvm_switch_ring_hdr *h = ring_hdr(r, cpu);
	uint64_t n = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
	struct opvm_switch *e = ring_ent(r, cpu, n);

	__atomic_store_n(&e->seq, 2 * n + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!tsc) {
		_mm_lfence();
		tsc = __rdtsc();
	}
	__atomic_store_n(&e->tsc, tsc, __ATOMIC_RELAXED);
	__atomic_store_n(&e->pid, pid_of(n), __ATOMIC_RELAXED);
	__atomic_store_n(&e->tgid, (uint32_t)n, __ATOMIC_RELAXED);
	__atomic_store_n(&e->cr3, n ^ 0x5a5a000ull, __ATOMIC_RELAXED);
	__atomic_store_n(&e->flags, cpu, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, 2 * n + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&h->head, n + 1, __ATOMIC_RELEASE);
	return tsc;
}

static void test_geometry(void **state)
{
	const uint32_t s16 = 32 + 16 * 40;

	assert_int_equal(timeline_check_geometry(2, 0x1000, s16, 16), 0);
	assert_int_equal(timeline_check_geometry(0, 0x1000, s16, 16), -EINVAL);
	assert_int_equal(timeline_check_geometry(OPVM_SWITCH_MAX_CPUS + 1, 0x1000,
						 s16, 16), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, 0x1000, s16, 12), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, 0x1000, s16, 1), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, 0x1000, s16, 0), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, 0x1000, s16 - 8, 16), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, 0x1000, s16 + 4, 16), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, 0x1004, s16, 16), -EINVAL);
	assert_int_equal(timeline_check_geometry(2, UINT64_MAX - 1000, s16, 16), -EINVAL);
	assert_int_equal(timeline_check_geometry(1, 0, UINT32_MAX - 7,
						 OPVM_SWITCH_MAX_ENTRIES), 0);
	assert_int_equal(timeline_check_geometry(1, 0, UINT32_MAX - 7,
						 OPVM_SWITCH_MAX_ENTRIES * 2), -EINVAL);
	assert_null(timeline_new(2, 0x1000, s16, 12));
	assert_int_equal(errno, EINVAL);
	timeline_free(NULL);
}

static void test_lookup(void **state)
{
	struct rings r;
	struct timeline *t;
	struct timeline_task k;
	struct timeline_stats st;

	rings_init(&r, 2, 16);
	t = timeline_new(2, GPA, r.stride, 16);
	assert_non_null(t);
	/* Nothing read yet: nothing is final. */
	assert_int_equal(timeline_lookup(t, 0, 100, &k), -EAGAIN);
	assert_int_equal(timeline_lookup(t, 2, 100, &k), -EINVAL);

	ring_write(&r, 0, 1000);	/* n 0 */
	ring_write(&r, 0, 2000);	/* n 1 */
	ring_write(&r, 0, 3000);	/* n 2 */
	ring_write(&r, 1, 1500);
	assert_int_equal(timeline_refresh(t, r.m, 5000), 0);

	assert_int_equal(timeline_lookup(t, 0, 999, &k), -ENOENT);
	assert_int_equal(timeline_lookup(t, 0, 1000, &k), 0);
	assert_int_equal(k.tgid, 0);
	assert_int_equal(k.tsc, 1000);
	assert_int_equal(timeline_lookup(t, 0, 1999, &k), 0);
	assert_int_equal(k.tgid, 0);
	assert_int_equal(timeline_lookup(t, 0, 2000, &k), 0);
	assert_int_equal(k.tgid, 1);
	assert_int_equal(k.pid, pid_of(1));
	assert_int_equal(k.cr3, 1 ^ 0x5a5a000ull);
	assert_int_equal(timeline_lookup(t, 0, 5000, &k), 0);
	assert_int_equal(k.tgid, 2);
	assert_int_equal(timeline_lookup(t, 0, 5001, &k), -EAGAIN);
	assert_int_equal(timeline_lookup(t, 1, 1600, &k), 0);
	assert_int_equal(k.flags, 1);
	assert_int_equal(timeline_lookup(t, 1, 1400, &k), -ENOENT);

	/* A switch begun but not finished when we look: the horizon stays. */
	ring_write(&r, 0, 6000);				/* n 3 */
	__atomic_store_n(&ring_ent(&r, 0, 4)->seq, 9, __ATOMIC_RELEASE); /* n 4 */
	assert_int_equal(timeline_refresh(t, r.m, 7000), 0);
	assert_int_equal(timeline_lookup(t, 0, 6500, &k), -EAGAIN);
	assert_int_equal(timeline_lookup(t, 1, 6500, &k), 0);	/* cpu 1 moved on */
	ring_write(&r, 0, 7500);				/* n 4 done */
	assert_int_equal(timeline_refresh(t, r.m, 8000), 0);
	assert_int_equal(timeline_lookup(t, 0, 6500, &k), 0);
	assert_int_equal(k.tgid, 3);
	assert_int_equal(timeline_lookup(t, 0, 7999, &k), 0);
	assert_int_equal(k.tgid, 4);

	timeline_get_stats(t, &st);
	assert_int_equal(st.switches, 6);
	assert_int_equal(st.overrun + st.torn + st.read_errors, 0);
	assert_int_equal(st.refreshes, 3);
	assert_int_equal(st.before_first, 2);
	assert_int_equal(st.after_last, 3);
	timeline_free(t);
	rings_fini(&r);
}

static void test_overrun_torn(void **state)
{
	struct rings r;
	struct timeline *t;
	struct timeline_task k;
	struct timeline_stats st;
	uint64_t n;

	rings_init(&r, 1, 16);
	t = timeline_new(1, GPA, r.stride, 16);
	assert_non_null(t);
	for (n = 0; n < 4; n++)
		ring_write(&r, 0, 100 * (n + 1));
	assert_int_equal(timeline_refresh(t, r.m, 450), 0);
	/* 40 more switches before the next look: 24 overwritten. */
	for (; n < 44; n++)
		ring_write(&r, 0, 100 * (n + 1));
	/* and one of those left still in the ring is damaged. */
	__atomic_store_n(&ring_ent(&r, 0, 40)->seq, 2 * 40 + 1, __ATOMIC_RELEASE);
	assert_int_equal(timeline_refresh(t, r.m, 100 * 45), 0);
	timeline_get_stats(t, &st);
	assert_int_equal(st.overrun, 24);
	assert_int_equal(st.torn, 1);
	assert_int_equal(st.switches, 4 + 15);

	/* Known before the gap, unknown across it, known after. */
	assert_int_equal(timeline_lookup(t, 0, 350, &k), 0);
	assert_int_equal(k.tgid, 2);
	/* switch n began at 100 (n + 1); 4..27 were overwritten unread */
	assert_int_equal(timeline_lookup(t, 0, 450, &k), -ENOENT);	/* n 3 ends in the gap */
	assert_int_equal(timeline_lookup(t, 0, 2000, &k), -ENOENT);
	assert_int_equal(timeline_lookup(t, 0, 2950, &k), 0);
	assert_int_equal(k.tgid, 28);
	assert_int_equal(timeline_lookup(t, 0, 4050, &k), -ENOENT);	/* n 39, next torn */
	assert_int_equal(timeline_lookup(t, 0, 4150, &k), -ENOENT);	/* n 40 torn */
	assert_int_equal(timeline_lookup(t, 0, 4250, &k), 0);
	assert_int_equal(k.tgid, 41);
	timeline_get_stats(t, &st);
	assert_int_equal(st.unknown, 4);

	/* The guest restarts its rings (reboot): head goes back. */
	memset(r.mem, 0, r.stride);
	ring_write(&r, 0, 10);
	assert_int_equal(timeline_refresh(t, r.m, 20), 0);
	assert_int_equal(timeline_lookup(t, 0, 15, &k), 0);
	assert_int_equal(k.tgid, 0);
	/* A hostile head far ahead: bounded work, counted as overrun. */
	ring_hdr(&r, 0)->head = UINT64_MAX / 2;
	assert_int_equal(timeline_refresh(t, r.m, 30), 0);
	timeline_get_stats(t, &st);
	assert_int_equal(st.resets, 1);
	assert_true(st.overrun > UINT64_MAX / 4);
	assert_int_equal(timeline_lookup(t, 0, 25, &k), -ENOENT);
	timeline_free(t);
	rings_fini(&r);
}

/* Random bytes in the rings (a hostile guest): every refresh and lookup
 * stays bounded and answers only what passed the seq checks. */
static void test_hostile_random(void **state)
{
	struct rings r;
	struct timeline *t;
	struct timeline_task k;
	struct timeline_stats st;
	uint64_t x = 88172645463325252ull;

	rings_init(&r, 2, 64);
	t = timeline_new(2, GPA, r.stride, 64);
	assert_non_null(t);
	for (int round = 0; round < 2000; round++) {
		for (size_t i = 0; i < 2u * r.stride; i += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* mostly small heads and seqs, sometimes anything */
			memcpy(r.mem + i, &x, 8);
			if (x & 1)
				r.mem[i + 1] = r.mem[i + 2] = r.mem[i + 3] = 0,
				memset(r.mem + i + 4, 0, 4);
		}
		assert_int_equal(timeline_refresh(t, r.m, x >> 1), 0);
		for (uint32_t c = 0; c < 3; c++) {
			int rc = timeline_lookup(t, c, x >> (c + 2), &k);

			assert_true(rc == 0 || rc == -ENOENT || rc == -EAGAIN ||
				    (c == 2 && rc == -EINVAL));
		}
	}
	timeline_get_stats(t, &st);
	assert_int_equal(st.refreshes, 2000);
	assert_int_equal(st.read_errors, 0);
	timeline_free(t);
	rings_fini(&r);
}

/* A writer thread switching as fast as it can on 2 CPUs, the reader
 * refreshing and looking up at "now" and at random earlier moments. */
#define RACE_SWITCHES	200000
struct race {
	struct rings r;
	uint64_t *log[2];	/* tsc of switch n, per cpu */
	volatile int stop;
	uint64_t written[2];
};

static void *race_writer(void *arg)
{
	struct race *x = arg;

	for (uint64_t n = 0; n < RACE_SWITCHES; n++) {
		for (uint32_t c = 0; c < 2; c++) {
			x->log[c][n] = ring_write(&x->r, c, 0);
			__atomic_store_n(&x->written[c], n + 1, __ATOMIC_RELEASE);
		}
		if (x->stop)
			break;
		if (n % 64 == 0)
			usleep(10);
	}
	return NULL;
}

struct answer {
	uint32_t cpu;
	uint64_t at, n;
};

static void test_race(void **state)
{
	struct race *x = calloc(1, sizeof(*x));
	struct answer *ans = calloc(100000, sizeof(*ans));
	struct timeline *t;
	struct timeline_task k;
	struct timeline_stats st;
	unsigned nans = 0, refreshes = 0;
	pthread_t th;

	assert_non_null(x);
	assert_non_null(ans);
	rings_init(&x->r, 2, 64);
	for (int c = 0; c < 2; c++)
		x->log[c] = calloc(RACE_SWITCHES, sizeof(uint64_t));
	t = timeline_new(2, GPA, x->r.stride, 64);
	assert_non_null(t);
	assert_int_equal(pthread_create(&th, NULL, race_writer, x), 0);
	while (__atomic_load_n(&x->written[0], __ATOMIC_ACQUIRE) <
	       RACE_SWITCHES * 3 / 4 && nans < 99000) {
		uint64_t now;

		_mm_lfence();
		now = __rdtsc();
		_mm_lfence();

		assert_int_equal(timeline_refresh(t, x->r.m, now), 0);
		refreshes++;
		for (uint32_t c = 0; c < 2; c++) {
			uint64_t at = now - (uint64_t)(rand() % 200000);

			for (int j = 0; j < 2; j++, at = now) {
				if (timeline_lookup(t, c, at, &k))
					continue;
				/* Fields of one switch, never a mix. */
				assert_int_equal(k.pid, pid_of(k.tgid));
				assert_int_equal(k.cr3, k.tgid ^ 0x5a5a000ull);
				assert_int_equal(k.flags, c);
				ans[nans++] = (struct answer){ c, at, k.tgid };
			}
		}
		if (refreshes % 4 == 0)
			usleep(50);
	}
	x->stop = 1;
	pthread_join(th, NULL);
	/* Every answer: switch n began at or before `at`, switch n + 1 after. */
	for (unsigned i = 0; i < nans; i++) {
		const struct answer *a = &ans[i];

		assert_true(a->n + 1 < x->written[a->cpu]);
		assert_true(x->log[a->cpu][a->n] <= a->at);
		assert_true(x->log[a->cpu][a->n + 1] > a->at);
	}
	timeline_get_stats(t, &st);
	printf("race: %u answers checked, %llu switches read, %llu overrun, "
	       "%llu torn, %u refreshes\n", nans, (unsigned long long)st.switches,
	       (unsigned long long)st.overrun, (unsigned long long)st.torn,
	       refreshes);
	assert_true(nans > 1000);
	assert_true(st.switches > 1000);
	timeline_free(t);
	for (int c = 0; c < 2; c++)
		free(x->log[c]);
	rings_fini(&x->r);
	free(x);
	free(ans);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_overrun_torn),
		cmocka_unit_test(test_hostile_random),
		cmocka_unit_test(test_race),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
