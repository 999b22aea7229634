// SPDX-License-Identifier: MIT
/*
 * libFuzzer over the ELF loading path (symbols/elfimage.c): guest-supplied
 * bytes as an executable, shared object or module -- symbols, build-id,
 * offsets, section bytes, DWARF lines, the functions of its .eh_frame
 * (symbols/ehframe.c, as a stripped binary is split) -- and the same bytes
 * as System.map text (symbols/ksyms.c).  Seeds: tests/fuzz/corpus/elf/.
 */
#include <stddef.h>
#include <stdint.h>

#include "symbols/elfimage.h"
#include "symbols/ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elfimage *img;
	struct ksyms *ks;
	struct elfline l;
	uint8_t buf[256];
	size_t bid_len;
	uint64_t a;

	img = elfimage_open_mem(data, size, NULL, 0);
	if (img) {
		elfimage_build_id(img, &bid_len);
		if (!elfimage_has_symtab(img))
			elfimage_frame_symbols(img, "fuzz", NULL);
		for (size_t i = 0; i < elfimage_nr_syms(img) && i < 4096; i++) {
			const struct elfsym *s = elfimage_sym(img, i);

			elfimage_lookup(img, s->addr + s->size / 2);
			if (elfimage_addr_to_offset(img, s->addr, &a) == 0)
				elfimage_offset_to_addr(img, a, &a);
			if (i < 16) {
				elfimage_read(img, s->addr, buf, sizeof(buf));
				elfimage_line(img, s->addr, &l);
			}
		}
		elfimage_lines(img, 0, UINT64_MAX, NULL, NULL);
		elfimage_symbol_value(img, "_text", &a);
		elfimage_close(img);
	}
	ks = ksyms_parse((const char *)data, size, NULL, 0);
	if (ks) {
		for (size_t i = 0; i < ksyms_nr(ks) && i < 64; i++)
			ksyms_lookup(ks, ksyms_sym(ks, i)->addr + 1);
		ksyms_addr(ks, "_text", &a);
		ksyms_free(ks);
	}
	return 0;
}
