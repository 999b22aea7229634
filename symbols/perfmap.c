// SPDX-License-Identifier: MIT
/*
 * Perf maps (symbols/perfmap.h): lines checked one by one into entries in
 * file order, then the address space painted by a sweep over the entries'
 * boundaries, the latest entry over each piece winning (a max-heap of the
 * entries open at the boundary, by line number).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"
#include "lib/x86.h"
#include "symbols/perfmap.h"

struct pment {
	uint64_t start, end;
	size_t name;		/* offset in names */
	size_t seq;		/* line order: later wins */
	uint64_t painted;	/* bytes it kept */
};

struct perfmap {
	struct elfsym *syms;
	size_t nr;
	char *names;
	struct perfmap_stats st;
};

struct pmbuild {
	struct perfmap *pm;
	struct pment *e;
	size_t nr, cap;
	size_t nlen, ncap;
};

void perfmap_free(struct perfmap *pm)
{
	if (!pm)
		return;
	free(pm->syms);
	free(pm->names);
	free(pm);
}

/* A hex number at *p (0x optional, at most 16 digits), then one blank:
 * 0 and *p past the blank, or -1. */
static int hex_field(const char **p, const char *eol, uint64_t *out)
{
	const char *q = *p;
	int digits = 0, v;

	if (eol - q > 2 && q[0] == '0' && (q[1] == 'x' || q[1] == 'X'))
		q += 2;
	*out = 0;
	while (q < eol && (v = util_hexval((unsigned char)*q)) >= 0) {
		if (++digits > 16)
			return -1;
		*out = *out << 4 | (uint64_t)v;
		q++;
	}
	if (!digits || q >= eol || (*q != ' ' && *q != '\t'))
		return -1;
	*p = q + 1;
	return 0;
}

/* The name's bytes into the pool, controls and bytes that are not UTF-8
 * made '?': 1 if any was, 0, or -ENOMEM. */
static int name_put(struct pmbuild *b, const char *s, size_t n)
{
	int fixed = 0;
	char *d;

	if (UTIL_GROW(b->pm->names, b->ncap, b->nlen + n + 1, 4096))
		return -ENOMEM;
	d = b->pm->names + b->nlen;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = c < 0x20 || c == 0x7f ? 0 : util_utf8_char(s + i, n - i);

		if (!k) {
			d[i++] = '?';
			fixed = 1;
			continue;
		}
		memcpy(d + i, s + i, k);
		i += k;
	}
	d[n] = '\0';
	b->nlen += n + 1;
	return fixed;
}

/* One complete line (without its newline): an entry, or counted.
 * 0 or -ENOMEM. */
static int line_take(struct pmbuild *b, const char *p, const char *eol)
{
	struct perfmap_stats *st = &b->pm->st;
	uint64_t start, size, end;
	size_t name;
	int fixed;

	st->lines++;
	if ((size_t)(eol - p) > PERFMAP_MAX_LINE) {
		st->long_lines++;
		return 0;
	}
	while (eol > p && (eol[-1] == '\r' || eol[-1] == ' '))
		eol--;		/* trailing blanks are no part of a name */
	if (hex_field(&p, eol, &start) || hex_field(&p, eol, &size) || p >= eol) {
		st->bad++;
		return 0;
	}
	if (!size || size > PERFMAP_MAX_RANGE || __builtin_add_overflow(start, size, &end) ||
	    end > OPVM_USER_TOP) {
		st->bad_range++;
		return 0;
	}
	if (b->nr >= PERFMAP_MAX_ENTRIES) {
		st->capped++;
		return 0;
	}
	if (UTIL_GROW(b->e, b->cap, b->nr + 1, 256))
		return -ENOMEM;
	name = b->nlen;
	fixed = name_put(b, p, (size_t)(eol - p));
	if (fixed < 0)
		return fixed;
	st->fixed_names += (uint64_t)fixed;
	b->e[b->nr] = (struct pment){ .start = start, .end = end, .name = name, .seq = b->nr };
	b->nr++;
	st->entries++;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct pment *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/* The heap of open entries (indices into e), the latest line on top. */
static void heap_push(size_t *h, size_t *n, const struct pment *e, size_t v)
{
	size_t i = (*n)++;

	while (i && e[h[(i - 1) / 2]].seq < e[v].seq) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = v;
}

static void heap_pop(size_t *h, size_t *n, const struct pment *e)
{
	size_t i = 0, v = h[--(*n)];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && e[h[c + 1]].seq > e[h[c]].seq)
			c++;
		if (e[h[c]].seq <= e[v].seq)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = v;
}

/* One painted piece [a, z) of entry k: appended to syms, or merged with
 * the last symbol when that is k's and ends at a. */
static void piece_put(struct perfmap *pm, struct pment *k, uint64_t a, uint64_t z,
		      const struct pment *last)
{
	k->painted += z - a;
	if (last == k && pm->nr && pm->syms[pm->nr - 1].addr + pm->syms[pm->nr - 1].size == a) {
		pm->syms[pm->nr - 1].size += z - a;
		return;
	}
	pm->syms[pm->nr++] = (struct elfsym){ .addr = a, .size = z - a,
					      .name = pm->names + k->name };
}

/* The sweep: every piece between two boundaries to the latest entry open
 * over it.  bnd: the sorted, distinct boundaries; heap: room for nr. */
static void paint(struct pmbuild *b, const uint64_t *bnd, size_t nb, size_t *heap)
{
	struct perfmap *pm = b->pm;
	const struct pment *last = NULL;
	size_t hn = 0, next = 0;

	for (size_t i = 0; i + 1 < nb; i++) {
		while (next < b->nr && b->e[next].start <= bnd[i])
			heap_push(heap, &hn, b->e, next++);
		while (hn && b->e[heap[0]].end <= bnd[i])
			heap_pop(heap, &hn, b->e);
		if (!hn)
			continue;
		piece_put(pm, &b->e[heap[0]], bnd[i], bnd[i + 1], last);
		last = &b->e[heap[0]];
	}
}

/* Entries -> non-overlapping symbols.  0 or -ENOMEM. */
static int build_syms(struct pmbuild *b)
{
	struct perfmap *pm = b->pm;
	uint64_t *bnd = NULL;
	size_t *heap = NULL, nb = 0;
	int ret = -ENOMEM;

	if (!b->nr)
		return 0;
	qsort(b->e, b->nr, sizeof(*b->e), by_start);
	bnd = malloc(2 * b->nr * sizeof(*bnd));
	heap = malloc(b->nr * sizeof(*heap));
	/* n entries make at most 2n - 1 pieces */
	pm->syms = malloc(2 * b->nr * sizeof(*pm->syms));
	if (!bnd || !heap || !pm->syms)
		goto out;
	for (size_t i = 0; i < b->nr; i++) {
		bnd[nb++] = b->e[i].start;
		bnd[nb++] = b->e[i].end;
	}
	qsort(bnd, nb, sizeof(*bnd), u64_cmp);
	{
		size_t u = 0;

		for (size_t i = 0; i < nb; i++)
			if (!u || bnd[i] != bnd[u - 1])
				bnd[u++] = bnd[i];
		nb = u;
	}
	paint(b, bnd, nb, heap);
	for (size_t i = 0; i < b->nr; i++) {
		if (b->e[i].painted < b->e[i].end - b->e[i].start)
			pm->st.overlapped++;
		if (!b->e[i].painted)
			pm->st.hidden++;
	}
	ret = 0;
out:
	free(bnd);
	free(heap);
	return ret;
}

struct perfmap *perfmap_parse(const char *text, size_t len)
{
	struct pmbuild b = { 0 };
	const char *p = text, *end = text + len;

	b.pm = calloc(1, sizeof(*b.pm));
	if (!b.pm)
		return NULL;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol) {
			b.pm->st.partial = 1;
			break;
		}
		if (line_take(&b, p, eol))
			goto nomem;
		p = eol + 1;
	}
	if (build_syms(&b))
		goto nomem;
	free(b.e);
	return b.pm;
nomem:
	free(b.e);
	perfmap_free(b.pm);
	errno = ENOMEM;
	return NULL;
}

struct perfmap *perfmap_open(int dfd, const char *name)
{
	struct perfmap *pm = NULL;
	struct stat sb;
	char *buf = NULL;
	size_t n = 0;
	int fd, err = 0;

	fd = util_openat_regular(dfd, name, O_NOFOLLOW);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	if (fstat(fd, &sb)) {
		err = errno;
		goto out;
	}
	n = (uint64_t)sb.st_size > PERFMAP_MAX_FILE ? PERFMAP_MAX_FILE : (size_t)sb.st_size;
	buf = malloc(n ? n : 1);
	if (!buf) {
		err = ENOMEM;
		goto out;
	}
	for (size_t got = 0; got < n;) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)got);

		if (r <= 0) {
			n = got;	/* shrank under the read: what is there */
			break;
		}
		got += (size_t)r;
	}
	pm = perfmap_parse(buf, n);
	if (!pm)
		err = errno;
	else if ((uint64_t)sb.st_size > PERFMAP_MAX_FILE)
		pm->st.capped++;
out:
	free(buf);
	close(fd);
	errno = err;
	return pm;
}

size_t perfmap_nr(const struct perfmap *pm)
{
	return pm->nr;
}

const struct elfsym *perfmap_sym(const struct perfmap *pm, size_t i)
{
	return i < pm->nr ? &pm->syms[i] : NULL;
}

long perfmap_lookup(const struct perfmap *pm, uint64_t addr)
{
	return elfsym_lookup(pm->syms, pm->nr, addr);
}

const struct perfmap_stats *perfmap_stats(const struct perfmap *pm)
{
	return &pm->st;
}
