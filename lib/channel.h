/* SPDX-License-Identifier: MIT */
/*
 * The guest channel's wire format on the host side, in one place: the
 * record table (every record type of guest-kmod/opvm_proto.h with its name,
 * fixed size and field layout) and the framer that cuts a hostile byte
 * stream into records.
 *
 * Who uses it: the collector's decoder (host/collect/decoder.c) frames with
 * chan_framer and checks bodies with chan_rec_check(); `opvm channel-dump`
 * prints every record from the same field table; the unit tests and the
 * fuzz target drive both.  Nothing else frames the channel: a sampler
 * backend that needs something from HELLO gets it from the collector
 * (sampler_ops.guest_hello, vmm/sampler.h).
 *
 * The table is written from opvm_proto.h with offsetof()/sizeof() and
 * checked against it at compile time (lib/channel.c), so a layout change in
 * the header either updates the table or breaks the build.
 *
 * Contract of the framer: incremental over arbitrary partial reads, memory
 * fixed at OPVM_REC_MAX bytes (inside struct chan_framer, no allocation),
 * work linear in the input; after garbage it resynchronises on the next
 * byte that may start a magic.  Records it hands out have passed framing
 * (magic, 16 <= len <= OPVM_REC_MAX, len % 8 == 0, len >= the type's
 * min_len) but not the body checks: those are chan_rec_check()'s.
 */
#ifndef OPVM_LIB_CHANNEL_H
#define OPVM_LIB_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest-kmod/opvm_proto.h"

/* ---- HELLO, decoded ----------------------------------------------------------- */

/*
 * A HELLO as the decoder (host/collect/decoder.c) checked it, in host byte
 * order: the one HELLO type past the wire.  The guest-state model keeps it
 * (host/collect/gstate.h, its strings sanitised) and the collector hands
 * that same copy to the sampler (sampler_ops.guest_hello, vmm/sampler.h).
 * Guest-physical addresses: whoever reads there still bounds-checks every
 * read against guest RAM.
 */
struct chan_hello {
	uint32_t version;
	uint32_t nr_cpus;		/* one current-task slot per guest CPU */
	uint64_t slot_pa;		/* current-task slot[0] */
	uint32_t slot_size;		/* sizeof(struct opvm_slot) */
	/* The kernel: a symbol's run-time address (the KASLR slide follows
	 * from its link-time one), _text's, and the release (the ORC
	 * format). */
	uint64_t anchor_addr;
	uint64_t text_addr;
	char anchor_name[64 + 1];
	char release[65 + 1];
	/* The per-vCPU task-switch rings (struct opvm_hello_switch), checked
	 * (timeline_check_geometry()); switch_pa 0: the guest sent none or
	 * they failed the checks. */
	uint64_t switch_pa;
	uint32_t switch_stride;
	uint32_t switch_entries;
	uint32_t tsc_khz;		/* 0: unknown */
};

/* ---- record table ---------------------------------------------------------- */

enum chan_field_kind {
	CHAN_F_U32,		/* little-endian u32, printed in decimal */
	CHAN_F_U64,		/* little-endian u64, printed in decimal */
	CHAN_F_X64,		/* little-endian u64, printed in hex */
	CHAN_F_STR,		/* fixed-size char array, up to its first NUL */
	CHAN_F_LEN,		/* a count for a BYTES or TAIL field: never
				 * printed, checked against max */
	CHAN_F_BYTES,		/* u8 array, count in field[count] (hex id) */
	CHAN_F_TAIL,		/* bytes after the fixed part, count in
				 * field[count] (a path) */
	CHAN_F_PROT,		/* u32 PROT_* bits: "r-x" in text, hex in JSON */
};

/* Field flags. */
#define CHAN_F_NONZERO		0x01	/* a record with 0 here is bad */
#define CHAN_F_TEXT_BARE	0x02	/* text: a string without quotes */
#define CHAN_F_TEXT_AT		0x04	/* text: "@value" glued to the field
					 * before, without a name */
#define CHAN_F_TEXT_SAME	0x08	/* text: left out when equal to the
					 * next field */
#define CHAN_F_OPTIONAL		0x10	/* past the fixed part: present (and
					 * printed) only when hdr.len covers it */

struct chan_field {
	const char *name;	/* key in channel-dump's text and JSON */
	uint16_t off;		/* byte offset in the record (header included) */
	uint16_t size;		/* bytes: 1, 2, 4 or 8 for numbers and LEN */
	uint8_t kind;		/* enum chan_field_kind */
	uint8_t flags;		/* CHAN_F_* flags */
	uint8_t count;		/* BYTES/TAIL: index of its LEN field */
	uint16_t max;		/* LEN: largest legal count */
};

struct chan_rec_type {
	const char *name;	/* "HELLO", ...; NULL: unused type code */
	uint32_t size;		/* sizeof the record's struct (fixed part) */
	uint32_t min_len;	/* smallest legal hdr.len (framing); equals
				 * size except for HELLO, whose version
				 * field decides the rest */
	const struct chan_field *fields;	/* in print order */
	unsigned nr_fields;
};

/* The table entry of a known type, or NULL. */
const struct chan_rec_type *chan_rec_type(unsigned type);
/* Name of a record type for printing ("HELLO", ...), or "UNKNOWN". */
const char *chan_type_name(unsigned type);
/* Smallest legal hdr.len of a known type, 0 for an unknown one. */
size_t chan_type_min_len(unsigned type);

/*
 * Body checks of a framed record of a known type, from its field table:
 * the whole fixed part present (len >= size), every LEN field within its
 * max, every TAIL inside the record, every NONZERO field nonzero (OPTIONAL
 * fields only when present).  rec is
 * len bytes, 8-aligned.  Returns true when the record may be read through
 * its struct.
 */
bool chan_rec_check(const void *rec, size_t len);

/* A number field of a checked record, host order. */
uint64_t chan_field_num(const void *rec, const struct chan_field *f);
/* Whether field f is inside a record of len bytes (OPTIONAL fields may
 * not be). */
bool chan_field_present(const struct chan_field *f, size_t len);

/* Length of a fixed-size guest string: up to the first NUL, at most max.
 * Never reads past max bytes. */
size_t chan_strnlen(const char *s, size_t max);

/* ---- framer ------------------------------------------------------------------ */

/* A record header in host order. */
struct chan_hdr {
	unsigned type;
	uint32_t len;
	uint32_t seq;
};

struct chan_framer_stats {
	uint64_t bytes;			/* bytes fed */
	uint64_t skipped_bytes;		/* bytes dropped while resynchronising
					 * or by chan_framer_reset() */
	uint64_t resyncs;		/* times framing was lost and found */
	uint64_t buffered_peak;		/* most bytes ever held */
};

struct chan_framer {
	/* While set, the per-type minimum length is not enforced except for
	 * HELLO: the caller sets it after a HELLO of a version it does not
	 * speak, whose records may be shaped differently and need only to be
	 * stepped over. */
	bool lenient;
	bool lost_sync;			/* skipping garbage right now */
	size_t have;			/* bytes in buf */
	struct chan_framer_stats st;
	/* One record at most; 8-aligned so a callback may cast it. */
	_Alignas(8) uint8_t buf[OPVM_REC_MAX];
};

/* Called for each framed record: rec is h->len bytes (the framer's buffer,
 * valid during the call only); fields are still little-endian. */
typedef void (*chan_frame_fn)(const uint8_t *rec, const struct chan_hdr *h,
			      void *arg);

void chan_framer_init(struct chan_framer *f);
/* Feeds len bytes (data may be NULL when len is 0), calling fn for every
 * record completed.  Consumes all of them. */
void chan_framer_feed(struct chan_framer *f, const void *data, size_t len,
		      chan_frame_fn fn, void *arg);
/* Forget a partial record (the connection changed); counted as skipped. */
void chan_framer_reset(struct chan_framer *f);

#endif /* OPVM_LIB_CHANNEL_H */
