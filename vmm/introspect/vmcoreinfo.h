/* SPDX-License-Identifier: MIT */
/*
 * VMCOREINFO: the "KEY=VALUE" lines a Linux kernel built with CRASH_CORE
 * keeps in one page of its memory for crash-dump tools (its release, the
 * KASLR offset, phys_base, and the addresses of chosen symbols: the page
 * tables' root, the kallsyms tables since 6.0).  Found here by scanning
 * guest RAM for a page that starts with "OSRELEASE=", and parsed.
 *
 * The page is guest memory and hostile: parsing is bounded by the page,
 * every value is checked for form only; what the values point at is
 * checked by whoever follows them.
 */
#ifndef OPVM_VMCOREINFO_H
#define OPVM_VMCOREINFO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/x86.h"

struct guestmem;

#define VMCOREINFO_BYTES	OPVM_PAGE_SIZE	/* the kernel keeps one page */

struct vmcoreinfo {
	char release[65 + 1];		/* OSRELEASE, sanitised */
	uint64_t kernel_offset;		/* KERNELOFFSET: the KASLR slide */
	uint64_t phys_base;		/* NUMBER(phys_base) */
	uint64_t swapper_pg_dir;	/* SYMBOL(swapper_pg_dir) or init_top_pgt */
	uint64_t stext;			/* SYMBOL(_stext) */
	unsigned l5;			/* NUMBER(pgtable_l5_enabled) */
	/* the kallsyms tables (SYMBOL(kallsyms_*), Linux 6.0 and later);
	 * 0: not listed */
	uint64_t ks_names, ks_num_syms, ks_token_table, ks_token_index;
	uint64_t ks_offsets, ks_relative_base, ks_addresses;
	unsigned have;			/* VMCI_* bits of what was found */
	/* BUILD-ID (Linux 5.14 on): vmlinux's GNU build-id, 0 bytes when
	 * not listed or not hex */
	uint8_t build_id[20];
	size_t build_id_len;
};
#define VMCI_RELEASE	0x1
#define VMCI_OFFSET	0x2
#define VMCI_PHYS_BASE	0x4
#define VMCI_PGD	0x8
#define VMCI_KALLSYMS	0x10		/* names, num_syms, token table/index,
					 * and offsets + relative_base or
					 * addresses */

/* Parses len bytes of VMCOREINFO text (at most VMCOREINFO_BYTES are
 * looked at; a NUL ends it).  Unknown keys and malformed lines are
 * skipped.  Returns 0, or -ENOENT when no key this needs was found. */
int vmcoreinfo_parse(const char *text, size_t len, struct vmcoreinfo *out);

/*
 * Scans guest RAM for the VMCOREINFO page from *cursor (a guest-physical
 * address; 0 starts over), at most budget bytes this call.  Returns 1 with
 * *out parsed (VMCI_RELEASE, VMCI_PHYS_BASE and VMCI_PGD at least) and
 * *gpa its page, 0 when the budget ran out (*cursor says where to go on)
 * or -ENOENT when the whole of RAM was scanned without one (*cursor back
 * to 0).  *scanned grows by the bytes read.
 */
int vmcoreinfo_find(struct guestmem *m, uint64_t *cursor, uint64_t budget,
		    struct vmcoreinfo *out, uint64_t *gpa, uint64_t *scanned);

#endif /* OPVM_VMCOREINFO_H */
