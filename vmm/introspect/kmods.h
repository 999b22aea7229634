/* SPDX-License-Identifier: MIT */
/*
 * The guest kernel's loadable modules, read from its memory: the list at
 * the kernel's `modules` head (kallsyms, CONFIG_KALLSYMS_ALL), each
 * struct module's name and core text (offsets from the kernel's BTF,
 * vmm/introspect/kbtf.h), and its text symbols from its struct
 * mod_kallsyms (Elf64_Sym entries, their names in strtab, their kallsyms
 * letters in typetab).  What opvm.ko reports as MODULE records and its
 * "kmod" walk as KSYMS, for guests without it.
 *
 * The list is guest memory, read while the guest runs: every pointer is
 * checked to be a kernel address before it is followed, a cycle that does
 * not come back to the head is found (Brent's method) and ends the walk,
 * as do KMODS_MAX modules kept or twice that many list entries (counted).  A module whose name does not end
 * within its array, whose text is not in the module space or is larger
 * than KMODS_TEXT_MAX is refused (counted).  Symbols: at most
 * KMODS_SYMS_MAX entries and KMODS_STR_MAX bytes of names per module; a
 * text symbol outside the module's text is not passed on (counted), nor
 * is a name that does not read or end within OPVM_KSYM_NAME_MAX bytes.
 */
#ifndef OPVM_KMODS_H
#define OPVM_KMODS_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"
#include "vmm/introspect/introspect.h"
#include "vmm/introspect/kbtf.h"

#define KMODS_MAX	1024u			/* modules per walk */
#define KMODS_NAME_MAX	56u			/* MODULE_NAME_LEN */
#define KMODS_TEXT_MAX	((uint64_t)256 << 20)	/* one module's text */
#define KMODS_SYMS_MAX	(1u << 17)		/* symtab entries of a module */
#define KMODS_STR_MAX	((uint64_t)8 << 20)	/* name bytes of a module */



struct kmod {
	uint64_t mod;			/* its struct module */
	uint64_t base, size;		/* its core text */
	uint64_t kallsyms;		/* struct mod_kallsyms *; 0: none */
	char name[KMODS_NAME_MAX];	/* NUL-terminated, not empty */
};

/* Walks the list at head (the `modules` list_head) into out[0..max),
 * in list order; *n gets the count.  Returns 0 (a walk cut short is
 * still 0, with what it found), -EFAULT when the head does not read or
 * -EINVAL (max or the offsets out of range). */
int kmods_walk(const struct unwind_mem *mem, const struct kbtf_mod_offsets *o, uint64_t head,
	       struct kmod *out, size_t max, size_t *n, struct kmods_stats *st);

/* Called per text symbol of module m: addr its run-time address (inside
 * m's text), type its kallsyms letter, name[len] not terminated (1 <= len
 * <= OPVM_KSYM_NAME_MAX).  Nonzero stops the walk. */
typedef int (*kmods_sym_fn)(void *arg, const struct kmod *m, uint64_t addr, char type,
			    const char *name, size_t len);

/* Passes m's text symbols to fn.  Returns 0 (nothing to read is 0 too),
 * or -EFAULT when its mod_kallsyms does not read (counted). */
int kmods_syms(const struct unwind_mem *mem, const struct kbtf_mod_offsets *o,
	       const struct kmod *m, kmods_sym_fn fn, void *arg, struct kmods_stats *st);

#endif /* OPVM_KMODS_H */
