/* SPDX-License-Identifier: MIT */
/*
 * Guest stack unwinding from the host: the walkers see guest memory only
 * through struct unwind_mem, which a sampler backend implements over what
 * it can read (QEMU's RAM through vmm/guest/guestmem.c, the built-in VMM's own
 * mapping), translating through the sample's page tables.  The guest is
 * untrusted: every read is bounded and may fail, every chain is cut at a
 * depth, at a frame that does not move up the stack, and at an address
 * that cannot be a return address.
 *
 * Here: frame pointers (fp.c), the kernel's ORC tables (orc.h) and DWARF
 * CFI with libdwfl (dwarf-cfi.h).
 */
#ifndef OPVM_UNWIND_H
#define OPVM_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#define UNWIND_MAX_DEPTH	128	/* frames kept, innermost first */

/* Reads guest-virtual memory of the sampled address space. */
struct unwind_mem {
	/* len bytes at gva into buf: 0, or -EFAULT (not mapped, outside RAM,
	 * or over the caller's read budget) */
	int (*read)(void *arg, uint64_t gva, void *buf, size_t len);
	void *arg;
};

/* Registers at the sample; gpr[] in x86-64 DWARF order (rax, rdx, rcx,
 * rbx, rsi, rdi, rbp, rsp, r8..r15) for the DWARF unwinder. */
struct unwind_regs {
	uint64_t ip, sp, bp;
	uint64_t gpr[16];
	uint8_t cpl;			/* 0 kernel, 3 user */
};

/* Why a walk ended. */
enum unwind_stop {
	UNWIND_END = 0,		/* a null frame pointer: the outermost frame */
	UNWIND_DEPTH,		/* max frames taken */
	UNWIND_UNREADABLE,	/* a frame could not be read */
	UNWIND_BAD_FRAME,	/* a frame below the last, misaligned, out of
				 * the stack's reach, or a bad return address */
};

/*
 * Frame-pointer walk: pcs[0] = r->ip, then each frame's return address
 * (the saved rbp at [bp], the return address at [bp + 8]).  A frame must
 * lie above the previous one and within UNWIND_STACK_REACH of sp, 8-byte
 * aligned; a return address must be in the half of the address space the
 * sample's privilege level runs in.  Returns the number of pcs (1..max,
 * 0 when max is 0); *why (may be NULL) says why it stopped.
 */
#define UNWIND_STACK_REACH	(8u << 20)	/* 8 MiB: Linux's default stack */
unsigned unwind_fp(const struct unwind_mem *m, const struct unwind_regs *r,
		   uint64_t *pcs, unsigned max, enum unwind_stop *why);

#endif /* OPVM_UNWIND_H */
