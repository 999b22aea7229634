// SPDX-License-Identifier: MIT
/*
 * A task pointer named from a cache (vmm/introspect/kcurrent.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/guest/guestmem.h"
#include "vmm/introspect/kcurrent.h"

#define KERNEL_HALF	0xffff800000000000ull

struct kcur_ent {
	uint64_t task;			/* 0: empty */
	uint64_t when_ns;		/* read then */
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

	if (va < KERNEL_HALF || va + len < va)
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

int kcurrent_task(struct kcurrent *k, uint64_t task, uint64_t now_ns, struct ktask_cur *out)
{
	/* task_structs are slab objects of several KiB: the bits above the
	 * cache line spread them */
	struct kcur_ent *e = &k->ent[((task >> 6) * 0x9e3779b97f4a7c15ull) >>
				 (64 - KCURRENT_CACHE_BITS)];
	struct ktasks_mem km = { .read = { kc_read, k }, .v2p = kc_v2p, .arg = k };
	int rc;

	if (e->task == task && task && now_ns - e->when_ns < k->max_age_ns) {
		k->st.hits++;
		*out = e->t;
		return 0;
	}
	k->st.misses++;
	rc = ktasks_task(&km, &k->off, task, out);
	if (rc) {
		k->st.bad++;
		return rc;
	}
	e->task = task;
	e->when_ns = now_ns;
	e->t = *out;
	return 0;
}

const struct kcurrent_stats *kcurrent_get_stats(const struct kcurrent *k)
{
	return &k->st;
}
