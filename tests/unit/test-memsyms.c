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
#include "lib/array.h"

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
	/* the PLT's stubs too ([.plt], [.plt.got]): found in memory, named
	 * from the sections the file has */
	assert_int_equal(elfimage_nr_syms(mem), n);
	for (size_t k = 0; k < elfimage_nr_syms(real); k++) {
		j = elfimage_lookup(mem, elfimage_sym(real, k)->addr);
		assert_true(j >= 0);
		assert_int_equal(elfimage_sym(mem, (size_t)j)->addr, elfimage_sym(real, k)->addr);
		if (!strncmp(elfimage_sym(real, k)->name, "[.plt", 5)) {
			assert_string_equal(elfimage_sym(mem, (size_t)j)->name,
					    elfimage_sym(real, k)->name);
			assert_int_equal(elfimage_sym(mem, (size_t)j)->size,
					 elfimage_sym(real, k)->size);
		}
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

/* ---- the PLT ---------------------------------------------------------------- */

struct pltsec {
	char name[16];
	uint64_t addr, size;
};

/* The executable .plt* sections of an ELF in memory: their count. */
static unsigned plt_sections(const uint8_t *b, size_t len, struct pltsec *out, unsigned max)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
	const char *names;
	unsigned n = 0;

	assert_true(eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) <= len);
	names = (const char *)b + sh[eh->e_shstrndx].sh_offset;
	for (unsigned i = 1; i < eh->e_shnum; i++) {
		const char *nm = names + sh[i].sh_name;

		if (strncmp(nm, ".plt", 4) || !(sh[i].sh_flags & SHF_EXECINSTR))
			continue;
		assert_true(n < max);
		snprintf(out[n].name, sizeof(out[n].name), "%s", nm);
		out[n].addr = sh[i].sh_addr;
		out[n++].size = sh[i].sh_size;
	}
	return n;
}

/* The PLT sections of the ELF made are the file's, and elfimage names
 * their samples alike. */
static void plt_same(struct fake *f, const char *path, void *elf, size_t len)
{
	struct pltsec a[8], b[8];
	unsigned na = plt_sections(f->file, f->file_len, a, 8);
	unsigned nb = plt_sections(elf, len, b, 8);
	struct elfimage *mem = elfimage_open_mem(elf, len, NULL, 0);
	struct elfimage *real = elfimage_open(path, NULL, 0);

	assert_true(na > 0);
	assert_int_equal(nb, na);
	for (unsigned i = 0; i < na; i++) {
		unsigned j = 0;

		while (j < nb && strcmp(a[i].name, b[j].name))
			j++;
		assert_true(j < nb);
		assert_int_equal(b[j].addr, a[i].addr);
		assert_int_equal(b[j].size, a[i].size);
		for (uint64_t o = 0; o < a[i].size; o += 4) {
			long x = elfimage_lookup(mem, a[i].addr + o), y = elfimage_lookup(real, a[i].addr + o);

			assert_true(x >= 0 && y >= 0);
			assert_string_equal(elfimage_sym(mem, (size_t)x)->name,
					    elfimage_sym(real, (size_t)y)->name);
		}
	}
	elfimage_close(mem);
	elfimage_close(real);
}

/* A program built here (cc flags) into dir/name: its path, or NULL to skip. */
static const char *build(const char *dir, const char *name, const char *flags)
{
	static char path[512];
	char cmd[2048];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && cc -O1 %s -Wl,--build-id -o '%s' prog.c 2>/dev/null", dir, flags, name);
	return system(cmd) == 0 ? path : NULL;
}

static const char PROG[] =
	"#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
	"int shown(int c) { char b[32]; snprintf(b, sizeof(b), \"%d\", c); return (int)strlen(b); }\n"
	"int main(int c, char **v) { void *p = malloc((size_t)c); memset(p, 0, (size_t)c);\n"
	"  free(p); puts(v[0]); return shown(c) + atoi(v[0]); }\n";

/* Real binaries of each PLT shape gcc and ld make here: lazy and -z now,
 * IBT's .plt.sec, -fno-plt's lone PLT0 and .plt.got; a PIE that exports
 * nothing (its PLT the only names) and a shared object that does; the
 * dynamic section relocated and not. */
static void test_plt_shapes(void **state)
{
	static const struct { const char *name, *flags; } v[] = {
		{ "lazy", "" },
		{ "now", "-Wl,-z,now" },
		{ "ibt", "-fcf-protection -Wl,-z,ibtplt" },
		{ "ibtnow", "-fcf-protection -Wl,-z,ibtplt -Wl,-z,now" },
		{ "noplt", "-fno-plt" },
		{ "so", "-shared -fPIC" },
		{ "soibt", "-shared -fPIC -fcf-protection -Wl,-z,ibtplt" },
		{ "exec", "-no-pie -fno-pie" },
	};
	char dir[] = "/tmp/test-memsyms-XXXXXX", src[64];
	unsigned built = 0;
	FILE *fp;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/prog.c", dir);
	fp = fopen(src, "w");
	assert_non_null(fp);
	fputs(PROG, fp);
	fclose(fp);
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		const char *path = build(dir, v[i].name, v[i].flags);
		struct memsyms_result res;
		struct fake f;
		void *elf;
		size_t len;

		if (!path) {
			printf("SKIP: cc %s did not build here\n", v[i].flags);
			continue;
		}
		built++;
		for (int rel = 0; rel < 2; rel++) {
			uint64_t bias = strstr(v[i].flags, "no-pie") ? 0 : BIAS;

			assert_int_equal(fake_load(&f, path, bias), 0);
			if (rel)
				relocate(&f, 1);
			assert_int_equal(run(&f, NULL, &res, &elf, &len), 0);
			assert_true(res.plt_ranges > 0);
			assert_int_equal(res.plt_refused + res.plt_unverified, 0);
			assert_true(res.plt_pages >= 1 && res.plt_pages <= 4);
			assert_true(memsyms_current(elf, len));
			plt_same(&f, path, elf, len);
			free(elf);
			fake_free(&f);
		}
		unlink(path);
	}
	unlink(src);
	rmdir(dir);
	if (!built)
		skip();
}

/* The PLT's tables and stubs made to lie: refused or cut, counted; the
 * symbols still made. */
static void test_plt_lies(void **state)
{
	struct fake *f = *state;
	struct memsyms_result res;
	struct pltsec ps[8];
	Elf64_Dyn *sz, *jr, *pr;
	uint64_t keep;
	unsigned n;
	void *elf;
	size_t len;

	NEED_LIBC(f);
	sz = dyn_get(f, DT_PLTRELSZ);
	jr = dyn_get(f, DT_JMPREL);
	pr = dyn_get(f, DT_PLTREL);
#define PLT_LIE(d, val, lazy)                                                                 \
	do {                                                                                  \
		keep = (d)->d_un.d_val;                                                       \
		(d)->d_un.d_val = (val);                                                      \
		assert_int_equal(run(f, NULL, &res, &elf, &len), 0);                          \
		assert_true(res.kept > 1000);                                                 \
		n = plt_sections(elf, len, ps, 8);                                            \
		assert_int_equal(n > 0 && !strcmp(ps[0].name, ".plt"), lazy);                 \
		free(elf);                                                                    \
		(d)->d_un.d_val = keep;                                                       \
	} while (0)
	PLT_LIE(sz, 1ull << 40, 0);		/* past every segment */
	assert_true(res.plt_refused > 0);
	PLT_LIE(sz, keep + 7, 0);		/* not whole entries */
	assert_true(res.plt_refused > 0);
	PLT_LIE(jr, 0x10000000000ull, 0);	/* JMPREL outside the segments */
	assert_true(res.plt_refused > 0);
	PLT_LIE(pr, DT_REL, 0);
	assert_true(res.plt_refused > 0);
	/* fewer relocations than entries: the PLT ends at the first entry
	 * whose index is past them (libc's count down from the last) */
	keep = sz->d_un.d_val;
	sz->d_un.d_val = keep / 2 / sizeof(Elf64_Rela) * sizeof(Elf64_Rela);
	assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
	n = plt_sections(elf, len, ps, 8);
	assert_true(res.plt_unverified >= 1);
	for (unsigned i = 0; i < n; i++)
		assert_true(strcmp(ps[i].name, ".plt") || ps[i].size < 16 * (1 + keep / sizeof(Elf64_Rela)));
	free(elf);
	sz->d_un.d_val = keep;
	PLT_LIE(dyn_get(f, DT_PLTGOT), 0x10000000000ull, 0);	/* no PLT0 to verify */
	assert_true(res.plt_refused > 0);
#undef PLT_LIE
	/* a stub pointing elsewhere: its PLT ends before it, counted */
	{
		struct pltsec file[8];
		unsigned nf = plt_sections(f->file, f->file_len, file, 8);
		uint8_t *e;
		int32_t rel;

		assert_true(nf > 0 && !strcmp(file[0].name, ".plt"));
		e = at(f, file[0].addr + 16 * 5);
		assert_true(e[0] == 0xff && e[1] == 0x25);
		memcpy(&rel, e + 2, 4);
		rel += 8;	/* the next slot: not this entry's relocation */
		memcpy(e + 2, &rel, 4);
		assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
		n = plt_sections(elf, len, ps, 8);
		assert_true(n > 0);
		assert_string_equal(ps[0].name, ".plt");
		assert_int_equal(ps[0].size, 16 * 5);
		assert_int_equal(res.plt_unverified, 1);
		free(elf);
		rel -= 8;
		memcpy(e + 2, &rel, 4);
		/* the PLT's page not resident: no PLT, counted, the rest made */
		drop(f, file[0].addr);
		assert_int_equal(run(f, NULL, &res, &elf, &len), 0);
		assert_int_equal(res.plt_ranges, 0);
		assert_true(res.pages_absent > 0);
		free(elf);
		memset(f->absent, 0, f->npages);
	}
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
		cmocka_unit_test(test_plt_shapes),
		cmocka_unit_test(test_plt_lies),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
