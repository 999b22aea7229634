// SPDX-License-Identifier: MIT
/*
 * A task pointer named from a cache (vmm/introspect/kcurrent.h).
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sample.h"
#include "lib/x86.h"
#include "vmm/guest/guestmem.h"
#include "vmm/introspect/kcurrent.h"


struct kcur_ent {
	uint64_t task;			/* 0: empty */
	uint64_t when_ns;		/* read then */
	uint64_t pid_pa;		/* pid, tgid: re-read at each hit; 0:
					 * not side by side, not checked */
	struct ktask_cur t;
};

struct kcurrent {
	struct guestmem *m;
	uint64_t pgd_gpa, max_age_ns;
	struct kbtf_offsets off;
	struct kcurrent_stats st;
	struct kcur_ent ent[KCURRENT_CACHE];
};

static int kc_read(void *arg, uint64_t va, void *buf, size_t len)
{
	struct kcurrent *k = arg;

	if (va < OPVM_KERNEL_HALF || va + len < va)
		return -EFAULT;
	return guestmem_read_virt(k->m, k->pgd_gpa, va, buf, len) ? -EFAULT : 0;
}

static int kc_v2p(void *arg, uint64_t va, uint64_t *pa)
{
	struct kcurrent *k = arg;

	return guestmem_virt_to_phys(k->m, k->pgd_gpa, va, pa);
}

struct kcurrent *kcurrent_new(struct guestmem *m, const struct kcurrent_info *ci,
			      uint64_t max_age_ns)
{
	struct kcurrent *k;

	if (!m || !ci) {
		errno = EINVAL;
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->m = m;
	k->pgd_gpa = ci->pgd_gpa;
	k->off = ci->off;
	k->max_age_ns = max_age_ns;
	return k;
}

void kcurrent_free(struct kcurrent *k)
{
	free(k);
}

/* The cached entry still names its task: a task_struct freed and taken
 * by another task (fork, exit: in the same second, often) has another pid
 * or tgid.  One read: the fields' physical addresses do not change while
 * the kernel runs (task_structs are in the direct map). */
static bool ent_valid(struct kcurrent *k, const struct kcur_ent *e, bool user)
{
	uint32_t v[2];

	if (user && e->t.kthread)
		return false;	/* it exec'd (init does) */
	if (!e->pid_pa)
		return true;
	if (guestmem_read(k->m, e->pid_pa, v, sizeof(v)))
		return false;
	return le32toh(v[0]) == e->t.tid && le32toh(v[1]) == e->t.tgid;
}

int kcurrent_task(struct kcurrent *k, uint64_t task, bool user, uint64_t now_ns,
		  struct ktask_cur *out)
{
	/* task_structs are slab objects of several KiB: the bits above the
	 * cache line spread them */
	struct kcur_ent *e = &k->ent[((task >> 6) * 0x9e3779b97f4a7c15ull) >>
				 (64 - KCURRENT_CACHE_BITS)];
	struct ktasks_mem km = { .read = { kc_read, k }, .v2p = kc_v2p, .arg = k };
	uint64_t pa;
	int rc;

	if (e->task == task && task && now_ns - e->when_ns < k->max_age_ns &&
	    ent_valid(k, e, user)) {
		k->st.hits++;
		*out = e->t;
		return 0;
	}
	k->st.misses++;
	e->task = 0;
	rc = ktasks_task(&km, &k->off, task, out);
	if (rc) {
		k->st.bad++;
		return rc;
	}
	e->task = task;
	e->when_ns = now_ns;
	e->t = *out;
	/* pid and tgid side by side in one page: checked at each hit */
	e->pid_pa = 0;
	if (k->off.task_tgid == k->off.task_pid + 4 &&
	    !guestmem_virt_to_phys(k->m, k->pgd_gpa, task + k->off.task_pid, &pa) &&
	    (pa & OPVM_PAGE_MASK) <= OPVM_PAGE_SIZE - 8)
		e->pid_pa = pa;
	return 0;
}

const struct kcurrent_stats *kcurrent_get_stats(const struct kcurrent *k)
{
	return &k->st;
}
