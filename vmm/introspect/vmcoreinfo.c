// SPDX-License-Identifier: MIT
/*
 * VMCOREINFO (vmm/introspect/vmcoreinfo.h): finding the page in guest RAM
 * and reading its lines.
 *
 * Why scan: QEMU's vmcoreinfo device learns the note's address only from
 * the guest's fw_cfg driver, which a guest need not load, and QMP does not
 * hand it out.  The kernel allocates the text a page of its own
 * (crash_save_vmcoreinfo_init), so only page starts are looked at: the
 * format strings in the kernel image never start a page.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/guest/guestmem.h"
#include "lib/hex.h"
#include "vmm/introspect/vmcoreinfo.h"
#include "lib/array.h"

#define SCAN_CHUNK	(1u << 20)
#define MAGIC		"OSRELEASE="

/* Hex (SYMBOL, KERNELOFFSET) or decimal (NUMBER, signed) digits of v[0..n)
 * into *out; false on anything else or overflow. */
static bool parse_num(const char *v, size_t n, unsigned base, uint64_t *out)
{
	bool neg = false;
	uint64_t x = 0;
	size_t i = 0;

	if (base == 10 && n && v[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == n || n - i > 20)
		return false;
	for (; i < n; i++) {
		unsigned d;
		char c = v[i];

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return false;
		if (__builtin_mul_overflow(x, base, &x) || __builtin_add_overflow(x, d, &x))
			return false;
	}
	*out = neg ? (uint64_t)0 - x : x;
	return true;
}

static bool key_is(const char *k, size_t kn, const char *want)
{
	return strlen(want) == kn && !memcmp(k, want, kn);
}

static const struct {
	const char *key;	/* as the kernel prints it */
	size_t off;		/* of the field in struct vmcoreinfo */
	unsigned base;
} fields[] = {
	{ "KERNELOFFSET", offsetof(struct vmcoreinfo, kernel_offset), 16 },
	{ "NUMBER(phys_base)", offsetof(struct vmcoreinfo, phys_base), 10 },
	{ "SYMBOL(swapper_pg_dir)", offsetof(struct vmcoreinfo, swapper_pg_dir), 16 },
	{ "SYMBOL(init_top_pgt)", offsetof(struct vmcoreinfo, swapper_pg_dir), 16 },
	{ "SYMBOL(_stext)", offsetof(struct vmcoreinfo, stext), 16 },
	{ "SYMBOL(kallsyms_names)", offsetof(struct vmcoreinfo, ks_names), 16 },
	{ "SYMBOL(kallsyms_num_syms)", offsetof(struct vmcoreinfo, ks_num_syms), 16 },
	{ "SYMBOL(kallsyms_token_table)", offsetof(struct vmcoreinfo, ks_token_table), 16 },
	{ "SYMBOL(kallsyms_token_index)", offsetof(struct vmcoreinfo, ks_token_index), 16 },
	{ "SYMBOL(kallsyms_offsets)", offsetof(struct vmcoreinfo, ks_offsets), 16 },
	{ "SYMBOL(kallsyms_relative_base)", offsetof(struct vmcoreinfo, ks_relative_base), 16 },
	{ "SYMBOL(kallsyms_addresses)", offsetof(struct vmcoreinfo, ks_addresses), 16 },
};

/* BUILD-ID=<hex>: the kernel prints its 20 bytes with %20phN; anything
 * but 2..40 hex digits, an even count, is ignored. */
static void parse_build_id(const char *v, size_t vn, struct vmcoreinfo *out)
{
	uint8_t b[sizeof(out->build_id)];

	while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\r'))
		vn--;
	if (vn < 2 || vn % 2 || vn / 2 > sizeof(b))
		return;
	for (size_t i = 0; i < vn; i++) {
		int d = hex_val((unsigned char)v[i]);

		if (d < 0)
			return;
		b[i / 2] = (uint8_t)(i % 2 ? b[i / 2] | d : d << 4);
	}
	memcpy(out->build_id, b, vn / 2);
	out->build_id_len = vn / 2;
}

/* One "KEY=VALUE" line. */
static void parse_line(const char *k, size_t kn, const char *v, size_t vn,
		       struct vmcoreinfo *out)
{
	uint64_t x;

	if (key_is(k, kn, "OSRELEASE")) {
		size_t n = vn < sizeof(out->release) - 1 ? vn : sizeof(out->release) - 1;

		for (size_t i = 0; i < n; i++) {
			char c = v[i];
			bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				  (c >= '0' && c <= '9') || strchr("._-+~", c);

			out->release[i] = ok && c ? c : '_';
		}
		out->release[n] = '\0';
		out->have |= VMCI_RELEASE;
		return;
	}
	if (key_is(k, kn, "BUILD-ID")) {
		parse_build_id(v, vn, out);
		return;
	}
	if (key_is(k, kn, "NUMBER(pgtable_l5_enabled)")) {
		if (parse_num(v, vn, 10, &x))
			out->l5 = x == 1;
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		if (!key_is(k, kn, fields[i].key) || !parse_num(v, vn, fields[i].base, &x))
			continue;
		memcpy((char *)out + fields[i].off, &x, sizeof(x));
		if (i == 0)
			out->have |= VMCI_OFFSET;
		else if (i == 1)
			out->have |= VMCI_PHYS_BASE;
		else if (i == 2 || i == 3)
			out->have |= VMCI_PGD;
	}
}

int vmcoreinfo_parse(const char *text, size_t len, struct vmcoreinfo *out)
{
	const char *p = text, *end;

	memset(out, 0, sizeof(*out));
	if (len > VMCOREINFO_BYTES)
		len = VMCOREINFO_BYTES;
	end = memchr(text, '\0', len);
	if (!end)
		end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eq;

		if (!nl)
			nl = end;
		eq = memchr(p, '=', (size_t)(nl - p));
		if (eq)
			parse_line(p, (size_t)(eq - p), eq + 1, (size_t)(nl - eq - 1), out);
		p = nl + 1;
	}
	if (out->ks_names && out->ks_num_syms && out->ks_token_table && out->ks_token_index &&
	    ((out->ks_offsets && (out->ks_relative_base || out->stext)) || out->ks_addresses))
		out->have |= VMCI_KALLSYMS;
	return out->have ? 0 : -ENOENT;
}

/* The range that holds or follows gpa; false past the last one. */
static bool range_from(struct guestmem *m, uint64_t gpa, uint64_t *start, uint64_t *end)
{
	for (unsigned i = 0; i < guestmem_nr_ranges(m); i++) {
		uint64_t g, l;

		if (guestmem_range(m, i, &g, &l) || g + l <= gpa)
			continue;
		*start = g > gpa ? g : gpa;
		*end = g + l;
		return true;
	}
	return false;
}

/* Page starts in buf[0..n) (n a multiple of OPVM_PAGE_SIZE) that parse: 1 and *out. */
static int scan_chunk(const uint8_t *buf, size_t n, uint64_t base, struct vmcoreinfo *out,
		      uint64_t *gpa)
{
	const unsigned need = VMCI_RELEASE | VMCI_PHYS_BASE | VMCI_PGD;

	for (size_t off = 0; off + OPVM_PAGE_SIZE <= n; off += OPVM_PAGE_SIZE) {
		if (memcmp(buf + off, MAGIC, sizeof(MAGIC) - 1))
			continue;
		if (!vmcoreinfo_parse((const char *)buf + off, OPVM_PAGE_SIZE, out) &&
		    (out->have & need) == need) {
			*gpa = base + off;
			return 1;
		}
	}
	return 0;
}

int vmcoreinfo_find(struct guestmem *m, uint64_t *cursor, uint64_t budget,
		    struct vmcoreinfo *out, uint64_t *gpa, uint64_t *scanned)
{
	uint64_t start, end, done = 0;
	uint8_t *buf = malloc(SCAN_CHUNK);
	int found = 0;

	if (!buf)
		return -ENOMEM;
	*cursor &= ~OPVM_PAGE_MASK;
	while (!found && done < budget) {
		size_t n;

		if (!range_from(m, *cursor, &start, &end)) {
			*cursor = 0;
			free(buf);
			return -ENOENT;
		}
		start = (start + OPVM_PAGE_MASK) & ~OPVM_PAGE_MASK;
		n = end - start < SCAN_CHUNK ? (size_t)(end - start) : SCAN_CHUNK;
		n &= ~(size_t)OPVM_PAGE_MASK;
		if (!n) {
			*cursor = end;
			continue;
		}
		if (!guestmem_read(m, start, buf, n))
			found = scan_chunk(buf, n, start, out, gpa);
		*scanned += n;
		done += n;
		*cursor = start + n;
	}
	free(buf);
	return found;
}
