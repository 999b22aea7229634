// SPDX-License-Identifier: MIT
/*
 * ACPI tables for Linux guests of the built-in VMM: RSDP, XSDT, FADT, FACS,
 * MADT and a DSDT.  They exist for two things a distribution kernel cannot
 * get otherwise:
 *  - the virtio-mmio console.  Debian's kernel is built without
 *    CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES, so virtio_mmio.device= on the
 *    command line is ignored; virtio_mmio binds to an ACPI device with
 *    _HID "LNRO0005" whose _CRS gives the window and the interrupt.
 *  - power-off: \_S5 plus a PM1a control block at KVM_PM_PORT, so the
 *    guest's poweroff writes SLP_EN there (as on QEMU's PIIX4).
 * The MADT lists the vCPUs' LAPICs and the in-kernel IOAPIC (the MP table
 * stays for kernels without ACPI).
 *
 * Layout: everything in [KVM_ACPI_BASE, KVM_ACPI_BASE + 64 KiB), which the
 * e820 map reserves; the RSDP sits at its start, inside the BIOS area Linux
 * scans, and the zero page's acpi_rsdp_addr points at it too.
 */
#include <errno.h>
#include <string.h>

#include "vmm/kvm/kvm-priv.h"

#define ACPI_HDR	36

static uint8_t acpi_sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	return (uint8_t)-s;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void acpi_hdr(uint8_t *t, const char *sig, uint32_t len, uint8_t rev)
{
	memcpy(t, sig, 4);
	put32(t + 4, len);
	t[8] = rev;
	memcpy(t + 10, "OPVM  ", 6);
	memcpy(t + 16, "OPVMKVM ", 8);
	put32(t + 24, 1);
	memcpy(t + 28, "OPVM", 4);
	put32(t + 32, 1);
	t[9] = 0;
	t[9] = acpi_sum(t, len);
}

/* AML PkgLength for a body of n bytes (the length counts itself). */
static size_t aml_pkglen(uint8_t *p, size_t n)
{
	if (n + 1 < 0x40) {
		p[0] = (uint8_t)(n + 1);
		return 1;
	}
	n += 2;				/* two-byte form, up to 4095 */
	p[0] = (uint8_t)(0x40 | (n & 0xf));
	p[1] = (uint8_t)(n >> 4);
	return 2;
}

/*
 * DSDT body:
 *   Name (_S5, Package (4) { 0, 0, 0, 0 })
 *   Scope (\_SB) {
 *     Device (VCON) {
 *       Name (_HID, "LNRO0005")
 *       Name (_UID, 0)
 *       Name (_CRS, ResourceTemplate () {
 *         Memory32Fixed (ReadWrite, KVM_VIRTIO_CON_BASE, KVM_VIRTIO_CON_SIZE)
 *         Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive) { IRQ }
 *       })
 *     }
 *   }
 */
static size_t dsdt_body(uint8_t *out)
{
	uint8_t dev[128], crs[64], scope[192];
	size_t d = 0, c = 0, s = 0, o = 0;

	/* ResourceTemplate bytes */
	crs[c++] = 0x86;		/* Memory32Fixed */
	put16(crs + c, 9);
	c += 2;
	crs[c++] = 0x01;		/* read-write */
	put32(crs + c, (uint32_t)KVM_VIRTIO_CON_BASE);
	c += 4;
	put32(crs + c, KVM_VIRTIO_CON_SIZE);
	c += 4;
	crs[c++] = 0x89;		/* Extended Interrupt */
	put16(crs + c, 6);
	c += 2;
	crs[c++] = 0x03;		/* consumer, edge, active high, exclusive */
	crs[c++] = 1;
	put32(crs + c, KVM_VIRTIO_CON_IRQ);
	c += 4;
	crs[c++] = 0x79;		/* End tag */
	crs[c++] = 0x00;

	/* Device (VCON) body */
	dev[d++] = 0x08;		/* Name (_HID, "LNRO0005") */
	memcpy(dev + d, "_HID", 4);
	d += 4;
	dev[d++] = 0x0d;
	memcpy(dev + d, "LNRO0005", 9);
	d += 9;
	dev[d++] = 0x08;		/* Name (_UID, Zero) */
	memcpy(dev + d, "_UID", 4);
	d += 4;
	dev[d++] = 0x00;
	dev[d++] = 0x08;		/* Name (_CRS, Buffer) */
	memcpy(dev + d, "_CRS", 4);
	d += 4;
	dev[d++] = 0x11;		/* BufferOp PkgLength BufferSize bytes */
	d += aml_pkglen(dev + d, 2 + c);
	dev[d++] = 0x0a;
	dev[d++] = (uint8_t)c;
	memcpy(dev + d, crs, c);
	d += c;

	/* Scope (\_SB) { Device (VCON) { dev } } */
	scope[s++] = 0x5b;
	scope[s++] = 0x82;		/* DeviceOp */
	s += aml_pkglen(scope + s, 4 + d);
	memcpy(scope + s, "VCON", 4);
	s += 4;
	memcpy(scope + s, dev, d);
	s += d;

	/* Name (_S5, Package (4) { Zero, Zero, Zero, Zero }) */
	out[o++] = 0x08;
	memcpy(out + o, "_S5_", 4);
	o += 4;
	out[o++] = 0x12;
	o += aml_pkglen(out + o, 1 + 4);
	out[o++] = 4;
	memset(out + o, 0, 4);
	o += 4;

	out[o++] = 0x10;		/* ScopeOp */
	o += aml_pkglen(out + o, 4 + s);
	memcpy(out + o, "_SB_", 4);
	o += 4;
	memcpy(out + o, scope, s);
	o += s;
	return o;
}

/* FADT (ACPI 2.0 layout, revision 3, 244 bytes) at t. */
static void fadt_write(uint8_t *t, uint64_t facs, uint64_t dsdt)
{
	put32(t + 36, (uint32_t)facs);
	put32(t + 40, (uint32_t)dsdt);
	put16(t + 46, 9);		/* SCI_INT */
	put32(t + 56, KVM_PM_PORT - 4);	/* PM1a_EVT_BLK */
	put32(t + 64, KVM_PM_PORT);	/* PM1a_CNT_BLK */
	t[88] = 4;			/* PM1_EVT_LEN */
	t[89] = 2;			/* PM1_CNT_LEN */
	put16(t + 96, 101);		/* P_LVL2_LAT: C2 not supported */
	put16(t + 98, 1001);		/* P_LVL3_LAT: C3 not supported */
	put16(t + 109, 1u << 2);	/* IAPC_BOOT_ARCH: no VGA */
	put32(t + 112, (1u << 0) | (1u << 4) | (1u << 5));	/* WBINVD, no power/sleep buttons */
	put64(t + 132, facs);		/* X_FIRMWARE_CTRL */
	put64(t + 140, dsdt);		/* X_DSDT */
	acpi_hdr(t, "FACP", 244, 3);
}

/* MADT at t: one local APIC per vCPU, the I/O APIC, IRQ0 and SCI overrides. */
static void madt_write(uint8_t *t, unsigned nr_vcpus)
{
	size_t n;

	n = ACPI_HDR;
	put32(t + n, 0xfee00000u);	/* LAPIC address */
	put32(t + n + 4, 1);		/* PCAT_COMPAT: 8259s present */
	n += 8;
	for (unsigned i = 0; i < nr_vcpus; i++) {
		t[n] = 0;		/* Processor Local APIC */
		t[n + 1] = 8;
		t[n + 2] = (uint8_t)i;	/* ACPI processor UID */
		t[n + 3] = (uint8_t)i;	/* APIC id */
		put32(t + n + 4, 1);	/* enabled */
		n += 8;
	}
	t[n] = 1;			/* I/O APIC */
	t[n + 1] = 12;
	t[n + 2] = (uint8_t)nr_vcpus;
	put32(t + n + 4, 0xfec00000u);
	put32(t + n + 8, 0);
	n += 12;
	t[n] = 2;			/* Interrupt Source Override: PIT IRQ0 -> GSI 2 */
	t[n + 1] = 10;
	t[n + 2] = 0;
	t[n + 3] = 0;
	put32(t + n + 4, 2);
	put16(t + n + 8, 0);
	n += 10;
	t[n] = 2;			/* SCI: IRQ9, level, active high */
	t[n + 1] = 10;
	t[n + 2] = 0;
	t[n + 3] = 9;
	put32(t + n + 4, 9);
	put16(t + n + 8, 0x0d);
	n += 10;
	acpi_hdr(t, "APIC", (uint32_t)n, 3);
}

int kvm_acpi_write(struct kvm_vm *vm, uint64_t *rsdp_out)
{
	const uint64_t base = KVM_ACPI_BASE;
	uint8_t *m = kvm_vm_gpa(vm, base, KVM_ACPI_SIZE);
	uint64_t rsdp = base, xsdt = base + 0x40, fadt = base + 0x100, facs = base + 0x200;
	uint64_t madt = base + 0x300, dsdt = base + 0x800;
	uint8_t *t;
	size_t n;

	if (!m || vm->nr_vcpus > 200)
		return -ENOMEM;
	memset(m, 0, KVM_ACPI_SIZE);

	/* DSDT */
	t = m + (dsdt - base);
	n = dsdt_body(t + ACPI_HDR);
	acpi_hdr(t, "DSDT", (uint32_t)(ACPI_HDR + n), 2);

	/* FACS: no checksum, 64 bytes */
	t = m + (facs - base);
	memcpy(t, "FACS", 4);
	put32(t + 4, 64);
	t[32] = 2;			/* version */

	fadt_write(m + (fadt - base), facs, dsdt);
	madt_write(m + (madt - base), vm->nr_vcpus);

	/* XSDT */
	t = m + (xsdt - base);
	put64(t + ACPI_HDR, fadt);
	put64(t + ACPI_HDR + 8, madt);
	acpi_hdr(t, "XSDT", ACPI_HDR + 16, 1);

	/* RSDP (ACPI 2.0+, 36 bytes) */
	t = m + (rsdp - base);
	memcpy(t, "RSD PTR ", 8);
	memcpy(t + 9, "OPVM  ", 6);
	t[15] = 2;
	put32(t + 16, 0);		/* no RSDT: XSDT only */
	put32(t + 20, 36);
	put64(t + 24, xsdt);
	t[8] = acpi_sum(t, 20);
	t[32] = acpi_sum(t, 36);
	*rsdp_out = rsdp;
	return 0;
}
