/* SPDX-License-Identifier: MIT */
/*
 * What the guest sends so that reports need no files from the operator:
 * its kernel's symbols (KSYMS records, docs/protocol.md section 4), kept
 * per guest as <session>/guests/<guest>/kallsyms in /proc/kallsyms text
 * form, which symbols/ reads like a System.map.
 *
 * Everything arrives from the guest: every entry is bounds-checked, names
 * are made printable single tokens, the file is capped
 * (FETCH_KSYMS_MAX_BYTES) and private (0600), its name and directory come
 * from the host alone, and what is refused is counted.
 */
#ifndef OPVM_FETCH_H
#define OPVM_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "guest-kmod/opvm_proto.h"

/* Largest kallsyms file kept per guest (Debian 12's: ~3 MiB of text
 * symbols); symbols beyond it are dropped and counted. */
#define FETCH_KSYMS_MAX_BYTES	((size_t)32 << 20)

struct fetch;

struct fetch_stats {
	uint64_t ksyms_records;		/* KSYMS records taken */
	uint64_t ksyms_syms;		/* symbols written */
	uint64_t ksyms_bad;		/* entries refused (lengths, type, address) */
	uint64_t ksyms_capped;		/* symbols dropped at the size cap */
	uint64_t ksyms_bytes;		/* bytes of the current file */
	uint64_t ksyms_done;		/* KSYMS_END records: complete transfers */
	uint64_t ksyms_restricted;	/* KSYMS_END said kptr_restrict hid them */
	uint64_t ksyms_truncated;	/* KSYMS_END said the relay stopped at its cap */
	uint64_t ksyms_end_mismatch;	/* KSYMS_END count != symbols received */
	uint64_t io_errors;		/* writes or renames that failed */
};

/* guest_dir: <session>/guests/<guest> (the host's, existing).  Returns NULL
 * and sets errno. */
struct fetch *fetch_new(const char *guest_dir);
/* Closes the file being written (kept, as far as it got); NULL-safe. */
void fetch_free(struct fetch *f);

/* A record the decoder accepted (decoder_record_fn contract: len >= the
 * type's fixed size, chan_rec_check() passed).  Other types are ignored. */
void fetch_record(struct fetch *f, const struct opvm_rec_hdr *rec, size_t len);

const struct fetch_stats *fetch_get_stats(const struct fetch *f);
/* The counters for session.json "fetch"; NULL on ENOMEM. */
json_t *fetch_to_json(const struct fetch *f);

/*
 * One KSYMS record (checked by chan_rec_check()) as kallsyms text lines
 * "ADDR TYPE NAME[\t[MODULE]]\n" into out (at most outlen bytes; entries
 * that do not fit are counted in *capped).  Entries with a bad length, a
 * type other than t/T/w/W or address 0 are skipped and counted in *bad;
 * bytes outside printable ASCII, spaces and brackets in names become '?'.
 * Returns the bytes written; *ok gets the symbols written.  Pure: the fuzz
 * target calls it.
 */
size_t fetch_ksyms_text(const void *rec, size_t len, char *out, size_t outlen,
			uint64_t *ok, uint64_t *bad, uint64_t *capped);

#endif /* OPVM_FETCH_H */
