// SPDX-License-Identifier: MIT
/*
 * CPython frames over a guest-memory read callback (unwind/pyframes.h).
 *
 * The struct offsets of 3.11 come from Debian 12's python3.11 3.11.2
 * (python3.11-minimal 3.11.2-6+deb12u9, its build-id c561f3aa...): the
 * release interpreter's debug file in python3.11-dbg of the same version,
 * read with `pahole -C _ts`, `-C _is`, `-C pyruntimestate`, `-C _PyCFrame`,
 * `-C _PyInterpreterFrame`, `-C PyASCIIObject`, `-C PyCompactUnicodeObject`,
 * `-C PyBytesObject` and gdb's `ptype /o struct PyCodeObject`.  Those of
 * 3.12 follow CPython 3.12's Include/cpython/pystate.h, pycore_frame.h,
 * pycore_interp.h, pycore_runtime.h and cpython/code.h (no 3.12 binary on
 * this host to check them against: a wrong one fails the type checks and
 * costs chains, never names).  3.13 publishes its own (_Py_DebugOffsets):
 * where its block keeps each value is CPython 3.13's
 * Include/internal/pycore_runtime.h, checked against the block of Debian
 * 13's python3.13 3.13.5 (python3.13-minimal 3.13.5-2+deb13u5).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "unwind/pyframes.h"
#include "lib/array.h"
#include "lib/x86.h"

#define READ_BUDGET	(128u << 10)		/* guest bytes per pyframes_read() */
#define MAX_INTERPS	8
#define MAX_LINETABLE	(64u << 10)		/* a location table's bytes */
#define MAX_INSTR	(1u << 22)		/* code units of one code object */
#define NO_CFRAME	0xffff

static const struct pyframes_layout layout_311 = {
	.version = 0x030b0000,
	.rt_interp_head = 40, .is_next = 0, .is_threads_head = 16,
	.ts_next = 8, .ts_interp = 16, .ts_native_tid = 160, .ts_frame = 56,
	.cf_current = 8,
	.fr_previous = 48, .fr_code = 32, .fr_instr = 56, .fr_owner = 69,
	.owner_cstack = 0xff, .owner_max = 2,
	.ob_type = 8,
	.co_filename = 112, .co_qualname = 128, .co_linetable = 136,
	.co_firstlineno = 72, .co_code = 184,
	.str_length = 16, .str_state = 32, .str_ascii_size = 48, .str_compact_size = 72,
	.bytes_size = 16, .bytes_sval = 32,
};

static const struct pyframes_layout layout_312 = {
	.version = 0x030c0000,
	.rt_interp_head = 48, .is_next = 0, .is_threads_head = 72,
	.ts_next = 8, .ts_interp = 16, .ts_native_tid = 144, .ts_frame = 56,
	.cf_current = 0,
	.fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70,
	.owner_cstack = 3, .owner_max = 3,
	.ob_type = 8,
	.co_filename = 112, .co_qualname = 128, .co_linetable = 136,
	.co_firstlineno = 68, .co_code = 192,
	.str_length = 16, .str_state = 32, .str_ascii_size = 40, .str_compact_size = 56,
	.bytes_size = 16, .bytes_sval = 32,
};

/* Guest reads of one pyframes_read(): counted, bounded, user half only. */
struct rd {
	const struct unwind_mem *m;
	struct pyframes_stats *st;
	uint32_t used;
	int faulted;			/* a page did not read (not a bad pointer) */
};

static int uptr_ok(uint64_t p, unsigned align)
{
	return p >= 0x1000 && p < OPVM_USER_TOP && !(p & (align - 1));
}

static int rd(struct rd *r, uint64_t gva, void *buf, size_t len)
{
	if (!uptr_ok(gva, 1) || len > OPVM_USER_TOP - gva || len > READ_BUDGET - r->used)
		return -EFAULT;
	r->used += (uint32_t)len;
	r->st->bytes += len;
	if (r->m->read(r->m->arg, gva, buf, len)) {
		r->faulted = 1;
		return -EFAULT;
	}
	return 0;
}

/* Counts a cut chain: as unreadable when a page did not read (a page the
 * process never touched, not resident), else under what refused it. */
static void count_cut(struct rd *r, uint64_t *refused)
{
	if (r->faulted)
		r->st->unreadable++;
	else
		(*refused)++;
	r->faulted = 0;
}

static uint64_t u64at(const uint8_t *b, unsigned off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static unsigned umax(unsigned a, unsigned b)
{
	return a > b ? a : b;
}

/* ---- layouts ------------------------------------------------------------ */

/* _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h): where each
 * value we use sits in it, in bytes from _PyRuntime.  Each structure's
 * part begins with that structure's sizeof (the *_SIZE entries). */
enum {
	DO_COOKIE = 0, DO_VERSION = 8, DO_FREE_THREADED = 16,
	DO_RT_SIZE = 24, DO_RT_INTERP_HEAD = 40,
	DO_IS_SIZE = 48, DO_IS_NEXT = 64, DO_IS_THREADS_HEAD = 72,
	DO_TS_SIZE = 152, DO_TS_NEXT = 168, DO_TS_INTERP = 176, DO_TS_CURRENT_FRAME = 184,
	DO_TS_NATIVE_TID = 200,
	DO_FR_SIZE = 224, DO_FR_PREVIOUS = 232, DO_FR_EXECUTABLE = 240, DO_FR_INSTR = 248,
	DO_FR_OWNER = 264,
	DO_CO_SIZE = 272, DO_CO_FILENAME = 280, DO_CO_QUALNAME = 296, DO_CO_LINETABLE = 304,
	DO_CO_FIRSTLINENO = 312, DO_CO_CODE = 344,
	DO_OB_SIZE = 352, DO_OB_TYPE = 360,
	DO_BY_SIZE = 512, DO_BYTES_SIZE = 520, DO_BYTES_SVAL = 528,
	DO_STR_SIZE = 536, DO_STR_STATE = 544, DO_STR_LENGTH = 552, DO_STR_ASCII_SIZE = 560,
	DO_SIZE_313 = 584,
};
#define DO_MAX_SIZEOF	(1u << 20)	/* a larger declared structure is forged */

/* One published offset: the field of width bytes at it must lie inside
 * the structure's declared size (the value at size_at) and inside what
 * this file reads of such an object (cap: its buffers, uint16_t). */
struct do_field {
	uint16_t at, size_at, cap, width;
	size_t field;
};

static const struct do_field do_fields[] = {
#define F(at, size_at, cap, width, name) \
	{ at, size_at, cap, width, offsetof(struct pyframes_layout, name) }
	F(DO_RT_INTERP_HEAD, DO_RT_SIZE, 0xffff, 8, rt_interp_head),
	F(DO_IS_NEXT, DO_IS_SIZE, 0xffff, 8, is_next),
	F(DO_IS_THREADS_HEAD, DO_IS_SIZE, 0xffff, 8, is_threads_head),
	F(DO_TS_NEXT, DO_TS_SIZE, 1024, 8, ts_next),
	F(DO_TS_INTERP, DO_TS_SIZE, 1024, 8, ts_interp),
	F(DO_TS_CURRENT_FRAME, DO_TS_SIZE, 1024, 8, ts_frame),
	F(DO_TS_NATIVE_TID, DO_TS_SIZE, 1024, 8, ts_native_tid),
	F(DO_FR_PREVIOUS, DO_FR_SIZE, 512, 8, fr_previous),
	F(DO_FR_EXECUTABLE, DO_FR_SIZE, 512, 8, fr_code),
	F(DO_FR_INSTR, DO_FR_SIZE, 512, 8, fr_instr),
	F(DO_FR_OWNER, DO_FR_SIZE, 512, 1, fr_owner),
	F(DO_CO_FILENAME, DO_CO_SIZE, 512, 8, co_filename),
	F(DO_CO_QUALNAME, DO_CO_SIZE, 512, 8, co_qualname),
	F(DO_CO_LINETABLE, DO_CO_SIZE, 512, 8, co_linetable),
	F(DO_CO_FIRSTLINENO, DO_CO_SIZE, 512, 4, co_firstlineno),
	F(DO_CO_CODE, DO_CO_SIZE, 512, 2, co_code),
	F(DO_OB_TYPE, DO_OB_SIZE, 64, 8, ob_type),
	F(DO_BYTES_SIZE, DO_BY_SIZE, 64, 8, bytes_size),
	F(DO_BYTES_SVAL, DO_BY_SIZE, 64, 1, bytes_sval),
	F(DO_STR_STATE, DO_STR_SIZE, 128, 4, str_state),
	F(DO_STR_LENGTH, DO_STR_SIZE, 128, 8, str_length),
	F(DO_STR_ASCII_SIZE, DO_STR_SIZE, 128, 0, str_ascii_size),	/* a size */
#undef F
};

static int do_take(const uint8_t *b, const struct do_field *f, struct pyframes_layout *l)
{
	uint64_t v = u64at(b, f->at), size = u64at(b, f->size_at);

	if (size > DO_MAX_SIZEOF || size < f->width || v > size - f->width ||
	    v > (uint64_t)f->cap - f->width)
		return -EINVAL;
	memcpy((char *)l + f->field, &(uint16_t){ (uint16_t)v }, sizeof(uint16_t));
	return 0;
}

/* The 3.13 layout from the block b: every offset taken, bounded, and
 * consistent with how the objects are read. */
static int layout_313(const uint8_t *b, struct pyframes_layout *l)
{
	for (size_t i = 0; i < ARRAY_SIZE(do_fields); i++)
		if (do_take(b, &do_fields[i], l))
			return -EINVAL;
	/* the code object's fields and every header's type lie before what
	 * follows the header (instructions, characters, bytes); the compact
	 * header is the ASCII one + utf8_length + utf8 (not published) */
	l->str_compact_size = (uint16_t)(l->str_ascii_size + 16);
	if (l->co_filename + 8 > l->co_code || l->co_qualname + 8 > l->co_code ||
	    l->co_linetable + 8 > l->co_code || l->co_firstlineno + 4 > l->co_code ||
	    l->ob_type + 8 > l->co_code || l->ob_type + 8 > l->bytes_sval ||
	    l->bytes_size + 8 > l->bytes_sval ||
	    umax(umax(l->str_length, l->ob_type) + 8u, l->str_state + 4u) > l->str_ascii_size ||
	    l->str_compact_size > u64at(b, DO_STR_SIZE))
		return -EINVAL;
	l->cf_current = NO_CFRAME;
	l->owner_cstack = 3;
	l->owner_max = 3;
	return 0;
}

/* The layout from the _Py_DebugOffsets block b: its version the binary's
 * (Py_Version's whole, or the minor its name says), a GIL build (a
 * free-threaded one has another object header), a block layout we know. */
static int layout_published(const uint8_t *b, const struct pyframes_target *t,
			    struct pyframes_layout *out, struct pyframes_stats *st)
{
	uint64_t v = u64at(b, DO_VERSION);

	if ((t->version & 0xffff) ? v != t->version : (v >> 16) != (t->version >> 16)) {
		st->bad_offsets++;
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	/* before 3.13 no CPython published one */
	if ((v >> 16) != 0x030d || u64at(b, DO_FREE_THREADED) || layout_313(b, out)) {
		st->bad_offsets++;
		return -EINVAL;
	}
	out->version = (uint32_t)t->version;
	st->layout_published++;
	return 0;
}

int pyframes_layout(const struct unwind_mem *m, const struct pyframes_target *t,
		    struct pyframes_layout *out, struct pyframes_stats *st)
{
	struct rd r = { m, st, 0, 0 };
	uint8_t b[DO_SIZE_313];
	unsigned major = (unsigned)(t->version >> 24) & 0xff;
	unsigned minor = (unsigned)(t->version >> 16) & 0xff;
	int head;

	if (major != 3 || (t->version >> 32) || minor < 11 || minor > 13)
		return -ENOTSUP;	/* 3.14 moved the block's fields */
	/* what the binary publishes first, whatever its version says */
	head = !rd(&r, t->runtime, b, sizeof(b));
	if (head && !memcmp(b + DO_COOKIE, "xdebugpy", 8))
		return layout_published(b, t, out, st);
	if (minor == 11 || minor == 12) {
		*out = minor == 11 ? layout_311 : layout_312;
		out->version = (uint32_t)t->version;
		st->layout_table++;
		return 0;
	}
	if (!head)
		return -EFAULT;		/* not resident yet */
	st->bad_offsets++;		/* every 3.13 publishes it */
	return -EINVAL;
}

/* ---- strings ------------------------------------------------------------ */

/* Appends code point c as UTF-8; control characters and lone surrogates
 * become '?'.  Returns 0, or -ENOSPC when it does not fit. */
static int put_utf8(char *out, size_t cap, size_t *n, uint32_t c)
{
	uint8_t u[4];
	size_t k;

	if (c < 0x20 || c == 0x7f || (c >= 0xd800 && c <= 0xdfff) || (c >= 0x80 && c < 0xa0))
		c = '?';
	if (c < 0x80) {
		u[0] = (uint8_t)c;
		k = 1;
	} else if (c < 0x800) {
		u[0] = (uint8_t)(0xc0 | c >> 6);
		u[1] = (uint8_t)(0x80 | (c & 0x3f));
		k = 2;
	} else if (c < 0x10000) {
		u[0] = (uint8_t)(0xe0 | c >> 12);
		u[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (uint8_t)(0x80 | (c & 0x3f));
		k = 3;
	} else {
		u[0] = (uint8_t)(0xf0 | c >> 18);
		u[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (uint8_t)(0x80 | (c & 0x3f));
		k = 4;
	}
	if (*n + k >= cap)
		return -ENOSPC;
	memcpy(out + *n, u, k);
	*n += k;
	return 0;
}

/* Decodes len code units of kind bytes each into UTF-8. */
static int decode_units(const uint8_t *d, uint64_t len, unsigned kind, int ascii, char *out,
			size_t cap, struct pyframes_stats *st)
{
	size_t n = 0;

	for (uint64_t i = 0; i < len; i++) {
		uint32_t c = 0;

		memcpy(&c, d + i * kind, kind);	/* little-endian guest */
		if ((ascii && c >= 0x80) || c > 0x10ffff)
			return -EINVAL;
		if (put_utf8(out, cap, &n, c)) {
			st->truncated++;
			break;
		}
	}
	out[n] = '\0';
	return 0;
}

/* The str at p into out (cap bytes, NUL-terminated): compact strings only,
 * of the binary's own PyUnicode_Type. */
static int read_str(struct rd *r, const struct pyframes_target *t, const struct pyframes_layout *l,
		    uint64_t p, char *out, size_t cap)
{
	uint8_t h[128], d[4 * PYFRAMES_FILE_MAX];
	uint64_t len, units;
	unsigned kind, ascii, compact;
	uint32_t state;

	if (!uptr_ok(p, 8) || l->str_ascii_size > sizeof(h) ||
	    umax(l->str_length + 8u, l->str_state + 4u) > l->str_ascii_size ||
	    rd(r, p, h, l->str_ascii_size))
		return -EFAULT;
	if (t->unicode_type && u64at(h, l->ob_type) != t->unicode_type)
		return -EINVAL;
	len = u64at(h, l->str_length);
	memcpy(&state, h + l->str_state, sizeof(state));
	kind = (state >> 2) & 7;
	compact = (state >> 5) & 1;
	ascii = (state >> 6) & 1;
	if (!compact || len > PYFRAMES_MAX_STRLEN || (kind != 1 && kind != 2 && kind != 4) ||
	    (ascii && kind != 1))
		return -EINVAL;
	units = len < cap - 1 ? len : cap - 1;	/* at most one byte of UTF-8 each */
	if (units < len)
		r->st->truncated++;
	if (units * kind > sizeof(d) ||
	    rd(r, p + (ascii ? l->str_ascii_size : l->str_compact_size), d, units * kind))
		return -EFAULT;
	return decode_units(d, units, kind, (int)ascii, out, cap, r->st);
}

/* ---- the location table (CPython's Objects/locations.md) ---------------- */

/* Read in small chunks: most tables are short, and a frame's line is
 * usually in the table's first entries. */
struct lt {
	struct rd *r;
	uint64_t at, end;
	uint8_t buf[64];
	unsigned pos, n;
};

static int lt_byte(struct lt *c, uint8_t *b)
{
	if (c->pos == c->n) {
		uint64_t left = c->end - c->at;
		unsigned k = left < sizeof(c->buf) ? (unsigned)left : (unsigned)sizeof(c->buf);

		if (!k || rd(c->r, c->at, c->buf, k))
			return -EFAULT;
		c->at += k;
		c->pos = 0;
		c->n = k;
	}
	*b = c->buf[c->pos++];
	return 0;
}

static int lt_varint(struct lt *c, uint64_t *v)
{
	uint8_t b;
	unsigned shift = 0;

	if (lt_byte(c, &b))
		return -EFAULT;
	*v = b & 63;
	while (b & 64) {
		shift += 6;
		if (shift > 36 || lt_byte(c, &b))
			return -EINVAL;
		*v |= (uint64_t)(b & 63) << shift;
	}
	return 0;
}

static int lt_skip(struct lt *c, unsigned n)
{
	uint8_t b;

	while (n--)
		if (lt_byte(c, &b))
			return -EFAULT;
	return 0;
}

/* One entry's line delta (*none: the entry has no line) and length. */
static int lt_entry(struct lt *c, int64_t *delta, unsigned *units, int *none)
{
	uint8_t b;
	uint64_t v;
	unsigned code;

	if (lt_byte(c, &b) || !(b & 0x80))
		return -EINVAL;
	code = (b >> 3) & 15;
	*units = (b & 7) + 1u;
	*delta = 0;
	*none = code == 15;
	if (code == 14 || code == 13) {		/* long form, no columns */
		if (lt_varint(c, &v))
			return -EINVAL;
		*delta = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
		if (code == 14)			/* end line, column, end column */
			for (int i = 0; i < 3; i++)
				if (lt_varint(c, &v))
					return -EINVAL;
	} else if (code >= 10 && code <= 12) {	/* one line form */
		*delta = code - 10;
		return lt_skip(c, 2);
	} else if (code < 10) {			/* short form: same line */
		return lt_skip(c, 1);
	}
	return 0;
}

/* The line of instruction idx (code units from the first) by the table of
 * len bytes at table; first: co_firstlineno.  0 when not known. */
static uint32_t lt_line(struct rd *r, uint64_t table, uint64_t len, int64_t idx, int64_t first)
{
	struct lt c = { .r = r, .at = table, .end = table + len };
	int64_t line = first, addr = 0, delta;
	unsigned units;
	int none;

	if (idx < 0)
		return first > 0 && first < (1 << 24) ? (uint32_t)first : 0;
	while (c.at < c.end || c.pos < c.n) {
		if (lt_entry(&c, &delta, &units, &none))
			return 0;
		line += delta;
		if (line < 0 || line >= (1 << 24))
			return 0;
		if (idx < addr + units)
			return none ? 0 : (uint32_t)line;
		addr += units;
	}
	return 0;
}

/* The line of the frame executing instr in code (its first line if the
 * table does not read). */
static uint32_t code_line(struct rd *r, const struct pyframes_target *t,
			  const struct pyframes_layout *l, uint64_t code, uint64_t table,
			  int64_t first, uint64_t instr)
{
	uint8_t h[64];
	uint64_t len, start = code + l->co_code;
	int64_t idx = instr >= start ? (int64_t)((instr - start) / 2) : -1;

	if (idx >= MAX_INSTR || !uptr_ok(table, 8) || l->bytes_sval > sizeof(h) ||
	    l->bytes_size + 8u > l->bytes_sval || rd(r, table, h, l->bytes_sval) ||
	    (t->bytes_type && u64at(h, l->ob_type) != t->bytes_type))
		return first > 0 && first < (1 << 24) ? (uint32_t)first : 0;
	len = u64at(h, l->bytes_size);
	if (len > MAX_LINETABLE)
		return 0;
	return lt_line(r, table + l->bytes_sval, len, idx, first);
}

/* ---- frames --------------------------------------------------------------- */

static int read_code(struct rd *r, const struct pyframes_target *t,
		     const struct pyframes_layout *l, uint64_t code, uint64_t instr,
		     struct pyframe *f)
{
	uint8_t b[512];
	int32_t first;

	r->faulted = 0;
	if (!uptr_ok(code, 8) || l->co_code > sizeof(b) || rd(r, code, b, l->co_code) ||
	    (t->code_type && u64at(b, l->ob_type) != t->code_type)) {
		count_cut(r, &r->st->bad_code);
		return -EINVAL;
	}
	if (read_str(r, t, l, u64at(b, l->co_qualname), f->name, sizeof(f->name)) ||
	    read_str(r, t, l, u64at(b, l->co_filename), f->file, sizeof(f->file))) {
		count_cut(r, &r->st->bad_string);
		return -EINVAL;
	}
	memcpy(&first, b + l->co_firstlineno, sizeof(first));
	f->code = code;
	f->instr = instr;
	f->first_line = first > 0 && first < (1 << 24) ? (uint32_t)first : 0;
	f->line = code_line(r, t, l, code, u64at(b, l->co_linetable), first, instr);
	return 0;
}

static int seen(const uint64_t *v, unsigned n, uint64_t p)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == p)
			return 1;
	return 0;
}

/* The thread state of tid in interpreter interp, or 0; *nts counts the
 * thread states looked at, over all interpreters (vis keeps them). */
static uint64_t find_in_interp(struct rd *r, const struct pyframes_layout *l, uint64_t interp,
			       uint32_t tid, uint64_t *vis, unsigned *nts, int *err)
{
	uint8_t b[1024];
	unsigned span = umax(umax(l->ts_next, l->ts_interp), umax(l->ts_native_tid, l->ts_frame)) + 8;
	uint64_t ts;

	if (span > sizeof(b) || rd(r, interp + l->is_threads_head, &ts, sizeof(ts)))
		return *err = -EFAULT, 0;
	while (ts) {
		if (!uptr_ok(ts, 8))
			return *err = -EFAULT, 0;
		if (*nts >= PYFRAMES_MAX_THREADS || seen(vis, *nts, ts))
			return *err = -ELOOP, 0;
		vis[(*nts)++] = ts;
		if (rd(r, ts, b, span) || u64at(b, l->ts_interp) != interp)
			return *err = -EINVAL, 0;	/* not a thread of interp */
		if (u64at(b, l->ts_native_tid) == tid)
			return ts;
		ts = u64at(b, l->ts_next);
	}
	return 0;
}

static uint64_t find_thread(struct rd *r, const struct pyframes_target *t,
			    const struct pyframes_layout *l, uint32_t tid, int *err)
{
	uint64_t interps[MAX_INTERPS], vis[PYFRAMES_MAX_THREADS], interp, ts;
	unsigned ni = 0, nts = 0;

	*err = 0;
	if (!uptr_ok(t->runtime, 8) || rd(r, t->runtime + l->rt_interp_head, &interp, sizeof(interp)))
		return *err = -EFAULT, 0;
	while (interp) {
		if (!uptr_ok(interp, 8))
			return *err = -EFAULT, 0;
		if (ni >= MAX_INTERPS || seen(interps, ni, interp))
			return *err = -ELOOP, 0;
		interps[ni++] = interp;
		ts = find_in_interp(r, l, interp, tid, vis, &nts, err);
		if (ts || *err)
			return ts;
		if (rd(r, interp + l->is_next, &interp, sizeof(interp)))
			return *err = -EFAULT, 0;
	}
	return 0;
}

/* The thread state's current frame, 0 if it runs none; -1 unreadable. */
static int current_frame(struct rd *r, const struct pyframes_layout *l, uint64_t ts,
			 uint64_t *frame)
{
	uint64_t p;

	if (rd(r, ts + l->ts_frame, &p, sizeof(p)))
		return -EFAULT;
	if (l->cf_current != NO_CFRAME && p) {	/* through the _PyCFrame */
		if (!uptr_ok(p, 8) || rd(r, p + l->cf_current, &p, sizeof(p)))
			return -EFAULT;
	}
	*frame = p;
	return 0;
}

/* Walks the chain from frame into out; returns the frames named. */
static unsigned walk(struct rd *r, const struct pyframes_target *t,
		     const struct pyframes_layout *l, uint64_t frame, struct pyframe *out,
		     unsigned max)
{
	uint64_t vis[PYFRAMES_MAX_DEPTH], code, instr;
	unsigned span = umax(umax(l->fr_previous, l->fr_code), l->fr_instr) + 8, nv = 0, n = 0;
	uint8_t b[512];

	if (umax(span, l->fr_owner + 1u) > sizeof(b))
		return 0;
	span = umax(span, l->fr_owner + 1u);
	while (frame && n < max) {
		if (nv == PYFRAMES_MAX_DEPTH) {
			r->st->depth_cut++;
			break;
		}
		if (seen(vis, nv, frame)) {
			r->st->loops++;
			break;
		}
		vis[nv++] = frame;
		r->faulted = 0;
		if (!uptr_ok(frame, 8) || rd(r, frame, b, span) || b[l->fr_owner] > l->owner_max) {
			count_cut(r, &r->st->bad_frame);
			break;
		}
		code = u64at(b, l->fr_code);
		instr = u64at(b, l->fr_instr);
		frame = u64at(b, l->fr_previous);
		if (b[l->fr_owner] == l->owner_cstack)
			continue;		/* a C-stack shim: no code of its own */
		if (read_code(r, t, l, code, instr, &out[n]))
			break;
		out[n++].frame = vis[nv - 1];
	}
	if (frame && n == max)
		r->st->depth_cut++;
	return n;
}

unsigned pyframes_read(const struct unwind_mem *m, const struct pyframes_target *t,
		       const struct pyframes_layout *l, uint32_t tid, struct pyframe *out,
		       unsigned max, struct pyframes_stats *st)
{
	struct rd r = { m, st, 0, 0 };
	uint64_t ts, frame = 0;
	unsigned n;
	int err;

	st->reads++;
	if (max > PYFRAMES_MAX_DEPTH)
		max = PYFRAMES_MAX_DEPTH;
	ts = find_thread(&r, t, l, tid, &err);
	if (err == -ELOOP)
		st->loops++;
	else if (err)		/* unreadable: e.g. the address space is no
				 * longer the interpreter's (a CR3 reused) */
		count_cut(&r, &st->bad_runtime);
	if (err)
		return 0;
	if (!ts) {
		st->no_thread++;
		return 0;
	}
	if (current_frame(&r, l, ts, &frame)) {
		st->bad_frame++;
		return 0;
	}
	if (!frame) {
		st->idle++;
		return 0;
	}
	n = walk(&r, t, l, frame, out, max);
	if (n)
		st->chains++;
	st->frames += n;
	return n;
}

/* The (frame, code, instruction) triples of the chain again, shims
 * skipped; returns how many (at most max). */
static unsigned rewalk(struct rd *r, const struct pyframes_layout *l, uint64_t frame,
		       uint64_t (*trip)[3], unsigned max)
{
	unsigned span = umax(umax(l->fr_previous, l->fr_code), umax(l->fr_instr, l->fr_owner)) + 8;
	unsigned n = 0, steps = 0;
	uint8_t b[512];

	while (frame && n < max && steps++ < PYFRAMES_MAX_DEPTH) {
		if (span > sizeof(b) || !uptr_ok(frame, 8) || rd(r, frame, b, span))
			break;
		if (b[l->fr_owner] != l->owner_cstack) {
			trip[n][0] = frame;
			trip[n][1] = u64at(b, l->fr_code);
			trip[n][2] = u64at(b, l->fr_instr);
			n++;
		}
		frame = u64at(b, l->fr_previous);
	}
	return n;
}

unsigned pyframes_validate(const struct unwind_mem *m, const struct pyframes_target *t,
			   const struct pyframes_layout *l, uint32_t tid, struct pyframe *out,
			   unsigned n, struct pyframes_stats *st)
{
	struct rd r = { m, st, 0, 0 };
	uint64_t trip[PYFRAMES_MAX_DEPTH][3], ts, frame = 0;
	unsigned k = 0, same = 0;
	int err;

	if (n > PYFRAMES_MAX_DEPTH)
		n = PYFRAMES_MAX_DEPTH;
	ts = n ? find_thread(&r, t, l, tid, &err) : 0;
	if (ts && !current_frame(&r, l, ts, &frame))
		k = rewalk(&r, l, frame, trip, PYFRAMES_MAX_DEPTH);
	/* compare from the outermost frame in: what the two reads share; a
	 * caller's instruction is its call, the innermost frame's moves on
	 * (its line is the one read, a few microseconds after the sample) */
	while (same < n && same < k) {
		const struct pyframe *f = &out[n - 1 - same];
		const uint64_t *x = trip[k - 1 - same];

		if (f->frame != x[0] || f->code != x[1] ||
		    (same + 1 < n && f->instr != x[2]))
			break;
		same++;
	}
	st->changed += n - same;
	if (same < n)
		memmove(out, out + (n - same), same * sizeof(*out));
	return same;
}

size_t pyframe_format(const struct pyframe *f, char *buf, size_t len)
{
	int k = f->line ? snprintf(buf, len, "%s (%s:%u)", f->name, f->file, f->line)
			: snprintf(buf, len, "%s (%s)", f->name, f->file);

	if (k < 0)
		return 0;
	return (size_t)k < len ? (size_t)k : (len ? len - 1 : 0);
}
