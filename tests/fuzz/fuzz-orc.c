// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the kernel-stack reader: unwind/orc.c's table
 * loader and walker over guest memory the input makes up.  The input's
 * first 40 bytes are the format version, the registers (ip, sp, bp) and
 * the number of table entries; the rest is memory at guest address
 * 0xffffffff81000000: the two tables first (offsets, then 6-byte
 * entries), then anything, stacks included.  Loads must refuse unsorted or
 * oversized tables, walks must stay within their depth and never fault.
 *
 * Seeds: tests/fuzz/corpus/orc/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "unwind/orc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE	0xffffffff81000000ull

struct mem {
	const uint8_t *p;
	size_t len;
	unsigned reads;
};

static int mem_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct mem *m = arg;

	if (++m->reads > 100000)
		__builtin_trap();	/* a walk without bound */
	if (gva < BASE || gva - BASE > m->len || len > m->len - (gva - BASE))
		return -1;
	memcpy(buf, m->p + (gva - BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t hdr[5], pcs[UNWIND_MAX_DEPTH + 4];
	struct mem m = { 0 };
	struct unwind_mem um = { mem_read, &m };
	struct unwind_regs r = { 0 }, user;
	struct unwind_orc *o;
	char err[128];
	uint64_t nr;
	unsigned n;

	if (size < sizeof(hdr))
		return 0;
	memcpy(hdr, data, sizeof(hdr));
	m.p = data + sizeof(hdr);
	m.len = size - sizeof(hdr);
	nr = hdr[4] % 4096 + 1;
	o = unwind_orc_load(&um, BASE, BASE + 4 * nr, BASE + 4 * nr, (unsigned)(hdr[0] % 4),
			    err, sizeof(err));
	if (!o)
		return 0;
	r.ip = hdr[1];
	r.sp = hdr[2];
	r.bp = hdr[3];
	m.reads = 0;
	n = unwind_orc(o, &um, &r, pcs, UNWIND_MAX_DEPTH + 4, &user, NULL);
	if (n < 1 || n > UNWIND_MAX_DEPTH || pcs[0] != r.ip)
		__builtin_trap();
	unwind_orc_free(o);
	return 0;
}
