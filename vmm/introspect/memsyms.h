/* SPDX-License-Identifier: MIT */
/*
 * A mapped ELF's dynamic symbol table read from guest memory, for user
 * binaries the host has no file of (no guest module to send it, no guest
 * root): the ELF header at the mapping of file offset 0, its program
 * headers, PT_DYNAMIC's DT_SYMTAB, DT_STRTAB, DT_STRSZ, DT_SYMENT and
 * DT_GNU_HASH or DT_HASH for the number of symbols (GNU: the largest
 * bucket, then its chain to the entry with the end bit), all through the
 * process's page tables.
 *
 * The result is a small ELF file of its own (memsyms_read()'s buffer): the
 * binary's PT_LOAD headers (file offset -> address, as user samples need),
 * one SHT_NOBITS executable section per executable segment, .dynsym and
 * .dynstr with the defined function symbols, and the binary's build-id
 * note.  symbols/elfimage reads it as it reads any stripped binary, and
 * a debug file found by that build-id still replaces its symbols.  Why an
 * ELF and not a format of opvm's own: the resolver, its build-id checks
 * and the cache need no second reader.
 *
 * d_ptr values: ld.so relocates DT_SYMTAB, DT_STRTAB and the hash tables
 * in place in a shared object or PIE (glibc on x86-64), so a value may be a
 * run-time address or still the link-time one.  Each is taken as run-time
 * when it less the load bias lies in a file-backed PT_LOAD segment, else as
 * link-time when it lies there itself; neither is refused.
 *
 * Guest memory is hostile: the headers must describe the mapping they are
 * read from (its executable segment at the mapping's start and file
 * offset), every table must lie inside one file-backed segment, counts and
 * sizes are capped (memsyms_limits), a symbol whose entry or name sits on a
 * page that is not resident is left out and counted, never guessed, a name
 * must end inside the string table, and at most max_pages pages are read.
 *
 * The PLT: memory has no section headers, so its stubs are found from the
 * dynamic section and the code.  DT_JMPREL's relocations (RELA, JUMP_SLOT or IRELATIVE) and
 * DT_RELA's GLOB_DAT ones give the GOT slots a stub may jump through;
 * DT_PLTGOT gives the lazy PLT0's two targets (GOT+8, GOT+16).  The first
 * pages of each executable segment (where GNU ld puts .init, .plt,
 * .plt.got, .plt.sec; at most MEMSYMS_PLT_PAGES, resident only) are
 * scanned for the stub shapes binutils emits: PLT0 then 16-byte lazy
 * entries (`jmp *slot; push idx; jmp PLT0`, or with IBT `endbr64; push
 * idx; jmp PLT0`), .plt.sec (`endbr64; jmp *slot`, 16 bytes) and .plt.got
 * (`jmp *slot; xchg`, 8 bytes, or the 16-byte IBT form).  A stub is taken
 * only when its slot is a relocation's r_offset of the right type (a lazy
 * entry's push index must name that very relocation); a run of them
 * becomes a SHT_NOBITS section named as the file's (".plt", ".plt.sec",
 * ".plt.got"), which symbols/elfimage names "[.plt]" etc. as it does for a
 * file.  Nothing about the PLT refuses the read: a table that lies is
 * counted (plt_refused) and the PLT left unnamed.
 */
#ifndef OPVM_MEMSYMS_H
#define OPVM_MEMSYMS_H

#include <stddef.h>
#include <stdint.h>

#define MEMSYMS_MAX_SYMS	(1u << 17)	/* libc's: ~3,000; libpython's ~10,000 */
#define MEMSYMS_MAX_STR		(4u << 20)	/* .dynstr bytes */
#define MEMSYMS_MAX_PAGES	2048u		/* pages read per binary (8 MiB) */
#define MEMSYMS_NAME_MAX	1024u		/* longest name kept */
#define MEMSYMS_PHNUM_MAX	64u
#define MEMSYMS_DYN_MAX		1024u		/* dynamic entries looked at */
#define MEMSYMS_PLT_PAGES	32u		/* code pages scanned for the PLT (4,000 entries) */
#define MEMSYMS_PLT_RELS	(1u << 15)	/* relocations read (each table) */
#define MEMSYMS_PLT_RANGES	8u		/* PLT sections in the ELF made */

/* The ELF made says which version made it (e_flags): 1 .dynsym alone, 2
 * with the PLT's sections.  memsyms_current(): whether the first bytes of
 * a cached file (at least an ELF header's) are this version's, so that an
 * older one is made again. */
#define MEMSYMS_VERSION		2u
int memsyms_current(const void *head, size_t len);

/* One address space's memory: reads the 4096-byte page at va (aligned)
 * into page.  0, -ENOENT (not resident: counted, nothing guessed), or
 * another -errno (refused). */
struct memsyms_mem {
	int (*read_page)(void *arg, uint64_t va, void *page);
	void *arg;
};

struct memsyms_limits {
	uint32_t max_syms;	/* 0: MEMSYMS_MAX_SYMS */
	uint32_t max_str;	/* 0: MEMSYMS_MAX_STR */
	uint32_t max_pages;	/* 0: MEMSYMS_MAX_PAGES */
};

/* The binary's executable mapping in the process: [start, end) at file
 * offset pgoff; file offset 0 is at start - pgoff. */
struct memsyms_map {
	uint64_t start, end, pgoff;
};

struct memsyms_result {
	uint64_t pages_read;		/* pages that read */
	uint64_t pages_absent;		/* pages not resident */
	uint32_t nr_syms;		/* entries the hash table counts */
	uint32_t kept;			/* function symbols in the ELF made */
	uint32_t skipped;		/* undefined, data, outside the code */
	uint32_t absent;		/* entry or name on a page not resident */
	uint32_t bad;			/* name outside the table or too long */
	uint32_t capped;		/* entries past max_syms */
	uint32_t plt_ranges;		/* PLT sections in the ELF made */
	uint32_t plt_stubs;		/* stubs verified against a relocation */
	uint32_t plt_unverified;	/* stub shapes whose slot is no relocation's */
	uint32_t plt_refused;		/* PLT tables that lie, left unused */
	uint32_t plt_pages;		/* pages read for the PLT (in pages_read) */
	uint8_t relocated;		/* d_ptr values: 1 run-time, 0 link-time */
	const char *hash;		/* "gnu", "sysv" or NULL */
	const char *why;		/* a refusal, static text, or NULL */
};

/*
 * Reads the dynamic symbols of the ELF mapped at exec (see above) through
 * mem and makes the ELF file described above: *out (malloc'd, *out_len
 * bytes), with bid[bid_len] (1..32 bytes) as its build-id note.  lim may be
 * NULL.  Returns 0, -ENOENT (a header or table not resident), -ENODATA (no
 * function symbol to keep and no PLT: an executable that exports none),
 * -EINVAL (refused: res->why), -E2BIG (the page budget ran out) or
 * -ENOMEM.  res is filled in every case.
 */
int memsyms_read(const struct memsyms_mem *mem, const struct memsyms_map *exec,
		 const uint8_t *bid, size_t bid_len, const struct memsyms_limits *lim,
		 void **out, size_t *out_len, struct memsyms_result *res);

#endif /* OPVM_MEMSYMS_H */
