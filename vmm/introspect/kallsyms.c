// SPDX-License-Identifier: MIT
/*
 * kallsyms from guest memory (vmm/introspect/kallsyms.h).  Two streaming
 * readers, one over the names and one over the addresses, each a 64 KiB
 * window that reads whole windows and falls back to page by page where a
 * window crosses something unmapped: a kernel's tables are some MiB, read
 * once per boot.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "lib/x86.h"
#include "vmm/introspect/kallsyms.h"

#define WINDOW		65536u
#define TOKENS		256u
#define TOKEN_TABLE_MAX	65536u	/* Debian 12's is ~1 KiB */

struct reader {
	const struct unwind_mem *m;
	uint64_t va;			/* next guest byte to fetch */
	uint64_t *total;		/* bytes read by every reader */
	size_t have, pos;
	uint8_t buf[WINDOW];
};

/* Slides the window and reads more; -EFAULT when nothing more can be read. */
static int reader_fill(struct reader *r)
{
	size_t want, page;

	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->have - r->pos);
		r->have -= r->pos;
		r->pos = 0;
	}
	want = WINDOW - r->have;
	if (*r->total >= KALLSYMS_READ_MAX)
		return -EFAULT;
	if (want > KALLSYMS_READ_MAX - *r->total)
		want = (size_t)(KALLSYMS_READ_MAX - *r->total);
	if (r->m->read(r->m->arg, r->va, r->buf + r->have, want)) {
		page = opvm_page_rest(r->va);
		want = page < want ? page : want;
		if (r->m->read(r->m->arg, r->va, r->buf + r->have, want))
			return -EFAULT;
	}
	r->have += want;
	r->va += want;
	*r->total += want;
	return 0;
}

/* At least n (<= WINDOW) bytes at r->buf + r->pos, or -EFAULT. */
static int reader_need(struct reader *r, size_t n)
{
	while (r->have - r->pos < n)
		if (reader_fill(r))
			return -EFAULT;
	return 0;
}

/* The token strings: tok[i] points into table (NUL-terminated inside it),
 * or is NULL for a token whose string does not end inside what was read. */
struct tokens {
	char table[TOKEN_TABLE_MAX + 1];
	const char *tok[TOKENS];
	uint16_t len[TOKENS];
};

static int tokens_load(const struct unwind_mem *m, const struct kallsyms_addrs *a,
		       struct tokens *t, uint64_t *total, char *err, size_t errlen)
{
	uint16_t idx[TOKENS];
	size_t n = 0, max = 0;

	if (m->read(m->arg, a->token_index, idx, sizeof(idx))) {
		errbuf_set(err, errlen, "cannot read kallsyms_token_index at %#llx",
			    (unsigned long long)a->token_index);
		return -EFAULT;
	}
	*total += sizeof(idx);
	for (unsigned i = 0; i < TOKENS; i++)
		if (le16toh(idx[i]) > max)
			max = le16toh(idx[i]);
	/* the last token's string follows its index: read past it, page by
	 * page, as far as memory goes */
	while (n < TOKEN_TABLE_MAX && n <= max + KALLSYMS_NAME_MAX) {
		size_t chunk = opvm_page_rest(a->token_table + n);

		if (chunk > TOKEN_TABLE_MAX - n)
			chunk = TOKEN_TABLE_MAX - n;
		if (m->read(m->arg, a->token_table + n, t->table + n, chunk))
			break;
		n += chunk;
		*total += chunk;
	}
	if (!n) {
		errbuf_set(err, errlen, "cannot read kallsyms_token_table at %#llx",
			    (unsigned long long)a->token_table);
		return -EFAULT;
	}
	t->table[n] = '\0';
	for (unsigned i = 0; i < TOKENS; i++) {
		size_t o = le16toh(idx[i]);
		const char *e = o < n ? memchr(t->table + o, '\0', n - o) : NULL;

		t->tok[i] = e ? t->table + o : NULL;
		t->len[i] = e ? (uint16_t)(e - (t->table + o)) : 0;
	}
	return 0;
}

/* Expands one name's tokens into out (KALLSYMS_NAME_MAX + 1 bytes);
 * returns its length, or 0 for a token that is missing or overflows. */
static size_t expand(const struct tokens *t, const uint8_t *p, size_t n, char *out)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		const char *s = t->tok[p[i]];
		size_t l = t->len[p[i]];

		if (!s || l > KALLSYMS_NAME_MAX + 1 - len)
			return 0;
		memcpy(out + len, s, l);
		len += l;
	}
	return len;
}

/* The next symbol's address from the offsets (or addresses) reader. */
static int next_addr(struct reader *r, const struct kallsyms_addrs *a, uint64_t base,
		     bool abs_percpu, uint64_t *addr)
{
	if (a->addresses) {
		uint64_t v;

		if (reader_need(r, 8))
			return -EFAULT;
		memcpy(&v, r->buf + r->pos, 8);
		r->pos += 8;
		*addr = le64toh(v);
		return 0;
	}
	uint32_t u;
	int32_t off;

	if (reader_need(r, 4))
		return -EFAULT;
	memcpy(&u, r->buf + r->pos, 4);
	r->pos += 4;
	off = (int32_t)le32toh(u);
	/* KALLSYMS_ABSOLUTE_PERCPU (x86-64 before 6.15): a negative offset
	 * counts down from base - 1, a non-negative one is absolute (per-CPU
	 * data: current_task's offset in each CPU's area); without it every
	 * offset is base-relative */
	if (off < 0 && abs_percpu)
		*addr = base - 1 - (uint64_t)(int64_t)off;
	else
		*addr = abs_percpu ? (uint32_t)off : base + (uint32_t)off;
	return 0;
}

/* One name from the names reader: its token bytes at *p, *n of them.
 * -EFAULT at the end of readable memory. */
static int next_name(struct reader *r, const uint8_t **p, size_t *n)
{
	size_t hdr = 1, len;

	if (reader_need(r, 1))
		return -EFAULT;
	len = r->buf[r->pos];
	if (len & 0x80) {	/* "big" symbols, 6.1 on: ULEB128 of two bytes */
		if (reader_need(r, 2))
			return -EFAULT;
		len = (len & 0x7f) | ((size_t)r->buf[r->pos + 1] << 7);
		hdr = 2;
	}
	if (reader_need(r, hdr + len))
		return -EFAULT;
	*p = r->buf + r->pos + hdr;
	*n = len;
	r->pos += hdr + len;
	return 0;
}

struct walk {
	struct tokens tok;
	struct reader names, addrs;
	bool abs_percpu;
	char name[KALLSYMS_NAME_MAX + 2];
};

static void walk_all(struct walk *w, const struct kallsyms_addrs *a, uint64_t base,
		     kallsyms_fn fn, void *arg, struct kallsyms_result *res)
{
	uint64_t prev = 0;

	for (uint32_t i = 0; i < res->nr_syms; i++) {
		const uint8_t *p;
		uint64_t addr;
		size_t n, l;

		if (next_name(&w->names, &p, &n) || next_addr(&w->addrs, a, base, w->abs_percpu, &addr))
			return;		/* cut short: decoded < nr_syms */
		l = expand(&w->tok, p, n, w->name);
		if (l < 2) {
			res->bad++;
			continue;
		}
		if (addr < prev)
			res->unsorted++;
		prev = addr;
		res->decoded++;
		if (fn(arg, addr, w->name[0], w->name + 1, l - 1))
			return;
	}
}

struct stext_find {
	uint64_t off;
	bool found;
};

static int stext_one(void *arg, uint64_t addr, char type, const char *name, size_t len)
{
	struct stext_find *s = arg;

	(void)type;
	if (len != 6 || memcmp(name, "_stext", 6))
		return 0;
	s->off = addr;
	s->found = true;
	return 1;
}

static void walk_start(struct walk *w, const struct unwind_mem *mem,
		       const struct kallsyms_addrs *a, struct kallsyms_result *res)
{
	w->names = (struct reader){ .m = mem, .va = a->names, .total = &res->bytes_read };
	w->addrs = (struct reader){ .m = mem, .va = a->addresses ? a->addresses : a->offsets,
				    .total = &res->bytes_read };
}

/* Without kallsyms_relative_base the offsets count from _text: a first
 * walk finds _stext's offset, and _text is VMCOREINFO's _stext less it. */
static int text_base(struct walk *w, const struct unwind_mem *mem,
		     const struct kallsyms_addrs *a, struct kallsyms_result *res,
		     uint64_t *base, char *err, size_t errlen)
{
	struct stext_find s = { 0 };
	struct kallsyms_result r = *res;

	walk_start(w, mem, a, &r);
	walk_all(w, a, 0, stext_one, &s, &r);
	res->bytes_read = r.bytes_read;
	if (!s.found || w->abs_percpu || s.off > a->stext) {
		errbuf_set(err, errlen, "kallsyms has no relative_base and no usable _stext: "
			    "give --system-map");
		return -EINVAL;
	}
	*base = a->stext - s.off;
	return 0;
}

int kallsyms_decode(const struct unwind_mem *mem, const struct kallsyms_addrs *a,
		    kallsyms_fn fn, void *arg, struct kallsyms_result *res,
		    char *err, size_t errlen)
{
	struct walk *w;
	uint32_t n;
	uint64_t base = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	if (!a->names || !a->num_syms || !a->token_table || !a->token_index ||
	    !(a->addresses || (a->offsets && (a->relative_base || a->stext)))) {
		errbuf_set(err, errlen, "the kallsyms tables are not all known");
		return -EINVAL;
	}
	if (mem->read(mem->arg, a->num_syms, &n, sizeof(n)) ||
	    (!a->addresses && a->relative_base &&
	     mem->read(mem->arg, a->relative_base, &base, sizeof(base)))) {
		errbuf_set(err, errlen, "cannot read kallsyms_num_syms or _relative_base");
		return -EFAULT;
	}
	n = le32toh(n);
	base = le64toh(base);
	if (!n || n > KALLSYMS_MAX_SYMS) {
		errbuf_set(err, errlen, "kallsyms_num_syms is %u (at most %u)", n,
			    KALLSYMS_MAX_SYMS);
		return -EINVAL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	res->nr_syms = n;
	res->relative_base = base;
	res->bytes_read = 12;
	rc = tokens_load(mem, a, &w->tok, &res->bytes_read, err, errlen);
	/* ABSOLUTE_PERCPU: the last symbol (the highest address, in the
	 * kernel image) has a negative offset; base-relative ones never do */
	if (!rc && a->offsets) {
		int32_t last;

		if (mem->read(mem->arg, a->offsets + (uint64_t)(n - 1) * 4, &last, 4)) {
			errbuf_set(err, errlen, "cannot read kallsyms_offsets");
			rc = -EFAULT;
		}
		w->abs_percpu = !rc && (int32_t)le32toh((uint32_t)last) < 0;
	}
	if (!rc && !a->addresses && !a->relative_base)
		rc = text_base(w, mem, a, res, &base, err, errlen);
	res->relative_base = base;
	if (!rc) {
		walk_start(w, mem, a, res);
		walk_all(w, a, base, fn, arg, res);
	}
	free(w);
	return rc;
}
