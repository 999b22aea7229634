/* SPDX-License-Identifier: MIT */
/*
 * Guest kernel stacks by the kernel's own ORC tables (unwind/orc.c).  The
 * x86-64 Linux kernel is built without frame pointers; objtool leaves, for
 * every code address, how to find the caller's stack pointer and frame
 * pointer (an "ORC entry"), in two sorted tables the kernel keeps in memory:
 * __start_orc_unwind_ip (32-bit offsets, each relative to its own slot)
 * and __start_orc_unwind (6-byte entries).  opvm reads them once from guest
 * memory (their run-time addresses: System.map plus the KASLR slide) and
 * walks each kernel sample's stack with them, up to the pt_regs the entry
 * code saved, whose user registers continue into the interrupted task's
 * user stack.  The layout of an entry changed twice (orc_types.h):
 *   version 1: Linux up to 6.2; 2: 6.3; 3: from 6.4.
 */
#ifndef OPVM_UNWIND_ORC_H
#define OPVM_UNWIND_ORC_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

#define UNWIND_ORC_MAX_ENTRIES	(4u << 20)	/* a 6.x kernel has ~400 k */

struct unwind_orc;

/* The entry format of a kernel by its release ("6.1.0-56-amd64"): 1, 2
 * or 3; 0 if the release does not parse. */
unsigned unwind_orc_version(const char *release);

/* Reads the tables from [ip_start, ip_stop) (the offsets) and orc_start
 * (the entries), run-time addresses, through m; checks their sizes and
 * that the addresses they name are sorted.  NULL + errno, err says why. */
struct unwind_orc *unwind_orc_load(const struct unwind_mem *m, uint64_t ip_start,
				   uint64_t ip_stop, uint64_t orc_start, unsigned version,
				   char *err, size_t errlen);
void unwind_orc_free(struct unwind_orc *o);	/* NULL-safe */
size_t unwind_orc_nr(const struct unwind_orc *o);

/* An entry as the unwinder uses it, whatever the version. */
enum orc_reg { ORC_REG_UNDEF = 0, ORC_REG_PREV_SP = 1, ORC_REG_DX = 2, ORC_REG_DI = 3,
	       ORC_REG_BP = 4, ORC_REG_SP = 5, ORC_REG_R10 = 6, ORC_REG_R13 = 7,
	       ORC_REG_BP_IND = 8, ORC_REG_SP_IND = 9 };
enum orc_type { ORC_UNDEFINED = 0, ORC_END_OF_STACK = 1, ORC_CALL = 2, ORC_REGS = 3,
		ORC_REGS_PARTIAL = 4 };
struct orc_entry {
	int16_t sp_offset, bp_offset;
	uint8_t sp_reg, bp_reg;		/* enum orc_reg */
	uint8_t type;			/* enum orc_type */
};
/* The entry that covers ip: 0, or -ENOENT (outside the tables). */
int unwind_orc_find(const struct unwind_orc *o, uint64_t ip, struct orc_entry *out);

/*
 * Walks a kernel stack from r (cpl 0: ip, sp, bp): pcs[0] = r->ip, then
 * each caller.  At the entry code's saved pt_regs of a user task it stops
 * with UNWIND_END and, if user is not NULL, fills *user with the user
 * registers (ip, sp, bp, cpl 3) to go on with unwind_fp().  Bounded like
 * unwind_fp(): depth, reads, a stack pointer that must move up.
 */
unsigned unwind_orc(const struct unwind_orc *o, const struct unwind_mem *m,
		    const struct unwind_regs *r, uint64_t *pcs, unsigned max,
		    struct unwind_regs *user, enum unwind_stop *why);

#endif /* OPVM_UNWIND_ORC_H */
