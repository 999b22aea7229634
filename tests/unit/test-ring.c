// SPDX-License-Identifier: MIT
/* Unit tests for the per-vCPU sample ring (lib/ring.c). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ring.h"

/* Sample i's CR3 as a sampler reads it (PCID, the PTI bit on odd pages,
 * bit 63 on odd i), and as the ring gives it back: normalised. */
#define RAW_CR3(i)	(0x1000 * (i) + 0x5 + ((i) & 1 ? 1ull << 63 : 0))
#define CR3N(i)		((0x1000 * (i)) & ~0x1fffull)

static struct opvm_sample mk(uint64_t i, uint8_t nr, uint64_t *chain)
{
	struct opvm_sample s = {
		.rip = 0xffffffff81000000ull + i,
		.cr3 = RAW_CR3(i),
		.slot_cr3 = i * 3,
		.slot_tid = (uint32_t)i + 1,
		.slot_tgid = (uint32_t)i + 2,
		.vcpu = (uint32_t)(i % 7),
		.cpl = (i & 1) ? 3 : 0,
		.event = (uint8_t)(i % OPVM_MAX_EVENTS),
		.flags = OPVM_SAMPLE_SLOT,
		.nr_chain = nr,
		.chain = chain,
		.nr_py = nr / 2,
	};
	for (unsigned k = 0; k < nr; k++)
		chain[k] = i * 1000 + k;
	return s;
}

static void check(const struct opvm_sample *s, uint64_t i, uint8_t nr)
{
	assert_int_equal(s->rip, 0xffffffff81000000ull + i);
	assert_int_equal(s->cr3, CR3N(i));
	assert_int_equal(s->slot_cr3, i * 3);
	assert_int_equal(s->slot_tid, (uint32_t)i + 1);
	assert_int_equal(s->slot_tgid, (uint32_t)i + 2);
	assert_int_equal(s->vcpu, i % 7);
	assert_int_equal(s->cpl, (i & 1) ? 3 : 0);
	assert_int_equal(s->event, i % OPVM_MAX_EVENTS);
	assert_int_equal(s->flags, OPVM_SAMPLE_SLOT);
	assert_int_equal(s->nr_chain, nr);
	assert_int_equal(s->nr_py, nr / 2);
	for (unsigned k = 0; k < nr; k++)
		assert_int_equal(s->chain[k], i * 1000 + k);
}

static void test_empty_and_basic(void **state)
{
	struct ring *r = ring_new(100);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct opvm_sample s, o;

	assert_non_null(r);
	assert_int_equal(ring_pop(r, &o, out_chain), 0);
	s = mk(1, 3, chain);
	assert_int_equal(ring_push(r, &s), 0);
	assert_true(ring_used_words(r) > 0);
	assert_int_equal(ring_pop(r, &o, out_chain), 1);
	check(&o, 1, 3);
	assert_int_equal(ring_pop(r, &o, out_chain), 0);
	assert_int_equal(ring_used_words(r), 0);
	assert_int_equal(ring_lost(r), 0);
	ring_free(r);
	ring_free(NULL);
}

/* Entries of varying size wrap the array many times; order and content
 * survive every wrap (skip markers included). */
static void test_wrap(void **state)
{
	struct ring *r = ring_new(1024);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	uint64_t pushed = 0, popped = 0;
	struct opvm_sample s, o;

	assert_non_null(r);
	for (int round = 0; round < 5000; round++) {
		int n = 1 + round % 4;

		for (int k = 0; k < n; k++) {
			uint8_t nr = (uint8_t)((pushed * 7) % (OPVM_MAX_CALLCHAIN + 1));

			s = mk(pushed, nr, chain);
			assert_int_equal(ring_push(r, &s), 0);
			pushed++;
		}
		for (int k = 0; k < n; k++) {
			assert_int_equal(ring_pop(r, &o, out_chain), 1);
			check(&o, popped, (uint8_t)((popped * 7) % (OPVM_MAX_CALLCHAIN + 1)));
			popped++;
		}
	}
	assert_int_equal(ring_pop(r, &o, out_chain), 0);
	assert_int_equal(ring_lost(r), 0);
	ring_free(r);
}

static void check_entry(const struct ring_entry *e, uint64_t i)
{
	assert_int_equal(e->rip, 0xffffffff81000000ull + i);
	assert_int_equal(e->cr3, CR3N(i));
	assert_int_equal(e->slot_cr3, i * 3);
	assert_int_equal(e->slot_tid, (uint32_t)i + 1);
	assert_int_equal(e->slot_tgid, (uint32_t)i + 2);
	assert_int_equal(e->vcpu, i % 7);
	assert_int_equal(e->cpl, (i & 1) ? 3 : 0);
	assert_int_equal(e->event, i % OPVM_MAX_EVENTS);
	assert_int_equal(e->flags, OPVM_SAMPLE_SLOT);
}

/* ring_peek_flat()/ring_consume(): flat entries read in place, in order,
 * runs cut by a sample with a chain (ring_pop_many() takes it) and by the
 * array's end, the rest of a run peeked again after a partial consume;
 * entries peeked and not consumed are never overwritten by the producer. */
static void test_peek_flat(void **state)
{
	struct ring *r = ring_new(256);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	uint64_t pushed = 0, popped = 0;
	const struct ring_entry *e;
	struct opvm_sample s, o;

	assert_non_null(r);
	assert_int_equal(ring_peek_flat(r, &e, 8), 0);
	for (int round = 0; round < 3000; round++) {
		int n = 1 + round % 13;

		for (int k = 0; k < n; k++) {
			/* one in seven has a chain; one in 11 a count past the
			 * cap, pushed flat (its nr_chain byte not 0) */
			uint8_t nr = pushed % 7 == 2 ? (uint8_t)(1 + pushed % 5) :
				     pushed % 11 == 4 ? OPVM_MAX_CALLCHAIN + 1 : 0;

			s = mk(pushed, nr == OPVM_MAX_CALLCHAIN + 1 ? 0 : nr, chain);
			s.nr_chain = nr;
			assert_int_equal(ring_push(r, &s), 0);
			pushed++;
		}
		while (popped < pushed) {
			size_t max = 1 + (size_t)round % 9, got = ring_peek_flat(r, &e, max);

			if (!got) {
				/* the next one has its chain */
				assert_int_equal(popped % 7, 2);
				assert_int_equal(ring_pop_many(r, &o, 1, out_chain, NULL), 1);
				check(&o, popped, (uint8_t)(1 + popped % 5));
				popped++;
				continue;
			}
			assert_true(got <= max);
			for (size_t k = 0; k < got; k++)
				check_entry(&e[k], popped + k);
			if (round % 3 == 0 && got > 1) {
				/* half of it; the rest comes again */
				ring_consume(r, got / 2);
				popped += got / 2;
				continue;
			}
			if (round % 50 == 1) {
				/* a full ring leaves what was peeked alone */
				while (ring_push(r, &s) == 0)
					;
				for (size_t k = 0; k < got; k++)
					check_entry(&e[k], popped + k);
				ring_consume(r, got);
				popped += got;
				ring_free(r);
				r = ring_new(256);
				assert_non_null(r);
				pushed = popped;
				break;
			}
			ring_consume(r, got);
			popped += got;
		}
	}
	assert_int_equal(ring_peek_flat(r, &e, 8), 0);
	ring_free(r);
}

/* ring_pop_many(): runs of flat samples up to max, a sample with a chain
 * alone and only at the front, through many wraps of a small ring. */
static void test_pop_many(void **state)
{
	struct ring *r = ring_new(256);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	uint64_t pushed = 0, popped = 0;
	struct opvm_sample s, o[8];

	assert_non_null(r);
	assert_int_equal(ring_pop_many(r, o, 8, out_chain, NULL), 0);
	for (int round = 0; round < 3000; round++) {
		int n = 1 + round % 11;

		for (int k = 0; k < n; k++) {
			/* one sample in five has a chain */
			s = mk(pushed, pushed % 5 == 3 ? (uint8_t)(1 + pushed % 9) : 0, chain);
			assert_int_equal(ring_push(r, &s), 0);
			pushed++;
		}
		while (popped < pushed) {
			size_t got = ring_pop_many(r, o, 1 + (size_t)round % 8, out_chain, NULL);

			assert_true(got >= 1 && got <= 1 + (size_t)round % 8);
			for (size_t k = 0; k < got; k++, popped++) {
				uint8_t nr = popped % 5 == 3 ? (uint8_t)(1 + popped % 9) : 0;

				/* a chain only as the first of a call, alone */
				assert_true(!nr || (k == 0 && got == 1));
				check(&o[k], popped, nr);
				assert_true(nr || (!o[k].chain && !o[k].stack && !o[k].stack_len));
			}
		}
	}
	assert_int_equal(ring_pop_many(r, o, 8, out_chain, NULL), 0);
	assert_int_equal(ring_lost(r), 0);
	ring_free(r);
}

/* A full ring drops, counts, and keeps what it had. */
static void test_full_drops(void **state)
{
	struct ring *r = ring_new(256);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct opvm_sample s, o;
	uint64_t ok = 0, dropped = 0;

	assert_non_null(r);
	for (uint64_t i = 0; i < 100; i++) {
		s = mk(ok, 0, chain);
		if (ring_push(r, &s) == 0)
			ok++;
		else
			dropped++;
	}
	/* 6 words per chain-less entry in 256 words */
	assert_int_equal(ok, 256 / 6);
	assert_int_equal(dropped, 100 - ok);
	assert_int_equal(ring_lost(r), dropped);
	/* a big entry does not fit either */
	s = mk(0, OPVM_MAX_CALLCHAIN, chain);
	assert_int_equal(ring_push(r, &s), -ENOSPC);
	assert_int_equal(ring_lost(r), dropped + 1);
	for (uint64_t i = 0; i < ok; i++) {
		assert_int_equal(ring_pop(r, &o, out_chain), 1);
		check(&o, i, 0);
	}
	assert_int_equal(ring_pop(r, &o, out_chain), 0);
	/* and it works again after draining */
	s = mk(9, 5, chain);
	assert_int_equal(ring_push(r, &s), 0);
	assert_int_equal(ring_pop(r, &o, out_chain), 1);
	check(&o, 9, 5);
	ring_free(r);
}

/* s pushed and popped (into out, or with no chain buffer: NULL): the
 * chain's length and its Python frames' that came out. */
static void round_trip(struct ring *r, const struct opvm_sample *s, uint64_t *out,
		       unsigned nr, unsigned npy)
{
	struct opvm_sample o;

	assert_int_equal(ring_push(r, s), 0);
	assert_int_equal(ring_pop(r, &o, out), 1);
	assert_int_equal(o.nr_chain, nr);
	assert_int_equal(o.nr_py, npy);
	if (!nr)
		assert_null(o.chain);
}

/* An oversized chain count is capped, a NULL chain pointer ignored, and a
 * consumer that passes no chain buffer gets no chain; Python frames are
 * never more than the chain. */
static void test_chain_bounds(void **state)
{
	struct ring *r = ring_new(1024);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct opvm_sample s;

	assert_non_null(r);
	s = mk(4, 2, chain);
	s.nr_chain = 200;
	round_trip(r, &s, out_chain, 0, 0);
	s = mk(4, 2, chain);
	s.nr_py = 3;
	round_trip(r, &s, out_chain, 2, 2);
	s = mk(4, 2, chain);
	s.chain = NULL;
	round_trip(r, &s, out_chain, 0, 0);
	s = mk(4, 2, chain);
	round_trip(r, &s, NULL, 0, 0);
	ring_free(r);
}

static void test_sizes(void **state)
{
	struct ring *r = ring_new(0);

	assert_non_null(r);
	ring_free(r);
	errno = 0;
	assert_null(ring_new(((size_t)1 << 40)));
	assert_int_equal(errno, EINVAL);
}

#define MT_SAMPLES 300000ull

static void *producer(void *arg)
{
	struct ring *r = arg;
	uint64_t chain[OPVM_MAX_CALLCHAIN];
	uint64_t i = 0;

	while (i < MT_SAMPLES) {
		struct opvm_sample s = mk(i, (uint8_t)(i % 5), chain);

		if (ring_push(r, &s) == 0)
			i++;
		else
			sched_yield();	/* full: a real sampler would drop */
	}
	return NULL;
}

/* One producer thread, one consumer: every sample arrives, in order, intact. */
static void test_two_threads(void **state)
{
	struct ring *r = ring_new(4096);
	uint64_t out_chain[OPVM_MAX_CALLCHAIN];
	struct opvm_sample o;
	pthread_t th;
	uint64_t next = 0;

	assert_non_null(r);
	assert_int_equal(pthread_create(&th, NULL, producer, r), 0);
	while (next < MT_SAMPLES) {
		if (ring_pop(r, &o, out_chain)) {
			if (o.rip != 0xffffffff81000000ull + next)
				fail_msg("sample %llu out of order", (unsigned long long)next);
			check(&o, next, (uint8_t)(next % 5));
			next++;
		} else {
			sched_yield();	/* two cores shared by many jobs */
		}
	}
	pthread_join(th, NULL);
	assert_int_equal(ring_pop(r, &o, out_chain), 0);
	/* lost counts the refused pushes the producer retried */
	ring_free(r);
}

/* -g dwarf: a sample's user registers and stack copy come back whole, past
 * wraps; ring_pop() drops them; a length past the cap is not trusted. */
static void test_stacks(void **state)
{
	struct ring *r = ring_new(4096);
	static uint8_t stk[OPVM_MAX_STACK], out[OPVM_MAX_STACK];
	uint64_t chain[OPVM_MAX_CALLCHAIN], ch[2] = { 0xffffffff81000000ull, 0xffffffff81000100ull };
	struct opvm_sample s = { .rip = 1, .cpl = 0, .nr_chain = 2, .chain = ch,
				 .flags = OPVM_SAMPLE_STACK, .user_ip = 0x401000,
				 .user_sp = 0x7ffc0000, .user_bp = 0x7ffc0100, .stack = stk }, o;

	for (unsigned i = 0; i < sizeof(stk); i++)
		stk[i] = (uint8_t)(i * 13);
	assert_non_null(r);
	for (unsigned round = 0; round < 50; round++) {
		s.stack_len = (uint16_t)(round * 997 % (OPVM_MAX_STACK + 1));
		assert_int_equal(ring_push(r, &s), 0);
		assert_int_equal(ring_pop_stack(r, &o, chain, out), 1);
		assert_int_equal(o.nr_chain, 2);
		assert_true(chain[1] == ch[1]);
		assert_true(o.flags & OPVM_SAMPLE_STACK);
		assert_true(o.user_ip == 0x401000 && o.user_sp == 0x7ffc0000 &&
			    o.user_bp == 0x7ffc0100);
		assert_int_equal(o.stack_len, s.stack_len);
		assert_memory_equal(o.stack ? o.stack : stk, stk, s.stack_len);
	}
	assert_int_equal(ring_push(r, &s), 0);
	assert_int_equal(ring_pop(r, &o, chain), 1);
	assert_false(o.flags & OPVM_SAMPLE_STACK);
	assert_null(o.stack);
	s.stack_len = OPVM_MAX_STACK + 1;	/* not trusted: no bytes copied */
	assert_int_equal(ring_push(r, &s), 0);
	assert_int_equal(ring_pop_stack(r, &o, chain, out), 1);
	assert_int_equal(o.stack_len, 0);
	assert_int_equal(ring_pop(r, &o, chain), 0);
	ring_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_and_basic),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_pop_many),
		cmocka_unit_test(test_peek_flat),
		cmocka_unit_test(test_full_drops),
		cmocka_unit_test(test_chain_bounds),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_stacks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
