// SPDX-License-Identifier: MIT
/*
 * Per-vCPU sample ring (see lib/ring.h for the contract).
 *
 * Layout: a power-of-two array of 64-bit words.  head (producer) and tail
 * (consumer) are free-running word counters; index = counter & mask.  Each
 * entry starts with a header word whose low 16 bits give its length in
 * words.  An entry never wraps: when it does not fit between the write
 * position and the end of the array, the producer writes a header word of 0
 * (a skip marker: "continue at index 0") and places the entry at the start.
 *
 * Ordering: the producer fills the entry, then publishes head with a release
 * store; the consumer reads head with an acquire load, copies the entry out
 * (or reads it in place: ring_read()'s flat runs, until its next call),
 * then publishes tail with a release store, so the producer never
 * overwrites words still being read.  Each side keeps a private copy of the other side's
 * counter and reloads it only when that copy says "full" or "empty", which
 * keeps the shared cache lines quiet on the fast path.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ring.h"

/* Entry: header, rip, cr3, slot_cr3, then two words that hold the bytes of
 * struct opvm_sample's (slot_tid, slot_tgid) and (vcpu, cpl, event, flags,
 * nr_chain) as they lie in memory (each side copies them whole: a flat
 * sample is five word copies each way), chain..., and with
 * OPVM_SAMPLE_STACK: user ip, sp, bp, then the stack's bytes (length in the
 * header's top 16 bits) padded to a word.  The header's nr_chain (bits
 * 16..23) is the one that counts (the copied byte is the caller's,
 * unchecked); bits 24..31 hold nr_py, at most nr_chain.  The cr3 word is
 * normalised on the way in. */
#define RING_HDR_WORDS	6	/* RING_FLAT_WORDS */
#define RING_MIN_WORDS	256	/* holds several maximal entries */
#define RING_MAX_WORDS	((size_t)1 << 32)

_Static_assert(offsetof(struct opvm_sample, slot_tgid) ==
	       offsetof(struct opvm_sample, slot_tid) + 4 &&
	       offsetof(struct opvm_sample, cpl) == offsetof(struct opvm_sample, vcpu) + 4 &&
	       offsetof(struct opvm_sample, event) == offsetof(struct opvm_sample, vcpu) + 5 &&
	       offsetof(struct opvm_sample, flags) == offsetof(struct opvm_sample, vcpu) + 6 &&
	       offsetof(struct opvm_sample, nr_chain) == offsetof(struct opvm_sample, vcpu) + 7,
	       "ring entries copy these fields as two words");
_Static_assert(RING_FLAT_WORDS == RING_HDR_WORDS &&
	       offsetof(struct ring_entry, rip) == 8 + offsetof(struct opvm_sample, rip) &&
	       offsetof(struct ring_entry, slot_tid) == 8 + offsetof(struct opvm_sample, slot_tid) &&
	       offsetof(struct ring_entry, vcpu) == 8 + offsetof(struct opvm_sample, vcpu) &&
	       offsetof(struct ring_entry, flags) == 8 + offsetof(struct opvm_sample, flags),
	       "struct ring_entry is a flat entry's words");

/* nr, npy and sl: the chain's length, its Python frames' and the stack's
 * length actually stored (s's, checked) */
static inline uint64_t hdr_pack(unsigned len, unsigned nr, unsigned npy, unsigned sl)
{
	return (uint64_t)len | (uint64_t)nr << 16 | (uint64_t)npy << 24 | (uint64_t)sl << 48;
}

/* The words every entry has, from s. */
static inline void push_flat(uint64_t *w, const struct opvm_sample *s)
{
	w[1] = s->rip;
	w[2] = opvm_cr3_normalise(s->cr3);
	w[3] = s->slot_cr3;
	memcpy(&w[4], &s->slot_tid, sizeof(w[4]));
	memcpy(&w[5], &s->vcpu, sizeof(w[5]));
}

struct ring *ring_new(size_t words)
{
	struct ring *r;
	size_t n = RING_MIN_WORDS;

	if (words > RING_MAX_WORDS) {
		errno = EINVAL;
		return NULL;
	}
	while (n < words)
		n <<= 1;
	r = aligned_alloc(RING_CACHELINE, sizeof(*r));
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->pwords = malloc(n * sizeof(uint64_t));
	if (!r->pwords) {
		free(r);
		return NULL;
	}
	/* Touch every page now: a ring is then committed memory from the
	 * start, and a long session's RSS does not creep up as the producer
	 * first walks through it. */
	memset(r->pwords, 0, n * sizeof(uint64_t));
	r->cwords = r->pwords;
	r->pmask = r->cmask = n - 1;
	r->plimit = n;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	atomic_init(&r->lost, 0);
	return r;
}

void ring_free(struct ring *r)
{
	if (!r)
		return;
	free(r->pwords);
	free(r);
}

/* How far head may go on ring_push()'s fast path: the room the cached
 * tail leaves, up to the end of head's lap round the array. */
static uint64_t plimit(const struct ring *r, uint64_t head)
{
	uint64_t size = r->pmask + 1, room = r->tail_cache + size;
	uint64_t lap_end = (head & ~r->pmask) + size;

	return room < lap_end ? room : lap_end;
}

/* Any sample: a chain, a stack, the wrap to index 0, a full ring. */
int ring_push_slow(struct ring *r, const struct opvm_sample *s)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t size = r->pmask + 1;
	unsigned nr = s->nr_chain, npy, sl = 0, sw = 0;
	unsigned len, skip;
	uint64_t need, idx;
	uint64_t *w;

	if (nr > OPVM_MAX_CALLCHAIN || (nr && !s->chain))
		nr = 0;		/* never trust a caller's count past the cap */
	npy = s->nr_py <= nr ? s->nr_py : nr;
	if (s->flags & OPVM_SAMPLE_STACK) {
		sl = s->stack && s->stack_len <= OPVM_MAX_STACK ? s->stack_len : 0;
		sw = 3 + (sl + 7) / 8;
	}
	len = RING_HDR_WORDS + nr + sw;
	idx = head & r->pmask;
	skip = (idx + len > size) ? (unsigned)(size - idx) : 0;
	need = (uint64_t)skip + len;

	if (head + need - r->tail_cache > size) {
		r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
		r->plimit = plimit(r, head);
		if (head + need - r->tail_cache > size) {
			atomic_store_explicit(&r->lost,
				atomic_load_explicit(&r->lost, memory_order_relaxed) + 1,
				memory_order_relaxed);
			return -ENOSPC;
		}
	}
	if (skip) {
		r->pwords[idx] = 0;	/* skip marker */
		head += skip;
		idx = 0;
	}
	w = r->pwords + idx;
	w[0] = hdr_pack(len, nr, npy, sl);
	push_flat(w, s);
	if (nr)
		memcpy(w + RING_HDR_WORDS, s->chain, nr * sizeof(uint64_t));
	if (sw) {
		uint64_t *u = w + RING_HDR_WORDS + nr;

		u[0] = s->user_ip;
		u[1] = s->user_sp;
		u[2] = s->user_bp;
		if (sl) {
			u[2 + (sl + 7) / 8] = 0;	/* the pad bytes */
			memcpy(u + 3, s->stack, sl);
		}
	}
	r->plimit = plimit(r, head + len);
	atomic_store_explicit(&r->head, head + len, memory_order_release);
	return 0;
}

/* The OPVM_SAMPLE_STACK part of the entry at w (nr chain words), into s
 * and stack (which holds OPVM_MAX_STACK bytes), or dropped. */
static void pop_stack(const uint64_t *w, uint64_t h, unsigned len, unsigned nr,
		      struct opvm_sample *s, uint8_t *stack)
{
	const uint64_t *u = w + RING_HDR_WORDS + nr;
	unsigned sl = (unsigned)(h >> 48);

	s->stack_len = 0;
	s->stack = NULL;
	if (!(s->flags & OPVM_SAMPLE_STACK))
		return;
	if (!stack || sl > OPVM_MAX_STACK || RING_HDR_WORDS + nr + 3 + (sl + 7) / 8 > len) {
		s->flags &= (uint8_t)~OPVM_SAMPLE_STACK;
		return;
	}
	s->user_ip = u[0];
	s->user_sp = u[1];
	s->user_bp = u[2];
	memcpy(stack, u + 3, sl);
	s->stack_len = (uint16_t)sl;
	s->stack = stack;
}

/* The fields every entry has (at w), into s; nr_chain is the caller's. */
static inline void pop_flat(const uint64_t *w, struct opvm_sample *s)
{
	s->rip = w[1];
	s->cr3 = w[2];
	s->slot_cr3 = w[3];
	memcpy(&s->slot_tid, &w[4], sizeof(w[4]));
	memcpy(&s->vcpu, &w[5], sizeof(w[5]));
}

/* The entry at w (header h) copied whole into s, its chain into chain and
 * its stack into stack; returns its length in words.  Out of line: the
 * drain's flat runs never come here. */
static unsigned __attribute__((noinline)) pop_one(const uint64_t *w, uint64_t h,
						  struct opvm_sample *s, uint64_t *chain,
						  uint8_t *stack)
{
	unsigned len = h & 0xffff, nr = (h >> 16) & 0xff, npy = (h >> 24) & 0xff;

	pop_flat(w, s);
	s->nr_chain = (uint8_t)nr;
	s->nr_py = (uint8_t)npy;
	if (nr && chain) {
		memcpy(chain, w + RING_HDR_WORDS, nr * sizeof(uint64_t));
		s->chain = chain;
	} else {
		s->nr_chain = s->nr_py = 0;
		s->chain = NULL;
	}
	pop_stack(w, h, len, nr, s, stack);
	return len;
}

/*
 * The entry at *tail, NULL when the ring is empty.  head is loaded again
 * only when the cached one is used up, which keeps the producer's line
 * quiet while there is work; the drop count comes with it (into *lost
 * unless NULL): loaded after head, it counts every drop that came before
 * the entries head covers, as perf's lost records come in its stream.  A
 * skip marker is stepped over (*tail moves past it).
 */
static const uint64_t *at_tail(struct ring *r, uint64_t *tail, uint64_t *lost)
{
	uint64_t t = *tail, mask = r->cmask;

	if (t == r->head_cache) {
		r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
		if (lost)
			*lost = atomic_load_explicit(&r->lost, memory_order_relaxed);
		if (t == r->head_cache)
			return NULL;
	}
	if (r->cwords[t & mask] == 0) {
		/* skip marker: the producer continued at index 0, and
		 * published the entry there with the marker */
		t += mask + 1 - (t & mask);
		*tail = t;
		if (t == r->head_cache)
			return NULL;	/* cannot happen; never read past head */
	}
	return r->cwords + (t & mask);
}

/* How many flat entries lie from w (at tail, itself flat) on, up to max:
 * entries never wrap, so a run ends at the array's end at the latest. */
static size_t flat_run(const struct ring *r, uint64_t tail, const uint64_t *w, size_t max)
{
	uint64_t idx = tail & r->cmask, avail = r->head_cache - tail;
	const uint64_t *end, *p;

	if (avail > r->cmask + 1 - idx)
		avail = r->cmask + 1 - idx;
	if (max > avail / RING_FLAT_WORDS)
		max = avail / RING_FLAT_WORDS;
	end = w + max * RING_FLAT_WORDS;
	/* four headers a step: the scan is a compare an entry */
	for (p = w; end - p >= 4 * (ptrdiff_t)RING_FLAT_WORDS && p[0] == RING_FLAT_WORDS &&
		    p[RING_FLAT_WORDS] == RING_FLAT_WORDS &&
		    p[2 * RING_FLAT_WORDS] == RING_FLAT_WORDS &&
		    p[3 * RING_FLAT_WORDS] == RING_FLAT_WORDS; p += 4 * RING_FLAT_WORDS)
		;
	for (; p < end && *p == RING_FLAT_WORDS; p += RING_FLAT_WORDS)
		;
	return (size_t)(p - w) / RING_FLAT_WORDS;
}

/*
 * The give-back of the last run and the hand-over of the next share one
 * tail publication: a flat run is read in place and its words stay out of
 * the producer's reach (tail stops before them) until the next call.  A
 * sample with a chain or a stack is copied out alone (its chain and stack
 * go into the reader's single buffers), its words given back at once.
 */
size_t ring_read(struct ring *r, struct ring_reader *rd, const struct ring_entry **flat,
		 size_t max)
{
	uint64_t tail0 = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t tail = tail0 + rd->held * RING_FLAT_WORDS;
	const uint64_t *w = max ? at_tail(r, &tail, &rd->lost) : NULL;
	size_t n = 0;

	rd->held = 0;
	*flat = NULL;
	if (w && w[0] == RING_FLAT_WORDS) {
		n = rd->held = flat_run(r, tail, w, max);
		*flat = (const struct ring_entry *)w;
	} else if (w) {
		tail += pop_one(w, w[0], &rd->one, rd->chain, rd->stack);
		n = 1;
	}
	if (tail != tail0)
		atomic_store_explicit(&r->tail, tail, memory_order_release);
	return n;
}

int ring_pop(struct ring *r, struct opvm_sample *s, uint64_t *chain)
{
	return ring_pop_stack(r, s, chain, NULL);
}

int ring_pop_stack(struct ring *r, struct opvm_sample *s, uint64_t *chain, uint8_t *stack)
{
	uint64_t tail0 = atomic_load_explicit(&r->tail, memory_order_relaxed), tail = tail0;
	const uint64_t *w = at_tail(r, &tail, NULL);

	if (w)
		tail += pop_one(w, w[0], s, chain, stack);
	if (tail != tail0)
		atomic_store_explicit(&r->tail, tail, memory_order_release);
	return w != NULL;
}

uint64_t ring_lost(const struct ring *r)
{
	return atomic_load_explicit(&((struct ring *)r)->lost, memory_order_relaxed);
}

size_t ring_used_words(const struct ring *r)
{
	struct ring *rw = (struct ring *)r;
	uint64_t h = atomic_load_explicit(&rw->head, memory_order_acquire);
	uint64_t t = atomic_load_explicit(&rw->tail, memory_order_acquire);

	return h >= t ? (size_t)(h - t) : 0;
}
