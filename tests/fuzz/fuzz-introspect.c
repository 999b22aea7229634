// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for introspection's parsers of guest memory
 * (vmm/introspect/): the VMCOREINFO text and the kallsyms decoder over a
 * memory image the input makes up.  The input's first 48 bytes are six
 * little-endian u64 offsets into the image (names, num_syms, token_table,
 * token_index, offsets, relative_base; each taken modulo twice the image's
 * size, so some point outside it); the rest is memory at guest address
 * 0xffffffff81000000, and is also parsed as VMCOREINFO text.  Decoding must
 * stay within its caps, pass only bounded names, and never read outside
 * what the callback allows.
 *
 * Seeds: tests/fuzz/corpus/introspect/ (tests/fuzz/gen-introspect-seed.py).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vmm/introspect/kallsyms.h"
#include "vmm/introspect/vmcoreinfo.h"

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

	if (++m->reads > 1000000)
		__builtin_trap();	/* a walk without bound */
	if (gva < BASE || gva - BASE > m->len || len > m->len - (gva - BASE))
		return -1;
	memcpy(buf, m->p + (gva - BASE), len);
	return 0;
}

static int on_sym(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	if (!len || len > KALLSYMS_NAME_MAX)
		__builtin_trap();
	(*(unsigned *)arg)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem m = { 0 };
	struct unwind_mem um = { mem_read, &m };
	struct kallsyms_addrs a;
	struct kallsyms_result res;
	struct vmcoreinfo vi;
	uint64_t off[6];
	unsigned n = 0;
	char err[160];

	if (size < sizeof(off) + 1)
		return 0;
	memcpy(off, data, sizeof(off));
	m.p = data + sizeof(off);
	m.len = size - sizeof(off);
	vmcoreinfo_parse((const char *)m.p, m.len, &vi);
	if (vi.release[sizeof(vi.release) - 1])
		__builtin_trap();
	for (int i = 0; i < 6; i++)
		off[i] = BASE + off[i] % (2 * m.len);
	a = (struct kallsyms_addrs){ .names = off[0], .num_syms = off[1], .token_table = off[2],
				     .token_index = off[3], .offsets = off[4],
				     .relative_base = off[5] };
	if (!kallsyms_decode(&um, &a, on_sym, &n, &res, err, sizeof(err)) &&
	    (n != res.decoded || res.decoded + res.bad > res.nr_syms ||
	     res.nr_syms > KALLSYMS_MAX_SYMS || res.bytes_read > KALLSYMS_READ_MAX + 70000))
		__builtin_trap();
	return 0;
}
