// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the DWARF unwinder (unwind/dwarf-cfi.c) over hostile
 * stacks and registers, with real CFI: the pcs land in this process's own
 * files (this binary, libc.so.6, ...) as /proc/self/maps names them.
 *
 * Input: a 64-byte header, then stack bytes.
 *   header[0]  flags: bit 0: the stack is a real one (a libc qsort()
 *              callback's, captured once, tests/unit/unwind-capture.h) with
 *              the input bytes written over it at header[1] % window;
 *              else the input bytes are the whole window.  Bits 1-2:
 *              find_image as the maps say, none (another address space:
 *              stale modules), or the maps one page off.  Bit 3: cpl 0.
 *   header[2]  ip: with bit 4 of flags, an offset into mapping
 *              header[3] % nmaps; else raw
 *   header[4]  sp delta (added to the captured sp), header[5] bp,
 *   header[6]  rbx, header[7] max depth
 * The walk must return 1..max pcs, pcs[0] = ip, only user pcs after it at
 * cpl 3, and read nothing outside the window (AddressSanitizer: the window
 * is a heap copy of exactly its length).  One context lives across inputs:
 * its file cache and address-space switches are fuzzed too.
 *
 * Seeds: tests/fuzz/corpus/unwind-dwarf/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/dwarf-cfi.h"
#include "tests/unit/unwind-capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR_WORDS 8

static int find_none(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	return -ENOENT;
}

static int find_shifted(void *arg, uint64_t pc, struct unwind_dwarf_image *out)
{
	int err = capture_find_image(arg, pc, out);

	out->pgoff ^= 0x1000;
	return err;
}

static int (*const finders[4])(void *, uint64_t, struct unwind_dwarf_image *) = {
	capture_find_image, find_none, find_shifted, capture_find_image,
};

/* The window for this input: a heap copy of exactly len bytes. */
static uint8_t *make_window(const uint64_t *hdr, const uint8_t *data, size_t size,
			    size_t *len)
{
	uint8_t *w;

	if (hdr[0] & 1) {
		size_t at = cap.len ? hdr[1] % cap.len : 0;

		*len = cap.len;
		w = malloc(*len ? *len : 1);
		if (!w)
			return NULL;
		memcpy(w, cap.stack, cap.len);
		if (size > *len - at)
			size = *len - at;
		memcpy(w + at, data, size);
		return w;
	}
	*len = size < UNWIND_DWARF_WINDOW ? size : UNWIND_DWARF_WINDOW;
	w = malloc(*len ? *len : 1);
	if (w)
		memcpy(w, data, *len);
	return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct unwind_dwarf *u;
	uint64_t hdr[HDR_WORDS], pcs[UNWIND_MAX_DEPTH];
	struct unwind_regs r;
	enum unwind_stop why;
	unsigned n, max;
	uint8_t *w;
	size_t len;

	if (!u) {
		u = unwind_dwarf_new();
		if (!u || capture_through_qsort())
			__builtin_trap();
	}
	if (size < sizeof(hdr))
		return 0;
	memcpy(hdr, data, sizeof(hdr));
	data += sizeof(hdr);
	size -= sizeof(hdr);
	r = cap.r;
	r.cpl = hdr[0] & 8 ? 0 : 3;
	if (hdr[0] & 16 && cap.nmap) {
		const struct capture_map *m = &cap.map[hdr[3] % cap.nmap];

		r.ip = m->start + hdr[2] % (m->end - m->start);
	} else if (!(hdr[0] & 1)) {
		r.ip = hdr[2];
	}
	r.sp += hdr[4];
	r.gpr[7] = r.sp;
	if (!(hdr[0] & 1) || hdr[5])
		r.bp = hdr[5];
	r.gpr[3] = hdr[6];
	max = (unsigned)(hdr[7] % (UNWIND_MAX_DEPTH + 2));
	w = make_window(hdr, data, size, &len);
	if (!w)
		return 0;
	n = unwind_dwarf(u, &r, w, len, finders[(hdr[0] >> 1) & 3], &cap, pcs, max, &why);
	free(w);
	if (n > max || (max && (n < 1 || pcs[0] != r.ip)) || why > UNWIND_BAD_FRAME)
		__builtin_trap();
	for (unsigned i = 1; i < n; i++)
		if (r.cpl == 3 && pcs[i] >= 0x0000800000000000ull)
			__builtin_trap();
	return 0;
}
