// SPDX-License-Identifier: MIT
/*
 * Channel decoder: byte stream from the guest's "org.opvm.0" port ->
 * guest-state updates.  docs/protocol.md is the specification; this file is
 * the host half of it.
 *
 * Every byte is hostile.  Framing (header checks, resync, the one
 * OPVM_REC_MAX buffer, so memory never grows with the input) is the shared
 * channel framer's (lib/channel.h), body checks come from its record
 * table; what is left here is the protocol's meaning: sequence numbers,
 * versions, HELLO, and applying records to the guest-state model, whose
 * tables are bounded by gstate_limits.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "host/collect/decoder.h"
#include "host/collect/gstate.h"
#include "lib/channel.h"
#include "vmm/guest/timeline.h"

/* Largest vCPU count a HELLO may announce (Linux's NR_CPUS maximum). */
#define HELLO_MAX_CPUS	8192

struct decoder {
	struct gstate *gs;		/* may be NULL: decode only */
	decoder_record_fn fn;
	void *fn_arg;
	struct decoder_stats st;
	bool foreign;			/* last HELLO was of another version */
	bool seen_hello;		/* a HELLO of our version was applied */
	bool have_seq;			/* next_seq is meaningful */
	uint32_t next_seq;
	struct chan_framer fr;		/* holds the partial record */
};

struct decoder *decoder_new(struct gstate *gs)
{
	struct decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;	/* errno set by calloc */
	d->gs = gs;
	chan_framer_init(&d->fr);
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

/* The framer keeps the byte-level counters; the decoder's are a copy. */
static void stats_sync(struct decoder *d)
{
	d->st.bytes = d->fr.st.bytes;
	d->st.skipped_bytes = d->fr.st.skipped_bytes;
	d->st.resyncs = d->fr.st.resyncs;
	d->st.buffered_peak = d->fr.st.buffered_peak;
}

void decoder_reset(struct decoder *d)
{
	chan_framer_reset(&d->fr);
	stats_sync(d);
}

const struct decoder_stats *decoder_get_stats(const struct decoder *d)
{
	return &d->st;
}

size_t decoder_buffered(const struct decoder *d)
{
	return d->fr.have;
}

static void seq_track(struct decoder *d, const struct chan_hdr *h)
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
	size_t n = chan_strnlen(src, max);

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
			       struct chan_hello *out, uint64_t *refused)
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
static bool hello_parse(const uint8_t *p, uint32_t len, struct chan_hello *out,
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

static int apply_proc(struct gstate *gs, const uint8_t *p, unsigned type)
{
	struct opvm_rec_proc r;
	size_t n;

	memcpy(&r, p, sizeof(r));
	n = chan_strnlen(r.comm, sizeof(r.comm));
	if (type == OPVM_REC_PROC)
		return gstate_proc(gs, le32toh(r.tgid), le32toh(r.ppid), le64toh(r.cr3),
				   r.comm, n, le64toh(r.exe_cookie));
	return gstate_exec(gs, le32toh(r.tgid), le64toh(r.cr3), r.comm, n,
			   le64toh(r.exe_cookie));
}

static int apply_exit(struct gstate *gs, const uint8_t *p, unsigned type)
{
	struct opvm_rec_exit r;

	memcpy(&r, p, sizeof(r));
	if (type == OPVM_REC_PROC_EXIT)
		return gstate_proc_exit(gs, le32toh(r.tgid));
	return gstate_thread_exit(gs, le32toh(r.tid));
}

static int apply_thread(struct gstate *gs, const uint8_t *p)
{
	struct opvm_rec_thread r;

	memcpy(&r, p, sizeof(r));
	return gstate_thread(gs, le32toh(r.tid), le32toh(r.tgid), r.comm,
			     chan_strnlen(r.comm, sizeof(r.comm)));
}

static int apply_cookie(struct gstate *gs, const uint8_t *p)
{
	struct opvm_rec_cookie r;

	memcpy(&r, p, sizeof(r));
	/* lengths checked by chan_rec_check(); the path stays in the buffer,
	 * raw, for gstate to sanitise on copy */
	return gstate_cookie(gs, le64toh(r.cookie), (const char *)p + sizeof(r),
			     le16toh(r.path_len), r.build_id, r.build_id_len);
}

static int apply_mapping(struct gstate *gs, const uint8_t *p, unsigned type)
{
	if (type == OPVM_REC_MMAP) {
		struct opvm_rec_mmap r;

		memcpy(&r, p, sizeof(r));
		return gstate_mmap(gs, le32toh(r.tgid), le64toh(r.start), le64toh(r.end),
				   le64toh(r.pgoff), le64toh(r.cookie));
	} else {
		struct opvm_rec_munmap r;

		memcpy(&r, p, sizeof(r));
		return gstate_munmap(gs, le32toh(r.tgid), le64toh(r.start), le64toh(r.end));
	}
}

static int apply_module(struct gstate *gs, const uint8_t *p, unsigned type)
{
	struct opvm_rec_module r;
	size_t n;

	memcpy(&r, p, sizeof(r));
	n = chan_strnlen(r.name, sizeof(r.name));
	if (type == OPVM_REC_MODULE)
		return gstate_module(gs, r.name, n, le64toh(r.base), le64toh(r.size));
	return gstate_module_free(gs, r.name, n);
}

static int apply_cgroup(struct gstate *gs, const uint8_t *p)
{
	struct opvm_rec_cgroup r;

	memcpy(&r, p, sizeof(r));
	/* path_len checked by chan_rec_check(); gstate sanitises the path */
	return gstate_cgroup(gs, le32toh(r.tgid), (const char *)p + sizeof(r),
			     le16toh(r.path_len));
}

/* One checked record into the guest-state model. */
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
	case OPVM_REC_EXEC:
		return apply_proc(gs, p, type);
	case OPVM_REC_PROC_EXIT:
	case OPVM_REC_THREAD_EXIT:
		return apply_exit(gs, p, type);
	case OPVM_REC_THREAD:
		return apply_thread(gs, p);
	case OPVM_REC_COOKIE:
		return apply_cookie(gs, p);
	case OPVM_REC_MMAP:
	case OPVM_REC_MUNMAP:
		return apply_mapping(gs, p, type);
	case OPVM_REC_MODULE:
	case OPVM_REC_MODULE_FREE:
		return apply_module(gs, p, type);
	case OPVM_REC_CGROUP:
		return apply_cgroup(gs, p);
	default:	/* SYNC: nothing for the model */
		return 0;
	}
}

static void record_done(struct decoder *d, const uint8_t *p, uint32_t len)
{
	if (d->fn)
		d->fn((const struct opvm_rec_hdr *)p, len, d->fn_arg);
}

/* One framed record of h->len bytes at p (the framer's aligned buffer). */
static void record_process(const uint8_t *p, const struct chan_hdr *h, void *arg)
{
	struct decoder *d = arg;

	seq_track(d, h);

	if (h->type == OPVM_REC_HELLO) {
		struct chan_hello gh;
		uint32_t version;

		memcpy(&version, p + sizeof(struct opvm_rec_hdr), sizeof(version));
		version = le32toh(version);
		if (version != OPVM_PROTO_VERSION) {
			/* Another protocol: step over its records until a
			 * HELLO we speak; the model keeps what it had. */
			d->st.version_mismatch++;
			d->foreign = d->fr.lenient = true;
			return;	/* not shown: the callback's HELLOs are valid */
		}
		if (!hello_parse(p, h->len, &gh, &d->st.switch_refused)) {
			d->st.bad_records++;
			return;
		}
		d->foreign = d->fr.lenient = false;
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
	if (!chan_rec_type(h->type)) {
		d->st.unknown_types++;
		record_done(d, p, h->len);
		return;
	}
	if (!chan_rec_check(p, h->len)) {
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

int decoder_feed(struct decoder *d, const void *data, size_t len)
{
	chan_framer_feed(&d->fr, data, len, record_process, d);
	stats_sync(d);
	return 0;
}
