// SPDX-License-Identifier: MIT
/*
 * The kallsyms tables found by their shape in the kernel image, for
 * kernels whose VMCOREINFO does not list them (before 6.0): the method
 * vmlinux-to-elf published, written here from the format
 * (vmm/introspect/kallsyms.h).  scripts/kallsyms.c emits each table 8-byte
 * aligned, in one of two orders:
 *
 *   before 6.4: offsets, relative_base, num_syms, names, markers,
 *               token_table, token_index
 *   6.4 on:     num_syms, names, markers, token_table, token_index,
 *               offsets, relative_base (gone in later kernels: offsets
 *               then count from _text)
 *
 * The token table is the anchor: every byte value that stands for itself
 * is a one-character token at its own index, so the digits '0'..'9' sit
 * at indices 0x30..0x39 as "0\0" "1\0" ... "9\0".  From a match, the rest
 * of the table ends where token_index starts, whose 256 offsets must
 * describe exactly those strings; markers (u32, or u64 in old kernels)
 * end just before the token table, rising from 0, one per 256 names;
 * num_syms sits 8 bytes before names, and the first and last blocks of
 * names must span exactly what the markers say.  Each check is cheap and
 * a false match fails one of them.
 *
 * Bounded: at most KALLSYMS_FIND_MAX bytes of the image are read, 1 MiB
 * at a time, and the search stops after FIND_HOLE_MAX unmapped MiB in a
 * row (the end of the kernel's mapping) or KALLSYMS_FIND_CANDIDATES runs
 * of digits checked (a guest that plants them); a check reads at most
 * some hundred KiB, in a few reads.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bytes.h"
#include "lib/errbuf.h"
#include "lib/x86.h"
#include "vmm/introspect/kallsyms.h"

#define CHUNK		(1u << 20)
#define FIND_HOLE_MAX	8u		/* MiB unmapped in a row: the end */
#define TOKENS		256u
#define TOKTAB_MAX	8192u		/* from the digits to the table's end */
#define MARKERS_MAX	(KALLSYMS_MAX_SYMS / 256)
#define BLOCK_MAX	((size_t)256 * (KALLSYMS_NAME_MAX + 3))	/* 256 names */

static const char digits[] = "0\0" "1\0" "2\0" "3\0" "4\0" "5\0" "6\0" "7\0" "8\0" "9";

struct finder {
	const struct unwind_mem *m;
	struct kallsyms_find_result *res;
	uint64_t token_table, token_index;
	uint64_t markers, names, num_syms;
	uint32_t nr, nm;		/* symbols, markers */
	uint32_t *mk;			/* the markers, MARKERS_MAX */
	uint8_t *buf;			/* BLOCK_MAX + TOKTAB_MAX + 16 */
	uint8_t *cnt;			/* before the markers, or the markers */
	size_t chunk;			/* bytes searched per read: CHUNK at most */
};

static int rd(struct finder *f, uint64_t va, void *p, size_t n)
{
	if (va < OPVM_KERNEL_MAP || va + n < va)
		return -EFAULT;
	f->res->bytes_read += n;
	return f->m->read(f->m->arg, va, p, n) ? -EFAULT : 0;
}

/* The token table around the digits at d: token_table and token_index
 * set when token_index's 256 offsets describe the strings exactly. */
static bool find_tokens(struct finder *f, uint64_t d)
{
	uint8_t *t = f->buf;
	uint16_t idx[TOKENS];
	size_t o = 0, start;
	uint64_t ti;

	if (rd(f, d, t, TOKTAB_MAX))
		return false;
	for (unsigned i = 0x30; i < TOKENS; i++) {	/* to the last string's end */
		const uint8_t *e = memchr(t + o, 0, TOKTAB_MAX - o);

		if (!e)
			return false;
		o = (size_t)(e - t) + 1;
	}
	ti = (d + o + 7) & ~7ull;
	if (rd(f, ti, idx, sizeof(idx)) || le16toh(idx[0]) != 0)
		return false;
	start = le16toh(idx[0x30]);
	if (start > d || ((d - start) & 7) || o + start > TOKTAB_MAX)
		return false;
	if (rd(f, d - start, t, start + o))
		return false;
	for (unsigned i = 0; i < TOKENS; i++) {
		size_t at = le16toh(idx[i]), next = i + 1 < TOKENS ? le16toh(idx[i + 1]) : start + o;

		if (next <= at || next > start + o || t[next - 1] || memchr(t + at, 0, next - at - 1))
			return false;
	}
	f->token_table = d - start;
	f->token_index = ti;
	return true;
}

/* Reads up to n bytes ending at end into buf's tail, a page at a time
 * backwards where the whole does not read; returns the bytes read. */
static size_t rd_back(struct finder *f, uint64_t end, uint8_t *buf, size_t n)
{
	size_t got = 0;

	if (!rd(f, end - n, buf, n))
		return n;
	while (got < n) {
		size_t in = (size_t)((end - got) & OPVM_PAGE_MASK);
		size_t step = in ? in : OPVM_PAGE_SIZE;		/* back to its page's start */

		step = step < n - got ? step : n - got;
		if (rd(f, end - got - step, buf + n - got - step, step))
			break;
		got += step;
	}
	return got;
}

/* The markers before the token table, width 4 or 8: rising from 0.  b
 * holds the have bytes before the token table. */
static bool find_markers(struct finder *f, const uint8_t *b, size_t have, unsigned w)
{
	size_t end = have;
	uint64_t v, prev = UINT64_MAX;
	uint32_t n = 0;

	if (w == 4 && have >= 4 && !bytes_le32(b + have - 4))
		end -= 4;	/* padding to the token table's alignment */
	for (; end >= w && n < MARKERS_MAX; end -= w) {
		v = w == 4 ? bytes_le32(b + end - w) : bytes_le64(b + end - w);
		if (v >= prev || v > UINT32_MAX)
			return false;
		f->mk[MARKERS_MAX - 1 - n++] = (uint32_t)v;
		prev = v;
		if (!v) {
			uint64_t at = f->token_table - (have - end) - w;

			if (n < 2 || (at & 7))
				return false;
			memmove(f->mk, f->mk + MARKERS_MAX - n, n * sizeof(*f->mk));
			f->nm = n;
			f->markers = at;
			return true;
		}
	}
	return false;
}

/* Walks count names from va: their end, or 0 when one does not fit. */
static uint64_t walk_names(struct finder *f, uint64_t va, uint32_t count, uint64_t limit)
{
	size_t have = limit - va < BLOCK_MAX + 2 ? (size_t)(limit - va) : BLOCK_MAX + 2, o = 0;

	if (limit <= va || rd(f, va, f->buf, have))
		return 0;
	for (uint32_t i = 0; i < count; i++) {
		size_t len, hdr = 1;

		if (o >= have)
			return 0;
		len = f->buf[o];
		if (len & 0x80) {	/* 6.1 on: two bytes, ULEB128 */
			if (o + 1 >= have)
				return 0;
			len = (len & 0x7f) | ((size_t)f->buf[o + 1] << 7);
			hdr = 2;
		}
		if (!len || len > KALLSYMS_NAME_MAX + 1 || o + hdr + len > have)
			return 0;
		o += hdr + len;
	}
	return va + o;
}

/* num_syms and names before the markers: the first block of 256 names
 * must end at marker 1, the last block at the markers' start.  The
 * candidates' counts are read in one block before the last one. */
static bool find_names(struct finder *f)
{
	uint64_t last = f->mk[f->nm - 1], hi, lo;
	size_t have;

	if (f->markers < last + BLOCK_MAX + 16)
		return false;
	hi = (f->markers - last - 1) & ~7ull;
	lo = f->markers - last - BLOCK_MAX - 8;
	have = rd_back(f, hi, f->cnt, (size_t)(hi - lo) + 8);
	for (uint64_t n = hi; n >= lo && hi - n + 8 <= have; n -= 8) {
		uint32_t c = bytes_le32(f->cnt + have - (hi - n) - 8);
		uint64_t e;

		if (c <= (f->nm - 1) * 256u || c > f->nm * 256u)
			continue;
		if (walk_names(f, n, 256, f->markers) != n + f->mk[1])
			continue;
		e = walk_names(f, n + last, c - (f->nm - 1) * 256u, f->markers);
		if (!e || e > f->markers || f->markers - e > 7)
			continue;
		f->names = n;
		f->num_syms = n - 8;
		f->nr = c;
		return true;
	}
	return false;
}

/* The offsets and relative_base, in the order before 6.4 or after. */
static bool find_offsets(struct finder *f, struct kallsyms_addrs *a)
{
	uint64_t len = ((uint64_t)f->nr * 4 + 7) & ~7ull, base = 0;

	if (!rd(f, f->num_syms - 8, &base, 8) && le64toh(base) >= OPVM_KERNEL_MAP) {
		a->relative_base = f->num_syms - 8;
		a->offsets = a->relative_base - len;
		return true;
	}
	a->offsets = f->token_index + TOKENS * 2;
	if (!rd(f, a->offsets + len, &base, 8) && le64toh(base) >= OPVM_KERNEL_MAP)
		a->relative_base = a->offsets + len;
	return true;	/* without relative_base: from _text (kallsyms_decode) */
}

/* Checks a digits match at d; 1 with a filled when it is the table. */
static int check_match(struct finder *f, uint64_t d, struct kallsyms_addrs *a)
{
	size_t have;

	f->res->candidates++;
	if (!find_tokens(f, d))
		return 0;
	have = rd_back(f, f->token_table, f->cnt, MARKERS_MAX * 8);
	if (!find_markers(f, f->cnt, have, 4) && !find_markers(f, f->cnt, have, 8))
		return 0;
	if (!find_names(f))
		return 0;
	memset(a, 0, sizeof(*a));
	a->names = f->names;
	a->num_syms = f->num_syms;
	a->token_table = f->token_table;
	a->token_index = f->token_index;
	return find_offsets(f, a) ? 1 : 0;
}

/* Reads one chunk, page by page where the whole read fails; returns the
 * bytes that read (unreadable pages zeroed). */
static size_t read_chunk(struct finder *f, uint64_t va, uint8_t *p, size_t n)
{
	size_t got = 0;

	if (!f->m->read(f->m->arg, va, p, n))
		return n;
	for (size_t o = 0; o < n; o += OPVM_PAGE_SIZE) {
		if (f->m->read(f->m->arg, va + o, p + o, OPVM_PAGE_SIZE))
			memset(p + o, 0, OPVM_PAGE_SIZE);
		else
			got += OPVM_PAGE_SIZE;
	}
	return got;
}

static int scan(struct finder *f, uint8_t *chunk, uint64_t start, uint64_t max,
		struct kallsyms_addrs *a)
{
	const size_t pl = sizeof(digits), keep = pl - 1;
	unsigned holes = 0;

	for (uint64_t off = 0; off < max && start + off + f->chunk > start; off += f->chunk) {
		size_t got = read_chunk(f, start + off, chunk + keep, f->chunk);

		f->res->scanned += f->chunk;
		holes = got ? 0 : holes + 1;
		if (holes >= FIND_HOLE_MAX && off >= (uint64_t)FIND_HOLE_MAX * f->chunk)
			break;
		for (uint8_t *p = chunk, *e = chunk + keep + f->chunk;
		     (p = memmem(p, (size_t)(e - p), digits, pl)); p++) {
			uint64_t d = start + off - keep + (uint64_t)(p - chunk);

			if (off + (uint64_t)(p - chunk) < keep)
				continue;
			if (f->res->candidates == KALLSYMS_FIND_CANDIDATES)
				return -ENOENT;
			if (check_match(f, d, a))
				return 0;
		}
		memmove(chunk, chunk + f->chunk, keep);
	}
	return -ENOENT;
}

int kallsyms_find(const struct unwind_mem *mem, uint64_t start, uint64_t max,
		  struct kallsyms_addrs *a, struct kallsyms_find_result *res,
		  char *err, size_t errlen)
{
	struct finder f = { .m = mem, .res = res };
	uint8_t *chunk;
	int rc = -ENOMEM;

	memset(res, 0, sizeof(*res));
	start &= ~OPVM_PAGE_MASK;
	if (max > KALLSYMS_FIND_MAX)
		max = KALLSYMS_FIND_MAX;
	/* a small search (tests, fuzzing) needs no whole MiB */
	f.chunk = max < CHUNK ? (size_t)((max + OPVM_PAGE_MASK) & ~OPVM_PAGE_MASK) : CHUNK;
	f.chunk = f.chunk ? f.chunk : OPVM_PAGE_SIZE;
	chunk = calloc(1, f.chunk + sizeof(digits));
	f.mk = malloc(MARKERS_MAX * sizeof(*f.mk));
	f.buf = malloc(BLOCK_MAX + TOKTAB_MAX + 16);
	f.cnt = malloc(BLOCK_MAX + MARKERS_MAX * 8 + 16);
	if (chunk && f.mk && f.buf && f.cnt)
		rc = scan(&f, chunk, start, max, a);
	if (rc == -ENOENT)
		errbuf_set(err, errlen,
			    "no kallsyms tables found in %llu MiB of the kernel image from %#llx "
			    "(%u candidates): give --system-map",
			    (unsigned long long)(res->scanned >> 20), (unsigned long long)start,
			    res->candidates);
	else if (rc)
		errbuf_set(err, errlen, "cannot search for the kallsyms tables: out of memory");
	free(chunk);
	free(f.mk);
	free(f.buf);
	free(f.cnt);
	return rc;
}
