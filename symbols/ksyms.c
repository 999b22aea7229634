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

#include "lib/array.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/hex.h"
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

/* What ksyms_parse() builds: names go into one buffer, and entries keep
 * offsets into it until the end (the buffer moves as it grows). */
struct kbuild {
	struct ksyms *ks;
	size_t cap_all, cap, nlen, ncap;
	struct elfsym *text;		/* text symbols, before dedupe */
	size_t nr_text;
	int nonzero;			/* some address is not 0 */
};

/* One line "ADDR TYPE NAME [module]": 0 and the fields, 1 for a module
 * symbol (those come from the .ko), -1 for a line that is not one. */
static int kline_parse(const char *p, const char *eol, uint64_t *addr, int *type,
		       const char **name, size_t *name_len)
{
	const char *q = p, *name_end;
	int digits = 0;

	*addr = 0;
	while (q < eol && hex_val((unsigned char)*q) >= 0 && digits <= 16) {
		*addr = *addr << 4 | (uint64_t)hex_val((unsigned char)*q);
		q++;
		digits++;
	}
	if (digits == 0 || digits > 16 || q + 3 > eol || q[0] != ' ' || q[2] != ' ')
		return -1;
	*type = (unsigned char)q[1];
	*name = q + 3;
	name_end = *name;
	while (name_end < eol && *name_end != ' ' && *name_end != '\t' &&
	       *name_end != '\r' && *name_end != '\0')
		name_end++;
	if (name_end == *name || name_end - *name > KSYMS_MAX_NAME)
		return -1;
	*name_len = (size_t)(name_end - *name);
	/* "[module]" after the name: module symbols come from the .ko. */
	if (name_end < eol && memchr(name_end, '[', (size_t)(eol - name_end)))
		return 1;
	return 0;
}

static int kbuild_add(struct kbuild *b, uint64_t addr, int type, const char *name, size_t n)
{
	struct ksyms *ks = b->ks;

	if (b->nlen + n + 1 > b->ncap) {
		size_t nc = b->ncap ? b->ncap * 2 : 65536;
		char *buf;

		while (nc < b->nlen + n + 1)
			nc *= 2;
		buf = realloc(ks->names, nc);
		if (!buf)
			return -ENOMEM;
		ks->names = buf;
		b->ncap = nc;
	}
	if (ARRAY_GROW(ks->all, b->cap_all, ks->nr_all + 1, 4096))
		return -ENOMEM;
	ks->all[ks->nr_all++] = (struct kname){
		.addr = addr, .name = (const char *)(uintptr_t)b->nlen,
	};
	if (type == 't' || type == 'T' || type == 'w' || type == 'W') {
		if (ARRAY_GROW(b->text, b->cap, b->nr_text + 1, 4096))
			return -ENOMEM;
		b->text[b->nr_text++] = (struct elfsym){
			.addr = addr, .name = (const char *)(uintptr_t)b->nlen,
		};
	}
	memcpy(ks->names + b->nlen, name, n);
	b->nlen += n;
	ks->names[b->nlen++] = '\0';
	if (addr)
		b->nonzero = 1;
	return 0;
}

/* Offsets into names, sorted tables, one name per text address (among
 * aliases one without a leading underscore), sizes up to the next symbol. */
static int kbuild_finish(struct kbuild *b)
{
	struct ksyms *ks = b->ks;
	struct elfsym *t = b->text;
	size_t nr = b->nr_text;

	for (size_t i = 0; i < ks->nr_all; i++)
		ks->all[i].name = ks->names + (uintptr_t)ks->all[i].name;
	for (size_t i = 0; i < nr; i++)
		t[i].name = ks->names + (uintptr_t)t[i].name;
	qsort(ks->all, ks->nr_all, sizeof(*ks->all), kname_cmp);
	/* Stable enough: equal addresses keep file order after this sort only
	 * by chance, so dedupe below keeps the first non-underscore name. */
	qsort(t, nr, sizeof(*t), sym_cmp);
	ks->syms = calloc(nr, sizeof(*ks->syms));
	if (!ks->syms)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++) {
		size_t j = i;

		while (j + 1 < nr && t[j + 1].addr == t[i].addr)
			j++;
		ks->syms[ks->nr] = t[i];
		for (size_t k = i; k <= j; k++) {
			if (t[k].name[0] != '_') {
				ks->syms[ks->nr] = t[k];
				break;
			}
		}
		ks->nr++;
		i = j;
	}
	/* Sizes: up to the next symbol; the last one gets a page. */
	for (size_t i = 0; i < ks->nr; i++)
		ks->syms[i].size = i + 1 < ks->nr ? ks->syms[i + 1].addr - ks->syms[i].addr : 4096;
	return 0;
}

struct ksyms *ksyms_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct kbuild b = { .ks = calloc(1, sizeof(struct ksyms)) };
	const char *p = text, *end = text + len;
	int ret = -ENOMEM;

	if (!b.ks)
		goto fail;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *name;
		uint64_t addr;
		size_t n;
		int type, r;

		if (!eol)
			eol = end;
		r = kline_parse(p, eol, &addr, &type, &name, &n);
		if (r < 0 && eol > p)
			b.ks->bad++;
		if (r == 0 && kbuild_add(&b, addr, type, name, n))
			goto fail;
		p = eol + 1;
	}
	if (b.nr_text == 0) {
		errbuf_set(err, errlen, "no kernel text symbols found");
		ret = -EINVAL;
		goto fail;
	}
	if (!b.nonzero) {
		errbuf_set(err, errlen, "every address is zero (kallsyms read without root?)");
		ret = -EPERM;
		goto fail;
	}
	if (kbuild_finish(&b))
		goto fail;
	free(b.text);
	return b.ks;
fail:
	free(b.text);
	ksyms_free(b.ks);
	if (ret == -ENOMEM)
		errbuf_set(err, errlen, "out of memory");
	errno = -ret;
	return NULL;
}

/* The whole file into *buf (malloc'd), at most KSYMS_MAX_FILE bytes.
 * 0 or an errno, with a reason in err. */
static int ksyms_read_text(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
	size_t cap = 0;
	int fd, e = 0;

	*buf = NULL;
	*len = 0;
	fd = fs_open_regular(path, 0);	/* a FIFO must not hang us */
	if (fd < 0) {
		errbuf_set(err, errlen, "%s: %s", path,
			    -fd == EINVAL ? "not a regular file" : strerror(-fd));
		return -fd;
	}
	/* Read to EOF: /proc/kallsyms has no size. */
	for (;;) {
		ssize_t n;

		if (*len == cap) {
			size_t nc = cap ? cap * 2 : 1 << 20;
			char *b;

			if (nc > KSYMS_MAX_FILE) {
				errbuf_set(err, errlen, "%s: larger than %u MiB", path,
					    KSYMS_MAX_FILE >> 20);
				e = EFBIG;
				break;
			}
			b = realloc(*buf, nc);
			if (!b) {
				e = ENOMEM;
				break;
			}
			*buf = b;
			cap = nc;
		}
		n = read(fd, *buf + *len, cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = errno;
			errbuf_set(err, errlen, "%s: %s", path, strerror(e));
			break;
		}
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	close(fd);
	if (e) {
		free(*buf);
		*buf = NULL;
	}
	return e;
}

struct ksyms *ksyms_open(const char *path, char *err, size_t errlen)
{
	struct ksyms *ks;
	char *buf;
	size_t len;
	int e = ksyms_read_text(path, &buf, &len, err, errlen);

	if (e) {
		errno = e;
		return NULL;
	}
	ks = ksyms_parse(buf, len, err, errlen);
	e = ks ? 0 : errno;
	if (!ks && err && errlen) {
		char tmp[256];

		snprintf(tmp, sizeof(tmp), "%s: %s", path, err);
		snprintf(err, errlen, "%s", tmp);
	}
	free(buf);
	errno = e;
	return ks;
}

/* Module names: '-' and '_' alike, as the kernel treats them. */
static int modname_eq(const char *a, size_t alen, const char *b)
{
	size_t i;

	for (i = 0; i < alen && b[i]; i++) {
		char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];

		if (x != y)
			return 0;
	}
	return i == alen && !b[i];
}

/* One kallsyms line "ADDR TYPE NAME\t[MOD]" of module: its symbol, with
 * ADDR - base, appended to out (which has room for the line). */
static size_t module_line(const char *p, const char *eol, const char *module,
			  uint64_t base, uint64_t size, char *out)
{
	const char *tab = memchr(p, '\t', (size_t)(eol - p));
	uint64_t addr = 0;
	const char *q = p;
	int digits = 0;

	if (!tab || eol - tab < 3 || tab[1] != '[' || eol[-1] != ']' ||
	    !modname_eq(tab + 2, (size_t)(eol - 1 - (tab + 2)), module))
		return 0;
	while (q < tab && hex_val((unsigned char)*q) >= 0 && digits <= 16) {
		addr = addr << 4 | (uint64_t)hex_val((unsigned char)*q++);
		digits++;
	}
	if (!digits || digits > 16 || addr < base || addr - base >= size || tab - q > 512)
		return 0;
	return (size_t)sprintf(out, "%016llx%.*s\n", (unsigned long long)(addr - base),
			       (int)(tab - q), q);
}

struct ksyms *ksyms_open_module(const char *path, const char *module, uint64_t base,
				uint64_t size, char *err, size_t errlen)
{
	struct ksyms *ks = NULL;
	char *buf, *out = NULL;
	size_t len, used = 0;
	int e = ksyms_read_text(path, &buf, &len, err, errlen);

	if (e) {
		errno = e;
		return NULL;
	}
	/* a kept line grows by at most 16 digits and is at least 9 bytes
	 * ("a t b\t[c]"): three times the input is room enough */
	out = malloc(3 * len + 64);
	if (!out) {
		e = ENOMEM;
		goto out;
	}
	for (const char *p = buf, *end = buf + len; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol)
			eol = end;
		if (eol - p < 600)
			used += module_line(p, eol, module, base, size, out + used);
		p = eol + 1;
	}
	ks = ksyms_parse(out, used, err, errlen);
	e = ks ? 0 : errno;
out:
	free(out);
	free(buf);
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
