// SPDX-License-Identifier: MIT
/*
 * Files the guest sends for the reports (host/collect/fetch.h): its kernel
 * symbols.  A transfer is KSYMS records then KSYMS_END; it is written to
 * <guest>/kallsyms.part and renamed to <guest>/kallsyms at the end (or
 * when the session ends first: a partial table still names most samples).
 * A HELLO (reboot, new host session) abandons an open transfer: the relay
 * starts a new one after it.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/collect/fetch.h"
#include "host/collect/stats.h"
#include "lib/channel.h"

/* Longest text line of one entry: 16 hex digits, type, name, module. */
#define KLINE_MAX	(16 + 3 + OPVM_KSYM_NAME_MAX + 3 + OPVM_MODNAME_LEN + 2)

struct fetch {
	char *dir;			/* <session>/guests/<guest> */
	int fd;				/* kallsyms.part being written, or -1 */
	size_t bytes;			/* in it */
	struct fetch_stats st;
	char text[OPVM_REC_MAX / 10 * KLINE_MAX];	/* one record's lines */
};

struct fetch *fetch_new(const char *guest_dir)
{
	struct fetch *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fd = -1;
	f->dir = strdup(guest_dir);
	if (!f->dir) {
		free(f);
		errno = ENOMEM;
		return NULL;
	}
	return f;
}

/* Closes the transfer; keep: rename the part to kallsyms. */
static void ksyms_close(struct fetch *f, bool keep)
{
	char from[4096], to[4096];

	if (f->fd < 0)
		return;
	if (close(f->fd))
		f->st.io_errors++;
	f->fd = -1;
	snprintf(from, sizeof(from), "%s/kallsyms.part", f->dir);
	snprintf(to, sizeof(to), "%s/kallsyms", f->dir);
	if (keep ? rename(from, to) : unlink(from))
		f->st.io_errors++;
}

void fetch_free(struct fetch *f)
{
	if (!f)
		return;
	ksyms_close(f, f->st.ksyms_syms > 0);
	free(f->dir);
	free(f);
}

const struct fetch_stats *fetch_get_stats(const struct fetch *f)
{
	return &f->st;
}

/* A guest name byte as it may appear in a kallsyms line (one token). */
static char name_byte(unsigned char c)
{
	return c > ' ' && c < 0x7f && c != '[' && c != ']' ? (char)c : '?';
}

static size_t put_name(char *o, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		o[i] = name_byte(s[i]);
	return n;
}

size_t fetch_ksyms_text(const void *rec, size_t len, char *out, size_t outlen,
			uint64_t *ok, uint64_t *bad, uint64_t *capped)
{
	struct opvm_rec_ksyms k;
	const uint8_t *p = (const uint8_t *)rec + sizeof(k), *end;
	size_t used = 0, mlen;

	*ok = *bad = *capped = 0;
	if (len < sizeof(k))
		return 0;
	memcpy(&k, rec, sizeof(k));
	/* chan_rec_check() bounded bytes by len; checked again, cheaply */
	if (sizeof(k) + le16toh(k.bytes) > len)
		return 0;
	end = p + le16toh(k.bytes);
	mlen = chan_strnlen(k.module, sizeof(k.module));
	while (end - p >= 10) {
		uint64_t addr;
		unsigned type = p[8], nlen = p[9];
		char line[KLINE_MAX];
		size_t l;

		memcpy(&addr, p, 8);
		addr = le64toh(addr);
		if (!nlen || nlen > OPVM_KSYM_NAME_MAX || (size_t)(end - p) < 10u + nlen) {
			(*bad)++;	/* a length that lies ends the record */
			break;
		}
		if (!addr || !strchr("tTwW", (int)type) || !type) {
			(*bad)++;
			p += 10 + nlen;
			continue;
		}
		l = (size_t)snprintf(line, sizeof(line), "%016llx %c ",
				     (unsigned long long)addr, (char)type);
		l += put_name(line + l, p + 10, nlen);
		if (mlen) {
			memcpy(line + l, "\t[", 2);
			l += 2;
			l += put_name(line + l, (const uint8_t *)k.module, mlen);
			line[l++] = ']';
		}
		line[l++] = '\n';
		p += 10 + nlen;
		if (used + l > outlen) {
			(*capped)++;
			continue;
		}
		memcpy(out + used, line, l);
		used += l;
		(*ok)++;
	}
	return used;
}

static void ksyms_write(struct fetch *f, const void *rec, size_t len)
{
	uint64_t ok, bad, capped;
	size_t room = FETCH_KSYMS_MAX_BYTES - f->bytes, n;
	char path[4096];

	if (f->fd < 0) {
		snprintf(path, sizeof(path), "%s/kallsyms.part", f->dir);
		f->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (f->fd < 0) {
			f->st.io_errors++;
			return;
		}
		f->bytes = 0;
		room = FETCH_KSYMS_MAX_BYTES;
		f->st.ksyms_syms = f->st.ksyms_bad = f->st.ksyms_capped = 0;
	}
	n = fetch_ksyms_text(rec, len, f->text, room < sizeof(f->text) ? room : sizeof(f->text),
			     &ok, &bad, &capped);
	f->st.ksyms_records++;
	f->st.ksyms_bad += bad;
	f->st.ksyms_capped += capped;
	if (n && write(f->fd, f->text, n) != (ssize_t)n) {
		f->st.io_errors++;
		return;
	}
	f->bytes += n;
	f->st.ksyms_bytes = f->bytes;
	f->st.ksyms_syms += ok;
}

static void ksyms_end(struct fetch *f, const void *rec)
{
	struct opvm_rec_ksyms_end e;

	memcpy(&e, rec, sizeof(e));
	f->st.ksyms_done++;
	if (le32toh(e.flags) & OPVM_KSYMS_RESTRICTED)
		f->st.ksyms_restricted++;
	if (le32toh(e.flags) & OPVM_KSYMS_TRUNCATED)
		f->st.ksyms_truncated++;
	if (le64toh(e.nr_syms) != f->st.ksyms_syms + f->st.ksyms_bad + f->st.ksyms_capped)
		f->st.ksyms_end_mismatch++;
	ksyms_close(f, f->fd >= 0);
}

void fetch_record(struct fetch *f, const struct opvm_rec_hdr *rec, size_t len)
{
	switch (le16toh(rec->type)) {
	case OPVM_REC_HELLO:
		/* a new stream: the relay sends the symbols again after it */
		ksyms_close(f, false);
		break;
	case OPVM_REC_KSYMS:
		if (len >= sizeof(struct opvm_rec_ksyms))
			ksyms_write(f, rec, len);
		break;
	case OPVM_REC_KSYMS_END:
		if (len >= sizeof(struct opvm_rec_ksyms_end))
			ksyms_end(f, rec);
		break;
	default:
		break;
	}
}

json_t *fetch_to_json(const struct fetch *f)
{
	const struct fetch_stats *s = &f->st;

#define C(v) stats_json_count(v)
	return json_pack("{s:{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o},s:o}",
		"ksyms", "records", C(s->ksyms_records), "syms", C(s->ksyms_syms),
		"bad", C(s->ksyms_bad), "capped", C(s->ksyms_capped),
		"bytes", C(s->ksyms_bytes), "done", C(s->ksyms_done),
		"restricted", C(s->ksyms_restricted), "truncated", C(s->ksyms_truncated),
		"end_mismatch", C(s->ksyms_end_mismatch),
		"io_errors", C(s->io_errors));
#undef C
}
