/* SPDX-License-Identifier: MIT */
/*
 * An ELF file laid out as a process maps it, for the tests and the
 * benchmark of vmm/introspect/memsyms.c: each PT_LOAD's file bytes at
 * bias + its address, one page array from the first segment's page to the
 * last one's end, a mark per page that is "not resident", and the dynamic
 * section's pointers relocated by ld.so's rule (relocate()) on demand.
 */
#ifndef OPVM_TESTS_MEMSYMS_IMAGE_H
#define OPVM_TESTS_MEMSYMS_IMAGE_H

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/introspect/memsyms.h"
#include "lib/array.h"

#define PG	4096ull

/* One process's view of the file: its segments' pages at BIAS + vaddr. */
struct fake {
	uint8_t *file;
	size_t file_len;
	uint64_t lo;			/* first page */
	size_t npages;
	uint8_t *mem;
	uint8_t *absent;		/* per page: 1 not resident */
	uint64_t bias;
	struct memsyms_map exec;
	unsigned reads;
};

static inline int fake_read(void *arg, uint64_t va, void *page)
{
	struct fake *f = arg;
	uint64_t i = (va - f->lo) / PG;

	f->reads++;
	if (va < f->lo || i >= f->npages || f->absent[i])
		return -ENOENT;
	memcpy(page, f->mem + i * PG, PG);
	return 0;
}

static inline const Elf64_Phdr *phdrs(const struct fake *f, unsigned *n)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f->file;

	*n = eh->e_phnum;
	return (const Elf64_Phdr *)(f->file + eh->e_phoff);
}

static inline uint8_t *at(struct fake *f, uint64_t vaddr)
{
	return f->mem + (vaddr + f->bias - f->lo);
}

/* The page of a link-time address made not resident. */
static inline void drop(struct fake *f, uint64_t vaddr)
{
	f->absent[(vaddr + f->bias - f->lo) / PG] = 1;
}

static inline Elf64_Dyn *dyn_find(struct fake *f, int64_t tag)
{
	unsigned n;
	const Elf64_Phdr *ph = phdrs(f, &n);

	for (unsigned i = 0; i < n; i++) {
		Elf64_Dyn *d = (Elf64_Dyn *)at(f, ph[i].p_vaddr);

		if (ph[i].p_type != PT_DYNAMIC)
			continue;
		for (; d->d_tag != DT_NULL; d++)
			if (d->d_tag == tag)
				return d;
	}
	return NULL;
}

/* dyn_find() of a tag the test needs: abort()s without it. */
static inline Elf64_Dyn *dyn_get(struct fake *f, int64_t tag)
{
	Elf64_Dyn *d = dyn_find(f, tag);

	if (!d)
		abort();
	return d;
}

/* What ld.so does to a shared object's dynamic section on x86-64
 * (glibc's elf_get_dynamic_info(): the d_ptr values it adjusts). */
static inline void relocate(struct fake *f, int64_t sign)
{
	static const int64_t tags[] = { DT_SYMTAB, DT_STRTAB, DT_HASH, DT_GNU_HASH,
					DT_PLTGOT, DT_JMPREL, DT_RELA, DT_VERSYM };

	for (size_t i = 0; i < ARRAY_SIZE(tags); i++) {
		Elf64_Dyn *d = dyn_find(f, tags[i]);

		if (d)
			d->d_un.d_ptr += (uint64_t)sign * f->bias;
	}
}

static inline int fake_load(struct fake *f, const char *path, uint64_t bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	uint64_t hi = 0;
	unsigned n;
	const Elf64_Phdr *ph;

	memset(f, 0, sizeof(*f));
	if (fd < 0 || fstat(fd, &sb))
		return -1;
	f->file_len = (size_t)sb.st_size;
	f->file = malloc(f->file_len);
	if (!f->file || read(fd, f->file, f->file_len) != (ssize_t)f->file_len)
		return -1;
	close(fd);
	f->bias = bias;
	f->lo = UINT64_MAX;
	ph = phdrs(f, &n);
	for (unsigned i = 0; i < n; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (((ph[i].p_vaddr & ~(PG - 1)) + bias) < f->lo)
			f->lo = (ph[i].p_vaddr & ~(PG - 1)) + bias;
		if (ph[i].p_vaddr + ph[i].p_memsz + bias > hi)
			hi = ph[i].p_vaddr + ph[i].p_memsz + bias;
		if ((ph[i].p_flags & PF_X) && !f->exec.start)
			f->exec = (struct memsyms_map){ (ph[i].p_vaddr & ~(PG - 1)) + bias,
							ph[i].p_vaddr + ph[i].p_memsz + bias,
							ph[i].p_offset & ~(PG - 1) };
	}
	f->npages = (size_t)((hi - f->lo + PG - 1) / PG);
	f->mem = calloc(f->npages, PG);
	f->absent = calloc(f->npages, 1);
	for (unsigned i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD)
			memcpy(at(f, ph[i].p_vaddr), f->file + ph[i].p_offset, ph[i].p_filesz);
	return f->mem && f->absent ? 0 : -1;
}

static inline void fake_free(struct fake *f)
{
	free(f->file);
	free(f->mem);
	free(f->absent);
}

#endif /* OPVM_TESTS_MEMSYMS_IMAGE_H */
