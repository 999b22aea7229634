// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the guest stack reader: unwind/fp.c over guest
 * memory read through vmm/guest/guestmem.c's page walk.  The input is a guest:
 * its first 32 bytes are CR3, ip, sp and bp, the rest is its RAM (page
 * tables, stack, anything), so page tables point anywhere, frame chains
 * loop, and depths run to the cap.  The walk must stay within its depth,
 * read only guest RAM, and never fault.  Each input is walked twice: page
 * by page through guestmem_read_virt(), and through the cached
 * guestmem_view the samplers use (vmm/guest/callgraph.c), whose page budget must
 * hold.
 *
 * Seeds: tests/fuzz/corpus/unwind/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unwind/unwind.h"
#include "vmm/guest/guestmem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RAM_MAX	(256u * 1024)

struct guest {
	struct guestmem *m;
	uint64_t cr3;
	unsigned reads;
};

static int guest_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct guest *g = arg;

	if (len > 16 || ++g->reads > UNWIND_MAX_DEPTH + 1)
		__builtin_trap();	/* one frame a read, one read a frame */
	return guestmem_read_virt(g->m, g->cr3, gva, buf, len) ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *ram;
	static struct guestmem *m;
	struct guest g = { 0 };
	struct unwind_regs r = { 0 };
	struct unwind_mem um = { guest_read, &g };
	uint64_t pcs[UNWIND_MAX_DEPTH + 4], hdr[4];
	unsigned n;

	if (!ram) {
		ram = mmap(NULL, RAM_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
		m = guestmem_open(getpid());
		if (ram == MAP_FAILED || !m ||
		    guestmem_add_range(m, 0, RAM_MAX, (uint64_t)(uintptr_t)ram))
			__builtin_trap();
	}
	if (size < sizeof(hdr))
		return 0;
	memcpy(hdr, data, sizeof(hdr));
	memset(ram, 0, RAM_MAX);
	memcpy(ram, data + sizeof(hdr),
	       size - sizeof(hdr) < RAM_MAX ? size - sizeof(hdr) : RAM_MAX);
	g.m = m;
	g.cr3 = hdr[0];
	r.ip = hdr[1];
	r.sp = hdr[2];
	r.bp = hdr[3];
	r.cpl = (uint8_t)(hdr[0] & 1 ? 0 : 3);
	n = unwind_fp(&um, &r, pcs, UNWIND_MAX_DEPTH + 4, NULL);
	if (n > UNWIND_MAX_DEPTH || n < 1 || pcs[0] != r.ip)
		__builtin_trap();
	{
		static struct guestmem_view v;
		struct unwind_mem vm = { guestmem_view_read, &v };
		unsigned k;

		guestmem_view_init(&v, m);
		guestmem_view_reset(&v, g.cr3, 16);
		k = unwind_fp(&vm, &r, pcs, UNWIND_MAX_DEPTH + 4, NULL);
		if (k > UNWIND_MAX_DEPTH || k < 1 || pcs[0] != r.ip || v.fetches > 16)
			__builtin_trap();
	}
	return 0;
}
