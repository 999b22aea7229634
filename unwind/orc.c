// SPDX-License-Identifier: MIT
/*
 * Kernel stacks by the guest kernel's ORC tables (unwind/orc.h).  The
 * format is the kernel's (arch/x86/include/asm/orc_types.h); the walk is
 * the one its unwinder makes (arch/x86/kernel/unwind_orc.c), from outside:
 * only the registers a stopped vCPU shows (ip, sp, bp) and memory reads
 * that may fail.  Every table comes from the guest: sizes are capped, the
 * addresses must be sorted, and every walk is bounded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "lib/x86.h"
#include "lib/sort.h"
#include "unwind/orc.h"

#define ORC_ENTRY_SIZE	6
#define LOAD_CHUNK	65536

/* pt_regs (x86-64): the words the walk needs */
#define PT_BP		4
#define PT_IP		16
#define PT_CS		17
#define PT_SP		19
#define PT_WORDS	21

struct unwind_orc {
	uint64_t *ip;		/* sorted addresses */
	uint8_t *orc;		/* their entries, ORC_ENTRY_SIZE bytes each */
	size_t nr;
	unsigned version;
};

unsigned unwind_orc_version(const char *release)
{
	unsigned major, minor;

	if (!release || sscanf(release, "%u.%u", &major, &minor) != 2)
		return 0;
	if (major < 6 || (major == 6 && minor < 3))
		return 1;
	return major == 6 && minor == 3 ? 2 : 3;
}

/* Reads len bytes at gva in chunks the reader's budget allows. */
static int read_big(const struct unwind_mem *m, uint64_t gva, void *buf, size_t len)
{
	for (size_t off = 0; off < len; off += LOAD_CHUNK) {
		size_t n = len - off < LOAD_CHUNK ? len - off : LOAD_CHUNK;

		if (m->read(m->arg, gva + off, (char *)buf + off, n))
			return -EFAULT;
	}
	return 0;
}

struct unwind_orc *unwind_orc_load(const struct unwind_mem *m, uint64_t ip_start,
				   uint64_t ip_stop, uint64_t orc_start, unsigned version,
				   char *err, size_t errlen)
{
	struct unwind_orc *o;
	int32_t *rel = NULL;
	size_t nr;

	if (version < 1 || version > 3 || ip_stop <= ip_start || (ip_stop - ip_start) % 4 ||
	    (ip_stop - ip_start) / 4 > UNWIND_ORC_MAX_ENTRIES) {
		errbuf_set(err, errlen, "ORC table bounds 0x%llx-0x%llx (format %u) are not "
			    "a kernel's", (unsigned long long)ip_start,
			    (unsigned long long)ip_stop, version);
		errno = EINVAL;
		return NULL;
	}
	nr = (size_t)(ip_stop - ip_start) / 4;
	o = calloc(1, sizeof(*o));
	rel = malloc(nr * sizeof(*rel));
	if (o) {
		o->ip = malloc(nr * sizeof(*o->ip));
		o->orc = malloc(nr * ORC_ENTRY_SIZE);
	}
	if (!o || !rel || !o->ip || !o->orc) {
		errbuf_set(err, errlen, "out of memory for %zu ORC entries", nr);
		goto fail_errno;
	}
	if (read_big(m, ip_start, rel, nr * sizeof(*rel)) ||
	    read_big(m, orc_start, o->orc, nr * ORC_ENTRY_SIZE)) {
		errbuf_set(err, errlen, "cannot read the ORC tables at 0x%llx and 0x%llx",
			    (unsigned long long)ip_start, (unsigned long long)orc_start);
		errno = EFAULT;
		goto fail;
	}
	for (size_t i = 0; i < nr; i++) {
		/* each offset is relative to its own slot */
		o->ip[i] = ip_start + 4 * i + (uint64_t)(int64_t)rel[i];
		if (i && o->ip[i] < o->ip[i - 1]) {
			errbuf_set(err, errlen, "ORC table not sorted at entry %zu", i);
			errno = EPROTO;
			goto fail;
		}
	}
	free(rel);
	o->nr = nr;
	o->version = version;
	return o;
fail_errno:
	errno = ENOMEM;
fail:
	free(rel);
	unwind_orc_free(o);
	return NULL;
}

void unwind_orc_free(struct unwind_orc *o)
{
	if (!o)
		return;
	free(o->ip);
	free(o->orc);
	free(o);
}

size_t unwind_orc_nr(const struct unwind_orc *o)
{
	return o->nr;
}

/* Entry i in the version-independent form. */
static void decode(const struct unwind_orc *o, size_t i, struct orc_entry *e)
{
	const uint8_t *b = o->orc + i * ORC_ENTRY_SIZE;
	uint16_t flags = (uint16_t)(b[4] | b[5] << 8);
	unsigned t, end;

	e->sp_offset = (int16_t)(b[0] | b[1] << 8);
	e->bp_offset = (int16_t)(b[2] | b[3] << 8);
	e->sp_reg = flags & 0xf;
	e->bp_reg = (flags >> 4) & 0xf;
	if (o->version == 3) {
		e->type = (flags >> 8) & 7;
		return;
	}
	/* 1 and 2: type:2 (call, regs, regs-partial), then end (bit 10 in 1,
	 * bit 11 in 2, after the signal bit) */
	t = (flags >> 8) & 3;
	end = o->version == 1 ? (flags >> 10) & 1 : (flags >> 11) & 1;
	if (end)
		e->type = ORC_END_OF_STACK;
	else if (e->sp_reg == ORC_REG_UNDEF)
		e->type = ORC_UNDEFINED;
	else
		e->type = t == 0 ? ORC_CALL : t == 1 ? ORC_REGS : ORC_REGS_PARTIAL;
}

int unwind_orc_find(const struct unwind_orc *o, uint64_t ip, struct orc_entry *out)
{
	/* the last entry at or below ip */
	size_t i = sort_bound_u64(o->ip, o->nr, sizeof(*o->ip), 0, ip, 1);

	if (!i)
		return -ENOENT;
	decode(o, i - 1, out);
	return 0;
}

static int rd(const struct unwind_mem *m, uint64_t gva, uint64_t *v)
{
	return m->read(m->arg, gva, v, sizeof(*v));
}

/* The caller's stack pointer by e.sp_reg, or -EINVAL / -EFAULT. */
static int prev_sp(const struct unwind_mem *m, const struct orc_entry *e, uint64_t sp,
		   uint64_t bp, uint64_t *out)
{
	uint64_t v;

	switch (e->sp_reg) {
	case ORC_REG_SP:
		*out = sp + (uint64_t)(int64_t)e->sp_offset;
		return 0;
	case ORC_REG_BP:
		*out = bp + (uint64_t)(int64_t)e->sp_offset;
		return 0;
	case ORC_REG_SP_IND:
		if (rd(m, sp, &v))
			return -EFAULT;
		*out = v + (uint64_t)(int64_t)e->sp_offset;
		return 0;
	case ORC_REG_BP_IND:
		return rd(m, bp + (uint64_t)(int64_t)e->sp_offset, out) ? -EFAULT : 0;
	default:
		return -EINVAL;	/* dx, di, r10, r13: registers a stop does not show */
	}
}

/* The caller's frame pointer by e.bp_reg (bp unchanged if undefined). */
static int prev_bp(const struct unwind_mem *m, const struct orc_entry *e, uint64_t psp,
		   uint64_t *bp)
{
	switch (e->bp_reg) {
	case ORC_REG_UNDEF:
		return 0;
	case ORC_REG_PREV_SP:
		return rd(m, psp + (uint64_t)(int64_t)e->bp_offset, bp) ? -EFAULT : 0;
	case ORC_REG_BP:
		return rd(m, *bp + (uint64_t)(int64_t)e->bp_offset, bp) ? -EFAULT : 0;
	default:
		return -EINVAL;
	}
}

/* One frame up from (*ip, *sp, *bp) by e.  0 to go on, 1 at a user task's
 * saved registers (*user filled), or an enum unwind_stop as -value. */
static int step(const struct unwind_mem *m, const struct orc_entry *e, uint64_t *ip,
		uint64_t *sp, uint64_t *bp, struct unwind_regs *user)
{
	uint64_t psp, w[PT_WORDS];
	int r = prev_sp(m, e, *sp, *bp, &psp);

	if (r)
		return r == -EFAULT ? -UNWIND_UNREADABLE : -UNWIND_BAD_FRAME;
	if (e->type == ORC_CALL) {
		if (psp <= *sp || rd(m, psp - 8, ip))	/* up the stack only */
			return psp <= *sp ? -UNWIND_BAD_FRAME : -UNWIND_UNREADABLE;
		r = prev_bp(m, e, psp, bp);
		*sp = psp;
		return r ? -UNWIND_UNREADABLE : 0;
	}
	/* REGS: the whole pt_regs at psp; REGS_PARTIAL: its iret frame
	 * (ip, cs, flags, sp, ss) at psp */
	if (e->type == ORC_REGS) {
		if (m->read(m->arg, psp, w, sizeof(w)))
			return -UNWIND_UNREADABLE;
	} else {
		if (m->read(m->arg, psp, &w[PT_IP], 5 * sizeof(w[0])))
			return -UNWIND_UNREADABLE;
		w[PT_BP] = *bp;
		if (prev_bp(m, e, psp, &w[PT_BP]))
			return -UNWIND_UNREADABLE;
	}
	if ((w[PT_CS] & 3) == 3) {
		if (user)
			*user = (struct unwind_regs){ .ip = w[PT_IP], .sp = w[PT_SP],
						      .bp = w[PT_BP], .cpl = 3 };
		return 1;
	}
	*ip = w[PT_IP];
	*sp = w[PT_SP];
	*bp = w[PT_BP];
	return 0;
}

unsigned unwind_orc(const struct unwind_orc *o, const struct unwind_mem *m,
		    const struct unwind_regs *r, uint64_t *pcs, unsigned max,
		    struct unwind_regs *user, enum unwind_stop *why)
{
	enum unwind_stop stop = UNWIND_DEPTH;
	uint64_t ip = r->ip, sp = r->sp, bp = r->bp;
	int exact = 1;		/* ip is where the CPU was, not a return address */
	unsigned n = 0;

	if (max > UNWIND_MAX_DEPTH)
		max = UNWIND_MAX_DEPTH;
	while (n < max) {
		struct orc_entry e;
		int s;

		pcs[n++] = ip;
		/* a return address may be the first byte of the next function */
		if (ip < OPVM_KERNEL_HALF || unwind_orc_find(o, exact ? ip : ip - 1, &e) ||
		    e.type == ORC_UNDEFINED) {
			stop = UNWIND_BAD_FRAME;
			break;
		}
		if (e.type == ORC_END_OF_STACK) {
			stop = UNWIND_END;
			break;
		}
		s = step(m, &e, &ip, &sp, &bp, user);
		if (s) {
			stop = s > 0 ? UNWIND_END : (enum unwind_stop)-s;
			break;
		}
		exact = e.type != ORC_CALL;
	}
	if (why)
		*why = stop;
	return n;
}
