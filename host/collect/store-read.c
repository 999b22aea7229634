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

struct sfile_reader *sfile_reader_open(const char *path, char *err, size_t errlen)
{
#define RFAIL(e, ...) do { if (err) snprintf(err, errlen, __VA_ARGS__); ret = (e); goto fail; } while (0)
	struct sfile_reader *r = NULL;
	struct sfile_hdr h, h2;
	struct stat sb;
	int fd = -1, ret;

	if (err && errlen)
		err[0] = '\0';
	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	/* never through a symlink planted in the session tree */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		RFAIL(-errno, "cannot open: %s", strerror(errno));
	r = calloc(1, sizeof(*r));
	if (!r)
		RFAIL(-ENOMEM, "out of memory");
	if (fstat(fd, &sb) < 0)
		RFAIL(-errno, "cannot stat: %s", strerror(errno));
	if (!S_ISREG(sb.st_mode))
		RFAIL(-EBADMSG, "not a regular file");
	/* A live writer may grow the file while we read.  It extends the file
	 * before it publishes a table there, so the header is read first and
	 * the size after; and we retry when the header changed meanwhile. */
	for (int attempt = 0; ; attempt++) {
		uint64_t off, n, sum = 0, used = 0;

		if (read_full(fd, &h, sizeof(h), 0)) {
			if (fstat(fd, &sb) < 0)
				sb.st_size = 0;
			RFAIL(-EBADMSG, "truncated header (%llu bytes, need %u)",
			      (unsigned long long)sb.st_size, SFILE_HDR_SIZE);
		}
		if (fstat(fd, &sb) < 0)
			RFAIL(-errno, "cannot stat: %s", strerror(errno));
		ret = store_hdr_check(&h, (uint64_t)sb.st_size, err, errlen);
		if (ret) {
			if (attempt < 8 && !read_full(fd, &h2, sizeof(h2), 0) &&
			    memcmp(&h, &h2, sizeof(h)))
				continue;
			goto fail;
		}
		off = h.table & ~63ULL;
		n = 1ULL << (h.table & 63);
		free(r->tab);
		r->tab = malloc(n * SLOT_SIZE);
		if (!r->tab)
			RFAIL(-ENOMEM, "out of memory for a table of %llu slots",
			      (unsigned long long)n);
		r->nslots = n;
		if (read_full(fd, r->tab, n * SLOT_SIZE, (off_t)off))
			RFAIL(-EBADMSG, "table truncated");
		if (read_full(fd, &h2, sizeof(h2), 0))
			RFAIL(-EBADMSG, "cannot read header");
		/* The table moved while we copied it, or the writer synced (a
		 * header read racing its 8-byte stores could be torn): again. */
		if (memcmp(&h, &h2, sizeof(h)) && attempt < 8)
			continue;
		for (uint64_t i = 0; i < n; i++) {
			if (!r->tab[i].count)
				continue;
			used++;
			if (__builtin_add_overflow(sum, r->tab[i].count, &sum))
				sum = UINT64_MAX;
		}
		if (used >= n)
			RFAIL(-EBADMSG, "table full (%llu slots)",
			      (unsigned long long)n);
		if (used < h.nr_entries || sum < h.total)
			RFAIL(-EBADMSG,
			      "table holds %llu entries / %llu samples, header says %llu / %llu",
			      (unsigned long long)used, (unsigned long long)sum,
			      (unsigned long long)h.nr_entries,
			      (unsigned long long)h.total);
		r->info.nr_entries = used;
		r->info.total = sum;
		break;
	}
	memcpy(r->info.event, h.event, sizeof(r->info.event));
	r->info.count = h.count;
	r->info.unit_mask = h.unit_mask;
	memcpy(r->info.guest, h.guest, sizeof(r->info.guest));
	r->info.build_id_len = (uint8_t)h.build_id_len;
	memcpy(r->info.build_id, h.build_id, h.build_id_len);
	close(fd);
	return r;
fail:
	if (fd >= 0)
		close(fd);
	sfile_reader_close(r);
	errno = -ret;
	return NULL;
#undef RFAIL
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
	if (!r || !fn)
		return -EINVAL;
	for (uint64_t i = 0; i < r->nslots; i++) {
		int ret;

		if (!r->tab[i].count)
			continue;
		ret = fn(r->tab[i].offset, r->tab[i].count, arg);
		if (ret)
			return ret;
	}
	return 0;
}
