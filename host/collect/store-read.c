// SPDX-License-Identifier: MIT
/*
 * The sample-file reader (sfile_reader_*, host/collect/store.h).  It trusts no
 * file: the header and table are checked against the file's size
 * (store_hdr_check()), the table is copied, and a live writer growing the
 * file meanwhile is handled by reading the header before the size and
 * again after the copy, and retrying while it changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/collect/store-priv.h"

struct sfile_reader {
	struct sfile_info info;
	struct slot *tab;	/* private copy */
	uint64_t nslots;
	uint64_t cap;		/* slots tab has room for: a reopen reuses it */
	/* SFILE_READ_LATE_CHECK: what the header claims, checked by the
	 * foreach functions as they walk the table */
	bool late;
	uint64_t want_entries, want_total;
};

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EBADMSG;
		done += (size_t)n;
	}
	return 0;
}

#define SNAP_FAIL(e, ...) do { if (err) snprintf(err, errlen, __VA_ARGS__); return (e); } while (0)
/* The table's used slots and their sum against its size and r's header:
 * 0, or -EBADMSG with a message in err. */
static int table_check(const struct sfile_reader *r, uint64_t used, uint64_t sum, char *err,
		       size_t errlen)
{
	if (used >= r->nslots)
		SNAP_FAIL(-EBADMSG, "table full (%llu slots)", (unsigned long long)r->nslots);
	if (used < r->want_entries || sum < r->want_total)
		SNAP_FAIL(-EBADMSG,
			  "table holds %llu entries / %llu samples, header says %llu / %llu",
			  (unsigned long long)used, (unsigned long long)sum,
			  (unsigned long long)r->want_entries, (unsigned long long)r->want_total);
	return 0;
}

/* A late check at the end of a walk of the table: 0, info then holding
 * the table's own entries and total (the header's until now), or
 * -EBADMSG. */
static int late_checked(struct sfile_reader *r, uint64_t used, uint64_t sum)
{
	int ret = table_check(r, used, sum, NULL, 0);

	if (!ret) {
		r->info.nr_entries = used;
		r->info.total = sum;
	}
	return ret;
}

/* One consistent copy of the header and table into r and *h: 0, 1 when the
 * writer moved them meanwhile and may_retry (read again), or -errno with a
 * message in err. */
static int read_snapshot(int fd, struct sfile_reader *r, struct sfile_hdr *h, bool may_retry,
			 char *err, size_t errlen)
{
	struct sfile_hdr h2;
	struct stat sb;
	uint64_t off, n, sum = 0, used = 0;
	int ret;

	if (read_full(fd, h, sizeof(*h), 0)) {
		if (fstat(fd, &sb) < 0)
			sb.st_size = 0;
		SNAP_FAIL(-EBADMSG, "truncated header (%llu bytes, need %u)",
			  (unsigned long long)sb.st_size, SFILE_HDR_SIZE);
	}
	if (fstat(fd, &sb) < 0)
		SNAP_FAIL(-errno, "cannot stat: %s", strerror(errno));
	ret = store_hdr_check(h, (uint64_t)sb.st_size, err, errlen);
	if (ret)
		return may_retry && !read_full(fd, &h2, sizeof(h2), 0) &&
		       memcmp(h, &h2, sizeof(*h)) ? 1 : ret;
	off = h->table & ~63ULL;
	n = 1ULL << (h->table & 63);
	if (n > r->cap) {
		/* kept for the next reopen: a report reads hundreds of
		 * tables, most of one size */
		free(r->tab);
		r->cap = 0;
		r->tab = malloc(n * SLOT_SIZE);
		if (!r->tab)
			SNAP_FAIL(-ENOMEM, "out of memory for a table of %llu slots",
				  (unsigned long long)n);
		r->cap = n;
	}
	r->nslots = n;
	if (read_full(fd, r->tab, n * SLOT_SIZE, (off_t)off))
		SNAP_FAIL(-EBADMSG, "table truncated");
	if (read_full(fd, &h2, sizeof(h2), 0))
		SNAP_FAIL(-EBADMSG, "cannot read header");
	/* The table moved while we copied it, or the writer synced (a header
	 * read racing its 8-byte stores could be torn): again. */
	if (memcmp(h, &h2, sizeof(*h)) && may_retry)
		return 1;
	r->want_entries = h->nr_entries;
	r->want_total = h->total;
	if (r->late) {
		/* the header's word until the walk checks it */
		r->info.nr_entries = h->nr_entries;
		r->info.total = h->total;
		return 0;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (!r->tab[i].count)
			continue;
		used++;
		if (__builtin_add_overflow(sum, r->tab[i].count, &sum))
			sum = UINT64_MAX;
	}
	ret = table_check(r, used, sum, err, errlen);
	if (ret)
		return ret;
	r->info.nr_entries = used;
	r->info.total = sum;
	return 0;
}
#undef SNAP_FAIL

int sfile_reader_reopen(struct sfile_reader *r, const char *path, unsigned flags, char *err,
			size_t errlen)
{
#define RFAIL(e, ...) do { if (err) snprintf(err, errlen, __VA_ARGS__); ret = (e); goto fail; } while (0)
	struct sfile_hdr h;
	struct stat sb;
	int fd = -1, ret;

	if (err && errlen)
		err[0] = '\0';
	memset(&r->info, 0, sizeof(r->info));
	r->nslots = 0;
	r->late = flags & SFILE_READ_LATE_CHECK;
	if (!path) {
		ret = -EINVAL;
		goto fail;
	}
	/* never through a symlink planted in the session tree */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		RFAIL(-errno, "cannot open: %s", strerror(errno));
	if (fstat(fd, &sb) < 0)
		RFAIL(-errno, "cannot stat: %s", strerror(errno));
	if (!S_ISREG(sb.st_mode))
		RFAIL(-EBADMSG, "not a regular file");
	/* A live writer may grow the file while we read.  It extends the file
	 * before it publishes a table there, so the header is read first and
	 * the size after; and we retry when the header changed meanwhile. */
	for (int attempt = 0; ; attempt++) {
		ret = read_snapshot(fd, r, &h, attempt < 8, err, errlen);
		if (ret == 1)
			continue;
		if (ret < 0)
			goto fail;
		break;
	}
	memcpy(r->info.event, h.event, sizeof(r->info.event));
	r->info.count = h.count;
	r->info.unit_mask = h.unit_mask;
	memcpy(r->info.guest, h.guest, sizeof(r->info.guest));
	r->info.build_id_len = (uint8_t)h.build_id_len;
	memcpy(r->info.build_id, h.build_id, h.build_id_len);
	close(fd);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	/* empty, but its memory kept for the next reopen */
	memset(&r->info, 0, sizeof(r->info));
	r->nslots = 0;
	return ret;
#undef RFAIL
}

struct sfile_reader *sfile_reader_new(void)
{
	return calloc(1, sizeof(struct sfile_reader));
}

struct sfile_reader *sfile_reader_open(const char *path, char *err, size_t errlen)
{
	struct sfile_reader *r = sfile_reader_new();
	int ret;

	if (!r) {
		if (err)
			snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	ret = sfile_reader_reopen(r, path, 0, err, errlen);
	if (ret) {
		sfile_reader_close(r);
		errno = -ret;
		return NULL;
	}
	return r;
}

void sfile_reader_close(struct sfile_reader *r)
{
	if (!r)
		return;
	free(r->tab);
	free(r);
}

const struct sfile_info *sfile_reader_info(const struct sfile_reader *r)
{
	return &r->info;
}

int sfile_reader_foreach(struct sfile_reader *r,
			 int (*fn)(uint64_t offset, uint64_t count, void *arg), void *arg)
{
	uint64_t used = 0, sum = 0;

	if (!r || !fn)
		return -EINVAL;
	for (uint64_t i = 0; i < r->nslots; i++) {
		int ret;

		if (!r->tab[i].count)
			continue;
		used++;
		if (__builtin_add_overflow(sum, r->tab[i].count, &sum))
			sum = UINT64_MAX;
		ret = fn(r->tab[i].offset, r->tab[i].count, arg);
		if (ret)
			return ret;
	}
	return r->late ? late_checked(r, used, sum) : 0;
}

int sfile_reader_foreach_batch(struct sfile_reader *r,
			       int (*fn)(const uint64_t *offs, const uint64_t *counts,
					 size_t n, void *arg), void *arg)
{
	uint64_t offs[SFILE_BATCH], counts[SFILE_BATCH], nslots, used = 0, sum = 0;
	const struct slot *tab;
	bool ovf = false;
	int ret = 0;

	if (!r || !fn)
		return -EINVAL;
	/* In locals: the stores to offs and counts (uint64_t) could alias
	 * r->nslots, which the compiler would then reload every slot. */
	tab = r->tab;
	nslots = r->nslots;
	/* SFILE_BATCH slots at a time, gathered without a branch on each
	 * slot's use: a table is about half full, at random, and a branch
	 * there would be mispredicted every other slot. */
	for (uint64_t i = 0; i < nslots && !ret; i += SFILE_BATCH) {
		uint64_t m = nslots - i < SFILE_BATCH ? nslots - i : SFILE_BATCH;
		size_t n = 0;

		for (uint64_t k = i; k < i + m; k++) {
			uint64_t c = tab[k].count;

			offs[n] = tab[k].offset;
			counts[n] = c;
			n += c != 0;
			ovf |= __builtin_add_overflow(sum, c, &sum);
		}
		used += n;
		if (n)
			ret = fn(offs, counts, n, arg);
	}
	if (!ret && r->late)
		ret = late_checked(r, used, ovf ? UINT64_MAX : sum);
	return ret;
}
