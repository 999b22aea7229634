// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the dynamic symbols read from guest memory
 * (vmm/introspect/memsyms.h).  The input's first 8 bytes are a mask of the
 * image's first 64 pages that are not resident, the next 8 the executable
 * mapping's file offset in pages (taken modulo the image's pages); the rest
 * is a process's memory at BASE as it maps an ELF file (offset 0 at BASE).
 * The read must stay within its page budget, refuse or count what lies,
 * and what it makes must open with symbols/elfimage, with no more symbols
 * than it says it kept and PLT sections it named, each inside an
 * executable segment; the PLT's pages within MEMSYMS_PLT_PAGES and the
 * relocation tables'.
 *
 * Seeds: tests/fuzz/corpus/memsyms/ (tests/fuzz/gen-memsyms-seed.py: a
 * small shared object laid out as ld.so maps it, dynamic section
 * relocated; their PLTs a lone PLT0, lazy entries, IBT's .plt.sec, and
 * .plt.got).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/elfimage.h"
#include "vmm/introspect/memsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE	0x7f0000000000ull
#define PG	4096u

struct mem {
	const uint8_t *p;
	size_t len;
	uint64_t absent;
	unsigned reads;
};

static int page_read(void *arg, uint64_t va, void *page)
{
	struct mem *m = arg;
	uint64_t off = va - BASE, n;

	if (++m->reads > MEMSYMS_MAX_PAGES || (va & (PG - 1)))
		__builtin_trap();	/* past the budget, or not a page */
	if (va < BASE || off >= m->len || (off / PG < 64 && (m->absent >> (off / PG) & 1)))
		return -ENOENT;
	n = m->len - off < PG ? m->len - off : PG;
	memset(page, 0, PG);
	memcpy(page, m->p + off, n);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t bid[20] = { 1, 2, 3, 4 };
	struct mem m = { 0 };
	struct memsyms_mem mm = { page_read, &m };
	struct memsyms_map x;
	struct memsyms_result res;
	struct elfimage *img;
	uint64_t pg;
	size_t len, pages;
	void *elf;

	if (size < 16 + 64)
		return 0;
	memcpy(&m.absent, data, 8);
	memcpy(&pg, data + 8, 8);
	m.p = data + 16;
	m.len = size - 16;
	pages = (m.len + PG - 1) / PG;
	pg %= pages;
	x = (struct memsyms_map){ BASE + pg * PG, BASE + pages * PG, pg * PG };
	if (memsyms_read(&mm, &x, bid, sizeof(bid), NULL, &elf, &len, &res)) {
		if (elf)
			__builtin_trap();
		return 0;
	}
	img = elfimage_open_mem(elf, len, NULL, 0);
	if (!img || elfimage_nr_syms(img) > res.kept + res.plt_ranges ||
	    res.plt_ranges > MEMSYMS_PLT_RANGES || !memsyms_current(elf, len))
		__builtin_trap();
	/* two relocation tables of MEMSYMS_PLT_RELS entries, and the code */
	if (res.plt_pages > MEMSYMS_PLT_PAGES + 2 * (MEMSYMS_PLT_RELS * 24 / PG + 1))
		__builtin_trap();
	for (size_t i = 0; i < elfimage_nr_syms(img); i++) {
		uint64_t a0, a1, off;

		if (elfimage_exec_span(img, &a0, &a1, &off) || !elfimage_sym(img, i)->name[0])
			__builtin_trap();
	}
	elfimage_close(img);
	free(elf);
	return 0;
}
