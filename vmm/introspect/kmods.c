// SPDX-License-Identifier: MIT
/*
 * The guest's loadable modules (vmm/introspect/kmods.h).  A module costs
 * one read of the span of struct module that holds the fields wanted
 * (under 1 KiB); its symbols a read per 4 KiB of symtab and of typetab,
 * and the pages of strtab their names sit in (one page kept: a module's
 * names are packed in symbol order).
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "guest-kmod/opvm_proto.h"
#include "lib/bytes.h"
#include "lib/x86.h"
#include "lib/array.h"
#include "vmm/introspect/klist.h"
#include "vmm/introspect/kmods.h"

#define SPAN_MAX	4096u
#define SYM_SIZE	24u		/* Elf64_Sym */
#define SYM_CHUNK	170u		/* entries per read: 4080 bytes */
#define STT_FUNC	2u
#define STATE_UNFORMED	3u		/* MODULE_STATE_UNFORMED */

static bool kptr(uint64_t p)
{
	return klist_ptr(p, SPAN_MAX);
}

static int rd(const struct unwind_mem *mem, uint64_t va, void *buf, size_t len)
{
	return mem->read(mem->arg, va, buf, len);
}

/* The fields' span [lo, hi) of struct module. */
static void span(const struct kbtf_mod_offsets *o, uint32_t *lo, uint32_t *hi)
{
	const uint32_t f[][2] = { { o->mod_state, 4 },	  { o->mod_list, 16 },
				  { o->mod_name, o->name_len }, { o->text_base, 8 },
				  { o->text_size, 4 }, { o->has_kallsyms ? o->mod_kallsyms :
							 o->mod_list, 8 } };

	*lo = UINT32_MAX;
	*hi = 0;
	for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
		if (f[i][0] < *lo)
			*lo = f[i][0];
		if (f[i][0] + f[i][1] > *hi)
			*hi = f[i][0] + f[i][1];
	}
}

/* A module's name: ends within its array (and ours), printable, not
 * empty.  Copied into out. */
static bool name_ok(const uint8_t *p, uint32_t n, char *out)
{
	size_t len = 0;

	if (n > KMODS_NAME_MAX)
		n = KMODS_NAME_MAX;
	while (len < n && p[len])
		len++;
	if (!len || len == n)
		return false;
	for (size_t i = 0; i < len; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return false;
	memcpy(out, p, len);
	out[len] = '\0';
	return true;
}

/* One module's fields from buf (its span from lo) into *km; false: they
 * lie (counted by the caller). */
static bool mod_parse(const struct kbtf_mod_offsets *o, const uint8_t *buf, uint32_t lo,
		      uint64_t t, struct kmod *km)
{
	uint64_t end;

	km->mod = t;
	km->base = bytes_le64(buf + o->text_base - lo);
	km->size = bytes_le32(buf + o->text_size - lo);
	km->kallsyms = o->has_kallsyms ? bytes_le64(buf + o->mod_kallsyms - lo) : 0;
	if (km->kallsyms && !kptr(km->kallsyms))
		km->kallsyms = 0;
	end = km->base + km->size;
	return name_ok(buf + o->mod_name - lo, o->name_len, km->name) &&
	       km->base >= OPVM_MODULES_START && km->size <= KMODS_TEXT_MAX &&
	       end >= km->base && end <= OPVM_MODULES_END;
}

int kmods_walk(const struct unwind_mem *mem, const struct kbtf_mod_offsets *o, uint64_t head,
	       struct kmod *out, size_t max, size_t *n, struct kmods_stats *st)
{
	uint8_t buf[SPAN_MAX];
	struct klist_loop loop = klist_loop_start(head);
	uint64_t next;
	uint32_t lo, hi;
	size_t k = 0, steps = 0;

	*n = 0;
	span(o, &lo, &hi);
	if (hi - lo > SPAN_MAX || !kptr(head) || max > KMODS_MAX)
		return -EINVAL;
	st->walks++;
	if (rd(mem, head, &next, 8))
		return -EFAULT;
	next = le64toh(next);
	while (next != head) {
		uint64_t t = next - o->mod_list;

		/* the cap counts modules refused or skipped too */
		if (k == max || steps++ == 2 * KMODS_MAX || klist_loop_seen(&loop, next)) {
			st->cut++;
			break;
		}
		if (!kptr(next) || !kptr(t) || rd(mem, t + lo, buf, hi - lo)) {
			st->bad_ptr++;
			break;
		}
		next = bytes_le64(buf + o->mod_list - lo);
		if (bytes_le32(buf + o->mod_state - lo) == STATE_UNFORMED) {
			st->unformed++;		/* its fields are not set yet */
			continue;
		}
		if (!mod_parse(o, buf, lo, t, &out[k])) {
			st->refused++;
			continue;
		}
		if (out[k].size)
			k++;
	}
	*n = k;
	return 0;
}

/* ---- symbols ----------------------------------------------------------------- */

/* One page of strtab kept: names are read through it. */
struct strpage {
	const struct unwind_mem *mem;
	uint64_t va;			/* the page held; 0: none */
	uint8_t b[OPVM_PAGE_SIZE];
	struct kmods_stats *st;
};

/* The name at va into out (at most cap bytes, without its NUL); its
 * length, or 0: it does not read or does not end within cap. */
static size_t str_read(struct strpage *p, uint64_t va, char *out, size_t cap)
{
	size_t len = 0;

	while (len <= cap) {
		uint64_t at = va + len, page = at & ~OPVM_PAGE_MASK;

		if (at < va)
			return 0;
		if (p->va != page) {
			if (rd(p->mem, page, p->b, sizeof(p->b))) {
				p->va = 0;
				p->st->pages_unread++;
				return 0;
			}
			p->va = page;
		}
		for (size_t i = at & OPVM_PAGE_MASK; i < sizeof(p->b) && len <= cap; i++, len++) {
			if (!p->b[i])
				return len;
			if (len < cap)
				out[len] = (char)p->b[i];
		}
	}
	return 0;
}

struct symwalk {
	const struct kmod *m;
	uint64_t strtab;
	uint64_t str_bytes;		/* name bytes read */
	struct strpage sp;
	kmods_sym_fn fn;
	void *arg;
};

/* One Elf64_Sym e with type letter t (0: take it from st_info).  Nonzero:
 * stop. */
static int sym_one(struct symwalk *w, const uint8_t *e, char t, struct kmods_stats *st)
{
	uint32_t name = bytes_le32(e);
	uint64_t addr = bytes_le64(e + 8);
	char buf[OPVM_KSYM_NAME_MAX + 1];
	size_t len;

	if (!t)
		t = (e[4] & 0xf) == STT_FUNC ? ((e[4] >> 4) ? 'T' : 't') : 'd';
	if (!strchr("tTwW", t))
		return 0;
	if (addr < w->m->base || addr >= w->m->base + w->m->size) {
		st->syms_outside++;
		return 0;
	}
	if (w->str_bytes >= KMODS_STR_MAX) {
		st->syms_cut++;
		return 0;
	}
	len = name < KMODS_STR_MAX ? str_read(&w->sp, w->strtab + name, buf,
					      OPVM_KSYM_NAME_MAX) : 0;
	w->str_bytes += len + 1;
	if (!len) {
		st->syms_bad++;
		return 0;
	}
	st->syms++;
	return w->fn(w->arg, w->m, addr, t, buf, len);
}

/* The entries [i, i + cnt) of symtab and typetab (0: none). */
static int sym_chunk(const struct unwind_mem *mem, struct symwalk *w, uint64_t symtab,
		     uint64_t typetab, uint32_t i, uint32_t cnt, struct kmods_stats *st)
{
	uint8_t syms[SYM_CHUNK * SYM_SIZE], types[SYM_CHUNK];
	int rc = 0;

	if (rd(mem, symtab + (uint64_t)i * SYM_SIZE, syms, (size_t)cnt * SYM_SIZE) ||
	    (typetab && rd(mem, typetab + i, types, cnt))) {
		st->pages_unread++;
		return 0;	/* the next chunk may read */
	}
	for (uint32_t j = 0; j < cnt && !rc; j++)
		rc = sym_one(w, syms + (size_t)j * SYM_SIZE, typetab ? (char)types[j] : 0, st);
	return rc;
}

int kmods_syms(const struct unwind_mem *mem, const struct kbtf_mod_offsets *o,
	       const struct kmod *m, kmods_sym_fn fn, void *arg, struct kmods_stats *st)
{
	uint8_t ks[64];
	uint64_t symtab, typetab;
	uint32_t num, lo, hi;
	struct symwalk w = { .m = m, .fn = fn, .arg = arg };
	int rc = 0;

	if (!o->has_kallsyms || !m->kallsyms)
		return 0;
	lo = o->ks_symtab < o->ks_strtab ? o->ks_symtab : o->ks_strtab;
	lo = o->ks_num < lo ? o->ks_num : lo;
	hi = (o->has_typetab && o->ks_typetab > o->ks_strtab ? o->ks_typetab : o->ks_strtab) + 8;
	hi = o->ks_symtab + 8 > hi ? o->ks_symtab + 8 : hi;
	hi = o->ks_num + 4 > hi ? o->ks_num + 4 : hi;
	if (hi - lo > sizeof(ks) || rd(mem, m->kallsyms + lo, ks, hi - lo)) {
		st->tables_bad++;
		return -EFAULT;
	}
	symtab = bytes_le64(ks + o->ks_symtab - lo);
	num = bytes_le32(ks + o->ks_num - lo);
	w.strtab = bytes_le64(ks + o->ks_strtab - lo);
	typetab = o->has_typetab ? bytes_le64(ks + o->ks_typetab - lo) : 0;
	if (!kptr(symtab) || w.strtab < OPVM_KERNEL_HALF ||
	    (typetab && typetab < OPVM_KERNEL_HALF)) {
		st->tables_bad++;
		return -EFAULT;
	}
	if (num > KMODS_SYMS_MAX) {
		st->syms_cut += num - KMODS_SYMS_MAX;
		num = KMODS_SYMS_MAX;
	}
	w.sp.mem = mem;
	w.sp.st = st;
	st->sym_reads++;
	for (uint32_t i = 0; i < num && !rc; i += SYM_CHUNK)
		rc = sym_chunk(mem, &w, symtab, typetab, i,
			       num - i < SYM_CHUNK ? num - i : SYM_CHUNK, st);
	return 0;
}
