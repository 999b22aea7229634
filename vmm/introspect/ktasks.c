// SPDX-License-Identifier: MIT
/*
 * The guest's process list (vmm/introspect/ktasks.h).  Each task costs one
 * read of the span of task_struct that holds the fields wanted (they sit
 * within a few KiB of each other), one of its parent's tgid and one of its
 * mm's pgd.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/array.h"
#include "lib/sample.h"
#include "lib/bytes.h"
#include "lib/sort.h"
#include "lib/x86.h"
#include "vmm/introspect/klist.h"
#include "vmm/introspect/ktasks.h"

#define SPAN_MAX	16384u

static bool kptr(uint64_t p)
{
	return klist_ptr(p, SPAN_MAX);
}

static int rd(const struct ktasks_mem *km, uint64_t va, void *buf, size_t len)
{
	return km->read.read(km->read.arg, va, buf, len);
}

/* The fields' span: [lo, hi) of task_struct. */
static void span(const struct kbtf_offsets *o, uint32_t *lo, uint32_t *hi)
{
	const uint32_t f[][2] = { { o->task_tasks, 16 }, { o->task_pid, 4 }, { o->task_tgid, 4 },
				  { o->task_comm, 16 }, { o->task_mm, 8 },
				  { o->task_real_parent, 8 } };

	*lo = UINT32_MAX;
	*hi = 0;
	for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
		if (f[i][0] < *lo)
			*lo = f[i][0];
		if (f[i][0] + f[i][1] > *hi)
			*hi = f[i][0] + f[i][1];
	}
}

/* One task at t (its task_struct) into *kt; *next gets tasks.next.  false:
 * it could not be read. */
static bool task_read(const struct ktasks_mem *km, const struct kbtf_offsets *o, uint64_t t,
		      uint8_t *buf, uint32_t lo, uint32_t hi, struct ktask *kt,
		      uint64_t *next, struct ktasks_stats *st)
{
	uint64_t mm, parent, pgd;
	uint32_t ptgid;

	if (rd(km, t + lo, buf, hi - lo))
		return false;
	kt->task = t;
	*next = bytes_le64(buf + o->task_tasks - lo);
	kt->tgid = bytes_le32(buf + o->task_tgid - lo);
	memcpy(kt->comm, buf + o->task_comm - lo, 16);
	kt->comm[16] = '\0';
	mm = bytes_le64(buf + o->task_mm - lo);
	parent = bytes_le64(buf + o->task_real_parent - lo);
	kt->ppid = 0;
	if (kptr(parent) && !rd(km, parent + o->task_tgid, &ptgid, 4))
		kt->ppid = le32toh(ptgid);
	kt->cr3 = 0;
	kt->mm = 0;
	if (mm && kptr(mm)) {
		kt->mm = mm;
		if (rd(km, mm + o->mm_pgd, &pgd, 8) || !kptr(le64toh(pgd)) ||
		    km->v2p(km->arg, le64toh(pgd), &kt->cr3) || (kt->cr3 & OPVM_PAGE_MASK)) {
			kt->cr3 = 0;
			kt->mm = 0;
			st->no_pgd++;
		}
	}
	return true;
}

/* A small cache of css_set -> cgroup node for one walk: most tasks share
 * a handful of css_sets. */
#define CSET_CACHE	64
struct cset_cache {
	uint64_t cset[CSET_CACHE], kn[CSET_CACHE];
};

/* t's default-hierarchy cgroup node, or 0 (no BTF for it, or a pointer
 * that does not read: counted). */
static uint64_t task_cgroup_kn(const struct ktasks_mem *km, const struct kbtf_offsets *o,
			       uint64_t t, struct cset_cache *c, struct ktasks_stats *st)
{
	uint64_t cset, cgrp, kn;
	unsigned h;

	if (!o->has_cgroup)
		return 0;
	if (rd(km, t + o->task_cgroups, &cset, 8) || !kptr(cset = le64toh(cset)))
		goto bad;
	h = (unsigned)((cset >> 6) * 0x9e3779b97f4a7c15ull >> 58);
	if (c->cset[h] == cset)
		return c->kn[h];
	if (rd(km, cset + o->cset_dfl_cgrp, &cgrp, 8) || !kptr(cgrp = le64toh(cgrp)) ||
	    rd(km, cgrp + o->cgrp_kn, &kn, 8) || !kptr(kn = le64toh(kn)))
		goto bad;
	c->cset[h] = cset;
	c->kn[h] = kn;
	return kn;
bad:
	st->cgroup_bad++;
	return 0;
}

/* One kernfs name at p (NUL-terminated, at most 255 bytes) into out:
 * read a piece at a time, never across a page it does not need.  Its
 * length, or -EFAULT. */
static int kn_name(const struct ktasks_mem *km, uint64_t p, char out[256])
{
	size_t n = 0;

	if (!kptr(p))
		return -EFAULT;
	while (n < 255) {
		size_t piece = opvm_page_rest(p + n);
		char *nul;

		if (piece > 64)
			piece = 64;
		if (piece > 255 - n)
			piece = 255 - n;
		if (rd(km, p + n, out + n, piece))
			return -EFAULT;
		nul = memchr(out + n, 0, piece);
		if (nul)
			return (int)(nul - out);
		n += piece;
	}
	return 255;	/* longer than NAME_MAX: cut */
}

int ktasks_cgroup_path(const struct ktasks_mem *km, const struct kbtf_offsets *o, uint64_t kn,
		       char *out, size_t cap, int *cut, struct ktasks_stats *st)
{
	uint64_t chain[KTASKS_CGROUP_DEPTH];
	char name[256];
	unsigned depth = 0;
	size_t len = 0;

	*cut = 0;
	/* up to the root (no parent), whose own name is not in the path */
	while (kn) {
		uint64_t parent;

		if (!kptr(kn) || rd(km, kn + o->kn_parent, &parent, 8))
			goto bad;
		parent = le64toh(parent);
		if (!parent)
			break;
		if (depth == KTASKS_CGROUP_DEPTH) {
			st->cgroup_bad++;
			return -ELOOP;
		}
		chain[depth++] = kn;
		kn = parent;
	}
	out[len++] = '/';
	for (unsigned i = depth; i-- > 0;) {
		uint64_t np;
		int n;

		if (rd(km, chain[i] + o->kn_name, &np, 8) || (n = kn_name(km, le64toh(np), name)) < 0)
			goto bad;
		for (int j = 0; j < n; j++)
			if (name[j] == '/')
				name[j] = '?';
		if (i != depth - 1 && len < cap - 1)
			out[len++] = '/';
		if ((size_t)n > cap - 1 - len) {
			n = (int)(cap - 1 - len);
			*cut = 1;
		}
		memcpy(out + len, name, (size_t)n);
		len += (size_t)n;
	}
	out[len] = '\0';
	st->cgroup_cut += *cut;
	return (int)len;
bad:
	st->cgroup_bad++;
	return -EFAULT;
}

static int cmp_tgid(const void *a, const void *b)
{
	const struct ktask *x = a, *y = b;

	return x->tgid < y->tgid ? -1 : x->tgid > y->tgid;
}

/* Sorts out[0..n) by tgid and drops repeats; returns the new count. */
static size_t sort_unique(struct ktask *out, size_t n, struct ktasks_stats *st)
{
	size_t k = 0;

	qsort(out, n, sizeof(*out), cmp_tgid);
	for (size_t i = 0; i < n; i++) {
		if (k && out[k - 1].tgid == out[i].tgid) {
			st->dups++;
			continue;
		}
		out[k++] = out[i];
	}
	return k;
}

int ktasks_walk(const struct ktasks_mem *km, const struct kbtf_offsets *o,
		uint64_t init_task, struct ktask *out, size_t max, size_t *n,
		struct ktasks_stats *st)
{
	uint64_t head = init_task + o->task_tasks, next;
	struct cset_cache *cc;
	uint32_t lo, hi;
	uint8_t *buf;
	size_t k = 0;

	*n = 0;
	span(o, &lo, &hi);
	if (hi - lo > SPAN_MAX || !kptr(init_task))
		return -EINVAL;
	buf = malloc(SPAN_MAX);
	cc = calloc(1, sizeof(*cc));
	if (!buf || !cc) {
		free(buf);
		free(cc);
		return -ENOMEM;
	}
	st->walks++;
	if (rd(km, head, &next, 8)) {
		free(buf);
		free(cc);
		return -EFAULT;
	}
	next = le64toh(next);
	struct klist_loop loop = klist_loop_start(head);

	while (next != head) {
		uint64_t t = next - o->task_tasks;

		if (k == max || klist_loop_seen(&loop, next)) {
			st->cut++;
			break;
		}
		if (!kptr(next) || !kptr(t) ||
		    !task_read(km, o, t, buf, lo, hi, &out[k], &next, st)) {
			st->bad_ptr++;
			break;
		}
		out[k].cgroup_kn = task_cgroup_kn(km, o, t, cc, st);
		k++;
	}
	free(buf);
	free(cc);
	*n = sort_unique(out, k, st);
	return 0;
}

int ktasks_current_slots(const struct ktasks_mem *km, uint64_t per_cpu_offset,
			 uint64_t cur_off, unsigned nr, uint64_t *out)
{
	uint64_t base;

	/* cur_off: the per-CPU variable's symbol value, an offset into each
	 * CPU's area (zero-based per-CPU, x86-64 before 6.15) or its link
	 * address in .data..percpu (after): base + cur_off either way */
	if (!nr || nr > KTASKS_MAX_CPUS || !kptr(per_cpu_offset))
		return -EINVAL;
	for (unsigned i = 0; i < nr; i++) {
		if (rd(km, per_cpu_offset + (uint64_t)i * 8, &base, 8))
			return -EFAULT;
		base = le64toh(base);
		if (!kptr(base + cur_off))
			return -EINVAL;
		out[i] = base + cur_off;
	}
	return 0;
}

/* A few small reads, not task_read()'s span: this runs per sample. */
int ktasks_task(const struct ktasks_mem *km, const struct kbtf_offsets *o, uint64_t t,
		struct ktask_cur *out)
{
	uint64_t mm, pgd;
	uint32_t pid, tgid;

	memset(out, 0, sizeof(*out));
	if (!kptr(t))
		return -EINVAL;
	if (rd(km, t + o->task_pid, &pid, 4) || rd(km, t + o->task_tgid, &tgid, 4) ||
	    rd(km, t + o->task_comm, out->comm, 16) || rd(km, t + o->task_mm, &mm, 8))
		return -EFAULT;
	out->task = t;
	out->tid = le32toh(pid);
	out->tgid = le32toh(tgid);
	mm = le64toh(mm);
	/* a kernel thread has no mm: cr3 stays 0 */
	if (mm && kptr(mm) && !rd(km, mm + o->mm_pgd, &pgd, 8) && kptr(le64toh(pgd))) {
		uint64_t pa = 0;

		if (!km->v2p(km->arg, le64toh(pgd), &pa) && !(pa & OPVM_PAGE_MASK))
			out->cr3 = pa;
	}
	out->kthread = !mm;
	return 0;
}

int ktasks_current(const struct ktasks_mem *km, const struct kbtf_offsets *o,
		   uint64_t slot, struct ktask_cur *out)
{
	uint64_t t;

	memset(out, 0, sizeof(*out));
	if (!kptr(slot))
		return -EINVAL;
	if (rd(km, slot, &t, 8))
		return -EFAULT;
	return ktasks_task(km, o, le64toh(t), out);
}

/* One task's stack base at t, or 0. */
static uint64_t stack_of(const struct ktasks_mem *km, const struct kbtf_offsets *o, uint64_t t)
{
	uint64_t lo;

	if (!kptr(t) || rd(km, t + o->task_stack, &lo, 8))
		return 0;
	lo = le64toh(lo);
	return kptr(lo) && !(lo & (KTASKS_THREAD_SIZE - 1)) ? lo : 0;
}

static int cmp_stack(const void *a, const void *b)
{
	const struct kstack *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

size_t ktasks_stacks(const struct ktasks_mem *km, const struct kbtf_offsets *o,
		     uint64_t init_task, const uint64_t *idle_slots, unsigned nr_idle,
		     const struct ktask *tasks, size_t n, struct kstack *out, uint64_t *bad)
{
	size_t k = 0;
	uint64_t t, lo;

	if (n > KTASKS_MAX)
		n = KTASKS_MAX;
	if (nr_idle > KTASKS_MAX_CPUS)
		nr_idle = KTASKS_MAX_CPUS;
	if ((lo = stack_of(km, o, init_task)))
		out[k++] = (struct kstack){ .lo = lo, .tgid = 0, .kthread = 1 };
	for (unsigned i = 0; i < nr_idle; i++) {
		if (rd(km, idle_slots[i], &t, 8) || !(lo = stack_of(km, o, le64toh(t)))) {
			(*bad)++;
			continue;
		}
		out[k++] = (struct kstack){ .lo = lo, .tgid = 0, .kthread = 1 };
	}
	for (size_t i = 0; i < n; i++) {
		if (!(lo = stack_of(km, o, tasks[i].task))) {
			(*bad)++;
			continue;
		}
		out[k++] = (struct kstack){ .lo = lo, .tgid = tasks[i].tgid,
					    .kthread = !tasks[i].mm };
	}
	qsort(out, k, sizeof(*out), cmp_stack);
	return k;
}

const struct kstack *ktasks_stack_find(const struct kstack *stacks, size_t n, uint64_t sp)
{
	/* the last stack starting at or below sp */
	size_t lo = SORT_UPPER(stacks, n, lo, sp);

	if (!lo || sp - stacks[lo - 1].lo >= KTASKS_THREAD_SIZE)
		return NULL;
	return &stacks[lo - 1];
}
