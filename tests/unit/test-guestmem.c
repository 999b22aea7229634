// SPDX-License-Identifier: MIT
/*
 * Guest memory reader (vmm/guest/guestmem.c): bounded reads of memory another
 * process maps (this process, a child standing in for the VMM), the x86-64
 * page-table walk on tables built in that memory, and the ranges of a real
 * QEMU (TCG, BIOS only) read back against the monitor's own `xp`.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "vmm/guest/guestmem.h"
#include "vmm/guest/qmp.h"
#include "qemu-harness.h"

#define MIB (1024ull * 1024)

static uint64_t hva_of(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

static void test_ranges(void **state)
{
	struct guestmem *m = guestmem_open(getpid());
	uint8_t *ram = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t buf[64];

	assert_non_null(m);
	assert_true(ram != MAP_FAILED);
	for (int i = 0; i < 8192; i++)
		ram[i] = (uint8_t)(i * 7);
	/* Two "guest RAM" ranges: gpa 0x1000-0x1fff and 0x100000-0x100fff. */
	assert_int_equal(guestmem_add_range(m, 0x100000, 4096, hva_of(ram + 4096)), 0);
	assert_int_equal(guestmem_add_range(m, 0x1000, 4096, hva_of(ram)), 0);
	assert_int_equal(guestmem_nr_ranges(m), 2);
	assert_int_equal(guestmem_add_range(m, 0x1800, 4096, hva_of(ram)), -EEXIST);
	assert_int_equal(guestmem_add_range(m, 0x800, 0x801, hva_of(ram)), -EEXIST);
	assert_int_equal(guestmem_add_range(m, 0x10000, 0, hva_of(ram)), -EINVAL);
	assert_int_equal(guestmem_add_range(m, UINT64_MAX - 10, 4096, hva_of(ram)), -EINVAL);
	assert_int_equal(guestmem_add_range(m, 0x200000, 4096, UINT64_MAX - 100), -EINVAL);

	assert_int_equal(guestmem_read(m, 0x1010, buf, 16), 0);
	assert_memory_equal(buf, ram + 0x10, 16);
	assert_int_equal(guestmem_read(m, 0x100ff0, buf, 16), 0);
	assert_memory_equal(buf, ram + 4096 + 0xff0, 16);
	/* The last byte of a range reads; one past it does not. */
	assert_int_equal(guestmem_read(m, 0x1fff, buf, 1), 0);
	assert_int_equal(buf[0], ram[0xfff]);
	assert_int_equal(guestmem_read(m, 0x1ff8, buf, 9), -EFAULT);
	assert_int_equal(guestmem_read(m, 0x2000, buf, 1), -EFAULT);
	assert_int_equal(guestmem_read(m, 0, buf, 1), -EFAULT);
	assert_int_equal(guestmem_read(m, 0xfff, buf, 2), -EFAULT);
	assert_int_equal(guestmem_read(m, UINT64_MAX, buf, 2), -EFAULT);
	assert_int_equal(guestmem_read(m, 0x1000, buf, 0), 0);
	/* Writes by the "VMM" show up in the next read. */
	ram[0x20] = 0xa5;
	assert_int_equal(guestmem_read(m, 0x1020, buf, 1), 0);
	assert_int_equal(buf[0], 0xa5);

	/* A range whose host memory is unmapped reads as -EFAULT. */
	munmap(ram + 4096, 4096);
	assert_int_equal(guestmem_read(m, 0x100000, buf, 8), -EFAULT);
	munmap(ram, 4096);
	guestmem_close(m);
	guestmem_close(NULL);
	assert_null(guestmem_open(0));
	assert_int_equal(errno, EINVAL);
}

/* A child maps the "guest RAM" and keeps counting in its first word; the
 * parent reads it through the child's /proc/PID/mem, as from QEMU. */
/* The built-in VMM's own RAM: reads become copies, bounded as before. */
static void test_map_self(void **state)
{
	struct guestmem *m = guestmem_open(getpid());
	static uint8_t ram[8192];
	uint8_t buf[16];

	(void)state;
	assert_non_null(m);
	assert_int_equal(guestmem_add_range(m, 0x1000, sizeof(ram), hva_of(ram)), 0);
	assert_int_equal(guestmem_map_self(m), 1);
	ram[0x10] = 0x5a;
	assert_int_equal(guestmem_read(m, 0x1010, buf, 1), 0);
	assert_int_equal(buf[0], 0x5a);
	ram[0x10] = 0xa5;		/* a copy of the memory now, not of then */
	assert_int_equal(guestmem_read(m, 0x1010, buf, 1), 0);
	assert_int_equal(buf[0], 0xa5);
	assert_int_equal(guestmem_read(m, 0x1000 + sizeof(ram) - 8, buf, 16), -EFAULT);
	guestmem_close(m);
}

static void test_child(void **state)
{
	int p[2];
	uint64_t hva = 0, v1 = 0, v2 = 0, magic = 0;
	struct guestmem *m;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		volatile uint64_t *ram = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE,
					      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t a = hva_of((const void *)ram);

		if (ram == MAP_FAILED)
			_exit(1);
		ram[1] = 0x6f70766d6d656d21ull;
		if (write(p[1], &a, sizeof(a)) != sizeof(a))
			_exit(1);
		for (;;)
			ram[0]++;
	}
	close(p[1]);
	assert_int_equal(read(p[0], &hva, sizeof(hva)), sizeof(hva));
	close(p[0]);
	m = guestmem_open(pid);
	assert_non_null(m);
	assert_int_equal(guestmem_add_range(m, 0x40000000, 2 * MIB, hva), 0);
	assert_int_equal(guestmem_read(m, 0x40000008, &magic, 8), 0);
	assert_true(magic == 0x6f70766d6d656d21ull);
	assert_int_equal(guestmem_read(m, 0x40000000, &v1, 8), 0);
	v2 = v1;
	/* read while it runs, never stopped (up to 5 s for the child to get
	 * a core on a busy host) */
	for (int i = 0; i < 250 && v2 == v1; i++) {
		usleep(20000);
		assert_int_equal(guestmem_read(m, 0x40000000, &v2, 8), 0);
	}
	assert_true(v2 > v1);
	assert_int_equal(guestmem_read(m, 0x40000000 + 2 * MIB - 4, &v1, 8), -EFAULT);
	/* not this process's RAM: no reads through our own addresses */
	assert_int_equal(guestmem_map_self(m), -EINVAL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* The VMM is gone: reads fail cleanly. */
	assert_true(guestmem_read(m, 0x40000000, &v1, 8) < 0);
	guestmem_close(m);
}

/* "Guest RAM" a child maps from a shared memfd, as QEMU's memfd backend
 * does: guestmem_map_shared() maps it into us and reads see the child's
 * writes without a pread; anonymous RAM stays on pread. */
static void test_map_shared(void **state)
{
	int p[2], fd = memfd_create("opvm-test-ram", 0);
	uint64_t hva[2] = { 0, 0 }, v1 = 0, v2 = 0;
	struct guestmem *m;
	pid_t pid;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2 * MIB), 0);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		volatile uint64_t *ram = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE,
					      MAP_SHARED, fd, 0);
		volatile uint64_t *anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t a[2] = { hva_of((const void *)ram), hva_of((const void *)anon) };

		if (ram == MAP_FAILED || anon == MAP_FAILED)
			_exit(1);
		anon[0] = 42;
		if (write(p[1], a, sizeof(a)) != sizeof(a))
			_exit(1);
		for (;;)
			ram[1]++;
	}
	close(p[1]);
	assert_int_equal(read(p[0], hva, sizeof(hva)), sizeof(hva));
	close(p[0]);
	m = guestmem_open(pid);
	assert_non_null(m);
	assert_int_equal(guestmem_add_range(m, 0, 2 * MIB, hva[0]), 0);
	assert_int_equal(guestmem_add_range(m, 4 * MIB, 4096, hva[1]), 0);
	assert_int_equal(guestmem_map_shared(m), 1);
	assert_int_equal(guestmem_read(m, 8, &v1, 8), 0);
	v2 = v1;
	for (int i = 0; i < 250 && v2 == v1; i++) {	/* as above */
		usleep(20000);
		assert_int_equal(guestmem_read(m, 8, &v2, 8), 0);
	}
	assert_true(v2 > v1);
	assert_int_equal(guestmem_read(m, 4 * MIB, &v1, 8), 0);
	assert_true(v1 == 42);
	assert_int_equal(guestmem_read(m, 2 * MIB - 4, &v1, 8), -EFAULT);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	guestmem_close(m);
	close(fd);
}

/* Page tables at guest-physical 0..64 KiB of a 4 MiB "guest RAM". */
struct pt_ram {
	struct guestmem *m;
	uint64_t *ram;
};

static void pt_set(struct pt_ram *p, uint64_t table_gpa, unsigned idx, uint64_t pte)
{
	p->ram[table_gpa / 8 + idx] = pte;
}

static uint64_t walk(struct pt_ram *p, uint64_t cr3, uint64_t va, int *rc)
{
	uint64_t gpa = 0;

	*rc = guestmem_virt_to_phys(p->m, cr3, va, &gpa);
	return gpa;
}

/* The stack walkers' cached view: reads across a page boundary, a page
 * budget, a reset forgets what changed. */
static void view_checks(struct pt_ram *p, uint64_t va4k)
{
	static struct guestmem_view v;
	uint64_t page = va4k & ~0xfffull, w[2];
	uint8_t *frame = (uint8_t *)p->ram + 0x123000;

	pt_set(p, 0x4000, 360, 0x124000 | 0x7);	/* the next page, too */
	memset(frame, 0, 8192);
	frame[0xff8] = 0x11;			/* last word of the first page */
	frame[0x1000] = 0x22;			/* first word of the second */
	guestmem_view_init(&v, p->m);
	guestmem_view_reset(&v, 0x1000 | 0x5, 2);
	assert_int_equal(guestmem_view_read(&v, page + 0xff8, w, 16), 0);
	assert_true(w[0] == 0x11 && w[1] == 0x22);
	assert_true(v.fetches == 2);
	/* Cached: a write now is not seen until the next sample... */
	frame[0xff8] = 0x33;
	assert_int_equal(guestmem_view_read(&v, page + 0xff8, w, 8), 0);
	assert_true(w[0] == 0x11 && v.fetches == 2);
	/* ...and the budget is spent: a third page fails. */
	assert_int_equal(guestmem_view_read(&v, page + 0x2000, w, 8), -EFAULT);
	guestmem_view_reset(&v, 0x1000, 4);
	assert_int_equal(guestmem_view_read(&v, page + 0xff8, w, 8), 0);
	assert_true(w[0] == 0x33);
	/* Unmapped, wrapping, oversized: refused. */
	assert_int_equal(guestmem_view_read(&v, page + 0x2000, w, 8), -EFAULT);
	assert_int_equal(guestmem_view_read(&v, UINT64_MAX - 3, w, 8), -EFAULT);
	assert_int_equal(guestmem_view_read(&v, page, frame, 1u << 20), -EFAULT);
}

static void test_page_walk(void **state)
{
	struct pt_ram p;
	int rc;
	/* va 0x7f12_3456_7abc: PML4 254, PDPT 72, PD 418, PT 359, off 0xabc */
	const uint64_t va4k = 0x00007f1234567abcull;
	/* va 0xffff_8880_0012_3456: PML4 273, PDPT 0, PD 0 (a 2M page) */
	const uint64_t va2m = 0xffff888000123456ull;
	/* 1G page: PML4 1, PDPT 3 */
	const uint64_t va1g = (1ull << 39) + (3ull << 30) + 0x2345678;

	p.ram = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p.ram != MAP_FAILED);
	p.m = guestmem_open(getpid());
	assert_non_null(p.m);
	assert_int_equal(guestmem_add_range(p.m, 0, 4 * MIB, hva_of(p.ram)), 0);

	/* 4-level, 4K page: PML4 0x1000 -> PDPT 0x2000 -> PD 0x3000 -> PT 0x4000 */
	pt_set(&p, 0x1000, 254, 0x2000 | 0x7);
	pt_set(&p, 0x2000, 72, 0x3000 | 0x7);
	pt_set(&p, 0x3000, 418, 0x4000 | 0x7);
	pt_set(&p, 0x4000, 359, 0x8000000000123000ull | 0x7);	/* NX set */
	/* CR3 with PCID bits and bit 63 (no-flush): ignored by the walk. */
	assert_int_equal(walk(&p, 0x8000000000001005ull, va4k, &rc), 0x123abc);
	assert_int_equal(rc, 0);
	/* Not present at the last level. */
	assert_int_equal(walk(&p, 0x1000, va4k + 0x1000, &rc), 0);
	assert_int_equal(rc, -ENOENT);
	/* Not present at the top. */
	walk(&p, 0x1000, 0x1000, &rc);
	assert_int_equal(rc, -ENOENT);

	/* 2M page at PD level: PML4 273 -> PDPT 0x5000 -> PD 0x6000[0] PS */
	pt_set(&p, 0x1000, 273, 0x5000 | 0x3);
	pt_set(&p, 0x5000, 0, 0x6000 | 0x3);
	pt_set(&p, 0x6000, 0, 0x200000 | 0x83);
	assert_int_equal(walk(&p, 0x1000, va2m, &rc), 0x200000 + 0x123456);
	assert_int_equal(rc, 0);

	/* 1G page at PDPT level: frame 0x40000000. */
	pt_set(&p, 0x1000, 1, 0x7000 | 0x3);
	pt_set(&p, 0x7000, 3, 0x40000000 | 0x83);
	assert_int_equal(walk(&p, 0x1000, va1g, &rc), 0x40000000 + 0x2345678);
	assert_int_equal(rc, 0);

	/* A table pointer outside guest RAM: -EFAULT, not a host read. */
	pt_set(&p, 0x3000, 419, 0x7fff000000ull | 0x7);
	walk(&p, 0x1000, va4k + (1ull << 21), &rc);
	assert_int_equal(rc, -EFAULT);
	walk(&p, 0x7ffff000, va4k, &rc);
	assert_int_equal(rc, -EFAULT);

	/* 5-level: PML5 0x9000[0] -> the 4-level tree's PML4 at 0x1000. */
	pt_set(&p, 0x9000, 0, 0x1000 | 0x7);
	guestmem_set_paging_levels(p.m, 5);
	assert_int_equal(walk(&p, 0x9000, va4k, &rc), 0x123abc);
	assert_int_equal(rc, 0);
	/* PML5 index 1 (va bit 48) is not present. */
	walk(&p, 0x9000, va4k | (1ull << 48), &rc);
	assert_int_equal(rc, -ENOENT);
	guestmem_set_paging_levels(p.m, 4);
	assert_int_equal(walk(&p, 0x1000, va4k, &rc), 0x123abc);
	view_checks(&p, va4k);

	guestmem_close(p.m);
	munmap(p.ram, 4 * MIB);
}

/* A monitor's answer is its owner's to choose: RAM put where this process
 * maps nothing is refused whole, RAM inside its mappings taken. */
static uint64_t lie_hva;

static int lie_hmp(void *arg, const char *cmd, char **out)
{
	(void)arg;
	if (!strcmp(cmd, "info mtree -f"))
		*out = strdup("FlatView #0\n AS \"memory\", root: system\n"
			      "  0000000000000000-000000000000ffff (prio 0, ram): pc.ram\n");
	else if (asprintf(out, "Host virtual address for 0x0 (pc.ram) is 0x%" PRIx64 "\n",
			  lie_hva) < 0)
		*out = NULL;
	return *out ? 0 : -ENOMEM;
}

static void test_monitor_outside_maps(void **state)
{
	size_t len = 64 * 1024;
	uint8_t *buf = mmap(NULL, 3 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0), b[4];
	struct guestmem *m;

	(void)state;
	assert_true(buf != MAP_FAILED);
	/* nothing mapped past buf's first 64 KiB: the range runs into a hole */
	assert_int_equal(munmap(buf + len, 2 * len), 0);
	m = guestmem_open(getpid());
	assert_non_null(m);
	lie_hva = (uint64_t)(uintptr_t)(buf + len / 2);
	assert_int_equal(guestmem_add_monitor_ranges(m, lie_hmp, NULL), -EFAULT);
	assert_int_equal(guestmem_nr_ranges(m), 0);
	lie_hva = 0x10000;	/* below mmap_min_addr: never mapped */
	assert_int_equal(guestmem_add_monitor_ranges(m, lie_hmp, NULL), -EFAULT);
	assert_int_equal(guestmem_nr_ranges(m), 0);
	memcpy(buf + 100, "ram!", 4);
	lie_hva = (uint64_t)(uintptr_t)buf;
	assert_int_equal(guestmem_add_monitor_ranges(m, lie_hmp, NULL), 0);
	assert_int_equal(guestmem_nr_ranges(m), 1);
	assert_int_equal(guestmem_read(m, 100, b, 4), 0);
	assert_memory_equal(b, "ram!", 4);
	guestmem_close(m);
	munmap(buf, len);
}

static void test_qemu(void **state)
{
	struct qemu q = { 0 };
	struct qmp *mon;
	struct guestmem *m;
	uint8_t a[16], b[16], want[16];

	if (!qemu_available()) {
		printf("SKIP: qemu-system-x86_64 is not installed\n");
		skip();
	}
	assert_int_equal(qemu_start_with(&q, "guestmem", "-qmp"), 0);
	/* Generous: on a loaded machine QEMU's greeting can take seconds. */
	mon = qmp_open(q.sock, 30000);
	if (!mon)
		printf("qmp_open: %s\n", strerror(errno));
	assert_non_null(mon);
	m = guestmem_open(q.pid);
	assert_non_null(m);
	assert_int_equal(guestmem_add_qemu_ranges(m, mon), 0);
	/* pc.ram (below and above the ROM hole), pc.rom, the BIOS twice. */
	assert_true(guestmem_nr_ranges(m) >= 4);

	/* The BIOS reset vector: a far jmp (0xea), the same bytes at the
	 * top of 4 GiB, and what the monitor itself reads there. */
	assert_int_equal(guestmem_read(m, 0xffff0, a, sizeof(a)), 0);
	assert_int_equal(a[0], 0xea);
	assert_int_equal(guestmem_read(m, 0xfffffff0, b, sizeof(b)), 0);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(qemu_hmp_bytes(mon, "xp", 0xffff0, want, sizeof(want)), 0);
	assert_memory_equal(a, want, sizeof(a));

	/* Guest RAM at the end of the 32 MiB, and just past it. */
	assert_int_equal(guestmem_read(m, 32 * MIB - 16, a, sizeof(a)), 0);
	assert_int_equal(qemu_hmp_bytes(mon, "xp", 32 * MIB - 16, want, sizeof(want)), 0);
	assert_memory_equal(a, want, sizeof(a));
	assert_int_equal(guestmem_read(m, 32 * MIB - 8, a, sizeof(a)), -EFAULT);
	/* MMIO (the IOAPIC) is not RAM. */
	assert_int_equal(guestmem_read(m, 0xfec00000, a, 4), -EFAULT);

	/* The BIOS runs and writes RAM; after a stop both readers agree on
	 * a page it used (the BDA/IVT at 0). */
	for (int i = 0; i < 20; i++) {	/* 300 ms at a time, up to 6 s */
		assert_int_equal(qmp_execute(mon, "cont", NULL, NULL, NULL, 0, 2000), 0);
		usleep(300000);
		assert_int_equal(qmp_execute(mon, "stop", NULL, NULL, NULL, 0, 2000), 0);
		assert_int_equal(guestmem_read(m, 0x20, a, sizeof(a)), 0);
		if (a[2] || a[3])
			break;
	}
	assert_int_equal(guestmem_read(m, 0x400, a, sizeof(a)), 0);
	assert_int_equal(qemu_hmp_bytes(mon, "xp", 0x400, want, sizeof(want)), 0);
	assert_memory_equal(a, want, sizeof(a));
	assert_int_equal(guestmem_read(m, 0x20, a, sizeof(a)), 0);
	assert_int_equal(qemu_hmp_bytes(mon, "xp", 0x20, want, sizeof(want)), 0);
	assert_memory_equal(a, want, sizeof(a));
	assert_true(a[2] || a[3]);	/* an IVT entry the BIOS set */

	guestmem_close(m);
	qmp_close(mon);
	qemu_stop(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_child),
		cmocka_unit_test(test_map_self),
		cmocka_unit_test(test_map_shared),
		cmocka_unit_test(test_page_walk),
		cmocka_unit_test(test_monitor_outside_maps),
		cmocka_unit_test(test_qemu),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
