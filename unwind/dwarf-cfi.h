/* SPDX-License-Identifier: MIT */
/*
 * DWARF CFI unwinding of a guest user stack (unwind/dwarf-cfi.c), with elfutils
 * libdwfl: the stack is a bounded window the sampler copied from guest
 * memory at the sample (bytes from r->sp upward), the registers are the
 * sample's, and the call frame information comes from the guest's own ELF
 * files as the host sees them (.eh_frame, and .debug_frame if the file has
 * one), so a stack crosses code built without frame pointers (Debian's
 * libc).  Where a pc has no image or no CFI, libdwfl's x86-64 fallback
 * follows rbp for that frame.
 *
 * Everything about the stack is hostile: a read outside the window fails,
 * every frame must move up the stack (else the walk is cut), a user pc must
 * be below the canonical hole, depth is bounded by max.  The ELF files are
 * the host's copies (a guest root), opened read-only and checked (64-bit
 * x86-64, ET_EXEC or ET_DYN, its PT_LOADs) before libdwfl sees them; they
 * stay open and mapped while cached (up to UNWIND_DWARF_CACHE descriptors),
 * so a file must be replaced (rename), never truncated in place.
 *
 * A context is not thread-safe: one per collector thread.
 */
#ifndef OPVM_UNWIND_DWARF_H
#define OPVM_UNWIND_DWARF_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

#define UNWIND_DWARF_WINDOW	8192u	/* default stack window, bytes */
#define UNWIND_DWARF_MAX_WINDOW	(1u << 20)	/* larger windows are refused */
#define UNWIND_DWARF_CACHE	64	/* ELF files kept open, least recently used out */

/* The image a guest pc lies in, as find_image reports it. */
struct unwind_dwarf_image {
	const char *path;	/* host path of the ELF file; the caller's, valid
				 * until unwind_dwarf() returns; never built from
				 * guest bytes without sanitising */
	uint64_t start, end;	/* the guest mapping holding pc: [start, end) */
	uint64_t pgoff;		/* file offset mapped at start */
};

/* What the context refused or did, since it was made (for the summary). */
struct unwind_dwarf_stats {
	uint64_t unwinds;		/* unwind_dwarf() calls with max > 0 */
	uint64_t frames;		/* pcs returned, all calls */
	uint64_t no_image;		/* frames find_image had no file for */
	uint64_t bad_image;		/* files that did not open or check
					 * (each counted once while cached) */
	uint64_t window_misses;		/* reads outside the stack window */
	uint64_t cut;			/* walks cut: a frame not above the last,
					 * or a pc that cannot be user code */
	uint64_t restarts;		/* address-space switches (modules
					 * dropped, the walk redone) */
	uint64_t evictions;		/* files closed to keep the cache bounded */
};

struct unwind_dwarf;

/* NULL + errno (ENOMEM, or elfutils could not start). */
struct unwind_dwarf *unwind_dwarf_new(void);
void unwind_dwarf_free(struct unwind_dwarf *u);	/* NULL-safe; closes the files */

/*
 * Unwinds the user stack at r (ip, sp, bp, gpr[] in DWARF order; gpr[6]
 * and gpr[7] are taken from r->bp and r->sp): pcs[0] = r->ip, then each
 * caller's return address, innermost first.  stack holds len bytes copied
 * from guest-virtual r->sp upward (len <= UNWIND_DWARF_MAX_WINDOW, else
 * nothing is read).  find_image(arg, pc, &img) maps a guest pc to its
 * image: 0, or -ENOENT (no file-backed mapping, or none the host has a file
 * for: the vdso, JIT code); it is called for each frame (with pc - 1 for
 * return addresses, so a call at a function's end is looked up in its own
 * function).  Returns the number of pcs (1..max; 0 if max is 0); max is
 * capped at UNWIND_MAX_DEPTH.  *why (may be NULL):
 * UNWIND_END (the CFI says there is no caller, or pc 0), UNWIND_DEPTH,
 * UNWIND_UNREADABLE (a read outside the window), UNWIND_BAD_FRAME (no
 * rule to unwind by, or a frame cut).
 */
unsigned unwind_dwarf(struct unwind_dwarf *u, const struct unwind_regs *r,
		      const uint8_t *stack, size_t len,
		      int (*find_image)(void *arg, uint64_t pc,
					struct unwind_dwarf_image *out),
		      void *arg, uint64_t *pcs, unsigned max, enum unwind_stop *why);

void unwind_dwarf_get_stats(const struct unwind_dwarf *u, struct unwind_dwarf_stats *out);

#endif /* OPVM_UNWIND_DWARF_H */
