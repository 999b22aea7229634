// SPDX-License-Identifier: MIT
/*
 * Frame-pointer unwinding of a guest stack (unwind/unwind.h).  Code built
 * with -fno-omit-frame-pointer keeps the chain [rbp] = caller's rbp,
 * [rbp + 8] = return address; a guest may hand us any bytes instead, so the
 * walk only ever moves up the stack, stays within reach of the sample's
 * sp, and stops at the first frame that breaks a rule.
 */
#include <errno.h>

#include "lib/x86.h"
#include "unwind/unwind.h"


/* A return address the sample's privilege level could return to: user code
 * below the canonical hole, kernel code above it; never 0. */
static int plausible_pc(uint64_t pc, uint8_t cpl)
{
	if (!pc)
		return 0;
	return cpl == 3 ? pc < OPVM_USER_TOP : pc >= OPVM_KERNEL_HALF;
}

unsigned unwind_fp(const struct unwind_mem *m, const struct unwind_regs *r,
		   uint64_t *pcs, unsigned max, enum unwind_stop *why)
{
	enum unwind_stop stop = UNWIND_DEPTH;
	uint64_t bp = r->bp, lo = r->sp;
	unsigned n = 0;

	if (max > UNWIND_MAX_DEPTH)
		max = UNWIND_MAX_DEPTH;
	if (!max)
		goto out;
	pcs[n++] = r->ip;
	while (n < max) {
		uint64_t frame[2];

		if (!bp) {
			stop = UNWIND_END;
			break;
		}
		/* up the stack only, aligned, within reach of sp */
		if ((bp & 7) || bp < lo || bp - r->sp > UNWIND_STACK_REACH ||
		    bp > UINT64_MAX - sizeof(frame)) {
			stop = UNWIND_BAD_FRAME;
			break;
		}
		if (m->read(m->arg, bp, frame, sizeof(frame))) {
			stop = UNWIND_UNREADABLE;
			break;
		}
		if (!plausible_pc(frame[1], r->cpl)) {
			stop = frame[1] ? UNWIND_BAD_FRAME : UNWIND_END;
			break;
		}
		pcs[n++] = frame[1];
		/* the caller's frame must lie above this one: no loops */
		lo = bp + sizeof(frame);
		bp = frame[0];
	}
out:
	if (why)
		*why = stop;
	return n;
}
