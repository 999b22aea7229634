// SPDX-License-Identifier: MIT
/*
 * The Python frame table (host/collect/store.h, "Python frames"): one
 * guest tree's current/python.def, append-only records of (id, first line,
 * line, qualified name, file), the ids dense from 0 in file order.
 *
 * A record is written with one write(2) before its id is used in a sample
 * file or a stack, so a writer killed at any instant leaves a table whose
 * every used id is defined; a torn last record ends the table for the
 * reader, and an appending writer (STORE_APPEND) cuts it off first.
 *
 * Bounds: STORE_PY_MAX frames and the store's disk cap; names and files
 * are cut to STORE_PY_NAME_MAX / STORE_PY_FILE_MAX bytes.  The reader
 * trusts nothing: lengths against the file, ids in order, and every name
 * made printable UTF-8 (control bytes '?', bytes that are not UTF-8 as
 * \xNN) before a report sees it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/store-priv.h"
#include "lib/errbuf.h"
#include "lib/fs.h"
#include "lib/text.h"

#define PY_MAGIC	"OPVMPYF1"

struct py_hdr {
	char magic[8];
	uint32_t version;
	uint32_t reserved;
};

struct py_rec {
	uint32_t id;
	uint32_t first_line;
	uint32_t line;
	uint16_t name_len, file_len;	/* payload: name bytes, file bytes, pad to 8 */
};

struct store_pytab {
	struct store *st;
	int fd;
	uint32_t nr;
	int broken;			/* a write failed: nothing more */
};

static size_t rec_size(const struct py_rec *r)
{
	size_t n = sizeof(*r) + r->name_len + r->file_len;

	return n + (8 - n % 8) % 8;
}

/* The records of buf[0..len) (after the header) that are whole and in
 * order: how many, and where the last ends (*end). */
static uint32_t py_scan(const uint8_t *buf, size_t len, size_t *end)
{
	size_t at = sizeof(struct py_hdr);
	uint32_t n = 0;

	while (at + sizeof(struct py_rec) <= len && n < STORE_PY_MAX) {
		struct py_rec r;

		memcpy(&r, buf + at, sizeof(r));
		if (r.id != n || r.name_len > STORE_PY_NAME_MAX || r.file_len > STORE_PY_FILE_MAX ||
		    rec_size(&r) > len - at)
			break;
		at += rec_size(&r);
		n++;
	}
	*end = at;
	return n;
}

/* An appending store's table: read whole, cut after its last good record. */
static int py_reopen(struct store_pytab *t, int fd)
{
	struct stat sb;
	uint8_t *buf;
	size_t end;

	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(struct py_hdr) ||
	    sb.st_size > (off_t)(STORE_PY_MAX * (sizeof(struct py_rec) + STORE_PY_NAME_MAX +
						 STORE_PY_FILE_MAX + 8)))
		return -EBADMSG;
	buf = malloc((size_t)sb.st_size);
	if (!buf)
		return -ENOMEM;
	if (pread(fd, buf, (size_t)sb.st_size, 0) != sb.st_size || memcmp(buf, PY_MAGIC, 8)) {
		free(buf);
		return -EBADMSG;
	}
	t->nr = py_scan(buf, (size_t)sb.st_size, &end);
	free(buf);
	return ftruncate(fd, (off_t)end) ? -errno : 0;
}

struct store_pytab *store_python_open(struct store *st)
{
	struct store_pytab *t = calloc(1, sizeof(*t));
	struct py_hdr h = { PY_MAGIC, 1, 0 };
	int err;

	if (!t)
		return NULL;
	t->st = st;
	t->fd = openat(st->curfd, "python.def", O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (t->fd >= 0) {
		err = py_reopen(t, t->fd);
		if (!err)
			return t;
		/* not ours, or torn beyond use: a fresh table (the old ids
		 * are lost; their samples stay, unnamed) */
		close(t->fd);
		unlinkat(st->curfd, "python.def", 0);
		t->nr = 0;
	}
	t->fd = openat(st->curfd, "python.def", O_WRONLY | O_CREAT | O_EXCL | O_APPEND |
		       O_NOFOLLOW | O_CLOEXEC, st->fmode);
	if (t->fd < 0 || store_disk_take(st, sizeof(h), false) ||
	    write(t->fd, &h, sizeof(h)) != sizeof(h)) {
		err = t->fd < 0 ? errno : EIO;
		store_python_close(t);
		errno = err;
		return NULL;
	}
	return t;
}

void store_python_close(struct store_pytab *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

int store_python_add(struct store_pytab *t, const char *name, const char *file,
		     uint32_t first_line, uint32_t line, uint32_t *id)
{
	uint8_t buf[sizeof(struct py_rec) + STORE_PY_NAME_MAX + STORE_PY_FILE_MAX + 8] = { 0 };
	struct py_rec r = { .id = t->nr, .first_line = first_line, .line = line };
	size_t total;

	if (t->broken || t->nr >= STORE_PY_MAX) {
		t->st->stats.py_refused++;
		return -ENOSPC;
	}
	r.name_len = (uint16_t)strnlen(name, STORE_PY_NAME_MAX);
	r.file_len = (uint16_t)strnlen(file, STORE_PY_FILE_MAX);
	total = rec_size(&r);
	memcpy(buf, &r, sizeof(r));
	memcpy(buf + sizeof(r), name, r.name_len);
	memcpy(buf + sizeof(r) + r.name_len, file, r.file_len);
	if (store_disk_take(t->st, total, false)) {
		t->st->stats.py_refused++;
		return -ENOSPC;
	}
	/* one write: whole, or torn at the end by a kill */
	if (write(t->fd, buf, total) != (ssize_t)total) {
		t->broken = 1;
		t->st->stats.py_refused++;
		return -EIO;
	}
	*id = t->nr++;
	t->st->stats.py_frames++;
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

struct store_pyread {
	struct store_pyframe *f;
	uint32_t nr;
	char *text;			/* the names, printable */
};

/* n guest bytes at p as printable UTF-8 at out (room for 4 * n + 1):
 * control bytes '?', bytes that are not UTF-8 "\xNN".  Returns its end. */
static char *py_text(char *out, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;

	while (i < n) {
		size_t k = text_utf8_char((const char *)p + i, n - i);

		if (k > 1 || (k == 1 && p[i] >= 0x20 && p[i] != 0x7f)) {
			memcpy(out, p + i, k);
			out += k;
			i += k;
			continue;
		}
		if (k == 1 || !p[i]) {
			*out++ = '?';
		} else {
			*out++ = '\\';
			*out++ = 'x';
			*out++ = hex[p[i] >> 4];
			*out++ = hex[p[i] & 15];
		}
		i++;
	}
	*out++ = '\0';
	return out;
}

static int py_load_records(struct store_pyread *t, const uint8_t *buf, size_t len)
{
	size_t end, at = sizeof(struct py_hdr);
	uint32_t n = py_scan(buf, len, &end);
	char *o;

	t->f = calloc(n ? n : 1, sizeof(*t->f));
	/* every byte may grow to 4, and each name gets a NUL */
	t->text = malloc(4 * end + 2 * (size_t)n + 1);
	if (!t->f || !t->text)
		return -ENOMEM;
	o = t->text;
	for (uint32_t i = 0; i < n; i++) {
		struct py_rec r;

		memcpy(&r, buf + at, sizeof(r));
		t->f[i].first_line = r.first_line;
		t->f[i].line = r.line;
		t->f[i].name = o;
		o = py_text(o, buf + at + sizeof(r), r.name_len);
		t->f[i].file = o;
		o = py_text(o, buf + at + sizeof(r) + r.name_len, r.file_len);
		at += rec_size(&r);
	}
	t->nr = n;
	return 0;
}

struct store_pyread *store_python_load(const char *current_dir, char *err, size_t errlen)
{
	int dfd = open(current_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd, ret = -EBADMSG;
	struct store_pyread *t = NULL;
	uint8_t *buf = NULL;
	struct stat sb;

	if (dfd < 0)
		return NULL;
	fd = fs_openat_regular(dfd, "python.def", O_NOFOLLOW);
	close(dfd);
	if (fd < 0) {
		if (fd != -ENOENT)
			errbuf_set(err, errlen, "python.def is not a regular file: remove it");
		errno = fd == -ENOENT ? ENOENT : EBADMSG;
		return NULL;
	}
	if (!fstat(fd, &sb) && sb.st_size >= (off_t)sizeof(struct py_hdr) &&
	    sb.st_size <= (off_t)(64u << 20) && (buf = malloc((size_t)sb.st_size)) &&
	    pread(fd, buf, (size_t)sb.st_size, 0) == sb.st_size && !memcmp(buf, PY_MAGIC, 8) &&
	    (t = calloc(1, sizeof(*t))))
		ret = py_load_records(t, buf, (size_t)sb.st_size);
	close(fd);
	free(buf);
	if (ret) {
		if (ret == -EBADMSG)
			errbuf_set(err, errlen, "python.def is not a Python frame table");
		store_python_free(t);
		errno = -ret;
		return NULL;
	}
	return t;
}

const struct store_pyframe *store_python_get(const struct store_pyread *t, uint64_t id)
{
	return t && id < t->nr ? &t->f[id] : NULL;
}

uint32_t store_python_count(const struct store_pyread *t)
{
	return t ? t->nr : 0;
}

void store_python_free(struct store_pyread *t)
{
	if (!t)
		return;
	free(t->f);
	free(t->text);
	free(t);
}
