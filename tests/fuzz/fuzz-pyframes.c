// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the Python frame reader (unwind/pyframes.c): the
 * input's first 8 bytes choose the CPython minor version (11, 12, 13 by
 * the first byte), whether object types are checked (second byte, bit 0),
 * whether Py_Version was found (bit 1: else the version has no micro, as
 * when only the executable's name says it) and the thread id (bytes
 * 4..7); the rest is guest memory at 0x10000000, where _PyRuntime is
 * (with 3.13's _Py_DebugOffsets at its start), and the type objects at
 * +0x1000, +0x1040, +0x1080.  The same memory is also read as an ELF for
 * pyframes_dynsym().  Reads must stay bounded, names NUL-terminated and
 * within their buffers; a layout taken from a block must keep every offset
 * inside what is read of its object, and exactly one counter must say
 * where the layout came from or that the block was refused.
 *
 * Seeds: tests/fuzz/corpus/pyframes/ (tests/fuzz/gen-pyframes-seed.py:
 * seed-311, seed-313).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "unwind/pyframes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE	0x10000000ull

struct mem {
	const uint8_t *p;
	size_t len;
	unsigned reads;
};

static int mem_read(void *arg, uint64_t gva, void *buf, size_t len)
{
	struct mem *m = arg;

	if (++m->reads > 20000)
		__builtin_trap();	/* a walk without bound */
	if (gva < BASE || gva - BASE > m->len || len > m->len - (gva - BASE))
		return -1;
	memcpy(buf, m->p + (gva - BASE), len);
	return 0;
}

/* What pyframes.c's readers hold of each object (its buffers). */
static int layout_bounded(const struct pyframes_layout *l)
{
	return l->ts_next + 8 <= 1024 && l->ts_interp + 8 <= 1024 && l->ts_frame + 8 <= 1024 &&
	       l->ts_native_tid + 8 <= 1024 && l->fr_previous + 8 <= 512 &&
	       l->fr_code + 8 <= 512 && l->fr_instr + 8 <= 512 && l->fr_owner < 512 &&
	       l->co_code <= 512 && l->ob_type + 8 <= 64 && l->bytes_sval <= 64 &&
	       l->str_ascii_size <= 128 && l->str_compact_size <= 128 + 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t minors[3] = { 0x030b02f0, 0x030c04f0, 0x030d03f0 };
	struct pyframe fr[PYFRAMES_MAX_DEPTH];
	struct pyframes_stats st = { 0 };
	struct pyframes_target t = { 0 };
	struct pyframes_layout l;
	struct mem m = { 0 };
	struct unwind_mem um = { mem_read, &m };
	uint32_t tid;
	unsigned n;
	int err;

	if (size < 8)
		return 0;
	memcpy(&tid, data + 4, sizeof(tid));
	m.p = data + 8;
	m.len = size - 8;
	(void)pyframes_dynsym(&um, BASE, &t);
	m.reads = 0;
	memset(&t, 0, sizeof(t));
	t.runtime = BASE;
	t.version = minors[data[0] % 3];
	if (data[1] & 2)
		t.version &= ~0xffffull;
	if (!(data[1] & 1)) {
		t.code_type = BASE + 0x1000;
		t.unicode_type = BASE + 0x1040;
		t.bytes_type = BASE + 0x1080;
	}
	err = pyframes_layout(&um, &t, &l, &st);
	if (st.layout_published + st.layout_table + st.bad_offsets > 1 ||
	    (!err && st.layout_published + st.layout_table != 1) ||
	    (err == -EINVAL && st.bad_offsets != 1) ||
	    (st.layout_published && !layout_bounded(&l)))
		__builtin_trap();
	if (err)
		return 0;
	n = pyframes_read(&um, &t, &l, tid, fr, PYFRAMES_MAX_DEPTH, &st);
	if (n > PYFRAMES_MAX_DEPTH || st.bytes > (256u << 10))
		__builtin_trap();
	for (unsigned i = 0; i < n; i++) {
		char buf[PYFRAMES_NAME_MAX + PYFRAMES_FILE_MAX + 32];

		if (!memchr(fr[i].name, 0, sizeof(fr[i].name)) ||
		    !memchr(fr[i].file, 0, sizeof(fr[i].file)))
			__builtin_trap();
		pyframe_format(&fr[i], buf, sizeof(buf));
	}
	return 0;
}
