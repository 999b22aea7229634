// SPDX-License-Identifier: MIT
/*
 * The sample file's format (docs/sample-files.md), what writer, reader and
 * walk agree on beyond struct sfile_hdr (host/store-priv.h): which headers
 * and tables are valid for a file of a given size, and how a sample file's
 * name, EVENT.count.um.tgid.tid.cpu, reads.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/store-priv.h"

bool store_event_name_ok(const char *n)
{
	size_t len = strnlen(n, 32);

	if (len == 0 || len >= 32)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)n[i];

		if (!isalnum(c) && c != '_' && c != '-' && c != ':')
			return false;
	}
	return true;
}

int store_hdr_check(const struct sfile_hdr *h, uint64_t fsize, char *err,
		    size_t errlen)
{
#define FAIL(...) do { if (err) snprintf(err, errlen, __VA_ARGS__); return -EBADMSG; } while (0)
	uint64_t off, lg, tsize;

	if (memcmp(h->magic, OPVM_SFILE_MAGIC, 8))
		FAIL("not an opvm sample file (bad magic)");
	if (h->version != OPVM_SFILE_VERSION)
		FAIL("unsupported sample file version %u (this opvm reads %u)",
		     h->version, (unsigned)OPVM_SFILE_VERSION);
	if (h->header_size < SFILE_HDR_SIZE || h->header_size > 4096 ||
	    h->header_size % 8)
		FAIL("bad header size %u", h->header_size);
	if (fsize > OPVM_SFILE_MAX_SIZE)
		FAIL("file too large (%llu bytes, limit %llu)",
		     (unsigned long long)fsize,
		     (unsigned long long)OPVM_SFILE_MAX_SIZE);
	if (h->header_size > fsize)
		FAIL("truncated header (%llu bytes, header says %u)",
		     (unsigned long long)fsize, h->header_size);
	if (!memchr(h->event, 0, sizeof(h->event)) || !h->event[0])
		FAIL("bad event name in header");
	if (!memchr(h->guest, 0, sizeof(h->guest)))
		FAIL("bad guest name in header");
	if (h->build_id_len > sizeof(h->build_id))
		FAIL("bad build-id length %u", h->build_id_len);
	off = h->table & ~63ULL;
	lg = h->table & 63;
	if (lg < SFILE_MIN_LOG2 || lg > SFILE_MAX_LOG2)
		FAIL("bad table size 2^%llu", (unsigned long long)lg);
	tsize = (1ULL << lg) * SLOT_SIZE;
	if (off < h->header_size || off > fsize || tsize > fsize - off)
		FAIL("table [%llu, +%llu) outside the file (%llu bytes)",
		     (unsigned long long)off, (unsigned long long)tsize,
		     (unsigned long long)fsize);
	if (h->nr_entries >= (1ULL << lg))
		FAIL("entry count %llu does not fit table of %llu",
		     (unsigned long long)h->nr_entries,
		     (unsigned long long)(1ULL << lg));
	return 0;
#undef FAIL
}

static int parse_field(const char *s, int64_t *v)
{
	char *end;
	long long x;

	if (!strcmp(s, "all")) {
		*v = -1;
		return 0;
	}
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || *end || x < 0)
		return -EINVAL;
	*v = x;
	return 0;
}

int store_leaf_parse(const char *name, struct store_entry *e, char *event)
{
	char buf[256], *f[6], *p, *end;
	int nf = 0;
	unsigned long long v;

	if (strlen(name) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, name);
	for (p = buf; nf < 6; nf++) {
		f[nf] = p;
		p = strchr(p, '.');
		if (!p)
			break;
		*p++ = '\0';
	}
	if (nf != 5)
		return -EINVAL;
	if (!store_event_name_ok(f[0]))
		return -EINVAL;
	strcpy(event, f[0]);
	errno = 0;
	if (!isdigit((unsigned char)*f[1]))
		return -EINVAL;
	v = strtoull(f[1], &end, 10);
	if (errno || *end)
		return -EINVAL;
	e->count = v;
	if (!isdigit((unsigned char)*f[2]))
		return -EINVAL;
	v = strtoull(f[2], &end, 0);
	if (errno || *end || v > UINT32_MAX)
		return -EINVAL;
	e->unit_mask = (uint32_t)v;
	if (parse_field(f[3], &e->tgid) || parse_field(f[4], &e->tid) ||
	    parse_field(f[5], &e->cpu))
		return -EINVAL;
	return 0;
}
