// SPDX-License-Identifier: MIT
/*
 * Task timeline (vmm/guest/timeline.h): a bounded host-side mirror of opvm.ko's
 * per-vCPU task-switch rings, read from the running guest, and the lookup
 * "which task ran on vCPU v at guest TSC t".
 *
 * Reading a ring without stopping the guest (protocol: opvm_proto.h):
 *  1. read head;
 *  2. copy the entries [next, head) (A), then copy them again (B);
 *  3. accept entry n only if A.seq == B.seq == 2n + 2.
 * Why two copies are enough, whatever order pread copies bytes in: head is
 * written after entry n is complete, and we read head first, so every byte
 * of A is entry n's or a later overwrite's.  An overwrite stores seq = 2m + 1
 * (m > n) before touching any field, so if A's fields changed, B's seq is no
 * longer 2n + 2.  Rejected entries are counted (overrun: already rewritten;
 * torn: changed during the copy), never guessed.
 *
 * Final horizon: after a refresh, lookups up to now_tsc are answered for a
 * vCPU only if no switch had begun at index head when we looked (the
 * writer stores seq = 2n + 1 before it reads the TSC, so a switch stamped
 * before now_tsc shows in seq by the time we look).  Otherwise the horizon
 * stays where it was and the next refresh moves it.
 *
 * Everything in the rings is guest-written, hence hostile: head may jump or
 * go back, seq and tsc may be anything.  The work and memory per refresh are
 * bounded by the ring geometry checked in timeline_new() and by the mirror
 * cap; a TSC or head going backwards restarts that vCPU's mirror.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "vmm/guest/guestmem.h"
#include "vmm/guest/timeline.h"

#define MIRROR_MAX	4096u	/* switches kept per vCPU, whatever the ring size */
#define CHUNK		256u	/* entries per pair of copies */

struct mirror_ent {
	uint64_t n;		/* the ring index it came from */
	struct timeline_task t;
};

struct tl_vcpu {
	uint64_t next;		/* next ring index to read */
	bool started;		/* next has been set from a first head */
	bool have_horizon;
	uint64_t horizon;	/* lookups up to this TSC are final */
	struct mirror_ent *mir;	/* circular, mirror_cap entries */
	uint32_t first, count;
};

struct timeline {
	uint32_t nr, entries, stride, mirror_cap;
	uint64_t pa;
	struct tl_vcpu *v;
	struct opvm_switch a[CHUNK], b[CHUNK];
	struct timeline_stats st;
};

int timeline_check_geometry(uint32_t nr_vcpus, uint64_t switch_pa,
			    uint32_t stride, uint32_t entries)
{
	uint64_t need, bytes, end;

	if (!nr_vcpus || nr_vcpus > OPVM_SWITCH_MAX_CPUS)
		return -EINVAL;
	if (entries < 2 || entries > OPVM_SWITCH_MAX_ENTRIES ||
	    (entries & (entries - 1)))
		return -EINVAL;
	need = sizeof(struct opvm_switch_ring_hdr) +
	       (uint64_t)entries * sizeof(struct opvm_switch);
	if (stride < need || stride % 8 || switch_pa % 8)
		return -EINVAL;
	bytes = (uint64_t)nr_vcpus * stride;
	if (__builtin_add_overflow(switch_pa, bytes, &end))
		return -EINVAL;
	return 0;
}

struct timeline *timeline_new(uint32_t nr_vcpus, uint64_t switch_pa,
			      uint32_t stride, uint32_t entries)
{
	struct timeline *t;
	int rc = timeline_check_geometry(nr_vcpus, switch_pa, stride, entries);

	if (rc) {
		errno = -rc;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->nr = nr_vcpus;
	t->pa = switch_pa;
	t->stride = stride;
	t->entries = entries;
	t->mirror_cap = MIRROR_MAX;
	t->v = calloc(nr_vcpus, sizeof(*t->v));
	if (!t->v)
		goto fail;
	for (uint32_t i = 0; i < nr_vcpus; i++) {
		t->v[i].mir = calloc(t->mirror_cap, sizeof(struct mirror_ent));
		if (!t->v[i].mir)
			goto fail;
	}
	return t;
fail:
	timeline_free(t);
	errno = ENOMEM;
	return NULL;
}

void timeline_free(struct timeline *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; t->v && i < t->nr; i++)
		free(t->v[i].mir);
	free(t->v);
	free(t);
}

static struct mirror_ent *mir_at(const struct timeline *t,
				 const struct tl_vcpu *v, uint32_t i)
{
	return &v->mir[(v->first + i) % t->mirror_cap];
}

static void mir_push(struct timeline *t, struct tl_vcpu *v, uint64_t n,
		     const struct opvm_switch *e)
{
	struct mirror_ent *m;

	if (v->count && mir_at(t, v, v->count - 1)->t.tsc > e->tsc) {
		/* Time went backwards on one CPU: not this ring's past. */
		t->st.resets++;
		v->count = 0;
	}
	if (v->count == t->mirror_cap) {
		v->first = (v->first + 1) % t->mirror_cap;
		v->count--;
	}
	m = mir_at(t, v, v->count++);
	m->n = n;
	m->t.tsc = e->tsc;
	m->t.pid = e->pid;
	m->t.tgid = e->tgid;
	m->t.cr3 = e->cr3;
	m->t.flags = e->flags;
}

/* Copies entries [n, n + cnt) (cnt <= CHUNK, no wrap) twice and keeps
 * those that were complete and stable.  Returns 0 or -errno. */
static int read_chunk(struct timeline *t, struct tl_vcpu *v,
		      struct guestmem *m, uint64_t ring, uint64_t n,
		      uint32_t cnt)
{
	uint64_t at = ring + sizeof(struct opvm_switch_ring_hdr) +
		      (n & (t->entries - 1)) * sizeof(struct opvm_switch);
	size_t bytes = cnt * sizeof(struct opvm_switch);
	int rc;

	rc = guestmem_read(m, at, t->a, bytes);
	if (!rc)
		rc = guestmem_read(m, at, t->b, bytes);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < cnt; i++, n++) {
		uint64_t want = 2 * n + 2;

		if (t->a[i].seq == want && t->b[i].seq == want) {
			mir_push(t, v, n, &t->a[i]);
			t->st.switches++;
		} else if (t->a[i].seq > want) {
			t->st.overrun++;
		} else {
			t->st.torn++;
		}
	}
	return 0;
}

/* Where to start reading a ring whose head is now head. */
static void vcpu_catch_up(struct timeline *t, struct tl_vcpu *v, uint64_t head)
{
	uint64_t oldest = head > t->entries ? head - t->entries : 0;

	if (!v->started || head < v->next) {
		/* First look, or the guest restarted its rings (reboot,
		 * module reload): what is in the ring now is all there is. */
		if (v->started) {
			t->st.resets++;
			v->count = 0;
			v->have_horizon = false;
		}
		v->started = true;
		v->next = oldest;
	} else if (v->next < oldest) {
		t->st.overrun += oldest - v->next;
		v->next = oldest;
	}
}

/* One vCPU's ring: new entries, then the horizon.  Returns 0 or -errno. */
static int refresh_vcpu(struct timeline *t, uint32_t idx, struct guestmem *m,
			uint64_t now_tsc)
{
	struct tl_vcpu *v = &t->v[idx];
	uint64_t ring = t->pa + (uint64_t)idx * t->stride, head, seq;
	int rc;

	rc = guestmem_read(m, ring, &head, sizeof(head));
	if (rc)
		return rc;
	vcpu_catch_up(t, v, head);
	while (v->next < head) {
		uint64_t left = head - v->next;
		uint64_t to_wrap = t->entries - (v->next & (t->entries - 1));
		uint32_t cnt = (uint32_t)(left < CHUNK ? left : CHUNK);

		if (cnt > to_wrap)
			cnt = (uint32_t)to_wrap;
		rc = read_chunk(t, v, m, ring, v->next, cnt);
		if (rc)
			return rc;
		v->next += cnt;
	}
	/* Has switch number head begun since we read head? */
	rc = guestmem_read(m, ring + sizeof(struct opvm_switch_ring_hdr) +
			   (head & (t->entries - 1)) * sizeof(struct opvm_switch),
			   &seq, sizeof(seq));
	if (rc)
		return rc;
	if (seq < 2 * head + 1 && (!v->have_horizon || now_tsc > v->horizon)) {
		v->horizon = now_tsc;
		v->have_horizon = true;
	}
	return 0;
}

int timeline_refresh(struct timeline *t, struct guestmem *m, uint64_t now_tsc)
{
	int first_err = 0;

	t->st.refreshes++;
	for (uint32_t i = 0; i < t->nr; i++) {
		int rc = refresh_vcpu(t, i, m, now_tsc);

		if (rc) {
			t->st.read_errors++;
			if (!first_err)
				first_err = rc;
		}
	}
	return first_err;
}

int timeline_lookup(struct timeline *t, uint32_t vcpu, uint64_t tsc,
		    struct timeline_task *out)
{
	struct tl_vcpu *v;
	const struct mirror_ent *e;
	uint32_t lo = 0, hi;

	if (vcpu >= t->nr)
		return -EINVAL;
	v = &t->v[vcpu];
	if (!v->have_horizon || tsc > v->horizon) {
		t->st.after_last++;
		return -EAGAIN;
	}
	/* The last entry that began at or before tsc. */
	hi = v->count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (mir_at(t, v, mid)->t.tsc <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		t->st.before_first++;
		return -ENOENT;
	}
	e = mir_at(t, v, lo - 1);
	/* Its interval ends at entry n + 1: if that one was lost (overrun,
	 * torn), the task at tsc is unknown. */
	if (e->n + 1 != (lo < v->count ? mir_at(t, v, lo)->n : v->next)) {
		t->st.unknown++;
		return -ENOENT;
	}
	*out = e->t;
	return 0;
}

void timeline_get_stats(const struct timeline *t, struct timeline_stats *out)
{
	*out = t->st;
}
