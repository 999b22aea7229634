// SPDX-License-Identifier: MIT
/* Unit tests for the per-vCPU sample ring (lib/ring.c). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdbool.h>
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

/*
 * The mixed stream ring_read() is tested on: sample i has a chain (one in
 * seven), a user stack and a chain of one (one in 13), a chain count past
 * the cap, pushed flat (one in 11), or nothing: flat.
 */
enum { MIX_FLAT, MIX_CHAIN, MIX_STACK, MIX_BADNR };

static uint8_t stk_src[OPVM_MAX_STACK];

static int mix_kind(uint64_t i)
{
	return i % 7 == 2 ? MIX_CHAIN : i % 13 == 5 ? MIX_STACK : i % 11 == 4 ? MIX_BADNR : MIX_FLAT;
}

static uint8_t mix_nr(uint64_t i)
{
	int k = mix_kind(i);

	return k == MIX_CHAIN ? (uint8_t)(1 + i % 5) : k == MIX_STACK ? 1 : 0;
}

static int push_mix(struct ring *r, uint64_t i, uint64_t *chain)
{
	struct opvm_sample s = mk(i, mix_nr(i), chain);

	if (mix_kind(i) == MIX_BADNR)
		s.nr_chain = OPVM_MAX_CALLCHAIN + 1;
	if (mix_kind(i) == MIX_STACK) {
		s.flags |= OPVM_SAMPLE_STACK;
		s.user_ip = i;
		s.user_sp = i + 1;
		s.user_bp = i + 2;
		s.stack = stk_src + i % 64;
		s.stack_len = (uint16_t)(i % 200);
	}
	return ring_push(r, &s);
}

static void stk_init(void)
{
	for (unsigned k = 0; k < sizeof(stk_src); k++)
		stk_src[k] = (uint8_t)(k * 13);
}

/* rd->one is sample i of the mixed stream, whole, in rd's buffers. */
static void check_one(const struct ring_reader *rd, uint64_t i)
{
	struct opvm_sample o = rd->one;

	assert_true(mix_kind(i) == MIX_CHAIN || mix_kind(i) == MIX_STACK);
	if (mix_kind(i) == MIX_STACK) {
		assert_true(o.flags & OPVM_SAMPLE_STACK);
		assert_true(o.user_ip == i && o.user_sp == i + 1 && o.user_bp == i + 2);
		assert_int_equal(o.stack_len, i % 200);
		assert_ptr_equal(o.stack, rd->stack);
		assert_memory_equal(o.stack, stk_src + i % 64, o.stack_len);
		o.flags &= (uint8_t)~OPVM_SAMPLE_STACK;
	} else {
		assert_null(o.stack);
		assert_int_equal(o.stack_len, 0);
	}
	assert_ptr_equal(o.chain, rd->chain);
	check(&o, i, mix_nr(i));
}

/* A run handed over by ring_read(): samples i.. of the mixed stream, all
 * flat, in place inside the array (never across its end). */
static void check_run(const struct ring *r, const struct ring_entry *e, size_t n, uint64_t i)
{
	assert_true((const uint64_t *)e >= r->cwords &&
		    (const uint64_t *)(e + n) <= r->cwords + r->cmask + 1);
	for (size_t k = 0; k < n; k++) {
		assert_true(mix_kind(i + k) == MIX_FLAT || mix_kind(i + k) == MIX_BADNR);
		check_entry(&e[k], i + k);
	}
}

/*
 * ring_read(): the mixed stream comes out in push order and intact, flat
 * runs in place and up to max, a sample with a chain or a stack alone,
 * through many wraps of a small ring (runs that end at the array's end,
 * the next starting at index 0); a run held while the producer fills the
 * ring is not written over.
 */
static void test_read_mix(void **state)
{
	struct ring *r = ring_new(256);
	static uint8_t out_stack[OPVM_MAX_STACK];
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct ring_reader rd = { .chain = out_chain, .stack = out_stack };
	uint64_t pushed = 0, popped = 0, at_end = 0, at_zero = 0, dropped = 0;
	const struct ring_entry *e = (const void *)1;
	const uint64_t *end;
	size_t got;

	stk_init();
	assert_non_null(r);
	assert_int_equal(ring_read(r, &rd, &e, 8), 0);
	assert_null(e);
	for (int round = 0; round < 3000; round++) {
		size_t max = 1 + (size_t)round % 9;
		bool filled = false;

		for (int k = 0; k < 1 + round % 13; k++, pushed++)
			assert_int_equal(push_mix(r, pushed, chain), 0);
		while ((got = ring_read(r, &rd, &e, max))) {
			assert_true(got <= max);
			if (!e) {
				assert_int_equal(got, 1);
				check_one(&rd, popped++);
				continue;
			}
			check_run(r, e, got, popped);
			/* runs cut by the array's end (at it, or at a skip
			 * marker in its last 40 words: no entry here is
			 * longer), and runs from index 0 */
			end = r->cwords + r->cmask + 1;
			at_end += (const uint64_t *)(e + got) == end ||
				  ((const uint64_t *)(e + got) > end - 40 &&
				   *(const uint64_t *)(e + got) == 0);
			at_zero += (const uint64_t *)e == r->cwords;
			if (round % 50 == 1 && !filled) {
				/* the producer fills the ring: the run stays */
				while (push_mix(r, pushed, chain) == 0)
					pushed++;
				dropped++;
				filled = true;
				check_run(r, e, got, popped);
			}
			popped += got;
		}
		assert_int_equal(popped, pushed);
		assert_int_equal(ring_used_words(r), 0);
	}
	assert_true(at_end > 100 && at_zero > 100);
	assert_int_equal(rd.held, 0);
	assert_int_equal(ring_lost(r), dropped);
	assert_int_equal(rd.lost, dropped);
	ring_free(r);
}

/* A flat run's words stay the consumer's until the next ring_read(): the
 * producer sees them in use and cannot push over them; max 0 gives them
 * back and hands nothing over; a sample copied out is given back at once. */
static void test_read_holds(void **state)
{
	struct ring *r = ring_new(256);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct ring_reader rd = { .chain = out_chain };
	const struct ring_entry *e = (const void *)1;
	struct opvm_sample s;
	uint64_t i = 0;

	assert_non_null(r);
	assert_int_equal(ring_read(r, &rd, &e, 0), 0);
	assert_null(e);
	for (s = mk(i, 0, chain); ring_push(r, &s) == 0; s = mk(++i, 0, chain))
		;
	assert_int_equal(i, 256 / 6);
	assert_int_equal(ring_read(r, &rd, &e, 10), 10);
	assert_int_equal(rd.held, 10);
	assert_int_equal(ring_used_words(r), 42 * 6);
	assert_int_equal(ring_push(r, &s), -ENOSPC);	/* still full */
	for (uint64_t k = 0; k < 10; k++)
		check_entry(&e[k], k);
	/* max 0: the ten go back, nothing comes */
	assert_int_equal(ring_read(r, &rd, &e, 0), 0);
	assert_null(e);
	assert_int_equal(rd.held, 0);
	assert_int_equal(ring_used_words(r), 32 * 6);
	/* the rest, up to the array's end (252 of 256 words) */
	assert_int_equal(ring_read(r, &rd, &e, 1000), 32);
	for (uint64_t k = 0; k < 32; k++)
		check_entry(&e[k], 10 + k);
	assert_int_equal(ring_used_words(r), 32 * 6);
	/* a chain: skip marker, then index 0; the run and it go back */
	s = mk(50, 3, chain);
	assert_int_equal(ring_push(r, &s), 0);
	assert_int_equal(ring_read(r, &rd, &e, 8), 1);
	assert_null(e);
	check(&rd.one, 50, 3);
	assert_int_equal(rd.held, 0);
	assert_int_equal(ring_used_words(r), 0);
	assert_int_equal(ring_read(r, &rd, &e, 8), 0);
	assert_int_equal(rd.lost, 2);	/* the fill's last push and the one after */
	ring_free(r);
}

/* A run that ends exactly at the array's end (no skip marker after it)
 * stops there, and the next starts at index 0: the words after the array
 * are not the ring's (a read of them shows under AddressSanitizer). */
static void test_read_exact_end(void **state)
{
	struct ring *r = ring_new(256);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct ring_reader rd = { .chain = out_chain };
	const struct ring_entry *e;
	struct opvm_sample s;
	uint64_t i;

	assert_non_null(r);
	/* two of 8 words, then 40 flat ones: 256 words, the ring full */
	for (i = 0; i < 42; i++) {
		s = mk(i, i < 2 ? 2 : 0, chain);
		assert_int_equal(ring_push(r, &s), 0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(ring_read(r, &rd, &e, 1000), 1);
		check(&rd.one, i, 2);
	}
	for (i = 42; i < 44; i++) {	/* into the words they freed */
		s = mk(i, 0, chain);
		assert_int_equal(ring_push(r, &s), 0);
	}
	assert_int_equal(ring_read(r, &rd, &e, 1000), 40);
	assert_ptr_equal(e + 40, r->cwords + r->cmask + 1);
	for (i = 0; i < 40; i++)
		check_entry(&e[i], 2 + i);
	assert_int_equal(ring_read(r, &rd, &e, 1000), 2);
	assert_ptr_equal(e, r->cwords);
	check_entry(&e[0], 42);
	check_entry(&e[1], 43);
	assert_int_equal(ring_read(r, &rd, &e, 1000), 0);
	ring_free(r);
}

/* The producer's drops reach the reader with what it reads: all those
 * before the samples handed over, and all of them once it finds the ring
 * empty; max 0 does not look. */
static void test_read_lost(void **state)
{
	struct ring *r = ring_new(256);
	uint64_t chain[OPVM_MAX_CALLCHAIN], out_chain[OPVM_MAX_CALLCHAIN];
	struct ring_reader rd = { .chain = out_chain };
	const struct ring_entry *e;
	struct opvm_sample s;
	uint64_t i, n = 0;

	assert_non_null(r);
	for (i = 0; i < 45; i++) {
		s = mk(i, 0, chain);
		ring_push(r, &s);
	}
	assert_int_equal(rd.lost, 0);
	assert_int_equal(ring_read(r, &rd, &e, 5), 5);
	assert_int_equal(rd.lost, 3);
	assert_int_equal(ring_push(r, &s), -ENOSPC);
	assert_int_equal(ring_push(r, &s), -ENOSPC);
	assert_int_equal(ring_read(r, &rd, &e, 0), 0);
	assert_int_equal(rd.lost, 3);
	while ((i = ring_read(r, &rd, &e, 8)))
		n += i;
	assert_int_equal(n, 42 - 5);
	assert_int_equal(rd.lost, 5);
	assert_int_equal(ring_lost(r), 5);
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

/* The mixed stream from a producer thread that retries when the ring is
 * full, counting its refused pushes. */
struct mt_mix {
	struct ring *r;
	uint64_t refused;
};

static void *producer_mix(void *arg)
{
	struct mt_mix *m = arg;
	uint64_t chain[OPVM_MAX_CALLCHAIN];
	uint64_t i = 0;

	while (i < MT_SAMPLES) {
		if (push_mix(m->r, i, chain) == 0) {
			i++;
		} else {
			m->refused++;
			sched_yield();
		}
	}
	return NULL;
}

/* ring_read() against a running producer: every sample in order and
 * intact (a held run is not written over), every refusal counted in
 * rd.lost once the producer is done and the ring empty. */
static void test_read_two_threads(void **state)
{
	struct mt_mix m = { .r = ring_new(4096) };
	static uint8_t out_stack[OPVM_MAX_STACK];
	uint64_t out_chain[OPVM_MAX_CALLCHAIN];
	struct ring_reader rd = { .chain = out_chain, .stack = out_stack };
	const struct ring_entry *e;
	uint64_t next = 0;
	pthread_t th;
	size_t n;

	stk_init();
	assert_non_null(m.r);
	assert_int_equal(pthread_create(&th, NULL, producer_mix, &m), 0);
	while (next < MT_SAMPLES) {
		n = ring_read(m.r, &rd, &e, 64);
		if (!n)
			sched_yield();	/* two cores shared by many jobs */
		else if (e)
			check_run(m.r, e, n, next);
		else
			check_one(&rd, next);
		next += n;
	}
	pthread_join(th, NULL);
	assert_int_equal(ring_read(m.r, &rd, &e, 64), 0);
	assert_int_equal(rd.lost, m.refused);
	assert_int_equal(ring_lost(m.r), m.refused);
	ring_free(m.r);
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
		cmocka_unit_test(test_read_mix),
		cmocka_unit_test(test_read_holds),
		cmocka_unit_test(test_read_exact_end),
		cmocka_unit_test(test_read_lost),
		cmocka_unit_test(test_full_drops),
		cmocka_unit_test(test_chain_bounds),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_read_two_threads),
		cmocka_unit_test(test_stacks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
