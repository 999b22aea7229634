// SPDX-License-Identifier: MIT
/*
 * ELF images for reports: symbols, build-id, offsets, bytes, DWARF lines.
 *
 * Files come from guests and may be hostile: every count, offset and index
 * is checked against what libelf says the file holds, and arithmetic on
 * file values is overflow-checked.  Anything unusable makes the open fail
 * with ENOEXEC and a reason; nothing here may crash on bad input (fuzzed by
 * tests/fuzz/fuzz-elf.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/array.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/sort.h"
#include "symbols/ehframe.h"
#include "symbols/elfimage.h"

#define ELFIMAGE_MAX_NAME	4096	/* longer symbol names are cut */
#define ELFIMAGE_MAX_ALIGN	(1u << 20)
#define ELFIMAGE_MAX_UNPACKED	(1ull << 30)	/* a decompressed kernel is ~60 MiB */
#define ELFIMAGE_MAX_MINIDEBUG	(64u << 20)	/* Fedora's are 0.1-2 MiB */

struct elfseg {
	uint64_t off, filesz, vaddr, memsz;
	int exec;		/* PF_X */
};

/* An allocated section with file bytes, at its address (see header). */
struct elfsect {
	uint64_t addr, size;
	size_t ndx;
	int exec;
};

struct lrow {
	uint64_t addr;
	uint32_t file;
	uint32_t line;
	int end;		/* end_sequence: no code at or past addr */
};

struct elfimage {
	char *name;
	int fd;
	void *mem;		/* copy of the bytes for elfimage_open_mem() */
	Elf *elf;
	int type;		/* ET_* */
	uint8_t build_id[64];
	size_t build_id_len;

	struct elfseg *segs;
	size_t nr_segs;
	/* The executable segment whose file bytes no earlier segment holds:
	 * tried first by elfimage_lookup_offset(), or -1. */
	long hot_seg;
	struct elfsect *sects;
	size_t nr_sects;

	struct elfsym *syms;
	size_t nr_syms;
	char *names;		/* all symbol names, NUL-separated */
	/* Lookup index: bucket b covers [lo + (b << shift), ...) and holds
	 * the last symbol starting at or below the bucket's start, with
	 * BUCKET_EXACT when every address of the bucket is that symbol's. */
	uint32_t *bucket;
	size_t nr_buckets;
	uint64_t bucket_lo, bucket_hi;
	unsigned bucket_shift;

	int has_symtab;		/* a .symtab, not just .dynsym */
	/* elfimage_frame_symbols(): its names, NUL-separated, and counts */
	char *frame_names;
	size_t frame_names_len;
	int frames_done;
	struct elfimage_frames frames;
	int debug_only;		/* a detached debug file: no code bytes, its
				 * segments' file offsets rebuilt */
	int minidebug;		/* symbols from .gnu_debugdata */

	/* DWARF, loaded on first use from dbg_elf or elf. */
	int dbg_fd;
	Elf *dbg_elf;
	void *dbg_mem;
	int lines_state;	/* 0 not tried, 1 loaded, -1 none */
	struct lrow *lines;
	size_t nr_lines;
	char **files;
	size_t nr_files;
};

void elfimage_close(struct elfimage *img)
{
	if (!img)
		return;
	for (size_t i = 0; i < img->nr_files; i++)
		free(img->files[i]);
	free(img->files);
	free(img->lines);
	if (img->dbg_elf)
		elf_end(img->dbg_elf);
	if (img->dbg_fd >= 0)
		close(img->dbg_fd);
	free(img->bucket);
	free(img->frame_names);
	free(img->names);
	free(img->syms);
	free(img->sects);
	free(img->segs);
	if (img->elf)
		elf_end(img->elf);
	if (img->fd >= 0)
		close(img->fd);
	free(img->mem);
	free(img->name);
	free(img);
}

/* ---- build-id ------------------------------------------------------------ */

static int scan_notes(struct elfimage *img, Elf_Data *data)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!data || !data->d_buf)
		return 0;
	while (off < data->d_size &&
	       (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    name_off + 4 <= data->d_size &&
		    !memcmp((char *)data->d_buf + name_off, "GNU", 4) &&
		    nh.n_descsz > 0 && nh.n_descsz <= sizeof(img->build_id) &&
		    desc_off <= data->d_size &&
		    nh.n_descsz <= data->d_size - desc_off) {
			memcpy(img->build_id, (char *)data->d_buf + desc_off, nh.n_descsz);
			img->build_id_len = nh.n_descsz;
			return 1;
		}
		if (next <= off)
			break;
		off = next;
	}
	return 0;
}

/* See hot_seg: taking it first gives what the in-order search gives. */
static void find_hot_seg(struct elfimage *img)
{
	img->hot_seg = -1;
	for (size_t i = 0; i < img->nr_segs; i++) {
		const struct elfseg *h = &img->segs[i];
		int shadowed = 0;

		if (!h->exec)
			continue;
		for (size_t j = 0; j < i; j++)
			if (img->segs[j].off < h->off + h->filesz &&
			    h->off < img->segs[j].off + img->segs[j].filesz)
				shadowed = 1;
		if (!shadowed)
			img->hot_seg = (long)i;
		return;
	}
}

static void load_build_id(struct elfimage *img)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t phnum;

	while ((scn = elf_nextscn(img->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		if (scan_notes(img, elf_getdata(scn, NULL)))
			return;
	}
	if (elf_getphdrnum(img->elf, &phnum))
		return;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(img->elf, i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (scan_notes(img, elf_getdata_rawchunk(img->elf, ph.p_offset,
							 ph.p_filesz, ELF_T_NHDR)))
			return;
	}
}

/* ---- segments and sections ------------------------------------------------- */

/*
 * A detached debug file (objcopy --only-keep-debug) keeps its binary's
 * program headers with the file offsets and sizes of the code gone: an
 * executable PT_LOAD with no file bytes, which no runnable binary has.
 * Samples hold the binary's file offsets, so the offsets are rebuilt as
 * GNU ld lays a binary out: a segment's offset is its address minus the
 * first segment's page-aligned address (every executable segment of the
 * 1,272 ELF files in a Debian 12 host's /usr/bin, /usr/sbin and
 * /usr/lib/x86_64-linux-gnu follows it).  A binary file, when one is
 * found, always wins over this (symbols/symres-user.c).
 */
static void rebuild_debug_layout(struct elfimage *img)
{
	uint64_t base;
	int debug = 0;

	for (size_t i = 0; i < img->nr_segs; i++)
		if (img->segs[i].exec && !img->segs[i].filesz && img->segs[i].memsz)
			debug = 1;
	if (!debug || img->type == ET_REL || !img->nr_segs)
		return;
	base = img->segs[0].vaddr;
	for (size_t i = 1; i < img->nr_segs; i++)
		if (img->segs[i].vaddr < base)
			base = img->segs[i].vaddr;
	base &= ~(uint64_t)4095;
	for (size_t i = 0; i < img->nr_segs; i++) {
		struct elfseg *g = &img->segs[i];
		uint64_t end;

		if (g->vaddr < base || __builtin_add_overflow(g->vaddr, g->memsz, &end)) {
			img->nr_segs = 0;	/* not a layout to guess from */
			return;
		}
		g->off = g->vaddr - base;
		g->filesz = g->memsz;
	}
	img->debug_only = 1;
}

static int load_segments(struct elfimage *img)
{
	size_t phnum;

	if (elf_getphdrnum(img->elf, &phnum) || phnum == 0)
		return 0;
	img->segs = calloc(phnum, sizeof(*img->segs));
	if (!img->segs)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		uint64_t end;

		if (!gelf_getphdr(img->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (__builtin_add_overflow(ph.p_offset, ph.p_filesz, &end) ||
		    __builtin_add_overflow(ph.p_vaddr, ph.p_filesz, &end))
			continue;
		img->segs[img->nr_segs++] = (struct elfseg){
			.off = ph.p_offset, .filesz = ph.p_filesz, .vaddr = ph.p_vaddr,
			.memsz = ph.p_memsz, .exec = !!(ph.p_flags & PF_X),
		};
	}
	rebuild_debug_layout(img);
	find_hot_seg(img);
	return 0;
}

static int is_init_section(const char *name)
{
	return name && !strncmp(name, ".init", 5);
}

/*
 * Allocated sections with their addresses.  For ET_REL this replays the
 * kernel's layout of a module's core text (kernel/module/main.c,
 * layout_sections(): executable, allocated, non-".init" sections in header
 * order, each aligned to sh_addralign), which gives every section its offset
 * from the core text base the guest reports.  sect_addr[ndx] receives each
 * section's address, or UINT64_MAX for sections outside the layout.
 */
struct secinfo {
	uint64_t addr, end;	/* addr UINT64_MAX: not laid out */
	int exec;
};

static int load_sections(struct elfimage *img, Elf *elf, struct secinfo **sect_addr_out,
			 size_t *shnum_out, char *err, size_t errlen)
{
	size_t shnum, shstrndx;
	uint64_t layout = 0;
	struct secinfo *sect_addr;
	Elf_Scn *scn = NULL;

	if (elf_getshdrnum(elf, &shnum)) {
		errbuf_set(err, errlen, "cannot read section headers: %s", elf_errmsg(-1));
		return -ENOEXEC;
	}
	if (elf_getshdrstrndx(elf, &shstrndx))
		shstrndx = SHN_UNDEF;
	sect_addr = malloc((shnum ? shnum : 1) * sizeof(*sect_addr));
	if (elf == img->elf)	/* the file's own bytes, not .gnu_debugdata's */
		img->sects = calloc(shnum ? shnum : 1, sizeof(*img->sects));
	if (!sect_addr || (elf == img->elf && !img->sects)) {
		free(sect_addr);
		return -ENOMEM;
	}
	for (size_t i = 0; i < shnum; i++)
		sect_addr[i].addr = UINT64_MAX;

	while ((scn = elf_nextscn(elf, scn))) {
		size_t ndx = elf_ndxscn(scn);
		const char *name;
		GElf_Shdr sh;
		uint64_t addr, end;
		int exec;

		if (ndx >= shnum || !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
			continue;
		exec = !!(sh.sh_flags & SHF_EXECINSTR);
		name = shstrndx != SHN_UNDEF ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (img->type == ET_REL) {
			uint64_t align = sh.sh_addralign ? sh.sh_addralign : 1;

			if (!exec || is_init_section(name))
				continue;
			if (align > ELFIMAGE_MAX_ALIGN || (align & (align - 1)))
				align = 1;
			if (__builtin_add_overflow(layout, align - 1, &addr))
				continue;
			addr &= ~(align - 1);
			if (__builtin_add_overflow(addr, sh.sh_size, &end))
				continue;
			layout = end;
		} else {
			addr = sh.sh_addr;
			if (__builtin_add_overflow(addr, sh.sh_size, &end))
				continue;
		}
		sect_addr[ndx] = (struct secinfo){ .addr = addr, .end = end, .exec = exec };
		if (sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED) ||
		    elf != img->elf)
			continue;
		img->sects[img->nr_sects++] = (struct elfsect){
			.addr = addr, .size = sh.sh_size, .ndx = ndx, .exec = exec,
		};
	}
	*sect_addr_out = sect_addr;
	*shnum_out = shnum;
	return 0;
}

/* ---- symbols -------------------------------------------------------------- */

struct rawsym {
	uint64_t addr, size;
	size_t name;		/* offset into the names buffer */
	int score;		/* which alias wins at one address */
	uint64_t sect_end;	/* end of the containing section */
};

struct namebuf {
	char *buf;
	size_t len, cap;
};

static long namebuf_add(struct namebuf *nb, const char *s)
{
	size_t n = strnlen(s, ELFIMAGE_MAX_NAME);
	size_t off = nb->len;

	if (nb->len + n + 1 > nb->cap) {
		size_t cap = nb->cap ? nb->cap * 2 : 4096;
		char *p;

		while (cap < nb->len + n + 1)
			cap *= 2;
		p = realloc(nb->buf, cap);
		if (!p)
			return -ENOMEM;
		nb->buf = p;
		nb->cap = cap;
	}
	memcpy(nb->buf + nb->len, s, n);
	nb->buf[nb->len + n] = '\0';
	nb->len += n + 1;
	return (long)off;
}

/* The byte of a raw symbol a radix pass sorts by: shift < 0 the score,
 * best first; else that byte of the address. */
static unsigned rawsym_byte(const struct rawsym *r, int shift)
{
	if (shift < 0)
		return 255u - (unsigned)(r->score < 0 ? 0 : r->score > 255 ? 255 : r->score);
	return (unsigned)(r->addr >> shift) & 0xff;
}

/* One stable counting-sort pass of the indices a[0..n) through t. */
static void rawsym_pass(const struct rawsym *raw, uint32_t *a, uint32_t *t, size_t n, int shift)
{
	size_t cnt[256] = { 0 }, sum = 0;

	for (size_t i = 0; i < n; i++)
		cnt[rawsym_byte(&raw[a[i]], shift)]++;
	for (size_t b = 0; b < 256; b++) {
		size_t c = cnt[b];

		cnt[b] = sum;
		sum += c;
	}
	for (size_t i = 0; i < n; i++)
		t[cnt[rawsym_byte(&raw[a[i]], shift)]++] = a[i];
	memcpy(a, t, n * sizeof(*a));
}

/*
 * raw[0..n) by address, the best-scored alias first, table order among
 * equals (what a stable sort by address and score gives).  Opening the 300
 * images of a large report sorted 200 k raw symbols: qsort() was half of
 * loading an image.  An LSD radix sort of indices instead: the score, then
 * only the address bytes that differ between symbols (two or three).
 * 0 or -ENOMEM.
 */
/* raw[i]'s order key without its index: address offset from lo, then
 * the score's byte (higher scores first). */
static uint64_t rawsym_key(const struct rawsym *r, uint64_t lo)
{
	return (r->addr - lo) << 8 | rawsym_byte(r, -1);
}

/*
 * raw sorted by address, then score (higher first), stably.  When the
 * address span, the score byte and an index fit in 64 bits (every image
 * but a corrupt one), one packed key a symbol through sort_radix_u64(),
 * not a pass per byte through an index array.
 */
static int rawsym_sort(struct rawsym **raw, size_t n)
{
	uint32_t *a = malloc(2 * n * sizeof(*a));
	struct rawsym *out = malloc(n * sizeof(*out));
	uint64_t *key = malloc(2 * n * sizeof(*key));
	uint64_t diff = 0, lo = n ? (*raw)[0].addr : 0, span = 0;
	unsigned ib = n > 1 ? 64 - (unsigned)__builtin_clzll((uint64_t)n - 1) : 1;
	int scores = 0;

	if (!a || !out || !key || n > UINT32_MAX) {
		free(a);
		free(out);
		free(key);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		a[i] = (uint32_t)i;
		diff |= (*raw)[i].addr ^ (*raw)[0].addr;
		scores |= (*raw)[i].score != (*raw)[0].score;
		if ((*raw)[i].addr < lo)
			lo = (*raw)[i].addr;
	}
	for (size_t i = 0; i < n; i++)
		if ((*raw)[i].addr - lo > span)
			span = (*raw)[i].addr - lo;
	if ((span ? 64 - (unsigned)__builtin_clzll(span) : 0) + 8 + ib <= 64) {
		uint64_t *k;

		for (size_t i = 0; i < n; i++)
			key[i] = rawsym_key(&(*raw)[i], lo) << ib | i;
		k = sort_radix_u64(key, key + n, n, ib);
		for (size_t i = 0; i < n; i++)
			out[i] = (*raw)[k[i] & ((1ull << ib) - 1)];
	} else {
		if (scores)
			rawsym_pass(*raw, a, a + n, n, -1);
		for (int shift = 0; shift < 64; shift += 8)
			if ((diff >> shift) & 0xff)
				rawsym_pass(*raw, a, a + n, n, shift);
		for (size_t i = 0; i < n; i++)
			out[i] = (*raw)[a[i]];
	}
	free(a);
	free(key);
	free(*raw);
	*raw = out;
	return 0;
}

static int sym_wanted(const GElf_Sym *s, const char *name)
{
	int type = GELF_ST_TYPE(s->st_info);

	if (!name || !*name || name[0] == '$' || !strncmp(name, ".L", 2))
		return 0;
	return type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE;
}

static int sym_score(const GElf_Sym *s, int is_symtab)
{
	int score = 0;

	switch (GELF_ST_TYPE(s->st_info)) {
	case STT_FUNC:
	case STT_GNU_IFUNC:
		score += 8;
		break;
	default:
		break;
	}
	switch (GELF_ST_BIND(s->st_info)) {
	case STB_GLOBAL:
		score += 4;
		break;
	case STB_WEAK:
		score += 2;
		break;
	default:
		break;
	}
	if (s->st_size)
		score += 16;
	return score + is_symtab;
}

/* A symbol table's string table as one checked block: its strings then
 * read in place, not through elf_strptr()'s checks per name (a sixth of
 * loading an image's symbols).  NULL when it is not one block ending in a
 * NUL: elf_strptr() then. */
static const char *strtab_block(Elf *elf, size_t ndx, size_t *len)
{
	Elf_Scn *scn = elf_getscn(elf, ndx);
	Elf_Data *d = scn ? elf_rawdata(scn, NULL) : NULL;
	GElf_Shdr sh;

	if (!d || !d->d_buf || !d->d_size || elf_rawdata(scn, d) ||
	    !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB ||
	    ((const char *)d->d_buf)[d->d_size - 1] != '\0')
		return NULL;
	*len = d->d_size;
	return d->d_buf;
}

/* Symbol i of data: in place when the table holds the host's Elf64_Sym
 * (a 64-bit image, translated or native), else through gelf_getsym(). */
static inline bool symtab_get(Elf_Data *data, const Elf64_Sym *native, size_t i, GElf_Sym *s)
{
	if (native) {
		*s = native[i];
		return true;
	}
	return gelf_getsym(data, (int)i, s) != NULL;
}

static int load_symtab(struct elfimage *img, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
		       const struct secinfo *sect_addr, size_t shnum,
		       struct rawsym **raw, size_t *nr, size_t *cap, struct namebuf *nb)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t entsz = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT), strsz = 0;
	const char *strs = strtab_block(elf, sh->sh_link, &strsz);
	const Elf64_Sym *native = NULL;
	size_t count;

	if (!data || !data->d_buf || !entsz)
		return 0;
	count = data->d_size / entsz;
	if (gelf_getclass(elf) == ELFCLASS64 && data->d_type == ELF_T_SYM &&
	    entsz == sizeof(Elf64_Sym))
		native = data->d_buf;
	for (size_t i = 1; i < count; i++) {
		GElf_Sym s;
		const char *name;
		uint64_t addr, base, end;
		long off;

		if (!symtab_get(data, native, i, &s) || i > INT32_MAX)
			break;
		if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE ||
		    s.st_shndx >= shnum || sect_addr[s.st_shndx].addr == UINT64_MAX ||
		    !sect_addr[s.st_shndx].exec)
			continue;
		if (strs)
			name = s.st_name < strsz ? strs + s.st_name : NULL;
		else
			name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (!sym_wanted(&s, name))
			continue;

		/* The symbol must fall in an executable section. */
		base = img->type == ET_REL ? sect_addr[s.st_shndx].addr : 0;
		if (__builtin_add_overflow(base, s.st_value, &addr))
			continue;
		end = sect_addr[s.st_shndx].end;
		if (addr >= end || addr < sect_addr[s.st_shndx].addr)
			continue;

		if (*nr + 1 > *cap && array_grow(raw, cap, *nr + 1, sizeof(**raw), 1024))
			return -ENOMEM;
		off = namebuf_add(nb, name);
		if (off < 0)
			return (int)off;
		(*raw)[(*nr)++] = (struct rawsym){
			.addr = addr, .size = s.st_size, .name = (size_t)off,
			.score = sym_score(&s, sh->sh_type == SHT_SYMTAB),
			.sect_end = end,
		};
	}
	return 0;
}

#define BUCKET_EXACT	0x80000000u

/*
 * Reports look up millions of sample offsets in the same few images: a
 * bucket array over the symbols' address span turns the binary search into
 * one index and a step or two.  Sized to about eight buckets per symbol
 * (bench-report: 17 % fewer instructions in the lookups than four, for 4 %
 * more memory in the report); an image whose span is too sparse for that
 * (or any allocation failure) just keeps the binary search.
 */
/* Buckets from b on that lie wholly inside symbol k (the last one starting
 * at or below bucket b's start) and in which no other symbol starts: every
 * lookup there answers k.  Their count (0: bucket b is not one). */
static size_t exact_run(const struct elfimage *img, size_t k, uint64_t start, unsigned shift)
{
	const struct elfsym *s = &img->syms[k];
	uint64_t limit;

	if (s->addr > start || __builtin_add_overflow(s->addr, s->size, &limit))
		return 0;
	if (k + 1 < img->nr_syms && img->syms[k + 1].addr < limit)
		limit = img->syms[k + 1].addr;
	return limit > start ? (size_t)((limit - start) >> shift) : 0;
}

static void build_index(struct elfimage *img)
{
	uint64_t span, want;
	unsigned shift = 0;
	size_t n, k = 0;

	if (img->nr_syms < 16 || img->nr_syms >= BUCKET_EXACT)
		return;
	img->bucket_hi = 0;
	for (size_t i = 0; i < img->nr_syms; i++) {
		uint64_t end;

		if (__builtin_add_overflow(img->syms[i].addr, img->syms[i].size, &end))
			return;
		if (end > img->bucket_hi)
			img->bucket_hi = end;
	}
	img->bucket_lo = img->syms[0].addr;
	span = img->bucket_hi - img->bucket_lo;
	want = (uint64_t)img->nr_syms * 8;
	while (shift < 63 && (span >> shift) > want)
		shift++;
	n = (size_t)(span >> shift) + 1;
	img->bucket = malloc(n * sizeof(*img->bucket));
	if (!img->bucket)
		return;
	for (size_t b = 0; b < n;) {
		uint64_t start = img->bucket_lo + ((uint64_t)b << shift);
		size_t run;

		while (k + 1 < img->nr_syms && img->syms[k + 1].addr <= start)
			k++;
		/* a symbol's inner buckets in one fill: most of them */
		run = exact_run(img, k, start, shift);
		if (run > n - b)
			run = n - b;
		for (size_t e = b + run; b < e; b++)
			img->bucket[b] = (uint32_t)k | BUCKET_EXACT;
		if (!run)
			img->bucket[b++] = (uint32_t)k;
	}
	img->nr_buckets = n;
	img->bucket_shift = shift;
}

/* .gnu_debugdata's xz stream unpacked into *buf (malloc'd), *len bytes:
 * 0, or -ENOENT (none), -ENOEXEC (corrupt, too large) or -ENOMEM. */
static int unpack_minidebug(struct elfimage *img, void **buf, size_t *len)
{
	lzma_stream zs = LZMA_STREAM_INIT;
	size_t shstrndx, cap = 1 << 16;
	Elf_Scn *scn = NULL;
	Elf_Data *d = NULL;
	uint8_t *out;
	lzma_ret lr;

	if (elf_getshdrstrndx(img->elf, &shstrndx))
		return -ENOENT;
	while (!d && (scn = elf_nextscn(img->elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(img->elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".gnu_debugdata"))
			d = elf_rawdata(scn, NULL);
	}
	if (!d || !d->d_buf || !d->d_size)
		return -ENOENT;
	if (lzma_stream_decoder(&zs, ELFIMAGE_MAX_MINIDEBUG, 0) != LZMA_OK)
		return -ENOMEM;
	out = malloc(cap);
	zs.next_in = d->d_buf;
	zs.avail_in = d->d_size;
	for (lr = LZMA_OK; out && lr == LZMA_OK;) {
		if (zs.total_out == cap) {
			uint8_t *n = cap < ELFIMAGE_MAX_MINIDEBUG ? realloc(out, cap * 2) : NULL;

			if (!n)
				break;
			out = n;
			cap *= 2;
		}
		zs.next_out = out + zs.total_out;
		zs.avail_out = cap - zs.total_out;
		lr = lzma_code(&zs, LZMA_FINISH);
	}
	*len = zs.total_out;
	lzma_end(&zs);
	if (lr != LZMA_STREAM_END) {
		free(out);
		return out ? -ENOEXEC : -ENOMEM;
	}
	*buf = out;
	return 0;
}

/* Symbols being gathered from one or more tables, before sorting. */
struct rawsyms {
	struct rawsym *raw;
	size_t nr, cap;
	struct namebuf nb;
};

/* Every symbol table of elf (the file's, or its .gnu_debugdata's) into rs.
 * Returns 0 or -ENOMEM. */
static int gather_syms(struct elfimage *img, Elf *elf, const struct secinfo *sect_addr,
		       size_t shnum, struct rawsyms *rs)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		int ret;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		ret = load_symtab(img, elf, scn, &sh, sect_addr, shnum, &rs->raw, &rs->nr,
				  &rs->cap, &rs->nb);
		if (ret)
			return ret;
		if (sh.sh_type == SHT_SYMTAB)
			img->has_symtab = 1;
	}
	return 0;
}

/*
 * The PLT's stubs have no symbol in any table, yet short-lived programs
 * spend samples there (libc calls its own ifunc'd functions through its
 * .plt: 8 of 404 libc samples on a booting Debian guest).  Each executable
 * .plt* section becomes one symbol named after it ("[.plt]", as perf
 * does), with the lowest score: a real symbol at its address wins.  A file
 * with no other symbol stays without, but for SHT_NOBITS ones: the PLT
 * found in guest memory (vmm/introspect/memsyms.h) of a binary that exports
 * no function, where they are all the names there are.  Returns 0 or
 * -ENOMEM.
 */
static int gather_plt(struct elfimage *img, struct rawsyms *rs)
{
	bool nobits_only = !rs->nr;
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (img->type == ET_REL || elf_getshdrstrndx(img->elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(img->elf, scn))) {
		char label[32];
		const char *name;
		GElf_Shdr sh;
		uint64_t end;
		long off;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) ||
		    !(sh.sh_flags & SHF_ALLOC) || !sh.sh_size ||
		    (nobits_only && sh.sh_type != SHT_NOBITS) ||
		    __builtin_add_overflow(sh.sh_addr, sh.sh_size, &end))
			continue;
		name = elf_strptr(img->elf, shstrndx, sh.sh_name);
		if (!name || strncmp(name, ".plt", 4) || strlen(name) > 12)
			continue;
		snprintf(label, sizeof(label), "[%s]", name);
		if (rs->nr + 1 > rs->cap && array_grow(&rs->raw, &rs->cap, rs->nr + 1,
						      sizeof(*rs->raw), 1024))
			return -ENOMEM;
		off = namebuf_add(&rs->nb, label);
		if (off < 0)
			return (int)off;
		rs->raw[rs->nr++] = (struct rawsym){
			.addr = sh.sh_addr, .size = sh.sh_size, .name = (size_t)off,
			.score = 0, .sect_end = end,
		};
	}
	return 0;
}

/*
 * MiniDebugInfo (Fedora's find-debuginfo, GDB's "mini debuginfo"): a binary
 * stripped of .symtab may carry .gnu_debugdata, an xz-compressed ELF with
 * the function symbols .dynsym lacks and the binary's section headers (as
 * NOBITS).  Its symbols join .dynsym's.  The file may be hostile: the
 * compressed bytes are bounded by the section, the unpacked ones by
 * ELFIMAGE_MAX_MINIDEBUG and liblzma's memory limit; a bad one is ignored
 * (.dynsym's names stay).  Returns 0 or -ENOMEM.
 */
static int gather_minidebug(struct elfimage *img, struct rawsyms *rs)
{
	struct secinfo *msect = NULL;
	size_t len = 0, mshnum = 0;
	void *buf = NULL;
	Elf *mini = NULL;
	int ret = 0;

	if (img->has_symtab || unpack_minidebug(img, &buf, &len))
		return 0;
	mini = elf_memory(buf, len);
	if (!mini || elf_kind(mini) != ELF_K_ELF ||
	    load_sections(img, mini, &msect, &mshnum, NULL, 0))
		goto out;
	ret = gather_syms(img, mini, msect, mshnum, rs);
	if (!ret && img->has_symtab)
		img->minidebug = 1;
out:
	free(msect);
	if (mini)
		elf_end(mini);
	free(buf);
	return ret;
}

static int load_symbols(struct elfimage *img, const struct secinfo *sect_addr, size_t shnum)
{
	struct rawsyms rs = { 0 };
	struct rawsym *raw = NULL;
	size_t nr = 0, out = 0;
	struct namebuf nb = { 0 };
	int ret;

	ret = gather_syms(img, img->elf, sect_addr, shnum, &rs);
	if (!ret)
		ret = gather_minidebug(img, &rs);
	if (!ret)
		ret = gather_plt(img, &rs);
	raw = rs.raw;
	nr = rs.nr;
	nb = rs.nb;
	if (ret)
		goto out;
	if (nr == 0)
		goto out;
	ret = rawsym_sort(&raw, nr);
	if (ret)
		goto out;

	img->syms = calloc(nr, sizeof(*img->syms));
	if (!img->syms) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nr; i++) {
		uint64_t next_addr, size;

		if (out && img->syms[out - 1].addr == raw[i].addr)
			continue;	/* an alias of the best-scored symbol */
		next_addr = raw[i].sect_end;
		for (size_t j = i + 1; j < nr; j++) {
			if (raw[j].addr != raw[i].addr) {
				if (raw[j].addr < next_addr)
					next_addr = raw[j].addr;
				break;
			}
		}
		size = raw[i].size;
		/* Unsized symbols (assembly) reach the next symbol or the end of
		 * their section. */
		if (!size)
			size = next_addr - raw[i].addr;
		if (!size)
			size = 1;
		img->syms[out++] = (struct elfsym){
			.addr = raw[i].addr, .size = size,
			.name = (const char *)(uintptr_t)raw[i].name,
		};
	}
	img->nr_syms = out;
	img->names = nb.buf;
	nb.buf = NULL;
	for (size_t i = 0; i < out; i++)
		img->syms[i].name = img->names + (size_t)(uintptr_t)img->syms[i].name;
	build_index(img);
out:
	free(nb.buf);
	free(raw);
	return ret;
}

/* ---- functions from .eh_frame ---------------------------------------------- */

static int range_cmp(const void *a, const void *b)
{
	const struct ehframe_range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;	/* the widest first */
}

/*
 * fr[0..n) by start, the widest first among equal starts.  Objects'
 * FDEs come in link order, not address order: one packed key a range
 * (start, index) through sort_radix_u64(), as the symbols are sorted,
 * where qsort() was a third of splitting python3.11; qsort() when the
 * span and an index do not fit 64 bits (a corrupt file).  0 or -ENOMEM.
 */
static int ranges_sort(struct ehframe_range **fr, size_t n)
{
	unsigned ib = n > 1 ? 64 - (unsigned)__builtin_clzll((uint64_t)n - 1) : 1;
	uint64_t lo = UINT64_MAX, span = 0, *key, *k;
	struct ehframe_range *out;

	for (size_t i = 0; i < n; i++)
		lo = (*fr)[i].start < lo ? (*fr)[i].start : lo;
	for (size_t i = 0; i < n; i++)
		span = (*fr)[i].start - lo > span ? (*fr)[i].start - lo : span;
	if (n < 2 || n > UINT32_MAX || (span ? 64 - (unsigned)__builtin_clzll(span) : 0) + ib > 64) {
		if (n > 1)
			qsort(*fr, n, sizeof(**fr), range_cmp);
		return 0;
	}
	key = malloc(2 * n * sizeof(*key));
	out = malloc(n * sizeof(*out));
	if (!key || !out) {
		free(key);
		free(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		key[i] = ((*fr)[i].start - lo) << ib | i;
	k = sort_radix_u64(key, key + n, n, ib);
	for (size_t i = 0; i < n; i++)
		out[i] = (*fr)[k[i] & ((1ull << ib) - 1)];
	/* equal starts: the widest first (a short run each, if any) */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && out[j].start == out[j - 1].start &&
		     out[j].end > out[j - 1].end; j--) {
			struct ehframe_range t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	free(key);
	free(*fr);
	*fr = out;
	return 0;
}

/* The end of the executable section holding addr, or 0: code only. */
static uint64_t exec_end(const struct elfimage *img, uint64_t addr)
{
	for (size_t i = 0; i < img->nr_sects; i++) {
		const struct elfsect *se = &img->sects[i];

		if (se->exec && addr >= se->addr && addr - se->addr < se->size)
			return se->addr + se->size;
	}
	return 0;
}

/*
 * fr[0..n), sorted, down to the functions no symbol names, in place: a
 * range must start in an executable section, where no symbol covers it
 * and no kept range does (a nested or repeated FDE), and ends at its
 * section's end or the next symbol, whichever comes first.  Lookups then
 * answer for every old symbol what they answered before.  The count kept.
 */
static size_t frames_keep(const struct elfimage *img, struct ehframe_range *fr, size_t n)
{
	size_t out = 0, j = 0;
	uint64_t kept_end = 0;

	for (size_t i = 0; i < n; i++) {
		struct ehframe_range r = fr[i];
		uint64_t lim = exec_end(img, r.start);

		if (!lim || (out && r.start < kept_end) ||
		    elfsym_lookup(img->syms, img->nr_syms, r.start) >= 0)
			continue;
		while (j < img->nr_syms && img->syms[j].addr <= r.start)
			j++;
		if (j < img->nr_syms && img->syms[j].addr < lim)
			lim = img->syms[j].addr;
		if (r.end > lim)
			r.end = lim;
		fr[out++] = r;
		kept_end = r.end;
	}
	return out;
}

/* "<label>+0x<hex addr>" into out (lab + 20 bytes): by hand, not
 * snprintf(), which was 40 % of splitting python3.11's 10 k functions. */
static void frame_name(char *out, const char *label, size_t lab, uint64_t addr)
{
	static const char hex[] = "0123456789abcdef";
	char digits[16];
	int n = 0;

	memcpy(out, label, lab);
	memcpy(out + lab, "+0x", 3);
	out += lab + 3;
	do {
		digits[n++] = hex[addr & 15];
		addr >>= 4;
	} while (addr);
	while (n)
		*out++ = digits[--n];
	*out = '\0';
}

/* The symbols and the kept ranges fr[0..n) merged by address into a new
 * table, the ranges named into one buffer.  0 or -ENOMEM. */
static int frames_merge(struct elfimage *img, const struct ehframe_range *fr, size_t n,
			const char *label)
{
	size_t lab = strnlen(label, ELFIMAGE_MAX_LABEL), each = lab + 20, i = 0, j = 0, k = 0;
	struct elfsym *syms = calloc(img->nr_syms + n, sizeof(*syms));
	char *names = malloc(n * each);

	if (!syms || !names) {
		free(syms);
		free(names);
		return -ENOMEM;
	}
	while (i < img->nr_syms || j < n) {
		if (j == n || (i < img->nr_syms && img->syms[i].addr < fr[j].start)) {
			syms[k++] = img->syms[i++];
			continue;
		}
		frame_name(names + j * each, label, lab, fr[j].start);
		syms[k++] = (struct elfsym){
			.addr = fr[j].start, .size = fr[j].end - fr[j].start,
			.name = names + j * each,
		};
		j++;
	}
	free(img->syms);
	free(img->bucket);
	img->bucket = NULL;
	img->nr_buckets = 0;
	img->syms = syms;
	img->nr_syms = k;
	img->frame_names = names;
	img->frame_names_len = n * each;
	build_index(img);
	return 0;
}

long elfimage_frame_symbols(struct elfimage *img, const char *label,
			    struct elfimage_frames *st)
{
	struct ehframe_range *fr = NULL;
	struct ehframe_stats es;
	size_t n = 0;
	int ret;

	if (!img->frames_done && (img->type == ET_EXEC || img->type == ET_DYN)) {
		ret = ehframe_ranges(img->elf, ELFIMAGE_MAX_FRAMES, &fr, &n, &es);
		if (ret)
			return ret;
		ret = ranges_sort(&fr, n);
		if (ret) {
			free(fr);
			return ret;
		}
		img->frames = (struct elfimage_frames){
			.fdes = es.fdes, .refused = es.refused, .cut = es.cut,
		};
		n = frames_keep(img, fr, n);
		ret = n ? frames_merge(img, fr, n, label ? label : "") : 0;
		free(fr);
		if (ret)
			return ret;
		img->frames.added = n;
	}
	img->frames_done = 1;
	if (st)
		*st = img->frames;
	return (long)img->frames.added;
}

size_t elfimage_nr_frame_syms(const struct elfimage *img)
{
	return img->frames.added;
}

int elfimage_sym_frame(const struct elfimage *img, const struct elfsym *s)
{
	/* their names, and only theirs, are in frame_names */
	return img->frame_names &&
	       (uintptr_t)s->name - (uintptr_t)img->frame_names < img->frame_names_len;
}

/* ---- open ----------------------------------------------------------------- */

static struct elfimage *image_load(struct elfimage *img, char *err, size_t errlen)
{
	struct secinfo *sect_addr = NULL;
	size_t shnum = 0;
	GElf_Ehdr eh;
	int ret;

	if (!img->elf) {
		errbuf_set(err, errlen, "%s: %s", img->name, elf_errmsg(-1));
		ret = -ENOEXEC;
		goto fail;
	}
	if (elf_kind(img->elf) != ELF_K_ELF || !gelf_getehdr(img->elf, &eh)) {
		errbuf_set(err, errlen, "%s: not an ELF file", img->name);
		ret = -ENOEXEC;
		goto fail;
	}
	img->type = eh.e_type;
	if (img->type != ET_EXEC && img->type != ET_DYN && img->type != ET_REL) {
		errbuf_set(err, errlen, "%s: ELF type %d has no code to report on",
			    img->name, img->type);
		ret = -ENOEXEC;
		goto fail;
	}
	load_build_id(img);
	ret = load_segments(img);
	if (ret)
		goto fail;
	ret = load_sections(img, img->elf, &sect_addr, &shnum, err, errlen);
	if (ret)
		goto fail;
	ret = load_symbols(img, sect_addr, shnum);
	free(sect_addr);
	if (ret) {
		errbuf_set(err, errlen, "%s: cannot load symbols: %s", img->name, strerror(-ret));
		goto fail;
	}
	return img;
fail:
	elfimage_close(img);
	errno = -ret;
	return NULL;
}

static struct elfimage *image_alloc(const char *name)
{
	struct elfimage *img = calloc(1, sizeof(*img));

	if (!img)
		return NULL;
	img->fd = -1;
	img->hot_seg = -1;
	img->dbg_fd = -1;
	img->name = strdup(name ? name : "(memory)");
	if (!img->name) {
		free(img);
		return NULL;
	}
	elf_version(EV_CURRENT);
	return img;
}

/*
 * A compressed ELF: a kernel bzImage (vmlinuz) or a .ko.xz/.gz/.zst.
 * libdwfl knows how to unpack both; the unpacked bytes are copied into the
 * image and parsed like any other ELF in memory.  Returns 0 or -errno.
 */
static int unpack(struct elfimage *img, int fd)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
	};
	Dwfl *dwfl = dwfl_begin(&cb);
	Dwfl_Module *m;
	GElf_Addr bias;
	size_t size = 0;
	char *raw;
	Elf *e;
	int dfd, ret = -ENOEXEC;

	if (!dwfl)
		return -ENOMEM;
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);	/* libdwfl closes what it gets */
	if (dfd < 0) {
		ret = -errno;
		goto out;
	}
	m = dwfl_report_offline(dwfl, img->name, img->name, dfd);
	e = m ? dwfl_module_getelf(m, &bias) : NULL;
	raw = e ? elf_rawfile(e, &size) : NULL;
	if (!raw || !size || size > ELFIMAGE_MAX_UNPACKED)
		goto out;
	img->mem = malloc(size);
	if (!img->mem) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(img->mem, raw, size);
	img->elf = elf_memory(img->mem, size);
	ret = img->elf ? 0 : -ENOEXEC;
out:
	dwfl_end(dwfl);
	return ret;
}

int elfimage_fd_is_plain(int fd)
{
	unsigned char magic[SELFMAG];

	return pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
	       !memcmp(magic, ELFMAG, SELFMAG);
}

struct elfimage *elfimage_open_fd(int fd, const char *name, char *err, size_t errlen)
{
	struct elfimage *img = image_alloc(name);

	if (!img) {
		close(fd);
		errbuf_set(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	img->fd = fd;
	img->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (img->elf && elf_kind(img->elf) != ELF_K_ELF) {
		elf_end(img->elf);
		img->elf = NULL;
		unpack(img, fd);
	}
	return image_load(img, err, errlen);
}

struct elfimage *elfimage_open(const char *path, char *err, size_t errlen)
{
	int fd = fs_open_regular(path, 0);	/* a FIFO must not hang us */

	if (fd < 0) {
		int e = -fd;

		errbuf_set(err, errlen, "%s: %s", path,
			    e == EINVAL ? "not a regular file" : strerror(e));
		errno = e;
		return NULL;
	}
	return elfimage_open_fd(fd, path, err, errlen);
}

struct elfimage *elfimage_open_mem(const void *buf, size_t len, char *err, size_t errlen)
{
	struct elfimage *img = image_alloc(NULL);

	if (!img) {
		errbuf_set(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	/* libelf may convert data in place: give it a private copy. */
	img->mem = malloc(len ? len : 1);
	if (!img->mem) {
		elfimage_close(img);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(img->mem, buf, len);
	img->elf = elf_memory(img->mem, len);
	return image_load(img, err, errlen);
}

/* ---- queries -------------------------------------------------------------- */

const char *elfimage_name(const struct elfimage *img)
{
	return img->name;
}

int elfimage_is_module(const struct elfimage *img)
{
	return img->type == ET_REL;
}

const uint8_t *elfimage_build_id(const struct elfimage *img, size_t *len)
{
	*len = img->build_id_len;
	return img->build_id_len ? img->build_id : NULL;
}

int elfimage_offset_to_addr(const struct elfimage *img, uint64_t off, uint64_t *addr)
{
	if (img->type == ET_REL) {
		*addr = off;
		return 0;
	}
	for (size_t i = 0; i < img->nr_segs; i++) {
		const struct elfseg *s = &img->segs[i];

		if (off >= s->off && off - s->off < s->filesz) {
			*addr = s->vaddr + (off - s->off);
			return 0;
		}
	}
	return -ENOENT;
}

int elfimage_addr_to_offset(const struct elfimage *img, uint64_t addr, uint64_t *off)
{
	if (img->type == ET_REL) {
		*off = addr;
		return 0;
	}
	for (size_t i = 0; i < img->nr_segs; i++) {
		const struct elfseg *s = &img->segs[i];

		if (addr >= s->vaddr && addr - s->vaddr < s->filesz) {
			*off = s->off + (addr - s->vaddr);
			return 0;
		}
	}
	return -ENOENT;
}

int elfimage_exec_span(const struct elfimage *img, uint64_t *start, uint64_t *end,
		       uint64_t *off)
{
	int found = 0;

	for (size_t i = 0; i < img->nr_segs; i++) {
		const struct elfseg *s = &img->segs[i];

		if (!s->exec)
			continue;
		if (!found || s->vaddr < *start) {
			*start = s->vaddr;
			*off = s->off;
		}
		if (!found || s->vaddr + s->filesz > *end)
			*end = s->vaddr + s->filesz;
		found = 1;
	}
	return found ? 0 : -ENOENT;
}

size_t elfimage_nr_syms(const struct elfimage *img)
{
	return img->nr_syms;
}

const struct elfsym *elfimage_sym(const struct elfimage *img, size_t i)
{
	return i < img->nr_syms ? &img->syms[i] : NULL;
}

long elfsym_lookup(const struct elfsym *syms, size_t n, uint64_t addr)
{
	size_t i = SORT_UPPER(syms, n, addr, addr);

	/* the last symbol starting at or below addr, if addr is inside it */
	if (i == 0 || addr - syms[i - 1].addr >= syms[i - 1].size)
		return -1;
	return (long)(i - 1);
}

/* The bucket index's answer for addr (see build_index()). */
static inline long bucket_lookup(const struct elfimage *img, uint64_t addr)
{
	size_t b, i;

	if (addr < img->bucket_lo || addr >= img->bucket_hi)
		return -1;
	b = (size_t)((addr - img->bucket_lo) >> img->bucket_shift);
	if (b >= img->nr_buckets)
		return -1;
	i = img->bucket[b] & ~BUCKET_EXACT;
	while (i + 1 < img->nr_syms && img->syms[i + 1].addr <= addr)
		i++;
	if (img->syms[i].addr > addr || addr - img->syms[i].addr >= img->syms[i].size)
		return -1;
	return (long)i;
}

long elfimage_lookup(const struct elfimage *img, uint64_t addr)
{
	if (img->bucket)
		return bucket_lookup(img, addr);
	return elfsym_lookup(img->syms, img->nr_syms, addr);
}

long elfimage_lookup_offset(const struct elfimage *img, uint64_t off, uint64_t *addr)
{
	const struct elfseg *h = img->hot_seg >= 0 ? &img->segs[img->hot_seg] : NULL;

	if (img->type != ET_REL && h && off >= h->off && off - h->off < h->filesz)
		*addr = h->vaddr + (off - h->off);
	else if (elfimage_offset_to_addr(img, off, addr))
		return -2;
	return elfimage_lookup(img, *addr);
}

/*
 * The report's inner loop: millions of offsets into one image.  The hot
 * segment and the bucket index are read into locals once a batch: idx
 * (long) may alias the image's fields (uint64_t), so the compiler would
 * reload each of them after every store.  Same answers as
 * elfimage_lookup_offset() (tests/unit/test-elfimage.c compares them).
 */
void elfimage_lookup_offsets(const struct elfimage *img, const uint64_t *offs, long *idx,
			     size_t n)
{
	const struct elfseg *h = img->hot_seg >= 0 ? &img->segs[img->hot_seg] : NULL;
	const struct elfsym *syms = img->syms;
	const uint32_t *bucket = img->bucket;
	uint64_t seg_off, seg_len, seg_vaddr, lo, hi, a, a_lo, a_hi, o_lo, o_len, a_off, rel;
	size_t ns = img->nr_syms;
	unsigned shift = img->bucket_shift;

	if (!bucket || img->type == ET_REL || !h) {
		for (size_t k = 0; k < n; k++) {
			idx[k] = elfimage_lookup_offset(img, offs[k], &a);
			if (idx[k] < -1)
				idx[k] = -1;
		}
		return;
	}
	seg_off = h->off;
	seg_len = h->filesz;
	seg_vaddr = h->vaddr;
	lo = img->bucket_lo;
	hi = img->bucket_hi;
	/* The offsets whose address is in [lo, hi): one unsigned compare. */
	a_lo = seg_vaddr > lo ? seg_vaddr : lo;
	a_hi = seg_len > UINT64_MAX - seg_vaddr ? UINT64_MAX : seg_vaddr + seg_len;
	if (a_hi > hi)
		a_hi = hi;
	o_lo = seg_off + (a_lo - seg_vaddr);
	o_len = a_hi > a_lo ? a_hi - a_lo : 0;
	if (seg_len > UINT64_MAX - seg_off)
		o_len = 0;	/* a corrupt segment: every offset the slow way */
	a_off = a_lo - o_lo;	/* offset -> address, modulo 2^64 */
	rel = a_off - lo;	/* offset -> address - lo */
	for (size_t k = 0; k < n; k++) {
		uint64_t o = offs[k];
		size_t i;
		uint32_t u;
		long r = -1;

		if (o - o_lo < o_len) {
			/* an address in [a_lo, a_hi) is in [lo, hi): its
			 * bucket exists */
			u = bucket[(size_t)((o + rel) >> shift)];
			if (u & BUCKET_EXACT) {
				idx[k] = (long)(u & ~BUCKET_EXACT);
				continue;
			}
			a = o + a_off;
			i = u;
			while (i + 1 < ns && syms[i + 1].addr <= a)
				i++;
			if (syms[i].addr <= a && a - syms[i].addr < syms[i].size)
				r = (long)i;
		} else if (o < seg_off || o - seg_off >= seg_len) {
			r = elfimage_lookup_offset(img, o, &a);
			r = r < -1 ? -1 : r;
		}
		idx[k] = r;
	}
}

long elfimage_find(const struct elfimage *img, const char *name)
{
	for (size_t i = 0; i < img->nr_syms; i++)
		if (!strcmp(img->syms[i].name, name))
			return (long)i;
	return -1;
}

int elfimage_symbol_value(const struct elfimage *img, const char *name, uint64_t *value)
{
	Elf_Scn *scn = NULL;
	size_t entsz = gelf_fsize(img->elf, ELF_T_SYM, 1, EV_CURRENT);

	while (entsz && (scn = elf_nextscn(img->elf, scn))) {
		Elf_Data *data;
		GElf_Shdr sh;
		size_t count;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		count = data->d_size / entsz;
		for (size_t i = 1; i < count && i <= INT32_MAX; i++) {
			const char *n;
			GElf_Sym s;

			if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF)
				continue;
			n = elf_strptr(img->elf, sh.sh_link, s.st_name);
			if (n && !strcmp(n, name)) {
				*value = s.st_value;
				return 0;
			}
		}
	}
	return -ENOENT;
}

long elfimage_read(const struct elfimage *img, uint64_t addr, void *buf, size_t len)
{
	for (size_t i = 0; i < img->nr_sects; i++) {
		const struct elfsect *se = &img->sects[i];
		Elf_Scn *scn;
		Elf_Data *d;
		uint64_t rel, n;

		if (addr < se->addr || addr - se->addr >= se->size)
			continue;
		scn = elf_getscn(img->elf, se->ndx);
		d = scn ? elf_getdata(scn, NULL) : NULL;
		if (!d || !d->d_buf)
			return -ENOENT;
		rel = addr - se->addr;
		if (rel >= d->d_size)
			return -ENOENT;
		n = d->d_size - rel;
		if (n > len)
			n = len;
		memcpy(buf, (const char *)d->d_buf + rel, n);
		return (long)n;
	}
	return -ENOENT;
}

/* ---- DWARF lines ------------------------------------------------------------ */

static int lrow_cmp(const void *a, const void *b)
{
	const struct lrow *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* An end_sequence row sorts before a row starting at the same address:
	 * the later row is the one that covers it. */
	return y->end - x->end;
}

static long file_index(struct elfimage *img, const char *path)
{
	char **p;

	/* Rows of one CU repeat the same few files: look back a little. */
	for (size_t i = img->nr_files; i > 0 && img->nr_files - i < 64; i--)
		if (!strcmp(img->files[i - 1], path))
			return (long)(i - 1);
	if (img->nr_files >= UINT32_MAX)
		return -ENOSPC;
	p = realloc(img->files, (img->nr_files + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	img->files = p;
	img->files[img->nr_files] = strndup(path, ELFIMAGE_MAX_NAME);
	if (!img->files[img->nr_files])
		return -ENOMEM;
	return (long)img->nr_files++;
}

/* Append one line-table row; cap is the capacity of img->lines. */
static int lines_push(struct elfimage *img, size_t *cap, struct lrow row)
{
	if (array_grow(&img->lines, cap, img->nr_lines + 1, sizeof(*img->lines), 1024))
		return -ENOMEM;
	img->lines[img->nr_lines++] = row;
	return 0;
}

/* Every row of one compilation unit's line table. */
static int load_cu_lines(struct elfimage *img, Dwarf_Die *cudie, size_t *cap)
{
	Dwarf_Attribute at;
	const char *comp_dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &at));
	char joined[ELFIMAGE_MAX_NAME];
	Dwarf_Lines *lines;
	size_t n;

	if (dwarf_getsrclines(cudie, &lines, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr addr;
		const char *src;
		bool end = false;
		int lineno = 0, err;
		long fi;

		if (!l || dwarf_lineaddr(l, &addr) || dwarf_lineendsequence(l, &end))
			continue;
		src = dwarf_linesrc(l, NULL, NULL);
		dwarf_lineno(l, &lineno);
		if (!src || lineno < 0)
			continue;
		/* A relative name (DWARF 5 directory entries may be) is relative
		 * to the compilation directory. */
		if (src[0] != '/' && comp_dir && comp_dir[0] == '/') {
			snprintf(joined, sizeof(joined), "%s/%s", comp_dir, src);
			src = joined;
		}
		fi = file_index(img, src);
		if (fi < 0)
			return (int)fi;
		err = lines_push(img, cap, (struct lrow){
			.addr = addr, .file = (uint32_t)fi,
			.line = (uint32_t)lineno, .end = end,
		});
		if (err)
			return err;
	}
	return 0;
}

static int load_lines(struct elfimage *img)
{
	Elf *elf = img->dbg_elf ? img->dbg_elf : img->elf;
	Dwarf_Off off = 0, next;
	size_t hsize, cap = 0;
	Dwarf *dw;
	int ret = 0;

	if (img->lines_state)
		return img->lines_state > 0 ? 0 : -ENOENT;
	img->lines_state = -1;
	/* Module line addresses need relocations libdw does not apply. */
	if (img->type == ET_REL)
		return -ENOENT;
	dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!dw)
		return -ENOENT;
	while (!ret && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cudie;

		if (next <= off)
			break;
		if (dwarf_offdie(dw, off + hsize, &cudie))
			ret = load_cu_lines(img, &cudie, &cap);
		off = next;
	}
	if (!ret && img->nr_lines) {
		qsort(img->lines, img->nr_lines, sizeof(*img->lines), lrow_cmp);
		img->lines_state = 1;
	} else if (!ret) {
		ret = -ENOENT;
	}
	dwarf_end(dw);
	return ret;
}

int elfimage_has_symtab(const struct elfimage *img)
{
	return img->has_symtab;
}

int elfimage_is_debug_only(const struct elfimage *img)
{
	return img->debug_only;
}

int elfimage_has_minidebug(const struct elfimage *img)
{
	return img->minidebug;
}

int elfimage_peek_build_id(int fd, uint8_t *out, size_t cap, size_t *len)
{
	struct elfimage img = { .fd = -1, .dbg_fd = -1 };

	elf_version(EV_CURRENT);
	img.elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!img.elf || elf_kind(img.elf) != ELF_K_ELF) {
		if (img.elf)
			elf_end(img.elf);
		return -ENOEXEC;
	}
	load_build_id(&img);
	elf_end(img.elf);
	if (!img.build_id_len)
		return -ENODATA;
	if (img.build_id_len > cap)
		return -ENOSPC;
	memcpy(out, img.build_id, img.build_id_len);
	*len = img.build_id_len;
	return 0;
}

int elfimage_has_lines(struct elfimage *img)
{
	return load_lines(img) == 0;
}

int elfimage_attach_debug(struct elfimage *img, const char *path, int take_symbols)
{
	struct elfimage *dbg;
	const uint8_t *bid;
	size_t len;
	int ret;

	dbg = elfimage_open(path, NULL, 0);
	if (!dbg)
		return -errno;
	bid = elfimage_build_id(dbg, &len);
	if (img->build_id_len && bid &&
	    (len != img->build_id_len || memcmp(bid, img->build_id, len))) {
		ret = -ESTALE;
		goto out;
	}
	if (img->dbg_elf)
		elf_end(img->dbg_elf);
	if (img->dbg_fd >= 0)
		close(img->dbg_fd);
	free(img->dbg_mem);
	/* Steal the debug file's handles for its DWARF. */
	img->dbg_elf = dbg->elf;
	img->dbg_fd = dbg->fd;
	img->dbg_mem = dbg->mem;
	dbg->elf = NULL;
	dbg->fd = -1;
	dbg->mem = NULL;
	img->lines_state = 0;
	/* A stripped binary (only .dynsym) takes the debug file's full symbol
	 * table: same build, same addresses. */
	if (take_symbols && !img->has_symtab && dbg->has_symtab &&
	    dbg->nr_syms >= img->nr_syms - img->frames.added) {
		free(img->syms);
		free(img->names);
		free(img->bucket);
		free(img->frame_names);
		img->frame_names = NULL;
		img->frame_names_len = 0;
		img->frames.added = 0;	/* named now: the .eh_frame bounds go */
		img->syms = dbg->syms;
		img->nr_syms = dbg->nr_syms;
		img->names = dbg->names;
		img->bucket = dbg->bucket;
		img->nr_buckets = dbg->nr_buckets;
		img->bucket_lo = dbg->bucket_lo;
		img->bucket_hi = dbg->bucket_hi;
		img->bucket_shift = dbg->bucket_shift;
		img->has_symtab = 1;
		dbg->syms = NULL;
		dbg->names = NULL;
		dbg->bucket = NULL;
		dbg->nr_syms = 0;
	}
	ret = 0;
out:
	elfimage_close(dbg);
	return ret;
}

static long line_at(const struct elfimage *img, uint64_t addr)
{
	size_t lo = SORT_UPPER(img->lines, img->nr_lines, addr, addr);

	if (lo == 0 || img->lines[lo - 1].end)
		return -1;
	return (long)(lo - 1);
}

int elfimage_line(struct elfimage *img, uint64_t addr, struct elfline *out)
{
	long i;
	int ret = load_lines(img);

	if (ret)
		return ret;
	i = line_at(img, addr);
	if (i < 0)
		return -ENOENT;
	out->addr = img->lines[i].addr;
	out->file = img->files[img->lines[i].file];
	out->line = img->lines[i].line;
	return 0;
}

long elfimage_lines(struct elfimage *img, uint64_t lo, uint64_t hi,
		    int (*fn)(const struct elfline *l, void *arg), void *arg)
{
	long count = 0;
	size_t a;
	int ret = load_lines(img);

	if (ret)
		return ret;
	a = SORT_LOWER(img->lines, img->nr_lines, addr, lo);
	for (; a < img->nr_lines && img->lines[a].addr < hi; a++) {
		struct elfline l;

		if (img->lines[a].end)
			continue;
		l.addr = img->lines[a].addr;
		l.file = img->files[img->lines[a].file];
		l.line = img->lines[a].line;
		count++;
		if (fn && (ret = fn(&l, arg)))
			return ret;
	}
	return count;
}
