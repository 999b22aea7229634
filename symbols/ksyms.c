// SPDX-License-Identifier: MIT
/*
 * System.map / kallsyms parsing.  Only text symbols (t, T, w, W) take part
 * in lookups; every symbol is kept for name lookups (the KASLR anchors
 * _text/_stext are text, but an anchor may be any exported symbol).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"
#include "symbols/ksyms.h"

#define KSYMS_MAX_FILE	(256u << 20)	/* a System.map is ~5 MiB */
#define KSYMS_MAX_NAME	512

struct kname {
	uint64_t addr;
	const char *name;
};

struct ksyms {
	struct elfsym *syms;	/* text symbols, sorted, sizes filled in */
	size_t nr;
	struct kname *all;	/* every symbol, sorted by name */
	size_t nr_all;
	char *names;
	size_t bad;
};

void ksyms_free(struct ksyms *ks)
{
	if (!ks)
		return;
	free(ks->syms);
	free(ks->all);
	free(ks->names);
	free(ks);
}

static int sym_cmp(const void *a, const void *b)
{
	const struct elfsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return 0;
}

static int kname_cmp(const void *a, const void *b)
{
	const struct kname *x = a, *y = b;

	return strcmp(x->name, y->name);
}

struct ksyms *ksyms_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct ksyms *ks = calloc(1, sizeof(*ks));
	size_t cap_all = 0, cap = 0, nlen = 0, ncap = 0;
	const char *p = text, *end = text + len;
	int nonzero = 0;
	struct elfsym *text_syms = NULL;
	size_t nr_text = 0;
	int ret = -ENOMEM;

	if (!ks)
		goto fail;
	/* Pass 1: names into one buffer; entries keep offsets until the end. */
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *q = p, *name, *name_end;
		uint64_t addr = 0;
		int digits = 0, type;

		if (!eol)
			eol = end;
		while (q < eol && util_hexval((unsigned char)*q) >= 0 && digits <= 16) {
			addr = addr << 4 | (uint64_t)util_hexval((unsigned char)*q);
			q++;
			digits++;
		}
		if (digits == 0 || digits > 16 || q + 3 > eol || q[0] != ' ' || q[2] != ' ')
			goto bad;
		type = (unsigned char)q[1];
		name = q + 3;
		name_end = name;
		while (name_end < eol && *name_end != ' ' && *name_end != '\t' &&
		       *name_end != '\r' && *name_end != '\0')
			name_end++;
		if (name_end == name || name_end - name > KSYMS_MAX_NAME)
			goto bad;
		/* "[module]" after the name: module symbols come from the .ko. */
		if (name_end < eol && memchr(name_end, '[', (size_t)(eol - name_end)))
			goto next;

		if (nlen + (size_t)(name_end - name) + 1 > ncap) {
			size_t nc = ncap ? ncap * 2 : 65536;
			char *b;

			while (nc < nlen + (size_t)(name_end - name) + 1)
				nc *= 2;
			b = realloc(ks->names, nc);
			if (!b)
				goto fail;
			ks->names = b;
			ncap = nc;
		}
		if (ks->nr_all == cap_all) {
			size_t nc = cap_all ? cap_all * 2 : 4096;
			struct kname *a = realloc(ks->all, nc * sizeof(*a));

			if (!a)
				goto fail;
			ks->all = a;
			cap_all = nc;
		}
		ks->all[ks->nr_all++] = (struct kname){
			.addr = addr, .name = (const char *)(uintptr_t)nlen,
		};
		if (type == 't' || type == 'T' || type == 'w' || type == 'W') {
			if (nr_text == cap) {
				size_t nc = cap ? cap * 2 : 4096;
				struct elfsym *s = realloc(text_syms, nc * sizeof(*s));

				if (!s)
					goto fail;
				text_syms = s;
				cap = nc;
			}
			text_syms[nr_text++] = (struct elfsym){
				.addr = addr, .name = (const char *)(uintptr_t)nlen,
			};
		}
		memcpy(ks->names + nlen, name, (size_t)(name_end - name));
		nlen += (size_t)(name_end - name);
		ks->names[nlen++] = '\0';
		if (addr)
			nonzero = 1;
		goto next;
bad:
		if (eol > p)
			ks->bad++;
next:
		p = eol + 1;
	}
	if (nr_text == 0) {
		util_seterr(err, errlen, "no kernel text symbols found");
		ret = -EINVAL;
		goto fail;
	}
	if (!nonzero) {
		util_seterr(err, errlen, "every address is zero (kallsyms read without root?)");
		ret = -EPERM;
		goto fail;
	}
	for (size_t i = 0; i < ks->nr_all; i++)
		ks->all[i].name = ks->names + (uintptr_t)ks->all[i].name;
	for (size_t i = 0; i < nr_text; i++)
		text_syms[i].name = ks->names + (uintptr_t)text_syms[i].name;
	qsort(ks->all, ks->nr_all, sizeof(*ks->all), kname_cmp);
	/* Stable enough: equal addresses keep file order after this sort only
	 * by chance, so dedupe below keeps the first non-underscore name. */
	qsort(text_syms, nr_text, sizeof(*text_syms), sym_cmp);
	ks->syms = calloc(nr_text, sizeof(*ks->syms));
	if (!ks->syms)
		goto fail;
	for (size_t i = 0; i < nr_text; i++) {
		size_t j = i;

		/* Among aliases prefer a name without a leading underscore. */
		while (j + 1 < nr_text && text_syms[j + 1].addr == text_syms[i].addr)
			j++;
		ks->syms[ks->nr] = text_syms[i];
		for (size_t k = i; k <= j; k++) {
			if (text_syms[k].name[0] != '_') {
				ks->syms[ks->nr] = text_syms[k];
				break;
			}
		}
		ks->nr++;
		i = j;
	}
	/* Sizes: up to the next symbol; the last one gets a page. */
	for (size_t i = 0; i < ks->nr; i++)
		ks->syms[i].size = i + 1 < ks->nr ? ks->syms[i + 1].addr - ks->syms[i].addr : 4096;
	free(text_syms);
	return ks;
fail:
	free(text_syms);
	ksyms_free(ks);
	if (ret == -ENOMEM)
		util_seterr(err, errlen, "out of memory");
	errno = -ret;
	return NULL;
}

struct ksyms *ksyms_open(const char *path, char *err, size_t errlen)
{
	struct ksyms *ks = NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		util_seterr(err, errlen, "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	/* Read to EOF: /proc/kallsyms has no size. */
	for (;;) {
		ssize_t n;

		if (len == cap) {
			size_t nc = cap ? cap * 2 : 1 << 20;
			char *b;

			if (nc > KSYMS_MAX_FILE) {
				util_seterr(err, errlen, "%s: larger than %u MiB", path,
					    KSYMS_MAX_FILE >> 20);
				e = EFBIG;
				goto out;
			}
			b = realloc(buf, nc);
			if (!b) {
				e = ENOMEM;
				goto out;
			}
			buf = b;
			cap = nc;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			e = errno;
			util_seterr(err, errlen, "%s: %s", path, strerror(e));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	ks = ksyms_parse(buf, len, err, errlen);
	e = ks ? 0 : errno;
	if (!ks && err && errlen) {
		char tmp[256];

		snprintf(tmp, sizeof(tmp), "%s: %s", path, err);
		snprintf(err, errlen, "%s", tmp);
	}
out:
	free(buf);
	close(fd);
	errno = e;
	return ks;
}

size_t ksyms_nr(const struct ksyms *ks)
{
	return ks->nr;
}

const struct elfsym *ksyms_sym(const struct ksyms *ks, size_t i)
{
	return i < ks->nr ? &ks->syms[i] : NULL;
}

size_t ksyms_bad_lines(const struct ksyms *ks)
{
	return ks->bad;
}

long ksyms_lookup(const struct ksyms *ks, uint64_t addr)
{
	return elfsym_lookup(ks->syms, ks->nr, addr);
}

int ksyms_addr(const struct ksyms *ks, const char *name, uint64_t *addr)
{
	struct kname key = { .name = name };
	const struct kname *k;

	k = bsearch(&key, ks->all, ks->nr_all, sizeof(*ks->all), kname_cmp);
	if (!k)
		return -ENOENT;
	*addr = k->addr;
	return 0;
}

int ksyms_slide(uint64_t text_addr, const char *anchor_name, uint64_t anchor_addr,
		int (*lookup)(const void *src, const char *name, uint64_t *addr),
		const void *src, uint64_t *slide)
{
	uint64_t link;

	if (text_addr && lookup(src, "_text", &link) == 0) {
		*slide = text_addr - link;
		return 0;
	}
	if (anchor_name && *anchor_name && anchor_addr &&
	    lookup(src, anchor_name, &link) == 0) {
		*slide = anchor_addr - link;
		return 0;
	}
	return -ENOENT;
}
