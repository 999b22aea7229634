/* SPDX-License-Identifier: MIT */
/*
 * Kernel text symbols from System.map or /proc/kallsyms text
 * ("ADDRESS TYPE NAME [MODULE]" lines), sorted for lookup by address, and
 * the KASLR slide between a map and a running kernel.
 *
 * The text may come from a guest: lines are bounded, malformed lines are
 * skipped and counted, never trusted.
 */
#ifndef OPVM_KSYMS_H
#define OPVM_KSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/elfimage.h"

struct ksyms;

/* Reads a System.map or kallsyms file.  Returns NULL, sets errno and writes
 * a reason to err on failure (EINVAL: no text symbols found; EPERM: every
 * address is zero, as an unprivileged read of /proc/kallsyms gives). */
struct ksyms *ksyms_open(const char *path, char *err, size_t errlen);
/* One module's symbols from a kallsyms file: the lines "ADDR TYPE NAME
 * [MODULE]" of module ('-' and '_' alike) with ADDR in [base, base + size),
 * addresses made base-relative (a module's sample offsets).  Errors as
 * ksyms_open(). */
struct ksyms *ksyms_open_module(const char *path, const char *module, uint64_t base,
				uint64_t size, char *err, size_t errlen);
/* Same, from len bytes of text. */
struct ksyms *ksyms_parse(const char *text, size_t len, char *err, size_t errlen);
void ksyms_free(struct ksyms *ks);	/* NULL-safe */

size_t ksyms_nr(const struct ksyms *ks);
const struct elfsym *ksyms_sym(const struct ksyms *ks, size_t i);
/* Index of the text symbol containing addr (a link-time address), or -1. */
long ksyms_lookup(const struct ksyms *ks, uint64_t addr);
/* Address of any symbol called name (text or not).  0 or -ENOENT. */
int ksyms_addr(const struct ksyms *ks, const char *name, uint64_t *addr);
/* Lines that did not parse. */
size_t ksyms_bad_lines(const struct ksyms *ks);

/*
 * KASLR slide = run-time address - link-time address.  text_addr is the
 * guest's run-time _text (0 if unknown); otherwise anchor_name/anchor_addr
 * name another symbol's run-time address.  lookup(name) gives the link-time
 * address of a symbol in the map or vmlinux.  Returns 0 and the slide, or
 * -ENOENT when neither reference is known to both sides.
 */
int ksyms_slide(uint64_t text_addr, const char *anchor_name, uint64_t anchor_addr,
		int (*lookup)(const void *src, const char *name, uint64_t *addr),
		const void *src, uint64_t *slide);

#endif /* OPVM_KSYMS_H */
