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
 * In the header only for ring_push()'s inline fast path and
 * ring_peek_flat(); users go through the functions.  Each side keeps its
 * own copy of the array's place and size on its own line, so that its fast
 * path reads one line of the struct.
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
 * paths that need one (ring_peek_flat()'s callers on a slow path). */
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

/* Consumer side.  Pops one sample into *s; s->chain then points into chain,
 * which must hold OPVM_MAX_CALLCHAIN entries.  Returns 1 if a sample was
 * popped, 0 if the ring was empty. */
int ring_pop(struct ring *r, struct opvm_sample *s, uint64_t *chain);
/* ring_pop() that keeps an OPVM_SAMPLE_STACK sample's user stack: s->stack
 * then points into stack, which must hold OPVM_MAX_STACK bytes (NULL: the
 * stack is dropped and the flag cleared, as ring_pop() does). */
int ring_pop_stack(struct ring *r, struct opvm_sample *s, uint64_t *chain, uint8_t *stack);

/* Pops up to max samples into s[0..max): a run of flat ones (no chain, no
 * stack), or one with a chain or a stack alone (into chain and stack, as
 * ring_pop_stack()), publishing the ring's tail once.  Returns how many
 * were popped (0: the ring was empty). */
size_t ring_pop_many(struct ring *r, struct opvm_sample *s, size_t max, uint64_t *chain,
		     uint8_t *stack);

/* Consumer side, in place: *e points at the run of flat entries at the
 * tail (up to max of them, contiguous); returns how many, 0 when the ring
 * is empty or its next entry has a chain or a stack (ring_pop_many() takes
 * that one).  The entries stay the consumer's until ring_consume(r, n)
 * gives the first n back to the producer. */
size_t ring_peek_flat(struct ring *r, const struct ring_entry **e, size_t max);

static inline void ring_consume(struct ring *r, size_t n)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	atomic_store_explicit(&r->tail, tail + n * RING_FLAT_WORDS, memory_order_release);
}

/* Samples dropped because the ring was full (producer-written counter). */
uint64_t ring_lost(const struct ring *r);
/* Samples currently queued (approximate while the producer runs). */
size_t ring_used_words(const struct ring *r);

#endif /* OPVM_RING_H */
