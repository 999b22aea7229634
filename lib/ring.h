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

#include <stddef.h>
#include <stdint.h>
#include "lib/sample.h"

struct ring;

/* words: capacity in 64-bit words, rounded up to a power of two (>= 64).
 * The memory is touched here (resident from the start, never more later).
 * Returns NULL and sets errno on failure. */
struct ring *ring_new(size_t words);
void ring_free(struct ring *r);

/* Producer side.  Returns 0, or -ENOSPC when the sample was dropped (and
 * counted).  s->chain is copied. */
int ring_push(struct ring *r, const struct opvm_sample *s);

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

/* Samples dropped because the ring was full (producer-written counter). */
uint64_t ring_lost(const struct ring *r);
/* Samples currently queued (approximate while the producer runs). */
size_t ring_used_words(const struct ring *r);

#endif /* OPVM_RING_H */
