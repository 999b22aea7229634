// SPDX-License-Identifier: MIT
/*
 * The few symbols the Python frame reader needs, from the dynamic symbol
 * table of the interpreter's executable as it is mapped in guest memory
 * (unwind/pyframes.h: pyframes_dynsym()).  Debian's python3.x is a
 * non-PIE executable with libpython linked in, and exports _PyRuntime,
 * Py_Version and the type objects in its .dynsym; ld.so has touched its
 * .gnu.hash, .dynsym and .dynstr at start-up (every symbol lookup searches
 * the executable first), so those pages are resident.
 *
 * One lookup by name through DT_GNU_HASH, every read bounded; the ELF is
 * the guest's and may lie.  This is the one place that reads an ELF's
 * dynamic symbols from guest memory for runtimes; a general .dynsym
 * reader can take its place.
 */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "unwind/pyframes.h"
#include "lib/x86.h"

#define MAX_PHDRS	64
#define MAX_DYN		256
#define MAX_CHAIN	4096		/* symbols one hash bucket may chain */
#define MAX_BUCKETS	(1u << 20)

struct dynsyms {
	const struct unwind_mem *m;
	uint64_t bias;
	uint64_t gnu_hash, symtab, strtab, strsz;
};

static int rdm(const struct unwind_mem *m, uint64_t gva, void *buf, size_t len)
{
	if (!gva || gva >= OPVM_USER_TOP || len > OPVM_USER_TOP - gva)
		return -EFAULT;
	return m->read(m->arg, gva, buf, len) ? -EFAULT : 0;
}

/* The load bias and where PT_DYNAMIC is, from the ELF header at base. */
static int elf_dynamic(const struct unwind_mem *m, uint64_t base, uint64_t *bias,
		       uint64_t *dyn, uint64_t *ndyn)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAX_PHDRS];
	int have_load = 0;

	*dyn = 0;
	if (rdm(m, base, &eh, sizeof(eh)))
		return -EFAULT;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !eh.e_phnum || eh.e_phnum > MAX_PHDRS || eh.e_phoff > 4096)
		return -EINVAL;
	if (rdm(m, base + eh.e_phoff, ph, eh.e_phnum * sizeof(ph[0])))
		return -EFAULT;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0 && !have_load) {
			*bias = base - (ph[i].p_vaddr & ~0xfffull);
			have_load = 1;
		}
		if (ph[i].p_type == PT_DYNAMIC) {
			*dyn = ph[i].p_vaddr;
			*ndyn = ph[i].p_memsz / sizeof(Elf64_Dyn);
		}
	}
	if (!have_load || !*dyn || (eh.e_type == ET_EXEC && *bias))
		return -EINVAL;
	if (*ndyn > MAX_DYN)
		*ndyn = MAX_DYN;
	*dyn += *bias;
	return 0;
}

/* A dynamic entry's address: ld.so relocates them in place in a shared
 * object (not in an executable), so one below the bias is unrelocated. */
static uint64_t dyn_addr(uint64_t v, uint64_t bias)
{
	return v < bias ? v + bias : v;
}

static int dynsyms_open(struct dynsyms *d, const struct unwind_mem *m, uint64_t base)
{
	Elf64_Dyn dyn[MAX_DYN];
	uint64_t at = 0, n = 0;
	int err;

	memset(d, 0, sizeof(*d));
	d->m = m;
	err = elf_dynamic(m, base, &d->bias, &at, &n);
	if (err)
		return err;
	if (rdm(m, at, dyn, n * sizeof(dyn[0])))
		return -EFAULT;
	for (uint64_t i = 0; i < n && dyn[i].d_tag != DT_NULL; i++) {
		uint64_t v = dyn[i].d_un.d_ptr;

		if (dyn[i].d_tag == DT_GNU_HASH)
			d->gnu_hash = dyn_addr(v, d->bias);
		else if (dyn[i].d_tag == DT_SYMTAB)
			d->symtab = dyn_addr(v, d->bias);
		else if (dyn[i].d_tag == DT_STRTAB)
			d->strtab = dyn_addr(v, d->bias);
		else if (dyn[i].d_tag == DT_STRSZ)
			d->strsz = v;
		else if (dyn[i].d_tag == DT_SYMENT && v != sizeof(Elf64_Sym))
			return -EINVAL;
	}
	return d->gnu_hash && d->symtab && d->strtab && d->strsz ? 0 : -EINVAL;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	while (*s)
		h = h * 33 + (uint8_t)*s++;
	return h;
}

/* Symbol s's name equals name: 1, 0, or -EFAULT (unreadable). */
static int sym_is(const struct dynsyms *d, const Elf64_Sym *s, const char *name)
{
	char buf[64];
	size_t len = strlen(name) + 1;

	if (len > sizeof(buf) || s->st_name >= d->strsz || len > d->strsz - s->st_name)
		return 0;
	if (rdm(d->m, d->strtab + s->st_name, buf, len))
		return -EFAULT;
	return !memcmp(buf, name, len);
}

/* The run-time address of the defined symbol name into *at (0: none).
 * 0, or -EFAULT when a page on the way does not read (not resident yet:
 * worth another try, unlike a symbol that is not there). */
static int dynsym_lookup(const struct dynsyms *d, const char *name, uint64_t *at)
{
	uint32_t hdr[4], h = gnu_hash(name), idx, cw;
	uint64_t buckets, chains;
	Elf64_Sym s;

	*at = 0;
	if (rdm(d->m, d->gnu_hash, hdr, sizeof(hdr)))
		return -EFAULT;
	if (!hdr[0] || hdr[0] > MAX_BUCKETS || hdr[2] > MAX_BUCKETS)
		return 0;
	buckets = d->gnu_hash + 16 + (uint64_t)hdr[2] * 8;
	chains = buckets + (uint64_t)hdr[0] * 4;
	if (rdm(d->m, buckets + (uint64_t)(h % hdr[0]) * 4, &idx, sizeof(idx)))
		return -EFAULT;
	if (idx < hdr[1])
		return 0;
	for (unsigned k = 0; k < MAX_CHAIN; k++, idx++) {
		if (rdm(d->m, chains + (uint64_t)(idx - hdr[1]) * 4, &cw, sizeof(cw)))
			return -EFAULT;
		if ((cw | 1) == (h | 1)) {
			if (rdm(d->m, d->symtab + (uint64_t)idx * sizeof(s), &s, sizeof(s)))
				return -EFAULT;
			int is = s.st_shndx != SHN_UNDEF && s.st_value ? sym_is(d, &s, name) : 0;

			if (is < 0)
				return is;
			if (is) {
				*at = s.st_value + d->bias;
				return 0;
			}
		}
		if (cw & 1)
			break;
	}
	return 0;
}

int pyframes_dynsym(const struct unwind_mem *m, uint64_t base, struct pyframes_target *t)
{
	struct dynsyms d;
	uint64_t ver_at;
	int err;

	memset(t, 0, sizeof(*t));
	err = dynsyms_open(&d, m, base);
	if (!err)
		err = dynsym_lookup(&d, "_PyRuntime", &t->runtime);
	if (!err && !t->runtime)
		return -ENOENT;
	if (!err)
		err = dynsym_lookup(&d, "PyCode_Type", &t->code_type);
	if (!err)
		err = dynsym_lookup(&d, "PyUnicode_Type", &t->unicode_type);
	if (!err)
		err = dynsym_lookup(&d, "PyBytes_Type", &t->bytes_type);
	/* Py_Version sits in .rodata, which may not be resident: then the
	 * caller says the version (the executable's name) */
	if (!err && !dynsym_lookup(&d, "Py_Version", &ver_at) && ver_at &&
	    rdm(m, ver_at, &t->version, sizeof(t->version)))
		t->version = 0;
	return err;
}
