// SPDX-License-Identifier: MIT
/*
 * Loaders and boot state of the built-in VMM: CPUID, long mode with our own
 * GDT and identity page tables, the Linux x86 64-bit boot protocol
 * (Documentation/arch/x86/boot.rst: zero page, e820, command line, initrd),
 * an MP table for SMP guests, and freestanding ELF64 test guests.
 *
 * Guest-physical layout below 1 MiB (all reserved in e820 except as noted):
 *   0x00500  GDT                      0x07000  zero page (boot_params)
 *   0x09000  PML4  0x0a000 PDPT       0x0b000-0x0efff  PDs: 4 GiB in 2 MiB pages
 *   0x20000  kernel command line      0xe0000  ACPI tables (RSDP first)
 *   0xf0000  MP floating pointer + table
 * The kernel goes at its preferred address (16 MiB for Debian's), the initrd
 * as high as the kernel allows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <elf.h>

#include "lib/errbuf.h"
#include "lib/x86.h"
#include "vmm/kvm/kvm-priv.h"

#define BOOT_GDT	0x500ull
#define BOOT_ZERO_PAGE	0x7000ull
#define BOOT_PML4	0x9000ull
#define BOOT_PDPT	0xa000ull
#define BOOT_PD		0xb000ull
#define BOOT_CMDLINE	0x20000ull
#define BOOT_CMDLINE_MAX 4096
#define BOOT_MPTABLE	0xf0000ull
#define BOOT_KERNEL_DEF	0x1000000ull


#define X86_CR0_PE	0x1ull
#define X86_CR0_ET	0x10ull
#define X86_CR0_NE	0x20ull
#define X86_CR0_PG	0x80000000ull
#define X86_CR4_PAE	0x20ull
#define EFER_LME	0x100ull
#define EFER_LMA	0x400ull

/* GDT and identity-mapped page tables for the first 4 GiB. */
static int boot_tables(struct kvm_vm *vm)
{
	uint64_t *gdt = kvm_vm_gpa(vm, BOOT_GDT, 4 * 8);
	uint64_t *pml4 = kvm_vm_gpa(vm, BOOT_PML4, 4096);
	uint64_t *pdpt = kvm_vm_gpa(vm, BOOT_PDPT, 4096);
	uint64_t *pd = kvm_vm_gpa(vm, BOOT_PD, 4 * 4096);

	if (!gdt || !pml4 || !pdpt || !pd)
		return -ENOMEM;
	gdt[0] = 0;
	gdt[1] = 0;
	gdt[2] = 0x00af9b000000ffffull;		/* __BOOT_CS: 64-bit code */
	gdt[3] = 0x00cf93000000ffffull;		/* __BOOT_DS: flat data */
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = BOOT_PDPT | OPVM_PTE_PRESENT | OPVM_PTE_WRITE;
	for (unsigned i = 0; i < 4; i++)
		pdpt[i] = (BOOT_PD + i * 4096ull) | OPVM_PTE_PRESENT | OPVM_PTE_WRITE;
	for (uint64_t i = 0; i < 4 * 512; i++)
		pd[i] = (i << 21) | OPVM_PTE_PRESENT | OPVM_PTE_WRITE | OPVM_PTE_PS;
	return 0;
}

static void seg_set(struct kvm_segment *s, uint16_t sel, uint8_t type, int code)
{
	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->base = 0;
	s->limit = 0xffffffff;
	s->type = type;
	s->present = 1;
	s->s = 1;
	s->g = 1;
	s->l = code;
	s->db = !code;
}

/* Every vCPU's boot state: long mode, flat segments, our page tables.  Only
 * the BSP's RIP matters; APs wait for INIT/SIPI in the in-kernel LAPIC. */
static int boot_long_mode(struct kvm_vm *vm, uint64_t rip, uint64_t rsi, uint64_t rsp)
{
	int err = boot_tables(vm);

	if (err)
		return err;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];
		struct kvm_sregs *sr = &v->boot_sregs;

		if (ioctl(v->fd, KVM_GET_SREGS, sr) < 0)
			return -errno;
		seg_set(&sr->cs, 0x10, 0xb, 1);
		seg_set(&sr->ds, 0x18, 0x3, 0);
		sr->es = sr->fs = sr->gs = sr->ss = sr->ds;
		sr->gdt.base = BOOT_GDT;
		sr->gdt.limit = 4 * 8 - 1;
		sr->cr3 = BOOT_PML4;
		sr->cr4 |= X86_CR4_PAE;
		sr->cr0 = X86_CR0_PE | X86_CR0_ET | X86_CR0_NE | X86_CR0_PG;
		sr->efer |= EFER_LME | EFER_LMA;
		memset(&v->boot_regs, 0, sizeof(v->boot_regs));
		v->boot_regs.rflags = 0x2;
		v->boot_regs.rip = rip;
		v->boot_regs.rsi = rsi;
		v->boot_regs.rsp = rsp;
		/* Only the BSP is started with this state. */
		v->has_boot_state = i == 0;
	}
	return 0;
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	size_t off = 0;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		err = -EINVAL;
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	while (off < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + off, (size_t)st.st_size - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err = r < 0 ? -errno : -EIO;
			free(buf);
			goto out;
		}
		off += (size_t)r;
	}
	*out = buf;
	*len = off;
out:
	close(fd);
	return err;
}

/* ---- ELF64 test guests -------------------------------------------------- */

int kvm_vm_load_elf(struct kvm_vm *vm, const char *path, char *why, size_t whylen)
{
	uint8_t *img = NULL;
	size_t len;
	Elf64_Ehdr eh;
	int err = read_file(path, &img, &len);

	if (err) {
		errbuf_set(why, whylen, "cannot read %s: %s", path, strerror(-err));
		return err;
	}
	err = -ENOEXEC;
	if (len < sizeof(eh))
		goto bad;
	memcpy(&eh, img, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		goto bad;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		uint64_t off, end;
		void *dst;

		if (__builtin_mul_overflow((uint64_t)i, sizeof(ph), &off) ||
		    __builtin_add_overflow(off, eh.e_phoff, &off) ||
		    __builtin_add_overflow(off, sizeof(ph), &end) || end > len)
			goto bad;
		memcpy(&ph, img + off, sizeof(ph));
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz > ph.p_memsz ||
		    __builtin_add_overflow(ph.p_offset, ph.p_filesz, &end) || end > len)
			goto bad;
		dst = kvm_vm_gpa(vm, ph.p_paddr, ph.p_memsz);
		if (!dst || ph.p_paddr < 0x100000) {
			errbuf_set(why, whylen, "%s: segment at 0x%llx+0x%llx is outside guest "
				    "RAM above 1 MiB", path, (unsigned long long)ph.p_paddr,
				    (unsigned long long)ph.p_memsz);
			err = -ERANGE;
			goto out;
		}
		memcpy(dst, img + ph.p_offset, ph.p_filesz);
		memset((uint8_t *)dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
	}
	/* rsi: guest RAM size, for the guest's own allocator. */
	err = boot_long_mode(vm, eh.e_entry, vm->mem_size, 0x80000);
	if (err)
		errbuf_set(why, whylen, "boot state: %s", strerror(-err));
	goto out;
bad:
	errbuf_set(why, whylen, "%s is not a loadable x86-64 ELF file", path);
out:
	free(img);
	return err;
}

/* ---- Linux bzImage -------------------------------------------------------- */

/* Offsets in the zero page (struct boot_params) and the setup header. */
#define BP_ACPI_RSDP_ADDR	0x070
#define BP_EXT_RAMDISK_IMAGE	0x0c0
#define BP_EXT_RAMDISK_SIZE	0x0c4
#define BP_EXT_CMD_LINE_PTR	0x0c8
#define BP_E820_ENTRIES		0x1e8
#define BP_HDR			0x1f1
#define BP_SETUP_SECTS		0x1f1
#define BP_BOOT_FLAG		0x1fe
#define BP_JUMP			0x200
#define BP_HEADER		0x202
#define BP_VERSION		0x206
#define BP_TYPE_OF_LOADER	0x210
#define BP_LOADFLAGS		0x211
#define BP_RAMDISK_IMAGE	0x218
#define BP_RAMDISK_SIZE		0x21c
#define BP_HEAP_END_PTR		0x224
#define BP_CMD_LINE_PTR		0x228
#define BP_INITRD_ADDR_MAX	0x22c
#define BP_KERNEL_ALIGNMENT	0x230
#define BP_RELOCATABLE		0x234
#define BP_XLOADFLAGS		0x236
#define BP_CMDLINE_SIZE		0x238
#define BP_PREF_ADDRESS		0x258
#define BP_INIT_SIZE		0x260
#define BP_E820_TABLE		0x2d0
#define BP_E820_MAX		128

#define LOADFLAG_CAN_USE_HEAP	0x80
#define XLF_KERNEL_64		0x1

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static void wr32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void e820_add(uint8_t *zp, uint64_t addr, uint64_t size, uint32_t type)
{
	uint8_t n = zp[BP_E820_ENTRIES];
	uint8_t *e = zp + BP_E820_TABLE + (size_t)n * 20;

	if (n >= BP_E820_MAX)
		return;
	memcpy(e, &addr, 8);
	memcpy(e + 8, &size, 8);
	memcpy(e + 16, &type, 4);
	zp[BP_E820_ENTRIES] = n + 1;
}

static uint8_t mp_checksum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	return (uint8_t)-s;
}

/*
 * MP table (Intel MultiProcessor Specification 1.4): one processor entry per
 * vCPU, the ISA bus, the in-kernel IOAPIC, identity ISA IRQ routing.  Linux
 * finds it when there is no ACPI and starts the APs from it.
 */
static int mptable_write(struct kvm_vm *vm)
{
	uint8_t *base = kvm_vm_gpa(vm, BOOT_MPTABLE, 0x10000);
	uint8_t *fp, *ct, *e;
	uint16_t len;
	unsigned ioapic_id = vm->nr_vcpus;

	if (!base)
		return -ENOMEM;
	memset(base, 0, 0x1000);
	fp = base;
	ct = base + 16;
	memcpy(fp, "_MP_", 4);
	wr32(fp + 4, (uint32_t)(BOOT_MPTABLE + 16));
	fp[8] = 1;		/* length in 16-byte units */
	fp[9] = 4;		/* spec revision 1.4 */
	fp[10] = mp_checksum(fp, 16);

	memcpy(ct, "PCMP", 4);
	ct[6] = 4;
	memcpy(ct + 8, "OPVM    ", 8);
	memcpy(ct + 16, "KVM VMM     ", 12);
	wr32(ct + 36, 0xfee00000u);	/* LAPIC address */
	e = ct + 44;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		e[0] = 0;		/* processor */
		e[1] = (uint8_t)i;	/* LAPIC id */
		e[2] = 0x14;
		e[3] = 1 | (i == 0 ? 2 : 0);	/* enabled, BSP */
		wr32(e + 4, 0x600);	/* family 6 */
		wr32(e + 8, 0x201);	/* FPU, APIC */
		e += 20;
	}
	e[0] = 1;			/* bus 0: ISA */
	e[1] = 0;
	memcpy(e + 2, "ISA   ", 6);
	e += 8;
	e[0] = 2;			/* IOAPIC */
	e[1] = (uint8_t)ioapic_id;
	e[2] = 0x11;
	e[3] = 1;
	wr32(e + 4, 0xfec00000u);
	e += 8;
	for (unsigned irq = 0; irq < 16; irq++) {
		e[0] = 3;		/* I/O interrupt: INT, conforming */
		e[1] = 0;
		e[4] = 0;		/* source bus */
		e[5] = (uint8_t)irq;
		e[6] = (uint8_t)ioapic_id;
		e[7] = (uint8_t)(irq == 0 ? 2 : irq);	/* PIT on pin 2 */
		e += 8;
	}
	e[0] = 4;			/* local interrupt: ExtINT on LINT0 */
	e[1] = 3;
	e[6] = 0xff;
	e[7] = 0;
	e += 8;
	e[0] = 4;			/* NMI on LINT1 */
	e[1] = 1;
	e[6] = 0xff;
	e[7] = 1;
	e += 8;
	len = (uint16_t)(e - ct);
	memcpy(ct + 4, &len, 2);
	{
		uint16_t count = (uint16_t)(vm->nr_vcpus + 2 + 16 + 2);

		memcpy(ct + 34, &count, 2);
	}
	ct[7] = mp_checksum(ct, len);
	return 0;
}

/* The command line, where the zero page says, within this kernel's limit. */
static int boot_cmdline(struct kvm_vm *vm, const uint8_t *img, uint8_t *zp,
			const char *cmdline, char *why, size_t whylen)
{
	size_t cl_len = cmdline ? strlen(cmdline) : 0;
	uint32_t cl_max = rd32(img + BP_CMDLINE_SIZE);

	if (!cl_max || cl_max > BOOT_CMDLINE_MAX - 1)
		cl_max = BOOT_CMDLINE_MAX - 1;
	if (cl_len > cl_max) {
		errbuf_set(why, whylen, "kernel command line is %zu bytes; this kernel "
			    "takes at most %u", cl_len, cl_max);
		return -E2BIG;
	}
	memset(vm->mem + BOOT_CMDLINE, 0, BOOT_CMDLINE_MAX);
	if (cl_len)
		memcpy(vm->mem + BOOT_CMDLINE, cmdline, cl_len);
	wr32(zp + BP_CMD_LINE_PTR, (uint32_t)BOOT_CMDLINE);
	return 0;
}

/* The initrd as high as the kernel allows, above the kernel's end kend. */
static int boot_initrd(struct kvm_vm *vm, const uint8_t *img, uint8_t *zp,
		       const char *initrd, uint64_t kend, char *why, size_t whylen)
{
	uint8_t *rd = NULL;
	size_t rd_len = 0;
	uint64_t rd_max, rd_addr;
	int err = read_file(initrd, &rd, &rd_len);

	if (err) {
		errbuf_set(why, whylen, "cannot read initrd %s: %s", initrd, strerror(-err));
		return err;
	}
	rd_max = rd32(img + BP_INITRD_ADDR_MAX);
	if (!rd_max || rd_max >= vm->mem_size)
		rd_max = vm->mem_size - 1;
	rd_addr = ((rd_max + 1) - rd_len) & ~0xfffull;
	if (rd_len > rd_max || rd_addr < kend) {
		errbuf_set(why, whylen, "the initrd (%zu MiB) does not fit above the "
			    "kernel: give the guest more memory (--mem)", rd_len >> 20);
		free(rd);
		return -ENOMEM;
	}
	memcpy(vm->mem + rd_addr, rd, rd_len);
	wr32(zp + BP_RAMDISK_IMAGE, (uint32_t)rd_addr);
	wr32(zp + BP_RAMDISK_SIZE, (uint32_t)rd_len);
	free(rd);
	return 0;
}

/* Where a bzImage goes: what its boot header says, checked against RAM. */
struct bz_layout {
	size_t setup_len;	/* real-mode setup code, not loaded */
	uint64_t load, kend;	/* protected-mode kernel and its init_size end */
};

static int bz_parse(const uint8_t *img, size_t len, const char *kernel, uint64_t mem_size,
		    struct bz_layout *lay, char *why, size_t whylen)
{
	uint64_t init_size;
	uint16_t version, xlf;
	unsigned setup_sects;

	if (len < 0x1000 || img[BP_BOOT_FLAG] != 0x55 || img[BP_BOOT_FLAG + 1] != 0xaa ||
	    memcmp(img + BP_HEADER, "HdrS", 4)) {
		errbuf_set(why, whylen, "%s is not a bzImage (no HdrS boot header); "
			    "give a Linux x86 bzImage such as /boot/vmlinuz-*", kernel);
		return -ENOEXEC;
	}
	memcpy(&version, img + BP_VERSION, 2);
	memcpy(&xlf, img + BP_XLOADFLAGS, 2);
	if (version < 0x20c || !(xlf & XLF_KERNEL_64)) {
		errbuf_set(why, whylen, "%s: boot protocol %x.%02x without a 64-bit entry "
			    "point (need 2.12+, XLF_KERNEL_64)", kernel, version >> 8,
			    version & 0xff);
		return -ENOEXEC;
	}
	setup_sects = img[BP_SETUP_SECTS] ? img[BP_SETUP_SECTS] : 4;
	lay->setup_len = (setup_sects + 1) * 512ul;
	if (lay->setup_len >= len)
		return -ENOEXEC;
	memcpy(&lay->load, img + BP_PREF_ADDRESS, 8);
	init_size = rd32(img + BP_INIT_SIZE);
	if (!lay->load || lay->load < 0x100000)
		lay->load = BOOT_KERNEL_DEF;
	if (init_size < len - lay->setup_len)
		init_size = len - lay->setup_len;
	if (__builtin_add_overflow(lay->load, init_size, &lay->kend) || lay->kend > mem_size) {
		errbuf_set(why, whylen, "the kernel needs %llu MiB at 0x%llx: give the guest "
			    "more memory (--mem)", (unsigned long long)(init_size >> 20) + 1,
			    (unsigned long long)lay->load);
		return -ENOMEM;
	}
	return 0;
}

/* Zero page: a copy of the setup header, then what the loader fills. */
static uint8_t *bz_zero_page(struct kvm_vm *vm, const uint8_t *img, size_t len)
{
	uint8_t *zp = kvm_vm_gpa(vm, BOOT_ZERO_PAGE, 4096);
	const uint8_t *hdr_end = img + BP_JUMP + 2 + img[BP_JUMP + 1];
	size_t hdr_len = (size_t)(hdr_end - (img + BP_HDR));

	if (!zp || BP_HDR + hdr_len > 4096 || BP_HDR + hdr_len > len)
		return NULL;
	memset(zp, 0, 4096);
	memcpy(zp + BP_HDR, img + BP_HDR, hdr_len);
	zp[BP_TYPE_OF_LOADER] = 0xff;
	zp[BP_LOADFLAGS] |= LOADFLAG_CAN_USE_HEAP;
	zp[BP_HEAP_END_PTR] = 0x00;		/* 0xfe00: heap end, real-mode offset */
	zp[BP_HEAP_END_PTR + 1] = 0xfe;
	return zp;
}

int kvm_vm_load_bzimage(struct kvm_vm *vm, const char *kernel, const char *initrd,
			const char *cmdline, char *why, size_t whylen)
{
	struct bz_layout lay;
	uint8_t *img = NULL, *zp;
	uint64_t rsdp = 0;
	size_t len;
	int err;

	err = read_file(kernel, &img, &len);
	if (err) {
		errbuf_set(why, whylen, "cannot read kernel %s: %s", kernel, strerror(-err));
		return err;
	}
	err = bz_parse(img, len, kernel, vm->mem_size, &lay, why, whylen);
	if (err)
		goto out;
	memcpy(vm->mem + lay.load, img + lay.setup_len, len - lay.setup_len);
	err = -ENOEXEC;
	zp = bz_zero_page(vm, img, len);
	if (!zp)
		goto out;
	err = boot_cmdline(vm, img, zp, cmdline, why, whylen);
	if (!err && initrd)
		err = boot_initrd(vm, img, zp, initrd, lay.kend, why, whylen);
	if (err)
		goto out;

	e820_add(zp, 0, 0x9fc00, 1);
	e820_add(zp, 0x9fc00, 0x400, 2);
	e820_add(zp, KVM_ACPI_BASE, 0x100000 - KVM_ACPI_BASE, 2);	/* ACPI, MP table */
	e820_add(zp, 0x100000, vm->mem_size - 0x100000, 1);

	err = mptable_write(vm);
	if (!err)
		err = kvm_acpi_write(vm, &rsdp);
	if (!err) {
		memcpy(zp + BP_ACPI_RSDP_ADDR, &rsdp, 8);
		err = boot_long_mode(vm, lay.load + 0x200, BOOT_ZERO_PAGE, 0);
	}
	if (err)
		errbuf_set(why, whylen, "boot state: %s", strerror(-err));
out:
	free(img);
	return err;
}
