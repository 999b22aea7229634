// SPDX-License-Identifier: MIT
/*
 * Dynamic symbols read from guest memory (vmm/introspect/memsyms.c): the
 * host's own libc laid out as a process maps it (its PT_LOAD segments at a
 * load bias, the dynamic section relocated as ld.so leaves it, or not),
 * read back and the ELF made opened with symbols/elfimage, against the same
 * libc opened as a file; then pages taken away and the tables made to lie.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbols/elfimage.h"
#include "vmm/introspect/memsyms.h"
#include "memsyms-image.h"

#define LIBC	"/lib/x86_64-linux-gnu/libc.so.6"
#define BIAS	0x7f1234560000ull

static const uint8_t BID[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
				 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

static int run(struct fake *f, const struct memsyms_limits *lim, struct memsyms_result *res,
	       void **elf, size_t *len)
{
	struct memsyms_mem m = { fake_read, f };

	return memsyms_read(&m, &f->exec, BID, sizeof(BID), lim, elf, len, res);
}

static int setup(void **state)
{
	struct fake *f = malloc(sizeof(*f));

	if (!f || access(LIBC, R_OK) || fake_load(f, LIBC, BIAS)) {
		free(f);
		*state = NULL;
		return 0;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	if (*state) {
		fake_free(*state);
		free(*state);
	}
	return 0;
}

#define NEED_LIBC(f)                                                                        \
	do {                                                                                \
		if (!(f)) {                                                                 \
			printf("SKIP: no %s to lay out\n", LIBC);                         \
			skip();                                                             \
		}                                                                           \
	} while (0)

/* The ELF made against libc itself: the same functions at the same
 * addresses, file offsets to addresses alike, the build-id given. */
static void check_against_file(void *elf, size_t len)
{
	struct elfimage *mem = elfimage_open_mem(elf, len, NULL, 0);
	struct elfimage *real = elfimage_open(LIBC, NULL, 0);
	const uint8_t *bid;
	size_t blen, n;
	uint64_t off, a1, a2;
	long i, j;

	assert_non_null(mem);
	assert_non_null(real);
	n = elfimage_nr_syms(real);
	assert_true(n > 1000);
	/* the file's PLT stubs are named from its section headers ([.plt]),
	 * which a table read from memory does not have */
	for (size_t k = 0; k < elfimage_nr_syms(real); k++)
		n -= !strncmp(elfimage_sym(real, k)->name, "[.plt", 5);
	assert_int_equal(elfimage_nr_syms(mem), n);
	for (size_t k = 0; k < elfimage_nr_syms(real); k++) {
		if (!strncmp(elfimage_sym(real, k)->name, "[.plt", 5))
			continue;
		j = elfimage_lookup(mem, elfimage_sym(real, k)->addr);
		assert_true(j >= 0);
		assert_int_equal(elfimage_sym(mem, (size_t)j)->addr, elfimage_sym(real, k)->addr);
	}
	i = elfimage_find(real, "malloc");
	assert_true(i >= 0);
	assert_int_equal(elfimage_addr_to_offset(real, elfimage_sym(real, (size_t)i)->addr + 4, &off),
			 0);
	i = elfimage_lookup_offset(real, off, &a1);
	j = elfimage_lookup_offset(mem, off, &a2);
	assert_true(i >= 0 && j >= 0);
	assert_int_equal(a1, a2);
	assert_string_equal(elfimage_sym(mem, (size_t)j)->name, elfimage_sym(real, (size_t)i)->name);
	bid = elfimage_build_id(mem, &blen);
	assert_int_equal(blen, sizeof(BID));
	assert_memory_equal(bid, BID, sizeof(BID));
	assert_int_equal(elfimage_has_symtab(mem), 0);
	elfimage_close(mem);
	elfimage_close(real);
}

static void test_relocated(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res;
	void *elf;
	size_t len;

	NEED_LIBC(f);
	relocate(f, 1);
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	relocate(f, -1);
	assert_int_equal(res.relocated, 1);
	assert_int_equal(res.absent + res.bad + res.capped, 0);
	assert_true(res.kept > 1000);
	assert_true(res.pages_read > 0 && res.pages_read < 64);
	check_against_file(elf, len);
	free(elf);
}

static void test_unrelocated_gnu(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res;
	Elf64_Dyn *h;
	void *elf;
	size_t len;

	NEED_LIBC(f);
	/* the GNU table alone counts the symbols */
	if ((h = dyn_find(f, DT_HASH)))
		h->d_tag = DT_DEBUG;
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	assert_int_equal(res.relocated, 0);
	assert_string_equal(res.hash, "gnu");
	check_against_file(elf, len);
	free(elf);
	if (h)
		h->d_tag = DT_HASH;
}

/* Pages of .dynsym and .dynstr not resident: their symbols left out and
 * counted, the others kept. */
static void test_absent_pages(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res, full;
	void *elf;
	size_t len;
	Elf64_Dyn *sym = dyn_get(f, DT_SYMTAB), *str = dyn_get(f, DT_STRTAB);

	NEED_LIBC(f);
	assert_int_equal(run(f, NULL, &full, &elf, &len), 0);
	free(elf);
	drop(f, sym->d_un.d_ptr + 3 * PG);
	drop(f, str->d_un.d_ptr + PG);
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	assert_int_equal(res.pages_absent, 2);
	/* entries on a page that did not read are counted whatever their
	 * type: no function is kept that the full read did not keep */
	assert_true(res.absent > 100);
	assert_true(res.kept < full.kept && res.kept + res.absent >= full.kept);
	free(elf);
	/* the header's page: nothing to go by */
	drop(f, 0);
	assert_int_equal(run(f, NULL, &res, &elf, &len), -ENOENT);
	assert_null(elf);
	memset(f->absent, 0, f->npages);
}

/* Each lie refused (-EINVAL, a reason) or cut and counted; nothing read
 * outside the file's segments. */
static void test_lies(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res;
	Elf64_Dyn *d;
	uint64_t keep;
	void *elf;
	size_t len;

	NEED_LIBC(f);
#define LIE(tag, val, want)                                                       \
	do {                                                                      \
		d = dyn_get(f, tag);                                              \
		assert_non_null(d);                                               \
		keep = d->d_un.d_val;                                             \
		d->d_un.d_val = (val);                                            \
		assert_int_equal(run(f, NULL, &res, &elf, &len), want);           \
		assert_null(elf);                                                 \
		if ((want) == -EINVAL)                                            \
			assert_non_null(res.why);                                 \
		d->d_un.d_val = keep;                                             \
	} while (0)
	LIE(DT_STRSZ, 1ull << 40, -EINVAL);
	LIE(DT_STRSZ, f->file_len, -EINVAL);
	LIE(DT_SYMTAB, 0x10000000000ull, -EINVAL);
	LIE(DT_STRTAB, UINT64_MAX - 8, -EINVAL);
	LIE(DT_SYMENT, 16, -EINVAL);
	LIE(DT_SYMTAB, dyn_get(f, DT_STRTAB)->d_un.d_val, -EINVAL);	/* overlap */
	d = dyn_get(f, DT_HASH);
	d->d_tag = DT_DEBUG;
	{
		Elf64_Dyn *g = dyn_get(f, DT_GNU_HASH);
		uint32_t *gh = (uint32_t *)at(f, g->d_un.d_ptr), save[4];

		memcpy(save, gh, sizeof(save));
		gh[0] = 0xffffffffu;	/* buckets */
		assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
		gh[0] = save[0];
		gh[2] = 1u << 30;	/* bloom words */
		assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
		gh[2] = save[2];
		gh[1] = 0xfffffff0u;	/* symoffset above every bucket */
		assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
		gh[1] = save[1];
	}
	d->d_tag = DT_HASH;
	/* a chain that never ends: cut at the cap, counted */
	{
		uint32_t *hh = (uint32_t *)at(f, dyn_get(f, DT_HASH)->d_un.d_ptr), nchain = hh[1];
		struct memsyms_limits lim = { .max_syms = 1000 };

		hh[1] = 0x7fffffffu;
		assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);	/* past the segment */
		hh[1] = nchain;
		assert_int_equal(run(f, &lim, &res, &elf, &len), 0);
		assert_true(res.capped > 0);
		free(elf);
	}
#undef LIE
}

/* Names that do not end inside the table, symbols outside the code. */
static void test_bad_entries(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res, full;
	Elf64_Sym *s;
	uint64_t strsz = dyn_get(f, DT_STRSZ)->d_un.d_val;
	uint32_t n0, n1;
	void *elf;
	size_t len;

	NEED_LIBC(f);
	assert_int_equal(run(f, NULL, &full, &elf, &len), 0);
	free(elf);
	s = (Elf64_Sym *)at(f, dyn_get(f, DT_SYMTAB)->d_un.d_ptr);
	/* the first two functions: a name past the table, code outside it */
	for (n0 = 1; ELF64_ST_TYPE(s[n0].st_info) != STT_FUNC || !s[n0].st_shndx; n0++)
		;
	for (n1 = n0 + 1; ELF64_ST_TYPE(s[n1].st_info) != STT_FUNC || !s[n1].st_shndx; n1++)
		;
	Elf64_Sym k0 = s[n0], k1 = s[n1];

	s[n0].st_name = (uint32_t)strsz;
	s[n1].st_value = 0x7ffffffff000ull;
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	assert_int_equal(res.bad, 1);
	assert_int_equal(res.kept, full.kept - 2);
	assert_int_equal(res.skipped, full.skipped + 1);
	free(elf);
	/* the table's last byte made not a NUL: the last name runs off it */
	s[n0] = k0;
	s[n1] = k1;
	*at(f, dyn_get(f, DT_STRTAB)->d_un.d_ptr + strsz - 1) = 'x';
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	assert_true(res.bad <= 1);
	free(elf);
	*at(f, dyn_get(f, DT_STRTAB)->d_un.d_ptr + strsz - 1) = 0;
}

/* Headers that do not describe the mapping, and the page budget. */
static void test_headers_and_budget(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res;
	struct memsyms_map keep = f->exec;
	struct memsyms_limits lim = { .max_pages = 4 };
	Elf64_Ehdr *eh = (Elf64_Ehdr *)at(f, 0);
	uint16_t phnum = eh->e_phnum;
	void *elf;
	size_t len;

	NEED_LIBC(f);
	/* the same header, a mapping its segments do not have */
	f->exec.pgoff += PG;
	f->exec.start += PG;
	assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
	f->exec = keep;
	/* the header is not where file offset 0 would be */
	f->exec.pgoff += PG;
	assert_int_equal(run(f, NULL, &res, &elf, &len), -ENOENT);
	f->exec = keep;
	f->exec.start += PG;
	assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
	f->exec = keep;
	eh->e_phnum = 1000;
	assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
	eh->e_phnum = phnum;
	eh->e_ident[EI_CLASS] = ELFCLASS32;
	assert_int_equal(run(f, NULL, &res, &elf, &len), -EINVAL);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	f->reads = 0;
	assert_int_equal(run(f, &lim, &res, &elf, &len), -E2BIG);
	assert_true(f->reads <= 4);
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	free(elf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_relocated),
		cmocka_unit_test(test_unrelocated_gnu),
		cmocka_unit_test(test_absent_pages),
		cmocka_unit_test(test_lies),
		cmocka_unit_test(test_bad_entries),
		cmocka_unit_test(test_headers_and_budget),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
