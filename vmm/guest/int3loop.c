// SPDX-License-Identifier: MIT
/*
 * A vCPU stuck on a stale int3 (QEMU TCG): the detector.  See int3loop.h.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/array.h"
#include "vmm/guest/int3loop.h"

struct int3win {
	int64_t t0;		/* the window's first sample, 0: none yet */
	unsigned n, hits;	/* samples, and those in the int3 path */
};

struct int3loop {
	unsigned nr_vcpus;
	struct sampler_int3 r;
	uint64_t lo, hi;	/* all ranges within: one test for most samples */
	int64_t last;		/* the last verdict, 0: none */
	uint64_t loops;
	struct int3win win[];
};

struct int3loop *int3loop_new(unsigned nr_vcpus)
{
	struct int3loop *d = calloc(1, sizeof(*d) + (size_t)nr_vcpus * sizeof(d->win[0]));

	if (d)
		d->nr_vcpus = nr_vcpus;
	return d;
}

void int3loop_free(struct int3loop *d)
{
	free(d);
}

/* Ranges come from guest memory: empty or inverted ones are dropped. */
void int3loop_set_ranges(struct int3loop *d, const struct sampler_int3 *r)
{
	unsigned n = r->nr < SAMPLER_INT3_MAX ? r->nr : SAMPLER_INT3_MAX;

	memset(&d->r, 0, sizeof(d->r));
	d->lo = UINT64_MAX;
	d->hi = 0;
	for (unsigned i = 0; i < n; i++) {
		if (r->r[i].end <= r->r[i].start)
			continue;
		d->r.r[d->r.nr++] = r->r[i];
		if (r->r[i].start < d->lo)
			d->lo = r->r[i].start;
		if (r->r[i].end > d->hi)
			d->hi = r->r[i].end;
	}
	memset(d->win, 0, (size_t)d->nr_vcpus * sizeof(d->win[0]));
}

static int in_int3_path(const struct int3loop *d, uint64_t rip)
{
	if (rip < d->lo || rip >= d->hi)
		return 0;
	for (unsigned i = 0; i < d->r.nr; i++)
		if (rip >= d->r.r[i].start && rip < d->r.r[i].end)
			return 1;
	return 0;
}

/* A window ends once it is both long enough and holds enough samples, so
 * a low rate or a throttled sampler widens it rather than judging on a
 * handful. */
int int3loop_sample(struct int3loop *d, unsigned vcpu, uint64_t rip, int64_t now)
{
	struct int3win *w;
	int looped;

	if (!d || vcpu >= d->nr_vcpus || !d->r.nr)
		return 0;
	w = &d->win[vcpu];
	if (!w->t0)
		w->t0 = now;
	w->n++;
	w->hits += (unsigned)in_int3_path(d, rip);
	if (now - w->t0 < INT3LOOP_SPAN_NS || w->n < INT3LOOP_MIN_SAMPLES)
		return 0;
	looped = w->hits * 2 > w->n;
	*w = (struct int3win){ 0 };
	if (!looped)
		return 0;
	d->loops++;
	if (d->last && now - d->last < INT3LOOP_GAP_NS)
		return 0;
	d->last = now;
	return 1;
}

/* Kernels 5.8 on (asm_exc_int3, exc_int3) and before (int3, do_int3),
 * and the handlers exc_int3 tries in turn. */
int int3loop_path_symbol(const char *name, size_t len)
{
	static const char *const names[] = {
		"asm_exc_int3", "exc_int3", "int3", "do_int3", "do_int3_user",
		"poke_int3_handler", "kprobe_int3_handler", "ftrace_int3_handler",
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strlen(names[i]) == len && !memcmp(names[i], name, len))
			return 1;
	return 0;
}

uint64_t int3loop_loops(const struct int3loop *d)
{
	return d ? d->loops : 0;
}
