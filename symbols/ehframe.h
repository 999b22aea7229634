/* SPDX-License-Identifier: MIT */
/*
 * The functions an ELF file's .eh_frame describes: each FDE's
 * [initial_location, initial_location + address_range), at link-time
 * addresses.  A stripped binary keeps its .eh_frame (the C++ runtime and
 * every unwinder need it), so its code can still be split by function
 * where no symbol names it (symbols/elfimage.c, elfimage_frame_symbols()).
 *
 * The section is walked entry by entry with elfutils' dwarf_next_cfi(),
 * which works for static executables too (they have no .eh_frame_hdr
 * table to search).  The section is guest data: every entry, encoding and
 * pointer is checked, an entry that does not decode is refused and
 * counted, and the walk stops at a cap of entries.
 */
#ifndef OPVM_EHFRAME_H
#define OPVM_EHFRAME_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

/* Entries looked at (CIEs, FDEs, refused) at most a walk, whatever the
 * section's size: a hostile section of 4-byte entries stays bounded. */
#define EHFRAME_MAX_ENTRIES	(1u << 21)

struct ehframe_range {
	uint64_t start, end;	/* end > start */
};

struct ehframe_stats {
	size_t entries;		/* CIEs and FDEs looked at */
	size_t fdes;		/* FDEs whose range decoded */
	size_t refused;		/* entries that did not decode */
	int cut;		/* 1: stopped at max FDEs or EHFRAME_MAX_ENTRIES */
};

/* The ranges of at most max FDEs of elf's .eh_frame, in section order,
 * into *out (malloc'd, the caller frees; NULL when *nr is 0).  st (may be
 * NULL) receives the counts.  A file without .eh_frame gives none.
 * Returns 0 or -ENOMEM. */
int ehframe_ranges(Elf *elf, size_t max, struct ehframe_range **out, size_t *nr,
		   struct ehframe_stats *st);

#endif /* OPVM_EHFRAME_H */
