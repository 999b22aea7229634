// SPDX-License-Identifier: MIT
/*
 * Channel decoder: byte stream from the guest's "org.opvm.0" port ->
 * guest-state updates.  docs/protocol.md is the specification; this file is
 * the host half of it.
 *
 * Every byte is hostile.  The decoder works on a single fixed buffer of
 * OPVM_REC_MAX bytes inside struct decoder, so its memory never grows with
 * the input; the guest-state tables it feeds are bounded by gstate_limits.
 *
 * State machine (one loop in decoder_feed()):
 *   - collect a 16-byte header;
 *   - check its framing (magic, length bounds, length vs type); if it is
 *     implausible, framing is lost: drop one byte, then skip to the next
 *     byte that could start a magic (resync), counting what was skipped;
 *   - collect hdr.len bytes, validate the body, apply it, start over.
 * A framed record whose body is bad is skipped by its length (work stays
 * linear in the input; a guest able to frame a record could as well have
 * sent a valid one).
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "vmm/timeline.h"

/* The wire layout is fixed: any change here is a protocol change. */
_Static_assert(sizeof(struct opvm_rec_hdr) == 16, "opvm_rec_hdr is 16 bytes");
_Static_assert(sizeof(struct opvm_slot) == 24, "opvm_slot is 24 bytes");
_Static_assert(sizeof(struct opvm_rec_hello) == 192, "opvm_rec_hello is 192 bytes");
_Static_assert(sizeof(struct opvm_rec_lost) == 24, "opvm_rec_lost is 24 bytes");
_Static_assert(sizeof(struct opvm_rec_proc) == 56, "opvm_rec_proc is 56 bytes");
_Static_assert(sizeof(struct opvm_rec_exit) == 24, "opvm_rec_exit is 24 bytes");
_Static_assert(sizeof(struct opvm_rec_thread) == 40, "opvm_rec_thread is 40 bytes");
_Static_assert(sizeof(struct opvm_rec_cookie) == 64, "opvm_rec_cookie is 64 bytes");
_Static_assert(sizeof(struct opvm_rec_mmap) == 56, "opvm_rec_mmap is 56 bytes");
_Static_assert(sizeof(struct opvm_rec_munmap) == 40, "opvm_rec_munmap is 40 bytes");
_Static_assert(sizeof(struct opvm_hello_switch) == 24, "opvm_hello_switch is 24 bytes");
_Static_assert(sizeof(struct opvm_switch_ring_hdr) == 32, "opvm_switch_ring_hdr is 32 bytes");
_Static_assert(sizeof(struct opvm_switch) == 40, "opvm_switch is 40 bytes");
_Static_assert(sizeof(struct opvm_rec_module) == 88, "opvm_rec_module is 88 bytes");
_Static_assert(sizeof(struct opvm_rec_sync) == 32, "opvm_rec_sync is 32 bytes");
_Static_assert(OPVM_REC_MAX % OPVM_REC_ALIGN == 0, "OPVM_REC_MAX aligned");
_Static_assert(sizeof(struct opvm_rec_cookie) + OPVM_PATH_MAX <= OPVM_REC_MAX,
	       "a maximal cookie fits in a record");

#define HDR_LEN		sizeof(struct opvm_rec_hdr)
/* Bytes of HELLO needed to read its version (header + version + nr_cpus). */
#define HELLO_MIN_LEN	(HDR_LEN + 8)
/* First byte of the magic on the wire (little-endian "OV": 'O', 'V'). */
#define MAGIC_B0	(OPVM_PROTO_MAGIC & 0xff)
#define MAGIC_B1	(OPVM_PROTO_MAGIC >> 8)
/* Largest vCPU count a HELLO may announce (Linux's NR_CPUS maximum). */
#define HELLO_MAX_CPUS	8192

struct decoder {
	struct gstate *gs;		/* may be NULL: decode only */
	decoder_record_fn fn;
	void *fn_arg;
	struct decoder_stats st;
	bool lost_sync;			/* skipping garbage right now */
	bool foreign;			/* last HELLO was of another version */
	bool seen_hello;		/* a HELLO of our version was applied */
	bool have_seq;			/* next_seq is meaningful */
	uint32_t next_seq;
	size_t have;			/* bytes in buf */
	/* One record at most; 8-aligned so the callback may cast it. */
	_Alignas(8) uint8_t buf[OPVM_REC_MAX];
};

static const struct {
	const char *name;
	size_t min_len;
} rec_types[OPVM_REC_TYPE_MAX] = {
	[OPVM_REC_HELLO]	= { "HELLO",	   HELLO_MIN_LEN },
	[OPVM_REC_LOST]		= { "LOST",	   sizeof(struct opvm_rec_lost) },
	[OPVM_REC_PROC]		= { "PROC",	   sizeof(struct opvm_rec_proc) },
	[OPVM_REC_EXEC]		= { "EXEC",	   sizeof(struct opvm_rec_proc) },
	[OPVM_REC_PROC_EXIT]	= { "PROC_EXIT",   sizeof(struct opvm_rec_exit) },
	[OPVM_REC_THREAD]	= { "THREAD",	   sizeof(struct opvm_rec_thread) },
	[OPVM_REC_THREAD_EXIT]	= { "THREAD_EXIT", sizeof(struct opvm_rec_exit) },
	[OPVM_REC_COOKIE]	= { "COOKIE",	   sizeof(struct opvm_rec_cookie) },
	[OPVM_REC_MMAP]		= { "MMAP",	   sizeof(struct opvm_rec_mmap) },
	[OPVM_REC_MUNMAP]	= { "MUNMAP",	   sizeof(struct opvm_rec_munmap) },
	[OPVM_REC_MODULE]	= { "MODULE",	   sizeof(struct opvm_rec_module) },
	[OPVM_REC_MODULE_FREE]	= { "MODULE_FREE", sizeof(struct opvm_rec_module) },
	[OPVM_REC_SYNC]		= { "SYNC",	   sizeof(struct opvm_rec_sync) },
};

static bool type_known(unsigned type)
{
	return type < OPVM_REC_TYPE_MAX && rec_types[type].name;
}

const char *decoder_type_name(unsigned type)
{
	return type_known(type) ? rec_types[type].name : "UNKNOWN";
}

size_t decoder_type_min_len(unsigned type)
{
	return type_known(type) ? rec_types[type].min_len : 0;
}

size_t decoder_strnlen(const char *s, size_t max)
{
	const char *nul = memchr(s, 0, max);

	return nul ? (size_t)(nul - s) : max;
}

struct decoder *decoder_new(struct gstate *gs)
{
	struct decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;	/* errno set by calloc */
	d->gs = gs;
	return d;
}

void decoder_free(struct decoder *d)
{
	free(d);
}

void decoder_set_record_fn(struct decoder *d, decoder_record_fn fn, void *arg)
{
	d->fn = fn;
	d->fn_arg = arg;
}

void decoder_reset(struct decoder *d)
{
	/* A partial record from the old connection can never complete. */
	d->st.skipped_bytes += d->have;
	d->have = 0;
	d->lost_sync = false;
}

const struct decoder_stats *decoder_get_stats(const struct decoder *d)
{
	return &d->st;
}

size_t decoder_buffered(const struct decoder *d)
{
	return d->have;
}

struct hdr_info {
	unsigned type;
	uint32_t len;
	uint32_t seq;
};

static void hdr_read(const uint8_t *p, struct hdr_info *h, uint16_t *magic)
{
	struct opvm_rec_hdr raw;

	memcpy(&raw, p, sizeof(raw));
	*magic = le16toh(raw.magic);
	h->type = le16toh(raw.type);
	h->len = le32toh(raw.len);
	h->seq = le32toh(raw.seq);
}

/*
 * Framing check on a complete header.  The per-type minimum is skipped
 * while a foreign HELLO is in force: that version's records may be
 * shaped differently, and we only need to step over them.
 */
static bool hdr_plausible(const struct decoder *d, const uint8_t *p,
			  struct hdr_info *h)
{
	uint16_t magic;

	hdr_read(p, h, &magic);
	if (magic != OPVM_PROTO_MAGIC)
		return false;
	if (h->len < HDR_LEN || h->len > OPVM_REC_MAX ||
	    h->len % OPVM_REC_ALIGN)
		return false;
	if (type_known(h->type) && h->len < rec_types[h->type].min_len &&
	    (!d->foreign || h->type == OPVM_REC_HELLO))
		return false;
	return true;
}

/* Drop buf[0..n) (n <= have), keeping the rest at the start of buf. */
static void buf_consume(struct decoder *d, size_t n)
{
	d->have -= n;
	if (d->have)
		memmove(d->buf, d->buf + n, d->have);
}

/*
 * Framing is lost at buf[0]: drop that byte and everything up to the next
 * byte that may start a magic.  Only called with have <= HDR_LEN, so the
 * work per dropped byte is constant.
 */
static void lose_sync(struct decoder *d)
{
	const uint8_t *m;
	size_t skip;

	if (!d->lost_sync) {
		d->lost_sync = true;
		d->st.resyncs++;
	}
	m = d->have > 1 ? memchr(d->buf + 1, MAGIC_B0, d->have - 1) : NULL;
	skip = m ? (size_t)(m - d->buf) : d->have;
	d->st.skipped_bytes += skip;
	buf_consume(d, skip);
}

static void seq_track(struct decoder *d, const struct hdr_info *h)
{
	uint32_t diff;

	/* HELLO restarts the numbering; the first record seen sets it. */
	if (h->type != OPVM_REC_HELLO && d->have_seq) {
		diff = h->seq - d->next_seq;	/* modulo 2^32 */
		if (diff && diff < UINT32_C(0x80000000))
			d->st.seq_gaps += diff;
		else if (diff)
			d->st.seq_backwards++;
	}
	d->have_seq = true;
	d->next_seq = h->seq + 1;
}

/* Copy a fixed-size guest string into dst (size > max), replacing every
 * byte outside the allowed set: these strings may end up in host file
 * names (System.map-<release>) and in terminals. */
static void copy_name(char *dst, const char *src, size_t max, bool release)
{
	size_t n = decoder_strnlen(src, max);

	for (size_t i = 0; i < n; i++) {
		unsigned char c = src[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '.' ||
			  (release ? (c == '-' || c == '+' || c == '~') : c == '$');

		dst[i] = ok ? (char)c : '_';
	}
	/* ".." alone would still name a parent directory */
	if (n == 2 && dst[0] == '.' && dst[1] == '.')
		dst[0] = dst[1] = '_';
	else if (n == 1 && dst[0] == '.')
		dst[0] = '_';
	dst[n] = '\0';
}

/*
 * HELLO's optional switch-ring tail, when hdr.len covers it.  Geometry that
 * fails timeline_check_geometry() (the checks the perf sampler relies on)
 * leaves the tail out (switch_pa 0) and is counted; the rest of HELLO
 * still applies.
 */
static void hello_parse_switch(const uint8_t *p, uint32_t len,
			       struct gstate_hello *out, uint64_t *refused)
{
	struct opvm_hello_switch sw;

	if (len < sizeof(struct opvm_rec_hello) + sizeof(sw))
		return;
	memcpy(&sw, p + sizeof(struct opvm_rec_hello), sizeof(sw));
	if (!sw.switch_pa)
		return;		/* the guest has no rings */
	if (timeline_check_geometry(out->nr_cpus, le64toh(sw.switch_pa),
				    le32toh(sw.switch_stride),
				    le32toh(sw.switch_entries))) {
		(*refused)++;
		return;
	}
	out->switch_pa = le64toh(sw.switch_pa);
	out->switch_stride = le32toh(sw.switch_stride);
	out->switch_entries = le32toh(sw.switch_entries);
	out->tsc_khz = le32toh(sw.tsc_khz);
}

/*
 * A HELLO of our version: check what the sampler will rely on (slot size,
 * slot array placement) before it resets the model.  Returns false for a
 * bad record.
 */
static bool hello_parse(const uint8_t *p, uint32_t len, struct gstate_hello *out,
			uint64_t *switch_refused)
{
	struct opvm_rec_hello r;
	uint64_t bytes, end;

	if (len < sizeof(r))
		return false;
	memcpy(&r, p, sizeof(r));
	memset(out, 0, sizeof(*out));
	out->version = le32toh(r.version);
	out->nr_cpus = le32toh(r.nr_cpus);
	out->slot_pa = le64toh(r.slot_pa);
	out->slot_size = le32toh(r.slot_size);
	out->anchor_addr = le64toh(r.anchor_addr);
	out->text_addr = le64toh(r.text_addr);
	if (out->nr_cpus == 0 || out->nr_cpus > HELLO_MAX_CPUS)
		return false;
	if (out->slot_size != sizeof(struct opvm_slot))
		return false;
	if (out->slot_pa % 8)
		return false;
	bytes = (uint64_t)out->nr_cpus * out->slot_size;
	if (__builtin_add_overflow(out->slot_pa, bytes, &end))
		return false;
	copy_name(out->anchor_name, r.anchor_name, sizeof(r.anchor_name), false);
	copy_name(out->release, r.release, sizeof(r.release), true);
	hello_parse_switch(p, len, out, switch_refused);
	return true;
}

/* Body checks beyond the fixed size (already guaranteed by framing). */
static bool body_valid(const uint8_t *p, const struct hdr_info *h)
{
	struct opvm_rec_cookie c;
	size_t plen;

	if (h->type != OPVM_REC_COOKIE)
		return true;
	memcpy(&c, p, sizeof(c));
	plen = le16toh(c.path_len);
	if (!c.cookie || plen > OPVM_PATH_MAX ||
	    c.build_id_len > OPVM_BUILD_ID_MAX)
		return false;
	return sizeof(c) + plen <= h->len;
}

static int apply(struct gstate *gs, const uint8_t *p, unsigned type)
{
	switch (type) {
	case OPVM_REC_LOST: {
		struct opvm_rec_lost r;

		memcpy(&r, p, sizeof(r));
		gstate_lost(gs, le64toh(r.count));
		return 0;
	}
	case OPVM_REC_PROC:
	case OPVM_REC_EXEC: {
		struct opvm_rec_proc r;
		size_t n;

		memcpy(&r, p, sizeof(r));
		n = decoder_strnlen(r.comm, sizeof(r.comm));
		if (type == OPVM_REC_PROC)
			return gstate_proc(gs, le32toh(r.tgid), le32toh(r.ppid),
					   le64toh(r.cr3), r.comm, n,
					   le64toh(r.exe_cookie));
		return gstate_exec(gs, le32toh(r.tgid), le64toh(r.cr3),
				   r.comm, n, le64toh(r.exe_cookie));
	}
	case OPVM_REC_PROC_EXIT:
	case OPVM_REC_THREAD_EXIT: {
		struct opvm_rec_exit r;

		memcpy(&r, p, sizeof(r));
		if (type == OPVM_REC_PROC_EXIT)
			return gstate_proc_exit(gs, le32toh(r.tgid));
		return gstate_thread_exit(gs, le32toh(r.tid));
	}
	case OPVM_REC_THREAD: {
		struct opvm_rec_thread r;

		memcpy(&r, p, sizeof(r));
		return gstate_thread(gs, le32toh(r.tid), le32toh(r.tgid), r.comm,
				     decoder_strnlen(r.comm, sizeof(r.comm)));
	}
	case OPVM_REC_COOKIE: {
		struct opvm_rec_cookie r;

		memcpy(&r, p, sizeof(r));
		/* lengths checked by body_valid(); the path stays in the
		 * buffer, raw, for gstate to sanitise on copy */
		return gstate_cookie(gs, le64toh(r.cookie),
				     (const char *)p + sizeof(r),
				     le16toh(r.path_len), r.build_id,
				     r.build_id_len);
	}
	case OPVM_REC_MMAP: {
		struct opvm_rec_mmap r;

		memcpy(&r, p, sizeof(r));
		return gstate_mmap(gs, le32toh(r.tgid), le64toh(r.start),
				   le64toh(r.end), le64toh(r.pgoff),
				   le64toh(r.cookie));
	}
	case OPVM_REC_MUNMAP: {
		struct opvm_rec_munmap r;

		memcpy(&r, p, sizeof(r));
		return gstate_munmap(gs, le32toh(r.tgid), le64toh(r.start),
				     le64toh(r.end));
	}
	case OPVM_REC_MODULE:
	case OPVM_REC_MODULE_FREE: {
		struct opvm_rec_module r;
		size_t n;

		memcpy(&r, p, sizeof(r));
		n = decoder_strnlen(r.name, sizeof(r.name));
		if (type == OPVM_REC_MODULE)
			return gstate_module(gs, r.name, n, le64toh(r.base),
					     le64toh(r.size));
		return gstate_module_free(gs, r.name, n);
	}
	default:	/* SYNC: nothing for the model */
		return 0;
	}
}

static void record_done(struct decoder *d, const uint8_t *p, uint32_t len)
{
	if (d->fn)
		d->fn((const struct opvm_rec_hdr *)p, len, d->fn_arg);
}

/* One framed record of len bytes at p (the decoder's aligned buffer). */
static void record_process(struct decoder *d, const uint8_t *p,
			   const struct hdr_info *h)
{
	seq_track(d, h);

	if (h->type == OPVM_REC_HELLO) {
		struct gstate_hello gh;
		uint32_t version;

		memcpy(&version, p + HDR_LEN, sizeof(version));
		version = le32toh(version);
		if (version != OPVM_PROTO_VERSION) {
			/* Another protocol: step over its records until a
			 * HELLO we speak; the model keeps what it had. */
			d->st.version_mismatch++;
			d->foreign = true;
			return;	/* not shown: the callback's HELLOs are valid */
		}
		if (!hello_parse(p, h->len, &gh, &d->st.switch_refused)) {
			d->st.bad_records++;
			return;
		}
		d->foreign = false;
		d->seen_hello = true;
		d->st.hellos++;
		d->st.records++;
		record_done(d, p, h->len);
		if (d->gs && gstate_hello(d->gs, &gh) < 0)
			d->st.refused++;
		return;
	}
	if (d->foreign) {
		d->st.ignored++;
		return;
	}
	if (!type_known(h->type)) {
		d->st.unknown_types++;
		record_done(d, p, h->len);
		return;
	}
	if (!body_valid(p, h)) {
		d->st.bad_records++;
		return;
	}
	/* Records before any HELLO are applied: a host attaching to a
	 * running guest joins the stream mid-way.  A later HELLO resets. */
	if (!d->seen_hello)
		d->st.before_hello++;
	d->st.records++;
	if (h->type == OPVM_REC_LOST) {
		struct opvm_rec_lost r;
		uint64_t sum;

		memcpy(&r, p, sizeof(r));
		d->st.lost_records++;
		if (__builtin_add_overflow(d->st.guest_lost, le64toh(r.count), &sum))
			sum = UINT64_MAX;
		d->st.guest_lost = sum;
	} else if (h->type == OPVM_REC_SYNC) {
		d->st.syncs++;
	}
	record_done(d, p, h->len);
	if (d->gs && apply(d->gs, p, h->type) < 0)
		d->st.refused++;
}

/* Move up to want - have bytes from the input into buf (want never exceeds
 * OPVM_REC_MAX).  Returns true when buf holds at least want bytes. */
static bool buf_fill(struct decoder *d, size_t want, const uint8_t **in,
		     size_t *left)
{
	size_t n;

	if (d->have >= want)	/* a header is already held */
		return true;
	n = want - d->have;
	if (n > *left)
		n = *left;
	memcpy(d->buf + d->have, *in, n);
	d->have += n;
	*in += n;
	*left -= n;
	if (d->have > d->st.buffered_peak)
		d->st.buffered_peak = d->have;
	return d->have == want;
}

int decoder_feed(struct decoder *d, const void *data, size_t len)
{
	const uint8_t *in = data;
	size_t left = len;
	struct hdr_info h;

	if (!len)
		return 0;	/* data may be NULL then */
	d->st.bytes += len;
	for (;;) {
		/* While lost with nothing buffered, skip input quickly. */
		if (d->lost_sync && !d->have && left) {
			const uint8_t *m = memchr(in, MAGIC_B0, left);
			size_t skip = m ? (size_t)(m - in) : left;

			d->st.skipped_bytes += skip;
			in += skip;
			left -= skip;
		}
		if (!buf_fill(d, HDR_LEN, &in, &left)) {
			/* The input is used up.  Bytes that cannot start a
			 * magic are garbage already: drop them now rather
			 * than wait for the rest of a header. */
			if ((d->have >= 1 && d->buf[0] != MAGIC_B0) ||
			    (d->have >= 2 && d->buf[1] != MAGIC_B1)) {
				lose_sync(d);
				continue;
			}
			return 0;
		}
		if (!hdr_plausible(d, d->buf, &h)) {
			lose_sync(d);
			continue;
		}
		d->lost_sync = false;
		if (!buf_fill(d, h.len, &in, &left))
			return 0;	/* left == 0: wait for the rest */
		record_process(d, d->buf, &h);
		d->have = 0;
	}
}
