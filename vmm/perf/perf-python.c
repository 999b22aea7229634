// SPDX-License-Identifier: MIT
/*
 * Python frames for the perf sampler (vmm/perf/perf-python.h).
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/pynames.h"
#include "lib/sample.h"
#include "vmm/guest/guestmem.h"
#include "vmm/introspect/kcurrent.h"
#include "vmm/perf/perf-python.h"

/* kcurrent's cache entries are named again after this long (exec changes
 * a task's mm, not its pid): the gdbstub sampler's figure. */
#define CUR_MAX_AGE_NS	1000000000ull

/* The task on a vCPU, as one source names it (the slot, or the kernel's
 * current-task pointer: task_on()). */
struct pytask {
	uint64_t cr3;			/* normalised; 0: no address space */
	uint64_t mark;			/* moves when the task switches: the
					 * slot's seq, or the task pointer */
	uint32_t tid, tgid;
};

/* A read waiting for its sample's task. */
struct pyheld {
	uint64_t end;			/* guest TSC at the read's end */
	uint64_t cr3;			/* normalised, as the task's source said */
	uint32_t tid, tgid;
	uint32_t n;
	bool cur;			/* named by the current-task pointer */
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
	/* no slots: the current-task pointers, published by the collector's
	 * thread (cur_pub), taken by the drain thread (ci, kc: its own) */
	_Atomic(struct kcurrent_info *) cur_pub;
	struct kcurrent_info *ci;
	struct kcurrent *kc;
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
	kcurrent_free(pp->kc);
	free(pp->ci);
	free(atomic_exchange(&pp->cur_pub, NULL));
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

void perf_python_set_current(struct perf_python *pp, const struct kcurrent_info *ci)
{
	struct kcurrent_info *c = calloc(1, sizeof(*c));

	if (!c)
		return;		/* the old view stays */
	if (ci)
		*c = *ci;
	free(atomic_exchange(&pp->cur_pub, c));
}

/* A new current-task publication, if any, into the drain thread's own
 * struct kcurrent over m. */
static void cur_take(struct perf_python *pp, struct guestmem *m)
{
	struct kcurrent_info *ci = atomic_exchange(&pp->cur_pub, NULL);

	if (!ci)
		return;
	kcurrent_free(pp->kc);
	free(pp->ci);
	pp->kc = NULL;
	pp->ci = ci;
	if (ci->nr > KCURRENT_MAX_CPUS)
		ci->nr = KCURRENT_MAX_CPUS;
	if (ci->nr && m)
		pp->kc = kcurrent_new(m, ci, CUR_MAX_AGE_NS);
}

int perf_python_take(struct perf_python *pp, struct guestmem *m)
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
	cur_take(pp, m);
	pyguest_take(pp->pg);
	pp->any = pyguest_nr(pp->pg) > 0;
	if (!pp->any)
		return PERF_PYTHON_OFF;
	return pp->slot_pa ? PERF_PYTHON_SLOT : pp->kc ? PERF_PYTHON_CURRENT : PERF_PYTHON_OFF;
}

/* vCPU i's task by opvm.ko's slot, read from guest RAM (bounds:
 * guestmem's): 0, or -EBUSY (unreadable, or odd: being written). */
static int task_slot(struct perf_python *pp, struct guestmem *m, unsigned i, struct pytask *t)
{
	struct opvm_slot sl;
	uint64_t off, at;

	if (i >= pp->nr_slots || __builtin_mul_overflow((uint64_t)i, pp->slot_size, &off) ||
	    __builtin_add_overflow(pp->slot_pa, off, &at) ||
	    guestmem_read(m, at, &sl, sizeof(sl)) || (le32toh(sl.seq) & 1))
		return -EBUSY;
	t->mark = le32toh(sl.seq);
	t->tid = le32toh(sl.pid);
	t->tgid = le32toh(sl.tgid);
	t->cr3 = opvm_cr3_normalise(le64toh(sl.cr3));
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* vCPU i's task by the kernel's current-task pointer of CPU i (no slot:
 * introspection said where it is), named by kcurrent in user mode: 0,
 * -EBUSY (the pointer unreadable) or -EINVAL (it names no task). */
static int task_current(struct perf_python *pp, struct guestmem *m, unsigned i,
			struct pytask *t)
{
	struct ktask_cur kt;
	uint64_t ptr;

	if (i >= pp->ci->nr || !pp->ci->slot_pa[i] ||
	    guestmem_read(m, pp->ci->slot_pa[i], &ptr, sizeof(ptr)))
		return -EBUSY;
	ptr = le64toh(ptr);
	if (kcurrent_task(pp->kc, ptr, true, mono_ns(), &kt))
		return -EINVAL;
	t->mark = ptr;
	t->tid = kt.tid;
	t->tgid = kt.tgid;
	t->cr3 = kt.kthread ? 0 : opvm_cr3_normalise(kt.cr3);
	return 0;
}

/* The task on vCPU i: the module's slot where there is one, else the
 * kernel's own pointer.  The rest of a read is the same for both. */
static int task_on(struct perf_python *pp, struct guestmem *m, unsigned i, struct pytask *t)
{
	return pp->slot_pa ? task_slot(pp, m, i, t) : task_current(pp, m, i, t);
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

/* Reads into pp->fr for task a; the count kept, 0 if the task switched
 * under the read (its source names another now: counted). */
static unsigned read_chain(struct perf_python *pp, struct guestmem *m, unsigned vcpu,
			   const struct pytask *a)
{
	struct unwind_mem um = { guestmem_view_read, &pp->view };
	struct pytask b;
	unsigned n;

	if (pp->view.m != m)
		guestmem_view_init(&pp->view, m);
	guestmem_view_reset(&pp->view, a->cr3, PYGUEST_PAGES);
	n = pyguest_read(pp->pg, &um, a->cr3, a->tid, pp->fr, PYFRAMES_MAX_DEPTH, 1);
	pp->st.reads++;
	if (!n)
		return 0;
	if (task_on(pp, m, vcpu, &b) || b.mark != a->mark || b.tid != a->tid ||
	    b.tgid != a->tgid || b.cr3 != a->cr3) {
		pp->st.switched++;
		return 0;
	}
	return n;
}

uint32_t perf_python_read(struct perf_python *pp, struct guestmem *m, struct pynames *names,
			  unsigned vcpu, const struct guest_tsc *clk)
{
	uint64_t t0 = cpu_ns();
	struct pytask a;
	struct pyheld *e;
	uint32_t h = 0;
	unsigned n, k = 0;
	int rc;

	if (!names || !m || !pp->any || !(pp->slot_pa || pp->kc) || vcpu >= pp->nr)
		return 0;
	if ((rc = task_on(pp, m, vcpu, &a))) {
		if (rc == -EBUSY)
			pp->st.slot_busy++;
		else
			pp->st.task_bad++;
		goto out;
	}
	if (!a.tid || !a.cr3 || !pyguest_is_python(pp->pg, a.cr3) ||
	    !(e = held_next(pp, vcpu, &h)))
		goto out;
	n = read_chain(pp, m, vcpu, &a);
	for (; k < n; k++)
		if (pynames_intern(names, pp->fr[k].name, pp->fr[k].file, pp->fr[k].first_line,
				   pp->fr[k].line, &e->idx[k]))
			break;		/* the table is full: its callers go too */
	if (k) {
		e->end = guest_tsc(clk, __rdtsc());
		e->cr3 = a.cr3;
		e->tid = a.tid;
		e->tgid = a.tgid;
		e->cur = !pp->slot_pa;
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

/* Whether read e goes with its sample: a read named by the slot when the
 * timeline confirms it (both tasks the same run of the task read), one
 * named by the current-task pointer unless the timeline (a module come
 * since) names another task; counted when not. */
static bool held_ok(struct perf_python *pp, const struct pyheld *e,
		    const struct timeline_task *at_sample, const struct timeline_task *at_end)
{
	if (e->cur) {
		if (!at_sample || at_sample->pid == e->tid)
			return true;
		pp->st.switched++;
		return false;
	}
	if (!at_sample || !at_end) {
		pp->st.unconfirmed++;
	} else if (at_end->tsc != at_sample->tsc || at_end->pid != at_sample->pid ||
		   at_sample->pid != e->tid || opvm_cr3_normalise(at_sample->cr3) != e->cr3) {
		pp->st.switched++;
	} else {
		return true;
	}
	return false;
}

unsigned perf_python_chain(struct perf_python *pp, unsigned vcpu, uint32_t h,
			   const struct timeline_task *at_sample,
			   const struct timeline_task *at_end, uint64_t *w, uint32_t *tgid)
{
	const struct pyheld *e = held_get(pp, vcpu, h);
	struct pyvcpu *v;
	unsigned n = 0;

	*tgid = 0;
	if (!e)
		return 0;
	if (held_ok(pp, e, at_sample, at_end)) {
		for (; n < e->n; n++)
			w[n] = e->idx[n];
		/* not confirmed here: the filing checks the process */
		if (e->cur && !at_sample)
			*tgid = e->tgid;
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
