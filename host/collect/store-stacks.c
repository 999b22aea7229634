// SPDX-License-Identifier: MIT
/*
 * The stack table (host/collect/store.h, "Call chains"): every distinct
 * call chain of one guest tree once, with a count per event.
 *
 *   current/stacks.def  append-only records: the names (apps and images,
 *                       raw guest bytes, never used as paths) and the
 *                       stacks, each a list of (image name id, offset)
 *   current/stacks.cnt  a header and counts[stack id][event], mmap'd: a
 *                       sparse file of max_stacks * nr_events words
 *
 * A stack's definition is written (write(2), in the page cache at once)
 * before its count first grows, so a writer killed at any instant leaves a
 * table whose every counted stack is defined; a torn last record is
 * ignored by the reader.  That is the sample files' guarantee, without
 * a sync: counts are in a shared mapping.
 *
 * Bounds: STORE_STACKS_MAX stacks, STORE_STACKS_MAX_NAMES names and
 * STORE_STACKS_MAX_DEF bytes of definitions per guest, and the store's
 * disk cap; a stack past a bound is not kept (its sample still is, in the
 * sample files) and is counted in store_stats.stacks_dropped.
 *
 * Why not the sample files' hash: a stack is a variable-length key, and
 * the reports want every stack with its frames, which a table keyed by
 * a 64-bit offset would have to keep somewhere else anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/store-priv.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/hash.h"

struct stk_def_hdr {
	char magic[8];			/* STACKS_DEF_MAGIC */
	uint32_t version;
	uint32_t reserved;
};

struct stk_cnt_hdr {
	char magic[8];			/* STACKS_CNT_MAGIC */
	uint32_t version;
	uint32_t nr_events;
	uint32_t max_stacks;
	uint32_t reserved;
	char events[8][32];		/* OPVM_MAX_EVENTS names */
	uint8_t pad[4096 - 24 - 256];
};
_Static_assert(sizeof(struct stk_cnt_hdr) == 4096, "counts start on a page");

/* Records of stacks.def; len counts the payload, padded to 8 bytes. */
enum { REC_NAME = 1, REC_STACK = 2 };
struct stk_rec {
	uint32_t kind;
	uint32_t len;
	uint32_t id;
	uint32_t aux;			/* NAME: kernel | python << 1 |
					 * build-id len << 8;
					 * STACK: app name id */
};
struct stk_frame_rec {
	uint32_t name;			/* image name id */
	uint32_t tgid;			/* store_frame's (0 in tables of
					 * before it: read as none) */
	uint64_t offset;
};

/* In memory: names and stacks by hash, open addressing. */
struct stk_ent {
	uint64_t hash;
	uint32_t id;			/* + 1; 0: empty */
	uint32_t off;			/* into keys: the key's bytes */
	uint32_t len;
};

struct stacktab {
	struct store *st;		/* the guest tree's store: directory, disk
					 * cap, counters */
	int deffd;
	uint64_t *cnt;			/* counts[id * nr_events + event] */
	size_t cnt_len;
	unsigned nr_events;
	uint32_t nr_stacks, nr_names;
	uint64_t def_bytes;
	struct stk_ent *names, *stacks;	/* STK_HASH slots each */
	uint8_t *keys;			/* the keys' bytes, an arena */
	size_t keys_len, keys_cap;
	uint64_t dropped;
	int broken;			/* a write failed: keep nothing more */
};
#define STK_HASH	(2 * STORE_STACKS_MAX)	/* power of two */

struct stacktab *store_stacks_open(struct store *st)
{
	struct stacktab *t = calloc(1, sizeof(*t));
	struct stk_def_hdr dh = { STACKS_DEF_MAGIC, 1, 0 };
	struct stk_cnt_hdr ch = { STACKS_CNT_MAGIC, 1, 0, STORE_STACKS_MAX, 0, { { 0 } }, { 0 } };
	int cfd = -1;

	if (!t)
		return NULL;
	t->st = st;
	t->deffd = -1;
	t->nr_events = (unsigned)st->nr_events;
	t->cnt_len = sizeof(ch) + (size_t)STORE_STACKS_MAX * t->nr_events * sizeof(uint64_t);
	t->names = calloc(STK_HASH, sizeof(*t->names));
	t->stacks = calloc(STK_HASH, sizeof(*t->stacks));
	ch.nr_events = t->nr_events;
	for (unsigned i = 0; i < t->nr_events && i < 8; i++)
		memcpy(ch.events[i], st->events[i].name, sizeof(ch.events[i]));
	/* afresh each time: STORE_APPEND keeps the sample files, and a new
	 * table's ids mean nothing to an old one */
	unlinkat(st->curfd, "stacks.def", 0);
	unlinkat(st->curfd, "stacks.cnt", 0);
	t->deffd = openat(st->curfd, "stacks.def", O_WRONLY | O_CREAT | O_EXCL | O_APPEND |
			  O_NOFOLLOW | O_CLOEXEC, st->fmode);
	cfd = openat(st->curfd, "stacks.cnt", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		     O_CLOEXEC, st->fmode);
	if (!t->names || !t->stacks || t->deffd < 0 || cfd < 0 ||
	    store_disk_take(st, sizeof(ch) + sizeof(dh), false) ||
	    write(t->deffd, &dh, sizeof(dh)) != sizeof(dh) ||
	    pwrite(cfd, &ch, sizeof(ch), 0) != sizeof(ch) || ftruncate(cfd, (off_t)t->cnt_len))
		goto fail;
	t->cnt = mmap(NULL, t->cnt_len, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
	if (t->cnt == MAP_FAILED)
		goto fail;
	close(cfd);
	t->def_bytes = sizeof(dh);
	return t;
fail:
	if (cfd >= 0)
		close(cfd);
	t->cnt = NULL;
	store_stacks_close(t);
	return NULL;
}

void store_stacks_close(struct stacktab *t)
{
	if (!t)
		return;
	if (t->cnt)
		munmap(t->cnt, t->cnt_len);
	if (t->deffd >= 0)
		close(t->deffd);
	free(t->names);
	free(t->stacks);
	free(t->keys);
	free(t);
}

/* The slot of key in tab, or of the empty slot where it would go. */
static struct stk_ent *find(struct stacktab *t, struct stk_ent *tab, uint64_t h,
			    const void *key, size_t len)
{
	for (size_t i = h & (STK_HASH - 1);; i = (i + 1) & (STK_HASH - 1)) {
		struct stk_ent *e = &tab[i];

		if (!e->id || (e->hash == h && e->len == len &&
			       !memcmp(t->keys + e->off, key, len)))
			return e;
	}
}

/* Appends one record; 0 or -errno (then nothing more is kept). */
static int put_rec(struct store *st, struct stacktab *t, const struct stk_rec *r,
		   const void *a, size_t alen, const void *b, size_t blen)
{
	static const uint8_t zero[8];
	size_t pad = (8 - (alen + blen) % 8) % 8, total = sizeof(*r) + alen + blen + pad;
	uint8_t buf[sizeof(*r) + 8192 + 8];

	if (total > sizeof(buf) || t->def_bytes + total > STORE_STACKS_MAX_DEF ||
	    store_disk_take(st, total, false))
		return -ENOSPC;
	memcpy(buf, r, sizeof(*r));
	memcpy(buf + sizeof(*r), a, alen);
	if (blen)
		memcpy(buf + sizeof(*r) + alen, b, blen);
	memcpy(buf + sizeof(*r) + alen + blen, zero, pad);
	/* one write: a record is whole or, killed mid-way, torn at the end */
	if (write(t->deffd, buf, total) != (ssize_t)total) {
		t->broken = 1;
		return -EIO;
	}
	t->def_bytes += total;
	return 0;
}

/* Keeps key's bytes in the arena for later compares. */
static int keep_key(struct stacktab *t, const void *key, size_t len, uint32_t *off)
{
	if (t->keys_len + len > t->keys_cap) {
		size_t cap = t->keys_cap ? t->keys_cap * 2 : 1u << 16;
		uint8_t *k;

		while (cap < t->keys_len + len)
			cap *= 2;
		if (cap > STORE_STACKS_MAX_DEF || !(k = realloc(t->keys, cap)))
			return -ENOSPC;
		t->keys = k;
		t->keys_cap = cap;
	}
	memcpy(t->keys + t->keys_len, key, len);
	*off = (uint32_t)t->keys_len;
	t->keys_len += len;
	return 0;
}

/* The id of a name (an app, or an image with its kind and build-id);
 * kind: 1 kernel, 2 Python frames, 0 any other. */
static int name_id(struct store *st, struct stacktab *t, const char *s, int kernel,
		   const uint8_t *bid, size_t bid_len, uint32_t *id)
{
	uint8_t key[4 + 32 + STORE_STACKS_NAME_MAX];
	size_t n = strnlen(s, STORE_STACKS_NAME_MAX), len;
	struct stk_rec r = { REC_NAME, 0, 0, 0 };
	struct stk_ent *e;
	uint64_t h;

	if (bid_len > 32)
		bid_len = 32;
	key[0] = (uint8_t)kernel;
	key[1] = (uint8_t)bid_len;
	key[2] = key[3] = 0;
	if (bid_len)
		memcpy(key + 4, bid, bid_len);
	memcpy(key + 4 + bid_len, s, n);
	len = 4 + bid_len + n;
	h = hash_bytes(key, len, 1);
	e = find(t, t->names, h, key, len);
	if (e->id) {
		*id = e->id - 1;
		return 0;
	}
	if (t->nr_names >= STORE_STACKS_MAX_NAMES)
		return -ENOSPC;
	r.len = (uint32_t)(len - 4);
	r.id = t->nr_names;
	r.aux = (uint32_t)(kernel & 3) | (uint32_t)bid_len << 8;
	if (put_rec(st, t, &r, key + 4, len - 4, NULL, 0) || keep_key(t, key, len, &e->off))
		return -ENOSPC;
	e->hash = h;
	e->len = (uint32_t)len;
	e->id = ++t->nr_names;
	*id = e->id - 1;
	return 0;
}

void store_stack_lost(struct store *st)
{
	st->stats.stacks_dropped++;
}

int store_stack_add(struct stacktab *t, uint8_t event, const char *app,
		    const struct store_frame *f, unsigned n)
{
	struct stk_frame_rec fr[STORE_STACKS_MAX_FRAMES];
	struct store *st = t->st;
	struct stk_rec r = { REC_STACK, 0, 0, 0 };
	struct stk_ent *e;
	uint32_t key[1 + 4 * STORE_STACKS_MAX_FRAMES], app_id;
	uint64_t h;

	if (t->broken || event >= t->nr_events || !n || n > STORE_STACKS_MAX_FRAMES ||
	    name_id(st, t, app, 0, NULL, 0, &app_id))
		goto drop;
	key[0] = app_id;
	for (unsigned i = 0; i < n; i++) {
		if (name_id(st, t, f[i].image, f[i].python ? 2 : !!f[i].kernel, f[i].build_id,
			    f[i].build_id_len, &fr[i].name))
			goto drop;
		fr[i].tgid = f[i].tgid;
		fr[i].offset = f[i].offset;
		key[1 + 4 * i] = fr[i].name;
		key[2 + 4 * i] = fr[i].tgid;
		memcpy(&key[3 + 4 * i], &f[i].offset, sizeof(f[i].offset));
	}
	h = hash_bytes(key, (1 + 4 * n) * sizeof(uint32_t), 2);
	e = find(t, t->stacks, h, key, (1 + 4 * n) * sizeof(uint32_t));
	if (!e->id) {
		size_t word = (size_t)t->nr_stacks * t->nr_events;

		if (t->nr_stacks >= STORE_STACKS_MAX)
			goto drop;
		/* the count file's pages are charged as stacks reach them */
		if (word % 512 + t->nr_events > 512 && store_disk_take(st, BLOCK, false))
			goto drop;
		r.len = (uint32_t)(n * sizeof(fr[0]));
		r.id = t->nr_stacks;
		r.aux = app_id;
		if (put_rec(st, t, &r, fr, n * sizeof(fr[0]), NULL, 0) ||
		    keep_key(t, key, (1 + 4 * n) * sizeof(uint32_t), &e->off))
			goto drop;
		e->hash = h;
		e->len = (uint32_t)((1 + 4 * n) * sizeof(uint32_t));
		e->id = ++t->nr_stacks;
	}
	t->cnt[(sizeof(struct stk_cnt_hdr) / 8) + (size_t)(e->id - 1) * t->nr_events + event]++;
	st->stats.stacks++;
	return 0;
drop:
	st->stats.stacks_dropped++;
	return -ENOSPC;
}

/* ---- reading ------------------------------------------------------------ */

struct rd_name {
	char *s;			/* NUL-terminated, control bytes as '?' */
	int kernel, python;
	uint8_t bid[32];
	uint8_t bid_len;
};

struct rd {
	uint8_t *def;
	size_t def_len;
	struct rd_name *names;
	uint32_t nr_names, cap_names;
	const uint64_t *cnt;
	size_t cnt_len;
	struct stk_cnt_hdr ch;
};

static int rd_name(struct rd *d, const struct stk_rec *r, const uint8_t *p)
{
	struct rd_name *n;
	uint32_t bl = (r->aux >> 8) & 0xff;

	if (r->id != d->nr_names || bl > 32 || bl > r->len || r->len - bl > STORE_STACKS_NAME_MAX)
		return -EBADMSG;
	if (d->nr_names == d->cap_names) {
		uint32_t cap = d->cap_names ? d->cap_names * 2 : 256;
		struct rd_name *nn = realloc(d->names, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		d->names = nn;
		d->cap_names = cap;
	}
	n = &d->names[d->nr_names];
	n->kernel = r->aux & 1;
	n->python = (r->aux >> 1) & 1;
	n->bid_len = (uint8_t)bl;
	memcpy(n->bid, p, bl);
	n->s = malloc(r->len - bl + 1);
	if (!n->s)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->len - bl; i++) {
		uint8_t c = p[bl + i];

		n->s[i] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
	}
	n->s[r->len - bl] = '\0';
	d->nr_names++;
	return 0;
}

static int rd_stack(struct rd *d, const struct stk_rec *r, const uint8_t *p, uint32_t id,
		    int (*fn)(const struct store_stack *s, void *arg), void *arg)
{
	struct store_frame f[STORE_STACKS_MAX_FRAMES];
	uint64_t zero[8] = { 0 };
	struct store_stack s = { .nr_events = d->ch.nr_events, .events = d->ch.events };
	size_t at = 512 + (size_t)id * d->ch.nr_events;
	unsigned n = r->len / sizeof(struct stk_frame_rec);

	if (r->id != id || r->len % sizeof(struct stk_frame_rec) || !n ||
	    n > STORE_STACKS_MAX_FRAMES || r->aux >= d->nr_names || id >= d->ch.max_stacks)
		return -EBADMSG;
	for (unsigned i = 0; i < n; i++) {
		struct stk_frame_rec fr;

		memcpy(&fr, p + i * sizeof(fr), sizeof(fr));
		if (fr.name >= d->nr_names)
			return -EBADMSG;
		f[i] = (struct store_frame){ .image = d->names[fr.name].s,
					     .kernel = d->names[fr.name].kernel,
					     .python = d->names[fr.name].python,
					     .build_id = d->names[fr.name].bid,
					     .build_id_len = d->names[fr.name].bid_len,
					     .offset = fr.offset, .tgid = fr.tgid };
	}
	s.app = d->names[r->aux].s;
	s.frames = f;
	s.nr = n;
	/* counts past the end of a short file are 0 */
	s.counts = (at + d->ch.nr_events) * 8 <= d->cnt_len ? d->cnt + at : zero;
	return fn(&s, arg);
}

/* Both files are opened as every reader of a session tree opens: never a
 * link, and only a regular file, found out before anything can block (a
 * FIFO planted as stacks.def must not hang report -c or export). */
static int rd_load(struct rd *d, int dfd, char *err, size_t errlen)
{
	int fd = fs_openat_regular(dfd, "stacks.def", O_NOFOLLOW), cfd;
	struct stat sb;

	if (fd == -ENOENT)
		return fd;
	if (fd < 0) {
		errbuf_set(err, errlen, "stacks.def is %s: remove it",
			    fd == -EINVAL ? "not a regular file" : fd == -ELOOP ?
			    "a symbolic link" : strerror(-fd));
		return -EBADMSG;
	}
	if (fstat(fd, &sb) || sb.st_size < (off_t)sizeof(struct stk_def_hdr) ||
	    (uint64_t)sb.st_size > STORE_STACKS_MAX_DEF || !(d->def = malloc((size_t)sb.st_size)) ||
	    pread(fd, d->def, (size_t)sb.st_size, 0) != sb.st_size ||
	    memcmp(d->def, STACKS_DEF_MAGIC, 8)) {
		close(fd);
		errbuf_set(err, errlen, "stacks.def is not a stack table");
		return -EBADMSG;
	}
	close(fd);
	d->def_len = (size_t)sb.st_size;
	cfd = fs_openat_regular(dfd, "stacks.cnt", O_NOFOLLOW);
	if (cfd < 0 || fstat(cfd, &sb) ||
	    sb.st_size < (off_t)sizeof(d->ch) ||
	    pread(cfd, &d->ch, sizeof(d->ch), 0) != sizeof(d->ch) ||
	    memcmp(d->ch.magic, STACKS_CNT_MAGIC, 8) || !d->ch.nr_events || d->ch.nr_events > 8 ||
	    d->ch.max_stacks > STORE_STACKS_MAX) {
		if (cfd >= 0)
			close(cfd);
		errbuf_set(err, errlen, "stacks.cnt is not a stack count table");
		return -EBADMSG;
	}
	for (unsigned i = 0; i < 8; i++)
		d->ch.events[i][31] = '\0';
	d->cnt_len = (size_t)sb.st_size;
	d->cnt = mmap(NULL, d->cnt_len, PROT_READ, MAP_PRIVATE, cfd, 0);
	close(cfd);
	if (d->cnt == MAP_FAILED) {
		d->cnt = NULL;
		return -errno;
	}
	return 0;
}

int store_stacks_read(const char *current_dir, int (*fn)(const struct store_stack *s, void *arg),
		      void *arg, char *err, size_t errlen)
{
	int dfd = open(current_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;
	struct rd d = { 0 };
	size_t at = sizeof(struct stk_def_hdr);
	uint32_t nr_stacks = 0;

	if (dfd < 0)
		return -errno;
	ret = rd_load(&d, dfd, err, errlen);
	close(dfd);
	/* a torn last record (the writer was killed) ends the table */
	while (!ret && at + sizeof(struct stk_rec) <= d.def_len) {
		struct stk_rec r;
		size_t len;

		memcpy(&r, d.def + at, sizeof(r));
		len = sizeof(r) + r.len + (8 - r.len % 8) % 8;
		if (r.len > d.def_len || at + len > d.def_len)
			break;
		if (r.kind == REC_NAME)
			ret = rd_name(&d, &r, d.def + at + sizeof(r));
		else if (r.kind == REC_STACK)
			ret = rd_stack(&d, &r, d.def + at + sizeof(r), nr_stacks++, fn, arg);
		else
			ret = -EBADMSG;
		at += len;
	}
	if (ret == -EBADMSG && err && !err[0])
		errbuf_set(err, errlen, "stacks.def is corrupt at byte %zu", at);
	for (uint32_t i = 0; i < d.nr_names; i++)
		free(d.names[i].s);
	free(d.names);
	free(d.def);
	if (d.cnt)
		munmap((void *)d.cnt, d.cnt_len);
	return ret;
}
