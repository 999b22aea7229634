// SPDX-License-Identifier: MIT
/*
 * Python frames for the perf sampler (vmm/perf/perf-python.h).
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/pynames.h"
#include "lib/sample.h"
#include "vmm/guest/guestmem.h"
#include "vmm/perf/perf-python.h"

/* A read waiting for its sample's task. */
struct pyheld {
	uint64_t end;			/* guest TSC at the read's end */
	uint64_t cr3;			/* normalised, as the slot said */
	uint32_t tid;
	uint32_t n;
	uint32_t idx[PYFRAMES_MAX_DEPTH];	/* lib/pynames.h indices */
};

/* Per vCPU: reads in the order of their samples, handles first..first+count
 * (a handle is never 0). */
struct pyvcpu {
	struct pyheld *held;		/* PERF_PYTHON_HELD, allocated at first use */
	uint32_t first, count;
};

struct perf_python {
	struct pyguest *pg;
	unsigned nr;
	struct pyvcpu *v;
	/* the slots, published by the collector's thread (odd: changing) */
	atomic_uint_fast64_t sl_seq, sl_pa, sl_geom;
	pthread_mutex_t sl_lock;
	uint64_t sl_seen, slot_pa;
	uint32_t slot_size, nr_slots;
	int any;			/* a CPython address space is known */
	struct guestmem_view view;
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct perf_python_stats st;	/* the drain thread's */
	struct perf_python_stats pub;	/* published under pub_lock */
	pthread_mutex_t pub_lock;
};

struct perf_python *perf_python_new(unsigned nr_vcpus)
{
	struct perf_python *pp = calloc(1, sizeof(*pp));

	if (!pp)
		return NULL;
	pp->nr = nr_vcpus;
	pp->v = calloc(nr_vcpus ? nr_vcpus : 1, sizeof(*pp->v));
	pp->pg = pyguest_new();
	if (!pp->v || !pp->pg) {
		pyguest_free(pp->pg);
		free(pp->v);
		free(pp);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < nr_vcpus; i++)
		pp->v[i].first = 1;
	pthread_mutex_init(&pp->sl_lock, NULL);
	pthread_mutex_init(&pp->pub_lock, NULL);
	return pp;
}

void perf_python_free(struct perf_python *pp)
{
	if (!pp)
		return;
	for (unsigned i = 0; i < pp->nr; i++)
		free(pp->v[i].held);
	free(pp->v);
	pyguest_free(pp->pg);
	pthread_mutex_destroy(&pp->sl_lock);
	pthread_mutex_destroy(&pp->pub_lock);
	free(pp);
}

void perf_python_publish(struct perf_python *pp, const struct sampler_python *set)
{
	pyguest_publish(pp->pg, set);
}

void perf_python_set_slots(struct perf_python *pp, uint64_t slot_pa, uint32_t slot_size,
			   uint32_t nr_slots)
{
	if (slot_size < sizeof(struct opvm_slot) || !nr_slots)
		slot_pa = 0;
	pthread_mutex_lock(&pp->sl_lock);
	atomic_fetch_add(&pp->sl_seq, 1);
	atomic_store(&pp->sl_pa, slot_pa);
	atomic_store(&pp->sl_geom, (uint64_t)slot_size << 32 | nr_slots);
	atomic_fetch_add(&pp->sl_seq, 1);
	pthread_mutex_unlock(&pp->sl_lock);
}

int perf_python_take(struct perf_python *pp)
{
	uint64_t seq = atomic_load(&pp->sl_seq);

	if (seq != pp->sl_seen && !(seq & 1)) {
		uint64_t pa = atomic_load(&pp->sl_pa), geom = atomic_load(&pp->sl_geom);

		if (atomic_load(&pp->sl_seq) == seq) {
			pp->sl_seen = seq;
			pp->slot_pa = pa;
			pp->slot_size = (uint32_t)(geom >> 32);
			pp->nr_slots = (uint32_t)geom;
		}
	}
	pyguest_take(pp->pg);
	pp->any = pyguest_nr(pp->pg) > 0;
	return pp->any && pp->slot_pa;
}

/* vCPU i's slot, read from guest RAM (bounds: guestmem's). */
static int slot_read(struct perf_python *pp, struct guestmem *m, unsigned i,
		     struct opvm_slot *out)
{
	uint64_t off, at;

	if (i >= pp->nr_slots || __builtin_mul_overflow((uint64_t)i, pp->slot_size, &off) ||
	    __builtin_add_overflow(pp->slot_pa, off, &at) ||
	    guestmem_read(m, at, out, sizeof(*out)))
		return -EFAULT;
	out->seq = le32toh(out->seq);
	out->pid = le32toh(out->pid);
	out->cr3 = le64toh(out->cr3);
	return 0;
}

/* A free entry at the end of vCPU i's reads, or NULL (full: counted). */
static struct pyheld *held_next(struct perf_python *pp, unsigned i, uint32_t *h)
{
	struct pyvcpu *v = &pp->v[i];

	if (!v->held && !(v->held = calloc(PERF_PYTHON_HELD, sizeof(*v->held))))
		return NULL;
	if (v->count == PERF_PYTHON_HELD) {
		pp->st.held_full++;
		return NULL;
	}
	*h = v->first + v->count;
	if (!*h) {			/* a handle is never 0: start again */
		if (v->count)
			return NULL;
		v->first = *h = 1;
	}
	return &v->held[*h % PERF_PYTHON_HELD];
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads into pp->fr for the task of slot a; the count kept, 0 if the task
 * switched under the read (counted). */
static unsigned read_chain(struct perf_python *pp, struct guestmem *m, unsigned vcpu,
			   const struct opvm_slot *a, uint64_t cr3)
{
	struct unwind_mem um = { guestmem_view_read, &pp->view };
	struct opvm_slot b;
	unsigned n;

	if (pp->view.m != m)
		guestmem_view_init(&pp->view, m);
	guestmem_view_reset(&pp->view, cr3, PYGUEST_PAGES);
	n = pyguest_read(pp->pg, &um, cr3, a->pid, pp->fr, PYFRAMES_MAX_DEPTH, 1);
	pp->st.reads++;
	if (!n)
		return 0;
	if (slot_read(pp, m, vcpu, &b) || b.seq != a->seq) {
		pp->st.switched++;
		return 0;
	}
	return n;
}

uint32_t perf_python_read(struct perf_python *pp, struct guestmem *m, struct pynames *names,
			  unsigned vcpu, const struct guest_tsc *clk)
{
	uint64_t t0 = cpu_ns(), cr3;
	struct opvm_slot a;
	struct pyheld *e;
	uint32_t h = 0;
	unsigned n, k = 0;

	if (!names || !m || !pp->any || !pp->slot_pa || vcpu >= pp->nr)
		return 0;
	if (slot_read(pp, m, vcpu, &a) || (a.seq & 1)) {
		pp->st.slot_busy++;
		goto out;
	}
	cr3 = opvm_cr3_normalise(a.cr3);
	if (!a.pid || !cr3 || !pyguest_is_python(pp->pg, cr3) || !(e = held_next(pp, vcpu, &h)))
		goto out;
	n = read_chain(pp, m, vcpu, &a, cr3);
	for (; k < n; k++)
		if (pynames_intern(names, pp->fr[k].name, pp->fr[k].file, pp->fr[k].first_line,
				   pp->fr[k].line, &e->idx[k]))
			break;		/* the table is full: its callers go too */
	if (k) {
		e->end = guest_tsc(clk, __rdtsc());
		e->cr3 = cr3;
		e->tid = a.pid;
		e->n = k;
		pp->v[vcpu].count++;
	}
out:
	pp->st.cost_ns += cpu_ns() - t0;
	return k ? h : 0;
}

void perf_python_stale(struct perf_python *pp)
{
	pp->st.stale++;
}

static struct pyheld *held_get(const struct perf_python *pp, unsigned vcpu, uint32_t h)
{
	const struct pyvcpu *v = vcpu < pp->nr ? &pp->v[vcpu] : NULL;

	if (!v || !v->held || !h || h - v->first >= v->count)
		return NULL;
	return &v->held[h % PERF_PYTHON_HELD];
}

uint64_t perf_python_read_end(const struct perf_python *pp, unsigned vcpu, uint32_t h)
{
	const struct pyheld *e = held_get(pp, vcpu, h);

	return e ? e->end : 0;
}

unsigned perf_python_chain(struct perf_python *pp, unsigned vcpu, uint32_t h,
			   const struct timeline_task *at_sample,
			   const struct timeline_task *at_end, uint64_t *w)
{
	const struct pyheld *e = held_get(pp, vcpu, h);
	struct pyvcpu *v;
	unsigned n = 0;

	if (!e)
		return 0;
	if (!at_sample || !at_end) {
		pp->st.unconfirmed++;
	} else if (at_end->tsc != at_sample->tsc || at_end->pid != at_sample->pid ||
		   at_sample->pid != e->tid || opvm_cr3_normalise(at_sample->cr3) != e->cr3) {
		pp->st.switched++;
	} else {
		for (; n < e->n; n++)
			w[n] = PYNAMES_WORD(e->idx[n]);
		pp->st.kept++;
	}
	/* reads are confirmed in the order of their samples: this one and
	 * any older one are done */
	v = &pp->v[vcpu];
	v->count -= h - v->first + 1;
	v->first = h + 1;
	return n;
}

void perf_python_publish_stats(struct perf_python *pp)
{
	pyguest_get_stats(pp->pg, &pp->st.py);
	pthread_mutex_lock(&pp->pub_lock);
	pp->pub = pp->st;
	pthread_mutex_unlock(&pp->pub_lock);
}

void perf_python_get_stats(struct perf_python *pp, struct perf_python_stats *out)
{
	pthread_mutex_lock(&pp->pub_lock);
	*out = pp->pub;
	pthread_mutex_unlock(&pp->pub_lock);
}
