/* SPDX-License-Identifier: MIT */
/*
 * The kernel's own symbol table (kallsyms), decoded from guest memory.
 *
 * Layout (kernel/kallsyms.c, scripts/kallsyms.c): kallsyms_num_syms (u32)
 * symbols; kallsyms_names, per symbol a length (one byte, or two when the
 * first has bit 7 set: Linux 6.1 and later) and that many token bytes;
 * kallsyms_token_index[256] (u16) into kallsyms_token_table, whose
 * NUL-terminated strings each token byte stands for; the first character
 * of the expanded name is the symbol's type letter.  Addresses are in
 * kallsyms_addresses (u64, before 4.6 or without BASE_RELATIVE) or in
 * kallsyms_offsets (s32) from kallsyms_relative_base, where under
 * KALLSYMS_ABSOLUTE_PERCPU (x86-64) a non-negative offset is absolute and
 * a negative one counts down from relative_base - 1.  Names are in address
 * order before and after 6.2's kallsyms_seqs_of_names, which is not read.
 *
 * The memory is hostile: counts are capped, every read is bounded by
 * KALLSYMS_READ_MAX, a name that does not fit or expands to more than
 * KALLSYMS_NAME_MAX bytes is refused and counted, and a read that fails
 * ends the walk with what was decoded so far.
 */
#ifndef OPVM_KALLSYMS_H
#define OPVM_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

#define KALLSYMS_MAX_SYMS	(1u << 21)	/* Debian 12's: ~150000 */
#define KALLSYMS_NAME_MAX	511		/* KSYM_NAME_LEN - 1 (6.1: 512) */
#define KALLSYMS_READ_MAX	((uint64_t)64 << 20)	/* names + offsets */

/* Guest-virtual addresses of the tables (VMCOREINFO's SYMBOL() lines). */
struct kallsyms_addrs {
	uint64_t names, num_syms, token_table, token_index;
	uint64_t offsets, relative_base;	/* or: */
	uint64_t addresses;
	/* _stext's run-time address (VMCOREINFO's SYMBOL(_stext)): with
	 * offsets and no relative_base (kernels after 6.15 dropped it) the
	 * offsets count from _text, found as this less _stext's offset */
	uint64_t stext;
};

struct kallsyms_result {
	uint32_t nr_syms;		/* what kallsyms_num_syms said */
	uint32_t decoded;		/* names decoded and passed to fn */
	uint32_t bad;			/* refused: name too long, bad token */
	uint32_t unsorted;		/* addresses that went backwards */
	uint64_t bytes_read;		/* guest bytes read */
	uint64_t relative_base;		/* as read (0 with addresses[]) */
};

/* Called per symbol: addr its run-time address, type its kallsyms letter,
 * name[len] not terminated (len >= 1).  Nonzero stops the walk. */
typedef int (*kallsyms_fn)(void *arg, uint64_t addr, char type, const char *name,
			   size_t len);

/*
 * Decodes the table at a through mem.  Returns 0 (res filled; a walk cut
 * short by a failed read returns 0 too, with decoded < nr_syms), or
 * -EINVAL (a count or index out of bounds), -EFAULT (the header tables
 * could not be read), -ENOMEM; err says which.
 */
int kallsyms_decode(const struct unwind_mem *mem, const struct kallsyms_addrs *a,
		    kallsyms_fn fn, void *arg, struct kallsyms_result *res,
		    char *err, size_t errlen);

/* At most this much of the kernel image is searched for the tables. */
#define KALLSYMS_FIND_MAX	((uint64_t)256 << 20)
/* and at most this many runs of digits are checked */
#define KALLSYMS_FIND_CANDIDATES	256u

struct kallsyms_find_result {
	uint64_t scanned;		/* bytes of the image searched */
	uint64_t bytes_read;		/* by the checks of each candidate */
	uint32_t candidates;		/* digit runs that were checked */
};

/*
 * Finds the tables by their shape in the kernel image from start (its
 * _text or _stext), reading at most max bytes (KALLSYMS_FIND_MAX), for a
 * kernel whose VMCOREINFO does not list them (kallsyms-find.c says how).
 * Returns 0 with a filled (relative_base 0 when none was found after
 * 6.4's offsets: they then count from _text), -ENOENT (err says what to
 * do), or -ENOMEM.
 */
int kallsyms_find(const struct unwind_mem *mem, uint64_t start, uint64_t max,
		  struct kallsyms_addrs *a, struct kallsyms_find_result *res,
		  char *err, size_t errlen);

#endif /* OPVM_KALLSYMS_H */
