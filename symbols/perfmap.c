// SPDX-License-Identifier: MIT
/*
 * Perf maps (symbols/perfmap.h): lines checked one by one into entries in
 * file order, then the address space painted by a sweep over the entries'
 * boundaries, the latest entry over each piece winning (a max-heap of the
 * entries open at the boundary, by line number).  A jitdump's records
 * (symbols/jitdump.c) become entries of the same builder
 * (symbols/pmbuild.c), after the map's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fs.h"
#include "lib/hex.h"
#include "symbols/jitdump.h"
#include "symbols/perfmap.h"
#include "symbols/pmbuild.h"

struct perfmap {
	struct elfsym *syms;
	const uint8_t **code;	/* [nr]: each symbol's code bytes, or NULL */
	size_t nr;
	char *names;
	uint8_t *blob;		/* the jitdump's bytes the code points into */
	struct perfmap_stats st;
};

/* A map being built: the builder the readers feed, and the map its
 * entries are painted into (and whose stats the map's lines count). */
struct mapbuild {
	struct pmbuild b;
	struct perfmap *pm;
};

void perfmap_free(struct perfmap *pm)
{
	if (!pm)
		return;
	free(pm->syms);
	free(pm->code);
	free(pm->names);
	free(pm->blob);
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
	while (q < eol && (v = hex_val((unsigned char)*q)) >= 0) {
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

/* One complete line (without its newline): an entry, or counted.
 * 0 or -ENOMEM. */
static int line_take(struct mapbuild *m, const char *p, const char *eol)
{
	struct perfmap_stats *st = &m->pm->st;
	uint64_t start, size;
	int ret;

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
	if (!pmbuild_range_ok(start, size)) {
		st->bad_range++;
		return 0;
	}
	ret = pmbuild_add(&m->b, start, size, p, (size_t)(eol - p), NULL);
	if (ret < 0)
		return ret;
	if (ret == PMB_CAPPED) {
		st->capped++;
		return 0;
	}
	st->fixed_names += ret == PMB_FIXED;
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
	pm->code[pm->nr] = k->code ? k->code + (a - k->start) : NULL;
	pm->syms[pm->nr++] = (struct elfsym){ .addr = a, .size = z - a,
					      .name = pm->names + k->name };
}

/* The sweep: every piece between two boundaries to the latest entry open
 * over it.  bnd: the sorted, distinct boundaries; heap: room for nr. */
static void paint(struct mapbuild *m, const uint64_t *bnd, size_t nb, size_t *heap)
{
	struct pmbuild *b = &m->b;
	struct perfmap *pm = m->pm;
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
static int build_syms(struct mapbuild *m)
{
	struct pmbuild *b = &m->b;
	struct perfmap *pm = m->pm;
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
	pm->code = malloc(2 * b->nr * sizeof(*pm->code));
	if (!bnd || !heap || !pm->syms || !pm->code)
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
	paint(m, bnd, nb, heap);
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

/* The map's complete lines into b: 0 or -ENOMEM. */
static int text_take(struct mapbuild *m, const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol) {
			m->pm->st.partial = 1;
			break;
		}
		if (line_take(m, p, eol))
			return -ENOMEM;
		p = eol + 1;
	}
	return 0;
}

/* A builder over a new, empty map: 0 or -ENOMEM. */
static int build_start(struct mapbuild *m)
{
	*m = (struct mapbuild){ 0 };
	m->pm = calloc(1, sizeof(*m->pm));
	return m->pm ? 0 : -ENOMEM;
}

/* The map m built, or NULL (ENOMEM) with err set: m is spent. */
static struct perfmap *build_end(struct mapbuild *m, int err)
{
	/* the map owns the names from here: its symbols point into them */
	m->pm->names = m->b.names;
	if (!err)
		err = build_syms(m);
	free(m->b.e);
	if (err) {
		perfmap_free(m->pm);
		errno = ENOMEM;
		return NULL;
	}
	return m->pm;
}

struct perfmap *perfmap_parse(const char *text, size_t len)
{
	struct mapbuild m;

	if (build_start(&m)) {
		errno = ENOMEM;
		return NULL;
	}
	return build_end(&m, text_take(&m, text, len));
}

struct perfmap *perfmap_parse_jitdump(const uint8_t *buf, size_t len)
{
	struct mapbuild m;
	int err;

	if (build_start(&m)) {
		errno = ENOMEM;
		return NULL;
	}
	m.pm->blob = malloc(len ? len : 1);
	if (!m.pm->blob)
		return build_end(&m, -ENOMEM);
	memcpy(m.pm->blob, buf, len);
	err = jitdump_take(&m.b, m.pm->blob, len, &m.pm->st.jd);
	return build_end(&m, err);
}

/* Up to PERFMAP_MAX_FILE bytes of the regular file name under dfd into
 * *buf (malloc'd), *len; *more: the file had more.  0 or -errno. */
static int file_read(int dfd, const char *name, uint8_t **buf, size_t *len, int *more)
{
	struct stat sb;
	size_t n;
	int fd = fs_openat_regular(dfd, name, O_NOFOLLOW);

	*buf = NULL;
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb)) {
		close(fd);
		return -errno;
	}
	*more = (uint64_t)sb.st_size > PERFMAP_MAX_FILE;
	n = *more ? PERFMAP_MAX_FILE : (size_t)sb.st_size;
	*buf = malloc(n ? n : 1);
	if (!*buf) {
		close(fd);
		return -ENOMEM;
	}
	for (size_t got = 0; got < n;) {
		ssize_t r = pread(fd, *buf + got, n - got, (off_t)got);

		if (r <= 0) {
			n = got;	/* shrank under the read: what is there */
			break;
		}
		got += (size_t)r;
	}
	close(fd);
	*len = n;
	return 0;
}

struct perfmap *perfmap_load(int dfd, const char *map_name, const char *dump_name)
{
	struct mapbuild m;
	uint8_t *text = NULL;
	size_t n = 0;
	int more = 0, err, have = 0;

	if (build_start(&m)) {
		errno = ENOMEM;
		return NULL;
	}
	err = map_name ? file_read(dfd, map_name, &text, &n, &more) : -ENOENT;
	if (!err) {
		have = 1;
		m.pm->st.capped += (uint64_t)more;
		err = text_take(&m, (const char *)text, n);
		free(text);
	}
	if (err == -ENOMEM)
		return build_end(&m, err);
	/* the dump's entries after the map's: where both name a range, the
	 * dump's (it has the code, and moves) */
	err = dump_name ? file_read(dfd, dump_name, &m.pm->blob, &n, &more) : -ENOENT;
	if (!err) {
		have = 1;
		m.pm->st.jd.capped += (uint64_t)more;
		err = jitdump_take(&m.b, m.pm->blob, n, &m.pm->st.jd);
	}
	if (err == -ENOMEM || !have) {
		build_end(&m, -ENOMEM);
		errno = have ? ENOMEM : -err;
		return NULL;
	}
	return build_end(&m, 0);
}

struct perfmap *perfmap_open(int dfd, const char *name)
{
	return perfmap_load(dfd, name, NULL);
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

long perfmap_code(const struct perfmap *pm, uint64_t addr, uint8_t *buf, size_t len)
{
	long i = perfmap_lookup(pm, addr);
	uint64_t left;

	if (i < 0 || !pm->code[i])
		return -1;
	left = pm->syms[i].addr + pm->syms[i].size - addr;
	if (len > left)
		len = (size_t)left;
	memcpy(buf, pm->code[i] + (addr - pm->syms[i].addr), len);
	return (long)len;
}

const struct perfmap_stats *perfmap_stats(const struct perfmap *pm)
{
	return &pm->st;
}
