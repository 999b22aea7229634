/* SPDX-License-Identifier: MIT */
/*
 * Channel decoder: turns the byte stream from a guest's "org.opvm.0" port
 * into guest-state updates (host/collect/gstate.h).  Framing and the record table
 * are lib/channel.h's (incremental over arbitrary partial reads,
 * resynchronising on the next record magic after garbage, at most
 * OPVM_REC_MAX bytes of partial record held); this adds sequence numbers,
 * versions, HELLO checks and the model.  Every length, offset and string is
 * checked before use.  Bad input is counted, never fatal.
 */
#ifndef OPVM_DECODER_H
#define OPVM_DECODER_H

#include <stddef.h>
#include <stdint.h>
#include "guest-kmod/opvm_proto.h"

struct decoder;
struct gstate;

struct decoder_stats {
	uint64_t bytes;			/* bytes fed */
	uint64_t records;		/* well-formed records decoded */
	uint64_t bad_records;		/* framed but invalid (bad length/fields) */
	uint64_t skipped_bytes;		/* bytes discarded while resynchronising */
	uint64_t resyncs;		/* times the decoder lost and found framing */
	uint64_t seq_gaps;		/* records missing according to hdr.seq */
	uint64_t refused;		/* records the guest-state model refused */
	uint64_t unknown_types;		/* well-framed records of unknown type */
	uint64_t version_mismatch;	/* HELLOs of a version we do not speak */
	/* Added after the first draft; append only. */
	uint64_t ignored;		/* records dropped after a foreign HELLO */
	uint64_t before_hello;		/* records applied before any HELLO */
	uint64_t hellos;		/* HELLOs of our version applied */
	uint64_t lost_records;		/* LOST records received */
	uint64_t guest_lost;		/* sum of their counts (saturating) */
	uint64_t seq_backwards;		/* records whose seq went backwards */
	uint64_t syncs;			/* SYNC records (initial walk done) */
	uint64_t buffered_peak;		/* most bytes ever held (<= OPVM_REC_MAX) */
	uint64_t switch_refused;	/* HELLO switch-ring tails out of bounds */
};

/*
 * Called for each well-formed record before it is applied (channel-dump
 * prints from here).  rec points to len validated bytes, header included,
 * 8-aligned, valid only during the call; fields are still little-endian.
 * Guarantees: len >= chan_rec_type(type)->size for a known type; a HELLO
 * is version OPVM_PROTO_VERSION, whole (192 bytes) and passed its checks
 * (slot size and range); every other known type passed chan_rec_check()
 * (a COOKIE's path_len and build_id_len fit).  Records
 * of unknown type are passed too (header only is meaningful); records the
 * decoder skips (bad framing or body, foreign version) are not.
 */
typedef void (*decoder_record_fn)(const struct opvm_rec_hdr *rec, size_t len,
				  void *arg);

/* gs may be NULL (decode only).  Returns NULL and sets errno. */
struct decoder *decoder_new(struct gstate *gs);
void decoder_free(struct decoder *d);
void decoder_set_record_fn(struct decoder *d, decoder_record_fn fn, void *arg);

/* Feeds len bytes.  Always consumes all of them.  Returns 0, or -errno only
 * for host-side failures (never for bad guest input). */
int decoder_feed(struct decoder *d, const void *buf, size_t len);
/* Forget any partial record (the channel was reconnected). */
void decoder_reset(struct decoder *d);
const struct decoder_stats *decoder_get_stats(const struct decoder *d);

/* Bytes of partial record held right now (never more than OPVM_REC_MAX). */
size_t decoder_buffered(const struct decoder *d);

#endif /* OPVM_DECODER_H */
