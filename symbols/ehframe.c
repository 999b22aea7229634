// SPDX-License-Identifier: MIT
/*
 * Function bounds from .eh_frame (see ehframe.h).  dwarf_next_cfi() cuts
 * the section into CIEs and FDEs and checks their lengths; what it leaves
 * to the caller, the FDE's initial_location and address_range in the
 * pointer encoding its CIE's 'R' augmentation names, is decoded here, each
 * read bounded by the entry.  Only the encodings linkers emit for
 * .eh_frame are taken (absolute or PC-relative, fixed or LEB128 sizes);
 * anything else refuses the entry, never guesses.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/array.h"
#include "symbols/ehframe.h"

#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND	0x70000001	/* what lld and gold type .eh_frame */
#endif

/* Bytes [p, p + n) of the section at link-time address addr + (p - sec). */
struct ehcur {
	const uint8_t *sec, *p;
	size_t n;
	uint64_t addr;
	bool msb, is64;
};

static int cur_bytes(struct ehcur *c, unsigned n, bool sign, uint64_t *v)
{
	uint64_t x = 0;

	if (c->n < n)
		return -1;
	for (unsigned i = 0; i < n; i++)
		x |= (uint64_t)c->p[c->msb ? n - 1 - i : i] << (8 * i);
	if (sign && n < 8 && (x >> (8 * n - 1)) & 1)
		x |= ~0ull << (8 * n);
	c->p += n;
	c->n -= n;
	*v = x;
	return 0;
}

static int cur_leb(struct ehcur *c, bool sign, uint64_t *v)
{
	uint64_t x = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (!c->n || shift >= 64)
			return -1;
		b = *c->p++;
		c->n--;
		x |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (sign && shift < 64 && (b & 0x40))
		x |= ~0ull << shift;
	*v = x;
	return 0;
}

/* One value in the format of enc's low nibble.  0 or -1 (unknown format,
 * short entry). */
static int cur_format(struct ehcur *c, uint8_t enc, uint64_t *v)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		return cur_bytes(c, c->is64 ? 8 : 4, false, v);
	case DW_EH_PE_uleb128:
		return cur_leb(c, false, v);
	case DW_EH_PE_udata2:
		return cur_bytes(c, 2, false, v);
	case DW_EH_PE_udata4:
		return cur_bytes(c, 4, false, v);
	case DW_EH_PE_udata8:
		return cur_bytes(c, 8, false, v);
	case DW_EH_PE_sleb128:
		return cur_leb(c, true, v);
	case DW_EH_PE_sdata2:
		return cur_bytes(c, 2, true, v);
	case DW_EH_PE_sdata4:
		return cur_bytes(c, 4, true, v);
	case DW_EH_PE_sdata8:
		return cur_bytes(c, 8, true, v);
	default:
		return -1;
	}
}

/* A pointer encoded as enc: absolute or relative to its own address (the
 * two .eh_frame uses for code); an ELFCLASS32 address wraps at 32 bits. */
static int cur_pointer(struct ehcur *c, uint8_t enc, uint64_t *v)
{
	uint64_t at = c->addr + (uint64_t)(c->p - c->sec), x;

	if (enc == DW_EH_PE_omit || (enc & DW_EH_PE_indirect) || cur_format(c, enc, &x))
		return -1;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		x += at;	/* modulo 2^64, as the linker computed it */
		break;
	default:		/* textrel, datarel, funcrel, aligned */
		return -1;
	}
	*v = c->is64 ? x : (x & 0xffffffffu);
	return 0;
}

/* The FDE pointer encoding a CIE's augmentation names ('R'), absptr when
 * it names none.  0 or -1 (an augmentation it cannot read past). */
static int cie_encoding(const Dwarf_CIE *cie, const struct ehcur *sec, uint8_t *enc)
{
	struct ehcur c = *sec;
	const char *aug = cie->augmentation;
	uint64_t skip;

	*enc = DW_EH_PE_absptr;
	if (!aug || !*aug)
		return 0;
	if (aug[0] != 'z' || !cie->augmentation_data)
		return -1;
	c.p = cie->augmentation_data;
	c.n = cie->augmentation_data_size;
	for (aug++; *aug; aug++) {
		switch (*aug) {
		case 'R':
			if (!c.n)
				return -1;
			*enc = *c.p;
			return 0;
		case 'L':
			if (!c.n)
				return -1;
			c.p++;
			c.n--;
			break;
		case 'P':
			if (!c.n)
				return -1;
			c.p++;
			c.n--;
			if (cur_format(&c, c.p[-1], &skip))
				return -1;
			break;
		case 'S':
		case 'B':
			break;
		default:
			return -1;
		}
	}
	return 0;
}

/* The .eh_frame section's bytes, its address, or NULL. */
static Elf_Data *find_eh_frame(Elf *elf, uint64_t *addr)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		Elf_Data *d;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) ||
		    (sh.sh_flags & SHF_COMPRESSED) ||
		    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".eh_frame"))
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			return NULL;
		*addr = sh.sh_addr;
		return d;
	}
	return NULL;
}

/* CIEs by offset, direct-mapped: FDEs of one object share one CIE. */
#define CIE_CACHE	64

struct cie_slot {
	Dwarf_Off off;
	int state;		/* 0 empty, 1 enc valid, -1 refused */
	uint8_t enc;
};

struct walk {
	const unsigned char *ident;
	Elf_Data *data;
	struct ehcur sec;
	struct cie_slot cache[CIE_CACHE];
};

/* The FDE encoding of the CIE at off: 0, or -1 (not a CIE, refused). */
static int cie_at(struct walk *w, Dwarf_Off off, uint8_t *enc)
{
	struct cie_slot *s = &w->cache[(off >> 2) % CIE_CACHE];
	Dwarf_CFI_Entry e;
	Dwarf_Off next;

	if (s->state && s->off == off) {
		*enc = s->enc;
		return s->state > 0 ? 0 : -1;
	}
	s->off = off;
	s->state = -1;
	if (dwarf_next_cfi(w->ident, w->data, true, off, &next, &e) != 0 ||
	    e.CIE_id != DW_CIE_ID_64 || cie_encoding(&e.cie, &w->sec, &s->enc))
		return -1;
	s->state = 1;
	*enc = s->enc;
	return 0;
}

/* One FDE's range: 0, or -1 (refused). */
static int fde_range(struct walk *w, const Dwarf_FDE *fde, struct ehframe_range *out)
{
	struct ehcur c = w->sec;
	uint64_t start, len;
	uint8_t enc;

	if (cie_at(w, fde->CIE_pointer, &enc) || fde->end < fde->start)
		return -1;
	c.p = fde->start;
	c.n = (size_t)(fde->end - fde->start);
	if (cur_pointer(&c, enc, &start) || cur_format(&c, enc & 0x0f, &len))
		return -1;
	/* a zero range is padding; a range past the address space a lie */
	if (!len || __builtin_add_overflow(start, len, &out->end))
		return -1;
	out->start = start;
	return 0;
}

static int ranges_push(struct ehframe_range **v, size_t *nr, size_t *cap,
		       const struct ehframe_range *r)
{
	if (array_grow(v, cap, *nr + 1, sizeof(**v), 256))
		return -ENOMEM;
	(*v)[(*nr)++] = *r;
	return 0;
}

int ehframe_ranges(Elf *elf, size_t max, struct ehframe_range **out, size_t *nr,
		   struct ehframe_stats *st)
{
	struct walk w = { .ident = (const unsigned char *)elf_getident(elf, NULL) };
	struct ehframe_stats s = { 0 };
	struct ehframe_range *v = NULL, r;
	Dwarf_Off off = 0, next = (Dwarf_Off)-1;
	size_t n = 0, cap = 0;
	uint64_t addr = 0;
	int ret = 0;

	*out = NULL;
	*nr = 0;
	w.data = w.ident ? find_eh_frame(elf, &addr) : NULL;
	if (!w.data)
		goto done;
	w.sec = (struct ehcur){
		.sec = w.data->d_buf, .addr = addr,
		.msb = w.ident[EI_DATA] == ELFDATA2MSB, .is64 = w.ident[EI_CLASS] == ELFCLASS64,
	};
	for (;;) {
		Dwarf_CFI_Entry e;
		int rc;

		next = (Dwarf_Off)-1;	/* not set by an entry refused early */
		if (s.entries >= EHFRAME_MAX_ENTRIES || n >= max) {
			s.cut = 1;
			break;
		}
		rc = dwarf_next_cfi(w.ident, w.data, true, off, &next, &e);
		if (rc > 0)
			break;
		s.entries++;
		if (rc == 0 && e.CIE_id != DW_CIE_ID_64) {
			if (fde_range(&w, &e.fde, &r) == 0) {
				ret = ranges_push(&v, &n, &cap, &r);
				if (ret)
					break;
				s.fdes++;
			} else {
				s.refused++;
			}
		} else if (rc < 0) {
			s.refused++;
		}
		/* an entry that does not say where the next one is ends it */
		if (next == (Dwarf_Off)-1 || next <= off)
			break;
		off = next;
	}
done:
	if (ret) {
		free(v);
		v = NULL;
		n = 0;
	}
	*out = v;
	*nr = n;
	if (st)
		*st = s;
	return ret;
}
