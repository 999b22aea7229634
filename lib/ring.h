/* SPDX-License-Identifier: MIT */
/*
 * Per-vCPU sample ring: single producer (the sampling context: a vCPU thread
 * right after its overflow signal, or the gdbstub tick thread), single
 * consumer (sync).  No locks, no allocation after ring_new().  A full ring
 * drops the sample and counts it in lost_overflow, as OProfile's CPU buffers
 * do.
 *
 * Entries are variable length (a sample plus its call chain) in a power-of-two
 * array of 64-bit words; head/tail are free-running word counters published
 * with release/acquire ordering.
 */
#ifndef OPVM_RING_H
#define OPVM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "lib/sample.h"

#define RING_CACHELINE	64

/*
 * In the header only for ring_push()'s inline fast path; users go through
 * the functions.  Each side keeps its own copy of the array's place and
 * size on its own line, so that its fast path reads one line of the struct.
 */
struct ring {
	/* producer-owned line */
	_Alignas(RING_CACHELINE) _Atomic uint64_t head;
	uint64_t tail_cache;		/* producer's view of tail */
	/* head may grow to here without a look at tail or the array's end:
	 * min(tail_cache + size, the end of head's lap) */
	uint64_t plimit;
	_Atomic uint64_t lost;
	uint64_t *pwords;
	uint64_t pmask;
	/* consumer-owned line */
	_Alignas(RING_CACHELINE) _Atomic uint64_t tail;
	uint64_t head_cache;		/* consumer's view of head */
	const uint64_t *cwords;
	uint64_t cmask;
};

/* A flat entry (a sample with no chain and no stack) as it lies in the
 * ring: its header word (RING_FLAT_WORDS), then struct opvm_sample's fields
 * up to nr_chain in that struct's layout (nr_chain: the pusher's byte,
 * unchecked, not to be read). */
struct ring_entry {
	uint64_t hdr;
	uint64_t rip;
	uint64_t cr3;
	uint64_t slot_cr3;
	uint32_t slot_tid;
	uint32_t slot_tgid;
	uint32_t vcpu;
	uint8_t cpl;
	uint8_t event;
	uint8_t flags;
	uint8_t nr_chain;
};

#define RING_FLAT_WORDS	(sizeof(struct ring_entry) / sizeof(uint64_t))

/* Flat entry e as a whole sample (no chain, no stack), for the consumer's
 * paths that need one (ring_read()'s callers on a slow path). */
static inline void ring_entry_sample(const struct ring_entry *e, struct opvm_sample *s)
{
	memset(s, 0, sizeof(*s));
	s->rip = e->rip;
	s->cr3 = e->cr3;
	s->slot_cr3 = e->slot_cr3;
	s->slot_tid = e->slot_tid;
	s->slot_tgid = e->slot_tgid;
	s->vcpu = e->vcpu;
	s->cpl = e->cpl;
	s->event = e->event;
	s->flags = e->flags;
}

/* words: capacity in 64-bit words, rounded up to a power of two (>= 64).
 * The memory is touched here (resident from the start, never more later).
 * Returns NULL and sets errno on failure. */
struct ring *ring_new(size_t words);
void ring_free(struct ring *r);

/* ring_push() for what its inline fast path does not take: a chain, a
 * stack, the wrap to index 0, a full ring. */
int ring_push_slow(struct ring *r, const struct opvm_sample *s);

/* Producer side.  Returns 0, or -ENOSPC when the sample was dropped (and
 * counted).  s->chain is copied; s->cr3 is stored normalised
 * (opvm_cr3_normalise()), once for every reader of the ring.  Inline: a
 * flat sample that fits is six stores and a release, with no call and no
 * reload of what the sampler just wrote into s. */
static inline int ring_push(struct ring *r, const struct opvm_sample *s)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t rip = s->rip, cr3 = opvm_cr3_normalise(s->cr3), slot_cr3 = s->slot_cr3, ids, rest;
	uint64_t *w;

	/* (slot_tid, slot_tgid) and (vcpu, cpl, event, flags, nr_chain) as
	 * they lie in memory (nr_chain is 0 where they are used); all of s
	 * read before the ring is written, so that nothing is read again */
	memcpy(&ids, &s->slot_tid, sizeof(ids));
	memcpy(&rest, &s->vcpu, sizeof(rest));
	if (__builtin_expect((s->nr_chain | (s->flags & OPVM_SAMPLE_STACK)) != 0, 0) ||
	    __builtin_expect(head + RING_FLAT_WORDS > r->plimit, 0))
		return ring_push_slow(r, s);
	w = r->pwords + (head & r->pmask);
	w[0] = RING_FLAT_WORDS;		/* header: length, no chain, no stack */
	w[1] = rip;
	w[2] = cr3;
	w[3] = slot_cr3;
	w[4] = ids;
	w[5] = rest;
	atomic_store_explicit(&r->head, head + RING_FLAT_WORDS, memory_order_release);
	return 0;
}

/*
 * The consumer's cursor: one per ring, used by one thread.  Whatever
 * ring_read() hands over stays the consumer's (the producer cannot write
 * over it) until the next ring_read() on the same reader gives it back.
 */
struct ring_reader {
	uint64_t *chain;		/* OPVM_MAX_CALLCHAIN entries (caller's) */
	uint8_t *stack;			/* OPVM_MAX_STACK bytes, or NULL: a
					 * sample's stack is dropped and its
					 * OPVM_SAMPLE_STACK flag cleared */
	struct opvm_sample one;		/* the sample handed over alone:
					 * one.chain/one.stack point into
					 * chain/stack */
	size_t held;			/* flat entries handed over, not yet
					 * given back */
	uint64_t lost;			/* the producer's drops (ring_lost()),
					 * as of the reader's last look at head:
					 * every drop before the samples handed
					 * over so far */
};

/*
 * Consumer side.  Gives back what the last call handed over, then hands
 * over up to max samples: a run of flat entries read in place (*flat
 * points at them, contiguous: a run ends at the array's end and before a
 * sample with a chain or a stack), or one sample with a chain or a stack,
 * copied into rd->one (*flat NULL).  Returns how many: 0 when the ring is
 * empty (rd->lost is then fresh), or for max 0, which only gives back.  A
 * drain loop that ends on a 0 holds nothing.  One tail publication a call.
 */
size_t ring_read(struct ring *r, struct ring_reader *rd, const struct ring_entry **flat,
		 size_t max);

/* One sample at a time, copied out (tests and tools: the collector drains
 * with ring_read(); not both on a ring while a reader holds a run): into
 * *s; s->chain then points into chain, which must hold OPVM_MAX_CALLCHAIN
 * entries.  Returns 1 if a sample was popped, 0 if the ring was empty. */
int ring_pop(struct ring *r, struct opvm_sample *s, uint64_t *chain);
/* ring_pop() that keeps an OPVM_SAMPLE_STACK sample's user stack: s->stack
 * then points into stack, which must hold OPVM_MAX_STACK bytes (NULL: the
 * stack is dropped and the flag cleared, as ring_pop() does). */
int ring_pop_stack(struct ring *r, struct opvm_sample *s, uint64_t *chain, uint8_t *stack);

/* Samples dropped because the ring was full (producer-written counter). */
uint64_t ring_lost(const struct ring *r);
/* Samples currently queued (approximate while the producer runs). */
size_t ring_used_words(const struct ring *r);

#endif /* OPVM_RING_H */
